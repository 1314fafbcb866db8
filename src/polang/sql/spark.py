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
from typing import Any, TypeVar, cast

import sqlglot
from sqlglot import exp

from polang.datalog.facts import EntityFacts
from polang.datalog.ir import Program
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID

from .duck import _actions, connect, duckdb_errors, load_entities
from .engine import (
    KEYS,
    AnswerSink,
    Columns,
    Fetched,
    Format,
    Job,
    Output,
    SqlEngine,
    answer_schema,
    is_sink,
)
from .lower import ANC, Layout, num
from .plan import Population, is_action_type
from .tables import SqlError
from .types import any_surrogate, has_surrogate, to_sql_text


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


_E = TypeVar("_E", bound=exp.Expr)


def _spelled(s: str) -> exp.Expression:
    """A string constant Spark reads as ``s`` under any session setting: ``concat`` of
    literal runs, with ``'`` and ``\\`` as ``chr(39)`` / ``chr(92)`` (no escape for
    ``spark.sql.parser.escapedStringLiterals`` to read otherwise) and every ``$`` that
    precedes a ``{`` ending its run (no ``${`` for variable substitution to rewrite)."""
    parts: list[exp.Expression] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            parts.append(exp.Literal.string("".join(run)))
            run.clear()

    for i, ch in enumerate(s):
        if ch in "'\\":
            flush()
            parts.append(exp.Anonymous(this="chr", expressions=[num(ord(ch))]))
            continue
        if ch == "{" and i and s[i - 1] == "$":
            flush()
        run.append(ch)
    flush()
    return parts[0] if len(parts) == 1 else exp.Concat(expressions=parts)


def _rewritable(text: str) -> bool:
    """Whether SQL text printed for Spark may hold a literal a session setting could read
    otherwise: ``${`` (variable substitution) or a backslash escape (sqlglot writes
    ``'`` and ``\\`` in a literal as ``\\'`` and ``\\\\``)."""
    return "${" in text or "\\" in text


def _to_spell(value: str) -> bool:
    """Whether a string constant is written by :func:`_spelled` (a plain literal would
    hold ``${`` or an escape)."""
    return "${" in value or "\\" in value or "'" in value


def session_proof(tree: _E) -> _E:
    """``tree`` with every string literal Spark's session settings could rewrite spelled
    by :func:`_spelled` (a copy; the same tree when none).

    Spark rewrites SQL text before it parses it: ``spark.sql.variable.substitute`` (on by
    default) replaces ``${name}``, ``${env:NAME}``, ``${system:name}`` anywhere in the
    text, string literals included, so a policy's ``"${spark.app.name}"`` would compare
    with the application's name; ``spark.sql.parser.escapedStringLiterals`` keeps
    backslash escapes as written. polang does not change the settings of a session it is
    given (they belong to the caller): its SQL means the same under any of them."""

    def spell(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Literal) and node.is_string and _to_spell(node.this):
            return _spelled(node.this)
        return node

    return cast(_E, tree.transform(spell))


