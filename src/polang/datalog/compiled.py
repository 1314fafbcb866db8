"""The default backend: the Program's rules compiled once into Python closures.

Value predicates are functional (one value per request, or an evaluation error), so each
predicate's rule group compiles to a function ``f(request, facts) -> value`` that raises
:class:`EvaluationError` when no rule derives a value. Common rule-group shapes (a fact,
a request variable, a builtin call over operands, the three rules of ``&&``/``||``, the
two of ``!`` and ``if``: ``eval/shapes.py``) compile to direct closures raising the
errors of ``eval/semantics.py``; any other group runs through the one interpreter
(``eval/interpreter.py``, with no observer), so every Program the IR can express still
runs, by the same semantics.

Policies are indexed by action (``action == A`` scopes) so a request only evaluates the
candidates; the fixed rules of ``rules/decision.dl`` then combine the policy atoms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from polang._record import Record
from polang.datalog.builtins import TESTS, builtin
from polang.datalog.codegen import CompactRules, compile_compact
from polang.datalog.eval.interpreter import group_function
from polang.datalog.eval.semantics import REQUEST_VARS, bool_error, no_principal, not_a_bool
from polang.datalog.eval.shapes import Shape, classify
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, PolicyInfo, Program, Rule, Var
from polang.datalog.pycode import OUT_OF_SCOPE
from polang.errors import EvaluationError
from polang.language.values import EntityUID
from polang.runtime import WASM

Fn = Callable[[Request, EntityFacts], Any]
ScopeFn = Callable[[Request, EntityFacts], bool]
RunFn = Callable[[Request, EntityFacts, Any, Any], Any]
"""A policy's residual scope and condition: ``run(request, facts, principal_entity,
resource_entity)``, the entities as ``facts.get`` gives them (``None`` when absent)."""

_set = object.__setattr__


def _request_var(name: str) -> Fn:
    if name == "principal":

        def principal(r: Request, _fx: EntityFacts) -> Any:
            p = r.principal
            if p is None:
                raise no_principal()
            return p

        return principal
    if name == "action":
        return lambda r, _fx: r.action
    if name == "resource":
        return lambda r, _fx: r.resource
    return lambda r, _fx: r.context


class CompiledPolicy(Record):
    __slots__ = ("_cond", "info", "keys", "make_cond", "run", "scope")
    _frozen: ClassVar[bool] = False
    info: PolicyInfo
    scope: ScopeFn
    run: RunFn
    """The scope literals the index does not answer, then the condition, in one call:
    ``OUT_OF_SCOPE`` or the condition's value (generated code where possible)."""
    keys: ScopeKeys
    make_cond: Callable[[], Fn]
    _cond: Fn | None
    """The condition, once built (a cache: not compared, shown or copied)."""

    def __init__(
        self,
        info: PolicyInfo,
        scope: ScopeFn,
        run: RunFn,
        keys: ScopeKeys,
        make_cond: Callable[[], Fn],
        _cond: Fn | None = None,
    ) -> None:
        self.info = info
        self.scope = scope
        self.run = run
        self.keys = keys
        self.make_cond = make_cond
        self._cond = _cond

    @property
    def cond(self) -> Fn:
        """The condition alone (traced decisions): built on first use, not at load."""
        c = self._cond
        if c is None:
            c = self._cond = self.make_cond()
        return c


class PolicyOutcome(Record):
    """What one policy did for one request."""

    __slots__ = ("error", "policy_id", "scope", "value")
    _frozen: ClassVar[bool] = False
    policy_id: str
    scope: bool
    value: Any  # the condition's Bool when it evaluated
    error: EvaluationError | None

    def __init__(
        self,
        policy_id: str,
        scope: bool,
        value: Any = None,
        error: EvaluationError | None = None,
    ) -> None:
        self.policy_id = policy_id
        self.scope = scope
        self.value = value
        self.error = error


