"""What a policy or data change does to who can access what: the diff of two access matrices,
computed in process.

``diff_in_process(old, new)`` compares two engines (two stores, or one store and new
entity data laid over it) and lists every (principal, action, resource) that gains or
loses access, with the policies that now grant or block it and those that used to,
summarized by policy, action and principal/resource type.

It scales with the change, not with the matrix. The two sides are compared first:

- **policies** whose canonical text differs (added, removed or edited). Each one's own
  applying set is computed alone (the policy as the only permit), on the side(s) where it
  exists: only the (action, resource) columns it reaches can change;
- **entities** whose attributes, parents or tags differ (or that exist on one side only).
  Their descendants (whose ancestors change) and the entities whose attribute values refer
  to them (``resource.owner.dept``) are affected too: only their rows (as principals) and
  columns (as resources) can change.

Those columns and rows are then evaluated on both sides with the bulk evaluator
(``who_can`` / ``what_can`` over each side's query index) and compared. When a change
reaches more than ``FULL_FRACTION`` of the matrix, or cannot be located (a schema change,
a policy reading a changed entity by its literal, a context naming a changed entity),
both full matrices are computed and merged in order instead; ``stats.mode`` says which.

Entries are exact for a known context. With ``context=None`` (unknown), a triple may be
*conditional* on either side; a change to or from conditional is reported as such, with
its residual conditions, never dropped.

Below both front ends: :func:`polang.authoring.diff.diff` (which also dispatches to the
SQL engines) and :func:`polang.sql.diff.sql_diff` (which shares the sides, the
entries, the result and the change detection defined here).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from polang._record import replace as replace_record
from polang.analysis.query import AccessEntry, QueryIndex, access_matrix, prepare, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts, Request
from polang.errors import PolangError
from polang.language import ast
from polang.language.entities import Entity, context_record, parse_entity
from polang.language.format import format_policy
from polang.language.schema import Schema
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    is_action_type,
    printable,
    value_key,
)

FULL_FRACTION = 0.25
"""Above this share of the matrix's (action, resource) steps, a diff computes both full
matrices instead of the changed columns and rows."""

Status = Literal["allow", "conditional", "deny"]
_RANK = {"deny": 0, "conditional": 1, "allow": 2}


# ======================================================================== sides


@dataclass(slots=True)
class Side:
    """One side of a diff: a policy set (an authorizer), entity facts and the schema."""

    authorizer: Any
    facts: EntityFacts
    schema: Schema | None = None
    label: str = ""

    @classmethod
    def of(cls, engine: Any, label: str = "") -> Side:
        """An engine's current store: its authorizer, entities and schema."""
        if isinstance(engine, Side):
            return engine
        snap = getattr(engine, "_snap", None)  # an Engine, read by its attributes: the
        facts = getattr(snap, "facts", None)  # engine sits above this layer
        if facts is None:
            raise PolangError(f"diff: expected an Engine or a Side, got {type(engine).__name__}")
        store = getattr(engine, "store", None)
        name = label or (f"{store.id} {store.version or ''}".strip() if store else "")
        return cls(engine.authorizer, facts, engine.schema, name)


# ======================================================================== results


def _ref(u: EntityUID) -> str:
    return str(u)


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """A triple whose access changed. ``policies`` grant it now (a gain) or block it now
    (a loss: the forbids that apply, empty when no permit applies any more);
    ``previous_policies`` are those that decided it before."""

    principal: EntityUID
    action: EntityUID
    resource: EntityUID
    change: Literal["gained", "lost"]
    before: Status
    after: Status
    policies: tuple[str, ...] = ()
    previous_policies: tuple[str, ...] = ()
    residuals: tuple[dict[str, Any], ...] = ()

    @property
    def conditional(self) -> bool:
        return "conditional" in (self.before, self.after)

    @property
    def triple(self) -> tuple[EntityUID, EntityUID, EntityUID]:
        return (self.principal, self.action, self.resource)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "principal": _ref(self.principal),
            "action": _ref(self.action),
            "resource": _ref(self.resource),
            "policies": list(self.policies),
            "previous_policies": list(self.previous_policies),
            "before": self.before,
            "after": self.after,
        }
        if self.conditional:
            out["conditional"] = True
            out["residuals"] = [dict(r) for r in self.residuals]
        return out


