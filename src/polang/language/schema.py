"""The schema model: one set of classes for both schema forms.

Parsers (human-readable ``.polangschema`` and JSON ``polang-json``) resolve every common
type and every relative name, so consumers (validator, entity parser, stores) only ever
see fully-qualified entity type names and concrete types.

Name resolution follows the language: inside namespace ``NS`` an unqualified name ``T``
is the common type ``NS::T``, else the entity type ``NS::T``, else the common type or
entity type ``T`` of the empty namespace, else a built-in (``Long``, ``ipaddr``...);
``__cedar::T`` is always the built-in, and a qualified name is always taken as written.
A namespaced declaration may not shadow one of the empty namespace, so the order
between the two namespaces never changes a result.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from polang._record import Record
from polang.errors import SchemaError
from polang.jsonlimits import MAX_JSON_DEPTH, decode, depth_of
from polang.language import lalr
from polang.language.entity_store import Entity
from polang.language.hierarchy import check_hierarchy, closure, too_deep_message
from polang.language.lalr import IDENT_RE, Token, Tree
from polang.language.values import EntityUID

if TYPE_CHECKING:
    from lark import Lark
    from lark.exceptions import UnexpectedInput

# ---------------------------------------------------------------- limits

MAX_SCHEMA_TYPE_DEPTH = 32
"""Deepest type nesting a schema may declare (docs/validation.md, "Limits"): each
``Set<...>``, record and common type reference is a level, the innermost type too
(``Set<Long>`` nests 2). Real schemas nest a handful of levels (the conformance corpus at
most 5); every walk over types (validation, entity parsing, ``to_json``) recurses per
level, so this keeps them far from Python's recursion limit."""


def too_deep_type_message() -> str:
    return (
        f"type nests deeper than the limit of {MAX_SCHEMA_TYPE_DEPTH} levels "
        "(MAX_SCHEMA_TYPE_DEPTH; each `Set<...>`, record and common type reference is a level)"
    )


# ---------------------------------------------------------------- types

_set = object.__setattr__

PrimName = Literal["Long", "String", "Bool"]
ExtName = Literal["decimal", "ipaddr", "datetime", "duration"]


class PrimType(Record):
    __slots__ = ("name",)
    name: PrimName

    def __init__(self, name: PrimName) -> None:
        _set(self, "name", name)

    def __str__(self) -> str:
        return self.name


class ExtensionType(Record):
    __slots__ = ("name",)
    name: ExtName

    def __init__(self, name: ExtName) -> None:
        _set(self, "name", name)

    def __str__(self) -> str:
        return self.name


class EntityRefType(Record):
    """A reference to an entity of the (fully-qualified) type ``name``."""

    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        _set(self, "name", name)

    def __str__(self) -> str:
        return self.name


class SetType(Record):
    __slots__ = ("element",)
    element: SchemaType

    def __init__(self, element: SchemaType) -> None:
        _set(self, "element", element)

    def __str__(self) -> str:
        return f"Set<{self.element}>"


class Attribute(Record):
    __slots__ = ("annotations", "required", "type")
    _uncompared: ClassVar[tuple[str, ...]] = ("annotations",)
    type: SchemaType
    required: bool
    annotations: tuple[tuple[str, str | None], ...]

    def __init__(
        self,
        type: SchemaType,
        required: bool = True,
        annotations: tuple[tuple[str, str | None], ...] = (),
    ) -> None:
        _set(self, "type", type)
        _set(self, "required", required)
        _set(self, "annotations", annotations)


class RecordType(Record):
    """``additional`` mirrors JSON's ``additionalAttributes`` (open records)."""

    __slots__ = ("additional", "attributes")
    attributes: dict[str, Attribute]
    additional: bool

    def __init__(
        self, attributes: dict[str, Attribute] | None = None, additional: bool = False
    ) -> None:
        _set(self, "attributes", {} if attributes is None else attributes)
        _set(self, "additional", additional)

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.attributes)), self.additional))

    def __str__(self) -> str:
        inner = ", ".join(
            f"{k}{'' if a.required else '?'}: {a.type}" for k, a in self.attributes.items()
        )
        return "{" + inner + "}"


SchemaType = PrimType | ExtensionType | EntityRefType | SetType | RecordType

LONG = PrimType("Long")
STRING = PrimType("String")
BOOL = PrimType("Bool")


# ---------------------------------------------------------------- declarations


class EntityTypeDef(Record):
    """An entity type. ``enum`` lists the only allowed ids of an enumerated type."""

    __slots__ = ("annotations", "enum", "member_of", "name", "shape", "tags")
    _frozen: ClassVar[bool] = False
    name: str
    member_of: tuple[str, ...]
    shape: RecordType
    tags: SchemaType | None
    enum: tuple[str, ...] | None
    annotations: tuple[tuple[str, str | None], ...]

    def __init__(
        self,
        name: str,
        member_of: tuple[str, ...] = (),
        shape: RecordType | None = None,
        tags: SchemaType | None = None,
        enum: tuple[str, ...] | None = None,
        annotations: tuple[tuple[str, str | None], ...] = (),
    ) -> None:
        self.name = name
        self.member_of = member_of
        self.shape = RecordType() if shape is None else shape
        self.tags = tags
        self.enum = enum
        self.annotations = annotations


class ActionDef(Record):
    """An action. ``applies_to`` is false when the schema gives no ``appliesTo``."""

    __slots__ = (
        "annotations",
        "applies_to",
        "context",
        "member_of",
        "principal_types",
        "resource_types",
        "uid",
    )
    _frozen: ClassVar[bool] = False
    uid: EntityUID
    member_of: tuple[EntityUID, ...]
    principal_types: tuple[str, ...]
    resource_types: tuple[str, ...]
    context: RecordType
    applies_to: bool
    annotations: tuple[tuple[str, str | None], ...]

    def __init__(
        self,
        uid: EntityUID,
        member_of: tuple[EntityUID, ...] = (),
        principal_types: tuple[str, ...] = (),
        resource_types: tuple[str, ...] = (),
        context: RecordType | None = None,
        applies_to: bool = True,
        annotations: tuple[tuple[str, str | None], ...] = (),
    ) -> None:
        self.uid = uid
        self.member_of = member_of
        self.principal_types = principal_types
        self.resource_types = resource_types
        self.context = RecordType() if context is None else context
        self.applies_to = applies_to
        self.annotations = annotations


Annotations = tuple[tuple[str, str | None], ...]


