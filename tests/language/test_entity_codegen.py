"""The generated entity and context converters (``entity_codegen.py``) against the parsers.

A generated converter must give exactly the full parser's entity (uid, attributes in the
caller's order, parents, tags, every value by type and text), or ``None`` (the full parser
then gives the value or the error); it must take the same objects as the generic fast
path. Checked over the conformance corpus and over hypothesis-generated objects, valid and
invalid: wrong types, missing and extra attributes, deep values, tags, odd references.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import EntityError, RequestError
from polang.language import entities as ent_mod
from polang.language import entity_codegen as gen
from polang.language.entities import Entity, parse_context, parse_entity, parse_mapped_entity
from polang.language.schema import (
    EntityRefType,
    ExtensionType,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    parse_schema,
)
from polang.language.values import EntityUID, RecordValue, value_eq

SCHEMA_TEXT = """
entity Group enum ["admins", "staff"];
entity Team in [Group];
entity Org;
entity User in [Team, Group, Org] = {
  age: Long,
  name?: String,
  active?: Bool,
  boss?: User,
  team?: Team,
  group?: Group,
  ip?: ipaddr,
  score?: decimal,
  born?: datetime,
  ttl?: duration,
  friends?: Set<User>,
  flags?: Set<Bool>,
  nums?: Set<Long>,
  ips?: Set<ipaddr>,
  groups?: Set<Group>,
  address?: { street: String, zip?: Long, geo?: { lat: Long, labels: Set<String> } },
  deep?: Set<Set<Set<Set<Set<Set<Set<Set<Set<Set<Long>>>>>>>>>>,
} tags Set<String>;
entity Doc in [Org] = { owner: User, "odd key'); import os #": String } tags String;
entity Plain;
action read appliesTo { principal: User, resource: [Doc, Plain], context: {
  ip: ipaddr, level?: Long, meta?: { trace: String, who?: User, seen?: Set<Team> } } };
