"""The search: candidates verified by deciding the changed request again, shrunk, ranked."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from polang.analysis.trace import Tracer, program_views
from polang.datalog.facts import EntityFacts, Request
from polang.errors import PolangError
from polang.language.values import (
    RecordValue,
)

from .changes import _Materializer, _World, apply_changes
from .requirements import Alt
from .results import (
    MAX_ALTERNATIVES,
    MAX_DECISIONS,
    MAX_REPAIR_SIZE,
    MAX_REPAIRS,
    Change,
    Repair,
    Repairs,
)
from .walk import _Oracle, _scope_alts, _Walker

if TYPE_CHECKING:
    from polang.language.schema import Schema


# ======================================================================== the search


@dataclass(slots=True)
class _Outcome:
    allow: bool
    reasons: tuple[str, ...]
    applies: frozenset[str]


class _Search:
    def __init__(
        self,
        authorizer: Any,
        request: Request,
        facts: EntityFacts,
        schema: Schema | None,
        max_decisions: int,
    ) -> None:

        self.auth = authorizer
        self.request = request
        self.facts = facts
        self.schema = schema
        self.max_decisions = max_decisions
        self.decisions = 0
        self.truncated = False
        self.maps, self.groups = program_views(authorizer, authorizer.program)
        self.effects = {pid: info.effect for pid, info in authorizer.program.policies.items()}
        self.cache: dict[frozenset[Change], _Outcome] = {}

    # -- deciding -------------------------------------------------------------------------

    def decide(self, changes: tuple[Change, ...]) -> _Outcome | None:
        key = frozenset(changes)
        got = self.cache.get(key)
        if got is not None:
            return got
        if self.decisions >= self.max_decisions:
            self.truncated = True
            return None
        self.decisions += 1
        req, facts = apply_changes(self.request, self.facts, changes)
        raw = self.auth.backend.decide(req, facts, trace=True)
        applies = frozenset(
            o.policy_id for o in raw.outcomes if o.scope and o.error is None and o.value is True
        )
        out = _Outcome(raw.allow, tuple(raw.reasons), applies)
        self.cache[key] = out
        return out

    def world(self, changes: tuple[Change, ...]) -> _World:
        req, facts = apply_changes(self.request, self.facts, changes)
        return _World(req, facts)

    # -- alternatives ---------------------------------------------------------------------

    def policy_alts(self, pid: str, world: _World, goal: bool) -> list[Alt]:
        """Requirements that make policy ``pid`` apply (``goal``) or stop applying."""

        pm = self.maps[pid]
        scope = _scope_alts(pm.policy, world.request, world.facts, goal)
        if scope is None or not pm.exact:
            return []
        if pm.policy is not None and len(pm.clauses) != len(pm.policy.conditions):
            return []
        tracer = Tracer(self.groups, pm, world.request, world.facts)
        walker = _Walker(_Oracle(tracer, pm), world.facts, world.request)
        if goal:
            alts = scope
            for cl in pm.clauses:
                alts = walker.cross(alts, walker.want(cl.body, cl.kind == "when"))
                if not alts:
                    break
        else:
            parts = [scope]
            for cl in pm.clauses:
                parts.append(walker.want(cl.body, cl.kind != "when"))
            alts = walker.union(*parts)
        if walker.truncated:
            self.truncated = True
        return alts

    # -- the loop --------------------------------------------------------------------------

    def run(self, limit: int) -> Repairs:
        base = self.decide(())
        assert base is not None
        goal: Literal["allow", "deny"] = "deny" if base.allow else "allow"
        heap: list[tuple[int, int, tuple[Change, ...], str, bool]] = []
        seen: set[frozenset[Change]] = set()
        counter = itertools.count()
        root = _World(self.request, self.facts)
        mat = _Materializer(root, self.schema)

        def push(changes: tuple[Change, ...], pid: str, makes_apply: bool) -> None:
            key = frozenset(changes)
            if key in seen or len(changes) > MAX_REPAIR_SIZE:
                return
            seen.add(key)
            heapq.heappush(heap, (len(changes), next(counter), changes, pid, makes_apply))

        def seed(pid: str, alts: list[Alt], makes_apply: bool, m: _Materializer) -> None:
            for alt in alts:
                for cs in m.changes(alt):
                    push(cs, pid, makes_apply)

        # targets: for an allow, forbids to make apply and the permits to stop; for a
        # deny, the permits to make apply (and, when forbids deny, those to stop)
        if goal == "allow":
            for pid, eff in self.effects.items():
                if eff == "permit":
                    seed(pid, self.policy_alts(pid, root, True), True, mat)
        else:
            for pid, eff in self.effects.items():
                if eff == "forbid":
                    seed(pid, self.policy_alts(pid, root, True), True, mat)
            permits = [p for p in base.applies if self.effects.get(p) == "permit"]
            self._stop_all(sorted(permits), (), push)

        found: list[Repair] = []
        while heap:
            _n, _i, changes, pid, makes_apply = heapq.heappop(heap)
            out = self.decide(changes)
            if out is None:
                break
            if out.allow == (goal == "allow"):
                found.append(self._repair(base, out, changes, pid, makes_apply))
                continue
            # blocked: a forbid still applies (allow wanted) or a permit still does
            if goal == "allow" and pid in out.applies:
                blockers = sorted(p for p in out.applies if self.effects.get(p) == "forbid")
            elif goal == "deny" and not makes_apply:
                blockers = sorted(p for p in out.applies if self.effects.get(p) == "permit")
            else:
                continue
            if blockers and len(changes) < MAX_REPAIR_SIZE:
                self._stop_all(blockers, changes, push, pid=pid, makes_apply=makes_apply)
        found = self._shrink(base, found, goal)
        found = _minimal(found)
        found.sort(key=_rank)
        return Repairs(
            found[:limit],
            goal=goal,
            limit=limit,
            more=len(found) > limit,
            complete=not self.truncated,
            decisions=self.decisions,
        )

    def _stop_all(
        self,
        pids: list[str],
        changes: tuple[Change, ...],
        push: Callable[[tuple[Change, ...], str, bool], None],
        *,
        pid: str | None = None,
        makes_apply: bool = False,
    ) -> None:
        """Candidates that stop every policy of ``pids`` in the world ``changes`` made."""
        if not pids:
            return
        world = self.world(changes)
        mat = _Materializer(world, self.schema)
        combos: list[tuple[Change, ...]] = [changes]
        for p in pids:
            alts = self.policy_alts(p, world, False)
            nxt: list[tuple[Change, ...]] = []
            for alt in alts:
                for cs in mat.changes(alt):
                    for base in combos:
                        merged = _merge(base, cs)
                        if merged is not None and len(merged) <= MAX_REPAIR_SIZE:
                            nxt.append(merged)
            if len(nxt) > MAX_ALTERNATIVES:
                self.truncated = True
                nxt.sort(key=len)
                nxt = nxt[:MAX_ALTERNATIVES]
            combos = nxt
            if not combos:
                return
        for cs in combos:
            push(cs, pid if pid is not None else pids[0], makes_apply)

    def _repair(
        self,
        base: _Outcome,
        out: _Outcome,
        changes: tuple[Change, ...],
        pid: str,
        makes_apply: bool,
    ) -> Repair:
        """Named from the verified decision, not from the search's intent: the policies
        that newly apply, else those of the other effect that stopped applying."""
        verdict: Literal["allow", "deny"] = "allow" if out.allow else "deny"
        newly = sorted(p for p in out.reasons if p not in base.applies)
        if newly:
            name = pid if pid in newly else newly[0]
            return Repair(
                name,
                "applies",
                changes,
                verdict,
                tuple([name, *(p for p in newly if p != name)]),
                out.reasons,
            )
        blocking = "forbid" if out.allow else "permit"  # what stood in the verdict's way
        stopped = sorted(
            p for p in base.applies if self.effects.get(p) == blocking and p not in out.applies
        )
        if stopped:
            name = stopped[0]
        elif out.allow and out.reasons:
            name = out.reasons[0]
        else:
            name = pid
        return Repair(name, "stops_applying", changes, verdict, tuple(stopped), out.reasons)

    def _shrink(self, base: _Outcome, found: list[Repair], goal: str) -> list[Repair]:
        """Drop every change that is not needed (each drop verified by a decision)."""
        out: list[Repair] = []
        for r in found:
            changes = r.changes
            current = r
            i = 0
            while len(changes) > 1 and i < len(changes):
                fewer = changes[:i] + changes[i + 1 :]
                res = self.decide(fewer)
                if res is not None and res.allow == (goal == "allow"):
                    changes = fewer
                    current = self._repair(base, res, fewer, r.policy, r.outcome == "applies")
                    continue
                i += 1
            out.append(current)
        return out


def _merge(a: tuple[Change, ...], b: tuple[Change, ...]) -> tuple[Change, ...] | None:
    """Two change sets together; ``None`` when they set one place two ways."""
    places = {c.place: c for c in a}
    out = list(a)
    for c in b:
        old = places.get(c.place)
        if old is not None:
            if old != c:
                return None
            continue
        out.append(c)
    return tuple(out)


def _rank(r: Repair) -> tuple[Any, ...]:
    """Smallest first; among equals, setting a value before removing one, changes to the
    request's own entities and context before changes elsewhere."""
    removals = sum(1 for c in r.changes if c.kind.startswith("remove_") and c.parent is None)
    return (r.size, removals, [c.describe() for c in r.changes], r.policy)


