"""Driving a query: the steps of who_can, what_can and the access matrix, cursors, limits."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from polang.language.values import (
    EntityUID,
)

from .evaluation import QueryIndex, _diff, _meet, _Run, _test_open, _union
from .program import _EMPTY, E_, F_, QueryError
from .results import Maybe, Part, QueryResult, QueryStats, _Group

# ======================================================================== driving a query


def _fingerprint(qi: QueryIndex, kind: str, parts: Sequence[Any]) -> str:
    h = hashlib.sha256()
    h.update(kind.encode())
    for p in parts:
        h.update(b"\0")
        h.update(repr(p).encode())
    h.update(repr(list(qi.analysis.program.policies)).encode())
    h.update(str(len(qi.facts.entities)).encode())
    return h.hexdigest()[:16]


def _encode_cursor(fp: str, step: int, offset: int) -> str:
    raw = json.dumps({"v": 1, "q": fp, "s": step, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, fp: str) -> tuple[int, int]:
    try:
        pad = "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(cursor + pad).decode())
        if data.get("v") != 1:
            raise ValueError("version")
        step, offset = int(data["s"]), int(data["o"])
        q = str(data["q"])
    except Exception:
        raise QueryError(f"cursor {cursor!r} is not a cursor returned by a query") from None
    if q != fp:
        raise QueryError(
            "cursor belongs to another query (other arguments, policies or entities): "
            "start again without a cursor"
        )
    if step < 0 or offset < 0:
        raise QueryError(f"cursor {cursor!r} is out of range")
    return step, offset


def _check_limit(limit: int | None) -> None:
    if limit is not None and (type(limit) is not int or limit < 1):
        raise QueryError(f"limit must be a positive integer or None, not {limit!r}")


class _ActionContext:
    """What every step of one action shares: its policies, their domains, caches."""

    MEMO_LIMIT = 20_000

    def __init__(self, run: _Run, action: EntityUID, n_steps: int) -> None:
        qi = run.qi
        self.action = action
        self.plans = qi.plans_for(action)
        self.cands = qi.candidates(run.free, action)
        self.outer_cands = qi.candidates(run.outer, action)
        self.doms = [qi.domain(self.cands, p.tests[run.free]) for p in self.plans]
        # policies with the same condition over the same domain share one evaluation
        self.keys = [
            (run.an.canon(p.cond_pred), id(d)) for p, d in zip(self.plans, self.doms, strict=True)
        ]
        # policies whose result does not depend on the fixed entity: computed once
        self.constant: dict[int, frozenset[EntityUID] | set[EntityUID]] = {}
        self.memo: dict[Any, tuple[Any, Any]] = {}
        self.always: list[int] | None = None
        self.by_outer: dict[EntityUID, list[int]] = {}
        if n_steps > 64 and self.plans:
            # many steps (the matrix): index the policies by the fixed entities they admit
            always: list[int] = []
            for i, plan in enumerate(self.plans):
                odom = qi.domain(self.outer_cands, plan.tests[run.outer])
                if odom is self.outer_cands:
                    always.append(i)
                    continue
                for o in odom:
                    self.by_outer.setdefault(o, []).append(i)
            self.always = always

    def candidates_for(self, outer: EntityUID, missing: bool) -> tuple[list[int], bool]:
        """Indices of the policies whose scope may admit ``outer``; and whether their
        tests on ``outer`` are known to hold already (indexed)."""
        if self.always is not None and not missing and outer in self.outer_cands:
            extra = self.by_outer.get(outer)
            if not extra:
                return self.always, True
            return sorted(self.always + extra), True
        return list(range(len(self.plans))), False

    def combine(
        self, parts: Sequence[frozenset[EntityUID] | set[EntityUID]]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """The union of ``parts``; equal inputs give the same (shared) set object."""
        if not parts:
            return _EMPTY
        if len(parts) == 1:
            return parts[0]
        key = ("u", *(id(p) for p in parts))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(_union(*parts))
        self._remember(key, out, tuple(parts))
        return out

    def minus(
        self, a: frozenset[EntityUID] | set[EntityUID], b: frozenset[EntityUID] | set[EntityUID]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """``a - b``, shared like :meth:`combine`."""
        if not a or not b:
            return a
        key = ("d", id(a), id(b))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(a - b)
        self._remember(key, out, (a, b))
        return out

    def meet(
        self, a: frozenset[EntityUID] | set[EntityUID], b: frozenset[EntityUID] | set[EntityUID]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """``a & b``, shared like :meth:`combine`."""
        if not a or not b:
            return _EMPTY
        key = ("m", id(a), id(b))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(a & b)
        self._remember(key, out, (a, b))
        return out

    def count_allowed(
        self,
        parts: Sequence[frozenset[EntityUID] | set[EntityUID]],
        blocked: frozenset[EntityUID] | set[EntityUID],
    ) -> int:
        """``len(union(parts) - blocked)``; the union is built and dropped (never kept)."""
        if len(parts) == 1 and not blocked:
            return len(parts[0])
        key = ("n", id(blocked), *(id(p) for p in parts))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        u = parts[0] if len(parts) == 1 else _union(*parts)
        n = len(u - blocked) if blocked else len(u)
        self._remember(key, n, (blocked, *parts))
        return n

    def _remember(self, key: Any, value: Any, refs: Any) -> None:
        if len(self.memo) >= self.MEMO_LIMIT:
            self.memo.clear()
        self.memo[key] = (value, refs)  # refs keep the inputs alive: their ids stay unique


def _evaluate_step(run: _Run, ac: _ActionContext, outer: EntityUID) -> _Group:
    """Every policy for one (action, fixed entity), combined by the decision rules."""
    qi = run.qi
    missing = not qi.contains(outer)
    run.begin_outer(outer, missing)
    action = ac.action
    cands = ac.cands
    forbid_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    forbid_def: frozenset[EntityUID] | set[EntityUID] = _EMPTY
    forbid_maybe_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    permits: list[Part] = []
    maybe: list[Maybe] = []
    permit_maybe_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    ctx_unknown = not run.context_known
    outer_var = run.outer
    forbids_done = False
    indices, tested = ac.candidates_for(outer, missing)
    shared: dict[Any, frozenset[EntityUID] | set[EntityUID]] = {}
    for i in indices:
        plan = ac.plans[i]
        if plan.effect == "permit" and not forbids_done:
            forbids_done = True
            forbid_def = ac.combine(forbid_parts)
        scope: bool | None = True
        for op, arg in () if tested else plan.tests[outer_var]:
            got = _test_open(qi.facts, outer, missing, op, arg)
            if got is False:
                scope = False
                break
            if got is None:
                scope = None
        if scope is False:
            continue
        dom = ac.doms[i]
        unsure: frozenset[EntityUID] = _EMPTY
        if missing and any(op.startswith("scope_in") for op, _a in plan.tests[run.free]):
            # stored entities below the missing one may be in scope through it
            through = (qi.desc_star(outer) - {outer}) & cands
            if through:
                unsure = frozenset(through - dom)
                dom = dom | unsure
        if not dom:
            continue
        partial = (
            scope is None
            or bool(unsure)
            or run.reachable
            or (missing and outer_var in plan.cond_deps)
            or (ctx_unknown and "context" in plan.cond_deps)
        )
        constant = not missing and outer_var not in plan.cond_deps
        if constant and i in ac.constant:
            t = ac.constant[i]
        elif constant:
            t = run.true_set(plan.cond_pred, dom, dom)
            ac.constant[i] = t
        elif not unsure and ac.keys[i] in shared:
            t = shared[ac.keys[i]]
        elif not unsure and run.bound_inputs(plan.cond_pred) is not None:
            t = shared[ac.keys[i]] = run.true_set(plan.cond_pred, dom, dom)
        else:
            focus: frozenset[EntityUID] | set[EntityUID] = dom
            if plan.effect == "permit" and forbid_def and run.bound_inputs(plan.cond_pred) is None:
                # an expensive (per-entity) condition: skip the entities already denied
                focus = dom - forbid_def
            t = run.true_set(plan.cond_pred, focus, dom) if focus else _EMPTY
        if not t:
            continue
        definite: frozenset[EntityUID] | set[EntityUID]
        cond: frozenset[EntityUID] | set[EntityUID]
        if not partial:
            definite, cond = t, _EMPTY
        elif scope is None:
            definite, cond = _EMPTY, t
        else:
            s2 = run.sets(plan.cond_pred, t, dom, F_ | E_)
            bad = _union(s2.f, s2.e, unsure)
            definite, cond = _diff(t, bad), _meet(t, bad, dom)
        if plan.effect == "forbid":
            if definite:
                forbid_parts.append(definite)
            if cond:
                forbid_maybe_parts.append(cond)
                maybe.append((plan, cond, scope is None, unsure))
        else:
            if definite:
                permits.append((plan, definite))
            if cond:
                permit_maybe_parts.append(cond)
                maybe.append((plan, cond, scope is None, unsure))
    if not forbids_done:
        forbid_def = ac.combine(forbid_parts)
    if not permits and not permit_maybe_parts:
        return _Group(action, outer, (), _EMPTY, _EMPTY, (), missing)
    # the sets below are mostly shared between steps: the memo keeps one object each
    forbid_maybe = ac.combine(forbid_maybe_parts)
    blocked = ac.combine([forbid_def, forbid_maybe]) if forbid_maybe else forbid_def
    conditional: frozenset[EntityUID] | set[EntityUID] = _EMPTY
    g = _Group(action, outer, tuple(permits), blocked, conditional, tuple(maybe), missing)
    if permit_maybe_parts or forbid_maybe:
        permit_def = ac.combine([s for _p, s in permits])
        possible = ac.combine([permit_def, *permit_maybe_parts])
        # conditional = possible - forbid_def - allowed = (possible - forbid_def) & blocked
        #   (allowed = permit_def - blocked, and a permit_maybe entity is never allowed)
        g.conditional = (
            ac.meet(ac.minus(possible, forbid_def), forbid_maybe)
            | ac.minus(ac.minus(possible, permit_def), forbid_def)
            if forbid_maybe
            else ac.minus(ac.minus(possible, permit_def), forbid_def)
        )
        g.count = ac.count_allowed([permit_def], blocked) + len(g.conditional)
    else:
        g.count = ac.count_allowed([s for _p, s in permits], blocked)
    return g


def _run_steps(
    run: _Run,
    kind: str,
    query: dict[str, Any],
    steps: list[tuple[EntityUID, list[EntityUID]]],
    fp: str,
    limit: int | None,
    cursor: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> QueryResult:
    """Evaluate steps in order from the cursor until ``limit`` entries are found.

    After a full page the evaluation goes on to the next step with an entry, so
    ``next_cursor`` is ``None`` exactly when nothing follows.
    """
    _check_limit(limit)
    t0 = time.perf_counter()
    start_step, offset = _decode_cursor(cursor, fp) if cursor else (0, 0)
    total_steps = sum(len(outers) for _a, outers in steps)
    parts: list[tuple[_Group, int]] = []
    found = 0
    step = 0
    next_cursor: str | None = None
    policies_seen: set[str] = set()
    for action, outers in steps:
        if next_cursor is not None:
            break
        if step + len(outers) <= start_step:
            step += len(outers)
            continue
        run.begin_action(action)
        ac = _ActionContext(run, action, len(outers))
        policies_seen.update(p.policy_id for p in ac.plans)
        for outer in outers:
            if step < start_step:
                step += 1
                continue
            g = _evaluate_step(run, ac, outer) if ac.plans else None
            if progress is not None and step % 64 == 0:
                progress(step, total_steps)
            begin = offset if step == start_step else 0
            avail = len(g) - begin if g is not None else 0
            if g is not None and avail > 0:
                if limit is not None and found == limit:
                    next_cursor = _encode_cursor(fp, step, begin)
                    break
                take = avail if limit is None else min(avail, limit - found)
                parts.append((g, begin))
                found += take
                if take < avail:
                    next_cursor = _encode_cursor(fp, step, begin + take)
                    break
            step += 1
    if progress is not None:
        progress(total_steps, total_steps)
    stats = QueryStats(time.perf_counter() - t0, run.steps, len(policies_seen), run.fallback_evals)
    return QueryResult(kind, query, parts, limit, next_cursor, stats, run)
