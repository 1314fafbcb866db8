"""What a query reads off the Program: outcomes, and each policy's plan (scope, rule groups,
the shape of each predicate over the free variable)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from polang.analysis.trace import PolicyMap, policy_maps, scope_constraint_text
from polang.datalog.eval.partial import Unknown
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.eval.shapes import classify
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.errors import RequestError
from polang.language.values import (
    EntityUID,
    value_key,
)

FreeVar = Literal["principal", "resource"]


class QueryError(RequestError):
    """A query is malformed: a cursor from another query, a bad limit, an unknown action."""


# ======================================================================== outcomes


class _Err:
    """An evaluation error (the message does not matter to a bulk query)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ERR"


ERR = _Err()


T_, F_, E_ = 1, 2, 4  # the outcomes a caller needs from a boolean predicate


@dataclass(slots=True)
class _Sets:
    """The entities (of a focus set) for which a boolean predicate may be true/false/error."""

    t: frozenset[EntityUID] | set[EntityUID] = frozenset()
    f: frozenset[EntityUID] | set[EntityUID] = frozenset()
    e: frozenset[EntityUID] | set[EntityUID] = frozenset()


_EMPTY: frozenset[EntityUID] = frozenset()


def _classify(out: Any, u: frozenset[EntityUID] | set[EntityUID], need: int) -> _Sets:
    """One outcome shared by the whole focus set ``u``."""
    if out is True:
        return _Sets(t=u)
    if out is False:
        return _Sets(f=u)
    if isinstance(out, Unknown):
        return _Sets(t=u if out.t else _EMPTY, f=u if out.f else _EMPTY, e=u)
    return _Sets(e=u)


# ======================================================================== program analysis


Shape = tuple[Any, ...]


class ProgramAnalysis:
    """What bulk evaluation needs to know of a Program's predicates (computed once)."""

    def __init__(self, program: Program, policies: Mapping[str, Any]) -> None:
        self.program = program
        self.groups = program.by_head()
        self.maps: dict[str, PolicyMap] = policy_maps(program, policies)
        self._deps: dict[str, frozenset[str]] = {}
        self._shapes: dict[str, Shape] = {}
        self._canon: dict[str, Any] = {}
        self._conj: dict[str, tuple[str, ...]] = {}
        self.plans: list[PolicyPlan] = [
            PolicyPlan.build(self, pid, info.effect, info.scope_pred, info.cond_pred)
            for pid, info in program.policies.items()
        ]

    def deps(self, pred: str) -> frozenset[str]:
        """The request variables a predicate reads (through any of its rules)."""
        d = self._deps.get(pred)
        if d is not None:
            return d
        if pred in REQUEST_VARS:
            d = frozenset((pred,))
        else:
            self._deps[pred] = frozenset()  # cycle guard (value predicates are not recursive)
            acc: set[str] = set()
            for r in self.groups.get(pred, []):
                for lit in r.body:
                    if isinstance(lit, Atom):
                        acc |= self.deps(lit.pred)
            d = frozenset(acc)
        self._deps[pred] = d
        return d

    def shape(self, pred: str) -> Shape:
        s = self._shapes.get(pred)
        if s is None:
            s = _shape(pred, self.groups.get(pred, []))
            self._shapes[pred] = s
        return s

    def canon(self, pred: str) -> Any:
        """A structural key: equal keys mean the predicates compute the same function."""
        k = self._canon.get(pred)
        if k is not None:
            return k
        sh = self.shape(pred)
        kind = sh[0]
        if kind == "const":
            k = ("const", type(sh[1]), value_key(sh[1]))
        elif kind == "var":
            k = ("var", sh[1])
        elif kind == "alias":
            k = self.canon(sh[1])
        elif kind == "call":
            k = (
                "call",
                sh[1],
                tuple(self.canon(o) for o in sh[2]),
                tuple((type(c), c) for c in sh[3]),
            )
        elif kind == "generic":
            k = ("generic", pred)
        else:
            k = (kind, *(self.canon(p) for p in sh[1:]))
        self._canon[pred] = k
        return k

    def conjuncts(self, pred: str) -> tuple[str, ...]:
        """The operands of a chain of ``&&`` (the predicate itself when it is not one)."""
        c = self._conj.get(pred)
        if c is None:
            sh = self.shape(pred)
            if sh[0] == "and":
                c = self.conjuncts(sh[1]) + self.conjuncts(sh[2])
            elif sh[0] == "alias":
                c = self.conjuncts(sh[1])
            else:
                c = (pred,)
            self._conj[pred] = c
        return c


