"""A plan's residuals as one SQL predicate over the service's own tables.

The input is a plan (``polang.analysis.plan``: its ``kind`` and ``residuals``, each a
:class:`~polang.datalog.eval.residual.Residual` over ``resource`` only) and a
:class:`~polang.filtering.mapping.Mapping`. A row is allowed iff some permit residual is
*true without error* and no forbid residual is. Every boolean node therefore becomes two
predicates, ``T`` (true without error) and ``F`` (false without error), built explicitly::

    T[a && b] = T[a] AND T[b]            F[a && b] = F[a] OR (T[a] AND F[b])
    T[a || b] = T[a] OR (F[a] AND T[b])  F[a || b] = F[a] AND F[b]
    T[!a] = F[a]                         F[!a] = T[a]

and every other node is a value with an error predicate (a NULL column: the attribute is
absent; an overflow: the exact result leaves 64 bits); a value is only read where its
error predicate is false, and arithmetic sits in ``CASE`` so the database never computes
an overflowing result. All predicates are two-valued (never SQL NULL), so ``NULL OR TRUE``
never stands for ``error || true``. What the target cannot express exactly raises
:class:`~polang.errors.FilterRefused` naming the policy and the construct.

The predicate is a sqlglot expression over the resource type's table by its own name (as
``select(Document)`` and ``Document.objects`` query it); :func:`to_sql` prints it for a
dialect. ``resource in E`` walks the hierarchy down from the literal ``E`` with a
recursive CTE (not correlated with the row: it is computed once per query).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlglot import exp

from polang.datalog.eval.residual import Residual
from polang.errors import EvaluationError, FilterRefused, PolangError
from polang.filtering.mapping import PRIMITIVE_TYPES, AttributeMap, Mapping, Table, TypeMap
from polang.language import ast
from polang.language.extensions import DateTime, Decimal, Duration, IPAddr, call_function
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, SetValue

DIALECTS = ("postgres", "mysql", "sqlite", "duckdb")
"""The dialects the translation is tested on (real servers: docs/filtering.md). MariaDB is
``mysql``."""

#: Deepest residual expression translated (deeper: FilterRefused); a plan's residuals
#: come from policies the parser already bounds, this bounds hand-made ones.
MAX_FILTER_DEPTH = 200

#: Most entity literals one ``in`` may walk the hierarchy from (each is one CTE seed).
MAX_IN_ENTITIES = 1_000

TRUE: exp.Expression = exp.true()
FALSE: exp.Expression = exp.false()
_ORDER_OPS: dict[str, type[exp.Expression]] = {
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
}
_DECIMAL_METHODS = {
    "lessThan": "<",
    "lessThanOrEqual": "<=",
    "greaterThan": ">",
    "greaterThanOrEqual": ">=",
}
_EXT_INT = {"decimal": Decimal, "datetime": DateTime, "duration": Duration}


# ======================================================================== boolean algebra


def _is(e: exp.Expression, b: bool) -> bool:
    return isinstance(e, exp.Boolean) and e.this is b


def _join(
    xs: tuple[exp.Expression, ...], absorbing: bool, node: type[exp.And] | type[exp.Or]
) -> exp.Expression:
    """``xs`` joined by ``node`` (AND or OR): the ``absorbing`` constant decides the whole,
    the other one drops out, and nothing left is that other constant."""
    items: list[exp.Expression] = []
    for x in xs:
        if _is(x, absorbing):
            return TRUE if absorbing else FALSE
        if not _is(x, not absorbing):
            items.append(x)
    if not items:
        return FALSE if absorbing else TRUE
    out: exp.Expression = items[0]
    for x in items[1:]:
        out = node(this=_paren(out), expression=_paren(x))
    return out


def land(*xs: exp.Expression) -> exp.Expression:
    return _join(xs, False, exp.And)


def lor(*xs: exp.Expression) -> exp.Expression:
    return _join(xs, True, exp.Or)


def lnot(x: exp.Expression) -> exp.Expression:
    if _is(x, True):
        return FALSE
    if _is(x, False):
        return TRUE
    if isinstance(x, exp.Not):  # every predicate here is two-valued: NOT NOT x is x
        inner = x.this
        return inner.this if isinstance(inner, exp.Paren) else inner
    return exp.Not(this=_paren(x))


def _paren(x: exp.Expression) -> exp.Expression:
    return exp.Paren(this=x) if isinstance(x, exp.Connector | exp.Not) else x


# ======================================================================== values


class B:
    """A boolean node: ``t`` true without error, ``f`` false without error."""

    __slots__ = ("f", "t")

    def __init__(self, t: exp.Expression, f: exp.Expression) -> None:
        self.t = t
        self.f = f

    @property
    def ok(self) -> exp.Expression:
        return lor(self.t, self.f)


class V:
    """A value node of static type ``ty``: ``sql`` is the value where ``err`` is false.

    ``ty``: a primitive type name (``Long`` ... ``ipaddr``; extension values are their
    integers), ``("entity", T)`` (``sql`` is the id), ``("set", elem)`` (``members``
    builds "this value is a member" for an element expression). ``const``: the Python
    value when the node is a literal.
    """

    __slots__ = ("const", "err", "members", "sql", "ty")

    def __init__(
        self,
        ty: Any,
        sql: exp.Expression | None,
        err: exp.Expression = FALSE,
        const: Any = None,
        members: Callable[[exp.Expression], exp.Expression] | None = None,
    ) -> None:
        self.ty = ty
        self.sql = sql
        self.err = err
        self.const = const
        self.members = members


Node = B | V


class Filter:
    """The translation of one plan: ``where`` (a sqlglot predicate over the resource
    table), ``exact`` (False: a superset, each fetched row to be checked with
    :attr:`rechecks`' policies, see docs/filtering.md) and the dialect it was built for."""

    __slots__ = ("dialect", "exact", "rechecks", "resource_type", "table", "where")

    def __init__(
        self,
        where: exp.Expression,
        dialect: str,
        resource_type: str,
        table: Table,
        exact: bool = True,
        rechecks: tuple[str, ...] = (),
    ) -> None:
        self.where = where
        self.dialect = dialect
        self.resource_type = resource_type
        self.table = table
        self.exact = exact
        self.rechecks = rechecks

    def sql(self, dialect: str | None = None) -> str:
        """The predicate as SQL text (literals inline, identifiers quoted by sqlglot)."""
        if dialect is not None and _sqlglot_dialect(dialect) != self.dialect:
            raise FilterRefused(
                f"this filter was translated for {self.dialect}, not {dialect}: translate "
                "again (strings, Booleans and types are compared per dialect)",
                construct="dialect",
            )
        return to_sql(self.where, self.dialect)

    def select_sql(
        self, columns: Sequence[str] = ("*",), order_by: str | None = None, limit: int | None = None
    ) -> str:
        """``SELECT columns FROM table WHERE predicate [ORDER BY c] [LIMIT n]``."""
        cols = [exp.Star() if c == "*" else _col(self.table, c) for c in columns]
        q = exp.select(*cols).from_(_table(self.table)).where(self.where)
        if order_by is not None:
            q = q.order_by(_col(self.table, order_by))
        if limit is not None:
            q = q.limit(int(limit))
        return to_sql(q, self.dialect)


def to_sql(e: exp.Expression, dialect: str) -> str:
    d = _sqlglot_dialect(dialect)
    if d in ("sqlite", "mysql"):
        e = e.transform(lambda n: _nul_free(n, d))
    return e.sql(dialect=d)


def _nul_free(node: exp.Expression, dialect: str) -> exp.Expression:
    """A string literal holding NUL as a concatenation with ``char(0)`` (SQLite refuses
    a query text holding NUL; bound parameters carry it as is)."""
    if not (isinstance(node, exp.Literal) and node.is_string and "\x00" in node.this):
        return node
    parts: list[exp.Expression] = []
    for i, chunk in enumerate(node.this.split("\x00")):
        if i:
            if dialect == "mysql":
                parts.append(
                    exp.Anonymous(this="CHAR", expressions=[exp.Var(this="0 USING utf8mb4")])
                )
            else:
                parts.append(exp.Anonymous(this="char", expressions=[exp.Literal.number(0)]))
        if chunk:
            parts.append(exp.Literal.string(chunk))
    if dialect == "mysql":
        return exp.Anonymous(this="CONCAT", expressions=parts)
    out = parts[0]
    for p in parts[1:]:
        out = exp.DPipe(this=out, expression=p)
    return exp.Paren(this=out)


def _sqlglot_dialect(d: str) -> str:
    return {"mariadb": "mysql", "postgresql": "postgres"}.get(d, d)


# ======================================================================== entry points


def translate(
    plan: Any,
    mapping: Mapping,
    dialect: str = "postgres",
    *,
    superset: bool = False,
    resource_type: str | None = None,
) -> Filter:
    """A plan (or a sequence of residuals with ``resource_type``) as a :class:`Filter`.

    With ``superset``, a residual the target cannot express is not refused: a permit is
    taken as possibly true, a forbid as possibly false (the filter then returns a
    superset, and :attr:`Filter.rechecks` names those policies for the per-row check).
    """
    d = _sqlglot_dialect(dialect)
    if d not in DIALECTS:
        raise FilterRefused(
            f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)} (mariadb is mysql)",
            construct="dialect",
        )
    rtype = resource_type or getattr(plan, "resource_type", None)
    if not isinstance(rtype, str):
        raise FilterRefused("the plan names no resource type", construct="resource_type")
    tm = mapping.type_map(rtype)
    kind = getattr(plan, "kind", "conditional")
    if kind == "always_allowed":
        return Filter(TRUE, d, rtype, tm.table)
    if kind == "always_denied":
        return Filter(FALSE, d, rtype, tm.table)
    residuals: Iterable[Residual] = (
        plan.residuals if hasattr(plan, "residuals") else plan  # a plan, or residuals
    )
    tr = Translator(mapping, d, rtype, getattr(plan, "facts", None))
    permits: list[exp.Expression] = []
    forbids: list[exp.Expression] = []
    rechecks: list[str] = []
    for r in residuals:
        if r.effect not in ("permit", "forbid"):
            raise FilterRefused(f"policy {r.policy_id}: unknown effect {r.effect!r}")
        try:
            t = tr.policy(r)
        except FilterRefused:
            if not superset:
                raise
            rechecks.append(r.policy_id)
            t = TRUE if r.effect == "permit" else FALSE
        (permits if r.effect == "permit" else forbids).append(t)
    denied = lor(*forbids)
    where = land(lor(*permits), lnot(denied))
    return Filter(
        where,
        d,
        rtype,
        tm.table,
        exact=not rechecks,
        rechecks=tuple(rechecks),
    )


