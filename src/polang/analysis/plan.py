"""Plans for list endpoints: which rows of one resource type may this caller see.

A plan is the policies partially evaluated for one caller (a principal, or tokens), one
action and one resource *type*, with the resource unknown as a whole
(:class:`~polang.datalog.eval.partial.Unknowns` with ``resource=T``): everything known
(the principal, the context, the tokens' entities, the store's entities) is evaluated by
the one interpreter, and what is left of each policy is a residual over ``resource``
alone, whose rows the service's own database can then filter (``polang.filtering``).

Its meaning on a row (the row read as the resource entity, over the same entities) is the
language's decision rule: the row is allowed iff some permit residual is ``true``
(without error) and no forbid residual is ``true``. An erroring residual neither permits
nor forbids. :meth:`Plan.allows` evaluates exactly that with the interpreter.

The residuals are made small by rewrites that are exact under the language's three
outcomes (a value, ``false``, an error): a part with no ``resource`` in it is folded to
its value (or to :data:`ERROR` when it errs); ``false && x`` is ``false``, ``true && x``
is ``x`` when ``x`` is surely a Bool; and at the top of a residual, where only "exactly
``true``" counts, an error is as good as ``false`` (so ``x && <error>`` is ``false`` and
``x || <error>`` is ``x``). A permit that can never be ``true`` is dropped; a forbid that
is always ``true`` makes the plan ``always_denied``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from polang.datalog.builtins import builtin
from polang.datalog.eval.interpreter import Evaluation, policy_outcome
from polang.datalog.eval.partial import Unknown, Unknowns
from polang.datalog.eval.residual import Residual, value_expr
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Builtin, Const, PolicyInfo, Rule
from polang.datalog.lower import LoweringError, lower_policy
from polang.errors import EvaluationError, PolangError, RequestError
from polang.language import ast
from polang.language.entities import Entity
from polang.language.extensions import SIGNATURES
from polang.language.values import EntityUID, RecordValue

__all__ = ["ERROR", "KINDS", "MAX_PLANNED_ACTIONS", "MAX_PLANNED_TYPES", "Plan", "is_error", "plan"]

KINDS = ("always_allowed", "always_denied", "conditional")
"""A plan's kinds: every row allowed, none, or the rows its residuals allow."""

ERROR: ast.Expr = ast.Binary("+", ast.Lit(1), ast.Lit(True))
"""A part of a residual that errs whatever the row is (a known part that erred), written
as an expression of the language that always errs (``1 + true``): evaluated again, it
errs again. A translator recognises it with :func:`is_error`."""

MAX_PLANNED_ACTIONS = 4096
"""(action, its ancestors) pairs whose candidate policies an authorizer's planning keeps;
the cache is emptied when it reaches this many (a bound on memory, never on a plan)."""

MAX_PLANNED_TYPES = 256
"""Resource types whose row-only outcomes an authorizer's planning keeps (the same)."""

TRUE = ast.Lit(True)
FALSE = ast.Lit(False)

_BOOL_METHODS = frozenset({"contains", "containsAll", "containsAny", "isEmpty", "hasTag"}) | {
    name for name, sig in SIGNATURES.items() if sig.style == "method" and sig.returns == "Bool"
}
"""Methods whose value, when they do not err, is a Bool."""

_BOOL_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "&&", "||"})


def is_error(e: ast.Expr) -> bool:
    """Whether ``e`` is :data:`ERROR` (a part that errs whatever the row is)."""
    return e == ERROR


def _err(e: ast.Expr) -> bool:
    return e is ERROR  # (the simplifier writes the one object; `is_error` compares)


def _true(e: ast.Expr) -> bool:
    return type(e) is ast.Lit and e.value is True


def _false(e: ast.Expr) -> bool:
    return type(e) is ast.Lit and e.value is False


