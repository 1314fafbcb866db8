"""The same Program on pyDatalog: the reference engine for traces and differential tests.

Every IR rule is loaded into pyDatalog's engine as it is written, and the decision
(``allow``, ``reason(P)``, ``errored(P)``) is *derived* there by the fixed rules of
``rules/decision.dl``; nothing about the language is recomputed in Python. The translation
is generic:

- an :class:`~polang.datalog.ir.Atom` becomes a pyDatalog literal (``~`` when negated);
- a :class:`~polang.datalog.ir.Builtin` ``out = op(args)`` becomes a literal of a private
  predicate resolved by a Python function (pyDatalog's *Python resolvers*). pyDatalog
  calls it only when SLG resolution selects the literal, with the bindings made by the
  literals before it, so the builtin runs exactly when the rule body reaches it. It yields
  the inputs plus the result, or nothing: an :class:`EvaluationError` makes the literal
  fail (and is recorded for the error report), a false test fails like a false atom;
- every constant and every value is an interned :class:`Token`. pyDatalog compares and
  hashes terms with Python's ``==``, where ``True == 1`` and an ``EntityUID`` equals
  nothing else; a token has identity equality and exists once per *language* value
  (keyed by ``(type, value_key(v))``), so distinct polang values never merge.

pyDatalog keeps its engine per thread (``Logic.tl.logic``). Each thread using a backend
gets its own ``Logic`` with the rules loaded, swapped in around each decision; the
per-request inputs the resolvers need (the entity facts, the error log) live in that
thread's state. The entity set is asserted as ``entity(E)``/``parent(E, P)`` facts, from
which ``rules/hierarchy.dl`` derives ``in``, only when it changes (by a difference with
the loaded set), so a store of 10k entities is loaded once, not per request; the
request's ``principal``/``action``/``resource``/``context`` facts are replaced per
request. A hierarchy with a cycle is asserted as its materialised ``in`` closure instead
of ``parent`` edges: pyDatalog 0.17.4 never terminates on the right-recursive closure
rule over a cycle.

pyDatalog derives *that* a policy errored (neither ``cond(P, true)`` nor
``cond(P, false)``), not why. The error reported for it is the first
:class:`EvaluationError` its builtins raised during the query, in program (source)
order; a type mismatch that no builtin sees (``!1``, a missing principal) gets a
message from the derived atoms instead. Policy ids are exact; messages are best effort.
"""

from __future__ import annotations

import gc
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from pyDatalog import pyEngine
from pyDatalog.Logic import Logic

from polang.datalog.builtins import builtin
from polang.datalog.compiled import PolicyOutcome, RawDecision
from polang.datalog.eval.semantics import bool_error, matches, no_principal, not_a_bool
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.errors import EvaluationError, PolangError
from polang.language.values import value_key, value_repr

GC_FREEZE_THRESHOLD = 5000
"""Entity facts loaded at once above which ``gc.freeze()`` runs (design.md: long GC pauses
over large fact bases)."""


class PyDatalogBackendError(PolangError):
    """The Program cannot run on pyDatalog (an unusable name, an unsafe rule): a bug."""


# -- tokens ------------------------------------------------------------------------------


class Token:
    """One polang value inside pyDatalog: identity equality, one instance per value.

    Never construct directly: :func:`token` interns, so equal values (the language's
    ``==``) share one token and unequal ones never compare equal, whatever Python's
    ``==`` says (``True == 1``).
    """

    __slots__ = ("__weakref__", "value")

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        try:
            return value_repr(self.value)
        except Exception:  # pragma: no cover - non-value constants (index keys)
            return repr(self.value)

    __str__ = __repr__


_TOKENS: weakref.WeakValueDictionary[tuple[type, Any], Token] = weakref.WeakValueDictionary()
_TOKENS_LOCK = threading.Lock()


def token(value: Any) -> Token:
    """The token of ``value`` (shared by every thread and backend while it is referenced)."""
    key = (type(value), value_key(value))
    tok = _TOKENS.get(key)
    if tok is not None:
        return tok
    with _TOKENS_LOCK:
        tok = _TOKENS.get(key)
        if tok is None:
            tok = Token(value)
            _TOKENS[key] = tok
        return tok


# -- the translated program ----------------------------------------------------------------

_UNSAFE_CHARS = frozenset(".[]~/=<>!")

Arg = str | Token
"""A term of a translated literal: a variable name or a constant token."""


@dataclass(frozen=True, slots=True)
class _Lit:
    pred: str  # the pyDatalog predicate name (negation included as a leading ``~``)
    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True)
class _Clause:
    head: _Lit
    body: tuple[_Lit, ...]