"""
SCHEMA = parse_schema(SCHEMA_TEXT)
READ = EntityUID("Action", "read")


# ------------------------------------------------------------------ comparison helpers


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and value_eq(a, b) and repr(a) == repr(b)


def _same_fields(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)


def _same_entity(a: Entity, b: Entity) -> bool:
    return (
        a.uid == b.uid
        and type(a.uid) is EntityUID
        and a.parents == b.parents
        and _same_fields(a.attrs, b.attrs)
        and _same_fields(a.tags, b.tags)
    )


def _full(obj: Any, schema: Schema) -> Entity | None:
    try:
        return ent_mod._parse_entity(obj, schema, "$[0]")
    except ent_mod._Bad:
        return None


def _dispatch_uid(obj: Any, schema: Schema) -> EntityUID | None:
    """What ``_fast_entity`` checks before it calls a converter: a dict of entity keys,
    a plain uid of a plain type."""
    if type(obj) is not dict or not obj.keys() <= ent_mod.ENTITY_KEYS:
        return None
    uid = ent_mod._fast_uid(obj.get("uid"))
    if uid is None or uid.type not in ent_mod._plain_types(schema):
        return None
    return uid


_BUILT: dict[tuple[int, str, Any], Any] = {}


def _entity_converter(schema: Schema, type_name: str) -> Any:
    """``entity_codegen.entity_converter``, generated once per schema and type here."""
    key = (id(schema), "entity", type_name)
    if key not in _BUILT:
        _BUILT[key] = (schema, gen.entity_converter(schema, type_name))
    return _BUILT[key][1]


def check_entity(obj: Any, schema: Schema) -> bool:
    """The generated converter against the full parser and the generic fast path; True
    when the converter took the object."""
    uid = _dispatch_uid(obj, schema)
    if uid is None:
        return False
    quick = _entity_converter(schema, uid.type)(obj, uid)
    generic = ent_mod._generic_entity(obj, uid, schema)
    assert (quick is None) == (generic is None), obj
    if quick is None:
        return False
    full = _full(obj, schema)
    assert full is not None, obj
    assert _same_entity(quick, full), (obj, quick, full)
    assert _same_entity(quick, generic), (obj, quick, generic)  # type: ignore[arg-type]
    return True


def _public(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except (EntityError, RequestError) as e:
        return "error", str(e)


# ------------------------------------------------------------------ the corpus


def test_corpus_entities_and_contexts_convert_as_the_full_parser(corpus_dir: Path) -> None:
    checked = taken = contexts = 0
    specs = sorted((corpus_dir / "corpus-tests").glob("*.json"))
    for spec_file in [f for f in specs if not f.name.endswith(".entities.json")][::6]:
        spec = json.loads(spec_file.read_text())
        schema = parse_schema((corpus_dir / spec["schema"]).read_text())
        for obj in json.loads((corpus_dir / spec["entities"]).read_text()):
            checked += 1
            taken += check_entity(obj, schema)
        for req in spec["requests"]:
            action = EntityUID(req["action"]["type"], req["action"]["id"])
            declared = schema.action(action)
            ctx = req.get("context")
            if declared is None or type(ctx) is not dict:
                continue
            quick = gen.context_converter(schema, action)(ctx)
            generic = ent_mod._fast_record(ctx, declared.context, schema)
            assert (quick is None) == (generic is None), ctx
            try:
                full: RecordValue | None = ent_mod._record(
                    ctx, declared.context, "$.context", schema
                )
            except ent_mod._Bad:
                full = None
            if quick is not None:
                contexts += 1
                assert full is not None and _same_fields(quick.fields, full.fields), ctx
    assert checked > 500 and taken > checked // 8 and contexts > 100


# ------------------------------------------------------------------ generated objects

_TYPE_NAMES = ["User", "Team", "Group", "Org", "Doc", "Plain", "Nope", "Bad Name", "Action"]
_IDS = ["a", "admins", "staff", "x"]


_ANY_TYPE_NAME = st.sampled_from(_TYPE_NAMES)


def _ref(types: st.SearchStrategy[str] = _ANY_TYPE_NAME) -> st.SearchStrategy[Any]:
    ids = st.sampled_from(_IDS)
    return st.one_of(
        st.builds(lambda t, i: {"type": t, "id": i}, types, ids),
        st.builds(lambda t, i: {"__entity": {"type": t, "id": i}}, types, ids),
        st.builds(lambda t, i: {"__entity": {"type": t, "id": i}, "x": 1}, types, ids),
        st.builds(lambda t, i: {"type": t, "id": i, "extra": 1}, types, ids),
        st.builds(lambda t: {"type": t}, types),
        st.builds(lambda t: {"__entity": {"type": t}}, types),
        st.builds(lambda t: {"type": t, "id": 5}, types),
        st.builds(lambda i: {"type": 7, "id": i}, ids),
        st.builds(lambda t, i: {"__entity": [t, i]}, types, ids),
        st.just({"__extn": {"fn": "ip", "arg": "1.2.3.4"}}),
    )


_EXT_TEXT = {
    "ipaddr": ["10.0.0.1", "::1", "10.0.0.0/8", "10.0.0.999", "nope"],
    "decimal": ["1.5", "-0.0001", "1.23456", "x"],
    "datetime": ["2024-01-01", "2024-01-01T00:00:00Z", "2024-13-01"],
    "duration": ["1h", "-2d3m", "1x"],
}
_EXT_FN = {"ipaddr": "ip", "decimal": "decimal", "datetime": "datetime", "duration": "duration"}


def _extension(name: str) -> st.SearchStrategy[Any]:
    text = st.sampled_from(_EXT_TEXT[name])
    fns = st.sampled_from([_EXT_FN[name], _EXT_FN[name], "ip", "decimal", "nope"])
    return st.one_of(
        text,
        st.builds(lambda f, a: {"__extn": {"fn": f, "arg": a}}, fns, text),
        st.builds(lambda a: {"__extn": {"fn": _EXT_FN[name], "args": [a]}}, text),
    )


def _any_json() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.integers(min_value=-(2**64), max_value=2**64),
        st.booleans(),
        st.text(max_size=4),
        st.none(),
        st.floats(allow_nan=False),
        _ref(),
        _extension("ipaddr"),
    )
    return st.recursive(
        leaves,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
        max_leaves=6,
    )


def _typed(t: SchemaType, depth: int = 0) -> st.SearchStrategy[Any]:
    """JSON for a value of ``t``, now and then something else (any JSON value)."""
    if type(t) is PrimType:
        right: st.SearchStrategy[Any] = {
            "Long": st.one_of(
                st.integers(min_value=-(2**63), max_value=2**63 - 1),
                st.sampled_from([2**63, -(2**63) - 1, True]),
            ),
            "String": st.text(max_size=5),
            "Bool": st.booleans(),
        }[t.name]
    elif type(t) is EntityRefType:
        right = _ref(st.sampled_from([t.name, t.name, t.name, "Team", "Nope"]))
    elif type(t) is ExtensionType:
        right = _extension(t.name)
    elif type(t) is SetType:
        right = st.lists(_typed(t.element, depth + 1), max_size=3 if depth < 3 else 1)
    else:
        assert isinstance(t, RecordType)
        right = _record(t, depth + 1)
    if depth > 3:
        return right
    return st.one_of(right, right, right, _any_json())


def _record(rt: RecordType, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    required = {k: _typed(a.type, depth) for k, a in rt.attributes.items() if a.required}
    optional = {k: _typed(a.type, depth) for k, a in rt.attributes.items() if not a.required}
    base = st.fixed_dictionaries(required, optional=optional)

    def mutate(d: dict[str, Any], how: int, key: str) -> dict[str, Any]:
        d = dict(d)
        if how == 1 and d:
            d.pop(sorted(d)[0])  # a missing attribute (required or not)
        elif how == 2:
            d[key] = 1  # an extra (or a mistyped) attribute
        elif how == 3:
            d = dict(reversed(list(d.items())))  # another order
        return d

    return st.builds(
        mutate, base, st.integers(min_value=0, max_value=8), st.sampled_from(["zz", "age", "ip"])
    )


def _entity_objects(type_name: str) -> st.SearchStrategy[Any]:
    et = SCHEMA.entity_types[type_name]
    uid = st.one_of(
        st.just({"type": type_name, "id": "u"}),
        st.just({"__entity": {"type": type_name, "id": "u"}}),
        _ref(),
    )
    parent_types = st.sampled_from([*et.member_of, "Nope", "Doc"] if et.member_of else ["Org"])
    tags: st.SearchStrategy[Any] = st.dictionaries(
        st.text(max_size=3), _typed(et.tags) if et.tags is not None else _any_json(), max_size=3
    )
    obj = st.fixed_dictionaries(
        {"uid": uid, "attrs": _record(et.shape)},
        optional={
            "parents": st.one_of(st.lists(_ref(parent_types), max_size=3), _any_json()),
            "tags": st.one_of(tags, tags, st.none(), st.just([]), st.just({})),
            "parnets": st.just([]),
        },
    )
    return st.one_of(obj, obj, obj, obj, _any_json())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["User", "Doc", "Team", "Org", "Plain"]).flatmap(_entity_objects))
def test_generated_entity_converter_equals_the_full_parser(obj: Any) -> None:
    check_entity(obj, SCHEMA)
    # and through the public parser (generated converters in place): the same entity as
    # the full parser, or the same error message
    for _ in range(ent_mod.GENERATE_AFTER):
        got = _public(lambda: parse_entity(obj, SCHEMA, path="$[0]"))
    want = _public(lambda: _full_public(obj))
    if got[0] == "ok" and want[0] == "ok":
        assert _same_entity(got[1], want[1]), obj
    else:
        assert got == want, obj


def _full_public(obj: Any) -> Entity:
    try:
        return ent_mod._parse_entity(obj, SCHEMA, "$[0]")
    except ent_mod._Bad as bad:
        raise ent_mod._entity_error(ent_mod._uid_for_message(obj), bad) from None


_CONTEXT_READ = gen.context_converter(SCHEMA, READ)
_MAPPED = {t: gen.mapped_converter(SCHEMA, t) for t in ("User", "Doc")}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record(SCHEMA.actions[READ].context))
def test_generated_context_converter_equals_the_full_parser(ctx: dict[str, Any]) -> None:
    declared = SCHEMA.actions[READ]
    quick = _CONTEXT_READ(ctx)
    generic = ent_mod._fast_record(ctx, declared.context, SCHEMA)
    assert (quick is None) == (generic is None), ctx
    try:
        full: RecordValue | None = ent_mod._record(ctx, declared.context, "$.context", SCHEMA)
    except ent_mod._Bad:
        full = None
    if quick is not None:
        assert full is not None and _same_fields(quick.fields, full.fields), ctx
    for _ in range(ent_mod.GENERATE_AFTER):
        got = _public(lambda: parse_context(ctx, SCHEMA, READ))
    if full is not None:
        assert got[0] == "ok" and _same_fields(got[1].fields, full.fields)
    else:
        assert got[0] == "error"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record(SCHEMA.entity_types["User"].shape), st.sampled_from(["User", "Doc", "Nope"]))
def test_generated_mapped_converter_equals_the_full_parser(
    attrs: dict[str, Any], type_name: str
) -> None:
    obj = {"cedar_entity_mapping": {"entity_type": type_name, "id": "m"}, **attrs}
    uid = EntityUID(type_name, "m")
    try:
        full: Entity | None = ent_mod._build(
            uid, attrs, "$", [], {}, "$", SCHEMA, "$.cedar_entity_mapping", "$"
        )
    except ent_mod._Bad:
        full = None
    if type_name in ent_mod._plain_types(SCHEMA):
        quick = _MAPPED[type_name](obj, uid)
        if quick is not None:
            assert full is not None and _same_entity(quick, full), obj
    for _ in range(ent_mod.GENERATE_AFTER):
        got = _public(lambda: parse_mapped_entity(obj, SCHEMA))
    if full is not None:
        assert got[0] == "ok" and _same_entity(got[1], full)
    else:
        assert got[0] == "error"


# ------------------------------------------------------------------ particular cases


def test_every_common_form_is_taken_and_equal() -> None:
    obj = {
        "uid": {"type": "User", "id": "alice"},
        "attrs": {
            "age": 30,
            "name": "Alice",
            "boss": {"__entity": {"type": "User", "id": "bob"}},
            "team": {"type": "Team", "id": "t"},
            "ip": "10.0.0.1",
            "friends": [{"type": "User", "id": "b"}, {"type": "User", "id": "b"}],
            "nums": [1, 2, 2],
            "flags": [True, False],
            "address": {"street": "Main", "geo": {"lat": 3, "labels": ["x"]}},
            "deep": [[[[[[[[[[1]]]]]]]]]],
        },
        "parents": [{"type": "Team", "id": "t"}, {"__entity": {"type": "Org", "id": "o"}}],
        "tags": {"k": ["a", "b"]},
    }
    assert check_entity(obj, SCHEMA)
    # references to an enumerated type are left to the generic path (and the parser)
    assert not check_entity(
        {**obj, "attrs": {"age": 1, "group": {"type": "Group", "id": "admins"}}}, SCHEMA
    )
    doc = {
        "uid": {"type": "Doc", "id": "d"},
        "attrs": {"owner": {"type": "User", "id": "a"}, "odd key'); import os #": "x"},
        "tags": {"t": "v"},
    }
    assert check_entity(doc, SCHEMA)  # attribute names never enter the source


def test_what_the_converter_leaves_gets_the_full_parsers_error() -> None:
    base = {"uid": {"type": "User", "id": "alice"}, "attrs": {"age": 1}}
    for attrs, message in (
        ({"age": "1"}, r"attrs\.age: expected Long"),
        ({"age": 2**63}, r"outside the 64-bit range"),
        ({}, r"required attribute `age` is missing"),
        ({"age": 1, "zz": 2}, r"attrs\.zz: attribute `zz` is not declared"),
        ({"age": 1, "group": {"type": "Group", "id": "nobody"}}, r"enumerated"),
        ({"age": 1, "boss": {"type": "Team", "id": "t"}}, r"expected an entity of type User"),
        ({"age": 1, "nums": [1, "2"]}, r"attrs\.nums\[1\]: expected Long"),
        ({"age": 1, "deep": [[[[[[[[[["x"]]]]]]]]]]}, r"expected Long"),
        ({"age": 1, "address": {"street": 5}}, r"attrs\.address\.street"),
    ):
        obj = {**base, "attrs": attrs}
        uid = EntityUID("User", "alice")
        assert gen.entity_converter(SCHEMA, "User")(obj, uid) is None, attrs
        with pytest.raises(EntityError, match=message):
            parse_entity(obj, SCHEMA)
    bad_parent = {**base, "parents": [{"type": "Doc", "id": "d"}]}
    assert gen.entity_converter(SCHEMA, "User")(bad_parent, EntityUID("User", "alice")) is None
    with pytest.raises(EntityError, match=r"cannot have a parent of type `Doc`"):
        parse_entity(bad_parent, SCHEMA)


def test_converters_are_generated_on_a_types_nth_use_and_kept_with_the_schema() -> None:
    schema = parse_schema("entity G; entity U in [G] = { n: Long };")
    obj = {
        "uid": {"type": "U", "id": "u"},
        "attrs": {"n": 1},
        "parents": [{"type": "G", "id": "g"}],
    }
    tables = ent_mod._converters(schema)
    for k in range(ent_mod.GENERATE_AFTER - 1):
        assert parse_entity(obj, schema).attrs == {"n": 1}
        assert "U" not in tables.entity, k
    parse_entity(obj, schema)
    conv = tables.entity["U"]
    assert conv is not ent_mod._GENERIC and "def convert_entity" in (conv.__doc__ or "")
    parse_entity(obj, schema)
    assert tables.entity["U"] is conv  # built once
    # a type that gets none (undeclared) is never counted or kept
    for _ in range(ent_mod.GENERATE_AFTER + 1):
        with pytest.raises(EntityError):
            parse_entity({"uid": {"type": "X", "id": "x"}, "attrs": {}}, schema)
    assert "X" not in tables.entity and ("entity", "X") not in tables.uses


def test_types_deeper_than_max_depth_are_converted_by_the_generic_path() -> None:
    depth = 20  # past MAX_DEPTH, within the schema's own limit (MAX_SCHEMA_TYPE_DEPTH)
    t = "Long"
    for _ in range(depth):
        t = f"Set<{t}>"
    schema = parse_schema(f"entity U = {{ v: {t}, w: {{ x: {t} }} }};")
    value: Any = 1
    for _ in range(depth):
        value = [value]
    obj = {"uid": {"type": "U", "id": "u"}, "attrs": {"v": value, "w": {"x": value}}}
    assert check_entity(obj, schema)
    assert "_fast_value" in (gen.entity_converter(schema, "U").__doc__ or "")
    for _ in range(ent_mod.GENERATE_AFTER + 1):
        e = parse_entity(obj, schema)
    full = _full(obj, schema)
    assert full is not None and _same_entity(e, full)
    bad = {"uid": {"type": "U", "id": "u"}, "attrs": {"v": [[["x"]]], "w": {"x": value}}}
    assert not check_entity(bad, schema)
    with pytest.raises(EntityError, match=r"attrs\.v\[0\]\[0\]\[0\]: expected Set"):
        parse_entity(bad, schema)
