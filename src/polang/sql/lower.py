"""The Program's policies as SQL predicates, with the language's three outcomes kept apart.

The input is the :class:`~polang.datalog.ir.Program` (the contract every backend reads):
each policy's scope rule and the rule groups of its condition's value predicates, whose
forms ``lower.py`` fixes (``classify`` recognises them). A policy is lowered once per
*branch*: an action (a constant), a principal entity type and a resource entity type. In
a branch every expression has a static type (the schema's, or the one the data shows),
so type errors are decided while lowering and SQL only sees well-typed operations.

Every boolean node becomes two SQL predicates, ``T`` (it evaluates to true) and ``F``
(to false), built explicitly as ``docs/design.md`` states::

    T[a && b] = T[a] AND T[b]          F[a && b] = F[a] OR (T[a] AND F[b])
    T[a || b] = T[a] OR (F[a] AND T[b])  F[a || b] = F[a] AND F[b]
    T[!a] = F[a]                        F[!a] = T[a]

so an error is the absence of both and SQL's NULL never stands for it (``NULL OR TRUE``
is TRUE where ``error || true`` is an error: here ``T[a || b]`` is false when ``a``
errors). Every other node is a value ``x`` with an error predicate ``err`` (a missing
attribute: the column is NULL; an overflow: the exact result is out of range), and
``x`` is only read where ``err`` is false. No generated expression can raise at run time
(arithmetic is done in DECIMAL(38, 0) and range-checked before narrowing).

What cannot be lowered exactly raises :class:`Unsupported` with the reason; the caller
then runs the policy as a UDF or reports it as conditional.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from sqlglot import exp

from polang.datalog.builtins import builtin
from polang.datalog.eval.shapes import Shape, classify
from polang.datalog.facts import EntityFacts
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.errors import EvaluationError
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, RecordValue, SetValue

from .types import BOOL, LONG, STR, Funcs, Ty, has_surrogate, sql_type

TRUE: exp.Expression = exp.true()
FALSE: exp.Expression = exp.false()

ANC = "polang_anc"
"""The hierarchy closure table: ``(eid, aeid)`` for every uid and each of its ancestors,
the uid itself included (``in`` is reflexive)."""


class Unsupported(Exception):
    """A policy (in one branch) that SQL cannot express exactly; the message says why."""


# ======================================================================== boolean algebra


def is_true(e: exp.Expression) -> bool:
    return isinstance(e, exp.Boolean) and e.this is True


def is_false(e: exp.Expression) -> bool:
    return isinstance(e, exp.Boolean) and e.this is False


def land(*xs: exp.Expression) -> exp.Expression:
    items: list[exp.Expression] = []
    for x in xs:
        if is_false(x):
            return FALSE
        if not is_true(x):
            items.append(x)
    if not items:
        return TRUE
    if len(items) == 1:
        return items[0]
    return cast(exp.Expression, exp.and_(*items, copy=False))


def lor(*xs: exp.Expression) -> exp.Expression:
    items: list[exp.Expression] = []
    for x in xs:
        if is_true(x):
            return TRUE
        if not is_false(x):
            items.append(x)
    if not items:
        return FALSE
    if len(items) == 1:
        return items[0]
    return cast(exp.Expression, exp.or_(*items, copy=False))


def lnot(x: exp.Expression) -> exp.Expression:
    if is_true(x):
        return FALSE
    if is_false(x):
        return TRUE
    return cast(exp.Expression, exp.not_(x, copy=False))


def num(n: int) -> exp.Expression:
    lit = exp.Literal.number(abs(n))
    e: exp.Expression = exp.Neg(this=lit) if n < 0 else lit
    if not (-(2**31) <= n < 2**31):
        e = exp.cast(exp.Paren(this=e) if n < 0 else e, "BIGINT")
    return e


def alias(e: exp.Expression, name: str) -> exp.Expression:
    return cast(exp.Expression, exp.alias_(e, name, copy=False))


def col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table, quoted=False)


def table(name: str, as_: str) -> exp.Expression:
    """The table ``name`` under the alias ``as_``, built as nodes: ``exp.to_table`` parses
    its text, and a what_can plans a few thousand tables."""
    return alias(exp.Table(this=exp.to_identifier(name)), as_)


def join(
    sel: exp.Select,
    target: exp.Expression,
    on: exp.Expression | None = None,
    *,
    side: str | None = None,
    kind: str | None = None,
) -> exp.Select:
    """``sel`` joined (in place) with ``target``: ``side="LEFT"``, ``kind="CROSS"``.
    Built as nodes: ``Select.join`` parses its join type from text on every call."""
    j = exp.Join(this=target)
    if on is not None:
        j.set("on", on)
    if side:
        j.set("side", side)
    if kind:
        j.set("kind", kind)
    sel.append("joins", j)
    return sel


# ======================================================================== lowered values


@dataclass(slots=True)
class V:
    """A lowered node. ``kind``: ``const`` (a folded value; ``value``), ``err`` (always an
    error), ``bool`` (``t``/``f``), ``val`` (``x`` of type ``ty``, erroring where ``err``),
    ``rec`` (a record literal with computed fields: ``fields``)."""

    kind: str
    value: Any = None
    t: exp.Expression = FALSE
    f: exp.Expression = FALSE
    x: exp.Expression | None = None
    err: exp.Expression = FALSE
    ty: Ty | None = None
    deps: frozenset[str] = frozenset()
    fields: dict[str, V] = field(default_factory=dict)
    base: str | None = None  # "p"/"r": this is the branch's principal/resource itself


ERR = V("err")


def const(v: Any) -> V:
    return V("const", value=v)


def _deps(*vs: V) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for v in vs:
        out |= v.deps
    return out


# ======================================================================== reading the Program

ScopeTest = tuple[str, Any]  # ("eq" | "scope_is" | "scope_in" | "scope_in_any", argument)


@dataclass(slots=True)
class PolicyRules:
    """One policy as the Program states it: effect, scope tests per variable, condition."""

    policy_id: str
    index: int
    effect: str
    tests: dict[str, tuple[ScopeTest, ...]]
    cond_pred: str
    reads: frozenset[str]  # request variables the condition reads


def read_program(program: Program) -> list[PolicyRules]:
    groups = program.by_head()
    out = []
    for i, info in enumerate(program.policies.values()):
        rules = groups.get(info.scope_pred, [])
        if len(rules) != 1:  # pragma: no cover - lower.py emits one scope rule per policy
            raise ValueError(f"policy {info.policy_id}: expected one scope rule")
        out.append(
            PolicyRules(
                info.policy_id,
                i,
                info.effect,
                _scope_tests(rules[0]),
                info.cond_pred,
                _reads(info.cond_pred, groups),
            )
        )
    return out


def _scope_tests(rule: Rule) -> dict[str, tuple[ScopeTest, ...]]:
    var_of: dict[str, str] = {}
    tests: dict[str, list[ScopeTest]] = {"principal": [], "action": [], "resource": []}
    for lit in rule.body:
        if isinstance(lit, Atom) and lit.pred in tests and len(lit.args) == 1:
            arg = lit.args[0]
            if isinstance(arg, Var):
                var_of[arg.name] = lit.pred
            elif isinstance(arg, Const):
                tests[lit.pred].append(("eq", arg.value))
        elif isinstance(lit, Builtin) and lit.op in ("scope_is", "scope_in", "scope_in_any"):
            v, c = lit.args
            if not (isinstance(v, Var) and isinstance(c, Const)):  # pragma: no cover
                raise ValueError(f"unexpected scope literal {lit}")
            tests[var_of[v.name]].append((lit.op, c.value))
        else:  # pragma: no cover - the scope rule's forms are fixed by lower.py
            raise ValueError(f"unexpected scope literal {lit}")
    return {k: tuple(v) for k, v in tests.items()}


def _reads(pred: str, groups: Mapping[str, list[Rule]]) -> frozenset[str]:
    seen: set[str] = set()
    found: set[str] = set()
    todo = [pred]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        if p in ("principal", "action", "resource", "context"):
            found.add(p)
            continue
        for r in groups.get(p, []):
            for lit in r.body:
                if isinstance(lit, Atom):
                    todo.append(lit.pred)
    return frozenset(found)


# ======================================================================== the table layout


@dataclass(slots=True)
class EntityTable:
    """The table of one entity type: ``eid``, attribute columns, ``tags``."""

    type_name: str
    table: str
    attrs: dict[str, tuple[str, Ty]]  # attribute -> (column, type)
    tags: Ty | None = None  # the tag type; None: the type has no tags


def plain_text(s: str) -> str:
    """A string constant written as it is (the tables hold strings as given): one with a
    lone surrogate cannot be SQL text, so a policy comparing with it is not lowered."""
    if has_surrogate(s):
        raise Unsupported("a string with a lone surrogate")
    return s


@dataclass(slots=True)
class Layout:
    """The tables a query reads, how a uid constant becomes its ``eid``, and how a string
    constant is written (as the tables hold strings: ``types.to_sql_text`` where the
    loader wrote them so, else :func:`plain_text`)."""

    tables: dict[str, EntityTable]
    eid: Callable[[EntityUID], exp.Expression]
    text: Callable[[str], str] = plain_text


# ======================================================================== lowering one branch


_FACT_OPS = frozenset({"get_attr", "has_attr", "in", "method:hasTag", "method:getTag"})


@cache
def _no_facts() -> Any:
    return EntityFacts(())


class Branch:
    """One policy condition lowered for (action, principal type, resource type, context).

    ``p`` and ``r`` are the aliases of the principal and resource rows; entities read
    through attributes are LEFT JOINed to the side their uid comes from (``joins``).
    """

    def __init__(
        self,
        groups: Mapping[str, list[Rule]],
        layout: Layout,
        funcs: Funcs,
        *,
        ptype: str,
        rtype: str,
        action: EntityUID,
        context: RecordValue,
    ) -> None:
        self._groups = groups
        self.layout = layout
        self.fn = funcs
        self.ptype = ptype
        self.rtype = rtype
        self.action = action
        self.context = context
        self.memo: dict[str, V] = {}
        self.shapes: dict[str, Shape] = {}
        # joins: (placement, entity type, eid sql) -> alias; per alias its columns read
        self.joins: dict[tuple[str, str, str], str] = {}
        self.join_defs: dict[str, tuple[str, str, exp.Expression]] = {}  # alias -> place, T, on
        self.join_cols: dict[str, set[str]] = {}
        self._n = itertools.count(1)

    # -- the value of a predicate --------------------------------------------------------

    def value(self, pred: str) -> V:
        v = self.memo.get(pred)
        if v is None:
            v = self.memo[pred] = self._value(pred)
        return v

    def _value(self, pred: str) -> V:
        if pred == "principal":
            return self._entity_var("p", self.ptype)
        if pred == "resource":
            return self._entity_var("r", self.rtype)
        if pred == "action":
            return const(self.action)
        if pred == "context":
            return const(self.context)
        rules = self._groups.get(pred, [])
        sh = classify(rules)
        k = sh.kind
        if k == "const":
            return const(sh.value)
        if k == "alias":
            return self.value(sh.preds[0])
        if k == "not":
            a = self.value(sh.preds[0])
            if a.kind == "const":
                return self._fold("not", a.value)
            t, f = self.tf(a)
            return V("bool", t=f, f=t, deps=a.deps)
        if k in ("and", "or"):
            return self._and_or(k, self.value(sh.preds[0]), sh.preds[1])
        if k == "if":
            return self._if(*sh.preds)
        if k == "and_then":
            c = self.value(sh.preds[0])
            tc, fc = self.tf(c)
            if is_false(tc):
                return V("bool", f=fc, deps=c.deps) if not is_false(fc) else ERR
            i = self.value(sh.preds[1])
            ti, fi = self.tf(i)
            return V("bool", t=land(tc, ti), f=lor(fc, land(tc, fi)), deps=_deps(c, i))
        if k == "call":
            return self._call(sh)
        raise Unsupported(f"a rule group of an unknown form ({pred})")

    def _entity_var(self, side: str, etype: str) -> V:
        return V("val", x=col("eid", side), ty=Ty("entity", etype), deps=frozenset(side), base=side)

    # -- booleans ----------------------------------------------------------------------------

    def tf(self, v: V) -> tuple[exp.Expression, exp.Expression]:
        """``T`` and ``F`` of a node used where the language wants a Bool."""
        if v.kind == "bool":
            return v.t, v.f
        if v.kind == "const":
            if v.value is True:
                return TRUE, FALSE
            if v.value is False:
                return FALSE, TRUE
            return FALSE, FALSE  # a non-Bool: a type error
        if v.kind == "val" and v.ty is not None and v.ty.kind == "bool":
            assert v.x is not None
            ok = lnot(v.err)
            return land(ok, v.x), land(ok, lnot(v.x))
        return FALSE, FALSE

    def _and_or(self, kind: str, a: V, b_pred: str) -> V:
        ta, fa = self.tf(a)
        short_t = kind == "or"
        # the operand value that decides without evaluating b
        if kind == "and":
            if is_false(ta):  # b never evaluated
                return V("bool", f=fa, deps=a.deps) if not is_false(fa) else ERR
            b = self.value(b_pred)
            tb, fb = self.tf(b)
            return V("bool", t=land(ta, tb), f=lor(fa, land(ta, fb)), deps=_deps(a, b))
        assert short_t
        if is_false(fa):
            return V("bool", t=ta, deps=a.deps) if not is_false(ta) else ERR
        b = self.value(b_pred)
        tb, fb = self.tf(b)
        return V("bool", t=lor(ta, land(fa, tb)), f=land(fa, fb), deps=_deps(a, b))

    def _if(self, c_pred: str, a_pred: str, b_pred: str) -> V:
        c = self.value(c_pred)
        tc, fc = self.tf(c)
        if is_false(tc) and is_false(fc):
            return ERR
        a = self.value(a_pred) if not is_false(tc) else None
        b = self.value(b_pred) if not is_false(fc) else None
        if b is None and a is not None and is_true(tc):
            return a
        if a is None and b is not None and is_true(fc):
            return b
        if _is_boolish(a) and _is_boolish(b):
            ta, fa = self.tf(a) if a is not None else (FALSE, FALSE)
            tb, fb = self.tf(b) if b is not None else (FALSE, FALSE)
            return V(
                "bool",
                t=lor(land(tc, ta), land(fc, tb)),
                f=lor(land(tc, fa), land(fc, fb)),
                deps=_deps(c, *(x for x in (a, b) if x is not None)),
            )
        va = self.as_value(a) if a is not None else None
        vb = self.as_value(b) if b is not None else None
        ty = _join_types(va, vb)
        if ty is None:
            raise Unsupported("an `if` whose branches have different types")
        xa = va.x if va is not None and va.x is not None else exp.Null()
        xb = vb.x if vb is not None and vb.x is not None else exp.Null()
        ea = va.err if va is not None else TRUE
        eb = vb.err if vb is not None else TRUE
        x = exp.Case(ifs=[exp.If(this=tc, true=xa)], default=xb)
        err = lor(land(lnot(tc), lnot(fc)), land(tc, ea), land(fc, eb))
        # tc/fc are definite, so exactly one of the three holds (or none: then not an error)
        return V("val", x=x, err=err, ty=ty, deps=_deps(c, *(v for v in (va, vb) if v)))

    # -- values ------------------------------------------------------------------------------

    def as_value(self, v: V) -> V:
        """A node as a typed SQL value (booleans become a BOOLEAN that errs off T and F)."""
        if v.kind == "val" or v.kind == "err":
            return v
        if v.kind == "bool":
            return V("val", x=v.t, err=land(lnot(v.t), lnot(v.f)), ty=BOOL, deps=v.deps)
        if v.kind == "const":
            return self.literal(v.value)
        raise Unsupported("a record built from computed values used as a value")

    def literal(self, c: Any, want: Ty | None = None) -> V:
        """A constant as a typed SQL value."""
        t = type(c)
        if t is bool:
            return V("val", x=exp.Boolean(this=c), ty=BOOL)
        if t is int:
            return V("val", x=num(c), ty=LONG)
        if t is str:
            return V("val", x=exp.Literal.string(self.layout.text(c)), ty=STR)
        if t is EntityUID:
            return V("val", x=self.layout.eid(c), ty=Ty("entity", c.type))
        if t is SetValue:
            elems = list(c)
            if not elems:
                el = want.elem if want is not None and want.kind == "set" else None
                if el is None:
                    raise Unsupported("an empty set whose element type is not known")
                return V("val", x=exp.cast(exp.Array(expressions=[]), _array_type(el)), ty=want)
            lits = [self.literal(e) for e in elems]
            kinds = {lit.ty.kind for lit in lits if lit.ty is not None}
            if len(kinds) != 1 or "set" in kinds or "record" in kinds:
                raise Unsupported("a set constant with elements of several types")
            etypes = {lit.ty.name for lit in lits if lit.ty is not None}
            el = lits[0].ty
            assert el is not None
            if el.kind == "entity" and len(etypes) > 1:
                el = Ty("entity", "")
            return V(
                "val", x=self.fn.make_set([lit.x for lit in lits if lit.x]), ty=Ty("set", elem=el)
            )
        raise Unsupported(f"a constant of type {type(c).__name__} in SQL")

    def _fold(self, op: str, *args: Any) -> V:
        if op == "not":
            (a,) = args
            if a is True:
                return const(False)
            if a is False:
                return const(True)
            return ERR
        try:
            return const(builtin(op)(_no_facts(), *args))
        except EvaluationError:
            return ERR

    def _call(self, sh: Shape) -> V:
        op = sh.op
        vs = [self.value(p) for p in sh.preds]
        consts = sh.consts
        for v in vs:  # operands are evaluated left to right: a sure error is the result
            if v.kind == "err":
                return ERR
        if all(v.kind == "const" for v in vs):
            vals = [v.value for v in vs]
            needs_facts = op in _FACT_OPS and vals and type(vals[0]) is EntityUID
            if not needs_facts:
                return self._fold(op, *vals, *consts)
        arity = _ARITY.get(op)
        if arity is not None and len(vs) != arity:
            return ERR  # a core method called with the wrong number of arguments
        handler = _OPS.get(op)
        if handler is None:
            if op.startswith(("function:", "method:")):
                raise Unsupported(
                    f"the extension operation `{op.split(':', 1)[1]}` on values read from entities"
                )
            raise Unsupported(f"the operation {op}")
        out: V = handler(self, vs, consts)
        return out

    # -- entities and attributes ---------------------------------------------------------------

    def entity_cols(self, ent: V) -> Callable[[str], exp.Expression]:
        """Columns of the entity ``ent`` refers to (a LEFT JOIN unless it is ``p``/``r``)."""
        if ent.base is not None:
            side = ent.base
            return lambda c: col(c, side)
        assert ent.ty is not None and ent.x is not None
        etype = ent.ty.name
        tbl = self.layout.tables[etype]
        place = "top" if ent.deps >= {"p", "r"} else ("p" if ent.deps == {"p"} else "r")
        key = (place, etype, ent.x.sql())
        alias = self.joins.get(key)
        if alias is None:
            alias = self.joins[key] = f"j{next(self._n)}"
            self.join_defs[alias] = (place, tbl.table, ent.x)
            self.join_cols[alias] = set()
        if place == "top":
            return lambda c: col(c, alias)
        cols = self.join_cols[alias]

        def ref(c: str) -> exp.Expression:
            cols.add(c)
            return col(f"{alias}__{c}", place)

        return ref

    def entity_attr(self, ent: V, attr: str) -> tuple[exp.Expression, Ty] | None:
        """The column of ``attr`` on ``ent`` (None: no entity of its type has it)."""
        assert ent.ty is not None
        etype = ent.ty.name
        if not etype:
            raise Unsupported("an attribute of an entity whose type is not known statically")
        tbl = self.layout.tables.get(etype)
        if tbl is None:
            return None
        c = tbl.attrs.get(attr)
        if c is None:
            return None
        name, ty = c
        if not ty.supported:
            raise Unsupported(f"the attribute `{attr}` of {etype}: {ty.name}")
        return self.entity_cols(ent)(name), ty

    def entity_tags(self, ent: V) -> tuple[exp.Expression, Ty] | None:
        assert ent.ty is not None
        etype = ent.ty.name
        if not etype:
            raise Unsupported("the tags of an entity whose type is not known statically")
        tbl = self.layout.tables.get(etype)
        if tbl is None or tbl.tags is None:
            return None
        if not tbl.tags.supported:
            raise Unsupported(f"the tags of {etype}: {tbl.tags.name}")
        return self.entity_cols(ent)("tags"), tbl.tags


def _is_boolish(v: V | None) -> bool:
    return v is None or v.kind == "bool" or (v.kind == "const" and type(v.value) is bool)


def _join_types(a: V | None, b: V | None) -> Ty | None:
    tys = [v.ty for v in (a, b) if v is not None and v.kind == "val" and v.ty is not None]
    if not tys:
        return None
    t0 = tys[0]
    for t in tys[1:]:
        if t != t0:
            return None  # (entities of different types: get_attr would need both tables)
    return t0


def _array_type(el: Ty) -> str:
    return f"{sql_type(el)}[]"


# ======================================================================== operations


def _ok(*vs: V) -> exp.Expression:
    return lnot(lor(*(v.err for v in vs)))


def _boolv(t: exp.Expression, f: exp.Expression, *vs: V) -> V:
    return V("bool", t=t, f=f, deps=_deps(*vs))


def _typed(b: Branch, v: V, want: Ty | None = None) -> V:
    """An operand as a typed SQL value (constants become literals)."""
    if v.kind == "const":
        return b.literal(v.value, want)
    return b.as_value(v)


def _kind(v: V) -> str:
    """The operand's kind: a language type tag for constants, the static type otherwise."""
    if v.kind == "const":
        t = type(v.value)
        return {
            bool: "bool",
            int: "long",
            str: "str",
            EntityUID: "entity",
            SetValue: "set",
            RecordValue: "record",
        }.get(t, "ext")
    if v.kind == "bool":
        return "bool"
    if v.kind == "rec":
        return "record"
    assert v.ty is not None
    return v.ty.kind


