"""The loaded store: everything a request needs, derived from one policy store.

A :class:`Snapshot` holds the store, its compiled policies (the ``Authorizer``), its
entities as facts, the token processor and the request checks' caches. A store refresh
builds a new snapshot in full (checked before it is used) and the engine swaps it in with
one assignment, so a request always sees one consistent store and a bad refresh never
replaces a good one.

:func:`store_authorizer` and :func:`store_facts` are the one way a store becomes a policy
set and decision facts: the engine's snapshot and the command line's ``--store`` use them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

from polang._record import Record
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity
from polang.language.values import EntityUID, RecordValue

if TYPE_CHECKING:
    import ssl

    from polang.config import Config
    from polang.engine.data import ContextData
    from polang.http import FetchObserver
    from polang.logs import Logger
    from polang.store.model import PolicyStore
    from polang.tokens.processor import TokenProcessor
    from polang.tokens.settings import TokenSettings

__all__ = ["Snapshot", "build_snapshot", "store_authorizer", "store_facts", "token_settings"]


def token_settings(
    config: Config,
    ssl_context: ssl.SSLContext | None = None,
    fetch_observer: FetchObserver | None = None,
) -> TokenSettings:
    """The token layer's view of the configuration (``fetch_observer``: the engine's
    telemetry, told of each fetch)."""
    from polang.tokens.settings import TokenSettings

    return TokenSettings(
        ssl_context=ssl_context,
        fetch_observer=fetch_observer,
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


class Snapshot(Record):
    __slots__ = (
        "action_token_problems",
        "authorizer",
        "clean_checks",
        "clean_contexts",
        "context_data",
        "facts",
        "lock",
        "make_tokens",
        "multi_issuer_problems",
        "processor",
        "store",
        "strict",
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
    it reaches ``requests.CLEAN_CONTEXTS_MAX`` entries."""
    strict: bool
    """``ENGINE_STRICT_SCHEMA_VALIDATION``: requests are checked against the schema."""
    context_data: ContextData | None
    """The engine's pushed data (``push_data``), which fills ``context.data`` (it outlives
    the snapshot: the engine hands it to each one)."""

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
        strict: bool = True,
        context_data: ContextData | None = None,
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
        self.strict = strict
        self.context_data = context_data

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


def store_authorizer(store: PolicyStore, backend: str, *, background: bool = False) -> Authorizer:
    """The store's static and linked policies, compiled for decisions by ``backend``."""
    return Authorizer(store.all_policies(), backend=backend, background=background)


def store_facts(
    store: PolicyStore, issuer_entities: Iterable[Entity] = (), extra: Iterable[Entity] = ()
) -> EntityFacts:
    """The store's entities as decision facts: the schema's action entities, the trusted
    issuers' entities (the engine's token processor makes them), the store's default
    entities (which win over generated ones), then ``extra`` (the command line's entity
    files), each later one winning."""
    return EntityFacts(
        [*store.schema.action_entities(), *issuer_entities, *store.default_entities, *extra]
    )


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


def build_snapshot(
    store: PolicyStore,
    config: Config,
    ssl_context: ssl.SSLContext | None = None,
    logger: Logger | None = None,
    *,
    fetch_observer: FetchObserver | None = None,
) -> Snapshot:
    """Everything derived from a store, checked in full before it is used
    (``fetch_observer``: told of each fetch the token layer makes)."""
    strict = config.strict_schema_validation
    if strict:
        from polang.language.validate import check_policies

        check_policies({**store.all_policies(), **store.templates}, store.schema)
    authorizer = store_authorizer(store, config.datalog_backend, background=True)
    issuers = list(store.trusted_issuers.values())  # checked by the loader, in token terms
    log = None if logger is None or not logger.enabled else _system_log(logger, store.id)

    def make_tokens() -> TokenProcessor:
        from polang.tokens.processor import TokenProcessor

        settings = token_settings(config, ssl_context, fetch_observer)
        return TokenProcessor(issuers, settings, store.schema, log=log)

    if not issuers:
        facts = store_facts(store)
        return Snapshot(store, authorizer, facts, make_tokens, [], strict=strict)
    processor = make_tokens()
    facts = store_facts(store, processor.trusted_issuer_entities())
    problems, per_action, required = _multi_issuer_checks(store)
    return Snapshot(
        store,
        authorizer,
        facts,
        make_tokens,
        problems,
        per_action,
        required,
        processor,
        strict=strict,
    )


def _system_log(logger: Logger, store_id: str) -> Callable[[str, str], object]:
    """The token layer's way into the system log (tagged with the store it serves)."""

    def log(level: str, message: str) -> object:
        return logger.system(level, message, policystore_id=store_id)

    return log
