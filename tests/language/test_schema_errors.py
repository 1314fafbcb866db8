"""Malformed schemas: each error is a SchemaError naming exactly where (line:col or JSON path).

Every rejected human-form case is also rejected by cedarpy (the Rust engine), so polang
refuses exactly what the language refuses; the one deliberate difference is noted.
"""

from __future__ import annotations

import json
from typing import Any

import cedarpy
import pytest

from polang.errors import PolangError, SchemaError
from polang.language.schema import parse_schema, parse_schema_json

# (schema text, line, column, what the message says)
HUMAN_CASES: list[tuple[str, int, int, str]] = [
    # syntax
    (
        "entity User = {\n  name: String\n}\nentity Group;",
        4,
        1,
        "unexpected `entity`; expected `;`",
    ),
    ('entity User = {\n  "name: String\n};', 2, 3, "unterminated string literal"),
    ('entity User;\naction "a\\qb";', 2, 8, "invalid escape `\\q`"),
    ("entity User;\n  entity $Group;", 2, 10, "unexpected character '$'"),
    ("entity User = {\n  tags: Set\n};", 2, 9, "`Set` needs an element type"),
    ("entity User = { a: Long<String> };", 1, 20, "`Long` takes no type argument"),
    # undefined names
    ("entity User = {\n  name: String,\n  boss: Manager,\n};", 3, 9, "undefined type `Manager`"),
    ("entity User in [Group,\n   Team];\nentity Group;", 2, 4, "undefined entity type `Team`"),
    (
        "entity User;\naction view appliesTo {\n  principal: [User, Robot],\n  resource: User\n};",
        3,
        21,
        "undefined entity type `Robot`",
    ),
    (
        'namespace N {\n  entity U;\n  action view in [read, "all"];\n  action read;\n}',
        3,
        25,
        'undefined action `N::Action::"all"`',
    ),
    (
        "namespace N {\n  type T = Set<Long>;\n  entity U in [T];\n}",
        3,
        16,
        "undefined entity type `T`",
    ),
    # duplicates
    ("entity User;\nentity Group, User;", 2, 15, "entity type `User` is declared twice"),
    ('action view;\naction "view";', 2, 8, 'action `Action::"view"` is declared twice'),
    (
        "namespace A { entity X; }\nnamespace A { entity Y; }",
        2,
        11,
        "namespace `A` is declared twice",
    ),
    ('@doc("a")\n@doc("b")\nentity User;', 2, 2, "duplicate annotation `@doc`"),
    (
        "entity U;\naction a appliesTo { principal: U, resource: U,\n  principal: U };",
        3,
        3,
        "`principal` is declared twice in `appliesTo`",
    ),
    # cycles
    ("action a in [b];\naction b in [c];\naction c in [a];", 1, 8, "cycle in the action hierarchy"),
    ("type A = { b: B };\ntype B = Set<A>;", 2, 14, "cycle in common type definitions: `A`"),
    # reserved names and shadowing
    ("entity User;\nentity if;", 2, 8, "`if` is a reserved word"),
    ("entity User = { then: Long };", 1, 17, "`then` is a reserved word"),
    ("type Boolean = Long;", 1, 6, "`Boolean` is a reserved type name"),
    ("namespace Foo::__cedar {\n  entity X;\n}", 1, 11, "reserved `__cedar` namespace"),
    ("entity Action;", 1, 8, "`Action` cannot be declared as an entity type"),
    (
        "entity Doc;\nnamespace App {\n  entity Doc;\n}",
        3,
        10,
        "the definition of `App::Doc` shadows the entity type `Doc` of the empty namespace",
    ),
    # actions
    (
        "entity U;\naction a appliesTo {\n  principal: U,\n  resource: U,\n"
        "  context: Set<Long>\n};",
        5,
        12,
        'context of action `Action::"a"` must be a record type',
    ),
    ("entity U;\naction a appliesTo { principal: U };", 2, 10, "must declare `resource`"),
    ("entity U;\naction a appliesTo { principal: [], resource: U };", 2, 22, "at least one"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), HUMAN_CASES)