def op_eq(b: Branch, vs: list[V], _c: tuple[Any, ...], negate: bool = False) -> V:
    a, c = vs
    ka, kc = _kind(a), _kind(c)
    if "ext" in (ka, kc):
        if ka == kc:
            raise Unsupported("`==` between extension values read from entities")
        return _eq_result(False, negate, a, c)
    if ka != kc:
        return _eq_result(False, negate, a, c)
    if ka == "record":
        raise Unsupported("`==` between records read from entities")
    if ka == "entity":
        ta = a.value.type if a.kind == "const" else (a.ty.name if a.ty else "")
        tc = c.value.type if c.kind == "const" else (c.ty.name if c.ty else "")
        if ta and tc and ta != tc:
            return _eq_result(False, negate, a, c)
    if ka == "set":
        ea = _set_elem(a)
        ec = _set_elem(c)
        if ea is not None and ec is not None and not _same_elem(ea, ec):
            # sets of different element types are equal only when both are empty
            xa, xc = _typed(b, a), _typed(b, c)
            assert xa.x is not None and xc.x is not None
            both_empty = land(
                exp.EQ(this=b.fn.list_len(xa.x), expression=num(0)),
                exp.EQ(this=b.fn.list_len(xc.x), expression=num(0)),
            )
            ok = _ok(xa, xc)
            t, f = land(ok, both_empty), land(ok, lnot(both_empty))
            return _boolv(f, t, a, c) if negate else _boolv(t, f, a, c)
    want = a.ty if a.kind == "val" else (c.ty if c.kind == "val" else None)
    xa, xc = _typed(b, a, want), _typed(b, c, want)
    assert xa.x is not None and xc.x is not None
    ok = _ok(xa, xc)
    eq = exp.EQ(this=xa.x, expression=xc.x)
    t, f = land(ok, eq), land(ok, exp.NEQ(this=xa.x.copy(), expression=xc.x.copy()))
    return _boolv(f, t, a, c) if negate else _boolv(t, f, a, c)