def _minimal(found: list[Repair]) -> list[Repair]:
    """Leave out repairs whose changed places include another's (and duplicates)."""
    found = sorted(found, key=_rank)
    kept: list[Repair] = []
    kept_places: list[frozenset[tuple[Any, ...]]] = []
    seen: set[frozenset[Change]] = set()
    for r in found:
        key = frozenset(r.changes)
        if key in seen:
            continue
        places = r.places()
        if any(p <= places for p in kept_places):
            continue
        seen.add(key)
        kept.append(r)
        kept_places.append(places)
    return kept


# ======================================================================== public API


def find_repairs(
    authorizer: Any,
    request: Request,
    facts: EntityFacts,
    *,
    schema: Schema | None = None,
    limit: int = MAX_REPAIRS,
    max_decisions: int = MAX_DECISIONS,
) -> Repairs:
    """The smallest verified changes to the data that flip the decision on ``request``.

    ``authorizer`` decides (its backend verifies every repair); ``schema``, when given,
    keeps values of the declared types and picks the sample value of an added attribute.
    """
    if limit < 0 or max_decisions < 1:
        raise PolangError("repairs: limit must be >= 0 and max_decisions >= 1")
    return _Search(authorizer, request, facts, schema, max_decisions).run(limit)


def repairs(
    engine: Any,
    action: Any,
    resource: Any,
    context: Mapping[str, Any] | RecordValue | None = None,
    principal: Any = None,
    *,
    tokens: Any = None,
    limit: int = MAX_REPAIRS,
    max_decisions: int = MAX_DECISIONS,
) -> Repairs:
    """Repairs for a request given as ``engine.explain`` takes it (with the store's schema)."""
    ex = engine.explain(action, resource, context, principal, tokens=tokens)
    return ex.find_repairs(schema=engine.schema, limit=limit, max_decisions=max_decisions)


__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_DECISIONS",
    "MAX_REPAIRS",
    "MAX_REPAIR_SIZE",
    "Change",
    "Repair",
    "Repairs",
    "apply_changes",
    "find_repairs",
    "repairs",
]
