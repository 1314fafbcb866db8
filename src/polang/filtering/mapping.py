"""The mapping: which of a service's tables and columns hold which entity type's data.

A list endpoint's plan (``polang.analysis.plan``) speaks of ``resource.owner.dept``; the
service's rows speak of ``documents.owner_id`` and ``users.dept``. A :class:`Mapping` says
how one reads the other, entity type by entity type: the table and its id column, each
attribute's column (or JSON path, foreign key, set table or array column), the parents
(a foreign-key column or an association table) and the tags. It is built in Python or
read from YAML/JSON (:func:`read_mapping`, with the project's strict readers: JSON paths
and did-you-mean in every message) and checked against the store's schema when there is
one (:func:`check_against_schema`). A NULL column is an absent attribute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as MappingABC
from typing import Any, ClassVar

from polang._record import Record
from polang.errors import MappingError
from polang.inputs.fields import Checker, closest, jpath, json_kind, show
from polang.inputs.problems import Problems
from polang.inputs.strict import load_json, load_yaml

#: Longest table, column or schema name a mapping may give (PostgreSQL's own limit is 63
#: bytes, MySQL's 64 characters): a longer one is refused with a MappingError.
MAX_IDENTIFIER_CHARS = 128

#: Most entity types one mapping may hold.
MAX_MAPPING_TYPES = 1_000

#: Most attributes (and, separately, parent edges) one entity type's mapping may hold.
MAX_MAPPING_ATTRIBUTES = 1_000

#: Most keys in an attribute's JSON path (``json: {column: meta, path: [a, b]}``).
MAX_JSON_PATH_KEYS = 32

#: Largest mapping file ``polang plan --mapping`` reads.
MAX_MAPPING_BYTES = 1024 * 1024

PRIMITIVE_TYPES = ("Long", "String", "Boolean", "decimal", "datetime", "duration", "ipaddr")
"""Attribute types a column can hold. ``decimal``: an integer column of ten-thousandths
(the language's four digits, exactly); ``datetime``: an integer column of milliseconds
since the Unix epoch (UTC); ``duration``: an integer column of milliseconds; ``ipaddr``:
a text column of addresses (compared for equality only)."""

ID_TYPES = ("String", "Long")
"""Types an id column may have: text ids, or integers whose canonical decimal text is the
entity id (``Acme::Document::"42"`` is the row whose id is 42)."""

_JSON_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A JSON path key: written into each dialect's path syntax, so only what needs no quoting."""

_TYPE_KEYS = ("table", "schema", "id", "id_type", "attributes", "parents", "tags", "closure")
_CLOSURE_KEYS = ("table", "schema", "descendant", "ancestor")
_ATTR_KEYS = ("column", "json", "set", "array", "type")
_JSON_KEYS = ("column", "path")
_SET_KEYS = ("table", "schema", "key", "value")
_PARENT_KEYS = ("type", "column", "table", "schema", "child", "parent")
_TAG_KEYS = ("table", "schema", "key", "name", "value", "type")


class Table(Record):
    """A table's name, with its schema (database) when it is not the connection's."""

    __slots__ = ("name", "schema")
    name: str
    schema: str | None

    def __init__(self, name: str, schema: str | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "schema", schema)


class AttributeMap(Record):
    """One attribute: ``kind`` is ``column`` (a column of the entity's table; an entity
    type as ``type`` makes it a foreign key to that type's id), ``json`` (a path into a
    JSON column), ``set`` (an association table: ``key`` names the owner's id, ``value``
    the element) or ``array`` (a PostgreSQL array column). ``type`` is the value's type,
    a set's element type for ``set`` and ``array``."""

    __slots__ = ("column", "kind", "path", "set_key", "set_table", "set_value", "type")
    kind: str
    type: str
    column: str
    path: tuple[str, ...]
    set_table: Table | None
    set_key: str
    set_value: str

    def __init__(
        self,
        kind: str,
        type: str,
        column: str = "",
        path: tuple[str, ...] = (),
        set_table: Table | None = None,
        set_key: str = "",
        set_value: str = "",
    ) -> None:
        _init(self, locals())


class ParentMap(Record):
    """One kind of parent: entities of ``type`` named by a foreign-key ``column`` of the
    entity's table, or by an association ``table`` (``child``: this entity's id,
    ``parent``: the parent's id)."""

    __slots__ = ("child", "column", "parent", "table", "type")
    type: str
    column: str
    table: Table | None
    child: str
    parent: str

    def __init__(
        self,
        type: str,
        column: str = "",
        table: Table | None = None,
        child: str = "",
        parent: str = "",
    ) -> None:
        _init(self, locals())


class TagsMap(Record):
    """An entity's tags: a table of (``key``: the entity's id, ``name``, ``value``), the
    values all of ``type``."""

    __slots__ = ("key", "name", "table", "type", "value")
    table: Table
    key: str
    name: str
    value: str
    type: str

    def __init__(self, table: Table, key: str, name: str, value: str, type: str) -> None:
        _init(self, locals())


class ClosureMap(Record):
    """A closure table the service keeps for a type whose parents are of its own type
    (folders in folders): a row (``descendant``, ``ancestor``) for every entity and each
    of its ancestors of that type, at any depth (rows of an entity with itself are
    harmless). ``resource in Folder::"f"`` then reads it instead of walking the tree."""

    __slots__ = ("ancestor", "descendant", "table")
    table: Table
    descendant: str
    ancestor: str

    def __init__(self, table: Table, descendant: str, ancestor: str) -> None:
        _init(self, locals())


class TypeMap(Record):
    """One entity type: its table, id column and id type, attributes, parents, tags and
    (optionally) a closure table of its own hierarchy."""

    __slots__ = (
        "attributes",
        "closure",
        "entity_type",
        "id",
        "id_type",
        "parents",
        "table",
        "tags",
    )
    entity_type: str
    table: Table
    id: str
    id_type: str
    attributes: dict[str, AttributeMap]
    parents: tuple[ParentMap, ...]
    tags: TagsMap | None
    closure: ClosureMap | None

    def __init__(
        self,
        entity_type: str,
        table: Table,
        id: str = "id",
        id_type: str = "String",
        attributes: MappingABC[str, AttributeMap] | None = None,
        parents: tuple[ParentMap, ...] = (),
        tags: TagsMap | None = None,
        closure: ClosureMap | None = None,
    ) -> None:
        object.__setattr__(self, "entity_type", entity_type)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "id_type", id_type)
        object.__setattr__(self, "attributes", dict(attributes or {}))
        object.__setattr__(self, "parents", tuple(parents))
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "closure", closure)


