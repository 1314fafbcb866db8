"""Entity, request and multi-issuer schema validation.

Entities here are parsed *without* the schema (so nothing is checked at parse time) and
then validated; the differential tests compare with the Rust engine, which checks entities
and requests against the schema when it builds them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.errors import RequestError
from polang.language.entities import Entity, EntityStore, parse_context, parse_entities
from polang.language.schema import Schema, parse_schema
from polang.language.validate import (
    check_multi_issuer_schema,
    validate_entities,
    validate_request,
)
from polang.language.values import EntityUID, RecordValue, SetValue

SCHEMA_TEXT = """
entity Group in [Group] { name: String };
entity User in [Group] {
  name: String,
  age?: Long,
  home: ipaddr,
  boss?: User,
  nick: Set<String>,
  rec: { a: Long, b?: String },
} tags Long;
entity Doc;
entity Color enum ["red", "green"];
action read appliesTo {
  principal: [User],
  resource: [Doc, Color],
  context: { n: Long, ip?: ipaddr, who?: User, color?: Color }
};
action "group";
action view in ["group"] appliesTo { principal: [User, Group], resource: [Doc], context: {} };
action orphan;
"""

IP = {"__extn": {"fn": "ip", "arg": "10.0.0.1"}}
USER: dict[str, Any] = {
    "uid": {"type": "User", "id": "alice"},
    "attrs": {"name": "Alice", "home": IP, "nick": ["al"], "rec": {"a": 1}},
    "parents": [{"type": "Group", "id": "staff"}],
    "tags": {"level": 3},
}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return parse_schema(SCHEMA_TEXT, "test.polangschema")


def entity_kinds(objs: list[dict[str, Any]], schema: Schema) -> list[str]:
    return [f.kind for f in validate_entities(parse_entities(objs), schema)]


def user(**changes: Any) -> dict[str, Any]:
    """A copy of USER with ``attrs``/``parents``/``tags``/``uid`` replaced or attributes set."""
    u = copy.deepcopy(USER)
    for k, v in changes.items():
        if k in u:
            u[k] = v
        elif v is None:
            del u["attrs"][k]
        else:
            u["attrs"][k] = v
    return u


ENTITY_CASES: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("conforming user", [user()], []),
    (
        "optional attributes present",
        [user(age=3, boss={"__entity": {"type": "User", "id": "b"}})],
        [],
    ),
    (
        "unknown entity type",
        [{"uid": {"type": "Usr", "id": "a"}, "attrs": {}, "parents": []}],
        ["unknown_entity_type"],
    ),
    ("missing required attribute", [user(name=None)], ["missing_attribute"]),
    ("unknown attribute", [user(nmae="x")], ["unknown_attribute"]),
    ("wrong primitive type", [user(age="3")], ["attribute_type"]),
    ("Bool is not Long", [user(age=True)], ["attribute_type"]),
    ("wrong extension type", [user(home="10.0.0.1")], ["attribute_type"]),
    ("wrong set element", [user(nick=[1])], ["attribute_type"]),
    ("record with extra field", [user(rec={"a": 1, "c": 2})], ["attribute_type"]),
    ("record missing field", [user(rec={"b": "x"})], ["attribute_type"]),
    (
        "entity of the wrong type",
        [user(boss={"__entity": {"type": "Doc", "id": "d"}})],
        ["attribute_type"],
    ),
    ("parent of an allowed type", [user(parents=[{"type": "Group", "id": "g"}])], []),
    (
        "parent of a disallowed type",
        [user(parents=[{"type": "Doc", "id": "d"}])],
        ["invalid_parent"],
    ),
    ("tag of the declared type", [user(tags={"a": 1, "b": 2})], []),
    ("tag of the wrong type", [user(tags={"a": "x"})], ["tag_type"]),
    (
        "tags where none are declared",
        [{"uid": {"type": "Doc", "id": "d"}, "attrs": {}, "parents": [], "tags": {"t": 1}}],
        ["unexpected_tag"],
    ),
    ("enumerated id", [{"uid": {"type": "Color", "id": "red"}, "attrs": {}, "parents": []}], []),
    (
        "id outside the enumeration",
        [{"uid": {"type": "Color", "id": "blue"}, "attrs": {}, "parents": []}],
        ["invalid_enum_entity"],
    ),
    (
        "declared action",
        [
            {
                "uid": {"type": "Action", "id": "view"},
                "attrs": {},
                "parents": [{"type": "Action", "id": "group"}],
            }
        ],
        [],
    ),
    (
        "undeclared action",
        [{"uid": {"type": "Action", "id": "zzz"}, "attrs": {}, "parents": []}],
        ["undeclared_action"],
    ),
    (
        "action with other parents than declared",
        [{"uid": {"type": "Action", "id": "view"}, "attrs": {}, "parents": []}],
        ["action_mismatch"],
    ),
]


@pytest.mark.parametrize(
    ("objs", "expected"), [(c[1], c[2]) for c in ENTITY_CASES], ids=[c[0] for c in ENTITY_CASES]
)
def test_entity_rule(schema: Schema, objs: list[dict[str, Any]], expected: list[str]) -> None:
    assert entity_kinds(objs, schema) == expected


def test_entity_messages_name_the_entity_and_attribute(schema: Schema) -> None:
    [f] = validate_entities(parse_entities([user(nmae="x")]), schema)
    assert f.path == 'User::"alice"'
    assert f.policy_id is None and f.span is None
    assert str(f) == (
        'User::"alice": entity User::"alice": attribute `nmae` is not declared for type `User`; '
        "did you mean `name`?"
    )
    [f] = validate_entities(parse_entities([user(parents=[{"type": "Doc", "id": "d"}])]), schema)
    assert "allowed: `Group`" in f.message


def test_entities_report_every_problem(schema: Schema) -> None:
    found = entity_kinds([user(name=None, age="x", tags={"t": "x"})], schema)
    assert found == ["missing_attribute", "attribute_type", "tag_type"]


def test_programmatic_entities(schema: Schema) -> None:
    e = Entity(
        EntityUID("User", "u"),
        attrs={
            "name": "U",
            "home": next(iter(parse_entities([user()]))).attrs["home"],
            "nick": SetValue(["x"]),
            "rec": RecordValue({"a": 1}),
        },
    )
    assert validate_entities(EntityStore([e]), schema) == []


# ------------------------------------------------------------------ differential: entities

cedarpy = pytest.importorskip("cedarpy")

# (no plain strings where the schema wants an extension value or entity: the Rust engine
# converts those while parsing with the schema, and these entities are parsed without it)
_MUTATIONS: list[dict[str, Any]] = [
    {},
    {"age": 4},
    {"age": "4"},
    {"name": None},
    {"extra": 1},
    {"home": {"__extn": {"fn": "decimal", "arg": "1.0"}}},
    {"nick": [1]},
    {"nick": []},
    {"rec": {"a": 1, "b": "x"}},
    {"rec": {"a": 1, "z": 1}},
    {"rec": {"b": "x"}},
    {"boss": {"__entity": {"type": "User", "id": "b"}}},
    {"boss": {"__entity": {"type": "Group", "id": "b"}}},
    {"parents": [{"type": "Group", "id": "g"}]},
    {"parents": [{"type": "User", "id": "g"}]},
    {"tags": {"x": 1}},
    {"tags": {"x": "1"}},
    {"tags": {}},
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(_MUTATIONS))), min_size=1, max_size=3))
def test_entity_validity_agrees_with_cedarpy(schema: Schema, picks: list[int]) -> None:
    changes: dict[str, Any] = {}
    for i in picks:
        changes.update(_MUTATIONS[i])
    obj = user(**changes)
    ours = validate_entities(parse_entities([obj]), schema)
    request = {
        "principal": 'User::"alice"',
        "action": 'Action::"read"',
        "resource": 'Doc::"d"',
        "context": {"n": 1},
    }
    theirs = cedarpy.is_authorized(
        request, "permit(principal, action, resource);", [obj], schema=SCHEMA_TEXT
    )
    rejected = any("entit" in str(e) for e in theirs.diagnostics.errors)
    assert (ours != []) == rejected, (obj, [str(f) for f in ours], theirs.diagnostics.errors)


# ------------------------------------------------------------------ requests


def uid(text: str) -> EntityUID:
    t, i = text.split("::")
    return EntityUID(t, i.strip('"'))


REQUEST_CASES: list[tuple[str, str, str, str, dict[str, Any] | None, list[str]]] = [
    ("valid", 'User::"a"', 'Action::"read"', 'Doc::"d"', {"n": 1}, []),
    ("enumerated resource", 'User::"a"', 'Action::"read"', 'Color::"red"', {"n": 1}, []),
    (
        "bad enumerated id",
        'User::"a"',
        'Action::"read"',
        'Color::"pink"',
        {"n": 1},
        ["invalid_enum_entity"],
    ),
    (
        "unknown principal type",
        'Usr::"a"',
        'Action::"read"',
        'Doc::"d"',
        {"n": 1},
        ["unknown_principal_type", "principal_not_allowed"],
    ),
    (
        "principal not in appliesTo",
        'Group::"g"',
        'Action::"read"',
        'Doc::"d"',
        {"n": 1},
        ["principal_not_allowed"],
    ),
    (
        "resource not in appliesTo",
        'User::"a"',
        'Action::"view"',
        'Color::"red"',
        {},
        ["resource_not_allowed"],
    ),
    ("undeclared action", 'User::"a"', 'Action::"nope"', 'Doc::"d"', {}, ["undeclared_action"]),
    (
        "action without appliesTo",
        'User::"a"',
        'Action::"orphan"',
        'Doc::"d"',
        {},
        ["principal_not_allowed", "resource_not_allowed"],
    ),
    ("context missing a field", 'User::"a"', 'Action::"read"', 'Doc::"d"', {}, ["context_type"]),
    (
        "context with an extra field",
        'User::"a"',
        'Action::"read"',
        'Doc::"d"',
        {"n": 1, "z": 2},
        ["context_type"],
    ),
    (
        "context field of the wrong type",
        'User::"a"',
        'Action::"read"',
        'Doc::"d"',
        {"n": "1"},
        ["context_type"],
    ),
    (
        "context entity of the wrong type",
        'User::"a"',
        'Action::"read"',
        'Doc::"d"',
        {"n": 1, "who": {"__entity": {"type": "Doc", "id": "d"}}},
        ["context_type"],
    ),
    (
        "context enum id",
        'User::"a"',
        'Action::"read"',
        'Doc::"d"',
        {"n": 1, "color": {"__entity": {"type": "Color", "id": "x"}}},
        ["invalid_enum_entity"],
    ),
    ("no context given", 'User::"a"', 'Action::"read"', 'Doc::"d"', None, []),
]


@pytest.mark.parametrize(
    ("p", "a", "r", "ctx", "expected"),
    [c[1:] for c in REQUEST_CASES],
    ids=[c[0] for c in REQUEST_CASES],
)
def test_request_rule(
    schema: Schema, p: str, a: str, r: str, ctx: dict[str, Any] | None, expected: list[str]
) -> None:
    context = parse_context(ctx, None, None) if ctx is not None else None
    found = validate_request(uid(p), uid(a), uid(r), context, schema)
    assert [f.kind for f in found] == expected


def test_request_messages(schema: Schema) -> None:
    [f] = validate_request(uid('Group::"g"'), uid('Action::"read"'), uid('Doc::"d"'), None, schema)
    assert (
        str(f)
        == 'principal: principal type `Group` is not valid for Action::"read" (allowed: `User`)'
    )
    ctx = parse_context({"n": "1"}, None, None)
    [f] = validate_request(uid('User::"a"'), uid('Action::"read"'), uid('Doc::"d"'), ctx, schema)
    assert f.path == "context"
    assert "in attribute `n`: expected Long but found String" in f.message


def test_unknown_principal_is_skipped_when_absent(schema: Schema) -> None:
    assert validate_request(None, uid('Action::"read"'), None, None, schema) == []


_PRINCIPALS = ['User::"a"', 'Group::"g"', 'Usr::"a"', 'Doc::"d"']
_ACTIONS = [
    'Action::"read"',
    'Action::"view"',
    'Action::"orphan"',
    'Action::"nope"',
    'Action::"group"',
]
_RESOURCES = ['Doc::"d"', 'Color::"red"', 'Color::"pink"', 'User::"u"']
_CONTEXTS: list[dict[str, Any]] = [
    {},
    {"n": 1},
    {"n": "x"},
    {"n": 1, "ip": "10.0.0.1"},
    {"n": 1, "ip": 3},
    {"n": 1, "who": {"type": "User", "id": "u"}},
    {"n": 1, "who": {"type": "Doc", "id": "u"}},
    {"n": 1, "extra": True},
    {"n": 1, "color": {"type": "Color", "id": "pink"}},
]


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(_PRINCIPALS),
    st.sampled_from(_ACTIONS),
    st.sampled_from(_RESOURCES),
    st.sampled_from(_CONTEXTS),
)
def test_request_validity_agrees_with_cedarpy(
    schema: Schema, p: str, a: str, r: str, ctx: dict[str, Any]
) -> None:
    """The engine's pipeline: schema-directed context parsing, then request validation."""
    try:
        context = parse_context(ctx, schema, uid(a))
        ours = [str(f) for f in validate_request(uid(p), uid(a), uid(r), context, schema)]
    except RequestError as exc:
        ours = [str(exc)]
    request = {"principal": p, "action": a, "resource": r, "context": ctx}
    theirs = cedarpy.is_authorized(
        request, "permit(principal, action, resource);", [], schema=SCHEMA_TEXT
    )
    rejected = any("failed to build request" in str(e) for e in theirs.diagnostics.errors)
    assert (ours != []) == rejected, (request, ours, theirs.diagnostics.errors)


