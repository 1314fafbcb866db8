"""Property-based fuzzing of every public parser of the language (issue 11).

Whatever the input (random text, text built from the language's own tokens, mutated
valid inputs, random JSON shaped like what the parser expects), the only exceptions that
escape are ``PolangError``s, and their messages stay bounded. Policies that still parse
after a mutation go through the later stages too (validation, formatting, lowering and a
decision). Each test is bounded to a few seconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.datalog.authorizer import Authorizer
from polang.errors import PolangError
from polang.language.entities import (
    parse_context,
    parse_entities,
    parse_entity,
    parse_entity_uid_json,
    parse_legacy_entity,
    parse_mapped_entity,
    parse_value,
)
from polang.language.format import format_policies
from polang.language.parser import parse_entity_uid, parse_expression, parse_policies
from polang.language.schema import parse_schema, parse_schema_json
from polang.language.validate import validate_policies
from polang.language.values import EntityUID

MAX_MESSAGE = 4100
"""What a message may reach: ``MAX_MESSAGE_CHARS`` and the note saying it was cut."""

FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def only_family(fn: Callable[..., object], *args: Any) -> bool:
    """Run ``fn``; ``True`` when it returned. Anything but a ``PolangError`` (with a
    bounded message) fails the test."""
    try:
        fn(*args)
    except PolangError as e:
        assert len(str(e)) <= MAX_MESSAGE, f"{type(e).__name__} of {len(str(e))} characters"
        return False
    return True


# ---------------------------------------------------------------- policies


def words(text: str) -> list[str]:
    return text.split()


POLICY_TOKENS = [
    *words(
        "permit forbid when unless principal action resource context if then else true "
        "false in has like is == != < <= > >= && || + - * / % ! . , ; : :: ( ) [ ] { } @ "
        "?principal ?resource ?other = User Action Group Ns Ns::User contains containsAll "
        "containsAny isEmpty hasTag getTag lessThan isIpv4 isInRange ip decimal datetime "
        "duration offset toDays __cedar a b id"
    ),
    *['"x"', '"a*b"', '"\\u{41}"', '"\\x7f"', '"\\q"', '"\\u{110000}"', '"\\u{d800}"', '"'],
    *['"unterminated', '"10.0.0.1/8"', '"1.5"', '"2024-01-01"', '"1h"', '"\\*"'],
    *["0", "1", "9223372036854775807", "9223372036854775808", "9" * 5000, "// c\n", "\n"],
    *["\t", "\\", "'", "#", "$", "é", "\x00", "\u2028", "\ufeff"],
]

SAMPLE_POLICIES = [
    '@id("a") permit(principal == User::"alice", action in [Action::"read", Action::"write"], '
    'resource is Doc in Folder::"f") when { context.level > 2 && resource.owner == principal } '
    "unless { principal has banned && principal.banned };",
    "forbid(principal in ?principal, action, resource == ?resource) when { if context has x "
    "then context.x.contains(1) else [1, 2].containsAll([1]) };",
    'permit(principal, action, resource) when { ip("10.0.0.1").isInRange(ip("10.0.0.0/8")) '
    '&& decimal("1.5").lessThan(decimal("2.0")) && { a: 1, "b c": [true] }.a == 1 && '
    'context.s like "a*b\\*" && principal.getTag("t") == datetime("2024-01-01").offset('
    'duration("1h")) };',
    'permit(principal is User, action == Action::"read", resource) when { -(-1) * 2 - 3 + '
    'principal["x"] < 4 || !false && context has a.b.c };',
]

SCHEMA_TEXT = """
namespace N {
  entity User in [Group] { name: String, age?: Long, tags?: Set<String> } tags String;
  entity Group;
  type T = { a: Set<Set<Long>>, b: __cedar::ipaddr, n?: Long };
  action "read" appliesTo { principal: [User], resource: Group, context: T };
  action view in [read];
}
entity E enum ["a", "b"];
@doc("x") entity F = { e: E, d?: decimal, when?: datetime };
action a appliesTo { principal: F, resource: E, context: { s?: String, x?: Set<Long> } };
"""
SCHEMA = parse_schema(SCHEMA_TEXT)
READ = EntityUID("N::Action", "read")


def separated(tokens: list[str], seps: list[str]) -> str:
    return "".join(t + s for t, s in zip(tokens, seps, strict=False))


@st.composite
def token_text(draw: st.DrawFn, tokens: list[str], max_size: int = 40) -> str:
    words = draw(st.lists(st.sampled_from(tokens), min_size=1, max_size=max_size))
    seps = draw(
        st.lists(st.sampled_from(["", " ", " ", "\n"]), min_size=len(words), max_size=len(words))
    )
    return separated(words, seps)


@st.composite
def mutated(draw: st.DrawFn, samples: list[str], tokens: list[str]) -> str:
    """A valid input with a few edits: cut, insert a token, repeat a span, a character."""
    text = draw(st.sampled_from(samples))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 12)))
        op = draw(st.sampled_from(["cut", "insert", "repeat", "char"]))
        if op == "cut":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = f"{text[:i]} {draw(st.sampled_from(tokens))} {text[i:]}"
        elif op == "repeat":
            text = text[:i] + text[i:j] * draw(st.integers(2, 50)) + text[j:]
        else:
            text = text[:i] + draw(st.characters(max_codepoint=0x2FF)) + text[i:]
    return text


def whole_pipeline(text: str) -> None:
    """Parse, validate, format, lower and decide (the stages after the parser)."""
    policies = parse_policies(text, "fuzz.polang")
    validate_policies(policies, SCHEMA)
    format_policies(policies)
    static = {f"p{i}": p for i, p in enumerate(policies) if not p.is_template}
    authorizer = Authorizer(static)
    authorizer.is_authorized(
        EntityUID("N::User", "u"),
        READ,
        EntityUID("N::Group", "g"),
        {"a": [[1]], "b": 1, "x": [1], "s": "ab"},
    )


@FUZZ
@given(token_text(POLICY_TOKENS))
def test_policy_text_from_tokens(text: str) -> None:
    only_family(parse_policies, text, "fuzz.polang")
    only_family(parse_expression, text)
    only_family(parse_entity_uid, text)


@FUZZ
@given(st.text(max_size=200))
def test_policy_text_at_random(text: str) -> None:
    only_family(parse_policies, text)


@FUZZ
@given(mutated(SAMPLE_POLICIES, POLICY_TOKENS))
def test_mutated_policies_through_every_stage(text: str) -> None:
    only_family(whole_pipeline, text)


def test_the_samples_are_valid() -> None:
    # the mutations start from policies that go through every stage
    for text in SAMPLE_POLICIES:
        assert only_family(parse_policies, text)
    assert only_family(whole_pipeline, SAMPLE_POLICIES[0])


# ---------------------------------------------------------------- schemas (human form)

SCHEMA_TOKENS = [
    *words(
        "entity action type namespace in tags enum appliesTo principal resource context Set "
        "Long String Bool Boolean ipaddr decimal datetime duration __cedar __cedar::Long Record "
        "Entity Extension Action < > { } [ ] , ; : :: ? = @ ( ) A B C User Group N N::A if "
        "true has a b t entitty Entity"
    ),
    *['"s"', '"a b"', '"\\u{41}"', '"\\q"', '"', "// c\n", "\n", "é", "\x00", "0", "'", "-"],
]


@settings(FUZZ, max_examples=400)
@given(token_text(SCHEMA_TOKENS))
def test_schema_text_from_tokens(text: str) -> None:
    # 3,162 of 9,000 such schemas escaped as KeyError: '$END'
    only_family(parse_schema, text, "fuzz.polangschema")


@FUZZ
@given(mutated([SCHEMA_TEXT], SCHEMA_TOKENS))
def test_mutated_schemas(text: str) -> None:
    only_family(parse_schema, text)


@FUZZ
@given(st.text(max_size=200))
def test_schema_text_at_random(text: str) -> None:
    only_family(parse_schema, text)


# ---------------------------------------------------------------- JSON inputs

KEYS = [
    *["uid", "attrs", "parents", "tags", "type", "id", "__entity", "__extn", "fn", "arg"],
    *["args", "x", "a", "s", "name", "cedar_entity_mapping", "entity_type", "entity_id", ""],
    *["entityTypes", "actions", "commonTypes", "shape", "memberOfTypes", "appliesTo"],
    *["principalTypes", "resourceTypes", "context", "element", "attributes", "required"],
    *["additionalAttributes", "annotations", "enum", "memberOf", "N", "User", "parnets"],
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.sampled_from(
        ["", "a", "User", "N::User", "Long", "Set", "Record", "Entity", "String", "Boolean"]
    ),
    st.sampled_from(["10.0.0.1", "ip", "decimal", "1.5", "__cedar::Long", "N::Action", "read"]),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    ),
    max_leaves=25,
)
PYTHON = st.recursive(  # what a caller may pass where JSON belongs
    st.one_of(SCALARS, st.just(object()), st.just(b"x")),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.frozensets(st.sampled_from(["a", "b", 1])),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.integers(0, 2)), inner, max_size=4),
    ),
    max_leaves=15,
)


def as_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@FUZZ
@given(JSON)
def test_json_schemas(value: Any) -> None:
    only_family(parse_schema_json, value)
    only_family(parse_schema_json, as_text(value))
    only_family(parse_schema_json, {"N": value})
    only_family(parse_schema_json, {"": {"entityTypes": {"A": value}, "actions": {}}})


SCHEMA_JSON = json.dumps(SCHEMA.to_json())


@FUZZ
@given(mutated([SCHEMA_JSON], ["{", "}", "[", "]", '"', ",", ":", "1", "null", '"type"']))
def test_mutated_json_schemas(text: str) -> None:
    only_family(parse_schema_json, text)


@FUZZ
@given(JSON)
def test_entity_json(value: Any) -> None:
    for schema in (None, SCHEMA):
        only_family(parse_entities, [value], schema)
        only_family(parse_entities, as_text([value]), schema)
        only_family(parse_entity, value, schema)
        only_family(parse_mapped_entity, value, schema)
        only_family(parse_legacy_entity, value, schema)
    only_family(lambda v: parse_value(v, path="$"), value)
    only_family(parse_entity_uid_json, value)


@FUZZ
@given(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4), JSON)
def test_entities_shaped_like_entities(attrs: dict[str, Any], parents: Any) -> None:
    for uid in ({"type": "N::User", "id": "u"}, {"type": "F", "id": "f"}, {"__entity": {}}):
        entity = {"uid": uid, "attrs": attrs, "parents": parents}
        for schema in (None, SCHEMA):
            only_family(parse_entity, entity, schema)
            only_family(parse_entities, as_text([entity]), schema)


@FUZZ
@given(JSON)
def test_request_contexts(value: Any) -> None:
    for schema, action in ((None, None), (SCHEMA, READ), (SCHEMA, EntityUID("Action", "a"))):
        only_family(parse_context, value, schema, action)
        only_family(parse_context, as_text(value), schema, action)
        only_family(parse_context, {"a": value, "s": value, "x": value}, schema, action)


@FUZZ
@given(PYTHON)
def test_python_values_where_json_belongs(value: Any) -> None:
    only_family(parse_entity, {"uid": {"type": "F", "id": "f"}, "attrs": value}, SCHEMA)
    only_family(parse_entity, {"uid": {"type": "F", "id": "f"}, "attrs": {"e": value}}, None)
    only_family(parse_entities, [value], SCHEMA)
    only_family(parse_context, value, SCHEMA, READ)
    only_family(parse_context, {"s": value}, None, None)
    only_family(parse_schema_json, value)
