"""The index of a population (entities by type, the hierarchy closure, the candidates a
scope allows, the tables kept) and the set-at-a-time evaluation over it: each policy's
rule groups as the sets of entities for which they are true / false / error, with unknowns
left as residuals."""

from __future__ import annotations

import contextlib
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from polang.datalog.builtins import builtin
from polang.datalog.compiled import Compiler
from polang.datalog.eval.interpreter import Evaluation
from polang.datalog.eval.partial import Unknown, Unknowns
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Const
from polang.errors import EvaluationError
from polang.language.entities import Entity, EntityStore
from polang.language.schema import Schema
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    is_action_type,
    value_key,
)

from .program import (
    _EMPTY,
    E_,
    ERR,
    F_,
    T_,
    FreeVar,
    PolicyPlan,
    QueryError,
    ScopeTest,
    _classify,
    _Sets,
    analysis_for,
)
from .tables import _Identity, _Table

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
