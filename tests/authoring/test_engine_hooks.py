"""The engine's own doors to the authoring tools: ``Engine.diff`` and typed repairs."""

from __future__ import annotations

import json
from pathlib import Path

from polang import Engine

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
ROADMAP = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())


def test_engine_diff_of_new_entity_data_equals_the_module_function() -> None:
    from polang.authoring.diff import diff

    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})
    cleared = dict(ALICE, attrs=dict(ALICE["attrs"], clearance=3))
    changed = [cleared, ROADMAP]
    mine = engine.diff(entities=changed, context={})
    theirs = diff(engine, entities=changed, context={})
    a, b = mine.to_dict(), theirs.to_dict()
    a["stats"].pop("elapsed_s")
    b["stats"].pop("elapsed_s")
    assert a == b
    assert any(
        g["principal"] == 'Acme::User::"alice"' and g["action"] == 'Acme::Action::"edit"'
        for g in a["gained"]
    ), "alice, now cleared, gains edit on the roadmap"


def test_engine_explain_repairs_use_the_schema() -> None:
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})
    explanation = engine.explain('Acme::Action::"edit"', ROADMAP, {}, ALICE)
    assert explanation.allow is False
    assert explanation.schema is not None