class Plan:
    """Which rows of one resource type a caller may do one action on (module docstring).

    ``kind``: one of :data:`KINDS`; ``residuals``: a conditional plan's permits and
    forbids over ``resource`` (an ``always_allowed`` or ``always_denied`` plan has none);
    a permit whose residual is ``true`` allows every row no forbid residual catches.
    """

    __slots__ = (
        "_checker",
        "action",
        "context",
        "facts",
        "kind",
        "principal",
        "residuals",
        "resource_type",
    )

    def __init__(
        self,
        kind: str,
        principal: EntityUID | None,
        action: EntityUID,
        resource_type: str,
        residuals: Sequence[Residual],
        *,
        context: RecordValue | None = None,
        facts: EntityFacts | None = None,
    ) -> None:
        self.kind = kind
        self.principal = principal
        self.action = action
        self.resource_type = resource_type
        self.residuals: tuple[Residual, ...] = tuple(residuals)
        self.context = RecordValue() if context is None else context
        self.facts = facts  # the entities the plan was made over (rows are laid on them)
        self._checker: tuple[dict[str, list[Rule]], list[PolicyInfo]] | None = None

    @property
    def permits(self) -> tuple[Residual, ...]:
        return tuple(r for r in self.residuals if r.effect == "permit")

    @property
    def forbids(self) -> tuple[Residual, ...]:
        return tuple(r for r in self.residuals if r.effect == "forbid")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the plan's kind, request and residuals (each condition in policy
        syntax, and as the JSON policy form's expression)."""
        from polang.language.format import expr_to_json  # the formatter: printing only

        return {
            "kind": self.kind,
            "principal": None if self.principal is None else self.principal.to_json(),
            "action": self.action.to_json(),
            "resource_type": self.resource_type,
            "residuals": [
                {
                    "policy_id": r.policy_id,
                    "effect": r.effect,
                    "condition": r.text(),
                    "expr": expr_to_json(r.expr),
                }
                for r in self.residuals
            ],
        }

    def text(self) -> str:
        """The plan in policy syntax: a comment line, then each residual as a policy of
        its own (the text parses back as a policy set)."""
        from polang.language.format import format_expr  # the formatter: printing only

        who = "no principal (tokens)" if self.principal is None else f"principal {self.principal}"
        lines = [
            f"// plan {self.kind}: {who}, action {self.action}, resource is {self.resource_type}"
        ]
        for r in self.residuals:
            lines.append(f"@id({format_expr(ast.Lit(r.policy_id))})")  # quoted as the language
            lines.append(
                f"{r.effect} (principal, action, resource) when {{ {format_expr(r.expr)} }};"
            )
        return "\n".join(lines) + "\n"

    def allows(self, row: Entity) -> bool:
        """The plan's meaning on one row (the row as the resource entity, laid over the
        plan's entities), by the one interpreter: some permit residual ``true`` and no
        forbid residual ``true``. This is also the exact per-row check of a filter that is
        a superset."""
        if not isinstance(row, Entity):
            raise RequestError(f"allows: expected an Entity, got {type(row).__name__}")
        if self.kind != "conditional":
            return self.kind == "always_allowed"
        if row.uid.type != self.resource_type:
            return False
        groups, infos = self._program()
        facts = self.facts.with_entities([row]) if self.facts is not None else EntityFacts([row])
        ev = Evaluation(groups, Request(self.principal, self.action, row.uid, self.context), facts)
        permitted = False
        for info in infos:
            if policy_outcome(ev, info) is True:
                if info.effect == "forbid":
                    return False
                permitted = True
        return permitted

    def _program(self) -> tuple[dict[str, list[Rule]], list[PolicyInfo]]:
        got = self._checker
        if got is None:
            groups: dict[str, list[Rule]] = {}
            infos: list[PolicyInfo] = []
            for i, r in enumerate(self.residuals):
                rules, info = lower_policy(_as_policy(r.effect, r.expr), r.policy_id, i)
                for rule in rules:
                    groups.setdefault(rule.head.pred, []).append(rule)
                infos.append(info)
            got = self._checker = (groups, infos)
        return got

    def __repr__(self) -> str:
        return (
            f"Plan({self.kind}, principal={self.principal}, action={self.action}, "
            f"resource_type={self.resource_type!r}, residuals={len(self.residuals)})"
        )


def _as_policy(effect: str, expr: ast.Expr) -> ast.Policy:
    """``effect (principal, action, resource) when { expr };``."""
    return ast.Policy(
        "forbid" if effect == "forbid" else "permit",
        ast.ScopeConstraint("principal"),
        ast.ActionConstraint(),
        ast.ScopeConstraint("resource"),
        (ast.Condition("when", expr),),
    )


