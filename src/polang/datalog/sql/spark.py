"""Spark (pyspark): the same queries printed in Spark's dialect.

The tables are laid out and loaded exactly as for DuckDB (an embedded DuckDB builds them,
closure included) and handed to Spark as temporary views (see :func:`_staging_kind`): in
local mode written to Parquet in a temporary directory; with ``staging=`` a URL
(``hdfs://``, ``s3a://``) written there by Spark, or a path every executor mounts;
otherwise (a cluster or Spark Connect without ``staging``) sent as Arrow and kept in
Spark's memory. Every query then runs in Spark. Local mode needs only Java 17; a cluster
is the usual ``master`` URL or a Spark Connect ``remote``.

Policies SQL cannot express are reported as conditional (no Python UDF runs on Spark's
executors), so ``result.complete`` says whether an answer is exact.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from polang.datalog.facts import EntityFacts
from polang.datalog.ir import Program
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID

from .duck import _actions, connect, load_entities
from .engine import KEYS, Columns, Fetched, Format, Job, SqlEngine
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


LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
    "spark.sql.warehouse.dir": os.path.join(tempfile.gettempdir(), "polang-spark-warehouse"),
}
"""Local mode's settings (``config=`` overrides them): no web UI; 8 shuffle partitions
(Spark's 200 are 200 tasks per shuffle on one machine's cores); a 4 GiB heap, since the
whole of local mode runs in the driver's JVM: with Spark's 1 GiB the 10,000-entity matrix
spent most of its time in full garbage collections (old generation 98% full); the
warehouse directory under the system's temporary directory (polang keeps no tables, and
Spark's default makes a ``spark-warehouse`` folder wherever the process was started)."""


def spark_session(
    master: str | None = "local[2]",
    *,
    remote: str | None = None,
    app_name: str = "polang",
    config: dict[str, str] | None = None,
) -> Any:
    """A Spark session: ``master`` (``local[N]``, ``spark://host:7077``, ``yarn``...) or a
    Spark Connect ``remote`` (``sc://host:15002``); ``config``: extra ``spark.*`` settings.

    Local mode gets :data:`LOCAL_SETTINGS`; a cluster or Spark Connect keeps its own
    defaults (``master=None`` and no ``remote``: whatever ``spark-submit`` configured).
    ``spark.driver.memory`` only takes effect when this call starts the JVM."""
    sql = _import_pyspark()
    b = sql.SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {}
    if remote is not None:
        b = b.remote(remote)
    elif master is not None:
        b = b.master(master)
        if master.startswith("local"):
            settings = dict(LOCAL_SETTINGS)
    settings.update(config or {})
    for k, v in settings.items():
        b = b.config(k, v)
    return b.getOrCreate()


@dataclass(frozen=True, slots=True)
class _Kept:
    """A ``WITH`` table computed once and kept, and the view its query reads it by."""

    view: str
    frame: Any


def _renamed(tree: exp.Expr, names: dict[str, str]) -> exp.Expr:
    """``tree`` with its references to the tables ``names`` maps renamed (a copy)."""
    if not names:
        return tree

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name in names:
            node = node.copy()
            node.set("this", exp.to_identifier(names[node.name]))
        return node

    return tree.transform(rename)


def session_from_env() -> Any:
    """The session an engine opens when given none (the CLI's ``--engine spark``): Spark
    Connect at ``SPARK_REMOTE`` (pyspark's own variable, e.g. ``sc://host:15002``), else
    the master ``POLANG_SPARK_MASTER`` (``spark://host:7077``, ``yarn``...), else
    ``local[2]``."""
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        return spark_session(None, remote=remote)
    return spark_session(os.environ.get("POLANG_SPARK_MASTER") or "local[2]")


