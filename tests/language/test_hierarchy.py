"""The hierarchy walk and closure shared by entities, entity types and actions: the depth
limit, cycles, and closures equal to a walk from every node."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from polang.language.hierarchy import (
    MAX_HIERARCHY_DEPTH,
    chain_text,
    check_hierarchy,
    closure,
    too_deep_message,
)


def chain(n: int) -> dict[int, list[int]]:
    """``n`` nodes, each one's parent the next: ``n - 1`` links."""
    return {i: [i + 1] if i + 1 < n else [] for i in range(n)}


def parents_in(graph: dict[int, list[int]]) -> Callable[[int], list[int]]:
    return lambda n: graph.get(n, [])


def test_a_chain_at_the_limit_passes_one_link_more_does_not() -> None:
    at = chain(MAX_HIERARCHY_DEPTH + 1)
    assert check_hierarchy(at, parents_in(at), cycles=True) is None
    past = chain(MAX_HIERARCHY_DEPTH + 2)
    problem = check_hierarchy(past, parents_in(past), cycles=True)
    assert problem is not None and problem.kind == "too_deep"
    assert problem.chain == list(range(MAX_HIERARCHY_DEPTH + 2))  # the child up to the top


def test_a_chain_far_past_the_limit_is_walked_without_recursion() -> None:
    g = chain(200_000)
    problem = check_hierarchy([0], parents_in(g), cycles=False)
    assert problem is not None and problem.kind == "too_deep"
    assert len(problem.chain) == MAX_HIERARCHY_DEPTH + 2


def test_the_depth_is_the_longest_chain_not_the_first_one_walked() -> None:
    # 0 -> 1 (a root) and 0 -> 2 -> 3 -> ... : the long way decides
    g = {0: [1, 2], 1: [], **{i: [i + 1] for i in range(2, MAX_HIERARCHY_DEPTH + 2)}}
    problem = check_hierarchy([0], parents_in(g), cycles=False)
    assert problem is not None and problem.chain[0] == 0


def test_cycles_are_found_or_not_followed() -> None:
    g = {0: [1], 1: [2], 2: [0, 3], 3: []}
    problem = check_hierarchy(g, parents_in(g), cycles=True)
    assert problem is not None and problem.kind == "cycle"
    assert problem.chain == [0, 1, 2, 0]
    assert check_hierarchy(g, parents_in(g), cycles=False) is None
    assert check_hierarchy([5], lambda n: [n], cycles=False) is None  # a member of itself


def test_a_long_cycle_with_cycles_allowed_is_still_bounded() -> None:
    n = MAX_HIERARCHY_DEPTH + 5
    g = {i: [(i + 1) % n] for i in range(n)}
    problem = check_hierarchy(g, parents_in(g), cycles=False)
    assert problem is not None and problem.kind == "too_deep"


def test_messages_name_the_limit_and_stay_short() -> None:
    message = too_deep_message("entity hierarchy", list(range(MAX_HIERARCHY_DEPTH + 2)))
    assert "MAX_HIERARCHY_DEPTH" in message
    assert f"0 is {MAX_HIERARCHY_DEPTH + 1:,} levels below {MAX_HIERARCHY_DEPTH + 1}" in message
    assert len(message) < 300
    assert chain_text([1, 2, 3]) == "1 -> 2 -> 3"


def _reach(start: int, g: dict[int, list[int]]) -> frozenset[int]:
    seen: set[int] = set()
    todo = list(g.get(start, ()))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(g.get(n, ()))
    return frozenset(seen)


@pytest.mark.parametrize("seed", range(40))
def test_the_closure_is_a_walk_from_every_node(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.randint(1, 40)
    g = {i: rnd.sample(range(n + 3), rnd.randint(0, 3)) for i in range(n)}  # cycles too
    got = closure(g, parents_in(g))
    for node in g:
        assert got[node] == _reach(node, g), (seed, node)


def test_a_chain_at_the_limit_closes_and_a_cycle_shares_one_set() -> None:
    g = chain(MAX_HIERARCHY_DEPTH + 1)
    got = closure(g, parents_in(g))
    assert got[0] == frozenset(range(1, MAX_HIERARCHY_DEPTH + 1))
    ring = {0: [1], 1: [2], 2: [0]}
    members = closure(ring, parents_in(ring))
    assert members[0] is members[1] is members[2]  # one set per cycle
    assert members[0] == {0, 1, 2}
