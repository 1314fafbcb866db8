"""Entity and context converters generated as Python source, one per (schema, type).

A service sends its principal and resource as entity JSON on every call. The generic fast
path of :mod:`polang.language.entities` walks the schema's types for each value (a Python
call per attribute, a dispatch on the type each time). Here the walk happens once per
entity type: its attributes, parents and tags become straight-line Python with exact type
checks (``type(x) is str``, a ``Long``'s range, an entity reference's two strings and its
declared type), compiled with ``exec`` and cached with the schema.

A converter only ever *accepts* the common case. On anything else (a missing or unknown
attribute, a wrong type, a parent of a type the schema does not allow, an enumerated type,
an extension value its fast path does not take, nesting deeper than ``MAX_DEPTH``) it
returns ``None`` and the caller runs the generic fast path or the full parser, so every
error, and its message and path, is still the full parser's.
``tests/language/test_entity_codegen.py`` compares the converters with the full parser.

Nothing here is imported at ``import polang`` time, and a converter is generated on a
type's ``GENERATE_AFTER``-th use (``entities.py``), so a process that decides once never
pays for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polang.language.entity_store import Entity
from polang.language.entity_values import NO_TAGS, fast_extension, fast_record, fast_value
from polang.language.schema import (
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

MAX_DEPTH = 8
"""Sets and records nested deeper than this (in the schema's types) are converted by the
generic fast path instead of generated code (Python's parser limits block nesting)."""

EntityConverter = Callable[[dict[str, Any], EntityUID], Any]
"""``(entity JSON, its parsed uid) -> Entity | None`` (``None``: not the common case)."""
MappedConverter = Callable[[dict[str, Any], EntityUID], Any]
"""``(mapped-form JSON, its parsed uid) -> Entity | None``."""
ContextConverter = Callable[[dict[str, Any]], Any]
"""``(context JSON) -> RecordValue | None``."""


class _Writer:
    """One generated function's source and the constants it reads (its globals)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.lines: list[str] = []
        self.n = 0
        self.ns: dict[str, Any] = {
            "_schema": schema,
            "_fast_value": fast_value,
            "_fast_record": fast_record,
            "_fast_extension": fast_extension,
            "_Entity": Entity,
            "_onew": object.__new__,
            "_NO_TAGS": NO_TAGS,
            "_M": _MISSING,
            "_tnew": tuple.__new__,
            "_EUID": EntityUID,
            "_set": SetValue.from_keys,
            "_record": RecordValue,
        }

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, obj: Any, prefix: str = "_k") -> str:
        name = self.var(prefix)
        self.ns[name] = obj
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    # -- values ------------------------------------------------------------------------

    def value(self, t: SchemaType, src: str, ind: int, depth: int) -> str:
        """Lines that check ``src`` as a value of ``t`` (``return None`` when it is not the
        common case); returns the expression of the converted value."""
        tt = type(t)
        if tt is PrimType:
            name = t.name  # type: ignore[union-attr]
            if name == "String":
                self.emit(ind, f"if type({src}) is not str: return None")
                return src
            if name == "Long":
                self.emit(
                    ind,
                    f"if type({src}) is not int or not {LONG_MIN} <= {src} <= {LONG_MAX}: "
                    "return None",
                )
                return src
            if name == "Bool":
                self.emit(ind, f"if type({src}) is not bool: return None")
                return src
        elif depth < MAX_DEPTH:
            if tt is EntityRefType and self._plain_ref(t.name):  # type: ignore[union-attr]
                return self.ref(src, ind, self.const(t.name, "_n"), "!=")  # type: ignore[union-attr]
            if tt is SetType:
                return self.set_(t, src, ind, depth)  # type: ignore[arg-type]
            if tt is ExtensionType:
                out = self.var("v")
                name = self.const(t.name, "_n")  # type: ignore[union-attr]
                self.emit(ind, f"{out} = _fast_extension({src}, {name})")
                self.emit(ind, f"if {out} is None: return None")
                return out
            if tt is RecordType and not t.additional:  # type: ignore[union-attr]
                self.emit(
                    ind,
                    f"if type({src}) is not dict or '__entity' in {src} or '__extn' in {src}: "
                    "return None",
                )
                fields = self.record(t, src, ind, depth + 1)  # type: ignore[arg-type]
                out = self.var("r")
                self.emit(ind, f"{out} = _record({fields})")
                return out
        # the generic fast path (extension values, enumerated types, deep values)
        out = self.var("v")
        self.emit(ind, f"{out} = _fast_value({src}, {self.const(t, '_t')}, _schema)")
        self.emit(ind, f"if {out} is None: return None")
        return out

    def _plain_ref(self, name: str) -> bool:
        """References to ``name`` need no check but the uid's form and type."""
        et = self.schema.entity_type(name)
        return name_error(name) is None and (et is None or et.enum is None)

    def ref(self, src: str, ind: int, names: str, op: str) -> str:
        """An entity reference (``{"type", "id"}`` or ``{"__entity": ...}``) whose type
        ``op`` (``!=``: one name; ``not in``: a set) ``names``; the uid's expression."""
        inner, t, i, out = self.var("i"), self.var("t"), self.var("d"), self.var("u")
        # {"type", "id"} exactly, or {"__entity": {"type", "id"}} (a missing key is a
        # KeyError: the function's `except KeyError` gives up)
        self.emit(ind, f"if type({src}) is not dict: return None")
        self.emit(ind, f"if len({src}) == 2:")
        self.emit(ind + 1, f"{inner} = {src}")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"if len({src}) != 1: return None")
        self.emit(ind + 1, f"{inner} = {src}['__entity']")
        self.emit(ind + 1, f"if type({inner}) is not dict or len({inner}) != 2: return None")
        self.emit(ind, f"{t} = {inner}['type']")
        self.emit(ind, f"{i} = {inner}['id']")
        self.emit(
            ind,
            f"if type({t}) is not str or type({i}) is not str or {t} {op} {names}: return None",
        )
        self.emit(ind, f"{out} = _tnew(_EUID, ({t}, {i}))")
        return out

    def set_(self, t: SetType, src: str, ind: int, depth: int) -> str:
        element = t.element
        if type(element) is PrimType and element.name == "Bool":
            return self.value_generic(t, src, ind)  # its keys are not the values
        self.emit(ind, f"if type({src}) is not list: return None")
        y = self.var("y")
        out = self.var("s")
        if type(element) is PrimType:
            self.emit(ind, f"for {y} in {src}:")
            self.value(element, y, ind + 1, depth + 1)
            self.emit(ind, f"{out} = _set(frozenset({src}))")
            return out
        acc = self.var("a")
        self.emit(ind, f"{acc} = []")
        self.emit(ind, f"for {y} in {src}:")
        got = self.value(element, y, ind + 1, depth + 1)
        self.emit(ind + 1, f"{acc}.append({got})")
        self.emit(ind, f"{out} = _set(frozenset({acc}))")
        return out

    def value_generic(self, t: SchemaType, src: str, ind: int) -> str:
        out = self.var("v")
        self.emit(ind, f"{out} = _fast_value({src}, {self.const(t, '_t')}, _schema)")
        self.emit(ind, f"if {out} is None: return None")
        return out

    def record(
        self, rt: RecordType, src: str, ind: int, depth: int, skip: str | None = None
    ) -> str:
        """Lines that convert the dict ``src`` (known to be a dict) by the closed record
        type ``rt``; returns the name of the fields dict. ``skip``: a key of ``src`` that is
        not an attribute (the mapped form's ``cedar_entity_mapping``; known present)."""
        attrs = rt.attributes
        if rt.additional or (skip is not None and skip in attrs):
            out = self.var("f")
            skip_c = "None" if skip is None else self.const(skip, "_s")
            self.emit(
                ind, f"{out} = _fast_record({src}, {self.const(rt, '_t')}, _schema, {skip_c})"
            )
            self.emit(ind, f"if {out} is None: return None")
            return out
        required = [k for k, a in attrs.items() if a.required]
        optional = [k for k, a in attrs.items() if not a.required]
        names = {k: self.const(k, "_a") for k in attrs}
        got: dict[str, str] = {}
        for k in required:  # a missing one is a KeyError: the function gives up
            x = got[k] = self.var("x")
            self.emit(ind, f"{x} = {src}[{names[k]}]")
        count = len(required) + (skip is not None)
        if optional:
            for k in optional:
                got[k] = self.var("o")
            # every required key is there: an object of exactly that size has no other key
            self.emit(ind, f"if len({src}) == {count}:")
            self.emit(ind + 1, " = ".join(got[k] for k in optional) + " = _M")
            self.emit(ind, "else:")
            for k in optional:
                self.emit(ind + 1, f"{got[k]} = {src}.get({names[k]}, _M)")
            present = " + ".join(f"({got[k]} is not _M)" for k in optional)
            self.emit(ind + 1, f"if {count} + {present} != len({src}): return None")
        else:
            self.emit(ind, f"if len({src}) != {count}: return None")
        converted: list[tuple[str, str, bool]] = []
        for k, a in attrs.items():
            x = got[k]
            if a.required:
                out = self.value(a.type, x, ind, depth)
            else:
                self.emit(ind, f"if {x} is not _M:")
                n_before = len(self.lines)
                out = self.value(a.type, x, ind + 1, depth)
                if len(self.lines) == n_before:
                    self.emit(ind + 1, "pass")
            if out != x:
                converted.append((k, out, a.required))
        fields = self.var("f")
        self.emit(ind, f"{fields} = {src}.copy()")  # the caller's order and keys, as _fast_record
        for k, out, required_attr in converted:
            if required_attr:
                self.emit(ind, f"{fields}[{names[k]}] = {out}")
            else:
                self.emit(ind, f"if {got[k]} is not _M: {fields}[{names[k]}] = {out}")
        if skip is not None:
            self.emit(ind, f"del {fields}[{self.const(skip, '_s')}]")
        return fields

    def entity(self, ind: int, fields: str, parents: str, tags: str) -> None:
        """Return ``Entity(uid, fields, parents, tags)``, its slots set directly (a call to
        ``Entity.__init__``, which checks for omitted defaults, costs about 0.1 us more)."""
        self.emit(ind, "e = _onew(_Entity)")
        self.emit(ind, "e.uid = uid")
        self.emit(ind, f"e.attrs = {fields}")
        self.emit(ind, f"e.parents = {parents}")
        self.emit(ind, f"e.tags = {tags}")
        self.emit(ind, "return e")

    # -- the functions -------------------------------------------------------------------

    def build(self, name: str, params: str) -> Callable[..., Any]:
        """The function: its lines inside ``try``; a ``KeyError`` (a key the common case
        has, missing) gives up. Only exact dicts are subscripted: no caller code runs."""
        body = "\n".join("    " + line for line in self.lines)
        src = (
            f"def {name}({params}):\n    try:\n{body}\n    except KeyError:\n        return None\n"
        )
        code = compile(src, f"<polang converter {name}>", "exec")
        exec(code, self.ns)
        fn: Callable[..., Any] = self.ns[name]
        fn.__doc__ = src  # what was generated, for whoever debugs it
        return fn


class _Missing:
    """An absent optional attribute (a marker no JSON value can be, not ``None``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def entity_converter(schema: Schema, type_name: str) -> EntityConverter:
    """The converter of entities of ``type_name`` (declared, not enumerated, not an action
    type: ``entities._plain_types``) in the language's form ``{"uid", "attrs", "parents",
    "tags"}``. The caller checked the object is a dict with only those keys and parsed its
    uid (of this type)."""
    et = schema.entity_types[type_name]
    w = _Writer(schema)
    w.emit(1, "attrs = o.get('attrs')")
    w.emit(1, "if type(attrs) is not dict: return None")
    fields = w.record(et.shape, "attrs", 1, 0)
    w.emit(1, "parents = o.get('parents', _M)")
    w.emit(1, "ps = set()")
    w.emit(1, "if parents is not _M:")
    w.emit(2, "if type(parents) is not list: return None")
    allowed = sorted(m for m in schema.ancestor_types(type_name) if w._plain_ref(m))
    if allowed:
        w.emit(2, "for p in parents:")
        if len(allowed) == 1:
            pu = w.ref("p", 3, w.const(allowed[0], "_n"), "!=")
        else:
            pu = w.ref("p", 3, w.const(frozenset(allowed), "_p"), "not in")
        w.emit(3, f"ps.add({pu})")
    else:
        w.emit(2, "if parents: return None")
    w.emit(1, "tags = o.get('tags', _NO_TAGS)")
    w.emit(1, "if tags is _NO_TAGS: tv = {}")
    w.emit(1, "elif type(tags) is not dict: return None")
    w.emit(1, "elif not tags: tv = {}")
    w.emit(1, "else:")
    if et.tags is None:
        w.emit(2, "return None")
    elif type(et.tags) is PrimType:
        w.emit(2, "for k, y in tags.items():")
        w.emit(3, "if type(k) is not str: return None")
        w.value(et.tags, "y", 3, 0)
        w.emit(2, "tv = tags.copy()")
    else:
        w.emit(2, "tv = {}")
        w.emit(2, "for k, y in tags.items():")
        w.emit(3, "if type(k) is not str: return None")
        out = w.value(et.tags, "y", 3, 0)
        w.emit(3, f"tv[k] = {out}")
    w.entity(1, fields, "ps", "tv")
    return w.build("convert_entity", "o, uid")


MAPPED_KEY = "cedar_entity_mapping"


def mapped_converter(schema: Schema, type_name: str) -> MappedConverter:
    """The converter of the mapped form ``{"cedar_entity_mapping": {...}, **attrs}`` of
    ``type_name`` (a plain type, as for :func:`entity_converter`); the caller parsed the
    mapping."""
    et = schema.entity_types[type_name]
    w = _Writer(schema)
    fields = w.record(et.shape, "o", 1, 0, skip=MAPPED_KEY)
    w.entity(1, fields, "set()", "{}")
    return w.build("convert_mapped", "o, uid")


def context_converter(schema: Schema, action: EntityUID) -> ContextConverter:
    """The converter of contexts of ``action`` (declared in the schema), by its context
    type: ``(dict) -> RecordValue | None``."""
    declared = schema.actions[action]
    w = _Writer(schema)
    fields = w.record(declared.context, "c", 1, 0)
    w.emit(1, f"return _record({fields})")
    return w.build("convert_context", "c")
