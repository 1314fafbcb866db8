"""A query's answer: entries (the one row type of every answer), residuals, paging."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from polang.language.values import (
    EntityUID,
)

from .evaluation import _partial_value, _Run, _union
from .program import _EMPTY, PolicyPlan

# ======================================================================== results


@dataclass(frozen=True, slots=True)
class Residual:
    """A policy that may decide an entry, with the conditions the query could not decide.

    ``conditions`` is ``None`` where the answer names the policy only (a SQL engine's
    conditional entry: the conditions stay in the database)."""

    policy_id: str
    effect: str
    conditions: tuple[str, ...] | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy_id": self.policy_id, "effect": self.effect}
        if self.conditions is not None:
            out["conditions"] = list(self.conditions)
        return out


class AccessEntry(NamedTuple):
    """An allowed (or conditionally allowed) request: the one row type of every answer,
    in process and from a SQL engine. A named tuple: a query at scale reads hundreds of
    thousands of them, and a tuple is built in C."""

    principal: EntityUID
    action: EntityUID
    resource: EntityUID
    decision: Literal["allow", "conditional"]
    reasons: tuple[str, ...] = ()
    residuals: tuple[Residual, ...] = ()

    @property
    def triple(self) -> tuple[EntityUID, EntityUID, EntityUID]:
        return (self[0], self[1], self[2])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "principal": self.principal.to_json(),
            "action": self.action.to_json(),
            "resource": self.resource.to_json(),
            "decision": self.decision,
            "reasons": list(self.reasons),
        }
        if self.residuals:
            out["residuals"] = [r.to_dict() for r in self.residuals]
        return out


Part = tuple[PolicyPlan, frozenset[EntityUID] | set[EntityUID]]
Maybe = tuple[PolicyPlan, frozenset[EntityUID] | set[EntityUID], bool, frozenset[EntityUID]]
"""A conditional policy: its entities, whether the fixed entity's scope part is unknown,
and the free entities whose scope part is unknown."""


@dataclass(slots=True)
class _Group:
    """The answer of one step: the free entities allowed / conditional for (action, outer).

    The allowed set is not stored: it is ``union(permit parts) - blocked``, rebuilt when
    read. The parts are mostly sets shared by many steps (a scope's domain, a table's
    true set, a memoised join), so a whole matrix costs little more than its parts.
    """

    action: EntityUID
    outer: EntityUID
    permits: tuple[Part, ...]
    blocked: frozenset[EntityUID] | set[EntityUID]
    conditional: frozenset[EntityUID] | set[EntityUID]
    maybe: tuple[Maybe, ...]
    outer_missing: bool
    count: int = 0

    def allowed(self) -> frozenset[EntityUID] | set[EntityUID]:
        permits = self.permits
        if not permits:
            return _EMPTY
        u = permits[0][1] if len(permits) == 1 else _union(*(s for _p, s in permits))
        return u - self.blocked if self.blocked else u

    def __len__(self) -> int:
        return self.count

    def order(self, rank: Mapping[EntityUID, int]) -> list[EntityUID]:
        allowed = self.allowed()
        items = set(allowed) | set(self.conditional) if self.conditional else allowed
        try:
            return sorted(items, key=rank.__getitem__)
        except KeyError:  # an entity the store does not hold
            return sorted(items)


@dataclass(slots=True)
class QueryStats:
    elapsed_s: float = 0.0
    steps: int = 0
    policies: int = 0
    fallback_evaluations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "elapsed_s": round(self.elapsed_s, 6),
            "steps": self.steps,
            "policies": self.policies,
            "fallback_evaluations": self.fallback_evaluations,
        }


class QueryResult:
    """One page of a query's answer, in order; entries are built as they are read.

    ``complete`` is true when no entry of this page is conditional, i.e. the page is the
    exact answer for the data given. ``next_cursor`` continues after the page (``None``
    on the last page).
    """

    def __init__(
        self,
        kind: str,
        query: dict[str, Any],
        parts: list[tuple[_Group, int]],
        limit: int | None,
        next_cursor: str | None,
        stats: QueryStats,
        run: _Run,
    ) -> None:
        self.kind = kind
        self.query = query
        self._parts = parts
        self.limit = limit
        self.next_cursor = next_cursor
        self.stats = stats
        self._run = run
        self._entries: list[AccessEntry] | None = None
        self._count: int | None = None
        self._index: dict[tuple[EntityUID, EntityUID], tuple[_Group, int, int]] | None = None

    # -- reading -------------------------------------------------------------------------

    def _slices(self) -> Iterator[tuple[_Group, int, int]]:
        remaining = self.limit
        for g, start in self._parts:
            n = len(g) - start
            if n <= 0:
                continue
            if remaining is not None:
                if remaining <= 0:
                    return
                n = min(n, remaining)
                remaining -= n
            yield g, start, start + n

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(stop - start for _g, start, stop in self._slices())
        return self._count

    def iter_entries(self) -> Iterator[AccessEntry]:
        if self._entries is not None:
            yield from self._entries
            return
        for g, start, stop in self._slices():
            yield from _entries(self._run, g, start, stop)

    def __iter__(self) -> Iterator[AccessEntry]:
        return self.iter_entries()

    @property
    def entries(self) -> list[AccessEntry]:
        if self._entries is None:
            self._entries = list(self.iter_entries())
        return self._entries

    def triples(self) -> Iterator[tuple[EntityUID, EntityUID, EntityUID]]:
        """The allowed (principal, action, resource) triples of this page (not conditional)."""
        free = self._run.free
        for g, start, stop in self._slices():
            if g.conditional:
                for e in _entries(self._run, g, start, stop):
                    if e.decision == "allow":
                        yield e.triple
                continue
            for v in g.order(self._run.qi.rank)[start:stop]:
                yield (v, g.action, g.outer) if free == "principal" else (g.outer, g.action, v)

    @property
    def allowed(self) -> list[AccessEntry]:
        return [e for e in self.iter_entries() if e.decision == "allow"]

    @property
    def conditional(self) -> list[AccessEntry]:
        return [e for e in self.iter_entries() if e.decision == "conditional"]

    @property
    def complete(self) -> bool:
        return not any(g.conditional for g, _s, _e in self._slices())

    def lookup(
        self, principal: EntityUID, action: EntityUID, resource: EntityUID
    ) -> Literal["allow", "conditional"] | None:
        """This page's decision on a triple: ``None`` when the page does not list it."""
        if self._index is None:
            self._index = {
                (g.action, g.outer): (g, start, stop) for g, start, stop in self._slices()
            }
        free, fixed = (
            (principal, resource) if self._run.free == "principal" else (resource, principal)
        )
        got = self._index.get((action, fixed))
        if got is None:
            return None
        g, start, stop = got
        partial_group = start > 0 or stop < len(g)
        if partial_group and free not in g.order(self._run.qi.rank)[start:stop]:
            return None
        if free in g.conditional:
            return "conditional"
        return "allow" if free in g.allowed() else None

    @property
    def principals(self) -> list[EntityUID]:
        """``who_can``: the allowed principals, in order."""
        return [e.principal for e in self.iter_entries() if e.decision == "allow"]

    def to_dict(self) -> dict[str, Any]:
        entries = self.entries
        return {
            "kind": self.kind,
            "query": self.query,
            "complete": self.complete,
            "count": len(entries),
            "allowed": sum(1 for e in entries if e.decision == "allow"),
            "conditional": sum(1 for e in entries if e.decision == "conditional"),
            "entries": [e.to_dict() for e in entries],
            "next_cursor": self.next_cursor,
            "stats": self.stats.to_dict(),
        }


