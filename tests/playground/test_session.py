"""polang.playground.session: what the page runs on every keystroke, checked on CPython
(tests/playground/test_browser.py runs it in the browser)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polang.playground.session import MAX_EDITOR_CHARS, MAX_LISTED, evaluate

SCHEMA = """namespace Docs {
  entity User = { "clearance": Long };
  entity Document = { "owner": User, "level": Long };
  action "read", "edit" appliesTo { principal: [User], resource: [Document] };
}"""
POLICIES = """@id("owners-edit")
permit (principal, action == Docs::Action::"edit", resource)
when { resource.owner == principal };

@id("cleared-read")
permit (principal, action == Docs::Action::"read", resource)
when { principal.clearance >= resource.level };"""
ENTITIES = [
    {"uid": {"type": "Docs::User", "id": "alice"}, "attrs": {"clearance": 2}, "parents": []},
    {"uid": {"type": "Docs::User", "id": "bob"}, "attrs": {"clearance": 5}, "parents": []},
    {
        "uid": {"type": "Docs::Document", "id": "plan"},
        "attrs": {"owner": {"__entity": {"type": "Docs::User", "id": "bob"}}, "level": 3},
        "parents": [],
    },
]
REQUEST = {
    "principal": 'Docs::User::"alice"',
    "action": 'Docs::Action::"read"',
    "resource": 'Docs::Document::"plan"',
    "context": {},
}


def run(**changes: Any) -> dict[str, Any]:
    inputs = {
        "schema": SCHEMA,
        "policies": POLICIES,
        "entities": json.dumps(ENTITIES),
        "request": json.dumps(REQUEST),
        **changes,
    }
    return json.loads(evaluate(json.dumps(inputs)))


def test_the_decision_and_why() -> None:
    out = run()
    assert out["problems"] == []
    assert out["decision"] == "deny" and out["reasons"] == [] and out["errors"] == []
    assert 'permit "cleared-read"' in out["explanation"]
    assert any(
        '"cleared-read" applies: set Docs::User::"alice".clearance = 3' in r for r in out["repairs"]
    )
    assert out["who_can"] == ['Docs::User::"bob"']
    assert out["what_can"] == []
    bob = run(request=json.dumps({**REQUEST, "principal": 'Docs::User::"bob"'}))
    assert bob["decision"] == "allow" and bob["reasons"] == ["cleared-read"]
    assert 'Docs::Action::"edit" on Docs::Document::"plan"' in bob["what_can"]


@pytest.mark.parametrize(
    ("changes", "editor", "line", "column", "message"),
    [
        (
            {"policies": POLICIES + "\npermit (principal, acton, resource);"},
            "policies",
            8,
            20,
            "expected `action`, found identifier `acton`",
        ),
        (
            {"policies": POLICIES + '\n@id("x")\npermit (principal, action, resource) when { 1 };'},
            "policies",
            9,
            45,
            "policy 'x': expected Bool but found Long",
        ),
        ({"schema": SCHEMA.replace("Long", "Lng", 1)}, "schema", None, None, "Lng"),
        ({"entities": "[{"}, "entities", 1, 3, "invalid JSON"),
        ({"request": "{\n  1"}, "request", 2, 3, "invalid JSON"),
        (
            {"request": json.dumps({**REQUEST, "princpal": "x"})},
            "request",
            None,
            None,
            "unknown key 'princpal' in the request (did you mean 'principal'?)",
        ),
        ({"request": "[]"}, "request", None, None, "the request is a JSON object"),
        (
            {"request": json.dumps({**REQUEST, "action": 'Docs::Action::"fly"'})},
            "request",
            None,
            None,
            "fly",
        ),
        ({"schema": 7}, "schema", None, None, "is not a string"),
        ({"policies": "x" * (MAX_EDITOR_CHARS + 1)}, "policies", None, None, "MAX_EDITOR_CHARS"),
        ({"request": "[" * 5000 + "]" * 5000}, "request", None, None, "MAX_JSON_DEPTH"),
    ],
)
def test_every_problem_names_its_editor_and_place(
    changes: dict[str, Any], editor: str, line: int | None, column: int | None, message: str
) -> None:
    out = run(**changes)
    assert "decision" not in out
    problem = out["problems"][0]
    assert problem["editor"] == editor
    if line is not None:
        assert (problem["line"], problem["column"]) == (line, column)
    assert message in problem["message"]


def test_input_that_is_not_json_is_a_problem_too() -> None:
    out = json.loads(evaluate("{"))
    assert out["problems"][0]["editor"] == "request"
    assert json.loads(evaluate("[]"))["problems"][0]["message"] == "the input is not an object"


def test_long_answers_are_cut_naming_the_limit() -> None:
    users = [
        {"uid": {"type": "Docs::User", "id": f"u{i}"}, "attrs": {"clearance": 9}, "parents": []}
        for i in range(MAX_LISTED + 5)
    ]
    out = run(entities=json.dumps(ENTITIES + users))
    assert len(out["who_can"]) == MAX_LISTED + 1
    assert out["who_can"][-1] == f"... and 6 more (MAX_LISTED: {MAX_LISTED} are shown)"