class RawDecision(Record):
    """A backend's answer: the decision, the determining policies, the erroring ones and
    (traced decisions) what each policy did."""

    __slots__ = ("allow", "errors", "outcomes", "reasons")
    _frozen: ClassVar[bool] = False
    allow: bool
    reasons: list[str]
    errors: list[tuple[str, EvaluationError]]
    outcomes: list[PolicyOutcome]

    def __init__(
        self,
        allow: bool,
        reasons: list[str],
        errors: list[tuple[str, EvaluationError]],
        outcomes: list[PolicyOutcome] | None = None,
    ) -> None:
        self.allow = allow
        self.reasons = reasons
        self.errors = errors
        self.outcomes = [] if outcomes is None else outcomes


class Compiler:
    """Compiles the value predicates of a Program on demand (memoised by name)."""

    def __init__(self, program: Program, *, specialize: bool = True) -> None:
        self.groups = program.by_head()
        self.fns: dict[str, Fn] = {}
        self.shapes: dict[str, Shape] = {}
        self.consts: dict[str, tuple[bool, Any]] = {}  # pycode's folded constants
        self.specialize = specialize
        self.generated: dict[Any, Any] = {}  # pycode's functions by code and cells

    def shape(self, pred: str) -> Shape:
        """``classify`` of a predicate's rule group, once per predicate."""
        sh = self.shapes.get(pred)
        if sh is None:
            sh = self.shapes[pred] = classify(self.groups.get(pred, []))
        return sh

    def fn(self, pred: str) -> Fn:
        f = self.fns.get(pred)
        if f is not None:
            return f
        # What ``pred`` reads is compiled first, in post-order and without recursion, so
        # compiling a deep expression (a long `+` chain) never recurses once per level.
        fns = self.fns
        order: list[str] = []
        seen = {pred}
        stack = [(pred, iter(self._deps(pred)))]
        while stack:
            p, deps = stack[-1]
            for d in deps:
                if d not in seen and d not in fns:
                    seen.add(d)
                    stack.append((d, iter(self._deps(d))))
                    break
            else:
                stack.pop()
                order.append(p)
        for p in order:
            if p not in fns:
                if p in REQUEST_VARS:
                    fns[p] = _request_var(p)
                else:
                    fns[p] = self._compile(p, self.groups.get(p, []))
        return fns[pred]

    def _deps(self, pred: str) -> tuple[str, ...]:
        """The predicates ``pred``'s compiled function calls."""
        if pred in REQUEST_VARS:
            return ()
        if self.specialize:
            shape = self.shape(pred)
            if shape.kind != "rules":
                return shape.preds
        return tuple(
            lit.pred for r in self.groups.get(pred, []) for lit in r.body if isinstance(lit, Atom)
        )

    # -- shapes -------------------------------------------------------------------------

    def _compile(self, pred: str, rules: Sequence[Rule]) -> Fn:
        if not self.specialize:
            return self._generic(pred, rules)
        shape = self.shape(pred)
        kind, preds = shape.kind, shape.preds
        if kind == "const":
            c = shape.value
            return lambda _r, _fx: c
        if kind == "alias":
            return self.fn(preds[0])
        if kind == "call":
            return self._call(shape)
        if kind == "not":
            a = self.fn(preds[0])

            def not_(r: Request, fx: EntityFacts) -> bool:
                v = a(r, fx)
                if v is True:
                    return False
                if v is False:
                    return True
                raise bool_error(v)

            return not_
        if kind in ("and", "or"):
            a, b = self.fn(preds[0]), self.fn(preds[1])
            short = kind == "or"  # the value of `a` that decides without `b`

            def and_or(r: Request, fx: EntityFacts) -> bool:
                x = a(r, fx)
                if x is short:
                    return short
                if x is not (not short):
                    raise bool_error(x)
                y = b(r, fx)
                if y is True or y is False:
                    return y
                raise bool_error(y)

            return and_or
        if kind == "if":
            c, t, e = (self.fn(p) for p in preds)

            def if_(r: Request, fx: EntityFacts) -> Any:
                v = c(r, fx)
                if v is True:
                    return t(r, fx)
                if v is False:
                    return e(r, fx)
                raise bool_error(v)

            return if_
        if kind == "and_then":
            c, t = self.fn(preds[0]), self.fn(preds[1])

            def and_then(r: Request, fx: EntityFacts) -> Any:
                v = c(r, fx)
                if v is False:
                    return False
                if v is True:
                    return t(r, fx)
                raise bool_error(v)

            return and_then
        return self._generic(pred, rules)

    def _call(self, shape: Shape) -> Fn:
        operands = [self.fn(p) for p in shape.preds]
        consts = shape.consts
        op = builtin(shape.op)
        nvars = len(operands)
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
        """The rule group through the interpreter, its operands compiled."""
        return group_function(pred, rules, self.fn)

    # -- scope ---------------------------------------------------------------------------

    def scope(self, pred: str) -> ScopeFn:
        """The scope rule as a conjunction of direct checks on the request."""
        rules = self.groups.get(pred, [])
        if len(rules) != 1:
            raise ValueError(f"scope predicate {pred} must have exactly one rule")
        return self.scope_fn(rules[0].body)

    def scope_fn(self, body: Sequence[Any]) -> ScopeFn:
        """Scope literals as one check (a conjunction, in order)."""
        bound: dict[str, str] = {}  # rule variable -> request variable
        checks: list[ScopeFn] = []
        for lit in body:
            check = _scope_check(lit, bound)
            if check is not None:
                checks.append(check)
        if not checks:
            return lambda _r, _fx: True
        if len(checks) == 1:
            return checks[0]
        if len(checks) == 2:
            c1, c2 = checks
            return lambda r, fx: c1(r, fx) and c2(r, fx)
        cs = tuple(checks)
        return lambda r, fx: all(c(r, fx) for c in cs)


