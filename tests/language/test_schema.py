"""Schemas: both forms into one model, name resolution, helpers, JSON round trips, corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cedarpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import SchemaError
from polang.language.entities import Entity
from polang.language.schema import (
    BOOL,
    LONG,
    RESERVED_WORDS,
    SCHEMA_KEYWORDS,
    STRING,
    ActionDef,
    Attribute,
    EntityRefType,
    EntityTypeDef,
    ExtensionType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    parse_schema,
    parse_schema_json,
)
from polang.language.values import EntityUID


def A(ident: str, ns: str = "") -> EntityUID:
    return EntityUID(f"{ns}::Action" if ns else "Action", ident)


def attrs(s: Schema, etype: str) -> dict[str, Attribute]:
    et = s.entity_type(etype)
    assert et is not None
    return et.shape.attributes


def roundtrip(s: Schema) -> Schema:
    """Through JSON *text*, as a store would write and read it."""
    return parse_schema_json(json.dumps(s.to_json()))


def assert_same(a: Schema, b: Schema) -> None:
    """Model equality, plus the JSON form (which also carries attribute annotations)."""
    assert a == b
    assert a.to_json() == b.to_json()


# ---------------------------------------------------------------- the human-readable form


PHOTOS = """
// A photo-sharing application.
@doc("the app")
namespace Photos {
  @doc("a user")
  entity User in [UserGroup] = {
    "department": String,
    jobLevel: Long,
    @doc("may be absent")
    manager?: User,
    "odd name!": Bool,
  } tags Set<String>;
  entity UserGroup;
  entity Album in Album { owner: User, private: Bool };   // no `=`
  entity Photo in Album;
  entity Color enum ["red", "green"];
  type Address = { street: String, zip?: __cedar::String };
  entity Shop = { address: Address, ip: ipaddr, price: decimal, opened: datetime,
                  open: duration, tags: Set<Set<Long>> };