# ---------------------------------------------------------------- the Program, prepared


_SCOPE_TESTS = frozenset({"scope_in", "scope_in_any", "scope_is"})


def _entity_const(t: Any) -> bool:
    """A term that is an entity constant (or a set of them)."""
    if type(t) is not Const:
        return False
    v = t.value
    return type(v) is EntityUID or (
        isinstance(v, frozenset) and any(type(x) is EntityUID for x in v)
    )


class _Prepared:
    """What planning needs of an authorizer's Program, computed once: its groups, their
    forms, and per action the policies whose action scope may hold (a policy index, as
    the compiled backend keeps one: it only ever leaves out policies whose scope cannot
    hold, and the interpreter decides the rest)."""

    __slots__ = (
        "by_action",
        "by_type",
        "groups",
        "lock",
        "policies",
        "program",
        "row_only",
        "shapes",
    )

    def __init__(self, program: Any) -> None:
        self.program = program
        self.groups: dict[str, list[Rule]] = program.by_head()
        self.shapes: dict[str, Any] = {}
        self.policies: list[tuple[str, PolicyInfo, ast.Policy | None]] = [
            (pid, info, info.source) for pid, info in program.policies.items()
        ]
        self.by_action: dict[tuple[EntityUID, frozenset[EntityUID]], list[Any]] = {}
        self.row_only: dict[str, bool] = {}
        # per resource type: its unknown resource, and the outcomes of the predicates that
        # read nothing but the row (the same in every plan of that type)
        # (and the simplified residuals of the conditions among them, by the expression)
        self.by_type: dict[str, tuple[Unknown, dict[str, Any], dict[int, Any]]] = {}
        self.lock = threading.Lock()

    def reads_only_the_row(self, pred: str) -> bool:
        """Whether ``pred`` reads no request variable but ``resource`` and no entity data
        but the row's: no entity constant reaches a builtin, except as the bound of a
        scope test on the resource (``resource in E``). Its outcome in a plan is then the
        same in every plan of a resource type (nothing else it reads varies)."""
        got = self.row_only.get(pred)
        if got is not None:
            return got
        if pred in REQUEST_VARS:
            return pred == "resource"
        self.row_only[pred] = False  # (value predicates are not recursive)
        ok = True
        for rule in self.groups.get(pred, ()):
            if any(_entity_const(t) for t in rule.head.args):
                ok = False
            for lit in rule.body:
                if isinstance(lit, Builtin):
                    if lit.op not in _SCOPE_TESTS and any(_entity_const(t) for t in lit.args):
                        ok = False
                elif lit.pred != "resource" and (
                    any(_entity_const(t) for t in lit.args) or not self.reads_only_the_row(lit.pred)
                ):
                    ok = False
                if not ok:
                    break
            if not ok:
                break
        self.row_only[pred] = ok
        return ok

    def for_type(self, rtype: str) -> tuple[Unknown, dict[str, Any], dict[int, Any]]:
        got = self.by_type.get(rtype)
        if got is None:
            with self.lock:
                if len(self.by_type) >= MAX_PLANNED_TYPES:
                    self.by_type.clear()
                got = self.by_type.setdefault(
                    rtype,
                    (Unknowns(self.groups, resource=rtype).variable("resource"), {}, {}),  # type: ignore[arg-type]
                )
        return got

    def candidates(
        self, action: EntityUID, facts: EntityFacts
    ) -> list[tuple[str, PolicyInfo, ast.Policy | None]]:
        anc = facts.ancestors_of(action)
        key = (action, anc)
        got = self.by_action.get(key)
        if got is None:
            got = [t for t in self.policies if t[2] is None or _action_may(t[2], action, anc)]
            with self.lock:
                if len(self.by_action) >= MAX_PLANNED_ACTIONS:
                    self.by_action.clear()
                self.by_action[key] = got
        return got


def _action_may(p: ast.Policy, action: EntityUID, anc: frozenset[EntityUID]) -> bool:
    """Whether ``p``'s action scope may hold for ``action`` (false: it surely does not)."""
    c = p.action
    if c.kind == "any":
        return True
    if c.kind == "eq":
        return c.entities[0] == action
    return any(e == action or e in anc for e in c.entities)


