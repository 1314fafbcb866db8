"""Spark (local mode) and DuckDB give the same rows on the same inputs.

One JVM for the whole run (a session-scoped fixture); skipped, with the reason, when
pyspark or Java is missing."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.datalog.sql.duck import DuckDBEngine
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue

from ..test_query import random_entities, random_policies


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the Spark engine's tests need polang[spark] (pyspark)")
    if shutil.which("java") is None:
        pytest.skip("the Spark engine's tests need Java 17 (no `java` on PATH)")
    from polang.datalog.sql.spark import spark_session

    session = spark_session(
        "local[1]",
        config={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_and_duckdb_give_the_same_rows(spark: Any, tmp_path: Path) -> None:
    from polang.datalog.sql.spark import SparkEngine

    rng = random.Random(5)
    auth = Authorizer(parse_policies(random_policies(rng, 4, context=False)))
    facts = EntityFacts(random_entities(rng, users=5, docs=5))
    ctx = RecordValue({"mfa": True, "level": 1})
    duck = DuckDBEngine(auth.program, facts, udf=False)
    se = SparkEngine(auth.program, facts, spark=spark)
    try:
        d = duck.access_matrix(ctx, reasons=True)
        s = se.access_matrix(ctx, reasons=True)
        assert d.entries, "the case should allow something"
        assert s.entries == d.entries
        assert [f.to_dict() for f in s.fallbacks] == [f.to_dict() for f in d.fallbacks]
        view, doc, user = (
            EntityUID("Action", "view"),
            EntityUID("Doc", "d1"),
            EntityUID("User", "u1"),
        )
        assert se.who_can(view, doc, ctx).entries == duck.who_can(view, doc, ctx).entries
        edit = EntityUID("Action", "edit")
        assert se.what_can(user, edit, ctx).entries == duck.what_can(user, edit, ctx).entries
        out = tmp_path / "m"
        res = se.access_matrix(ctx, output=out, format="parquet")
        assert res.stats.rows == len(d.entries)
        back = spark.read.parquet(str(out)).collect()
        assert sorted(
            (r["principal_id"], r["action_id"], r["resource_id"]) for r in back
        ) == sorted((e.principal.id, e.action.id, e.resource.id) for e in d.entries)
    finally:
        duck.close()
        se.close()


def test_spark_files_name_policies_like_duckdb_and_an_empty_answer_is_a_file(
    spark: Any, tmp_path: Path
) -> None:
    """Answers written by Spark carry policy ids (not its internal indexes), in every
    format; a query no policy applies to writes an empty answer with the same columns."""
    import pyarrow.parquet as pq

    from polang.datalog.sql.spark import SparkEngine

    rng = random.Random(5)
    auth = Authorizer(parse_policies(random_policies(rng, 4, context=False)))
    facts = EntityFacts(random_entities(rng, users=5, docs=5))
    ctx = RecordValue({"mfa": True, "level": 1})
    duck = DuckDBEngine(auth.program, facts, udf=False)
    se = SparkEngine(auth.program, facts, spark=spark)
    try:
        duck.access_matrix(ctx, output=tmp_path / "d.parquet", reasons=True)
        se.access_matrix(ctx, output=tmp_path / "s", reasons=True)
        key = ("principal_id", "action_id", "resource_id", "decision", "reasons", "residuals")

        def rows(table: Any) -> list[tuple[Any, ...]]:
            cols = table.to_pydict()
            return sorted(zip(*(cols[k] for k in key), strict=True))

        want = rows(pq.read_table(tmp_path / "d.parquet"))
        assert want and any(r[4] for r in want)
        assert rows(pq.read_table(tmp_path / "s")) == want
        se.access_matrix(ctx, output=tmp_path / "c", format="csv", reasons=True)
        csv_reasons = sorted(
            r["reasons"] or ""
            for r in spark.read.option("header", "true").csv(str(tmp_path / "c")).collect()
        )
        assert csv_reasons == sorted(" ".join(r[4]) for r in want)

        nobody = Authorizer(
            parse_policies('@id("p") permit(principal, action, resource) when { false };')
        )
        empty = SparkEngine(nobody.program, facts, spark=spark)
        try:
            for fmt in ("parquet", "csv", "jsonl"):
                res = empty.access_matrix(
                    ctx, output=tmp_path / f"e-{fmt}", format=fmt, reasons=True
                )
                assert res.stats.rows == 0
                assert (tmp_path / f"e-{fmt}").is_dir()
            assert pq.read_table(tmp_path / "e-parquet").num_rows == 0
        finally:
            empty.close()
    finally:
        duck.close()
        se.close()