  @doc("a group") @internal
  action read;
  action "view photo", edit in [read] appliesTo {
    principal: User,
    resource: [Photo, Album],
    context: { authenticated: Bool, ip?: __cedar::ipaddr },
  };
  action list in "read" appliesTo { resource: Album, principal: [User] };
  action other in [Photos::Action::"read"];
}
"""


def test_human_form_builds_the_model() -> None:
    s = parse_schema(PHOTOS, "photos.polangschema")
    assert s.namespaces == ("Photos",)
    assert s.namespace_annotations["Photos"] == (("doc", "the app"),)
    user = s.entity_type("Photos::User")
    assert user is not None
    assert user.member_of == ("Photos::UserGroup",)
    assert user.tags == SetType(STRING)
    assert user.annotations == (("doc", "a user"),)
    a = user.shape.attributes
    assert list(a) == ["department", "jobLevel", "manager", "odd name!"]
    assert a["department"] == Attribute(STRING)
    assert a["jobLevel"] == Attribute(LONG)
    assert a["manager"] == Attribute(EntityRefType("Photos::User"), required=False)
    assert a["manager"].annotations == (("doc", "may be absent"),)
    assert a["odd name!"].type == BOOL
    album = s.entity_type("Photos::Album")
    assert album is not None and album.member_of == ("Photos::Album",)
    assert list(album.shape.attributes) == ["owner", "private"]
    color = s.entity_type("Photos::Color")
    assert color is not None and color.enum == ("red", "green")
    shop = attrs(s, "Photos::Shop")
    address = RecordType({"street": Attribute(STRING), "zip": Attribute(STRING, False)})
    assert shop["address"].type == address
    assert s.common_types == {"Photos::Address": address}
    assert shop["ip"].type == ExtensionType("ipaddr")
    assert shop["price"].type == ExtensionType("decimal")
    assert shop["opened"].type == ExtensionType("datetime")
    assert shop["open"].type == ExtensionType("duration")
    assert shop["tags"].type == SetType(SetType(LONG))


def test_human_form_actions() -> None:
    s = parse_schema(PHOTOS)
    read = s.action(A("read", "Photos"))
    assert read == ActionDef(
        A("read", "Photos"), applies_to=False, annotations=(("doc", "a group"), ("internal", None))
    )
    for name in ("view photo", "edit"):
        a = s.action(A(name, "Photos"))
        assert a is not None
        assert a.member_of == (A("read", "Photos"),)
        assert a.principal_types == ("Photos::User",)
        assert a.resource_types == ("Photos::Photo", "Photos::Album")
        assert a.context == RecordType(
            {"authenticated": Attribute(BOOL), "ip": Attribute(ExtensionType("ipaddr"), False)}
        )
        assert a.applies_to
    listing = s.action(A("list", "Photos"))
    assert listing is not None
    assert listing.member_of == (A("read", "Photos"),)
    assert listing.context == RecordType()
    assert s.action(A("other", "Photos")) == ActionDef(
        A("other", "Photos"), (A("read", "Photos"),), applies_to=False
    )
    assert s.action(A("missing", "Photos")) is None
    assert s.action_types() == {"Photos::Action"}
    assert s.is_action_type("Photos::Action") and not s.is_action_type("Action")


def test_keywords_are_names_where_no_keyword_is_expected() -> None:
    s = parse_schema(
        "entity entity, tags, principal, namespace, type, Set;"
        "entity context in [entity] = { in_: Long, entity: Long, action: String, tags: Bool,"
        '  "in": Long, appliesTo: Long, enum: Long, Set: Long };'
        "type type = Long; type appliesTo = { principal: type };"
        "action action appliesTo { principal: principal, resource: tags, context: appliesTo };"
    )
    assert set(s.entity_types) == {
        "entity",
        "tags",
        "principal",
        "namespace",
        "type",
        "Set",
        "context",
    }
    assert list(attrs(s, "context")) == [
        "in_",
        "entity",
        "action",
        "tags",
        "in",
        "appliesTo",
        "enum",
        "Set",
    ]
    action = s.action(A("action"))
    assert action is not None
    assert action.context == RecordType({"principal": Attribute(LONG)})


def test_strings_comments_and_escapes() -> None:
    s = parse_schema(
        '// leading\nentity E = { "a\\n\\t\\"\\\\\\0\\u{1F600}\\u{41}": Long }; // trailing\n'
        'action "x\\u{e9}" ; // no newline at the end'
    )
    assert list(attrs(s, "E")) == ['a\n\t"\\\x00\U0001f600A']
    assert A("xé") in s.actions


def test_annotations_without_value_and_on_every_declaration() -> None:
    s = parse_schema(
        '@a @b("") namespace N { @c("x") type T = Long; @d entity E = { @e f: T }; @g action x; }'
    )
    assert s.namespace_annotations["N"] == (("a", None), ("b", ""))
    assert s.common_type_annotations["N::T"] == (("c", "x"),)
    et = s.entity_type("N::E")
    assert et is not None and et.annotations == (("d", None),)
    assert et.shape.attributes["f"].annotations == (("e", None),)
    action = s.action(A("x", "N"))
    assert action is not None and action.annotations == (("g", None),)


def test_multiple_entity_names_share_one_definition() -> None:
    s = parse_schema("entity G; entity A, B in G = { x: Long } tags String;")
    a, b = s.entity_type("A"), s.entity_type("B")
    assert a is not None and b is not None
    assert (
        (a.member_of, a.shape, a.tags)
        == (b.member_of, b.shape, b.tags)
        == (
            ("G",),
            RecordType({"x": Attribute(LONG)}),
            STRING,
        )
    )


def test_applies_to_accepts_any_order_and_a_trailing_comma() -> None:
    a = parse_schema("entity U; action a appliesTo { context: {}, resource: U, principal: U, };")
    action = a.action(A("a"))
    assert action is not None
    assert (action.principal_types, action.resource_types) == (("U",), ("U",))


# ---------------------------------------------------------------- name resolution


def test_common_type_beats_entity_type_beats_builtin() -> None:
    s = parse_schema(
        """
        namespace Demo {
          entity Host { ip: ipaddr, bandwidth: decimal };
          entity String { groups: Set<__cedar::String> };
          type ipaddr = { repr: String, isV4: Bool };
        }
        """
    )
    ip_type = RecordType(
        {"repr": Attribute(EntityRefType("Demo::String")), "isV4": Attribute(BOOL)}
    )
    host = attrs(s, "Demo::Host")
    assert host["ip"].type == ip_type
    assert host["bandwidth"].type == ExtensionType("decimal")
    assert attrs(s, "Demo::String")["groups"].type == SetType(STRING)


def test_an_entity_named_like_a_primitive_wins_over_it() -> None:
    s = parse_schema("entity Long; entity X = { a: Long, b: __cedar::Long };")
    assert attrs(s, "X")["a"].type == EntityRefType("Long")
    assert attrs(s, "X")["b"].type == LONG


def test_unqualified_names_fall_back_to_the_empty_namespace() -> None:
    s = parse_schema(
        "entity Root; type Id = String;"
        "namespace N { entity U in [Root] = { id: Id, root: Root, me: U }; }"
        'namespace M { entity V = { u: N::U }; action a in [Action::"g"]; }'
        "action g;"
    )
    u = s.entity_type("N::U")
    assert u is not None and u.member_of == ("Root",)
    assert u.shape.attributes["id"].type == STRING
    assert u.shape.attributes["root"].type == EntityRefType("Root")
    assert u.shape.attributes["me"].type == EntityRefType("N::U")
    assert attrs(s, "M::V")["u"].type == EntityRefType("N::U")
    action = s.action(A("a", "M"))
    assert action is not None and action.member_of == (A("g"),)


def test_action_references_resolve_like_cedar() -> None:
    """Checked against cedarpy: a bare name or `Action::"x"` is the namespace's action if
    declared, else the empty namespace's; a qualified type is taken as written."""
    s = parse_schema(
        "entity U;"
        'namespace N { action a in [b, g, Action::"c", O::Action::"o"]'
        "  appliesTo { principal: U, resource: U }; action b; action c; }"
        "namespace O { action o; }"
        "action g;"
    )
    a = s.action(A("a", "N"))
    assert a is not None
    assert a.member_of == (A("b", "N"), A("g"), A("c", "N"), A("o", "O"))
    pol = 'permit(principal, action in Action::"g", resource);'
    req = {"principal": 'U::"x"', "action": 'N::Action::"a"', "resource": 'U::"x"', "context": {}}
    text = (
        'entity U; namespace N { action a in [b, g, Action::"c", O::Action::"o"] '
        "appliesTo { principal: U, resource: U }; action b; action c; } "
        "namespace O { action o; } action g;"
    )
    assert cedarpy.is_authorized(req, pol, [], schema=text).decision == cedarpy.Decision.Allow


