"""The validator's own types: finer than schema types (singleton booleans, entity unions).

Strict validation needs types the schema cannot write: ``true``/``false`` singletons (so
``false && x`` is known to be false and ``x`` is never looked at), the bottom type, and
"any entity" for unlinked template slots. Least upper bounds follow strict mode: no width
subtyping, no unions of different entity types, and optionality must match exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from polang.language import schema as sm

# ---------------------------------------------------------------- the type structure


class Type:
    """Base of the validator types; instances are immutable and compare structurally."""

    __slots__ = ()

    def display(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.display()

    def __repr__(self) -> str:
        return f"<{self.display()}>"


class NeverType(Type):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is NeverType

    def __hash__(self) -> int:
        return hash("Never")

    def display(self) -> str:
        return "Never"


class BoolType(Type):
    """``kind`` is ``any`` (Bool), ``true`` or ``false`` (singletons)."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __eq__(self, other: object) -> bool:
        return type(other) is BoolType and other.kind == self.kind

    def __hash__(self) -> int:
        return hash(("Bool", self.kind))

    def display(self) -> str:
        return "Bool"  # singletons are an internal refinement; authors only see Bool


class LongType(Type):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is LongType

    def __hash__(self) -> int:
        return hash("Long")

    def display(self) -> str:
        return "Long"


class StringType(Type):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is StringType

    def __hash__(self) -> int:
        return hash("String")

    def display(self) -> str:
        return "String"


class EntityType(Type):
    """An entity of one of ``names`` (a non-empty set), or any entity when ``names`` is None."""

    __slots__ = ("_hash", "names")

    def __init__(self, names: frozenset[str] | None) -> None:
        self.names = names
        self._hash = hash(("Entity", names))

    def __eq__(self, other: object) -> bool:
        return type(other) is EntityType and other.names == self.names

    def __hash__(self) -> int:
        return self._hash

    @property
    def single(self) -> str | None:
        if self.names is not None and len(self.names) == 1:
            return next(iter(self.names))
        return None

    def display(self) -> str:
        if self.names is None:
            return "any entity"
        if len(self.names) == 1:
            return next(iter(self.names))
        return "one of " + ", ".join(sorted(self.names))


class SetType(Type):
    """``element`` None means "a set of anything" (only used as an expectation)."""

    __slots__ = ("_hash", "element")

    def __init__(self, element: Type | None) -> None:
        self.element = element
        self._hash = hash(("Set", element))

    def __eq__(self, other: object) -> bool:
        return type(other) is SetType and other.element == self.element

    def __hash__(self) -> int:
        return self._hash

    def display(self) -> str:
        return "Set" if self.element is None else f"Set<{self.element.display()}>"


class AttrType:
    """A record or entity attribute: its type and whether it is always present."""

    __slots__ = ("_hash", "required", "type")

    def __init__(self, type: Type, required: bool = True) -> None:
        self.type = type
        self.required = required
        self._hash = hash((type, required))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is AttrType and other.required == self.required and other.type == self.type
        )

    def __hash__(self) -> int:
        return self._hash


class RecordType(Type):
    """A record; ``open`` records may hold attributes beyond those listed."""

    __slots__ = ("_hash", "attrs", "open")

    def __init__(self, attrs: Mapping[str, AttrType], open: bool = False) -> None:
        self.attrs = dict(attrs)
        self.open = open
        self._hash = hash(("Record", frozenset(self.attrs.items()), open))

    def __eq__(self, other: object) -> bool:
        return type(other) is RecordType and other.open == self.open and other.attrs == self.attrs

    def __hash__(self) -> int:
        return self._hash

    def display(self) -> str:
        parts = []
        for name in sorted(self.attrs):
            a = self.attrs[name]
            parts.append(f"{_attr_name(name)}{'' if a.required else '?'}: {a.type.display()}")
        if self.open:
            parts.append("...")
        return "{" + ", ".join(parts) + "}"


class ExtType(Type):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return type(other) is ExtType and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Ext", self.name))

    def display(self) -> str:
        return self.name


def _attr_name(name: str) -> str:
    if name.isidentifier() and name.isascii():
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


NEVER = NeverType()
BOOL = BoolType("any")
TRUE = BoolType("true")
FALSE = BoolType("false")
LONG = LongType()
STRING = StringType()
ANY_ENTITY = EntityType(None)
ANY_SET = SetType(None)
ANY_RECORD = RecordType({}, open=True)
DECIMAL = ExtType("decimal")
IPADDR = ExtType("ipaddr")
DATETIME = ExtType("datetime")
DURATION = ExtType("duration")


def singleton(value: bool) -> BoolType:
    return TRUE if value else FALSE


def entity(name: str) -> EntityType:
    return EntityType(frozenset((name,)))


# ---------------------------------------------------------------- subtyping and bounds


