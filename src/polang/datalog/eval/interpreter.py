"""The one interpreter of a Program's value predicates.

:func:`run_group` evaluates one predicate's rule group by the semantics of
:mod:`.semantics` (first rule that holds wins, the first error, the Bool mismatch). It is
what the compiled backend runs for a group of no known form (and for every group in its
``generic`` mode), and :class:`Evaluation` runs it for every predicate a request reaches,
memoised, with two options that never change a known answer:

- an **observer** receives events as OPA's ``topdown`` tracer emits them (a predicate
  entered, a rule tried, each literal's value or error, each builtin call with its
  arguments and result, the rule's outcome, the predicate's value or error). The
  explanations (``explain.py``'s ``Tracer``) and the repairs' oracle are observers: they
  never evaluate anything themselves. ``None`` costs one test per event site.
- **unknowns** (:class:`~.partial.Unknowns`): request values left unknown (the context, the
  attributes and ancestors of entities a query does not hold). A builtin over an unknown
  gives an :class:`~.partial.Unknown` carrying a residual expression; a rule that may hold
  because of one makes the group's value unknown, unless an earlier rule surely holds
  (``false && unknown`` is false, ``true || unknown`` is true); a known error stays an
  error. Without unknowns no :class:`~.partial.Unknown` ever appears, and the path is the
  plain one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.datalog.builtins import builtin
from polang.datalog.eval.partial import Unknown
from polang.datalog.eval.residual import Residual, source_expr
from polang.datalog.eval.semantics import (
    NOTHING,
    REQUEST_VARS,
    bool_error,
    group_error,
    no_principal,
)
from polang.datalog.ir import Atom, Builtin, Const, Literal, PolicyInfo, Rule
from polang.errors import EvaluationError
from polang.language import ast

if TYPE_CHECKING:
    from polang.datalog.eval.partial import Unknowns
    from polang.datalog.facts import EntityFacts, Request

Outcome = tuple[bool, Any]
"""``(True, value)`` or ``(False, EvaluationError)``: a predicate's outcome, memoised."""

Resolve = Callable[[str, "Request", "EntityFacts"], Outcome]
"""How a group reaches its operands' outcomes (the caller memoises them in ``memo``)."""

Cause = tuple[Rule, Literal]
"""The rule and literal an error came from: a builtin that raised, an operand that
errored, or (for "expected Bool") the operand whose value had the wrong type."""

Possible = tuple[Rule, Any, Sequence[tuple[Literal, "Unknown"]]]
"""A rule that may hold: its value, and the literals that hold only if unknowns allow."""

_TRUE = Const(True)


class Observer:
    """Receives an :class:`Evaluation`'s events; every method does nothing here (override
    what you need). Events come in evaluation order, nested as the evaluation is:
    ``enter(p)``, then per rule tried ``rule``, the literals' ``atom``/``call`` events
    and ``rule_done``, and last ``exit(p)``. An operand's own ``enter`` ... ``exit`` comes
    before the ``atom`` event that reads it, the first time it is read (then memoised)."""

    __slots__ = ()

    def enter(self, pred: str) -> None:
        """A predicate's evaluation begins."""

    def rule(self, pred: str, rule: Rule) -> None:
        """A rule of ``pred`` is tried."""

    def atom(self, pred: str, lit: Atom, ok: bool, value: Any) -> None:
        """An operand literal was read: its value, or (``ok`` false) its error."""

    def call(self, pred: str, lit: Builtin, args: list[Any], ok: bool, result: Any) -> None:
        """A builtin was called: its arguments and result, or (``ok`` false) its error."""

    def rule_done(self, pred: str, rule: Rule, ok: bool) -> None:
        """A rule's body held (``ok``) or stopped at a literal that failed."""

    def exit(self, pred: str, ok: bool, value: Any, rule: Rule | None, cause: Cause | None) -> None:
        """The predicate's value (``rule``: the rule that gave it; ``None`` for a request
        variable or an unknown value) or, ``ok`` false, its error and where it came from
        (``cause``; ``None``: no rule held and nothing erred)."""


