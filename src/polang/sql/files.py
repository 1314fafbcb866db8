"""Entities read by DuckDB straight from files, never as Python objects.

Accepted: JSON lines (``.jsonl`` / ``.ndjson``: one entity per line, the entity JSON form
``{"uid": {"type", "id"}, "attrs": {...}, "parents": [{"type", "id"}...], "tags": {...}}``)
and Parquet files with the same four columns (``uid`` and ``parents`` as structs, ``attrs``
and ``tags`` as structs, maps or JSON text). Values are typed by the schema (required):
Long, String, Bool, entity references (``{"type", "id"}`` or ``{"__entity": {...}}``) and
sets of those become typed columns; other attribute types (records, extension values) are
checked but not loaded, and policies reading them are reported as conditional.

The files are held to the reader rules of entity JSON (``polang.language.entities``): an
unknown key (``parnets``), an attribute the schema does not declare, a repeated key, a
value of the wrong type, a parent of a type the schema does not allow, a cycle. Every
check is SQL over all the rows at once (no row becomes a Python object); the first row
that breaks one is named with its file and line (Parquet: row).

A file is named by its path exactly (``users[1].jsonl`` is that file, never a glob
pattern), must be a regular file (a FIFO, a device or a directory is refused before
DuckDB opens anything), and DuckDB reads the descriptor polang opened and checked, so
the name cannot be swapped in between. DuckDB's own errors (malformed JSON, bad Parquet)
become :class:`SqlError` naming the file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polang.datalog.ir import Program
from polang.inputs.fields import closest
from polang.inputs.files import open_regular_file
from polang.language.entities import ENTITY_KEYS
from polang.language.schema import (
    EntityRefType,
    ExtensionType,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
)
from polang.language.values import EntityUID

from .duck import DuckRunner, build_closure, connect, duckdb_errors
from .engine import DEFAULT_BATCH_PAIRS, SqlEngine
from .lower import ANC, EntityTable, Layout, num
from .plan import Population
from .tables import SqlError, TableSpec, _table_names, program_uids
from .types import Ty, from_schema, has_surrogate, unsupported

MAX_ERRORS_SHOWN = 3

_UID = "STRUCT(type VARCHAR, id VARCHAR)"
_KEYS_ORDER = ("uid", "attrs", "parents", "tags")
_WHAT = "entity file"
_REFUSAL = "an entity file must be a regular file"
_GLOB = re.compile(r"[*?\[\]{}]")


def _q(s: str) -> str:
    if has_surrogate(s):
        raise SqlError(f"the schema name {json.dumps(s)} holds a lone surrogate, not SQL text")
    return "'" + s.replace("'", "''") + "'"


def _json_path(attr: str) -> str:
    return _q('$."' + attr.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(_q(x) for x in items) + "]::VARCHAR[]"


def _show(key: str) -> str:
    """A key or an id from a file for a message: JSON-quoted (every character printable),
    at most 40 characters."""
    return json.dumps(key if len(key) <= 40 else key[:40] + "...")


# ======================================================================== opening files


@dataclass(slots=True)
class _Source:
    """An entity file: its name as given, the descriptor polang opened, and the path
    DuckDB reads (the descriptor's: no glob characters, no second look-up of the name)."""

    name: str
    fd: int
    path: str
    kind: str  # "jsonl" | "parquet"


def _kind(name: str) -> str:
    low = name.lower()
    if low.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if low.endswith(".parquet"):
        return "parquet"
    raise SqlError(f"{name}: entity files are .jsonl/.ndjson (JSON lines) or .parquet")


def _fd_path(fd: int, name: str) -> str:
    """A name DuckDB opens as the file behind ``fd``: ``/proc/self/fd/N`` (Linux) or
    ``/dev/fd/N``; without either, the name itself when it has no glob character."""
    for base in ("/proc/self/fd", "/dev/fd"):
        if os.path.isdir(base):
            return f"{base}/{fd}"
    if _GLOB.search(name):  # pragma: no cover - platforms without /proc or /dev/fd
        raise SqlError(f"{_WHAT} {name}: a name with *, ?, [ or {{ cannot be read here")
    return name  # pragma: no cover


def _open(path: str | Path) -> _Source:
    """Open an entity file for DuckDB: a regular file (a link is followed), checked on
    the open descriptor; anything else is refused by name and never handed to DuckDB
    (which waits forever on a FIFO)."""
    name = os.fsdecode(path)
    kind = _kind(name)
    fd = open_regular_file(path, refusal=_REFUSAL, what=_WHAT)
    try:
        return _Source(name, fd, _fd_path(fd, name), kind)
    except BaseException:
        os.close(fd)
        raise


# ======================================================================== reading rows

# polang_raw: one row per entity as read, nothing checked yet. ``f``: the file's index;
# ``row``: the entity's number in its file (1-based, blank lines not counted); ``kind``
# and ``keys``: the row's JSON kind and keys; ``uid``, ``parents``, ``tags``: JSON (SQL
# NULL when the key is absent) with ``type``, ``id`` and ``plist`` (the parents as
# (type, id) structs) read from them; ``akind``/``tkind``: the JSON kinds of ``attrs`` and
# ``tags``; ``ak``/``tk``: their keys (repeats kept) and ``tv`` the tags' values in the
# same order; ``av``: the values at the schema's attribute names (:func:`_attr_names`),
# each JSON parsed once; ``ao``: ``attrs`` whole, for a type with additional attributes
# only (their values are checked untyped).
_RAW_COLUMNS = (
    "f INTEGER, row BIGINT, kind VARCHAR, keys VARCHAR[], uid JSON, type VARCHAR, "
    f"id VARCHAR, akind VARCHAR, ak VARCHAR[], av JSON[], parents JSON, plist {_UID}[], "
    "tags JSON, tkind VARCHAR, tk VARCHAR[], tv JSON[], ao JSON"
)


def _attr_names(schema: Schema) -> list[str]:
    """Every attribute name the schema's entity types declare, in a fixed order: ``av[i]``
    is the value of the ``i``-th (1-based)."""
    return sorted({a for et in schema.entity_types.values() for a in et.shape.attributes})


def _jsonl_select(i: int, src: _Source) -> str:
    read = (
        f"read_json({_q(src.path)}, format = 'newline_delimited', records = false, "
        "columns = {'json': 'JSON'}, maximum_depth = -1, compression = 'none')"
    )
    parts = "['$.uid', '$.attrs', '$.parents', '$.tags']"
    return (
        "SELECT f, row, kind, keys, x[1] AS uid, x[2] AS attrs, x[3] AS parents, x[4] AS tags "
        f"FROM (SELECT {i} AS f, row_number() OVER () AS row, "
        f"json_type(json) AS kind, json_keys(json) AS keys, json_extract(json, {parts}) AS x "
        f"FROM {read})"
    )


def _parquet_select(i: int, src: _Source, con: Any) -> str:
    read = f"read_parquet({_q(src.path)})"
    desc = {r[0]: str(r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()}
    for c in desc:
        if c not in ENTITY_KEYS:
            raise SqlError(f"{_WHAT} {src.name}: {_unknown_key(c, 'column')}")
    if "uid" not in desc:
        raise SqlError(f"{_WHAT} {src.name}: a Parquet entity file needs a `uid` column")

    def as_json(c: str) -> str:
        if c not in desc:
            return "'{}'::JSON" if c == "attrs" else "NULL::JSON"
        text = f'"{c}"' if desc[c].upper() in ("VARCHAR", "JSON") else f'to_json("{c}")'
        # a struct holds every field of every row: a null one is an absent one
        x = f"regexp_replace(CAST({text} AS VARCHAR), {_q(_NULL_MEMBER)}, '', 'g')::JSON"
        return f"coalesce({x}, '{{}}'::JSON)" if c == "attrs" else x

    keys = _list([k for k in _KEYS_ORDER if k in desc])
    cols = ", ".join(f"{as_json(k)} AS {k}" for k in _KEYS_ORDER)
    return (
        f"SELECT {i} AS f, row_number() OVER () AS row, 'OBJECT' AS kind, {keys} AS keys, "
        f"{cols} FROM {read}"
    )


_NULL_MEMBER = r',"(?:[^"\\]|\\.)*":null|"(?:[^"\\]|\\.)*":null,?'
"""A ``"key":null`` member of compact JSON text (``to_json``), with the comma that joins
it to the next or the previous member (a JSON string token is matched whole, so text
inside a string never matches)."""


def _raw_insert(select: str, schema: Schema) -> str:
    """``INSERT INTO polang_raw`` the rows of one file's ``select`` (see above)."""
    paths = "[" + ", ".join(_json_path(a) for a in _attr_names(schema)) + "]::VARCHAR[]"
    open_types = sorted(n for n, et in schema.entity_types.items() if et.shape.additional)
    plist = (
        "coalesce(list_transform(json_extract(parents, '$[*]'), lambda p: struct_pack("
        f"type := {_ref_type('p')}, id := {_ref_id('p')})), []::{_UID}[])"
    )
    return (
        "INSERT INTO polang_raw SELECT f, row, kind, keys, uid, "
        f"{_ref_type('uid')}, {_ref_id('uid')}, json_type(attrs), json_keys(attrs), "
        f"json_extract(attrs, {paths}), parents, {plist}, tags, json_type(tags), "
        "json_keys(tags), json_extract(tags, '$.*'), "
        f"CASE WHEN list_contains({_list(open_types)}, {_ref_type('uid')}) THEN attrs END "
        f"FROM ({select})"
    )


def _unknown_key(key: str, what: str, allowed: Sequence[str] = _KEYS_ORDER) -> str:
    near = closest(key, allowed)
    hint = f'; did you mean "{near}"?' if near else ""
    known = ", ".join(f'"{k}"' for k in allowed)
    return f"unknown {what} {_show(key)} (an entity's are {known}){hint}"


def _line_of(src: _Source, row: int) -> int | None:
    """The line of a JSON-lines file that holds its ``row``-th entity (DuckDB skips blank
    lines). Only read to name an error: a chunk at a time, never a whole line held."""
    line, seen, content, off = 1, 0, False, 0
    while True:
        chunk = os.pread(src.fd, 1 << 20, off)
        if not chunk:
            break
        off += len(chunk)
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if not content and chunk[start:end].strip(b" \t\r\f\v"):
                content = True
            if nl < 0:
                break
            if content:
                seen += 1
                if seen == row:
                    return line
            content, line, start = False, line + 1, nl + 1
    return line if content and seen + 1 == row else None


# ======================================================================== the checks


def _nodup(v: str) -> str:
    return f"len(json_keys({v})) = len(list_distinct(json_keys({v})))"


def _first_dup(keys: str) -> str:
    return f"list_filter({keys}, lambda k, i: list_position({keys}, k) < i)[1]"


def _first_not_in(keys: str, allowed: Sequence[str]) -> str:
    return f"list_filter({keys}, lambda k: NOT list_contains({_list(allowed)}, k))[1]"


_PLAIN_REF = "(['type', 'id'], ['id', 'type'])"
"""The keys of an entity reference in its usual form: checked by a fast path."""


def _ref_type(v: str) -> str:
    """The type of a valid JSON entity reference (``{"type", "id"}`` or
    ``{"__entity": {...}}``); unchecked (the checks refuse a reference that is not one)."""
    return (
        f"coalesce(json_extract_string({v}, '$.__entity.type'), json_extract_string({v}, '$.type'))"
    )


def _ref_id(v: str) -> str:
    return f"coalesce(json_extract_string({v}, '$.__entity.id'), json_extract_string({v}, '$.id'))"


def _usual_ref(v: str, etype: str | None) -> str:
    """``v`` is ``{"type", "id"}`` or ``{"__entity": {"type", "id"}}`` with two strings and
    no other key (of ``etype`` when given): the forms files use, checked cheaply."""

    def form(o: str) -> str:
        t = (
            f"json_type({v}, '{o}.type') = 'VARCHAR'"
            if etype is None
            else f"json_extract_string({v}, '{o}.type') = {_q(etype)}"
        )
        return (
            f"json_keys({v}, '{o}') IN {_PLAIN_REF} AND {t} "
            f"AND json_type({v}, '{o}.id') = 'VARCHAR'"
        )

    return f"(({form('$')}) OR (json_keys({v}) = ['__entity'] AND {form('$.__entity')}))"


def _ref_form(v: str, exact: bool) -> str:
    """``v`` is an entity reference as a uid or a parent is read (``entities._uid``): an
    object without a repeated key, ``{"__entity": {...}}`` or with string ``type`` and
    ``id``. Not ``exact``: the usual forms only (:func:`_usual_ref`, :func:`_check_rows`)."""
    if not exact:
        return _usual_ref(v, None)
    o = f"({v} -> '$.__entity')"
    return (
        f"(json_type({v}) = 'OBJECT' AND {_nodup(v)} AND CASE WHEN list_contains("
        f"json_keys({v}), '__entity') THEN json_type({o}) = 'OBJECT' AND {_nodup(o)} AND "
        f"json_type({o}, '$.type') = 'VARCHAR' AND json_type({o}, '$.id') = 'VARCHAR' "
        f"ELSE json_type({v}, '$.type') = 'VARCHAR' AND json_type({v}, '$.id') = 'VARCHAR' END)"
    )


def _ref_of(v: str, etype: str, enum: Sequence[str] | None, exact: bool) -> str:
    """``v`` reads as a reference to an entity of ``etype`` where one is expected:
    ``{"__entity": ...}`` alone, or ``type`` and ``id`` without ``__extn`` (as
    ``entities._value``); an enumerated type's id one of its ids."""
    ok_id = f" AND list_contains({_list(enum)}, {_ref_id(v)})" if enum is not None else ""
    if not exact:
        return f"({_usual_ref(v, etype)}{ok_id})"
    k = f"json_keys({v})"
    return (
        f"(json_type({v}) = 'OBJECT' AND ({k} = ['__entity'] OR (list_contains({k}, 'type') "
        f"AND list_contains({k}, 'id') AND NOT list_contains({k}, '__extn'))) AND "
        f"{_ref_form(v, True)} AND {_ref_type(v)} = {_q(etype)}{ok_id})"
    )


class _Checks:
    """SQL conditions that a JSON value conforms to a schema type, as the in-process
    entity parser reads it (``entities._value``)."""

    def __init__(self, schema: Schema, exact: bool = True) -> None:
        self.schema = schema
        self.exact = exact
        self.index = {a: i + 1 for i, a in enumerate(_attr_names(schema))}

    def enum_ok(self, etype: str, id_sql: str) -> str | None:
        et = self.schema.entity_types.get(etype)
        if et is None or et.enum is None:
            return None
        return f"list_contains({_list(et.enum)}, {id_sql})"

    def conforms(self, t: SchemaType, v: str, depth: int = 0) -> str:
        if isinstance(t, PrimType):
            if t.name == "Long":
                return (
                    f"(json_type({v}) IN ('BIGINT', 'UBIGINT') "
                    f"AND TRY_CAST({v} AS BIGINT) IS NOT NULL)"
                )
            return f"json_type({v}) = '{'VARCHAR' if t.name == 'String' else 'BOOLEAN'}'"
        if isinstance(t, EntityRefType):
            et = self.schema.entity_types.get(t.name)
            return _ref_of(v, t.name, et.enum if et is not None else None, self.exact)
        if isinstance(t, SetType):
            e = f"e{depth}"
            inner = self.conforms(t.element, e, depth + 1)
            return (
                f"(json_type({v}) = 'ARRAY' AND list_bool_and(list_transform("
                f"json_extract({v}, '$[*]'), lambda {e}: {inner})) IS NOT FALSE)"
            )
        if isinstance(t, RecordType):
            return self.record(t, v, depth)
        if isinstance(t, ExtensionType):  # the form only: extension values are not loaded
            x = f"({v} -> '$.__extn')"
            return (
                f"(json_type({v}) = 'VARCHAR' OR (json_type({v}) = 'OBJECT' AND "
                f"json_keys({v}) = ['__extn'] AND json_type({x}) = 'OBJECT' AND {_nodup(x)} "
                f"AND json_type({x}, '$.fn') = 'VARCHAR'))"
            )
        raise SqlError(f"no check for the schema type {t}")  # pragma: no cover

    def record(self, t: RecordType, v: str, depth: int) -> str:
        parts = [f"json_type({v}) = 'OBJECT'", _nodup(v)]
        if not t.additional:
            parts.append(f"list_has_all({_list(list(t.attributes))}, json_keys({v}))")
        for name, a in t.attributes.items():
            x = f"({v} -> {_json_path(name)})"
            if a.required:
                parts.append(f"{x} IS NOT NULL")
            parts.append(f"({x} IS NULL OR {self.conforms(a.type, x, depth + 1)})")
        if t.additional:
            parts.append(self.untyped_ok(v))
        return "(" + " AND ".join(parts) + ")"

    @staticmethod
    def untyped_ok(v: str) -> str:
        """A value no type directs (an open record's extra attribute): no null, no
        floating-point number, no integer outside Long, no repeated key, at any depth."""
        return (
            f"NOT EXISTS (SELECT 1 FROM json_tree({v}) AS t WHERE t.type IN ('NULL', 'DOUBLE') "
            "OR (t.type = 'UBIGINT' AND TRY_CAST(t.atom AS BIGINT) IS NULL) OR (t.type = "
            "'OBJECT' AND len(json_keys(t.value)) <> len(list_distinct(json_keys(t.value)))))"
        )

    def attr(self, a: str, rel: str = "") -> str:
        """The JSON value of attribute ``a`` of a ``polang_raw`` row (NULL: absent)."""
        return f"{rel}av[{self.index[a]}]"


def _problem_sql(schema: Schema, exact: bool) -> str:
    """The first problem of a row of ``polang_raw``, as ``[code, detail]`` (NULL: none).
    Not ``exact``: entity references in their usual form only (see :func:`_check_rows`)."""
    c = _Checks(schema, exact)
    action_types = sorted({a.type for a in schema.actions})
    types = sorted(schema.entity_types) + action_types
    parent_ok = f"list_transform(json_extract(parents, '$[*]'), lambda p: {_ref_form('p', exact)})"
    cases: list[tuple[str, str, str]] = [
        ("kind <> 'OBJECT'", "not_object", "kind"),
        ("len(keys) <> len(list_distinct(keys))", "dup_key", _first_dup("keys")),
        (
            f"NOT list_has_all({_list(_KEYS_ORDER)}, keys)",
            "unknown_key",
            _first_not_in("keys", _KEYS_ORDER),
        ),
        ("uid IS NULL", "no_uid", "NULL"),
        (f"NOT {_ref_form('uid', exact)}", "bad_uid", "NULL"),
        (f"NOT list_contains({_list(types)}, type)", "unknown_type", "type"),
        ("akind IS NULL", "no_attrs", "NULL"),
        ("akind <> 'OBJECT'", "attrs_kind", "akind"),
        ("len(ak) <> len(list_distinct(ak))", "dup_attr", _first_dup("ak")),
        (
            "json_type(parents) <> 'ARRAY'",
            "parents_kind",
            "json_type(parents)",
        ),
        (
            f"json_type(parents) = 'ARRAY' AND NOT list_bool_and({parent_ok})",
            "bad_parent",
            f"(list_position({parent_ok}, false) - 1)::VARCHAR",
        ),
        ("tkind <> 'OBJECT'", "tags_kind", "tkind"),
        ("len(tk) <> len(list_distinct(tk))", "dup_tag", _first_dup("tk")),
    ]
    whens = [f"WHEN {cond} THEN [{_q(code)}, {detail}]" for cond, code, detail in cases]
    per_type = []
    for tname, et in schema.entity_types.items():
        per_type.append(f"WHEN {_q(tname)} THEN {_entity_problem(c, tname, et)}")
    for atype in action_types:
        per_type.append(f"WHEN {_q(atype)} THEN {_action_problem(schema, atype)}")
    return f"CASE {' '.join(whens)} ELSE (CASE type {' '.join(per_type)} END) END"


def _first(cases: list[tuple[str, str, str]]) -> str:
    if not cases:
        return "NULL::VARCHAR[]"
    whens = " ".join(f"WHEN {cond} THEN [{_q(code)}, {detail}]" for cond, code, detail in cases)
    return f"(CASE {whens} END)"


def _entity_problem(c: _Checks, tname: str, et: Any) -> str:
    cases: list[tuple[str, str, str]] = []
    enum = c.enum_ok(tname, "id")
    if enum:
        cases.append((f"NOT ({enum})", "enum_id", "id"))
    names = list(et.shape.attributes)
    if not et.shape.additional:
        cases.append(
            (f"NOT list_has_all({_list(names)}, ak)", "unknown_attr", _first_not_in("ak", names))
        )
    for a, at in et.shape.attributes.items():
        x = c.attr(a)
        if at.required:
            cases.append((f"{x} IS NULL", "missing_attr", _q(a)))
        cases.append((f"{x} IS NOT NULL AND NOT {c.conforms(at.type, x)}", "bad_attr", _q(a)))
    if et.shape.additional:
        cases.append((f"NOT {c.untyped_ok('ao')}", "bad_attr", "NULL"))
    ptype = f"list_filter(plist, lambda p: NOT list_contains({_list(et.member_of)}, p.type))"
    cases.append((f"len({ptype}) > 0", "parent_type", f"{ptype}[1].type"))
    for m in et.member_of:
        menum = c.enum_ok(m, "p.id")
        if menum:
            bad = f"list_filter(plist, lambda p: p.type = {_q(m)} AND NOT ({menum}))"
            cases.append((f"len({bad}) > 0", "enum_parent", f"{bad}[1].id"))
    if et.tags is None:
        cases.append(("len(tk) > 0", "no_tags", "NULL"))
    else:
        bad = f"list_filter(tk, lambda k, i: NOT ({c.conforms(et.tags, 'tv[i]')}))"
        cases.append((f"len({bad}) > 0", "bad_tag", f"{bad}[1]"))
    return _first(cases)


def _action_problem(schema: Schema, atype: str) -> str:
    """An action written in a file must agree with the schema (as in process): declared,
    no attributes, no tags, its parents all its ancestors in the schema."""
    ids = sorted(u.id for u in schema.actions if u.type == atype)
    cases: list[tuple[str, str, str]] = [
        (f"NOT list_contains({_list(ids)}, id)", "unknown_action", "id"),
        ("len(ak) > 0", "action_attrs", "NULL"),
        ("len(tk) > 0", "action_tags", "NULL"),
    ]
    want = []
    for uid in schema.actions:
        if uid.type != atype:
            continue
        anc = sorted(schema.action_ancestors(uid))
        lst = "[" + ", ".join(f"{{'type': {_q(a.type)}, 'id': {_q(a.id)}}}" for a in anc) + "]"
        want.append(f"WHEN {_q(uid.id)} THEN {lst}::{_UID}[]")
    if want:
        exp = f"(CASE id {' '.join(want)} END)"
        cases.append(
            (
                f"NOT (list_has_all({exp}, plist) AND list_has_all(plist, {exp}))",
                "action_parents",
                "NULL",
            )
        )
    return _first(cases)


_KINDS = {
    "ARRAY": "an array",
    "OBJECT": "an object",
    "VARCHAR": "a string",
    "BIGINT": "an integer",
    "UBIGINT": "an integer",
    "DOUBLE": "a number",
    "BOOLEAN": "a boolean",
    "NULL": "null",
}
_REF_FORM = '{"type": String, "id": String} (or {"__entity": {...}}) without a repeated key'


def _problem_text(code: str, detail: str | None, etype: str | None, schema: Schema) -> str:
    """What a row's first problem (``_problem_sql``) says, after ``entity X``."""
    d = detail or ""
    kind = _KINDS.get(d, d.lower())
    et = schema.entity_types.get(etype or "")
    if code == "not_object":
        return f"is not a JSON object (found {kind})"
    if code in ("dup_key", "dup_attr", "dup_tag"):
        where = {"dup_key": "", "dup_attr": ' in "attrs"', "dup_tag": ' in "tags"'}[code]
        return f"has the key {_show(d)} twice{where} (a repeated key is an error, never a choice)"
    if code == "unknown_key":
        return "has an " + _unknown_key(d, "key")
    if code == "no_uid":
        return 'has no "uid"'
    if code == "bad_uid":
        return f'has a "uid" that is not {_REF_FORM}'
    if code == "unknown_type":
        return f"has the type {_show(d)}, which is not in the schema"
    if code == "no_attrs":
        return 'has no "attrs" (an object, possibly empty)'
    if code in ("attrs_kind", "tags_kind"):
        return f'has "{code[:-5]}" that is {kind}, not an object'
    if code == "parents_kind":
        return f'has "parents" that is {kind}, not an array'
    if code == "bad_parent":
        return f'has a parent ("parents"[{d}]) that is not {_REF_FORM}'
    if code == "enum_id":
        return f"is not one of the entities of the enumerated type `{etype}`"
    if code == "unknown_attr":
        names = list(et.shape.attributes) if et is not None else []
        near = closest(d, names)
        hint = f'; did you mean "{near}"?' if near else ""
        return (
            f"has the attribute {_show(d)}, which the schema does not declare for `{etype}`{hint}"
        )
    if code == "missing_attr":
        return f"lacks the required attribute `{d}`"
    if code == "bad_attr":
        if et is None or d not in et.shape.attributes:
            return "has an attribute with null, a floating-point number or a repeated key"
        return f"has a wrong value in `{d}` ({et.shape.attributes[d].type})"
    if code == "parent_type":
        allowed = ", ".join(f"`{m}`" for m in (et.member_of if et else ())) or "none"
        return (
            f"has a parent of type {_show(d)}, which `{etype}` cannot have "
            f"(allowed parent types: {allowed})"
        )
    if code == "enum_parent":
        return f"has the parent id {_show(d)}, not one of the entities of its enumerated type"
    if code == "no_tags":
        return f"has tags, which the entity type `{etype}` does not allow"
    if code == "bad_tag":
        return f"has a tag {_show(d)} that is not {et.tags if et else '?'}"
    if code == "unknown_action":
        return "is not an action the schema declares"
    if code in ("action_attrs", "action_tags"):
        return f"is an action: it cannot have {code[7:]}"
    if code == "action_parents":
        return "is an action: its parents must be all its ancestors in the schema"
    return code  # pragma: no cover


def _where(src: _Source, row: int) -> str:
    if src.kind == "parquet":
        return f"{src.name}, row {row}"
    line = _line_of(src, row)
    return f"{src.name}, line {line}" if line is not None else f"{src.name}, entity {row}"


def _who(etype: str | None, eid: str | None) -> str:
    return (
        f"entity {EntityUID(etype, eid)}" if etype is not None and eid is not None else "the entity"
    )


def _check_rows(con: Any, sources: Sequence[_Source], schema: Schema) -> None:
    """Every row against the reader rules; the first bad row is named.

    Two passes: every row against checks that take entity references in their usual
    form ``{"type", "id"}`` only (cheap), then the rows that failed, if any, against the
    exact rules. (One pass with both forms costs several times more: DuckDB computes the
    repeated parts of every ``CASE`` branch for every row.)"""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE polang_suspect AS SELECT * FROM (SELECT *, "
        f"{_problem_sql(schema, False)} AS problem FROM polang_raw) WHERE problem IS NOT NULL"
    )
    bad = []
    if con.execute("SELECT count(*) FROM polang_suspect").fetchall()[0][0]:
        exact = _problem_sql(schema, True)
        bad = con.execute(
            f"SELECT f, row, type, id, problem FROM (SELECT f, row, type, id, {exact} AS "
            "problem FROM polang_suspect) WHERE problem IS NOT NULL ORDER BY f, row LIMIT 1"
        ).fetchall()
    con.execute("DROP TABLE polang_suspect")
    if bad:
        f, row, etype, eid, (code, detail) = bad[0]
        if code in ("not_object", "dup_key", "no_uid", "bad_uid"):  # no uid to name
            etype = eid = None
        text = _problem_text(code, detail, etype, schema)
        raise SqlError(f"{_where(sources[f], row)}: {_who(etype, eid)} {text}")
    dup = con.execute(
        "SELECT type, id, list(f ORDER BY f, row), list(row ORDER BY f, row) FROM polang_raw "
        "GROUP BY type, id HAVING count(*) > 1 ORDER BY type, id LIMIT 1"
    ).fetchall()
    if dup:
        etype, eid, fs, rows = dup[0]
        raise SqlError(
            f"{_where(sources[fs[1]], rows[1])}: entity {EntityUID(etype, eid)} appears more "
            f"than once in the files (first at {_where(sources[fs[0]], rows[0])})"
        )


def _check_acyclic(con: Any, sources: Sequence[_Source]) -> None:
    """No entity is its own ancestor (as the in-process parser): an edge whose parent
    reaches its child closes a cycle."""
    row = con.execute(
        "SELECT r.f, r.row, u.type, u.id FROM polang_parent e "
        "JOIN polang_anc a ON a.eid = e.peid AND a.aeid = e.eid "
        "JOIN polang_uid u ON u.eid = e.eid "
        "JOIN polang_raw r ON r.type = u.type AND r.id = u.id ORDER BY r.f, r.row LIMIT 1"
    ).fetchall()
    if row:
        f, n, etype, eid = row[0]
        raise SqlError(
            f"{_where(sources[f], n)}: entity {EntityUID(etype, eid)} is its own ancestor "
            "(the parents in the files form a cycle)"
        )


def load_files(con: Any, paths: Sequence[str | Path], schema: Schema, program: Program) -> Any:
    """Build the tables from entity files; returns what :class:`DuckDBEngine` needs."""
    if schema is None:
        raise SqlError("entities read from files are typed by the schema: give the store's schema")
    if not paths:
        raise SqlError("no entity files given")
    sources: list[_Source] = []
    try:
        for p in paths:
            sources.append(_open(p))
        names = ", ".join(s.name for s in sources)
        with duckdb_errors(f"entity files {names}", {s.path: s.name for s in sources}):
            return _load(con, sources, schema, program)
    finally:
        for s in sources:
            os.close(s.fd)


def _load(con: Any, sources: Sequence[_Source], schema: Schema, program: Program) -> Any:
    con.execute(f"CREATE OR REPLACE TEMP TABLE polang_raw ({_RAW_COLUMNS})")
    for i, src in enumerate(sources):
        form = "JSON lines" if src.kind == "jsonl" else "Parquet"
        with duckdb_errors(f"{_WHAT} {src.name}: not readable as {form}", {src.path: src.name}):
            sel = _jsonl_select(i, src) if src.kind == "jsonl" else _parquet_select(i, src, con)
            con.execute(_raw_insert(sel, schema))
    _check_rows(con, sources, schema)
    checks = _Checks(schema)

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

    # every uid: stored, parents, entity values, policy constants, the schema's actions
    refs = []
    for tname, tbl in tables.items():
        for a, (_c, ty) in tbl.attrs.items():
            v = _attr(checks, a)
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
    extra = sorted(
        u
        for u in program_uids(program) | set(schema.actions)
        if not (has_surrogate(u.type) or has_surrogate(u.id))  # in no file: DuckDB refuses
    )
    con.execute("CREATE OR REPLACE TEMP TABLE polang_extra(type VARCHAR, id VARCHAR)")
    if extra:
        con.executemany("INSERT INTO polang_extra VALUES (?, ?)", [(u.type, u.id) for u in extra])
    union = " UNION ALL ".join(
        [
            "SELECT type, id, true AS stored FROM polang_raw",
            "SELECT p.type, p.id, false FROM (SELECT unnest(plist) AS p FROM polang_raw)",
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
        "(SELECT type, id, unnest(plist) AS p FROM polang_raw) r "
        "JOIN polang_uid c ON c.type = r.type AND c.id = r.id "
        "JOIN polang_uid u ON u.type = r.p.type AND u.id = r.p.id"
    )
    build_closure(con)
    _check_acyclic(con, sources)

    # one table per entity type
    for tname, tbl in tables.items():
        cols = ["u.eid AS eid"]
        for a, (c, ty) in tbl.attrs.items():
            if not ty.supported:
                continue
            cols.append(f"{_value_sql(ty, _attr(checks, a, 'r.'))} AS {c}")
        if tbl.tags is not None and tbl.tags.supported:
            sql_t = {"long": "BIGINT", "str": "VARCHAR", "bool": "BOOLEAN"}[tbl.tags.kind]
            cols.append(f"coalesce(CAST(r.tags AS MAP(VARCHAR, {sql_t})), MAP {{}}) AS tags")
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


def _attr(c: _Checks, a: str, rel: str = "") -> str:
    """An attribute's JSON value (SQL NULL when absent: the checks refused JSON nulls)."""
    return c.attr(a, rel)


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
        if has_surrogate(uid.type) or has_surrogate(uid.id):
            return None  # no file holds it (DuckDB refuses such text) and SQL cannot say it
        rows = self.con.execute(
            "SELECT eid, stored FROM polang_uid WHERE type = ? AND id = ?", [uid.type, uid.id]
        ).fetchall()
        return None if not rows else (int(rows[0][0]), bool(rows[0][1]))

    def eid_exp(self, uid: EntityUID) -> Any:
        if uid not in self._cache:
            got = self.lookup(uid)
            self._cache[uid] = None if got is None else got[0]
        i = self._cache[uid]
        if i is None:
            i = self._unknown.setdefault(uid, -1 - len(self._unknown))
        return num(i)


__all__ = ["ANC", "MAX_ERRORS_SHOWN", "load_files"]


class DuckDBFileEngine(SqlEngine):
    """The queries on DuckDB over entities read from JSON-lines / Parquet files (this
    module's :func:`load_files`): no entity becomes a Python object. Policies SQL
    cannot express are reported as conditional (no entities in process for a UDF)."""

    def __init__(
        self,
        program: Program,
        paths: Sequence[str | Path],
        schema: Schema,
        *,
        con: Any = None,
        threads: int | None = None,
        memory_limit: str | None = None,
        batch_pairs: int = DEFAULT_BATCH_PAIRS,
    ) -> None:
        self.con = con if con is not None else connect(threads=threads, memory_limit=memory_limit)
        loaded = load_files(self.con, paths, schema, program)
        self.loaded = loaded
        pop = Population(
            Layout(loaded.spec.tables, loaded.eid_exp),
            loaded.stored_types,
            sorted(schema.actions),
            schema.action_ancestors,
            schema,
        )
        runner = DuckRunner(self.con)
        super().__init__(
            runner,
            program,
            pop,
            udf=False,
            uid_of=lambda i: runner._uid_list([i])[0],
            eid_of=self._eid_of_stored,
            resource_eids=self._eids_of_types,
            batch_pairs=batch_pairs,
            count_of=self._count,
        )
        runner.policy_ids = self.policy_ids

    def _eid_of_stored(self, uid: EntityUID) -> int | None:
        got = self.loaded.lookup(uid)
        return got[0] if got is not None and got[1] else None

    def _tables(self, types: list[str]) -> list[str]:
        return [t.table for n in types if (t := self.loaded.spec.tables.get(n)) is not None]

    def _eids_of_types(self, types: list[str]) -> list[int]:
        tables = self._tables(types)
        if not tables:
            return []
        union = " UNION ALL ".join(f'SELECT eid FROM "{t}"' for t in tables)
        col = self.con.sql(f"SELECT eid FROM ({union}) ORDER BY eid").to_arrow_table().column(0)
        return [int(x) for x in col.to_pylist()]

    def _count(self, types: list[str]) -> int:
        return sum(
            int(self.con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0])
            for t in self._tables(types)
        )

    def close(self) -> None:
        self.con.close()