class LubError(Exception):
    """No least upper bound exists; ``hint`` says why, for the author."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


HINT_QUALIFIER = (
    "corresponding attributes of compatible record types must have the same optionality "
    "(both required or both optional)"
)
HINT_WIDTH = "compatible record types must have exactly the same attributes"
HINT_ENTITY = "different entity types are never compatible"
HINT_ENTITY_RECORD = "entity and record types are never compatible"
HINT_NONE = "types must be exactly equal to be compatible"


def is_subtype(t0: Type, t1: Type, strict: bool) -> bool:
    """``t0 <: t1``. Strict mode has depth subtyping only and no entity unions."""
    if isinstance(t0, NeverType):
        return True
    if isinstance(t0, BoolType):
        return isinstance(t1, BoolType) and (t0.kind == t1.kind or t1.kind == "any")
    if type(t0) is not type(t1):
        return False
    if isinstance(t0, LongType | StringType):
        return True
    if isinstance(t0, SetType) and isinstance(t1, SetType):
        if t1.element is None:
            return True
        if t0.element is None:
            return False
        return is_subtype(t0.element, t1.element, strict)
    if isinstance(t0, RecordType) and isinstance(t1, RecordType):
        if t0.open and not t1.open:
            return False
        if t1.open and not strict and _attrs_subtype(t0.attrs, t1.attrs, strict):
            return True
        return t0.attrs.keys() == t1.attrs.keys() and _attrs_subtype(t0.attrs, t1.attrs, strict)
    if isinstance(t0, EntityType) and isinstance(t1, EntityType):
        n0, n1 = t0.names, t1.names
        if n1 is None:
            return n0 is None or not strict
        if n0 is None:
            return False
        return n0 == n1 if strict else n0 <= n1
    return t0 == t1  # extension types


def _attrs_subtype(a0: Mapping[str, AttrType], a1: Mapping[str, AttrType], strict: bool) -> bool:
    for k, at1 in a1.items():
        at0 = a0.get(k)
        if at0 is None:
            return False
        if strict:
            if at0.required != at1.required:
                return False
        elif not at0.required and at1.required:
            return False
        if not is_subtype(at0.type, at1.type, strict):
            return False
    return True


def lub(t0: Type, t1: Type, strict: bool = True) -> Type:
    """The least upper bound of two types; raises :class:`LubError` when there is none."""
    if is_subtype(t0, t1, strict):
        return t1
    if is_subtype(t1, t0, strict):
        return t0
    if isinstance(t0, BoolType) and isinstance(t1, BoolType):
        return BOOL
    if isinstance(t0, SetType) and isinstance(t1, SetType):
        if t0.element is None or t1.element is None:
            return ANY_SET
        return SetType(lub(t0.element, t1.element, strict))
    if isinstance(t0, RecordType) and isinstance(t1, RecordType):
        attrs = _attrs_lub(t0.attrs, t1.attrs, strict)
        is_open = t0.open or t1.open or set(attrs) != (set(t0.attrs) | set(t1.attrs))
        return RecordType(attrs, open=is_open)
    if isinstance(t0, EntityType) and isinstance(t1, EntityType):
        n0, n1 = t0.names, t1.names
        if n0 is not None and n1 is not None:
            if strict and n0 != n1:
                raise LubError(HINT_ENTITY)
            return EntityType(n0 | n1)
        if n0 is None and n1 is None:
            return ANY_ENTITY
        if strict:
            raise LubError(HINT_ENTITY)
        return ANY_ENTITY
    if {type(t0), type(t1)} == {EntityType, RecordType}:
        raise LubError(HINT_ENTITY_RECORD)
    raise LubError(HINT_NONE)


def _attrs_lub(
    a0: Mapping[str, AttrType], a1: Mapping[str, AttrType], strict: bool
) -> dict[str, AttrType]:
    if strict and a0.keys() != a1.keys():
        raise LubError(HINT_WIDTH)
    out: dict[str, AttrType] = {}
    for k, at0 in a0.items():
        at1 = a1.get(k)
        if at1 is None:
            continue  # permissive: drop attributes that are not common
        try:
            t = lub(at0.type, at1.type, strict)
        except LubError:
            if strict:
                raise
            continue
        if strict and at0.required != at1.required:
            raise LubError(HINT_QUALIFIER)
        out[k] = AttrType(t, at0.required and at1.required)
    return out


def lub_all(types: Iterable[Type], strict: bool = True) -> Type:
    """Fold :func:`lub` over ``types``, starting from the bottom type."""
    out: Type = NEVER
    for t in types:
        out = lub(out, t, strict)
    return out


def are_disjoint(t0: Type, t1: Type) -> bool:
    """True only when no value has both types (conservative: entities only)."""
    if type(t0) is EntityType and type(t1) is EntityType:
        n0, n1 = t0.names, t1.names
        if n0 is not None and n1 is not None:
            return n0.isdisjoint(n1)
    return False


# ---------------------------------------------------------------- from the schema model

_EXT_TYPES = {"decimal": DECIMAL, "ipaddr": IPADDR, "datetime": DATETIME, "duration": DURATION}


def from_schema(t: sm.SchemaType) -> Type:
    """Convert a (fully-resolved) schema type to a validator type."""
    if isinstance(t, sm.PrimType):
        return {"Long": LONG, "String": STRING, "Bool": BOOL}[t.name]
    if isinstance(t, sm.ExtensionType):
        return _EXT_TYPES.get(t.name) or ExtType(t.name)
    if isinstance(t, sm.EntityRefType):
        return entity(t.name)
    if isinstance(t, sm.SetType):
        return SetType(from_schema(t.element))
    if isinstance(t, sm.RecordType):
        return record_from_schema(t)
    raise TypeError(f"not a schema type: {t!r}")


def record_from_schema(t: sm.RecordType) -> RecordType:
    return RecordType(
        {k: AttrType(from_schema(a.type), a.required) for k, a in t.attributes.items()},
        open=t.additional,
    )
