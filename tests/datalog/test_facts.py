"""Entity facts: the hierarchy closure and request entities laid over defaults."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.datalog import facts as facts_module
from polang.datalog.facts import (
    SMALL_HIERARCHY,
    EntityFacts,
    ancestor_closure,
    hierarchy_graph,
    walked_closure,
)
from polang.datalog.fixed_rules import fixed_rules
from polang.datalog.seminaive import evaluate
from polang.errors import EntityError
from polang.language.entities import Entity, EntityStore
from polang.language.hierarchy import MAX_HIERARCHY_DEPTH
from polang.language.values import EntityUID


def U(i: int) -> EntityUID:
    return EntityUID("T", str(i))


def test_closure_is_transitive_and_reflexive_for_in() -> None:
    fx = EntityFacts([Entity(U(1), parents={U(2)}), Entity(U(2), parents={U(3)}), Entity(U(3))])
    assert fx.ancestors_of(U(1)) == {U(2), U(3)}
    assert fx.is_in(U(1), U(3)) and fx.is_in(U(1), U(1))
    assert not fx.is_in(U(3), U(1))
    # a parent that is not itself an entity is still an ancestor
    fx = EntityFacts([Entity(U(1), parents={U(9)})])
    assert fx.is_in(U(1), U(9))


def test_cycles_terminate() -> None:
    fx = EntityFacts([Entity(U(1), parents={U(2)}), Entity(U(2), parents={U(1)})])
    assert fx.ancestors_of(U(1)) == {U(2)}
    assert fx.ancestors_of(U(2)) == {U(1)}


def test_request_entities_override_defaults() -> None:
    base = EntityFacts([Entity(U(1), {"a": 1}, {U(2)}), Entity(U(2), parents={U(3)}), Entity(U(3))])
    # a new leaf under an existing entity
    fx = base.with_entities([Entity(U(4), parents={U(1)})])
    assert fx.ancestors_of(U(4)) == {U(1), U(2), U(3)}
    assert base.get(U(4)) is None  # the base is untouched
    # same uid, new attributes, same parents: attributes replaced, closure kept
    fx = base.with_entities([Entity(U(1), {"a": 2}, {U(2)})])
    assert fx.get(U(1)).attrs == {"a": 2}
    assert base.get(U(1)).attrs == {"a": 1}
    # same uid, different parents: descendants see the new hierarchy
    fx = base.with_entities([Entity(U(2))])
    assert fx.ancestors_of(U(1)) == {U(2)}
    # new entities that chain to each other
    fx = base.with_entities([Entity(U(5), parents={U(6)}), Entity(U(6), parents={U(3)})])
    assert fx.ancestors_of(U(5)) == {U(6), U(3)}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20))
def test_closure_matches_the_hierarchy_rules(edges: list[tuple[int, int]]) -> None:
    """networkx's closure equals what rules/hierarchy.dl derives (the rules are the spec)."""
    parents: dict[int, set[EntityUID]] = {i: set() for i in range(8)}
    for a, b in edges:
        parents[a].add(U(b))
    fx = EntityFacts([Entity(U(i), parents=p) for i, p in parents.items()])
    derived = evaluate(
        fixed_rules("hierarchy"),
        {"entity": {(U(i),) for i in range(8)}, "parent": set(fx.parent_facts())},
    )["in"]
    assert derived == set(fx.in_facts())


def test_request_entities_are_an_overlay_not_a_copy() -> None:
    base = EntityFacts([Entity(U(i), {"i": i}, {U(i + 1)}) for i in range(1000)])
    fx = base.with_entities([Entity(U(5000), parents={U(10)})])
    assert fx._entities is None  # nothing merged yet: the request cost does not grow with N
    assert fx.get(U(3)).attrs == {"i": 3}
    assert U(999) in fx.ancestors_of(U(5000))  # through the base closure
    assert len(fx.entities) == 1001  # merged on demand
    assert fx.ancestors[U(5000)] == fx.ancestors_of(U(5000))


