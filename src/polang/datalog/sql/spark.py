"""Spark (pyspark): the same queries printed in Spark's dialect.

The tables are laid out and loaded exactly as for DuckDB (an embedded DuckDB builds them,
closure included), written to Parquet in a staging directory the Spark session can read,
and registered as temporary views; every query then runs in Spark. Local mode needs only
Java 17; a cluster is the usual ``master`` URL or a Spark Connect ``remote`` (the staging
directory must then be on storage the cluster reads: pass ``staging=`` a shared path).

Policies SQL cannot express are reported as conditional (no Python UDF runs on Spark's
executors), so ``result.complete`` says whether an answer is exact.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from polang.datalog.facts import EntityFacts
from polang.datalog.ir import Program
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID

from .duck import _actions, connect, load_entities
from .engine import KEYS, Format, Job, SqlEngine
from .lower import ANC, Layout
from .plan import Population, is_action_type
from .tables import SqlError


def _import_pyspark() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise SqlError(
            "the Spark engine needs pyspark (and Java 17): pip install 'polang[spark]'"
        ) from None
    return pyspark.sql


def spark_session(
    master: str | None = "local[2]",
    *,
    remote: str | None = None,
    app_name: str = "polang",
    config: dict[str, str] | None = None,
) -> Any:
    """A Spark session: ``master`` (``local[N]``, ``spark://host:7077``, ``yarn``...) or a
    Spark Connect ``remote`` (``sc://host:15002``); ``config``: extra ``spark.*`` settings."""
    sql = _import_pyspark()
    b = sql.SparkSession.builder.appName(app_name)
    if remote is not None:
        b = b.remote(remote)
    elif master is not None:
        b = b.master(master)
    settings = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}
    settings.update(config or {})
    for k, v in settings.items():
        b = b.config(k, v)
    return b.getOrCreate()


class SparkRunner:
    dialect = "spark"
    drops_sorted_dups = False  # rows are read back as Spark wrote them: grouped in SQL

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.policy_ids: list[str] = []  # set by the engine: reasons are written as ids

    def rows(self, job: Job, reasons: bool) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for row in self.spark.sql(job.text_sql).collect():
            p = EntityUID(row["principal_type"], row["principal_id"])
            r = EntityUID(row["resource_type"], row["resource_id"])
            if reasons:
                out.append((p, job.action, r, row["decision"], row["reasons"], row["residuals"]))
            else:
                out.append((p, job.action, r, row["decision"]))
        return out

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def write(self, jobs: Sequence[Job], path: Path, fmt: Format, reasons: bool) -> int:
        """One Spark write of every job's rows: ``path`` becomes a directory of part files."""
        from pyspark.sql import functions as F

        if jobs:
            dfs = [self.spark.sql(j.text_sql) for j in jobs]
            df = functools.reduce(lambda a, b: a.unionByName(b), dfs)
        else:  # no policy applies: an empty answer, with the same columns
            lists = ", reasons array<string>, residuals array<string>" if reasons else ""
            keys = ", ".join(f"{c} string" for c in (*KEYS, "decision"))
            df = self.spark.createDataFrame([], keys + lists)
        if reasons and jobs:  # policy indexes -> policy ids, as DuckDB writes them
            none = F.array().cast("array<string>")
            ids = F.array(*[F.lit(i) for i in self.policy_ids]) if self.policy_ids else none
            for name in ("reasons", "residuals"):
                named = F.transform(name, lambda i: F.element_at(ids, i.cast("int") + 1))
                df = df.withColumn(name, F.coalesce(named, none))  # no list: an empty one
        if reasons and fmt == "csv":
            df = df.withColumn("reasons", F.array_join("reasons", " ")).withColumn(
                "residuals", F.array_join("residuals", " ")
            )
        w = df.write.mode("overwrite")
        if fmt == "parquet":
            w.parquet(str(path))
            back = self.spark.read.parquet(str(path))
        elif fmt == "csv":
            w.option("header", "true").csv(str(path))
            back = self.spark.read.option("header", "true").csv(str(path))
        else:
            w.json(str(path))
            if not jobs:  # nothing to infer a JSON schema from
                return 0
            back = self.spark.read.json(str(path))
        return int(back.count())


class SparkEngine(SqlEngine):
    """The queries on Spark over entities held in process (staged as Parquet)."""

    def __init__(
        self,
        program: Program,
        entities: EntityFacts | Iterable[Entity],
        schema: Schema | None = None,
        *,
        spark: Any = None,
        staging: str | Path | None = None,
    ) -> None:
        self.spark = spark if spark is not None else spark_session()
        facts = entities if isinstance(entities, EntityFacts) else EntityFacts(entities)
        self.facts = facts
        con = connect()
        try:
            loaded = load_entities(con, facts.entities, schema, program)
            if staging is None:
                self._tmp: Any = tempfile.TemporaryDirectory(prefix="polang-spark-")
                staging = self._tmp.name
            else:
                self._tmp = None
            stage = Path(staging)
            stage.mkdir(parents=True, exist_ok=True)
            names = [t.table for t in loaded.spec.tables.values()]
            names += ["polang_uid", "polang_parent", ANC]
            for name in names:
                target = stage / f"{name}.parquet"
                con.execute(f"COPY \"{name}\" TO '{_sql_path(target)}' (FORMAT parquet)")
                self.spark.read.parquet(str(target)).createOrReplaceTempView(name)
        finally:
            con.close()
        self.loaded = loaded
        action_anc = schema.action_ancestors if schema is not None else facts.ancestors_of
        stored_actions = (u for u in loaded.uids if u in facts.entities and is_action_type(u.type))
        pop = Population(
            Layout(loaded.spec.tables, loaded.eid_exp),
            loaded.stored_types,
            _actions(schema, stored_actions, program),
            action_anc,
            schema,
        )
        counts = {t: sum(1 for e in facts.entities if e.uid.type == t) for t in loaded.stored_types}
        by_type: dict[str, list[int]] = {}
        for e in facts.entities:
            by_type.setdefault(e.uid.type, []).append(loaded.eid[e.uid])
        super().__init__(
            SparkRunner(self.spark),
            program,
            pop,
            udf=False,
            uid_of=loaded.uids.__getitem__,
            eid_of=lambda u: loaded.eid.get(u) if facts.get(u) is not None else None,
            resource_eids=lambda types: sorted(i for t in types for i in by_type.get(t, ())),
            count_of=lambda types: sum(counts.get(t, 0) for t in types),
            batch_pairs=2**62,  # one query per action: Spark partitions the work itself
        )
        runner = self.runner
        assert isinstance(runner, SparkRunner)
        runner.policy_ids = self.policy_ids

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _sql_path(p: Path) -> str:
    return str(p).replace("'", "''")