# ======================================================================== the translator


class Translator:
    """Translates residual expressions over ``resource`` of one type, for one dialect."""

    def __init__(
        self, mapping: Mapping, dialect: str, resource_type: str, facts: Any = None
    ) -> None:
        self.facts = facts  # the plan's entities: ancestors of the literals it names
        self.m = mapping
        self.d = dialect
        self.rtype = resource_type
        self.rmap = mapping.type_map(resource_type)
        self.policy_id = ""
        self._aliases = itertools.count(1)

    # ---------------------------------------------------------------- helpers

    def refuse(self, construct: str, why: str) -> FilterRefused:
        return FilterRefused(
            f"policy {self.policy_id}: {construct} cannot be translated to SQL exactly: {why}",
            policy_id=self.policy_id,
            construct=construct,
        )

    def alias(self) -> str:
        return f"polang_t{next(self._aliases)}"

    def policy(self, r: Residual) -> exp.Expression:
        self.policy_id = r.policy_id
        try:
            node = self.node(r.expr, 0)
        except RecursionError:
            raise self.refuse("the condition", f"it nests deeper than {MAX_FILTER_DEPTH}") from None
        except (PolangError, EvaluationError, ValueError, TypeError, OverflowError) as e:
            if isinstance(e, FilterRefused):
                raise
            raise self.refuse("the condition", str(e)[:300]) from None
        return self.boolean(node).t

    def boolean(self, n: Node) -> B:
        if isinstance(n, B):
            return n
        # a non-Bool where a Bool is needed: a type error (neither true nor false)
        return B(FALSE, FALSE)

    # ---------------------------------------------------------------- nodes

    def node(self, e: ast.Expr, depth: int) -> Node:
        if depth > MAX_FILTER_DEPTH:
            raise self.refuse(
                "the condition", f"it nests deeper than {MAX_FILTER_DEPTH} (MAX_FILTER_DEPTH)"
            )
        depth += 1
        t = type(e)
        if t is ast.Lit:
            return self.literal(e.value)  # type: ignore[union-attr]
        if t is ast.EntityLit:
            return self.literal(e.uid)  # type: ignore[union-attr]
        if t is ast.Var:
            if e.name != "resource":  # type: ignore[union-attr]
                raise self.refuse(
                    f"`{e.name}`",  # type: ignore[union-attr]
                    "a plan's residual may mention no variable but `resource`",
                )
            return V(("entity", self.rtype), _col(self.rmap.table, self.rmap.id))
        if t is ast.SetLit:
            return self.set_literal(e, depth)  # type: ignore[arg-type]
        if t is ast.Unary:
            return self.unary(e, depth)  # type: ignore[arg-type]
        if t is ast.Binary:
            return self.binary(e, depth)  # type: ignore[arg-type]
        if t is ast.If:
            return self.if_(e, depth)  # type: ignore[arg-type]
        if t is ast.GetAttr:
            return self.get_attr(self.node(e.expr, depth), e.attr)  # type: ignore[union-attr]
        if t is ast.Has:
            return self.has(self.node(e.expr, depth), e.attr)  # type: ignore[union-attr]
        if t is ast.Is:
            return self.is_(e, depth)  # type: ignore[arg-type]
        if t is ast.Like:
            return self.like(e, depth)  # type: ignore[arg-type]
        if t is ast.MethodCall:
            return self.method(e, depth)  # type: ignore[arg-type]
        if t is ast.ExtCall:
            return self.ext_call(e, depth)  # type: ignore[arg-type]
        if t is ast.RecordLit:
            raise self.refuse("a record", "records have no column form")
        raise self.refuse(f"`{type(e).__name__}`", "not an expression of a plan's residual")

    def literal(self, v: Any) -> Node:
        tv = type(v)
        if tv is bool:
            return B(TRUE, FALSE) if v else B(FALSE, TRUE)
        if tv is int:
            return V("Long", _num(v), const=v)
        if tv is str:
            return V("String", exp.Literal.string(v), const=v)
        if tv is EntityUID:
            return V(("entity", v.type), None, const=v)
        if tv is SetValue:
            return self.set_of([self.literal(x) for x in v])
        if tv in (Decimal, DateTime, Duration):
            n = v.scaled if tv is Decimal else v.ms
            name = {Decimal: "decimal", DateTime: "datetime", Duration: "duration"}[tv]
            return V(name, _num(n), const=v)
        if tv is IPAddr:
            return V("ipaddr", exp.Literal.string(str(v)), const=v)
        raise self.refuse("a literal", f"values of type {tv.__name__} have no column form")

    def set_literal(self, e: ast.SetLit, depth: int) -> Node:
        return self.set_of([self.node(x, depth) for x in e.elements])

    def set_of(self, items: list[Node]) -> Node:
        vals: list[V] = []
        for it in items:
            if isinstance(it, B) or it.const is None:
                raise self.refuse("a set of computed values", "only sets of literals are supported")
            vals.append(it)
        return V(("set", "literal"), None, const=tuple(v.const for v in vals), members=None)

    # ---------------------------------------------------------------- operators

    def unary(self, e: ast.Unary, depth: int) -> Node:
        a = self.node(e.arg, depth)
        if e.op == "!":
            if isinstance(a, B):
                return B(a.f, a.t)
            return B(FALSE, FALSE)
        if isinstance(a, B) or a.ty != "Long":
            return V("Long", None, TRUE)
        if a.const is not None:
            return self.literal(-a.const) if a.const != LONG_MIN else V("Long", None, TRUE)
        assert a.sql is not None
        err = lor(a.err, exp.EQ(this=a.sql, expression=_num(LONG_MIN)))
        return V("Long", _guarded(err, exp.Neg(this=_paren_value(a.sql))), err)

    def binary(self, e: ast.Binary, depth: int) -> Node:
        op = e.op
        if op == "&&":
            a, b = self.boolean(self.node(e.left, depth)), None
            b = self.boolean(self.node(e.right, depth))
            return B(land(a.t, b.t), lor(a.f, land(a.t, b.f)))
        if op == "||":
            a = self.boolean(self.node(e.left, depth))
            b = self.boolean(self.node(e.right, depth))
            return B(lor(a.t, land(a.f, b.t)), land(a.f, b.f))
        left = self.node(e.left, depth)
        right = self.node(e.right, depth)
        if op in ("==", "!="):
            eq = self.equal(left, right)
            return eq if op == "==" else B(eq.f, eq.t)
        if op in _ORDER_OPS:
            return self.order(op, left, right)
        if op in ("+", "-", "*"):
            return self.arith(op, left, right)
        if op == "in":
            return self.in_(left, right)
        raise self.refuse(f"`{op}`", "unknown operator")

    def ok_both(self, a: Node, b: Node) -> exp.Expression:
        return land(_ok(a), _ok(b))

    def equal(self, a: Node, b: Node) -> B:
        ok = self.ok_both(a, b)
        if isinstance(a, B) or isinstance(b, B):
            if isinstance(a, B) and isinstance(b, B):
                same = lor(land(a.t, b.t), land(a.f, b.f))
                return B(same, lor(land(a.t, b.f), land(a.f, b.t)))
            return B(FALSE, ok)  # a Bool never equals another type's value
        if _ty_key(a.ty) != _ty_key(b.ty):
            return B(FALSE, ok)
        if isinstance(a.ty, tuple) and a.ty[0] == "set":
            raise self.refuse("`==` on sets", "set equality has no exact column form")
        if a.const is not None and b.const is not None:
            return B(TRUE, FALSE) if _const_eq(a.const, b.const) else B(FALSE, TRUE)
        if isinstance(a.ty, tuple):  # entities: same type, compare ids
            x, y = (a, b) if a.const is None else (b, a)
            if y.const is not None:
                lit = self.id_literal(x.ty[1], y.const.id)
                if lit is None:
                    return B(FALSE, ok)
                return self.compare(exp.EQ, x, V(x.ty, lit), ok, text=self.d in ("mysql", "sqlite"))
            return self.compare(exp.EQ, x, y, ok, text=self.d in ("mysql", "sqlite"))
        if a.ty == "ipaddr":
            raise self.refuse("`==` on ip addresses", "address text has no canonical column form")
        return self.compare(exp.EQ, a, b, ok, text=a.ty == "String")

    def compare(
        self, cls: type[exp.Expression], a: V, b: V, ok: exp.Expression, *, text: bool
    ) -> B:
        if text:
            for v in (a, b):
                if v.const is not None and not _storable(v.const, self.d):
                    return B(FALSE, ok)  # no column of this database holds such a string
        assert a.sql is not None and b.sql is not None
        x, y = (self.exact_text(a.sql), self.exact_text(b.sql)) if text else (a.sql, b.sql)
        pos: exp.Expression = cls(this=x, expression=y)
        neg: exp.Expression = _negate_cmp(cls)(this=x, expression=y)
        return B(land(ok, pos), land(ok, neg))

    def exact_text(self, e: exp.Expression) -> exp.Expression:
        """Strings compared byte for byte, whatever the column's collation (MySQL and
        MariaDB compare case- and trailing-space-insensitively by default)."""
        if self.d == "mysql":
            return exp.Cast(this=e, to=exp.DataType.build("BINARY", dialect="mysql"))
        if self.d == "sqlite":
            return exp.Collate(this=e, expression=exp.Var(this="BINARY"))
        return e  # PostgreSQL's deterministic collations compare byte for byte

    def order(self, op: str, a: Node, b: Node) -> B:
        if isinstance(a, B) or isinstance(b, B) or a.ty != b.ty:
            return B(FALSE, FALSE)
        if a.ty not in ("Long", "datetime", "duration"):
            return B(FALSE, FALSE)  # strings, decimals, addresses: a type error in `<`
        if a.const is not None and b.const is not None:
            x, y = _int_of(a.const), _int_of(b.const)
            res = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return B(TRUE, FALSE) if res else B(FALSE, TRUE)
        return self.compare(_ORDER_OPS[op], a, b, self.ok_both(a, b), text=False)

    def arith(self, op: str, a: Node, b: Node) -> Node:
        if isinstance(a, B) or isinstance(b, B) or a.ty != "Long" or b.ty != "Long":
            return V("Long", None, TRUE)
        if a.const is not None and b.const is not None:
            r = {"+": a.const + b.const, "-": a.const - b.const, "*": a.const * b.const}[op]
            return self.literal(r) if LONG_MIN <= r <= LONG_MAX else V("Long", None, TRUE)
        assert a.sql is not None and b.sql is not None
        x, y = _paren_value(a.sql), _paren_value(b.sql)
        if op == "*":
            if a.const is None and b.const is None:
                raise self.refuse(
                    "`*` of two attributes", "its overflow check needs a literal factor"
                )
            c, v = (a.const, y) if a.const is not None else (b.const, x)
            if c == 0:
                return V("Long", _num(0), lor(a.err, b.err))
            # the product stays in 64 bits iff the other factor lies in [lo, hi]
            if c > 0:
                lo, hi = _ceil_div(LONG_MIN, c), LONG_MAX // c
            else:
                lo, hi = _ceil_div(LONG_MAX, c), LONG_MIN // c
            over = lor(_lt(v, lo), _gt(v, hi))
            value: exp.Expression = exp.Mul(this=x, expression=y)
        elif b.const is not None or a.const is not None:
            # the bounds are computed here, exactly: a bound out of 64 bits is no check
            if b.const is not None:
                v, c = x, b.const
                lo, hi = (LONG_MIN - c, LONG_MAX - c) if op == "+" else (LONG_MIN + c, LONG_MAX + c)
            else:
                v, c = y, a.const
                lo, hi = (LONG_MIN - c, LONG_MAX - c) if op == "+" else (c - LONG_MAX, c - LONG_MIN)
            over = lor(
                _lt(v, lo) if lo > LONG_MIN else FALSE, _gt(v, hi) if hi < LONG_MAX else FALSE
            )
            value = exp.Add(this=x, expression=y) if op == "+" else exp.Sub(this=x, expression=y)
        else:
            # a + b overflows iff (b > 0 and a > MAX - b) or (b < 0 and a < MIN - b); CASE
            # keeps the database from computing the bound that would itself overflow
            if op == "+":
                up = exp.GT(this=x, expression=exp.Sub(this=_num(LONG_MAX), expression=y))
                down = exp.LT(this=x, expression=exp.Sub(this=_num(LONG_MIN), expression=y))
                over = exp.Case(
                    ifs=[exp.If(this=_gt(y, 0), true=up), exp.If(this=_lt(y, 0), true=down)],
                    default=FALSE,
                )
                value = exp.Add(this=x, expression=y)
            else:
                up = exp.GT(this=x, expression=exp.Add(this=_num(LONG_MAX), expression=y))
                down = exp.LT(this=x, expression=exp.Add(this=_num(LONG_MIN), expression=y))
                over = exp.Case(
                    ifs=[exp.If(this=_lt(y, 0), true=up), exp.If(this=_gt(y, 0), true=down)],
                    default=FALSE,
                )
                value = exp.Sub(this=x, expression=y)
        base = lor(a.err, b.err)
        err = lor(base, _guarded_bool(base, over))
        return V("Long", _guarded(err, value), err)

    def if_(self, e: ast.If, depth: int) -> Node:
        c = self.boolean(self.node(e.cond, depth))
        a = self.node(e.then, depth)
        b = self.node(e.else_, depth)
        if isinstance(a, B) and isinstance(b, B):
            return B(lor(land(c.t, a.t), land(c.f, b.t)), lor(land(c.t, a.f), land(c.f, b.f)))
        if isinstance(a, B) or isinstance(b, B) or _ty_key(a.ty) != _ty_key(b.ty):
            raise self.refuse("`if` with branches of different types", "no single column type")
        if isinstance(a.ty, tuple):
            raise self.refuse("`if` over entities or sets", "not supported")
        av = a.sql if a.sql is not None else exp.Null()
        bv = b.sql if b.sql is not None else exp.Null()
        err = lor(lnot(c.ok), land(c.t, a.err), land(c.f, b.err))
        value = exp.Case(ifs=[exp.If(this=c.t, true=av)], default=bv)
        return V(a.ty, value, err)

    # ---------------------------------------------------------------- entities

    def type_map(self, etype: str, what: str) -> TypeMap:
        tm = self.m.types.get(etype)
        if tm is None:
            raise self.refuse(what, f"entity type {etype} is not in the mapping")
        return tm

    def id_literal(self, etype: str, eid: str) -> exp.Expression | None:
        """The id column's literal for an entity id (None: no row can have it)."""
        tm = self.m.types.get(etype)
        if tm is not None and tm.id_type == "Long":
            if not (eid.isascii() and eid.lstrip("-").isdigit()) or str(int(eid)) != eid:
                return None
            n = int(eid)
            return _num(n) if LONG_MIN <= n <= LONG_MAX else None
        if not _storable(eid, self.d):
            return None
        return exp.Literal.string(eid)

    def attribute(self, owner: V, attr: str) -> tuple[TypeMap, AttributeMap]:
        if not (isinstance(owner.ty, tuple) and owner.ty[0] == "entity"):
            raise self.refuse(f"`.{attr}`", "attributes of records have no column form")
        tm = self.type_map(owner.ty[1], f"`.{attr}`")
        am = tm.attributes.get(attr)
        if am is None:
            raise self.refuse(f"`.{attr}`", f"{tm.entity_type}.{attr} is not in the mapping")
        return tm, am

    def row_value(self, owner: V, tm: TypeMap, column: exp.Expression) -> exp.Expression:
        """``column`` of the row of ``owner`` (the resource's own row, or a subquery)."""
        if (
            owner.const is None
            and owner.ty == ("entity", self.rtype)
            and _is_self(owner, self.rmap)
        ):
            return column
        a = self.alias()
        assert owner.sql is not None or owner.const is not None
        key = owner.sql if owner.const is None else self.id_literal(tm.entity_type, owner.const.id)
        if key is None:
            return exp.Null()
        sub = (
            exp.select(_requalify(column, a))
            .from_(_table(tm.table, a))
            .where(self.id_eq(_col(Table(a), tm.id), key))
            .limit(1)
        )
        return exp.Subquery(this=sub)

    def get_attr(self, owner: Node, attr: str) -> Node:
        if isinstance(owner, B):
            return V("Long", None, TRUE)
        tm, am = self.attribute(owner, attr)
        if am.kind == "set" or am.kind == "array":
            return self.set_attr(owner, tm, am)
        if am.kind == "json":
            doc = self.row_value(owner, tm, _col(tm.table, am.column))
            guard, col = self.json_value(doc, am.path, am.type, attr)
            err = lor(owner.err, lnot(guard))
            if am.type == "Boolean":
                ok = lnot(err)
                return B(land(ok, col), land(ok, lnot(col)))
            return V(am.type, col, err)
        col = self.row_value(owner, tm, _col(tm.table, am.column))
        present = exp.Not(this=exp.Is(this=col, expression=exp.Null()))
        err = lor(owner.err, lnot(land(present, self.type_guard(col, am.type))))
        if am.type == "Boolean":
            t, f = (TRUE, FALSE) if self.d != "mysql" else (_num(1), _num(0))
            if self.d == "sqlite":
                t, f = _num(1), _num(0)
            ok = lnot(err)
            return B(
                land(ok, exp.EQ(this=col, expression=t)), land(ok, exp.EQ(this=col, expression=f))
            )
        if am.type in PRIMITIVE_TYPES:
            return V(am.type, col, err)
        return V(("entity", am.type), col, err)

    def json_value(
        self, doc: exp.Expression, path: tuple[str, ...], ty: str, attr: str
    ) -> tuple[exp.Expression, exp.Expression]:
        """A JSON path's value: (it is there, of ``ty``; the value, read only where it is;
        for a Boolean, the predicate "it is true"). A value of another JSON type (a
        number with a fraction for a Long, say) or malformed JSON reads as absent."""
        if ty not in ("Long", "String", "Boolean"):
            raise self.refuse(f"`.{attr}`", f"JSON paths hold Long, String or Boolean, not {ty}")
        s = exp.Literal.string

        def fn(name: str, *args: exp.Expression) -> exp.Expression:
            return exp.Anonymous(this=name, expressions=list(args))

        if self.d == "postgres":
            j = exp.Cast(this=doc, to=exp.DataType.build("JSONB"))
            keys = [s(k) for k in path]
            typ = fn("jsonb_typeof", fn("jsonb_extract_path", j, *keys))
            txt = fn("jsonb_extract_path_text", j, *keys)
            if ty == "String":
                return exp.EQ(this=typ, expression=s("string")), txt
            if ty == "Boolean":
                g = exp.EQ(this=typ, expression=s("boolean"))
                return g, exp.EQ(this=txt, expression=s("true"))
            num = exp.Cast(this=txt, to=exp.DataType.build("NUMERIC"))
            is_int = land(
                exp.EQ(this=typ, expression=s("number")),
                exp.RegexpLike(this=txt, expression=s("^-?[0-9]+$")),
            )
            in_range = exp.Case(
                ifs=[
                    exp.If(
                        this=is_int,
                        true=exp.Between(this=num, low=_num(LONG_MIN), high=_num(LONG_MAX)),
                    )
                ],
                default=FALSE,
            )
            guard = land(is_int, in_range)
            value = exp.Case(
                ifs=[exp.If(this=guard, true=exp.Cast(this=num, to=exp.DataType.build("BIGINT")))]
            )
            return guard, value
        if self.d not in ("sqlite", "mysql"):
            raise self.refuse(f"`.{attr}`", f"JSON paths are not translated for {self.d}")
        jpath = s("$." + ".".join(path))  # keys are identifiers (the mapping checks them)
        valid = fn("json_valid", doc)
        if self.d == "sqlite":
            typ = exp.Case(ifs=[exp.If(this=valid, true=fn("json_type", doc, jpath))])
            want = {"Long": ["integer"], "String": ["text"], "Boolean": ["true", "false"]}[ty]
            guard = land(
                exp.Not(this=exp.Is(this=doc, expression=exp.Null())),
                exp.In(this=typ, expressions=[s(w) for w in want]),
            )
            if ty == "Boolean":
                return guard, exp.EQ(this=typ, expression=s("true"))
            extracted = fn("json_extract", doc, jpath)
            if ty == "Long":  # json_type says 'integer' past 64 bits, the value is a REAL
                guard = land(guard, exp.EQ(this=fn("typeof", extracted), expression=s("integer")))
            return guard, extracted
        raw = exp.Case(ifs=[exp.If(this=valid, true=fn("JSON_EXTRACT", doc, jpath))])
        typ = fn("JSON_TYPE", raw)
        want_t = {"Long": "INTEGER", "String": "STRING", "Boolean": "BOOLEAN"}[ty]
        guard = land(
            exp.Not(this=exp.Is(this=raw, expression=exp.Null())),
            exp.EQ(this=typ, expression=s(want_t)),
        )
        if ty == "Boolean":
            return guard, exp.EQ(this=fn("JSON_UNQUOTE", raw), expression=s("true"))
        txt = fn("JSON_UNQUOTE", raw)
        if ty == "String":
            return guard, txt
        # JSON_TYPE says INTEGER for 1e2 and for numbers past 64 bits: the text decides
        is_int = land(
            guard, exp.GT(this=fn("REGEXP_INSTR", txt, s("^-?[0-9]+$")), expression=_num(0))
        )
        dec = exp.Cast(this=txt, to=exp.DataType.build("DECIMAL(65, 0)", dialect="mysql"))
        guard = land(
            is_int,
            exp.Case(
                ifs=[
                    exp.If(
                        this=is_int,
                        true=exp.Between(this=dec, low=_num(LONG_MIN), high=_num(LONG_MAX)),
                    )
                ],
                default=FALSE,
            ),
        )
        signed: exp.Expression = exp.Cast(
            this=dec, to=exp.DataType.build("SIGNED", dialect="mysql")
        )
        return guard, exp.Case(ifs=[exp.If(this=guard, true=signed)])

    def type_guard(self, col: exp.Expression, ty: str) -> exp.Expression:
        """SQLite columns hold any type: a value of another type than the mapping's reads
        as absent (docs/filtering.md, "How a row reads as an entity"); so does a MySQL
        BOOLEAN (a TINYINT) holding neither 0 nor 1."""
        if self.d == "mysql" and ty == "Boolean":
            return exp.In(this=col, expressions=[_num(0), _num(1)])
        if self.d != "sqlite":
            return TRUE
        if ty in ("Long", "decimal", "datetime", "duration", "Boolean") or (
            ty not in PRIMITIVE_TYPES and self.m.types[ty].id_type == "Long"
        ):
            g: exp.Expression = exp.EQ(
                this=exp.Anonymous(this="typeof", expressions=[col]),
                expression=exp.Literal.string("integer"),
            )
            if ty == "Boolean":
                g = land(g, exp.In(this=col, expressions=[_num(0), _num(1)]))
            return g
        return exp.EQ(
            this=exp.Anonymous(this="typeof", expressions=[col]),
            expression=exp.Literal.string("text"),
        )

    def set_attr(self, owner: V, tm: TypeMap, am: AttributeMap) -> V:
        elem = am.type
        if am.kind == "array":
            if self.d != "postgres":
                raise self.refuse("an array column", "arrays are PostgreSQL's only")
            col = self.row_value(owner, tm, _col(tm.table, am.column))
            err = lor(owner.err, exp.Is(this=col, expression=exp.Null()))

            def arr_member(x: exp.Expression, col: exp.Expression = col) -> exp.Expression:
                return exp.EQ(this=x, expression=exp.Anonymous(this="ANY", expressions=[col]))

            return V(("set", elem), col, err, members=arr_member)
        assert am.set_table is not None
        table, key, value = am.set_table, am.set_key, am.set_value
        owner_id: exp.Expression = (
            (owner.sql or exp.Null())
            if owner.const is None
            else self.id_literal(tm.entity_type, owner.const.id) or exp.Null()
        )
        # a set table's set is always present (maybe empty) for an entity that exists
        exists_owner = TRUE if _is_self(owner, self.rmap) else self.exists_row(tm, owner_id)
        err = lor(owner.err, lnot(exists_owner))

        def member(x: exp.Expression) -> exp.Expression:
            a = self.alias()
            cond = land(
                self.id_eq(_col(Table(a), key), owner_id),
                self.elem_eq(elem, _col(Table(a), value), x),
            )
            return exp.Exists(
                this=exp.select(exp.Literal.number(1)).from_(_table(table, a)).where(cond)
            )

        def empty() -> exp.Expression:
            a = self.alias()
            return exp.Exists(
                this=exp.select(exp.Literal.number(1))
                .from_(_table(table, a))
                .where(self.id_eq(_col(Table(a), key), owner_id))
            )

        v = V(("set", elem), None, err, members=member)
        v.sql = empty()  # "the set has a member" (isEmpty reads it)
        return v

    def elem_eq(self, elem: str, col: exp.Expression, x: exp.Expression) -> exp.Expression:
        if elem == "String":
            return exp.EQ(this=self.exact_text(col), expression=self.exact_text(x))
        if elem in PRIMITIVE_TYPES:
            return exp.EQ(this=col, expression=x)
        return self.id_eq(col, x)

    def exists_row(self, tm: TypeMap, key: exp.Expression) -> exp.Expression:
        a = self.alias()
        return exp.Exists(
            this=exp.select(exp.Literal.number(1))
            .from_(_table(tm.table, a))
            .where(self.id_eq(_col(Table(a), tm.id), key))
        )

    def has(self, owner: Node, attr: str) -> Node:
        if isinstance(owner, B):
            return B(FALSE, FALSE)
        if not (isinstance(owner.ty, tuple) and owner.ty[0] == "entity"):
            raise self.refuse(f"`has {attr}`", "records have no column form")
        tm, am = self.attribute(owner, attr)
        ok = lnot(owner.err)
        if am.kind == "set":
            v = self.set_attr(owner, tm, am)
            return B(land(ok, lnot(v.err)), land(ok, v.err))
        if am.kind == "json":
            doc = self.row_value(owner, tm, _col(tm.table, am.column))
            guard, _ = self.json_value(doc, am.path, am.type, attr)
            return B(land(ok, guard), land(ok, lnot(guard)))
        col = self.row_value(owner, tm, _col(tm.table, am.column))
        present = land(
            exp.Not(this=exp.Is(this=col, expression=exp.Null())), self.type_guard(col, am.type)
        )
        return B(land(ok, present), land(ok, lnot(present)))

    def is_(self, e: ast.Is, depth: int) -> Node:
        x = self.node(e.expr, depth)
        if isinstance(x, B) or not (isinstance(x.ty, tuple) and x.ty[0] == "entity"):
            return B(FALSE, FALSE)
        ok = lnot(x.err)
        base = B(ok, FALSE) if x.ty[1] == e.entity_type else B(FALSE, ok)
        if e.in_expr is None:
            return base
        inn = self.in_(x, self.node(e.in_expr, depth))
        return B(land(base.t, inn.t), lor(base.f, land(base.t, inn.f)))

    def in_(self, x: Node, y: Node) -> B:
        if (
            isinstance(x, B)
            or isinstance(y, B)
            or not (isinstance(x.ty, tuple) and x.ty[0] == "entity")
        ):
            return B(FALSE, FALSE)
        if x.const is not None and y.const is None:
            return self.literal_in(x.const, y)
        if isinstance(y.ty, tuple) and y.ty[0] == "entity" and y.const is not None:
            targets = [y.const]
        elif y.ty == ("set", "literal"):
            if not all(type(c) is EntityUID for c in y.const):
                return B(FALSE, FALSE)  # `in` a set of non-entities: a type error
            targets = list(y.const)
        else:
            raise self.refuse("`in` with a computed right side", "only entity literals are walked")
        if len(targets) > MAX_IN_ENTITIES:
            raise self.refuse("`in`", f"more than {MAX_IN_ENTITIES} entities (MAX_IN_ENTITIES)")
        ok = lnot(x.err)
        if x.const is not None:
            raise self.refuse("`in` on a literal entity", "the plan should have decided it")
        assert x.sql is not None
        t = land(ok, self.in_targets(x.ty[1], x.sql, targets))
        return B(t, land(ok, lnot(t)))

    def literal_in(self, e: EntityUID, y: V) -> B:
        """``E in y`` for a known ``E`` and a row's entity (or set of entities) ``y``:
        ``y`` is ``E`` or one of ``E``'s ancestors, which the plan's entities know."""
        if self.facts is None:
            raise self.refuse(
                f"`{e} in` an attribute", "it needs the plan's entities (translate a Plan)"
            )
        above = {e, *self.facts.ancestors_of(e)}
        ok = lnot(y.err)
        if isinstance(y.ty, tuple) and y.ty[0] == "entity":
            lits = [self.id_literal(y.ty[1], u.id) for u in above if u.type == y.ty[1]]
            t = lor(*(self.id_eq(y.sql, lit) for lit in lits if lit is not None))  # type: ignore[arg-type]
            return B(land(ok, t), land(ok, lnot(t)))
        if isinstance(y.ty, tuple) and y.ty[0] == "set" and y.members is not None:
            elem = y.ty[1]
            found = [self.elem_literal(elem, u) for u in above]
            t = lor(*(y.members(lit) for lit in found if lit is not None))
            return B(land(ok, t), land(ok, lnot(t)))
        return B(FALSE, FALSE)  # `in` a non-entity: a type error

    def in_targets(
        self, etype: str, xid: exp.Expression, targets: list[EntityUID]
    ) -> exp.Expression:
        """``x in targets`` for the entity ``etype`` whose id is ``xid``: itself, or a
        descendant of one of them (a recursive CTE down the parent edges, or the closure
        table). The shape ``x = E OR x IN (below E)`` is kept on purpose: with one ``IN``
        (a semi-join) PostgreSQL and SQLite drive a first page from the set of folders,
        which is slow when the caller may read most rows (benchmarks/README.md)."""
        parts: list[exp.Expression] = []
        edges = self.edges()
        seeds = [u for u in targets if _reaches(u.type, etype, edges)]
        sub = self.descendants(seeds, etype, edges) if seeds else None
        same = [self.id_literal(etype, u.id) for u in targets if u.type == etype]
        same_ok = [s for s in same if s is not None]
        if same_ok:
            parts.append(lor(*(self.id_eq(xid, lit) for lit in same_ok)))
        tm = self.m.types.get(etype)
        if (
            tm is not None
            and isinstance(xid, exp.Column)
            and etype == self.rtype
            and xid.name == tm.id
            and xid.table == tm.table.name
            and not any(p == etype for _, p, _ in edges)
        ):
            # the resource's own row and nothing below its type: through its parent
            # columns, so the hierarchy is walked among the parents' tables only
            for pm in tm.parents:
                pid = (
                    _col(tm.table, pm.column)
                    if pm.table is None
                    else _col(Table(a := self.alias()), pm.parent)
                )
                inner = self.in_targets(pm.type, pid, targets)
                if _is(inner, False):
                    continue
                if pm.table is None:
                    parts.append(land(exp.Not(this=exp.Is(this=pid, expression=exp.Null())), inner))
                else:
                    cond = land(self.id_eq(_col(Table(a), pm.child), xid), inner)
                    parts.append(
                        exp.Exists(
                            this=exp.select(exp.Literal.number(1))
                            .from_(_table(pm.table, a))
                            .where(cond)
                        )
                    )
            return lor(*parts)
        if sub is not None:
            parts.append(exp.In(this=self.id_key(xid), query=exp.Subquery(this=sub)))
        return lor(*parts)

    def edges(self) -> list[tuple[str, str, exp.Expression]]:
        """Every parent edge: (child type, parent type, a SELECT child_id, parent_id)."""
        out: list[tuple[str, str, exp.Expression]] = []
        for tm in self.m.types.values():
            for pm in tm.parents:
                a = self.alias()
                if pm.table is None:
                    q = (
                        exp.select(
                            exp.alias_(_col(Table(a), tm.id), "cid", quoted=True),
                            exp.alias_(_col(Table(a), pm.column), "pid", quoted=True),
                        )
                        .from_(_table(tm.table, a))
                        .where(
                            exp.Not(
                                this=exp.Is(this=_col(Table(a), pm.column), expression=exp.Null())
                            )
                        )
                    )
                else:
                    q = (
                        exp.select(
                            exp.alias_(_col(Table(a), pm.child), "cid", quoted=True),
                            exp.alias_(_col(Table(a), pm.parent), "pid", quoted=True),
                        )
                        .from_(_table(pm.table, a))
                        .where(
                            land(
                                exp.Not(
                                    this=exp.Is(
                                        this=_col(Table(a), pm.child), expression=exp.Null()
                                    )
                                ),
                                exp.Not(
                                    this=exp.Is(
                                        this=_col(Table(a), pm.parent), expression=exp.Null()
                                    )
                                ),
                            )
                        )
                    )
                out.append((tm.entity_type, pm.type, q))
        return out

    def descendants(
        self, seeds: list[EntityUID], etype: str, edges: list[tuple[str, str, exp.Expression]]
    ) -> exp.Expression | None:
        """``SELECT id`` (as :meth:`id_key`) of the entities of ``etype`` at or below
        ``seeds``: a recursive CTE over the parent edges on a path between them."""
        used = [
            (c, p, q)
            for c, p, q in edges
            if _reaches_any(seeds, p, edges, True) and _reaches(c, etype, edges, True)
        ]
        id_types = {self._id_type(c) for c, _, _ in used} | {self._id_type(s.type) for s in seeds}
        if len(id_types) > 1:
            raise self.refuse("`in`", "a hierarchy whose types have ids of different types")
        id_type = id_types.pop() if id_types else "String"
        closed = self.closure_below(seeds, etype, used)
        if closed is not None:
            return closed
        # types as numbers: a text column's width would be fixed by the first row (MySQL)
        tnum = {t: i for i, t in enumerate(sorted(self.m.types))}
        cte = "polang_below"
        seed_q: exp.Expression | None = None
        for s in seeds:
            lit = self.id_literal(s.type, s.id)
            if lit is None:
                continue
            row = exp.select(
                exp.alias_(_num(tnum[s.type]), "t", quoted=True),
                exp.alias_(self.cte_id(lit, id_type), "id", quoted=True),
            )
            seed_q = row if seed_q is None else exp.union(seed_q, row, distinct=True)
        if seed_q is None or not used:
            return None  # no seed any row can name, or no edge down to etype
        edge_q: exp.Expression | None = None
        for c, p, q in used:
            e = exp.select(
                exp.alias_(_num(tnum[c]), "ct", quoted=True),
                exp.alias_(exp.column("cid", quoted=True), "cid", quoted=True),
                exp.alias_(_num(tnum[p]), "pt", quoted=True),
                exp.alias_(exp.column("pid", quoted=True), "pid", quoted=True),
            ).from_(exp.Subquery(this=q, alias=_alias(self.alias())))
            edge_q = e if edge_q is None else exp.union(edge_q, e, distinct=False)
        assert edge_q is not None
        ea, ba = self.alias(), self.alias()
        step = (
            exp.select(
                exp.alias_(_col(Table(ea), "ct"), "t", quoted=True),
                exp.alias_(self.cte_id(_col(Table(ea), "cid"), id_type), "id", quoted=True),
            )
            .from_(exp.Subquery(this=edge_q, alias=_alias(ea)))
            .join(
                exp.Table(this=exp.to_identifier(cte, quoted=True), alias=_alias(ba)),
                on=land(
                    exp.EQ(this=_col(Table(ea), "pt"), expression=_col(Table(ba), "t")),
                    exp.EQ(
                        this=self.id_key(_col(Table(ea), "pid")),
                        expression=self.id_key(_col(Table(ba), "id")),
                    ),
                ),
            )
        )
        body = exp.union(seed_q, step, distinct=True)
        fa = self.alias()
        final = (
            exp.select(self.id_key(_col(Table(fa), "id")))
            .from_(exp.Table(this=exp.to_identifier(cte, quoted=True), alias=_alias(fa)))
            .where(exp.EQ(this=_col(Table(fa), "t"), expression=_num(tnum[etype])))
        )
        return final.with_(exp.to_identifier(cte, quoted=True), as_=body, recursive=True)

    def closure_below(
        self, seeds: list[EntityUID], etype: str, used: list[tuple[str, str, exp.Expression]]
    ) -> exp.Expression | None:
        """The descendants from the type's closure table, when it holds them all: every
        seed and every edge of the walk is of ``etype`` itself."""
        tm = self.m.types.get(etype)
        if tm is None or tm.closure is None:
            return None
        if any(s.type != etype for s in seeds) or any(c != etype or p != etype for c, p, _ in used):
            return None
        lits = [lit for s in seeds if (lit := self.id_literal(etype, s.id)) is not None]
        if not lits:
            return None
        a = self.alias()
        cl = tm.closure
        return (
            exp.select(self.id_key(_col(Table(a), cl.descendant)))
            .from_(_table(cl.table, a))
            .where(lor(*(self.id_eq(_col(Table(a), cl.ancestor), lit) for lit in lits)))
        )

    def cte_id(self, e: exp.Expression, id_type: str) -> exp.Expression:
        """An id as the CTE's column type (its seeds' type must hold every id)."""
        if self.d == "postgres":
            return exp.Cast(
                this=e, to=exp.DataType.build("BIGINT" if id_type == "Long" else "TEXT")
            )
        if self.d == "mysql":
            if id_type == "Long":
                return exp.Cast(this=e, to=exp.DataType.build("SIGNED", dialect="mysql"))
            return exp.Cast(this=e, to=exp.DataType.build("CHAR(65535)", dialect="mysql"))
        return e

    def id_key(self, e: exp.Expression) -> exp.Expression:
        """An id as compared exactly: byte for byte in MySQL and MariaDB (whose default
        collations fold case and trailing spaces), as is elsewhere."""
        return self.exact_text(e) if self.d in ("mysql", "sqlite") else e

    def id_eq(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """``a = b`` on ids, exactly; the plain comparison first keeps indexes usable."""
        plain = exp.EQ(this=a, expression=b)
        if self.d == "mysql":
            return land(plain, exp.EQ(this=self.id_key(a), expression=self.id_key(b)))
        if self.d == "sqlite":
            return exp.EQ(this=self.id_key(a), expression=b)
        return plain

    def _id_type(self, etype: str) -> str:
        tm = self.m.types.get(etype)
        return tm.id_type if tm is not None else "String"

    # ---------------------------------------------------------------- like, methods

    def like(self, e: ast.Like, depth: int) -> Node:
        x = self.node(e.expr, depth)
        if isinstance(x, B) or x.ty != "String":
            return B(FALSE, FALSE)
        ok = lnot(x.err)
        literal = "".join(p for p in e.pattern if isinstance(p, str))
        if not _storable(literal, self.d):
            return B(FALSE, ok)
        if x.const is not None:
            raise self.refuse("`like` on a literal", "the plan should have decided it")
        assert x.sql is not None
        if self.d == "sqlite":  # LIKE folds ASCII case in SQLite: GLOB does not
            pat = "".join(
                "*"
                if p is ast.WILDCARD
                else {"*": "[*]", "?": "[?]", "[": "[[]"}.get(str(p), str(p))
                for p in e.pattern
            )
            m: exp.Expression = exp.Glob(this=x.sql, expression=exp.Literal.string(pat))
        else:
            pat = "".join(
                "%" if p is ast.WILDCARD else {"%": "!%", "_": "!_", "!": "!!"}.get(str(p), str(p))
                for p in e.pattern
            )
            lhs = self.exact_text(x.sql)
            rhs = self.exact_text(exp.Literal.string(pat))
            if self.d == "postgres":
                lhs, rhs = x.sql, exp.Literal.string(pat)  # deterministic LIKE: byte for byte
            m = exp.Escape(
                this=exp.Like(this=lhs, expression=rhs), expression=exp.Literal.string("!")
            )
        return B(land(ok, m), land(ok, lnot(m)))

    def method(self, e: ast.MethodCall, depth: int) -> Node:
        recv = self.node(e.receiver, depth)
        args = [self.node(a, depth) for a in e.args]
        name = e.name
        if (
            isinstance(recv, V)
            and recv.const is not None
            and all(isinstance(a, V) and a.const is not None for a in args)
        ):
            raise self.refuse(f"`.{name}()` on literals", "the plan should have decided it")
        if name in ("contains", "containsAll", "containsAny", "isEmpty"):
            return self.set_method(name, recv, args)
        if name in ("hasTag", "getTag"):
            return self.tag(name, recv, args)
        if name in _DECIMAL_METHODS:
            if len(args) != 1 or isinstance(recv, B) or isinstance(args[0], B):
                return B(FALSE, FALSE)
            a = args[0]
            if recv.ty != "decimal" or a.ty != "decimal":
                return B(FALSE, FALSE)
            return self.compare(
                _ORDER_OPS[_DECIMAL_METHODS[name]], recv, a, self.ok_both(recv, a), text=False
            )
        raise self.refuse(f"`.{name}()`", "this method has no exact column form here")

    def set_method(self, name: str, recv: Node, args: list[Node]) -> Node:
        if isinstance(recv, B) or not (isinstance(recv.ty, tuple) and recv.ty[0] == "set"):
            return B(FALSE, FALSE)
        if name == "isEmpty":
            if recv.ty == ("set", "literal"):
                raise self.refuse("`.isEmpty()` on a literal", "the plan should have decided it")
            ok = lnot(recv.err)
            if recv.members is not None and recv.ty is not None and recv.sql is not None:
                if isinstance(recv.sql, exp.Exists):
                    return B(land(ok, lnot(recv.sql)), land(ok, recv.sql))
                card = exp.Anonymous(this="cardinality", expressions=[recv.sql])
                return B(
                    land(ok, exp.EQ(this=card, expression=_num(0))),
                    land(ok, exp.GT(this=card, expression=_num(0))),
                )
            raise self.refuse("`.isEmpty()`", "unsupported set form")
        if len(args) != 1:
            return B(FALSE, FALSE)
        arg = args[0]
        ok = land(lnot(recv.err), _ok(arg))
        if recv.ty == ("set", "literal"):  # [literals].contains(resource.x)
            if name != "contains" or isinstance(arg, B) or arg.const is not None:
                raise self.refuse(f"`.{name}()` of a literal set", "only contains(attribute)")
            eqs = [self.equal(arg, self.literal(c)) for c in recv.const]
            t = lor(*(q.t for q in eqs))
            return B(land(ok, t), land(ok, lnot(t)))
        elem = recv.ty[1]
        assert recv.members is not None
        if name == "contains":
            if isinstance(arg, B):
                raise self.refuse("`.contains()` of a Bool", "sets of Bools have no column form")
            if arg.const is None:
                raise self.refuse("`.contains()` of a computed value", "only literals")
            lit = self.elem_literal(elem, arg.const)
            t = FALSE if lit is None else recv.members(lit)
            return B(land(ok, t), land(ok, lnot(t)))
        if isinstance(arg, B) or arg.ty != ("set", "literal"):
            raise self.refuse(f"`.{name}()`", "its argument must be a set literal")
        lits = [self.elem_literal(elem, c) for c in arg.const]
        ts = [FALSE if lit is None else recv.members(lit) for lit in lits]
        t = land(*ts) if name == "containsAll" else lor(*ts)
        return B(land(ok, t), land(ok, lnot(t)))

    def elem_literal(self, elem: str, c: Any) -> exp.Expression | None:
        """A literal of a set's element type (None: no element can equal it)."""
        tc = type(c)
        if elem == "Long":
            return _num(c) if tc is int else None
        if elem == "String":
            return exp.Literal.string(c) if tc is str and _storable(c, self.d) else None
        if elem in _EXT_INT:
            return _num(_int_of(c)) if tc is _EXT_INT[elem] else None
        if elem in PRIMITIVE_TYPES:
            raise self.refuse(f"a set of {elem}", "no exact column form")
        if tc is EntityUID and c.type == elem:
            return self.id_literal(elem, c.id)
        return None

    def tag(self, name: str, recv: Node, args: list[Node]) -> Node:
        if isinstance(recv, B) or not (isinstance(recv.ty, tuple) and recv.ty[0] == "entity"):
            return B(FALSE, FALSE)
        if len(args) != 1 or isinstance(args[0], B) or args[0].ty != "String":
            return B(FALSE, FALSE)
        if args[0].const is None:
            raise self.refuse(f"`.{name}()` of a computed tag name", "only literal tag names")
        tm = self.type_map(recv.ty[1], f"`.{name}()`")
        tags = tm.tags
        if tags is None:
            raise self.refuse(f"`.{name}()`", f"{tm.entity_type} has no tags in the mapping")
        assert recv.sql is not None or recv.const is not None
        owner_id = (
            recv.sql if recv.const is None else self.id_literal(tm.entity_type, recv.const.id)
        )
        a = self.alias()
        key = land(
            self.id_eq(_col(Table(a), tags.key), owner_id or exp.Null()),
            exp.EQ(
                this=self.exact_text(_col(Table(a), tags.name)),
                expression=self.exact_text(exp.Literal.string(args[0].const)),
            ),
        )
        ok = lnot(recv.err)
        if not _storable(args[0].const, self.d):
            key = FALSE
        if name == "hasTag":
            exists = exp.Exists(
                this=exp.select(exp.Literal.number(1)).from_(_table(tags.table, a)).where(key)
            )
            present = exists
            owner_ok = (
                TRUE if _is_self(recv, self.rmap) else self.exists_row(tm, owner_id or exp.Null())
            )
            return B(land(ok, owner_ok, present), land(ok, owner_ok, lnot(present)))
        col = exp.Subquery(
            this=exp.select(_col(Table(a), tags.value))
            .from_(_table(tags.table, a))
            .where(key)
            .limit(1)
        )
        err = lor(recv.err, exp.Is(this=col, expression=exp.Null()))
        if tags.type == "Boolean":
            raise self.refuse("`.getTag()` of Bool tags", "not supported")
        if tags.type in PRIMITIVE_TYPES:
            return V(tags.type, col, err)
        return V(("entity", tags.type), col, err)

    def ext_call(self, e: ast.ExtCall, depth: int) -> Node:
        args = [self.node(a, depth) for a in e.args]
        if all(isinstance(a, V) and a.const is not None for a in args):
            try:
                value = call_function(e.name, [a.const for a in args])  # type: ignore[union-attr]
            except EvaluationError:
                return V("Long", None, TRUE)  # an erring constructor: the node errs
            return self.literal(value)
        raise self.refuse(f"`{e.name}(...)` of an attribute", "only constructors of literals")


# ======================================================================== small helpers


def _table(t: Table, alias: str | None = None) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(t.name, quoted=True),
        db=exp.to_identifier(t.schema, quoted=True) if t.schema else None,
        alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)) if alias else None,
    )