def _shape(pred: str, rules: Sequence[Rule]) -> Shape:
    """The rule group's form, as the compiled backend's :func:`classify` recognises it,
    in this module's tuple notation; ``("generic",)`` for any other group."""
    if not rules or any(len(r.head.args) != 1 for r in rules):
        return ("generic",)
    sh = classify(rules)
    if sh.kind == "const":
        return ("const", sh.value)
    if sh.kind == "alias":
        p = sh.preds[0]
        return ("var" if p in REQUEST_VARS else "alias", p)
    if sh.kind == "call":
        return ("call", sh.op, sh.preds, sh.consts)
    if sh.kind == "rules":
        return ("generic",)
    return (sh.kind, *sh.preds)


ScopeTest = tuple[str, Any]  # ("eq", uid) | ("scope_is", type) | ("scope_in", uid) | ...


@dataclass(slots=True)
class PolicyPlan:
    """One policy as the bulk evaluator uses it."""

    policy_id: str
    effect: str
    cond_pred: str
    cond_deps: frozenset[str]
    tests: dict[str, tuple[ScopeTest, ...]]
    constraints: dict[str, str]
    pm: PolicyMap | None

    @classmethod
    def build(
        cls, an: ProgramAnalysis, pid: str, effect: str, scope_pred: str, cond_pred: str
    ) -> PolicyPlan:
        rules = an.groups.get(scope_pred, [])
        if len(rules) != 1:
            raise QueryError(f"policy {pid!r}: scope predicate {scope_pred} must have one rule")
        bound: dict[str, str] = {}
        tests: dict[str, list[ScopeTest]] = {"principal": [], "action": [], "resource": []}
        for lit in rules[0].body:
            if isinstance(lit, Atom) and lit.pred in tests and len(lit.args) == 1:
                t = lit.args[0]
                if isinstance(t, Var):
                    bound[t.name] = lit.pred
                else:
                    tests[lit.pred].append(("eq", t.value))
                continue
            if (
                isinstance(lit, Builtin)
                and lit.op in ("scope_in", "scope_in_any", "scope_is")
                and len(lit.args) == 2
                and isinstance(lit.args[0], Var)
                and isinstance(lit.args[1], Const)
                and lit.args[0].name in bound
            ):
                tests[bound[lit.args[0].name]].append((lit.op, lit.args[1].value))
                continue
            raise QueryError(f"policy {pid!r}: unsupported scope literal {lit}")
        pm = an.maps.get(pid)
        policy = pm.policy if pm is not None else None
        constraints = {
            "principal": scope_constraint_text(policy.principal if policy else None, "principal"),
            "action": scope_constraint_text(policy.action if policy else None, "action"),
            "resource": scope_constraint_text(policy.resource if policy else None, "resource"),
        }
        return cls(
            pid,
            effect,
            cond_pred,
            an.deps(cond_pred),
            {k: tuple(v) for k, v in tests.items()},
            constraints,
            pm,
        )


_ANALYSES: weakref.WeakKeyDictionary[Any, ProgramAnalysis] = weakref.WeakKeyDictionary()
_ANALYSES_LOCK = threading.Lock()


def analysis_for(authorizer: Any) -> ProgramAnalysis:
    """The (cached) analysis of an authorizer's Program."""
    with _ANALYSES_LOCK:
        try:
            an = _ANALYSES.get(authorizer)
        except TypeError:  # pragma: no cover - not weak-referenceable
            an = None
        if an is None or an.program is not authorizer.program:
            an = ProgramAnalysis(authorizer.program, getattr(authorizer, "policies", {}))
            with contextlib.suppress(TypeError):
                _ANALYSES[authorizer] = an
        return an
