"""From lowered policies to the queries: one per action, the decision rules as set operations.

For an action, every policy whose action constraint admits it contributes one SELECT per
(principal type, resource type) the action applies to: the rows ``(r, p)`` where its scope
holds and ``T[condition]``, tagged with the policy's kind. ``rules/decision.dl`` is then one
aggregation over their ``UNION ALL``, grouped by the integer pair ``(r, p)``::

    allowed   = rows with a permit and no forbid      (permitted, not forbidden)
    reasons   = the permits of the row                (reason(P) :- allow, applies(P), ...)

so each allowed triple comes out once however many permits grant it, and no string is
compared until the uids are decoded for output. Policies SQL cannot express exactly
(:class:`~polang.sql.lower.Unsupported`) are either a UDF call (the engine holds
the entities in process) or *maybe* rows: their scope only, which make a row conditional
(a maybe-permit) or keep it from being surely allowed (a maybe-forbid), never allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlglot import exp

from polang.datalog.ir import Program
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue, is_action_type, printable

from .lower import (
    ANC,
    Branch,
    Layout,
    PolicyRules,
    Unsupported,
    alias,
    col,
    is_false,
    join,
    land,
    num,
    read_program,
    table,
)
from .types import Funcs

SURE_PERMIT, MAYBE_PERMIT, SURE_FORBID, MAYBE_FORBID = 1, 2, 4, 8

UDF_NAME = "polang_policy"
"""The UDF a policy runs as when SQL cannot express it: ``polang_policy(policy index,
action eid, principal eid, resource eid)`` is 1 when the condition is true, 0 when false,
NULL when it errors."""


def sql_comment(text: str) -> str:
    """``text`` as one ``--`` comment line. Line breaks and the other unsafe characters
    (``printable``) are escaped: ``text`` quotes policy ids, attribute names and type
    names, and a line break in one would end the comment and run the rest as SQL."""
    return "-- " + printable(text)


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
class Part:
    """One policy lowered for one branch (action, principal type, resource type), kept as
    the pieces a query assembles: the scope's ``in`` tests with one target as joins on the
    closure (``anc``: side and target eid), the rest of the scope and ``T[condition]``
    (``where``), and the entities read through attributes (``lowered.join_defs``)."""

    policy: int
    kind: int
    tp: str
    tr: str
    lowered: Branch
    anc: list[tuple[str, exp.Expression]]
    where: exp.Expression


@dataclass(slots=True)
class ActionQuery:
    """The query of one action: the lowered policies (``parts``) and what fell back."""

    action: EntityUID
    parts: list[Part]
    fallbacks: list[Fallback] = field(default_factory=list)
    resource_types: list[str] = field(default_factory=list)
    principal_types: list[str] = field(default_factory=list)

    @property
    def has_maybe(self) -> bool:
        return any(f.how == "conditional" for f in self.fallbacks)

    @property
    def branches(self) -> list[Part]:
        """The parts (a policy per branch); empty when no policy can apply."""
        return self.parts


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
    ) -> tuple[exp.Expression, list[exp.Expression]] | None:
        """The scope tests on one side as SQL: a condition and the targets of its ``in``
        tests with one target (each a join on the closure, which holds one row per
        (entity, ancestor), so the join adds no duplicate); None when the tests can
        never hold for ``etype``.

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
            return exp.true(), []
        conds: list[exp.Expression] = []
        joins: list[exp.Expression] = []
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
                ids = [self.pop.layout.eid(t) for t in targets]
                if len(ids) == 1:
                    joins.append(ids[0])
                    continue
                sub = exp.select(col("eid", "h")).from_(table(ANC, "h"), copy=False)
                sub = sub.where(exp.In(this=col("aeid", "h"), expressions=ids))
                conds.append(exp.In(this=eid.copy(), query=exp.Subquery(this=sub)))
        return land(*conds), joins

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
        fx = fixed or {}
        for pol in self.policies:
            if not self._action_ok(pol, action):
                continue
            forbid = pol.effect == "forbid"
            for tp in ptypes:
                ps = self._scope_sql(pol.tests["principal"], "p", tp, fx.get("p"))
                if ps is None:
                    continue
                for tr in rtypes:
                    rs = self._scope_sql(pol.tests["resource"], "r", tr, fx.get("r"))
                    if rs is None:
                        continue
                    anc = [("p", t) for t in ps[1]] + [("r", t) for t in rs[1]]
                    part = self._branch(
                        pol, action, tp, tr, context, land(ps[0], rs[0]), anc, forbid, aq
                    )
                    if part is not None:
                        aq.parts.append(part)
        return aq

    def _branch(
        self,
        pol: PolicyRules,
        action: EntityUID,
        tp: str,
        tr: str,
        context: RecordValue | None,
        scope: exp.Expression,
        anc: list[tuple[str, exp.Expression]],
        forbid: bool,
        aq: ActionQuery,
    ) -> Part | None:
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
        return Part(pol.index, kind, tp, tr, b, anc, where)

    def rows_select(
        self, part: Part, *, candidates: str | None = None, kind: bool = False
    ) -> exp.Select:
        """The rows ``(r, p)`` of one part: over every pair of its two types, or (with
        ``candidates``, a table of ``(r, p)``) over those pairs only. ``kind`` adds the
        column ``k`` (the old aggregation's tag). No ``pid``: :func:`merge_shapes` adds it."""
        b = part.lowered
        tables = self.pop.layout.tables
        sides: dict[str, exp.Expression] = {}
        for side, etype in (("p", part.tp), ("r", part.tr)):
            base = tables[etype].table
            joins = [(ja, d) for ja, d in b.join_defs.items() if d[0] == side]
            if not joins:
                sides[side] = table(base, side)
                continue
            sub = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("b")))
            sub = sub.from_(table(base, "b"), copy=False)
            for ja, (_place, tname, on) in joins:
                for c in sorted(b.join_cols[ja]):
                    sub = sub.select(alias(col(c, ja), f"{ja}__{c}"), append=True, copy=False)
                join(
                    sub,
                    table(tname, ja),
                    exp.EQ(this=col("eid", ja), expression=_inner(on, side)),
                    side="LEFT",
                )
            sides[side] = alias(exp.Subquery(this=sub), side)
        if candidates is None:
            sel = exp.select(alias(col("eid", "r"), "r"), alias(col("eid", "p"), "p")).from_(
                sides["p"], copy=False
            )
            join(sel, sides["r"], kind="CROSS")
        else:
            sel = exp.select(alias(col("r", "x"), "r"), alias(col("p", "x"), "p")).from_(
                table(candidates, "x"), copy=False
            )
            join(sel, sides["p"], exp.EQ(this=col("eid", "p"), expression=col("p", "x")))
            join(sel, sides["r"], exp.EQ(this=col("eid", "r"), expression=col("r", "x")))
        if kind:
            sel = sel.select(alias(num(part.kind), "k"), append=True, copy=False)
        for i, (side, target) in enumerate(part.anc):
            s = f"s{i}"
            join(
                sel,
                table(ANC, s),
                land(
                    exp.EQ(this=col("eid", s), expression=col("eid", side)),
                    exp.EQ(this=col("aeid", s), expression=target.copy()),
                ),
            )
        for ja, (place, tname, on) in b.join_defs.items():
            if place == "top":
                join(
                    sel,
                    table(tname, ja),
                    exp.EQ(this=col("eid", ja), expression=on.copy()),
                    side="LEFT",
                )
        return sel.where(part.where.copy(), copy=False)


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