class SparkRunner:
    dialect = "spark"
    drops_sorted_dups = False  # rows are read back as Spark wrote them: grouped in SQL
    keep_in_writes = False
    """Whether a written answer's queries keep their WITH tables too (:meth:`frame`). Not
    by default: measured at 1,000 entities, the matrix written in one plan, Spark reusing
    the permitted pairs' exchanges, took half the time of six kept tables and a union
    (47 s against 95 s), while who_can/what_can collected from kept tables were faster."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.policy_ids: list[str] = []  # set by the engine: reasons are written as ids
        self._views = 0  # numbers the views of kept WITH tables: unique per session

    def frame(self, text: str) -> tuple[Any, list[_Kept]]:
        """A query as a DataFrame, its top-level ``WITH`` tables first computed once and
        kept by Spark (memory, then disk) under views of their own (release them with
        :meth:`release` after the frame ran).

        Spark inlines a (deterministic) CTE at every reference and pushes the forbids'
        anti-join through the permits' union and aggregation: on the benchmark store each
        action's plan grew to ~300 scans, the permitted pairs recomputed in every copy. A
        kept table is a leaf the optimizer does not look into, with its real size (so the
        next joins can broadcast it)."""
        tree = sqlglot.parse_one(text, read=self.dialect)
        with_ = tree.args.get("with_")
        if not isinstance(with_, exp.With) or with_.args.get("recursive"):
            return self.spark.sql(text), []
        tree.set("with_", None)
        kept: list[_Kept] = []
        renamed: dict[str, str] = {}
        try:
            for cte in with_.expressions:
                body = _renamed(cte.this, renamed)
                self._views += 1
                view = f"{cte.alias}__{self._views}"
                df = self.spark.sql(body.sql(dialect=self.dialect)).persist()
                kept.append(_Kept(view, df))
                df.count()  # computed now, once: the query's scans read it back
                df.createOrReplaceTempView(view)
                renamed[cte.alias] = view
            main = _renamed(tree, renamed).sql(dialect=self.dialect)
            return self.spark.sql(main), kept
        except BaseException:
            self.release(kept)
            raise

    def release(self, kept: Sequence[_Kept]) -> None:
        """Drop the views and the data :meth:`frame` kept."""
        for k in kept:
            self.spark.catalog.dropTempView(k.view)
            k.frame.unpersist()

    def rows(self, job: Job, reasons: bool) -> Fetched:
        df, kept = self.frame(job.text_sql)
        try:
            got = df.collect()
        finally:
            self.release(kept)

        def decode() -> Iterator[Columns]:
            ps = [EntityUID(r["principal_type"], r["principal_id"]) for r in got]
            rs = [EntityUID(r["resource_type"], r["resource_id"]) for r in got]
            ds = [r["decision"] for r in got]
            if reasons:
                yield ps, rs, ds, [r["reasons"] for r in got], [r["residuals"] for r in got]
            else:
                yield ps, rs, ds, None, None

        return Fetched(job.action, len(got), decode)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def write(self, jobs: Sequence[Job], target: str | Path, fmt: Format, reasons: bool) -> int:
        """One Spark write of every job's rows: ``target`` (a path, or a URL as given)
        becomes a directory of part files."""
        kept: list[_Kept] = []
        try:
            return self._write(jobs, str(target), fmt, reasons, kept)
        finally:
            self.release(kept)

    def _write(
        self, jobs: Sequence[Job], target: str, fmt: Format, reasons: bool, kept: list[_Kept]
    ) -> int:
        from pyspark.sql import functions as F

        if jobs:
            dfs = []
            for j in jobs:
                if self.keep_in_writes:
                    df, k = self.frame(j.text_sql)
                    kept.extend(k)
                else:
                    df = self.spark.sql(j.text_sql)
                dfs.append(df)
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
            w.parquet(target)
            back = self.spark.read.parquet(target)
        elif fmt == "csv":
            w.option("header", "true").csv(target)
            back = self.spark.read.option("header", "true").csv(target)
        else:
            w.json(target)
            if not jobs:  # nothing to infer a JSON schema from
                return 0
            back = self.spark.read.json(target)
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
        self.spark = spark if spark is not None else session_from_env()
        facts = entities if isinstance(entities, EntityFacts) else EntityFacts(entities)
        self.facts = facts
        con = connect()
        try:
            loaded = load_entities(con, facts.entities, schema, program)
            names = [t.table for t in loaded.spec.tables.values()]
            names += ["polang_uid", "polang_parent", ANC]
            self._tmp: Any = None
            self._kept: list[Any] = []
            how = _staging_kind(self.spark, staging)
            if how == "memory":  # sent to Spark as Arrow and kept there: no shared storage
                for name in names:
                    df = self.spark.createDataFrame(
                        con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
                    )
                    df = df.persist()
                    self._kept.append(df)
                    df.createOrReplaceTempView(name)
            elif how == "url":  # written by Spark itself where its executors read
                base = str(staging).rstrip("/")
                for name in names:
                    url = f"{base}/{name}.parquet"
                    df = self.spark.createDataFrame(
                        con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
                    )
                    df.write.mode("overwrite").parquet(url)
                    self.spark.read.parquet(url).createOrReplaceTempView(name)
            else:  # a directory this machine writes (local mode, or a shared mount)
                if staging is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="polang-spark-")
                    staging = self._tmp.name
                stage = Path(staging)
                stage.mkdir(parents=True, exist_ok=True)
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
        for df in self._kept:
            df.unpersist()
        self._kept = []
        if self._tmp is not None:
            self._tmp.cleanup()


def _staging_kind(spark: Any, staging: str | Path | None) -> str:
    """Where the tables go: ``dir`` (a local directory: local mode, or a path every
    executor also mounts), ``url`` (``hdfs://``, ``s3a://``, ``file://``...: Spark writes
    it) or ``memory`` (no ``staging`` on a cluster or Spark Connect: the driver's local
    temporary directory is not readable there, so the rows are sent to Spark and kept)."""
    if staging is not None:
        return "url" if "://" in str(staging) else "dir"
    try:
        master = str(spark.sparkContext.master)
    except Exception:  # Spark Connect: no SparkContext on the client
        return "memory"
    return "dir" if master.startswith("local") else "memory"


def _sql_path(p: Path) -> str:
    return str(p).replace("'", "''")
