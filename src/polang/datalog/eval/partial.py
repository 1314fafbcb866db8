"""Unknown values: what a partial evaluation leaves open, with the residual it is.

:class:`Unknowns` says which request data is unknown: the whole context, and the
entities a query does not hold (their attributes, tags and ancestors; the ancestors the
store knows still hold). The interpreter (:mod:`.interpreter`) asks it for every builtin
call; a call over an unknown is an :class:`Unknown` whose expression is the call itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.datalog.builtins import builtin
from polang.datalog.eval.residual import call_expr, shape_expr, source_expr, value_expr
from polang.datalog.eval.shapes import classify
from polang.datalog.ir import Builtin, Const, Rule
from polang.language import ast
from polang.language.values import EntityUID, SetValue

if TYPE_CHECKING:
    from polang.datalog.facts import EntityFacts

_ENTITY_READS = frozenset({"get_attr", "has_attr", "method:getTag", "method:hasTag"})
_MEMBERSHIP = frozenset({"in", "scope_in", "scope_in_any"})


class Unknown:
    """A value not known: whether it may be the Bool ``true`` (``t``) or ``false``
    (``f``), and its residual :attr:`expr`. It may also be an error or any other value."""

    __slots__ = ("_expr", "_make", "f", "t")

    def __init__(self, t: bool, f: bool, make: Callable[[], ast.Expr]) -> None:
        self.t = t
        self.f = f
        self._make: Callable[[], ast.Expr] | None = make
        self._expr: ast.Expr | None = None

    @property
    def expr(self) -> ast.Expr:
        """The residual expression (built when first read: most are never printed)."""
        if self._expr is None:
            make, self._make = self._make, None
            assert make is not None
            self._expr = make()
        return self._expr

    def may_be(self, c: Any) -> bool:
        """Whether the value may equal the constant ``c`` (a literal ``a(c)`` may hold)."""
        if c is True:
            return self.t
        if c is False:
            return self.f
        return True

    def __repr__(self) -> str:
        return f"UNK(t={self.t}, f={self.f})"


def _operand_expr(v: Any) -> ast.Expr:
    return v.expr if type(v) is Unknown else value_expr(v)


class Unknowns:
    """The unknown part of a request, for one partial evaluation of a Program."""

    __slots__ = ("context", "entities", "groups")

    def __init__(
        self,
        groups: Mapping[str, Sequence[Rule]],
        *,
        context: bool = False,
        entities: frozenset[EntityUID] = frozenset(),
    ) -> None:
        self.groups = groups
        self.context = context
        self.entities = entities

    def variable(self, name: str) -> Unknown | None:
        """The request variable ``name`` when it is unknown (else ``None``)."""
        if name == "context" and self.context:
            return Unknown(True, True, lambda: ast.Var("context"))
        return None

    def call(self, lit: Builtin, facts: EntityFacts, args: list[Any]) -> Any:
        """``lit``'s builtin over ``args``: its value, an :class:`Unknown`, or its error
        raised. Reads of an unknown entity are unknown; so is ``x in y`` when ``x``'s
        ancestors go through one, unless a known ancestor already answers it."""
        op = lit.op
        for a in args:
            if type(a) is Unknown:
                return Unknown(True, True, lambda: _call_expr(lit, args))
        entities = self.entities
        if entities and args and type(args[0]) is EntityUID:
            a = args[0]
            if a in entities and op in _ENTITY_READS:
                return Unknown(True, True, lambda: _call_expr(lit, args))
            if op in _MEMBERSHIP:
                anc = facts.ancestors_of(a)
                if a in entities or not entities.isdisjoint(anc):
                    # its ancestors are only partly known (they go through an unknown entity)
                    targets = _targets(args[1])
                    if targets is None or (
                        op == "in" and any(type(t) is not EntityUID for t in targets)
                    ):
                        if op != "in":
                            return False
                        return builtin(op)(facts, *args)  # the builtin's type error
                    if any(t == a or t in anc for t in targets):
                        return True
                    if targets:
                        return Unknown(True, True, lambda: _call_expr(lit, args))
                    return False
        return builtin(op)(facts, *args)

    def merge(
        self,
        pred: str,
        rules: Sequence[Rule],
        possible: Sequence[tuple[Rule, Any, Sequence[tuple[Any, Unknown]]]],
        memo: Mapping[str, tuple[bool, Any]],
    ) -> Unknown:
        """The value of a group some of whose rules may hold (``possible``: those rules,
        the value each gives and the literals each holds on only if unknowns allow)."""
        if len(rules) == 1 and len(possible) == 1 and not possible[0][2]:
            v = possible[0][1]
            if type(v) is Unknown:
                return v  # one rule: its value as it is (a call over an unknown)
        t = f = False
        for _r, v, _c in possible:
            if v is True:
                t = True
            elif v is False:
                f = True
            elif type(v) is Unknown:
                t = t or v.t
                f = f or v.f
        return Unknown(t, f, lambda: self._group_expr(pred, rules, possible, memo))

    def _group_expr(
        self,
        pred: str,
        rules: Sequence[Rule],
        possible: Sequence[tuple[Rule, Any, Sequence[tuple[Any, Unknown]]]],
        memo: Mapping[str, tuple[bool, Any]],
    ) -> ast.Expr:
        """A group's residual: the expression of its form over its operands' values and
        residuals (an operand that erred, or was not reached, as written). A group of no
        known form: its possible rules in order, each as ``if CONDITIONS then VALUE``."""
        groups = self.groups

        def operand(p: str) -> ast.Expr:
            got = memo.get(p)
            if got is not None and got[0]:
                return _operand_expr(got[1])
            return source_expr(groups, p)

        if classify(rules).kind != "rules":
            return shape_expr(pred, rules, operand)
        out: ast.Expr | None = None
        for rule, value, conds in reversed(possible):
            test = _conjunction([_holds(lit, u) for lit, u in conds])
            v = _operand_expr(value) if rule.head.args else None
            if v is None:  # a rule of no value (a scope): it holds, or not
                out = test if out is None else ast.Binary("||", test, out)
            elif out is None:
                out = v if not conds else ast.If(test, v, ast.ExtCall(pred, ()))
            else:
                out = ast.If(test, v, out)
        assert out is not None
        return out


def _targets(b: Any) -> list[Any] | None:
    if type(b) is EntityUID:
        return [b]
    if type(b) is SetValue or isinstance(b, frozenset):
        return list(b)
    return None


def _call_expr(lit: Builtin, args: list[Any]) -> ast.Expr:
    """A call's residual: the builtin's expression over its operands' residuals."""
    operands = [
        _operand_expr(a) for a, t in zip(args, lit.args, strict=True) if type(t) is not Const
    ]
    consts = [a for a, t in zip(args, lit.args, strict=True) if type(t) is Const]
    return call_expr(lit.op, operands, consts)


def _holds(lit: Any, u: Unknown) -> ast.Expr:
    """What makes a literal that may hold hold: a test's own residual, ``a(c)``'s
    ``a == c`` (``a`` itself for ``c`` true, ``!a`` for false)."""
    if type(lit) is Builtin or not lit.args:
        return u.expr
    c = lit.args[0].value
    if c is True:
        return u.expr
    if c is False:
        return ast.Unary("!", u.expr)
    return ast.Binary("==", u.expr, value_expr(c))


def _conjunction(parts: list[ast.Expr]) -> ast.Expr:
    if not parts:
        return ast.Lit(True)
    out = parts[0]
    for p in parts[1:]:
        out = ast.Binary("&&", out, p)
    return out