def test_qualified_names_are_never_relative() -> None:
    with pytest.raises(SchemaError, match="undefined type `M::Y`"):
        parse_schema("namespace N { entity X = { a: M::Y }; } namespace N::M { entity Y; }")


def test_json_type_name_is_a_common_type_or_builtin_never_an_entity() -> None:
    base: dict[str, Any] = {"entityTypes": {"U": {}}, "actions": {}}
    doc = {"": {**base, "commonTypes": {"T": {"type": "Bool"}, "I": {"type": "ipaddr"}}}}
    s = parse_schema_json(doc)
    assert s.common_types == {"T": BOOL, "I": ExtensionType("ipaddr")}
    doc = {"": {**base, "commonTypes": {"T": {"type": "U"}}}}
    with pytest.raises(SchemaError, match="undefined common type `U`"):
        parse_schema_json(doc)


# ---------------------------------------------------------------- the JSON form

PHOTOS_JSON: dict[str, Any] = {
    "Photos": {
        "annotations": {"doc": "the app"},
        "commonTypes": {
            "Address": {
                "type": "Record",
                "attributes": {
                    "street": {"type": "String"},
                    "zip": {"type": "__cedar::String", "required": False},
                },
            }
        },
        "entityTypes": {
            "User": {
                "memberOfTypes": ["UserGroup"],
                "annotations": {"doc": "a user"},
                "shape": {
                    "type": "Record",
                    "attributes": {
                        "department": {"type": "String"},
                        "jobLevel": {"type": "Long"},
                        "manager": {
                            "type": "Entity",
                            "name": "User",
                            "required": False,
                            "annotations": {"doc": "may be absent"},
                        },
                        "odd name!": {"type": "Boolean"},
                    },
                },
                "tags": {"type": "Set", "element": {"type": "String"}},
            },
            "UserGroup": {},
            "Album": {
                "memberOfTypes": ["Album"],
                "shape": {
                    "type": "Record",
                    "attributes": {
                        "owner": {"type": "EntityOrCommon", "name": "User"},
                        "private": {"type": "Boolean"},
                    },
                },
            },
            "Photo": {"memberOfTypes": ["Photos::Album"]},
            "Color": {"enum": ["red", "green"]},
            "Shop": {
                "shape": {
                    "type": "Record",
                    "attributes": {
                        "address": {"type": "Address"},
                        "ip": {"type": "Extension", "name": "ipaddr"},
                        "price": {"type": "EntityOrCommon", "name": "decimal"},
                        "opened": {"type": "datetime"},
                        "open": {"type": "Extension", "name": "duration"},
                        "tags": {
                            "type": "Set",
                            "element": {"type": "Set", "element": {"type": "Long"}},
                        },
                    },
                }
            },
        },
        "actions": {
            "read": {"annotations": {"doc": "a group", "internal": None}},
            "view photo": {
                "memberOf": [{"id": "read"}],
                "appliesTo": {
                    "principalTypes": ["User"],
                    "resourceTypes": ["Photo", "Album"],
                    "context": {
                        "type": "Record",
                        "attributes": {
                            "authenticated": {"type": "Boolean"},
                            "ip": {"type": "Extension", "name": "ipaddr", "required": False},
                        },
                    },
                },
            },
            "edit": {
                "memberOf": [{"id": "read", "type": "Action"}],
                "appliesTo": {
                    "principalTypes": ["User"],
                    "resourceTypes": ["Photo", "Album"],
                    "context": {
                        "type": "Record",
                        "attributes": {
                            "authenticated": {"type": "Boolean"},
                            "ip": {"type": "Extension", "name": "ipaddr", "required": False},
                        },
                    },
                },
            },
            "list": {
                "memberOf": [{"id": "read", "type": "Photos::Action"}],
                "appliesTo": {"principalTypes": ["User"], "resourceTypes": ["Album"]},
            },
            "other": {"memberOf": [{"id": "read"}]},
        },
    }
}