# ======================================================================== shapes

CONSTS = "c"
"""The alias of a shape's constants table (``VALUES``): ``pid`` and the varying constants."""


def _parameter(node: exp.Literal, spark: bool) -> bool:
    """Whether a literal may become a column of the constants table: not a LIKE pattern or
    its escape, not a range bound of checked arithmetic, not an element of an ``IN``
    list (its length is part of the shape); on Spark not inside a subquery (a correlated
    subquery under ``NOT``/``OR`` is not supported there)."""
    p = node.parent
    while p is not None:
        if isinstance(p, (exp.Escape, exp.Like, exp.Between, exp.DataType)):
            return False
        if isinstance(p, exp.In) and p.args.get("expressions"):
            return False
        if spark and isinstance(p, (exp.Subquery, exp.Exists)):
            return False
        p = p.parent
    return True


def _lit_key(node: exp.Literal) -> tuple[bool, str]:
    return (bool(node.is_string), str(node.this))


def _restorer(
    names: dict[str, int], vary: set[int], vals: list[tuple[bool, str]]
) -> Callable[[exp.Expression], exp.Expression]:
    """Puts the constants that do not vary within a shape back as literals; the others
    become the constants table's columns ``c.k<i>``."""

    def restore(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table == CONSTS and node.name in names:
            i = names[node.name]
            if i not in vary:
                is_str, text = vals[i]
                return exp.Literal(this=text, is_string=is_str)
            return col(f"k{i}", CONSTS)
        return node

    return restore


def merge_shapes(
    selects: list[tuple[exp.Select, int]], dialect: str, *, pid: bool
) -> list[exp.Select]:
    """Selects that differ only in constants, merged into one joined with a ``VALUES``
    table of those constants (one row per policy: ``pid`` and the constants that vary).

    ``selects``: each a part's rows and its policy index. With ``pid`` the rows carry the
    policy index (for reasons); without, constant rows that coincide are kept once, so
    policies of one shape with the same constants give each row once."""
    spark = dialect == "spark"
    groups: dict[str, list[tuple[exp.Select, list[tuple[bool, str]], int]]] = {}
    for sel, pidx in selects:  # each select becomes its template (columns for constants)
        vals: list[tuple[bool, str]] = []
        for lit in list(sel.find_all(exp.Literal)):
            if not _parameter(lit, spark):
                continue
            i = len(vals)
            vals.append(_lit_key(lit))
            lit.replace(exp.column(f"k{i}{'s' if lit.is_string else 'n'}", table=CONSTS))
        # the key's text: DuckDB's generator leaves the tree as it is (no copy needed)
        key = sel.sql(dialect=dialect, copy=spark)
        groups.setdefault(key, []).append((sel, vals, pidx))
    out: list[exp.Select] = []
    for members in groups.values():
        tmpl, vals0, pidx0 = members[0]
        varying = [i for i in range(len(vals0)) if len({m[1][i] for m in members}) > 1]
        rows: list[tuple[Any, ...]] = []
        seen: set[tuple[Any, ...]] = set()
        for _t, vals, pidx in members:
            row = ((pidx,) if pid else ()) + tuple(vals[i] for i in varying)
            if row not in seen:
                seen.add(row)
                rows.append(row)
        names = {f"k{i}s" if vals0[i][0] else f"k{i}n": i for i in range(len(vals0))}
        vary = set(varying) if len(rows) > 1 else set()
        sel = cast(exp.Select, tmpl.transform(_restorer(names, vary, vals0), copy=False))
        if len(rows) == 1:  # one policy, or copies of one: its own select, constants inline
            if pid:
                sel = sel.select(alias(num(pidx0), "pid"), append=True, copy=False)
            out.append(sel)
            continue
        columns = (["pid"] if pid else []) + [f"k{i}" for i in varying]
        tuples = [
            exp.Tuple(
                expressions=[
                    num(v) if isinstance(v, int) else exp.Literal(this=v[1], is_string=v[0])
                    for v in row
                ]
            )
            for row in rows
        ]
        values = exp.Values(
            expressions=tuples,
            alias=exp.TableAlias(
                this=exp.to_identifier(CONSTS), columns=[exp.to_identifier(c) for c in columns]
            ),
        )
        first = sel.args["from_"].this
        sel.set("from_", exp.From(this=values))
        sel.set("joins", [exp.Join(this=first, kind="CROSS"), *(sel.args.get("joins") or [])])
        if pid:
            sel = sel.select(alias(col("pid", CONSTS), "pid"), append=True, copy=False)
        out.append(sel)
    return out


def _union(selects: list[exp.Select]) -> exp.Expression:
    union: exp.Expression = selects[0]
    for b in selects[1:]:
        union = exp.Union(this=union, expression=b, distinct=False)
    return union


# ======================================================================== the decision

PERMITTED = "polang_permitted"
"""The CTE of one action's permitted pairs (in the batch), which the forbids are
evaluated on."""


def decision_query(
    aq: ActionQuery,
    planner: Planner,
    *,
    where: exp.Expression | None = None,
    reasons: bool = False,
    sorted_dups: bool = False,
) -> exp.Select | None:
    """``rules/decision.dl`` over the parts' rows, one row per (r, p) allowed or
    conditional: columns ``r``, ``p``, ``decision`` and, with ``reasons``, ``reasons`` and
    ``residuals`` (lists of policy indexes). ``where`` filters the candidate rows
    (columns ``x.r``, ``x.p``).

    Without conditional policies: the permits' rows, merged into shapes, are grouped by
    the integer pair (each allowed pair once, with its permits as reasons); the forbids,
    merged likewise, are evaluated on those pairs only and anti-joined.

    ``sorted_dups`` (without ``reasons``): the pairs are not grouped, so a pair several
    permits grant comes out several times; the runner orders them by (r, p) and drops
    the repeats (DuckDB's: one NumPy sort per batch, instead of a hash aggregation as
    large as the answer or an ``ORDER BY``)."""
    fn = planner.fn
    if aq.has_maybe:
        return _tagged_decision(aq, planner, where=where, reasons=reasons)
    dialect = "duckdb" if fn.duck else "spark"
    permits = [p for p in aq.parts if p.kind == SURE_PERMIT]
    forbids = [p for p in aq.parts if p.kind == SURE_FORBID]
    if not permits:
        return None
    shapes = merge_shapes(
        [(planner.rows_select(p), p.policy) for p in permits], dialect, pid=reasons
    )
    rows = alias(exp.Subquery(this=_union(shapes)), "x")
    perm = exp.select(alias(col("r", "x"), "r"), alias(col("p", "x"), "p")).from_(rows, copy=False)
    if reasons:
        lst = "list" if fn.duck else "collect_list"
        perm = perm.select(
            alias(_in_order(fn, exp.Anonymous(this=lst, expressions=[col("pid", "x")])), "reasons"),
            append=True,
            copy=False,
        )
    if where is not None:
        perm = perm.where(where, copy=False)
    if reasons or not sorted_dups:
        perm = perm.group_by(col("r", "x"), col("p", "x"), copy=False)
    out_cols: list[exp.Expression] = [
        alias(col("r", "d"), "r"),
        alias(col("p", "d"), "p"),
        alias(exp.Literal.string("allow"), "decision"),
    ]
    if reasons:
        out_cols.append(alias(col("reasons", "d"), "reasons"))
        none = exp.cast(exp.Null(), exp.DataType.build("ARRAY<INT>", dialect="spark"))
        out_cols.append(alias(none, "residuals"))
    if not forbids:
        return exp.select(*out_cols).from_(alias(exp.Subquery(this=perm), "d"), copy=False)
    fshapes = merge_shapes(
        [(planner.rows_select(p, candidates=PERMITTED), p.policy) for p in forbids],
        dialect,
        pid=False,
    )
    hit = (
        exp.select("1")
        .from_(alias(exp.Subquery(this=_union(fshapes)), "f"), copy=False)
        .where(
            land(
                exp.EQ(this=col("r", "f"), expression=col("r", "d")),
                exp.EQ(this=col("p", "f"), expression=col("p", "d")),
            ),
            copy=False,
        )
    )
    sel = (
        exp.select(*out_cols)
        .from_(table(PERMITTED, "d"), copy=False)
        .where(exp.not_(exp.Exists(this=hit)), copy=False)
    )
    cte = exp.CTE(this=perm, alias=exp.TableAlias(this=exp.to_identifier(PERMITTED)))
    sel.set("with_", exp.With(expressions=[cte]))
    return sel


def _tagged_decision(
    aq: ActionQuery,
    planner: Planner,
    *,
    where: exp.Expression | None,
    reasons: bool,
) -> exp.Select | None:
    """The decision with conditional policies: one aggregation over every part's rows
    tagged with their kind (sure/maybe permit/forbid), grouped by (r, p)."""
    if not aq.parts:
        return None
    selects = []
    for part in aq.parts:
        sel = planner.rows_select(part, kind=True)
        selects.append(sel.select(alias(num(part.policy), "pid"), append=True, copy=False))
    rows = alias(exp.Subquery(this=_union(selects)), "x")
    k = col("k", "x")

    def any_k(*kinds: int) -> exp.Expression:
        cond: exp.Expression = (
            exp.EQ(this=k.copy(), expression=num(kinds[0]))
            if len(kinds) == 1
            else exp.In(this=k.copy(), expressions=[num(x) for x in kinds])
        )
        return exp.Anonymous(this="bool_or", expressions=[cond])

    decision = exp.Case(
        ifs=[
            exp.If(
                this=land(any_k(SURE_PERMIT), exp.not_(any_k(MAYBE_FORBID))),
                true=exp.Literal.string("allow"),
            )
        ],
        default=exp.Literal.string("conditional"),
    )
    having = land(exp.not_(any_k(SURE_FORBID)), any_k(SURE_PERMIT, MAYBE_PERMIT))
    sel = exp.select(
        alias(col("r", "x"), "r"),
        alias(col("p", "x"), "p"),
        alias(decision, "decision"),
    ).from_(rows, copy=False)
    if reasons:
        lst = "list" if planner.fn.duck else "collect_list"
        pid = col("pid", "x")
        sure = exp.EQ(this=k.copy(), expression=num(SURE_PERMIT))
        maybe = exp.In(this=k.copy(), expressions=[num(MAYBE_PERMIT), num(MAYBE_FORBID)])
        sel = sel.select(
            alias(_in_order(planner.fn, _filtered(lst, pid, sure)), "reasons"),
            alias(_in_order(planner.fn, _filtered(lst, pid.copy(), maybe)), "residuals"),
            append=True,
            copy=False,
        )
    if where is not None:
        sel = sel.where(where, copy=False)
    return sel.group_by(col("r", "x"), col("p", "x")).having(having, copy=False)


def _in_order(fn: Funcs, lst: exp.Expression) -> exp.Expression:
    """A row's policy indexes each once, ascending: the program's order, the order in
    which the in-process answer lists an entry's policies (an aggregated list has none)."""
    return fn._f("list_sort", "array_sort", fn._f("list_distinct", "array_distinct", lst))


def _filtered(fname: str, arg: exp.Expression, cond: exp.Expression) -> exp.Expression:
    return exp.Filter(
        this=exp.Anonymous(this=fname, expressions=[arg]), expression=exp.Where(this=cond)
    )
