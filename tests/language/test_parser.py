"""The policy parser: every construct of the language, spans, the corpus, and cedarpy."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from lark import Lark

from polang.errors import PolicyParseError
from polang.language import ast
from polang.language.ast import (
    WILDCARD,
    ActionConstraint,
    Annotation,
    Binary,
    Condition,
    EntityLit,
    ExtCall,
    GetAttr,
    Has,
    If,
    Is,
    Like,
    Lit,
    MethodCall,
    Policy,
    RecordLit,
    ScopeConstraint,
    SetLit,
    Slot,
    Unary,
    Var,
)
from polang.language.format import format_policies, policy_to_json
from polang.language.parser import (
    _grammar_text,
    parse_entity_uid,
    parse_expression,
    parse_policies,
    parse_policy,
)
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID

P, A, R, C = Var("principal"), Var("action"), Var("resource"), Var("context")


def uid(t: str, i: str) -> EntityUID:
    return EntityUID(t, i)


def same(a: object, b: object) -> bool:
    """AST equality that also tells ``true`` from ``1`` (dataclass ``==`` does not)."""
    return a == b and repr(a) == repr(b)


def body(src: str) -> ast.Expr:
    """The condition of ``permit(principal, action, resource) when { src };``."""
    (p,) = parse_policies(f"permit(principal, action, resource) when {{ {src} }};")
    return p.conditions[0].body


def test_grammar_is_lalr_without_conflicts(caplog: pytest.LogCaptureFixture) -> None:
    # lark resolves shift/reduce conflicts silently (as shift); a conflict would mean
    # some input parses differently from the language, so there must be none.
    caplog.set_level(logging.DEBUG, logger="lark")
    Lark(
        _grammar_text(),
        parser="lalr",
        lexer="basic",
        start=["policies", "expression", "entity_ref"],
        debug=True,
    )
    assert not [r for r in caplog.records if "conflict" in r.getMessage().lower()]


# ---------------------------------------------------------------- policies and scopes


def test_minimal_policy() -> None:
    (p,) = parse_policies("permit(principal, action, resource);")
    assert same(
        p,
        Policy(
            "permit",
            ScopeConstraint("principal"),
            ActionConstraint(),
            ScopeConstraint("resource"),
        ),
    )
    assert not p.is_template and p.policy_id is None


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ('principal == User::"a"', ScopeConstraint("principal", "eq", uid("User", "a"))),
        ('principal in Group::"g"', ScopeConstraint("principal", "in", uid("Group", "g"))),
        ("principal is User", ScopeConstraint("principal", "is", entity_type="User")),
        (
            'principal is Ns::User in Ns::Group::"g"',
            ScopeConstraint("principal", "is_in", uid("Ns::Group", "g"), "Ns::User"),
        ),
        ("principal == ?principal", ScopeConstraint("principal", "eq", Slot("?principal"))),
        ("principal in ?principal", ScopeConstraint("principal", "in", Slot("?principal"))),
        (
            "principal is User in ?principal",
            ScopeConstraint("principal", "is_in", Slot("?principal"), "User"),
        ),
        ('principal == (User::"a")', ScopeConstraint("principal", "eq", uid("User", "a"))),
    ],
)
def test_principal_scope(scope: str, expected: ScopeConstraint) -> None:
    (p,) = parse_policies(f"permit({scope}, action, resource);")
    assert same(p.principal, expected)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ('resource == Doc::"d"', ScopeConstraint("resource", "eq", uid("Doc", "d"))),
        ('resource in Folder::"f"', ScopeConstraint("resource", "in", uid("Folder", "f"))),
        ("resource is Doc", ScopeConstraint("resource", "is", entity_type="Doc")),
        (
            'resource is Doc in Folder::"f"',
            ScopeConstraint("resource", "is_in", uid("Folder", "f"), "Doc"),
        ),
        ("resource == ?resource", ScopeConstraint("resource", "eq", Slot("?resource"))),
        ("resource in ?resource", ScopeConstraint("resource", "in", Slot("?resource"))),
        (
            "resource is Doc in ?resource",
            ScopeConstraint("resource", "is_in", Slot("?resource"), "Doc"),
        ),
    ],
)
def test_resource_scope(scope: str, expected: ScopeConstraint) -> None:
    (p,) = parse_policies(f"permit(principal, action, {scope});")
    assert same(p.resource, expected)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("action", ActionConstraint()),
        ('action == Action::"view"', ActionConstraint("eq", (uid("Action", "view"),))),
        ('action in Ns::Action::"read"', ActionConstraint("in", (uid("Ns::Action", "read"),))),
        (
            'action in [Action::"a", My::App::Action::"b"]',
            ActionConstraint("in_set", (uid("Action", "a"), uid("My::App::Action", "b"))),
        ),
        ('action in [Action::"a",]', ActionConstraint("in_set", (uid("Action", "a"),))),
        ("action in []", ActionConstraint("in_set", ())),
    ],
)
def test_action_scope(scope: str, expected: ActionConstraint) -> None:
    (p,) = parse_policies(f"forbid(principal, {scope}, resource);")
    assert same(p.action, expected)
    assert p.effect == "forbid"


def test_trailing_comma_in_scope_is_allowed() -> None:
    (p,) = parse_policies("permit(principal, action, resource,);")
    assert p.resource == ScopeConstraint("resource")


def test_annotations_conditions_and_several_policies() -> None:
    text = """
    // a comment
    @id("p1")
    @advice("call \\"support\\"")
    @flag
    @if("reserved words are fine as annotation keys")
    permit(principal, action, resource)
    when { true }   // trailing comment
    unless { false }
    when { 1 == 1 };

    forbid(principal, action, resource);//no space
    """
    p1, p2 = parse_policies(text)
    assert p1.annotations == (
        Annotation("id", "p1"),
        Annotation("advice", 'call "support"'),
        Annotation("flag", None),
        Annotation("if", "reserved words are fine as annotation keys"),
    )
    assert p1.policy_id == "p1" and p1.annotation("flag") is None
    assert [c.kind for c in p1.conditions] == ["when", "unless", "when"]
    assert same(p1.conditions[1], Condition("unless", Lit(False)))
    assert same(p1.conditions[2].body, Binary("==", Lit(1), Lit(1)))
    assert p2.effect == "forbid" and p2.conditions == ()


def test_templates_are_policies_with_slots() -> None:
    text = "permit(principal in ?principal, action, resource == ?resource) when { true };"
    (t,) = parse_policies(text)
    assert t.is_template and t.slots == ("?principal", "?resource")
    linked = ast.link_template(t, uid("User", "a"), uid("Doc", "d"))
    assert linked.principal.entity == uid("User", "a") and not linked.is_template


def test_results_are_fresh_lists_with_the_callers_filename() -> None:
    text = "permit(principal, action, resource);"
    first = parse_policies(text, "a.polang")
    first.clear()
    again = parse_policies(text, "a.polang")
    assert len(again) == 1 and again[0].span.filename == "a.polang"
    assert parse_policies(text, "b.polang")[0].span.filename == "b.polang"


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    ok = "(" * 50 + "1" + ")" * 50
    assert same(body(ok), Lit(1))
    deep = "(" * 1000 + "1" + ")" * 1000
    with pytest.raises(PolicyParseError, match="nests deeper than the limit of 100 levels"):
        body(deep)


def test_empty_text_has_no_policies() -> None:
    assert parse_policies("") == []
    assert parse_policies("  // only a comment\n") == []


def test_parse_policy_exactly_one() -> None:
    p = parse_policy("permit(principal, action, resource);")
    assert p.effect == "permit"
    with pytest.raises(PolicyParseError, match="expected one policy, found 2") as e:
        parse_policy("permit(principal, action, resource);\nforbid(principal, action, resource);")
    assert (e.value.line, e.value.column) == (2, 1)
    with pytest.raises(PolicyParseError, match="found none"):
        parse_policy("// nothing")


# ---------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("true", Lit(True)),
        ("false", Lit(False)),
        ("0", Lit(0)),
        ("42", Lit(42)),
        ('"hi"', Lit("hi")),
        ("principal", P),
        ("action", A),
        ("resource", R),
        ("context", C),
        ('User::"alice"', EntityLit(uid("User", "alice"))),
        ('A::B::C::"x"', EntityLit(uid("A::B::C", "x"))),
        ('principal::"p"', EntityLit(uid("principal", "p"))),
        ('when::"w"', EntityLit(uid("when", "w"))),
        ("principal.name", GetAttr(P, "name")),
        ('principal["name"]', GetAttr(P, "name")),
        ('principal["a b"].c', GetAttr(GetAttr(P, "a b"), "c")),
        ("principal.permit", GetAttr(P, "permit")),
        ("principal.principal", GetAttr(P, "principal")),
        ('principal["__cedar"]', GetAttr(P, "__cedar")),
        ("principal.__cedarx", GetAttr(P, "__cedarx")),
        ("[]", SetLit(())),
        ('[1, true, "x",]', SetLit((Lit(1), Lit(True), Lit("x")))),
        ("{}", RecordLit(())),
        (
            '{a: 1, "b c": [2], when: {}, principal: 3,}',
            RecordLit(
                (
                    ("a", Lit(1)),
                    ("b c", SetLit((Lit(2),))),
                    ("when", RecordLit(())),
                    ("principal", Lit(3)),
                )
            ),
        ),
        ('{"if": 1}', RecordLit((("if", Lit(1)),))),
        ('ip("10.0.0.1")', ExtCall("ip", (Lit("10.0.0.1"),))),
        ('decimal("1.5")', ExtCall("decimal", (Lit("1.5"),))),
        ("datetime()", ExtCall("datetime", ())),
        ('duration("1h", 2,)', ExtCall("duration", (Lit("1h"), Lit(2)))),
        ("principal.contains(1)", MethodCall(P, "contains", (Lit(1),))),
        (
            "[1].containsAll([1])",
            MethodCall(SetLit((Lit(1),)), "containsAll", (SetLit((Lit(1),)),)),
        ),
        ("principal.tags.isEmpty()", MethodCall(GetAttr(P, "tags"), "isEmpty", ())),
        ('principal.hasTag("t")', MethodCall(P, "hasTag", (Lit("t"),))),
        ('principal.getTag("t").x', GetAttr(MethodCall(P, "getTag", (Lit("t"),)), "x")),
        ("context.d.lessThan()", MethodCall(GetAttr(C, "d"), "lessThan", ())),
        ("context.t.toDate()", MethodCall(GetAttr(C, "t"), "toDate", ())),
        ("principal.contains", GetAttr(P, "contains")),
        ("(principal)", P),
        ("((1))", Lit(1)),
    ],
)
def test_primary_and_member_expressions(src: str, expected: ast.Expr) -> None:
    assert same(body(src), expected)


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("-5", Lit(-5)),
        ("- 5", Lit(-5)),
        ("-0", Lit(0)),
        ("--5", Unary("-", Lit(-5))),
        ("----5", Unary("-", Unary("-", Unary("-", Lit(-5))))),
        ("-(5)", Unary("-", Lit(5))),
        ("-(-5)", Unary("-", Lit(-5))),
        ("-5.a", Unary("-", GetAttr(Lit(5), "a"))),
        ("-principal.n", Unary("-", GetAttr(P, "n"))),
        ('-"a"', Unary("-", Lit("a"))),
        ("!true", Unary("!", Lit(True))),
        ("!!!!true", Unary("!", Unary("!", Unary("!", Unary("!", Lit(True)))))),
        ("!(-1)", Unary("!", Lit(-1))),
        ("-9223372036854775808", Lit(LONG_MIN)),
        ("9223372036854775807", Lit(LONG_MAX)),
        ("--9223372036854775808", Unary("-", Lit(LONG_MIN))),
        ("1 - -1", Binary("-", Lit(1), Lit(-1))),
        ("1--1", Binary("-", Lit(1), Lit(-1))),
        ("1 -1", Binary("-", Lit(1), Lit(1))),
        ("1 * -2", Binary("*", Lit(1), Lit(-2))),
    ],
)
def test_unary_operators_and_negative_literals(src: str, expected: ast.Expr) -> None:
    assert same(body(src), expected)


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("1 + 2 * 3", Binary("+", Lit(1), Binary("*", Lit(2), Lit(3)))),
        ("1 * 2 + 3", Binary("+", Binary("*", Lit(1), Lit(2)), Lit(3))),
        ("1 - 2 - 3", Binary("-", Binary("-", Lit(1), Lit(2)), Lit(3))),
        ("1 - (2 - 3)", Binary("-", Lit(1), Binary("-", Lit(2), Lit(3)))),
        ("2 * 3 * 4", Binary("*", Binary("*", Lit(2), Lit(3)), Lit(4))),
        (
            "true || false && true",
            Binary("||", Lit(True), Binary("&&", Lit(False), Lit(True))),
        ),
        (
            "true && false || true",
            Binary("||", Binary("&&", Lit(True), Lit(False)), Lit(True)),
        ),
        (
            "true && false && true",
            Binary("&&", Binary("&&", Lit(True), Lit(False)), Lit(True)),
        ),
        ("1 + 1 == 2", Binary("==", Binary("+", Lit(1), Lit(1)), Lit(2))),
        ("(1 < 2) == true", Binary("==", Binary("<", Lit(1), Lit(2)), Lit(True))),
        ("1 != 2", Binary("!=", Lit(1), Lit(2))),
        ("1 <= 2", Binary("<=", Lit(1), Lit(2))),
        ("1 >= 2", Binary(">=", Lit(1), Lit(2))),
        ("1 > 2", Binary(">", Lit(1), Lit(2))),
        ('principal in Group::"g"', Binary("in", P, EntityLit(uid("Group", "g")))),
        ("!true && false", Binary("&&", Unary("!", Lit(True)), Lit(False))),
        (
            "if true then 1 else 2 + 3",
            If(Lit(True), Lit(1), Binary("+", Lit(2), Lit(3))),
        ),
        (
            "if true then 1 else false || true",
            If(Lit(True), Lit(1), Binary("||", Lit(False), Lit(True))),
        ),
        (
            "(if true then 1 else 2) + 3",
            Binary("+", If(Lit(True), Lit(1), Lit(2)), Lit(3)),
        ),
        (
            "if if true then false else true then 1 else 2",
            If(If(Lit(True), Lit(False), Lit(True)), Lit(1), Lit(2)),
        ),
        ("[if true then 1 else 2]", SetLit((If(Lit(True), Lit(1), Lit(2)),))),
    ],
)
def test_precedence_and_associativity(src: str, expected: ast.Expr) -> None:
    assert same(body(src), expected)


def test_or_binds_looser_than_and_with_variables() -> None:
    assert same(body("principal || action && resource"), Binary("||", P, Binary("&&", A, R)))


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("principal has name", Has(P, "name")),
        ('principal has "first name"', Has(P, "first name")),
        ('principal has ""', Has(P, "")),
        ("principal has principal", Has(P, "principal")),
        ("1 + 2 has a", Has(Binary("+", Lit(1), Lit(2)), "a")),
        ("!principal has a", Has(Unary("!", P), "a")),
        (
            "principal has a.b",
            Binary("&&", Has(P, "a"), Has(GetAttr(P, "a"), "b")),
        ),
        (
            "context has a.b.c",
            Binary(
                "&&",
                Binary("&&", Has(C, "a"), Has(GetAttr(C, "a"), "b")),
                Has(GetAttr(GetAttr(C, "a"), "b"), "c"),
            ),
        ),
        (
            "(principal has a.b) == true",
            Binary("==", Binary("&&", Has(P, "a"), Has(GetAttr(P, "a"), "b")), Lit(True)),
        ),
    ],
)
def test_has(src: str, expected: ast.Expr) -> None:
    assert same(body(src), expected)


@pytest.mark.parametrize(
    ("src", "pattern"),
    [
        ('"a*"', ("a", WILDCARD)),
        ('"*"', (WILDCARD,)),
        ('""', ()),
        ('"a\\*b"', ("a", "*", "b")),
        ('"\\\\*"', ("\\", WILDCARD)),
        ('"*\\*"', (WILDCARD, "*")),
        # an escape that decodes to `*` is a wildcard: only `\*` is a literal star
        ('"\\u{2a}\\x2a"', (WILDCARD, WILDCARD)),
        ('"\\n\\t\\"\\u{e9}"', ("\n", "\t", '"', "é")),
    ],
)
def test_like_patterns(src: str, pattern: tuple[ast.PatternElem, ...]) -> None:
    assert same(body(f"principal.name like {src}"), Like(GetAttr(P, "name"), pattern))


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("principal is User", Is(P, "User")),
        ("principal is Ns::User", Is(P, "Ns::User")),
        ("principal is principal", Is(P, "principal")),
        (
            'principal is User in Group::"g"',
            Is(P, "User", EntityLit(uid("Group", "g"))),
        ),
        (
            'principal is User in [Group::"g"]',
            Is(P, "User", SetLit((EntityLit(uid("Group", "g")),))),
        ),
        ("principal is A && true", Binary("&&", Is(P, "A"), Lit(True))),
    ],
)
def test_is(src: str, expected: ast.Expr) -> None:
    assert same(body(src), expected)


@pytest.mark.parametrize(
    ("src", "value"),
    [
        (r'"\n\r\t\\\0\'\""', "\n\r\t\\\0'\""),
        (r'"\x41\x7f"', "A\x7f"),
        (r'"\u{41}\u{e9}\u{1F600}\u{10FFFF}"', "Aé\U0001f600\U0010ffff"),
        (r'"\u{000041}"', "A"),
        ('"multi\nline"', "multi\nline"),
        ('"é ü ∀"', "é ü ∀"),
        ('"*"', "*"),
    ],
)
def test_string_escapes(src: str, value: str) -> None:
    assert same(body(src), Lit(value))


def test_entity_ids_are_unescaped() -> None:
    assert same(body(r'User::"a\"b\u{41}"'), EntityLit(uid("User", 'a"bA')))


# ---------------------------------------------------------------- other entry points


def test_parse_expression() -> None:
    assert same(parse_expression("principal.age >= 18"), Binary(">=", GetAttr(P, "age"), Lit(18)))
    with pytest.raises(PolicyParseError, match="template slot `\\?principal` cannot be used"):
        parse_expression("principal == ?principal")
    with pytest.raises(PolicyParseError):
        parse_expression("permit(principal, action, resource);")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Action::"view"', uid("Action", "view")),
        ('Ns::Sub::Action::"read doc"', uid("Ns::Sub::Action", "read doc")),
        ('  User::"a\\"b"  ', uid("User", 'a"b')),
    ],
)
def test_parse_entity_uid(text: str, expected: EntityUID) -> None:
    assert parse_entity_uid(text) == expected


@pytest.mark.parametrize(
    "text", ["Action", '"view"', 'Action::"a" x', 'if::"a"', '__cedar::A::"a"']
)
def test_parse_entity_uid_rejects(text: str) -> None:
    with pytest.raises(PolicyParseError):
        parse_entity_uid(text)


# ---------------------------------------------------------------- spans


def test_spans_locate_nodes() -> None:
    text = 'permit(principal, action, resource)\nwhen { principal.age >= 18 && "x" like "*" };'
    (p,) = parse_policies(text, filename="f.polang")
    assert p.span.line == 1 and p.span.column == 1
    assert text[p.span.start : p.span.end] == text
    cond = p.conditions[0]
    assert isinstance(cond.body, Binary)
    left = cond.body.left
    assert isinstance(left, Binary)
    sp = left.span
    assert (sp.line, sp.column, sp.end_line, sp.end_column) == (2, 8, 2, 26)
    assert text[sp.start : sp.end] == "principal.age >= 18"
    assert sp.filename == "f.polang" and str(sp) == "f.polang:2:8"
    assert isinstance(left.right, Lit) and text[left.right.span.start : left.right.span.end] == "18"
    like = cond.body.right
    assert text[like.span.start : like.span.end] == '"x" like "*"'


@pytest.mark.parametrize(
    "src",
    [
        "[1, 2]",
        "[]",
        '{a: 1, "b": [2]}',
        "{}",
        'ip("1.2.3.4")',
        "principal.contains(1)",
        'principal["a b"]',
        "principal.a.b",
        'User::"x"',
        "if true then 1 else 2",
        "!!true",
        '"s" like "*"',
        "principal is User in resource",
        "1 + 2 * 3",
        "principal has a.b",
    ],
)
def test_expression_spans_cover_their_source(src: str) -> None:
    text = f"permit(principal, action, resource) when {{ {src} }};"
    (p,) = parse_policies(text)
    sp = p.conditions[0].body.span
    assert text[sp.start : sp.end] == src
    assert (sp.line, sp.column, sp.end_line) == (1, 44, 1)
    assert sp.end_column == 44 + len(src) - 1


def test_policy_part_spans() -> None:
    text = '@id("x")\n@flag\npermit(principal == User::"a", action, resource)\nwhen { true };'
    (p,) = parse_policies(text)
    snippets = [text[a.span.start : a.span.end] for a in p.annotations]
    assert snippets == ['@id("x")', "@flag"]
    assert text[p.principal.span.start : p.principal.span.end] == 'principal == User::"a"'
    assert text[p.action.span.start : p.action.span.end] == "action"
    cond = p.conditions[0]
    assert text[cond.span.start : cond.span.end] == "when { true }"
    assert (cond.span.line, cond.span.column, cond.span.end_column) == (4, 1, 13)
    assert text[p.span.start : p.span.end] == text


def test_negative_literal_span_covers_the_minus() -> None:
    text = "permit(principal, action, resource) when { - 5 };"
    (p,) = parse_policies(text)
    sp = p.conditions[0].body.span
    assert text[sp.start : sp.end] == "- 5"


def test_spans_do_not_take_part_in_equality() -> None:
    a = parse_policies("permit(principal, action, resource) when { 1 + 2 };")
    b = parse_policies("permit (\n principal,\n action,\n resource\n)\nwhen {\n  1 +\n 2\n};")
    assert a == b and a[0].span != b[0].span


# ---------------------------------------------------------------- the conformance corpus


def _normalize(d: Any) -> Any:
    """The reference implementation prints a one-element `action in [A]` as `action in A`."""
    act = d.get("action", {})
    if act.get("op") == "in" and len(act.get("entities", [])) == 1:
        d = dict(d, action={"op": "in", "entity": act["entities"][0]})
    return d


@pytest.fixture(scope="module")
def corpus_policies(corpus_dir: Path) -> list[tuple[Path, str, list[Policy]]]:
    """Every `.polang` file of the corpus, each distinct text parsed once."""
    files = sorted(corpus_dir.rglob("*.polang"))
    assert len(files) > 3900
    parsed: dict[str, list[Policy]] = {}
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        if text not in parsed:
            parsed[text] = parse_policies(text, str(f))
        out.append((f, text, parsed[text]))
    return out


def test_corpus_parses(corpus_policies: list[tuple[Path, str, list[Policy]]]) -> None:
    assert all(ps for _, _, ps in corpus_policies)


def test_corpus_round_trips_through_the_formatter(
    corpus_policies: list[tuple[Path, str, list[Policy]]],
) -> None:
    seen: set[str] = set()
    for path, text, policies in corpus_policies:
        if text in seen:
            continue
        seen.add(text)
        again = parse_policies(format_policies(policies), f"{path} (formatted)")
        assert same(again, policies), path


def test_corpus_agrees_with_cedarpy(corpus_policies: list[tuple[Path, str, list[Policy]]]) -> None:
    cedarpy = pytest.importorskip("cedarpy")
    seen: set[str] = set()
    for path, text, policies in corpus_policies:
        if text in seen:
            continue
        seen.add(text)
        ref = json.loads(cedarpy.policies_to_json_str(text))
        theirs = [*ref["staticPolicies"].items(), *ref["templates"].items()]
        theirs.sort(key=lambda kv: int(kv[0].removeprefix("policy")))
        mine = [_normalize(policy_to_json(p)) for p in policies]
        assert mine == [_normalize(v) for _, v in theirs], path