def test_a_new_entity_named_as_a_parent_by_stored_ones_extends_their_closure() -> None:
    """A stored entity may name a parent the store lacks; the request supplying that parent
    with parents of its own puts the stored entity under them too."""
    base = EntityFacts([Entity(U(1), parents={U(2)}), Entity(U(3))])
    fx = base.with_entities([Entity(U(2), parents={U(3)})])
    assert fx.ancestors_of(U(1)) == {U(2), U(3)}
    assert fx.ancestors_of(U(2)) == {U(3)}
    # the same through a second layer: the first layer names U(7) as a parent
    layer = base.with_entities([Entity(U(6), parents={U(7)})])
    fx = layer.with_entities([Entity(U(7), parents={U(3)})])
    assert fx.ancestors_of(U(6)) == {U(7), U(3)}
    assert layer.ancestors_of(U(6)) == {U(7)}  # the layer below is untouched


def test_a_layer_laid_over_a_layer_merges_the_two() -> None:
    """A batch's resource over its token layer: one overlay of both over the store (a
    lookup that misses the request's entities is one step), equal to looking through."""
    store = EntityFacts([Entity(U(1), {"s": 1}, {U(2)}), Entity(U(2))])
    tokens = store.with_entities([Entity(U(7), {"t": 1}, {U(1)}), Entity(U(8), {"t": 2})])
    fx = tokens.with_entities([Entity(U(9), {"r": 1})])
    assert fx._base is store and set(fx._extra) == {U(7), U(8), U(9)}
    assert set(tokens._extra) == {U(7), U(8)}  # the layer below is untouched
    for i in (1, 2, 7, 8, 9, 10):
        expected = EntityFacts(
            EntityStore(store.entities).merged(tokens._extra.values()).merged([fx.get(U(9))])
        )
        assert fx.get(U(i)) == expected.get(U(i)), i
        assert fx.ancestors_of(U(i)) == expected.ancestors_of(U(i)), i
    assert fx.ancestors_of(U(7)) == {U(1), U(2)}
    assert len(fx.entities) == 5 and fx._is_a_parent(U(1)) and not fx._is_a_parent(U(9))
    # a resource replacing a token-layer entity (same parents) wins over it
    again = tokens.with_entities([Entity(U(8), {"t": 3})])
    assert again.get(U(8)).attrs == {"t": 3} and tokens.get(U(8)).attrs == {"t": 2}


def test_an_entity_without_parents_shares_the_base_closure() -> None:
    base = EntityFacts([Entity(U(1), parents={U(2)}), Entity(U(2))])
    fx = base.with_entities([Entity(U(9), {"a": 1})])
    assert fx.ancestors_of is base.ancestors_of  # nothing to add: no overlay of the closure
    assert fx.get(U(9)) == Entity(U(9), {"a": 1})
    assert fx.ancestors_of(U(1)) == {U(2)}


def test_a_store_without_a_large_hierarchy_needs_no_networkx_graph() -> None:
    fx = EntityFacts([Entity(U(1), parents={U(2)}), Entity(U(2))])
    assert fx._graph is None  # built only when asked for
    assert set(fx.graph.edges) == {(U(1), U(2))}
    over = fx.with_entities([Entity(U(3), parents={U(1)})])
    assert over.graph is fx.graph  # request entities are not in it


_edges = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 14)), max_size=30)


@settings(max_examples=80, deadline=None)
@given(_edges)
def test_the_walked_closure_equals_networkx(edges: list[tuple[int, int]]) -> None:
    """Small hierarchies are walked, large ones go to networkx: the same closure (cycles and
    parents that are not entities included)."""
    parents: dict[EntityUID, set[EntityUID]] = {}
    for a, b in edges:
        parents.setdefault(U(a), set()).add(U(b))
    store = [Entity(U(i), parents=parents.get(U(i), set())) for i in range(12)]
    by_nx = ancestor_closure(hierarchy_graph(store))
    walked = walked_closure({u: p for u, p in parents.items() if p})
    for i in range(15):
        assert walked[U(i)] == by_nx.get(U(i), frozenset()), i


