"""Reading a request: its action, principal, resource, context and entities, in every form
the API accepts, and its schema check with the snapshot's caches.

``authorize_unsigned``, ``authorize_multi_issuer``, ``explain``, ``who_can``, ``what_can``,
``access_matrix`` and the batches take a principal or resource in the same forms, read
by :func:`entity_or_reference`, so a form that works in one call works in every other.
Two kinds come out:

- an **entity given in full**: the language's entity JSON ``{"uid", "attrs", "parents",
  "tags"}``, the mapped form ``{"cedar_entity_mapping": {"entity_type", "id"}, ...}``, or
  an :class:`~polang.language.entities.Entity`; it is laid over the store's entities for
  that call;
- a **reference**: a string ``'Ns::Type::"id"'``, ``{"type", "id"}``,
  ``{"__entity": {"type", "id"}}`` or an :class:`~polang.language.values.EntityUID`; it
  names an entity the store holds (what an unknown one means is up to the caller).

Detection is by keys, with no guessing: ``uid`` makes an entity, ``cedar_entity_mapping``
a mapped entity, ``__entity`` (alone) or exactly ``type`` and ``id`` a reference; any other
object is an error that lists the forms.

A value is read once: plain dicts take the generated converters
(``language.entities.fast_request_entity``, ``fast_context``); what they defer (and every
error) goes to the full readers, which then do not try the converters again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from polang.datalog.facts import EntityFacts, Request
from polang.errors import EntityError, PolangError, RequestError, TokenError, ValidationError
from polang.inputs.fields import closest
from polang.language.entities import (
    Entity,
    EntityStore,
    check_acyclic,
    context_record,
    fast_context,
    fast_entity,
    fast_request_entity,
    parse_entity,
    parse_entity_uid_json,
    parse_mapped_entity,
    parse_value,
    same_entity,
)
from polang.language.parser import parse_entity_uid
from polang.language.schema import Schema
from polang.language.validate import parsed_context_is_valid, validate_request
from polang.language.values import EntityUID, RecordValue

from .results import slot_setter
from .snapshot import Snapshot

if TYPE_CHECKING:
    from polang.tokens.model import ProcessedTokens, TokenInput

__all__ = ["FORMS", "EntityInput", "entity_or_reference", "parse_reference_text"]

EntityInput = str | EntityUID | Mapping[str, Any] | Entity
"""What a principal or resource argument may be (see the module's docstring)."""

FORMS = (
    'an entity {"uid", "attrs", "parents"} or {"cedar_entity_mapping": {...}, ...}, '
    'or a reference \'Ns::Type::"id"\', {"type", "id"} or {"__entity": {"type", "id"}}'
)
"""The accepted forms, as error messages name them."""

CLEAN_CONTEXTS_MAX = 4096
"""Contexts given as values (``RecordValue``, or none) whose clean schema check a policy
store snapshot keeps, per action and principal and resource type; the cache is emptied
when it reaches this many (a bound on memory, never on what is decided)."""

_SHOWN = 80  # characters of a bad reference string quoted in an error


# ---------------------------------------------------------------- principal and resource

_CACHED_TEXT = 256  # longer reference texts are parsed each time (the cache stays small)


def parse_reference_text(text: str) -> EntityUID:
    """``'Ns::Type::"id"'`` as a uid (short texts parsed once each); ``RequestError``."""
    if len(text) <= _CACHED_TEXT:
        return _parse_cached(text)
    return _parse(text)


def _parse(text: str) -> EntityUID:
    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise RequestError(str(e)) from None


_parse_cached = lru_cache(maxsize=1024)(_parse)


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _keys(keys: list[str]) -> str:
    """A few keys of an object, for a message (never the whole of a hostile one)."""
    shown = ", ".join(_shown(k) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def entity_or_reference(
    value: Any, what: str, schema: Schema | None, *, fast: bool = True
) -> tuple[EntityUID, Entity | None]:
    """``(uid, entity)`` for an entity given in full, ``(uid, None)`` for a reference.

    ``what`` names the request part in errors (``resource``, ``principal``,
    ``entities[2]``); every failure is a ``RequestError`` that starts with it.
    ``fast=False``: the caller ran ``fast_request_entity`` on this very ``value`` and it
    deferred, so the full reader runs alone (the value is read once).
    """
    if type(value) is dict:  # the common case first (Mapping's isinstance is slow)
        obj: dict[str, Any] = value  # the parsers never modify it
    elif isinstance(value, EntityUID):
        return value, None
    elif isinstance(value, Entity):
        return value.uid, value
    elif isinstance(value, str):
        try:
            return parse_reference_text(value), None
        except RequestError:
            raise RequestError(
                f"{what}: {_shown(value)} is not an entity reference like 'Ns::Type::\"id\"'"
            ) from None
    elif isinstance(value, Mapping):
        obj = dict(value)
        fast = True  # a copy the converters have not seen
    else:
        raise RequestError(f"{what}: expected {FORMS}; got {type(value).__name__}")
    try:
        if "uid" in obj:
            ent = parse_entity(obj, schema, path=f"$.{what}", fast=fast)
            return ent.uid, ent
        if "cedar_entity_mapping" in obj:
            ent = parse_mapped_entity(obj, schema, path=f"$.{what}", fast=fast)
            return ent.uid, ent
        if "__entity" in obj or ("type" in obj and "id" in obj):
            keys = sorted(str(k) for k in obj)
            if len(keys) != (1 if "__entity" in obj else 2):
                raise RequestError(
                    f'{what}: a reference is exactly {{"type", "id"}} or '
                    f'{{"__entity": {{...}}}}, found the keys {_keys(keys)}; to give the '
                    'entity in full, write {"uid": {"type", "id"}, "attrs": {...}, '
                    '"parents": [...]}'
                )
            return parse_entity_uid_json(obj, path=f"$.{what}"), None
    except EntityError as e:
        raise RequestError(f"{what}: {e}") from None
    found = _keys(sorted(str(k) for k in obj)) or "none"
    raise RequestError(f"{what}: expected {FORMS}; got an object with the keys {found}")


def read_part(
    snap: Snapshot, value: Any, what: str, *, fast: bool = True, facts: EntityFacts | None = None
) -> tuple[EntityUID, list[Entity]]:
    """A decision's principal or resource: its uid, and the entity to lay over the store.

    A reference (``'T::"id"'``, ``{"type", "id"}``, ``{"__entity": ...}``, an
    ``EntityUID``) names an entity the store holds (a default entity, an action, a
    ``TrustedIssuer``), used as stored; one the store does not hold is an error.
    ``fast``: as in :func:`entity_or_reference`; ``facts``: where a reference is looked
    up (the store's entities when not given).
    """
    uid, ent = entity_or_reference(value, what, snap.store.schema, fast=fast)
    if ent is not None:
        return uid, [ent]
    if (snap.facts if facts is None else facts).get(uid) is None:
        raise RequestError(
            f"{what}: {uid} is a reference, but the store has no entity {uid}; give the "
            'entity in full ({"uid": {"type", "id"}, "attrs": {...}, "parents": [...]}) '
            "or add it to the store's default entities"
        )
    return uid, []


# ---------------------------------------------------------------- action and context


@lru_cache(maxsize=1024)
def _parse_action(text: str) -> EntityUID:
    """Actions repeat across requests: parse each distinct text once."""
    try:
        return parse_entity_uid(text)
    except PolangError as e:
        shown = repr(text if len(text) <= 80 else text[:80] + "...")
        raise RequestError(f"action {shown} is not an entity reference: {e}") from None


def read_action(action: str | EntityUID) -> EntityUID:
    """A request's action: ``'Ns::Action::"view"'`` or an ``EntityUID``."""
    if type(action) is str and len(action) <= 256:
        return _parse_action(action)
    if isinstance(action, EntityUID):
        return action
    if not isinstance(action, str):
        raise RequestError(
            f"action: expected a string like 'Ns::Action::\"view\"', got {type(action).__name__}"
        )
    if len(action) > 256:  # not cached: the cache holds only short texts
        return _parse_action.__wrapped__(action)
    return _parse_action(action)


def read_context(
    context: Mapping[str, Any] | RecordValue | None,
    action: EntityUID,
    schema: Schema,
    *,
    fast: bool = True,
) -> RecordValue:
    """A decision's context, by ``action``'s context type; none is the empty record.
    ``fast=False``: the caller ran ``fast_context`` on this very ``context``."""
    if context is None:
        return RecordValue()
    return context_record(context, schema, action, fast=fast)


def data_context(
    snap: Snapshot, context: Mapping[str, Any] | RecordValue | None, act: EntityUID
) -> RecordValue | None:
    """The context of a decision of ``act`` with ``context.data`` filled from the
    engine's pushed data (:mod:`.data`), or ``None`` when none applies (nothing pushed,
    or the action's context declares no ``data``): then the context is read as usual.

    The caller's part is read by the action's context type without ``data``; a caller
    that gives ``data`` itself while pushed data fills it is refused (one source)."""
    data = snap.context_data
    if data is None or not data.active:
        return None
    schema = snap.store.schema
    view = data.record_for(schema, act)
    if view is None:
        return None
    record, rest = view
    if context is None:
        fields: dict[str, Any] = {}
    elif isinstance(context, RecordValue):
        fields = dict(context.fields)
    elif isinstance(context, Mapping):
        obj = context if type(context) is dict else dict(context)
        if "data" in obj:
            fields = {"data": None}  # refused below, before anything is read
        else:
            try:
                fields = dict(parse_value(obj, rest, path="$.context", schema=schema).fields)
            except EntityError as e:
                raise RequestError(f"context: {e}") from None
    else:
        raise RequestError(f"context: expected an object, got {type(context).__name__}")
    if "data" in fields:
        raise RequestError(
            "context: the key 'data' is filled from the data pushed with push_data "
            "(context.data); a request may not give it too"
        )
    fields["data"] = record
    return RecordValue(fields)


def query_context(
    snap: Snapshot, context: Mapping[str, Any] | RecordValue | None, action: EntityUID | None
) -> RecordValue | None:
    """A query's context: ``None`` stays "unknown". With one action the context is parsed
    against its context type; across actions it is parsed as plain entity JSON (escapes
    and all)."""
    if context is None:
        return None
    return context_record(context, snap.store.schema, action)


# ---------------------------------------------------------------- the schema check


def check_request(
    snap: Snapshot,
    principal: EntityUID | None,
    action: EntityUID,
    resource: EntityUID,
    context: RecordValue | None,
) -> None:
    """With strict validation on, a request the schema cannot have is an error, not a
    silent deny: an undeclared action or a principal/resource type it does not apply to
    is almost always a typo in the caller."""
    if not snap.strict:
        return
    findings = validate_request(principal, action, resource, context, snap.store.schema)
    if findings:
        raise RequestError(
            "the request does not match the schema: " + "; ".join(str(f) for f in findings)
        )


def plain_type(schema: Schema, name: str) -> bool:
    """A type whose uids the schema check treats alike (declared, not enumerated, not an
    action type)."""
    et = schema.entity_types.get(name)
    return et is not None and et.enum is None and not schema.is_action_type(name)


def check_parsed(
    snap: Snapshot,
    puid: EntityUID | None,
    act: EntityUID,
    ruid: EntityUID,
    ctx: RecordValue,
    parsed: bool,
) -> None:
    """The schema check of a request whose context was ``parsed`` from JSON (or not);
    a clean answer for plain types is kept per snapshot (for a context not parsed,
    by the context's value). The caller has looked the kept answer up already (inline,
    on the per-request path)."""
    if not snap.strict:
        return
    if not parsed:
        check_context(snap, puid, act, ruid, ctx)
        return
    schema = snap.store.schema
    if not parsed_context_is_valid(schema, act):
        check_request(snap, puid, act, ruid, ctx)
        return
    check_request(snap, puid, act, ruid, None)  # raises on a finding
    if (puid is None or plain_type(schema, puid[0])) and plain_type(schema, ruid[0]):
        snap.clean_checks[(act, None if puid is None else puid[0], ruid[0])] = True


def check_context(
    snap: Snapshot,
    puid: EntityUID | None,
    act: EntityUID,
    ruid: EntityUID,
    ctx: RecordValue,
) -> None:
    """The full schema check of a request whose context was given as a value (or not
    at all), a clean answer for plain types kept by the context's value (a service
    passing the same few contexts checks each once per snapshot)."""
    schema = snap.store.schema
    ptype = None if puid is None else puid[0]
    key = (act, ptype, ruid[0], ctx)
    clean = snap.clean_contexts
    try:
        if key in clean:
            return
    except TypeError:  # a value that cannot be hashed: checked every time
        check_request(snap, puid, act, ruid, ctx)
        return
    check_request(snap, puid, act, ruid, ctx)  # raises on a finding
    if (ptype is None or plain_type(schema, ptype)) and plain_type(schema, ruid[0]):
        if len(clean) >= CLEAN_CONTEXTS_MAX:
            clean.clear()  # bounded: a service with many distinct contexts starts over
        clean[key] = True


# ---------------------------------------------------------------- one decision's request

_new = object.__new__
_set_principal = slot_setter(Request, "principal")
_set_action = slot_setter(Request, "action")
_set_resource = slot_setter(Request, "resource")
_set_context = slot_setter(Request, "context")


def new_request(
    principal: EntityUID | None, action: EntityUID, resource: EntityUID, context: RecordValue
) -> Request:
    """``Request(...)`` with its slots filled directly (its ``__init__`` is a Python call
    more, on the per-request path)."""
    request = _new(Request)
    _set_principal(request, principal)
    _set_action(request, action)
    _set_resource(request, resource)
    _set_context(request, context)
    return request


def unsigned_request(
    snap: Snapshot,
    action: str | EntityUID,
    resource: EntityInput,
    context: Mapping[str, Any] | RecordValue | None,
    principal: EntityInput | None,
) -> tuple[Request, EntityFacts]:
    """An ``authorize_unsigned`` request, checked, and the facts to decide it over."""
    schema = snap.store.schema
    act = read_action(action)
    # entities and contexts as plain dicts take the generated converters; anything
    # else (and every error) goes through the full readers, which do not try them again
    res = (
        fast_entity(resource, schema)
        if type(resource) is dict and "uid" in resource
        else fast_request_entity(resource, schema)
    )
    if res is not None:
        ruid = res.uid
        request_entities = [res]
    else:
        ruid, request_entities = read_part(snap, resource, "resource", fast=False)
    puid: EntityUID | None = None
    if principal is not None:
        prin = (
            fast_entity(principal, schema)
            if type(principal) is dict and "uid" in principal
            else fast_request_entity(principal, schema)
        )
        if prin is not None:
            puid = prin.uid
            request_entities.append(prin)
        else:
            puid, pents = read_part(snap, principal, "principal", fast=False)
            request_entities.extend(pents)
    data = snap.context_data  # pushed data (push_data) fills context.data
    ctx = data_context(snap, context, act) if data is not None and data.present else None
    filled = ctx is not None
    if ctx is None:
        ctx = fast_context(context, schema, act) if type(context) is dict else None
    if ctx is None:
        ctx = read_context(context, act, schema, fast=False)
    # a context parsed from JSON by the action's type is checked already (when its type
    # leaves nothing to validation); None and a caller's RecordValue are not, but pushed
    # data is read by its declared type (around None, the whole context was parsed)
    parsed = (filled or context is not None) and not isinstance(context, RecordValue)
    if not (
        parsed and (act, None if puid is None else puid[0], ruid[0]) in snap.clean_checks
    ):  # (the clean check kept per snapshot, looked up inline: once per request)
        check_parsed(snap, puid, act, ruid, ctx, parsed)
    return new_request(puid, act, ruid, ctx), snap.facts.with_entities(request_entities)


# ---------------------------------------------------------------- multi-issuer requests


def check_token_list(tokens: object) -> None:
    if type(tokens) is not list and (
        isinstance(tokens, str | bytes) or not isinstance(tokens, Sequence)
    ):
        raise TokenError("tokens: expected a list of TokenInput(mapping, payload)")


def check_no_tokens_key(context: object) -> None:
    if (
        type(context) is dict or isinstance(context, Mapping | RecordValue)
    ) and "tokens" in context:
        raise RequestError(
            "context: the key 'tokens' is reserved for validated tokens (context.tokens)"
        )


def check_multi_issuer_schema(snap: Snapshot, act: EntityUID) -> None:
    problems = snap.multi_issuer_problems
    for_action = snap.action_token_problems.get(act)
    if problems or for_action:
        found = [*problems, *(for_action or ())]
        raise ValidationError(
            "the schema lacks the multi-issuer token structure: " + "; ".join(found), found
        )


def with_tokens_stand_in(
    context: Mapping[str, Any] | RecordValue | None,
) -> Mapping[str, Any] | RecordValue:
    """The caller's context plus a ``tokens`` record that fits any ``TokensContext`` (its
    one required field); the engine replaces it with the request's tokens."""
    if context is None:
        return {"tokens": {"total_token_count": 0}}
    if isinstance(context, RecordValue):
        return RecordValue({**context.fields, "tokens": RecordValue({"total_token_count": 0})})
    if not isinstance(context, Mapping):
        return context  # read_context reports it
    return {**context, "tokens": {"total_token_count": 0}}


def token_context(
    snap: Snapshot, context: Mapping[str, Any] | RecordValue | None, act: EntityUID
) -> RecordValue:
    """The caller's part of a multi-issuer context (``tokens`` is the engine's)."""
    given = context
    if act in snap.tokens_required:
        # `tokens: {...}` declared required: parse the caller's part with a stand-in
        # (the engine fills the field), so a required field is not reported missing
        given = with_tokens_stand_in(context)
    data = snap.context_data  # pushed data (push_data) fills context.data
    ctx = data_context(snap, given, act) if data is not None and data.present else None
    return read_context(given, act, snap.store.schema) if ctx is None else ctx


def token_request(
    snap: Snapshot,
    tokens: Sequence[TokenInput | Mapping[str, Any]],
    action: str | EntityUID,
    resource: EntityInput,
    context: Mapping[str, Any] | RecordValue | None,
) -> tuple[Request, EntityFacts, ProcessedTokens]:
    """An ``authorize_multi_issuer`` request: its tokens validated and made entities,
    ``context.tokens`` filled, checked; and the facts to decide it over."""
    check_token_list(tokens)
    act = read_action(action)
    check_multi_issuer_schema(snap, act)
    check_no_tokens_key(context)
    ruid, res = read_part(snap, resource, "resource")
    ctx, processed = token_inputs(snap, tokens, act, ruid, context)
    request = Request(None, act, ruid, ctx)
    return request, snap.facts.with_entities([*processed.entities, *res]), processed


def token_inputs(
    snap: Snapshot,
    tokens: Sequence[TokenInput | Mapping[str, Any]],
    act: EntityUID,
    ruid: EntityUID,
    context: Mapping[str, Any] | RecordValue | None,
) -> tuple[RecordValue, ProcessedTokens]:
    """The tokens validated and made entities, and the context with ``tokens`` filled,
    checked against the schema for a resource ``ruid``."""
    processed = snap.tokens.process(tokens)
    processed.require_any()
    ctx = token_context(snap, context, act)
    check_request(snap, None, act, ruid, ctx)
    fields = dict(ctx.fields)
    fields["tokens"] = processed.context_tokens
    return RecordValue(fields), processed


# ---------------------------------------------------------------- queries


def query_subject(
    snap: Snapshot, facts: EntityFacts, value: EntityInput, what: str
) -> tuple[EntityUID, EntityFacts]:
    """A query's fixed principal or resource: a reference (to an entity of ``facts``,
    or to one they lack, whose data is then unknown), or an entity given in full (laid
    over ``facts`` for this query)."""
    uid, ent = entity_or_reference(value, what, snap.store.schema)
    return uid, (facts if ent is None else facts.with_entities([ent]))


def extra_entities(snap: Snapshot, entities: Iterable[Mapping[str, Any] | Entity]) -> EntityFacts:
    """The store's entities with ``entities`` (each given in full) laid over them."""
    if isinstance(entities, str | bytes | Mapping):
        raise RequestError("entities: expected a list of entities")
    given: dict[EntityUID, tuple[Entity, str]] = {}
    for i, e in enumerate(entities):
        what = f"entities[{i}]"
        _, ent = entity_or_reference(e, what, snap.store.schema)
        if ent is None:
            raise RequestError(
                f"{what}: a reference adds no entity; give the entity in full "
                '({"uid": {"type", "id"}, "attrs": {...}, "parents": [...]})'
            )
        previous = given.get(ent.uid)
        if previous is not None and not same_entity(previous[0], ent):
            # the list's order must not decide who is allowed
            raise RequestError(
                f"{what}: entity {ent.uid} is already defined at {previous[1]} with other data"
            )
        given.setdefault(ent.uid, (ent, what))
    if not given:
        return snap.facts
    # a cycle through the given entities and the store's is refused, as in an entity
    # file (the store's own hierarchy is acyclic: a cycle passes through a given one)
    found = _GivenOverStore(given, snap.facts.entities)
    try:
        check_acyclic(found, roots=list(given))
    except EntityError as err:
        raise RequestError(f"entities: {err}") from None
    return snap.facts.with_entities([e for e, _ in given.values()])


class _GivenOverStore(Mapping[EntityUID, tuple[Entity, str]]):
    """Entities given with a query (and where) laid over the store's, without copying the
    store's: the hierarchy check walks only what the given entities reach."""

    def __init__(self, given: dict[EntityUID, tuple[Entity, str]], store: EntityStore) -> None:
        self._given = given
        self._store = store

    def __getitem__(self, uid: EntityUID) -> tuple[Entity, str]:
        hit = self._given.get(uid)
        if hit is not None:
            return hit
        entity = self._store.get(uid)
        if entity is None:
            raise KeyError(uid)
        return entity, "the store's entities"

    def __contains__(self, uid: object) -> bool:
        return uid in self._given or uid in self._store

    def __iter__(self) -> Iterator[EntityUID]:
        yield from self._given
        yield from (e.uid for e in self._store if e.uid not in self._given)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# ---------------------------------------------------------------- plans (list endpoints)


def plan_resource_type(snap: Snapshot, resource_type: object) -> str:
    """A plan's resource type: an entity type name, one the schema declares when it
    declares any (a misspelt one gets a did-you-mean, never a plan that allows nothing)."""
    if not isinstance(resource_type, str):
        raise RequestError(
            "resource_type: expected an entity type name like 'Ns::Document', got "
            f"{type(resource_type).__name__}"
        )
    types = snap.store.schema.entity_types
    if resource_type in types:
        return resource_type
    if types:  # (looked up before anything is parsed: a hostile name costs nothing)
        hint = closest(resource_type, types) if len(resource_type) <= _SHOWN else None
        raise RequestError(
            f"resource_type: the schema declares no entity type {_shown(resource_type)}"
            + (f"; did you mean {hint!r}?" if hint else "")
        )
    try:  # no schema: any name the language can write
        return parse_reference_text(f'{resource_type}::""').type
    except RequestError:
        raise RequestError(
            f"resource_type: {_shown(resource_type)} is not an entity type name like 'Ns::Document'"
        ) from None


def type_placeholder(schema: Schema, resource_type: str) -> EntityUID:
    """A uid of ``resource_type`` for the schema check of a plan's request (whose
    resource is every row): an enumerated type's first member, else any id."""
    et = schema.entity_types.get(resource_type)
    enum = None if et is None else et.enum
    return EntityUID(resource_type, enum[0] if enum else "")


def plan_request(
    snap: Snapshot,
    facts: EntityFacts,
    action: str | EntityUID,
    resource_type: object,
    principal: EntityInput | None,
    context: Mapping[str, Any] | RecordValue | None,
) -> tuple[EntityUID | None, EntityUID, str, RecordValue, EntityFacts]:
    """A plan's request read and checked as ``authorize_unsigned`` reads and checks
    one (the principal in every form, the context, pushed data, the schema check), the
    resource a type: ``(principal, action, resource type, context, facts)``."""
    schema = snap.store.schema
    act = read_action(action)
    rtype = plan_resource_type(snap, resource_type)
    puid: EntityUID | None = None
    if principal is not None:
        puid, pents = read_part(snap, principal, "principal", facts=facts)
        if pents:
            facts = facts.with_entities(pents)
    data = snap.context_data  # pushed data (push_data) fills context.data
    ctx = data_context(snap, context, act) if data is not None and data.present else None
    if ctx is None:
        ctx = read_context(context, act, schema)
    check_request(snap, puid, act, type_placeholder(schema, rtype), ctx)
    return puid, act, rtype, ctx, facts


def token_plan_request(
    snap: Snapshot,
    tokens: Sequence[TokenInput | Mapping[str, Any]],
    action: str | EntityUID,
    resource_type: object,
    context: Mapping[str, Any] | RecordValue | None,
) -> tuple[EntityUID, str, RecordValue, EntityFacts, ProcessedTokens]:
    """A plan's request from tokens, as ``authorize_multi_issuer`` reads one:
    ``(action, resource type, context, facts, processed tokens)``."""
    check_token_list(tokens)
    act = read_action(action)
    check_multi_issuer_schema(snap, act)
    check_no_tokens_key(context)
    rtype = plan_resource_type(snap, resource_type)
    ruid = type_placeholder(snap.store.schema, rtype)
    ctx, processed = token_inputs(snap, tokens, act, ruid, context)
    return act, rtype, ctx, snap.facts.with_entities(processed.entities), processed
