"""Hostile input to the language's parsers: every failure is a ``PolangError`` that names
its limit and its place, never a crash, a hang, a ``RecursionError`` or a change to the
interpreter (issue 11)."""

from __future__ import annotations

import json
import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import polang
from polang.errors import EntityError, PolicyParseError, RequestError, SchemaError
from polang.inputs.fields import json_kind
from polang.jsonlimits import MAX_JSON_DEPTH
from polang.language import ast
from polang.language.entities import (
    parse_context,
    parse_entities,
    parse_entity,
    parse_mapped_entity,
    parse_value,
)
from polang.language.hierarchy import MAX_HIERARCHY_DEPTH
from polang.language.parser import (
    MAX_EXPRESSION_DEPTH,
    parse_expression,
    parse_policies,
)
from polang.language.schema import (
    LONG,
    MAX_SCHEMA_TYPE_DEPTH,
    ExtensionType,
    SetType,
    parse_schema,
    parse_schema_json,
)
from polang.language.validate import validate_policies
from polang.language.values import EntityUID

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
    # the `when`/`unless` clauses of a policy are joined by `&&`: up to 16 clauses take a
    # level each from every clause's own nesting, more are joined balanced (log2(n) levels)
    def nested(levels: int) -> str:  # sets in sets: one level each, and the literal
        return "[" * (levels - 1) + "true" + "]" * (levels - 1)

    def clauses(k: int, levels: int) -> str:
        return P + " when { true }" * (k - 1) + f" when {{ {nested(levels)} }};"

    assert len(parse_policies(clauses(10, 90))) == 1  # 10 + 90
    assert re.search(LIMIT, str(parse_error(clauses(11, 90))))
    many = parse_policies(clauses(5000, 87))  # Cedar accepts any number of clauses
    assert len(many[0].conditions) == 5000  # 13 levels for the join + 87
    assert re.search(LIMIT, str(parse_error(clauses(5000, 88))))


def test_parse_expression_is_bounded_too() -> None:
    with pytest.raises(PolicyParseError, match=LIMIT):
        parse_expression(" + ".join(["1"] * 5000))


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


# ---------------------------------------------------------------- schemas (item 3)


def schema_error(text: str) -> SchemaError:
    with pytest.raises(SchemaError) as e:
        parse_schema(text, "s.polangschema")
    assert re.match(r"s\.polangschema:\d+:\d+: ", str(e.value)), str(e.value)[:200]
    assert len(str(e.value)) < 1000
    return e.value


TYPE_LIMIT = re.escape(f"deeper than the limit of {MAX_SCHEMA_TYPE_DEPTH} levels")


@pytest.mark.parametrize(
    "text",
    [
        "entity A { a: " + "Set<" * 10_000 + "Long" + ">" * 10_000 + " };",
        "entity A = " + "{a: " * 10_000 + "Long" + "}" * 10_000 + ";",
        "\n".join(f"type T{i} = T{i + 1};" for i in range(2000))
        + "\ntype T2000 = Long;\nentity A { a: T0 };",
        "\n".join(f"type T{i} = Set<T{i + 1}>;" for i in range(40)) + "\ntype T40 = Long;",
        "type Deep = " + "Set<" * 31 + "Long" + ">" * 31 + "; entity A { a: Deep };",
    ],
    ids=["sets", "records", "common-chain", "set-chain", "via-a-resolved-common"],
)
def test_deep_schema_types_name_the_limit(text: str) -> None:
    e = schema_error(text)
    assert re.search(TYPE_LIMIT, str(e)) and "MAX_SCHEMA_TYPE_DEPTH" in str(e)


def test_schema_types_within_the_limit_resolve() -> None:
    n = MAX_SCHEMA_TYPE_DEPTH - 1  # the element is a level too
    s = parse_schema("type Deep = " + "Set<" * n + "Long" + ">" * n + ";")
    t = s.common_types["Deep"]
    for _ in range(n):
        assert isinstance(t, SetType)
        t = t.element
    assert t == LONG


def test_the_limit_does_not_depend_on_declaration_order() -> None:
    deep = "Set<" * 30 + "Long" + ">" * 30
    first = f"type Deep = {deep}; entity A {{ a: Deep }};"
    last = f"entity A {{ a: Deep }}; type Deep = {deep};"
    assert re.search(TYPE_LIMIT, str(schema_error(first)))
    assert re.search(TYPE_LIMIT, str(schema_error(last)))