def test_json_form_gives_the_same_model_as_the_human_form() -> None:
    human = parse_schema(PHOTOS)
    from_json = parse_schema_json(PHOTOS_JSON)
    assert_same(human, from_json)
    assert_same(human, parse_schema_json(json.dumps(PHOTOS_JSON).encode()))


def test_json_additional_attributes_and_null_annotations() -> None:
    doc = {
        "N": {
            "entityTypes": {
                "E": {
                    "shape": {
                        "type": "Record",
                        "attributes": {"open": {"type": "Record", "attributes": {}}},
                        "additionalAttributes": True,
                    },
                    "annotations": {"flag": None},
                }
            },
            "actions": {},
        }
    }
    s = parse_schema_json(doc)
    et = s.entity_type("N::E")
    assert et is not None
    assert et.shape.additional and not et.shape.attributes["open"].type.additional  # type: ignore[union-attr]
    assert et.annotations == (("flag", None),)
    assert_same(s, roundtrip(s))


def test_json_empty_applies_to_lists_mean_applies_to_nothing() -> None:
    doc = {
        "": {
            "entityTypes": {"U": {}},
            "actions": {"g": {"appliesTo": {"principalTypes": [], "resourceTypes": ["U"]}}},
        }
    }
    assert parse_schema_json(doc).actions[A("g")] == ActionDef(A("g"), applies_to=False)


def test_json_context_may_name_a_common_record_type() -> None:
    doc = {
        "": {
            "commonTypes": {"Ctx": {"type": "Record", "attributes": {"ok": {"type": "Boolean"}}}},
            "entityTypes": {"U": {"shape": {"type": "Ctx"}}},
            "actions": {
                "a": {
                    "appliesTo": {
                        "principalTypes": ["U"],
                        "resourceTypes": ["U"],
                        "context": {"type": "Ctx"},
                    }
                }
            },
        }
    }
    s = parse_schema_json(doc)
    ctx = RecordType({"ok": Attribute(BOOL)})
    assert s.actions[A("a")].context == ctx
    assert attrs(s, "U") == ctx.attributes


# ---------------------------------------------------------------- helpers other modules use