@dataclass(slots=True)
class DiffStats:
    mode: Literal["incremental", "full", "unchanged"] = "unchanged"
    reason: str = ""
    elapsed_s: float = 0.0
    changed_policies: list[str] = field(default_factory=list)
    changed_entities: int = 0
    affected_entities: int = 0
    steps: int = 0
    total_steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "reason": self.reason,
            "elapsed_s": round(self.elapsed_s, 6),
            "changed_policies": list(self.changed_policies),
            "changed_entities": self.changed_entities,
            "affected_entities": self.affected_entities,
            "steps": self.steps,
            "total_steps": self.total_steps,
        }


@dataclass(slots=True)
class DiffResult:
    """Every triple that gained or lost access (sorted by action, resource, principal)."""

    gained: list[DiffEntry]
    lost: list[DiffEntry]
    stats: DiffStats
    old_label: str = ""
    new_label: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.gained or self.lost)

    @property
    def entries(self) -> list[DiffEntry]:
        return sorted([*self.gained, *self.lost], key=_key)

    def summary(self) -> dict[str, Any]:
        """Counts by policy, action, principal type and resource type."""
        by_policy: dict[str, Counter[str]] = {}
        by_action: dict[str, Counter[str]] = {}
        by_ptype: dict[str, Counter[str]] = {}
        by_rtype: dict[str, Counter[str]] = {}
        conditional = 0
        for e in self.entries:
            kind = e.change
            conditional += e.conditional
            for pid in dict.fromkeys((*e.policies, *e.previous_policies)):
                by_policy.setdefault(pid, Counter())[kind] += 1
            by_action.setdefault(_ref(e.action), Counter())[kind] += 1
            by_ptype.setdefault(e.principal.type, Counter())[kind] += 1
            by_rtype.setdefault(e.resource.type, Counter())[kind] += 1

        def flat(d: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
            return {k: {"gained": c["gained"], "lost": c["lost"]} for k, c in sorted(d.items())}

        return {
            "gained": len(self.gained),
            "lost": len(self.lost),
            "conditional": conditional,
            "by_policy": flat(by_policy),
            "by_action": flat(by_action),
            "by_principal_type": flat(by_ptype),
            "by_resource_type": flat(by_rtype),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old_label,
            "new": self.new_label,
            "gained": [e.to_dict() for e in self.gained],
            "lost": [e.to_dict() for e in self.lost],
            "summary": self.summary(),
            "stats": self.stats.to_dict(),
        }

    def csv(self) -> str:
        """``change,principal,action,resource,before,after,policies,previous_policies``."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            ["change", "principal", "action", "resource", "before", "after", "policies",
             "previous_policies"]
        )  # fmt: skip
        for e in self.entries:
            w.writerow(
                [e.change, _ref(e.principal), _ref(e.action), _ref(e.resource), e.before,
                 e.after, " ".join(e.policies), " ".join(e.previous_policies)]
            )  # fmt: skip
        return buf.getvalue()

    def table(self, *, width: int = 120, max_rows: int = 200) -> str:
        """For people: the summary, then up to ``max_rows`` entries."""
        from rich.console import Console
        from rich.table import Table

        s = self.summary()
        buf = io.StringIO()
        # ids are text: no markup (`[/]` would raise), no emoji codes, no control characters
        console = Console(
            file=buf, width=width, no_color=True, highlight=False, markup=False, emoji=False
        )
        console.print(
            printable(
                f"{s['gained']} gained, {s['lost']} lost"
                + (f" ({s['conditional']} conditional)" if s["conditional"] else "")
                + f"  [{self.stats.mode}: {self.stats.reason}]"
            )
        )
        if not self.changed:
            return buf.getvalue()
        t = Table(title="by policy")
        for col in ("policy", "gained", "lost"):
            t.add_column(col, overflow="fold")
        for pid, c in s["by_policy"].items():
            t.add_row(printable(pid), str(c["gained"]), str(c["lost"]))
        console.print(t)
        t = Table(title="by action")
        for col in ("action", "gained", "lost"):
            t.add_column(col, overflow="fold")
        for a, c in s["by_action"].items():
            t.add_row(printable(a), str(c["gained"]), str(c["lost"]))
        console.print(t)
        t = Table(title="changes")
        for col in ("", "principal", "action", "resource", "now", "before"):
            t.add_column(col, overflow="fold")
        entries = self.entries
        for e in entries[:max_rows]:
            mark = "+" if e.change == "gained" else "-"
            if e.conditional:
                mark += "?"
            t.add_row(
                mark,
                printable(_ref(e.principal)),
                printable(_ref(e.action)),
                printable(_ref(e.resource)),
                printable(f"{e.after} " + ",".join(e.policies)),
                printable(f"{e.before} " + ",".join(e.previous_policies)),
            )
        console.print(t)
        if len(entries) > max_rows:
            console.print(
                f"... and {len(entries) - max_rows} more (use --format json or csv)", markup=False
            )
        return buf.getvalue()


def _key(e: DiffEntry) -> tuple[EntityUID, EntityUID, EntityUID]:
    return (e.action, e.resource, e.principal)


# ======================================================================== what changed


def policy_texts(authorizer: Any) -> dict[str, str]:
    return {pid: format_policy(p) for pid, p in authorizer.policies.items()}


def schema_json(schema: Schema | None) -> Any:
    return None if schema is None else schema.to_json()


def _entity_map(facts: EntityFacts) -> dict[EntityUID, Entity]:
    return facts.entities.as_dict()


def _same_values(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal as the language sees it (``true`` is not ``1``)."""
    if a.keys() != b.keys():
        return False
    return all(value_key(v) == value_key(b[k]) and type(v) is type(b[k]) for k, v in a.items())


def _same_entity(e: Entity, f: Entity) -> bool:
    return e is f or (
        e.parents == f.parents and _same_values(e.attrs, f.attrs) and _same_values(e.tags, f.tags)
    )


def changed_entities(old: EntityFacts, new: EntityFacts) -> set[EntityUID]:
    """Entities on one side only, or whose attributes, parents or tags differ."""
    if old is new:
        return set()
    a, b = _entity_map(old), _entity_map(new)
    out = set(a.keys() ^ b.keys())
    for u, e in a.items():
        f = b.get(u)
        if f is not None and not _same_entity(e, f):
            out.add(u)
    return out


def _refs(v: Any, out: set[EntityUID]) -> None:
    stack = [v]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is EntityUID:
            out.add(x)
        elif t is SetValue:
            stack.extend(x)
        elif t is RecordValue:
            stack.extend(x.fields.values())


def _affected(
    facts_list: Sequence[EntityFacts], changed: set[EntityUID], hops: int
) -> set[EntityUID]:
    """The changed entities, those below them, and those whose values refer to any of
    these within ``hops`` references (``resource.owner.dept`` reads one hop away), on
    either side."""
    affected = set(changed)
    for facts in facts_list:
        for e in facts.entities:
            if not facts.ancestors_of(e.uid).isdisjoint(changed):
                affected.add(e.uid)
    if hops <= 0:
        return affected
    referrers: dict[EntityUID, set[EntityUID]] = {}
    for facts in facts_list:
        for e in facts.entities:
            refs: set[EntityUID] = set()
            for v in e.attrs.values():
                _refs(v, refs)
            for v in e.tags.values():
                _refs(v, refs)
            for r in refs:
                referrers.setdefault(r, set()).add(e.uid)
    frontier = set(affected)
    for _ in range(hops):
        nxt = {r for u in frontier for r in referrers.get(u, ()) if r not in affected}
        if not nxt:
            break
        affected |= nxt
        frontier = nxt
    return affected


def _read_depth(policies: Iterable[ast.Policy]) -> int:
    """How many entity references the policies follow before reading an entity
    (``principal.dept``: 0; ``resource.owner.dept`` and ``resource.owner in G``: 1)."""

    def hop(e: Any) -> int:
        if isinstance(e, ast.GetAttr):
            return hop(e.expr) + 1
        if isinstance(e, ast.MethodCall) and e.name == "getTag":
            return hop(e.receiver) + 1
        if isinstance(e, ast.If):
            return max(hop(e.then), hop(e.else_))
        if isinstance(e, ast.SetLit):
            return max((hop(x) for x in e.elements), default=0)
        if isinstance(e, ast.RecordLit):
            return max((hop(x) for _k, x in e.fields), default=0)
        return 0

    depth = 0
    for e in _walk(policies):
        if isinstance(e, ast.GetAttr | ast.Has):
            depth = max(depth, hop(e.expr))
        elif isinstance(e, ast.MethodCall) and e.name in ("getTag", "hasTag"):
            depth = max(depth, hop(e.receiver))
        elif isinstance(e, ast.Binary) and e.op == "in":
            depth = max(depth, hop(e.left))
        elif isinstance(e, ast.Is) and e.in_expr is not None:
            depth = max(depth, hop(e.expr))
    return depth


def _walk(policies: Iterable[ast.Policy]) -> Iterator[ast.Expr]:
    """Every expression node of the policies' conditions."""
    for p in policies:
        yield from ast.condition_nodes(p)


def _literal_reads(policies: Iterable[ast.Policy]) -> set[EntityUID]:
    """Entities the policies read through a literal (``User::"x".attr``, ``User::"x" in
    ...``): a change to them may change any triple."""
    out: set[EntityUID] = set()

    def base_literal(e: ast.Expr) -> EntityUID | None:
        while isinstance(e, ast.GetAttr | ast.Has):
            e = e.expr
        return e.uid if isinstance(e, ast.EntityLit) else None

    for e in _walk(policies):
        lit: EntityUID | None = None
        if isinstance(e, ast.GetAttr | ast.Has):
            lit = base_literal(e.expr)
        elif isinstance(e, ast.Binary) and e.op == "in":
            lit = base_literal(e.left)
        elif isinstance(e, ast.Is) and e.in_expr is not None:
            lit = base_literal(e.expr)
        elif isinstance(e, ast.MethodCall) and e.name in ("getTag", "hasTag"):
            lit = base_literal(e.receiver)
        if lit is not None:
            out.add(lit)
    return out


# ======================================================================== evaluating


class _Eval:
    """One side prepared for queries."""

    def __init__(self, side: Side, context: RecordValue | None) -> None:
        self.side = side
        self.context = context
        self.qi: QueryIndex = prepare(side.authorizer, side.facts, side.schema)
        self._cands: dict[EntityUID, frozenset[EntityUID]] = {}

    def resources(self, action: EntityUID) -> frozenset[EntityUID]:
        c = self._cands.get(action)
        if c is None:
            c = self._cands[action] = self.qi.candidates("resource", action)
        return c

    def column(self, action: EntityUID, resource: EntityUID) -> dict[EntityUID, AccessEntry]:
        if action not in self.qi.actions or resource not in self.resources(action):
            return {}
        res = who_can(
            self.side.authorizer, self.qi, action, resource, self.context, schema=self.side.schema
        )
        return {e.principal: e for e in res.iter_entries()}

    def row(self, principal: EntityUID) -> dict[tuple[EntityUID, EntityUID], AccessEntry]:
        if not self.qi.contains(principal):
            return {}
        res = what_can(
            self.side.authorizer, self.qi, principal, None, self.context, schema=self.side.schema
        )
        out = {}
        for e in res.iter_entries():
            if principal in self.qi.candidates("principal", e.action):
                out[(e.action, e.resource)] = e
        return out

    def total_steps(self) -> int:
        return sum(len(self.resources(a)) for a in self.qi.actions)

    def matrix(self) -> Iterator[AccessEntry]:
        yield from access_matrix(
            self.side.authorizer, self.qi, self.context, schema=self.side.schema
        ).iter_entries()

    def reasons(self, p: EntityUID, a: EntityUID, r: EntityUID) -> tuple[str, ...]:
        """The determining policies of a denied triple (a known context only); none when
        the principal or the resource is not in this side's store (no such triple)."""
        assert self.context is not None
        if not (self.qi.contains(p) and self.qi.contains(r)):
            return ()
        d = self.side.authorizer.decide(Request(p, a, r, self.context), self.side.facts)
        return tuple(d.reasons)


def _single_steps(
    policy: ast.Policy, pid: str, side: Side, context: RecordValue | None, bound: int
) -> set[tuple[EntityUID, EntityUID]] | None:
    """The (action, resource) steps where one policy applies or may (``None``: more than
    ``bound``)."""
    alone = Authorizer({pid: replace_record(policy, effect="permit")})
    res = access_matrix(alone, side.facts, context, schema=side.schema)
    steps: set[tuple[EntityUID, EntityUID]] = set()
    last: tuple[EntityUID, EntityUID] | None = None
    for e in res.iter_entries():
        k = (e.action, e.resource)
        if k != last:
            steps.add(k)
            last = k
            if len(steps) > bound:
                return None
    return steps


def _status(e: AccessEntry | None) -> Status:
    return "deny" if e is None else e.decision


def _residuals(e: AccessEntry | None) -> tuple[dict[str, Any], ...]:
    if e is None or e.decision != "conditional":
        return ()
    return tuple(r.to_dict() for r in e.residuals)


def _policies_of(e: AccessEntry | None) -> tuple[str, ...]:
    if e is None:
        return ()
    if e.decision == "allow":
        return tuple(e.reasons)
    return tuple(dict.fromkeys((*e.reasons, *(r.policy_id for r in e.residuals))))


class _Collector:
    def __init__(self, old: _Eval, new: _Eval, context: RecordValue | None) -> None:
        self.old = old
        self.new = new
        self.context = context
        self.seen: set[tuple[EntityUID, EntityUID, EntityUID]] = set()
        self.gained: list[DiffEntry] = []
        self.lost: list[DiffEntry] = []

    def compare(
        self,
        p: EntityUID,
        a: EntityUID,
        r: EntityUID,
        before: AccessEntry | None,
        after: AccessEntry | None,
    ) -> None:
        sb, sa = _status(before), _status(after)
        if sb == sa:
            return
        key = (p, a, r)
        if key in self.seen:
            return
        self.seen.add(key)
        change: Literal["gained", "lost"] = "gained" if _RANK[sa] > _RANK[sb] else "lost"
        now, prev = _policies_of(after), _policies_of(before)
        if self.context is not None:  # exact: the determining policies of each side
            if sa == "deny":
                now = self.new.reasons(p, a, r)
            if sb == "deny":
                prev = self.old.reasons(p, a, r)
        residuals = _residuals(after) + _residuals(before)
        entry = DiffEntry(p, a, r, change, sb, sa, now, prev, residuals)
        (self.gained if change == "gained" else self.lost).append(entry)


def _full(col: _Collector) -> None:
    """Both full matrices, merged in order (action, resource, principal)."""
    old_it = col.old.matrix()
    new_it = col.new.matrix()

    def key(e: AccessEntry) -> tuple[EntityUID, EntityUID, EntityUID]:
        return (e.action, e.resource, e.principal)

    o = next(old_it, None)
    n = next(new_it, None)
    while o is not None or n is not None:
        if n is None or (o is not None and key(o) < key(n)):
            assert o is not None
            col.compare(o.principal, o.action, o.resource, o, None)
            o = next(old_it, None)
        elif o is None or key(n) < key(o):
            col.compare(n.principal, n.action, n.resource, None, n)
            n = next(new_it, None)
        else:
            col.compare(o.principal, o.action, o.resource, o, n)
            o = next(old_it, None)
            n = next(new_it, None)


# ======================================================================== the diff


def diff_in_process(
    old: Any,
    new: Any | None = None,
    *,
    entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    old_entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    force_full: bool = False,
    full_fraction: float = FULL_FRACTION,
) -> DiffResult:
    """The change in the access matrix from ``old`` to ``new``.

    ``old`` and ``new`` are engines (or :class:`Side` objects); ``new=None`` means the
    same store as ``old``. ``entities`` (entity JSON objects or ``Entity``) are laid over
    the new side's entities (replacing those with the same uid), ``old_entities`` over
    the old side's (see :func:`sides`): with one store, the diff of a data change; with
    two stores, ``entities`` alone are laid over both (the same data under two policy
    sets). ``context=None`` means the context is unknown (conditional entries are
    reported as such); give one (even ``{}``) for exact answers. ``force_full`` computes
    both full matrices; ``full_fraction`` is the share of the matrix above which it does
    so by itself (``FULL_FRACTION``; tests compare the ways).
    """
    t0 = time.perf_counter()
    o, n = sides(old, new, entities, old_entities)
    ctx = diff_context(context)
    stats = DiffStats()
    result_old, result_new = _Eval(o, ctx), _Eval(n, ctx)
    col = _Collector(result_old, result_new, ctx)

    texts_o, texts_n = policy_texts(o.authorizer), policy_texts(n.authorizer)
    changed_p = sorted(
        pid for pid in texts_o.keys() | texts_n.keys() if texts_o.get(pid) != texts_n.get(pid)
    )
    changed_e = changed_entities(o.facts, n.facts)
    stats.changed_policies = changed_p
    stats.changed_entities = len(changed_e)
    total = max(result_old.total_steps(), result_new.total_steps())
    stats.total_steps = total
    reason = ""
    if force_full:
        reason = "full recomputation asked for"
    elif schema_json(o.schema) != schema_json(n.schema):
        reason = "the schemas differ"
    elif not changed_p and not changed_e:
        stats.mode = "unchanged"
        stats.reason = "same policies and entities"
        stats.elapsed_s = time.perf_counter() - t0
        return DiffResult([], [], stats, o.label, n.label)

    steps: set[tuple[EntityUID, EntityUID]] = set()
    rows: set[EntityUID] = set()
    bound = int(full_fraction * total)
    if not reason and changed_e:
        all_policies = [*o.authorizer.policies.values(), *n.authorizer.policies.values()]
        hops = _read_depth(all_policies)
        affected = _affected([o.facts, n.facts], changed_e, hops)
        stats.affected_entities = len(affected)
        literal = _literal_reads(all_policies)
        ctx_refs: set[EntityUID] = set()
        if ctx is not None:
            _refs(ctx, ctx_refs)
        if not literal.isdisjoint(affected):
            reason = "a policy reads a changed entity through its literal"
        elif not ctx_refs.isdisjoint(affected):
            reason = "the context refers to a changed entity"
        elif any(is_action_type(u.type) for u in changed_e):
            reason = "action entities changed"
        else:
            n_actions = max(len(result_old.qi.actions), len(result_new.qi.actions))
            for r in affected:
                for a in set(result_old.qi.actions) | set(result_new.qi.actions):
                    if r in result_old.resources(a) or r in result_new.resources(a):
                        steps.add((a, r))
            rows = {p for p in affected if result_old.qi.contains(p) or result_new.qi.contains(p)}
            if len(steps) + len(rows) * n_actions > bound:
                reason = f"the changed entities reach more than {full_fraction:.0%} of the matrix"
    if not reason and changed_p:
        pol_o, pol_n = o.authorizer.policies, n.authorizer.policies
        for pid in changed_p:
            for pol, side in ((pol_o.get(pid), o), (pol_n.get(pid), n)):
                if pol is None:
                    continue
                got = _single_steps(pol, pid, side, ctx, bound)
                if got is None:
                    reason = f"policy {pid!r} reaches more than {full_fraction:.0%} of the matrix"
                    break
                steps |= got
            if reason:
                break
        if not reason and len(steps) > bound:
            reason = f"the changed policies reach more than {full_fraction:.0%} of the matrix"

    if reason:
        stats.mode = "full"
        stats.reason = reason
        stats.steps = total
        _full(col)
    else:
        stats.mode = "incremental"
        stats.reason = f"{len(changed_p)} changed policies, {len(changed_e)} changed entities"
        stats.steps = len(steps) + len(rows) * len(result_old.qi.actions)
        for a, r in sorted(steps):
            before = result_old.column(a, r)
            after = result_new.column(a, r)
            for p in sorted(before.keys() | after.keys()):
                col.compare(p, a, r, before.get(p), after.get(p))
        for p in sorted(rows):
            before_row = result_old.row(p)
            after_row = result_new.row(p)
            for a, r in sorted(before_row.keys() | after_row.keys()):
                col.compare(p, a, r, before_row.get((a, r)), after_row.get((a, r)))
    col.gained.sort(key=_key)
    col.lost.sort(key=_key)
    stats.elapsed_s = time.perf_counter() - t0
    return DiffResult(col.gained, col.lost, stats, o.label, n.label)


def sides(
    old: Any,
    new: Any | None,
    entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    old_entities: Iterable[Entity | Mapping[str, Any]] | None = None,
) -> tuple[Side, Side]:
    """The two sides of a diff (labelled ``old`` and ``new`` unless they have labels),
    each with the entity data given for it laid over its store's entities.

    ``entities`` are the new side's data, ``old_entities`` the old side's. With one store
    (``new`` None) the old side keeps the store's own data: the diff of a data change.
    With two stores and no ``old_entities``, ``entities`` are laid over both: the same
    data under two policy sets, so only the stores' difference shows (laid over the new
    side alone, every entity in them would look gained)."""
    o = Side.of(old)
    n = Side.of(new if new is not None else old)
    o = o if o.label else dataclasses.replace(o, label="old")
    n = n if n.label else dataclasses.replace(n, label="new")
    given = None if entities is None else list(entities)  # read once, laid twice
    olds = given if old_entities is None and new is not None else old_entities
    if olds is not None and (olds := list(olds)):
        o = _overlay(o, olds)
    if given:
        n = _overlay(n, given)
    return o, n


def _overlay(side: Side, entities: Iterable[Entity | Mapping[str, Any]]) -> Side:
    ents: list[Entity] = []
    for i, e in enumerate(entities):
        if isinstance(e, Entity):
            ents.append(e)
        elif isinstance(e, Mapping):
            ents.append(parse_entity(dict(e), side.schema, path=f"$[{i}]"))
        else:
            raise PolangError(f"entities[{i}]: expected an entity object")
    return Side(
        side.authorizer, side.facts.with_entities(ents), side.schema, side.label + " + entities"
    )


def diff_context(context: RecordValue | Mapping[str, Any] | None) -> RecordValue | None:
    """``None`` stays "unknown" (conditional entries); else ``context_record``'s record."""
    return None if context is None else context_record(context)


__all__ = [
    "FULL_FRACTION",
    "DiffEntry",
    "DiffResult",
    "DiffStats",
    "Side",
    "changed_entities",
    "diff_context",
    "diff_in_process",
    "policy_texts",
    "schema_json",
    "sides",
]