class Schema(Record):
    """A resolved schema. Treat it as immutable once parsed: derived facts are cached."""

    __slots__ = (
        "_cache",
        "actions",
        "common_type_annotations",
        "common_types",
        "entity_types",
        "namespace_annotations",
        "namespaces",
    )
    _frozen: ClassVar[bool] = False
    entity_types: dict[str, EntityTypeDef]
    actions: dict[EntityUID, ActionDef]
    common_types: dict[str, SchemaType]
    namespaces: tuple[str, ...]
    namespace_annotations: dict[str, Annotations]
    common_type_annotations: dict[str, Annotations]
    _cache: dict[str, Any]

    def __init__(
        self,
        entity_types: dict[str, EntityTypeDef] | None = None,
        actions: dict[EntityUID, ActionDef] | None = None,
        common_types: dict[str, SchemaType] | None = None,
        namespaces: tuple[str, ...] = (),
        namespace_annotations: dict[str, Annotations] | None = None,
        common_type_annotations: dict[str, Annotations] | None = None,
    ) -> None:
        self.entity_types = {} if entity_types is None else entity_types
        self.actions = {} if actions is None else actions
        self.common_types = {} if common_types is None else common_types
        self.namespaces = namespaces
        self.namespace_annotations = {} if namespace_annotations is None else namespace_annotations
        self.common_type_annotations = (
            {} if common_type_annotations is None else common_type_annotations
        )
        self._cache = {}

    def action_types(self) -> set[str]:
        return {uid.type for uid in self.actions}

    def is_action_type(self, name: str) -> bool:
        types: set[str] = self._cached("action_types", self.action_types)
        return name in types

    # ------------------------------------------------------------ look-ups

    def entity_type(self, name: str) -> EntityTypeDef | None:
        return self.entity_types.get(name)

    def action(self, uid: EntityUID) -> ActionDef | None:
        return self.actions.get(uid)

    def action_entities(self) -> list[Entity]:
        """The action entities, with their parent actions: the entity store takes these
        from the schema, not from entity files."""
        return [Entity(uid=a.uid, parents=set(a.member_of)) for a in self.actions.values()]

    def ancestor_types(self, name: str) -> frozenset[str]:
        """Types whose entities may be ancestors (transitively) of an entity of ``name``."""
        table: dict[str, frozenset[str]] = self._cached("ancestor_types", self._type_closure)
        return table.get(name, frozenset())

    def descendant_types(self, name: str) -> frozenset[str]:
        """Types whose entities may be descendants (transitively) of an entity of ``name``."""
        table: dict[str, frozenset[str]] = self._cached("descendant_types", self._type_inverse)
        return table.get(name, frozenset())

    def action_ancestors(self, uid: EntityUID) -> frozenset[EntityUID]:
        """Every action group ``uid`` is (transitively) a member of."""
        table: dict[EntityUID, frozenset[EntityUID]] = self._cached(
            "action_ancestors", self._action_closure
        )
        return table.get(uid, frozenset())

    def action_descendants(self, uid: EntityUID) -> frozenset[EntityUID]:
        """Every action that is (transitively) a member of the group ``uid``."""
        table: dict[EntityUID, frozenset[EntityUID]] = self._cached(
            "action_descendants", self._action_inverse
        )
        return table.get(uid, frozenset())

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``polang-json``); ``parse_schema_json`` gives back an equal schema."""
        return _schema_to_json(self)

    # ------------------------------------------------------------ derived tables

    def _cached(self, key: str, build: Any) -> Any:
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    def _type_closure(self) -> dict[str, frozenset[str]]:
        types = self.entity_types
        return closure(types, lambda n: types[n].member_of if n in types else ())

    def _type_inverse(self) -> dict[str, frozenset[str]]:
        children: dict[str, list[str]] = {n: [] for n in self.entity_types}
        for n, d in self.entity_types.items():
            for p in d.member_of:
                children.setdefault(p, []).append(n)
        return closure(children, children.__getitem__)

    def _action_closure(self) -> dict[EntityUID, frozenset[EntityUID]]:
        actions = self.actions
        return closure(actions, lambda u: actions[u].member_of if u in actions else ())

    def _action_inverse(self) -> dict[EntityUID, frozenset[EntityUID]]:
        children: dict[EntityUID, list[EntityUID]] = {u: [] for u in self.actions}
        for u, a in self.actions.items():
            for p in a.member_of:
                children.setdefault(p, []).append(u)
        return closure(children, children.__getitem__)


# ================================================================ names

RESERVED_WORDS = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has"})
"""Words the language reserves: never a name (entity type, attribute identifier, action...)."""

SCHEMA_KEYWORDS = frozenset(
    {"Bool", "Boolean", "Entity", "Extension", "Long", "Record", "Set", "String"}
)
"""Names a common type may not take (they would be ambiguous in the JSON form)."""

CEDAR_NAMESPACE = "__cedar"
EXTENSION_TYPES: tuple[ExtName, ...] = ("decimal", "ipaddr", "datetime", "duration")
EXTENSION_CONSTRUCTORS: dict[str, str] = {
    "decimal": "decimal",
    "ipaddr": "ip",
    "datetime": "datetime",
    "duration": "duration",
}
"""The function that builds each extension type from a string (schema-directed JSON)."""

_PRIMITIVES: dict[str, PrimType] = {"Long": LONG, "String": STRING, "Bool": BOOL}
_EXTENSIONS: dict[str, ExtensionType] = {n: ExtensionType(n) for n in EXTENSION_TYPES}


@functools.lru_cache(maxsize=4096)
def name_error(name: str) -> str | None:
    """Why ``name`` is not a valid (possibly ``::``-qualified) type name, or None."""
    if not name:
        return "a name cannot be empty"
    for part in name.split("::"):
        if not IDENT_RE.match(part):
            return f"`{name}` is not a valid name"
        if part in RESERVED_WORDS:
            return f"`{part}` is a reserved word and cannot be used in the name `{name}`"
        if part == CEDAR_NAMESPACE:
            return f"`{name}` uses the reserved `{CEDAR_NAMESPACE}` namespace"
    return None


def has_name_shape(name: object, *, qualified: bool = False) -> bool:
    """Whether ``name`` is identifiers joined by ``::`` (at least two when ``qualified``):
    the shape only, for names that are not always type names (a token mapping may be a
    token name); :func:`name_error` also refuses reserved words."""
    if type(name) is not str:
        return False
    parts = name.split("::")
    if qualified and len(parts) < 2:
        return False
    return all(IDENT_RE.match(part) for part in parts)


def _qualify(ns: str, name: str) -> str:
    return f"{ns}::{name}" if ns else name


def _action_type(ns: str) -> str:
    return _qualify(ns, "Action")


@functools.lru_cache(maxsize=16384)
def json_path(base: str, key: str | int) -> str:
    """``base`` extended by one key, in the ``$.a.b[0]["odd key"]`` notation."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    if IDENT_RE.match(key):
        return f"{base}.{key}"
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"


# ================================================================ JSON text


class _DupKeyDict(dict[str, Any]):
    """A JSON object that had a repeated key; the walkers report it with its path."""

    duplicate_key: str = ""


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dup = None
    for k, v in pairs:
        if k in out and dup is None:
            dup = k
        out[k] = v
    if dup is None:
        return out
    marked = _DupKeyDict(out)
    marked.duplicate_key = dup
    return marked


def json_loads_checked(text: str | bytes) -> Any:
    """:func:`polang.jsonlimits.decode` keeping track of repeated object keys (see
    :func:`duplicate_key`: the walkers report them with their JSON path)."""
    return decode(text, pairs_hook=_object_pairs)


def non_string_key(obj: dict[Any, Any]) -> object | None:
    """A key that is not a string (a Python dict passed where a JSON object belongs), or
    ``None``: JSON text never has one."""
    for k in obj:
        if type(k) is not str:
            return k
    return None


def duplicate_key(obj: object) -> str | None:
    """The first repeated key of a JSON object read by :func:`json_loads_checked`."""
    return obj.duplicate_key if isinstance(obj, _DupKeyDict) else None


