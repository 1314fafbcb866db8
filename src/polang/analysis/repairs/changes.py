"""Requirements -> concrete changes to the request's data, one value per place."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.analysis.trace import hierarchy_path
from polang.datalog.facts import EntityFacts, Request
from polang.language.entities import Entity, EntityStore
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
)

from .boundaries import _entities_of_type
from .requirements import Alt, _Place, _Req, _vk
from .results import _MISSING, _VALUE_CHANGES, MAX_REPAIR_SIZE, Change

if TYPE_CHECKING:
    from polang.language.schema import Schema, SchemaType


# ======================================================================== changes


class _World:
    """A request over entity facts, with changes applied."""

    def __init__(self, request: Request, facts: EntityFacts) -> None:
        self.request = request
        self.facts = facts


def _sample(t: SchemaType | None, facts: EntityFacts) -> Any:
    from polang.language import schema as sch
    from polang.language.extensions.datetime import parse_datetime
    from polang.language.extensions.decimal import parse_decimal
    from polang.language.extensions.duration import parse_duration
    from polang.language.extensions.ipaddr import parse_ipaddr

    if t is None:
        return True
    if isinstance(t, sch.PrimType):
        return {"Long": 0, "String": "", "Bool": True}.get(t.name, True)
    if isinstance(t, sch.ExtensionType):
        return {
            "decimal": lambda: parse_decimal("0.0"),
            "ipaddr": lambda: parse_ipaddr("0.0.0.0"),
            "datetime": lambda: parse_datetime("1970-01-01"),
            "duration": lambda: parse_duration("0ms"),
        }[t.name]()
    if isinstance(t, sch.SetType):
        return SetValue()
    if isinstance(t, sch.EntityRefType):
        found = _entities_of_type(facts, t.name)
        return found[0] if found else EntityUID(t.name, "example")
    if isinstance(t, sch.RecordType):
        return RecordValue(
            {k: _sample(a.type, facts) for k, a in t.attributes.items() if a.required}
        )
    return True


def _schema_type(schema: Schema | None, place: _Place, request: Request) -> SchemaType | None:
    """The declared type of a place, when the schema says."""
    if schema is None:
        return None
    from polang.language import schema as sch

    t: Any
    if place.kind == "ctx":
        ad = schema.action(request.action)
        if ad is None:
            return None
        t = ad.context
        path = place.path
    elif place.kind in ("attr", "tag"):
        assert place.entity is not None
        et = schema.entity_type(place.entity.type)
        if et is None:
            return None
        if place.kind == "tag":
            t = et.tags
            path = place.path[1:]
        else:
            t = et.shape
            path = place.path
    else:
        return None
    for key in path:
        if not isinstance(t, sch.RecordType):
            return None
        a = t.attributes.get(key)
        if a is None:
            return None
        t = a.type
    return t


def _fits(t: SchemaType | None, v: Any) -> bool:
    """Whether a value has the declared type (light: shapes and entity types)."""
    if t is None:
        return True
    from polang.language import schema as sch
    from polang.language.extensions import EXTENSION_CLASSES

    if isinstance(t, sch.PrimType):
        want = {"Long": int, "String": str, "Bool": bool}.get(t.name)
        return want is None or type(v) is want
    if isinstance(t, sch.ExtensionType):
        return type(v) is EXTENSION_CLASSES.get(t.name, type(v))
    if isinstance(t, sch.EntityRefType):
        return type(v) is EntityUID and v.type == t.name
    if isinstance(t, sch.SetType):
        return type(v) is SetValue and all(_fits(t.element, x) for x in v)
    if isinstance(t, sch.RecordType):
        return type(v) is RecordValue
    return True


def _get_path(value: Any, path: Sequence[str]) -> Any:
    for k in path:
        if type(value) is not RecordValue or k not in value.fields:
            return _MISSING
        value = value.fields[k]
    return value


def _set_path(value: Any, path: Sequence[str], new: Any) -> Any:
    """``value`` (a record, or missing) with ``path`` set to ``new`` (``_MISSING``: removed)."""
    if not path:
        return new
    fields = dict(value.fields) if type(value) is RecordValue else {}
    head = path[0]
    inner = _set_path(fields.get(head, _MISSING), path[1:], new)
    if inner is _MISSING:
        fields.pop(head, None)
    else:
        fields[head] = inner
    return RecordValue(fields)


class _Materializer:
    """Requirements -> concrete changes (several ways for a cut membership)."""

    def __init__(self, world: _World, schema: Schema | None) -> None:
        self.world = world
        self.schema = schema

    def current(self, place: _Place) -> Any:
        facts = self.world.facts
        if place.kind == "ctx":
            return _get_path(self.world.request.context, place.path)
        assert place.entity is not None
        ent = facts.get(place.entity)
        if ent is None:
            return _MISSING
        if place.kind == "attr":
            return _get_path(RecordValue(ent.attrs), place.path)
        return _get_path(RecordValue(ent.tags), place.path)

    def changes(self, alt: Alt) -> list[tuple[Change, ...]]:
        by_place: dict[_Place, list[_Req]] = {}
        for r in alt:
            by_place.setdefault(r.place, []).append(r)
        options: list[list[tuple[Change, ...]]] = []
        for place, reqs in sorted(by_place.items(), key=lambda kv: _place_order(kv[0])):
            opts = (
                self._membership(place, reqs)
                if place.kind == "parent"
                else self._value(place, reqs)
            )
            if not opts:
                return []
            options.append(opts)
        out: list[tuple[Change, ...]] = []
        for combo in itertools.islice(itertools.product(*options), 8):
            merged: list[Change] = []
            for part in combo:
                merged.extend(part)
            cs = tuple(dict.fromkeys(merged))
            if len(cs) <= MAX_REPAIR_SIZE:
                out.append(cs)
        return out

    def _value(self, place: _Place, reqs: list[_Req]) -> list[tuple[Change, ...]]:
        """``[()]`` when the place already satisfies every requirement, ``[]`` when no
        value does, else the one change."""
        ops = {r.op for r in reqs}
        cur = self.current(place)
        if "absent" in ops:
            if ops != {"absent"}:
                return []
            if cur is _MISSING:
                return [()]
            return [(self._change(place, _MISSING, "absent"),)]
        tests = [r.test for r in reqs if r.op == "value" and r.test is not None]
        if cur is not _MISSING and all(t(cur) for t in tests):
            return [()]
        declared = _schema_type(self.schema, place, self.world.request)
        cands: list[Any] = []
        texts = [r.constraint for r in reqs if r.op == "value"]
        for r in reqs:
            cands.extend(r.candidates)
        if not tests:  # only `has`: any value will do; the declared type's simplest
            cands = [_sample(declared, self.world.facts)]
            texts = ["has"]
        for c in cands:
            if all(t(c) for t in tests) and _fits(declared, c):
                return [(self._change(place, c, " && ".join(dict.fromkeys(texts))),)]
        return []

    def _change(self, place: _Place, value: Any, constraint: str) -> Change:
        remove = value is _MISSING
        if place.kind == "ctx":
            return Change(
                "remove_context" if remove else "set_context",
                path=place.path,
                value=None if remove else value,
                value_key=None if remove else _vk(value),
                constraint=constraint,
            )
        assert place.entity is not None
        ent = self.world.facts.get(place.entity)
        head, rest = place.path[0], place.path[1:]
        tag = place.kind == "tag"
        values = (ent.tags if tag else ent.attrs) if ent is not None else {}
        old = values.get(head, _MISSING)
        new = _set_path(old, rest, value) if rest else value
        remove = new is _MISSING
        return Change(
            _VALUE_CHANGES[tag][remove],
            place.entity,
            tag=head if tag else None,
            attribute=None if tag else head,
            path=rest,
            value=None if remove else new,
            value_key=None if remove else _vk(new),
            constraint=constraint,
        )

    def _membership(self, place: _Place, reqs: list[_Req]) -> list[tuple[Change, ...]]:

        ops = {r.op for r in reqs}
        facts = self.world.facts
        x = place.entity
        assert x is not None
        if ops == {"add"}:
            (g,) = tuple(place.groups)
            if facts.is_in(x, g):
                return [()]
            return [
                (
                    Change(
                        "add_parent",
                        x,
                        parent=g,
                        constraint=f"in {g}",
                        membership=(x, g),
                    ),
                )
            ]
        if ops != {"remove"}:
            return []
        if not any(facts.is_in(x, g) for g in place.groups):
            return [()]
        cuts = _cuts(facts, x, place.groups)
        out: list[tuple[Change, ...]] = []
        for cut in cuts:
            changes = []
            for child, parent in cut:
                path: tuple[EntityUID, ...] = ()
                for g in sorted(place.groups):
                    p1 = hierarchy_path(facts, x, child)
                    p2 = hierarchy_path(facts, parent, g)
                    if p1 is not None and p2 is not None:
                        path = (*p1, *p2)
                        break
                changes.append(
                    Change(
                        "remove_parent",
                        child,
                        parent=parent,
                        constraint="not in " + ", ".join(map(str, sorted(place.groups))),
                        membership=path,
                    )
                )
            out.append(tuple(changes))
        return out


def _place_order(p: _Place) -> tuple[Any, ...]:
    return (p.kind, str(p.entity), p.path, sorted(map(str, p.groups)))


def _cuts(
    facts: EntityFacts, x: EntityUID, groups: frozenset[EntityUID]
) -> list[list[tuple[EntityUID, EntityUID]]]:
    """Ways to cut every membership path from ``x`` to the groups: ``x``'s own edges into
    them, and a minimum edge cut of the paths (when it differs)."""
    import networkx as nx

    def reaches(u: EntityUID) -> bool:
        return any(facts.is_in(u, g) for g in groups)

    region: set[EntityUID] = set()
    edges: list[tuple[EntityUID, EntityUID]] = []
    stack = [x]
    region.add(x)
    while stack and len(region) < 10000:
        u = stack.pop()
        ent = facts.get(u)
        if ent is None or u in groups:
            continue
        for p in sorted(ent.parents):
            if reaches(p):
                edges.append((u, p))
                if p not in region:
                    region.add(p)
                    stack.append(p)
    own = [(c, p) for c, p in edges if c == x]
    out: list[list[tuple[EntityUID, EntityUID]]] = []
    if own and len(own) <= MAX_REPAIR_SIZE:
        out.append(own)
    g: nx.DiGraph = nx.DiGraph()
    g.add_edges_from(edges)
    sink = ("\0sink", "")
    for t in groups:
        if t in g:
            g.add_edge(t, sink)
    if x in g and sink in g:
        try:
            cut = nx.minimum_edge_cut(g, x, sink)
        except (nx.NetworkXError, nx.NetworkXUnbounded):  # pragma: no cover
            cut = set()
        if cut and all(e[1] != sink for e in cut):
            ordered = sorted(cut, key=lambda e: (str(e[0]), str(e[1])))
            if sorted(ordered) != sorted(own) and len(ordered) <= MAX_REPAIR_SIZE:
                out.append(ordered)
    return out


def apply_changes(
    request: Request, facts: EntityFacts, changes: Iterable[Change]
) -> tuple[Request, EntityFacts]:
    """The request and facts with the changes made (new objects; the inputs are kept)."""
    ctx = request.context
    ents: dict[EntityUID, Entity] = {}

    def entity(uid: EntityUID) -> Entity:
        e = ents.get(uid)
        if e is None:
            old = facts.get(uid)
            e = (
                Entity(uid, dict(old.attrs), set(old.parents), dict(old.tags))
                if old is not None
                else Entity(uid)
            )
            ents[uid] = e
        return e

    for c in changes:
        k = c.kind
        if k == "set_context":
            ctx = _set_path(ctx, c.path, c.value)
        elif k == "remove_context":
            ctx = _set_path(ctx, c.path, _MISSING)
        elif c.entity is not None:
            e = entity(c.entity)
            if k == "set_attribute" and c.attribute is not None:
                e.attrs[c.attribute] = c.value
            elif k == "remove_attribute" and c.attribute is not None:
                e.attrs.pop(c.attribute, None)
            elif k == "set_tag" and c.tag is not None:
                e.tags[c.tag] = c.value
            elif k == "remove_tag" and c.tag is not None:
                e.tags.pop(c.tag, None)
            elif k == "add_parent" and c.parent is not None:
                e.parents.add(c.parent)
            elif k == "remove_parent" and c.parent is not None:
                e.parents.discard(c.parent)
    if type(ctx) is not RecordValue:  # pragma: no cover - paths start at the record
        ctx = RecordValue()
    new_request = Request(request.principal, request.action, request.resource, ctx)
    return new_request, changed_facts(facts, list(ents.values()))


SMALL_STORE = 2000
"""Below this many entities a membership change rebuilds the closure (cheap and simple)."""


class _Own(dict[Any, Any]):
    __slots__ = ("base",)

    def __init__(self, own: Mapping[Any, Any], base: Callable[[Any], Any]) -> None:
        super().__init__(own)
        self.base = base

    def __missing__(self, key: Any) -> Any:
        return self.base(key)


class _PatchedFacts(EntityFacts):
    """Entity facts with a few entities replaced, memberships included, over a base.

    ``EntityFacts.with_entities`` rebuilds the whole closure when a replaced entity's
    parents change (0.3 s at 10,000 entities); a repair search decides many such
    variants, so only the closures that can change are recomputed here: those of the
    changed entities and of the entities below them. Every public member of
    ``EntityFacts`` is provided here from the base's public members (the base class's
    own fields are never set, so its internals may change freely).
    """

    __slots__ = (
        "_p_anc",
        "_p_ancestors",
        "_p_base",
        "_p_entities",
        "_p_get",
        "_p_graph",
        "_p_overlay",
        "_p_own",
    )  # fmt: skip

    def __init__(  # EntityFacts.__init__ is not called: see the class docstring
        self,
        base: EntityFacts,
        overlay: dict[EntityUID, Entity],
        own: dict[EntityUID, frozenset[EntityUID]],
    ) -> None:
        self._p_base = base
        self._p_overlay = overlay
        self._p_own = own
        self._p_get = _Own(overlay, base.get).__getitem__
        self._p_anc = _Own(own, base.ancestors_of).__getitem__
        self._p_entities: EntityStore | None = None
        self._p_ancestors: dict[EntityUID, frozenset[EntityUID]] | None = None
        self._p_graph: Any = None

    @property  # type: ignore[override,misc,unused-ignore]
    def get(self) -> Callable[[EntityUID], Entity | None]:  # type: ignore[override,misc,unused-ignore]
        return self._p_get

    @property  # type: ignore[override,misc,unused-ignore]
    def ancestors_of(self) -> Callable[[EntityUID], frozenset[EntityUID]]:  # type: ignore[override,misc,unused-ignore]
        return self._p_anc

    @property
    def entities(self) -> EntityStore:
        if self._p_entities is None:
            self._p_entities = self._p_base.entities.merged(self._p_overlay.values())
        return self._p_entities

    @property
    def ancestors(self) -> dict[EntityUID, frozenset[EntityUID]]:
        if self._p_ancestors is None:
            merged = dict(self._p_base.ancestors)
            merged.update(self._p_own)
            self._p_ancestors = merged
        return self._p_ancestors

    @property  # type: ignore[override,misc,unused-ignore]
    def graph(self) -> Any:  # type: ignore[override,misc,unused-ignore]
        if self._p_graph is None:
            from polang.datalog.facts import hierarchy_graph

            self._p_graph = hierarchy_graph(self.entities)
        return self._p_graph

    def is_in(self, a: EntityUID, b: EntityUID) -> bool:
        return a == b or b in self._p_anc(a)

    def with_entities(self, extra: Iterable[Entity]) -> EntityFacts:
        extra = list(extra)
        return EntityFacts(self.entities.merged(extra)) if extra else self

    def parent_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            for p in e.parents:
                yield (e.uid, p)

    def in_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            yield (e.uid, e.uid)
            for a in self._p_anc(e.uid):
                yield (e.uid, a)


def changed_facts(facts: EntityFacts, changed: list[Entity]) -> EntityFacts:
    """``facts`` with ``changed`` laid over them (the same facts a full rebuild gives)."""
    if not changed:
        return facts
    # entities whose parents change (a new entity with parents counts: stored entities
    # may name it as their parent)
    moved = {
        e.uid
        for e in changed
        if ((old := facts.get(e.uid)) is not None and old.parents != e.parents)
        or (old is None and e.parents)
    }
    if not moved:
        return facts.with_entities(changed)
    if len(facts.entities) <= SMALL_STORE:
        return EntityFacts(facts.entities.merged(changed))
    overlay = {e.uid: e for e in changed}
    get = facts.get
    base_anc = facts.ancestors_of
    # the entities whose closure may change: the moved ones, the new ones, and all below
    affected = {u for u in overlay if get(u) is None} | moved
    for e in facts.entities:
        if e.uid not in affected and not base_anc(e.uid).isdisjoint(moved):
            affected.add(e.uid)

    def parents(u: EntityUID) -> Iterable[EntityUID]:
        ent = overlay.get(u) or get(u)
        return ent.parents if ent is not None else ()

    own: dict[EntityUID, frozenset[EntityUID]] = {}
    state: dict[EntityUID, int] = {}
    for start in affected:
        if start in own:
            continue
        stack: list[tuple[EntityUID, bool]] = [(start, False)]
        while stack:
            u, done = stack.pop()
            if done:
                acc: set[EntityUID] = set()
                for p in parents(u):
                    acc.add(p)
                    acc |= own[p] if p in affected else base_anc(p)
                acc.discard(u)
                own[u] = frozenset(acc)
                state[u] = 2
                continue
            if state.get(u) == 2:
                continue
            if state.get(u) == 1:  # a cycle through changed memberships: rebuild all
                return EntityFacts(facts.entities.merged(changed))
            state[u] = 1
            stack.append((u, True))
            for p in parents(u):
                if p in affected and state.get(p) != 2:
                    if state.get(p) == 1:
                        return EntityFacts(facts.entities.merged(changed))
                    stack.append((p, False))
    return _PatchedFacts(facts, overlay, own)
