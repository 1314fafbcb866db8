"""The Program as SQL: whole-population queries on DuckDB (embedded) and Spark.

See ``docs/sql.md``. The per-request path stays in process; these answer the access
matrix, ``who_can`` and ``what_can`` over populations too large to hold as Python
objects, and stream the answers to Parquet, CSV or JSON lines.

Entry points (``source``: a :class:`polang.Engine`, an ``Authorizer`` or a ``Program``)::

    sql_access_matrix(source, context, engine="duckdb", output="m.parquet")
    sql_who_can(source, action, resource, context)
    sql_what_can(source, principal, action=None, context=None)
    sql_engine(source, ...)              # keep one loaded engine for many queries
    program_to_sql(program, schema, dialect="spark")   # the SQL text only
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlglot import exp

from polang.datalog.facts import EntityFacts
from polang.datalog.ir import Program
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue, quote_string

from .duck import DuckDBEngine
from .engine import FORMATS, Format, SqlEngine, SqlFallback, SqlResult
from .files import DuckDBFileEngine
from .lower import Layout, Unsupported, col
from .plan import Fallback, Planner, Population, decision_query, sql_comment
from .spark import SparkEngine, session_proof
from .tables import SqlError, table_spec
from .types import DIALECTS

ENGINES = ("duckdb", "spark")


def _parts(source: Any) -> tuple[Program, Any, Schema | None]:
    """(program, entities or facts, schema) of an Engine, an Authorizer or a Program."""
    snap = getattr(source, "_snap", None)
    if snap is not None:  # polang.Engine: its store's default entities and schema
        return snap.authorizer.program, snap.facts, snap.store.schema
    program = getattr(source, "program", source)
    if not isinstance(program, Program):
        raise SqlError(
            f"expected a polang Engine, an Authorizer or a Program, not {type(source).__name__}"
        )
    return program, None, None


def sql_engine(
    source: Any,
    entities: EntityFacts | Iterable[Entity] | None = None,
    schema: Schema | None = None,
    *,
    engine: str = "duckdb",
    files: Sequence[str | Path] | None = None,
    spark: Any = None,
    **options: Any,
) -> SqlEngine:
    """A loaded SQL engine: entities from ``files`` (JSON lines / Parquet, DuckDB only),
    else ``entities``, else the source engine's store. ``options``: ``threads``,
    ``memory_limit``, ``batch_pairs``, ``udf`` (DuckDB); ``staging`` (Spark)."""
    program, own, own_schema = _parts(source)
    schema = schema if schema is not None else own_schema
    if engine not in ENGINES:
        raise SqlError(f"unknown SQL engine {engine!r}; known: {', '.join(ENGINES)}")
    if files:
        if engine != "duckdb":
            raise SqlError("entity files are read by the duckdb engine")
        if schema is None:
            raise SqlError("entities read from files are typed by the schema: give one")
        return DuckDBFileEngine(program, files, schema, **options)
    ents = entities if entities is not None else own
    if ents is None:
        raise SqlError("no entities: pass entities=, files=, or a polang Engine as the source")
    if engine == "spark":
        return SparkEngine(program, ents, schema, spark=spark, **options)
    return DuckDBEngine(program, ents, schema, **options)


def sql_access_matrix(
    source: Any,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    entities: EntityFacts | Iterable[Entity] | None = None,
    schema: Schema | None = None,
    engine: str = "duckdb",
    files: Sequence[str | Path] | None = None,
    output: str | Path | None = None,
    format: Format = "parquet",
    reasons: bool = False,
    **options: Any,
) -> SqlResult:
    """Every allowed (principal, action, resource), in SQL; written to ``output`` when given."""
    eng = sql_engine(source, entities, schema, engine=engine, files=files, **options)
    try:
        return eng.access_matrix(context, output=output, format=format, reasons=reasons)
    finally:
        _close(eng)


def sql_who_can(
    source: Any,
    action: EntityUID,
    resource: EntityUID,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    entities: EntityFacts | Iterable[Entity] | None = None,
    schema: Schema | None = None,
    engine: str = "duckdb",
    files: Sequence[str | Path] | None = None,
    output: str | Path | None = None,
    format: Format = "parquet",
    reasons: bool = False,
    **options: Any,
) -> SqlResult:
    eng = sql_engine(source, entities, schema, engine=engine, files=files, **options)
    try:
        return eng.who_can(action, resource, context, output=output, format=format, reasons=reasons)
    finally:
        _close(eng)


def sql_what_can(
    source: Any,
    principal: EntityUID,
    action: EntityUID | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    entities: EntityFacts | Iterable[Entity] | None = None,
    schema: Schema | None = None,
    engine: str = "duckdb",
    files: Sequence[str | Path] | None = None,
    output: str | Path | None = None,
    format: Format = "parquet",
    reasons: bool = False,
    **options: Any,
) -> SqlResult:
    eng = sql_engine(source, entities, schema, engine=engine, files=files, **options)
    try:
        return eng.what_can(
            principal, action, context, output=output, format=format, reasons=reasons
        )
    finally:
        _close(eng)


def _close(eng: SqlEngine) -> None:
    close = getattr(eng, "close", None)
    if close is not None:
        close()


def program_to_sql(
    program: Program,
    schema: Schema,
    dialect: str = "duckdb",
    context: RecordValue | Mapping[str, Any] | None = None,
) -> str:
    """The SQL a Program becomes (what ``polang rules --sql`` prints): the matrix query of
    each action over the tables of ``docs/sql.md``, uids looked up in ``polang_uid``."""
    if dialect not in DIALECTS:
        raise SqlError(f"unknown SQL dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    spec = table_spec(schema, ())

    def eid(uid: EntityUID) -> exp.Expression:
        sub = (
            exp.select(col("eid", "u"))
            .from_(exp.alias_(exp.to_table("polang_uid"), "u"))
            .where(
                exp.and_(
                    exp.EQ(this=col("type", "u"), expression=exp.Literal.string(uid.type)),
                    exp.EQ(this=col("id", "u"), expression=exp.Literal.string(uid.id)),
                )
            )
        )
        return exp.Subquery(this=sub)

    pop = Population(
        Layout(spec.tables, eid),
        frozenset(schema.entity_types),
        sorted(schema.actions),
        schema.action_ancestors,
        schema,
    )
    planner = Planner(program, pop, dialect)
    ctx = context if context is None or isinstance(context, RecordValue) else RecordValue(context)
    out = []
    for a in pop.actions:
        aq = planner.action_query(a, ctx)
        out.append(sql_comment(f"action {a}: rows (r, p, decision), r/p the eids of polang_uid"))
        for f in aq.fallbacks:
            out.append(
                sql_comment(
                    f"policy {quote_string(f.policy_id)} ({f.principal_type}, "
                    f"{f.resource_type}) is {f.how}: {f.reason}"
                )
            )
        dq = decision_query(aq, planner)
        if dq is not None and dialect == "spark":  # as SparkRunner sends it
            dq = session_proof(dq)
        out.append(dq.sql(dialect=dialect, pretty=True) + ";" if dq is not None else "-- none")
    return "\n".join(out) + "\n"


__all__ = [
    "DIALECTS",
    "ENGINES",
    "FORMATS",
    "Fallback",
    "SqlEngine",
    "SqlError",
    "SqlFallback",
    "SqlResult",
    "Unsupported",
    "program_to_sql",
    "sql_access_matrix",
    "sql_engine",
    "sql_what_can",
    "sql_who_can",
]
