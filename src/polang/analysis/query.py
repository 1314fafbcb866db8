"""Who can access what: bulk questions answered from the same Program that decides.

``who_can`` (every principal allowed an action on a resource), ``what_can`` (every action
and resource a principal is allowed) and ``access_matrix`` (every allowed triple) evaluate
the Program *set at a time* instead of request by request. For a query, one request
variable is *free* (the principals of ``who_can``, the resources of ``what_can`` and of
each step of the matrix) and the others are fixed per step. Each policy's value
predicates are then relations over the free variable's entities, evaluated bottom up:

- a predicate that does not read the free variable is one value per step (a scalar);
- a predicate that reads only the free variable (``principal.level > 3``) is a table
  computed once over the policy's candidates and reused by every step;
- a predicate that reads both (``resource.owner == principal``,
  ``principal in resource.viewers``, ``principal.dept == resource.dept``) is a hash join:
  the table side is indexed by value, by set element or by ancestor, and the scalar side
  is looked up in it; other shapes fall back to evaluating the rule per entity;
- ``&&``, ``||``, ``!`` and ``if`` rule groups combine the sets of entities for which their
  operands are true / false / error, keeping the language's three outcomes (an operand is
  only evaluated on the entities that reach it, as the rules say).

Scopes prune first: ``principal in G`` limits a policy to the descendants of ``G`` (from the
hierarchy closure), ``== E`` to one entity, ``is T`` to one type; action constraints pick
the policies per action. The fixed rules of ``rules/decision.dl`` are then applied to the
per-policy sets: allowed = (applying permits) - (applying forbids).

Open world. A query may lack data a real request would carry: the context (``context=None``)
or the queried principal/resource itself (not in the entity set; a request would supply
it). Anything read from those is *unknown*: a policy whose outcome depends on it is
reported as **conditional**, with the residual conditions (the scope part or the
``when``/``unless`` clauses that could not be decided), never silently dropped. Entities
the store does hold are the truth: reading a missing attribute of a stored entity is an
error, as in a request.

Results are ordered (actions, then resources, then principals, each sorted) and paged with
``limit`` and an opaque ``cursor`` instead of being truncated.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
import time
import weakref
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from polang.analysis.trace import PolicyMap, policy_maps, scope_constraint_text, value_json
from polang.datalog.builtins import builtin
from polang.datalog.compiled import Compiler
from polang.datalog.eval.interpreter import Evaluation
from polang.datalog.eval.partial import Unknown, Unknowns
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.eval.shapes import classify
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.errors import EvaluationError, RequestError
from polang.language.entities import Entity, EntityStore, context_record
from polang.language.schema import Schema
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    is_action_type,
    value_key,
    value_repr,
)

FreeVar = Literal["principal", "resource"]


class QueryError(RequestError):
    """A query is malformed: a cursor from another query, a bad limit, an unknown action."""


# ======================================================================== outcomes


class _Err:
    """An evaluation error (the message does not matter to a bulk query)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ERR"


ERR = _Err()


T_, F_, E_ = 1, 2, 4  # the outcomes a caller needs from a boolean predicate


@dataclass(slots=True)
class _Sets:
    """The entities (of a focus set) for which a boolean predicate may be true/false/error."""

    t: frozenset[EntityUID] | set[EntityUID] = frozenset()
    f: frozenset[EntityUID] | set[EntityUID] = frozenset()
    e: frozenset[EntityUID] | set[EntityUID] = frozenset()


_EMPTY: frozenset[EntityUID] = frozenset()


def _classify(out: Any, u: frozenset[EntityUID] | set[EntityUID], need: int) -> _Sets:
    """One outcome shared by the whole focus set ``u``."""
    if out is True:
        return _Sets(t=u)
    if out is False:
        return _Sets(f=u)
    if isinstance(out, Unknown):
        return _Sets(t=u if out.t else _EMPTY, f=u if out.f else _EMPTY, e=u)
    return _Sets(e=u)


# ======================================================================== program analysis


Shape = tuple[Any, ...]


class ProgramAnalysis:
    """What bulk evaluation needs to know of a Program's predicates (computed once)."""

    def __init__(self, program: Program, policies: Mapping[str, Any]) -> None:
        self.program = program
        self.groups = program.by_head()
        self.maps: dict[str, PolicyMap] = policy_maps(program, policies)
        self._deps: dict[str, frozenset[str]] = {}
        self._shapes: dict[str, Shape] = {}
        self._canon: dict[str, Any] = {}
        self._conj: dict[str, tuple[str, ...]] = {}
        self.plans: list[PolicyPlan] = [
            PolicyPlan.build(self, pid, info.effect, info.scope_pred, info.cond_pred)
            for pid, info in program.policies.items()
        ]

    def deps(self, pred: str) -> frozenset[str]:
        """The request variables a predicate reads (through any of its rules)."""
        d = self._deps.get(pred)
        if d is not None:
            return d
        if pred in REQUEST_VARS:
            d = frozenset((pred,))
        else:
            self._deps[pred] = frozenset()  # cycle guard (value predicates are not recursive)
            acc: set[str] = set()
            for r in self.groups.get(pred, []):
                for lit in r.body:
                    if isinstance(lit, Atom):
                        acc |= self.deps(lit.pred)
            d = frozenset(acc)
        self._deps[pred] = d
        return d

    def shape(self, pred: str) -> Shape:
        s = self._shapes.get(pred)
        if s is None:
            s = _shape(pred, self.groups.get(pred, []))
            self._shapes[pred] = s
        return s

    def canon(self, pred: str) -> Any:
        """A structural key: equal keys mean the predicates compute the same function."""
        k = self._canon.get(pred)
        if k is not None:
            return k
        sh = self.shape(pred)
        kind = sh[0]
        if kind == "const":
            k = ("const", type(sh[1]), value_key(sh[1]))
        elif kind == "var":
            k = ("var", sh[1])
        elif kind == "alias":
            k = self.canon(sh[1])
        elif kind == "call":
            k = (
                "call",
                sh[1],
                tuple(self.canon(o) for o in sh[2]),
                tuple((type(c), c) for c in sh[3]),
            )
        elif kind == "generic":
            k = ("generic", pred)
        else:
            k = (kind, *(self.canon(p) for p in sh[1:]))
        self._canon[pred] = k
        return k

    def conjuncts(self, pred: str) -> tuple[str, ...]:
        """The operands of a chain of ``&&`` (the predicate itself when it is not one)."""
        c = self._conj.get(pred)
        if c is None:
            sh = self.shape(pred)
            if sh[0] == "and":
                c = self.conjuncts(sh[1]) + self.conjuncts(sh[2])
            elif sh[0] == "alias":
                c = self.conjuncts(sh[1])
            else:
                c = (pred,)
            self._conj[pred] = c
        return c


def _shape(pred: str, rules: Sequence[Rule]) -> Shape:
    """The rule group's form, as the compiled backend's :func:`classify` recognises it,
    in this module's tuple notation; ``("generic",)`` for any other group."""
    if not rules or any(len(r.head.args) != 1 for r in rules):
        return ("generic",)
    sh = classify(rules)
    if sh.kind == "const":
        return ("const", sh.value)
    if sh.kind == "alias":
        p = sh.preds[0]
        return ("var" if p in REQUEST_VARS else "alias", p)
    if sh.kind == "call":
        return ("call", sh.op, sh.preds, sh.consts)
    if sh.kind == "rules":
        return ("generic",)
    return (sh.kind, *sh.preds)


ScopeTest = tuple[str, Any]  # ("eq", uid) | ("scope_is", type) | ("scope_in", uid) | ...


@dataclass(slots=True)
class PolicyPlan:
    """One policy as the bulk evaluator uses it."""

    policy_id: str
    effect: str
    cond_pred: str
    cond_deps: frozenset[str]
    tests: dict[str, tuple[ScopeTest, ...]]
    constraints: dict[str, str]
    pm: PolicyMap | None

    @classmethod
    def build(
        cls, an: ProgramAnalysis, pid: str, effect: str, scope_pred: str, cond_pred: str
    ) -> PolicyPlan:
        rules = an.groups.get(scope_pred, [])
        if len(rules) != 1:
            raise QueryError(f"policy {pid!r}: scope predicate {scope_pred} must have one rule")
        bound: dict[str, str] = {}
        tests: dict[str, list[ScopeTest]] = {"principal": [], "action": [], "resource": []}
        for lit in rules[0].body:
            if isinstance(lit, Atom) and lit.pred in tests and len(lit.args) == 1:
                t = lit.args[0]
                if isinstance(t, Var):
                    bound[t.name] = lit.pred
                else:
                    tests[lit.pred].append(("eq", t.value))
                continue
            if (
                isinstance(lit, Builtin)
                and lit.op in ("scope_in", "scope_in_any", "scope_is")
                and len(lit.args) == 2
                and isinstance(lit.args[0], Var)
                and isinstance(lit.args[1], Const)
                and lit.args[0].name in bound
            ):
                tests[bound[lit.args[0].name]].append((lit.op, lit.args[1].value))
                continue
            raise QueryError(f"policy {pid!r}: unsupported scope literal {lit}")
        pm = an.maps.get(pid)
        policy = pm.policy if pm is not None else None
        constraints = {
            "principal": scope_constraint_text(policy.principal if policy else None, "principal"),
            "action": scope_constraint_text(policy.action if policy else None, "action"),
            "resource": scope_constraint_text(policy.resource if policy else None, "resource"),
        }
        return cls(
            pid,
            effect,
            cond_pred,
            an.deps(cond_pred),
            {k: tuple(v) for k, v in tests.items()},
            constraints,
            pm,
        )