def _eq_result(value: bool, negate: bool, *vs: V) -> V:
    ok = _ok(*(b for b in vs if b.kind != "const"))
    r = value != negate
    return _boolv(ok if r else FALSE, FALSE if r else ok, *vs)


def _set_elem(v: V) -> Ty | None:
    if v.kind == "const":
        elems = list(v.value)
        if not elems:
            return None
        k = _kind(const(elems[0]))
        return Ty(k) if k != "entity" else Ty("entity", "")
    return v.ty.elem if v.ty is not None else None


def _same_elem(a: Ty, b: Ty) -> bool:
    return a.kind == b.kind


def op_neq(b: Branch, vs: list[V], c: tuple[Any, ...]) -> V:
    return op_eq(b, vs, c, negate=True)


def _cmp(sym: str) -> Callable[[Branch, list[V], tuple[Any, ...]], V]:
    cls: Any = {"<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE}[sym]
    inv: Any = {"<": exp.GTE, "<=": exp.GT, ">": exp.LTE, ">=": exp.LT}[sym]

    def op(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
        a, c = vs
        ka, kc = _kind(a), _kind(c)
        if ka == kc == "long":
            xa, xc = _typed(b, a), _typed(b, c)
            assert xa.x is not None and xc.x is not None
            ok = _ok(xa, xc)
            return _boolv(
                land(ok, cls(this=xa.x, expression=xc.x)),
                land(ok, inv(this=xa.x.copy(), expression=xc.x.copy())),
                a,
                c,
            )
        if "ext" in (ka, kc):
            raise Unsupported(f"`{sym}` on extension values read from entities")
        return ERR  # the language orders Longs (and datetimes/durations) only

    return op


def _arith(sym: str) -> Callable[[Branch, list[V], tuple[Any, ...]], V]:
    cls: Any = {"+": exp.Add, "-": exp.Sub, "*": exp.Mul}[sym]

    def op(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
        a, c = vs
        if _kind(a) != "long" or _kind(c) != "long":
            return ERR
        xa, xc = _typed(b, a), _typed(b, c)
        assert xa.x is not None and xc.x is not None
        return _checked(cls(this=_dec(xa.x), expression=_dec(xc.x)), xa, xc)

    return op


def _dec(x: exp.Expression) -> exp.Expression:
    return exp.cast(x, "DECIMAL(38, 0)")


def _checked(raw: exp.Expression, *operands: V) -> V:
    """A Long result computed exactly, an error when out of the 64-bit range."""
    in_range = exp.Between(this=raw, low=_dec(num(LONG_MIN)), high=_dec(num(LONG_MAX)))
    x = exp.cast(
        exp.Case(ifs=[exp.If(this=in_range, true=raw.copy())], default=exp.Null()), "BIGINT"
    )
    err = lor(
        *(o.err for o in operands), lnot(exp.Coalesce(this=in_range.copy(), expressions=[FALSE]))
    )
    return V("val", x=x, err=err, ty=LONG, deps=_deps(*operands))


def op_neg(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    (a,) = vs
    if _kind(a) != "long":
        return ERR
    xa = _typed(b, a)
    assert xa.x is not None
    return _checked(exp.Neg(this=_dec(xa.x)), xa)


def op_get_attr(b: Branch, vs: list[V], consts: tuple[Any, ...]) -> V:
    (o,) = vs
    (name,) = consts
    if o.kind == "rec":
        fv = o.fields.get(name)
        if fv is None:
            return ERR
        return _with_err(fv, lor(*(f.err for f in o.fields.values() if f.kind == "val")))
    k = _kind(o)
    if k == "entity":
        ent = _typed(b, o)
        got = b.entity_attr(ent, name)
        if got is None:
            return ERR
        x, ty = got
        return V(
            "val",
            x=x,
            err=lor(ent.err, exp.Is(this=x.copy(), expression=exp.Null())),
            ty=ty,
            deps=ent.deps,
        )
    if k == "record":
        if o.kind == "const":  # pragma: no cover - folded by _call
            return ERR
        assert o.ty is not None and o.x is not None
        fd = o.ty.field(name)
        if fd is None:
            return ERR
        fname, fty, _req = fd
        x = exp.Dot(this=o.x.copy(), expression=exp.to_identifier(fname))
        return V(
            "val",
            x=x,
            err=lor(o.err, exp.Is(this=x.copy(), expression=exp.Null())),
            ty=fty,
            deps=o.deps,
        )
    return ERR


def _with_err(v: V, err: exp.Expression) -> V:
    if is_false(err):
        return v
    if v.kind == "const":
        raise Unsupported("a record literal whose other fields may fail")
    if v.kind == "bool":
        ok = lnot(err)
        return V("bool", t=land(ok, v.t), f=land(ok, v.f), deps=v.deps)
    return V("val", x=v.x, err=lor(err, v.err), ty=v.ty, deps=v.deps)


def op_has_attr(b: Branch, vs: list[V], consts: tuple[Any, ...]) -> V:
    (o,) = vs
    (name,) = consts
    if o.kind == "rec":
        ok = _ok(*(f for f in o.fields.values() if f.kind == "val"))
        return _boolv(ok if name in o.fields else FALSE, FALSE if name in o.fields else ok, o)
    k = _kind(o)
    if k == "entity":
        ent = _typed(b, o)
        got = b.entity_attr(ent, name)
        ok = lnot(ent.err)
        if got is None:
            return _boolv(FALSE, ok, ent)
        x, _ty = got
        present = exp.not_(exp.Is(this=x, expression=exp.Null()))
        return _boolv(
            land(ok, present), land(ok, exp.Is(this=x.copy(), expression=exp.Null())), ent
        )
    if k == "record":
        assert o.ty is not None and o.x is not None
        fd = o.ty.field(name)
        ok = lnot(o.err)
        if fd is None:
            return _boolv(FALSE, ok, o)
        if fd[2]:  # required: always present
            return _boolv(ok, FALSE, o)
        x = exp.Dot(this=o.x.copy(), expression=exp.to_identifier(fd[0]))
        return _boolv(
            land(ok, exp.not_(exp.Is(this=x, expression=exp.Null()))),
            land(ok, exp.Is(this=x.copy(), expression=exp.Null())),
            o,
        )
    return ERR


def op_is_type(b: Branch, vs: list[V], consts: tuple[Any, ...]) -> V:
    (o,) = vs
    (t,) = consts
    if _kind(o) != "entity":
        return ERR
    assert o.ty is not None
    if not o.ty.name:
        raise Unsupported("`is` on an entity whose type is not known statically")
    ok = lnot(o.err)
    return _boolv(ok, FALSE, o) if o.ty.name == t else _boolv(FALSE, ok, o)


def _anc_in(
    lhs: exp.Expression, target: exp.Expression, *, many: bool, fn: Funcs
) -> exp.Expression:
    """``lhs in target`` over the closure table (``target`` an eid, or a list of eids)."""
    sub = exp.select(exp.Literal.number(1)).from_(table(ANC, "h"), copy=False)
    cond = exp.EQ(this=col("eid", "h"), expression=lhs)
    if many:
        hit = fn.list_contains(target, col("aeid", "h"))
    else:
        hit = exp.EQ(this=col("aeid", "h"), expression=target)
    return exp.Exists(this=sub.where(land(cond, hit), copy=False))


def _anc_in_const(lhs: exp.Expression, targets: list[exp.Expression], fn: Funcs) -> exp.Expression:
    """``lhs in E`` / ``lhs in [E1, E2]`` with constant targets: a semi-join. On DuckDB
    one target is an ``EXISTS`` correlated on both columns of the closure, so that when
    policies of one shape put their targets in a constants table the subquery is
    decorrelated on the (row, target) pairs, not on every member of every target."""
    if fn.duck and len(targets) == 1:
        return _anc_in(lhs, targets[0], many=False, fn=fn)
    sub = exp.select(col("eid", "h")).from_(table(ANC, "h"), copy=False)
    if len(targets) == 1:
        sub = sub.where(exp.EQ(this=col("aeid", "h"), expression=targets[0]), copy=False)
    else:
        sub = sub.where(exp.In(this=col("aeid", "h"), expressions=targets), copy=False)
    return exp.In(this=lhs, query=exp.Subquery(this=sub))


def op_in(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    a, s = vs
    if _kind(a) != "entity":
        return ERR
    ks = _kind(s)
    xa = _typed(b, a)
    assert xa.x is not None
    if ks == "entity":
        ok = _ok(xa, s) if s.kind != "const" else lnot(xa.err)
        if s.kind == "const":
            hit = _anc_in_const(xa.x, [b.layout.eid(s.value)], b.fn)
        else:
            xs = _typed(b, s)
            assert xs.x is not None
            hit = _anc_in(xa.x, xs.x, many=False, fn=b.fn)
        return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), a, s)
    if ks == "set":
        if s.kind == "const":
            elems = list(s.value)
            if any(type(e) is not EntityUID for e in elems):
                return ERR
            ok = lnot(xa.err)
            if not elems:
                return _boolv(FALSE, ok, a)
            hit = _anc_in_const(xa.x, [b.layout.eid(e) for e in elems], b.fn)
            return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), a, s)
        xs = _typed(b, s)
        assert xs.ty is not None and xs.x is not None
        el = xs.ty.elem
        ok = _ok(xa, xs)
        if el is None or el.kind != "entity":
            # a set of non-entities: false when empty, else a type error
            empty = exp.EQ(this=b.fn.list_len(xs.x), expression=num(0))
            return _boolv(FALSE, land(ok, empty), a, s)
        hit = _anc_in(xa.x, xs.x, many=True, fn=b.fn)
        return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), a, s)
    return ERR