def run_group(
    pred: str,
    rules: Sequence[Rule],
    request: Request,
    facts: EntityFacts,
    memo: dict[str, Outcome],
    resolve: Resolve,
    observer: Observer | None = None,
    unknowns: Unknowns | None = None,
) -> Any:
    """The value of ``pred`` by its rules (raises its ``EvaluationError``); operands are
    read through ``memo``, filled by ``resolve``."""
    first_error: EvaluationError | None = None
    cause: Cause | None = None
    mismatch: Any = NOTHING
    mismatch_at: Cause | None = None
    possible: list[Possible] | None = None  # the rules that may hold (unknowns only)
    for rule in rules:
        if observer is not None:
            observer.rule(pred, rule)
        env: dict[str, Any] = {}
        ok = True
        maybe: list[tuple[Literal, Unknown]] | None = None  # the literals that may hold
        for lit in rule.body:
            if type(lit) is Builtin:
                args = [t.value if type(t) is Const else env[t.name] for t in lit.args]  # type: ignore[union-attr]
                try:
                    if unknowns is None:
                        res = builtin(lit.op)(facts, *args)
                    else:
                        res = unknowns.call(lit, facts, args)
                except EvaluationError as e:
                    if observer is not None:
                        observer.call(pred, lit, args, False, e)
                    if first_error is None:
                        first_error, cause = e, (rule, lit)
                    ok = False
                    break
                if observer is not None:
                    observer.call(pred, lit, args, True, res)
                if lit.out is not None:
                    env[lit.out.name] = res
                elif type(res) is Unknown:
                    maybe = [*(maybe or ()), (lit, res)]
                elif not res:
                    ok = False
                    break
                continue
            p = lit.pred  # type: ignore[union-attr]
            got = memo.get(p)
            if got is None:
                got = memo[p] = resolve(p, request, facts)
            good, val = got
            if observer is not None:
                observer.atom(pred, lit, good, val)  # type: ignore[arg-type]
            if not good:
                if first_error is None:
                    first_error, cause = val, (rule, lit)
                ok = False
                break
            if not lit.args:  # a test of no value (a scope): it held, or may
                if type(val) is Unknown:
                    maybe = [*(maybe or ()), (lit, val)]
                continue
            t = lit.args[0]
            if type(t) is not Const:
                env[t.name] = val  # type: ignore[union-attr]
            elif type(val) is Unknown:
                if not val.may_be(t.value):
                    ok = False
                    break
                maybe = [*(maybe or ()), (lit, val)]
            else:
                c = t.value
                if not (type(c) is type(val) and c == val):
                    if type(c) is not type(val) and mismatch is NOTHING:
                        mismatch, mismatch_at = val, (rule, lit)
                    ok = False
                    break
        if observer is not None:
            observer.rule_done(pred, rule, ok)
        if not ok:
            continue
        h = rule.head.args[0] if rule.head.args else _TRUE
        value = h.value if type(h) is Const else env[h.name]  # type: ignore[union-attr]
        # an unknown operand bound to a variable makes the rule open only through what
        # reads it: the head's value, or a literal that may hold (``maybe``)
        if maybe is not None or type(value) is Unknown:
            if possible is None:
                possible = []
            possible.append((rule, value, maybe or ()))
            continue
        if possible is not None:  # an earlier rule may hold: which one gives the value is unknown
            possible.append((rule, value, ()))
            break
        if observer is not None:
            observer.exit(pred, True, value, rule, None)
        return value
    if possible is not None:
        assert unknowns is not None  # an unknown value comes from unknowns only
        out = unknowns.merge(pred, rules, possible, memo)
        if observer is not None:
            observer.exit(pred, True, out, None, None)
        return out
    error = group_error(first_error, mismatch, pred)
    if observer is not None:
        observer.exit(pred, False, error, None, cause if first_error is not None else mismatch_at)
    raise error


