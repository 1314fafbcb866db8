"""The DuckDB engine against the in-process queries: random stores without a schema,
generated scenarios (hypothesis), the benchmark workload, and the file outputs."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from analysis.test_query import QUERY_CONDITIONS, random_entities, random_policies
from datalog.strategies import Scenario, scenarios
from polang.analysis.query import access_matrix, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.errors import PolangError
from polang.language.ast import Policy, link_template
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue
from polang.sql.duck import DuckDBEngine
from polang.sql.engine import SqlFallback, SqlResult

Key = tuple[EntityUID, EntityUID, EntityUID]


def rows_in(result: Any) -> dict[Key, tuple[str, tuple[str, ...]]]:
    return {e.triple: (e.decision, tuple(e.reasons)) for e in result.iter_entries()}


def rows_sql(result: SqlResult) -> dict[Key, tuple[str, tuple[str, ...]]]:
    return {e.triple: (e.decision, e.reasons) for e in result.entries}


def assert_same(want: Any, got: SqlResult, what: str) -> None:
    w, g = rows_in(want), rows_sql(got)
    if got.complete:
        assert w == g, (
            f"{what}: missing {sorted(set(w) - set(g))[:3]} extra {sorted(set(g) - set(w))[:3]}"
        )
        assert [e.triple for e in want.iter_entries()] == [e.triple for e in got.entries], what
        return
    # policies reported as conditional: sure rows are right, nothing allowed is lost
    for k, (d, _r) in g.items():
        if d == "allow":
            assert w.get(k, ("",))[0] == "allow", f"{what}: {k} allowed in SQL only"
    assert set(w) <= set(g), f"{what}: lost {sorted(set(w) - set(g))[:3]}"


CONTEXTS = [
    RecordValue({"mfa": True, "level": 2}),
    RecordValue({"mfa": False, "level": 0}),
    RecordValue(),
]


@pytest.mark.parametrize("seed", range(8))
def test_random_stores_without_schema(seed: int) -> None:
    """Conditions of every shape (joins, sets, tags, errors, mixed attribute types)."""
    rng = random.Random(seed)
    auth = Authorizer(parse_policies(random_policies(rng, 14)))
    facts = EntityFacts(random_entities(rng))
    ctx = CONTEXTS[seed % len(CONTEXTS)]
    for udf in (True, False):
        eng = DuckDBEngine(auth.program, facts, udf=udf)
        try:
            got = eng.access_matrix(ctx, reasons=True)
            assert_same(access_matrix(auth, facts, ctx), got, f"seed {seed} udf={udf}")
            if udf:
                assert got.complete
            u, d = EntityUID("User", "u1"), EntityUID("Doc", "d2")
            view = EntityUID("Action", "view")
            assert_same(
                who_can(auth, facts, view, d, ctx), eng.who_can(view, d, ctx, reasons=True), "who"
            )
            assert_same(
                what_can(auth, facts, u, None, ctx),
                eng.what_can(u, None, ctx, reasons=True),
                "what",
            )
        finally:
            eng.close()


@pytest.mark.parametrize("start", range(0, len(QUERY_CONDITIONS), 4))
def test_each_condition_shape(start: int) -> None:
    """A permit and a forbid per condition: the three outcomes of each shape."""
    conds = QUERY_CONDITIONS[start : start + 4]
    rng = random.Random(start)
    text = "\n".join(
        f'@id("c{i}") permit(principal, action, resource) when {{ {c} }};\n'
        f'@id("f{i}") forbid(principal, action == Action::"edit", '
        f'resource is Doc in Folder::"f1") unless {{ {c} }};'
        for i, c in enumerate(conds)
    )
    text += '\npermit(principal in Group::"g0", action, resource);'
    auth = Authorizer(parse_policies(text))
    facts = EntityFacts(random_entities(rng))
    ctx = RecordValue({"mfa": True, "level": 3})
    eng = DuckDBEngine(auth.program, facts)
    try:
        got = eng.access_matrix(ctx, reasons=True)
        assert got.complete
        assert_same(access_matrix(auth, facts, ctx), got, " / ".join(conds))
    finally:
        eng.close()


def _scenario_inputs(sc: Scenario) -> tuple[Any, Authorizer, EntityFacts, list[RecordValue]] | None:
    try:
        schema = parse_schema(sc.schema.text())
        parsed = parse_policies(sc.policies.text)
        by_id: dict[str, Policy] = {}
        templates: dict[str, Policy] = {}
        for pid, p in zip(sc.policies.ids, parsed, strict=True):
            (templates if pid in sc.policies.templates else by_id)[pid] = p
        for link in sc.policies.links:
            pr = parse_entity_uid_json(link.principal) if link.principal else None
            rs = parse_entity_uid_json(link.resource) if link.resource else None
            by_id[link.new_id] = link_template(templates[link.template], pr, rs)
        auth = Authorizer(by_id)
        facts = EntityFacts(parse_entities(json.dumps(sc.entities), schema))
    except PolangError:
        return None
    ctxs = []
    for req in sc.requests[:2]:
        try:
            a = parse_entity_uid_json(req["action"])
            ctxs.append(parse_context(req.get("context", {}), schema, a))
        except PolangError:
            continue
    return schema, auth, facts, ctxs or [RecordValue()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_policies=5, max_requests=3))
def test_generated_scenarios(sc: Scenario) -> None:
    got_inputs = _scenario_inputs(sc)
    if got_inputs is None:  # an input polang rejects: not this test's subject
        return
    schema, auth, facts, ctxs = got_inputs
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        for ctx in ctxs:
            want = access_matrix(auth, facts, ctx, schema=schema)
            assert_same(want, eng.access_matrix(ctx, reasons=True), sc.describe())
        for req in sc.requests[:2]:
            p = parse_entity_uid_json(req["principal"])
            try:
                got = eng.what_can(p, None, ctxs[0], reasons=True)
            except SqlFallback:
                assert facts.get(p) is None
                continue
            assert_same(what_can(auth, facts, p, None, ctxs[0], schema=schema), got, "what_can")
    finally:
        eng.close()


# ---------------------------------------------------------------------------- the workload


@pytest.fixture(scope="module")
def workload() -> tuple[Any, Authorizer, EntityFacts, RecordValue]:
    from benchmarks.workload import generate

    w = generate(n_entities=400, n_policies=40, seed=3)
    schema = parse_schema(w.schema_text)
    auth = Authorizer(parse_policies(w.policies_text))
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    return schema, auth, facts, ctx


def test_a_failed_fetch_ends_the_written_matrix(
    workload: tuple[Any, Authorizer, EntityFacts, RecordValue],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next batch is fetched in a thread while this one is sorted: an error there
    reaches the caller as it was raised, after the threads have ended (no hang)."""
    import threading

    from polang.sql import duck
    from polang.sql.tables import SqlError

    schema, auth, facts, ctx = workload
    real = duck.DuckRunner._fetch_pairs
    seen: list[str] = []

    def failing(self: Any, job: Any) -> Any:
        seen.append(threading.current_thread().name)
        if len(seen) == 3:
            raise SqlError("the third batch failed")
        return real(self, job)

    monkeypatch.setattr(duck.DuckRunner, "_fetch_pairs", failing)
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        with pytest.raises(SqlError, match="the third batch failed"):
            eng.access_matrix(ctx, output=tmp_path / "m.parquet", batch_pairs=30_000)
        assert len(seen) == 3 and all(n.startswith("polang-sql-fetch") for n in seen)
        assert not [t for t in threading.enumerate() if t.name.startswith("polang-sql")]
        # the engine still answers
        monkeypatch.setattr(duck.DuckRunner, "_fetch_pairs", real)
        res = eng.access_matrix(ctx, output=tmp_path / "m2.parquet", batch_pairs=30_000)
        assert res.stats.rows == len(access_matrix(auth, facts, ctx, schema=schema).entries)
    finally:
        eng.close()


