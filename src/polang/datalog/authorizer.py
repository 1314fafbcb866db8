"""Decide requests over a policy set: lower once, pick a backend, evaluate per request.

This is the language-level entry point (schema, policies and entities in, decision out);
``polang.Engine`` adds stores, tokens and logs around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from polang._record import Record
from polang.datalog.compiled import CompiledBackend, RawDecision
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Program
from polang.datalog.lower import lower_policies
from polang.errors import ConfigError, EvaluationError
from polang.language.ast import Policy
from polang.language.entities import Entity, EntityStore
from polang.language.values import EntityUID, RecordValue

_set = object.__setattr__


class PolicyErrorInfo(Record):
    """A policy whose evaluation errored: it did not apply (the language's semantics)."""

    __slots__ = ("error", "kind", "policy_id")
    policy_id: str
    error: str
    kind: str

    def __init__(self, policy_id: str, error: str, kind: str = "evaluation") -> None:
        _set(self, "policy_id", policy_id)
        _set(self, "error", error)
        _set(self, "kind", kind)

    def to_dict(self) -> dict[str, str]:
        return {"policy_id": self.policy_id, "error": self.error}


class Decision(Record):
    """An authorizer's answer: the decision, the determining policies, the erroring ones."""

    __slots__ = ("allow", "errors", "reasons")
    _frozen: ClassVar[bool] = False
    allow: bool
    reasons: list[str]
    errors: list[PolicyErrorInfo]

    def __init__(
        self,
        allow: bool,
        reasons: list[str] | None = None,
        errors: list[PolicyErrorInfo] | None = None,
    ) -> None:
        self.allow = allow
        self.reasons = [] if reasons is None else reasons
        self.errors = [] if errors is None else errors

    @property
    def decision(self) -> str:
        return "allow" if self.allow else "deny"


class Backend(Protocol):
    name: str

    def decide(
        self, request: Request, facts: EntityFacts, *, trace: bool = False
    ) -> RawDecision: ...


BACKENDS = ("compiled", "pydatalog")


def make_backend(program: Program, name: str = "compiled", *, background: bool = False) -> Backend:
    """``background``: the compiled backend generates its code on a thread (see
    :class:`CompiledBackend`); the engine's choice, so a store is ready sooner."""
    if name == "compiled":
        return CompiledBackend(program, background=background)
    if name == "pydatalog":
        from polang.datalog.pydatalog import PyDatalogBackend

        return PyDatalogBackend(program)
    raise ConfigError(
        f"ENGINE_DATALOG_BACKEND: unknown backend {name!r}; allowed: {', '.join(BACKENDS)}"
    )


def _as_pairs(policies: Mapping[str, Policy] | Iterable[Policy]) -> list[tuple[str, Policy]]:
    if isinstance(policies, Mapping):
        return list(policies.items())
    out = []
    for i, p in enumerate(policies):
        out.append((p.policy_id or f"policy{i}", p))
    return out


class Authorizer:
    """A compiled policy set. Thread-safe: evaluation keeps no shared mutable state."""

    def __init__(
        self,
        policies: Mapping[str, Policy] | Iterable[Policy],
        *,
        backend: str = "compiled",
        background: bool = False,
    ) -> None:
        self.policies = dict(_as_pairs(policies))
        self.program = lower_policies(self.policies.items())
        self.backend = make_backend(self.program, backend, background=background)
        self._outcome: Any = getattr(self.backend, "outcome", None)
        self.lookups_only = self._outcome is not None
        """Whether decisions read facts only by ``get`` and ``ancestors_of`` (the compiled
        backend), so a batch may decide over an :class:`EntitySlot`."""

    def generate_in_background(self) -> None:
        """Start the backend's background code generation, if it has one."""
        start = getattr(self.backend, "generate_in_background", None)
        if start is not None:
            start()

    def is_authorized(
        self,
        principal: EntityUID | None,
        action: EntityUID,
        resource: EntityUID,
        context: RecordValue | Mapping[str, Any] | None = None,
        entities: EntityFacts | EntityStore | Iterable[Entity] = (),
    ) -> Decision:
        if not isinstance(context, RecordValue):
            context = RecordValue(context or {})
        facts = entities if isinstance(entities, EntityFacts) else EntityFacts(entities)
        return self.decide(Request(principal, action, resource, context), facts)

    def decide_batch(
        self, requests: Sequence[Request], facts: Sequence[EntityFacts]
    ) -> list[Decision]:
        """Prepared requests, each over its facts (the engine's batches): the same
        decisions as :meth:`decide` one by one, with what requests share worked out once."""
        backend = self.backend
        many = getattr(backend, "decide_many", None)
        if many is not None:
            return [_from_raw(raw) for raw in many(requests, facts)]
        decide = self.decide
        return [decide(r, f) for r, f in zip(requests, facts, strict=True)]

    def decide(self, request: Request, facts: EntityFacts) -> Decision:
        """A prepared request over prepared facts."""
        return _from_raw(self.backend.decide(request, facts))

    def verdict(self, request: Request, facts: EntityFacts) -> Verdict:
        """:meth:`decide` in the shape of an answer: ``(allow, reasons, errors)`` with the
        errors as ``PolicyErrorInfo.to_dict()`` gives them; both lists are the caller's
        own. The engine's per-request path: no intermediate objects."""
        outcome = self._outcome
        if outcome is None:
            d = self.decide(request, facts)
            return d.allow, d.reasons, [e.to_dict() for e in d.errors]
        allow, reasons, errored, errs = outcome(request, facts)
        if not errored:
            return allow, list(reasons), []
        return allow, list(reasons), _error_dicts(errored, errs)


Verdict = tuple[bool, list[str], list[dict[str, str]]]
"""``(allow, reasons, errors as dicts)``: :meth:`Authorizer.verdict`."""


def _error_dicts(
    errored: Sequence[str], errs: Mapping[str, EvaluationError]
) -> list[dict[str, str]]:
    out = []
    for pid in errored:
        e = errs.get(pid)
        message = e.message if e is not None else "the condition did not evaluate to a Bool"
        out.append({"policy_id": pid, "error": message})
    return out


def _from_raw(raw: RawDecision) -> Decision:
    """The backend's lists are made per decision: the Decision takes them over."""
    errors = raw.errors
    return Decision(
        raw.allow,
        raw.reasons,
        [PolicyErrorInfo(pid, e.message, e.kind) for pid, e in errors] if errors else [],
    )