@settings(max_examples=80, deadline=None)
@given(_edges, _edges, _edges, st.booleans())
def test_layers_equal_a_full_rebuild(
    base_edges: list[tuple[int, int]],
    first: list[tuple[int, int]],
    second: list[tuple[int, int]],
    big: bool,
) -> None:
    """Request entities laid over facts, in one or two layers, give the closure a fresh
    build over the merged entities gives (both closure engines for the base)."""

    def entities(edges: list[tuple[int, int]], ids: range) -> list[Entity]:
        ps: dict[int, set[EntityUID]] = {i: set() for i in ids}
        for a, b in edges:
            if a in ps:
                ps[a].add(U(b))
        return [Entity(U(i), parents=p) for i, p in ps.items()]

    base_entities = entities(base_edges, range(0, 8))
    one = entities(first, range(4, 11))
    two = entities(second, range(6, 13))
    old = facts_module.SMALL_HIERARCHY
    facts_module.SMALL_HIERARCHY = -1 if big else old
    try:
        base = EntityFacts(base_entities)
    finally:
        facts_module.SMALL_HIERARCHY = old
    layered = base.with_entities(one).with_entities(two)
    fresh = EntityFacts(EntityStore(base_entities).merged(one).merged(two))
    for i in range(15):
        assert layered.ancestors_of(U(i)) == fresh.ancestors_of(U(i)), i
        assert layered.get(U(i)) == fresh.get(U(i))


@settings(max_examples=80, deadline=None)
@given(_edges, _edges, st.lists(st.tuples(st.integers(0, 12), st.booleans()), max_size=8))
def test_a_slot_gives_what_with_entities_gives_and_takes_it_back(
    base_edges: list[tuple[int, int]],
    layer_edges: list[tuple[int, int]],
    puts: list[tuple[int, bool]],
) -> None:
    """A batch's resources put in a slot one by one (over a layer, as a principal or a
    token set is): each lookup equals the facts ``with_entities`` builds for the same
    entity, a put that would change a closure is refused, and taking the entity out leaves
    the facts as before (a replaced layer or store entity comes back)."""

    def entities(edges: list[tuple[int, int]], ids: range) -> list[Entity]:
        ps: dict[int, set[EntityUID]] = {i: set() for i in ids}
        for a, b in edges:
            if a in ps:
                ps[a].add(U(b))
        return [Entity(U(i), {"v": i}, parents=p) for i, p in ps.items()]

    base = EntityFacts(entities(base_edges, range(0, 8)))
    layer = base.with_entities(entities(layer_edges, range(6, 10)))
    slot = layer.slot()
    before = {i: (slot.facts.get(U(i)), slot.facts.ancestors_of(U(i))) for i in range(14)}
    for k, (i, with_parent) in enumerate(puts):
        old = layer.get(U(i))
        parents = set(old.parents) if old is not None else set()
        if with_parent:
            parents.add(U((i + 1) % 14))
        e = Entity(U(i), {"put": k}, parents=parents)
        expected = layer.with_entities([e])
        changes_closure = (old is None and bool(parents)) or (
            old is not None and old.parents != parents
        )
        if not slot.put(e):
            assert changes_closure
            continue
        assert not changes_closure
        for j in range(14):
            assert slot.facts.get(U(j)) == expected.get(U(j)), (i, j)
            assert slot.facts.ancestors_of(U(j)) == expected.ancestors_of(U(j)), (i, j)
        slot.take()
        for j in range(14):
            assert (slot.facts.get(U(j)), slot.facts.ancestors_of(U(j))) == before[j], (i, j)