def group_function(
    pred: str, rules: Sequence[Rule], fn: Callable[[str], Callable[[Request, EntityFacts], Any]]
) -> Callable[[Request, EntityFacts], Any]:
    """``pred``'s group as a function ``f(request, facts)`` whose operands are the
    functions ``fn(p)`` gives (the compiled backend's, memoised per call)."""

    def resolve(p: str, r: Request, fx: EntityFacts) -> Outcome:
        try:
            return (True, fn(p)(r, fx))
        except EvaluationError as e:
            return (False, e)

    def run(r: Request, fx: EntityFacts) -> Any:
        return run_group(pred, rules, r, fx, {}, resolve)

    return run


class Evaluation:
    """One request's evaluation of a Program's value predicates, each memoised, with an
    optional observer and unknowns (see the module docstring)."""

    __slots__ = ("facts", "groups", "memo", "observer", "request", "unknowns")

    def __init__(
        self,
        groups: Mapping[str, Sequence[Rule]],
        request: Request,
        facts: EntityFacts,
        *,
        observer: Observer | None = None,
        unknowns: Unknowns | None = None,
    ) -> None:
        self.groups = groups
        self.request = request
        self.facts = facts
        self.observer = observer
        self.unknowns = unknowns
        self.memo: dict[str, Outcome] = {}

    def outcome(self, pred: str) -> Outcome:
        """``(True, value)`` or ``(False, error)``; a value may be an
        :class:`~.partial.Unknown` when evaluating with unknowns."""
        got = self.memo.get(pred)
        if got is None:
            got = self.memo[pred] = self._evaluate(pred, self.request, self.facts)
        return got

    def value(self, pred: str) -> Any:
        """The value of ``pred``, or its ``EvaluationError`` raised."""
        ok, v = self.outcome(pred)
        if ok:
            return v
        raise v

    def _evaluate(self, pred: str, request: Request, facts: EntityFacts) -> Outcome:
        obs = self.observer
        if obs is not None:
            obs.enter(pred)
        if pred in REQUEST_VARS:
            got = self._request_var(pred)
            if obs is not None:
                obs.exit(pred, got[0], got[1], None, None)
            return got
        try:
            return (
                True,
                run_group(
                    pred,
                    self.groups.get(pred, ()),
                    request,
                    facts,
                    self.memo,
                    self._evaluate,
                    obs,
                    self.unknowns,
                ),
            )
        except EvaluationError as e:
            return (False, e)

    def _request_var(self, name: str) -> Outcome:
        unknowns = self.unknowns
        if unknowns is not None:
            u = unknowns.variable(name)
            if u is not None:
                return (True, u)
        v = self.request.var(name)
        if v is None and name == "principal":
            return (False, no_principal())
        return (True, v)


def policy_outcome(ev: Evaluation, info: PolicyInfo) -> Any:
    """What one policy gives for the evaluation's request: ``None`` when its scope does
    not hold, else its condition's Bool, its ``EvaluationError``, or (with unknowns) a
    :class:`~.residual.Residual`: the scope and condition over the unknowns."""
    ok, scope = ev.outcome(info.scope_pred)
    if not ok:
        return None  # no scope rule held (a scope literal never errs)
    ok, v = ev.outcome(info.cond_pred)
    if ok and type(v) is not Unknown:
        if v is not True and v is not False:
            v = bool_error(v)
        if type(scope) is not Unknown or v is not True:
            return v
        return Residual(info.policy_id, info.effect, scope.expr)
    if not ok and type(scope) is not Unknown:
        return v
    cond = v.expr if ok else source_expr(ev.groups, info.cond_pred)
    if type(scope) is Unknown:
        cond = ast.Binary("&&", scope.expr, cond)
    return Residual(info.policy_id, info.effect, cond)
