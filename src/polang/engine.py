"""The engine: a policy store compiled for decisions, plus tokens and logs.

``Engine`` wires the pieces and owns no decision logic of its own: the store comes from
:mod:`polang.store`, policies are lowered and compiled by :mod:`polang.datalog`, tokens are
validated by :mod:`polang.tokens`, and every decision is logged through :mod:`polang.logs`.

Everything a request needs lives in one immutable :class:`_Snapshot`; a store refresh
builds a new snapshot in full and swaps it in with one assignment, so a request always
sees one consistent store and a bad refresh never replaces a good one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from polang._record import Record
from polang.config import Config
from polang.datalog.authorizer import Authorizer, Verdict
from polang.datalog.facts import EntityFacts, EntitySlot, Request
from polang.errors import (
    EntityError,
    PolangError,
    RequestError,
    TokenError,
    ValidationError,
)
from polang.language.entities import (
    Entity,
    EntityStore,
    check_acyclic,
    fast_context,
    fast_entity,
    fast_request_entity,
    parse_context,
    parse_value,
    same_entity,
)
from polang.language.parser import parse_entity_uid
from polang.language.schema import Schema
from polang.language.validate import parsed_context_is_valid, validate_request
from polang.language.values import EntityUID, RecordValue
from polang.logs import (
    Logger,
    LogSettings,
    reserve_uuid7,
    reserve_uuid7_many,
    uuid7,
    uuid7_many,
    uuid7_text,
)
from polang.refs import EntityInput, entity_or_reference

if TYPE_CHECKING:  # imported on first use (start-up time): see tests/test_imports.py
    import ssl
    from pathlib import Path

    from polang.authoring.diff import DiffResult
    from polang.datalog.explain import Explanation
    from polang.datalog.query import QueryResult
    from polang.store.model import PolicyStore
    from polang.store.source import PolicyStoreSource
    from polang.tokens.model import DroppedToken, ProcessedTokens, TokenInput, TokenLogId
    from polang.tokens.processor import TokenProcessor
    from polang.tokens.settings import TokenSettings

METRICS_INTERVAL = 60.0
"""Seconds between two Metric log entries written while deciding."""

# ---------------------------------------------------------------- results

_set = object.__setattr__

CLEAN_CONTEXTS_MAX = 4096
"""Contexts given as values (``RecordValue``, or none) whose clean schema check a policy
store snapshot keeps, per action and principal and resource type; the cache is emptied
when it reaches this many (a bound on memory, never on what is decided)."""


class Diagnostics(Record):
    """Why a decision came out as it did: the policies that determined it and the
    policies that errored."""

    __slots__ = ("errors", "reason")
    reason: list[str]
    errors: list[dict[str, str]]

    def __init__(
        self, reason: list[str] | None = None, errors: list[dict[str, str]] | None = None
    ) -> None:
        _set(self, "reason", [] if reason is None else reason)
        _set(self, "errors", [] if errors is None else errors)


class Response(Record):
    __slots__ = ("decision", "diagnostics")
    decision: str  # "allow" | "deny"
    diagnostics: Diagnostics

    def __init__(self, decision: str, diagnostics: Diagnostics) -> None:
        _set(self, "decision", decision)
        _set(self, "diagnostics", diagnostics)


class AuthorizeResult(Record):
    """The answer to one request (the shape of ``spec/decisions.md``).

    ``request_id`` is a UUIDv7 drawn when the request was decided (its order among all ids
    of the process is the decision's); when nothing logs the decision, its text is written
    on first read (``_request_id`` holds the id's bits until then, see
    ``logs.UUIDv7Generator.reserve``): a caller that never reads it does not pay for it.
    """

    __slots__ = ("_request_id", "decision", "dropped_tokens", "response")
    _computed = ("request_id",)
    _request_id: str | int
    decision: bool
    request_id: str
    response: Response
    dropped_tokens: list[DroppedToken] | None

    def __init__(
        self,
        decision: bool,
        request_id: str,
        response: Response,
        dropped_tokens: list[DroppedToken] | None = None,
    ) -> None:
        _set(self, "decision", decision)
        _set(self, "_request_id", request_id)
        _set(self, "response", response)
        _set(self, "dropped_tokens", dropped_tokens)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decision": self.decision,
            "request_id": self.request_id,
            "response": {
                "decision": self.response.decision,
                "diagnostics": {
                    "reason": list(self.response.diagnostics.reason),
                    "errors": [dict(e) for e in self.response.diagnostics.errors],
                },
            },
        }
        if self.dropped_tokens is not None:
            out["dropped_tokens"] = [d.to_dict() for d in self.dropped_tokens]
        return out


def _read_request_id(result: AuthorizeResult) -> str:
    """``AuthorizeResult.request_id``: the id's text, written (once) on first read."""
    rid = result._request_id
    if type(rid) is str:
        return rid
    text = uuid7_text(rid)  # type: ignore[arg-type]
    _set(result, "_request_id", text)  # two threads reading at once write the same text
    return text


setattr(AuthorizeResult, "request_id", property(_read_request_id))  # noqa: B010 (mypy)

_new = object.__new__


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = getattr(cls, name).__set__  # the slot's descriptor
    return setter


_set_reason = _slot_setter(Diagnostics, "reason")
_set_errors = _slot_setter(Diagnostics, "errors")
_set_verdict = _slot_setter(Response, "decision")
_set_diagnostics = _slot_setter(Response, "diagnostics")
_set_allow = _slot_setter(AuthorizeResult, "decision")
_set_request_id = _slot_setter(AuthorizeResult, "_request_id")
_set_response = _slot_setter(AuthorizeResult, "response")
_set_dropped = _slot_setter(AuthorizeResult, "dropped_tokens")
_set_principal = _slot_setter(Request, "principal")
_set_action = _slot_setter(Request, "action")
_set_resource = _slot_setter(Request, "resource")
_set_context = _slot_setter(Request, "context")


def _request(
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


def _new_result(
    allow: bool,
    request_id: str | int,
    reasons: list[str],
    errors: list[dict[str, str]],
    dropped: list[DroppedToken] | None,
) -> AuthorizeResult:
    """``AuthorizeResult(allow, request_id, Response(..., Diagnostics(reasons, errors)),
    dropped)`` with the slots filled directly: the frozen classes' ``__init__`` costs about
    a microsecond more per decision (equal objects; a test compares them). An ``int``
    ``request_id`` is an id reserved by ``logs.reserve_uuid7``, written as text when read."""
    diag = _new(Diagnostics)
    _set_reason(diag, reasons)
    _set_errors(diag, errors)
    resp = _new(Response)
    _set_verdict(resp, "allow" if allow else "deny")
    _set_diagnostics(resp, diag)
    out = _new(AuthorizeResult)
    _set_allow(out, allow)
    _set_request_id(out, request_id)
    _set_response(out, resp)
    _set_dropped(out, dropped)
    return out


class BatchItemError(Record):
    """A batch item that could not be decided (its request was malformed or did not fit
    the schema): the ``error`` the single call would have raised, in the item's slot.

    ``decision`` is ``False``, so code that reads only ``result.decision`` denies.
    """

    __slots__ = ("decision", "error", "index")
    index: int
    error: PolangError
    decision: bool

    def __init__(self, index: int, error: PolangError, decision: bool = False) -> None:
        _set(self, "index", index)
        _set(self, "error", error)
        _set(self, "decision", decision)

    @property
    def kind(self) -> str:
        """The error's class name (``RequestError``, ``ValidationError``, ...)."""
        return type(self.error).__name__

    @property
    def message(self) -> str:
        """``requests[<index>]: <the error's message>``."""
        return f"requests[{self.index}]: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": False,
            "error": {"index": self.index, "kind": self.kind, "message": str(self.error)},
        }


BatchResult = AuthorizeResult | BatchItemError
"""One slot of a batch's answer."""

_UNSIGNED_KEYS = frozenset({"action", "resource", "context", "principal"})
_MULTI_KEYS = frozenset({"action", "resource", "context", "tokens"})


# ---------------------------------------------------------------- the snapshot


def token_settings(config: Config, ssl_context: ssl.SSLContext | None = None) -> TokenSettings:
    """The token layer's view of the configuration."""
    from polang.tokens.settings import TokenSettings

    return TokenSettings(
        ssl_context=ssl_context,
        sig_validation=config.jwt_sig_validation,
        status_validation=config.jwt_status_validation,
        algorithms=tuple(config.jwt_signature_algorithms_supported),
        clock_skew=int(config.jwt_clock_skew),
        local_jwks_path=config.local_jwks,
        jwks_refresh_interval=(
            None if config.jwks_refresh_interval is None else int(config.jwks_refresh_interval)
        ),
        jwks_min_refresh_interval=int(config.jwks_min_refresh_interval),
        status_list_refresh_max=int(config.jwt_status_list_refresh_interval_max),
        token_cache_capacity=config.token_cache_capacity,
        token_cache_max_ttl=int(config.token_cache_max_ttl),
        http_timeout=config.http_request_timeout,
        http_max_retries=config.http_max_retries,
        http_max_response_size=config.http_max_response_size_bytes,
        decision_log_jwt_id=config.decision_log_default_jwt_id,
        token_max_size=config.token_max_size,
    )


class _Snapshot(Record):
    __slots__ = (
        "action_token_problems",
        "authorizer",
        "clean_checks",
        "clean_contexts",
        "facts",
        "lock",
        "make_tokens",
        "multi_issuer_problems",
        "processor",
        "store",
        "tokens_required",
    )
    _frozen: ClassVar[bool] = False
    store: PolicyStore
    authorizer: Authorizer
    facts: EntityFacts
    make_tokens: Callable[[], TokenProcessor]
    """Builds the token processor: at once for a store with trusted issuers (their
    entities are facts), else on the first multi-issuer request (start-up time)."""
    multi_issuer_problems: list[str]
    """What the schema lacks for any multi-issuer request (issuers, token types)."""
    action_token_problems: dict[EntityUID, list[str]]
    """Per action: what its context lacks to carry ``context.tokens`` (checked only for
    the actions multi-issuer requests use)."""
    tokens_required: frozenset[EntityUID]
    """Actions whose context declares ``tokens`` required (not ``tokens?``)."""
    processor: TokenProcessor | None
    lock: threading.Lock
    clean_checks: dict[tuple[EntityUID, str | None, str], bool]
    """(action, principal type, resource type) of requests whose schema check found nothing
    with a context the parse already conformed (plain types only: the check's answer is the
    same for every uid of them). Bounded by the schema's actions and types."""
    clean_contexts: dict[tuple[EntityUID, str | None, str, RecordValue], bool]
    """The same for a context given as a ``RecordValue`` (or none), keyed by its value
    (equal values check alike): such a context is not conformed by a parse. Emptied when
    it reaches ``CLEAN_CONTEXTS_MAX`` entries."""

    def __init__(
        self,
        store: PolicyStore,
        authorizer: Authorizer,
        facts: EntityFacts,
        make_tokens: Callable[[], TokenProcessor],
        multi_issuer_problems: list[str],
        action_token_problems: dict[EntityUID, list[str]] | None = None,
        tokens_required: frozenset[EntityUID] = frozenset(),
        processor: TokenProcessor | None = None,
        lock: threading.Lock | None = None,
        clean_checks: dict[tuple[EntityUID, str | None, str], bool] | None = None,
        clean_contexts: dict[tuple[EntityUID, str | None, str, RecordValue], bool] | None = None,
    ) -> None:
        self.store = store
        self.authorizer = authorizer
        self.facts = facts
        self.make_tokens = make_tokens
        self.multi_issuer_problems = multi_issuer_problems
        self.action_token_problems = {} if action_token_problems is None else action_token_problems
        self.tokens_required = tokens_required
        self.processor = processor
        self.lock = threading.Lock() if lock is None else lock
        self.clean_checks = {} if clean_checks is None else clean_checks
        self.clean_contexts = {} if clean_contexts is None else clean_contexts

    @property
    def tokens(self) -> TokenProcessor:
        p = self.processor
        if p is None:
            with self.lock:
                p = self.processor
                if p is None:
                    p = self.processor = self.make_tokens()
        return p

    def close_tokens(self) -> None:
        if self.processor is not None:
            self.processor.close()


def _multi_issuer_checks(
    store: PolicyStore,
) -> tuple[list[str], dict[EntityUID, list[str]], frozenset[EntityUID]]:
    """The schema's fit for multi-issuer requests: per token type and the issuers that
    produce it (trusted ``token_metadata`` entries), and per action."""
    from polang.language.validate import check_multi_issuer_schema, tokens_context_problems

    issuers = list(store.trusted_issuers.values())
    users: dict[str, list[str]] = {}
    for i in issuers:
        for tm in i.token_metadata.values():
            if tm.trusted:
                users.setdefault(tm.entity_type_name, []).append(i.name)
    schema = store.schema
    problems = check_multi_issuer_schema(schema, [i.name for i in issuers], users, actions=())
    per_action: dict[EntityUID, list[str]] = {}
    required: set[EntityUID] = set()
    for uid, ad in schema.actions.items():
        if not ad.applies_to:
            continue
        found = tokens_context_problems(uid, ad)
        if found:
            per_action[uid] = found
        declared = ad.context.attributes.get("tokens")
        if declared is not None and declared.required:
            required.add(uid)
    return problems, per_action, frozenset(required)


def _build_snapshot(
    store: PolicyStore,
    config: Config,
    ssl_context: ssl.SSLContext | None = None,
    logger: Logger | None = None,
) -> _Snapshot:
    """Everything derived from a store, checked in full before it is used."""
    policies = store.all_policies()
    if config.strict_schema_validation:
        from polang.language.validate import check_policies

        check_policies({**policies, **store.templates}, store.schema)
    authorizer = Authorizer(policies, backend=config.datalog_backend, background=True)
    issuers = list(store.trusted_issuers.values())  # checked by the loader, in token terms
    log = None if logger is None or not logger.enabled else _system_log(logger, store.id)

    def make_tokens() -> TokenProcessor:
        from polang.tokens.processor import TokenProcessor

        settings = token_settings(config, ssl_context)
        return TokenProcessor(issuers, settings, store.schema, log=log)

    entities: list[Entity] = list(store.schema.action_entities())
    if not issuers:
        entities.extend(store.default_entities)
        facts = EntityFacts(entities)
        return _Snapshot(store, authorizer, facts, make_tokens, [])
    processor = make_tokens()
    entities.extend(processor.trusted_issuer_entities())
    entities.extend(store.default_entities)  # store entities win over generated ones
    facts = EntityFacts(entities)
    problems, per_action, required = _multi_issuer_checks(store)
    return _Snapshot(
        store, authorizer, facts, make_tokens, problems, per_action, required, processor
    )


def _system_log(logger: Logger, store_id: str) -> Callable[[str, str], object]:
    """The token layer's way into the system log (tagged with the store it serves)."""

    def log(level: str, message: str) -> object:
        return logger.system(level, message, policystore_id=store_id)

    return log


# ---------------------------------------------------------------- the engine


class Engine:
    """An authorization engine over one policy store. Thread-safe.

    ``config`` is a :class:`Config`, a mapping of ``ENGINE_*`` properties, or ``None``
    (properties from the environment). ``store`` bypasses loading (tests, embedders).
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None = None,
        *,
        store: PolicyStore | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context`` replaces the default HTTPS trust (system store plus
        ``SSL_CERT_FILE``) for issuer discovery, JWKS and status lists."""
        self._ssl_context = ssl_context
        if config is None:
            config = Config.from_env()
        elif not isinstance(config, Config):
            config = Config.from_dict(config)
        self.config = config
        self.logger = Logger(
            LogSettings(
                log_type=config.log_type,
                level=config.log_level,
                ttl=config.log_ttl,
                max_items=config.log_max_items,
                application_id=config.application_name,
                decision_log_default_jwt_id=config.decision_log_default_jwt_id,
            )
        )
        self._source: PolicyStoreSource | None = None
        if store is None:
            self._source = config.policy_store_source()
            store = self._source.load(config, ssl_context=ssl_context)
        started = time.perf_counter()
        self._snap = _build_snapshot(store, config, ssl_context, self.logger)
        self.logger.system(
            "INFO",
            f"policy store {store.id!r} loaded: {len(store.all_policies())} policies, "
            f"{len(store.default_entities)} default entities, "
            f"{len(store.trusted_issuers)} trusted issuers",
            policystore_id=store.id,
            load_time_micro_sec=int((time.perf_counter() - started) * 1e6),
        )
        self._log_store_warnings(store)
        self._refresher: Any = None
        self._lock = threading.Lock()
        self._last_metrics = time.monotonic()
        if (
            self._source is not None
            and self._source.kind in ("archive_url", "legacy_url")
            and config.policy_store_refresh_interval > 0
        ):
            from polang.store.refresh import StoreRefresher

            self._refresher = StoreRefresher(
                self._source,
                config,
                self._on_new_store,
                self._on_refresh_error,
                current=store,
                ssl_context=ssl_context,
            )
            self._refresher.start()
        # last: the policies' code is generated on a thread from here on (decisions before
        # it is done are the same, made with the backend's closures)
        self._snap.authorizer.generate_in_background()

    # -- construction -----------------------------------------------------------------

    @classmethod
    def from_archive_bytes(cls, config: Config | Mapping[str, Any] | None, data: bytes) -> Engine:
        """An engine from ``.parc`` bytes the caller fetched itself (custom auth, WASM)."""
        from polang.store.source import load_policy_store_archive_bytes

        cfg = config if isinstance(config, Config) else Config.from_dict(config or {})
        return cls(cfg, store=load_policy_store_archive_bytes(data, cfg))

    # -- store lifecycle ----------------------------------------------------------------

    @property
    def store(self) -> PolicyStore:
        return self._snap.store

    @property
    def schema(self) -> Schema:
        return self._snap.store.schema

    @property
    def authorizer(self) -> Authorizer:
        return self._snap.authorizer

    def _on_new_store(self, store: PolicyStore) -> None:
        snap = _build_snapshot(store, self.config, self._ssl_context, self.logger)  # raises
        snap.authorizer.generate_in_background()
        with self._lock:
            old = self._snap
            self._snap = snap
        old.close_tokens()
        self.logger.system(
            "INFO", f"policy store refreshed to version {store.version}", policystore_id=store.id
        )
        self._log_store_warnings(store)

    def _log_store_warnings(self, store: PolicyStore) -> None:
        """What the store loader accepted but flags (unknown fields, SHA-1 manifests)."""
        for warning in store.warnings:
            self.logger.system("WARN", f"policy store: {warning}", policystore_id=store.id)

    def _on_refresh_error(self, error: BaseException) -> None:
        self.logger.system(
            "ERROR",
            f"policy store refresh failed; still serving version {self.store.version}: {error}",
            policystore_id=self.store.id,
        )

    def close(self) -> None:
        """Stop background refresh, write pending metrics and close HTTP clients."""
        if self._refresher is not None:
            self._refresher.stop()
        if self.logger.enabled:
            self.flush_metrics()
        self._snap.close_tokens()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- request parts --------------------------------------------------------------------

    def _action(self, action: str | EntityUID) -> EntityUID:
        if type(action) is str and len(action) <= 256:
            return _parse_action(action)
        if isinstance(action, EntityUID):
            return action
        if not isinstance(action, str):
            raise RequestError(
                "action: expected a string like 'Ns::Action::\"view\"', "
                f"got {type(action).__name__}"
            )
        if len(action) > 256:  # not cached: the cache holds only short texts
            return _parse_action.__wrapped__(action)
        return _parse_action(action)

    def _part(self, snap: _Snapshot, value: Any, what: str) -> tuple[EntityUID, list[Entity]]:
        """A request's principal or resource: its uid, and the entity to lay over the store.

        A reference (``'T::"id"'``, ``{"type", "id"}``, ``{"__entity": ...}``, an
        ``EntityUID``) names an entity the store holds (a default entity, an action, a
        ``TrustedIssuer``), used as stored; one the store does not hold is an error.
        """
        uid, ent = entity_or_reference(value, what, snap.store.schema)
        if ent is not None:
            return uid, [ent]
        if snap.facts.get(uid) is None:
            raise RequestError(
                f"{what}: {uid} is a reference, but the store has no entity {uid}; give the "
                'entity in full ({"uid": {"type", "id"}, "attrs": {...}, "parents": [...]}) '
                "or add it to the store's default entities"
            )
        return uid, []

    def _context(
        self, context: Mapping[str, Any] | RecordValue | None, action: EntityUID, schema: Schema
    ) -> RecordValue:
        if type(context) is dict:
            data = context
        elif context is None:
            return RecordValue()
        elif isinstance(context, RecordValue):
            return context
        elif isinstance(context, Mapping):
            data = dict(context)
        else:
            raise RequestError(f"context: expected an object, got {type(context).__name__}")
        try:
            return parse_context(data, schema, action, path="$.context")
        except EntityError as e:
            raise RequestError(f"context: {e}") from None

    def _check_request(
        self,
        principal: EntityUID | None,
        action: EntityUID,
        resource: EntityUID,
        context: RecordValue | None,
        schema: Schema,
    ) -> None:
        """With strict validation on, a request the schema cannot have is an error, not a
        silent deny: an undeclared action or a principal/resource type it does not apply to
        is almost always a typo in the caller."""
        if not self.config.strict_schema_validation:
            return
        findings = validate_request(principal, action, resource, context, schema)
        if findings:
            raise RequestError(
                "the request does not match the schema: " + "; ".join(str(f) for f in findings)
            )

    # -- decisions ------------------------------------------------------------------------

    def _unsigned_request(
        self,
        snap: _Snapshot,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None,
        principal: EntityInput | None,
    ) -> tuple[Request, EntityFacts]:
        schema = snap.store.schema
        act = self._action(action)
        # entities and contexts as plain dicts take the generated converters; anything
        # else (and every error) goes through the full readers
        res = (
            fast_entity(resource, schema)
            if type(resource) is dict and "uid" in resource
            else fast_request_entity(resource, schema)
        )
        if res is not None:
            ruid = res.uid
            request_entities = [res]
        else:
            ruid, request_entities = self._part(snap, resource, "resource")
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
                puid, pents = self._part(snap, principal, "principal")
                request_entities.extend(pents)
        ctx = fast_context(context, schema, act) if type(context) is dict else None
        if ctx is None:
            ctx = self._context(context, act, schema)
        # a context parsed from JSON by the action's type is checked already (when its type
        # leaves nothing to validation); None and a caller's RecordValue are not
        parsed = context is not None and not isinstance(context, RecordValue)
        if not (
            parsed and (act, None if puid is None else puid[0], ruid[0]) in snap.clean_checks
        ):  # (the clean check kept per snapshot, looked up inline: once per request)
            self._check_parsed(snap, puid, act, ruid, ctx, parsed)
        return _request(puid, act, ruid, ctx), snap.facts.with_entities(request_entities)

    def _check_parsed(
        self,
        snap: _Snapshot,
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
        key = (act, None if puid is None else puid[0], ruid[0])
        if not self.config.strict_schema_validation:
            return
        schema = snap.store.schema
        if not parsed:
            self._check_context(snap, puid, act, ruid, ctx)
            return
        if not parsed_context_is_valid(schema, act):
            self._check_request(puid, act, ruid, ctx, schema)
            return
        self._check_request(puid, act, ruid, None, schema)  # raises on a finding
        if (puid is None or _plain_type(schema, puid[0])) and _plain_type(schema, ruid[0]):
            snap.clean_checks[key] = True

    def _check_context(
        self,
        snap: _Snapshot,
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
            self._check_request(puid, act, ruid, ctx, schema)
            return
        self._check_request(puid, act, ruid, ctx, schema)  # raises on a finding
        if (ptype is None or _plain_type(schema, ptype)) and _plain_type(schema, ruid[0]):
            if len(clean) >= CLEAN_CONTEXTS_MAX:
                clean.clear()  # bounded: a service with many distinct contexts starts over
            clean[key] = True

    def _token_request(
        self,
        snap: _Snapshot,
        tokens: Sequence[TokenInput | Mapping[str, Any]],
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None,
    ) -> tuple[Request, EntityFacts, ProcessedTokens]:
        schema = snap.store.schema
        _check_token_list(tokens)
        act = self._action(action)
        self._check_multi_issuer_schema(snap, act)
        _check_no_tokens_key(context)
        ruid, res = self._part(snap, resource, "resource")
        processed = snap.tokens.process(tokens)
        processed.require_any()
        ctx = self._token_context(snap, context, act)
        self._check_request(None, act, ruid, ctx, schema)
        fields = dict(ctx.fields)
        fields["tokens"] = processed.context_tokens
        request = Request(None, act, ruid, RecordValue(fields))
        return request, snap.facts.with_entities([*processed.entities, *res]), processed

    @staticmethod
    def _check_multi_issuer_schema(snap: _Snapshot, act: EntityUID) -> None:
        problems = snap.multi_issuer_problems
        for_action = snap.action_token_problems.get(act)
        if problems or for_action:
            found = [*problems, *(for_action or ())]
            raise ValidationError(
                "the schema lacks the multi-issuer token structure: " + "; ".join(found), found
            )

    def _token_context(
        self, snap: _Snapshot, context: Mapping[str, Any] | RecordValue | None, act: EntityUID
    ) -> RecordValue:
        """The caller's part of a multi-issuer context (``tokens`` is the engine's)."""
        if act in snap.tokens_required:
            # `tokens: {...}` declared required: parse the caller's part with a stand-in
            # (the engine fills the field), so a required field is not reported missing
            return self._context(_with_tokens_stand_in(context), act, snap.store.schema)
        return self._context(context, act, snap.store.schema)

    def authorize_unsigned(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        principal: EntityInput | None = None,
    ) -> AuthorizeResult:
        """Decide with caller-supplied entities; the principal (any type) is optional.

        ``resource`` and ``principal``: an entity given in full, or a reference to one the
        store holds (every form of :mod:`polang.refs`)."""
        started = time.perf_counter()
        snap = self._snap
        request, facts = self._unsigned_request(snap, action, resource, context, principal)
        allow, reasons, errors = snap.authorizer.verdict(request, facts)
        if not self.logger.enabled:  # nothing to log: the answer only
            return _new_result(allow, reserve_uuid7(), reasons, errors, None)
        return self._result(
            snap,
            started,
            allow,
            reasons,
            errors,
            request.action,
            request.resource,
            request.principal,
        )

    def authorize_multi_issuer(
        self,
        tokens: Sequence[TokenInput | Mapping[str, Any]],
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
    ) -> AuthorizeResult:
        """Decide with entities built from JWTs of the trusted issuers (no principal)."""
        started = time.perf_counter()
        snap = self._snap
        request, facts, processed = self._token_request(snap, tokens, action, resource, context)
        allow, reasons, errors = snap.authorizer.verdict(request, facts)
        return self._result(
            snap,
            started,
            allow,
            reasons,
            errors,
            request.action,
            request.resource,
            None,
            dropped=processed.dropped,
            log_ids=processed.log_ids,
        )

    # -- explanations and queries -----------------------------------------------------------

    def explain(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        principal: EntityInput | None = None,
        *,
        tokens: Sequence[TokenInput | Mapping[str, Any]] | None = None,
    ) -> Explanation:
        """The decision with its derivation: why each policy applied, or did not.

        Same inputs as ``authorize_unsigned``; with ``tokens`` the request is built as
        ``authorize_multi_issuer`` builds it (then ``principal`` must be ``None``).
        """
        from polang.datalog.explain import explain

        snap = self._snap
        if tokens is not None:
            if principal is not None:
                raise RequestError("explain: give a principal or tokens, not both")
            request, facts, _ = self._token_request(snap, tokens, action, resource, context)
        else:
            request, facts = self._unsigned_request(snap, action, resource, context, principal)
        return explain(
            snap.authorizer,
            request.principal,
            request.action,
            request.resource,
            request.context,
            facts,
            schema=snap.store.schema,
        )

    def diff(
        self,
        other: Engine | None = None,
        *,
        entities: Iterable[Entity | Mapping[str, Any]] | None = None,
        old_entities: Iterable[Entity | Mapping[str, Any]] | None = None,
        context: RecordValue | Mapping[str, Any] | None = None,
        engine: str = "in-process",
        output: str | Path | None = None,
        format: str = "parquet",
        **options: Any,
    ) -> DiffResult:
        """The exact change in the access matrix from this engine to ``other``
        (another store) and/or to ``entities`` laid over it (new data): docs/diff.md.
        With ``other``, ``entities`` are laid over both stores unless ``old_entities``
        are given for this one (``polang.authoring.diff.sides``).

        ``context=None`` leaves the context unknown (entries that depend on it are
        reported as conditional); give one, even ``{}``, for exact answers.
        ``engine="duckdb"`` or ``"spark"`` computes it in SQL, at scale; ``output``
        (with a SQL engine) streams the rows to a ``format`` parquet, csv or jsonl file.
        """
        from polang.authoring.diff import diff

        return diff(
            self,
            other,
            entities=entities,
            old_entities=old_entities,
            context=context,
            engine=engine,
            output=output,
            format=format,
            **options,
        )

    def _subject(
        self,
        snap: _Snapshot,
        facts: EntityFacts,
        value: EntityInput,
        what: str,
    ) -> tuple[EntityUID, EntityFacts]:
        """A query's fixed principal or resource: a reference (to an entity of ``facts``,
        or to one they lack, whose data is then unknown), or an entity given in full (laid
        over ``facts`` for this query)."""
        uid, ent = entity_or_reference(value, what, snap.store.schema)
        return uid, (facts if ent is None else facts.with_entities([ent]))

    def _extra_entities(
        self, snap: _Snapshot, entities: Iterable[Mapping[str, Any] | Entity]
    ) -> EntityFacts:
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

    def _query_context(
        self, context: Mapping[str, Any] | RecordValue | None, action: EntityUID | None
    ) -> RecordValue | None:
        """``None`` stays "unknown". With one action the context is parsed against its
        context type; across actions it is parsed as plain entity JSON (escapes and all)."""
        if context is None or isinstance(context, RecordValue):
            return context
        if action is not None:
            return self._context(context, action, self._snap.store.schema)
        if not isinstance(context, Mapping):
            raise RequestError(f"context: expected an object, got {type(context).__name__}")
        try:
            value = parse_value(dict(context), None, path="$.context")
        except EntityError as e:
            raise RequestError(f"context: {e}") from None
        assert isinstance(value, RecordValue)
        return value

    def who_can(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        *,
        entities: Iterable[Mapping[str, Any] | Entity] = (),
        limit: int | None = None,
        cursor: str | None = None,
    ) -> QueryResult:
        """Every principal of the store (plus ``entities``) the policies allow to do
        ``action`` on ``resource``.

        ``context=None`` means the context is unknown: policies that read it are reported
        as conditional, with the condition they depend on.
        """
        from polang.datalog.query import who_can

        snap = self._snap
        act = self._action(action)
        facts = self._extra_entities(snap, entities)
        res, facts = self._subject(snap, facts, resource, "resource")
        return who_can(
            snap.authorizer,
            facts,
            act,
            res,
            self._query_context(context, act),
            schema=snap.store.schema,
            limit=limit,
            cursor=cursor,
        )

    def what_can(
        self,
        principal: EntityInput,
        action: str | EntityUID | None = None,
        context: Mapping[str, Any] | RecordValue | None = None,
        *,
        entities: Iterable[Mapping[str, Any] | Entity] = (),
        limit: int | None = None,
        cursor: str | None = None,
    ) -> QueryResult:
        """Every (action, resource) of the store (plus ``entities``) the policies allow
        ``principal``."""
        from polang.datalog.query import what_can

        snap = self._snap
        act = self._action(action) if action is not None else None
        facts = self._extra_entities(snap, entities)
        prin, facts = self._subject(snap, facts, principal, "principal")
        return what_can(
            snap.authorizer,
            facts,
            prin,
            act,
            self._query_context(context, act),
            schema=snap.store.schema,
            limit=limit,
            cursor=cursor,
        )

    def access_matrix(
        self,
        context: Mapping[str, Any] | RecordValue | None = None,
        *,
        entities: Iterable[Mapping[str, Any] | Entity] = (),
        limit: int | None = None,
        cursor: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> QueryResult:
        """Every allowed (principal, action, resource) over the store's entities plus
        ``entities``."""
        from polang.datalog.query import access_matrix

        snap = self._snap
        facts = self._extra_entities(snap, entities)
        ctx = self._query_context(context, None)
        return access_matrix(
            snap.authorizer,
            facts,
            ctx,
            schema=snap.store.schema,
            limit=limit,
            cursor=cursor,
            progress=progress,
        )

    # -- batches ----------------------------------------------------------------------------

    def authorize_unsigned_batch(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        principal: EntityInput | None = None,
    ) -> list[BatchResult]:
        """Many ``authorize_unsigned`` requests at once: a list view's one principal and
        many resources.

        Each request is a mapping of ``authorize_unsigned``'s arguments (``action``,
        ``resource``, ``context``, ``principal``); a ``principal`` given here is every
        request's (the requests then name none). What requests share is done once: the
        principal's parsing and its place in the hierarchy, each action's candidate
        policies, a context object several requests are given, the schema checks of a
        (principal type, action, resource type). Answers come in request order; a request
        that fails gets a :class:`BatchItemError` (the error its single call raises) in its
        slot while the others are decided. A bad shared ``principal`` raises. Every request
        is decided on the same store snapshot.
        """
        started = time.perf_counter()
        snap = self._snap
        items = _batch_list(requests)
        parts = _BatchParts(self, snap)
        shared: tuple[EntityUID, list[Entity], EntityFacts] | None = None
        if principal is not None:
            puid, pents = self._part(snap, principal, "principal")
            shared = (puid, pents, snap.facts.with_entities(pents))
        out: list[BatchResult] = []
        todo: list[_Decided] = []
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
            request = _request(puid_i, act, ruid, ctx)
            decided = parts.decide(request, facts)
            out.append(_PENDING)
            todo.append((i, request, decided, None))
        return self._finish_batch(snap, started, out, todo)

    def authorize_multi_issuer_batch(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        tokens: Sequence[TokenInput | Mapping[str, Any]] | None = None,
    ) -> list[BatchResult]:
        """Many ``authorize_multi_issuer`` requests at once, typically over one token set.

        Each request is a mapping of ``authorize_multi_issuer``'s arguments (``tokens``,
        ``action``, ``resource``, ``context``); ``tokens`` given here are every request's,
        validated and turned into entities once (a set that leaves no valid token raises
        its ``TokenError`` for the whole batch). Requests that carry their own tokens share
        that work when they carry the same list object. Answers and per-request errors as
        in :meth:`authorize_unsigned_batch`.
        """
        started = time.perf_counter()
        snap = self._snap
        items = _batch_list(requests)
        parts = _BatchParts(self, snap)
        shared: tuple[ProcessedTokens, EntityFacts] | None = None
        if tokens is not None:
            shared = parts.tokens(tokens)
        out: list[BatchResult] = []
        todo: list[_Decided] = []
        keys_ok = _MULTI_KEYS.issuperset
        facts: EntityFacts | None
        checked_action: EntityUID | None = None  # the last action and context checked
        checked_context: Any = _PENDING
        action_of = parts.action
        resource_of = parts.resource
        # the context given, action, resource type and token set of the last request whose
        # schema check holds for every request of those, and its context with the tokens
        last: tuple[Any, EntityUID, str, ProcessedTokens, RecordValue] | None = None
        for i, item in enumerate(items):
            try:
                obj = (
                    item if type(item) is dict and keys_ok(item) else _batch_item(item, _MULTI_KEYS)
                )
                if shared is not None and obj.get("tokens") is not None:
                    raise TokenError(
                        "tokens: given for the whole batch; a request may not carry others"
                    )
                if shared is None:
                    _check_token_list(_required(obj, "tokens"))
                act = action_of(obj["action"] if "action" in obj else _required(obj, "action"))
                if act is not checked_action:
                    self._check_multi_issuer_schema(snap, act)
                    checked_action = act
                context = obj.get("context")
                if context is not checked_context:
                    _check_no_tokens_key(context)
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
            request = _request(None, act, ruid, full)
            decided = parts.decide(request, facts)
            out.append(_PENDING)
            todo.append((i, request, decided, processed))
        return self._finish_batch(snap, started, out, todo)

    def _finish_batch(
        self,
        snap: _Snapshot,
        started: float,
        out: list[BatchResult],
        todo: list[_Decided],
    ) -> list[BatchResult]:
        """Put each decided request's answer in its slot (and its log entry)."""
        elapsed: int | None = None
        if self.logger.enabled and out:  # each request's share of the batch's time
            elapsed = int((time.perf_counter() - started) * 1e6 / len(out))
        if not self.logger.enabled:  # nothing to log: the answers only
            for (i, _, (allow, reasons, errors), processed), reserved in zip(
                todo, reserve_uuid7_many(len(todo)), strict=True
            ):
                dropped = None if processed is None else list(processed.dropped)
                out[i] = _new_result(allow, reserved, reasons, errors, dropped)
            return out
        # the decision log needs the ids' text now
        for (i, request, (allow, reasons, errors), processed), request_id in zip(
            todo, uuid7_many(len(todo)), strict=True
        ):
            out[i] = self._result(
                snap,
                started,
                allow,
                reasons,
                errors,
                request.action,
                request.resource,
                request.principal,
                dropped=None if processed is None else list(processed.dropped),
                log_ids=None if processed is None else processed.log_ids,
                elapsed_us=elapsed,
                request_id=request_id,
            )
        return out

    def _result(
        self,
        snap: _Snapshot,
        started: float,
        allow: bool,
        reasons: list[str],
        errors: list[dict[str, str]],
        action: EntityUID,
        resource: EntityUID,
        principal: EntityUID | None,
        *,
        dropped: list[DroppedToken] | None = None,
        log_ids: list[TokenLogId] | None = None,
        elapsed_us: int | None = None,
        request_id: str | int | None = None,
    ) -> AuthorizeResult:
        """The answer, its decision log entry and metrics. ``request_id``: the batch's id
        for the request (text, or reserved bits when nothing logs it), else one drawn."""
        logged = self.logger.enabled
        if not logged:  # nothing to log: the id is written when read
            rid = reserve_uuid7() if request_id is None else request_id
            return _new_result(allow, rid, reasons, errors, dropped)
        if type(request_id) is not str:
            request_id = uuid7()
        # the verdict's lists are its own (fresh per decision): the result takes them
        result = _new_result(allow, request_id, reasons, errors, dropped)
        if logged:
            elapsed = (
                int((time.perf_counter() - started) * 1e6) if elapsed_us is None else elapsed_us
            )
            metrics = self.logger.metrics
            metrics.increment("authorize_calls")
            metrics.increment("allow" if allow else "deny")
            if errors:
                metrics.increment("policy_errors", len(errors))
            if dropped:
                metrics.increment("dropped_tokens", len(dropped))
            metrics.observe("decision_time_micro_sec", elapsed)
            token_ids = (
                None
                if log_ids is None
                else {f"{t.mapping}#{t.index}": {t.claim: t.value} for t in log_ids}
            )
            self.logger.decision(
                request_id=request_id,
                decision=allow,
                action=str(action),
                resource=str(resource),
                principal=str(principal) if principal is not None else None,
                reason=list(reasons),
                errors=errors,
                tokens=token_ids,
                dropped_tokens=[x.to_dict() for x in dropped or []],
                decision_time_micro_sec=elapsed,
                policystore_id=snap.store.id,
                policystore_version=snap.store.version,
            )
            now = time.monotonic()
            if now - self._last_metrics >= METRICS_INTERVAL:
                self.flush_metrics()
        return result

    def flush_metrics(self) -> dict[str, Any] | None:
        """Write the counters and timings gathered since the last Metric entry.

        Happens by itself every ``METRICS_INTERVAL`` seconds of decisions and on ``close``.
        """
        self._last_metrics = time.monotonic()
        snap = self._snap
        self.logger.metrics.set_gauge("policy_count", len(snap.authorizer.policies))
        self.logger.metrics.set_gauge("default_entity_count", len(snap.store.default_entities))
        return self.logger.flush_metrics(
            policystore_id=snap.store.id, policystore_version=snap.store.version
        )

    # -- logs -----------------------------------------------------------------------------

    def pop_logs(self) -> list[dict[str, Any]]:
        return self.logger.pop_logs()

    def get_log_by_id(self, log_id: str) -> dict[str, Any] | None:
        return self.logger.get_log_by_id(log_id)

    def get_log_ids(self) -> list[str]:
        return self.logger.get_log_ids()

    def get_logs_by_tag(self, tag: str) -> list[dict[str, Any]]:
        return self.logger.get_logs_by_tag(tag)

    def get_logs_by_request_id(self, request_id: str) -> list[dict[str, Any]]:
        return self.logger.get_logs_by_request_id(request_id)


def _check_token_list(tokens: object) -> None:
    if type(tokens) is not list and (
        isinstance(tokens, str | bytes) or not isinstance(tokens, Sequence)
    ):
        raise TokenError("tokens: expected a list of TokenInput(mapping, payload)")


def _check_no_tokens_key(context: object) -> None:
    if (
        type(context) is dict or isinstance(context, Mapping | RecordValue)
    ) and "tokens" in context:
        raise RequestError(
            "context: the key 'tokens' is reserved for validated tokens (context.tokens)"
        )


# ---------------------------------------------------------------- batches


class _Pending:
    """The slot of a batch request prepared but not yet decided."""


_PENDING: Any = _Pending()

_Decided = tuple[int, Request, Verdict, "ProcessedTokens | None"]
"""A batch request decided: its index, request, verdict and token set (multi-issuer)."""


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


class _BatchParts:
    """What the requests of one batch share, each worked out once: principals and token
    sets (by object), contexts (by object and action), clean schema checks (by the
    request's types and context), and the slot its resources are decided in."""

    __slots__ = (
        "_actions",
        "_checked",
        "_contexts",
        "_engine",
        "_plain",
        "_principals",
        "_slot",
        "_slot_under",
        "_slots",
        "_snap",
        "_tokens",
        "_verdict",
    )

    def __init__(self, engine: Engine, snap: _Snapshot) -> None:
        self._engine = engine
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
                act = self._actions[value] = self._engine._action(value)
            return act
        return self._engine._action(value)

    def principal(self, value: Any) -> tuple[EntityUID | None, list[Entity], EntityFacts]:
        snap = self._snap
        if value is None:
            return None, [], snap.facts
        hit = self._principals.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1], hit[2], hit[3]
        puid, pents = self._engine._part(snap, value, "principal")
        facts = snap.facts.with_entities(pents)
        self._principals[id(value)] = (value, puid, pents, facts)
        return puid, pents, facts

    def resource(self, request: Mapping[str, Any]) -> tuple[EntityUID, list[Entity]]:
        """A request's resource: by the generated converters, else the single call's
        reader (its forms, its errors)."""
        value = request["resource"] if "resource" in request else _required(request, "resource")
        snap = self._snap
        res = fast_request_entity(value, snap.store.schema)
        if res is not None:
            return res.uid, [res]
        return self._engine._part(snap, value, "resource")

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
                _check_token_list(value)
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
        engine, snap = self._engine, self._snap
        if tokens:
            ctx = engine._token_context(snap, value, act)
        else:
            ctx = engine._context(value, act, snap.store.schema)
        self._contexts[key] = (value, ctx)
        return ctx

    def context(self, value: Any, act: EntityUID) -> RecordValue:
        return self._cached_context(value, act, False)

    def token_context(self, value: Any, act: EntityUID) -> RecordValue:
        return self._cached_context(value, act, True)

    def _plain_type(self, name: str | None) -> bool:
        """A type whose uids the schema check treats alike (not enumerated, no action)."""
        if name is None:
            return True
        plain = self._plain.get(name)
        if plain is None:
            schema = self._snap.store.schema
            et = schema.entity_types.get(name)
            plain = et is not None and et.enum is None and not schema.is_action_type(name)
            self._plain[name] = plain
        return plain

    def is_clean(self, ptype: str | None, act: EntityUID, rtype: str, ctx: RecordValue) -> bool:
        """Whether :meth:`check` passes every request of these types, action and context
        (a clean answer it kept, or no check at all)."""
        if not self._engine.config.strict_schema_validation:
            return True
        return self._checked.get((ptype, act, rtype, id(ctx))) is ctx

    def check(
        self, puid: EntityUID | None, act: EntityUID, ruid: EntityUID, ctx: RecordValue
    ) -> None:
        """The single call's schema check; a clean answer is reused for the same types."""
        engine = self._engine
        if not engine.config.strict_schema_validation:
            return
        ptype = None if puid is None else puid.type
        key = (ptype, act, ruid.type, id(ctx))
        if self._checked.get(key) is ctx:
            return
        engine._check_request(puid, act, ruid, ctx, self._snap.store.schema)
        if self._plain_type(ptype) and self._plain_type(ruid.type):
            self._checked[key] = ctx  # holds ctx: its id stays its own for the batch


def _with_tokens_stand_in(
    context: Mapping[str, Any] | RecordValue | None,
) -> Mapping[str, Any] | RecordValue:
    """The caller's context plus a ``tokens`` record that fits any ``TokensContext`` (its
    one required field); the engine replaces it with the request's tokens."""
    if context is None:
        return {"tokens": {"total_token_count": 0}}
    if isinstance(context, RecordValue):
        return RecordValue({**context.fields, "tokens": RecordValue({"total_token_count": 0})})
    if not isinstance(context, Mapping):
        return context  # _context reports it
    return {**context, "tokens": {"total_token_count": 0}}


def _plain_type(schema: Schema, name: str) -> bool:
    """A type whose uids the schema check treats alike (declared, not enumerated, not an
    action type)."""
    et = schema.entity_types.get(name)
    return et is not None and et.enum is None and not schema.is_action_type(name)


@lru_cache(maxsize=1024)
def _parse_action(text: str) -> EntityUID:
    """Actions repeat across requests: parse each distinct text once."""
    try:
        return parse_entity_uid(text)
    except PolangError as e:
        shown = repr(text if len(text) <= 80 else text[:80] + "...")
        raise RequestError(f"action {shown} is not an entity reference: {e}") from None


def init_from_archive_bytes(config: Config | Mapping[str, Any] | None, data: bytes) -> Engine:
    """The spec's name for :meth:`Engine.from_archive_bytes`."""
    return Engine.from_archive_bytes(config, data)


__all__ = [
    "AuthorizeResult",
    "BatchItemError",
    "BatchResult",
    "Diagnostics",
    "Engine",
    "Response",
    "init_from_archive_bytes",
]


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