def _alias(name: str) -> exp.TableAlias:
    return exp.TableAlias(this=exp.to_identifier(name, quoted=True))


def _col(t: Table, name: str) -> exp.Column:
    return exp.Column(
        this=exp.to_identifier(name, quoted=True),
        table=exp.to_identifier(t.name, quoted=True),
        db=exp.to_identifier(t.schema, quoted=True) if t.schema else None,
    )


def _requalify(column: exp.Expression, alias: str) -> exp.Expression:
    assert isinstance(column, exp.Column)
    return exp.Column(this=column.this.copy(), table=exp.to_identifier(alias, quoted=True))


def _is_self(v: V, rmap: TypeMap) -> bool:
    s = v.sql
    return (
        v.const is None
        and isinstance(s, exp.Column)
        and s.name == rmap.id
        and s.table == rmap.table.name
        and (db.name if (db := s.args.get("db")) is not None else None) == rmap.table.schema
    )


def _num(n: int) -> exp.Expression:
    if n < 0:
        return exp.Paren(this=exp.Literal.number(n))
    return exp.Literal.number(n)


def _gt(x: exp.Expression, n: int) -> exp.Expression:
    return exp.GT(this=x, expression=_num(n))


def _lt(x: exp.Expression, n: int) -> exp.Expression:
    return exp.LT(this=x, expression=_num(n))


