"""The diff of two stores on DuckDB and Spark equals the in-process diff, entry for entry:
on generated stores and edits (hypothesis), on real store directories, written to files
and read back; policies SQL cannot express are a UDF or conditional, and say so."""

from __future__ import annotations

import csv
import functools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from authoring.gen import random_context, random_entities, random_policies
from authoring.test_diff import authorizer, mutate_entities, mutate_policies
from polang import Engine
from polang.authoring.diff import DiffResult, Side, diff
from polang.datalog.facts import EntityFacts
from polang.errors import PolangError, PolicyParseError
from polang.language.entities import Entity
from polang.language.extensions.decimal import parse_decimal
from polang.language.values import EntityUID, RecordValue
from polang.sql.diff import COLUMNS, SqlDiffResult, sql_diff

from .test_spark import spark  # noqa: F401  (the session-scoped JVM)

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"


def edited_pair(seed: int) -> tuple[Side, Side, RecordValue]:
    """A generated store and an edit of it (policies, entities or both) with a context
    (in a property test: a seed whose edit does not parse is not an example)."""
    pair = edited_pair_or_none(seed)
    assume(pair is not None)
    assert pair is not None
    return pair


def edited_pair_or_none(seed: int) -> tuple[Side, Side, RecordValue] | None:
    """:func:`edited_pair`, or None where the generator's scope edit made a scope that
    does not parse."""
    rng = random.Random(seed)
    text = random_policies(rng, 8)
    ents = random_entities(rng)
    what = seed % 3
    new_text = mutate_policies(rng, text) if what in (0, 2) else text
    new_ents = mutate_entities(rng, ents) if what in (1, 2) else ents
    try:
        new_auth = authorizer(new_text)
    except PolicyParseError:
        return None
    return (
        Side(authorizer(text), EntityFacts(ents)),
        Side(new_auth, EntityFacts(new_ents)),
        random_context(rng),
    )


def as_dicts(d: DiffResult) -> list[dict[str, Any]]:
    return [e.to_dict() for e in d.entries]


def assert_same_diff(want: DiffResult, got: SqlDiffResult) -> None:
    assert as_dicts(got) == as_dicts(want)
    assert [e.change for e in got.gained] == ["gained"] * len(want.gained)
    assert got.summary() == want.summary() == DiffResult.summary(got)
    assert got.changed == want.changed and got.rows == len(want.entries)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(seed=st.integers(0, 10_000))
def test_sql_diff_equals_the_in_process_diff(seed: int) -> None:
    old, new, ctx = edited_pair(seed)
    want = diff(old, new, context=ctx)
    got = sql_diff(old, new, context=ctx)
    assert got.complete  # DuckDB over in-process entities: what SQL cannot say is a UDF
    assert_same_diff(want, got)


@functools.cache
def forbid_seeds() -> tuple[int, int]:
    """The first seeds whose in-process diff names forbids on a denied side: one where a
    gained triple names the forbids that denied it before, one where a lost triple also
    names those that deny it now (found by the property, so that a change to the
    generator keeps the test about them)."""
    gained = both = None
    for seed in range(2_000):
        pair = edited_pair_or_none(seed)
        if pair is None:
            continue
        old, new, ctx = pair
        d = diff(old, new, context=ctx)
        if any(e.previous_policies for e in d.gained):
            if gained is None:
                gained = seed
            if both is None and any(e.policies for e in d.lost):
                both = seed
        if gained is not None and both is not None:
            return gained, both
    raise AssertionError("no generated store has forbids on a denied side")


@pytest.mark.parametrize("decide_limit", [10_000, 0])
def test_the_forbids_of_a_denied_side_are_listed(decide_limit: int) -> None:
    """Diffs that name forbids on a denied side: decided in process for a few triples,
    or from the forbids' own matrix in SQL (``decide_limit=0``), they are the policies
    the in-process decision names."""
    for seed in forbid_seeds():
        pair = edited_pair_or_none(seed)
        assert pair is not None
        old, new, ctx = pair
        got = sql_diff(old, new, context=ctx, decide_limit=decide_limit)
        assert_same_diff(diff(old, new, context=ctx), got)
        assert any(e.previous_policies for e in got.gained)
    assert any(e.policies for e in got.lost)  # the second seed's