def _pred_name(name: str) -> str:
    """The pyDatalog name of an IR predicate (``q_`` keeps it clear of resolver names)."""
    if not name or _UNSAFE_CHARS.intersection(name) or name.startswith("_pyD"):
        raise PyDatalogBackendError(f"predicate name {name!r} cannot be used in pyDatalog")
    return "q_" + name


def _arg(t: Var | Const, keep: list[Token]) -> Arg:
    if isinstance(t, Var):
        return t.name
    tok = token(t.value)
    keep.append(tok)  # the backend holds its constants, so their identity is stable
    return tok


@dataclass(slots=True)
class _ErrorLog:
    """The evaluation errors raised by builtins during one decision, per policy."""

    first: dict[str, tuple[tuple[int, int], EvaluationError]] = field(default_factory=dict)

    def record(self, policy_id: str, order: tuple[int, int], error: EvaluationError) -> None:
        seen = self.first.get(policy_id)
        if seen is None or order < seen[0]:
            self.first[policy_id] = (order, error)

    def get(self, policy_id: str) -> EvaluationError | None:
        seen = self.first.get(policy_id)
        return seen[1] if seen is not None else None


class _ThreadState:
    """One thread's engine for one backend: its Logic, loaded facts and request inputs."""

    def __init__(self, clauses: Sequence[_Clause]) -> None:
        self.logic = _new_logic()
        self.entity_facts: EntityFacts | None = None
        self.entity_set: set[tuple[str, tuple[Token, ...]]] = set()
        self.request_set: set[tuple[str, tuple[Token, ...]]] = set()
        self.facts: EntityFacts | None = None  # what the builtins read during a decision
        self.errors = _ErrorLog()
        with self.active():
            for c in clauses:
                pyEngine.assert_(pyEngine.Clause(_literal(c.head), [_literal(b) for b in c.body]))

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this state's Logic the current thread's pyDatalog engine for a while."""
        tl = Logic.tl
        prev = getattr(tl, "logic", None)
        tl.logic = self.logic
        try:
            yield
        finally:
            if prev is None:
                del tl.logic
            else:
                tl.logic = prev

    def load_entities(self, facts: EntityFacts) -> None:
        if facts is self.entity_facts:
            return
        new: set[tuple[str, tuple[Token, ...]]] = set()
        for e in facts.entities:
            new.add(("q_entity", (token(e.uid),)))
        edges = list(facts.parent_facts())
        if nx.is_directed_acyclic_graph(nx.DiGraph(edges)):
            for child, parent in edges:
                new.add(("q_parent", (token(child), token(parent))))
        else:
            # pyDatalog 0.17.4 never terminates on the right-recursive closure of
            # rules/hierarchy.dl over a cycle; assert the networkx closure instead.
            for child, ancestor in facts.in_facts():
                new.add(("q_in", (token(child), token(ancestor))))
        _replace_facts(self.entity_set, new)
        changed = len(new.symmetric_difference(self.entity_set))
        self.entity_set = new
        self.entity_facts = facts
        if changed > GC_FREEZE_THRESHOLD:
            gc.freeze()

    def load_request(self, request: Request) -> None:
        new: set[tuple[str, tuple[Token, ...]]] = {
            ("q_action", (token(request.action),)),
            ("q_resource", (token(request.resource),)),
            ("q_context", (token(request.context),)),
        }
        if request.principal is not None:
            new.add(("q_principal", (token(request.principal),)))
        _replace_facts(self.request_set, new)
        self.request_set = new


def _new_logic() -> Any:
    """A fresh pyDatalog engine for this thread, leaving the thread's current one in place."""
    tl = Logic.tl
    prev = getattr(tl, "logic", None)
    logic = Logic()  # creates, clears and installs a new engine for this thread
    if prev is None:
        del tl.logic  # never leave ours as the thread's default pyDatalog engine
    else:
        tl.logic = prev
    return logic


def _fact(pred: str, args: tuple[Token, ...]) -> Any:
    return pyEngine.Clause(pyEngine.Literal(pred, [pyEngine.Const(a) for a in args]), [])


def _replace_facts(
    old: set[tuple[str, tuple[Token, ...]]], new: set[tuple[str, tuple[Token, ...]]]
) -> None:
    for pred, args in old - new:
        pyEngine.retract(_fact(pred, args))
    for pred, args in new - old:
        pyEngine.assert_(_fact(pred, args))


def _literal(lit: _Lit) -> Any:
    terms = [pyEngine.Var(a) if isinstance(a, str) else pyEngine.Const(a) for a in lit.args]
    return pyEngine.Literal(lit.pred, terms)


_SERIAL = itertools.count(1)
_DECISION = "o_decision"  # the backend's own query predicate (IR predicates are ``q_*``)


