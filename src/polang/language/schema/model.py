"""The resolved schema: types, entity types, actions, the :class:`Schema` (and its JSON form), and
its limits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from polang._record import Record
from polang.language.entity_store import Entity
from polang.language.hierarchy import closure
from polang.language.values import EntityUID

if TYPE_CHECKING:
    pass


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