def json_kind(v: object) -> str:
    """A JSON value's kind, for messages; a Python value that no JSON text gives (a set,
    a tuple, an object of a class) is named as what it is, not as the JSON it is not."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, set | frozenset):
        return "a set"
    if isinstance(v, tuple):
        return "a tuple"
    return f"a Python `{type(v).__name__}`"


# ================================================================ unresolved declarations
#
# Both forms are first read into these "raw" declarations, which keep names as written
# and where they were written (line:col or JSON path). One resolver then turns them into
# the model, so the two forms share every rule of name resolution and validation.


class _Loc(Record):
    __slots__ = ("column", "line", "path")
    line: int
    column: int
    path: str

    def __init__(self, line: int = 0, column: int = 0, path: str = "") -> None:
        _set(self, "line", line)
        _set(self, "column", column)
        _set(self, "path", path)


class _RName(Record):
    """A type written by name. ``kind`` limits what it may resolve to:
    ``any`` (common > entity > built-in), ``common`` (common > built-in),
    ``entity``, ``ext`` (an extension type)."""

    __slots__ = ("kind", "loc", "name")
    _frozen: ClassVar[bool] = False
    name: str
    kind: str
    loc: _Loc

    def __init__(self, name: str, kind: str, loc: _Loc) -> None:
        self.name = name
        self.kind = kind
        self.loc = loc


class _RSet(Record):
    __slots__ = ("element", "loc")
    _frozen: ClassVar[bool] = False
    element: _RType
    loc: _Loc

    def __init__(self, element: _RType, loc: _Loc) -> None:
        self.element = element
        self.loc = loc


class _RAttr(Record):
    __slots__ = ("annotations", "loc", "required", "type")
    _frozen: ClassVar[bool] = False
    type: _RType
    required: bool
    annotations: Annotations
    loc: _Loc

    def __init__(self, type: _RType, required: bool, annotations: Annotations, loc: _Loc) -> None:
        self.type = type
        self.required = required
        self.annotations = annotations
        self.loc = loc


class _RRecord(Record):
    __slots__ = ("additional", "attributes", "loc")
    _frozen: ClassVar[bool] = False
    attributes: dict[str, _RAttr]
    additional: bool
    loc: _Loc

    def __init__(self, attributes: dict[str, _RAttr], additional: bool, loc: _Loc) -> None:
        self.attributes = attributes
        self.additional = additional
        self.loc = loc


class _RPrim(Record):
    """A primitive named by a JSON keyword (``Long``, ``String``, ``Boolean``)."""

    __slots__ = ("loc", "type")
    _frozen: ClassVar[bool] = False
    type: PrimType
    loc: _Loc

    def __init__(self, type: PrimType, loc: _Loc) -> None:
        self.type = type
        self.loc = loc


_RType = _RName | _RSet | _RRecord | _RPrim


class _REntity(Record):
    __slots__ = ("annotations", "enum", "loc", "member_of", "name", "shape", "tags")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    member_of: list[tuple[str, _Loc]]
    shape: _RType | None
    tags: _RType | None
    enum: tuple[str, ...] | None
    annotations: Annotations

    def __init__(
        self,
        name: str,
        loc: _Loc,
        member_of: list[tuple[str, _Loc]],
        shape: _RType | None,
        tags: _RType | None,
        enum: tuple[str, ...] | None,
        annotations: Annotations,
    ) -> None:
        self.name = name
        self.loc = loc
        self.member_of = member_of
        self.shape = shape
        self.tags = tags
        self.enum = enum
        self.annotations = annotations


class _RRef(Record):
    """An action reference: ``id`` alone, or with the action type as written."""

    __slots__ = ("id", "loc", "type")
    _frozen: ClassVar[bool] = False
    id: str
    type: str | None
    loc: _Loc

    def __init__(self, id: str, type: str | None, loc: _Loc) -> None:
        self.id = id
        self.type = type
        self.loc = loc


class _RApplies(Record):
    __slots__ = ("context", "principals", "resources")
    _frozen: ClassVar[bool] = False
    principals: list[tuple[str, _Loc]]
    resources: list[tuple[str, _Loc]]
    context: _RType | None

    def __init__(
        self,
        principals: list[tuple[str, _Loc]],
        resources: list[tuple[str, _Loc]],
        context: _RType | None,
    ) -> None:
        self.principals = principals
        self.resources = resources
        self.context = context


class _RAction(Record):
    __slots__ = ("annotations", "applies", "loc", "member_of", "name")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    member_of: list[_RRef]
    applies: _RApplies | None
    annotations: Annotations

    def __init__(
        self,
        name: str,
        loc: _Loc,
        member_of: list[_RRef],
        applies: _RApplies | None,
        annotations: Annotations,
    ) -> None:
        self.name = name
        self.loc = loc
        self.member_of = member_of
        self.applies = applies
        self.annotations = annotations


class _RCommon(Record):
    __slots__ = ("annotations", "loc", "name", "type")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    type: _RType
    annotations: Annotations

    def __init__(self, name: str, loc: _Loc, type: _RType, annotations: Annotations) -> None:
        self.name = name
        self.loc = loc
        self.type = type
        self.annotations = annotations


class _RNamespace(Record):
    __slots__ = ("actions", "annotations", "commons", "entities", "loc", "name")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    annotations: Annotations
    entities: dict[str, _REntity]
    actions: dict[str, _RAction]
    commons: dict[str, _RCommon]

    def __init__(
        self,
        name: str,
        loc: _Loc,
        annotations: Annotations = (),
        entities: dict[str, _REntity] | None = None,
        actions: dict[str, _RAction] | None = None,
        commons: dict[str, _RCommon] | None = None,
    ) -> None:
        self.name = name
        self.loc = loc
        self.annotations = annotations
        self.entities = {} if entities is None else entities
        self.actions = {} if actions is None else actions
        self.commons = {} if commons is None else commons


class _Source:
    """Where the schema came from: turns a location into a located ``SchemaError``."""

    def __init__(self, filename: str | None) -> None:
        self.filename = filename

    def error(self, loc: _Loc, message: str) -> SchemaError:
        if loc.path:
            where = f"{self.filename}: {loc.path}" if self.filename else loc.path
            return SchemaError(f"{where}: {message}", filename=self.filename, path=loc.path)
        where = f"{self.filename or '<schema>'}:{loc.line}:{loc.column}"
        return SchemaError(
            f"{where}: {message}", filename=self.filename, line=loc.line, column=loc.column
        )


# ================================================================ resolution


class _Resolver:
    """Resolves raw declarations into the model and checks the schema's consistency."""

    def __init__(self, src: _Source, namespaces: list[_RNamespace]) -> None:
        self.src = src
        self.namespaces = namespaces
        self.entities: dict[str, tuple[str, _REntity]] = {}
        self.commons: dict[str, tuple[str, _RCommon]] = {}
        self.actions: dict[EntityUID, tuple[str, _RAction]] = {}
        self.common_done: dict[str, tuple[SchemaType, int]] = {}
        self.common_stack: list[str] = []

    def run(self) -> Schema:
        for ns in self.namespaces:
            for e in ns.entities.values():
                self.entities[_qualify(ns.name, e.name)] = (ns.name, e)
            for c in ns.commons.values():
                self.commons[_qualify(ns.name, c.name)] = (ns.name, c)
            for a in ns.actions.values():
                self.actions[EntityUID(_action_type(ns.name), a.name)] = (ns.name, a)
        self._check_shadowing()

        # a definition is not a reference: its type starts at the first level
        common_types = {fq: self._common(fq, c.loc, 0)[0] for fq, (_, c) in self.commons.items()}
        entity_types = {fq: self._entity_type(ns, fq, e) for fq, (ns, e) in self.entities.items()}
        actions = {uid: self._action(ns, uid, a) for uid, (ns, a) in self.actions.items()}
        self._check_hierarchies(entity_types, actions)
        return Schema(
            entity_types=entity_types,
            actions=actions,
            common_types=common_types,
            namespaces=tuple(ns.name for ns in self.namespaces),
            namespace_annotations={ns.name: ns.annotations for ns in self.namespaces},
            common_type_annotations={fq: c.annotations for fq, (_, c) in self.commons.items()},
        )

    def _check_shadowing(self) -> None:
        """A namespaced declaration may not shadow one of the empty namespace."""
        for ns in self.namespaces:
            if not ns.name:
                continue
            decls: list[tuple[str, _Loc]] = [(e.name, e.loc) for e in ns.entities.values()]
            decls += [(c.name, c.loc) for c in ns.commons.values()]
            for name, loc in decls:
                if name in self.entities and self.entities[name][0] == "":
                    what = "entity type"
                elif name in self.commons and self.commons[name][0] == "":
                    what = "common type"
                else:
                    continue
                raise self.src.error(
                    loc,
                    f"the definition of `{ns.name}::{name}` shadows the {what} `{name}` "
                    "of the empty namespace",
                )
            for a in ns.actions.values():
                if EntityUID("Action", a.name) in self.actions:
                    uid = EntityUID(_action_type(ns.name), a.name)
                    raise self.src.error(
                        a.loc,
                        f"the definition of `{uid}` shadows the action "
                        f"`{EntityUID('Action', a.name)}` of the empty namespace",
                    )

    # ------------------------------------------------------------ types

    def _type(self, ns: str, t: _RType) -> SchemaType:
        return self._typed(ns, t, 1)[0]

    def _typed(self, ns: str, t: _RType, depth: int) -> tuple[SchemaType, int]:
        """``t`` resolved, with its height: the levels of its longest path (leaf included),
        a common type reference counting as one. ``depth`` is the level ``t`` is at."""
        if depth > MAX_SCHEMA_TYPE_DEPTH:
            raise self.src.error(t.loc, too_deep_type_message())
        if isinstance(t, _RPrim):
            return t.type, 1
        if isinstance(t, _RSet):
            element, h = self._typed(ns, t.element, depth + 1)
            return SetType(element), h + 1
        if isinstance(t, _RRecord):
            attrs: dict[str, Attribute] = {}
            height = 0
            for k, a in t.attributes.items():
                at, h = self._typed(ns, a.type, depth + 1)
                height = max(height, h)
                attrs[k] = Attribute(at, a.required, a.annotations)
            return RecordType(attrs, t.additional), height + 1
        return self._name(ns, t, depth)

    def _name(self, ns: str, r: _RName, depth: int = 1) -> tuple[SchemaType, int]:
        name = r.name
        prefix = CEDAR_NAMESPACE + "::"
        if name.startswith(prefix):
            builtin = _builtin(name[len(prefix) :], r.kind)
            if builtin is not None:
                return builtin, 1
            raise self.src.error(r.loc, _undefined(r))
        candidates = [name] if "::" in name or not ns else [_qualify(ns, name), name]
        for c in candidates:
            if r.kind in ("any", "common") and c in self.commons:
                return self._common(c, r.loc, depth)
            if r.kind in ("any", "entity") and c in self.entities:
                return EntityRefType(c), 1
        if "::" not in name:
            builtin = _builtin(name, r.kind)
            if builtin is not None:
                return builtin, 1
        raise self.src.error(r.loc, _undefined(r))

    def _common(self, fq: str, loc: _Loc, depth: int = 1) -> tuple[SchemaType, int]:
        done = self.common_done.get(fq)
        if done is not None:
            resolved, height = done
            if depth + height > MAX_SCHEMA_TYPE_DEPTH:  # as deep as resolving it again
                raise self.src.error(loc, too_deep_type_message())
            return resolved, height + 1
        if fq in self.common_stack:
            cycle = [*self.common_stack[self.common_stack.index(fq) :], fq]
            raise self.src.error(
                loc, "cycle in common type definitions: " + " -> ".join(f"`{n}`" for n in cycle)
            )
        self.common_stack.append(fq)
        ns, decl = self.commons[fq]
        resolved, height = self._typed(ns, decl.type, depth + 1)
        self.common_stack.pop()
        self.common_done[fq] = (resolved, height)
        return resolved, height + 1

    def _entity_ref(self, ns: str, name: str, loc: _Loc) -> str:
        t = self._name(ns, _RName(name, "entity", loc))[0]
        assert isinstance(t, EntityRefType)
        return t.name

    # ------------------------------------------------------------ declarations

    def _entity_type(self, ns: str, fq: str, e: _REntity) -> EntityTypeDef:
        member_of = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in e.member_of))
        shape = RecordType()
        if e.shape is not None:
            resolved = self._type(ns, e.shape)
            if not isinstance(resolved, RecordType):
                raise self.src.error(
                    e.shape.loc,
                    f"the shape of entity type `{fq}` must be a record type, not `{resolved}`",
                )
            shape = resolved
        tags = self._type(ns, e.tags) if e.tags is not None else None
        return EntityTypeDef(fq, member_of, shape, tags, e.enum, e.annotations)

    def _action(self, ns: str, uid: EntityUID, a: _RAction) -> ActionDef:
        parents = tuple(_unique(self._action_ref(ns, r) for r in a.member_of))
        if a.applies is None:
            return ActionDef(uid, parents, applies_to=False, annotations=a.annotations)
        principals = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in a.applies.principals))
        resources = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in a.applies.resources))
        context = RecordType()
        if a.applies.context is not None:
            resolved = self._type(ns, a.applies.context)
            if not isinstance(resolved, RecordType):
                raise self.src.error(
                    a.applies.context.loc,
                    f"the context of action `{uid}` must be a record type, not `{resolved}`",
                )
            context = resolved
        if not principals or not resources:
            # An action that applies to no principal (or no resource) applies to nothing.
            return ActionDef(uid, parents, applies_to=False, annotations=a.annotations)
        return ActionDef(uid, parents, principals, resources, context, True, a.annotations)

    def _action_ref(self, ns: str, r: _RRef) -> EntityUID:
        if r.type is None or "::" not in r.type:
            base = r.type or "Action"
            candidates = [EntityUID(_qualify(ns, base), r.id)]
            if ns:
                candidates.append(EntityUID(base, r.id))
        else:
            candidates = [EntityUID(r.type, r.id)]
        for c in candidates:
            if c in self.actions:
                return c
        raise self.src.error(r.loc, f"undefined action `{candidates[0]}`")

    def _check_hierarchies(
        self, entity_types: dict[str, EntityTypeDef], actions: dict[EntityUID, ActionDef]
    ) -> None:
        """Action groups may not form a cycle (entity types may: ``entity G in [G]``), and
        neither hierarchy may be deeper than ``MAX_HIERARCHY_DEPTH``: their closures are
        built in full (``Schema.ancestor_types``, the action entities' ancestors)."""

        def type_parents(name: str) -> tuple[str, ...]:
            et = entity_types.get(name)
            return () if et is None else et.member_of

        problem = check_hierarchy(entity_types, type_parents, cycles=False)
        if problem is not None:
            raise self.src.error(
                self.entities[problem.chain[0]][1].loc,
                too_deep_message("entity type hierarchy", problem.chain, lambda n: f"`{n}`"),
            )

        def action_parents(uid: EntityUID) -> tuple[EntityUID, ...]:
            ad = actions.get(uid)
            return () if ad is None else ad.member_of

        found = check_hierarchy(actions, action_parents, cycles=True)
        if found is None:
            return
        if found.kind == "cycle":
            raise self.src.error(
                self.actions[found.chain[-1]][1].loc,
                "cycle in the action hierarchy: " + " -> ".join(str(u) for u in found.chain),
            )
        raise self.src.error(
            self.actions[found.chain[0]][1].loc,
            too_deep_message("action hierarchy", found.chain, lambda u: f"`{u}`"),
        )