def _entries(run: _Run, g: _Group, start: int, stop: int) -> Iterator[AccessEntry]:
    free = run.free
    allowed = g.allowed()
    for v in g.order(run.qi.rank)[start:stop]:
        p, r = (v, g.outer) if free == "principal" else (g.outer, v)
        reasons = tuple(plan.policy_id for plan, s in g.permits if v in s)
        if v in allowed:
            yield AccessEntry(p, g.action, r, "allow", reasons)
            continue
        residuals = tuple(
            Residual(
                plan.policy_id,
                plan.effect,
                _residual(run, g, plan, v, scope_unknown, v in unsure),
            )
            for plan, s, scope_unknown, unsure in g.maybe
            if v in s
        )
        yield AccessEntry(p, g.action, r, "conditional", reasons, residuals)


def _residual(
    run: _Run,
    g: _Group,
    plan: PolicyPlan,
    v: EntityUID,
    outer_scope_unknown: bool,
    free_scope_unknown: bool,
) -> tuple[str, ...]:
    """The parts of a policy the query could not decide for this entry."""
    out: list[str] = []
    if outer_scope_unknown:
        out.append(plan.constraints[run.outer])
    if free_scope_unknown:
        out.append(plan.constraints[run.free])
    pm = plan.pm
    if pm is None or not pm.exact:
        if pm is not None and pm.policy is not None:
            out.extend(f"{c.kind} {{ {_fmt(c.body)} }}" for c in pm.policy.conditions)
        return tuple(out)
    run.begin_action(g.action)
    run.begin_outer(g.outer, g.outer_missing)
    ev = run.partial(v)
    for clause in pm.clauses:
        if _partial_value(ev, clause.pred) is not True:
            out.append(clause.text)
    return tuple(out)


def _fmt(e: Any) -> str:
    from polang.language.format import format_expr

    return format_expr(e)
