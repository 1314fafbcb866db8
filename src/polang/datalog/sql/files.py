"""Entities read by DuckDB straight from files, never as Python objects.

Accepted: JSON lines (``.jsonl`` / ``.ndjson``: one entity per line, the entity JSON form
``{"uid": {"type", "id"}, "attrs": {...}, "parents": [{"type", "id"}...], "tags": {...}}``)
and Parquet files with the same four columns (``uid`` and ``parents`` as structs, ``attrs``
and ``tags`` as structs, maps or JSON text). Values are typed by the schema (required):
Long, String, Bool, entity references (``{"type", "id"}`` or ``{"__entity": {...}}``) and
sets of those become typed columns; other attribute types (records, extension values) are
not loaded, and policies reading them are reported as conditional.

Every value is checked against its declared type in SQL; the first entity whose value
does not conform is named in the error, as the in-process parser would.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polang.datalog.ir import Program
from polang.language.schema import Schema
from polang.language.values import EntityUID

from .lower import ANC, EntityTable
from .tables import SqlError, TableSpec, _table_names, program_uids
from .types import Ty, from_schema, unsupported

MAX_ERRORS_SHOWN = 3

_UID = "STRUCT(type VARCHAR, id VARCHAR)"


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _path_sql(p: Path) -> str:
    return _q(str(p))


def _json_path(attr: str) -> str:
    return _q('$."' + attr.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _raw_select(path: Path, con: Any) -> str:
    """One file as rows ``(type, id, attrs JSON, parents, tags JSON)``."""
    name = path.name.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        cols = f"{{'uid': '{_UID}', 'attrs': 'JSON', 'parents': '{_UID}[]', 'tags': 'JSON'}}"
        src = (
            f"read_json({_path_sql(path)}, format = 'newline_delimited', columns = {cols}, "
            "maximum_depth = -1)"
        )
        return (
            "SELECT uid.type AS type, uid.id AS id, attrs, "
            "coalesce(parents, []) AS parents, tags "
            f"FROM {src}"
        )
    if name.endswith(".parquet"):
        desc = {
            r[0]: r[1]
            for r in con.execute(
                f"DESCRIBE SELECT * FROM read_parquet({_path_sql(path)})"
            ).fetchall()
        }
        if "uid" not in desc:
            raise SqlError(f"{path}: a Parquet entity file needs a `uid` column (type, id)")

        def as_json(c: str) -> str:
            if c not in desc:
                return "NULL::JSON"
            return f"{c}::JSON" if desc[c].upper() in ("VARCHAR", "JSON") else f"to_json({c})"

        parents = "coalesce(parents, [])" if "parents" in desc else f"[]::{_UID}[]"
        return (
            f"SELECT uid.type AS type, uid.id AS id, {as_json('attrs')} AS attrs, "
            f"{parents} AS parents, {as_json('tags')} AS tags "
            f"FROM read_parquet({_path_sql(path)})"
        )
    raise SqlError(f"{path}: entity files are .jsonl/.ndjson (JSON lines) or .parquet")


def _attr(a: str, rel: str = "") -> str:
    """An attribute's JSON value; a JSON null (a Parquet struct's absent field) is absent."""
    x = f"json_extract({rel}attrs, {_json_path(a)})"
    return f"(CASE WHEN json_type({x}) = 'NULL' THEN NULL ELSE {x} END)"


def _ref_type(v: str) -> str:
    """A JSON entity reference's (type, id): ``{"type","id"}`` or ``{"__entity": {...}}``."""
    return (
        f"coalesce(json_extract_string({v}, '$.__entity.type'), json_extract_string({v}, '$.type'))"
    )


def _ref_id(v: str) -> str:
    return f"coalesce(json_extract_string({v}, '$.__entity.id'), json_extract_string({v}, '$.id'))"


def _is_ref(v: str) -> str:
    return (
        f"(json_type({v}) = 'OBJECT' AND {_ref_type(v)} IS NOT NULL AND {_ref_id(v)} IS NOT NULL)"
    )


def _check(t: Ty, v: str) -> str:
    """SQL: the JSON value ``v`` conforms to ``t``."""
    if t.kind == "long":
        return f"json_type({v}) IN ('BIGINT', 'UBIGINT') AND TRY_CAST({v} AS BIGINT) IS NOT NULL"
    if t.kind == "str":
        return f"json_type({v}) = 'VARCHAR'"
    if t.kind == "bool":
        return f"json_type({v}) = 'BOOLEAN'"
    if t.kind == "entity":
        return f"{_is_ref(v)} AND {_ref_type(v)} = {_q(t.name)}"
    if t.kind == "set" and t.elem is not None:
        inner = _check(t.elem, "e")
        return (
            f"json_type({v}) = 'ARRAY' AND "
            f"list_bool_and(list_transform(json_extract({v}, '$[*]'), lambda e: {inner}))"
            f" IS NOT FALSE"
        )
    raise ValueError(t)  # pragma: no cover - unsupported types are not loaded


