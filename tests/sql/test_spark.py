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

from analysis.test_query import random_entities, random_policies
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue
from polang.sql.duck import DuckDBEngine


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the Spark engine's tests need polang[spark] (pyspark)")
    if shutil.which("java") is None:
        pytest.skip("the Spark engine's tests need Java 17 (no `java` on PATH)")
    from polang.sql.spark import spark_session

    session = spark_session(
        "local[1]",
        config={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_local_mode_leaves_no_warehouse_folder_where_it_was_started(spark: Any) -> None:
    import tempfile

    where = spark.conf.get("spark.sql.warehouse.dir")
    assert tempfile.gettempdir() in where and "polang-spark-warehouse" in where


def test_spark_and_duckdb_give_the_same_rows(spark: Any, tmp_path: Path) -> None:
    from polang.sql.spark import SparkEngine

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
        # as Arrow: Spark from its rows, DuckDB (over a store) decoded from the integers
        s_bare, d_bare = se.access_matrix(ctx), duck.access_matrix(ctx)
        assert s_bare.to_arrow().equals(d_bare.to_arrow()) and len(d_bare) > 0
        assert s.to_arrow().equals(d.to_arrow())
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

    from polang.sql.spark import SparkEngine

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


def test_spark_and_duckdb_agree_on_every_query_with_and_without_reasons(spark: Any) -> None:
    """The matrix, who_can and what_can (all actions, one action), each once with and once without
    reasons, on a store with forbids and context conditions: Spark's rows equal DuckDB's,
    with a known context (every policy sure) and without one (policies reading the
    context conditional, with residuals). Spark keeps a query's WITH tables under views
    of its own: none is left behind."""
    from polang.sql.spark import SparkEngine

    rng = random.Random(11)
    text = random_policies(rng, 6, context=True)
    assert "forbid" in text and "context" in text, "the case should have both"
    auth = Authorizer(parse_policies(text))
    facts = EntityFacts(random_entities(rng, users=4, docs=4))
    duck = DuckDBEngine(auth.program, facts, udf=False)
    se = SparkEngine(auth.program, facts, spark=spark)
    view = EntityUID("Action", "view")
    try:
        for ctx, reasons in ((RecordValue({"mfa": True, "level": 2}), False), (None, True)):
            d = duck.access_matrix(ctx, reasons=reasons)
            assert d.entries, "the case should allow something"
            assert any(e.decision == "conditional" for e in d.entries) == (ctx is None)
            assert se.access_matrix(ctx, reasons=reasons).entries == d.entries
            # entities the matrix names: queries that answer something
            res = max(e.resource for e in d.entries if e.action == view)
            pri = max(e.principal for e in d.entries)
            want_who = duck.who_can(view, res, ctx, reasons=not reasons).entries
            assert want_who
            assert se.who_can(view, res, ctx, reasons=not reasons).entries == want_who
            act = None if reasons else view  # all actions once, one action once
            want_what = duck.what_can(pri, act, ctx, reasons=not reasons).entries
            assert want_what
            assert se.what_can(pri, act, ctx, reasons=not reasons).entries == want_what
        left = [t.name for t in spark.catalog.listTables() if "__" in t.name]
        assert not left, f"views of kept WITH tables left behind: {left}"
    finally:
        duck.close()
        se.close()


@pytest.mark.parametrize("how", ["url", "memory"])
def test_spark_tables_staged_by_spark_or_kept_in_memory_give_the_same_rows(
    spark: Any, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster the driver's temporary directory is not readable: ``staging=`` a URL
    is written by Spark itself (here ``file://``), and without ``staging`` the tables are
    sent to Spark as Arrow and kept (forced here: local mode would use a directory)."""
    import polang.sql.spark as sp

    rng = random.Random(5)
    auth = Authorizer(parse_policies(random_policies(rng, 4, context=False)))
    facts = EntityFacts(random_entities(rng, users=5, docs=5))
    ctx = RecordValue({"mfa": True, "level": 1})
    duck = DuckDBEngine(auth.program, facts, udf=False)
    if how == "url":
        assert sp._staging_kind(spark, f"file://{tmp_path}/stage") == "url"
        se = sp.SparkEngine(auth.program, facts, spark=spark, staging=f"file://{tmp_path}/stage")
        assert (tmp_path / "stage" / "polang_anc.parquet").is_dir()  # Spark's part files
    else:
        assert sp._staging_kind(spark, None) == "dir"  # local mode
        monkeypatch.setattr(sp, "_staging_kind", lambda spark, staging: "memory")
        se = sp.SparkEngine(auth.program, facts, spark=spark)
        assert se._tmp is None and se._kept
    try:
        view = [EntityUID("Action", "view")]  # one action: each costs Spark seconds
        d = duck.access_matrix(ctx, actions=view, reasons=True)
        assert d.entries
        assert se.access_matrix(ctx, actions=view, reasons=True).entries == d.entries
        url = f"file://{tmp_path}/answer"  # an output URL reaches Spark as given
        res = se.access_matrix(ctx, actions=view, output=url)
        assert res.output == url and res.stats.rows == len(d.entries)
        assert (tmp_path / "answer").is_dir()
    finally:
        duck.close()
        se.close()


def test_spark_session_settings_do_not_rewrite_policy_literals(spark: Any) -> None:
    """Spark rewrites SQL text before parsing it: ``spark.sql.variable.substitute`` (on by
    default) turns ``${spark.app.name}`` and ``${env:HOME}`` into values, literals
    included, and ``spark.sql.parser.escapedStringLiterals`` keeps backslash escapes as
    written. Policy literals (and an action id, printed as a literal) mean what they say
    under either setting, and the caller's session keeps its settings."""
    import os

    from polang.analysis.query import access_matrix
    from polang.language.entities import parse_entity
    from polang.sql.spark import SparkEngine

    app = spark.conf.get("spark.app.name")
    home = os.environ.get("HOME", "/root")
    text = "\n".join(
        f'@id("{pid}") permit(principal == User::"u", action, resource) when {{ {cond} }};'
        for pid, cond in [
            ("app", 'resource.name == "${spark.app.name}"'),
            ("env", 'resource.name == "${env:HOME}"'),
            ("like", 'resource.name like "${spark*"'),
            ("quote", 'resource.name == "it\'s a \\\\ ${x"'),
        ]
    )
    auth = Authorizer(parse_policies(text))
    names = {
        "app-literal": "${spark.app.name}",
        "app-value": app,
        "env-literal": "${env:HOME}",
        "env-value": home,
        "quote": "it's a \\ ${x",
        "quote-escaped": "it\\'s a \\\\ ${x",
    }
    raw = [{"uid": {"type": "User", "id": "u"}, "attrs": {"name": "u"}, "parents": []}]
    raw += [
        {"uid": {"type": "Doc", "id": k}, "attrs": {"name": v}, "parents": []}
        for k, v in names.items()
    ]
    raw.append({"uid": {"type": "Action", "id": "${spark.app.name}"}, "attrs": {}, "parents": []})
    facts = EntityFacts([parse_entity(e, None) for e in raw])
    ctx = RecordValue({})
    want = [
        (e.principal, e.action, e.resource, e.reasons)
        for e in access_matrix(auth, facts, ctx).iter_entries()
    ]
    assert {r[2].id: r[3] for r in want} == {
        "app-literal": ("app", "like"),
        "env-literal": ("env",),
        "quote": ("quote",),
    }
    assert {r[1].id for r in want} == {"${spark.app.name}"}
    substitute = spark.conf.get("spark.sql.variable.substitute")
    escaped = spark.conf.get("spark.sql.parser.escapedStringLiterals")
    assert substitute == "true" and escaped == "false"  # Spark's defaults: substitution on
    se = SparkEngine(auth.program, facts, spark=spark)
    try:
        got = se.access_matrix(ctx, reasons=True).entries
        assert [(e.principal, e.action, e.resource, e.reasons) for e in got] == want
        spark.conf.set("spark.sql.parser.escapedStringLiterals", "true")
        try:
            got = se.access_matrix(ctx, reasons=True).entries
        finally:
            spark.conf.set("spark.sql.parser.escapedStringLiterals", escaped)
        assert [(e.principal, e.action, e.resource, e.reasons) for e in got] == want
    finally:
        se.close()
    assert spark.conf.get("spark.sql.variable.substitute") == substitute  # left as it was


def test_spark_hands_an_answer_sink_the_rows_the_command_line_writes(
    spark: Any, tmp_path: Path
) -> None:
    """``output=`` an ``AnswerSink`` (what ``polang matrix --engine spark`` writes its
    files with): Spark's rows, brought to the driver in order, make the same CSV bytes
    as the in-process answer and DuckDB's, the policies of each entry in the program's
    order."""
    from polang.analysis.query import access_matrix
    from polang.cli.answers import AnswerWriter
    from polang.sql.spark import SparkEngine

    rng = random.Random(5)
    text = random_policies(rng, 4, context=False)
    text += '\n@id("0-all") permit(principal, action, resource);'  # a second reason each
    auth = Authorizer(parse_policies(text))
    facts = EntityFacts(random_entities(rng, users=4, docs=4))
    ctx = RecordValue({"mfa": True, "level": 1})
    view = [EntityUID("Action", "view")]  # one action: each costs Spark seconds
    files = {}
    for name in ("in-process", "duckdb", "spark"):
        writer = AnswerWriter("csv", str(tmp_path / f"{name}.csv"))
        if name == "in-process":
            writer.write(access_matrix(auth, facts, ctx, actions=view).iter_entries())
        else:
            eng: Any = (
                DuckDBEngine(auth.program, facts, udf=False)
                if name == "duckdb"
                else SparkEngine(auth.program, facts, spark=spark)
            )
            try:
                res = eng.access_matrix(ctx, actions=view, output=writer, reasons=True)
                assert res.output is None and res.stats.rows == writer.rows
            finally:
                eng.close()
        writer.close()
        files[name] = (tmp_path / f"{name}.csv").read_bytes()
    assert files["spark"] == files["in-process"] == files["duckdb"]
    lines = files["spark"].decode().splitlines()
    assert len(lines) > 2 and any(" 0-all," in line for line in lines)  # program order