def op_like(b: Branch, vs: list[V], consts: tuple[Any, ...]) -> V:
    (s,) = vs
    (pattern,) = consts
    if _kind(s) != "str":
        return ERR
    xs = _typed(b, s)
    assert xs.x is not None
    like: exp.Expression = exp.Escape(
        this=exp.Like(
            this=xs.x, expression=exp.Literal.string(_like_pattern(pattern, b.layout.text))
        ),
        expression=exp.Literal.string("!"),
    )
    ok = lnot(xs.err)
    return _boolv(land(ok, like), land(ok, lnot(like.copy())), xs)


def _like_pattern(p: str, text: Callable[[str], str] = plain_text) -> str:
    """The language's pattern (``*`` any text; ``\\*``, ``\\\\`` literal) as SQL LIKE with
    ``!`` as the escape character; each literal character written by ``text`` (the
    layout's, as the tables hold strings)."""
    out: list[str] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p):
            lit = p[i + 1]
            i += 2
        elif ch == "*":
            out.append("%")
            i += 1
            continue
        else:
            lit = ch
            i += 1
        out.append("!" + lit if lit in "%_!" else text(lit))
    return "".join(out)


def op_make_set(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    typed = [_typed(b, v) for v in vs]
    kinds = {t.ty.kind for t in typed if t.ty is not None}
    if len(kinds) != 1 or not kinds <= {"long", "str", "bool", "entity"}:
        raise Unsupported("a set literal with computed elements of several (or nested) types")
    names = {t.ty.name for t in typed if t.ty is not None}
    el = typed[0].ty
    assert el is not None
    if el.kind == "entity" and len(names) > 1:
        el = Ty("entity", "")
    x = b.fn.make_set([t.x for t in typed if t.x is not None])
    return V(
        "val", x=x, err=lor(*(t.err for t in typed)), ty=Ty("set", elem=el), deps=_deps(*typed)
    )


def op_make_record(b: Branch, vs: list[V], consts: tuple[Any, ...]) -> V:
    (keys,) = consts
    fields: dict[str, V] = {}
    for k, v in zip(keys, vs, strict=True):
        fields[k] = v  # a duplicate key keeps the last value, as RecordValue(dict(...)) does
    return V("rec", fields=fields, deps=_deps(*vs))


def _set_operands(b: Branch, s: V, o: V) -> tuple[V, V] | None:
    if _kind(s) != "set" or _kind(o) != "set":
        return None
    xs = _typed(b, s, o.ty if o.kind == "val" else None)
    xo = _typed(b, o, xs.ty)
    return xs, xo


def m_contains(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    s, x = vs
    if _kind(s) != "set":
        return ERR
    el = _set_elem(s)
    kx = _kind(x)
    if kx in ("set", "record", "ext"):
        if s.kind == "const" or kx == "ext":
            raise Unsupported("`contains` of a set, record or extension value")
        return _eq_result(False, False, s, x)  # a set column holds scalars only
    xs = _typed(b, s)
    assert xs.x is not None
    if el is not None and el.kind != kx:
        return _eq_result(False, False, xs, x)
    xx = _typed(b, x)
    assert xx.x is not None
    if el is None:  # an empty constant set
        return _eq_result(False, False, xs, xx)
    hit = b.fn.list_contains(xs.x, xx.x)
    ok = _ok(xs, xx)
    return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), xs, xx)