def _scope_check(lit: Any, bound: dict[str, str]) -> ScopeFn | None:
    """One scope literal as a check; ``None`` when it only binds a variable."""
    if isinstance(lit, Atom):
        name = lit.pred
        if name not in REQUEST_VARS or len(lit.args) != 1 or lit.negated:
            raise ValueError(f"unsupported scope literal {lit}")
        t = lit.args[0]
        if isinstance(t, Const):
            c = t.value
            return lambda r, _fx: r.var(name) == c
        bound[t.name] = name
        if name == "principal":
            return lambda r, _fx: r.principal is not None
        return None
    if isinstance(lit, Builtin):
        if lit.op not in TESTS:
            raise ValueError(f"scope builtin {lit.op} is not a test")
        if (
            len(lit.args) != 2
            or not isinstance(lit.args[0], Var)
            or not isinstance(lit.args[1], Const)
        ):
            raise ValueError(f"unsupported scope literal {lit}")
        get = _getter(bound[lit.args[0].name])
        c = lit.args[1].value
        if lit.op == "scope_in":
            return lambda r, fx: (x := get(r)) == c or c in fx.ancestors_of(x)
        if lit.op == "scope_in_any":
            return lambda r, fx: (x := get(r)) in c or not c.isdisjoint(fx.ancestors_of(x))
        if lit.op == "scope_is":
            return lambda r, _fx: getattr(get(r), "type", None) == c
        op = builtin(lit.op)
        return lambda r, fx: bool(op(fx, get(r), c))
    raise ValueError(f"unsupported scope literal {lit}")


def _getter(name: str) -> Callable[[Request], Any]:
    if name == "principal":
        return lambda r: r.principal
    if name == "action":
        return lambda r: r.action
    if name == "resource":
        return lambda r: r.resource
    return lambda r: r.context


# -- candidate selection: the scope rules as index lookups --------------------------------

_KEY_RANK = {"eq": 3, "in": 2, "in_any": 1, "is": 0}


