"""The default backend: the Program's rules compiled once into Python closures.

Value predicates are functional (one value per request, or an evaluation error), so each
predicate's rule group compiles to a function ``f(request, facts) -> value`` that raises
:class:`EvaluationError` when no rule derives a value. Common rule-group shapes (a fact,
a request variable, a builtin call over operands, the three rules of ``&&``/``||``, the
two of ``!`` and ``if``) compile to direct closures; any other group goes through a
generic rule interpreter, so every Program the IR can express still runs.

Policies are indexed by action (``action == A`` scopes) so a request only evaluates the
candidates; the fixed rules of ``rules/decision.dl`` then combine the policy atoms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from polang.datalog.builtins import TESTS, builtin
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, PolicyInfo, Program, Rule, Var
from polang.datalog.seminaive import Relation, evaluate
from polang.errors import EvaluationError
from polang.language.values import EntityUID, type_name

Fn = Callable[[Request, EntityFacts], Any]
ScopeFn = Callable[[Request, EntityFacts], bool]

REQUEST_VARS = ("principal", "action", "resource", "context")


def _bool_error(v: Any) -> EvaluationError:
    return EvaluationError("type", f"type error: expected Bool, got {type_name(v)}")


def _request_var(name: str) -> Fn:
    if name == "principal":

        def principal(r: Request, _fx: EntityFacts) -> Any:
            p = r.principal
            if p is None:
                raise EvaluationError("request", "the request has no principal")
            return p

        return principal
    if name == "action":
        return lambda r, _fx: r.action
    if name == "resource":
        return lambda r, _fx: r.resource
    return lambda r, _fx: r.context


@dataclass(slots=True)
class CompiledPolicy:
    info: PolicyInfo
    scope: ScopeFn
    cond: Fn


@dataclass(slots=True)
class PolicyOutcome:
    """What one policy did for one request."""

    policy_id: str
    scope: bool
    value: Any = None  # the condition's Bool when it evaluated
    error: EvaluationError | None = None


@dataclass(slots=True)
class RawDecision:
    allow: bool
    reasons: list[str]
    errors: list[tuple[str, EvaluationError]]
    outcomes: list[PolicyOutcome] = field(default_factory=list)


class Compiler:
    """Compiles the value predicates of a Program on demand (memoised by name)."""

    def __init__(self, program: Program) -> None:
        self.groups = program.by_head()
        self.fns: dict[str, Fn] = {}

    def fn(self, pred: str) -> Fn:
        f = self.fns.get(pred)
        if f is None:
            if pred in REQUEST_VARS:
                f = _request_var(pred)
            else:
                f = self._compile(pred, self.groups.get(pred, []))
            self.fns[pred] = f
        return f

    # -- shapes -------------------------------------------------------------------------

    def _compile(self, pred: str, rules: Sequence[Rule]) -> Fn:
        heads = [r.head.args[0] if r.head.args else None for r in rules]
        bodies = [r.body for r in rules]
        # n(c).
        if len(rules) == 1 and not bodies[0] and isinstance(heads[0], Const):
            c = heads[0].value
            return lambda _r, _fx: c
        # n(X) :- v(X).   (request variable or another predicate)
        if (
            len(rules) == 1
            and len(bodies[0]) == 1
            and isinstance(bodies[0][0], Atom)
            and not bodies[0][0].negated
            and bodies[0][0].args == (heads[0],)
            and isinstance(heads[0], Var)
        ):
            return self.fn(bodies[0][0].pred)
        # n(X) :- a1(A1), ..., ak(Ak), X = op(A1, ..., Ak, consts...).
        if len(rules) == 1 and isinstance(heads[0], Var):
            call = self._call_shape(heads[0], bodies[0])
            if call is not None:
                return call
        sig = [
            (h.value if isinstance(h, Const) else "X", _body_sig(b))
            for h, b in zip(heads, bodies, strict=True)
        ]
        # !a
        if sig == [(False, [("a", True)]), (True, [("a", False)])]:
            a = self.fn(_pred(bodies[0][0]))
            if _pred(bodies[1][0]) == _pred(bodies[0][0]):

                def not_(r: Request, fx: EntityFacts) -> bool:
                    v = a(r, fx)
                    if v is True:
                        return False
                    if v is False:
                        return True
                    raise _bool_error(v)

                return not_
        # a && b  /  a || b
        if len(rules) == 3 and self._same_operands(bodies):
            a = self.fn(_pred(bodies[0][0]))
            b = self.fn(_pred(bodies[1][1]))
            if sig == [
                (False, [("a", False)]),
                (True, [("a", True), ("b", True)]),
                (False, [("a", True), ("b", False)]),
            ]:

                def and_(r: Request, fx: EntityFacts) -> bool:
                    x = a(r, fx)
                    if x is False:
                        return False
                    if x is not True:
                        raise _bool_error(x)
                    y = b(r, fx)
                    if y is True or y is False:
                        return y
                    raise _bool_error(y)

                return and_
            if sig == [
                (True, [("a", True)]),
                (True, [("a", False), ("b", True)]),
                (False, [("a", False), ("b", False)]),
            ]:

                def or_(r: Request, fx: EntityFacts) -> bool:
                    x = a(r, fx)
                    if x is True:
                        return True
                    if x is not False:
                        raise _bool_error(x)
                    y = b(r, fx)
                    if y is True or y is False:
                        return y
                    raise _bool_error(y)

                return or_
        # if c then a else b   /   e is T in E
        if sig == [("X", [("a", True), ("a", "X")]), ("X", [("a", False), ("a", "X")])] and (
            _pred(bodies[0][0]) == _pred(bodies[1][0])
        ):
            c = self.fn(_pred(bodies[0][0]))
            t = self.fn(_pred(bodies[0][1]))
            e = self.fn(_pred(bodies[1][1]))

            def if_(r: Request, fx: EntityFacts) -> Any:
                v = c(r, fx)
                if v is True:
                    return t(r, fx)
                if v is False:
                    return e(r, fx)
                raise _bool_error(v)

            return if_
        if sig == [(False, [("a", False)]), ("X", [("a", True), ("a", "X")])] and (
            _pred(bodies[0][0]) == _pred(bodies[1][0])
        ):
            c = self.fn(_pred(bodies[0][0]))
            t = self.fn(_pred(bodies[1][1]))

            def and_then(r: Request, fx: EntityFacts) -> Any:
                v = c(r, fx)
                if v is False:
                    return False
                if v is True:
                    return t(r, fx)
                raise _bool_error(v)

            return and_then
        return self._generic(pred, rules)

    @staticmethod
    def _same_operands(bodies: Sequence[tuple[Any, ...]]) -> bool:
        try:
            a = {_pred(b[0]) for b in bodies}
            bs = {_pred(b[1]) for b in bodies[1:]}
        except (IndexError, TypeError):
            return False
        return len(a) == 1 and len(bs) == 1

    def _call_shape(self, head: Var, body: tuple[Any, ...]) -> Fn | None:
        if not body or not isinstance(body[-1], Builtin) or body[-1].out != head:
            return None
        b: Builtin = body[-1]
        operands: list[Fn] = []
        vars_: list[Var] = []
        for lit in body[:-1]:
            if not (isinstance(lit, Atom) and not lit.negated and len(lit.args) == 1):
                return None
            v = lit.args[0]
            if not isinstance(v, Var):
                return None
            operands.append(self.fn(lit.pred))
            vars_.append(v)
        nvars = len(vars_)
        if tuple(b.args[:nvars]) != tuple(vars_) or not all(
            isinstance(t, Const) for t in b.args[nvars:]
        ):
            return None
        consts = tuple(t.value for t in b.args[nvars:])  # type: ignore[union-attr]
        op = builtin(b.op)
        if nvars == 0:
            return lambda _r, fx: op(fx, *consts)
        if nvars == 1:
            (o1,) = operands
            if not consts:
                return lambda r, fx: op(fx, o1(r, fx))
            if len(consts) == 1:
                (k1,) = consts
                return lambda r, fx: op(fx, o1(r, fx), k1)
            return lambda r, fx: op(fx, o1(r, fx), *consts)
        if nvars == 2 and not consts:
            o1, o2 = operands
            return lambda r, fx: op(fx, o1(r, fx), o2(r, fx))
        ops = tuple(operands)
        return lambda r, fx: op(fx, *[o(r, fx) for o in ops], *consts)

    # -- the general case ------------------------------------------------------------------

    def _generic(self, pred: str, rules: Sequence[Rule]) -> Fn:
        """Interpret the rule group: first rule whose body holds gives the value."""
        compiler = self

        def run(r: Request, fx: EntityFacts) -> Any:
            memo: dict[str, Any] = {}
            first_error: EvaluationError | None = None
            mismatch: Any = _NOTHING
            for rule in rules:
                env: dict[str, Any] = {}
                ok = True
                for lit in rule.body:
                    if isinstance(lit, Builtin):
                        args = [t.value if isinstance(t, Const) else env[t.name] for t in lit.args]
                        try:
                            res = builtin(lit.op)(fx, *args)
                        except EvaluationError as e:
                            first_error = first_error or e
                            ok = False
                            break
                        if lit.out is None:
                            if not res:
                                ok = False
                                break
                        else:
                            env[lit.out.name] = res
                        continue
                    if lit.pred not in memo:
                        try:
                            memo[lit.pred] = (True, compiler.fn(lit.pred)(r, fx))
                        except EvaluationError as e:
                            memo[lit.pred] = (False, e)
                    good, val = memo[lit.pred]
                    if not good:
                        first_error = first_error or val
                        ok = False
                        break
                    if lit.args:
                        t = lit.args[0]
                        if isinstance(t, Const):
                            if not (type(t.value) is type(val) and t.value == val):
                                if type(t.value) is not type(val):
                                    mismatch = val
                                ok = False
                                break
                        else:
                            env[t.name] = val
                if ok:
                    h = rule.head.args[0]
                    return h.value if isinstance(h, Const) else env[h.name]
            if first_error is not None:
                raise first_error
            if mismatch is not _NOTHING:
                raise _bool_error(mismatch)
            raise EvaluationError("type", f"no value derived for {pred}")

        return run

    # -- scope ---------------------------------------------------------------------------

    def scope(self, pred: str) -> ScopeFn:
        rules = self.groups.get(pred, [])
        if len(rules) != 1:
            raise ValueError(f"scope predicate {pred} must have exactly one rule")
        checks: list[Callable[[Request, EntityFacts, dict[str, Any]], bool]] = []
        for lit in rules[0].body:
            checks.append(_scope_check(lit))
        if not checks:
            return lambda _r, _fx: True
        if all(isinstance(lit, Atom) for lit in rules[0].body) and len(checks) == 1:
            only = checks[0]
            return lambda r, fx: only(r, fx, {})

        def scope(r: Request, fx: EntityFacts) -> bool:
            env: dict[str, Any] = {}
            return all(c(r, fx, env) for c in checks)

        return scope


_NOTHING = object()


def _pred(lit: Any) -> str:
    if not isinstance(lit, Atom):
        raise TypeError("not an atom")
    return lit.pred


def _body_sig(body: tuple[Any, ...]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for lit in body:
        if not isinstance(lit, Atom) or lit.negated or len(lit.args) != 1:
            return [("?", None)]
        t = lit.args[0]
        out.append(("a", t.value if isinstance(t, Const) else "X"))
    return out


def _scope_check(lit: Any) -> Callable[[Request, EntityFacts, dict[str, Any]], bool]:
    if isinstance(lit, Atom):
        name = lit.pred
        if name not in REQUEST_VARS or len(lit.args) != 1:
            raise ValueError(f"unsupported scope literal {lit}")
        t = lit.args[0]
        if isinstance(t, Const):
            c = t.value
            return lambda r, _fx, _env: r.var(name) == c
        vname = t.name

        def bind(r: Request, _fx: EntityFacts, env: dict[str, Any]) -> bool:
            v = r.var(name)
            if v is None:
                return False
            env[vname] = v
            return True

        return bind
    if isinstance(lit, Builtin):
        op = builtin(lit.op)
        if lit.op not in TESTS:
            raise ValueError(f"scope builtin {lit.op} is not a test")
        args = lit.args

        def test(_r: Request, fx: EntityFacts, env: dict[str, Any]) -> bool:
            vals = [t.value if isinstance(t, Const) else env[t.name] for t in args]
            return bool(op(fx, *vals))

        return test
    raise ValueError(f"unsupported scope literal {lit}")


class CompiledBackend:
    """A Program compiled for per-request decisions."""

    name = "compiled"

    def __init__(self, program: Program) -> None:
        self.program = program
        comp = Compiler(program)
        self.policies: list[CompiledPolicy] = [
            CompiledPolicy(info, comp.scope(info.scope_pred), comp.fn(info.cond_pred))
            for info in program.policies.values()
        ]
        self.decision_rules: list[Rule] = [
            r for r in program.rules if r.policy_id is None and r.head.pred in _DECISION_HEADS
        ]
        # Index: action uid -> candidate policies; policies without an `action ==` go everywhere.
        self._by_action: dict[EntityUID, list[CompiledPolicy]] = {}
        self._any_action: list[CompiledPolicy] = []
        for cp in self.policies:
            if cp.info.actions is None:
                self._any_action.append(cp)
        for cp in self.policies:
            if cp.info.actions is not None:
                for a in cp.info.actions:
                    self._by_action.setdefault(a, []).append(cp)
        self._order = {cp.info.policy_id: i for i, cp in enumerate(self.policies)}

    def candidates(self, action: EntityUID) -> list[CompiledPolicy]:
        specific = self._by_action.get(action)
        if not specific:
            return self._any_action
        if not self._any_action:
            return specific
        return sorted(specific + self._any_action, key=lambda cp: self._order[cp.info.policy_id])

    def decide(self, request: Request, facts: EntityFacts, *, trace: bool = False) -> RawDecision:
        policy: Relation = set()
        effect: Relation = set()
        scope: Relation = set()
        cond: Relation = set()
        outcomes: list[PolicyOutcome] = []
        errs: dict[str, EvaluationError] = {}
        for cp in self.candidates(request.action):
            pid = cp.info.policy_id
            policy.add((pid,))
            effect.add((pid, cp.info.effect))
            if not cp.scope(request, facts):
                if trace:
                    outcomes.append(PolicyOutcome(pid, False))
                continue
            scope.add((pid,))
            try:
                v = cp.cond(request, facts)
            except EvaluationError as e:
                errs[pid] = e
                if trace:
                    outcomes.append(PolicyOutcome(pid, True, error=e))
                continue
            if v is True or v is False:
                cond.add((pid, v))
            else:
                errs[pid] = _bool_error(v)
            if trace:
                outcomes.append(PolicyOutcome(pid, True, value=v, error=errs.get(pid)))
        rels = evaluate(
            self.decision_rules, {"policy": policy, "effect": effect, "scope": scope, "cond": cond}
        )
        allow = bool(rels.get("allow"))
        reasons = sorted((t[0] for t in rels.get("reason", ())), key=self._order.__getitem__)
        errors = [(t[0], errs.get(t[0]) or _unknown_error()) for t in rels.get("errored", ())]
        errors.sort(key=lambda pe: self._order[pe[0]])
        return RawDecision(allow, reasons, errors, outcomes)


_DECISION_HEADS = frozenset(
    {"applies", "errored", "forbidden", "permitted", "allow", "deny", "reason"}
)


def _unknown_error() -> EvaluationError:
    return EvaluationError("type", "the condition did not evaluate to a Bool")