def m_contains_all(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    s, o = vs
    got = _set_operands(b, s, o)
    if got is None:
        return ERR
    xs, xo = got
    assert xs.x is not None and xo.x is not None
    ok = _ok(xs, xo)
    es, eo = _set_elem(s), _set_elem(o)
    if es is not None and eo is not None and es.kind != eo.kind:
        hit: exp.Expression = exp.EQ(this=b.fn.list_len(xo.x), expression=num(0))
    else:
        hit = b.fn.list_has_all(xs.x, xo.x)
    return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), xs, xo)


def m_contains_any(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    s, o = vs
    got = _set_operands(b, s, o)
    if got is None:
        return ERR
    xs, xo = got
    assert xs.x is not None and xo.x is not None
    ok = _ok(xs, xo)
    es, eo = _set_elem(s), _set_elem(o)
    if es is not None and eo is not None and es.kind != eo.kind:
        return _boolv(FALSE, ok, xs, xo)
    hit = b.fn.list_has_any(xs.x, xo.x)
    return _boolv(land(ok, hit), land(ok, lnot(hit.copy())), xs, xo)


def m_is_empty(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    if len(vs) != 1 or _kind(vs[0]) != "set":
        return ERR
    xs = _typed(b, vs[0])
    assert xs.x is not None
    empty = exp.EQ(this=b.fn.list_len(xs.x), expression=num(0))
    ok = lnot(xs.err)
    return _boolv(land(ok, empty), land(ok, lnot(empty.copy())), xs)


def _tag_operands(b: Branch, vs: list[V]) -> tuple[V, V] | None:
    if len(vs) != 2:
        return None
    e, k = vs
    if _kind(e) != "entity" or _kind(k) != "str":
        return None
    return _typed(b, e), _typed(b, k)


def m_has_tag(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    got = _tag_operands(b, vs)
    if got is None:
        return ERR
    e, k = got
    ok = _ok(e, k)
    tags = b.entity_tags(e)
    if tags is None:
        return _boolv(FALSE, ok, e, k)
    m, _ty = tags
    assert k.x is not None
    has = exp.Coalesce(this=b.fn.map_has(m, k.x), expressions=[FALSE])
    return _boolv(land(ok, has), land(ok, lnot(has.copy())), e, k)


def m_get_tag(b: Branch, vs: list[V], _c: tuple[Any, ...]) -> V:
    got = _tag_operands(b, vs)
    if got is None:
        return ERR
    e, k = got
    tags = b.entity_tags(e)
    if tags is None:
        return ERR
    m, ty = tags
    assert k.x is not None
    x = b.fn.map_get(m, k.x)
    return V(
        "val",
        x=x,
        err=lor(e.err, k.err, exp.Is(this=x.copy(), expression=exp.Null())),
        ty=ty,
        deps=_deps(e, k),
    )


_ARITY = {
    "method:contains": 2,
    "method:containsAll": 2,
    "method:containsAny": 2,
    "method:isEmpty": 1,
    "method:hasTag": 2,
    "method:getTag": 2,
}

_OPS: dict[str, Callable[[Branch, list[V], tuple[Any, ...]], V]] = {
    "eq": op_eq,
    "neq": op_neq,
    "lt": _cmp("<"),
    "le": _cmp("<="),
    "gt": _cmp(">"),
    "ge": _cmp(">="),
    "add": _arith("+"),
    "sub": _arith("-"),
    "mul": _arith("*"),
    "neg": op_neg,
    "in": op_in,
    "get_attr": op_get_attr,
    "has_attr": op_has_attr,
    "is_type": op_is_type,
    "like": op_like,
    "make_set": op_make_set,
    "make_record": op_make_record,
    "method:contains": m_contains,
    "method:containsAll": m_contains_all,
    "method:containsAny": m_contains_any,
    "method:isEmpty": m_is_empty,
    "method:hasTag": m_has_tag,
    "method:getTag": m_get_tag,
}