class Mapping(Record):
    """Entity type -> :class:`TypeMap`; checked whole when built (:meth:`of`)."""

    __slots__ = ("types",)
    _frozen: ClassVar[bool] = True
    types: dict[str, TypeMap]

    def __init__(self, types: MappingABC[str, TypeMap]) -> None:
        object.__setattr__(self, "types", dict(types))
        problems = Problems("mapping")
        _check_whole(self, Checker(problems, "mapping"))
        _raise(problems)

    def type_map(self, entity_type: str) -> TypeMap:
        """The type's map, or a MappingError naming the nearest mapped type."""
        found = self.types.get(entity_type)
        if found is None:
            raise MappingError(
                f"entity type {show(entity_type)} is not in the mapping"
                + _did_you_mean(entity_type, self.types)
            )
        return found

    @classmethod
    def from_dict(cls, data: object, *, file: str = "mapping") -> Mapping:
        """The mapping's YAML/JSON form (docs/filtering.md, "The mapping"), read strictly:
        unknown keys refused with did-you-mean, every problem with its JSON path."""
        problems = Problems(file, strict=True)
        check = Checker(problems, file)
        types = _read_types(data, check)
        _raise(problems)
        return cls(types)


def read_mapping(path: str) -> Mapping:
    """A mapping file (``.yaml``, ``.yml`` or ``.json``), bounded by MAX_MAPPING_BYTES."""
    from polang.inputs.files import InputFileError, read_input_file  # the CLI only

    try:
        data = read_input_file(
            path, limit=MAX_MAPPING_BYTES, limit_name="MAX_MAPPING_BYTES", what="mapping"
        )
    except InputFileError as e:
        raise MappingError(str(e)) from None
    problems = Problems(path, strict=True)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MappingError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    if path.endswith(".json"):
        value = load_json(text, file=path, problems=problems)
    else:
        value = load_yaml(text, file=path, problems=problems)
    _raise(problems)
    return Mapping.from_dict(value, file=path)


