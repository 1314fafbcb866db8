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

import networkx as nx

from polang.language.entities import Entity, EntityStore
from polang.language.values import EntityUID, RecordValue, Value

_EMPTY: frozenset[EntityUID] = frozenset()


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
    out: dict[EntityUID, frozenset[EntityUID]] = {}
    mapping = cond.graph["mapping"]
    for uid, n in mapping.items():
        anc = above[n]
        if len(members[n]) > 1:  # inside a cycle: the other members are ancestors too
            anc = anc | frozenset(m for m in members[n] if m != uid)
        out[uid] = anc
    return out


class EntityFacts:
    """An entity set with its hierarchy closure: what every request over it shares."""

    __slots__ = ("ancestors", "by_uid", "entities", "get", "graph")

    def __init__(self, entities: EntityStore | Iterable[Entity]) -> None:
        store = entities if isinstance(entities, EntityStore) else EntityStore(entities)
        self.entities = store
        self._index()
        self.graph = hierarchy_graph(store)
        self.ancestors = ancestor_closure(self.graph)

    def _index(self) -> None:
        """Direct lookups for the hot path: ``get`` is the store's own ``dict.get``."""
        self.by_uid: dict[EntityUID, Entity] = self.entities.as_dict()
        self.get: Callable[[EntityUID], Entity | None] = self.by_uid.get

    def ancestors_of(self, uid: EntityUID) -> frozenset[EntityUID]:
        return self.ancestors.get(uid, _EMPTY)

    def is_in(self, a: EntityUID, b: EntityUID) -> bool:
        """``in(a, b)``: reflexive, transitive membership."""
        return a == b or b in self.ancestors.get(a, _EMPTY)

    def with_entities(self, extra: Iterable[Entity]) -> EntityFacts:
        """These facts with request entities laid over them (request entities win).

        Adding new leaves only needs their own ancestors; replacing an entity's parents
        can change its descendants' closures, so that case recomputes the closure.
        """
        extra = list(extra)
        if not extra:
            return self
        merged = self.entities.merged(extra)
        needs_full = False
        for e in extra:
            old = self.entities.get(e.uid)
            if old is not None and old.parents != e.parents:
                needs_full = True
                break
        out = EntityFacts.__new__(EntityFacts)
        out.entities = merged
        out._index()
        if needs_full:
            out.graph = hierarchy_graph(merged)
            out.ancestors = ancestor_closure(out.graph)
            return out
        out.graph = self.graph
        anc = dict(self.ancestors)
        pending = {e.uid: e for e in extra if self.entities.get(e.uid) is None}

        def resolve(uid: EntityUID, seen: frozenset[EntityUID]) -> frozenset[EntityUID]:
            if uid in anc:
                return anc[uid]
            e = pending.get(uid)
            if e is None:
                return _EMPTY
            acc: set[EntityUID] = set()
            for p in e.parents:
                acc.add(p)
                if p not in seen:
                    acc |= resolve(p, seen | {uid})
            result = frozenset(acc - {uid}) if uid not in acc else frozenset(acc)
            anc[uid] = result
            return result

        for uid in pending:
            resolve(uid, frozenset())
        out.ancestors = anc
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
