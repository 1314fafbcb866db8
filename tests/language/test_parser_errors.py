"""Malformed policies: each one is a PolicyParseError at an exact line and column, with a
message that says what was wrong (and agrees with Cedar that the text is invalid)."""

from __future__ import annotations

import pytest

from polang.errors import PolangError, PolicyParseError
from polang.language.parser import parse_entity_uid, parse_expression, parse_policies

H = "permit(principal, action, resource)"

# (source, line, column, part of the message)
CASES: list[tuple[str, int, int, str]] = [
    # structure
    (H, 1, 36, "expected `;` after the policy"),
    (H + " when { true }\n// trailing comment\n", 1, 50, "expected `;` after the policy"),
    ("allow(principal, action, resource);", 1, 1, "expected `permit` or `forbid`"),
    ("permit(principal, action);", 1, 25, "found `)`"),
    ("permit(principal, resource, action);", 1, 19, "expected `action`, found keyword `resource`"),
    ("permit(principal: User, action, resource);", 1, 17, "found `:`"),
    (H + " when { };", 1, 37, "the `when` condition is empty"),
    (H + " whenever { true };", 1, 37, "found identifier `whenever`"),
    (H + ' when { true } ;\n@id("x")\n', 2, 9, "expected `permit` or `forbid`"),
    ('@id("x") @foo::bar("y") ' + H + ";", 1, 14, "found `::`"),
    ('@id("a")\n@id("b")\n' + H + ";", 2, 2, "duplicate annotation `@id`"),
    (H + " when { (principal };", 1, 55, "expected `)`, found `}`"),
    (H + " when { [1, 2 };", 1, 50, "expected `,` or `]`, found `}`"),
    (H + " when { true && };", 1, 52, "expected an expression, found `}`"),
    (H + " when { 1 + if true then 1 else 2 };", 1, 48, "found keyword `if`"),
    (H + " when { !-1 };", 1, 45, "expected an expression, found `-`"),
    # lexical
    (H + ' when { "abc };', 1, 44, "unterminated string literal"),
    (H + " when { principal # 1 };", 1, 54, "unexpected character '#'"),
    (H + " when { 'a' };", 1, 44, "strings use double quotes"),
    (H + ' when { "a\\qb" };', 1, 46, "`\\q` is not a valid escape"),
    (H + ' when { "a\\*" };', 1, 46, "`\\*` is not a valid escape"),
    (H + ' when { "\\u{D800}" };', 1, 45, "`\\u{D800}` is not a valid escape"),
    (H + ' when { "\\u{110000}" };', 1, 45, "`\\u{110000}` is not a valid escape"),
    (H + ' when { "\\u{}" };', 1, 45, "`\\u{}` is not a valid escape"),
    (H + ' when { "\\x80" };', 1, 45, "`\\x80` is not a valid escape"),
    (H + ' when {\n  "ok" == "line\ntwo\\z"\n};', 3, 4, "`\\z` is not a valid escape"),
    # names and reserved words
    (H + '\nwhen { user.name == "a" };', 2, 8, "unknown variable `user`"),
    (H + "\nwhen {\n  principal.in\n};", 3, 13, "`in` is a reserved word"),
    (H + " when { principal has if };", 1, 58, "`if` is a reserved word"),
    (H + " when { principal has a.then };", 1, 60, "`then` is a reserved word"),
    (H + " when { {true: 1} };", 1, 45, "`true` is a reserved word"),
    (H + " when { principal.__cedar };", 1, 54, "reserved for the built-in namespace"),
    (H + " when { principal is __cedar::String };", 1, 57, "uses `__cedar`"),
    (H + ' when { principal is User::"a" };', 1, 63, "expected an identifier"),
    (H + ' when { Foo::"a"::"b" };', 1, 52, "found `::`"),
    # operators
    (H + " when { 1 < 2 < 3 };", 1, 50, "cannot be chained"),
    (H + " when { 1 == 2 == 3 };", 1, 51, "cannot be chained"),
    (H + " when { principal.a = 1 };", 1, 56, "use `==`"),
    (H + " when { 4 / 2 == 2 };", 1, 46, "division (`/`) is not supported"),
    (H + " when { 4 % 2 == 0 };", 1, 46, "remainder operator (`%`) is not supported"),
    (H + " when { !!!!!true };", 1, 48, "too many `!`"),
    (H + " when { -----1 == 1 };", 1, 48, "too many `-`"),
    (H + ' when { principal like ("a*") };', 1, 59, "expected a string literal"),
    (H + " when { principal[1] };", 1, 54, "expected a string literal"),
    (H + ' when { principal has "a".b };', 1, 62, "after `has`"),
    # literals
    (H + " when { 9223372036854775808 > 0 };", 1, 44, "does not fit in 64 bits"),
    (H + " when { -9223372036854775809 < 0 };", 1, 45, "`-9223372036854775809` does not fit"),
    (H + ' when { {a: 1, "a": 2} == {} };', 1, 51, "duplicate key `a`"),
    (H + " when { {1: 2} };", 1, 45, "expected an attribute name"),
    # calls
    (H + " when { principal.foo() };", 1, 54, "`foo` is not a known method"),
    (H + " when { principal.contains() };", 1, 54, "`contains` takes exactly 1 argument, got 0"),
    (H + " when { [].isEmpty(1) };", 1, 47, "`isEmpty` takes exactly 0 arguments, got 1"),
    (H + " when { foo(1) };", 1, 44, "`foo` is not a known extension function"),
    (H + " when { ns::ip(1) };", 1, 44, "`ns::ip` is not a known extension function"),
    (H + " when { contains(principal, 1) };", 1, 44, "is a method, not a function"),
    (H + ' when { principal.ip("1.1.1.1") };', 1, 54, "is a function, not a method"),
    (H + " when { ip };", 1, 44, "unknown variable `ip`"),
    # template slots
    (H + " when { principal == ?principal };", 1, 57, "cannot be used in a `when` clause"),
    (H + " unless { ?resource };", 1, 46, "cannot be used in an `unless` clause"),
    ("permit(principal == ?resource, action, resource);", 1, 21, "found the slot `?resource`"),
    ("permit(principal, action, resource in ?principal);", 1, 39, "found the slot `?principal`"),
    ("permit(principal == ?owner, action, resource);", 1, 21, "`?owner` is not a template slot"),
    ("permit(principal, action in ?principal, resource);", 1, 29, "in the action scope"),
    # scope contents
    ('permit(principal, action == Photo::"view", resource);', 1, 29, "type `Action`"),
    ('permit(principal, action in [Action::"a", Photo::"b"], resource);', 1, 43, "type `Action`"),
    ("permit(principal, action is Action, resource);", 1, 26, "`is` cannot be used in the action"),
    ('permit(principal in [User::"a"], action, resource);', 1, 21, "not a set"),
    ('permit(principal, action == [Action::"a"], resource);', 1, 29, "use `action in [...]`"),
    (
        'permit(principal < User::"a", action, resource);',
        1,
        18,
        "cannot be used in the policy scope",
    ),
    ('permit(principal = User::"a", action, resource);', 1, 18, "use `==`"),
    ("permit(principal in User, action, resource);", 1, 21, "unknown variable `User`"),
    ("permit(principal == 1, action, resource);", 1, 21, "expected an entity"),
    ('permit(principal is User == User::"a", action, resource);', 1, 26, "found `==`"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), CASES)