# ============================================================================ reading


def _read_types(data: object, check: Checker) -> dict[str, TypeMap]:
    top = check.obj(data, "$", "an object with the key 'types'")
    if top is None:
        return {}
    check.known(top, "$", ("types",), refuse=True)
    raw = top.get("types")
    types = check.obj(raw, "$.types", "an object of entity types") if "types" in top else None
    if types is None:
        if "types" not in top:
            check.add("missing_field", "$.types", "required field 'types' is missing")
        return {}
    if len(types) > MAX_MAPPING_TYPES:
        check.add(
            "limit",
            "$.types",
            f"{len(types)} entity types: more than the limit of {MAX_MAPPING_TYPES} "
            "(MAX_MAPPING_TYPES)",
        )
        return {}
    out: dict[str, TypeMap] = {}
    for name, spec in types.items():
        p = jpath("$.types", name)
        if not _name_ok(name, p, check, "an entity type name"):
            continue
        tm = _read_type(name, spec, p, check)
        if tm is not None:
            out[name] = tm
    return out


def _read_type(name: str, spec: object, p: str, check: Checker) -> TypeMap | None:
    rec = check.obj(spec, p)
    if rec is None:
        return None
    check.known(rec, p, _TYPE_KEYS, refuse=True)
    table = _ident(rec, "table", p, check, required=True)
    schema = _ident(rec, "schema", p, check)
    id_col = _ident(rec, "id", p, check) or "id"
    id_type = check.string(rec, "id_type", p) or "String"
    if id_type not in ID_TYPES:
        check.add(
            "invalid_field",
            jpath(p, "id_type"),
            f"must be one of {', '.join(ID_TYPES)}, got {show(id_type)}"
            + _did_you_mean(id_type, ID_TYPES),
        )
    attrs: dict[str, AttributeMap] = {}
    raw_attrs = rec.get("attributes")
    if raw_attrs is not None:
        ap = jpath(p, "attributes")
        amap = check.obj(raw_attrs, ap)
        if amap is not None and _count_ok(amap, ap, check):
            for attr, aspec in amap.items():
                a = _read_attr(aspec, jpath(ap, attr), check)
                if a is not None and _name_ok(attr, jpath(ap, attr), check, "an attribute name"):
                    attrs[attr] = a
    parents: list[ParentMap] = []
    raw_parents = rec.get("parents")
    if raw_parents is not None:
        pp = jpath(p, "parents")
        if not isinstance(raw_parents, list):
            check.add("invalid_field", pp, f"must be an array, got {json_kind(raw_parents)}")
        elif _count_ok(raw_parents, pp, check):
            for i, pspec in enumerate(raw_parents):
                pm = _read_parent(pspec, jpath(pp, i), check)
                if pm is not None:
                    parents.append(pm)
    tags = None
    if rec.get("tags") is not None:
        tags = _read_tags(rec["tags"], jpath(p, "tags"), check)
    closure = None
    if rec.get("closure") is not None:
        cp = jpath(p, "closure")
        c = check.obj(rec["closure"], cp)
        if c is not None:
            check.known(c, cp, _CLOSURE_KEYS, refuse=True)
            got = {
                k: _ident(c, k, cp, check, required=True)
                for k in ("table", "descendant", "ancestor")
            }
            cschema = _ident(c, "schema", cp, check)
            if all(v is not None for v in got.values()):
                closure = ClosureMap(
                    Table(str(got["table"]), cschema), str(got["descendant"]), str(got["ancestor"])
                )
    if table is None:
        return None
    return TypeMap(
        name, Table(table, schema), id_col, id_type, attrs, tuple(parents), tags, closure
    )