def _scope_may(
    p: ast.Policy,
    principal: EntityUID | None,
    rows_above: bool,
    anc: frozenset[EntityUID],
    rtype: str,
) -> bool:
    """Whether ``p``'s principal and resource scopes may hold (false: they surely do
    not). ``rows_above``: an entity of the resource's type is the principal or one of
    its ancestors, so the row may be on the principal's path: ``in`` is left open."""
    c = p.principal
    if c.kind != "any":
        if principal is None:
            return False  # a principal scope never holds in a request without one
        if c.kind == "eq" and c.entity != principal:
            return False
        if c.kind in ("is", "is_in") and principal.type != c.entity_type:
            return False
        if (
            c.kind in ("in", "is_in")
            and not rows_above
            and not (c.entity == principal or c.entity in anc)
        ):
            return False
    r = p.resource
    if r.kind in ("is", "is_in") and r.entity_type != rtype:
        return False
    return not (r.kind == "eq" and isinstance(r.entity, EntityUID) and r.entity.type != rtype)


_PREPARED: weakref.WeakKeyDictionary[Any, _Prepared] = weakref.WeakKeyDictionary()
_PREPARED_LOCK = threading.Lock()


def _prepared(authorizer: Any) -> _Prepared:
    """The authorizer's prepared Program (cached per authorizer and Program)."""
    program = authorizer.program
    with _PREPARED_LOCK:
        got = _PREPARED.get(authorizer)
        if got is None or got.program is not program:
            got = _PREPARED[authorizer] = _Prepared(program)
        return got


# ---------------------------------------------------------------- planning


def plan(
    authorizer: Any,
    action: EntityUID,
    resource_type: str,
    facts: EntityFacts,
    *,
    principal: EntityUID | None = None,
    context: RecordValue | None = None,
) -> Plan:
    """The plan of ``action`` on the rows of ``resource_type`` for ``principal`` (``None``:
    a request without one, as with tokens) in ``context``, over ``facts`` (the store's
    entities with the request's laid over them). The caller has read and checked the
    request (``Engine.plan`` does, as ``authorize_unsigned`` does)."""
    prep = _prepared(authorizer)
    groups = prep.groups
    ctx = RecordValue() if context is None else context
    request = Request(principal, action, EntityUID(resource_type, ""), ctx)
    row, known, tops = prep.for_type(resource_type)
    unknowns = Unknowns(groups, resource=resource_type, shapes=prep.shapes, value=row)
    ev = Evaluation(groups, request, facts, unknowns=unknowns)
    ev.memo.update(known)  # what reads only the row: evaluated once per resource type
    simplifier = _Simplifier(request, facts)
    if principal is None:
        anc: frozenset[EntityUID] = frozenset()
        rows_above = False
    else:
        anc = facts.ancestors_of(principal)
        rows_above = principal.type == resource_type or any(a.type == resource_type for a in anc)
    permits: list[Residual] = []
    forbids: list[Residual] = []
    always_permit: Residual | None = None
    a_anc = facts.ancestors_of(action)
    if action.type == resource_type or any(a.type == resource_type for a in a_anc):
        cands = prep.policies  # the row may be on the action's path: no action index
    else:
        cands = prep.candidates(action, facts)
    for pid, info, source in cands:
        if source is not None and not _scope_may(source, principal, rows_above, anc, resource_type):
            continue
        if not ev.outcome(info.scope_pred)[0] or not ev.outcome(info.cond_pred)[0]:
            continue  # out of scope, or a condition that errs whatever the row is
        out = policy_outcome(ev, info)
        if out is True:
            expr: ast.Expr = TRUE
        elif type(out) is Residual:
            e = out.expr
            hit = tops.get(id(e))
            if hit is not None and hit[0] is e:  # a row-only condition, simplified before
                expr = hit[1]
            else:
                expr = simplifier.top(e)
                cond = known.get(info.cond_pred)
                if cond is not None and type(cond[1]) is Unknown and cond[1].expr is e:
                    tops[id(e)] = (e, expr)  # the same in every plan of this type
        else:
            continue  # out of scope, false, or an error whatever the row is
        if _false(expr) or _err(expr):
            continue  # never exactly true: it neither permits nor forbids
        if info.effect == "forbid":
            if _true(expr):
                return Plan("always_denied", principal, action, resource_type, (), context=ctx)
            forbids.append(Residual(pid, "forbid", expr))
        elif _true(expr):
            if always_permit is None:
                always_permit = Residual(pid, "permit", TRUE)
        else:
            permits.append(Residual(pid, "permit", expr))
    _keep(prep, known, ev.memo)
    if forbids:  # a permit that a forbid of the same condition always overrides adds no row
        caught = {f.expr for f in forbids}
        permits = [p for p in permits if p.expr not in caught]
    if always_permit is not None:
        permits = [always_permit]  # the others add no row it does not already allow
        if not forbids:
            return Plan("always_allowed", principal, action, resource_type, (), context=ctx)
    if not permits:
        return Plan("always_denied", principal, action, resource_type, (), context=ctx)
    return Plan(
        "conditional",
        principal,
        action,
        resource_type,
        (*permits, *forbids),
        context=ctx,
        facts=facts,
    )