_ANALYSES: weakref.WeakKeyDictionary[Any, ProgramAnalysis] = weakref.WeakKeyDictionary()
_ANALYSES_LOCK = threading.Lock()


def analysis_for(authorizer: Any) -> ProgramAnalysis:
    """The (cached) analysis of an authorizer's Program."""
    with _ANALYSES_LOCK:
        try:
            an = _ANALYSES.get(authorizer)
        except TypeError:  # pragma: no cover - not weak-referenceable
            an = None
        if an is None or an.program is not authorizer.program:
            an = ProgramAnalysis(authorizer.program, getattr(authorizer, "policies", {}))
            with contextlib.suppress(TypeError):
                _ANALYSES[authorizer] = an
        return an


# ======================================================================== the index


class QueryIndex:
    """An authorizer over an entity set, prepared for bulk queries.

    Holds the entity indexes (by type, descendants) and the tables of predicates that do
    not depend on the context, so repeated queries over the same store are fast. Build it
    once per (policy set, entity set) and pass it where the functions take ``facts``.
    Thread-safe for concurrent queries (the caches are filled under a lock).
    """

    MAX_TABLES = 4096

    def __init__(
        self,
        authorizer: Any,
        facts: EntityFacts | EntityStore | Iterable[Entity],
        schema: Schema | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.facts = facts if isinstance(facts, EntityFacts) else EntityFacts(facts)
        self.schema = schema
        self.analysis = analysis_for(authorizer)
        self.compiler = Compiler(authorizer.program)
        self.lock = threading.RLock()
        by_type: dict[str, set[EntityUID]] = {}
        children: dict[EntityUID, list[EntityUID]] = {}
        for e in self.facts.entities:
            uid = e.uid
            by_type.setdefault(uid.type, set()).add(uid)
            for p in e.parents:
                children.setdefault(p, []).append(uid)
        self.by_type = {t: frozenset(s) for t, s in by_type.items()}
        # sort keys: entities in EntityUID order, as ints (sorting by them is C-fast)
        self.rank: dict[EntityUID, int] = {
            u: i
            for i, u in enumerate(
                sorted((e.uid for e in self.facts.entities), key=lambda u: (u.type, u.id))
            )
        }
        self._children = children
        self._desc_star: dict[EntityUID, frozenset[EntityUID]] = {}
        self.actions = self._actions()
        self._cands: dict[tuple[str, tuple[str, ...] | None], frozenset[EntityUID]] = {}
        self._domains: dict[tuple[int, tuple[ScopeTest, ...]], frozenset[EntityUID]] = {}
        self._domain_keep: list[frozenset[EntityUID]] = []
        self.tables: OrderedDict[Any, _Table] = OrderedDict()
        self._plans_by_action: dict[EntityUID, list[PolicyPlan]] = {}
        self._referenced: frozenset[EntityUID] | None = None

    # -- entities ---------------------------------------------------------------------------

    def contains(self, uid: EntityUID) -> bool:
        return self.facts.get(uid) is not None

    def desc_star(self, uid: EntityUID) -> frozenset[EntityUID]:
        """``uid`` and every stored entity below it: what ``x in uid`` holds for.

        Walked down from ``uid`` when first asked (a query asks for a few): every
        entity's descendants, built up front, are the closure again, whose size grows
        with the square of the hierarchy's depth."""
        d = self._desc_star.get(uid)
        if d is None:
            children = self._children
            seen = {uid}
            todo = [uid]
            while todo:
                for c in children.get(todo.pop(), ()):
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
            d = self._desc_star[uid] = frozenset(seen)
        return d

    def _actions(self) -> list[EntityUID]:
        if self.schema is not None:
            return sorted(self.schema.actions)
        found: set[EntityUID] = {e.uid for e in self.facts.entities if is_action_type(e.uid.type)}
        for plan in self.analysis.plans:
            for _op, arg in plan.tests["action"]:
                items = arg if isinstance(arg, frozenset) else (arg,)
                for u in items:
                    if type(u) is EntityUID:
                        found.add(u)
        return sorted(found)

    def candidates(self, var: FreeVar, action: EntityUID) -> frozenset[EntityUID]:
        """The entities that may be the ``var`` of a request for ``action``.

        With a schema: the stored entities of the types the action applies to. Without:
        every stored entity that is not an action.
        """
        types: tuple[str, ...] | None = None
        if self.schema is not None:
            ad = self.schema.action(action)
            if ad is None or not ad.applies_to:
                types = ()
            else:
                types = tuple(ad.principal_types if var == "principal" else ad.resource_types)
        key = (var, types)
        c = self._cands.get(key)
        if c is None:
            if types is None:
                c = frozenset(
                    u for t, s in self.by_type.items() if not is_action_type(t) for u in s
                )
            else:
                acc: set[EntityUID] = set()
                for t in types:
                    acc |= self.by_type.get(t, _EMPTY)
                c = frozenset(acc)
            self._cands[key] = c
        return c

    def domain(
        self, cands: frozenset[EntityUID], tests: tuple[ScopeTest, ...]
    ) -> frozenset[EntityUID]:
        """The candidates a scope's tests on them admit (shared between equal scopes)."""
        if not tests:
            return cands
        key = (id(cands), tests)
        d = self._domains.get(key)
        if d is not None:
            return d
        cur: frozenset[EntityUID] = cands
        for op, arg in tests:
            if op == "eq":
                cur = cur & {arg} if type(arg) is EntityUID else _EMPTY
            elif op == "scope_is":
                cur = cur & self.by_type.get(arg, _EMPTY)
            elif op == "scope_in":
                cur = cur & self.desc_star(arg)
            elif op == "scope_in_any":
                acc: set[EntityUID] = set()
                for a in arg:
                    acc |= self.desc_star(a)
                cur = cur & acc
        d = frozenset(cur)
        self._domains[key] = d
        self._domain_keep.append(cands)  # keep id(cands) unique while the key lives
        return d

    def plans_for(self, action: EntityUID) -> list[PolicyPlan]:
        """The policies whose action constraint admits ``action``."""
        plans = self._plans_by_action.get(action)
        if plans is None:
            plans = [
                p
                for p in self.analysis.plans
                if all(_test(self.facts, action, op, arg) for op, arg in p.tests["action"])
            ]
            # forbids first: their sets narrow the permits' focus
            plans.sort(key=lambda p: p.effect != "forbid")
            self._plans_by_action[action] = plans
        return plans

    def is_referenced(self, uid: EntityUID) -> bool:
        """Whether a stored entity (attribute, tag, parent) or a policy names ``uid``."""
        if self._referenced is None:
            found: set[EntityUID] = set()

            def walk(v: Any) -> None:
                t = type(v)
                if t is EntityUID:
                    found.add(v)
                elif t is SetValue or isinstance(v, frozenset | tuple):
                    for x in v:
                        walk(x)
                elif t is RecordValue:
                    for x in v.fields.values():
                        walk(x)

            for e in self.facts.entities:
                found.update(e.parents)
                for x in e.attrs.values():
                    walk(x)
                for x in e.tags.values():
                    walk(x)
            for r in self.analysis.program.rules:
                for lit in (r.head, *r.body):
                    for t in lit.args:
                        if isinstance(t, Const):
                            walk(t.value)
            self._referenced = frozenset(found)
        return uid in self._referenced

    def warm(self, free: Iterable[FreeVar] = ("principal", "resource")) -> int:
        """Build every table a query may read (those not depending on the context).

        Queries build tables on first use; an engine can call this once per store so
        that no later ``who_can``/``what_can`` pays for it. Returns the tables built.
        """
        before = len(self.tables)
        for fv in free:
            run = _Run(self, fv, RecordValue())
            for a in self.actions:
                run.begin_action(a)
                cands = self.candidates(fv, a)
                for plan in self.plans_for(a):
                    dom = self.domain(cands, plan.tests[fv])
                    if not dom:
                        continue
                    for pred in run.table_preds(plan.cond_pred):
                        if "context" not in self.analysis.deps(pred):
                            run.table(pred, dom)
        return len(self.tables) - before

    def table(self, key: Any) -> _Table | None:
        t = self.tables.get(key)
        if t is not None:
            self.tables.move_to_end(key)
        return t

    def store_table(self, key: Any, t: _Table) -> None:
        self.tables[key] = t
        while len(self.tables) > self.MAX_TABLES:
            self.tables.popitem(last=False)


def _test(facts: EntityFacts, value: Any, op: str, arg: Any) -> bool:
    """A scope test on a known, stored value (the compiled backend's semantics)."""
    if op == "eq":
        return type(value) is type(arg) and value == arg
    try:
        return bool(builtin(op)(facts, value, arg))
    except EvaluationError:  # pragma: no cover - scope tests never error
        return False


def _test_open(
    facts: EntityFacts, value: EntityUID, missing: bool, op: str, arg: Any
) -> bool | None:
    """A scope test on a queried entity the store may not hold (``None`` = unknown)."""
    if not missing or op in ("eq", "scope_is"):
        return _test(facts, value, op, arg)
    targets = arg if op == "scope_in_any" else (arg,)
    return True if value in targets else None


_INDEX_CACHE: OrderedDict[tuple[int, int, int], QueryIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()


def prepare(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    schema: Schema | None = None,
) -> QueryIndex:
    """A :class:`QueryIndex` for these inputs (the last few are kept and reused)."""
    if isinstance(facts, QueryIndex):
        if facts.authorizer is not authorizer:
            raise QueryError("the query index was prepared for another authorizer")
        if schema is not None and facts.schema is not schema:
            raise QueryError("the query index was prepared with another schema")
        return facts
    if not isinstance(facts, EntityFacts):
        return QueryIndex(authorizer, facts, schema)
    key = (id(authorizer), id(facts), id(schema))
    with _INDEX_LOCK:
        qi = _INDEX_CACHE.get(key)
        if (
            qi is not None
            and qi.authorizer is authorizer
            and qi.facts is facts
            and qi.schema is schema
            and qi.analysis.program is authorizer.program
        ):
            _INDEX_CACHE.move_to_end(key)
            return qi
    qi = QueryIndex(authorizer, facts, schema)
    with _INDEX_LOCK:
        _INDEX_CACHE[key] = qi
        while len(_INDEX_CACHE) > 4:
            _INDEX_CACHE.popitem(last=False)
    return qi


# ======================================================================== tables


class _Table:
    """A predicate that reads only the free variable, over one domain of entities.

    ``ok`` holds the known values, ``unk`` the unknown ones (open-world queries); every
    other entity of ``dom`` errors. Indexes are built on first use.
    """

    __slots__ = (
        "_bools",
        "_elem",
        "_ents",
        "_eq",
        "_ints",
        "_member",
        "_ok",
        "dom",
        "lookups",
        "ok",
        "unk",
    )

    def __init__(
        self, dom: frozenset[EntityUID], ok: dict[EntityUID, Any], unk: dict[EntityUID, Unknown]
    ) -> None:
        self.dom = dom
        self.ok = ok
        self.unk = unk
        self._bools: tuple[frozenset[EntityUID], ...] | None = None
        self._ok: frozenset[EntityUID] | None = None
        self.lookups: dict[Any, tuple[Any, Any] | None] = {}  # memoised index answers
        self._ents: frozenset[EntityUID] | None = None
        self._eq: dict[Any, set[EntityUID]] | None = None
        self._elem: tuple[dict[Any, set[EntityUID]], frozenset[EntityUID]] | None = None
        self._member: tuple[dict[EntityUID, set[EntityUID]], frozenset[EntityUID]] | None = None
        self._ints: tuple[list[int], list[EntityUID]] | bool | None = None

    def bools(self) -> tuple[frozenset[EntityUID], ...]:
        """The entities for which the value may be true / false / an error."""
        if self._bools is None:
            t = {v for v, x in self.ok.items() if x is True}
            f = {v for v, x in self.ok.items() if x is False}
            e = set(self.dom) - t - f
            for v, u in self.unk.items():
                if u.t:
                    t.add(v)
                if u.f:
                    f.add(v)
            self._bools = (frozenset(t), frozenset(f), frozenset(e))
        return self._bools

    def ok_set(self) -> frozenset[EntityUID]:
        """The entities whose value is known (not an error)."""
        if self._ok is None:
            self._ok = self.dom if len(self.ok) == len(self.dom) else frozenset(self.ok)
        return self._ok

    def entity_set(self) -> frozenset[EntityUID]:
        """The entities whose value is an entity."""
        if self._ents is None:
            self._ents = frozenset(v for v, x in self.ok.items() if type(x) is EntityUID)
            if len(self._ents) == len(self.dom):
                self._ents = self.dom
        return self._ents

    def eq_index(self) -> dict[Any, set[EntityUID]]:
        """(type, value key) -> entities: the language's ``==``."""
        if self._eq is None:
            idx: dict[Any, set[EntityUID]] = {}
            for v, x in self.ok.items():
                idx.setdefault((type(x), value_key(x)), set()).add(v)
            self._eq = idx
        return self._eq

    def key_index(self) -> dict[Any, set[EntityUID]]:
        """value key -> entities: what ``S.contains(value)`` compares."""
        return self._key_index()

    def _key_index(self) -> dict[Any, set[EntityUID]]:
        idx: dict[Any, set[EntityUID]] = {}
        for (_t, k), vs in self.eq_index().items():
            idx.setdefault(k, set()).update(vs)
        return idx

    def elem_index(self) -> tuple[dict[Any, set[EntityUID]], frozenset[EntityUID]]:
        """Set element key -> entities whose set contains it; and the set-valued entities."""
        if self._elem is None:
            idx: dict[Any, set[EntityUID]] = {}
            sets: set[EntityUID] = set()
            for v, x in self.ok.items():
                if type(x) is SetValue:
                    sets.add(v)
                    for k in x.keys:
                        idx.setdefault(k, set()).add(v)
            self._elem = (idx, frozenset(sets))
        return self._elem

    def member_index(self) -> tuple[dict[EntityUID, set[EntityUID]], frozenset[EntityUID]]:
        """For ``x in value``: target -> entities; and the entities whose value is valid."""
        if self._member is None:
            idx: dict[EntityUID, set[EntityUID]] = {}
            valid: set[EntityUID] = set()
            for v, x in self.ok.items():
                if type(x) is EntityUID:
                    valid.add(v)
                    idx.setdefault(x, set()).add(v)
                elif type(x) is SetValue:
                    items = list(x)
                    if all(type(i) is EntityUID for i in items):
                        valid.add(v)
                        for i in items:
                            idx.setdefault(i, set()).add(v)
            self._member = (idx, frozenset(valid))
        return self._member

    def ints(self) -> tuple[list[int], list[EntityUID]] | None:
        """The values sorted, when every known value is a Long (else ``None``)."""
        if self._ints is None:
            if any(type(x) is not int for x in self.ok.values()):
                self._ints = False
            else:
                pairs = sorted(self.ok.items(), key=lambda kv: kv[1])
                self._ints = ([x for _v, x in pairs], [v for v, _x in pairs])
        return self._ints if isinstance(self._ints, tuple) else None


class _Identity(_Table):
    """The free variable itself: each entity is its own value."""

    __slots__ = ()

    def __init__(self, dom: frozenset[EntityUID]) -> None:
        super().__init__(dom, {v: v for v in dom}, {})


# ======================================================================== evaluation


class _Run:
    """One query's evaluation state: the free variable, the context, the current step."""

    def __init__(self, qi: QueryIndex, free: FreeVar, context: RecordValue | None) -> None:
        self.qi = qi
        self.an = qi.analysis
        self.facts = qi.facts
        self.free: FreeVar = free
        self.outer: FreeVar = "resource" if free == "principal" else "principal"
        self.context = context
        self.context_known = context is not None
        dummy = EntityUID("", "")
        self.req = Request(dummy, dummy, dummy, context if context is not None else RecordValue())
        self.action: EntityUID = dummy
        self.outer_value: EntityUID = dummy
        self.outer_missing = False
        self.reachable = False  # the missing fixed entity is referenced by stored data
        self.scalars: dict[Any, Any] = {}
        self.local_tables: dict[Any, _Table] = {}
        self.fallback_evals = 0
        self.steps = 0
        # per-run caches of static facts about predicates (the free variable is fixed)
        self._class: dict[str, int] = {}
        self._order: dict[str, tuple[str, ...]] = {}
        self._tables: dict[tuple[str, int], _Table] = {}
        self.step_memo: dict[tuple[Any, int], Any] = {}
        self._inputs: dict[str, tuple[str, ...] | None] = {}
        self.cross_memo: dict[Any, Any] = {}
        self._unknowns: Unknowns | None = None  # this step's, for partial()

    # -- steps -------------------------------------------------------------------------------

    def begin_action(self, action: EntityUID) -> None:
        self.action = action
        self.req.action = action
        self.scalars = {}
        self._tables = {}
        self.step_memo = {}
        self.cross_memo = {}

    def begin_outer(self, value: EntityUID, missing: bool) -> None:
        self.outer_value = value
        self.outer_missing = missing
        self.reachable = missing and self.qi.is_referenced(value)
        setattr(self.req, self.outer, value)
        self.scalars = {}
        self.step_memo = {}
        self._unknowns = None
        self.steps += 1

    def bound_inputs(self, pred: str) -> tuple[str, ...] | None:
        """The predicates not reading the free variable that ``sets(pred)`` reads.

        ``None`` when the evaluation may read the fixed entity in other ways (a
        per-entity fallback): then its answer is not a function of those values alone.
        """
        if pred in self._inputs:
            return self._inputs[pred]
        out: tuple[str, ...] | None
        k = self.klass(pred)
        if k == 0:
            out = (pred,)
        elif k == 1:
            out = ()
        else:
            sh = self.an.shape(pred)
            if sh[0] in ("and", "or", "not", "if", "and_then", "alias"):
                acc: list[str] = []
                out = ()
                for child in sh[1:]:
                    got = self.bound_inputs(child)
                    if got is None:
                        out = None
                        break
                    acc.extend(x for x in got if x not in acc)
                if out is not None:
                    out = tuple(acc)
            elif sh[0] == "call" and sh[1] in _INDEX_OPS and not sh[3] and len(sh[2]) == 2:
                ks = [self.klass(o) for o in sh[2]]
                out = tuple(o for o, k2 in zip(sh[2], ks, strict=True) if k2 == 0)
                if 2 in ks or len(out) != 1:
                    out = None
            else:
                out = None
        self._inputs[pred] = out
        return out

    def table_preds(self, pred: str) -> list[str]:
        """The predicates ``sets(pred)`` may read as tables (mirrors :meth:`sets`)."""
        k = self.klass(pred)
        if k == 0:
            return []
        sh = self.an.shape(pred)
        if sh[0] in ("and", "or", "not", "if", "and_then", "alias"):
            return [t for child in sh[1:] for t in self.table_preds(child)]
        if k == 1:
            return [pred]
        if sh[0] == "call" and sh[1] in _INDEX_OPS and not sh[3] and len(sh[2]) == 2:
            return [o for o in sh[2] if self.klass(o) == 1]
        return []

    def klass(self, pred: str) -> int:
        """0: does not read the free variable; 1: reads only it; 2: reads both."""
        k = self._class.get(pred)
        if k is None:
            deps = self.an.deps(pred)
            k = 0 if self.free not in deps else (1 if self.outer not in deps else 2)
            self._class[pred] = k
        return k

    def unknown_prone(self, pred: str) -> bool:
        """Whether ``pred`` may read data the query does not have.

        A fixed entity missing from the store is unknown: predicates reading the fixed
        variable are; and when stored data or a policy refers to that entity (a document
        whose ``owner`` it is), any predicate may reach it, so all are.
        """
        if self.reachable:
            return True
        deps = self.an.deps(pred)
        if self.outer_missing and self.outer in deps:
            return True
        return not self.context_known and "context" in deps

    def partial(self, free_value: EntityUID | None) -> Evaluation:
        """The interpreter over this step's request with ``free_value`` (``None`` for a
        predicate that does not read it), the unknown context and the missing fixed
        entity left unknown: the first rule that surely holds gives a value, one that
        may hold makes it :class:`Unknown`."""
        values: dict[str, Any] = {"principal": None, "resource": None}
        values[self.outer] = self.outer_value
        values[self.free] = free_value
        request = Request(
            values["principal"],
            self.action,
            values["resource"],
            self.context if self.context is not None else RecordValue(),
        )
        unknowns = self._unknowns
        if unknowns is None:
            unknowns = self._unknowns = Unknowns(
                self.an.groups,
                context=not self.context_known,
                entities=frozenset((self.outer_value,)) if self.outer_missing else frozenset(),
            )
        return Evaluation(self.an.groups, request, self.facts, unknowns=unknowns)

    # -- scalars and tables ------------------------------------------------------------------

    def scalar(self, pred: str) -> Any:
        """A predicate that does not read the free variable: one outcome per step."""
        scalars = self.scalars
        if pred in scalars:
            return scalars[pred]
        key = self.an.canon(pred)
        if key in scalars:
            out = scalars[pred] = scalars[key]
            return out
        if self.unknown_prone(pred):
            out = _partial_value(self.partial(None), pred)
        else:
            try:
                out = self.qi.compiler.fn(pred)(self.req, self.facts)
            except EvaluationError:
                out = ERR
        scalars[key] = scalars[pred] = out
        return out

    def table(self, pred: str, dom: frozenset[EntityUID]) -> _Table:
        """A predicate that reads the free variable but not the fixed one, over ``dom``."""
        fast = self._tables.get((pred, id(dom)))
        if fast is not None and fast.dom is dom:
            return fast
        t = self._table(pred, dom)
        self._tables[(pred, id(dom))] = t
        return t

    def _table(self, pred: str, dom: frozenset[EntityUID]) -> _Table:
        sh = self.an.shape(pred)
        if sh[0] == "var" and sh[1] == self.free:
            key: Any = ("identity", id(dom))
        else:
            deps = self.an.deps(pred)
            key = (
                self.free,
                self.an.canon(pred),
                self.action if "action" in deps else None,
                id(dom),
            )
        local = self.reachable or "context" in self.an.deps(pred)
        with self.qi.lock:
            t = self.local_tables.get(key) if local else self.qi.table(key)
        if t is not None and t.dom is dom:
            return t
        t = _Identity(dom) if key[0] == "identity" else self._build_table(pred, dom)
        with self.qi.lock:
            if local:
                self.local_tables[key] = t
            else:
                self.qi.store_table(key, t)
        return t

    def _build_table(self, pred: str, dom: frozenset[EntityUID]) -> _Table:
        ok: dict[EntityUID, Any] = {}
        unk: dict[EntityUID, Unknown] = {}
        if self.unknown_prone(pred):
            for v in dom:
                out = _partial_value(self.partial(v), pred)
                if isinstance(out, Unknown):
                    unk[v] = out
                elif out is not ERR:
                    ok[v] = out
            return _Table(dom, ok, unk)
        fn = self.qi.compiler.fn(pred)
        facts = self.facts
        req = Request(None, self.action, EntityUID("", ""), self.req.context)
        if self.free == "principal":
            for v in dom:
                req.principal = v
                with contextlib.suppress(EvaluationError):
                    ok[v] = fn(req, facts)
        else:
            req.principal = EntityUID("", "")
            for v in dom:
                req.resource = v
                with contextlib.suppress(EvaluationError):
                    ok[v] = fn(req, facts)
        return _Table(dom, ok, unk)

    # -- boolean sets ------------------------------------------------------------------------

    def cost(self, pred: str) -> int:
        """Evaluation order of ``&&`` operands: cheap and selective first."""
        deps = self.an.deps(pred)
        if self.free not in deps:
            return 0
        sh = self.an.shape(pred)
        if self.outer not in deps:
            return 2
        if sh[0] == "call" and sh[1] in _INDEX_OPS:
            return 1
        if sh[0] in ("not", "or", "if", "and_then", "alias"):
            return 3
        return 4

    def true_set(
        self, pred: str, u: frozenset[EntityUID] | set[EntityUID], dom: frozenset[EntityUID]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """The entities of ``u`` for which ``pred`` may be true (conjuncts reordered)."""
        key: Any = None
        if u is dom:
            # A whole-domain answer depends only on the values of the scalars it reads:
            # steps (and policies) reading equal values share one answer.
            inputs = self.bound_inputs(pred)
            if inputs is not None and not self.outer_missing:
                scalar = self.scalar
                key = (self.an.canon(pred), id(dom), *[_vkey(scalar(i)) for i in inputs])
                hit = self.cross_memo.get(key)
                if hit is not None:
                    return hit
            else:
                key = (self.an.canon(pred), id(dom))
                hit = self.step_memo.get(key)
                if hit is not None:
                    return hit
        order = self._order.get(pred)
        if order is None:
            order = tuple(sorted(self.an.conjuncts(pred), key=self.cost))
            self._order[pred] = order
        cur = u
        for c in order:
            if not cur:
                break
            cur = self.sets(c, cur, dom, T_).t
        if key is not None:
            if len(key) > 2 or self.bound_inputs(pred) == ():
                if len(self.cross_memo) > 100_000:
                    self.cross_memo.clear()
                self.cross_memo[key] = cur
            else:
                self.step_memo[key] = cur
        return cur

    def sets(
        self,
        pred: str,
        u: frozenset[EntityUID] | set[EntityUID],
        dom: frozenset[EntityUID],
        need: int,
    ) -> _Sets:
        """Which entities of ``u`` make ``pred`` (possibly) true, false, an error."""
        if not u:
            return _Sets()
        an = self.an
        klass = self.klass(pred)
        if klass == 0:
            return _classify(self.scalar(pred), u, need)
        sh = an.shape(pred)
        kind = sh[0]
        if kind == "alias":
            return self.sets(sh[1], u, dom, need)
        if kind == "and":
            if need == T_:
                return _Sets(t=self.true_set(pred, u, dom))
            a = self.sets(sh[1], u, dom, T_ | (need & (F_ | E_)))
            b = self.sets(sh[2], a.t, dom, need)
            return _Sets(t=b.t, f=_union(a.f, b.f), e=_union(a.e, b.e))
        if kind == "or":
            a = self.sets(sh[1], u, dom, F_ | (need & (T_ | E_)))
            b = self.sets(sh[2], a.f, dom, need)
            return _Sets(t=_union(a.t, b.t), f=b.f, e=_union(a.e, b.e))
        if kind == "not":
            swapped = (T_ if need & F_ else 0) | (F_ if need & T_ else 0) | (need & E_)
            a = self.sets(sh[1], u, dom, swapped)
            return _Sets(t=a.f, f=a.t, e=a.e)
        if kind == "if":
            c = self.sets(sh[1], u, dom, T_ | F_ | (need & E_))
            x = self.sets(sh[2], c.t, dom, need)
            y = self.sets(sh[3], c.f, dom, need)
            return _Sets(t=_union(x.t, y.t), f=_union(x.f, y.f), e=_union(c.e, x.e, y.e))
        if kind == "and_then":
            c = self.sets(sh[1], u, dom, T_ | (need & (F_ | E_)))
            x = self.sets(sh[2], c.t, dom, need)
            return _Sets(t=x.t, f=_union(c.f, x.f), e=_union(c.e, x.e))
        if klass == 1:
            t, f, e = self.table(pred, dom).bools()
            return _Sets(
                t=_meet(u, t, dom) if need & T_ else _EMPTY,
                f=_meet(u, f, dom) if need & F_ else _EMPTY,
                e=_meet(u, e, dom) if need & E_ else _EMPTY,
            )
        if kind == "call" and sh[1] in _INDEX_OPS and not sh[3] and len(sh[2]) == 2:
            got = self._indexed(sh[1], sh[2], u, dom, need)
            if got is not None:
                return got
        return self._per_entity(pred, u, need)

    def _operand(self, pred: str, dom: frozenset[EntityUID]) -> tuple[str, Any] | None:
        klass = self.klass(pred)
        if klass == 0:
            return ("scalar", self.scalar(pred))
        if klass == 1 and not self.unknown_prone(pred):
            return ("table", self.table(pred, dom))
        return None

    def _indexed(
        self,
        op: str,
        operands: tuple[str, ...],
        u: frozenset[EntityUID] | set[EntityUID],
        dom: frozenset[EntityUID],
        need: int,
    ) -> _Sets | None:
        if self.reachable:
            return None  # indexes assume every stored value's data is known
        if self.outer_missing and op == "in" and self.klass(operands[0]) == 0:
            return None  # `x in ...` with x possibly the missing entity: its ancestors
        left = self._operand(operands[0], dom)
        if left is None:
            return None
        right = self._operand(operands[1], dom)
        if right is None or left[0] == right[0]:
            return None
        scalar = left[1] if left[0] == "scalar" else right[1]
        table: _Table = right[1] if left[0] == "scalar" else left[1]
        table_left = left[0] == "table"
        if scalar is ERR:
            return _Sets(e=u)
        if isinstance(scalar, Unknown):
            return _Sets(t=u, f=u, e=u)
        got = _index_op(self.qi, op, scalar, table, table_left)
        if got is None:
            return None
        t, ok = got
        t_u = _meet(u, t, dom)
        if op == "neq":
            need = (T_ if need & F_ else 0) | (F_ if need & T_ else 0) | (need & E_)
        ok_u = _meet(u, ok, dom) if need & (F_ | E_) else _EMPTY
        out = _Sets(
            t=t_u,
            f=_diff(ok_u, t_u) if need & F_ else _EMPTY,
            e=_diff(u, ok_u) if need & E_ else _EMPTY,
        )
        if op == "neq":
            return _Sets(t=out.f, f=out.t, e=out.e)
        return out

    def _per_entity(self, pred: str, u: frozenset[EntityUID] | set[EntityUID], need: int) -> _Sets:
        """The fallback: evaluate the predicate for each entity of the focus."""
        t: set[EntityUID] = set()
        f: set[EntityUID] = set()
        e: set[EntityUID] = set()
        self.fallback_evals += len(u)
        if self.unknown_prone(pred):
            for v in u:
                out = _partial_value(self.partial(v), pred)
                if out is True:
                    t.add(v)
                elif out is False:
                    f.add(v)
                elif isinstance(out, Unknown):
                    if out.t:
                        t.add(v)
                    if out.f:
                        f.add(v)
                    e.add(v)
                else:
                    e.add(v)
            return _Sets(t, f, e)
        fn = self.qi.compiler.fn(pred)
        req = Request(self.req.principal, self.action, self.req.resource, self.req.context)
        facts = self.facts
        free = self.free
        for v in u:
            setattr(req, free, v)
            try:
                out = fn(req, facts)
            except EvaluationError:
                e.add(v)
                continue
            if out is True:
                t.add(v)
            elif out is False:
                f.add(v)
            else:
                e.add(v)
        return _Sets(t, f, e)


def _partial_value(ev: Evaluation, pred: str) -> Any:
    """``pred``'s value, :class:`Unknown`, or :data:`ERR` (a bulk query needs no message)."""
    ok, v = ev.outcome(pred)
    return v if ok else ERR


def _vkey(v: Any) -> Any:
    """A hashable key for an outcome (value, error or unknown)."""
    if v is ERR:
        return ERR
    if isinstance(v, Unknown):
        return ("unknown", v.t, v.f)
    return (type(v), value_key(v))


_INDEX_OPS = frozenset(
    {
        "eq",
        "neq",
        "in",
        "method:contains",
        "method:containsAny",
        "method:containsAll",
        "lt",
        "le",
        "gt",
        "ge",
    }
)


def _union(*sets: frozenset[EntityUID] | set[EntityUID]) -> frozenset[EntityUID] | set[EntityUID]:
    non_empty = [s for s in sets if s]
    if not non_empty:
        return _EMPTY
    if len(non_empty) == 1:
        return non_empty[0]
    out = set(non_empty[0])
    for s in non_empty[1:]:
        out |= s
    return out


def _meet(
    u: frozenset[EntityUID] | set[EntityUID],
    s: frozenset[EntityUID] | set[EntityUID] | Any,
    dom: frozenset[EntityUID],
) -> frozenset[EntityUID] | set[EntityUID]:
    """``u & s``, skipping the work when ``u`` is the whole domain."""
    if u is dom:
        return s if isinstance(s, frozenset | set) else set(s)
    if s is dom:
        return u
    if isinstance(s, frozenset | set):
        return u & s
    return {v for v in s if v in u}


def _diff(
    a: frozenset[EntityUID] | set[EntityUID], b: frozenset[EntityUID] | set[EntityUID]
) -> frozenset[EntityUID] | set[EntityUID]:
    if not b:
        return a
    return a - b if isinstance(a, frozenset | set) else set(a) - set(b)


def _index_op(
    qi: QueryIndex, op: str, c: Any, table: _Table, table_left: bool
) -> tuple[Any, Any] | None:
    """:func:`_lookup`, memoised on the table: steps with the same fixed value share it."""
    try:
        key = (op, table_left, type(c), value_key(c))
        hit = table.lookups.get(key, _NO_LOOKUP)
    except TypeError:  # pragma: no cover - unhashable extension value
        return _lookup(qi, op, c, table, table_left)
    if hit is _NO_LOOKUP:
        hit = _lookup(qi, op, c, table, table_left)
        if hit is not None:
            hit = (_frozen(hit[0]), _frozen(hit[1]))
        if len(table.lookups) > 10_000:
            table.lookups.clear()
        table.lookups[key] = hit
    return hit


_NO_LOOKUP: Any = object()


def _frozen(s: Any) -> frozenset[EntityUID]:
    return s if isinstance(s, frozenset) else frozenset(s)


def _lookup(
    qi: QueryIndex, op: str, c: Any, table: _Table, table_left: bool
) -> tuple[Any, Any] | None:
    """``(true set, no-error set)`` over the table's domain for ``op`` with one side fixed.

    ``None`` when this shape has no index (the caller falls back to per-entity evaluation).
    """
    if op in ("eq", "neq"):
        hit = table.eq_index().get((type(c), value_key(c)), _EMPTY)
        return hit, table.ok_set()
    if op == "in":
        if table_left:  # table(v) in c
            if type(c) is EntityUID:
                targets: list[Any] = [c]
            elif type(c) is SetValue:
                targets = list(c)
                if any(type(x) is not EntityUID for x in targets):
                    return _EMPTY, _EMPTY  # a type error for every entity
            else:
                return _EMPTY, _EMPTY
            below: set[EntityUID] = set()
            for x in targets:
                below |= qi.desc_star(x)
            valid = table.entity_set()
            if isinstance(table, _Identity):
                return frozenset(below) & table.dom, valid
            eq = table.eq_index()
            hits: set[EntityUID] = set()
            if len(below) <= len(eq):
                for x in below:
                    hits |= eq.get((EntityUID, x), _EMPTY)
            else:
                hits = {v for v in valid if table.ok[v] in below}
            return hits, valid
        if type(c) is not EntityUID:  # c in table(v)
            return _EMPTY, _EMPTY
        idx, valid_m = table.member_index()
        hits = set()
        for y in (c, *qi.facts.ancestors_of(c)):
            hits |= idx.get(y, _EMPTY)
        return hits, valid_m
    if op == "method:contains":
        if table_left:  # table(v).contains(c)
            idx_e, sets = table.elem_index()
            return idx_e.get(value_key(c), _EMPTY), sets
        if type(c) is not SetValue:  # c.contains(table(v))
            return _EMPTY, _EMPTY
        keyed = table.key_index()
        hits = set()
        for k in c.keys:
            hits |= keyed.get(k, _EMPTY)
        return hits, table.ok_set()
    if op == "method:containsAny":
        if type(c) is not SetValue:
            return _EMPTY, _EMPTY
        idx_e, sets = table.elem_index()
        hits = set()
        for k in c.keys:
            hits |= idx_e.get(k, _EMPTY)
        return hits, sets
    if op == "method:containsAll":
        if not table_left:
            return None
        if type(c) is not SetValue:
            return _EMPTY, _EMPTY
        idx_e, sets = table.elem_index()
        cur: frozenset[EntityUID] | set[EntityUID] = sets
        for k in c.keys:
            cur = cur & idx_e.get(k, _EMPTY)
            if not cur:
                break
        return cur, sets
    if op in ("lt", "le", "gt", "ge"):
        if type(c) is not int:
            return None
        ints = table.ints()
        if ints is None:
            return None
        values, ents = ints
        # normalise to "table(v) OP c"
        flip = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
        o = op if table_left else flip[op]
        if o == "lt":
            sel = ents[: bisect_left(values, c)]
        elif o == "le":
            sel = ents[: bisect_right(values, c)]
        elif o == "gt":
            sel = ents[bisect_right(values, c) :]
        else:
            sel = ents[bisect_left(values, c) :]
        return frozenset(sel), table.ok_set()
    return None  # pragma: no cover - _INDEX_OPS lists the ops above


# ======================================================================== results


@dataclass(frozen=True, slots=True)
class Residual:
    """A policy that may decide an entry, with the conditions the query could not decide.

    ``conditions`` is ``None`` where the answer names the policy only (a SQL engine's
    conditional entry: the conditions stay in the database)."""

    policy_id: str
    effect: str
    conditions: tuple[str, ...] | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy_id": self.policy_id, "effect": self.effect}
        if self.conditions is not None:
            out["conditions"] = list(self.conditions)
        return out


class AccessEntry(NamedTuple):
    """An allowed (or conditionally allowed) request: the one row type of every answer,
    in process and from a SQL engine. A named tuple: a query at scale reads hundreds of
    thousands of them, and a tuple is built in C."""

    principal: EntityUID
    action: EntityUID
    resource: EntityUID
    decision: Literal["allow", "conditional"]
    reasons: tuple[str, ...] = ()
    residuals: tuple[Residual, ...] = ()

    @property
    def triple(self) -> tuple[EntityUID, EntityUID, EntityUID]:
        return (self[0], self[1], self[2])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "principal": self.principal.to_json(),
            "action": self.action.to_json(),
            "resource": self.resource.to_json(),
            "decision": self.decision,
            "reasons": list(self.reasons),
        }
        if self.residuals:
            out["residuals"] = [r.to_dict() for r in self.residuals]
        return out


Part = tuple[PolicyPlan, frozenset[EntityUID] | set[EntityUID]]
Maybe = tuple[PolicyPlan, frozenset[EntityUID] | set[EntityUID], bool, frozenset[EntityUID]]
"""A conditional policy: its entities, whether the fixed entity's scope part is unknown,
and the free entities whose scope part is unknown."""


@dataclass(slots=True)
class _Group:
    """The answer of one step: the free entities allowed / conditional for (action, outer).

    The allowed set is not stored: it is ``union(permit parts) - blocked``, rebuilt when
    read. The parts are mostly sets shared by many steps (a scope's domain, a table's
    true set, a memoised join), so a whole matrix costs little more than its parts.
    """

    action: EntityUID
    outer: EntityUID
    permits: tuple[Part, ...]
    blocked: frozenset[EntityUID] | set[EntityUID]
    conditional: frozenset[EntityUID] | set[EntityUID]
    maybe: tuple[Maybe, ...]
    outer_missing: bool
    count: int = 0

    def allowed(self) -> frozenset[EntityUID] | set[EntityUID]:
        permits = self.permits
        if not permits:
            return _EMPTY
        u = permits[0][1] if len(permits) == 1 else _union(*(s for _p, s in permits))
        return u - self.blocked if self.blocked else u

    def __len__(self) -> int:
        return self.count

    def order(self, rank: Mapping[EntityUID, int]) -> list[EntityUID]:
        allowed = self.allowed()
        items = set(allowed) | set(self.conditional) if self.conditional else allowed
        try:
            return sorted(items, key=rank.__getitem__)
        except KeyError:  # an entity the store does not hold
            return sorted(items)


@dataclass(slots=True)
class QueryStats:
    elapsed_s: float = 0.0
    steps: int = 0
    policies: int = 0
    fallback_evaluations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "elapsed_s": round(self.elapsed_s, 6),
            "steps": self.steps,
            "policies": self.policies,
            "fallback_evaluations": self.fallback_evaluations,
        }


class QueryResult:
    """One page of a query's answer, in order; entries are built as they are read.

    ``complete`` is true when no entry of this page is conditional, i.e. the page is the
    exact answer for the data given. ``next_cursor`` continues after the page (``None``
    on the last page).
    """

    def __init__(
        self,
        kind: str,
        query: dict[str, Any],
        parts: list[tuple[_Group, int]],
        limit: int | None,
        next_cursor: str | None,
        stats: QueryStats,
        run: _Run,
    ) -> None:
        self.kind = kind
        self.query = query
        self._parts = parts
        self.limit = limit
        self.next_cursor = next_cursor
        self.stats = stats
        self._run = run
        self._entries: list[AccessEntry] | None = None
        self._count: int | None = None
        self._index: dict[tuple[EntityUID, EntityUID], tuple[_Group, int, int]] | None = None

    # -- reading -------------------------------------------------------------------------

    def _slices(self) -> Iterator[tuple[_Group, int, int]]:
        remaining = self.limit
        for g, start in self._parts:
            n = len(g) - start
            if n <= 0:
                continue
            if remaining is not None:
                if remaining <= 0:
                    return
                n = min(n, remaining)
                remaining -= n
            yield g, start, start + n

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(stop - start for _g, start, stop in self._slices())
        return self._count

    def iter_entries(self) -> Iterator[AccessEntry]:
        if self._entries is not None:
            yield from self._entries
            return
        for g, start, stop in self._slices():
            yield from _entries(self._run, g, start, stop)

    def __iter__(self) -> Iterator[AccessEntry]:
        return self.iter_entries()

    @property
    def entries(self) -> list[AccessEntry]:
        if self._entries is None:
            self._entries = list(self.iter_entries())
        return self._entries

    def triples(self) -> Iterator[tuple[EntityUID, EntityUID, EntityUID]]:
        """The allowed (principal, action, resource) triples of this page (not conditional)."""
        free = self._run.free
        for g, start, stop in self._slices():
            if g.conditional:
                for e in _entries(self._run, g, start, stop):
                    if e.decision == "allow":
                        yield e.triple
                continue
            for v in g.order(self._run.qi.rank)[start:stop]:
                yield (v, g.action, g.outer) if free == "principal" else (g.outer, g.action, v)

    @property
    def allowed(self) -> list[AccessEntry]:
        return [e for e in self.iter_entries() if e.decision == "allow"]

    @property
    def conditional(self) -> list[AccessEntry]:
        return [e for e in self.iter_entries() if e.decision == "conditional"]

    @property
    def complete(self) -> bool:
        return not any(g.conditional for g, _s, _e in self._slices())

    def lookup(
        self, principal: EntityUID, action: EntityUID, resource: EntityUID
    ) -> Literal["allow", "conditional"] | None:
        """This page's decision on a triple: ``None`` when the page does not list it."""
        if self._index is None:
            self._index = {
                (g.action, g.outer): (g, start, stop) for g, start, stop in self._slices()
            }
        free, fixed = (
            (principal, resource) if self._run.free == "principal" else (resource, principal)
        )
        got = self._index.get((action, fixed))
        if got is None:
            return None
        g, start, stop = got
        partial_group = start > 0 or stop < len(g)
        if partial_group and free not in g.order(self._run.qi.rank)[start:stop]:
            return None
        if free in g.conditional:
            return "conditional"
        return "allow" if free in g.allowed() else None

    @property
    def principals(self) -> list[EntityUID]:
        """``who_can``: the allowed principals, in order."""
        return [e.principal for e in self.iter_entries() if e.decision == "allow"]

    def to_dict(self) -> dict[str, Any]:
        entries = self.entries
        return {
            "kind": self.kind,
            "query": self.query,
            "complete": self.complete,
            "count": len(entries),
            "allowed": sum(1 for e in entries if e.decision == "allow"),
            "conditional": sum(1 for e in entries if e.decision == "conditional"),
            "entries": [e.to_dict() for e in entries],
            "next_cursor": self.next_cursor,
            "stats": self.stats.to_dict(),
        }


def _entries(run: _Run, g: _Group, start: int, stop: int) -> Iterator[AccessEntry]:
    free = run.free
    allowed = g.allowed()
    for v in g.order(run.qi.rank)[start:stop]:
        p, r = (v, g.outer) if free == "principal" else (g.outer, v)
        reasons = tuple(plan.policy_id for plan, s in g.permits if v in s)
        if v in allowed:
            yield AccessEntry(p, g.action, r, "allow", reasons)
            continue
        residuals = tuple(
            Residual(
                plan.policy_id,
                plan.effect,
                _residual(run, g, plan, v, scope_unknown, v in unsure),
            )
            for plan, s, scope_unknown, unsure in g.maybe
            if v in s
        )
        yield AccessEntry(p, g.action, r, "conditional", reasons, residuals)


def _residual(
    run: _Run,
    g: _Group,
    plan: PolicyPlan,
    v: EntityUID,
    outer_scope_unknown: bool,
    free_scope_unknown: bool,
) -> tuple[str, ...]:
    """The parts of a policy the query could not decide for this entry."""
    out: list[str] = []
    if outer_scope_unknown:
        out.append(plan.constraints[run.outer])
    if free_scope_unknown:
        out.append(plan.constraints[run.free])
    pm = plan.pm
    if pm is None or not pm.exact:
        if pm is not None and pm.policy is not None:
            out.extend(f"{c.kind} {{ {_fmt(c.body)} }}" for c in pm.policy.conditions)
        return tuple(out)
    run.begin_action(g.action)
    run.begin_outer(g.outer, g.outer_missing)
    ev = run.partial(v)
    for clause in pm.clauses:
        if _partial_value(ev, clause.pred) is not True:
            out.append(clause.text)
    return tuple(out)


def _fmt(e: Any) -> str:
    from polang.language.format import format_expr

    return format_expr(e)


# ======================================================================== driving a query


def _fingerprint(qi: QueryIndex, kind: str, parts: Sequence[Any]) -> str:
    h = hashlib.sha256()
    h.update(kind.encode())
    for p in parts:
        h.update(b"\0")
        h.update(repr(p).encode())
    h.update(repr(list(qi.analysis.program.policies)).encode())
    h.update(str(len(qi.facts.entities)).encode())
    return h.hexdigest()[:16]


def _encode_cursor(fp: str, step: int, offset: int) -> str:
    raw = json.dumps({"v": 1, "q": fp, "s": step, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, fp: str) -> tuple[int, int]:
    try:
        pad = "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(cursor + pad).decode())
        if data.get("v") != 1:
            raise ValueError("version")
        step, offset = int(data["s"]), int(data["o"])
        q = str(data["q"])
    except Exception:
        raise QueryError(f"cursor {cursor!r} is not a cursor returned by a query") from None
    if q != fp:
        raise QueryError(
            "cursor belongs to another query (other arguments, policies or entities): "
            "start again without a cursor"
        )
    if step < 0 or offset < 0:
        raise QueryError(f"cursor {cursor!r} is out of range")
    return step, offset


def _check_limit(limit: int | None) -> None:
    if limit is not None and (type(limit) is not int or limit < 1):
        raise QueryError(f"limit must be a positive integer or None, not {limit!r}")


class _ActionContext:
    """What every step of one action shares: its policies, their domains, caches."""

    MEMO_LIMIT = 20_000

    def __init__(self, run: _Run, action: EntityUID, n_steps: int) -> None:
        qi = run.qi
        self.action = action
        self.plans = qi.plans_for(action)
        self.cands = qi.candidates(run.free, action)
        self.outer_cands = qi.candidates(run.outer, action)
        self.doms = [qi.domain(self.cands, p.tests[run.free]) for p in self.plans]
        # policies with the same condition over the same domain share one evaluation
        self.keys = [
            (run.an.canon(p.cond_pred), id(d)) for p, d in zip(self.plans, self.doms, strict=True)
        ]
        # policies whose result does not depend on the fixed entity: computed once
        self.constant: dict[int, frozenset[EntityUID] | set[EntityUID]] = {}
        self.memo: dict[Any, tuple[Any, Any]] = {}
        self.always: list[int] | None = None
        self.by_outer: dict[EntityUID, list[int]] = {}
        if n_steps > 64 and self.plans:
            # many steps (the matrix): index the policies by the fixed entities they admit
            always: list[int] = []
            for i, plan in enumerate(self.plans):
                odom = qi.domain(self.outer_cands, plan.tests[run.outer])
                if odom is self.outer_cands:
                    always.append(i)
                    continue
                for o in odom:
                    self.by_outer.setdefault(o, []).append(i)
            self.always = always

    def candidates_for(self, outer: EntityUID, missing: bool) -> tuple[list[int], bool]:
        """Indices of the policies whose scope may admit ``outer``; and whether their
        tests on ``outer`` are known to hold already (indexed)."""
        if self.always is not None and not missing and outer in self.outer_cands:
            extra = self.by_outer.get(outer)
            if not extra:
                return self.always, True
            return sorted(self.always + extra), True
        return list(range(len(self.plans))), False

    def combine(
        self, parts: Sequence[frozenset[EntityUID] | set[EntityUID]]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """The union of ``parts``; equal inputs give the same (shared) set object."""
        if not parts:
            return _EMPTY
        if len(parts) == 1:
            return parts[0]
        key = ("u", *(id(p) for p in parts))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(_union(*parts))
        self._remember(key, out, tuple(parts))
        return out

    def minus(
        self, a: frozenset[EntityUID] | set[EntityUID], b: frozenset[EntityUID] | set[EntityUID]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """``a - b``, shared like :meth:`combine`."""
        if not a or not b:
            return a
        key = ("d", id(a), id(b))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(a - b)
        self._remember(key, out, (a, b))
        return out

    def meet(
        self, a: frozenset[EntityUID] | set[EntityUID], b: frozenset[EntityUID] | set[EntityUID]
    ) -> frozenset[EntityUID] | set[EntityUID]:
        """``a & b``, shared like :meth:`combine`."""
        if not a or not b:
            return _EMPTY
        key = ("m", id(a), id(b))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        out = frozenset(a & b)
        self._remember(key, out, (a, b))
        return out

    def count_allowed(
        self,
        parts: Sequence[frozenset[EntityUID] | set[EntityUID]],
        blocked: frozenset[EntityUID] | set[EntityUID],
    ) -> int:
        """``len(union(parts) - blocked)``; the union is built and dropped (never kept)."""
        if len(parts) == 1 and not blocked:
            return len(parts[0])
        key = ("n", id(blocked), *(id(p) for p in parts))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        u = parts[0] if len(parts) == 1 else _union(*parts)
        n = len(u - blocked) if blocked else len(u)
        self._remember(key, n, (blocked, *parts))
        return n

    def _remember(self, key: Any, value: Any, refs: Any) -> None:
        if len(self.memo) >= self.MEMO_LIMIT:
            self.memo.clear()
        self.memo[key] = (value, refs)  # refs keep the inputs alive: their ids stay unique


def _evaluate_step(run: _Run, ac: _ActionContext, outer: EntityUID) -> _Group:
    """Every policy for one (action, fixed entity), combined by the decision rules."""
    qi = run.qi
    missing = not qi.contains(outer)
    run.begin_outer(outer, missing)
    action = ac.action
    cands = ac.cands
    forbid_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    forbid_def: frozenset[EntityUID] | set[EntityUID] = _EMPTY
    forbid_maybe_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    permits: list[Part] = []
    maybe: list[Maybe] = []
    permit_maybe_parts: list[frozenset[EntityUID] | set[EntityUID]] = []
    ctx_unknown = not run.context_known
    outer_var = run.outer
    forbids_done = False
    indices, tested = ac.candidates_for(outer, missing)
    shared: dict[Any, frozenset[EntityUID] | set[EntityUID]] = {}
    for i in indices:
        plan = ac.plans[i]
        if plan.effect == "permit" and not forbids_done:
            forbids_done = True
            forbid_def = ac.combine(forbid_parts)
        scope: bool | None = True
        for op, arg in () if tested else plan.tests[outer_var]:
            got = _test_open(qi.facts, outer, missing, op, arg)
            if got is False:
                scope = False
                break
            if got is None:
                scope = None
        if scope is False:
            continue
        dom = ac.doms[i]
        unsure: frozenset[EntityUID] = _EMPTY
        if missing and any(op.startswith("scope_in") for op, _a in plan.tests[run.free]):
            # stored entities below the missing one may be in scope through it
            through = (qi.desc_star(outer) - {outer}) & cands
            if through:
                unsure = frozenset(through - dom)
                dom = dom | unsure
        if not dom:
            continue
        partial = (
            scope is None
            or bool(unsure)
            or run.reachable
            or (missing and outer_var in plan.cond_deps)
            or (ctx_unknown and "context" in plan.cond_deps)
        )
        constant = not missing and outer_var not in plan.cond_deps
        if constant and i in ac.constant:
            t = ac.constant[i]
        elif constant:
            t = run.true_set(plan.cond_pred, dom, dom)
            ac.constant[i] = t
        elif not unsure and ac.keys[i] in shared:
            t = shared[ac.keys[i]]
        elif not unsure and run.bound_inputs(plan.cond_pred) is not None:
            t = shared[ac.keys[i]] = run.true_set(plan.cond_pred, dom, dom)
        else:
            focus: frozenset[EntityUID] | set[EntityUID] = dom
            if plan.effect == "permit" and forbid_def and run.bound_inputs(plan.cond_pred) is None:
                # an expensive (per-entity) condition: skip the entities already denied
                focus = dom - forbid_def
            t = run.true_set(plan.cond_pred, focus, dom) if focus else _EMPTY
        if not t:
            continue
        definite: frozenset[EntityUID] | set[EntityUID]
        cond: frozenset[EntityUID] | set[EntityUID]
        if not partial:
            definite, cond = t, _EMPTY
        elif scope is None:
            definite, cond = _EMPTY, t
        else:
            s2 = run.sets(plan.cond_pred, t, dom, F_ | E_)
            bad = _union(s2.f, s2.e, unsure)
            definite, cond = _diff(t, bad), _meet(t, bad, dom)
        if plan.effect == "forbid":
            if definite:
                forbid_parts.append(definite)
            if cond:
                forbid_maybe_parts.append(cond)
                maybe.append((plan, cond, scope is None, unsure))
        else:
            if definite:
                permits.append((plan, definite))
            if cond:
                permit_maybe_parts.append(cond)
                maybe.append((plan, cond, scope is None, unsure))
    if not forbids_done:
        forbid_def = ac.combine(forbid_parts)
    if not permits and not permit_maybe_parts:
        return _Group(action, outer, (), _EMPTY, _EMPTY, (), missing)
    # the sets below are mostly shared between steps: the memo keeps one object each
    forbid_maybe = ac.combine(forbid_maybe_parts)
    blocked = ac.combine([forbid_def, forbid_maybe]) if forbid_maybe else forbid_def
    conditional: frozenset[EntityUID] | set[EntityUID] = _EMPTY
    g = _Group(action, outer, tuple(permits), blocked, conditional, tuple(maybe), missing)
    if permit_maybe_parts or forbid_maybe:
        permit_def = ac.combine([s for _p, s in permits])
        possible = ac.combine([permit_def, *permit_maybe_parts])
        # conditional = possible - forbid_def - allowed = (possible - forbid_def) & blocked
        #   (allowed = permit_def - blocked, and a permit_maybe entity is never allowed)
        g.conditional = (
            ac.meet(ac.minus(possible, forbid_def), forbid_maybe)
            | ac.minus(ac.minus(possible, permit_def), forbid_def)
            if forbid_maybe
            else ac.minus(ac.minus(possible, permit_def), forbid_def)
        )
        g.count = ac.count_allowed([permit_def], blocked) + len(g.conditional)
    else:
        g.count = ac.count_allowed([s for _p, s in permits], blocked)
    return g


def _run_steps(
    run: _Run,
    kind: str,
    query: dict[str, Any],
    steps: list[tuple[EntityUID, list[EntityUID]]],
    fp: str,
    limit: int | None,
    cursor: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> QueryResult:
    """Evaluate steps in order from the cursor until ``limit`` entries are found.

    After a full page the evaluation goes on to the next step with an entry, so
    ``next_cursor`` is ``None`` exactly when nothing follows.
    """
    _check_limit(limit)
    t0 = time.perf_counter()
    start_step, offset = _decode_cursor(cursor, fp) if cursor else (0, 0)
    total_steps = sum(len(outers) for _a, outers in steps)
    parts: list[tuple[_Group, int]] = []
    found = 0
    step = 0
    next_cursor: str | None = None
    policies_seen: set[str] = set()
    for action, outers in steps:
        if next_cursor is not None:
            break
        if step + len(outers) <= start_step:
            step += len(outers)
            continue
        run.begin_action(action)
        ac = _ActionContext(run, action, len(outers))
        policies_seen.update(p.policy_id for p in ac.plans)
        for outer in outers:
            if step < start_step:
                step += 1
                continue
            g = _evaluate_step(run, ac, outer) if ac.plans else None
            if progress is not None and step % 64 == 0:
                progress(step, total_steps)
            begin = offset if step == start_step else 0
            avail = len(g) - begin if g is not None else 0
            if g is not None and avail > 0:
                if limit is not None and found == limit:
                    next_cursor = _encode_cursor(fp, step, begin)
                    break
                take = avail if limit is None else min(avail, limit - found)
                parts.append((g, begin))
                found += take
                if take < avail:
                    next_cursor = _encode_cursor(fp, step, begin + take)
                    break
            step += 1
    if progress is not None:
        progress(total_steps, total_steps)
    stats = QueryStats(time.perf_counter() - t0, run.steps, len(policies_seen), run.fallback_evals)
    return QueryResult(kind, query, parts, limit, next_cursor, stats, run)


# ======================================================================== public API


def who_can(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    action: EntityUID,
    resource: EntityUID,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> QueryResult:
    """Every principal allowed ``action`` on ``resource``, sorted.

    Candidates are the stored entities the schema allows as the action's principals (all
    non-action entities without a schema). ``context=None`` means the context is not
    known: policies that read it make their principals conditional.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "principal", ctx)
    query = {
        "action": action.to_json(),
        "resource": resource.to_json(),
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "who_can", [action, resource, ctx])
    return _run_steps(run, "who_can", query, [(action, [resource])], fp, limit, cursor)


def what_can(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    principal: EntityUID,
    action: EntityUID | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> QueryResult:
    """Every (action, resource) ``principal`` is allowed, by action then resource.

    ``action=None`` asks about every action (the schema's, else the action entities of
    the store and the actions the policies name). A principal the store does not hold is
    allowed only conditionally where a policy reads its attributes or ancestors.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "resource", ctx)
    actions = [action] if action is not None else qi.actions
    steps = []
    for a in actions:
        if qi.schema is not None:
            ad = qi.schema.action(a)
            if ad is None or not ad.applies_to or principal.type not in ad.principal_types:
                continue
        steps.append((a, [principal]))
    query = {
        "principal": principal.to_json(),
        "action": action.to_json() if action is not None else None,
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "what_can", [principal, action, ctx])
    return _run_steps(run, "what_can", query, steps, fp, limit, cursor)


def access_matrix(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    actions: Sequence[EntityUID] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> QueryResult:
    """Every allowed (principal, action, resource) over the entity set.

    Ordered by action, resource, principal. With ``limit`` only the steps needed for one
    page are evaluated; pass ``next_cursor`` back to continue. ``progress(done, total)``
    is called as resources are processed.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "principal", ctx)
    acts = list(actions) if actions is not None else qi.actions
    steps = [(a, sorted(qi.candidates("resource", a))) for a in acts]
    query = {
        "actions": None if actions is None else [a.to_json() for a in acts],
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "matrix", [tuple(acts), ctx])
    return _run_steps(run, "matrix", query, steps, fp, limit, cursor, progress)


def _ctx_json(ctx: RecordValue) -> Any:

    return value_json(ctx)


__all__ = [
    "AccessEntry",
    "ProgramAnalysis",
    "QueryError",
    "QueryIndex",
    "QueryResult",
    "QueryStats",
    "Residual",
    "access_matrix",
    "analysis_for",
    "is_action_type",
    "prepare",
    "value_repr",
    "what_can",
    "who_can",
]