def test_unclosed_deep_schema_is_a_syntax_error() -> None:
    e = schema_error("Set<" * 10_000)
    assert "unexpected name `Set`" in str(e)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("t", None),
        ("entitty A;", "entity"),
        ("Entity A;", "entity"),
        ("entity A; actoin a;", "action"),
        ("namespace N { Entity A; }", "entity"),
        ("entity A tag Long;", "tags"),
        ("@", None),
        ("entity", None),
        ("entity A {", None),
    ],
)
def test_schema_syntax_errors_are_schema_errors(text: str, hint: str | None) -> None:
    e = schema_error(text)  # was KeyError: '$END' for the first three
    if hint is not None:
        assert f"did you mean `{hint}`?" in str(e)


def test_deep_json_schemas_are_refused() -> None:
    with pytest.raises(SchemaError, match="MAX_JSON_DEPTH"):
        parse_schema_json("[" * 100_000 + "]" * 100_000)
    deep: Any = {"type": "Long"}
    for _ in range(10_000):
        deep = {"type": "Set", "element": deep}
    with pytest.raises(SchemaError, match="MAX_JSON_DEPTH"):
        parse_schema_json({"": {"entityTypes": {"A": {"shape": deep}}, "actions": {}}})
    inner = '{"type": "Set", "element": ' * 10_000 + '{"type": "Long"}' + "}" * 10_000
    text = '{"": {"commonTypes": {"T": ' + inner + '}, "entityTypes": {}, "actions": {}}}'
    with pytest.raises(SchemaError, match="MAX_JSON_DEPTH"):
        parse_schema_json(text)


def test_json_schema_type_depth_is_bounded_like_the_human_form() -> None:
    deep: Any = {"type": "Long"}
    for _ in range(40):
        deep = {"type": "Set", "element": deep}
    with pytest.raises(SchemaError, match=TYPE_LIMIT) as e:
        parse_schema_json({"": {"commonTypes": {"T": deep}, "entityTypes": {}, "actions": {}}})
    assert "$" in str(e.value)


def test_json_schema_texts_past_pythons_digit_limit() -> None:
    with pytest.raises(SchemaError, match="more than 4,300 digits"):
        parse_schema_json('{"": {"entityTypes": {}, "actions": {}, "x": ' + "9" * 5000 + "}}")


# ---------------------------------------------------------------- entities and requests (item 6)

ENTITY_SCHEMA = parse_schema(
    "entity Group; entity User in [Group] { name?: String, extra?: { n?: Long } };"
    "action view appliesTo { principal: User, resource: User, context: { n?: Long } };"
)
VIEW = EntityUID("Action", "view")


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("schema", [None, ENTITY_SCHEMA], ids=["untyped", "with-schema"])
def test_unknown_entity_keys_name_themselves(schema: Any) -> None:
    entity = {
        "uid": {"type": "User", "id": "mallory"},
        "attrs": {},
        "parnets": [{"type": "Group", "id": "banned"}],
    }
    with pytest.raises(EntityError, match=r'\.parnets: unknown key "parnets"') as e:
        parse_entity(entity, schema)
    assert 'did you mean "parents"?' in str(e.value)
    with pytest.raises(EntityError, match=r'unknown key "x"'):
        parse_entities([{"uid": {"type": "User", "id": "a"}, "attrs": {}, "x": 1}], schema)


def test_mapped_entities_keep_other_keys_as_attributes() -> None:
    e = parse_mapped_entity(
        {"cedar_entity_mapping": {"entity_type": "User", "id": "a"}, "name": "A"}, ENTITY_SCHEMA
    )
    assert e.attrs == {"name": "A"}


