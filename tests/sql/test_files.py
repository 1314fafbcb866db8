"""Entities read by DuckDB from JSON-lines and Parquet files: same rows as in process,
and bad files rejected with the entity named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polang.analysis.query import access_matrix, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import parse_context, parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID
from polang.sql.duck import connect
from polang.sql.engine import KEYS
from polang.sql.files import DuckDBFileEngine
from polang.sql.tables import SqlError


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from benchmarks.workload import generate

    w = generate(n_entities=500, n_policies=40, seed=11)
    d = tmp_path_factory.mktemp("entities")
    jsonl = d / "e.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in w.entities))
    parquet = d / "e.parquet"
    con = connect()
    # a Parquet file with typed struct columns, as DuckDB infers them from the JSON
    con.execute(
        f"COPY (SELECT * FROM read_json('{jsonl}', format = 'newline_delimited')) "
        f"TO '{parquet}' (FORMAT parquet)"
    )
    con.close()
    schema = parse_schema(w.schema_text)
    return {
        "schema": schema,
        "auth": Authorizer(parse_policies(w.policies_text)),
        "facts": EntityFacts(parse_entities(w.entities_json, schema)),
        "ctx": parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view")),
        "jsonl": jsonl,
        "parquet": parquet,
        "dir": d,
        "entities": w.entities,
    }


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_files_give_the_in_process_rows(files: dict[str, Any], kind: str) -> None:
    schema, auth, facts, ctx = files["schema"], files["auth"], files["facts"], files["ctx"]
    eng = DuckDBFileEngine(auth.program, [files[kind]], schema)
    try:
        got = eng.access_matrix(ctx, reasons=True)
        assert got.complete
        want = access_matrix(auth, facts, ctx, schema=schema)
        assert [(e.triple, e.decision, e.reasons) for e in got.entries] == [
            (e.triple, e.decision, e.reasons) for e in want.iter_entries()
        ]
        view = EntityUID("Action", "view")
        doc, user = want.entries[0].resource, want.entries[0].principal
        assert [e.principal for e in eng.who_can(view, doc, ctx).entries] == who_can(
            auth, facts, view, doc, ctx, schema=schema
        ).principals
        assert [e.triple for e in eng.what_can(user, None, ctx).entries] == [
            e.triple for e in what_can(auth, facts, user, None, ctx, schema=schema).iter_entries()
        ]
    finally:
        eng.close()


def test_answers_are_held_and_read_as_asked(files: dict[str, Any]) -> None:
    """A query holds its answer as fetched: the count is known at once, the entries are
    built when read (streamed or kept, the same either way), and reading them needs no
    open connection."""
    schema, auth, ctx = files["schema"], files["auth"], files["ctx"]
    eng = DuckDBFileEngine(auth.program, [files["parquet"]], schema)
    try:
        res = eng.access_matrix(ctx, reasons=True)
        streamed = list(res.iter_entries())
        assert len(res) == res.stats.rows == len(streamed) > 0
        assert res.entries == streamed and list(res) == streamed
        assert res.entries is res.entries  # kept once built
        e = streamed[0]
        assert (e.principal, e.action, e.resource, e.decision) == tuple(e)[:4]
        assert e.triple == (e.principal, e.action, e.resource)
        user = e.principal
        bare = eng.what_can(user, None, ctx)
        with_reasons = eng.what_can(user, None, ctx, reasons=True)
        assert repr(bare).startswith("SqlResult(kind='what_can', rows=")
    finally:
        eng.close()
    # read after the connection closed, as entries and as Arrow (decoded from the
    # integers on DuckDB without reasons; from the entries' columns with them)
    for r in (bare, with_reasons, res):
        t = r.to_arrow()
        assert t.num_rows == len(r) and t.schema.names[:7] == [*KEYS, "decision"]
        rows = t.to_pylist()
        assert [
            (
                (
                    EntityUID(x["principal_type"], x["principal_id"]),
                    EntityUID(x["action_type"], x["action_id"]),
                    EntityUID(x["resource_type"], x["resource_id"]),
                ),
                x["decision"],
                tuple(x.get("reasons") or ()),
            )
            for x in rows
        ] == [(e.triple, e.decision, e.reasons) for e in r.iter_entries()]
    got = [(x.triple, x.decision) for x in bare.entries]
    assert got == [(x.triple, x.decision) for x in with_reasons.entries] and got
    assert all(x.reasons for x in with_reasons.entries if x.decision == "allow")
    assert all(not x.reasons for x in bare.entries)


def test_policy_entities_are_numbered_at_load(
    files: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The uids the policies name get their eids in one query at load; planning a query
    then asks DuckDB for none of them (each such look-up scans the uid table)."""
    from polang.sql import files as files_mod

    schema, auth, ctx = files["schema"], files["auth"], files["ctx"]
    eng = DuckDBFileEngine(auth.program, [files["parquet"]], schema)
    asked: list[EntityUID] = []
    real = files_mod._FileLoaded.lookup

    def counted(self: Any, uid: EntityUID) -> Any:
        asked.append(uid)
        return real(self, uid)

    monkeypatch.setattr(files_mod._FileLoaded, "lookup", counted)
    try:
        res = eng.access_matrix(ctx)
        assert res.stats.rows > 0 and asked == []
    finally:
        eng.close()


def _write(d: Path, name: str, ents: list[dict[str, Any]]) -> Path:
    p = d / name
    p.write_text("".join(json.dumps(e) + "\n" for e in ents))
    return p


def test_bad_files_are_rejected_with_the_entity(files: dict[str, Any]) -> None:
    schema, auth, d = files["schema"], files["auth"], files["dir"]
    ents = [dict(e) for e in files["entities"][:80]]
    user = next(e for e in ents if e["uid"]["type"] == "User")
    bad = dict(user, attrs=dict(user["attrs"], level="high"))
    p = _write(d, "bad.jsonl", [bad if e is user else e for e in ents])
    with pytest.raises(SqlError, match=r'User::"[^"]+" has a wrong value in `level`'):
        DuckDBFileEngine(auth.program, [p], schema)
    missing = dict(user, attrs={k: v for k, v in user["attrs"].items() if k != "dept"})
    p = _write(d, "missing.jsonl", [missing if e is user else e for e in ents])
    with pytest.raises(SqlError, match="lacks the required attribute `dept`"):
        DuckDBFileEngine(auth.program, [p], schema)
    p = _write(d, "dup.jsonl", [*ents, user])
    with pytest.raises(SqlError, match="appears more than once"):
        DuckDBFileEngine(auth.program, [p], schema)
    p = _write(d, "type.jsonl", [{"uid": {"type": "Nope", "id": "x"}, "attrs": {}, "parents": []}])
    with pytest.raises(SqlError, match="not in the schema"):
        DuckDBFileEngine(auth.program, [p], schema)
    with pytest.raises(SqlError, match=r"\.jsonl/\.ndjson"):
        DuckDBFileEngine(auth.program, [d / "e.csv"], schema)