HIERARCHY = """
entity Org; entity Team in [Org]; entity User in [Team, Org]; entity Doc;
action all; action read in [all]; action view in [read]; action write in all;
"""


def test_ancestor_and_descendant_types() -> None:
    s = parse_schema(HIERARCHY)
    assert s.ancestor_types("User") == {"Team", "Org"}
    assert s.ancestor_types("Team") == {"Org"}
    assert s.ancestor_types("Doc") == frozenset()
    assert s.descendant_types("Org") == {"Team", "User"}
    assert s.descendant_types("User") == frozenset()
    assert s.ancestor_types("Nope") == frozenset()


def test_action_hierarchy_helpers() -> None:
    s = parse_schema(HIERARCHY)
    assert s.action_ancestors(A("view")) == {A("read"), A("all")}
    assert s.action_descendants(A("all")) == {A("read"), A("view"), A("write")}
    assert s.action_descendants(A("view")) == frozenset()


def test_action_entities_carry_their_parent_actions() -> None:
    s = parse_schema(HIERARCHY)
    by_uid = {e.uid: e for e in s.action_entities()}
    assert set(by_uid) == {A("all"), A("read"), A("view"), A("write")}
    assert by_uid[A("view")] == Entity(A("view"), {}, {A("read")}, {})
    assert by_uid[A("all")].parents == set()


def test_to_json_is_the_cedar_json_form() -> None:
    """cedarpy reads our JSON; its rendering in the human form parses back to our model."""
    s = parse_schema(PHOTOS)
    theirs = cedarpy.Schema.from_json_str(json.dumps(s.to_json()))
    assert_same(parse_schema(str(theirs)), s)


def test_round_trip_keeps_annotations_and_empty_namespaces() -> None:
    s = parse_schema('@doc("n") namespace Empty {} entity X = { @a("b") y?: Long };')
    assert s.namespaces == ("Empty", "")
    back = roundtrip(s)
    assert_same(s, back)
    assert back.namespaces == ("Empty", "")
    assert back.entity_types["X"].shape.attributes["y"].annotations == (("a", "b"),)


# ---------------------------------------------------------------- the corpus


def _corpus_schemas(corpus_dir: Path) -> list[Path]:
    files = sorted((corpus_dir / "corpus-tests").glob("*.polangschema"))
    files += sorted((corpus_dir / "sample-data").glob("*/*.polangschema"))
    return files


def test_every_corpus_schema_parses_and_round_trips_through_json(corpus_dir: Path) -> None:
    files = _corpus_schemas(corpus_dir)
    assert len(files) > 3900
    for f in files:
        s = parse_schema(f.read_text("utf-8"), str(f))
        assert s.entity_types or s.actions, f
        back = roundtrip(s)
        assert back == s, f
        assert back.to_json() == s.to_json(), f


def test_corpus_schema_features_are_exercised(corpus_dir: Path) -> None:
    """The corpus is varied: namespaces, tags, enums, annotations, extension types."""
    seen: set[str] = set()
    for f in _corpus_schemas(corpus_dir)[:250]:
        s = parse_schema(f.read_text("utf-8"))
        for et in s.entity_types.values():
            if et.tags is not None:
                seen.add("tags")
            if et.enum is not None:
                seen.add("enum")
            if et.annotations:
                seen.add("annotations")
        if any("::" in n for n in s.entity_types):
            seen.add("namespace")
        if any(a.member_of for a in s.actions.values()):
            seen.add("action groups")
    assert seen == {"tags", "enum", "annotations", "namespace", "action groups"}


# ---------------------------------------------------------------- property: model -> JSON -> model

_RESERVED = RESERVED_WORDS | SCHEMA_KEYWORDS | {"__cedar", "Action"}
_idents = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from("abcxyzABCXYZ_"),
    st.text("abAB09_", max_size=4),
).filter(lambda s: s not in _RESERVED)
_annotations = st.dictionaries(_idents, st.none() | st.text(max_size=5), max_size=1).map(
    lambda d: tuple(d.items())
)


def _records(inner: st.SearchStrategy[SchemaType]) -> st.SearchStrategy[RecordType]:
    attribute = st.builds(Attribute, inner, st.booleans(), _annotations)
    return st.builds(
        RecordType, st.dictionaries(st.text(max_size=4), attribute, max_size=2), st.booleans()
    )