def test_request_fast_path_only_passes_requests_the_full_check_passes(schema: Schema) -> None:
    """``validate_request`` answers the common request from tables; it must say exactly
    what the full check says, and take the fast path for well-typed requests."""
    from polang.language.validate import _plainly_valid, _request_findings

    fast = 0
    for p in [*_PRINCIPALS, None]:
        for a in _ACTIONS:
            for r in [*_RESOURCES, None]:
                for ctx in [*_CONTEXTS, None]:
                    for typed in (True, False):
                        try:
                            context = (
                                None
                                if ctx is None
                                else parse_context(ctx, schema if typed else None, uid(a))
                            )
                        except RequestError:
                            continue
                        args = (uid(p) if p else None, uid(a), uid(r) if r else None, context)
                        full = _request_findings(*args, schema)
                        assert validate_request(*args, schema) == full, args
                        if _plainly_valid(*args, schema):
                            fast += 1
                            assert full == [], args
    assert fast > 20


# ------------------------------------------------------------------ multi-issuer schema

GOOD_MULTI = """
type Url = { host: String, path: String, protocol: String };
type TokensContext = { total_token_count: Long };
namespace Acme {
  entity TrustedIssuer { issuer_entity_id: Url };
  entity Access_token {
    token_type: String, jti: String, iss?: TrustedIssuer, exp: Long, validated_at: Long,
    aud?: String, scope?: Set<String>
  } tags Set<String>;
  entity Workload;
  action call appliesTo {
    principal: [Workload], resource: [Workload],
    context: { tokens?: TokensContext, network?: String }
  };
}
namespace Other {
  entity TrustedIssuer { issuer_entity_id: Url };
}
"""


