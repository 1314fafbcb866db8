"""``Engine``: the public face, wiring the parts and owning no decision logic of its own.

A call reads its request with :mod:`.requests` (or :mod:`.batch`), decides it with the
current :class:`~.snapshot.Snapshot`'s authorizer, and answers with :mod:`.results`;
the facade keeps the store's lifecycle (load, background refresh, close) and writes the
decision logs and metrics through :mod:`polang.logs`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polang.config import Config
from polang.datalog.authorizer import Authorizer
from polang.errors import RequestError
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue
from polang.logs import Logger, LogSettings, reserve_uuid7, reserve_uuid7_many, uuid7, uuid7_many
from polang.store.source import PolicyStoreSource

from .batch import Decided, multi_issuer_batch, unsigned_batch
from .requests import (
    EntityInput,
    extra_entities,
    query_context,
    query_subject,
    read_action,
    token_request,
    unsigned_request,
)
from .results import AuthorizeResult, BatchResult, new_result
from .snapshot import Snapshot, build_snapshot

if TYPE_CHECKING:  # imported on first use (start-up time): see tests/test_imports.py
    import ssl
    from pathlib import Path

    from polang.analysis.diff import DiffResult
    from polang.analysis.explain import Explanation
    from polang.analysis.query import QueryResult
    from polang.store.model import PolicyStore
    from polang.tokens.model import DroppedToken, TokenInput, TokenLogId

__all__ = ["METRICS_INTERVAL", "Engine", "init_from_archive_bytes"]

METRICS_INTERVAL = 60.0
"""Seconds between two Metric log entries written while deciding."""


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
            self._source = PolicyStoreSource.from_config(config)
            store = self._source.load(config, ssl_context=ssl_context)
        started = time.perf_counter()
        self._snap: Snapshot = build_snapshot(store, config, ssl_context, self.logger)
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
        snap = build_snapshot(store, self.config, self._ssl_context, self.logger)  # raises
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

    # -- decisions ------------------------------------------------------------------------

    def authorize_unsigned(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        principal: EntityInput | None = None,
    ) -> AuthorizeResult:
        """Decide with caller-supplied entities; the principal (any type) is optional.

        ``resource`` and ``principal``: an entity given in full, or a reference to one the
        store holds (every form of :mod:`polang.engine.requests`)."""
        started = time.perf_counter()
        snap = self._snap
        request, facts = unsigned_request(snap, action, resource, context, principal)
        allow, reasons, errors = snap.authorizer.verdict(request, facts)
        if not self.logger.enabled:  # nothing to log: the answer only
            return new_result(allow, reserve_uuid7(), reasons, errors, None)
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
        request, facts, processed = token_request(snap, tokens, action, resource, context)
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
        from polang.analysis.explain import explain

        snap = self._snap
        if tokens is not None:
            if principal is not None:
                raise RequestError("explain: give a principal or tokens, not both")
            request, facts, _ = token_request(snap, tokens, action, resource, context)
        else:
            request, facts = unsigned_request(snap, action, resource, context, principal)
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
        from .diff import diff

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
        from polang.analysis.query import who_can

        snap = self._snap
        act = read_action(action)
        facts = extra_entities(snap, entities)
        res, facts = query_subject(snap, facts, resource, "resource")
        return who_can(
            snap.authorizer,
            facts,
            act,
            res,
            query_context(snap, context, act),
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
        from polang.analysis.query import what_can

        snap = self._snap
        act = read_action(action) if action is not None else None
        facts = extra_entities(snap, entities)
        prin, facts = query_subject(snap, facts, principal, "principal")
        return what_can(
            snap.authorizer,
            facts,
            prin,
            act,
            query_context(snap, context, act),
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
        from polang.analysis.query import access_matrix

        snap = self._snap
        facts = extra_entities(snap, entities)
        ctx = query_context(snap, context, None)
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
        out, todo = unsigned_batch(snap, requests, principal)
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
        out, todo = multi_issuer_batch(snap, requests, tokens)
        return self._finish_batch(snap, started, out, todo)

    def _finish_batch(
        self,
        snap: Snapshot,
        started: float,
        out: list[BatchResult],
        todo: list[Decided],
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
                out[i] = new_result(allow, reserved, reasons, errors, dropped)
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
        snap: Snapshot,
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
            return new_result(allow, rid, reasons, errors, dropped)
        if type(request_id) is not str:
            request_id = uuid7()
        # the verdict's lists are its own (fresh per decision): the result takes them
        result = new_result(allow, request_id, reasons, errors, dropped)
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


def init_from_archive_bytes(config: Config | Mapping[str, Any] | None, data: bytes) -> Engine:
    """The spec's name for :meth:`Engine.from_archive_bytes`."""
    return Engine.from_archive_bytes(config, data)
