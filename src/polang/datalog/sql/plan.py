"""From lowered policies to the queries: one per action, the decision rules as set operations.

For an action, every policy whose action constraint admits it contributes one SELECT per
(principal type, resource type) the action applies to: the rows ``(r, p)`` where its scope
holds and ``T[condition]``, tagged with the policy's kind. ``rules/decision.dl`` is then one
aggregation over their ``UNION ALL``, grouped by the integer pair ``(r, p)``::

    allowed   = rows with a permit and no forbid      (permitted, not forbidden)
    reasons   = the permits of the row                (reason(P) :- allow, applies(P), ...)

so each allowed triple comes out once however many permits grant it, and no string is
compared until the uids are decoded for output. Policies SQL cannot express exactly
(:class:`~polang.datalog.sql.lower.Unsupported`) are either a UDF call (the engine holds
the entities in process) or *maybe* rows: their scope only, which make a row conditional
(a maybe-permit) or keep it from being surely allowed (a maybe-forbid), never allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from polang.datalog.ir import Program
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue

from .lower import (
    ANC,
    Branch,
    Layout,
    PolicyRules,
    Unsupported,
    alias,
    col,
    is_false,
    land,
    num,
    read_program,
)
from .types import Funcs

SURE_PERMIT, MAYBE_PERMIT, SURE_FORBID, MAYBE_FORBID = 1, 2, 4, 8

UDF_NAME = "polang_policy"
"""The UDF a policy runs as when SQL cannot express it: ``polang_policy(policy index,
action eid, principal eid, resource eid)`` is 1 when the condition is true, 0 when false,
NULL when it errors."""


def is_action_type(entity_type: str) -> bool:
    return entity_type == "Action" or entity_type.endswith("::Action")


@dataclass(slots=True)
class Fallback:
    """A policy (for one action and pair of types) not expressed in SQL, and why."""

    policy_id: str
    action: EntityUID
    principal_type: str
    resource_type: str
    reason: str
    how: str  # "udf" | "conditional"

    def to_dict(self) -> dict[str, str]:
        return {
            "policy_id": self.policy_id,
            "action": str(self.action),
            "principal_type": self.principal_type,
            "resource_type": self.resource_type,
            "reason": self.reason,
            "how": self.how,
        }


@dataclass(slots=True)
class Population:
    """What planning needs to know about the entities (not the entities themselves)."""

    layout: Layout
    stored_types: frozenset[str]
    actions: list[EntityUID]
    action_ancestors: Callable[[EntityUID], frozenset[EntityUID]]
    schema: Schema | None = None

    def types_for(self, var: str, action: EntityUID) -> list[str]:
        """The entity types that may be the ``var`` of a request for ``action`` (as
        ``QueryIndex.candidates`` chooses them): the schema's, else every stored type
        that is not an action type."""
        if self.schema is not None:
            ad = self.schema.action(action)
            if ad is None or not ad.applies_to:
                return []
            types = ad.principal_types if var == "principal" else ad.resource_types
            return sorted(t for t in set(types) if t in self.stored_types)
        return sorted(t for t in self.stored_types if not is_action_type(t))


@dataclass(slots=True)
class ActionQuery:
    """The query of one action: the branches and what fell back."""

    action: EntityUID
    branches: list[exp.Select]
    fallbacks: list[Fallback] = field(default_factory=list)
    resource_types: list[str] = field(default_factory=list)
    principal_types: list[str] = field(default_factory=list)

    @property
    def has_maybe(self) -> bool:
        return any(f.how == "conditional" for f in self.fallbacks)


class Planner:
    """Lowers a Program once per (action, types, context) and builds the action queries."""

    def __init__(
        self,
        program: Program,
        population: Population,
        dialect: str = "duckdb",
        *,
        udf: bool = False,
    ) -> None:
        self.program = program
        self.policies = read_program(program)
        self.groups = program.by_head()
        self.pop = population
        self.fn = Funcs(dialect)
        self.dialect = dialect
        self.udf = udf

    # -- scopes ------------------------------------------------------------------------------

    def _action_ok(self, pol: PolicyRules, action: EntityUID) -> bool:
        anc = self.pop.action_ancestors(action)
        for op, arg in pol.tests["action"]:
            if op == "eq":
                ok = type(arg) is EntityUID and arg == action
            elif op == "scope_in":
                ok = arg == action or arg in anc
            elif op == "scope_in_any":
                ok = action in arg or not anc.isdisjoint(arg)
            else:
                ok = op == "scope_is" and action.type == arg
            if not ok:
                return False
        return True

    def _scope_sql(
        self,
        tests: Iterable[tuple[str, Any]],
        side: str,
        etype: str,
        fixed: tuple[EntityUID, frozenset[EntityUID]] | None = None,
    ) -> exp.Expression | None:
        """The scope tests on one side as SQL; None when they can never hold for ``etype``.

        ``fixed``: the side is one stored entity with these ancestors (who_can's resource,
        what_can's principal): its tests are decided here, so the query only carries the
        policies whose scope admits it."""
        if fixed is not None:
            uid, anc = fixed
            for op, arg in tests:
                if op == "eq":
                    ok = type(arg) is EntityUID and arg == uid
                elif op == "scope_is":
                    ok = uid.type == arg
                elif op == "scope_in":
                    ok = arg == uid or arg in anc
                else:
                    ok = uid in arg or not anc.isdisjoint(arg)
                if not ok:
                    return None
            return exp.true()
        conds: list[exp.Expression] = []
        eid = col("eid", side)
        for op, arg in tests:
            if op == "eq":
                if type(arg) is not EntityUID or arg.type != etype:
                    return None
                conds.append(exp.EQ(this=eid.copy(), expression=self.pop.layout.eid(arg)))
            elif op == "scope_is":
                if arg != etype:
                    return None
            elif op in ("scope_in", "scope_in_any"):
                targets = [arg] if op == "scope_in" else sorted(arg)
                if not targets:
                    return None
                sub = exp.select(col("eid", "h")).from_(alias(exp.to_table(ANC), "h"), copy=False)
                ids = [self.pop.layout.eid(t) for t in targets]
                sub = sub.where(
                    exp.EQ(this=col("aeid", "h"), expression=ids[0])
                    if len(ids) == 1
                    else exp.In(this=col("aeid", "h"), expressions=ids)
                )
                conds.append(exp.In(this=eid.copy(), query=exp.Subquery(this=sub)))
        return land(*conds)

    # -- one action ----------------------------------------------------------------------------

    def action_query(
        self,
        action: EntityUID,
        context: RecordValue | None,
        *,
        principal_types: list[str] | None = None,
        resource_types: list[str] | None = None,
        fixed: dict[str, tuple[EntityUID, frozenset[EntityUID]]] | None = None,
    ) -> ActionQuery:
        ptypes = (
            self.pop.types_for("principal", action) if principal_types is None else principal_types
        )
        rtypes = (
            self.pop.types_for("resource", action) if resource_types is None else resource_types
        )
        aq = ActionQuery(action, [], resource_types=rtypes, principal_types=ptypes)
        for pol in self.policies:
            if not self._action_ok(pol, action):
                continue
            forbid = pol.effect == "forbid"
            for tp in ptypes:
                fx = fixed or {}
                ps = self._scope_sql(pol.tests["principal"], "p", tp, fx.get("p"))
                if ps is None:
                    continue
                for tr in rtypes:
                    rs = self._scope_sql(pol.tests["resource"], "r", tr, fx.get("r"))
                    if rs is None:
                        continue
                    sel = self._branch(pol, action, tp, tr, context, land(ps, rs), forbid, aq)
                    if sel is not None:
                        aq.branches.append(sel)
        return aq

    def _branch(
        self,
        pol: PolicyRules,
        action: EntityUID,
        tp: str,
        tr: str,
        context: RecordValue | None,
        scope: exp.Expression,
        forbid: bool,
        aq: ActionQuery,
    ) -> exp.Select | None:
        b = Branch(
            self.groups,
            self.pop.layout,
            self.fn,
            ptype=tp,
            rtype=tr,
            action=action,
            context=context if context is not None else RecordValue(),
        )
        kind = SURE_FORBID if forbid else SURE_PERMIT
        try:
            if context is None and "context" in pol.reads:
                raise Unsupported("the condition reads the context, which the query does not give")
            v = b.value(pol.cond_pred)
            t, _f = b.tf(v)
        except Unsupported as e:
            # an unknown context is not the empty one: never decided by the UDF
            use_udf = self.udf and not (context is None and "context" in pol.reads)
            how = "udf" if use_udf else "conditional"
            aq.fallbacks.append(Fallback(pol.policy_id, action, tp, tr, str(e), how))
            b = Branch(
                self.groups,
                self.pop.layout,
                self.fn,
                ptype=tp,
                rtype=tr,
                action=action,
                context=RecordValue(),
            )
            if use_udf:
                call = exp.Anonymous(
                    this=UDF_NAME,
                    expressions=[
                        num(pol.index),
                        self.pop.layout.eid(action),
                        col("eid", "p"),
                        col("eid", "r"),
                    ],
                )
                t = exp.EQ(this=call, expression=num(1))
            else:
                t = exp.true()
                kind = MAYBE_FORBID if forbid else MAYBE_PERMIT
        where = land(scope, t)
        if is_false(where):
            return None
        return self._select(b, tp, tr, where, kind, pol.index)

    def _select(
        self, b: Branch, tp: str, tr: str, where: exp.Expression, kind: int, pidx: int
    ) -> exp.Select:
        tables = self.pop.layout.tables
        sides: dict[str, exp.Expression] = {}
        for side, etype in (("p", tp), ("r", tr)):
            base = tables[etype].table
            joins = [(ja, d) for ja, d in b.join_defs.items() if d[0] == side]
            if not joins:
                sides[side] = alias(exp.to_table(base), side)
                continue
            sub = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("b")))
            sub = sub.from_(alias(exp.to_table(base), "b"), copy=False)
            for ja, (_place, table, on) in joins:
                for c in sorted(b.join_cols[ja]):
                    sub = sub.select(alias(col(c, ja), f"{ja}__{c}"), append=True, copy=False)
                sub = sub.join(
                    alias(exp.to_table(table), ja),
                    on=exp.EQ(this=col("eid", ja), expression=_inner(on, side)),
                    join_type="left",
                    copy=False,
                )
            sides[side] = alias(exp.Subquery(this=sub), side)
        sel = (
            exp.select(
                alias(col("eid", "r"), "r"),
                alias(col("eid", "p"), "p"),
                alias(num(kind), "k"),
                alias(num(pidx), "pid"),
            )
            .from_(sides["p"], copy=False)
            .join(sides["r"], join_type="cross", copy=False)
        )
        for ja, (place, table, on) in b.join_defs.items():
            if place == "top":
                sel = sel.join(
                    alias(exp.to_table(table), ja),
                    on=exp.EQ(this=col("eid", ja), expression=on.copy()),
                    join_type="left",
                    copy=False,
                )
        return sel.where(where, copy=False)


def _inner(e: exp.Expression, side: str) -> exp.Expression:
    """An expression over a side's outer columns (``r.j1__a``) as the side subquery's
    inner columns (``j1.a``, ``b.a``)."""

    def tr(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table == side:
            name = node.name
            if "__" in name:
                alias, c = name.split("__", 1)
                return col(c, alias)
            return col(name, "b")
        return node

    return e.copy().transform(tr)


# ======================================================================== the decision


def decision_query(
    aq: ActionQuery,
    fn: Funcs,
    *,
    where: exp.Expression | None = None,
    reasons: bool = False,
) -> exp.Select | None:
    """``rules/decision.dl`` over the branches' rows, one row per (r, p) allowed or
    conditional: columns ``r``, ``p``, ``decision`` and, with ``reasons``, ``reasons`` and
    ``residuals`` (lists of policy indexes)."""
    if not aq.branches:
        return None
    union: exp.Expression = aq.branches[0]
    for b in aq.branches[1:]:
        union = exp.Union(this=union, expression=b, distinct=False)
    rows = alias(exp.Subquery(this=union), "x")
    k = col("k", "x")

    def any_k(*kinds: int) -> exp.Expression:
        cond: exp.Expression = (
            exp.EQ(this=k.copy(), expression=num(kinds[0]))
            if len(kinds) == 1
            else exp.In(this=k.copy(), expressions=[num(x) for x in kinds])
        )
        return exp.Anonymous(this="bool_or", expressions=[cond])

    maybe = aq.has_maybe
    if maybe:
        decision: exp.Expression = exp.Case(
            ifs=[
                exp.If(
                    this=land(any_k(SURE_PERMIT), exp.not_(any_k(MAYBE_FORBID))),
                    true=exp.Literal.string("allow"),
                )
            ],
            default=exp.Literal.string("conditional"),
        )
        having: exp.Expression = land(
            exp.not_(any_k(SURE_FORBID)), any_k(SURE_PERMIT, MAYBE_PERMIT)
        )
    else:
        decision = exp.Literal.string("allow")
        having = exp.EQ(this=exp.Max(this=k.copy()), expression=num(SURE_PERMIT))
    sel = exp.select(
        alias(col("r", "x"), "r"),
        alias(col("p", "x"), "p"),
        alias(decision, "decision"),
    ).from_(rows, copy=False)
    if reasons:
        lst = "list" if fn.duck else "collect_list"
        pid = col("pid", "x")
        sel = sel.select(
            alias(
                _filtered(lst, pid, exp.EQ(this=k.copy(), expression=num(SURE_PERMIT))), "reasons"
            ),
            alias(
                _filtered(
                    lst,
                    pid.copy(),
                    exp.In(this=k.copy(), expressions=[num(MAYBE_PERMIT), num(MAYBE_FORBID)]),
                ),
                "residuals",
            ),
            append=True,
            copy=False,
        )
    if where is not None:
        sel = sel.where(where, copy=False)
    return sel.group_by(col("r", "x"), col("p", "x")).having(having, copy=False)


def _filtered(fname: str, arg: exp.Expression, cond: exp.Expression) -> exp.Expression:
    return exp.Filter(
        this=exp.Anonymous(this=fname, expressions=[arg]), expression=exp.Where(this=cond)
    )
