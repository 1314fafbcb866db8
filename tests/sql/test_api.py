"""The public entry points: an Engine as the source, program_to_sql in both dialects."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from polang import Engine
from polang.sql import (
    SqlError,
    program_to_sql,
    sql_access_matrix,
    sql_engine,
    sql_what_can,
    sql_who_can,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(REPO / "examples/stores/directory")})


def test_engine_as_source_matches_engine_queries(engine: Engine, tmp_path: Path) -> None:
    ctx: dict[str, object] = {}
    want = engine.access_matrix(ctx)
    got = sql_access_matrix(engine, ctx, reasons=True)
    assert got.complete
    assert [(e.triple, e.decision, e.reasons) for e in got.entries] == [
        (e.triple, e.decision, e.reasons) for e in want.iter_entries()
    ]
    if want.entries:
        e0 = want.entries[0]
        who = sql_who_can(engine, e0.action, e0.resource, ctx)
        assert [e.principal for e in who.entries] == engine.who_can(
            e0.action, e0.resource, ctx
        ).principals
        what = sql_what_can(engine, e0.principal, None, ctx)
        assert [e.triple for e in what.entries] == [
            e.triple for e in engine.what_can(e0.principal, None, ctx).iter_entries()
        ]
    out = tmp_path / "m.csv"
    res = sql_access_matrix(engine, ctx, output=out, format="csv")
    assert res.output == str(out) and res.stats.rows == len(want.entries)
    assert out.read_text().splitlines()[0].startswith('"principal_type"')


def test_program_to_sql_prints_both_dialects(engine: Engine) -> None:
    for dialect in ("duckdb", "spark"):
        text = program_to_sql(engine.authorizer.program, engine.schema, dialect)
        statements = [s for s in text.split(";") if "SELECT" in s]
        assert statements
        for s in statements:
            sqlglot.parse_one(s.split("\n", 1)[-1] if s.startswith("--") else s, read=dialect)
    with pytest.raises(SqlError, match="unknown SQL dialect"):
        program_to_sql(engine.authorizer.program, engine.schema, "oracle")


def test_bad_arguments(engine: Engine) -> None:
    with pytest.raises(SqlError, match="unknown SQL engine"):
        sql_engine(engine, engine="sqlite")
    with pytest.raises(SqlError, match="expected a polang Engine"):
        sql_engine(42)
    with pytest.raises(SqlError, match="no entities"):
        sql_engine(engine.authorizer)
    eng = sql_engine(engine)
    try:
        with pytest.raises(SqlError, match="unknown output format"):
            eng.access_matrix({}, output="x.xml", format="xml")  # type: ignore[arg-type]
    finally:
        eng.close()  # type: ignore[attr-defined]