def _builtin(name: str, kind: str) -> SchemaType | None:
    if kind == "entity":
        return None
    if kind != "ext" and name in _PRIMITIVES:
        return _PRIMITIVES[name]
    return _EXTENSIONS.get(name)


def _undefined(r: _RName) -> str:
    if r.kind == "entity":
        return f"undefined entity type `{r.name}`"
    if r.kind == "common":
        return f"undefined common type `{r.name}`"
    if r.kind == "ext":
        return f"unknown extension type `{r.name}`"
    return f"undefined type `{r.name}`"


def _unique(items: Any) -> list[Any]:
    """``items`` without repeats, in order (linear: a type may list thousands of parents)."""
    return list(dict.fromkeys(items))


# ================================================================ human-readable form


@functools.cache
def _schema_lexer(tables: lalr.Tables) -> lalr.Lexer:
    return lalr.schema_lexer(tables)


@functools.cache
def _lark_parser() -> Lark:
    from lark import Lark  # lark: for a syntax error's message only (start-up time)

    from polang.language.schema_lexer import SchemaLexer  # lark's lexer

    grammar = (Path(__file__).parent / "grammar" / "schema.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer=SchemaLexer, maybe_placeholders=True, cache=True)


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}
_UNICODE_ESCAPE = re.compile(r"u\{([0-9a-fA-F]{1,6})\}")


