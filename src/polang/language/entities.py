"""Entities: the data a request is decided on.

The model (``Entity``, ``EntityStore``) lives here with the entity-JSON parser, because
every producer of entities (entity files, default entities, token entities, callers)
ends in the same model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from polang.language.values import EntityUID, Value


@dataclass(slots=True)
class Entity:
    uid: EntityUID
    attrs: dict[str, Value] = field(default_factory=dict)
    parents: set[EntityUID] = field(default_factory=set)
    tags: dict[str, Value] = field(default_factory=dict)


class EntityStore:
    """Entities by uid. Later additions replace earlier ones with the same uid."""

    __slots__ = ("_by_uid",)

    def __init__(self, entities: Iterable[Entity] = ()) -> None:
        self._by_uid: dict[EntityUID, Entity] = {}
        for e in entities:
            self._by_uid[e.uid] = e

    def add(self, entity: Entity) -> None:
        self._by_uid[entity.uid] = entity

    def get(self, uid: EntityUID) -> Entity | None:
        return self._by_uid.get(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._by_uid.values())

    def __len__(self) -> int:
        return len(self._by_uid)

    def merged(self, overrides: Iterable[Entity]) -> EntityStore:
        """A new store: these entities over this one's (request entities win over defaults)."""
        out = EntityStore()
        out._by_uid = dict(self._by_uid)
        for e in overrides:
            out._by_uid[e.uid] = e
        return out
