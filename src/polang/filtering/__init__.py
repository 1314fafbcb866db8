"""A list endpoint's plan as a filter over the service's own tables (docs/filtering.md).

:func:`translate` turns a plan (``polang.analysis.plan``) and a :class:`Mapping` into a
:class:`Filter`: a sqlglot predicate, printed for any dialect (:meth:`Filter.sql`);
:mod:`polang.filtering.sqlalchemy` and :mod:`polang.filtering.django` give the same
predicate as a SQLAlchemy ``ColumnElement`` and a Django ``Q`` (each imported only where
used: ``polang[sqlalchemy]``, ``polang[django]``). This package imports sqlglot
(``polang[filtering]``, also in ``polang[sqlalchemy]`` and ``polang[duckdb]``).
"""

from polang.filtering.mapping import (
    AttributeMap,
    ClosureMap,
    Mapping,
    ParentMap,
    Table,
    TagsMap,
    TypeMap,
    check_against_schema,
    read_mapping,
)
from polang.filtering.translate import Filter, checked_page, translate

__all__ = [
    "AttributeMap",
    "ClosureMap",
    "Filter",
    "Mapping",
    "ParentMap",
    "Table",
    "TagsMap",
    "TypeMap",
    "check_against_schema",
    "checked_page",
    "read_mapping",
    "translate",
]