def session_proof_sql(text: str) -> str:
    """SQL text in Spark's dialect, its literals made :func:`session_proof` (parsed and
    printed again only when it holds something to spell)."""
    if not _rewritable(text):
        return text
    return session_proof(sqlglot.parse_one(text, read="spark")).sql(dialect="spark")


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
            return self.sql(text), []
        tree.set("with_", None)
        kept: list[_Kept] = []
        renamed: dict[str, str] = {}
        try:
            for cte in with_.expressions:
                body = _renamed(cte.this, renamed)
                self._views += 1
                view = f"{cte.alias}__{self._views}"
                df = self.sql(body.sql(dialect=self.dialect)).persist()
                kept.append(_Kept(view, df))
                df.count()  # computed now, once: the query's scans read it back
                df.createOrReplaceTempView(view)
                renamed[cte.alias] = view
            main = _renamed(tree, renamed).sql(dialect=self.dialect)
            return self.sql(main), kept
        except BaseException:
            self.release(kept)
            raise

    def sql(self, text: str) -> Any:
        """``spark.sql`` of polang's SQL text, made :func:`session_proof` first: every
        query the runner sends Spark (policy constants, action ids) goes through here."""
        return self.spark.sql(session_proof_sql(text))

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
        return [tuple(r) for r in self.sql(sql).collect()]

    def write(self, jobs: Sequence[Job], target: Output, fmt: Format, reasons: bool) -> int:
        """One Spark write of every job's rows: ``target`` (a path, or a URL as given)
        becomes a directory of part files. An ``AnswerSink`` is handed the rows instead,
        in order, brought to the driver a partition at a time (:meth:`_to_sink`)."""
        if is_sink(target):
            return self._to_sink(jobs, target, reasons)
        kept: list[_Kept] = []
        try:
            return self._write(jobs, str(target), fmt, reasons, kept)
        finally:
            self.release(kept)

    sink_rows = 65_536
    """Rows per record batch handed to an ``AnswerSink``."""

    def _to_sink(self, jobs: Sequence[Job], sink: AnswerSink, reasons: bool) -> int:
        import pyarrow as pa

        schema = answer_schema(reasons)
        total = 0

        def hand(rows: list[tuple[Any, ...]]) -> None:
            columns = [list(c) for c in zip(*rows, strict=True)]
            sink.write_batch(pa.record_batch(columns, schema=schema))

        for job in jobs:  # in order; each job's rows ordered by (resource, principal)
            df, kept = self.frame(job.text_sql)
            try:
                if reasons:
                    df = self._with_ids(df)
                rows: list[tuple[Any, ...]] = []
                for row in df.toLocalIterator():
                    rows.append(tuple(row))
                    if len(rows) >= self.sink_rows:
                        hand(rows)
                        total += len(rows)
                        rows = []
                if rows:
                    hand(rows)
                    total += len(rows)
            finally:
                self.release(kept)
        return total

    def _with_ids(self, df: Any) -> Any:
        """``reasons`` and ``residuals`` as lists of policy ids (an empty list for none),
        as DuckDB writes them."""
        from pyspark.sql import functions as F

        none = F.array().cast("array<string>")
        ids = F.array(*[F.lit(i) for i in self.policy_ids]) if self.policy_ids else none
        for name in ("reasons", "residuals"):
            named = F.transform(name, lambda i: F.element_at(ids, i.cast("int") + 1))
            df = df.withColumn(name, F.coalesce(named, none))
        return df

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
                    df = self.sql(j.text_sql)
                dfs.append(df)
            df = functools.reduce(lambda a, b: a.unionByName(b), dfs)
        else:  # no policy applies: an empty answer, with the same columns
            lists = ", reasons array<string>, residuals array<string>" if reasons else ""
            keys = ", ".join(f"{c} string" for c in (*KEYS, "decision"))
            df = self.spark.createDataFrame([], keys + lists)
        if reasons and jobs:  # policy indexes -> policy ids, as DuckDB writes them
            df = self._with_ids(df)
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
        _no_surrogate_ids(facts)
        con = connect()
        try:
            with duckdb_errors("DuckDB could not lay out the entities"):
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
            Layout(loaded.spec.tables, loaded.eid_exp, to_sql_text),
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


def _no_surrogate_ids(facts: EntityFacts) -> None:
    """Spark answers with the ids it holds, UTF-8 text: an entity whose id has a lone
    surrogate (which DuckDB answers as it is) is refused, never answered as another id.
    (Strings in attributes are written as ``types.to_sql_text`` and compare exactly.)"""
    if any_surrogate([e.uid.id for e in facts.entities]):
        uid = next(e.uid for e in facts.entities if has_surrogate(e.uid.id))
        raise SqlError(
            f"entity {uid}: its id has a lone surrogate, which Spark cannot hold as text; "
            "answer this query with the duckdb engine or in process"
        )


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
