"""Batches: many requests read and decided on one snapshot, sharing what they can.

A list view asks about one principal (or one token set) and many resources: the
principal's parsing and place in the hierarchy, each action's candidate policies, a
context object several requests are given, and the schema checks of a (principal type,
action, resource type) are each worked out once (:class:`BatchParts`). Each request is
read by the single call's readers (:mod:`.requests`), with their forms and errors; a
request that fails gets a ``BatchItemError`` in its slot while the others are decided.
The facade turns the verdicts into answers (and log entries).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.datalog.authorizer import Verdict
from polang.datalog.facts import EntityFacts, EntitySlot, Request
from polang.errors import PolangError, RequestError, TokenError
from polang.language.entities import Entity, fast_request_entity
from polang.language.values import EntityUID, RecordValue

from .requests import (
    EntityInput,
    check_multi_issuer_schema,
    check_no_tokens_key,
    check_request,
    check_token_list,
    data_context,
    new_request,
    plain_type,
    read_action,
    read_context,
    read_part,
    token_context,
)
from .results import BatchItemError, BatchResult
from .snapshot import Snapshot

if TYPE_CHECKING:
    from polang.tokens.model import ProcessedTokens, TokenInput

_UNSIGNED_KEYS = frozenset({"action", "resource", "context", "principal"})
_MULTI_KEYS = frozenset({"action", "resource", "context", "tokens"})


class _Pending:
    """The slot of a batch request prepared but not yet decided."""


PENDING: Any = _Pending()

Decided = tuple[int, Request, Verdict, "ProcessedTokens | None"]
"""A batch request decided: its index, request, verdict and token set (multi-issuer)."""


def unsigned_batch(
    snap: Snapshot, requests: Iterable[Mapping[str, Any]], principal: EntityInput | None
) -> tuple[list[BatchResult], list[Decided]]:
    """``authorize_unsigned_batch``'s requests read and decided: the answers' slots
    (errors in place, ``PENDING`` for the decided) and the decided requests."""
    items = _batch_list(requests)
    parts = BatchParts(snap)
    shared: tuple[EntityUID, list[Entity], EntityFacts] | None = None
    if principal is not None:
        puid, pents = read_part(snap, principal, "principal")
        shared = (puid, pents, snap.facts.with_entities(pents))
    out: list[BatchResult] = []
    todo: list[Decided] = []
    puid_i: EntityUID | None
    facts: EntityFacts | None
    keys_ok = _UNSIGNED_KEYS.issuperset
    action_of = parts.action
    resource_of = parts.resource
    # the context given, action, types and context of the last request whose schema
    # check holds for every request of those (its answer kept by ``parts.check``)
    last: tuple[Any, EntityUID, str | None, str, RecordValue] | None = None
    for i, item in enumerate(items):
        try:
            obj = item if type(item) is dict and keys_ok(item) else _batch_item(item)
            act = action_of(obj["action"] if "action" in obj else _required(obj, "action"))
            ruid, rents = resource_of(obj)
            if shared is not None:
                if obj.get("principal") is not None:
                    raise RequestError(
                        "principal: given for the whole batch; a request may not name another"
                    )
                puid_i, pents_i, base = shared
            else:
                puid_i, pents_i, base = parts.principal(obj.get("principal"))
            context = obj.get("context")
            ptype = None if puid_i is None else puid_i[0]
            if (  # a list view: the previous request's context, action and types
                last is not None
                and last[0] is context
                and last[1] is act
                and last[2] == ptype
                and last[3] == ruid[0]
            ):
                ctx = last[4]
            else:
                ctx = parts.context(context, act)
                parts.check(puid_i, act, ruid, ctx)
                clean = parts.is_clean(ptype, act, ruid[0], ctx)
                last = (context, act, ptype, ruid[0], ctx) if clean else None
            if pents_i and rents and rents[0].uid == puid_i:
                # the single call lays the principal over the resource: the same here
                facts = snap.facts.with_entities([*rents, *pents_i])
            else:
                facts = parts.place(base, rents)
        except PolangError as e:
            out.append(BatchItemError(i, e))
            continue
        request = new_request(puid_i, act, ruid, ctx)
        decided = parts.decide(request, facts)
        out.append(PENDING)
        todo.append((i, request, decided, None))
    return out, todo


def multi_issuer_batch(
    snap: Snapshot,
    requests: Iterable[Mapping[str, Any]],
    tokens: Sequence[TokenInput | Mapping[str, Any]] | None,
) -> tuple[list[BatchResult], list[Decided]]:
    """``authorize_multi_issuer_batch``'s requests read and decided, as
    :func:`unsigned_batch`."""
    items = _batch_list(requests)
    parts = BatchParts(snap)
    shared: tuple[ProcessedTokens, EntityFacts] | None = None
    if tokens is not None:
        shared = parts.tokens(tokens)
    out: list[BatchResult] = []
    todo: list[Decided] = []
    keys_ok = _MULTI_KEYS.issuperset
    facts: EntityFacts | None
    checked_action: EntityUID | None = None  # the last action and context checked
    checked_context: Any = PENDING
    action_of = parts.action
    resource_of = parts.resource
    # the context given, action, resource type and token set of the last request whose
    # schema check holds for every request of those, and its context with the tokens
    last: tuple[Any, EntityUID, str, ProcessedTokens, RecordValue] | None = None
    for i, item in enumerate(items):
        try:
            obj = item if type(item) is dict and keys_ok(item) else _batch_item(item, _MULTI_KEYS)
            if shared is not None and obj.get("tokens") is not None:
                raise TokenError(
                    "tokens: given for the whole batch; a request may not carry others"
                )
            if shared is None:
                check_token_list(_required(obj, "tokens"))
            act = action_of(obj["action"] if "action" in obj else _required(obj, "action"))
            if act is not checked_action:
                check_multi_issuer_schema(snap, act)
                checked_action = act
            context = obj.get("context")
            if context is not checked_context:
                check_no_tokens_key(context)
                checked_context = context
            ruid, rents = resource_of(obj)
            processed, base = shared if shared is not None else parts.tokens(obj["tokens"])
            if (  # a list view: the previous request's context, action, type and tokens
                last is not None
                and last[0] is context
                and last[1] is act
                and last[2] == ruid[0]
                and last[3] is processed
            ):
                full = last[4]
            else:
                ctx = parts.token_context(context, act)
                parts.check(None, act, ruid, ctx)
                fields = dict(ctx.fields)
                fields["tokens"] = processed.context_tokens
                full = RecordValue(fields)
                clean = parts.is_clean(None, act, ruid[0], ctx)
                last = (context, act, ruid[0], processed, full) if clean else None
            facts = parts.place(base, rents)
        except PolangError as e:
            out.append(BatchItemError(i, e))
            continue
        request = new_request(None, act, ruid, full)
        decided = parts.decide(request, facts)
        out.append(PENDING)
        todo.append((i, request, decided, processed))
    return out, todo


def _batch_list(requests: Iterable[Mapping[str, Any]]) -> list[Any]:
    if isinstance(requests, str | bytes | Mapping) or not isinstance(requests, Iterable):
        raise RequestError(
            "requests: expected a list of requests (mappings of the single call's "
            f"arguments), got {type(requests).__name__}"
        )
    return requests if type(requests) is list else list(requests)


def _batch_item(item: object, allowed: frozenset[str] = _UNSIGNED_KEYS) -> Mapping[str, Any]:
    if type(item) is not dict and not isinstance(item, Mapping):
        raise RequestError(
            f"expected a mapping of the request's arguments, got {type(item).__name__}"
        )
    for k in item:
        if k not in allowed:
            shown = repr(k) if isinstance(k, str) and len(k) <= 40 else type(k).__name__
            raise RequestError(
                f"unknown argument {shown}; a request takes {', '.join(sorted(allowed))}"
            )
    return item


def _required(obj: Mapping[str, Any], key: str) -> Any:
    if key not in obj:
        raise RequestError(f"{key}: missing (a request needs an action and a resource)")
    return obj[key]


class BatchParts:
    """What the requests of one batch share, each worked out once: principals and token
    sets (by object), contexts (by object and action), clean schema checks (by the
    request's types and context), and the slot its resources are decided in."""

    __slots__ = (
        "_actions",
        "_checked",
        "_contexts",
        "_plain",
        "_principals",
        "_slot",
        "_slot_under",
        "_slots",
        "_snap",
        "_tokens",
        "_verdict",
    )

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap
        self._principals: dict[int, tuple[Any, EntityUID, list[Entity], EntityFacts]] = {}
        self._tokens: dict[int, tuple[Any, ProcessedTokens | PolangError, EntityFacts]] = {}
        self._contexts: dict[tuple[int, EntityUID, bool], tuple[Any, RecordValue]] = {}
        self._checked: dict[tuple[Any, ...], RecordValue] = {}
        self._plain: dict[str, bool] = {}
        self._actions: dict[str, EntityUID] = {}
        self._verdict = snap.authorizer.verdict
        self._slots = snap.authorizer.lookups_only
        self._slot: EntitySlot | None = None  # the resource's place over ``_slot_under``
        self._slot_under: EntityFacts | None = None

    def action(self, value: Any) -> EntityUID:
        if type(value) is str:
            act = self._actions.get(value)
            if act is None:
                act = self._actions[value] = read_action(value)
            return act
        return read_action(value)

    def principal(self, value: Any) -> tuple[EntityUID | None, list[Entity], EntityFacts]:
        snap = self._snap
        if value is None:
            return None, [], snap.facts
        hit = self._principals.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1], hit[2], hit[3]
        puid, pents = read_part(snap, value, "principal")
        facts = snap.facts.with_entities(pents)
        self._principals[id(value)] = (value, puid, pents, facts)
        return puid, pents, facts

    def resource(self, request: Mapping[str, Any]) -> tuple[EntityUID, list[Entity]]:
        """A request's resource: by the generated converters, else the single call's
        reader (its forms, its errors), which does not try them again."""
        value = request["resource"] if "resource" in request else _required(request, "resource")
        snap = self._snap
        res = fast_request_entity(value, snap.store.schema)
        if res is not None:
            return res.uid, [res]
        return read_part(snap, value, "resource", fast=False)

    def place(self, base: EntityFacts, entities: list[Entity]) -> EntityFacts | None:
        """The facts to decide a request over, with its resource's ``entities`` laid over
        ``base``; ``None`` when the one entity is in the batch's slot (``EntitySlot``:
        no facts object per resource) and :meth:`decide` must follow at once."""
        if self._slots and len(entities) == 1:
            slot = self._slot
            if slot is None or base is not self._slot_under:
                slot = self._slot = base.slot()
                self._slot_under = base
            if slot.put(entities[0]):
                return None
        return base.with_entities(entities)

    def decide(self, request: Request, facts: EntityFacts | None) -> Verdict:
        """The verdict over ``facts`` (as :meth:`place` gave them); the slot's entity is
        taken out again."""
        if facts is not None:
            return self._verdict(request, facts)
        slot = self._slot
        assert slot is not None
        try:
            return self._verdict(request, slot.facts)
        finally:
            slot.take()

    def tokens(self, value: Any) -> tuple[ProcessedTokens, EntityFacts]:
        """A token list validated once per list object (its error too)."""
        hit = self._tokens.get(id(value))
        if hit is None or hit[0] is not value:
            snap = self._snap
            try:
                check_token_list(value)
                processed = snap.tokens.process(value)
                processed.require_any()
                hit = (value, processed, snap.facts.with_entities(processed.entities))
            except PolangError as e:
                hit = (value, e, snap.facts)
            self._tokens[id(value)] = hit
        if isinstance(hit[1], PolangError):
            raise hit[1]
        return hit[1], hit[2]

    def _cached_context(self, value: Any, act: EntityUID, tokens: bool) -> RecordValue:
        key = (id(value), act, tokens)
        hit = self._contexts.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        snap = self._snap
        if tokens:
            ctx = token_context(snap, value, act)
        else:  # pushed data (push_data) fills context.data, else the context as given
            data = snap.context_data
            filled = data_context(snap, value, act) if data is not None and data.present else None
            ctx = read_context(value, act, snap.store.schema) if filled is None else filled
        self._contexts[key] = (value, ctx)
        return ctx

    def context(self, value: Any, act: EntityUID) -> RecordValue:
        return self._cached_context(value, act, False)

    def token_context(self, value: Any, act: EntityUID) -> RecordValue:
        return self._cached_context(value, act, True)

    def _plain_type(self, name: str | None) -> bool:
        """``requests.plain_type``, kept per type for the batch."""
        if name is None:
            return True
        plain = self._plain.get(name)
        if plain is None:
            plain = self._plain[name] = plain_type(self._snap.store.schema, name)
        return plain

    def is_clean(self, ptype: str | None, act: EntityUID, rtype: str, ctx: RecordValue) -> bool:
        """Whether :meth:`check` passes every request of these types, action and context
        (a clean answer it kept, or no check at all)."""
        if not self._snap.strict:
            return True
        return self._checked.get((ptype, act, rtype, id(ctx))) is ctx

    def check(
        self, puid: EntityUID | None, act: EntityUID, ruid: EntityUID, ctx: RecordValue
    ) -> None:
        """The single call's schema check; a clean answer is reused for the same types."""
        if not self._snap.strict:
            return
        ptype = None if puid is None else puid.type
        key = (ptype, act, ruid.type, id(ctx))
        if self._checked.get(key) is ctx:
            return
        check_request(self._snap, puid, act, ruid, ctx)
        if self._plain_type(ptype) and self._plain_type(ruid.type):
            self._checked[key] = ctx  # holds ctx: its id stays its own for the batch