def test_malformed_policy(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(PolicyParseError) as info:
        parse_policies(text, filename="bad.polang")
    err = info.value
    assert (err.filename, err.line, err.column) == ("bad.polang", line, column), str(err)
    first, *excerpt = str(err).splitlines()
    assert first.startswith(f"bad.polang:{line}:{column}: "), first
    assert message in first
    # the offending source line, then a caret under the column
    assert excerpt[0] == "  " + text.splitlines()[line - 1]
    assert excerpt[1] == "  " + " " * (column - 1) + "^"


@pytest.mark.parametrize(("text", "line", "column", "message"), CASES)
def test_cedar_agrees_the_text_is_invalid(text: str, line: int, column: int, message: str) -> None:
    cedarpy = pytest.importorskip("cedarpy")
    with pytest.raises(ValueError):
        cedarpy.policies_to_json_str(text)


def test_error_is_a_polang_error_and_names_the_input_without_filename() -> None:
    with pytest.raises(PolangError, match=r"^<input>:1:1: "):
        parse_policies("nope")


def test_error_at_end_of_input_points_after_the_last_token() -> None:
    with pytest.raises(PolicyParseError) as info:
        parse_policies(H + " when {\n  true\n\n   \n")
    assert (info.value.line, info.value.column) == (2, 7)
    assert "found end of input" in str(info.value)


def test_caret_keeps_tabs_aligned() -> None:
    with pytest.raises(PolicyParseError) as info:
        parse_policies("permit(principal, action, resource)\n\twhen { # };")
    lines = str(info.value).splitlines()
    assert lines[1] == "  \twhen { # };" and lines[2] == "  \t       ^"


def test_parse_expression_and_entity_uid_errors() -> None:
    with pytest.raises(PolicyParseError, match=r"<input>:1:4: expected an expression"):
        parse_expression("1 +")
    with pytest.raises(PolicyParseError, match=r"expression\.txt:1:1: "):
        parse_expression("?resource", filename="expression.txt")
    with pytest.raises(PolicyParseError, match=r"<input>:1:7: "):
        parse_entity_uid("Action")
