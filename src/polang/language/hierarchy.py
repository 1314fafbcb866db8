"""How deep a hierarchy may be: one bound and one walk for entity parents, entity types'
``memberOfTypes`` and action groups.

Every ``in`` is answered from a closure built in full (each entity's ancestor set, each
type's ancestor types, the SQL engines' closure table), and the closure of a chain of
``n`` links holds ``n * n / 2`` pairs: a 5,000-deep chain of entities given to a query
took 1.2 GB, a 10,000-deep ``memberOfTypes`` chain 3 GB at schema load. Real hierarchies
are a few levels deep; :data:`MAX_HIERARCHY_DEPTH` refuses a chain deeper than it before
any closure is built, by :func:`check_hierarchy`, which visits each node and link once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Literal, NamedTuple, TypeVar

MAX_HIERARCHY_DEPTH = 1_000
"""Most parent links between an entity and its farthest ancestor (and between an entity
type, or an action, and its farthest ancestor type or group). At the limit, a chain's
closure is half a million pairs (a fraction of a second); real hierarchies are a few
levels deep (docs/security.md)."""

_N = TypeVar("_N")

_ACTIVE = -1  # a node whose walk has not ended: it is on the current path


class HierarchyProblem(NamedTuple, Generic[_N]):
    """A cycle (``chain`` starts and ends at the same node, each the previous one's
    parent) or a chain deeper than the limit (from the child up to its farthest ancestor,
    ``len(chain) - 1`` links)."""

    kind: Literal["cycle", "too_deep"]
    chain: list[_N]


def check_hierarchy(
    starts: Iterable[_N],
    parents_of: Callable[[_N], Iterable[_N]],
    *,
    cycles: bool,
    limit: int = MAX_HIERARCHY_DEPTH,
) -> HierarchyProblem[_N] | None:
    """The first problem found walking up from ``starts``, or ``None``.

    Each node's height (the links up to its farthest ancestor) is computed once, after
    its parents' (an iterative walk: no recursion however deep). A link back to a node on
    the current path closes a cycle: a problem when ``cycles`` is true, else not followed
    (entity types may be members of themselves)."""
    height: dict[_N, int] = {}
    best: dict[_N, _N] = {}  # the parent a node's height goes through
    for start in starts:
        if start in height:
            continue
        height[start] = _ACTIVE
        path: list[_N] = [start]
        walks: list[Iterator[_N]] = [iter(parents_of(start))]
        while walks:
            for p in walks[-1]:
                h = height.get(p)
                if h is None:
                    height[p] = _ACTIVE
                    path.append(p)
                    walks.append(iter(parents_of(p)))
                    break
                if h == _ACTIVE and cycles:
                    return HierarchyProblem("cycle", [*path[path.index(p) :], p])
            else:
                node = path.pop()
                walks.pop()
                top = 0
                for p in parents_of(node):
                    hp = height[p]
                    if hp >= top:  # _ACTIVE (-1): a cycle's closing link, not followed
                        top = hp + 1
                        best[node] = p
                height[node] = top
                if top > limit:
                    chain = [node]
                    while chain[-1] in best and len(chain) <= top:
                        chain.append(best[chain[-1]])
                    return HierarchyProblem("too_deep", chain)
    return None


def chain_text(chain: list[_N], name: Callable[[_N], str] = str) -> str:
    """``a -> b -> c``, its middle left out when long (a message quotes it)."""
    if len(chain) <= 8:
        return " -> ".join(name(n) for n in chain)
    head = " -> ".join(name(n) for n in chain[:3])
    tail = " -> ".join(name(n) for n in chain[-2:])
    return f"{head} -> ... ({len(chain) - 5:,} more) -> {tail}"


def too_deep_message(what: str, chain: list[_N], name: Callable[[_N], str] = str) -> str:
    """The message of a chain deeper than the limit: names the limit, both ends and the
    chain."""
    return (
        f"the {what} is deeper than the limit of {MAX_HIERARCHY_DEPTH:,} levels "
        f"(MAX_HIERARCHY_DEPTH, docs/security.md): {name(chain[0])} is "
        f"{len(chain) - 1:,} levels below {name(chain[-1])} ({chain_text(chain, name)})"
    )


def closure(
    nodes: Iterable[_N], parents_of: Callable[[_N], Iterable[_N]]
) -> dict[_N, frozenset[_N]]:
    """Everything each node reaches in one or more steps up (a node on a cycle reaches
    itself), for ``nodes`` and every node they reach.

    By strongly connected components (Tarjan's, iterative), parents first: a component's
    set is the union of its parents' sets, made in C and shared by its members, so the
    work is the size of the closure, not a walk per node."""
    index: dict[_N, int] = {}
    low: dict[_N, int] = {}
    stack: list[_N] = []
    on_stack: set[_N] = set()
    out: dict[_N, frozenset[_N]] = {}
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[_N, Iterator[_N]]] = [(root, iter(parents_of(root)))]
        while work:
            node, it = work[-1]
            for p in it:
                if p not in index:
                    index[p] = low[p] = len(index)
                    stack.append(p)
                    on_stack.add(p)
                    work.append((p, iter(parents_of(p))))
                    break
                if p in on_stack and index[p] < low[node]:
                    low[node] = index[p]
            else:
                work.pop()
                if work and low[node] < low[work[-1][0]]:
                    low[work[-1][0]] = low[node]
                if low[node] != index[node]:
                    continue
                members: set[_N] = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    members.add(m)
                    if m == node:
                        break
                acc: set[_N] = set()
                cyclic = len(members) > 1
                for m in members:
                    for p in parents_of(m):
                        if p in members:
                            cyclic = True
                        else:
                            acc.add(p)
                            acc |= out[p]
                if cyclic:
                    acc |= members
                shared = frozenset(acc)
                for m in members:
                    out[m] = shared
    return out