def _read_attr(spec: object, p: str, check: Checker) -> AttributeMap | None:
    if isinstance(spec, str):  # the short form: `title: title` is a String column
        if _ident_ok(spec, p, check):
            return AttributeMap("column", "String", column=spec)
        return None
    rec = check.obj(spec, p, "an object or a column name")
    if rec is None:
        return None
    check.known(rec, p, _ATTR_KEYS, refuse=True)
    ty = check.string(rec, "type", p, required=True)
    if ty is not None:
        _name_ok(ty, jpath(p, "type"), check, "a type name")
    kinds = [k for k in ("column", "json", "set", "array") if k in rec]
    if len(kinds) != 1:
        check.add(
            "invalid_field",
            p,
            "must have exactly one of 'column', 'json', 'set', 'array'"
            + (f", got {', '.join(kinds)}" if kinds else ""),
        )
        return None
    kind = kinds[0]
    if ty is None:
        return None
    if kind in ("column", "array"):
        col = _ident(rec, kind, p, check, required=True)
        return None if col is None else AttributeMap(kind, ty, column=col)
    if kind == "json":
        jp = jpath(p, "json")
        j = check.obj(rec["json"], jp)
        if j is None:
            return None
        check.known(j, jp, _JSON_KEYS, refuse=True)
        col = _ident(j, "column", jp, check, required=True)
        keys = _json_path(j.get("path"), jpath(jp, "path"), check)
        if col is None or keys is None:
            return None
        return AttributeMap("json", ty, column=col, path=keys)
    sp = jpath(p, "set")
    s = check.obj(rec["set"], sp)
    if s is None:
        return None
    check.known(s, sp, _SET_KEYS, refuse=True)
    table = _ident(s, "table", sp, check, required=True)
    schema = _ident(s, "schema", sp, check)
    key = _ident(s, "key", sp, check, required=True)
    value = _ident(s, "value", sp, check, required=True)
    if table is None or key is None or value is None:
        return None
    return AttributeMap("set", ty, set_table=Table(table, schema), set_key=key, set_value=value)


def _read_parent(spec: object, p: str, check: Checker) -> ParentMap | None:
    rec = check.obj(spec, p)
    if rec is None:
        return None
    check.known(rec, p, _PARENT_KEYS, refuse=True)
    ty = check.string(rec, "type", p, required=True)
    if "column" in rec and "table" not in rec:
        col = _ident(rec, "column", p, check, required=True)
        for k in ("child", "parent", "schema"):
            if k in rec:
                check.add("invalid_field", jpath(p, k), f"{k!r} belongs to an association table")
        return None if ty is None or col is None else ParentMap(ty, column=col)
    if "table" in rec and "column" not in rec:
        table = _ident(rec, "table", p, check, required=True)
        schema = _ident(rec, "schema", p, check)
        child = _ident(rec, "child", p, check, required=True)
        parent = _ident(rec, "parent", p, check, required=True)
        if ty is None or table is None or child is None or parent is None:
            return None
        return ParentMap(ty, table=Table(table, schema), child=child, parent=parent)
    check.add("invalid_field", p, "must have exactly one of 'column' and 'table'")
    return None


def _read_tags(spec: object, p: str, check: Checker) -> TagsMap | None:
    rec = check.obj(spec, p)
    if rec is None:
        return None
    check.known(rec, p, _TAG_KEYS, refuse=True)
    got = {k: _ident(rec, k, p, check, required=True) for k in ("table", "key", "name", "value")}
    schema = _ident(rec, "schema", p, check)
    ty = check.string(rec, "type", p, required=True)
    if ty is None or any(v is None for v in got.values()):
        return None
    return TagsMap(
        Table(str(got["table"]), schema), str(got["key"]), str(got["name"]), str(got["value"]), ty
    )


def _json_path(value: object, p: str, check: Checker) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        check.add("invalid_field", p, f"must be a non-empty array of keys, got {json_kind(value)}")
        return None
    if len(value) > MAX_JSON_PATH_KEYS:
        check.add(
            "limit",
            p,
            f"{len(value)} keys: more than the limit of {MAX_JSON_PATH_KEYS} (MAX_JSON_PATH_KEYS)",
        )
        return None
    out: list[str] = []
    for i, k in enumerate(value):
        if not isinstance(k, str) or len(k) > MAX_IDENTIFIER_CHARS or not _JSON_KEY.fullmatch(k):
            check.add(
                "invalid_field",
                jpath(p, i),
                "must be a key of letters, digits and `_` (not starting with a digit), at "
                f"most {MAX_IDENTIFIER_CHARS} characters (MAX_IDENTIFIER_CHARS), got {show(k)}",
            )
            return None
        out.append(k)
    return tuple(out)


