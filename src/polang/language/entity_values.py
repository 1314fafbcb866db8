"""Entity JSON values to language values by a schema type, in the common case only.

The per-value step of the entity reader's fast path (:mod:`polang.language.entities`)
and the helpers the generated converters call (:mod:`polang.language.entity_codegen`):
below both, so that neither needs the other. Each function converts what it is sure of
and returns ``None`` for anything else; the caller then runs the full parser, so every
error (its message, its path) is still the full parser's.
"""

from __future__ import annotations

from typing import Any

from polang.errors import EvaluationError
from polang.language.extensions import EXTENSION_CLASSES, FUNCTIONS
from polang.language.schema import (
    EXTENSION_CONSTRUCTORS,
    EntityRefType,
    ExtensionType,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    name_error,
)
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, RecordValue, SetValue

NO_TAGS: Any = object()
"""An entity without ``tags`` (a generated converter's marker too)."""

_VALID_TYPE_NAMES: set[str] = set()
"""Entity type names already found valid (``name_error`` is a regex per segment)."""


def valid_type_name(name: str) -> bool:
    if name in _VALID_TYPE_NAMES:
        return True
    if name_error(name) is not None:
        return False
    if len(_VALID_TYPE_NAMES) < 4096:  # bounded: callers may send any number of names
        _VALID_TYPE_NAMES.add(name)
    return True


def fast_uid(v: Any) -> EntityUID | None:
    if type(v) is not dict:
        return None
    inner = v.get("__entity", v)
    if inner is not v and len(v) != 1:
        return None
    if type(inner) is not dict or len(inner) != 2:
        return None
    t, i = inner.get("type"), inner.get("id")
    if type(t) is str and type(i) is str and valid_type_name(t):
        return EntityUID(t, i)
    return None


def fast_extension(x: Any, name: str) -> Any:
    """An extension value from its string (schema-directed), ``{"__extn": {"fn", "arg"}}``
    or ``{"fn", "arg"}`` with a constructor and a string argument; anything else (or a bad
    argument) is the full parser's."""
    if type(x) is str:
        fn: Any = EXTENSION_CONSTRUCTORS[name]
        arg: Any = x
    elif type(x) is dict and (len(x) == 1 or len(x) == 2):
        inner = x.get("__extn") if len(x) == 1 else x
        if type(inner) is not dict or len(inner) != 2:
            return None
        fn, arg = inner.get("fn"), inner.get("arg")
        if type(fn) is not str or type(arg) is not str:
            return None
    else:
        return None
    impl = FUNCTIONS.get(fn)
    if impl is None:
        return None
    try:
        value = impl(arg)
    except (EvaluationError, ValueError):
        return None
    return value if type(value) is EXTENSION_CLASSES[name] else None


def fast_value(x: Any, t: SchemaType, schema: Schema) -> Any:
    tx = type(x)
    tt = type(t)
    if tt is PrimType:
        n = t.name  # type: ignore[union-attr]
        if n == "String":
            return x if tx is str else None
        if n == "Long":
            return x if tx is int and LONG_MIN <= x <= LONG_MAX else None
        return x if tx is bool else None
    if tt is EntityRefType:
        if tx is not dict or "__extn" in x:
            return None
        uid = fast_uid(x)
        if uid is None or uid.type != t.name:  # type: ignore[union-attr]
            return None
        et = schema.entity_type(uid.type)
        return uid if et is None or et.enum is None else None
    if tt is SetType:
        if tx is not list:
            return None
        out = []
        element = t.element  # type: ignore[union-attr]
        for e in x:
            v = fast_value(e, element, schema)
            if v is None:
                return None
            out.append(v)
        return SetValue(out)
    if tt is RecordType:
        if tx is not dict or "__entity" in x or "__extn" in x:
            return None
        fields = fast_record(x, t, schema)  # type: ignore[arg-type]
        return None if fields is None else RecordValue(fields)
    if tt is ExtensionType:
        return fast_extension(x, t.name)  # type: ignore[union-attr]
    return None


def fast_record(
    obj: dict[str, Any], rt: RecordType, schema: Schema, skip: str | None = None
) -> dict[str, Any] | None:
    """The record's fields, every key but ``skip`` an attribute of ``rt``; None to defer."""
    if rt.additional:
        return None
    attrs = rt.attributes
    fields: dict[str, Any] = {}
    for k, x in obj.items():
        if k == skip:
            continue
        attr = attrs.get(k)
        if attr is None:
            return None
        t = attr.type
        if type(t) is PrimType:  # the common case, inline
            tx = type(x)
            n = t.name
            if n == "String":
                if tx is not str:
                    return None
            elif n == "Long":
                if tx is not int or not LONG_MIN <= x <= LONG_MAX:
                    return None
            elif tx is not bool:
                return None
            fields[k] = x
            continue
        v = fast_value(x, t, schema)
        if v is None:
            return None
        fields[k] = v
    if len(fields) != len(attrs):
        for k, attr in attrs.items():
            if attr.required and k not in fields:
                return None
    return fields


def fast_tags(tags: Any, et: Any, schema: Schema) -> dict[str, Any] | None:
    """The tags converted by the type's declared tag type; None to defer (no tags declared,
    a non-string key, a value the fast path does not take)."""
    if type(tags) is not dict:
        return None
    if not tags:
        return {}
    t = et.tags
    if t is None:
        return None
    out: dict[str, Any] = {}
    for k, x in tags.items():
        if type(k) is not str:
            return None
        v = fast_value(x, t, schema)
        if v is None:
            return None
        out[k] = v
    return out