def _paren_value(x: exp.Expression) -> exp.Expression:
    return exp.Paren(this=x) if isinstance(x, exp.Binary) else x


def _guarded(err: exp.Expression, value: exp.Expression) -> exp.Expression:
    """``value`` computed only where ``err`` is false (CASE: the database never computes
    an overflowing sum)."""
    if _is(err, False):
        return value
    return exp.Case(ifs=[exp.If(this=lnot(err), true=value)])


def _guarded_bool(err: exp.Expression, pred: exp.Expression) -> exp.Expression:
    if _is(err, False):
        return pred
    return exp.Case(ifs=[exp.If(this=err, true=FALSE)], default=pred)


def _ok(n: Node) -> exp.Expression:
    return n.ok if isinstance(n, B) else lnot(n.err)


def _negate_cmp(cls: type[exp.Expression]) -> type[exp.Expression]:
    table: dict[type[exp.Expression], type[exp.Expression]] = {
        exp.EQ: exp.NEQ,
        exp.LT: exp.GTE,
        exp.LTE: exp.GT,
        exp.GT: exp.LTE,
        exp.GTE: exp.LT,
    }
    return table[cls]


def _ty_key(ty: Any) -> Any:
    if isinstance(ty, tuple) and ty[0] == "set":
        return "set"
    return ty