def _ident(
    rec: MappingABC[str, Any], key: str, p: str, check: Checker, *, required: bool = False
) -> str | None:
    v = check.string(rec, key, p, required=required)
    if v is None or not _ident_ok(v, jpath(p, key), check):
        return None
    return v


def _ident_ok(v: str, p: str, check: Checker) -> bool:
    """Any name a database allows, bounded: names are always quoted (never pasted)."""
    if not v or len(v) > MAX_IDENTIFIER_CHARS or "\x00" in v:
        check.add(
            "invalid_field",
            p,
            f"must be a name of 1 to {MAX_IDENTIFIER_CHARS} characters without NUL "
            f"(MAX_IDENTIFIER_CHARS), got {show(v)}",
        )
        return False
    return True


def _name_ok(v: object, p: str, check: Checker, what: str) -> bool:
    if not isinstance(v, str) or not v or len(v) > MAX_IDENTIFIER_CHARS * 4:
        check.add("invalid_field", p, f"must be {what}, got {show(v)}")
        return False
    return True


def _count_ok(items: MappingABC[str, Any] | list[Any], p: str, check: Checker) -> bool:
    if len(items) > MAX_MAPPING_ATTRIBUTES:
        check.add(
            "limit",
            p,
            f"{len(items)} entries: more than the limit of {MAX_MAPPING_ATTRIBUTES} "
            "(MAX_MAPPING_ATTRIBUTES)",
        )
        return False
    return True


# ============================================================================ checks


def _check_whole(m: Mapping, check: Checker) -> None:
    """What holds across types: every named type is mapped or primitive, kinds fit."""
    if len(m.types) > MAX_MAPPING_TYPES:
        check.add(
            "limit",
            "$.types",
            f"{len(m.types)} entity types: more than the limit of {MAX_MAPPING_TYPES} "
            "(MAX_MAPPING_TYPES)",
        )
        return
    known = [*PRIMITIVE_TYPES, *m.types]
    for name, tm in m.types.items():
        p = jpath("$.types", name)
        if not isinstance(tm, TypeMap):
            check.add("invalid_field", p, f"must be a TypeMap, got {json_kind(tm)}")
            continue
        for ident, where in (
            (tm.table.name, "table"),
            (tm.id, "id"),
            *((tm.table.schema, "schema") for _ in [0] if tm.table.schema is not None),
        ):
            if not isinstance(ident, str):
                check.add("invalid_field", jpath(p, where), f"must be a name, got {show(ident)}")
            else:
                _ident_ok(ident, jpath(p, where), check)
        if tm.id_type not in ID_TYPES:
            check.add("invalid_field", jpath(p, "id_type"), f"must be one of {', '.join(ID_TYPES)}")
        if len(tm.attributes) > MAX_MAPPING_ATTRIBUTES or len(tm.parents) > MAX_MAPPING_ATTRIBUTES:
            check.add(
                "limit", p, f"more than {MAX_MAPPING_ATTRIBUTES} entries (MAX_MAPPING_ATTRIBUTES)"
            )
            continue
        for attr, a in tm.attributes.items():
            ap = jpath(jpath(p, "attributes"), attr)
            if not isinstance(a, AttributeMap) or not isinstance(attr, str):
                check.add("invalid_field", ap, f"must be an AttributeMap, got {json_kind(a)}")
                continue
            if a.type not in known:
                check.add(
                    "invalid_field",
                    jpath(ap, "type"),
                    f"unknown type {show(a.type)}" + _did_you_mean(a.type, known),
                )
            elif a.kind in ("json", "set", "array") and a.type in m.types and a.kind == "json":
                check.add("invalid_field", ap, "a JSON path holds values, not entity references")
            if a.kind not in ("column", "json", "set", "array"):
                check.add("invalid_field", ap, f"unknown kind {show(a.kind)}")
        for i, pm in enumerate(tm.parents):
            pp = jpath(jpath(p, "parents"), i)
            if not isinstance(pm, ParentMap):
                check.add("invalid_field", pp, f"must be a ParentMap, got {json_kind(pm)}")
                continue
            if pm.type not in m.types:
                check.add(
                    "invalid_field",
                    jpath(pp, "type"),
                    f"parent type {show(pm.type)} is not in the mapping"
                    + _did_you_mean(pm.type, m.types),
                )
        if tm.tags is not None and not isinstance(tm.tags, TagsMap):
            check.add(
                "invalid_field", jpath(p, "tags"), f"must be a TagsMap, got {json_kind(tm.tags)}"
            )
        elif tm.tags is not None and tm.tags.type not in known:
            check.add(
                "invalid_field",
                jpath(jpath(p, "tags"), "type"),
                f"unknown type {show(tm.tags.type)}" + _did_you_mean(tm.tags.type, known),
            )