class ScopeKeys(Record):
    """A scope rule split into index keys and the literals left to check per request.

    Per request variable, ``keys`` holds the one literal the candidate index answers
    (``("eq", E)`` for ``var(E)``; ``("in", E)``, ``("in_any", S)``, ``("is", T)`` for
    ``scope_in``/``scope_in_any``/``scope_is`` on the variable). ``bound`` names the
    variables the rule mentions at all: with no value (a request without a principal) the
    scope cannot hold. ``residual`` is the rest of the body, bindings included, which the
    policy's function still checks.
    """

    __slots__ = ("bound", "keys", "residual")
    keys: dict[str, tuple[str, Any]]
    bound: frozenset[str]
    residual: tuple[Any, ...]

    def __init__(
        self, keys: dict[str, tuple[str, Any]], bound: frozenset[str], residual: tuple[Any, ...]
    ) -> None:
        _set(self, "keys", keys)
        _set(self, "bound", bound)
        _set(self, "residual", residual)


def scope_keys(body: Sequence[Any]) -> ScopeKeys:
    """Read a scope rule's body (the literals ``lower.py`` emits) into index keys."""
    var_of: dict[str, str] = {}  # rule variable -> request variable
    mentioned: set[str] = set()
    best: dict[str, tuple[int, int, tuple[str, Any]]] = {}  # var -> (rank, position, key)
    for i, lit in enumerate(body):
        key: tuple[str, Any] | None = None
        var = ""
        if isinstance(lit, Atom) and lit.pred in REQUEST_VARS and len(lit.args) == 1:
            if lit.negated:
                continue
            var = lit.pred
            mentioned.add(var)
            t = lit.args[0]
            if isinstance(t, Const):
                key = ("eq", t.value)
            else:
                var_of[t.name] = var
        elif (
            isinstance(lit, Builtin)
            and lit.op in ("scope_in", "scope_in_any", "scope_is")
            and len(lit.args) == 2
            and isinstance(lit.args[0], Var)
            and lit.args[0].name in var_of
            and isinstance(lit.args[1], Const)
        ):
            var = var_of[lit.args[0].name]
            key = (lit.op[len("scope_") :], lit.args[1].value)
        if key is not None:
            rank = _KEY_RANK[key[0]]
            if var not in best or rank > best[var][0]:
                best[var] = (rank, i, key)
    covered = {pos for _, pos, _ in best.values()}
    rest = [lit for i, lit in enumerate(body) if i not in covered]
    used = {
        t.name for lit in rest if isinstance(lit, Builtin) for t in lit.args if isinstance(t, Var)
    }
    residual = tuple(
        lit
        for lit in rest
        if not (
            isinstance(lit, Atom)
            and not lit.negated
            and lit.pred in REQUEST_VARS
            and len(lit.args) == 1
            and isinstance(lit.args[0], Var)
            and lit.args[0].name not in used
        )
    )
    return ScopeKeys({v: k for v, (_, _, k) in best.items()}, frozenset(mentioned), residual)


def key_holds(key: tuple[str, Any], v: EntityUID, ancestors: frozenset[EntityUID]) -> bool:
    """Whether a scope key holds for a request value with these strict ancestors."""
    kind, c = key
    if kind == "eq":
        return bool(v == c)
    if kind == "in":
        return bool(v == c or c in ancestors)
    if kind == "in_any":
        return v in c or not c.isdisjoint(ancestors)
    return bool(getattr(v, "type", None) == c)


