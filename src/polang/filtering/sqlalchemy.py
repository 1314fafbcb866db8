"""A plan's filter as a SQLAlchemy 2.x ``ColumnElement`` (``polang[sqlalchemy]``).

``plan_filter(plan, mapping, bind)`` translates for the bind's dialect and returns an
element usable in ``select(Document).where(...)``, Core and ORM alike. String literals of
the policies travel as bound parameters (SQLAlchemy's own); identifiers are quoted by
sqlglot. The element compiles only for the dialect it was translated for.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import Boolean, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement

from polang.errors import FilterRefused
from polang.filtering.mapping import Mapping
from polang.filtering.translate import Filter, split_params, translate

_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sqlite"}
"""SQLAlchemy's dialect names -> the translation's."""


class PlanFilter(ColumnElement[bool]):
    """A translated plan as a Boolean SQL element (see :func:`plan_filter`)."""

    __visit_name__ = "polang_plan_filter"
    inherit_cache = False
    type = Boolean()

    def __init__(self, filter: Filter) -> None:
        self.filter = filter

    @property
    def exact(self) -> bool:
        """False: a superset; check each fetched row (docs/filtering.md)."""
        return self.filter.exact


def dialect_of(bind: Any) -> str:
    """The translation's dialect of a SQLAlchemy engine, connection, session or dialect
    name (``"postgresql"``)."""
    name = bind if isinstance(bind, str) else None
    if name is None:
        get_bind = getattr(bind, "get_bind", None)
        if get_bind is not None:
            bind = get_bind()
        name = getattr(getattr(bind, "dialect", None), "name", None)
    d = _DIALECTS.get(str(name))
    if d is None:
        raise FilterRefused(
            f"no translation for the SQLAlchemy dialect {name!r}: one of "
            + ", ".join(sorted(_DIALECTS)),
            construct="dialect",
        )
    return d


def plan_filter(plan: Any, mapping: Mapping, bind: Any, *, superset: bool = False) -> PlanFilter:
    """The plan as a ``ColumnElement`` for ``bind``'s dialect (FilterRefused when the
    plan uses what the dialect cannot express; ``superset``: see ``translate``)."""
    return PlanFilter(translate(plan, mapping, dialect_of(bind), superset=superset))


@compiles(PlanFilter)
def _compile(element: PlanFilter, compiler: Any, **kw: Any) -> str:
    want = element.filter.dialect
    got = _DIALECTS.get(compiler.dialect.name)
    if got != want:
        raise FilterRefused(
            f"this filter was translated for {want}, not the SQLAlchemy dialect "
            f"{compiler.dialect.name!r}: translate it for that bind",
            construct="dialect",
        )
    pieces, values = split_params(element.filter.where, want, secrets.token_hex(8))
    percent = compiler.dialect.paramstyle in ("format", "pyformat")
    out: list[str] = []
    for i, piece in enumerate(pieces):
        out.append(piece.replace("%", "%%") if percent else piece)
        if i < len(values):
            out.append(compiler.process(bindparam(None, values[i], unique=True), **kw))
    return "(" + "".join(out) + ")"