def _keep(prep: _Prepared, known: dict[str, Any], memo: dict[str, Any]) -> None:
    """Keep the outcomes of this plan's predicates that read only the row."""
    new = [p for p in memo if p not in known and prep.reads_only_the_row(p)]
    if new:
        for p in new:
            ok, v = memo[p]
            if ok and type(v) is Unknown:
                v.expr  # noqa: B018  (built now: other threads' plans only read it)
        with prep.lock:
            for p in new:
                known.setdefault(p, memo[p])


# ---------------------------------------------------------------- simplification


def _boolish(e: ast.Expr) -> bool:
    """Whether ``e``'s value, when it does not err, is surely a Bool."""
    t = type(e)
    if t is ast.Lit:
        return type(e.value) is bool  # type: ignore[union-attr]
    if t is ast.Binary:
        return e.op in _BOOL_OPS  # type: ignore[union-attr]
    if t is ast.Unary:
        return e.op == "!"  # type: ignore[union-attr]
    if t is ast.Has or t is ast.Like or t is ast.Is:
        return True
    if t is ast.MethodCall:
        return e.name in _BOOL_METHODS  # type: ignore[union-attr]
    if t is ast.If:
        return _boolish(e.then) and _boolish(e.else_)  # type: ignore[union-attr]
    return False


def _and(a: ast.Expr, b: ast.Expr, top: bool) -> ast.Expr:
    """``a && b`` over simplified operands (``top``: only "exactly true" counts)."""
    if _false(a) or _err(a):
        return a
    if _true(a):
        return b if top or _boolish(b) or _err(b) else ast.Binary("&&", a, b)
    if _true(b) and (top or _boolish(a)):
        return a
    if top and (_false(b) or _err(b)):
        return FALSE  # false, or an error: never exactly true
    return ast.Binary("&&", a, b)


def _or(a: ast.Expr, b: ast.Expr, top: bool) -> ast.Expr:
    """``a || b`` over simplified operands."""
    if _true(a) or _err(a):
        return a
    if _false(a):
        return b if top or _boolish(b) or _err(b) else ast.Binary("||", a, b)
    if _false(b) and (top or _boolish(a)):
        return a
    if top and _err(b):
        return a  # true when a is; otherwise false or an error
    return ast.Binary("||", a, b)


def _not(a: ast.Expr, top: bool) -> ast.Expr:
    if type(a) is ast.Lit and type(a.value) is bool:
        return ast.Lit(not a.value)
    if _err(a):
        return a
    if type(a) is ast.Unary and a.op == "!" and (top or _boolish(a.arg)):
        return a.arg
    return ast.Unary("!", a)


