"""Entities: the data a request is decided on, read from entity JSON.

Every producer of entities (entity files, default entities, token entities, callers)
ends in the same model, ``Entity`` and ``EntityStore`` (:mod:`polang.language.entity_store`,
below the schema, which makes the action entities; re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from polang.errors import EntityError, RequestError
from polang.inputs.fields import closest, json_kind
from polang.jsonlimits import MAX_JSON_DEPTH
from polang.language.entity_store import Entity, EntityStore
from polang.language.entity_values import NO_TAGS as _NO_TAGS
from polang.language.entity_values import fast_record as _fast_record
from polang.language.entity_values import fast_tags as _fast_tags
from polang.language.entity_values import fast_uid as _fast_uid
from polang.language.entity_values import valid_type_name as _valid_type_name
from polang.language.extensions import (
    EXTENSION_CLASSES,
    SIGNATURES,
    call_function,
    parse_extension_value,
)
from polang.language.hierarchy import check_hierarchy, too_deep_message
from polang.language.schema import (
    BOOL,
    EXTENSION_CONSTRUCTORS,
    LONG,
    STRING,
    EntityRefType,
    ExtensionType,
    ExtName,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    duplicate_key,
    json_loads_checked,
    json_path,
    name_error,
    non_string_key,
)
from polang.language.values import (
    LONG_MAX,
    LONG_MIN,
    EntityUID,
    RecordValue,
    SetValue,
    Value,
    quote_string,
    type_name,
    value_to_json,
)

# ================================================================ entity JSON
#
# The forms are the language's: an entity is {"uid", "attrs", "parents", "tags"}; a value
# is a JSON bool, integer (64-bit), string, array (a set), object (a record), or one of the
# escapes {"__entity": {"type", "id"}} and {"__extn": {"fn", "arg" | "args"}}. With a
# schema, the expected type directs parsing: an object {"type", "id"} is an entity where
# an entity is expected; where an extension value is expected, a string is converted by
# the extension type's constructor ("10.0.0.1" for ipaddr) and {"fn", "arg" | "args"} is
# the call without its escape (Cedar's forms; elsewhere that object is a record).


class _Bad(Exception):
    """A problem at a JSON path; the caller says which entity (or context) it is in."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _check_object(v: object, path: str, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _Bad(path, f"{what} must be a JSON object, found {json_kind(v)}")
    bad = non_string_key(v)
    if bad is not None:
        raise _Bad(
            path, f"{what} must be a JSON object, whose keys are strings; found {json_kind(bad)}"
        )
    dup = duplicate_key(v)
    if dup is not None:
        raise _Bad(json_path(path, dup), f"duplicate key `{dup}`")
    return v


def _uid(v: object, path: str) -> EntityUID:
    # Fast path: a plain dict (no duplicate keys possible) of two valid strings.
    if type(v) is dict:
        inner = v.get("__entity", v)
        if type(inner) is dict and len(inner) == 2:
            t, i = inner.get("type"), inner.get("id")
            if type(t) is str and type(i) is str and _valid_type_name(t):
                return EntityUID(t, i)
    obj = _check_object(v, path, "an entity reference")
    if "__entity" in obj:
        path = json_path(path, "__entity")
        obj = _check_object(obj["__entity"], path, "an entity reference")
    elif "__expr" in obj:
        raise _Bad(
            path,
            'the legacy `{"__expr": ...}` form is not supported; write {"type": ..., "id": ...}',
        )
    if "type" not in obj or "id" not in obj:
        missing = "type" if "type" not in obj else "id"
        raise _Bad(path, f'an entity reference needs "type" and "id" (missing "{missing}")')
    etype, eid = obj["type"], obj["id"]
    if not isinstance(etype, str):
        raise _Bad(
            json_path(path, "type"), f"an entity type must be a string, found {json_kind(etype)}"
        )
    problem = name_error(etype)
    if problem is not None:
        raise _Bad(json_path(path, "type"), f"invalid entity type: {problem}")
    if not isinstance(eid, str):
        raise _Bad(json_path(path, "id"), f"an entity id must be a string, found {json_kind(eid)}")
    return EntityUID(etype, eid)


def _int_text(v: int) -> str:
    """An integer for a message: a huge one (a Python int may have any number of digits,
    and ``str`` refuses past 4,300) by its size."""
    return str(v) if v.bit_length() <= 128 else f"of {v.bit_length()} bits"


def _long(v: int, path: str) -> int:
    if v < LONG_MIN or v > LONG_MAX:
        raise _Bad(path, f"integer {_int_text(v)} is outside the 64-bit range of Long")
    return v


def _is_escape(obj: dict[str, Any], key: str) -> bool:
    return len(obj) == 1 and key in obj


_EXTENSION_KEYS = ("fn", "arg", "args")
_PRIMITIVES = {"String": STRING, "Long": LONG, "Bool": BOOL}


