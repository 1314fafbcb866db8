"""Unknown values: what a partial evaluation leaves open, with the residual it is.

:class:`Unknowns` says which request data is unknown: the whole context, the
entities a query does not hold (their attributes, tags and ancestors; the ancestors the
store knows still hold), and the resource as a whole, only its type known (a list
endpoint's plan, ``polang.analysis.plan``: the resource is each row). The interpreter
(:mod:`.interpreter`) asks it for every builtin call; a call over an unknown is an
:class:`Unknown` whose expression is the call itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.datalog.builtins import builtin
from polang.datalog.eval.residual import call_expr, shape_expr, source_expr, value_expr
from polang.datalog.eval.shapes import Shape, classify
from polang.datalog.ir import Builtin, Const, Rule
from polang.language import ast
from polang.language.values import EntityUID, SetValue

if TYPE_CHECKING:
    from polang.datalog.facts import EntityFacts

_ENTITY_READS = frozenset({"get_attr", "has_attr", "method:getTag", "method:hasTag"})
_MEMBERSHIP = frozenset({"in", "scope_in", "scope_in_any"})
_BY_TYPE = frozenset({"is_type", "scope_is", "eq", "neq", "in"})
"""The builtins an unknown resource's type may decide (:meth:`Unknowns._resource_test`)."""


class Unknown:
    """A value not known: whether it may be the Bool ``true`` (``t``) or ``false``
    (``f``), and its residual :attr:`expr`. It may also be an error or any other value."""

    __slots__ = ("_expr", "_make", "etype", "f", "t")

    def __init__(
        self, t: bool, f: bool, make: Callable[[], ast.Expr], etype: str | None = None
    ) -> None:
        self.t = t
        self.f = f
        self.etype = etype  # an entity of this type (the unknown resource), else None
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
        if self.etype is not None:
            return type(c) is EntityUID and c.type == self.etype
        return True

    def __repr__(self) -> str:
        return f"UNK(t={self.t}, f={self.f})"


def _operand_expr(v: Any) -> ast.Expr:
    return v.expr if type(v) is Unknown else value_expr(v)