class _Shared:
    """What the resolvers need; kept apart from the backend so it can be collected."""

    def __init__(self) -> None:
        self.local = threading.local()

    def state(self) -> _ThreadState:
        st: _ThreadState = self.local.state
        return st


def _make_resolver(
    shared: _Shared,
    fn: Callable[..., Any],
    slots: tuple[int | Token, ...],
    n_inputs: int,
    has_out: bool,
    policy_id: str | None,
    order: tuple[int, int],
    where: str,
) -> Callable[..., Iterator[Any]]:
    """A pyDatalog resolver for ``out = op(args)``: yields inputs + result, or nothing."""

    def resolve(*terms: Any) -> Iterator[Any]:
        args: list[Any] = []
        for s in slots:
            if isinstance(s, Token):
                args.append(s.value)
                continue
            t = terms[s]
            if not t.is_const():
                raise PyDatalogBackendError(
                    f"builtin {where}: argument {s + 1} is unbound (unsafe rule)"
                )
            args.append(t.id.value)
        st = shared.state()
        try:
            result = fn(st.facts, *args)
        except EvaluationError as e:
            if policy_id is not None:
                st.errors.record(policy_id, order, e)
            return
        inputs = tuple(t.id for t in terms[:n_inputs])
        if not has_out:
            if result:
                yield inputs if inputs else True
            return
        yield (*inputs, token(result))

    return resolve


def _unregister(keys: list[str]) -> None:
    for k in keys:
        pyEngine.Python_resolvers.pop(k, None)