def test_human_schema_errors_name_line_and_column(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema(text, "app.polangschema")
    e = info.value
    assert (e.filename, e.line, e.column) == ("app.polangschema", line, column), str(e)
    assert str(e).startswith(f"app.polangschema:{line}:{column}: "), str(e)
    assert message in str(e)
    assert isinstance(e, PolangError)


@pytest.mark.parametrize(("text", "line", "column", "message"), HUMAN_CASES)
def test_cedar_rejects_the_same_schemas(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ValueError):
        cedarpy.Schema.from_str(text)


def test_duplicate_record_attribute_is_an_error() -> None:
    """A deliberate difference: cedarpy keeps the last of two same-named attributes
    silently; polang reports the duplicate (almost certainly a mistake)."""
    text = "entity E = {\n  a: Long,\n  a: String\n};"
    cedarpy.Schema.from_str(text)
    with pytest.raises(SchemaError, match="attribute `a` is declared twice") as info:
        parse_schema(text)
    assert (info.value.line, info.value.column) == (3, 3)


def test_no_file_name_still_gives_a_position() -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema("entity A = { b: C };")
    assert str(info.value) == "<schema>:1:17: undefined type `C`"
    assert info.value.filename is None


def test_end_of_input_is_reported_at_the_end() -> None:
    with pytest.raises(SchemaError, match="unexpected end of the schema") as info:
        parse_schema("entity A = {\n  b: Long")
    assert (info.value.line, info.value.column) == (2, 10)


# ---------------------------------------------------------------- the JSON form


def _app(**overrides: Any) -> dict[str, Any]:
    ns: dict[str, Any] = {
        "entityTypes": {
            "User": {
                "memberOfTypes": ["Group"],
                "shape": {
                    "type": "Record",
                    "attributes": {
                        "age": {"type": "Long"},
                        "boss": {"type": "Entity", "name": "User"},
                    },
                },
            },
            "Group": {},
        },
        "actions": {
            "read": {},
            "view": {
                "memberOf": [{"id": "read"}],
                "appliesTo": {"principalTypes": ["User"], "resourceTypes": ["Group"]},
            },
        },
    }
    ns.update(overrides)
    return {"App": ns}


def _user(**shape_attrs: Any) -> dict[str, Any]:
    doc = _app()
    doc["App"]["entityTypes"]["User"]["shape"]["attributes"].update(shape_attrs)
    return doc


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    doc = _app()
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


JSON_CASES: list[tuple[dict[str, Any], str, str]] = [
    (
        _user(manager={"type": "Entity", "name": "Manager"}),
        "$.App.entityTypes.User.shape.attributes.manager.name",
        "undefined entity type `Manager`",
    ),
    (
        _user(age={"type": "Long", "required": "yes"}),
        "$.App.entityTypes.User.shape.attributes.age.required",
        "`required` must be a boolean",
    ),
    (
        _user(age={"type": "Lnog"}),
        "$.App.entityTypes.User.shape.attributes.age.type",
        "undefined common type `Lnog`",
    ),
    (
        _user(tags={"type": "Set"}),
        "$.App.entityTypes.User.shape.attributes.tags",
        "missing field `element`",
    ),
    (
        _with(["App", "entityTypes", "User", "memberOfTypes"], ["Group", "Team"]),
        "$.App.entityTypes.User.memberOfTypes[1]",
        "undefined entity type `Team`",
    ),
    (
        _with(["App", "actions", "view", "memberOf"], [{"id": "all"}]),
        "$.App.actions.view.memberOf[0]",
        'undefined action `App::Action::"all"`',
    ),
    (
        _with(["App", "actions", "view", "appliesTo"], {"principalTypes": ["User"]}),
        "$.App.actions.view.appliesTo",
        "missing field `resourceTypes`",
    ),
    (
        _with(["App", "actions", "read", "memberOf"], [{"id": "view"}]),
        "$.App.actions.read",
        "cycle in the action hierarchy",
    ),
    (
        _app(commonTypes={"A": {"type": "B"}, "B": {"type": "Set", "element": {"type": "A"}}}),
        "$.App.commonTypes.B.element.type",
        "cycle in common type definitions",
    ),
    (
        _app(commonTypes={"String": {"type": "Long"}}),
        "$.App.commonTypes.String",
        "reserved type name",
    ),
    (
        _with(["App", "entityTypes", "User", "shape"], {"type": "Long"}),
        "$.App.entityTypes.User.shape",
        "the shape of entity type `App::User` must be a record type",
    ),
    (
        _with(["App", "entityTypes", "User", "colour"], "blue"),
        "$.App.entityTypes.User.colour",
        "unknown field `colour`",
    ),
    (
        {"App::__cedar": _app()["App"]},
        '$["App::__cedar"]',
        "reserved `__cedar` namespace",
    ),
    (
        {"": {"entityTypes": {"User": {}}, "actions": {}}, "App": _app()["App"]},
        "$.App.entityTypes.User",
        "shadows the entity type `User` of the empty namespace",
    ),
]


@pytest.mark.parametrize(("doc", "path", "message"), JSON_CASES)
def test_json_schema_errors_name_the_json_path(
    doc: dict[str, Any], path: str, message: str
) -> None:
    for data in (doc, json.dumps(doc)):
        with pytest.raises(SchemaError) as info:
            parse_schema_json(data, "app.json")
        e = info.value
        assert e.path == path, str(e)
        assert str(e).startswith(f"app.json: {path}: "), str(e)
        assert message in str(e)


@pytest.mark.parametrize(("doc", "path", "message"), JSON_CASES)
def test_cedar_rejects_the_same_json_schemas(doc: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ValueError):
        cedarpy.Schema.from_json_str(json.dumps(doc))


def test_json_duplicate_keys_are_reported_at_their_path() -> None:
    text = '{"App": {"entityTypes": {"User": {}, "User": {"memberOfTypes": []}}, "actions": {}}}'
    with pytest.raises(SchemaError) as info:
        parse_schema_json(text)
    assert info.value.path == "$.App.entityTypes.User"
    assert "duplicate key `User`" in str(info.value)


def test_json_text_that_is_not_json_gives_line_and_column() -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema_json('{\n  "App": {\n    "entityTypes": {,\n', "bad.json")
    assert (info.value.line, info.value.column) == (3, 21)
    assert str(info.value).startswith("bad.json:3:21: invalid JSON")
