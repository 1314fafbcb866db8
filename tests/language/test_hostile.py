"""Hostile input to the language's parsers: every failure is a ``PolangError`` that names
its limit and its place, never a crash, a hang, a ``RecursionError`` or a change to the
interpreter (issue 11)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import polang
from polang.errors import PolicyParseError
from polang.language import ast
from polang.language.parser import (
    MAX_EXPRESSION_DEPTH,
    parse_expression,
    parse_policies,
)
from polang.language.schema import parse_schema
from polang.language.validate import validate_policies

P = "permit(principal, action, resource)"
LIMIT = re.escape(f"deeper than the limit of {MAX_EXPRESSION_DEPTH} levels")


def when(body: str) -> str:
    return f"{P} when {{ {body} }};"


def parse_error(text: str) -> PolicyParseError:
    with pytest.raises(PolicyParseError) as e:
        parse_policies(text, "deep.polang")
    assert re.match(r"deep\.polang:\d+:\d+: ", str(e.value)), str(e.value)[:200]
    assert len(str(e.value)) < 1000
    return e.value


# ---------------------------------------------------------------- nesting (issue 11, item 1)


@pytest.mark.parametrize(
    "body",
    [
        "1" + " + 1" * 5000 + " > 0",
        " && ".join(["true"] * 5000),
        " || ".join(["false"] * 5000),
        "2" + " * 2" * 5000 + " > 0",
        "context" + ".a" * 5000 + " == 1",
        "(" * 5000 + "true" + ")" * 5000,
        "!(" * 5000 + "true" + ")" * 5000,
        "[" * 5000 + "1" + "]" * 5000 + " == [1]",
        "{a: " * 5000 + "1" + "}" * 5000 + " == {a: 1}",
        "if true then " * 5000 + "true" + " else false" * 5000,
        "[1].contains(" * 5000 + "1" + ")" * 5000,
        "(1 + " * 5000 + "1" + ")" * 5000 + " > 0",
    ],
    ids=[
        "plus",
        "and",
        "or",
        "times",
        "member",
        "parens",
        "not",
        "sets",
        "records",
        "if",
        "contains",
        "right-nested",
    ],
)
def test_deep_expressions_name_the_limit(body: str) -> None:
    e = parse_error(when(body))
    assert re.search(LIMIT, str(e)) and "MAX_EXPRESSION_DEPTH" in str(e)
    assert e.line == 1 and e.column is not None and e.column > 40


def test_a_chain_is_refused_at_the_operator_past_the_limit() -> None:
    text = when("1" + " + 1" * 5000 + " > 0")
    e = parse_error(text)
    # the 100th `+` (a chain of n operators nests n levels below its comparison)
    assert e.column is not None
    assert text[e.column - 1] == "+"
    assert text[: e.column].count("+") == MAX_EXPRESSION_DEPTH


@pytest.mark.parametrize("segments", [400, 1600, 10_000])
def test_long_has_paths_are_refused_at_once(segments: int) -> None:
    # it used to take 30 s and 1.2 GB at 1,600 segments (k(k+1)/2 attribute reads)
    text = when("context has " + ".".join(["a"] * segments))
    e = parse_error(text)
    assert f"has {segments} attributes" in str(e) and "MAX_EXPRESSION_DEPTH" in str(e)


def test_within_the_limit_everything_parses() -> None:
    n = MAX_EXPRESSION_DEPTH - 3
    for body in (
        "1" + " + 1" * (n - 1) + " > 0",
        " || ".join(["false"] * n),
        "(" * n + "true" + ")" * n,
        "context has " + ".".join(["a"] * (n - 1)),
    ):
        assert len(parse_policies(when(body))) == 1
    assert isinstance(parse_expression(" && ".join(["true"] * n)), ast.Binary)


def test_clauses_count_toward_the_limit() -> None:
    # the `when`/`unless` clauses of a policy are joined by `&&`
    e = parse_error(P + " when { true }" * (MAX_EXPRESSION_DEPTH + 1) + ";")
    assert re.search(LIMIT, str(e))
    assert len(parse_policies(P + " when { true }" * (MAX_EXPRESSION_DEPTH - 1) + ";")) == 1


def test_parse_expression_is_bounded_too() -> None:
    with pytest.raises(PolicyParseError, match=LIMIT):
        parse_expression(" && ".join(["true"] * 5000))


def test_the_recursion_limit_is_never_changed() -> None:
    before = sys.getrecursionlimit()
    schema = parse_schema("entity User; action a appliesTo { principal: User, resource: User };")
    with pytest.raises(PolicyParseError):
        parse_policies(when("1" + " + 1" * 5000 + " > 0"))
    ok = when("1" + " + 1" * (MAX_EXPRESSION_DEPTH - 5) + " > 0")
    assert validate_policies(parse_policies(ok), schema) == []
    assert sys.getrecursionlimit() == before


def test_a_tree_built_by_hand_too_deep_to_check_is_a_finding() -> None:
    # not from the parser (which refuses it): the checker reports it, without raising
    # the interpreter's recursion limit
    before = sys.getrecursionlimit()
    e: ast.Expr = ast.Lit(1)
    for _ in range(5 * before):
        e = ast.Binary("+", e, ast.Lit(1))
    policy = parse_policies(when("true"))[0]
    deep = ast.Policy(
        "permit",
        policy.principal,
        policy.action,
        policy.resource,
        (ast.Condition("when", ast.Binary(">", e, ast.Lit(0))),),
    )
    schema = parse_schema("entity User; action a appliesTo { principal: User, resource: User };")
    found = validate_policies([deep], schema)
    assert [f.kind for f in found] == ["too_deep"]
    assert "MAX_EXPRESSION_DEPTH" in found[0].message
    assert sys.getrecursionlimit() == before


def test_no_module_changes_the_recursion_limit() -> None:
    # a raised limit outlived a rejected store and let a later token crash the process
    root = Path(polang.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "setrecursionlimit" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_too_deep_finds_the_node_past_the_limit() -> None:
    e: ast.Expr = ast.Lit(1)
    for _ in range(10):
        e = ast.Unary("-", e)
    assert ast.too_deep(e, 11) is None
    deep = ast.too_deep(e, 10)
    assert deep == ast.Lit(1)


# ---------------------------------------------------------------- literals (item 4)


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("9" * 5000, "99999999999999999999...(5000 digits)"),
        ("9223372036854775808", "9223372036854775808"),
        ("-9223372036854775809", "-9223372036854775809"),
        ("18446744073709551616", "18446744073709551616"),
    ],
)
def test_integer_literals_outside_long_are_parse_errors(literal: str, shown: str) -> None:
    text = when(f"context.n == {literal}")
    e = parse_error(text)
    assert f"integer literal `{shown}` does not fit in 64 bits" in str(e)
    assert e.column == text.index(literal.lstrip("-")) + 1


def test_long_bounds_and_leading_zeros_parse() -> None:
    body = (
        parse_policies(
            when("-9223372036854775808 < 000000000000000000000000009223372036854775807")
        )[0]
        .conditions[0]
        .body
    )
    assert body == ast.Binary("<", ast.Lit(-9223372036854775808), ast.Lit(9223372036854775807))


def test_a_long_line_is_quoted_as_a_window() -> None:
    text = when("context.n == " + "9" * 100_000)
    e = parse_error(text)
    excerpt = str(e).splitlines()[1]
    assert len(excerpt) < 120