def _extension(v: object, path: str, depth: int, typed: bool) -> Value:
    """An extension call ``{"fn", "arg" | "args"}``: the inside of an ``__extn`` escape, or
    the object itself where the schema expects an extension type (``path`` is the
    object's). ``depth``: the arrays and objects the object is inside of.

    ``typed``: the schema expects an extension value here, so the arguments are read by
    the function's parameter types, as Cedar does (``{"fn": "offset", "args":
    ["2024-10-15", "1h"]}``); elsewhere they are read by their JSON form alone."""
    obj = _check_object(v, path, "an extension value")
    for k in obj:
        if k not in _EXTENSION_KEYS:
            shown = k if len(k) <= 40 else k[:40] + "..."
            raise _Bad(
                json_path(path, shown),
                f'unknown key "{shown}" in an extension value (its keys are "fn" and one of '
                '"arg" and "args")',
            )
    fn = obj.get("fn")
    if not isinstance(fn, str):
        raise _Bad(json_path(path, "fn"), 'an extension value needs a function name "fn"')
    if ("arg" in obj) == ("args" in obj):
        raise _Bad(path, 'an extension value needs exactly one of "arg" and "args"')
    if "arg" in obj:
        items: list[Any] = [obj["arg"]]
        paths = [json_path(path, "arg")]
        inner = depth + 1
    else:
        p = json_path(path, "args")
        items = obj["args"]
        if not isinstance(items, list):
            raise _Bad(p, f'"args" must be an array, found {json_kind(items)}')
        paths = [json_path(p, i) for i in range(len(items))]
        inner = depth + 2
    sig = SIGNATURES.get(fn) if typed else None
    if sig is not None and len(sig.params) == len(items):
        args = [
            _argument(x, param, q, inner)
            for x, param, q in zip(items, sig.params, paths, strict=True)
        ]
    else:  # untyped, or an unknown function or a wrong arity: call_function says which
        args = [_untyped(x, q, inner) for x, q in zip(items, paths, strict=True)]
    try:
        return call_function(fn, args)
    except ValueError as e:
        raise _Bad(path, f"invalid extension value: {e}") from None


def _argument(v: object, param: str, path: str, depth: int) -> Value:
    """An extension function's argument, read by its parameter type (a type name of
    ``SIGNATURES``: ``String``, ``Long``, ``Bool`` or an extension type)."""
    prim = _PRIMITIVES.get(param)
    if prim is not None:
        return _value(v, prim, path, None)
    return _extension_value(v, cast(ExtName, param), path, depth)


def _extension_value(v: object, name: ExtName, path: str, depth: int) -> Value:
    """A value where the schema expects the extension type ``name``, in any of Cedar's
    forms: ``{"__extn": {"fn", "arg" | "args"}}``, the call ``{"fn", "arg" | "args"}``
    without the escape, or the constructor's argument alone (``"10.0.0.1"`` for ipaddr).
    Anywhere else ``{"fn", "arg"}`` is a record."""
    if type(v) is str:
        try:
            return parse_extension_value(EXTENSION_CONSTRUCTORS[name], v)
        except ValueError as e:
            raise _Bad(path, f"invalid {name} value {_describe(v)}: {e}") from None
    if not isinstance(v, dict) or not ("fn" in v or _is_escape(v, "__extn")):
        raise _Bad(path, f"expected {name}, got {_describe(v)}")
    if depth >= MAX_JSON_DEPTH:
        raise _too_deep(path)
    if "fn" in v:
        value = _extension(v, path, depth, typed=True)
    else:
        value = _extension(v["__extn"], json_path(path, "__extn"), depth + 1, typed=True)
    if type(value) is not EXTENSION_CLASSES[name]:
        raise _Bad(path, f"expected {name}, got {type_name(value)}")
    return value


def _too_deep(path: str) -> _Bad:
    shown = path if len(path) <= 60 else path[:60] + "..."
    return _Bad(
        shown,
        f"the value nests deeper than the limit of {MAX_JSON_DEPTH} levels "
        "(MAX_JSON_DEPTH, docs/security.md)",
    )


def _untyped(v: object, path: str, depth: int = 0) -> Value:
    """A value with no expected type: its JSON form alone decides. ``depth``: the arrays
    and objects it is inside of (this is the walk an unbounded value could drive)."""
    t = type(v)
    if t is bool or t is str:
        return v
    if t is int:
        return _long(cast(int, v), path)
    if depth >= MAX_JSON_DEPTH:
        raise _too_deep(path)
    if t is list:
        items = cast(list[Any], v)
        return SetValue(_untyped(x, json_path(path, i), depth + 1) for i, x in enumerate(items))
    if t is float:
        raise _Bad(path, f"floating-point numbers are not values of the language: {v!r}")
    if v is None:
        raise _Bad(path, "null is not a value of the language")
    if not isinstance(v, dict):
        raise _Bad(
            path,
            "expected a value of the language (a boolean, integer, string, array or object), "
            f"found {json_kind(v)}",
        )
    obj = _check_object(v, path, "a value")
    if _is_escape(obj, "__entity"):
        return _uid(obj, path)
    if _is_escape(obj, "__extn"):
        return _extension(obj["__extn"], json_path(path, "__extn"), depth + 1, typed=False)
    if _is_escape(obj, "__expr"):
        raise _Bad(path, 'the legacy `{"__expr": ...}` form is not supported')
    return RecordValue({k: _untyped(x, json_path(path, k), depth + 1) for k, x in obj.items()})