def unescape_string(body: str) -> str:
    """The text of a string literal's body (without quotes); ValueError on a bad escape."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("a string cannot end with a lone `\\`")
        esc = body[i + 1]
        simple = _ESCAPES.get(esc)
        if simple is not None:
            out.append(simple)
            i += 2
            continue
        m = _UNICODE_ESCAPE.match(body, i + 1)
        if m is None:
            raise ValueError(f"invalid escape `\\{esc}`")
        code = int(m.group(1), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"`\\u{{{m.group(1)}}}` is not a Unicode scalar value")
        out.append(chr(code))
        i = m.end()
    return "".join(out)


class _HumanReader:
    """Walks the lark tree into raw declarations (checking names as it goes)."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.namespaces: dict[str, _RNamespace] = {}

    def read(self, tree: Tree) -> list[_RNamespace]:
        for item in tree.children:
            assert isinstance(item, Tree)
            if item.data == "namespace":
                self._namespace(item)
            else:
                ns = self.namespaces.get("")
                if ns is None:
                    ns = self.namespaces[""] = _RNamespace("", _Loc(1, 1))
                self._decl(ns, item)
        return list(self.namespaces.values())

    # ------------------------------------------------------------ helpers

    def _loc(self, tok: Token) -> _Loc:
        return _Loc(tok.line or 0, tok.column or 0)

    def _err(self, tok: Token, message: str) -> SchemaError:
        return self.src.error(self._loc(tok), message)

    def _str(self, tok: Token) -> str:
        try:
            return unescape_string(tok.value[1:-1])
        except ValueError as e:
            raise self._err(tok, str(e)) from None

    def _ident(self, tok: Token, what: str) -> str:
        """An identifier that names something: never a reserved word."""
        if tok.value in RESERVED_WORDS:
            raise self._err(tok, f"`{tok.value}` is a reserved word and cannot name {what}")
        return str(tok.value)

    def _path(self, tree: Tree, what: str) -> tuple[str, _Loc]:
        toks = [t for t in tree.children if isinstance(t, Token)]
        for t in toks:
            self._ident(t, what)
        return "::".join(t.value for t in toks), self._loc(toks[0])

    def _annotations(self, tree: Tree) -> Annotations:
        out: dict[str, str | None] = {}
        for ann in tree.children:
            assert isinstance(ann, Tree)
            key_tok, value_tok = ann.children
            assert isinstance(key_tok, Token)
            if key_tok.value in out:
                raise self._err(key_tok, f"duplicate annotation `@{key_tok.value}`")
            out[key_tok.value] = None if value_tok is None else self._str(cast(Token, value_tok))
        return tuple(out.items())

    # ------------------------------------------------------------ declarations

    def _namespace(self, tree: Tree) -> None:
        ann_tree, path_tree, *decls = tree.children
        name, loc = self._path(cast(Tree, path_tree), "a namespace")
        if CEDAR_NAMESPACE in name.split("::"):
            raise self.src.error(loc, f"`{name}` uses the reserved `{CEDAR_NAMESPACE}` namespace")
        if name in self.namespaces:
            raise self.src.error(loc, f"namespace `{name}` is declared twice")
        ns = self.namespaces[name] = _RNamespace(name, loc, self._annotations(cast(Tree, ann_tree)))
        for d in decls:
            self._decl(ns, cast(Tree, d))

    def _decl(self, ns: _RNamespace, tree: Tree) -> None:
        if tree.data == "entity_decl":
            self._entity_decl(ns, tree)
        elif tree.data == "action_decl":
            self._action_decl(ns, tree)
        else:
            self._type_decl(ns, tree)

    def _decl_name(self, tok: Token, what: str) -> str:
        name = self._ident(tok, what)
        if name == CEDAR_NAMESPACE:
            raise self._err(tok, f"`{CEDAR_NAMESPACE}` is reserved and cannot name {what}")
        return name

    def _entity_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, idents, body = tree.children
        annotations = self._annotations(cast(Tree, ann_tree))
        assert isinstance(body, Tree)
        member_of: list[tuple[str, _Loc]] = []
        shape: _RType | None = None
        tags: _RType | None = None
        enum: tuple[str, ...] | None = None
        if body.data == "entity_enum":
            enum = tuple(self._str(cast(Token, t)) for t in body.children[1:])
        else:
            _in, parents, record, _tags, tags_type = body.children
            if parents is not None:
                member_of = self._ent_or_types(cast(Tree, parents), "an entity type")
            if record is not None:
                shape = self._record(cast(Tree, record))
            if tags_type is not None:
                tags = self._type(cast(Tree, tags_type))
        for tok in cast(Tree, idents).children:
            assert isinstance(tok, Token)
            name = self._decl_name(tok, "an entity type")
            if name == "Action":
                raise self._err(tok, "`Action` cannot be declared as an entity type")
            if name in ns.entities:
                raise self._err(tok, f"entity type `{_qualify(ns.name, name)}` is declared twice")
            ns.entities[name] = _REntity(
                name, self._loc(tok), member_of, shape, tags, enum, annotations
            )

    def _action_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, names, _in, refs, applies = tree.children
        annotations = self._annotations(cast(Tree, ann_tree))
        member_of = self._refs(cast(Tree, refs)) if refs is not None else []
        applies_to = self._applies(cast(Tree, applies)) if applies is not None else None
        for name_tree in cast(Tree, names).children:
            name, tok = self._name(cast(Tree, name_tree), "an action")
            if name in ns.actions:
                uid = EntityUID(_action_type(ns.name), name)
                raise self._err(tok, f"action `{uid}` is declared twice")
            ns.actions[name] = _RAction(name, self._loc(tok), member_of, applies_to, annotations)

    def _type_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, tok, type_tree = tree.children
        assert isinstance(tok, Token)
        name = self._decl_name(tok, "a common type")
        if name in SCHEMA_KEYWORDS:
            raise self._err(tok, f"`{name}` is a reserved type name and cannot name a common type")
        if name in ns.commons:
            raise self._err(tok, f"common type `{_qualify(ns.name, name)}` is declared twice")
        ns.commons[name] = _RCommon(
            name,
            self._loc(tok),
            self._type(cast(Tree, type_tree)),
            self._annotations(cast(Tree, ann_tree)),
        )

    def _name(self, tree: Tree, what: str) -> tuple[str, Token]:
        (tok,) = tree.children
        assert isinstance(tok, Token)
        if tok.type == "STR":
            return self._str(tok), tok
        return self._ident(tok, what), tok

    def _refs(self, tree: Tree) -> list[_RRef]:
        out = []
        for ref in tree.children:
            assert isinstance(ref, Tree)
            if ref.data == "plain_ref":
                name, tok = self._name(cast(Tree, ref.children[0]), "an action")
                out.append(_RRef(name, None, self._loc(tok)))
            else:
                toks = cast(list[Token], ref.children)
                for t in toks[:-1]:
                    self._ident(t, "an action type")
                out.append(
                    _RRef(
                        self._str(toks[-1]),
                        "::".join(t.value for t in toks[:-1]),
                        self._loc(toks[0]),
                    )
                )
        return out

    def _applies(self, tree: Tree) -> _RApplies:
        kw = cast(Token, tree.children[0])
        principals: list[tuple[str, _Loc]] | None = None
        resources: list[tuple[str, _Loc]] | None = None
        context: _RType | None = None
        seen: set[str] = set()
        for decl in tree.children[1:]:
            if decl is None:
                continue
            assert isinstance(decl, Tree)
            key_tok, value = decl.children
            assert isinstance(key_tok, Token)
            if key_tok.value in seen:
                raise self._err(key_tok, f"`{key_tok.value}` is declared twice in `appliesTo`")
            seen.add(key_tok.value)
            if decl.data == "app_context":
                context = self._type(cast(Tree, value))
                continue
            types = self._ent_or_types(cast(Tree, value), "an entity type")
            if not types:
                raise self._err(
                    key_tok, f"`{key_tok.value}` in `appliesTo` needs at least one entity type"
                )
            if decl.data == "app_principal":
                principals = types
            else:
                resources = types
        if principals is None:
            raise self._err(kw, "`appliesTo` must declare `principal`")
        if resources is None:
            raise self._err(kw, "`appliesTo` must declare `resource`")
        return _RApplies(principals, resources, context)

    def _ent_or_types(self, tree: Tree, what: str) -> list[tuple[str, _Loc]]:
        return [
            self._path(p, what) for p in tree.children if isinstance(p, Tree) and p.data == "path"
        ]

    # ------------------------------------------------------------ types

    def _type(self, tree: Tree, depth: int = 1) -> _RType:
        while tree.data == "type":
            tree = cast(Tree, tree.children[0])
        if tree.data == "type_path":
            name, loc = self._path(cast(Tree, tree.children[0]), "a type")
            if name == "Set":
                raise self.src.error(loc, "`Set` needs an element type: `Set<...>`")
            return _RName(name, "any", loc)
        if tree.data == "type_generic":
            path_tree, elem = tree.children
            name, loc = self._path(cast(Tree, path_tree), "a type")
            if name != "Set":
                raise self.src.error(loc, f"`{name}` takes no type argument (only `Set<...>` does)")
            if depth >= MAX_SCHEMA_TYPE_DEPTH:  # its element would be past the limit
                raise self.src.error(loc, too_deep_type_message())
            return _RSet(self._type(cast(Tree, elem), depth + 1), loc)
        return self._record(tree, depth)

    def _record(self, tree: Tree, depth: int = 1) -> _RRecord:
        brace = cast(Token, tree.children[0])
        if depth >= MAX_SCHEMA_TYPE_DEPTH and any(d is not None for d in tree.children[1:]):
            raise self._err(brace, too_deep_type_message())
        attrs: dict[str, _RAttr] = {}
        for decl in tree.children[1:]:
            if decl is None:
                continue
            assert isinstance(decl, Tree)
            ann_tree, name_tree, qmark, type_tree = decl.children
            name, tok = self._name(cast(Tree, name_tree), "an attribute")
            if name in attrs:
                raise self._err(tok, f"attribute `{name}` is declared twice")
            attrs[name] = _RAttr(
                self._type(cast(Tree, type_tree), depth + 1),
                qmark is None,
                self._annotations(cast(Tree, ann_tree)),
                self._loc(tok),
            )
        return _RRecord(attrs, False, self._loc(brace))