def load_files(con: Any, paths: Sequence[str | Path], schema: Schema, program: Program) -> Any:
    """Build the tables from entity files; returns what :class:`DuckDBEngine` needs."""
    from .duck import ANC_SQL

    if schema is None:
        raise SqlError("entities read from files are typed by the schema: give the store's schema")
    if not paths:
        raise SqlError("no entity files given")
    selects = [_raw_select(Path(p), con) for p in paths]
    con.execute("CREATE OR REPLACE TEMP TABLE polang_raw AS " + " UNION ALL ".join(selects))
    bad = con.execute(
        "SELECT type, id FROM polang_raw WHERE type IS NULL OR id IS NULL LIMIT 1"
    ).fetchall()
    if bad:
        raise SqlError("an entity in the files has no uid (type and id)")
    dup = con.execute(
        "SELECT type, id FROM polang_raw GROUP BY type, id HAVING count(*) > 1 LIMIT 1"
    ).fetchall()
    if dup:
        raise SqlError(f"entity {EntityUID(*dup[0])} appears more than once in the files")
    unknown = con.execute(
        "SELECT DISTINCT type FROM polang_raw WHERE type NOT IN (SELECT unnest(?::VARCHAR[])) "
        "LIMIT 1",
        [sorted(schema.entity_types) + sorted({a.type for a in schema.actions})],
    ).fetchall()
    if unknown:
        raise SqlError(f"entity type {unknown[0][0]!r} of the files is not in the schema")

    # the layout: the schema's types; unsupported attribute types are not loaded
    names = _table_names(schema.entity_types)
    tables: dict[str, EntityTable] = {}
    for tname, et in schema.entity_types.items():
        attrs: dict[str, tuple[str, Ty]] = {}
        for i, (a, at) in enumerate(et.shape.attributes.items()):
            ty = from_schema(at.type)
            if ty.kind == "record":
                ty = unsupported("a record read from an entity file")
            attrs[a] = (f"a{i}_" + "".join(c if c.isalnum() else "_" for c in a.lower())[:40], ty)
        tags = from_schema(et.tags) if et.tags is not None else None
        if tags is not None and tags.kind not in ("long", "str", "bool"):
            tags = unsupported("tags of this type read from an entity file")
        tables[tname] = EntityTable(tname, names[tname], attrs, tags)

    # conformance of every loaded value, and every (optional) attribute's presence
    for tname, tbl in tables.items():
        et = schema.entity_types[tname]
        for a, (_c, ty) in tbl.attrs.items():
            v = _attr(a)
            checks = []
            if et.shape.attributes[a].required:
                checks.append((f"{v} IS NULL", "lacks the required attribute"))
            if ty.supported:
                checks.append(
                    (f"{v} IS NOT NULL AND NOT ({_check(ty, v)})", "has a wrong value in")
                )
            for cond, what in checks:
                row = con.execute(
                    f"SELECT type, id FROM polang_raw WHERE type = {_q(tname)} AND ({cond}) LIMIT 1"
                ).fetchall()
                if row:
                    raise SqlError(f"entity {EntityUID(*row[0])} {what} `{a}` ({ty})")
        if tbl.tags is not None and tbl.tags.supported:
            ok = _check(tbl.tags, "e")
            row = con.execute(
                f"SELECT type, id FROM polang_raw WHERE type = {_q(tname)} AND tags IS NOT NULL "
                f"AND json_type(tags) <> 'NULL' AND (json_type(tags) <> 'OBJECT' OR "
                f"list_bool_and(list_transform(json_extract(tags, '$.*'), "
                f"lambda e: json_type(e) = 'NULL' OR ({ok}))) "
                "IS FALSE) LIMIT 1"
            ).fetchall()
            if row:
                raise SqlError(f"entity {EntityUID(*row[0])} has a tag that is not {tbl.tags}")

    # every uid: stored, parents, entity values, policy constants, the schema's actions
    refs = []
    for tname, tbl in tables.items():
        for a, (_c, ty) in tbl.attrs.items():
            v = _attr(a)
            w = f"FROM polang_raw WHERE type = {_q(tname)}"
            if ty.kind == "entity":
                refs.append(
                    f"SELECT {_ref_type(v)} AS type, {_ref_id(v)} AS id {w} AND {v} IS NOT NULL"
                )
            elif ty.kind == "set" and ty.elem is not None and ty.elem.kind == "entity":
                refs.append(
                    f"SELECT {_ref_type('e')} AS type, {_ref_id('e')} AS id FROM "
                    f"(SELECT unnest(json_extract({v}, '$[*]')) AS e {w} AND {v} IS NOT NULL)"
                )
    extra = sorted(program_uids(program) | set(schema.actions))
    con.execute("CREATE OR REPLACE TEMP TABLE polang_extra(type VARCHAR, id VARCHAR)")
    if extra:
        con.executemany("INSERT INTO polang_extra VALUES (?, ?)", [(u.type, u.id) for u in extra])
    union = " UNION ALL ".join(
        [
            "SELECT type, id, true AS stored FROM polang_raw",
            "SELECT p.type, p.id, false FROM (SELECT unnest(parents) AS p FROM polang_raw)",
            "SELECT type, id, false FROM polang_extra",
            *(f"SELECT type, id, false FROM ({r})" for r in refs),
        ]
    )
    con.execute(
        "CREATE OR REPLACE TABLE polang_uid AS SELECT (row_number() OVER (ORDER BY type, id) - 1)"
        f"::INTEGER AS eid, type, id, bool_or(stored) AS stored FROM ({union}) "
        "GROUP BY type, id ORDER BY eid"
    )
    con.execute(
        "CREATE OR REPLACE TABLE polang_parent AS SELECT c.eid AS eid, u.eid AS peid FROM "
        "(SELECT type, id, unnest(parents) AS p FROM polang_raw) r "
        "JOIN polang_uid c ON c.type = r.type AND c.id = r.id "
        "JOIN polang_uid u ON u.type = r.p.type AND u.id = r.p.id"
    )
    con.execute(ANC_SQL)

    # one table per entity type
    for tname, tbl in tables.items():
        cols = ["u.eid AS eid"]
        for a, (c, ty) in tbl.attrs.items():
            if not ty.supported:
                continue
            cols.append(f"{_value_sql(ty, _attr(a, 'r.'))} AS {c}")
        if tbl.tags is not None and tbl.tags.supported:
            sql_t = {"long": "BIGINT", "str": "VARCHAR", "bool": "BOOLEAN"}[tbl.tags.kind]
            m = f"CAST(r.tags AS MAP(VARCHAR, {sql_t}))"
            cols.append(  # a null value (a Parquet struct's absent field) is no tag
                f"coalesce(map_from_entries(list_filter(map_entries({m}), "
                "lambda x: x.value IS NOT NULL)), MAP {}) AS tags"
            )
        con.execute(
            f'CREATE OR REPLACE TABLE "{tbl.table}" AS SELECT {", ".join(cols)} '
            "FROM polang_raw r JOIN polang_uid u ON u.type = r.type AND u.id = r.id "
            f"WHERE r.type = {_q(tname)} ORDER BY eid"
        )
    stored_types = {r[0] for r in con.execute("SELECT DISTINCT type FROM polang_raw").fetchall()}
    con.execute("DROP TABLE polang_raw")
    # the policies' and actions' eids in one query (the planner asks for each, and one
    # look-up in a million uids costs about a third of a millisecond)
    known = {
        EntityUID(t, i): int(e)
        for t, i, e in con.execute(
            "SELECT x.type, x.id, u.eid FROM polang_extra x "
            "JOIN polang_uid u ON u.type = x.type AND u.id = x.id"
        ).fetchall()
    }
    con.execute("DROP TABLE polang_extra")
    return _FileLoaded(con, TableSpec(tables), stored_types, known)


