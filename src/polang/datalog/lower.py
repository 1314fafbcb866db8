"""AST -> Datalog rules: the only place where the language's semantics become logic.

Every expression node ``n`` of a policy becomes a *value predicate* ``n(X)``: its rules
derive the value the node evaluates to, or nothing when evaluation errors. Booleans need
care to keep the three outcomes (true / false / error) apart; with ``a`` and ``b`` the
operands' predicates::

    a && b:  n(false) :- a(false).   n(true) :- a(true), b(true).   n(false) :- a(true), b(false).
    a || b:  n(true) :- a(true).     n(true) :- a(false), b(true).  n(false) :- a(false), b(false).
    !a:      n(false) :- a(true).    n(true) :- a(false).
    if c then a else b:  n(X) :- c(true), a(X).   n(X) :- c(false), b(X).

An operand that evaluates to a non-Bool matches none of these, so ``n`` errors, as the
language says. Every other node is one rule whose body evaluates the operands left to
right and ends in a builtin (``X = get_attr(O, "name")``) that binds the result or fails
with the evaluation error. Bodies keep source order, so the first error derived is the
language's first error.

Per policy ``p`` the lowering also emits the bridge facts and rules that
``rules/decision.dl`` joins: ``policy(p)``, ``effect(p, E)``, ``scope(p) :- ...`` and
``cond(p, V) :- <condition>(V)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from polang.datalog.fixed_rules import fixed_rules
from polang.datalog.ir import Atom, Builtin, Const, Literal, PolicyInfo, Program, Rule, Var
from polang.language import ast
from polang.language.values import check_long

TRUE = Const(True)
FALSE = Const(False)

_BINARY_BUILTINS = {
    "==": "eq",
    "!=": "neq",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "+": "add",
    "-": "sub",
    "*": "mul",
    "in": "in",
}


class LoweringError(Exception):
    """The AST cannot be lowered (an unlinked template slot): a caller bug, not user data."""


class _PolicyLowerer:
    def __init__(self, policy_id: str, prefix: str) -> None:
        self.policy_id = policy_id
        self.prefix = prefix
        self.rules: list[Rule] = []
        self.counter = 0
        self.var_counter = 0
        self.nodes: dict[str, ast.Expr] = {}  # value predicate -> the expression it computes

    # -- helpers --------------------------------------------------------------------------

    def fresh_pred(self) -> str:
        self.counter += 1
        return f"{self.prefix}_e{self.counter}"

    def fresh_var(self) -> Var:
        self.var_counter += 1
        return Var(f"X{self.var_counter}")

    def rule(self, head: Atom, body: Sequence[Literal], span: ast.Span | None = None) -> None:
        self.rules.append(Rule(head, tuple(body), self.policy_id, span))

    # -- expressions ---------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> str:
        """Emit the rules of ``e``; return the name of its value predicate."""
        n = self.fresh_pred()
        X = Var("X")
        span = e.span
        if isinstance(e, ast.Lit):
            value = e.value
            if type(value) is int:
                check_long(value)
            self.rule(Atom(n, (Const(value),)), (), span)
        elif isinstance(e, ast.EntityLit):
            self.rule(Atom(n, (Const(e.uid),)), (), span)
        elif isinstance(e, ast.Var):
            self.rule(Atom(n, (X,)), (Atom(e.name, (X,)),), span)
        elif isinstance(e, ast.Slot):
            raise LoweringError(f"template slot {e.name} is not linked")
        elif isinstance(e, ast.Unary):
            a = self.expr(e.arg)
            if e.op == "!":
                self.rule(Atom(n, (FALSE,)), (Atom(a, (TRUE,)),), span)
                self.rule(Atom(n, (TRUE,)), (Atom(a, (FALSE,)),), span)
            else:
                A = Var("A")
                self.rule(Atom(n, (X,)), (Atom(a, (A,)), Builtin("neg", (A,), X, span)), span)
        elif isinstance(e, ast.Binary):
            if e.op in ("&&", "||"):
                self.binary(n, e)
            else:  # straight to `call`: one frame less per level of a long chain
                self.call(n, _BINARY_BUILTINS[e.op], [e.left, e.right], [], span)
        elif isinstance(e, ast.If):
            c = self.expr(e.cond)
            a = self.expr(e.then)
            b = self.expr(e.else_)
            self.rule(Atom(n, (X,)), (Atom(c, (TRUE,)), Atom(a, (X,))), span)
            self.rule(Atom(n, (X,)), (Atom(c, (FALSE,)), Atom(b, (X,))), span)
        elif isinstance(e, ast.Has):
            self.call(n, "has_attr", [e.expr], [Const(e.attr)], span)
        elif isinstance(e, ast.GetAttr):
            self.call(n, "get_attr", [e.expr], [Const(e.attr)], span)
        elif isinstance(e, ast.Like):
            # The pattern travels as text: `*` is the wildcard, `\*` and `\\` literal characters.
            pattern = [
                "*" if isinstance(p, ast.Wildcard) else ("\\" + p if p in ("*", "\\") else p)
                for p in e.pattern
            ]
            self.call(n, "like", [e.expr], [Const("".join(pattern))], span)
        elif isinstance(e, ast.Is):
            if e.in_expr is None:
                self.call(n, "is_type", [e.expr], [Const(e.entity_type)], span)
            else:
                # `e is T in E` means `e is T && e in E` (E not evaluated when the type differs).
                t = self.fresh_pred()
                self.call(t, "is_type", [e.expr], [Const(e.entity_type)], span)
                self.nodes[t] = ast.Is(e.expr, e.entity_type, None, span)
                i = self.expr(ast.Binary("in", e.expr, e.in_expr, span))
                self.rule(Atom(n, (FALSE,)), (Atom(t, (FALSE,)),), span)
                self.rule(Atom(n, (X,)), (Atom(t, (TRUE,)), Atom(i, (X,))), span)
        elif isinstance(e, ast.MethodCall):
            self.call(n, f"method:{e.name}", [e.receiver, *e.args], [], span)
        elif isinstance(e, ast.ExtCall):
            self.call(n, f"function:{e.name}", list(e.args), [], span)
        elif isinstance(e, ast.SetLit):
            self.call(n, "make_set", list(e.elements), [], span)
        elif isinstance(e, ast.RecordLit):
            keys = tuple(k for k, _ in e.fields)
            self.call(n, "make_record", [v for _, v in e.fields], [Const(keys)], span)
        else:  # pragma: no cover - the AST is closed
            raise LoweringError(f"cannot lower {type(e).__name__}")
        self.nodes[n] = e
        return n

    def call(
        self,
        n: str,
        op: str,
        operands: list[ast.Expr],
        consts: list[Const],
        span: ast.Span,
    ) -> None:
        """``n(X) :- o1(A1), ..., ok(Ak), X = op(A1, ..., Ak, consts...)``."""
        body: list[Literal] = []
        args: list[Var | Const] = []
        for i, o in enumerate(operands):
            p = self.expr(o)
            v = Var(f"A{i + 1}")
            body.append(Atom(p, (v,)))
            args.append(v)
        X = Var("X")
        body.append(Builtin(op, (*args, *consts), X, span))
        self.rule(Atom(n, (X,)), body, span)

    def binary(self, n: str, e: ast.Binary) -> None:
        span = e.span
        if e.op in ("&&", "||"):
            a = self.expr(e.left)
            b = self.expr(e.right)
            short, other = (FALSE, TRUE) if e.op == "&&" else (TRUE, FALSE)
            self.rule(Atom(n, (short,)), (Atom(a, (short,)),), span)
            self.rule(Atom(n, (TRUE,)), (Atom(a, (other,)), Atom(b, (TRUE,))), span)
            self.rule(Atom(n, (FALSE,)), (Atom(a, (other,)), Atom(b, (FALSE,))), span)
            return
        self.call(n, _BINARY_BUILTINS[e.op], [e.left, e.right], [], span)

    # -- scope -----------------------------------------------------------------------------

    def scope_literals(self, c: ast.ScopeConstraint) -> list[Literal]:
        if c.kind == "any":
            return []  # holds for any value, and for a request without a principal
        v = Var(c.var[0].upper())
        lits: list[Literal] = [Atom(c.var, (v,))]
        ent = c.entity
        if isinstance(ent, ast.Slot):
            raise LoweringError(f"template slot {ent.name} is not linked")
        if c.kind in ("is", "is_in"):
            lits.append(Builtin("scope_is", (v, Const(c.entity_type)), None, c.span))
        if c.kind == "eq":
            lits.append(Atom(c.var, (Const(ent),)))
        elif c.kind in ("in", "is_in"):
            lits.append(Builtin("scope_in", (v, Const(ent)), None, c.span))
        return lits

    def action_literals(self, c: ast.ActionConstraint) -> list[Literal]:
        A = Var("A")
        if c.kind == "any":
            return []
        if c.kind == "eq":
            return [Atom("action", (Const(c.entities[0]),))]
        if c.kind == "in":
            return [
                Atom("action", (A,)),
                Builtin("scope_in", (A, Const(c.entities[0])), None, c.span),
            ]
        return [
            Atom("action", (A,)),
            Builtin("scope_in_any", (A, Const(frozenset(c.entities))), None, c.span),
        ]

    # -- policy ------------------------------------------------------------------------------

    def policy(self, p: ast.Policy) -> PolicyInfo:
        pid = Const(self.policy_id)
        scope_pred = f"{self.prefix}_scope"
        body = [
            *self.scope_literals(p.principal),
            *self.action_literals(p.action),
            *self.scope_literals(p.resource),
        ]
        self.rule(Atom(scope_pred), body, p.span)
        cond = self.condition(p)
        self.rule(Atom("policy", (pid,)), (), p.span)
        self.rule(Atom("effect", (pid, Const(p.effect))), (), p.span)
        self.rule(Atom("scope", (pid,)), (Atom(scope_pred),), p.span)
        V = Var("V")
        self.rule(Atom("cond", (pid, V)), (Atom(cond, (V,)),), p.span)
        return PolicyInfo(
            policy_id=self.policy_id,
            effect=p.effect,
            scope_pred=scope_pred,
            cond_pred=cond,
            span=p.span,
            source=p,
            nodes=self.nodes,
        )

    def condition(self, p: ast.Policy) -> str:
        """The policy's condition: ``when`` bodies and negated ``unless`` bodies, in order."""
        parts: list[ast.Expr] = []
        for c in p.conditions:
            parts.append(c.body if c.kind == "when" else ast.Unary("!", c.body, c.span))
        if not parts:
            return self.expr(ast.Lit(True, p.span))
        if len(parts) > ast.BALANCE_CHAIN_AFTER:  # many clauses: joined balanced
            return self.expr(ast.join_balanced(parts, lambda a, b: ast.Binary("&&", a, b, b.span)))
        e = parts[0]
        for nxt in parts[1:]:
            e = ast.Binary("&&", e, nxt, nxt.span)
        return self.expr(e)


def lower_policy(policy: ast.Policy, policy_id: str, index: int) -> tuple[list[Rule], PolicyInfo]:
    """The rules of one (static or linked) policy."""
    lw = _PolicyLowerer(policy_id, f"p{index}")
    info = lw.policy(policy)
    return lw.rules, info


def lower_policies(policies: Iterable[tuple[str, ast.Policy]]) -> Program:
    """A whole program: every policy's rules plus the fixed decision and hierarchy rules."""
    prog = Program()
    for i, (pid, p) in enumerate(policies):
        rules, info = lower_policy(p, pid, i)
        prog.extend(rules)
        prog.policies[pid] = info
    prog.extend(fixed_rules("hierarchy"))
    prog.extend(fixed_rules("decision"))
    return prog