def _syntax_error(src: _Source, text: str, e: UnexpectedInput) -> SchemaError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    line, column = e.line, e.column
    if (isinstance(e, UnexpectedToken) and e.token.type == "$END") or line is None or line < 1:
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
        return src.error(_Loc(line, column), "unexpected end of the schema")
    if isinstance(e, UnexpectedToken):
        tok = e.token
        terminals = e.accepts or e.expected
        expected = sorted(_describe_terminal(t) for t in terminals)
        message = f"unexpected {_describe_token(tok)}"
        if expected:
            message += "; expected " + ", ".join(expected)
        if tok.type == "IDENT":  # a misspelt keyword: `entitty A;`, `Entity A;`
            words = [w for t in terminals if (w := _keyword_of(t)) is not None]
            exact = [w for w in words if w.lower() == str(tok.value).lower()]
            import difflib  # on a mistake only (start-up time)

            close = exact or difflib.get_close_matches(str(tok.value), words, n=1, cutoff=0.7)
            if close:
                message += f"; did you mean `{close[0]}`?"
        return src.error(_Loc(line, column), message)
    if isinstance(e, UnexpectedCharacters):
        if e.char == '"':
            return src.error(_Loc(line, column), "unterminated string literal")
        return src.error(_Loc(line, column), f"unexpected character {e.char!r}")
    return src.error(_Loc(line, column), "syntax error")


_TERMINAL_TEXT = {
    "IDENT": "a name",
    "STR": "a string",
    "LBRACE": "`{`",
    "LBRACKET": "`[`",
    "QMARK": "`?`",
    "$END": "the end of the schema",
}


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    try:
        pattern = _lark_parser().get_terminal(name).pattern
    except KeyError:  # not a terminal of the grammar's own (lark's end marker, ...)
        return name.lower()
    return f"`{pattern.value}`" if pattern.type == "str" else name.lower()


def _keyword_of(name: str) -> str | None:
    """The word a keyword terminal stands for (``ENTITY`` -> ``entity``), else ``None``."""
    try:
        pattern = _lark_parser().get_terminal(name).pattern
    except KeyError:
        return None
    value = str(pattern.value)
    return value if pattern.type == "str" and IDENT_RE.match(value) else None


@functools.cache
def _keyword_words() -> frozenset[str]:
    terminals = _lark_parser().terminals
    return frozenset(t.pattern.value for t in terminals if t.pattern.type == "str")


def _describe_token(tok: Token) -> str:
    if tok.type == "STR":
        return f"string {tok.value}"
    if tok.type == "IDENT" and tok.value not in _keyword_words():
        return f"name `{tok.value}`"
    return f"`{tok.value}`"