def test_a_slot_over_the_store_itself_and_over_a_large_layer() -> None:
    """Without a layer the slot lies over the store; over a layer too large to merge it
    looks through that layer (both as ``with_entities`` does)."""
    store = EntityFacts([Entity(U(1), {"s": 1}, {U(2)}), Entity(U(2))])
    slot = store.slot()
    assert slot.put(Entity(U(1), {"s": 9}, {U(2)}))
    assert slot.facts.get(U(1)).attrs == {"s": 9} and slot.facts.ancestors_of(U(1)) == {U(2)}
    slot.take()
    assert slot.facts.get(U(1)).attrs == {"s": 1} and store.get(U(1)).attrs == {"s": 1}
    big = facts_module._MERGE_LAYERS_UP_TO + 1
    layer = store.with_entities([Entity(U(100 + i), {"i": i}) for i in range(big)])
    slot = layer.slot()
    assert slot.facts._base is layer
    assert slot.put(Entity(U(100), {"i": -1}))
    assert slot.facts.get(U(100)).attrs == {"i": -1} and slot.facts.get(U(101)).attrs == {"i": 1}
    slot.take()
    assert slot.facts.get(U(100)).attrs == {"i": 0} and slot.facts.get(U(2)) == Entity(U(2))


# ---------------------------------------------------------------- the depth limit


def chain(n: int, start: int = 0, top: EntityUID | None = None) -> list[Entity]:
    """``n`` entities ``U(start)`` up to ``U(start + n - 1)``, each the next one's child;
    the last one's parent is ``top`` if given."""
    out = [Entity(U(i), parents={U(i + 1)}) for i in range(start, start + n - 1)]
    last = U(start + n - 1)
    out.append(Entity(last, parents=set() if top is None else {top}))
    return out


def test_a_hierarchy_deeper_than_the_limit_is_refused_before_its_closure() -> None:
    # a 5,000-deep chain's closure is 12.5 million pairs (1.2 GB in `who_can`)
    for n in (MAX_HIERARCHY_DEPTH + 2, 5000):
        with pytest.raises(EntityError, match="MAX_HIERARCHY_DEPTH") as info:
            EntityFacts(chain(n))
        assert info.value.uid == str(U(n - MAX_HIERARCHY_DEPTH - 2))
        assert f"is {MAX_HIERARCHY_DEPTH + 1:,} levels below" in str(info.value)
    fx = EntityFacts(chain(MAX_HIERARCHY_DEPTH + 1))
    assert len(fx.ancestors_of(U(0))) == MAX_HIERARCHY_DEPTH


def test_entities_laid_over_a_deep_store_stay_within_the_limit() -> None:
    base = EntityFacts(chain(MAX_HIERARCHY_DEPTH + 1, start=1))  # U(1) is at the limit
    with pytest.raises(EntityError, match="MAX_HIERARCHY_DEPTH") as info:
        base.with_entities([Entity(U(0), parents={U(1)})])
    assert info.value.uid == str(U(0))
    below_the_top = base.with_entities([Entity(U(0), parents={U(MAX_HIERARCHY_DEPTH)})])
    assert below_the_top.ancestors_of(U(0)) == {U(MAX_HIERARCHY_DEPTH), U(MAX_HIERARCHY_DEPTH + 1)}
    # many ancestors are not a deep chain: a hub under more parents than the limit
    roots = [Entity(EntityUID("R", str(i))) for i in range(MAX_HIERARCHY_DEPTH + 10)]
    hub = Entity(EntityUID("H", "hub"), parents={r.uid for r in roots})
    wide = EntityFacts([*roots, hub]).with_entities([Entity(U(0), parents={hub.uid})])
    assert len(wide.ancestors_of(U(0))) == MAX_HIERARCHY_DEPTH + 11


def test_many_new_entities_get_one_closure_and_the_same_limit() -> None:
    base = EntityFacts([Entity(U(-1))])
    n = SMALL_HIERARCHY + 50
    laid = base.with_entities(chain(n, top=U(-1)))
    fresh = EntityFacts([Entity(U(-1)), *chain(n, top=U(-1))])
    for i in range(-1, n):
        assert laid.ancestors_of(U(i)) == fresh.ancestors_of(U(i))
    with pytest.raises(EntityError, match="MAX_HIERARCHY_DEPTH"):
        base.with_entities(chain(MAX_HIERARCHY_DEPTH + 1, top=U(-1)))