def _value_sql(t: Ty, v: str) -> str:
    """A conforming JSON value as the column's SQL value."""
    if t.kind == "long":
        return f"CAST({v} AS BIGINT)"
    if t.kind == "str":
        return f"json_extract_string({v}, '$')"
    if t.kind == "bool":
        return f"CAST({v} AS BOOLEAN)"
    if t.kind == "entity":
        return (
            f"(SELECT x.eid FROM polang_uid x WHERE x.type = {_ref_type(v)} "
            f"AND x.id = {_ref_id(v)})"
        )
    if t.kind == "set" and t.elem is not None:
        el = t.elem
        if el.kind == "entity":
            return (
                f"(SELECT list_sort(list_distinct(list(x.eid))) FROM "
                f"(SELECT unnest(json_extract({v}, '$[*]')) AS e) s "
                f"JOIN polang_uid x ON x.type = {_ref_type('s.e')} AND x.id = {_ref_id('s.e')})"
            )
        inner = {"long": "BIGINT", "str": "VARCHAR", "bool": "BOOLEAN"}[el.kind]
        return f"list_sort(list_distinct(json_transform({v}, '[\"{inner}\"]')))"
    raise ValueError(t)  # pragma: no cover


class _FileLoaded:
    """The uid numbering lives in DuckDB; look-ups go there (no list of every uid)."""

    def __init__(
        self,
        con: Any,
        spec: TableSpec,
        stored_types: set[str],
        known: dict[EntityUID, int] | None = None,
    ) -> None:
        self.con = con
        self.spec = spec
        self.stored_types = frozenset(stored_types)
        self._cache: dict[EntityUID, int | None] = dict(known or {})
        self._unknown: dict[EntityUID, int] = {}

    def lookup(self, uid: EntityUID) -> tuple[int, bool] | None:
        rows = self.con.execute(
            "SELECT eid, stored FROM polang_uid WHERE type = ? AND id = ?", [uid.type, uid.id]
        ).fetchall()
        return None if not rows else (int(rows[0][0]), bool(rows[0][1]))

    def eid_exp(self, uid: EntityUID) -> Any:
        from .lower import num

        if uid not in self._cache:
            got = self.lookup(uid)
            self._cache[uid] = None if got is None else got[0]
        i = self._cache[uid]
        if i is None:
            i = self._unknown.setdefault(uid, -1 - len(self._unknown))
        return num(i)


__all__ = ["ANC", "MAX_ERRORS_SHOWN", "load_files"]