# Entity references are drawn as placeholders (`#3`) and bound to declared names afterwards,
# so the recursive strategies are built once (building them per example is slow).
_TYPES: st.SearchStrategy[SchemaType] = st.recursive(
    st.one_of(
        st.sampled_from([LONG, STRING, BOOL]),
        st.sampled_from(["decimal", "ipaddr", "datetime", "duration"]).map(ExtensionType),
        st.integers(0, 50).map(lambda i: EntityRefType(f"#{i}")),
    ),
    lambda inner: st.one_of(inner.map(SetType), _records(inner)),
    max_leaves=4,
)
_RECORDS = _records(_TYPES)


def _bind(t: Any, names: list[str]) -> Any:
    """The type with every placeholder entity reference bound to a declared name."""
    if isinstance(t, EntityRefType):
        return EntityRefType(names[int(t.name[1:]) % len(names)])
    if isinstance(t, SetType):
        return SetType(_bind(t.element, names))
    if isinstance(t, RecordType):
        return RecordType(
            {
                k: Attribute(_bind(a.type, names), a.required, a.annotations)
                for k, a in t.attributes.items()
            },
            t.additional,
        )
    return t


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    namespaces = draw(
        st.lists(st.sampled_from(["", "A", "B::C", "Ns"]), min_size=1, max_size=3, unique=True)
    )
    # Globally unique base names: no declaration can shadow one of the empty namespace.
    names = draw(st.lists(_idents, min_size=len(namespaces) * 3, max_size=9, unique=True))
    plan = []
    for i, ns in enumerate(namespaces):
        chunk = names[i :: len(namespaces)]
        n_entities = draw(st.integers(1, max(1, len(chunk) - 1)))
        plan.append((ns, chunk[:n_entities], chunk[n_entities:]))

    def q(ns: str, n: str) -> str:
        return f"{ns}::{n}" if ns else n

    entity_names = [q(ns, n) for ns, ents, _ in plan for n in ents]

    def types() -> Any:
        return _bind(draw(_TYPES), entity_names)

    def records() -> Any:
        return _bind(draw(_RECORDS), entity_names)

    schema = Schema(namespaces=tuple(namespaces))
    for ns, ents, commons in plan:
        schema.namespace_annotations[ns] = draw(_annotations) if ns else ()
        for c in commons:
            schema.common_types[q(ns, c)] = types()
            schema.common_type_annotations[q(ns, c)] = draw(_annotations)
        for e in ents:
            if draw(st.integers(0, 4)) == 0:
                enum = tuple(draw(st.lists(st.text(max_size=3), min_size=1, max_size=3)))
                et = EntityTypeDef(q(ns, e), enum=enum, annotations=draw(_annotations))
            else:
                et = EntityTypeDef(
                    q(ns, e),
                    tuple(draw(st.lists(st.sampled_from(entity_names), max_size=3, unique=True))),
                    records(),
                    types() if draw(st.booleans()) else None,
                    None,
                    draw(_annotations),
                )
            schema.entity_types[et.name] = et
    declared: list[EntityUID] = []
    for ns in namespaces:
        for ident in draw(st.lists(st.text(max_size=4), max_size=4, unique=True)):
            uid = A(ident, ns)
            if any(d.id == ident for d in declared):
                continue  # `N::Action::"x"` would shadow `Action::"x"`
            parents: tuple[EntityUID, ...] = ()
            if declared:
                parents = tuple(draw(st.lists(st.sampled_from(declared), max_size=2, unique=True)))
            if draw(st.booleans()):
                action = ActionDef(
                    uid,
                    parents,
                    tuple(draw(st.lists(st.sampled_from(entity_names), min_size=1, unique=True))),
                    tuple(draw(st.lists(st.sampled_from(entity_names), min_size=1, unique=True))),
                    records(),
                    True,
                    draw(_annotations),
                )
            else:
                action = ActionDef(uid, parents, applies_to=False, annotations=draw(_annotations))
            schema.actions[uid] = action
            declared.append(uid)
    return schema


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_generated_schemas_round_trip_through_json(s: Schema) -> None:
    back = roundtrip(s)
    assert back == s
    assert back.to_json() == s.to_json()
