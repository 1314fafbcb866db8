"""What a policy or data change does to who can access what: ``diff(old, new)``, in
process or in SQL.

The one dispatcher behind ``Engine.diff`` and :func:`polang.authoring.diff.diff` (which
re-exports it): the in-process computation is :func:`polang.analysis.diff.diff_in_process`;
``engine="duckdb"`` or ``"spark"`` runs :func:`polang.sql.diff.sql_diff` (an
optional extra, imported when asked for). It sits in the engine's layer, above both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from polang.analysis.diff import FULL_FRACTION, DiffResult, diff_in_process
from polang.errors import PolangError
from polang.language.entities import Entity
from polang.language.values import RecordValue

__all__ = ["ENGINES", "diff"]


def diff(
    old: Any,
    new: Any | None = None,
    *,
    entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    old_entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    force_full: bool = False,
    full_fraction: float = FULL_FRACTION,
    engine: str = "in-process",
    output: str | Path | None = None,
    format: str = "parquet",
    **options: Any,
) -> DiffResult:
    """The change in the access matrix from ``old`` to ``new``: in process
    (:func:`polang.analysis.diff.diff_in_process`, which says what each argument means) or
    in SQL.

    ``engine="duckdb"`` or ``"spark"`` computes it in SQL at scale
    (:func:`polang.sql.diff.sql_diff`: both full matrices joined in SQL, the rows
    streamed to ``output`` in ``format`` parquet, csv or jsonl when given; ``options``
    go to the SQL engine). ``output`` needs a SQL engine.
    """
    if engine != "in-process":
        if old_entities is not None:
            options["old_entities"] = old_entities
        return _sql_diff(old, new, entities, context, engine, output, format, options)
    if output is not None:
        raise PolangError(
            "diff: output= writes a SQL engine's rows: give engine='duckdb' or 'spark'"
        )
    return diff_in_process(
        old,
        new,
        entities=entities,
        old_entities=old_entities,
        context=context,
        force_full=force_full,
        full_fraction=full_fraction,
    )


ENGINES = ("in-process", "duckdb", "spark")
_EXTRA = {"duckdb": "polang[duckdb]", "spark": "polang[spark]"}


def _sql_diff(
    old: Any,
    new: Any,
    entities: Iterable[Entity | Mapping[str, Any]] | None,
    context: RecordValue | Mapping[str, Any] | None,
    engine: str,
    output: str | Path | None,
    format: str,
    options: dict[str, Any],
) -> DiffResult:
    """The diff on a SQL engine (an optional extra: a missing package says which)."""
    if engine not in ENGINES:
        raise PolangError(f"diff: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    try:  # an optional extra (sqlglot, duckdb, pyspark): imported when asked for
        from polang.sql.diff import sql_diff
    except ImportError as e:
        raise PolangError(
            f"diff: engine {engine!r} needs the {e.name or 'SQL'} package: "
            f"pip install '{_EXTRA[engine]}'"
        ) from None
    return sql_diff(
        old,
        new,
        entities=entities,
        context=context,
        engine=engine,
        output=output,
        format=format,  # type: ignore[arg-type]  # checked there
        **options,
    )
