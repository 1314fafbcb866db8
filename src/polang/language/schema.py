"""The schema model: one set of classes for both schema forms.

Parsers (human-readable ``.polangschema`` and JSON ``polang-json``) resolve every common
type and every relative name, so consumers (validator, entity parser, stores) only ever
see fully-qualified entity type names and concrete types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from polang.language.values import EntityUID

# ---------------------------------------------------------------- types

PrimName = Literal["Long", "String", "Bool"]
ExtName = Literal["decimal", "ipaddr", "datetime", "duration"]


@dataclass(frozen=True, slots=True)
class PrimType:
    name: PrimName

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ExtensionType:
    name: ExtName

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class EntityRefType:
    """A reference to an entity of the (fully-qualified) type ``name``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class SetType:
    element: SchemaType

    def __str__(self) -> str:
        return f"Set<{self.element}>"


@dataclass(frozen=True, slots=True)
class Attribute:
    type: SchemaType
    required: bool = True
    annotations: tuple[tuple[str, str | None], ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class RecordType:
    """``additional`` mirrors JSON's ``additionalAttributes`` (open records)."""

    attributes: dict[str, Attribute] = field(default_factory=dict)
    additional: bool = False

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.attributes)), self.additional))

    def __str__(self) -> str:
        inner = ", ".join(
            f"{k}{'' if a.required else '?'}: {a.type}" for k, a in self.attributes.items()
        )
        return "{" + inner + "}"


SchemaType = Union[PrimType, ExtensionType, EntityRefType, SetType, RecordType]

LONG = PrimType("Long")
STRING = PrimType("String")
BOOL = PrimType("Bool")


# ---------------------------------------------------------------- declarations


@dataclass(slots=True)
class EntityTypeDef:
    """An entity type. ``enum`` lists the only allowed ids of an enumerated type."""

    name: str
    member_of: tuple[str, ...] = ()
    shape: RecordType = field(default_factory=RecordType)
    tags: SchemaType | None = None
    enum: tuple[str, ...] | None = None
    annotations: tuple[tuple[str, str | None], ...] = ()


@dataclass(slots=True)
class ActionDef:
    """An action. ``applies_to`` is false when the schema gives no ``appliesTo``."""

    uid: EntityUID
    member_of: tuple[EntityUID, ...] = ()
    principal_types: tuple[str, ...] = ()
    resource_types: tuple[str, ...] = ()
    context: RecordType = field(default_factory=RecordType)
    applies_to: bool = True
    annotations: tuple[tuple[str, str | None], ...] = ()


@dataclass(slots=True)
class Schema:
    entity_types: dict[str, EntityTypeDef] = field(default_factory=dict)
    actions: dict[EntityUID, ActionDef] = field(default_factory=dict)
    common_types: dict[str, SchemaType] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()

    def action_types(self) -> set[str]:
        return {uid.type for uid in self.actions}

    def is_action_type(self, name: str) -> bool:
        return any(uid.type == name for uid in self.actions)