class CompiledBackend:
    """A Program compiled for per-request decisions."""

    name = "compiled"

    MODES = ("codegen", "closures", "generic")

    def __init__(
        self, program: Program, *, mode: str = "codegen", background: bool = False
    ) -> None:
        """``mode``: ``codegen`` (conditions as generated Python functions), ``closures``
        (one closure per expression node) or ``generic`` (every rule group interpreted).
        All three run the same rules; tests check that they agree.

        ``background`` (codegen only): return with the closures in place; the policies'
        code is generated on a thread started by :meth:`generate_in_background`, each
        policy swapped to it when done. Compiling generated code is most of the load time
        of a small store, and a decision made in the meantime is the same, only slower
        (:meth:`wait_generated`)."""
        if mode not in self.MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {self.MODES}")
        self.program = program
        comp = Compiler(program, specialize=mode != "generic")
        tiered = mode == "codegen" and background
        if mode == "codegen":
            from polang.datalog.pycode import generate

            def cond(pred: str) -> Callable[[], Fn]:
                return lambda: generate(comp, pred)
        else:

            def cond(pred: str) -> Callable[[], Fn]:
                return lambda: comp.fn(pred)

        self.policies: list[CompiledPolicy] = []
        for info in program.policies.values():
            scope_rules = comp.groups.get(info.scope_pred, [])
            scope_fn = comp.scope(info.scope_pred)  # checks the rule's form
            keys = scope_keys(scope_rules[0].body)
            run: RunFn | None = None
            if mode == "codegen" and not tiered:
                from polang.datalog.pycode import generate_policy

                run = generate_policy(comp, keys.residual, info.cond_pred)
            cp = CompiledPolicy(info, scope_fn, _NO_RUN, keys, cond(info.cond_pred))
            if tiered:  # closures until the generated code is in (built now: no races)
                cp._cond = comp.fn(info.cond_pred)
            cp.run = run or _residual_run(comp.scope_fn(keys.residual), cp)
            self.policies.append(cp)
        self.decision_rules: list[Rule] = [
            r for r in program.rules if r.policy_id is None and r.head.pred in _DECISION_HEADS
        ]
        self._order = {cp.info.policy_id: i for i, cp in enumerate(self.policies)}
        self._plans: dict[tuple[EntityUID, frozenset[EntityUID]], _Plan] = {}
        self._combine = compile_compact(self.decision_rules, ("policy", "effect", "scope", "cond"))
        for p, n in (("policy", 1), ("effect", 2), ("scope", 1), ("cond", 2)):
            if self._combine.arity[p] != n:
                raise ValueError(f"decision rules use {p} with {self._combine.arity[p]} arguments")
        self._cond_grouped = self._combine.grouped.get("cond") == 1
        self._generated = threading.Event()
        self._pending: Compiler | None = comp if tiered else None
        if not tiered:
            self._generated.set()

    def generate_in_background(self) -> None:
        """Start the background tier (once; nothing to do unless built with
        ``background``). Separate from construction so the caller finishes its own
        loading first instead of sharing the interpreter with the thread."""
        comp, self._pending = self._pending, None
        if comp is not None and WASM:  # no threads there: the generated tier, now
            self._generate(comp)
        elif comp is not None:
            threading.Thread(
                target=self._generate, args=(comp,), name="polang-codegen", daemon=True
            ).start()

    def _generate(self, comp: Compiler) -> None:
        """The background tier: generated code for every policy, then fresh plans (the
        cached ones hold the closures; a decision under way keeps its plan)."""
        from polang.datalog.pycode import generate_policy

        try:
            for cp in self.policies:
                # Yield the interpreter before each policy: the thread that started this
                # one (and any request) runs on instead of waiting out a switch interval.
                time.sleep(0)
                fn = generate_policy(comp, cp.keys.residual, cp.info.cond_pred)
                if fn is not None:
                    cp.run = fn
            self._plans = {}
        finally:
            self._generated.set()

    def wait_generated(self, timeout: float | None = None) -> bool:
        """Whether every policy runs generated code (waiting up to ``timeout`` seconds)."""
        return self._generated.wait(timeout)

    def _plan(self, action: EntityUID, action_ancestors: frozenset[EntityUID]) -> _Plan:
        """Candidates for an action, indexed by principal and resource keys (cached)."""
        key = (action, action_ancestors)
        plans = self._plans  # once: a plan built while the background tier swaps functions
        plan = plans.get(key)  # goes to the cache that swap discards
        if plan is None:
            cands = [
                cp
                for cp in self.policies
                if "action" not in cp.keys.keys
                or key_holds(cp.keys.keys["action"], action, action_ancestors)
            ]
            plan = _Plan(cands, self._combine)
            if len(plans) < 10_000:
                plans[key] = plan
        return plan

    def decide(self, request: Request, facts: EntityFacts, *, trace: bool = False) -> RawDecision:
        if trace:
            plan = self._plan(request.action, facts.ancestors_of(request.action))
            return self._decide_traced(plan, request, facts)
        allow, reasons, errored, errs = self.outcome(request, facts)
        return RawDecision(
            allow,
            list(reasons),
            [(pid, errs.get(pid) or not_a_bool()) for pid in errored] if errored else [],
            [],
        )

    def outcome(
        self, request: Request, facts: EntityFacts
    ) -> tuple[bool, tuple[str, ...], tuple[str, ...], dict[str, EvaluationError]]:
        """The decision as ``(allow, reasons, erroring policy ids, errors by policy id)``:
        the reasons and ids in policy order, shared (callers copy what they hand out).

        Only the candidates whose indexed scope keys hold are run; each runs the rest of its
        scope (``OUT_OF_SCOPE`` when it fails) and then its condition. The combined decision
        depends only on which candidates ran (the runnable list ``select`` gives, one cached
        object per pair of index selections) and what each gave (out of scope, true, false,
        an error), so it is memoized on the runnable list by those outcomes: most requests
        land on a few. Each request's errors keep their own messages.
        """
        action = request.action
        action_ancestors = facts.ancestors_of(action)
        plan = self._plans.get((action, action_ancestors))
        if plan is None:
            plan = self._plan(action, action_ancestors)
        # the principal's and resource's entities are looked up once for all candidates
        get = facts.get
        principal = request.principal
        pe = None if principal is None else get(principal)
        re = get(request.resource)
        runnable = plan.select(request, facts)
        codes: list[Any] = []  # per runnable: OUT_OF_SCOPE, True, False or _ERRORED
        errs: dict[str, EvaluationError] = _NO_ERRORS
        for run, pids in runnable:
            try:
                v = run(request, facts, pe, re)
            except EvaluationError as e:
                if errs is _NO_ERRORS:
                    errs = {}
                for pid in pids:
                    errs[pid] = e
                codes.append(_ERRORED)
                continue
            if v is OUT_OF_SCOPE or v is True or v is False:
                codes.append(v)
            else:
                if errs is _NO_ERRORS:
                    errs = {}
                not_bool = bool_error(v)
                for pid in pids:
                    errs[pid] = not_bool
                codes.append(_ERRORED)
        key = tuple(codes)
        memo = runnable.memo
        hit = memo.get(key)
        if hit is None:
            hit = self._combined(plan, runnable, key)
            if len(memo) >= _Runnable.MAX_MEMO:
                memo.clear()
            memo[key] = hit
        return hit[0], hit[1], hit[2], errs

    def _combined(
        self, plan: _Plan, runnable: _Runnable, key: tuple[Any, ...]
    ) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
        """The decision rules over one outcome of a runnable list."""
        scope: set[str] = set()
        true: set[str] = set()  # cond(P, true)
        false: set[str] = set()  # cond(P, false)
        for (_, pids), v in zip(runnable, key, strict=True):
            if v is OUT_OF_SCOPE:
                continue
            scope |= pids
            if v is True:
                true |= pids
            elif v is False:
                false |= pids
        raw = self._decision(plan, scope, true, false, {}, [])
        return raw.allow, tuple(raw.reasons), tuple(pid for pid, _ in raw.errors)

    def decide_many(
        self, requests: Sequence[Request], facts: Sequence[EntityFacts]
    ) -> list[RawDecision]:
        """:meth:`decide` over many requests, each over its facts."""
        decide = self.decide
        return [decide(r, f) for r, f in zip(requests, facts, strict=True)]

    def _decide_traced(self, plan: _Plan, request: Request, facts: EntityFacts) -> RawDecision:
        """Every action candidate, with its scope and condition reported separately."""
        scope: set[str] = set()
        true: set[str] = set()
        false: set[str] = set()
        errs: dict[str, EvaluationError] = {}
        outcomes: list[PolicyOutcome] = []
        for cp in plan.policies:
            pid = cp.info.policy_id
            if not cp.scope(request, facts):
                outcomes.append(PolicyOutcome(pid, False))
                continue
            scope.add(pid)
            try:
                v = cp.cond(request, facts)
            except EvaluationError as e:
                errs[pid] = e
                outcomes.append(PolicyOutcome(pid, True, error=e))
                continue
            if v is True:
                true.add(pid)
            elif v is False:
                false.add(pid)
            else:
                errs[pid] = bool_error(v)
            outcomes.append(PolicyOutcome(pid, True, value=v, error=errs.get(pid)))
        return self._decision(plan, scope, true, false, errs, outcomes)

    def _decision(
        self,
        plan: _Plan,
        scope: set[str],
        true: set[str],
        false: set[str],
        errs: dict[str, EvaluationError],
        outcomes: list[PolicyOutcome],
    ) -> RawDecision:
        # policy(P) is given for the in-scope policies only: the others derive nothing
        # (every decision rule needs scope(P)), and the joins stay as small as the scope.
        combine = self._combine
        if self._cond_grouped:
            cond: Any = {True: true, False: false}
        else:
            cond = combine.to_compact(
                "cond", {(p, True) for p in true} | {(p, False) for p in false}
            )
        rels = combine.run(scope, plan.effect_facts, scope, cond)
        order = self._order
        reasons = rels["reason"]
        reason_list = sorted(reasons, key=order.__getitem__) if len(reasons) > 1 else list(reasons)
        errored = rels["errored"]
        errors = [(p, errs.get(p) or not_a_bool()) for p in errored]
        if len(errors) > 1:
            errors.sort(key=lambda pe: order[pe[0]])
        return RawDecision(bool(rels["allow"]), reason_list, errors, outcomes)