def test_workload_matrix_rows_and_files(
    workload: tuple[Any, Authorizer, EntityFacts, RecordValue], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    schema, auth, facts, ctx = workload
    want = access_matrix(auth, facts, ctx, schema=schema)
    # small batches: the matrix is cut into many resource ranges and comes out the same
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        got = eng.access_matrix(ctx, reasons=True, batch_pairs=30_000)
        assert got.stats.batches > 6
        assert_same(want, got, "workload")
        triples = [e.triple for e in want.iter_entries()]

        out = tmp_path / "m.parquet"
        res = eng.access_matrix(ctx, output=out, format="parquet", reasons=True)
        assert res.stats.rows == len(triples) and not res.entries
        # without reasons: each batch's pairs fetched unordered, with repeats, then
        # ordered and made unique in NumPy; the file is the in-process answer row by row
        bare = tmp_path / "bare.parquet"
        res = eng.access_matrix(ctx, output=bare, batch_pairs=30_000)
        assert res.stats.batches > 6 and res.stats.rows == len(triples)
        assert [
            (
                EntityUID(r["principal_type"], r["principal_id"]),
                EntityUID(r["action_type"], r["action_id"]),
                EntityUID(r["resource_type"], r["resource_id"]),
            )
            for r in pq.read_table(bare).to_pylist()
        ] == triples
        assert {r["decision"] for r in pq.read_table(bare).to_pylist()} == {"allow"}
        t = pq.read_table(out).to_pylist()
        assert [
            (
                EntityUID(r["principal_type"], r["principal_id"]),
                EntityUID(r["action_type"], r["action_id"]),
                EntityUID(r["resource_type"], r["resource_id"]),
            )
            for r in t
        ] == triples
        by_key = rows_in(want)  # the policies of each row in the program's order
        assert [tuple(r["reasons"]) for r in t] == [by_key[k][1] for k in triples]
        assert any(len(r["reasons"]) > 1 for r in t)

        out_csv = tmp_path / "m.csv"
        eng.access_matrix(ctx, output=out_csv, format="csv")
        with out_csv.open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == len(triples)
        assert (rows[-1]["principal_id"], rows[-1]["resource_id"]) == (
            triples[-1][0].id,
            triples[-1][2].id,
        )

        out_js = tmp_path / "w.jsonl"
        a, r = EntityUID("Action", "view"), triples[0][2]
        eng.who_can(a, r, ctx, output=out_js, format="jsonl")
        lines = [json.loads(x) for x in out_js.read_text().splitlines()]
        assert [x["principal_id"] for x in lines] == [
            p.id for p in who_can(auth, facts, a, r, ctx, schema=schema).principals
        ]
        empty = tmp_path / "e.parquet"
        nobody = EntityUID("Action", "all")  # no appliesTo: no candidates
        res = eng.what_can(EntityUID("User", "u00000"), nobody, ctx, output=empty)
        assert res.stats.rows == 0 and pq.read_table(empty).num_rows == 0
    finally:
        eng.close()


def test_fixed_entity_not_stored_falls_back(
    workload: tuple[Any, Authorizer, EntityFacts, RecordValue],
) -> None:
    schema, auth, facts, ctx = workload
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        with pytest.raises(SqlFallback, match="not a stored entity"):
            eng.who_can(EntityUID("Action", "view"), EntityUID("Document", "nope"), ctx)
        with pytest.raises(SqlFallback):
            eng.what_can(EntityUID("User", "nope"), None, ctx)
    finally:
        eng.close()


def test_unknown_context_is_conditional(
    workload: tuple[Any, Authorizer, EntityFacts, RecordValue],
) -> None:
    """``context=None``: the policies that read it are conditional, never allowed outright."""
    schema, auth, facts, _ctx = workload
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        got = eng.access_matrix(None, reasons=True)
        assert not got.complete
        assert any(f.reason.startswith("the condition reads the context") for f in got.fallbacks)
        assert_same(access_matrix(auth, facts, None, schema=schema), got, "unknown context")
        assert any(e.decision == "conditional" and e.residuals for e in got.entries)
    finally:
        eng.close()


# ---------------------------------------------------------------------------- shapes


SHAPES_SCHEMA = """
entity Group in [Group];
entity User in [Group] { level: Long, dept: String };
entity Doc in [Group] { level: Long };
action view appliesTo { principal: [User], resource: [Doc] };
"""

SHAPES_POLICIES = """
@id("r1") permit(principal in Group::"a", action, resource in Group::"x");
@id("r2") permit(principal in Group::"b", action, resource in Group::"x");
@id("r3") permit(principal in Group::"a", action, resource in Group::"y");
@id("l1") permit(principal, action, resource)
  when { principal.level >= 3 && principal.dept == "eng" };
@id("l2") permit(principal, action, resource)
  when { principal.level >= 5 && principal.dept == "ops" };
@id("o1") permit(principal, action, resource) when { principal.level == resource.level };
@id("o2") permit(principal, action, resource) when { principal.level == resource.level };
@id("f1") forbid(principal in Group::"a", action, resource in Group::"y")
  unless { principal.level > 8 };
@id("f2") forbid(principal in Group::"b", action, resource in Group::"y")
  unless { principal.level > 7 };
"""


def _shapes_store() -> tuple[Any, Authorizer, EntityFacts]:
    schema = parse_schema(SHAPES_SCHEMA)
    ents = [{"uid": {"type": "Group", "id": g}, "attrs": {}, "parents": []} for g in "abxy"]
    rng = random.Random(5)
    for i in range(30):
        ents.append(
            {
                "uid": {"type": "User", "id": f"u{i}"},
                "attrs": {"level": rng.randrange(10), "dept": rng.choice(["eng", "ops"])},
                "parents": [{"type": "Group", "id": g} for g in rng.sample("ab", rng.randrange(3))],
            }
        )
        ents.append(
            {
                "uid": {"type": "Doc", "id": f"d{i}"},
                "attrs": {"level": rng.randrange(10)},
                "parents": [{"type": "Group", "id": g} for g in rng.sample("xy", rng.randrange(3))],
            }
        )
    facts = EntityFacts(parse_entities(json.dumps(ents), schema))
    return schema, Authorizer(parse_policies(SHAPES_POLICIES)), facts


def test_policies_differing_in_constants_share_one_branch() -> None:
    """Policies whose rows differ only in constants (scope groups, literals) are one SELECT
    over a VALUES table of those constants; the rows and reasons stay the in-process ones."""
    from polang.sql.plan import SURE_FORBID, SURE_PERMIT, merge_shapes

    schema, auth, facts = _shapes_store()
    ctx = RecordValue()
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        aq = eng._action_query(EntityUID("Action", "view"), ctx)
        planner = eng.planner
        for kind, n_parts, with_pid, without_pid in (
            (SURE_PERMIT, 7, 3, 3),  # roles, levels, owner-like copies
            (SURE_FORBID, 2, 1, 1),
        ):
            parts = [p for p in aq.parts if p.kind == kind]
            assert len(parts) == n_parts
            for pid, n in ((True, with_pid), (False, without_pid)):
                shapes = merge_shapes(
                    [(planner.rows_select(p), p.policy) for p in parts], "duckdb", pid=pid
                )
                assert len(shapes) == n, [s.sql() for s in shapes]
        roles = merge_shapes(
            [(planner.rows_select(p), p.policy) for p in aq.parts[:3]], "duckdb", pid=True
        )
        (role,) = roles
        text = role.sql(dialect="duckdb")
        assert "VALUES" in text and text.count("polang_anc") == 2, text
        # the two identical conditions: without reasons one select and no VALUES table
        same = [p for p in aq.parts if planner.policies[p.policy].policy_id in ("o1", "o2")]
        (one,) = merge_shapes(
            [(planner.rows_select(p), p.policy) for p in same], "duckdb", pid=False
        )
        assert "VALUES" not in one.sql(dialect="duckdb")
        # tiny fetches: a pair granted twice may repeat across two batches, still once
        eng.runner.batch_rows = 2
        for reasons in (True, False):
            got = eng.access_matrix(ctx, reasons=reasons)
            want = access_matrix(auth, facts, ctx, schema=schema)
            if reasons:
                assert_same(want, got, "shapes")
            else:
                assert [e.triple for e in got.entries] == [e.triple for e in want.iter_entries()]
        for i in (0, 7, 19):
            d = EntityUID("Doc", f"d{i}")
            got = eng.who_can(EntityUID("Action", "view"), d, ctx, reasons=True)
            assert_same(
                who_can(auth, facts, EntityUID("Action", "view"), d, ctx, schema=schema), got, "who"
            )
            u = EntityUID("User", f"u{i}")
            got = eng.what_can(u, None, ctx, reasons=True)
            assert_same(what_can(auth, facts, u, None, ctx, schema=schema), got, "what")
    finally:
        eng.close()


@pytest.mark.parametrize("wide", [False, True])
def test_pairs_ordered_once_and_ids_compacted(wide: bool) -> None:
    """The NumPy steps of a matrix batch: pairs with repeats, in any order, come out
    ordered by (r, p) and once each (a 32-bit key, or 64 bits when the span is wide);
    an id column becomes a dictionary over the batch's own ids (a mask over a narrow
    span, ``unique`` over a wide one)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from polang.sql.duck import _compact, _sorted_unique

    rng = np.random.default_rng(3)
    hi = 2**30 if wide else 3_000
    r = rng.integers(7, hi, 20_000).astype(np.int32)
    p = rng.integers(11, hi, 20_000).astype(np.int32)
    r, p = np.concatenate([r, r[:999], r[5:50]]), np.concatenate([p, p[:999], p[5:50]])
    fetched = [r, p]
    got_r, got_p = _sorted_unique(fetched)
    assert fetched == []  # emptied: the caller holds no copy through the sort
    want = sorted(set(zip(r.tolist(), p.tolist(), strict=True)))
    assert list(zip(got_r.tolist(), got_p.tolist(), strict=True)) == want
    assert got_r.dtype == np.int32 and got_p.dtype == np.int32

    n_ids = 2_100_000 if wide else 3_000
    ids = pc.cast(pa.array(np.arange(n_ids)), pa.string())
    eids = rng.integers(0, 3_000, 50).astype(np.int32)
    if wide:  # a span much wider than the batch: the unique branch
        eids = np.array([5, 2_000_000, 5, 17], dtype=np.int32)
    arr = _compact(eids, ids)
    assert pa.types.is_dictionary(arr.type)
    assert arr.to_pylist() == [str(i) for i in eids.tolist()]
    assert len(arr.dictionary) == len(set(eids.tolist()))