def test_deep_values_name_the_limit() -> None:
    deep = nested(100_000)
    with pytest.raises(RequestError, match="MAX_JSON_DEPTH"):
        parse_context({"zz": deep}, None, None)
    with pytest.raises(EntityError, match="MAX_JSON_DEPTH"):
        parse_entity({"uid": {"type": "User", "id": "a"}, "attrs": {"x": deep}})
    with pytest.raises(EntityError, match="MAX_JSON_DEPTH"):
        parse_value({"__extn": {"fn": "ip", "arg": deep}}, path="$")
    with pytest.raises(EntityError, match="MAX_JSON_DEPTH"):
        parse_entities("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RequestError, match="MAX_JSON_DEPTH"):
        parse_context('{"zz": ' + "[" * 100_000 + "]" * 100_000 + "}", None, None)
    # against the schema the value's type decides first
    with pytest.raises(RequestError, match=r"context at \$\.context\.n: expected Long"):
        parse_context({"n": deep}, ENTITY_SCHEMA, VIEW)
    # the limit itself is accepted
    ok = parse_context({"zz": nested(MAX_JSON_DEPTH - 1)}, None, None)
    assert "zz" in ok
    # calls read by their parameters' types, in any of Cedar's forms (toDate(toDate(...)))
    for wrap in (
        lambda v: {"fn": "toDate", "arg": v},
        lambda v: {"__extn": {"fn": "toDate", "arg": v}},
        lambda v: {"fn": "offset", "args": [v, "1h"]},
    ):
        call: Any = "2024-10-15"
        for _ in range(100_000):
            call = wrap(call)
        with pytest.raises(EntityError, match="MAX_JSON_DEPTH"):
            parse_value(call, ExtensionType("datetime"), path="$")


def test_numbers_outside_long_in_entity_json() -> None:
    text = '[{"uid": {"type": "User", "id": "a"}, "attrs": {"n": %s}}]'
    with pytest.raises(EntityError, match=r"\$\[0\]\.attrs\.n: integer 9{30} is outside"):
        parse_entities(text % ("9" * 30))
    with pytest.raises(EntityError, match="more than 4,300 digits"):
        parse_entities(text % ("9" * 5000))
    with pytest.raises(RequestError, match="more than 4,300 digits"):
        parse_context('{"n": ' + "9" * 5000 + "}", None, None)
    with pytest.raises(RequestError, match=r"\$\.context\.n: integer -10+ is outside"):
        parse_context({"n": -(10**30)}, None, None)


def test_python_values_are_named_as_what_they_are() -> None:
    # issue 14: the README passed a set where a dict belongs: "found an object"
    with pytest.raises(EntityError, match='"attrs" must be a JSON object, found a set'):
        parse_entity({"uid": {"type": "User", "id": "a"}, "attrs": {"name", "x"}})
    with pytest.raises(EntityError, match="found a set"):
        parse_entity({"uid": {"type": "User", "id": "a"}, "attrs": {"name": {"x"}}})
    with pytest.raises(EntityError, match="found a tuple"):
        parse_entity({"uid": {"type": "User", "id": "a"}, "attrs": {"name": ("x",)}})
    assert json_kind(frozenset()) == "a set" and json_kind(object()) == "a Python `object`"
    assert json_kind({}) == "an object" and json_kind([]) == "an array"


# ---------------------------------------------------------------- through the engine

STORE_SCHEMA = (
    "entity Group; entity User in [Group]; entity Doc;"
    "action read appliesTo { principal: User, resource: Doc };"
)
STORE_POLICIES = """
@id("everyone") permit (principal, action, resource);
@id("banned") forbid (principal in Group::"banned", action, resource);
"""


def write_store(root: Path, schema: str = STORE_SCHEMA, policies: str = STORE_POLICIES) -> Path:
    metadata = {
        "polang_version": "4.0.0",
        "policy_store": {"id": "hostile", "name": "Hostile", "version": "1.0.0"},
    }
    files = {
        "metadata.json": json.dumps(metadata),
        "schema.polangschema": schema,
        "policies/p.polang": policies,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def engine_for(root: Path) -> polang.Engine:
    return polang.Engine(
        {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(root),
            "ENGINE_JWT_SIG_VALIDATION": "disabled",
            "ENGINE_JWT_STATUS_VALIDATION": "disabled",
        }
    )


def test_a_misspelt_parents_key_cannot_escape_a_forbid(tmp_path: Path) -> None:
    with engine_for(write_store(tmp_path / "s")) as engine:
        doc = {"uid": {"type": "Doc", "id": "d"}, "attrs": {}, "parents": []}
        banned = [{"type": "Group", "id": "banned"}]
        mallory = {"uid": {"type": "User", "id": "mallory"}, "attrs": {}}
        result = engine.authorize_unsigned(
            'Action::"read"', doc, principal={**mallory, "parents": banned}
        )
        assert not result.decision
        with pytest.raises(polang.PolangError, match=r'unknown key "parnets".*did you mean'):
            engine.authorize_unsigned(
                'Action::"read"', doc, principal={**mallory, "parnets": banned}
            )
        with pytest.raises(polang.RequestError, match="MAX_JSON_DEPTH"):
            engine.access_matrix({"zz": nested(100_000)})  # a context of no one action


@pytest.mark.parametrize("schema", ["t", "entitty A;", "Entity A;", "Set<" * 10_000])
def test_a_store_with_a_broken_schema_is_refused_in_the_family(tmp_path: Path, schema: str) -> None:
    with pytest.raises(polang.PolangError, match=r"schema\.polangschema:1:1: unexpected name"):
        engine_for(write_store(tmp_path / "s", schema=schema))


def test_a_store_with_a_deep_policy_is_refused_and_leaves_the_interpreter_alone(
    tmp_path: Path,
) -> None:
    before = sys.getrecursionlimit()
    policy = '@id("p") permit (principal, action, resource) when { 1' + " + 1" * 5000 + " > 0 };"
    with pytest.raises(polang.PolangError, match="MAX_EXPRESSION_DEPTH"):
        engine_for(write_store(tmp_path / "s", policies=policy))
    assert sys.getrecursionlimit() == before


# ---------------------------------------------------------------- big literals (item 5)


def peak_ratio(fn: Callable[[], object], size: int) -> float:
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / size


@pytest.mark.parametrize(
    ("condition", "bound"),
    [
        ('context.s == "' + "a" * 2_000_000 + '"', 10),
        ('context.s == "' + "\\n" * 100_000 + '"', 20),
        ('context.s == "' + "\\u{e9}" * 30_000 + '"', 20),
        ('context.s like "' + "*a" * 250_000 + '"', 30),
    ],
    ids=["plain", "escapes", "unicode-escapes", "pattern"],
)
def test_a_big_literal_loads_in_a_small_multiple_of_its_size(condition: str, bound: int) -> None:
    # a 10 MB literal took 1.4 GB (a regular expression's backtracking state per
    # character) and most of a minute (line starts found character by character)
    text = f"{P} when {{ {condition} }};"
    ratio = peak_ratio(lambda: parse_policies(text + " "), len(text))
    assert ratio < bound, f"{ratio:.1f}x"


def test_long_lists_parse_in_linear_time() -> None:
    # the table-driven parser copied a repetition's children once per element: a set
    # literal or a chain of 100,000 elements took minutes before anything was checked
    n = 50_000
    body = parse_policies(when("[" + ", ".join(["1"] * n) + "].contains(1)"))[0].conditions[0].body
    assert isinstance(body, ast.MethodCall) and isinstance(body.receiver, ast.SetLit)
    assert len(body.receiver.elements) == n
    chain = parse_policies(when(" || ".join(["true"] * n)))[0].conditions[0].body
    assert isinstance(chain, ast.Binary) and len(ast.chain_operands(chain)) == n  # balanced
    e = parse_error(when(" + ".join(["1"] * n) + " > 0"))
    assert "MAX_EXPRESSION_DEPTH" in str(e)


# ---------------------------------------------------------------- deep hierarchies (round 3)

# A closure is built in full (each entity's ancestors, each type's ancestor types), and a
# chain's closure grows with the square of its depth: a 10,000-deep `memberOfTypes` chain
# took 3 GB at schema load, a 5,000-deep entity chain 1.2 GB in `who_can`.

DEPTH = MAX_HIERARCHY_DEPTH


def type_chain(links: int) -> str:
    return "\n".join(f"entity T{i} in [T{i + 1}];" for i in range(links)) + f"\nentity T{links};"


@pytest.mark.parametrize("links", [DEPTH + 1, 10_000])
def test_a_member_of_types_chain_past_the_limit_is_refused_naming_it(links: int) -> None:
    e = schema_error(type_chain(links))
    assert "MAX_HIERARCHY_DEPTH" in str(e)
    assert re.search(rf"`T\d+` is {DEPTH + 1:,} levels below `T\d+`", str(e)), str(e)


def test_the_json_schema_form_has_the_same_limit() -> None:
    types = {f"T{i}": {"memberOfTypes": [f"T{i + 1}"]} for i in range(DEPTH + 1)}
    types[f"T{DEPTH + 1}"] = {}
    with pytest.raises(SchemaError, match="MAX_HIERARCHY_DEPTH"):
        parse_schema_json(json.dumps({"": {"entityTypes": types, "actions": {}}}))


def test_an_action_group_chain_past_the_limit_is_refused_naming_it() -> None:
    text = "\n".join(f'action "a{i}" in ["a{i + 1}"];' for i in range(DEPTH + 1))
    e = schema_error(text + f'\naction "a{DEPTH + 1}";')
    assert "action hierarchy" in str(e) and "MAX_HIERARCHY_DEPTH" in str(e)
    # a cycle is still named as one
    assert "cycle in the action hierarchy" in str(schema_error("action a in [b]; action b in [a];"))


def test_hierarchies_at_the_limit_load_and_close() -> None:
    s = parse_schema(
        type_chain(DEPTH)
        + "\n".join(f'action "a{i}" in ["a{i + 1}"];' for i in range(DEPTH))
        + f'\naction "a{DEPTH}" appliesTo {{ principal: T0, resource: T{DEPTH} }};'
    )
    assert s.ancestor_types("T0") == {f"T{i}" for i in range(1, DEPTH + 1)}
    assert s.descendant_types(f"T{DEPTH}") == {f"T{i}" for i in range(DEPTH)}
    assert len(s.action_ancestors(EntityUID("Action", "a0"))) == DEPTH
    policy = parse_policies(f'permit (principal in T{DEPTH}::"top", action, resource);')
    assert validate_policies(policy, s) == []
    # an entity may name a parent of its farthest ancestor type
    top = {"type": f"T{DEPTH}", "id": "top"}
    e = parse_entity({"uid": {"type": "T0", "id": "x"}, "attrs": {}, "parents": [top]}, s)
    assert e.parents == {EntityUID(f"T{DEPTH}", "top")}


def entity_chain(n: int) -> list[dict[str, Any]]:
    """``n`` entities, each one's parent the one before: ``n - 1`` links."""
    return [
        {
            "uid": {"type": "G", "id": f"g{i}"},
            "attrs": {},
            "parents": [{"type": "G", "id": f"g{i - 1}"}] if i else [],
        }
        for i in range(n)
    ]


def test_an_entity_chain_past_the_limit_is_refused_naming_it() -> None:
    with pytest.raises(EntityError) as info:
        parse_entities(json.dumps(entity_chain(DEPTH + 2)), filename="deep.json")
    e = info.value
    assert e.uid == f'G::"g{DEPTH + 1}"' and e.path == f"$[{DEPTH + 1}].parents"
    assert str(e).startswith(f'deep.json: entity G::"g{DEPTH + 1}" at $[{DEPTH + 1}].parents: ')
    assert "MAX_HIERARCHY_DEPTH" in str(e) and 'below G::"g0"' in str(e)
    assert len(parse_entities(json.dumps(entity_chain(DEPTH + 1)))) == DEPTH + 1


def test_a_query_with_an_entity_chain_past_the_limit_is_refused(tmp_path: Path) -> None:
    schema = "entity G in [G]; entity D; action read appliesTo { principal: G, resource: D };"
    policies = '@id("p") permit (principal in G::"g0", action, resource);'
    doc = {"uid": {"type": "D", "id": "d"}, "attrs": {}}
    with engine_for(write_store(tmp_path / "s", schema, policies)) as engine:
        with pytest.raises(polang.RequestError, match="MAX_HIERARCHY_DEPTH") as info:
            engine.who_can('Action::"read"', doc, {}, entities=entity_chain(5000))
        assert f'entity G::"g{DEPTH + 1}"' in str(info.value)
        at_limit = engine.who_can('Action::"read"', doc, {}, entities=entity_chain(DEPTH + 1))
        assert len(at_limit.allowed) == DEPTH + 1 and at_limit.complete