def _residual_run(scope: ScopeFn, policy: CompiledPolicy) -> RunFn:
    """Scope rest and condition in one call, where no generated function exists."""

    def run(r: Request, fx: EntityFacts, _pe: Any, _re: Any) -> Any:
        if not scope(r, fx):
            return OUT_OF_SCOPE
        return policy.cond(r, fx)

    return run


def _no_run(_r: Request, _fx: EntityFacts, _pe: Any, _re: Any) -> Any:
    raise AssertionError("policy function not set")  # replaced before any use


_NO_RUN: RunFn = _no_run


_Dim = tuple[
    int,  # positions that do not mention the variable
    int,  # positions that mention it with no index key
    dict[Any, int],  # by `== E`
    dict[Any, int],  # by `in E` (and each member of `in [..]`)
    dict[str, int],  # by `is T`
]
"""One dimension's index; each set of candidate positions is an ``int`` with bit ``i`` set
for position ``i`` (a union or intersection is one C operation on a few machine words)."""

_ERRORED: Any = object()
"""A candidate's outcome in a memo key: it raised an error or gave a non-Bool value."""

_NO_ERRORS: dict[str, EvaluationError] = {}
"""The errors of a decision without any (shared: never written to)."""


class _Runnable(list[tuple[RunFn, frozenset[str]]]):
    """The candidates a request runs, as ``(run, policy ids)``, with the combined
    decisions already worked out for it by outcome tuple (``CompiledBackend.outcome``)."""

    __slots__ = ("memo",)

    MAX_MEMO = 256
    """Outcome tuples kept per list (a list's memo starts over when full)."""

    memo: dict[tuple[Any, ...], tuple[bool, tuple[str, ...], tuple[str, ...]]]


