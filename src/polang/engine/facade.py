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
from polang.errors import PolangError, PolicyStoreError, RequestError
from polang.language.entities import Entity
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue
from polang.logs import DecisionValues, Logger, LogSettings, reserve_uuid7, reserve_uuid7_many
from polang.store.source import PolicyStoreSource
from polang.telemetry import Telemetry, new_telemetry

from .batch import Decided, multi_issuer_batch, unsigned_batch
from .data import ContextData, DataEntry, DataLimits
from .health import Listeners, StoreEvent, StoreListener, health_report, reason_of
from .requests import (
    EntityInput,
    extra_entities,
    plan_request,
    query_context,
    query_subject,
    read_action,
    token_plan_request,
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
    from polang.analysis.plan import Plan
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
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        """``ssl_context`` replaces the default HTTPS trust (system store plus
        ``SSL_CERT_FILE``) for issuer discovery, JWKS and status lists.
        ``tracer_provider`` / ``meter_provider``: OpenTelemetry providers to report to
        instead of the global ones (docs/observability.md)."""
        self._ssl_context = ssl_context
        if config is None:
            config = Config.from_env()
        elif not isinstance(config, Config):
            config = Config.from_dict(config)
        self.config = config
        self._telemetry: Telemetry | None = new_telemetry(
            config.otel, self._store_age, tracer_provider, meter_provider
        )
        self._fetch_observer = None if self._telemetry is None else self._telemetry.fetched
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
        self._refresher: Any = None
        self._listeners = Listeners(self.logger)
        self._data = ContextData(
            DataLimits(
                config.data_store_max_entries,
                config.data_store_max_entry_size,
                config.data_store_default_ttl,
                config.data_store_max_ttl,
            )
        )
        self._lock_client: Any = None
        if config.lock:
            # only an engine with ENGINE_LOCK loads the Lock client (start-up time)
            from polang.lock import LockClient

            self._lock_client = LockClient(config, self.logger, ssl_context)
        if store is None and self._lock_client is not None and config.store_source_key is None:
            store = self._store_from_lock(config, ssl_context)
        elif store is None:
            self._source = PolicyStoreSource.from_config(config)
            if self._source.is_remote:  # its refresher loads it, keeping its validators
                self._refresher = self._new_refresher(self._source, None)
                store = self._refresher.load_first()
            else:
                store = self._source.load(config, ssl_context=ssl_context)
        started = time.perf_counter()
        self._snap: Snapshot = build_snapshot(
            store, config, ssl_context, self.logger, fetch_observer=self._fetch_observer
        )
        self._snap.context_data = self._data
        self._loaded_at = time.time()
        self.logger.system(
            "INFO",
            f"policy store {store.id!r} loaded: {len(store.all_policies())} policies, "
            f"{len(store.default_entities)} default entities, "
            f"{len(store.trusted_issuers)} trusted issuers",
            policystore_id=store.id,
            load_time_micro_sec=int((time.perf_counter() - started) * 1e6),
        )
        self._log_store_warnings(store)
        self._lock = threading.Lock()
        self._last_metrics = time.monotonic()
        if self._source is not None and self._source.is_remote:
            # a URL store can be refreshed (refresh_store); in the background when
            # ENGINE_POLICY_STORE_REFRESH_INTERVAL > 0 (start() is a no-op at 0)
            if self._refresher is None:  # a Lock's store: loaded by the Lock client
                self._refresher = self._new_refresher(self._source, store)
            self._refresher.start()
        if self._lock_client is not None:
            from polang.lock import LockHooks

            self._lock_client.start(
                LockHooks(self._lock_health, self._push_status_list, self._lock_config_update)
            )
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

    # -- the Lock server ------------------------------------------------------------------

    def _store_from_lock(self, config: Config, ssl_context: ssl.SSLContext | None) -> PolicyStore:
        """Start-up with the store only on the Lock: found and authorized within one
        ENGINE_HTTP_REQUEST_TIMEOUT, the store fetched within another, or a ``LockError``
        / ``PolicyStoreLoadError``."""
        client = self._lock_client
        deadline = time.monotonic() + config.http_request_timeout
        try:
            client.bootstrap(deadline)
            assert config.policy_store_id is not None
            self._source = client.store_source(config.policy_store_id)
            store: PolicyStore = client.load_store(self._source, ssl_context, deadline)
        except BaseException:
            client.close()
            raise
        return store

    def _lock_health(self) -> dict[str, dict[str, Any]]:
        """:meth:`health` as the Lock's health entries carry it: a status per component
        (``running`` or ``degraded``) with the details (docs/lock.md#entries)."""
        report = self.health()
        refresh = report["refresh"]
        store: dict[str, Any] = {
            "status": "running",
            "policystore_id": report["store"]["id"],
            "policystore_version": report["store"]["version"],
            "loaded_at": report["store"]["loaded_at"],
        }
        if refresh is not None and refresh["last_outcome"] == "failed":
            store["status"] = "degraded"
            store["error"] = refresh["last_failure_reason"]
        issuers: dict[str, Any] = {"status": "running", "count": len(report["trusted_issuers"])}
        failing = {
            issuer_id: entry.get("last_failure_reason")
            for issuer_id, entry in report["trusted_issuers"].items()
            if entry.get("failing")
        }
        if failing:
            issuers["status"] = "degraded"
            issuers["errors"] = failing
        return {
            "core": {"status": "running"},
            "policy_store": store,
            "trusted_issuers": issuers,
            "data": {"status": "running", **report["data"]},
        }

    def _push_status_list(self, text: str) -> str:
        return self._snap.tokens.push_status_list(text)

    def _lock_config_update(self) -> None:
        if self._refresher is not None:
            self._refresher.refresh_now()
        else:
            self.logger.system("INFO", "CONFIG_UPDATE ignored: the store is not the Lock's")

    def flush_lock(self) -> None:
        """Send the Lock's audit queues now (as its ``FORCE_REPORT`` event does)."""
        if self._lock_client is not None:
            self._lock_client.flush()

    @property
    def lock(self) -> Any:
        """The Lock client (``polang.lock.LockClient``), or None without ``ENGINE_LOCK``."""
        return self._lock_client

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

    def _new_refresher(self, source: PolicyStoreSource, current: PolicyStore | None) -> Any:
        from polang.store.refresh import StoreRefresher  # URL stores only (start-up time)

        return StoreRefresher(
            source,
            self.config,
            self._on_new_store,
            self._on_refresh_error,
            current=current,
            ssl_context=self._ssl_context,
            on_settled=self._refresh_settled,
            fetch_observer=self._fetch_observer,
        )

    def _refresh_settled(self) -> None:
        """After each refresh: tell the store listeners, count it in the metrics."""
        self._listeners.flush()
        if self._telemetry is not None and self._refresher is not None:
            self._telemetry.refreshed(self._refresher.last_outcome)

    def _store_age(self) -> tuple[str, float] | None:
        """The served store's id and seconds since it was loaded (the store-age gauge)."""
        snap, loaded_at = getattr(self, "_snap", None), getattr(self, "_loaded_at", None)
        if snap is None or loaded_at is None:  # still loading
            return None
        return snap.store.id, time.time() - loaded_at

    def _report(
        self,
        snap: Snapshot,
        elapsed: float,
        result: AuthorizeResult,
        action: EntityUID,
        resource: EntityUID,
        principal: EntityUID | None,
        dropped: list[DroppedToken] | None,
    ) -> None:
        """A decision's span and metrics (docs/observability.md); telemetry is active."""
        assert self._telemetry is not None
        self._telemetry.decided(
            elapsed,
            result,
            action,
            resource.type,
            None if principal is None else principal.type,
            [d.kind for d in dropped] if dropped else (),
            (snap.store.id, snap.store.version),
        )

    def _on_new_store(self, store: PolicyStore) -> None:
        snap = build_snapshot(  # raises
            store, self.config, self._ssl_context, self.logger, fetch_observer=self._fetch_observer
        )
        snap.context_data = self._data
        snap.authorizer.generate_in_background()
        with self._lock:
            old = self._snap
            self._snap = snap
            self._loaded_at = time.time()
        old.close_tokens()
        self.logger.system(
            "INFO", f"policy store refreshed to version {store.version}", policystore_id=store.id
        )
        self._log_store_warnings(store)
        for problem in self._data.unfit(store.schema)[:20]:
            self.logger.system(
                "WARN",
                f"context data: entry {problem}: decisions of the new store will refuse it "
                "or leave it out; push it again or remove it",
                policystore_id=store.id,
            )
        self._listeners.queue(  # sent once the refresher's lock is released
            StoreEvent(
                "store_updated",
                store.id,
                store.version,
                time.time(),
                previous_version=old.store.version,
            )
        )

    def _log_store_warnings(self, store: PolicyStore) -> None:
        """What the store loader accepted but flags (unknown fields, SHA-1 manifests)."""
        for warning in store.warnings:
            self.logger.system("WARN", f"policy store: {warning}", policystore_id=store.id)

    def _on_refresh_error(self, error: BaseException) -> None:
        if self._lock_client is not None:
            self._lock_client.store_failed(error)  # a 401: a new token next time
        self.logger.system(
            "ERROR",
            f"policy store refresh failed; still serving version {self.store.version}: {error}",
            policystore_id=self.store.id,
        )
        store = self.store
        self._listeners.queue(  # sent once the refresher's lock is released
            StoreEvent(
                "refresh_failed",
                store.id,
                store.version,
                time.time(),
                error=error if isinstance(error, PolangError) else None,
                reason=reason_of(error),
            )
        )

    # -- operations: refresh, events, health ------------------------------------------

    def refresh_store(self) -> str:
        """Refresh a URL store now (a conditional GET, as the background refresh makes);
        what happened: ``updated``, ``not_modified``, ``unchanged`` or ``failed`` (the
        last good store keeps serving; listeners and the system log say why). A store not
        read from a URL is a ``PolicyStoreError``."""
        if self._refresher is None:
            raise PolicyStoreError(
                f"refresh_store: the store is not read from a URL ({self.store.source})"
            )
        outcome: str = self._refresher.refresh()
        return outcome

    def add_store_listener(self, listener: StoreListener) -> None:
        """Call ``listener(event)`` with a :class:`~polang.engine.health.StoreEvent` when
        a refreshed store is swapped in (``store_updated``) or a refresh fails
        (``refresh_failed``). It runs on the refreshing thread, after the swap; what it
        raises is logged (system log, ERROR) and never reaches a refresh or a decision."""
        self._listeners.add(listener)

    def remove_store_listener(self, listener: StoreListener) -> bool:
        """Stop calling ``listener``; whether it was registered."""
        return self._listeners.remove(listener)

    def health(self) -> dict[str, Any]:
        """The engine's health as plain, JSON-ready data for a readiness probe: the store
        serving (id, version, when loaded), how refreshing goes (last success, last
        failure and its reason), each trusted issuer's keys (their age, the last fetch
        failure) and the context data; ``status`` is ``ok`` or ``degraded``
        (:func:`polang.engine.health.health_report`)."""
        with self._lock:
            snap, loaded_at = self._snap, self._loaded_at
        return health_report(snap, loaded_at, self._refresher, self._data)

    # -- context data (Cedarling's data API) ------------------------------------------

    def push_data(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Put ``value`` (JSON: objects, arrays, strings, whole numbers, booleans) under
        ``key``: from now on every decision whose action declares ``data`` in its context
        sees it as ``context.data.<key>``. ``ttl``: seconds (or a ``timedelta``) it lives;
        ``None`` takes ``ENGINE_DATA_STORE_DEFAULT_TTL`` (unset: it never expires). A key
        the schema's ``data`` records do not name, a value that does not fit the declared
        type, a schema without ``data`` and every limit are a ``DataError``."""
        self._data.push(key, value, ttl, self._snap.store.schema)

    def get_data(self, key: str) -> Any:
        """The value pushed under ``key`` (a copy), or ``None`` (never pushed, removed or
        expired)."""
        return self._data.get(key)

    def get_data_entry(self, key: str) -> DataEntry | None:
        """``key``'s entry with when it was pushed, when it expires and its size."""
        return self._data.entry(key)

    def remove_data(self, key: str) -> bool:
        """Remove ``key``; whether it was there."""
        return self._data.remove(key)

    def clear_data(self) -> None:
        """Remove every entry."""
        self._data.clear()

    def list_data(self) -> list[DataEntry]:
        """Every live entry, by key (``entry.to_dict()`` is JSON-ready)."""
        return self._data.list_entries()

    def close(self) -> None:
        """Stop background refresh, send what the Lock's queues hold (within
        ENGINE_LOCK_SHUTDOWN_TIMEOUT), write pending metrics and close HTTP clients."""
        if self._lock_client is not None:
            self._lock_client.close()
        if self._refresher is not None:
            self._refresher.stop()
        if self.logger.enabled:
            self.flush_metrics()
        if self._telemetry is not None:
            self._telemetry.close()
        self._snap.close_tokens()

    def prefetch(self) -> dict[str, str | None]:
        """Discover every trusted issuer and fetch its keys now (start-up warm-up, so no
        request waits for them): issuer id -> ``None`` when its keys are in hand, else why
        not. Failures are reported, never raised; tokens of a failed issuer retry by the
        usual cooldown. ``AsyncEngine.ready()`` is the same without blocking a loop."""
        snap = self._snap
        if not snap.store.trusted_issuers:
            return {}
        return snap.tokens.prefetch()

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
        if not self.logger.enabled and self._lock_client is None:  # the answer only
            result = new_result(allow, reserve_uuid7(), reasons, errors, None)
            tel = self._telemetry
            if tel is not None and tel.active():
                self._report(
                    snap,
                    time.perf_counter() - started,
                    result,
                    request.action,
                    request.resource,
                    request.principal,
                    None,
                )
            return result
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

    # -- plans (list endpoints) -------------------------------------------------------------

    def plan(
        self,
        action: str | EntityUID,
        resource_type: str,
        principal: EntityInput | None = None,
        context: Mapping[str, Any] | RecordValue | None = None,
        *,
        entities: Iterable[Mapping[str, Any] | Entity] = (),
    ) -> Plan:
        """Which rows of ``resource_type`` the policies allow ``principal`` to do
        ``action`` on: ``always_allowed``, ``always_denied`` or a residual condition
        over ``resource`` (docs/filtering.md). The request is read and checked as
        ``authorize_unsigned`` reads it; ``entities`` are laid over the store's."""
        from polang.analysis.plan import plan  # on first use: not a decision's start-up

        snap = self._snap
        facts = extra_entities(snap, entities)
        puid, act, rtype, ctx, facts = plan_request(
            snap, facts, action, resource_type, principal, context
        )
        return plan(snap.authorizer, act, rtype, facts, principal=puid, context=ctx)

    def plan_multi_issuer(
        self,
        tokens: Sequence[TokenInput | Mapping[str, Any]],
        action: str | EntityUID,
        resource_type: str,
        context: Mapping[str, Any] | RecordValue | None = None,
    ) -> Plan:
        """:meth:`plan` for a caller known by tokens, read as ``authorize_multi_issuer``
        reads them (no principal; the tokens' entities and ``context.tokens``)."""
        from polang.analysis.plan import plan  # on first use: not a decision's start-up

        snap = self._snap
        act, rtype, ctx, facts, _ = token_plan_request(snap, tokens, action, resource_type, context)
        return plan(snap.authorizer, act, rtype, facts, context=ctx)

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
        if (self.logger.enabled or self._telemetry is not None) and out:  # each one's share
            elapsed = int((time.perf_counter() - started) * 1e6 / len(out))
        if not self.logger.enabled and self._lock_client is None:  # the answers only
            tel = self._telemetry
            share = 0.0
            if tel is not None and not tel.active():
                tel = None
            elif tel is not None and out:
                share = (time.perf_counter() - started) / len(out)
            for (i, request, (allow, reasons, errors), processed), reserved in zip(
                todo, reserve_uuid7_many(len(todo)), strict=True
            ):
                dropped = None if processed is None else list(processed.dropped)
                out[i] = result = new_result(allow, reserved, reasons, errors, dropped)
                if tel is not None:
                    self._report(
                        snap,
                        share,
                        result,
                        request.action,
                        request.resource,
                        request.principal,
                        dropped,
                    )
            return out
        # ids as bits here too: the decision log writes their text when read
        for (i, request, (allow, reasons, errors), processed), request_id in zip(
            todo, reserve_uuid7_many(len(todo)), strict=True
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
        for the request (bits reserved by ``reserve_uuid7``), else one drawn; its text is
        written when someone reads it (the result, the log)."""
        if request_id is None:  # bits: the log and the result write the text when read
            request_id = reserve_uuid7()
        # the verdict's lists are its own (fresh per decision): the result takes them
        result = new_result(allow, request_id, reasons, errors, dropped)
        logged = self.logger.enabled
        lock = self._lock_client
        if lock is not None and not lock.wants_decisions:
            lock = None
        tel = self._telemetry
        if tel is not None and not tel.active():
            tel = None
        if not logged and lock is None and tel is None:
            return result
        elapsed_s = time.perf_counter() - started if elapsed_us is None else elapsed_us / 1e6
        if logged or lock is not None:
            # one record of the decision for whoever keeps it (copies of the lists the
            # result shares)
            decided = DecisionValues.of(
                request_id,
                allow,
                action,
                resource,
                principal,
                reasons,
                errors,
                log_ids,
                dropped,
                int(elapsed_s * 1e6) if elapsed_us is None else elapsed_us,
                snap.store.id,
                snap.store.version,
            )
            if lock is not None:
                lock.record_decision(decided)
            if logged:
                self.logger.decided(decided)
                if time.monotonic() - self._last_metrics >= METRICS_INTERVAL:
                    self.flush_metrics()
        if tel is not None:
            self._report(snap, elapsed_s, result, action, resource, principal, dropped)
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