class _Simplifier:
    """Rewrites a residual into a smaller one of the same meaning (module docstring):
    the request's known variables become their values, parts without ``resource`` are
    folded by the interpreter, and the boolean rules apply."""

    __slots__ = ("facts", "folded", "request")

    def __init__(self, request: Request, facts: EntityFacts) -> None:
        self.request = request
        self.facts = facts
        self.folded: dict[ast.Expr, ast.Expr] = {}

    def top(self, e: ast.Expr) -> ast.Expr:
        """A residual's whole condition: only whether it is exactly true counts."""
        return _conjuncts(self.expr(e, True)[0])

    def expr(self, e: ast.Expr, top: bool) -> tuple[ast.Expr, bool]:
        """``(simplified e, whether it reads the resource)``."""
        t = type(e)
        if t is ast.Lit or t is ast.EntityLit:
            return e, False
        if t is ast.Var:
            name = e.name  # type: ignore[union-attr]
            if name == "resource":
                return e, True
            v = self.request.var(name)
            if v is None:
                return ERROR, False  # `principal` in a request without one
            return value_expr(v), False
        if t is ast.Binary and e.op in ("&&", "||"):  # type: ignore[union-attr]
            return self._connective(e, top)  # type: ignore[arg-type]
        if t is ast.Unary and e.op == "!":  # type: ignore[union-attr]
            a, ra = self.expr(e.arg, False)  # type: ignore[union-attr]
            out = _not(a, top)
            return (out, ra) if ra else self.fold(out)
        if t is ast.If:
            return self._if(e, top)  # type: ignore[arg-type]
        if t is ast.Is and e.in_expr is not None:  # type: ignore[union-attr]
            return self._is_in(e)  # type: ignore[arg-type]
        # a strict operation: any operand that errs makes it err
        kids = ast.children(e)
        new: list[ast.Expr] = []
        reads = False
        for k in kids:
            s, r = self.expr(k, False)
            if _err(s):
                return ERROR, False
            new.append(s)
            reads = reads or r
        out = _rebuild(e, new) if any(a is not b for a, b in zip(new, kids, strict=True)) else e
        if reads:
            return out, True
        return self.fold(out)

    def _connective(self, e: ast.Binary, top: bool) -> tuple[ast.Expr, bool]:
        if e.op == "&&":
            a, ra = self.expr(e.left, top)
            if _false(a) or _err(a):
                return a, False
            b, rb = self.expr(e.right, top)
            out = _and(a, b, top)
        else:
            a, ra = self.expr(e.left, False)
            if _true(a) or _err(a):
                return a, False
            b, rb = self.expr(e.right, top)
            out = _or(a, b, top)
        if out is a:
            return out, ra
        if out is b:
            return out, rb
        if ra or rb:
            return out, type(out) is not ast.Lit
        return self.fold(out)

    def _is_in(self, e: ast.Is) -> tuple[ast.Expr, bool]:
        """``x is T in E``: ``E`` is read only when ``x`` is a ``T`` (not strict in it)."""
        x, rx = self.expr(e.expr, False)
        if _err(x):
            return ERROR, False
        y, ry = self.expr(e.in_expr, False)  # type: ignore[arg-type]
        out = ast.Is(x, e.entity_type, y)
        if rx or ry:
            return out, True
        return self.fold(out)

    def _if(self, e: ast.If, top: bool) -> tuple[ast.Expr, bool]:
        c, rc = self.expr(e.cond, False)
        if _true(c):
            return self.expr(e.then, top)
        if _false(c):
            return self.expr(e.else_, top)
        if _err(c):
            return ERROR, False
        x, _ = self.expr(e.then, top)
        y, _ = self.expr(e.else_, top)
        if not rc:  # a known condition that is not a Bool: the `if` errs
            return ERROR, False
        if top:
            if _false(y) or _err(y):
                return _and(c, x, True), True
            if _true(x):
                return _or(c, y, True), True
            if _false(x) or _err(x):
                return _and(_not(c, False), y, True), True
        if _true(x) and _false(y) and (top or _boolish(c)):
            return c, True
        return ast.If(c, x, y), True

    def fold(self, e: ast.Expr) -> tuple[ast.Expr, bool]:
        """A part that does not read the resource: its value as a literal, or
        :data:`ERROR`, by the interpreter."""
        if _is_value(e):
            return e, False
        got = self.folded.get(e)
        if got is None:
            got = self.folded[e] = self._evaluate(e)
        return got, False

    def _evaluate(self, e: ast.Expr) -> ast.Expr:
        try:
            rules, info = lower_policy(_as_policy("permit", e), "folded", 0)
        except (LoweringError, PolangError, ValueError):
            return ERROR  # not a value the language can compute (a Long out of range)
        groups: dict[str, list[Rule]] = {}
        for rule in rules:
            groups.setdefault(rule.head.pred, []).append(rule)
        ok, v = Evaluation(groups, self.request, self.facts).outcome(info.cond_pred)
        return value_expr(v) if ok else ERROR