def _describe(v: object) -> str:
    """A JSON value as the language would call it, for type-mismatch messages."""
    if isinstance(v, bool):
        return f"Bool {'true' if v else 'false'}"
    if isinstance(v, int):
        return f"Long {_int_text(v)}"
    if isinstance(v, str):
        text = v if len(v) <= 40 else v[:37] + "..."
        return f"String {quote_string(text)}"
    if isinstance(v, float):
        return f"number {v!r}"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "Set"
    if isinstance(v, dict):
        if _is_escape(v, "__entity"):
            inner = v["__entity"]
            if isinstance(inner, dict):
                return f"entity {inner.get('type')}::{quote_string(str(inner.get('id')))}"
            return "entity"
        if _is_escape(v, "__extn"):
            inner = v["__extn"]
            fn = inner.get("fn") if isinstance(inner, dict) else None
            return f"extension value `{fn}(...)`"
        return "Record"
    return json_kind(v)


def _expected_text(t: SchemaType) -> str:
    if isinstance(t, EntityRefType):
        return f"an entity of type {t.name}"
    if isinstance(t, RecordType):
        return "Record"
    return str(t)


def _mismatch(v: object, expected: SchemaType, path: str) -> _Bad:
    return _Bad(path, f"expected {_expected_text(expected)}, got {_describe(v)}")


def _value(v: object, expected: SchemaType | None, path: str, schema: Schema | None) -> Value:
    """A value of the ``expected`` type (schema-directed), or as its JSON form says."""
    if expected is None:
        return _untyped(v, path)
    t = type(v)
    if isinstance(expected, PrimType):
        name = expected.name
        if (
            (name == "Long" and t is int)
            or (name == "String" and t is str)
            or (name == "Bool" and t is bool)
        ):
            return _long(cast(int, v), path) if t is int else v
        raise _mismatch(v, expected, path)
    if isinstance(expected, SetType):
        if t is not list:
            raise _mismatch(v, expected, path)
        return SetValue(
            _value(x, expected.element, json_path(path, i), schema)
            for i, x in enumerate(cast(list[Any], v))
        )
    if isinstance(expected, EntityRefType):
        if not isinstance(v, dict) or not (
            _is_escape(v, "__entity") or ("type" in v and "id" in v and "__extn" not in v)
        ):
            raise _mismatch(v, expected, path)
        uid = _uid(v, path)
        if uid.type != expected.name:
            raise _Bad(path, f"expected {_expected_text(expected)}, got entity {uid}")
        if schema is not None:
            _check_enum(uid, schema, path)
        return uid
    if isinstance(expected, ExtensionType):
        return _extension_value(v, expected.name, path, 0)
    # a record
    if not isinstance(v, dict) or _is_escape(v, "__entity") or _is_escape(v, "__extn"):
        raise _mismatch(v, expected, path)
    return _record(v, expected, path, schema)


def _record(v: object, rt: RecordType, path: str, schema: Schema | None) -> RecordValue:
    obj = _check_object(v, path, "a record")
    fields: dict[str, Value] = {}
    for k, x in obj.items():
        p = json_path(path, k)
        attr = rt.attributes.get(k)
        if attr is not None:
            fields[k] = _value(x, attr.type, p, schema)
        elif rt.additional:
            fields[k] = _untyped(x, p)
        else:
            raise _Bad(p, f"attribute `{k}` is not declared in the schema")
    for k, attr in rt.attributes.items():
        if attr.required and k not in obj:
            raise _Bad(path, f"required attribute `{k}` is missing")
    return RecordValue(fields)


def _check_enum(uid: EntityUID, schema: Schema, path: str) -> None:
    et = schema.entity_type(uid.type)
    if et is not None and et.enum is not None and uid.id not in et.enum:
        allowed = ", ".join(quote_string(x) for x in et.enum)
        raise _Bad(path, f"`{uid}` is not one of the entities of the enumerated type: {allowed}")


