"""Entity facts: the hierarchy closure and request entities laid over defaults."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from polang.datalog.facts import EntityFacts
from polang.datalog.fixed import fixed_rules
from polang.datalog.seminaive import evaluate
from polang.language.entities import Entity
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
