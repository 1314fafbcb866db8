"""Entities as tables: the layout (from the schema, or from the data without one) and the
loading of entities held in process.

Tables (``docs/sql.md`` has the full layout):

- ``polang_uid(eid INTEGER, type VARCHAR, id VARCHAR, stored BOOLEAN)``: every uid the
  query can meet (stored entities, uids their attributes, tags and parents name, uids the
  policies name), numbered in (type, id) order, so ordering by ``eid`` is the in-process
  order of entities;
- ``polang_parent(eid, peid)``: the stored parent edges;
- ``polang_anc(eid, aeid)``: the hierarchy closure, built in SQL from ``polang_parent`` (a
  recursive CTE; reflexive for every uid, so ``in`` needs no special case);
- one table per entity type, ``ent_<type>``: ``eid``, one typed column per attribute
  (``a<i>_<name>``), ``tags`` (a MAP) when the type has tags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from polang.datalog.ir import Const, Program
from polang.errors import PolangError
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue, SetValue

from .lower import EntityTable
from .types import BOOL, LONG, STR, Ty, from_schema, to_sql_text, unsupported


class SqlError(PolangError):
    """A SQL query could not be built or run (the message says which input and why)."""


@dataclass(slots=True)
class TableSpec:
    """The entity tables' names and columns."""

    tables: dict[str, EntityTable]