class Unknowns:
    """The unknown part of a request, for one partial evaluation of a Program."""

    __slots__ = ("_resource", "_rows_above", "context", "entities", "groups", "resource", "shapes")

    def __init__(
        self,
        groups: Mapping[str, Sequence[Rule]],
        *,
        context: bool = False,
        entities: frozenset[EntityUID] = frozenset(),
        resource: str | None = None,
        shapes: dict[str, Shape] | None = None,
        value: Unknown | None = None,
    ) -> None:
        self.groups = groups
        self.context = context
        self.entities = entities
        # each group's form (``classify``), for the residuals: a caller that evaluates the
        # same groups again may share one dict
        self.shapes: dict[str, Shape] = {} if shapes is None else shapes
        self._rows_above: dict[EntityUID, list[EntityUID]] = {}
        # ``resource``: the type of a resource unknown as a whole (a list endpoint's plan):
        # its identity, attributes, tags and ancestors are the row's. One value stands for
        # it, so that the tests its type decides are recognised by identity.
        self.resource = resource
        # ``value``: the object that stands for it, when a caller shares one between
        # evaluations (outcomes computed in one are then valid in the others)
        self._resource: Unknown | None = (
            None
            if resource is None
            else value
            if value is not None
            else Unknown(False, False, lambda: ast.Var("resource"), resource)
        )

    def variable(self, name: str) -> Unknown | None:
        """The request variable ``name`` when it is unknown (else ``None``)."""
        if name == "context" and self.context:
            return Unknown(True, True, lambda: ast.Var("context"))
        if name == "resource":
            return self._resource  # an entity, never a Bool: it may be neither
        return None

    def call(self, lit: Builtin, facts: EntityFacts, args: list[Any]) -> Any:
        """``lit``'s builtin over ``args``: its value, an :class:`Unknown`, or its error
        raised. Reads of an unknown entity are unknown; so is ``x in y`` when ``x``'s
        ancestors go through one, unless a known ancestor already answers it."""
        op = lit.op
        res = self._resource
        for a in args:
            if type(a) is Unknown:
                if res is not None and op in _BY_TYPE:
                    for b in args:
                        if b is res:
                            got = self._resource_test(op, args, facts)
                            if got is not None:
                                return got
                            break
                return Unknown(True, True, lambda: _call_expr(lit, args))
        if res is not None and args and type(args[0]) is EntityUID:
            if op in _ENTITY_READS and args[0].type == self.resource:
                return self._maybe_the_row(lit, args)
            if op in _MEMBERSHIP:
                return self._path_through_rows(op, args, facts)
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

    def _resource_test(self, op: str, args: list[Any], facts: EntityFacts) -> Any:
        """What the unknown resource's type alone decides (``None``: nothing). The
        resource is an entity of type :attr:`resource`: ``is`` is known; ``==`` with a
        known value of another kind is false; ``E in resource`` (``E`` known) is whether
        the resource is ``E`` or one of ``E``'s ancestors, which the store knows (a path
        from ``E`` to the row never goes through the row's own parents)."""
        res = self._resource
        rtype = self.resource
        a, b = args[0], args[1]
        if op in ("is_type", "scope_is"):
            return b == rtype if a is res else None
        if op in ("eq", "neq"):
            other = b if a is res else a
            if type(other) is Unknown:
                return None
            if type(other) is EntityUID and other.type == rtype:
                return None
            return op == "neq"
        if op == "in" and b is res and type(a) is EntityUID:
            cands = sorted(u for u in (a, *facts.ancestors_of(a)) if u.type == rtype)
            if not cands:
                return False
            return Unknown(
                True,
                True,
                lambda: ast.MethodCall(
                    ast.SetLit(tuple(ast.EntityLit(u) for u in cands)),
                    "contains",
                    (ast.Var("resource"),),
                ),
            )
        return None

    def _maybe_the_row(self, lit: Builtin, args: list[Any]) -> Unknown:
        """A read of a known entity ``E`` of the resource's type: the row's own data
        when the row is ``E``, the store's otherwise (``if resource == E then ...``)."""
        res = self._resource
        assert res is not None
        e = args[0]

        def make() -> ast.Expr:
            return ast.If(
                ast.Binary("==", res.expr, ast.EntityLit(e)),
                _call_expr(lit, [res, *args[1:]]),
                _call_expr(lit, args),
            )

        return Unknown(True, True, make)

    def _path_through_rows(self, op: str, args: list[Any], facts: EntityFacts) -> Any:
        """``E in X`` for a known ``E``: the store answers it, unless the row may lie on
        ``E``'s path (``E`` itself, or an ancestor of ``E``, of the resource's type):
        then, when the row is such an entity ``Y`` and no path avoids it, the answer is
        the row's own ``resource in X`` (its parents are the row's)."""
        a = args[0]
        answer = builtin(op)(facts, *args)  # a type error errs whatever the row is
        ys = self._rows_above.get(a)
        if ys is None:
            rtype = self.resource
            ys = self._rows_above[a] = [y for y in (a, *facts.ancestors_of(a)) if y.type == rtype]
        if not ys:
            return answer
        b = args[1]
        targets = [b] if type(b) is EntityUID else sorted(b)
        if any(type(t) is not EntityUID for t in targets):
            return answer  # (only `in`'s builtin accepts a set: it checked it)
        guarded = sorted(
            y for y in ys if not (y in targets if y == a else _reaches(facts, a, targets, y))
        )
        if not guarded:
            return answer
        res = self._resource
        assert res is not None

        def make() -> ast.Expr:
            row_in: ast.Expr = ast.Binary(
                "in",
                ast.Var("resource"),
                ast.EntityLit(targets[0])
                if len(targets) == 1
                else ast.SetLit(tuple(ast.EntityLit(t) for t in targets)),
            )
            one_of = ast.MethodCall(
                ast.SetLit(tuple(ast.EntityLit(y) for y in guarded)),
                "contains",
                (ast.Var("resource"),),
            )
            if answer:  # true, unless the row is on every path and is not in X itself
                return ast.Binary("||", ast.Unary("!", one_of), row_in)
            return ast.Binary("&&", one_of, row_in)

        return Unknown(True, True, make)

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

        sh = self.shapes.get(pred)
        if sh is None:
            sh = self.shapes[pred] = classify(rules)
        if sh.kind != "rules":
            return shape_expr(pred, rules, operand, sh)
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


def _reaches(facts: EntityFacts, a: EntityUID, targets: list[EntityUID], skip: EntityUID) -> bool:
    """Whether a path of stored parents leads from ``a`` to one of ``targets`` without
    going through ``skip``."""
    goal = set(targets)
    seen = {a}
    todo = [a]
    while todo:
        u = todo.pop()
        if u in goal:
            return True
        ent = facts.get(u)
        if ent is None:
            continue
        for p in ent.parents:
            if p != skip and p not in seen:
                seen.add(p)
                todo.append(p)
    return False


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