def _const_eq(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def _int_of(v: Any) -> int:
    if type(v) is int:
        return v
    return int(v.scaled if type(v) is Decimal else v.ms)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _storable(s: str, dialect: str) -> bool:
    """Whether a column of ``dialect`` can hold the string at all (PostgreSQL text has no
    NUL; no UTF-8 column holds a lone surrogate): one no row holds equals nothing."""
    if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        return False
    return not (dialect == "postgres" and "\x00" in s)


def _reaches(src: str, dst: str, edges: list[tuple[str, str, Any]], proper: bool = False) -> bool:
    """Whether entities of ``dst`` can lie below ``src`` (``proper``: or be ``src``)."""
    if proper and src == dst:
        return True
    seen = {src}
    todo = [src]
    while todo:
        t = todo.pop()
        for c, p, _ in edges:
            if p == t:
                if c == dst:
                    return True
                if c in seen:
                    continue
                seen.add(c)
                todo.append(c)
    return False


def _reaches_any(
    seeds: list[EntityUID], t: str, edges: list[tuple[str, str, Any]], proper: bool = False
) -> bool:
    return any(_reaches(s.type, t, edges, proper) for s in seeds)


def split_params(where: exp.Expression, dialect: str, nonce: str) -> tuple[list[str], list[Any]]:
    """The predicate as SQL pieces between its string literals, and those literals: the
    targets that bind parameters (SQLAlchemy, Django) join the pieces with their own
    placeholders, in the order the literals appear. ``nonce`` makes the markers unguessable
    (a table name cannot forge one)."""
    values: list[Any] = []

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal) and node.is_string:
            mark = f"polang_{nonce}_{len(values)}"
            values.append(node.this)
            return exp.Var(this=mark)
        return node

    text = to_sql(where.copy().transform(swap), dialect)
    pieces: list[str] = []
    ordered: list[Any] = []
    pattern = re.compile(rf"polang_{re.escape(nonce)}_(\d+)")
    pos = 0
    for m in pattern.finditer(text):
        pieces.append(text[pos : m.start()])
        ordered.append(values[int(m.group(1))])
        pos = m.end()
    pieces.append(text[pos:])
    return pieces, ordered


def checked_page(
    fetch: Callable[[Any, int], Sequence[Any]],
    allows: Callable[[Any], bool],
    size: int,
    key: Callable[[Any], Any],
) -> list[Any]:
    """One page of a superset filter's rows that pass the exact per-row check.

    ``fetch(after, n)``: the next ``n`` rows of the superset in the page's order whose key
    is after ``after`` (``None``: from the start), keyset pagination; ``allows(row)``: the
    exact check (``plan.allows(entity)`` or ``authorize_unsigned``); ``key(row)``: the
    order key. Rows are fetched in batches of ``size`` until the page is full or the rows
    run out, so a page costs more than one query when the check drops rows, and the next
    page starts after the key of the last row *checked* (not the last returned)."""
    out: list[Any] = []
    after: Any = None
    while len(out) < size:
        rows = fetch(after, size)
        for row in rows:
            after = key(row)
            if allows(row):
                out.append(row)
                if len(out) == size:
                    break
        if len(rows) < size:
            break
    return out