def _build(
    uid: EntityUID,
    attrs: dict[str, Any],
    attrs_path: str,
    parents: list[tuple[object, str]],
    tags: dict[str, Any],
    tags_path: str,
    schema: Schema | None,
    uid_path: str,
    parents_path: str,
) -> Entity:
    """One entity from its JSON parts, checked against the schema when there is one."""
    parent_uids = [(_uid(p, pp), pp) for p, pp in parents]
    if schema is None:
        return Entity(
            uid,
            {k: _untyped(x, json_path(attrs_path, k)) for k, x in attrs.items()},
            {p for p, _ in parent_uids},
            {k: _untyped(x, json_path(tags_path, k)) for k, x in tags.items()},
        )
    if schema.is_action_type(uid.type):
        return _action_entity(
            uid, attrs, attrs_path, parent_uids, tags, tags_path, schema, uid_path, parents_path
        )
    et = schema.entity_type(uid.type)
    if et is None:
        raise _Bad(uid_path, f"entity type `{uid.type}` is not declared in the schema")
    _check_enum(uid, schema, uid_path)
    record = _record(attrs, et.shape, attrs_path, schema)
    # As in Cedar, a parent may be of any type the schema's `in` makes an ancestor type
    # (`Reservation in [Property]`, `Property in [Hotel]`: a Hotel parent too).
    allowed_types = schema.ancestor_types(uid.type)
    for p, pp in parent_uids:
        if p.type not in allowed_types:
            allowed = ", ".join(f"`{m}`" for m in sorted(allowed_types)) or "none"
            raise _Bad(
                pp,
                f"an entity of type `{uid.type}` cannot have a parent of type `{p.type}` "
                f"(allowed parent types: {allowed})",
            )
        _check_enum(p, schema, pp)
    tag_values: dict[str, Value] = {}
    if tags:
        if et.tags is None:
            raise _Bad(tags_path, f"entity type `{uid.type}` does not allow tags")
        tag_values = {
            k: _value(x, et.tags, json_path(tags_path, k), schema) for k, x in tags.items()
        }
    return Entity(uid, record.fields, {p for p, _ in parent_uids}, tag_values)


def _action_entity(
    uid: EntityUID,
    attrs: dict[str, Any],
    attrs_path: str,
    parent_uids: list[tuple[EntityUID, str]],
    tags: dict[str, Any],
    tags_path: str,
    schema: Schema,
    uid_path: str,
    parents_path: str,
) -> Entity:
    """Action entities come from the schema: one written in JSON must agree with it."""
    action = schema.action(uid)
    if action is None:
        raise _Bad(uid_path, f"action `{uid}` is not declared in the schema")
    if attrs:
        raise _Bad(attrs_path, f"action `{uid}` cannot have attributes")
    if tags:
        raise _Bad(tags_path, f"action `{uid}` cannot have tags")
    # As in Cedar, the file lists the action's ancestors: all of them, as the schema says.
    given = {p for p, _ in parent_uids}
    ancestors = schema.action_ancestors(uid)
    if given != ancestors:
        want = ", ".join(str(p) for p in sorted(ancestors)) or "none"
        got = ", ".join(str(p) for p in sorted(given)) or "none"
        raise _Bad(
            parents_path,
            f"the parents of action `{uid}` must be its ancestors in the schema ({want}), "
            f"not {got}",
        )
    return Entity(uid, {}, set(action.member_of), {})


def _entity_error(uid: EntityUID | None, bad: _Bad, prefix: str = "") -> EntityError:
    who = f"entity {uid} at " if uid is not None else "at "
    return EntityError(
        f"{prefix}{who}{bad.path}: {bad.message}",
        uid=None if uid is None else str(uid),
        path=bad.path,
    )


def _optional_object(obj: dict[str, Any], key: str, path: str, what: str) -> dict[str, Any]:
    if key not in obj:
        return {}
    return _check_object(obj[key], json_path(path, key), what)


ENTITY_KEYS = frozenset({"uid", "attrs", "parents", "tags"})
"""The keys of an entity in the language's form; any other is an error (a misspelt
``"parnets"`` silently dropped the parents, and a principal escaped a ``forbid``)."""


def _unknown_key(o: dict[str, Any], path: str) -> _Bad | None:
    for k in o:
        if k not in ENTITY_KEYS:
            key = str(k)
            shown = key if len(key) <= 40 else key[:40] + "..."
            near = closest(key, ENTITY_KEYS)
            hint = f'; did you mean "{near}"?' if near else ""
            return _Bad(
                json_path(path, shown),
                f'unknown key "{shown}" in an entity (its keys are "uid", "attrs", "parents" '
                f'and "tags"){hint}',
            )
    return None


def _parse_entity(obj: object, schema: Schema | None, path: str) -> Entity:
    """The entity form; raises ``_Bad`` (the uid is re-read by the caller for messages)."""
    o = _check_object(obj, path, "an entity")
    unknown = _unknown_key(o, path)
    if unknown is not None:
        raise unknown
    if "uid" not in o:
        raise _Bad(path, 'an entity needs a "uid"')
    uid_path = json_path(path, "uid")
    uid = _uid(o["uid"], uid_path)
    if "attrs" not in o:
        raise _Bad(path, 'an entity needs "attrs" (an object, possibly empty)')
    attrs = _check_object(o["attrs"], json_path(path, "attrs"), '"attrs"')
    parents_path = json_path(path, "parents")
    parents = o.get("parents", [])
    if not isinstance(parents, list):
        raise _Bad(parents_path, f'"parents" must be an array, found {json_kind(parents)}')
    tags = _optional_object(o, "tags", path, '"tags"')
    return _build(
        uid,
        attrs,
        json_path(path, "attrs"),
        [(p, json_path(parents_path, i)) for i, p in enumerate(parents)],
        tags,
        json_path(path, "tags"),
        schema,
        uid_path,
        parents_path,
    )


