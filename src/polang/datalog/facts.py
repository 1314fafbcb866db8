"""Entities and requests as facts.

The extensional database of a decision:

- ``entity(E)``, ``attr(E, Name, V)``, ``tag(E, Key, V)``: from the entity store;
- ``parent(E, P)`` edges, and their reflexive-transitive closure ``in(E, A)``, computed once
  per entity set with networkx (``rules/hierarchy.dl`` states what the closure means);
- ``principal(P)``, ``action(A)``, ``resource(R)``, ``context(C)``: the request.

Backends read these through :class:`EntityFacts` and :class:`Request` instead of copying
them into tuples: the compiled backend looks values up directly, the pydatalog backend
asserts them as facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from polang.language.entities import Entity, EntityStore
from polang.language.values import EntityUID, RecordValue, Value

_EMPTY: frozenset[EntityUID] = frozenset()


class _Closure(dict[EntityUID, frozenset[EntityUID]]):
    """Strict ancestors by uid; a uid it does not hold has none."""

    __slots__ = ()

    def __missing__(self, _uid: EntityUID) -> frozenset[EntityUID]:
        return _EMPTY


def hierarchy_graph(entities: Iterable[Entity]) -> nx.DiGraph:
    """The parent graph: an edge ``child -> parent`` for every declared parent."""
    g: nx.DiGraph = nx.DiGraph()
    for e in entities:
        g.add_node(e.uid)
        for p in e.parents:
            g.add_edge(e.uid, p)
    return g


def ancestor_closure(g: nx.DiGraph) -> dict[EntityUID, frozenset[EntityUID]]:
    """Strict ancestors of every node (cycles allowed: a cycle's members reach each other)."""
    cond = nx.condensation(g)
    members: dict[int, list[EntityUID]] = {
        n: list(data["members"]) for n, data in cond.nodes(data=True)
    }
    above: dict[int, frozenset[EntityUID]] = {}
    # Parents come after children in a topological order of child->parent edges.
    for n in reversed(list(nx.topological_sort(cond))):
        acc: set[EntityUID] = set()
        for succ in cond.successors(n):
            acc.update(members[succ])
            acc.update(above[succ])
        above[n] = frozenset(acc)
    out: dict[EntityUID, frozenset[EntityUID]] = _Closure()
    mapping = cond.graph["mapping"]
    for uid, n in mapping.items():
        anc = above[n]
        if len(members[n]) > 1:  # inside a cycle: the other members are ancestors too
            anc = anc | frozenset(m for m in members[n] if m != uid)
        out[uid] = anc
    return out


class _Overlay(dict[Any, Any]):
    """A request's own entries over a base lookup (C-level for its own keys)."""

    __slots__ = ("base",)

    def __init__(self, own: dict[Any, Any], base: Callable[[Any], Any]) -> None:
        super().__init__(own)
        self.base = base

    def __missing__(self, key: Any) -> Any:
        return self.base(key)


class EntityFacts:
    """An entity set with its hierarchy closure: what every request over it shares.

    ``get(uid)`` and ``ancestors_of(uid)`` are the hot lookups (plain callables, bound
    once). Facts made by :meth:`with_entities` lay a request's few entities *over* their
    base instead of copying it, so a request costs the same over 10 or 10,000 default
    entities; ``entities`` and ``ancestors`` are then merged only when asked for.
    """

    __slots__ = ("_ancestors", "_base", "_entities", "_extra", "ancestors_of", "get", "graph")

    def __init__(self, entities: EntityStore | Iterable[Entity]) -> None:
        store = entities if isinstance(entities, EntityStore) else EntityStore(entities)
        self._entities: EntityStore | None = store
        self._base: EntityFacts | None = None
        self._extra: dict[EntityUID, Entity] = {}
        self.graph = hierarchy_graph(store)
        self._ancestors: dict[EntityUID, frozenset[EntityUID]] | None = ancestor_closure(self.graph)
        self._bind()

    def _bind(self) -> None:
        assert self._entities is not None and self._ancestors is not None
        self.get: Callable[[EntityUID], Entity | None] = self._entities.as_dict().get
        # a C-level lookup: the closure's __missing__ answers uids it does not hold
        anc = self._ancestors
        if not isinstance(anc, _Closure):
            anc = self._ancestors = _Closure(anc)
        self.ancestors_of: Callable[[EntityUID], frozenset[EntityUID]] = anc.__getitem__

    @property
    def entities(self) -> EntityStore:
        if self._entities is None:
            assert self._base is not None
            self._entities = self._base.entities.merged(self._extra.values())
        return self._entities

    @property
    def ancestors(self) -> dict[EntityUID, frozenset[EntityUID]]:
        """Strict ancestors by uid (entities with none may be absent)."""
        if self._ancestors is None:
            assert self._base is not None
            merged = dict(self._base.ancestors)
            for uid in self._extra:
                merged[uid] = self.ancestors_of(uid)
            self._ancestors = merged
        return self._ancestors

    def is_in(self, a: EntityUID, b: EntityUID) -> bool:
        """``in(a, b)``: reflexive, transitive membership."""
        return a == b or b in self.ancestors_of(a)

    def with_entities(self, extra: Iterable[Entity]) -> EntityFacts:
        """These facts with request entities laid over them (request entities win).

        New entities and replacements with the same parents only need the new entities'
        own ancestors (an overlay); replacing an entity's parents can change its
        descendants' closures, so that case builds the closure afresh.
        """
        extra = list(extra)
        if not extra:
            return self
        base_get = self.get
        for e in extra:
            old = base_get(e.uid)
            if old is not None and old.parents != e.parents:
                return EntityFacts(self.entities.merged(extra))
        overlay = {e.uid: e for e in extra}
        base_anc = self.ancestors_of
        own: dict[EntityUID, frozenset[EntityUID]] = {}
        pending = {uid: e for uid, e in overlay.items() if base_get(uid) is None}

        def resolve(uid: EntityUID, seen: frozenset[EntityUID]) -> frozenset[EntityUID]:
            if uid in own:
                return own[uid]
            e = pending.get(uid)
            if e is None:
                return base_anc(uid)
            acc: set[EntityUID] = set()
            for p in e.parents:
                acc.add(p)
                if p not in seen:
                    acc |= resolve(p, seen | {uid})
            result = frozenset(acc - {uid}) if uid not in acc else frozenset(acc)
            own[uid] = result
            return result

        for uid in pending:
            resolve(uid, frozenset())
        out = EntityFacts.__new__(EntityFacts)
        out._base = self
        out._extra = overlay
        out._entities = None
        out._ancestors = None
        out.graph = self.graph
        out.get = _Overlay(overlay, base_get).__getitem__
        out.ancestors_of = _Overlay(own, base_anc).__getitem__
        return out

    # -- as Datalog facts (pydatalog backend, traces, bulk queries) ---------------------

    def parent_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            for p in e.parents:
                yield (e.uid, p)

    def in_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            yield (e.uid, e.uid)
            for a in self.ancestors_of(e.uid):
                yield (e.uid, a)


@dataclass(slots=True)
class Request:
    """The request facts: ``principal(P)``, ``action(A)``, ``resource(R)``, ``context(C)``.

    ``principal`` may be ``None`` (unsigned requests without a principal, multi-issuer
    requests): then no scope with a principal constraint other than ``principal`` holds,
    and the variable ``principal`` has no value.
    """

    principal: EntityUID | None
    action: EntityUID
    resource: EntityUID
    context: RecordValue = field(default_factory=RecordValue)

    def var(self, name: str) -> Value | None:
        if name == "principal":
            return self.principal
        if name == "action":
            return self.action
        if name == "resource":
            return self.resource
        if name == "context":
            return self.context
        raise KeyError(name)
