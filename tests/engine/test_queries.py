"""Engine.explain / who_can / what_can / access_matrix over the example store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang import Engine, RequestError

REPO = Path(__file__).resolve().parents[2]
DOC = json.loads((REPO / "examples/requests/roadmap.json").read_text())
ALICE = json.loads((REPO / "examples/requests/alice.json").read_text())


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(REPO / "examples/stores/directory")})


def test_explain_agrees_with_authorize_and_names_the_failing_condition(engine: Engine) -> None:
    for action in ('Acme::Action::"read"', 'Acme::Action::"edit"'):
        ex = engine.explain(action, DOC, {}, ALICE).to_dict()
        result = engine.authorize_unsigned(action, DOC, {}, ALICE)
        assert ex["decision"] == result.response.decision
        assert ex["reasons"] == result.response.diagnostics.reason
    text = engine.explain('Acme::Action::"edit"', DOC, {}, ALICE).render()
    assert "cleared-editors" in text
    assert "principal.clearance >= 3" in text
    # the hierarchy path that made `principal in resource.org` true
    assert 'Acme::User::"alice" in Acme::Team::"finance" in Acme::Org::"acme"' in text


def test_explain_rejects_bad_requests_like_authorize(engine: Engine) -> None:
    with pytest.raises(RequestError):
        engine.explain('Acme::Action::"steal"', DOC, {}, ALICE)
    with pytest.raises(RequestError, match="principal or tokens"):
        engine.explain('Acme::Action::"read"', DOC, {}, ALICE, tokens=[])


def test_queries_equal_authorize_over_the_matrix(engine: Engine) -> None:
    bob = {
        "uid": {"type": "Acme::User", "id": "bob"},
        "attrs": {
            "email": "bob@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": 4,
        },
        "parents": [],
    }
    matrix = engine.access_matrix({}, entities=[DOC, ALICE, bob]).to_dict()
    assert matrix["complete"]
    got = {
        (e["principal"]["id"], e["action"]["id"], e["resource"]["id"])
        for e in matrix["entries"]
        if e["decision"] == "allow"
    }
    want = set()
    for who in (ALICE, bob):
        for act in ("read", "edit", "delete"):
            r = engine.authorize_unsigned(f'Acme::Action::"{act}"', DOC, {}, who)
            if r.decision:
                want.add((who["uid"]["id"], act, "roadmap"))
    assert got == want
    assert ("bob", "delete", "roadmap") in got  # bob owns the document


def test_who_can_with_unknown_context_reports_conditionals(engine: Engine) -> None:
    result = engine.who_can('Acme::Action::"read"', 'Acme::Document::"nothing"').to_dict()
    assert result["kind"] == "who_can"
    with pytest.raises(RequestError, match="not an entity reference"):
        engine.who_can('Acme::Action::"read"', "roadmap")


def test_metric_entries_count_decisions() -> None:
    engine = Engine(
        {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(REPO / "examples/stores/directory"),
            "ENGINE_LOG_TYPE": "memory",
        }
    )
    for _ in range(3):
        engine.authorize_unsigned('Acme::Action::"read"', DOC, {}, ALICE)
    engine.authorize_unsigned('Acme::Action::"delete"', DOC, {}, ALICE)
    engine.close()
    metrics = engine.get_logs_by_tag("Metric")
    assert len(metrics) == 1
    m = metrics[0]
    assert m["counters"] == {"authorize_calls": 4, "allow": 3, "deny": 1}
    assert m["timings"]["decision_time_micro_sec"]["count"] == 4
    assert m["gauges"]["policy_count"] == 5


def test_matrix_context_is_parsed_as_entity_json(engine: Engine) -> None:
    """Across actions there is no one context type: escapes are still understood."""
    ctx = {"network": "corp", "who": {"__entity": {"type": "Acme::User", "id": "alice"}}}
    result = engine.access_matrix(ctx, entities=[DOC, ALICE]).to_dict()
    assert result["query"]["context"]["who"] == {"__entity": {"type": "Acme::User", "id": "alice"}}
    with pytest.raises(RequestError, match="context"):
        engine.access_matrix({"n": 1.5})