def _uid_for_message(obj: object, key: str = "uid") -> EntityUID | None:
    try:
        return _uid(obj[key], "$") if isinstance(obj, dict) and key in obj else None
    except _Bad:
        return None


# -- the per-request fast path -------------------------------------------------------------
#
# Request entities arrive as plain dicts on every call. For the common case (an entity of a
# declared, non-enumerated type with well-typed attributes, parents and tags) this path
# converts without building JSON paths or error context. On anything else it gives up
# (returns None) and the full parser above runs, so every error is still the full
# parser's error, with its path. tests/language/test_entities.py checks both agree.

_GIVE_UP = None
_NO_PARENT_TYPES: frozenset[str] = frozenset()


def _plain_types(schema: Schema) -> dict[str, Any]:
    """Declared entity types the fast path may build directly: not enumerated, not an
    action type, with a valid name (computed once per schema)."""
    table: dict[str, Any] = schema._cache.get("fast_entity_types")  # type: ignore[assignment]
    if table is None:
        table = {
            name: et
            for name, et in schema.entity_types.items()
            if et.enum is None and not schema.is_action_type(name) and name_error(name) is None
        }
        schema._cache["fast_entity_types"] = table
    return table


def _fast_entity(o: Any, schema: Schema) -> Entity | None:
    if type(o) is not dict or not o.keys() <= ENTITY_KEYS:
        return None
    try:  # _fast_uid, inline (twice per request); a missing key gives up
        v = o["uid"]
        if type(v) is not dict:
            return None
        if len(v) == 2:
            inner = v
        else:
            if len(v) != 1:
                return None
            inner = v["__entity"]
            if type(inner) is not dict or len(inner) != 2:
                return None
        t, i = inner["type"], inner["id"]
    except KeyError:
        return None
    if type(t) is not str or type(i) is not str:
        return None
    convs = schema._cache.get("entity_converters")
    conv = None if convs is None else convs.entity.get(t)  # only valid type names have one
    if conv is None:
        if not _valid_type_name(t):
            return None
        conv = _converter(schema, "entity", t)
    uid = _new_uid(EntityUID, (t, i))
    if conv is not _GENERIC:
        return conv(o, uid)
    return _generic_entity(o, uid, schema)


_new_uid = tuple.__new__


def _generic_entity(o: dict[str, Any], uid: EntityUID, schema: Schema) -> Entity | None:
    """The fast path without generated code (a type's first uses, and the reference the
    generated converters are tested against)."""
    attrs = o.get("attrs")
    parents = o.get("parents", [])
    if type(attrs) is not dict or type(parents) is not list:
        return None
    et = _plain_types(schema).get(uid.type)
    if et is None:
        return None
    fields = _fast_record(attrs, et.shape, schema)
    if fields is None:
        return None
    parent_uids = set()
    allowed_types = schema.ancestor_types(uid.type) if parents else _NO_PARENT_TYPES
    for p in parents:
        pu = _fast_uid(p)
        if pu is None or pu.type not in allowed_types:
            return None
        pet = schema.entity_type(pu.type)
        if pet is not None and pet.enum is not None:
            return None
        parent_uids.add(pu)
    tags = o.get("tags", _NO_TAGS)
    if tags is _NO_TAGS:
        return Entity(uid, fields, parent_uids, {})
    tag_values = _fast_tags(tags, et, schema)
    if tag_values is None:
        return None
    return Entity(uid, fields, parent_uids, tag_values)


def _fast_mapped(obj: dict[str, Any], schema: Schema) -> Entity | None:
    """The mapped form's fast path (``obj`` is a dict); None to defer."""
    m = obj.get("cedar_entity_mapping")
    if type(m) is not dict or len(m) != 2:
        return None
    try:
        t, i = m["entity_type"], m["id"]
    except KeyError:
        return None
    if type(t) is not str or type(i) is not str:
        return None
    convs = schema._cache.get("entity_converters")
    conv = None if convs is None else convs.mapped.get(t)  # only plain types have one
    if conv is None:
        conv = _converter(schema, "mapped", t)
    uid = _new_uid(EntityUID, (t, i))
    if conv is not _GENERIC:
        return conv(obj, uid)
    et = _plain_types(schema).get(t)
    if et is not None:
        fields = _fast_record(obj, et.shape, schema, skip="cedar_entity_mapping")
        if fields is not None:
            return Entity(uid, fields, set(), {})
    return None