class PyDatalogBackend:
    """A Program loaded into pyDatalog; same interface as ``CompiledBackend``."""

    name = "pydatalog"

    def __init__(self, program: Program) -> None:
        self.program = program
        self._order = {pid: i for i, pid in enumerate(program.policies)}
        self._shared = _Shared()
        self._tokens: list[Token] = []
        self._resolver_keys: list[str] = []
        serial = next(_SERIAL)
        self._clauses: list[_Clause] = [
            self._translate(rule, i, serial) for i, rule in enumerate(program.rules)
        ]
        self._tokens.extend(token(pid) for pid in program.policies)
        self._groups = program.by_head()
        # One query for the whole decision, so its subgoals are tabled once, not per atom:
        #   o_decision(allow, "") :- allow.   o_decision(K, P) :- K(P)  for reason, errored.
        keys = {k: token(k) for k in ("allow", "reason", "errored", "")}
        self._tokens.extend(keys.values())
        self._decision_keys = {tok: k for k, tok in keys.items()}
        self._clauses.append(
            _Clause(_Lit(_DECISION, (keys["allow"], keys[""])), (_Lit(_pred_name("allow"), ()),))
        )
        for k in ("reason", "errored"):
            self._clauses.append(
                _Clause(_Lit(_DECISION, (keys[k], "P")), (_Lit(_pred_name(k), ("P",)),))
            )
        weakref.finalize(self, _unregister, list(self._resolver_keys))

    # -- translation -------------------------------------------------------------------------

    def _translate(self, rule: Rule, index: int, serial: int) -> _Clause:
        head = _Lit(
            _pred_name(rule.head.pred), tuple(_arg(t, self._tokens) for t in rule.head.args)
        )
        body: list[_Lit] = []
        for j, lit in enumerate(rule.body):
            if isinstance(lit, Atom):
                name = _pred_name(lit.pred)
                body.append(
                    _Lit(
                        "~" + name if lit.negated else name,
                        tuple(_arg(t, self._tokens) for t in lit.args),
                    )
                )
            else:
                body.append(self._builtin_literal(lit, rule, (index, j), serial))
        return _Clause(head, tuple(body))

    def _builtin_literal(
        self, lit: Builtin, rule: Rule, order: tuple[int, int], serial: int
    ) -> _Lit:
        try:
            fn = builtin(lit.op)  # unknown ops fail here, when the program is loaded
        except ValueError as e:
            raise PyDatalogBackendError(f"{e} in rule {rule}") from None
        inputs: list[str] = []
        slots: list[int | Token] = []
        for t in lit.args:
            if isinstance(t, Var):
                slots.append(len(inputs))
                inputs.append(t.name)
            else:
                tok = token(t.value)
                self._tokens.append(tok)
                slots.append(tok)
        args: list[Arg] = list(inputs)
        if lit.out is not None:
            args.append(lit.out.name)
        pred = f"b{serial}_{len(self._resolver_keys)}"
        key = f"{pred}/{len(args)}"
        pyEngine.Python_resolvers[key] = _make_resolver(
            self._shared,
            fn,
            tuple(slots),
            len(inputs),
            lit.out is not None,
            rule.policy_id,
            order,
            f"{lit} in {rule.head.pred}",
        )
        self._resolver_keys.append(key)
        return _Lit(pred, tuple(args))

    # -- evaluation ----------------------------------------------------------------------------

    def _state(self) -> _ThreadState:
        st: _ThreadState | None = getattr(self._shared.local, "state", None)
        if st is None:
            st = _ThreadState(self._clauses)
            self._shared.local.state = st
        return st

    def ask(self, pred: str, *args: Any) -> list[tuple[Any, ...]]:
        """Answers of ``pred(args)`` (``None`` = variable) in the current thread's engine.

        Only meaningful inside :meth:`session` (or during :meth:`decide`); rows hold every
        argument, constants included, as polang values.
        """
        terms = [
            pyEngine.Var(f"V{i}") if a is None else pyEngine.Const(token(a))
            for i, a in enumerate(args)
        ]
        result = pyEngine.Literal(_pred_name(pred), terms).ask()
        if result is True:
            return [()]
        return [tuple(t.value for t in row) for row in result or ()]

    @contextmanager
    def session(self, request: Request, facts: EntityFacts) -> Iterator[PyDatalogBackend]:
        """The engine loaded with ``request`` and ``facts``, for ad-hoc :meth:`ask` queries."""
        st = self._state()
        with st.active():
            st.load_entities(facts)
            st.load_request(request)
            st.facts = facts
            st.errors = _ErrorLog()
            try:
                yield self
            finally:
                st.facts = None

    def decide(self, request: Request, facts: EntityFacts, *, trace: bool = False) -> RawDecision:
        st = self._state()
        with self.session(request, facts):
            rows = pyEngine.Literal(_DECISION, [pyEngine.Var("K"), pyEngine.Var("P")]).ask()
            found: dict[str, set[Any]] = {"allow": set(), "reason": set(), "errored": set()}
            for k, p in rows or ():
                found[self._decision_keys[k]].add(p.value)
            allow = bool(found["allow"])
            reasons = sorted(found["reason"], key=self._order.__getitem__)
            errored = sorted(found["errored"], key=self._order.__getitem__)
            errors = [(pid, self._error_of(st, pid)) for pid in errored]
            outcomes = self._outcomes(dict(errors)) if trace else []
        return RawDecision(allow, reasons, errors, outcomes)

    def _cond_values(self, pid: str) -> list[Any]:
        return [row[1] for row in self.ask("cond", pid, None)]

    def _error_of(self, st: _ThreadState, pid: str) -> EvaluationError:
        """Why ``pid`` errored: a builtin's error, else the mismatch the atoms show."""
        recorded = st.errors.get(pid)
        if recorded is not None:
            return recorded
        for v in self._cond_values(pid):
            if type(v) is not bool:
                return bool_error(v)
        info = self.program.policies.get(pid)
        found = self._diagnose(info.cond_pred, set()) if info is not None else None
        return found or not_a_bool()

    def _diagnose(self, pred: str, seen: set[str]) -> EvaluationError | None:
        """The error of a value predicate that derived nothing, read off the derived atoms.

        Only reached when no builtin raised: the cause is an operand of the wrong type for
        a boolean rule (``!1``, ``if "a" then ...``) or a missing request variable. Rules
        and body literals are visited in order, descending into the first operand without
        a value, which is the order in which the language evaluates them.
        """
        if pred in seen:
            return None
        seen.add(pred)
        if pred == "principal":
            return no_principal()
        mismatch: list[Any] = []
        for rule in self._groups.get(pred, ()):
            for lit in rule.body:
                if not isinstance(lit, Atom) or lit.negated or len(lit.args) != 1:
                    continue  # builtins raised nothing (no error was recorded)
                values = [row[0] for row in self.ask(lit.pred, None)]
                if not values:
                    return self._diagnose(lit.pred, seen)
                arg = lit.args[0]
                if isinstance(arg, Const) and not any(matches(arg.value, v) for v in values):
                    mismatch.extend(v for v in values if type(v) is not type(arg.value))
                    break
        return bool_error(mismatch[0]) if mismatch else None

    def _outcomes(self, errors: dict[str, EvaluationError]) -> list[PolicyOutcome]:
        out: list[PolicyOutcome] = []
        for pid in self.program.policies:
            in_scope = bool(self.ask("scope", pid))
            if not in_scope:
                out.append(PolicyOutcome(pid, False))
                continue
            values = self._cond_values(pid)
            value = next((v for v in values if type(v) is bool), values[0] if values else None)
            out.append(PolicyOutcome(pid, True, value=value, error=errors.get(pid)))
        return out
