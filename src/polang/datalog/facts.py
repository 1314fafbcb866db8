"""Entities and requests as facts.

The extensional database of a decision:

- ``entity(E)``, ``attr(E, Name, V)``, ``tag(E, Key, V)``: from the entity store;
- ``parent(E, P)`` edges, and their reflexive-transitive closure ``in(E, A)``, computed once
  per entity set (``rules/hierarchy.dl`` states what the closure means): by networkx, which
  is imported only when a store has a hierarchy of more than ``SMALL_HIERARCHY`` entities;
  a smaller one (action groups, a few default entities) is walked directly, and a store
  without parents needs no closure at all;
- ``principal(P)``, ``action(A)``, ``resource(R)``, ``context(C)``: the request.

Backends read these through :class:`EntityFacts` and :class:`Request` instead of copying
them into tuples: the compiled backend looks values up directly, the pydatalog backend
asserts them as facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from polang._record import Record
from polang.errors import EntityError
from polang.language.entities import Entity, EntityStore
from polang.language.hierarchy import MAX_HIERARCHY_DEPTH, check_hierarchy, too_deep_message
from polang.language.values import EntityUID, RecordValue, Value

if TYPE_CHECKING:  # networkx is imported on first use (start-up time)
    import networkx as nx

_EMPTY: frozenset[EntityUID] = frozenset()

SMALL_HIERARCHY = 128
"""Entities with parents up to which the closure is walked directly instead of by networkx
(each one's ancestors by a walk over the parents: at most this many walks). Both give the
same closure; a test compares them."""


class _Closure(dict[EntityUID, frozenset[EntityUID]]):
    """Strict ancestors by uid; a uid it does not hold has none."""

    __slots__ = ()

    def __missing__(self, _uid: EntityUID) -> frozenset[EntityUID]:
        return _EMPTY


def hierarchy_graph(entities: Iterable[Entity]) -> nx.DiGraph:
    """The parent graph: an edge ``child -> parent`` for every declared parent."""
    import networkx as nx

    g: nx.DiGraph = nx.DiGraph()
    for e in entities:
        g.add_node(e.uid)
        for p in e.parents:
            g.add_edge(e.uid, p)
    return g


def ancestor_closure(g: nx.DiGraph) -> dict[EntityUID, frozenset[EntityUID]]:
    """Strict ancestors of every node (cycles allowed: a cycle's members reach each other)."""
    import networkx as nx

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


def walked_closure(
    parents: Mapping[EntityUID, Iterable[EntityUID]],
) -> dict[EntityUID, frozenset[EntityUID]]:
    """Strict ancestors of every entity of ``parents`` (uid -> its parents), by a walk
    from each: the same closure as :func:`ancestor_closure`, for small hierarchies."""
    out = _Closure()
    for uid, ps in parents.items():
        seen: set[EntityUID] = set()
        stack = list(ps)
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            stack.extend(parents.get(p, ()))
        seen.discard(uid)
        out[uid] = frozenset(seen)
    return out


def check_depth(
    starts: Iterable[EntityUID], parents_of: Callable[[EntityUID], Iterable[EntityUID]]
) -> None:
    """``EntityError`` naming the entity and ``MAX_HIERARCHY_DEPTH`` when a chain of
    parents from ``starts`` is deeper than it: checked in linear time before a closure is
    built, since a chain's closure grows with the square of its depth."""
    problem = check_hierarchy(starts, parents_of, cycles=False)
    if problem is not None:
        uid = problem.chain[0]
        raise EntityError(
            f"entity {uid}: " + too_deep_message("entity hierarchy", problem.chain),
            uid=str(uid),
        )


def _check_laid_depth(
    pending: dict[EntityUID, Entity], get: Callable[[EntityUID], Entity | None]
) -> None:
    """:func:`check_depth` for new entities laid over facts (``get`` reads both)."""

    def parents_of(uid: EntityUID) -> Iterable[EntityUID]:
        e = pending.get(uid)
        if e is None:
            e = get(uid)
        return _EMPTY if e is None else e.parents

    check_depth(pending, parents_of)


def closure_of(store: EntityStore) -> dict[EntityUID, frozenset[EntityUID]]:
    """The closure of a store: none without parents, walked when small, else networkx.

    Every entity of the store has an entry (the empty set when it has no parents), so
    looking one up never leaves C (``__missing__`` is for uids the store lacks). A
    hierarchy deeper than ``MAX_HIERARCHY_DEPTH`` is an ``EntityError``."""
    parents = {e.uid: e.parents for e in store if e.parents}
    if len(parents) > MAX_HIERARCHY_DEPTH:  # fewer entities with parents chain no deeper
        check_depth(parents, lambda u: parents.get(u, _EMPTY))
    if not parents:
        out: dict[EntityUID, frozenset[EntityUID]] = _Closure()
    elif len(parents) <= SMALL_HIERARCHY:
        out = walked_closure(parents)
    else:
        out = ancestor_closure(hierarchy_graph(store))
    for uid in store.as_dict():
        if uid not in out:
            out[uid] = _EMPTY
    return out


class _Overlay(dict[Any, Any]):
    """A request's own entries over a base lookup (C-level for its own keys); set
    ``base`` right after making one (no Python ``__init__``: this is per request)."""

    __slots__ = ("base",)

    base: Callable[[Any], Any]

    def __missing__(self, key: Any) -> Any:
        return self.base(key)


def _overlay(own: dict[Any, Any], base: Callable[[Any], Any]) -> Callable[[Any], Any]:
    o = _Overlay(own)
    o.base = base
    return o.__getitem__


_MERGE_LAYERS_UP_TO = 64
"""A layer of at most this many entities is merged into the layer laid over it (a copy per
request), rather than looked through (a Python call per lookup that misses the top)."""


class EntityFacts:
    """An entity set with its hierarchy closure: what every request over it shares.

    ``get(uid)`` and ``ancestors_of(uid)`` are the hot lookups (plain callables, bound
    once). Facts made by :meth:`with_entities` lay a request's few entities *over* their
    base instead of copying it, so a request costs the same over 10 or 10,000 default
    entities; ``entities``, ``ancestors`` and ``graph`` are then merged or built only when
    asked for.
    """

    __slots__ = (
        "_ancestors",
        "_base",
        "_entities",
        "_extra",
        "_graph",
        "_parent_uids",
        "ancestors_of",
        "get",
    )

    def __init__(self, entities: EntityStore | Iterable[Entity]) -> None:
        store = entities if isinstance(entities, EntityStore) else EntityStore(entities)
        self._entities: EntityStore | None = store
        self._base: EntityFacts | None = None
        self._extra: dict[EntityUID, Entity] = {}
        self._graph: nx.DiGraph | None = None
        self._ancestors: dict[EntityUID, frozenset[EntityUID]] | None = closure_of(store)
        self._parent_uids: frozenset[EntityUID] = frozenset(
            p for e in store if e.parents for p in e.parents
        )
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
    def graph(self) -> nx.DiGraph:
        """The networkx parent graph of the base entities (request entities laid over them
        are not in it), built on first use."""
        if self._graph is None:
            if self._base is not None:
                return self._base.graph
            assert self._entities is not None
            self._graph = hierarchy_graph(self._entities)
        return self._graph

    @graph.setter
    def graph(self, g: nx.DiGraph) -> None:
        self._graph = g

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

    def _is_a_parent(self, uid: EntityUID) -> bool:
        """Whether some entity of these facts names ``uid`` as a parent."""
        f: EntityFacts = self
        while f._base is not None:
            for e in f._extra.values():
                if uid in e.parents:
                    return True
            f = f._base
        return uid in f._parent_uids

    def with_entities(self, extra: Iterable[Entity]) -> EntityFacts:
        """These facts with request entities laid over them (request entities win).

        New entities and replacements with the same parents only need the new entities'
        own ancestors (an overlay). Replacing an entity's parents, or giving parents to a
        new entity that other entities already name as their parent, can change other
        entities' closures: that case builds the closure afresh.
        """
        if type(extra) is not list:
            extra = list(extra)
        if not extra:
            return self
        base_get = self.get
        n = len(extra)
        if n <= 2:  # a resource and a principal: no comprehension (a call in 3.11)
            a = extra[0]
            b = extra[-1]
            if b is a or b.uid == a.uid:
                overlay = {b.uid: b}
                old_b = base_get(b.uid)
                if (old_b is None and not b.parents) or (
                    old_b is not None and old_b.parents == b.parents
                ):  # one entity, nothing new under the hierarchy: a batch's resource
                    return self._laid(overlay)
            else:
                old_a = base_get(a.uid)
                old_b = base_get(b.uid)
                if (
                    old_a is not None
                    and old_b is not None
                    and old_a.parents == a.parents
                    and old_b.parents == b.parents
                ):  # both replace stored entities, keeping their parents: the common case
                    return self._laid({a.uid: a, b.uid: b})
                overlay = {a.uid: a, b.uid: b}
        else:
            overlay = {e.uid: e for e in extra}
        pending: dict[EntityUID, Entity] | None = None  # new entities with parents
        for uid, e in overlay.items():
            old = base_get(uid)
            if old is None:
                if e.parents:
                    if self._is_a_parent(uid):
                        return EntityFacts(self.entities.merged(extra))
                    if pending is None:
                        pending = {}
                    pending[uid] = e
            elif old.parents != e.parents:
                return EntityFacts(self.entities.merged(extra))
        if pending is not None and len(pending) > SMALL_HIERARCHY:
            return EntityFacts(self.entities.merged(extra))  # one closure, not a walk each
        base_anc = self.ancestors_of
        out = _layered(self, overlay, _overlay(overlay, base_get), base_anc)
        if pending is None:
            return out  # nothing new under the hierarchy
        # No base entity names a pending uid as a parent (checked above), so the base's
        # ancestor sets hold none of them: walk the pending ones, take the base's as is.
        own: dict[EntityUID, frozenset[EntityUID]] = {}
        most = 0  # an entity's chain of parents is no longer than its ancestors are many
        for uid, e in pending.items():
            acc: set[EntityUID] = set()
            stack = list(e.parents)
            while stack:
                p = stack.pop()
                if p in acc:
                    continue
                acc.add(p)
                pe = pending.get(p)
                if pe is not None:
                    stack.extend(pe.parents)
                else:
                    acc |= base_anc(p)
            acc.discard(uid)
            own[uid] = frozenset(acc)
            if len(acc) > most:
                most = len(acc)
        if most > MAX_HIERARCHY_DEPTH:  # may be too deep: measured, not bounded
            _check_laid_depth(pending, out.get)
        out.ancestors_of = _overlay(own, base_anc)
        return out

    def _laid(self, overlay: dict[EntityUID, Entity]) -> EntityFacts:
        """Facts with ``overlay`` over these, keeping this closure (the caller checked
        the overlay changes no ancestor set)."""
        below, carried = self._layer_below()
        if carried is not None:
            merged = carried.copy()
            merged.update(overlay)
            overlay = merged
        lookup = _Overlay(overlay)
        lookup.base = below.get
        return _layered(below, overlay, lookup.__getitem__, self.ancestors_of)

    def _layer_below(self) -> tuple[EntityFacts, dict[EntityUID, Entity] | None]:
        """Where a layer laid over these facts goes, and the entities it carries along.

        Over facts that are themselves a small layer (a token set's entities, a batch's
        principal), the two layers' entities are merged into one over the base below:
        a lookup that misses the request's entities then costs one ``__missing__`` call,
        not one per layer (the merged dict is a handful of entities). Otherwise the new
        layer lies over these facts and carries nothing."""
        below = self._base
        if below is not None and len(self._extra) <= _MERGE_LAYERS_UP_TO:
            return below, self._extra
        return self, None

    def slot(self) -> EntitySlot:
        """An :class:`EntitySlot` over these facts (a batch's per-request entity)."""
        return EntitySlot(self)

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


def _layered(
    base: EntityFacts,
    extra: dict[EntityUID, Entity],
    get: Callable[[EntityUID], Entity | None],
    ancestors_of: Callable[[EntityUID], frozenset[EntityUID]],
) -> EntityFacts:
    """Facts of ``extra`` laid over ``base``, with these lookups (no ``__init__``: this
    is per request); what is merged from them is built when asked for."""
    out = EntityFacts.__new__(EntityFacts)
    out._base = base
    out._extra = extra
    out._entities = None
    out._ancestors = None
    out._graph = None
    out.get = get
    out.ancestors_of = ancestors_of
    return out


_ABSENT: Any = object()


class EntitySlot:
    """Facts with room for one request entity at a time: a batch puts each resource in,
    decides over :attr:`facts` and takes it out again, instead of building facts per
    request (the ones :meth:`EntityFacts.with_entities` gives for the same entity).

    Only for readers of ``facts.get`` and ``facts.ancestors_of`` (the compiled backend):
    the layer changes under :attr:`facts`, so nothing derived from it (``entities``,
    ``ancestors``, ``graph``) may be built or kept while it is in use. Private to one
    call: not thread-safe.
    """

    __slots__ = ("_own", "_prev", "_uid", "facts")

    def __init__(self, under: EntityFacts) -> None:
        below, carried = under._layer_below()
        own = _Overlay() if carried is None else _Overlay(carried)
        own.base = below.get
        self.facts = _layered(below, own, own.__getitem__, under.ancestors_of)
        self._own = own
        self._uid: EntityUID | None = None
        self._prev: Any = _ABSENT

    def put(self, entity: Entity) -> bool:
        """Lay ``entity`` over the facts, if that leaves every closure as it is (a new
        entity without parents, or a replacement keeping its parents); else ``False``
        and nothing changes (the caller uses :meth:`EntityFacts.with_entities`)."""
        uid = entity.uid
        own = self._own
        old = own[uid]
        if old is None:
            if entity.parents:
                return False
        elif old.parents != entity.parents:
            return False
        self._prev = own.get(uid, _ABSENT)  # dict.get: the layer's own entry, not below
        own[uid] = entity
        self._uid = uid
        return True

    def take(self) -> None:
        """Take the entity :meth:`put` laid out again (what the layer had comes back)."""
        prev = self._prev
        if prev is _ABSENT:
            del self._own[self._uid]
        else:
            self._own[self._uid] = prev
            self._prev = _ABSENT


class Request(Record):
    """The request facts: ``principal(P)``, ``action(A)``, ``resource(R)``, ``context(C)``.

    ``principal`` may be ``None`` (unsigned requests without a principal, multi-issuer
    requests): then no scope with a principal constraint other than ``principal`` holds,
    and the variable ``principal`` has no value.
    """

    __slots__ = ("action", "context", "principal", "resource")
    _frozen: ClassVar[bool] = False
    principal: EntityUID | None
    action: EntityUID
    resource: EntityUID
    context: RecordValue

    def __init__(
        self,
        principal: EntityUID | None,
        action: EntityUID,
        resource: EntityUID,
        context: RecordValue | None = None,
    ) -> None:
        self.principal = principal
        self.action = action
        self.resource = resource
        self.context = RecordValue() if context is None else context

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