fast_entity = _fast_entity
"""``fast_request_entity`` for an object known to be a dict with a ``"uid"`` (the language's
form): one call less on the engine's per-request path."""


def fast_request_entity(obj: Any, schema: Schema) -> Entity | None:
    """A request's principal or resource given in full as a plain dict (either entity
    form), in the common case; ``None`` otherwise, and the caller runs the full reader
    (``refs.entity_or_reference``: its forms, its errors). What this returns is what that
    reader would."""
    if type(obj) is not dict:
        return None
    if "uid" in obj:
        return _fast_entity(obj, schema)
    if "cedar_entity_mapping" in obj:
        return _fast_mapped(obj, schema)
    return None


# -- generated converters (entity_codegen.py), per schema and type, built lazily ---------

GENERATE_AFTER = 8
"""Uses of an entity type (or of an action's context) after which its converter is
generated: a process that decides a few times never pays for generating code."""


def _generic(*_args: Any) -> Any:
    return None


_GENERIC: Any = _generic
"""A table's entry for "no generated converter (yet)": the generic fast path runs."""


class _Converters:
    """One schema's generated converters (by entity type / action) and the use counts of
    those not generated yet."""

    __slots__ = ("context", "entity", "mapped", "uses")

    def __init__(self) -> None:
        self.entity: dict[str, Any] = {}
        self.mapped: dict[str, Any] = {}
        self.context: dict[EntityUID, Any] = {}
        self.uses: dict[tuple[str, Any], int] = {}


def _converters(schema: Schema) -> _Converters:
    convs: _Converters | None = schema._cache.get("entity_converters")
    if convs is None:
        convs = schema._cache["entity_converters"] = _Converters()
    return convs


def _converter(schema: Schema, kind: str, key: Any) -> Any:
    """The generated converter for ``key`` once it has been asked for ``GENERATE_AFTER``
    times, ``_GENERIC`` before (and for keys that get none: undeclared, enumerated or
    action types, undeclared actions)."""
    convs = _converters(schema)
    table: dict[Any, Any] = getattr(convs, kind)
    plain = schema.action(key) is not None if kind == "context" else key in _plain_types(schema)
    if not plain:
        return _GENERIC
    n = convs.uses.get((kind, key), 0) + 1
    if n < GENERATE_AFTER:
        convs.uses[(kind, key)] = n
        return _GENERIC
    from polang.language import entity_codegen  # on the GENERATE_AFTER-th use (start-up time)

    build: Any = {
        "entity": entity_codegen.entity_converter,
        "mapped": entity_codegen.mapped_converter,
        "context": entity_codegen.context_converter,
    }[kind]
    try:
        conv = build(schema, key)
    except (RecursionError, SyntaxError, MemoryError):  # a schema too deep to generate
        conv = _GENERIC
    table[key] = conv
    return conv


def fast_context(data: Any, schema: Schema, action: EntityUID) -> RecordValue | None:
    """A context given as a plain dict, parsed by ``action``'s context type in the common
    case; ``None`` otherwise (then :func:`parse_context` gives the value or the error)."""
    if type(data) is not dict:
        return None
    convs = schema._cache.get("entity_converters")
    conv = None if convs is None else convs.context.get(action)
    if conv is None:
        conv = _converter(schema, "context", action)
    if conv is not _GENERIC:
        return conv(data)
    declared = schema.action(action)
    if declared is None:
        return None
    fields = _fast_record(data, declared.context, schema)
    return None if fields is None else RecordValue(fields)


def parse_entity(
    obj: object, schema: Schema | None = None, *, path: str = "$[0]", fast: bool = True
) -> Entity:
    """One entity in the language's JSON form (``{"uid", "attrs", "parents", "tags"}``).

    With a schema, the attributes, parents and tags are checked and parsed by their
    declared types. Raises ``EntityError`` with ``uid`` and ``path`` set. ``fast=False``:
    the caller tried ``fast_entity`` on ``obj`` already (it deferred; not again).
    """
    if schema is not None and fast:
        done = _fast_entity(obj, schema)
        if done is not None:
            return done
    try:
        return _parse_entity(obj, schema, path)
    except _Bad as bad:
        raise _entity_error(_uid_for_message(obj), bad) from None


def parse_legacy_entity(obj: object, schema: Schema | None = None, *, path: str = "$") -> Entity:
    """The legacy default-entity form ``{"entity_type": T, "entity_id": I, <attr>: <value>...}``:
    every key but the two names is an attribute; it has no parents and no tags."""
    uid: EntityUID | None = None
    try:
        o = _check_object(obj, path, "an entity")
        uid = _named_uid(o, "entity_type", "entity_id", path, path)
        attrs = {k: v for k, v in o.items() if k not in ("entity_type", "entity_id")}
        return _build(uid, attrs, path, [], {}, path, schema, path, path)
    except _Bad as bad:
        raise _entity_error(uid, bad) from None