def test_multi_issuer_schema_that_fits() -> None:
    s = parse_schema(GOOD_MULTI)
    assert check_multi_issuer_schema(s, ["Acme", "Other"], ["Acme::Access_token"]) == []


def test_multi_issuer_schema_lists_each_missing_piece() -> None:
    s = parse_schema(
        """
        type Url = { host: String, path: String };
        namespace Acme {
          entity TrustedIssuer { issuer_entity_id: Url };
          entity Id_token { token_type: String, jti: Long, exp: Long, sub: String } tags String;
          entity Workload;
          action call appliesTo { principal: [Workload], resource: [Workload], context: {} };
          action ping appliesTo {
            principal: [Workload], resource: [Workload],
            context: { tokens: { count: Long } }
          };
        }
        """
    )
    missing = check_multi_issuer_schema(s, ["Acme", "Nope"], ["Acme::Id_token", "Acme::Gone"])
    assert missing == [
        "`Acme::TrustedIssuer.issuer_entity_id` lacks the String field `protocol`",
        "issuer `Nope`: entity type `Nope::TrustedIssuer` is not declared",
        "token entity type `Acme::Id_token` must declare `tags Set<String>`",
        "`Acme::Id_token.jti` must be String, not Long",
        # `iss` and `validated_at` may be left out: the engine sets only what is declared;
        # `sub` may be required (a token without it is dropped when its entity is built)
        "token entity type `Acme::Gone` is not declared",
        'the context of Acme::Action::"call" lacks the field `tokens` (`tokens?: TokensContext`)',
        # `tokens` may be required (Cedarling's stores declare it so)
        'the `tokens` record in the context of Acme::Action::"ping" lacks the required Long field '
        "`total_token_count`",
    ]


def test_multi_issuer_context_check_can_be_limited_to_some_actions() -> None:
    text = GOOD_MULTI.replace(
        "  entity Workload;",
        "  entity Workload;\n"
        "  action local appliesTo { principal: [Workload], resource: [Workload] };",
    )
    s = parse_schema(text)
    assert check_multi_issuer_schema(s, ["Acme"], []) == [
        'the context of Acme::Action::"local" lacks the field `tokens` (`tokens?: TokensContext`)'
    ]
    call = EntityUID("Acme::Action", "call")
    assert check_multi_issuer_schema(s, ["Acme"], [], actions=[call]) == []


def test_multi_issuer_iss_must_name_its_own_trusted_issuer() -> None:
    text = GOOD_MULTI.replace("iss?: TrustedIssuer", "iss?: Other::TrustedIssuer")
    missing = check_multi_issuer_schema(parse_schema(text), ["Acme"], ["Acme::Access_token"])
    assert missing == [
        "`Acme::Access_token.iss` is declared as `Other::TrustedIssuer`, but issuer `Acme` builds "
        "`iss` as `Acme::TrustedIssuer` (the issuer's own TrustedIssuer); declare "
        "`iss?: Acme::TrustedIssuer`"
    ]
