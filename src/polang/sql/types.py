"""Static types of SQL columns and values, and the few functions whose names differ per dialect.

An entity type becomes one table; each attribute one typed column (see ``docs/sql.md``):

========================  =====================================================
language type             SQL
========================  =====================================================
Long / String / Bool      BIGINT / VARCHAR / BOOLEAN
entity reference          INTEGER: the entity's ``eid`` in ``polang_uid``
Set<T> (T scalar/entity)  a list of T, sorted and without duplicates
Record                    a STRUCT with one field per attribute (``f0``, ``f1``...)
optional attribute        NULL when absent (a present value is never NULL)
tags                      a MAP from VARCHAR to the tag type, column ``tags``
========================  =====================================================

Anything else (extension values, sets of records or sets, open records, attributes whose
values have different types without a schema) is *unsupported*: its column is not loaded
and a policy that reads it is run as a UDF or reported as conditional.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from polang.language.schema import (
    EntityRefType,
    PrimType,
    RecordType,
    SchemaType,
    SetType,
)

DIALECTS = ("duckdb", "spark")

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Ty:
    """The static type of a column or a lowered value.

    ``kind``: ``long``, ``str``, ``bool``, ``entity`` (``name``: the entity type, ``""``
    when not known statically), ``set`` (``elem``), ``record`` (``fields``: attribute
    name, SQL field name, type, required) or ``unsupported`` (``name``: why).
    """

    kind: str
    name: str = ""
    elem: Ty | None = None
    fields: tuple[tuple[str, str, Ty, bool], ...] = ()

    def field(self, attr: str) -> tuple[str, Ty, bool] | None:
        for a, f, t, req in self.fields:
            if a == attr:
                return f, t, req
        return None

    @property
    def supported(self) -> bool:
        return self.kind != "unsupported"

    def __str__(self) -> str:
        if self.kind == "entity":
            return f"Entity<{self.name or '?'}>"
        if self.kind == "set":
            return f"Set<{self.elem}>"
        if self.kind == "record":
            return "{" + ", ".join(f"{a}: {t}" for a, _f, t, _r in self.fields) + "}"
        if self.kind == "unsupported":
            return f"unsupported({self.name})"
        return {"long": "Long", "str": "String", "bool": "Bool"}[self.kind]


LONG = Ty("long")
STR = Ty("str")
BOOL = Ty("bool")
SCALAR_KINDS = ("long", "str", "bool", "entity")


def unsupported(why: str) -> Ty:
    return Ty("unsupported", why)


def from_schema(t: SchemaType) -> Ty:
    """The column type of a schema type (``unsupported`` where SQL cannot hold it exactly)."""
    if isinstance(t, PrimType):
        return {"Long": LONG, "String": STR, "Bool": BOOL}[t.name]
    if isinstance(t, EntityRefType):
        return Ty("entity", t.name)
    if isinstance(t, SetType):
        el = from_schema(t.element)
        if el.kind in SCALAR_KINDS:
            return Ty("set", elem=el)
        return unsupported(f"a set of {t.element}")
    if isinstance(t, RecordType):
        if t.additional:
            return unsupported("a record with additional attributes")
        fields = []
        for i, (name, a) in enumerate(t.attributes.items()):
            ft = from_schema(a.type)
            if not ft.supported:
                return unsupported(f"a record with a field of type {a.type}")
            fields.append((name, f"f{i}", ft, a.required))
        return Ty("record", fields=tuple(fields))
    return unsupported(f"the extension type {t}")


def sql_type(t: Ty) -> str:
    """The type's name in DuckDB syntax (sqlglot transpiles it for other dialects)."""
    if t.kind == "long":
        return "BIGINT"
    if t.kind == "str":
        return "VARCHAR"
    if t.kind == "bool":
        return "BOOLEAN"
    if t.kind == "entity":
        return "INTEGER"
    if t.kind == "set":
        assert t.elem is not None
        return f"{sql_type(t.elem)}[]"
    if t.kind == "record":
        return "STRUCT(" + ", ".join(f"{f} {sql_type(ft)}" for _a, f, ft, _r in t.fields) + ")"
    raise ValueError(f"no SQL type for {t}")


def arrow_type(t: Ty) -> Any:
    """The column type as a pyarrow type (loading entities held in process)."""
    import pyarrow as pa

    if t.kind == "long":
        return pa.int64()
    if t.kind == "str":
        return pa.string()
    if t.kind == "bool":
        return pa.bool_()
    if t.kind == "entity":
        return pa.int32()
    if t.kind == "set":
        assert t.elem is not None
        return pa.list_(arrow_type(t.elem))
    if t.kind == "record":
        return pa.struct([(f, arrow_type(ft)) for _a, f, ft, _r in t.fields])
    raise ValueError(f"no arrow type for {t}")