class _Plan:
    """The candidates of one action, with principal/resource indexes over them.

    ``select`` answers a request from two caches: per dimension, the candidate positions
    of a request value (valid while the facts give that value the same ancestor set, an
    identity check), and per set of positions both dimensions allow the runnable list.
    Many principal and resource pairs allow the same few policies, so they share one
    runnable list and its memo of combined decisions. Both caches are bounded.
    """

    __slots__ = ("_dim_cache", "_runnables", "dims", "effect_facts", "policies")

    MAX_CACHE = 50_000

    def __init__(self, policies: list[CompiledPolicy], combine: CompactRules) -> None:
        self.policies = policies
        self.effect_facts = combine.to_compact(
            "effect", {(cp.info.policy_id, cp.info.effect) for cp in policies}
        )
        self.dims: list[_Dim] = []
        for var in ("principal", "resource"):
            absent = bound = 0
            eq: dict[Any, int] = {}
            in_: dict[Any, int] = {}
            by_type: dict[str, int] = {}
            for pos, cp in enumerate(policies):
                bit = 1 << pos
                key = cp.keys.keys.get(var)
                if key is None:
                    if var in cp.keys.bound:
                        bound |= bit
                    else:
                        absent |= bit
                elif key[0] == "eq":
                    eq[key[1]] = eq.get(key[1], 0) | bit
                elif key[0] == "in":
                    in_[key[1]] = in_.get(key[1], 0) | bit
                elif key[0] == "in_any":
                    for c in key[1]:
                        in_[c] = in_.get(c, 0) | bit
                else:
                    by_type[key[1]] = by_type.get(key[1], 0) | bit
            self.dims.append((absent, bound, eq, in_, by_type))
        self._dim_cache: list[dict[Any, tuple[frozenset[EntityUID], int]]] = [{}, {}]
        self._runnables: dict[int, _Runnable] = {}

    def _positions(self, d: int, v: EntityUID | None, facts: EntityFacts) -> int:
        absent, bound, eq, in_, by_type = self.dims[d]
        if v is None:
            return absent
        anc = facts.ancestors_of(v)
        cache = self._dim_cache[d]
        hit = cache.get(v)
        if hit is not None and hit[0] is anc:
            return hit[1]
        out = absent | bound | by_type.get(v.type, 0) | eq.get(v, 0)
        if in_:
            get = in_.get
            out |= get(v, 0)
            for a in anc:
                out |= get(a, 0)
        if len(cache) >= self.MAX_CACHE:
            cache.clear()
        cache[v] = (anc, out)
        return out

    def select(self, request: Request, facts: EntityFacts) -> _Runnable:
        """The candidates whose indexed keys hold, as ``(run, policy ids)``: policies with
        one shared function (equal residual scope and condition) are run once."""
        # the positions' cache hits inline (two calls less per request)
        anc_of = facts.ancestors_of
        p = request.principal
        if p is None:
            ps = self.dims[0][0]
        else:
            hit = self._dim_cache[0].get(p)
            ps = hit[1] if hit is not None and hit[0] is anc_of(p) else self._positions(0, p, facts)
        r = request.resource
        hit = self._dim_cache[1].get(r)
        rs = hit[1] if hit is not None and hit[0] is anc_of(r) else self._positions(1, r, facts)
        both = ps & rs
        out = self._runnables.get(both)
        if out is None:
            pols = self.policies
            groups: dict[RunFn, list[str]] = {}
            rest = both
            while rest:  # the positions in order, lowest bit first
                low = rest & -rest
                cp = pols[low.bit_length() - 1]
                groups.setdefault(cp.run, []).append(cp.info.policy_id)
                rest ^= low
            out = _Runnable((run, frozenset(pids)) for run, pids in groups.items())
            out.memo = {}
            if len(self._runnables) >= self.MAX_CACHE:
                self._runnables.clear()
            self._runnables[both] = out
        return out


_DECISION_HEADS = frozenset(
    {"applies", "errored", "forbidden", "permitted", "allow", "deny", "reason"}
)