def test_an_unknown_context_is_conditional_and_reported() -> None:
    text = (
        '@id("a") permit(principal is User, action == Action::"view", resource is Doc) '
        "when { principal.level > 2 };"
    )
    ents = [Entity(EntityUID("User", "u"), {"level": 1}), Entity(EntityUID("Doc", "d"))]
    ents.append(Entity(EntityUID("Action", "view")))
    old = Side(authorizer(text), EntityFacts(ents))
    new = Side(authorizer(text.replace("principal.level > 2", "context.ok")), EntityFacts(ents))
    got = sql_diff(old, new)
    (e,) = got.gained
    assert (e.before, e.after, e.conditional) == ("deny", "conditional", True)
    assert e.policies == ("a",) and e.residuals == ({"policy_id": "a", "effect": "permit"},)
    assert not got.complete and got.fallbacks[0]["side"] == "new"
    assert got.summary()["conditional"] == 1
    assert [x.triple for x in diff(old, new).gained] == [e.triple]


def test_an_unchanged_store_writes_an_empty_answer(tmp_path: Path) -> None:
    pair = edited_pair_or_none(4)
    assert pair is not None
    old, _, ctx = pair
    got = sql_diff(old, old, context=ctx, output=tmp_path / "d.csv", format="csv")
    assert got.stats.mode == "unchanged" and not got.changed and got.rows == 0
    assert (tmp_path / "d.csv").read_text().splitlines() == [",".join(COLUMNS)]


# ---------------------------------------------------------------- stores and files


def _people(n: int) -> list[dict[str, Any]]:
    org = {"__entity": {"type": "Acme::Org", "id": "acme"}}
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(
            {
                "uid": {"type": "Acme::User", "id": f"u{i}"},
                "attrs": {"email": f"u{i}@acme.example", "org": org, "clearance": i % 5},
                "parents": [{"type": "Acme::Team", "id": "finance"}] if i % 2 else [],
            }
        )
        out.append(
            {
                "uid": {"type": "Acme::Document", "id": f"d{i}"},
                "attrs": {
                    "owner": {"__entity": {"type": "Acme::User", "id": f"u{(i * 3) % n}"}},
                    "org": org,
                    "classification": ["internal", "secret"][i % 2],
                    "public": i % 3 == 0,
                },
            }
        )
    return out


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path]:
    """The example store with people, and a copy whose editors need less clearance."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        shutil.copytree(STORE, d)
        (d / "entities" / "people.json").write_text(json.dumps(_people(6)), "utf-8")
    pol = b / "policies" / "documents.polang"
    pol.write_text(pol.read_text("utf-8").replace("clearance >= 3", "clearance >= 1"), "utf-8")
    return a, b


def _engine(path: Path) -> Engine:
    return Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(path)})


def test_two_store_directories(stores: tuple[Path, Path]) -> None:
    ea, eb = _engine(stores[0]), _engine(stores[1])
    try:
        for ctx in ({}, {"network": "corp"}):
            want = ea.diff(eb, context=ctx)
            got = ea.diff(eb, context=ctx, engine="duckdb")
            assert isinstance(got, SqlDiffResult) and want.gained
            assert_same_diff(want, got)
            assert got.stats.changed_policies == ["cleared-editors"]
            assert "1 of 3 actions" in got.stats.reason  # only edit's matrix is compared
        # new entity data laid over the new side: a user moves team, a document is new
        moved = _people(6)[2]
        moved["parents"] = [{"type": "Acme::Team", "id": "finance"}]
        moved["attrs"]["clearance"] = 4
        doc = dict(_people(7)[-1], uid={"type": "Acme::Document", "id": "fresh"})
        want = ea.diff(entities=[moved, doc], context={})
        got = ea.diff(entities=[moved, doc], context={}, engine="duckdb")
        assert want.changed and got.stats.changed_entities == 2
        assert_same_diff(want, got)
        assert got.new_label.endswith("+ entities")
    finally:
        ea.close()
        eb.close()


def test_two_stores_with_entities_given_once(stores: tuple[Path, Path], tmp_path: Path) -> None:
    """Two stores and entity data given once (objects or files): the data of both sides,
    so the diff is the stores' difference alone (the policy's), in process and on
    DuckDB, as when given to each side; given for the new side only (``old_entities=[]``)
    every new entity's access is a change too."""
    ea, eb = _engine(stores[0]), _engine(stores[1])
    try:
        extra = _people(9)[12:]  # u6..u8 and d6..d8: neither store has them
        both = ea.diff(eb, entities=extra, old_entities=extra, context={})
        assert both.changed and both.stats.changed_entities == 0
        assert {e.policies for e in both.entries} == {("cleared-editors",)}
        for engine in ("in-process", "duckdb"):
            got = ea.diff(eb, entities=extra, context={}, engine=engine)
            assert got.stats.changed_entities == 0
            assert as_dicts(got) == as_dicts(both)
            assert got.old_label.endswith("+ entities") and got.new_label.endswith("+ entities")
            mine = ea.diff(eb, entities=extra, old_entities=[], context={}, engine=engine)
            assert mine.stats.changed_entities == len(extra)
            assert len(mine.entries) > len(both.entries)
        # files given once: both sides read them
        org = json.loads((STORE / "entities" / "organisation.json").read_text("utf-8"))
        f = _jsonl(tmp_path / "all.jsonl", org + _people(6) + extra)
        got = sql_diff(ea, eb, context={}, new_files=[f])
        assert_same_diff(sql_diff(ea, eb, context={}, old_files=[f], new_files=[f]), got)
        assert [e.triple for e in got.entries] == [e.triple for e in both.entries]
        with pytest.raises(PolangError, match="with old_files give them in the files"):
            sql_diff(ea, eb, old_entities=extra, context={}, old_files=[f])
    finally:
        ea.close()
        eb.close()


