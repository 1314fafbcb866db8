"""Entities as data: an ``Entity`` record and the ``EntityStore`` that holds them by uid.

Below the schema (which makes the action entities) and the entity-JSON reader
(:mod:`polang.language.entities`, which re-exports both).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

from polang._record import Record
from polang.language.values import EntityUID, Value


class Entity(Record):
    """An entity: its uid, attributes, parents and tags (mutable: stores build them up)."""

    __slots__ = ("attrs", "parents", "tags", "uid")
    _frozen: ClassVar[bool] = False
    uid: EntityUID
    attrs: dict[str, Value]
    parents: set[EntityUID]
    tags: dict[str, Value]

    def __init__(
        self,
        uid: EntityUID,
        attrs: dict[str, Value] | None = None,
        parents: set[EntityUID] | None = None,
        tags: dict[str, Value] | None = None,
    ) -> None:
        self.uid = uid
        self.attrs = {} if attrs is None else attrs
        self.parents = set() if parents is None else parents
        self.tags = {} if tags is None else tags


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

    def as_dict(self) -> dict[EntityUID, Entity]:
        """The uid -> entity mapping itself (read-only by convention: hot lookups)."""
        return self._by_uid

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
