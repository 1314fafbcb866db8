"""Printing a schema model in the human form: parse(print(s)) == s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang.language.schema import parse_schema, parse_schema_json
from polang.store.schema_text import SchemaPrintError, schema_to_text

CASES = {
    "everything": """
@doc("the app")
namespace App {
    type Address = { "street": String, "zip"?: String };
    @doc("a person")
    entity User in [Group] = {
        @doc("their name") "name": String,
        "home"?: Address,
        "ip": ipaddr,
        "score": decimal,
        "seen": datetime,
        "ttl": duration,
        "friends": Set<User>,
        "odd key with spaces": Bool,
    } tags Set<String>;
    entity Group in [Group];
    entity Color enum ["red", "green"];
    action "read";
    action "write" in [Action::"read"] appliesTo {
        principal: [User],
        resource: [Group, Color],
        context: { "n": Long },
    };
}
namespace Other::Deep {
    entity Thing = { "owner": App::User };
    action "use" in [App::Action::"read"] appliesTo { principal: [App::User], resource: Thing };
}
entity Top = { "x": Long };
action "global" appliesTo { principal: [Top], resource: [Top] };
""",
    "shadowed built-in": """
namespace App {
    entity String = { "s": __cedar::String };
    entity Doc = { "title": __cedar::String, "alias": String };
}
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_round_trip(name: str) -> None:
    schema = parse_schema(CASES[name])
    text = schema_to_text(schema)
    again = parse_schema(text)
    assert again == schema
    assert again.to_json() == schema.to_json()
    assert schema_to_text(again) == text  # stable


def test_json_form_round_trips_through_text() -> None:
    schema = parse_schema(CASES["everything"])
    from_json = parse_schema_json(json.loads(json.dumps(schema.to_json())))
    assert parse_schema(schema_to_text(from_json)) == schema


def test_open_records_have_no_human_form() -> None:
    data = {
        "App": {
            "entityTypes": {
                "User": {
                    "shape": {"type": "Record", "attributes": {}, "additionalAttributes": True}
                }
            },
            "actions": {},
        }
    }
    with pytest.raises(SchemaPrintError, match="additionalAttributes"):
        schema_to_text(parse_schema_json(data))


def test_corpus_schemas_round_trip(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "corpus-tests").glob("*.polangschema"))
    assert files
    for path in files[::20]:  # a spread sample keeps this fast
        schema = parse_schema(path.read_text(), str(path))
        assert parse_schema(schema_to_text(schema)) == schema, path.name