def parse_schema(text: str, filename: str | None = None) -> Schema:
    """Parse the human-readable form (``.polangschema``) into the resolved model.

    Raises ``SchemaError`` naming ``file:line:col`` for syntax errors and for every
    inconsistency (undefined or duplicate names, cycles, reserved names...).
    """
    src = _Source(filename)
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of the schema
    tables = lalr.load_tables("schema", _lark_parser)
    tree = lalr.parse(tables, _schema_lexer(tables), text, "start")
    if tree is None:  # a syntax error: lark's exception makes the message
        from lark.exceptions import UnexpectedInput

        try:
            tree = lalr.from_lark(_lark_parser().parse(text))
        except UnexpectedInput as e:
            raise _syntax_error(src, text, e) from None
    return _Resolver(src, _HumanReader(src).read(tree)).run()


# ================================================================ JSON form

_TYPE_KEYS = {
    "Set": {"element"},
    "Record": {"attributes", "additionalAttributes"},
    "Entity": {"name"},
    "Extension": {"name"},
    "EntityOrCommon": {"name"},
}
_JSON_PRIMITIVES = {"Long": LONG, "String": STRING, "Boolean": BOOL}


class _JsonReader:
    """Reads the JSON form into raw declarations, checking its structure."""

    def __init__(self, src: _Source) -> None:
        self.src = src

    def _err(self, path: str, message: str) -> SchemaError:
        return self.src.error(_Loc(path=path), message)

    def _object(self, v: object, path: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self._err(path, f"expected an object, found {json_kind(v)}")
        bad = non_string_key(v)
        if bad is not None:
            raise self._err(path, f"an object's keys are strings, found {json_kind(bad)}")
        dup = duplicate_key(v)
        if dup is not None:
            raise self._err(json_path(path, dup), f"duplicate key `{dup}`")
        if allowed is not None:
            for k in v:
                if k not in allowed:
                    raise self._err(
                        json_path(path, k),
                        f"unknown field `{k}`; expected one of "
                        + ", ".join(f"`{a}`" for a in sorted(allowed)),
                    )
        return v

    def _string(self, v: object, path: str) -> str:
        if not isinstance(v, str):
            raise self._err(path, f"expected a string, found {json_kind(v)}")
        return v

    def _list(self, v: object, path: str) -> list[Any]:
        if not isinstance(v, list):
            raise self._err(path, f"expected an array, found {json_kind(v)}")
        return v

    def _require(self, obj: dict[str, Any], key: str, path: str) -> Any:
        if key not in obj:
            raise self._err(path, f"missing field `{key}`")
        return obj[key]

    def _type_name(self, v: object, path: str) -> str:
        name = self._string(v, path)
        problem = name_error(name)
        if problem is not None and not _is_cedar_builtin(name):
            raise self._err(path, problem)
        return name

    def _ident(self, name: str, path: str, what: str) -> str:
        if not IDENT_RE.match(name):
            raise self._err(path, f"`{name}` is not a valid name for {what}")
        if name in RESERVED_WORDS:
            raise self._err(path, f"`{name}` is a reserved word and cannot name {what}")
        if name == CEDAR_NAMESPACE:
            raise self._err(path, f"`{CEDAR_NAMESPACE}` is reserved and cannot name {what}")
        return name

    def _annotations(self, v: object, path: str) -> Annotations:
        obj = self._object(v, path)
        out = []
        for k, value in obj.items():
            p = json_path(path, k)
            if not IDENT_RE.match(k):
                raise self._err(p, f"`{k}` is not a valid annotation name")
            if value is not None and not isinstance(value, str):
                raise self._err(
                    p, f"an annotation value must be a string, found {json_kind(value)}"
                )
            out.append((k, value))
        return tuple(out)

    # ------------------------------------------------------------ schema

    def read(self, data: object) -> list[_RNamespace]:
        top = self._object(data, "$")
        out = []
        for ns_name, body in top.items():
            path = json_path("$", ns_name)
            if ns_name:
                problem = name_error(ns_name)
                if problem is not None:
                    raise self._err(path, problem)
            obj = self._object(body, path, {"entityTypes", "actions", "commonTypes", "annotations"})
            ns = _RNamespace(ns_name, _Loc(path=path))
            if "annotations" in obj:
                if not ns_name:
                    raise self._err(
                        json_path(path, "annotations"),
                        "the empty namespace cannot have annotations",
                    )
                ns.annotations = self._annotations(
                    obj["annotations"], json_path(path, "annotations")
                )
            p = json_path(path, "commonTypes")
            for name, t in self._object(obj.get("commonTypes", {}), p).items():
                self._common(ns, name, t, json_path(p, name))
            p = json_path(path, "entityTypes")
            entity_types = self._require(obj, "entityTypes", path)
            for name, t in self._object(entity_types, p).items():
                self._entity(ns, name, t, json_path(p, name))
            p = json_path(path, "actions")
            actions = self._require(obj, "actions", path)
            for name, a in self._object(actions, p).items():
                self._action(ns, name, a, json_path(p, name))
            out.append(ns)
        return out

    def _common(self, ns: _RNamespace, name: str, t: object, path: str) -> None:
        self._ident(name, path, "a common type")
        if name in SCHEMA_KEYWORDS:
            raise self._err(path, f"`{name}` is a reserved type name and cannot name a common type")
        obj = self._object(t, path)
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        rtype = self._type(obj, path, extra={"annotations"})
        ns.commons[name] = _RCommon(name, _Loc(path=path), rtype, annotations)

    def _entity(self, ns: _RNamespace, name: str, t: object, path: str) -> None:
        self._ident(name, path, "an entity type")
        if name == "Action":
            raise self._err(path, "`Action` cannot be declared as an entity type")
        obj = self._object(t, path, {"memberOfTypes", "shape", "tags", "enum", "annotations"})
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        enum: tuple[str, ...] | None = None
        if "enum" in obj:
            for k in ("memberOfTypes", "shape", "tags"):
                if k in obj:
                    raise self._err(
                        json_path(path, k), f"an enumerated entity type cannot have `{k}`"
                    )
            p = json_path(path, "enum")
            items = self._list(obj["enum"], p)
            if not items:
                raise self._err(p, "an enumerated entity type needs at least one id")
            enum = tuple(self._string(x, json_path(p, i)) for i, x in enumerate(items))
        member_of: list[tuple[str, _Loc]] = []
        p = json_path(path, "memberOfTypes")
        for i, x in enumerate(self._list(obj.get("memberOfTypes", []), p)):
            q = json_path(p, i)
            member_of.append((self._type_name(x, q), _Loc(path=q)))
        shape = None
        if "shape" in obj:
            shape = self._type(obj["shape"], json_path(path, "shape"))
        tags = None
        if "tags" in obj:
            tags = self._type(obj["tags"], json_path(path, "tags"))
        ns.entities[name] = _REntity(
            name, _Loc(path=path), member_of, shape, tags, enum, annotations
        )

    def _action(self, ns: _RNamespace, name: str, a: object, path: str) -> None:
        obj = self._object(a, path, {"memberOf", "appliesTo", "annotations"})
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        member_of = []
        p = json_path(path, "memberOf")
        for i, ref in enumerate(self._list(obj.get("memberOf", []), p)):
            q = json_path(p, i)
            r = self._object(ref, q, {"id", "type"})
            rid = self._string(self._require(r, "id", q), json_path(q, "id"))
            rtype = None
            if "type" in r:
                rtype = self._type_name(r["type"], json_path(q, "type"))
            member_of.append(_RRef(rid, rtype, _Loc(path=q)))
        applies = None
        if "appliesTo" in obj:
            p = json_path(path, "appliesTo")
            ap = self._object(obj["appliesTo"], p, {"principalTypes", "resourceTypes", "context"})
            lists = []
            for key in ("principalTypes", "resourceTypes"):
                q = json_path(p, key)
                items = self._list(self._require(ap, key, p), q)
                lists.append(
                    [
                        (self._type_name(x, json_path(q, i)), _Loc(path=json_path(q, i)))
                        for i, x in enumerate(items)
                    ]
                )
            context = None
            if "context" in ap:
                context = self._type(ap["context"], json_path(p, "context"))
            applies = _RApplies(lists[0], lists[1], context)
        ns.actions[name] = _RAction(name, _Loc(path=path), member_of, applies, annotations)

    # ------------------------------------------------------------ types

    def _type(
        self, v: object, path: str, *, extra: frozenset[str] | set[str] = frozenset()
    ) -> _RType:
        obj = self._object(v, path)
        loc = _Loc(path=path)
        kind = self._string(self._require(obj, "type", path), json_path(path, "type"))
        allowed = {"type"} | _TYPE_KEYS.get(kind, set()) | set(extra)
        for k in obj:
            if k not in allowed:
                raise self._err(json_path(path, k), f"unexpected field `{k}` for type `{kind}`")
        if kind in _JSON_PRIMITIVES:
            return _RPrim(_JSON_PRIMITIVES[kind], loc)
        if kind == "Set":
            return _RSet(
                self._type(self._require(obj, "element", path), json_path(path, "element")), loc
            )
        if kind == "Record":
            p = json_path(path, "attributes")
            attrs: dict[str, _RAttr] = {}
            for name, a in self._object(self._require(obj, "attributes", path), p).items():
                q = json_path(p, name)
                aobj = self._object(a, q)
                required = aobj.get("required", True)
                if not isinstance(required, bool):
                    raise self._err(
                        json_path(q, "required"),
                        f"`required` must be a boolean, found {json_kind(required)}",
                    )
                attrs[name] = _RAttr(
                    self._type(aobj, q, extra={"required", "annotations"}),
                    required,
                    self._annotations(aobj.get("annotations", {}), json_path(q, "annotations")),
                    _Loc(path=q),
                )
            additional = obj.get("additionalAttributes", False)
            if not isinstance(additional, bool):
                raise self._err(
                    json_path(path, "additionalAttributes"),
                    f"`additionalAttributes` must be a boolean, found {json_kind(additional)}",
                )
            return _RRecord(attrs, additional, loc)
        if kind in ("Entity", "Extension", "EntityOrCommon"):
            p = json_path(path, "name")
            name = self._type_name(self._require(obj, "name", path), p)
            what = {"Entity": "entity", "Extension": "ext", "EntityOrCommon": "any"}[kind]
            return _RName(name, what, _Loc(path=p))
        # Any other word names a common type (or, failing that, a built-in type).
        name_problem = name_error(kind)
        if name_problem is not None and not _is_cedar_builtin(kind):
            raise self._err(json_path(path, "type"), name_problem)
        return _RName(kind, "common", _Loc(path=json_path(path, "type")))


def _is_cedar_builtin(name: str) -> bool:
    head, _, tail = name.partition("::")
    return head == CEDAR_NAMESPACE and (tail in _PRIMITIVES or tail in _EXTENSIONS)


def parse_schema_json(data: str | bytes | dict[str, Any], filename: str | None = None) -> Schema:
    """Parse the JSON form (``polang-json``) into the resolved model.

    Raises ``SchemaError`` naming the JSON path (``$.NS.entityTypes.User...``) of the
    offending element, or the line and column when the text is not JSON at all.
    """
    src = _Source(filename)
    if isinstance(data, str | bytes):
        try:
            data = json_loads_checked(data)
        except json.JSONDecodeError as e:
            raise src.error(_Loc(e.lineno, e.colno), f"invalid JSON: {e.msg}") from None
        except ValueError as e:  # not UTF-8, or past a limit
            raise src.error(_Loc(path="$"), f"invalid JSON text: {e}") from None
    elif depth_of(data) > MAX_JSON_DEPTH:
        raise src.error(
            _Loc(path="$"),
            f"the schema nests deeper than the limit of {MAX_JSON_DEPTH} levels "
            "(MAX_JSON_DEPTH, docs/security.md)",
        )
    return _Resolver(src, _JsonReader(src).read(data)).run()


# ================================================================ model -> JSON


def _split(name: str) -> tuple[str, str]:
    ns, _, base = name.rpartition("::")
    return ns, base


def _annotations_json(annotations: Annotations) -> dict[str, str | None]:
    return dict(annotations)


def type_to_json(t: SchemaType) -> dict[str, Any]:
    """One type in the JSON form, with fully-qualified names."""
    if isinstance(t, PrimType):
        return {"type": "Boolean" if t.name == "Bool" else t.name}
    if isinstance(t, ExtensionType):
        return {"type": "Extension", "name": t.name}
    if isinstance(t, EntityRefType):
        return {"type": "Entity", "name": t.name}
    if isinstance(t, SetType):
        return {"type": "Set", "element": type_to_json(t.element)}
    attrs: dict[str, Any] = {}
    for k, a in t.attributes.items():
        entry = type_to_json(a.type)
        if not a.required:
            entry["required"] = False
        if a.annotations:
            entry["annotations"] = _annotations_json(a.annotations)
        attrs[k] = entry
    out: dict[str, Any] = {"type": "Record", "attributes": attrs}
    if t.additional:
        out["additionalAttributes"] = True
    return out


def _schema_to_json(schema: Schema) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}

    def namespace(ns: str) -> dict[str, Any]:
        body = out.get(ns)
        if body is None:
            body = out[ns] = {"entityTypes": {}, "actions": {}}
            annotations = schema.namespace_annotations.get(ns)
            if annotations:
                body["annotations"] = _annotations_json(annotations)
        return body

    for ns in schema.namespaces:
        namespace(ns)
    for fq, t in schema.common_types.items():
        ns, base = _split(fq)
        entry = type_to_json(t)
        annotations = schema.common_type_annotations.get(fq)
        if annotations:
            entry["annotations"] = _annotations_json(annotations)
        namespace(ns).setdefault("commonTypes", {})[base] = entry
    for fq, et in schema.entity_types.items():
        ns, base = _split(fq)
        e: dict[str, Any] = {}
        if et.enum is not None:
            e["enum"] = list(et.enum)
        else:
            if et.member_of:
                e["memberOfTypes"] = list(et.member_of)
            if et.shape.attributes or et.shape.additional:
                e["shape"] = type_to_json(et.shape)
            if et.tags is not None:
                e["tags"] = type_to_json(et.tags)
        if et.annotations:
            e["annotations"] = _annotations_json(et.annotations)
        namespace(ns)["entityTypes"][base] = e
    for uid, ad in schema.actions.items():
        ns, _ = _split(uid.type)
        a: dict[str, Any] = {}
        if ad.member_of:
            a["memberOf"] = [{"id": p.id, "type": p.type} for p in ad.member_of]
        if ad.applies_to:
            a["appliesTo"] = {
                "principalTypes": list(ad.principal_types),
                "resourceTypes": list(ad.resource_types),
                "context": type_to_json(ad.context),
            }
        if ad.annotations:
            a["annotations"] = _annotations_json(ad.annotations)
        namespace(ns)["actions"][uid.id] = a
    return out
