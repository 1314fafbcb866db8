"""``Engine.plan``: a plan per caller, action and resource type, read and checked as
``authorize_unsigned`` reads a request, and equal row for row to ``authorize_unsigned``
with the row given in full as the resource."""

from __future__ import annotations

import itertools
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bench_decide import PolangService
from benchmarks.workload import generate

from polang import Engine, RequestError
from polang.analysis.plan import Plan
from polang.errors import PolangError
from polang.language.entities import parse_entity

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
READ = 'Acme::Action::"read"'
ACTIONS = (READ, 'Acme::Action::"edit"', 'Acme::Action::"delete"')


def _ref(t: str, i: str) -> dict[str, Any]:
    return {"__entity": {"type": t, "id": i}}


def user(uid: str, clearance: int, team: str | None = "finance") -> dict[str, Any]:
    return {
        "uid": {"type": "Acme::User", "id": uid},
        "attrs": {
            "email": f"{uid}@acme.example",
            "org": _ref("Acme::Org", "acme"),
            "clearance": clearance,
        },
        "parents": [] if team is None else [{"type": "Acme::Team", "id": team}],
    }


def documents() -> list[dict[str, Any]]:
    """Rows of every combination the policies read: owner, organisation, classification,
    public."""
    out = []
    combos = itertools.product(
        ("alice", "bob", "carol"), ("acme", "other"), ("internal", "secret"), (False, True)
    )
    for i, (owner, org, cls, public) in enumerate(combos):
        out.append(
            {
                "uid": {"type": "Acme::Document", "id": f"d{i}"},
                "attrs": {
                    "owner": _ref("Acme::User", owner),
                    "org": _ref("Acme::Org", org),
                    "classification": cls,
                    "public": public,
                },
                "parents": [],
            }
        )
    return out


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # the example store with one template link: bob may read d5
    root = tmp_path_factory.mktemp("store") / "directory"
    shutil.copytree(STORE, root)
    link = {
        "template_id": "share-for-reading",
        "link_id": "share-d5-with-bob",
        "principal": {"type": "Acme::User", "id": "bob"},
        "resource": 'Acme::Document::"d5"',
    }
    (root / "templates" / "links.json").write_text(json.dumps([link]))
    e = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root)})
    yield e
    e.close()


def same_as_authorize(
    engine: Engine, p: Plan, action: str, principal: Any, context: Any, rows: list[Any]
) -> int:
    schema = engine.schema
    allowed = 0
    for row in rows:
        want = engine.authorize_unsigned(action, row, context, principal).decision
        assert p.allows(parse_entity(row, schema)) is want, (row["uid"], p.text())
        allowed += want
    return allowed


def test_plans_equal_authorize_unsigned_row_for_row(engine: Engine) -> None:
    rows = documents()
    kinds = set()
    allowed = 0
    callers = (ALICE, user("bob", 4), user("carol", 1, None), 'Acme::User::"nobody"')
    contexts = ({}, {"network": "corp"}, None)
    for principal, action, context in itertools.product(callers[:3], ACTIONS, contexts):
        p = engine.plan(action, "Acme::Document", principal, context)
        kinds.add(p.kind)
        allowed += same_as_authorize(engine, p, action, principal, context, rows)
    assert kinds == {"conditional"} and 0 < allowed < 3 * 3 * 3 * len(rows)
    # the template link is part of the plan
    p = engine.plan(READ, "Acme::Document", user("bob", 4), {})
    assert "share-d5-with-bob" in [r.policy_id for r in p.residuals]
    assert 'resource == Acme::Document::"d5"' in p.text()
    # a principal referenced from the entities given with the call
    carol = user("carol", 5)
    p = engine.plan(READ, "Acme::Document", 'Acme::User::"carol"', {}, entities=[carol])
    assert p.to_dict() == engine.plan(READ, "Acme::Document", carol, {}).to_dict()
    with pytest.raises(RequestError, match="store has no entity"):
        engine.plan(READ, "Acme::Document", callers[3], {})


def test_the_workload_store(tmp_path: Path) -> None:
    w = generate(n_entities=400, n_policies=40, n_requests=30, seed=11)
    service = PolangService(w, tmp_path / "store")
    engine = service.engine
    docs = [e for e in w.entities if e["uid"]["type"] == "Document"]
    kinds: dict[str, int] = {}
    try:
        for r in w.requests[:12]:
            action, _res, context, principal = service.args(r)
            p = engine.plan(action, "Document", principal, context)
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
            same_as_authorize(engine, p, action, principal, context, docs)
    finally:
        engine.close()
    assert kinds.get("conditional"), kinds


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((READ, "Acme::Documnt", ALICE, {}), {}, "did you mean 'Acme::Document'"),
        ((READ, 7, ALICE, {}), {}, "resource_type: expected an entity type name"),
        ((READ, "A" * 100_000, ALICE, {}), {}, r"declares no entity type 'AAAA.*\.\.\.'$"),
        ((READ, 'Acme::Document::"x"', ALICE, {}), {}, "declares no entity type"),
        (('Acme::Action::"steal"', "Acme::Document", ALICE, {}), {}, "not declared"),
        ((READ, "Acme::Team", ALICE, {}), {}, "does not match the schema"),
        ((READ, "Acme::Document", ALICE, {"network": 5}), {}, "network"),
        ((READ, "Acme::Document", ALICE, {"netwrk": "corp"}), {}, "netwrk"),
        ((READ, "Acme::Document", ALICE, {"a": [[[[[[]]]]]] * 2}), {}, "context"),
        ((READ, "Acme::Document", {"uid": 1}, {}), {}, "principal"),
        ((READ, "Acme::Document", ALICE, {}), {"entities": "x"}, "entities"),
        ((READ, "Acme::Document", ALICE, {}), {"entities": [ALICE, user("alice", 9)]}, "already"),
    ],
)
def test_bad_requests_are_refused_as_authorize_refuses_them(
    engine: Engine, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolangError, match=message):
        engine.plan(*args, **kwargs)


def test_too_deep_context_is_refused(engine: Engine) -> None:
    deep: Any = {}
    for _ in range(200):
        deep = {"a": deep}
    with pytest.raises(PolangError):
        engine.plan(READ, "Acme::Document", ALICE, {"network": "corp", "x": deep})
    # the engine keeps serving
    assert engine.plan(READ, "Acme::Document", ALICE, {}).kind == "conditional"


def test_plans_from_many_threads_at_once(tmp_path: Path) -> None:
    # a fresh store: the threads fill the shared caches (candidates, row-only outcomes)
    w = generate(n_entities=300, n_policies=40, n_requests=16, seed=5)
    service = PolangService(w, tmp_path / "store")
    engine = service.engine
    calls = [service.args(r) for r in w.requests]
    got: dict[int, list[Any]] = {}

    def worker(t: int) -> None:
        got[t] = [engine.plan(a, "Document", p, c).to_dict() for a, _r, c, p in calls]

    try:
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        want = [engine.plan(a, "Document", p, c).to_dict() for a, _r, c, p in calls]
    finally:
        engine.close()
    assert len(got) == 6 and all(v == want for v in got.values())
