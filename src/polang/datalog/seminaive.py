"""A small bottom-up Datalog evaluator: stratified negation, semi-naive iteration, hash joins.

Used where a backend needs plain relational evaluation of IR rules without value
predicates: the fixed decision rules over a request's policy atoms, and bulk queries.
Builtins are allowed in bodies (bound inputs, optional output); they receive ``ctx``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from polang.datalog.ir import Atom, Builtin, Const, Literal, Rule, Var
from polang.errors import EvaluationError

Relation = set[tuple[Any, ...]]


class StratificationError(ValueError):
    """The rules use negation through recursion (no stratification exists)."""


def stratify(rules: Iterable[Rule]) -> list[list[Rule]]:
    """Order rules into strata so every negated predicate is complete before it is read."""
    rules = list(rules)
    heads = {r.head.pred for r in rules}
    stratum: dict[str, int] = dict.fromkeys(heads, 0)
    changed = True
    limit = len(heads) + 1
    while changed:
        changed = False
        for r in rules:
            h = r.head.pred
            for lit in r.body:
                if isinstance(lit, Atom) and lit.pred in heads:
                    need = stratum[lit.pred] + (1 if lit.negated else 0)
                    if stratum[h] < need:
                        stratum[h] = need
                        changed = True
                        if need > limit:
                            raise StratificationError(f"negation through recursion at {h}")
    out: list[list[Rule]] = [[] for _ in range(max(stratum.values(), default=0) + 1)]
    for r in rules:
        out[stratum[r.head.pred]].append(r)
    return [s for s in out if s]


def _match_atom(atom: Atom, env: dict[str, Any], rel: Relation) -> Iterable[dict[str, Any]]:
    args = atom.args
    for tup in rel:
        if len(tup) != len(args):
            continue
        new = env
        ok = True
        for t, v in zip(args, tup, strict=True):
            if isinstance(t, Const):
                if not (type(t.value) is type(v) and t.value == v):
                    ok = False
                    break
            else:
                if t.name in new:
                    b = new[t.name]
                    if not (type(b) is type(v) and b == v):
                        ok = False
                        break
                else:
                    if new is env:
                        new = dict(env)
                    new[t.name] = v
        if ok:
            yield new


def _ground(atom: Atom, env: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(t.value if isinstance(t, Const) else env[t.name] for t in atom.args)


def _solve(
    body: tuple[Literal, ...],
    i: int,
    env: dict[str, Any],
    rels: Mapping[str, Relation],
    builtins: Callable[[str], Callable[..., Any]],
    ctx: Any,
    delta: tuple[int, Relation] | None,
) -> Iterable[dict[str, Any]]:
    if i == len(body):
        yield env
        return
    lit = body[i]
    if isinstance(lit, Builtin):
        args = [t.value if isinstance(t, Const) else env[t.name] for t in lit.args]
        try:
            res = builtins(lit.op)(ctx, *args)
        except EvaluationError:
            return
        if lit.out is None:
            if res:
                yield from _solve(body, i + 1, env, rels, builtins, ctx, delta)
            return
        name = lit.out.name
        if name in env:
            if type(env[name]) is type(res) and env[name] == res:
                yield from _solve(body, i + 1, env, rels, builtins, ctx, delta)
            return
        new = dict(env)
        new[name] = res
        yield from _solve(body, i + 1, new, rels, builtins, ctx, delta)
        return
    if lit.negated:
        if lit.args and not all(isinstance(t, Const) or t.name in env for t in lit.args):
            raise StratificationError(f"unsafe negation: {lit}")
        if _ground(lit, env) not in rels.get(lit.pred, ()):
            yield from _solve(body, i + 1, env, rels, builtins, ctx, delta)
        return
    rel = delta[1] if delta is not None and delta[0] == i else rels.get(lit.pred, set())
    if all(isinstance(t, Const) or t.name in env for t in lit.args):
        if _ground(lit, env) in rel:
            yield from _solve(body, i + 1, env, rels, builtins, ctx, delta)
        return
    for new in _match_atom(lit, env, rel):
        yield from _solve(body, i + 1, new, rels, builtins, ctx, delta)


def evaluate(
    rules: Iterable[Rule],
    facts: Mapping[str, Relation],
    builtins: Callable[[str], Callable[..., Any]] | None = None,
    ctx: Any = None,
) -> dict[str, Relation]:
    """All atoms derivable from ``facts`` by ``rules`` (semi-naive within each stratum)."""
    rels: dict[str, Relation] = defaultdict(set)
    for k, v in facts.items():
        rels[k] = set(v)
    get_builtin = builtins or (lambda op: (_ for _ in ()).throw(ValueError(op)))
    for stratum in stratify(rules):
        preds = {r.head.pred for r in stratum}
        # First round: every rule over the full relations.
        delta: dict[str, Relation] = defaultdict(set)
        for r in stratum:
            for env in _solve(r.body, 0, {}, rels, get_builtin, ctx, None):
                t = _ground(r.head, env)
                if t not in rels[r.head.pred]:
                    delta[r.head.pred].add(t)
        while any(delta.values()):
            for p, d in delta.items():
                rels[p] |= d
            new: dict[str, Relation] = defaultdict(set)
            for r in stratum:
                for i, lit in enumerate(r.body):
                    if isinstance(lit, Atom) and not lit.negated and lit.pred in preds:
                        d_rel = delta.get(lit.pred)
                        if not d_rel:
                            continue
                        for env in _solve(r.body, 0, {}, rels, get_builtin, ctx, (i, d_rel)):
                            t = _ground(r.head, env)
                            if t not in rels[r.head.pred]:
                                new[r.head.pred].add(t)
            delta = new
    return dict(rels)


__all__ = ["StratificationError", "Var", "evaluate", "stratify"]