def parse_mapped_entity(
    obj: object, schema: Schema | None = None, *, path: str = "$", fast: bool = True
) -> Entity:
    """The compatibility form ``{"cedar_entity_mapping": {"entity_type": T, "id": I}, **attrs}``:
    every other key is an attribute; it has no parents and no tags. ``fast``: as in
    :func:`parse_entity`."""
    if schema is not None and fast and type(obj) is dict:
        done = _fast_mapped(obj, schema)
        if done is not None:
            return done
    uid: EntityUID | None = None
    try:
        o = _check_object(obj, path, "an entity")
        mpath = json_path(path, "cedar_entity_mapping")
        if "cedar_entity_mapping" not in o:
            raise _Bad(path, 'missing "cedar_entity_mapping": {"entity_type": ..., "id": ...}')
        mapping = _check_object(o["cedar_entity_mapping"], mpath, '"cedar_entity_mapping"')
        uid = _named_uid(mapping, "entity_type", "id", mpath, mpath)
        attrs = {k: v for k, v in o.items() if k != "cedar_entity_mapping"}
        return _build(uid, attrs, path, [], {}, path, schema, mpath, path)
    except _Bad as bad:
        raise _entity_error(uid, bad) from None


def _named_uid(
    o: dict[str, Any], type_key: str, id_key: str, path: str, uid_path: str
) -> EntityUID:
    for key in (type_key, id_key):
        if key not in o:
            raise _Bad(path, f'missing "{key}"')
        if not isinstance(o[key], str):
            raise _Bad(json_path(path, key), f'"{key}" must be a string, found {json_kind(o[key])}')
    problem = name_error(o[type_key])
    if problem is not None:
        raise _Bad(json_path(path, type_key), f"invalid entity type: {problem}")
    return EntityUID(o[type_key], o[id_key])


def _same_entity(a: Entity, b: Entity) -> bool:
    return (
        a.uid == b.uid
        and a.parents == b.parents
        and RecordValue(a.attrs) == RecordValue(b.attrs)
        and RecordValue(a.tags) == RecordValue(b.tags)
    )


def _load(data: str | bytes | list[Any], filename: str | None) -> object:
    if not isinstance(data, str | bytes):
        return data
    try:
        return json_loads_checked(data)
    except json.JSONDecodeError as e:
        where = f"{filename or '<entities>'}:{e.lineno}:{e.colno}"
        raise EntityError(f"{where}: invalid JSON: {e.msg}", path="$") from None
    except ValueError as e:  # not UTF-8, or past a limit (depth, digits)
        raise EntityError(f"{filename or '<entities>'}: invalid JSON text: {e}", path="$") from None


def parse_entities(
    data: str | bytes | list[Any],
    schema: Schema | None = None,
    *,
    filename: str | None = None,
) -> EntityStore:
    """A JSON array of entities. With a schema, entities are checked and parsed by their
    declared types, and the schema's action entities are added (an action entity written
    in the file must agree with the schema). A repeated uid is an error unless both
    entries are identical, and so is a cycle in the hierarchy.
    """
    prefix = f"{filename}: " if filename else ""
    items = _load(data, filename)
    if not isinstance(items, list):
        raise EntityError(
            f"{prefix}at $: expected an array of entities, found {json_kind(items)}", path="$"
        )
    found: dict[EntityUID, tuple[Entity, str]] = {}
    for i, obj in enumerate(items):
        path = f"$[{i}]"
        try:
            entity = _parse_entity(obj, schema, path)
        except _Bad as bad:
            raise _entity_error(_uid_for_message(obj), bad, prefix) from None
        previous = found.get(entity.uid)
        if previous is None:
            found[entity.uid] = (entity, path)
        elif not _same_entity(previous[0], entity):
            raise _entity_error(
                entity.uid,
                _Bad(
                    path, f"entity {entity.uid} is already defined at {previous[1]} with other data"
                ),
                prefix,
            )
    if schema is not None:
        for action in schema.action_entities():
            found.setdefault(action.uid, (action, "the schema"))
    _check_acyclic(found, prefix)
    return EntityStore(e for e, _ in found.values())


def _check_acyclic(
    found: Mapping[EntityUID, tuple[Entity, str]],
    prefix: str,
    roots: Iterable[EntityUID] | None = None,
) -> None:
    """The hierarchy must be a DAG (the language rejects an entity that is its own
    ancestor) no deeper than ``MAX_HIERARCHY_DEPTH``.

    ``roots``: where to start looking (every entity when ``None``); a cycle or a chain too
    deep is found when it is reachable from one of them."""

    def parents_of(uid: EntityUID) -> Iterable[EntityUID]:
        entry = found.get(uid)
        return () if entry is None else entry[0].parents

    problem = check_hierarchy(found if roots is None else roots, parents_of, cycles=True)
    if problem is None:
        return
    first = problem.chain[0] if problem.kind == "too_deep" else problem.chain[-1]
    where = found[first][1]
    path = json_path(where, "parents") if where.startswith("$") else where
    if problem.kind == "cycle":
        message = "cycle in the entity hierarchy: " + " -> ".join(str(u) for u in problem.chain)
    else:
        message = too_deep_message("entity hierarchy", problem.chain)
    raise _entity_error(first, _Bad(path, message), prefix)


