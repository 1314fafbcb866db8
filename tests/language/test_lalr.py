"""The stored LALR tables and their driver build exactly lark's trees, and fail where lark fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from polang.errors import PolicyParseError, SchemaError
from polang.language import grammar_tables, lalr, parser
from polang.language.parser import parse_policies
from polang.language.schema import declarations as schema_declarations
from polang.language.schema import parse_schema
from polang.language.schema import text as schema_text

STARTS = ("policies", "expression", "entity_ref")


def policy_tables() -> lalr.Tables:
    return lalr.load_tables("policy", parser.get_parser)


def schema_tables() -> lalr.Tables:
    return lalr.load_tables("schema", schema_text._lark_parser)


def same_tree(a: Any, b: Any) -> bool:
    """Trees equal with every token's type and position (lark's ``==`` compares text only)."""
    tokens, trees = (Token, lalr.Token), (Tree, lalr.Tree)  # lark's and the driver's
    if isinstance(a, tokens) or isinstance(b, tokens):
        fields = ("type", "start_pos", "line", "column", "end_line", "end_column", "end_pos")
        return (
            isinstance(a, tokens)
            and isinstance(b, tokens)
            and str(a) == str(b)
            and all(getattr(a, f) == getattr(b, f) for f in fields)
        )
    if isinstance(a, trees) or isinstance(b, trees):
        return (
            isinstance(a, trees)
            and isinstance(b, trees)
            and a.data == b.data
            and len(a.children) == len(b.children)
            and all(same_tree(x, y) for x, y in zip(a.children, b.children, strict=True))
        )
    return bool(a == b)


def lark_tree(p: Lark, text: str, start: str | None = None) -> Tree[Token] | None:
    try:
        return p.parse(text, start=start) if start else p.parse(text)
    except UnexpectedInput:
        return None


def agree_policy(text: str, start: str = "policies") -> None:
    tables = policy_tables()
    got = lalr.parse(tables, lalr.policy_lexer(tables), text, start)
    want = lark_tree(parser.get_parser(), text, start)
    assert (got is None) == (want is None), text
    assert same_tree(got, want), text


def agree_schema(text: str) -> None:
    tables = schema_tables()
    got = lalr.parse(tables, lalr.schema_lexer(tables), text, "start")
    want = lark_tree(schema_text._lark_parser(), text)
    assert (got is None) == (want is None), text
    assert same_tree(got, want), text


# ---------------------------------------------------------------- the stored tables


@pytest.mark.parametrize("name", lalr.GRAMMARS)
def test_stored_tables_are_for_the_current_grammar(name: str) -> None:
    stored = json.loads(getattr(grammar_tables, name.upper()))
    assert stored["grammar_crc32"] == lalr.grammar_hash(lalr.grammar_text(name)), (
        f"grammar/{name}.lark changed: regenerate grammar_tables.py with "
        "`python -m polang.language.tablegen`"
    )


def test_a_changed_grammar_runs_on_tables_from_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads(grammar_tables.POLICY)
    data["grammar_crc32"] = "0" * 8
    monkeypatch.setattr(grammar_tables, "POLICY", json.dumps(data))
    calls: list[int] = []

    def build() -> Lark:
        calls.append(1)
        return parser.get_parser()

    tables = lalr.load_tables("policy", build)  # a new cache key: loads afresh
    assert calls == [1]
    text = 'permit(principal == User::"a", action, resource) when { context.x > 1 };'
    tree = lalr.parse(tables, lalr.policy_lexer(tables), text, "policies")
    assert same_tree(tree, parser.get_parser().parse(text, start="policies"))


# ---------------------------------------------------------------- same trees as lark

POLICY_TEXTS = [
    "",
    "permit(principal, action, resource);",
    '@id("a") @other forbid (principal in G::"x", action in [A::"a", A::"b"], resource is T)'
    " when { resource.owner == principal && context has a.b.c }\n unless { ?principal };",
    'permit(principal is N::T in N::G::"g", action == Action::"view", resource == ?resource)\n'
    'when {\n  // a comment\n  if 1 + -2 * 3 < 4 then !!true else [1, {a: "x\\ny"}]\n};',
    'permit(principal, action, resource) when { "a\nb" like "*x\\*" && ip("1.2.3.4").isLoopback()'
    ' && context["k"].contains(-9223372036854775808) && principal.x is Y::Z };',
    "permit(principal, action, resource) when {};",
    "permit(principal = X, action, resource);",
    "permit(principal, action, resource) when { a.b.c % 2 / 3 };",
    "permit(principal, action, resource) when { ?other && 1 < 2 < 3 };",
]


@pytest.mark.parametrize("text", POLICY_TEXTS)
def test_policy_trees_match_lark(text: str) -> None:
    agree_policy(text)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ('Ns::Action::"view"', "entity_ref"),
        ('Ns :: Action :: "a\\"b"', "entity_ref"),
        ("if a then b else c", "expression"),
        ("principal.level >= 5 && (context.x || false)", "expression"),
        ("a.b(", "expression"),
        ("", "expression"),
    ],
)
def test_other_start_symbols_match_lark(text: str, start: str) -> None:
    agree_policy(text, start)


SCHEMA_TEXTS = [
    "",
    'namespace N { entity tags; entity User in [Group] = { "a"?: Set<String>, b: Long } tags '
    "String; entity Group; }",
    'entity E enum ["a", "b"]; action "x", y in [z, N::Action::"q"] appliesTo { principal: '
    "[E], resource: E, context: { k: Long }, };\ntype T = { in: String };",
    '@doc("x") namespace A::B { @c type X = Set<Long>; action a; }',
    "entity in;",
    "namespace { }",
]


@pytest.mark.parametrize("text", SCHEMA_TEXTS)
def test_schema_trees_match_lark(text: str) -> None:
    agree_schema(text)


def test_corpus_trees_match_lark(corpus_dir: Path) -> None:
    policies = sorted(corpus_dir.rglob("*.polang"))[::3]
    schemas = sorted(corpus_dir.rglob("*.polangschema"))[::3]
    assert policies and schemas
    for path in policies:
        agree_policy(path.read_text(encoding="utf-8"))
    for path in schemas:
        agree_schema(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- failing where lark fails

POLICY_PIECES = [
    "permit", "forbid", "(", ")", "principal", "action", "resource", "context", ",", ";",
    "when", "unless", "{", "}", "==", "in", "is", "has", "like", "if", "then", "else", "&&",
    "||", "!", "-", "+", "*", "/", "%", "<", "<=", ">", ">=", "!=", "=", ".", "[", "]", ":",
    "::", "@", "?principal", "?resource", "?x", "true", "false", "x", "_y1", "Ns", '"s"',
    '"a\\"b"', "0", "42", " ", "\n", "// c\n", "\t", "'", "#", '"open', "\r", "\u00a0",
]  # fmt: skip

SCHEMA_PIECES = [
    "namespace", "entity", "action", "type", "in", "tags", "enum", "appliesTo", "principal",
    "resource", "context", "{", "}", "[", "]", "<", ">", "(", ")", ";", ",", ":", "::", "=",
    "?", "@", "Set", "Long", "x", "N", '"s"', " ", "\n", "// c\n", "#", '"open',
]  # fmt: skip


def sentences(pieces: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=40).map(" ".join)


def mutated(texts: list[str]) -> st.SearchStrategy[str]:
    """A valid text with a slice cut out or repeated (near-misses of real input)."""

    def cut(t: str, i: int, j: int, repeat: bool) -> str:
        i, j = sorted((i % (len(t) + 1), j % (len(t) + 1)))
        return t[:j] + t[i:] if repeat else t[:i] + t[j:]

    return st.builds(cut, st.sampled_from(texts), st.integers(0, 500), st.integers(0, 500),
                     st.booleans())  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(sentences(POLICY_PIECES), st.sampled_from(STARTS))
def test_random_policy_token_soup_matches_lark(text: str, start: str) -> None:
    agree_policy(text, start)


@settings(max_examples=200, deadline=None)
@given(mutated([t for t in POLICY_TEXTS if t]))
def test_damaged_policies_match_lark(text: str) -> None:
    agree_policy(text)


@settings(max_examples=300, deadline=None)
@given(sentences(SCHEMA_PIECES))
def test_random_schema_token_soup_matches_lark(text: str) -> None:
    agree_schema(text)


@settings(max_examples=200, deadline=None)
@given(mutated([t for t in SCHEMA_TEXTS if t]))
def test_damaged_schemas_match_lark(text: str) -> None:
    agree_schema(text)


# ---------------------------------------------------------------- errors are lark's


@pytest.mark.parametrize(
    "text",
    [
        "permit(principal, action, resource)",
        'permit(principal, action, resource) when { "x };',
        "permit(principal, action, resource) when { 1 + };",
    ],
)
def test_policy_syntax_errors_are_lark_errors(text: str) -> None:
    with pytest.raises(UnexpectedInput) as lark_error:
        parser.get_parser().parse(text, start="policies")
    want = parser._Source(text, "p.polang").lark_error(lark_error.value)
    with pytest.raises(PolicyParseError) as info:
        parse_policies(text, "p.polang")
    assert str(info.value) == str(want)


@pytest.mark.parametrize("text", ["entity A", "entity A = { a: };", "namespace N { entity }"])
def test_schema_syntax_errors_are_lark_errors(text: str) -> None:
    with pytest.raises(UnexpectedInput) as lark_error:
        schema_text._lark_parser().parse(text)
    want = schema_text._syntax_error(
        schema_declarations._Source("s.polangschema"), text, lark_error.value
    )
    with pytest.raises(SchemaError) as info:
        parse_schema(text, "s.polangschema")
    assert str(info.value) == str(want)


def test_lark_trees_convert_to_the_drivers_trees() -> None:
    """``lalr.from_lark`` (used where lark parses a text itself) gives the driver's classes
    with the same shape and positions, iteratively (a deep tree converts)."""
    text = "permit (principal, action, resource) when { " + "(" * 300 + "1" + ")" * 300 + " };"
    theirs = lark_tree(parser.get_parser(), text, "policies")
    assert theirs is not None
    ours = lalr.parse(policy_tables(), lalr.policy_lexer(policy_tables()), text, "policies")
    converted = lalr.from_lark(theirs)
    assert isinstance(converted, lalr.Tree) and not isinstance(converted, Tree)
    assert same_tree(converted, ours)