def _ident(s: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", s).lower()
    return out[:40] or "x"


def _table_names(types: Iterable[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    used: set[str] = set()
    for t in sorted(types):
        base = "ent_" + _ident(t)
        name = base
        n = 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        names[t] = name
    return names


def _columns(attrs: dict[str, Ty]) -> dict[str, tuple[str, Ty]]:
    return {a: (f"a{i}_{_ident(a)}", t) for i, (a, t) in enumerate(attrs.items())}


# ======================================================================== inference


def value_ty(v: Any) -> Ty:
    """The type of one value (without a schema)."""
    t = type(v)
    if t is bool:
        return BOOL
    if t is int:
        return LONG
    if t is str:
        return STR
    if t is EntityUID:
        return Ty("entity", v.type)
    if t is SetValue:
        el: Ty | None = None
        for x in v:
            el = unify(el, value_ty(x))
        if el is None:
            return Ty("set", elem=None)
        if el.kind not in ("long", "str", "bool", "entity"):
            return unsupported("a set of sets, records or extension values")
        return Ty("set", elem=el)
    if t is RecordValue:
        fields = tuple(
            (k, f"f{i}", value_ty(x), True) for i, (k, x) in enumerate(sorted(v.fields.items()))
        )
        for _k, _f, ft, _r in fields:
            if not ft.supported:
                return ft
        return Ty("record", fields=fields)
    return unsupported(f"the extension type {getattr(v, 'TYPE_NAME', t.__name__)}")


def unify(a: Ty | None, b: Ty) -> Ty:
    """One type for the values of an attribute across entities (without a schema)."""
    if a is None or a == b:
        return b
    if not a.supported:
        return a
    if not b.supported:
        return b
    if a.kind != b.kind:
        return unsupported("values of different types in one attribute")
    if a.kind == "entity":
        return Ty("entity", "")
    if a.kind == "set":
        if a.elem is None:
            return b
        if b.elem is None:
            return a
        el = unify(a.elem, b.elem)
        return Ty("set", elem=el) if el.supported else el
    if a.kind == "record":
        fa = {k: (t, r) for k, _f, t, r in a.fields}
        fb = {k: (t, r) for k, _f, t, r in b.fields}
        out = []
        for i, k in enumerate(sorted(set(fa) | set(fb))):
            if k in fa and k in fb:
                ft = unify(fa[k][0], fb[k][0])
                req = fa[k][1] and fb[k][1]
            else:
                ft, req = (fa.get(k) or fb[k])[0], False
            if not ft.supported:
                return ft
            out.append((k, f"f{i}", ft, req))
        return Ty("record", fields=tuple(out))
    return unsupported("values of different types in one attribute")


def _finish(t: Ty) -> Ty:
    """An inferred type made loadable: a set never seen with elements holds Strings (any
    element type gives an empty set the same answers)."""
    if t.kind == "set" and t.elem is None:
        return Ty("set", elem=STR)
    if t.kind == "record":
        return Ty("record", fields=tuple((k, f, _finish(ft), r) for k, f, ft, r in t.fields))
    return t


def table_spec(schema: Schema | None, entities: Iterable[Entity]) -> TableSpec:
    """The tables: the schema's types as declared; types the schema does not declare (or
    every type, without a schema) from the values the entities hold."""
    declared: dict[str, tuple[dict[str, Ty], Ty | None]] = {}
    if schema is not None:
        for name, et in schema.entity_types.items():
            attrs = {a: from_schema(at.type) for a, at in et.shape.attributes.items()}
            if et.shape.additional:
                attrs = {a: unsupported("a type with additional attributes") for a in attrs}
            tags = from_schema(et.tags) if et.tags is not None else None
            declared[name] = (attrs, tags)
    inferred: dict[str, tuple[dict[str, Ty], Ty | None, bool]] = {}
    for e in entities:
        t = e.uid.type
        if t in declared:
            continue
        attrs, tags, _seen = inferred.get(t, ({}, None, False))
        for k, v in e.attrs.items():  # (an attribute some entities lack is a NULL for them)
            vt = value_ty(v)
            attrs[k] = unify(attrs.get(k), vt)
        for v in e.tags.values():
            tags = unify(tags, value_ty(v))
        inferred[t] = (attrs, tags, True)
    names = _table_names(set(declared) | set(inferred))
    tables: dict[str, EntityTable] = {}
    for t, (attrs, tags) in declared.items():
        tables[t] = EntityTable(t, names[t], _columns(attrs), tags)
    for t, (iattrs, itags, _s) in inferred.items():
        fixed = {a: _finish(ty) for a, ty in iattrs.items()}
        tables[t] = EntityTable(t, names[t], _columns(fixed), _finish(itags) if itags else None)
    return TableSpec(tables)


# ======================================================================== uids


def _walk_uids(v: Any, out: set[EntityUID]) -> None:
    todo = [v]
    while todo:
        x = todo.pop()
        t = type(x)
        if t is EntityUID:
            out.add(x)
        elif t is SetValue or isinstance(x, frozenset | tuple | list):
            todo.extend(x)
        elif t is RecordValue:
            todo.extend(x.fields.values())


def program_uids(program: Program) -> set[EntityUID]:
    """The uids the policies name (so each has an ``eid`` and a reflexive closure row)."""
    out: set[EntityUID] = set()
    for r in program.rules:
        for lit in (r.head, *r.body):
            for t in lit.args:
                if isinstance(t, Const):
                    _walk_uids(t.value, out)
    return out


def entity_uids(entities: Iterable[Entity]) -> Iterator[EntityUID]:
    for e in entities:
        yield e.uid
        yield from e.parents
        found: set[EntityUID] = set()
        for v in e.attrs.values():
            _walk_uids(v, found)
        for v in e.tags.values():
            _walk_uids(v, found)
        yield from found


# ======================================================================== values as rows


def convert(ty: Ty, v: Any, eid: dict[EntityUID, int]) -> Any:
    """A value as the Python object pyarrow stores in a column of type ``ty``."""
    k = ty.kind
    t = type(v)
    if k == "long" and t is int:
        return v
    if k == "str" and t is str:
        return v if v.isascii() else to_sql_text(v)  # as constants are written
    if k == "bool" and t is bool:
        return v
    if k == "entity" and t is EntityUID and (not ty.name or v.type == ty.name):
        return eid[v]
    if k == "set" and t is SetValue and ty.elem is not None:
        el = ty.elem
        return sorted(convert(el, x, eid) for x in v)
    if k == "record" and t is RecordValue:
        out = {}
        names = set(v.fields)
        for a, f, ft, _req in ty.fields:
            x = v.fields.get(a)
            out[f] = None if x is None else convert(ft, x, eid)
            names.discard(a)
        if not names:
            return out
    raise _Mismatch(f"a value of the wrong type for {ty}")


class _Mismatch(Exception):
    pass