def parse_entity_uid_json(obj: object, path: str = "$") -> EntityUID:
    """An entity reference: ``{"type", "id"}`` or ``{"__entity": {"type", "id"}}``.

    Raises ``EntityError`` with the path.
    """
    if type(obj) is dict:  # _uid's fast path, one call less (three per request)
        inner = obj.get("__entity", obj)
        if type(inner) is dict and len(inner) == 2:
            t, i = inner.get("type"), inner.get("id")
            if type(t) is str and type(i) is str and _valid_type_name(t):
                return EntityUID(t, i)
    try:
        return _uid(obj, path)
    except _Bad as bad:
        raise _entity_error(None, bad) from None


def parse_value(
    json_value: object,
    expected: SchemaType | None = None,
    *,
    path: str,
    schema: Schema | None = None,
) -> Value:
    """One value from entity JSON, directed by ``expected`` when given (a string becomes
    an extension value, ``{"type", "id"}`` an entity, where the type says so).

    Raises ``EntityError`` (``uid`` unset) naming ``path``.
    """
    try:
        return _value(json_value, expected, path, schema)
    except _Bad as bad:
        raise _entity_error(None, bad) from None


def parse_context(
    data: object,
    schema: Schema | None,
    action: EntityUID | None,
    *,
    path: str = "$.context",
    fast: bool = True,
) -> RecordValue:
    """A request's context: a JSON object (or its text). With a schema and an action, it is
    parsed and checked by the action's context type (unknown, missing and mistyped
    attributes are errors). Raises ``RequestError`` naming the path. ``fast=False``: the
    caller tried ``fast_context`` on ``data`` already (it deferred; not again).
    """
    if isinstance(data, str | bytes):
        try:
            data = json_loads_checked(data)
        except ValueError as e:  # invalid, not UTF-8, or past a limit
            raise RequestError(f"context at {path}: invalid JSON: {e}") from None
    try:
        if schema is not None and action is not None:
            declared = schema.action(action)
            if declared is None:
                raise RequestError(
                    f"context at {path}: action `{action}` is not declared in the schema"
                )
            if fast and type(data) is dict:  # plain, well-typed contexts skip the checks
                done = fast_context(data, schema, action)
                if done is not None:
                    return done
            return _record(data, declared.context, path, schema)
        obj = _check_object(data, path, "the context")
        return RecordValue({k: _untyped(x, json_path(path, k)) for k, x in obj.items()})
    except _Bad as bad:
        raise RequestError(f"context at {bad.path}: {bad.message}") from None


def context_record(
    context: object,
    schema: Schema | None = None,
    action: EntityUID | None = None,
    *,
    path: str = "$.context",
    fast: bool = True,
) -> RecordValue:
    """A request's context as a record, read the one way every caller reads it (decisions,
    explanations, queries, diffs): a ``RecordValue`` as given; an object parsed by
    :func:`parse_context` (by the action's context type with a schema and an action, else
    by its JSON form alone, escapes and all). Anything else is a ``RequestError``; what
    ``None`` means (an empty context, an unknown one) is the caller's to say.
    ``fast``: as in :func:`parse_context`."""
    if type(context) is dict:
        data: dict[str, Any] = context
    elif isinstance(context, RecordValue):
        return context
    elif isinstance(context, Mapping):
        data = dict(context)
        fast = True  # a copy the converters have not seen
    else:
        raise RequestError(f"context: expected an object, got {type(context).__name__}")
    try:
        return parse_context(data, schema, action, path=path, fast=fast)
    except EntityError as e:
        raise RequestError(f"context: {e}") from None


def entity_to_json(e: Entity) -> dict[str, Any]:
    """The language's JSON form of an entity (``parse_entity`` reads it back)."""
    out: dict[str, Any] = {
        "uid": e.uid.to_json(),
        "attrs": {k: value_to_json(v) for k, v in e.attrs.items()},
        "parents": [p.to_json() for p in sorted(e.parents)],
    }
    if e.tags:
        out["tags"] = {k: value_to_json(v) for k, v in e.tags.items()}
    return out


def same_entity(a: Entity, b: Entity) -> bool:
    """Whether two entries of one uid carry the same data (a repeat, not a conflict)."""
    return _same_entity(a, b)


def check_acyclic(
    found: Mapping[EntityUID, tuple[Entity, str]], roots: Iterable[EntityUID] | None = None
) -> None:
    """``EntityError`` when the hierarchy of ``found`` (uid -> entity, where it was given)
    has a cycle reachable from ``roots`` (all of ``found`` when ``None``); the message
    names the cycle and where its first entity was given."""
    _check_acyclic(found, "", roots)