def check_against_schema(mapping: Mapping, schema: Any) -> None:
    """Refuse (MappingError) a mapping that names types or attributes the store's schema
    does not have, or gives an attribute another type; ``schema``: a
    :class:`polang.language.schema.Schema` (``None``: nothing to check)."""
    if schema is None:
        return
    problems = Problems("mapping", strict=True)
    check = Checker(problems, "mapping")
    entity_types = getattr(schema, "entity_types", {})
    for name, tm in mapping.types.items():
        p = jpath("$.types", name)
        td = entity_types.get(name)
        if td is None:
            check.add(
                "invalid_field",
                p,
                f"entity type {show(name)} is not in the schema"
                + _did_you_mean(name, entity_types),
            )
            continue
        declared = td.shape.attributes
        for attr, a in tm.attributes.items():
            ap = jpath(jpath(p, "attributes"), attr)
            if attr not in declared:
                check.add(
                    "invalid_field",
                    ap,
                    f"{name} has no attribute {show(attr)} in the schema"
                    + _did_you_mean(attr, declared),
                )
                continue
            want = _schema_type_name(declared[attr].type, a.kind in ("set", "array"))
            if want is not None and want != a.type:
                check.add(
                    "invalid_field",
                    jpath(ap, "type"),
                    f"the schema gives {name}.{attr} the type {want}, the mapping {a.type}",
                )
        for i, pm in enumerate(tm.parents):
            if pm.type not in td.member_of:
                check.add(
                    "invalid_field",
                    jpath(jpath(jpath(p, "parents"), i), "type"),
                    f"the schema does not let {name} be a member of {pm.type}",
                )
    _raise(problems)


def _schema_type_name(t: Any, as_set: bool) -> str | None:
    """The mapping's type name of a schema type (a set's element when ``as_set``)."""
    from polang.language.schema import EntityRefType, ExtensionType, PrimType, SetType

    if as_set:
        if not isinstance(t, SetType):
            return "a set"
        t = t.element
    if isinstance(t, PrimType):
        return "Boolean" if t.name in ("Bool", "Boolean") else str(t.name)
    if isinstance(t, ExtensionType):
        return str(t.name)
    if isinstance(t, EntityRefType):
        return str(t.name)
    return None


def _did_you_mean(name: str, known: Any) -> str:
    near = closest(name, [str(k) for k in known])
    return f" (did you mean {near!r}?)" if near else ""


def _init(obj: Record, values: dict[str, Any]) -> None:
    k: str
    for k in obj.__slots__:
        object.__setattr__(obj, k, values[k])


def _raise(problems: Problems) -> None:
    if not problems.items:
        return
    lines = [f"{p.location}: {p.message}" if p.location else p.message for p in problems.items[:20]]
    more = len(problems) - len(lines)
    raise MappingError(
        f"{problems.source}: the mapping is refused ({len(problems)} problem"
        + ("s" if len(problems) != 1 else "")
        + "):\n  "
        + "\n  ".join(lines)
        + (f"\n  ... and {more} more" if more > 0 else "")
    )