def _jsonl(path: Path, entities: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in entities), "utf-8")
    return str(path)


def test_entities_read_from_files(stores: tuple[Path, Path], tmp_path: Path) -> None:
    """Each side's entities from JSON-lines files (read by DuckDB, never Python objects)
    give the diff of the same data laid over the store in process."""
    ea = _engine(stores[0])
    try:
        org = json.loads((STORE / "entities" / "organisation.json").read_text("utf-8"))
        people = _people(6)
        moved = dict(people[2], parents=[{"type": "Acme::Team", "id": "finance"}])
        moved["attrs"] = dict(moved["attrs"], clearance=4)
        changed = [moved if e is people[2] else e for e in people]
        old_f = _jsonl(tmp_path / "old.jsonl", org + people)
        new_f = _jsonl(tmp_path / "new.jsonl", org + changed)
        want = ea.diff(entities=[moved], context={})
        got = ea.diff(context={}, engine="duckdb", old_files=[old_f], new_files=[new_f])
        assert want.changed and got.stats.reason.startswith("duckdb")
        assert_same_diff(want, got)
        same = sql_diff(ea, context={}, old_files=[old_f], new_files=[old_f])
        assert same.stats.mode == "unchanged" and not same.changed
        with pytest.raises(PolangError, match="give them in the files"):
            sql_diff(ea, entities=[moved], context={}, new_files=[new_f])
    finally:
        ea.close()