# ---------------------------------------------------------------- strings held in SQL

# A lone surrogate (U+D800-U+DFFF) is a Python string character that UTF-8, and so DuckDB,
# Arrow and Spark, cannot hold. Strings entering SQL (loaded values, ids, constants) are
# written with a prefix code: each such character becomes three characters of Unicode's
# last private-use plane, a lead (U+10F000) and two of 64 continuation characters
# (U+10F001-U+10F040); the lead and the continuations themselves are written the same
# way, so the code is one-to-one, and every other character stays as it is. A lead only
# ever starts a code word, so a literal piece of a ``like`` pattern, written the same
# way, matches exactly where the original matches: equality, sets and ``like`` answer
# as in process.
_LEAD = 0x10F000
_CONT = _LEAD + 1
_SPECIAL = re.compile("[\ud800-\udfff\U0010f000-\U0010f040]")
_CODED = re.compile("\U0010f000[\U0010f001-\U0010f040]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _code(m: re.Match[str]) -> str:
    c = ord(m.group())
    i = c - 0xD800 if c < 0xE000 else 2048 + c - _LEAD
    return chr(_LEAD) + chr(_CONT + i // 64) + chr(_CONT + i % 64)


def _uncode(m: re.Match[str]) -> str:
    w = m.group()
    i = (ord(w[1]) - _CONT) * 64 + ord(w[2]) - _CONT
    return chr(0xD800 + i if i < 2048 else _LEAD + i - 2048)


def to_sql_text(s: str) -> str:
    """``s`` as SQL holds it (valid UTF-8; see above): ``s`` itself unless it has a lone
    surrogate or a character of U+10F000-U+10F040."""
    return _SPECIAL.sub(_code, s) if _SPECIAL.search(s) else s


def from_sql_text(s: str) -> str:
    """The string :func:`to_sql_text` wrote as ``s``."""
    return _CODED.sub(_uncode, s) if chr(_LEAD) in s else s


def needs_coding(texts: list[str]) -> bool:
    """Whether some string of ``texts`` is changed by :func:`to_sql_text` (one search
    over them all: a million ids take a few milliseconds)."""
    return _SPECIAL.search("\x00".join(texts)) is not None


def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a lone surrogate (which SQL text cannot carry as it is)."""
    return _SURROGATE.search(s) is not None


def any_surrogate(texts: list[str]) -> bool:
    """Whether some string of ``texts`` holds a lone surrogate (one search over them all)."""
    return _SURROGATE.search("\x00".join(texts)) is not None


def sql_name(s: str) -> str:
    """An entity id or a policy id as SQL holds it: as it is (the answers write it), or
    :func:`to_sql_text` when it has a lone surrogate, which no answer file can hold
    (queries compare uids by number, never by these strings)."""
    return to_sql_text(s) if _SURROGATE.search(s) else s


# ---------------------------------------------------------------- dialect functions


class Funcs:
    """Functions whose names or forms differ between the dialects sqlglot prints."""

    def __init__(self, dialect: str) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown SQL dialect {dialect!r}; known: {', '.join(DIALECTS)}")
        self.dialect = dialect
        self.duck = dialect == "duckdb"

    def _f(self, duck: str, spark: str, *args: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this=duck if self.duck else spark, expressions=list(args))

    def list_contains(self, lst: exp.Expression, x: exp.Expression) -> exp.Expression:
        return self._f("list_contains", "array_contains", lst, x)

    def list_has_any(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        return self._f("list_has_any", "arrays_overlap", a, b)

    def list_has_all(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """Every element of ``b`` is in ``a``."""
        if self.duck:
            return exp.Anonymous(this="list_has_all", expressions=[a, b])
        diff = exp.Anonymous(this="array_except", expressions=[b, a])
        return exp.EQ(this=exp.Anonymous(this="size", expressions=[diff]), expression=_num(0))

    def list_len(self, a: exp.Expression) -> exp.Expression:
        return self._f("len", "size", a)

    def make_set(self, elems: list[exp.Expression]) -> exp.Expression:
        """A canonical set value: sorted, without duplicates."""
        arr = self._f("list_value", "array", *elems)
        return self._f("list_sort", "array_sort", self._f("list_distinct", "array_distinct", arr))

    def map_has(self, m: exp.Expression, k: exp.Expression) -> exp.Expression:
        return self._f("map_contains", "map_contains_key", m, k)

    def map_get(self, m: exp.Expression, k: exp.Expression) -> exp.Expression:
        if self.duck:
            return exp.Anonymous(this="map_extract_value", expressions=[m, k])
        return exp.Anonymous(this="try_element_at", expressions=[m, k])


def _num(n: int) -> exp.Expression:
    return exp.Literal.number(n)