def _conjuncts(e: ast.Expr) -> ast.Expr:
    """A residual's top ``&&`` chain without repeated conjuncts, and ``false`` when two
    conjuncts ask the same expression to equal two different literals: the chain is
    exactly true only when every conjunct is, and an expression has one value per row
    (evaluation is pure), so neither rewrite changes which rows it allows."""
    if not (type(e) is ast.Binary and e.op == "&&"):
        return e
    parts: list[ast.Expr] = []
    stack: list[ast.Expr] = [e]
    while stack:  # left to right
        x = stack.pop()
        if type(x) is ast.Binary and x.op == "&&":
            stack.append(x.right)
            stack.append(x.left)
        elif x not in parts:
            parts.append(x)
    wanted: dict[ast.Expr, tuple[type, Any]] = {}
    for x in parts:
        if type(x) is ast.Binary and x.op == "==":
            for subject, lit in ((x.left, x.right), (x.right, x.left)):
                v = _literal(lit)
                if (
                    v is not None
                    and _literal(subject) is None
                    and wanted.setdefault(subject, v) != v
                ):
                    return FALSE
    if len(parts) > ast.BALANCE_CHAIN_AFTER:
        return ast.join_balanced(parts, lambda a, b: ast.Binary("&&", a, b))
    out: ast.Expr = parts[0]
    for x in parts[1:]:
        out = ast.Binary("&&", out, x)
    return out


def _literal(e: ast.Expr) -> tuple[type, Any] | None:
    """A Bool, Long, String or entity literal as ``(its type, its value)``: two differ
    exactly when the values do (``1`` is not ``true``)."""
    if type(e) is ast.Lit:
        return (type(e.value), e.value)
    if type(e) is ast.EntityLit:
        return (EntityUID, e.uid)
    return None


def _is_value(e: ast.Expr) -> bool:
    """A literal value as :func:`value_expr` writes one (no evaluation needed)."""
    t = type(e)
    if t is ast.Lit or t is ast.EntityLit:
        return True
    if t is ast.SetLit:
        return all(_is_value(x) for x in e.elements)  # type: ignore[union-attr]
    if t is ast.RecordLit:
        return all(_is_value(x) for _, x in e.fields)  # type: ignore[union-attr]
    if t is ast.ExtCall and len(e.args) == 1 and type(e.args[0]) is ast.Lit:  # type: ignore[union-attr]
        arg = e.args[0].value  # type: ignore[union-attr]
        if type(arg) is not str:
            return False
        try:
            builtin(f"function:{e.name}")(None, arg)  # type: ignore[union-attr]
        except (EvaluationError, KeyError, LookupError):
            return False
        return True
    return False


def _rebuild(e: ast.Expr, kids: list[ast.Expr]) -> ast.Expr:
    """``e`` with its children (in :func:`ast.children`'s order) replaced."""
    if isinstance(e, ast.Unary):
        return ast.Unary(e.op, kids[0])
    if isinstance(e, ast.Binary):
        return ast.Binary(e.op, kids[0], kids[1])
    if isinstance(e, ast.Has):
        return ast.Has(kids[0], e.attr)
    if isinstance(e, ast.Like):
        return ast.Like(kids[0], e.pattern)
    if isinstance(e, ast.Is):
        return ast.Is(kids[0], e.entity_type, kids[1] if len(kids) > 1 else None)
    if isinstance(e, ast.GetAttr):
        return ast.GetAttr(kids[0], e.attr)
    if isinstance(e, ast.MethodCall):
        return ast.MethodCall(kids[0], e.name, tuple(kids[1:]))
    if isinstance(e, ast.ExtCall):
        return ast.ExtCall(e.name, tuple(kids))
    if isinstance(e, ast.If):
        return ast.If(kids[0], kids[1], kids[2])
    if isinstance(e, ast.SetLit):
        return ast.SetLit(tuple(kids))
    if isinstance(e, ast.RecordLit):
        return ast.RecordLit(tuple((k, v) for (k, _), v in zip(e.fields, kids, strict=True)))
    return e