def _read_rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_table(path).to_pylist())
    if fmt == "jsonl":
        return [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("policies", "previous_policies", "residuals"):
            r[k] = r[k].split() if r[k] else []
    return rows


def _expected_rows(d: DiffResult) -> list[dict[str, Any]]:
    return [
        {
            "change": e.change,
            "principal_type": e.principal.type,
            "principal_id": e.principal.id,
            "action_type": e.action.type,
            "action_id": e.action.id,
            "resource_type": e.resource.type,
            "resource_id": e.resource.id,
            "before": e.before,
            "after": e.after,
            "policies": list(e.policies),
            "previous_policies": list(e.previous_policies),
            "residuals": [r["policy_id"] for r in e.residuals],
        }
        for e in d.entries
    ]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_rows_streamed_to_a_file_read_back(
    stores: tuple[Path, Path], tmp_path: Path, fmt: str
) -> None:
    ea, eb = _engine(stores[0]), _engine(stores[1])
    try:
        for ctx in ({}, None):  # None: conditional rows, with their residual policies
            want = ea.diff(eb, context=ctx)
            out = tmp_path / f"diff.{fmt}"
            got = ea.diff(eb, context=ctx, engine="duckdb", output=out, format=fmt)
            assert got.output == str(out) and not got.gained and not got.lost
            assert got.rows == len(want.entries) > 0
            rows = _read_rows(out, fmt)
            assert [list(r) for r in rows[:1]] == [list(COLUMNS)]
            if ctx is not None:
                assert rows == _expected_rows(want)
                assert got.summary() == want.summary()
            else:  # SQL's unknown context is coarser: a context-reading policy is undecided
                assert {(r["principal_id"], r["resource_id"]) for r in rows} >= {
                    (e.principal.id, e.resource.id) for e in want.entries
                }
                assert any(r["residuals"] for r in rows)
            assert got.to_dict()["output"] == str(out)
    finally:
        ea.close()
        eb.close()


# ---------------------------------------------------------------- what SQL cannot express


def _decimal_pair() -> tuple[Side, Side, RecordValue]:
    """A policy with an extension operation on an entity attribute, and an edit beside it."""
    base = (
        '@id("cheap") permit(principal, action == Action::"view", resource is Doc) '
        'when { resource.score.lessThan(decimal("1.5")) };\n'
        '@id("owner") permit(principal, action, resource is Doc) '
        "when { resource.owner == principal };\n"
    )
    new_text = base + '@id("all-view") permit(principal, action == Action::"view", resource);\n'
    ents = [Entity(EntityUID("Action", a)) for a in ("view", "edit")]
    for i in range(4):
        ents.append(Entity(EntityUID("User", f"u{i}")))
        attrs = {"score": parse_decimal(["0.5", "2.0"][i % 2]), "owner": EntityUID("User", "u0")}
        ents.append(Entity(EntityUID("Doc", f"d{i}"), attrs))
    facts = EntityFacts(ents)
    return Side(authorizer(base), facts), Side(authorizer(new_text), facts), RecordValue()


def test_an_extension_operation_on_an_attribute_is_a_udf_or_conditional() -> None:
    old, new, ctx = _decimal_pair()
    want = diff(old, new, context=ctx)
    exact = sql_diff(old, new, context=ctx)  # DuckDB over in-process entities: a UDF
    assert exact.complete and any(f["how"] == "udf" for f in exact.fallbacks)
    assert {f["policy_id"] for f in exact.fallbacks} == {"cheap"}
    assert_same_diff(want, exact)
    rough = sql_diff(old, new, context=ctx, udf=False)  # as on Spark: conditional
    assert not rough.complete
    f = next(f for f in rough.fallbacks if f["how"] == "conditional")
    assert f["policy_id"] == "cheap" and "extension" in f["reason"]
    # never silently different: every real change is there, sure or conditional
    got = {e.triple: e for e in rough.entries}
    for e in want.entries:
        assert e.triple in got
        assert got[e.triple].after == e.after or got[e.triple].conditional
    # the docs that are cheap were allowed before: SQL cannot say, so they are conditional
    cheap = [e for e in rough.gained if e.resource.id in ("d0", "d2")]
    assert cheap and all(e.before == "conditional" and e.after == "allow" for e in cheap)
    assert all(e.previous_policies == ("cheap",) for e in cheap)


# ---------------------------------------------------------------- Spark


def test_spark_gives_the_duckdb_rows(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """One diff on Spark (the JVM is slow): its rows, written as a directory of part
    files, and its summary are DuckDB's (without the UDF: conditional on both)."""
    old, new, ctx = _decimal_pair()
    duck = sql_diff(old, new, context=ctx, udf=False)
    out = tmp_path / "diff"
    on_spark = sql_diff(old, new, context=ctx, engine="spark", spark=spark, output=out)
    assert on_spark.rows == len(duck.entries) > 0
    assert on_spark.summary() == duck.summary()
    assert on_spark.fallbacks == duck.fallbacks and not on_spark.complete
    back = [r.asDict() for r in spark.read.parquet(str(out)).collect()]
    order = ("action_type", "action_id", "resource_type", "resource_id", "principal_type")
    key = [*order, "principal_id"]  # the diff's order (part files read back in any order)
    assert sorted(back, key=lambda r: [r[k] for k in key]) == _expected_rows(duck)


def test_spark_without_a_session_opens_the_environment_s(
    spark: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No ``spark=``: the diff opens the session the matrix engines open (SPARK_REMOTE,
    POLANG_SPARK_MASTER, else local), as ``polang diff --engine spark`` does."""
    from polang.sql import spark as spark_mod

    opened: list[bool] = []

    def from_env() -> Any:
        opened.append(True)
        return spark

    monkeypatch.setattr(spark_mod, "session_from_env", from_env)
    old, new, ctx = _decimal_pair()
    on_spark = sql_diff(old, new, context=ctx, engine="spark")
    assert opened and on_spark.summary() == sql_diff(old, new, context=ctx, udf=False).summary()


# ---------------------------------------------------------------- wrong input


def test_wrong_input_is_a_polang_error(tmp_path: Path) -> None:
    old, new, ctx = _decimal_pair()
    with pytest.raises(PolangError, match="unknown engine 'sqlite'"):
        diff(old, new, context=ctx, engine="sqlite")
    with pytest.raises(PolangError, match="unknown output format 'xml'"):
        diff(old, new, context=ctx, engine="duckdb", output=tmp_path / "x", format="xml")
    with pytest.raises(PolangError, match="does not exist"):
        diff(old, new, context=ctx, engine="duckdb", output=tmp_path / "missing" / "d.parquet")
    with pytest.raises(PolangError, match="is a directory"):
        diff(old, new, context=ctx, engine="duckdb", output=tmp_path)
    with pytest.raises(PolangError, match="give engine="):
        diff(old, new, context=ctx, output=tmp_path / "d.parquet")
    with pytest.raises(PolangError, match="unknown SQL engine"):
        sql_diff(old, new, context=ctx, engine="in-process")
    assert not list(tmp_path.iterdir())  # nothing written by a refused call
