"""The engine's Lock client: start-up, the audit sender and the event listener.

Two daemon threads do all the talking, so a decision never waits on the Lock: the
*sender* (finds the Lock, keeps the token, sends the audit queues every interval, retries
a refused batch with backoff, runs pushed store refreshes) and the *listener* (the
server-sent event stream, reconnecting with backoff and ``Last-Event-ID``). Every request
goes through :mod:`polang.http` (deadline, size cap, redirects, https). ``close()`` stops
both and sends what is queued within ``ENGINE_LOCK_SHUTDOWN_TIMEOUT``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polang.config import Config
from polang.errors import LockError, PolangError, PolicyStoreError
from polang.escapes import printable
from polang.http import Fetcher, FetchError, StreamBody, short_url
from polang.logs import DecisionValues, Logger, format_timestamp
from polang.store.remote import fetch_limits
from polang.store.source import PolicyStoreSource
from polang.tokens.settings import TokenSettings

from .audit import AuditQueue, DecisionRecord, Telemetry, decision_entry, overall
from .events import Event, EventParser, parse_events
from .server import AUDIT_KINDS, SCOPES, Credentials, LockEndpoints, read_configuration

if TYPE_CHECKING:
    import ssl

    from polang.store.model import PolicyStore

#: First pause after a failure (start-up retries, a refused batch, a lost event stream);
#: it doubles up to :data:`BACKOFF_MAX`.
BACKOFF_START = 0.1
BACKOFF_MAX = 30.0
#: A stream that stayed up this long resets the listener's backoff (a server that
#: accepts and hangs up at once is not reconnected to in a loop).
SSE_HEALTHY_SECONDS = 10.0
#: Longest silence on the event stream before it is dropped and reconnected.
SSE_MAX_SILENCE = 120.0
KNOWN_EVENTS = ("STATUS_LIST", "STATUS_LIST_UPDATE", "CONFIG_UPDATE", "FORCE_REPORT")
_SHOWN_NAME = 100  # characters of an unknown event's name in the system log


def backoff(failures: int) -> float:
    return min(BACKOFF_START * 2 ** max(0, failures - 1), BACKOFF_MAX)


class LockHooks:
    """What the client asks of the engine (it never imports it): its health by component,
    taking a pushed status list, refreshing the store now."""

    def __init__(
        self,
        health: Callable[[], dict[str, dict[str, Any]]],
        status_list: Callable[[str], str],
        config_update: Callable[[], object],
    ) -> None:
        self.health = health
        self.status_list = status_list
        self.config_update = config_update


class LockClient:
    """One engine's connection to its Lock server (thread-safe)."""

    def __init__(
        self,
        config: Config,
        logger: Logger,
        ssl_context: ssl.SSLContext | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert config.lock_server_configuration_uri is not None
        self.config = config
        self.logger = logger
        self.uri = config.lock_server_configuration_uri
        self.fetcher = Fetcher(fetch_limits(config), ssl_context)
        self._clock = clock
        self.intervals = {
            "log": config.lock_log_interval,
            "health": config.lock_health_interval,
            "telemetry": config.lock_telemetry_interval,
        }
        scopes = [SCOPES[k] for k in AUDIT_KINDS if self.intervals[k] > 0]
        if config.store_source_key is None:
            scopes.append(SCOPES["policy"])
        if config.lock_listen_sse:
            scopes.append(SCOPES["sse"])
        self.credentials = Credentials(
            self.fetcher,
            access_token=config.lock_access_token,
            ssa_jwt=config.lock_ssa_jwt,
            client_name=f"polang {config.application_name}",
            scopes=scopes,
            token_settings=TokenSettings(
                clock_skew=int(config.jwt_clock_skew),
                algorithms=config.jwt_signature_algorithms_supported,
                http_timeout=config.http_request_timeout,
                http_max_retries=config.http_max_retries,
                http_max_response_size=config.http_max_response_size_bytes,
                ssl_context=ssl_context,
            ),
            clock=clock,
        )
        cap = config.lock_log_channel_capacity
        self.queues = {k: AuditQueue(cap) for k in AUDIT_KINDS}
        self.telemetry = Telemetry()
        self.endpoints: LockEndpoints | None = None
        self.hooks: LockHooks | None = None
        self.sent: Counter[str] = Counter()  # entries the Lock took, by kind
        self.batches_dropped: Counter[str] = Counter()
        self.entries_dropped: Counter[str] = Counter()  # after the last retry
        self.events: Counter[str] = Counter()  # pushed events, by name ("unknown")
        self.sse_connections = 0
        self.last_error: str | None = None
        self._log_on = self.intervals["log"] > 0
        self._telemetry_on = self.intervals["telemetry"] > 0
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._flush_now = threading.Event()
        self._refresh_now = threading.Event()
        self._send_lock = threading.Lock()
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._attempts: Counter[str] = Counter()
        self._retry_at: dict[str, float] = {}
        self._stream: StreamBody | None = None
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._startup_deadline: float | None = None
        self.parser = EventParser()

    # ------------------------------------------------------------ start-up

    def bootstrap(self, deadline: float | None = None) -> LockEndpoints:
        """Read the configuration document (unauthenticated); ``LockError`` if it fails."""
        try:
            doc = self.fetcher.request("GET", self.uri, deadline=deadline).json()
        except FetchError as e:
            raise LockError(f"lock server configuration: {e}") from None
        endpoints = read_configuration(doc, self.uri)
        for note in endpoints.notes:
            self.logger.system("WARN", f"lock server configuration: {note}; that feature is off")
        for kind in AUDIT_KINDS:
            if self.intervals[kind] > 0 and kind not in endpoints.audit:
                self.logger.system(
                    "WARN",
                    f"ENGINE_LOCK_{kind.upper()}_INTERVAL is set but the Lock offers no usable "
                    f"audit.{kind}_endpoint: {kind} entries are not sent",
                )
                self.intervals[kind] = 0.0
                self.queues[kind].take()
        if self.config.lock_listen_sse and "sse" not in endpoints.config:
            self.logger.system(
                "WARN",
                "ENGINE_LOCK_LISTEN_SSE is enabled but the Lock offers no usable "
                "config.sse_endpoint: no events are received",
            )
        self._log_on = self.intervals["log"] > 0
        self._telemetry_on = self.intervals["telemetry"] > 0
        self.endpoints = endpoints
        self.last_error = None
        self._ready.set()
        self.logger.system(
            "INFO",
            f"lock server {short_url(self.uri)} found (version {endpoints.version!r}); "
            f"audit: {', '.join(k for k in AUDIT_KINDS if self.intervals[k] > 0) or 'off'}",
        )
        return endpoints

    def store_source(self, store_id: str) -> PolicyStoreSource:
        """The Lock's store ``store_id``, fetched with the bearer token."""
        assert self.endpoints is not None
        url = self.endpoints.store_url(store_id)
        if url is None:
            raise LockError(
                "the Lock's configuration names no policy_endpoint (nor config_endpoint): "
                f"the store {store_id!r} cannot be fetched from it"
            )
        return PolicyStoreSource.lock(url, self._store_headers)

    def _store_headers(self) -> dict[str, str]:
        assert self.endpoints is not None
        return self.credentials.header(self.endpoints.issuer, self._startup_deadline)

    def load_store(
        self, source: PolicyStoreSource, ssl_context: ssl.SSLContext | None, deadline: float
    ) -> PolicyStore:
        """The first load of the Lock's store, within ``deadline`` (one new token after a
        ``401``)."""
        self._startup_deadline = deadline
        try:
            for attempt in range(2):
                try:
                    return source.load(self.config, ssl_context=ssl_context)
                except PolicyStoreError as e:
                    if attempt == 0 and self.store_failed(e):
                        continue
                    raise
            raise AssertionError("unreachable")
        finally:
            self._startup_deadline = None

    def store_failed(self, error: BaseException) -> bool:
        """A store fetch failed: after a ``401`` the token is dropped (True: try again)."""
        cur: BaseException | None = error
        for _ in range(8):
            if cur is None:
                break
            if isinstance(cur, FetchError) and cur.status == 401:
                with contextlib.suppress(PolangError):
                    return self.credentials.rejected(self._store_headers())
                return False
            cur = cur.__cause__ or cur.__context__
        return False

    def start(self, hooks: LockHooks) -> LockClient:
        """Start the sender (and the listener with ``ENGINE_LOCK_LISTEN_SSE``)."""
        self.hooks = hooks
        runs: list[tuple[str, Callable[[], None]]] = [("polang-lock-sender", self._run)]
        if self.config.lock_listen_sse:
            runs.append(("polang-lock-events", self._listen))
        for name, target in runs:
            t = threading.Thread(target=self._guarded(target), name=name, daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def _guarded(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as e:  # a bug must not end in a thread's traceback
                self._note("ERROR", f"lock client thread stopped: {type(e).__name__}: {e}")

        return run

    # ------------------------------------------------------------ from decisions

    def record_decision(self, d: DecisionValues) -> None:
        """Queue one decision (an append; the entry is built by the sender)."""
        if self._log_on:
            self.queues["log"].put(DecisionRecord(self._clock(), d))
        if self._telemetry_on:
            self.telemetry.decision(d.allow, d.reasons, len(d.errors), len(d.dropped))

    @property
    def wants_decisions(self) -> bool:
        return self._log_on or self._telemetry_on

    # ------------------------------------------------------------ the sender

    def _run(self) -> None:
        failures = 0
        while not self._ready.is_set() and not self._stop.is_set():
            try:
                self.bootstrap(time.monotonic() + self.config.http_request_timeout)
            except PolangError as e:
                failures += 1
                pause = backoff(failures)
                self._note("WARN", f"lock server unreachable ({e}); retrying in {pause:g} s")
                self._stop.wait(pause)
        now = time.monotonic()
        due = {k: now + v for k, v in self.intervals.items() if v > 0}
        while not self._stop.is_set():
            self._wake.clear()  # before the flags are read: a later wake is not lost
            if self._refresh_now.is_set():
                self._refresh_now.clear()
                self._refresh_store()
            force = self._flush_now.is_set()
            self._flush_now.clear()
            now = time.monotonic()
            for kind in list(due):
                if force or now >= due[kind]:
                    due[kind] = now + self.intervals[kind]
                    self._queue_report(kind)
                    self._send(kind)
                elif kind in self._retry_at and now >= self._retry_at[kind]:
                    self._send(kind)
            times = [*due.values(), *self._retry_at.values()]
            wait = (min(times) - time.monotonic()) if times else 60.0
            self._wake.wait(max(0.005, wait))

    def _refresh_store(self) -> None:
        if self.hooks is None:
            return
        try:
            self.hooks.config_update()
        except Exception as e:  # the engine reports its own refresh failures
            self._note("ERROR", f"CONFIG_UPDATE: refreshing the store failed: {e}")

    def _queue_report(self, kind: str) -> None:
        if kind == "health":
            self.queues["health"].put(self.health_entry())
        elif kind == "telemetry":
            self.queues["telemetry"].put(self.telemetry_entry())

    def _base(self) -> dict[str, Any]:
        stamp = format_timestamp(self._clock())
        return {
            "creation_date": stamp,
            "event_time": stamp,
            "service": self.config.application_name,
            "node_name": self.logger.pdp_id,
        }

    def lock_health(self) -> dict[str, Any]:
        """The Lock connection as a health component."""
        dropped = sum(q.dropped for q in self.queues.values()) + sum(self.entries_dropped.values())
        status = "running" if self._ready.is_set() and self.last_error is None else "degraded"
        out: dict[str, Any] = {
            "status": status,
            "queued": sum(len(q) for q in self.queues.values()),
            "dropped_entries": dropped,
        }
        if self.last_error is not None:
            out["error"] = self.last_error
        return out

    def health_entry(self) -> dict[str, Any]:
        components: dict[str, dict[str, Any]] = {}
        if self.hooks is not None:
            try:
                components.update(self.hooks.health())
            except Exception as e:
                components["core"] = {"status": "degraded", "error": str(e)[:1000]}
        components["lock"] = self.lock_health()
        entry = self._base()
        entry["status"] = overall(components)
        entry["engine_status"] = components
        return entry

    def telemetry_entry(self) -> dict[str, Any]:
        policies, errors, ops = self.telemetry.take()
        ops["lock.decision_entries_queued"] = len(self.queues["log"])
        interval = self.intervals["telemetry"]
        entry = self._base()
        del entry["event_time"]
        entry.update(
            {
                "status": overall({"x": self.lock_health()}),
                "interval_secs": int(interval) if interval.is_integer() else interval,
                "policy_stats": policies,
                "error_counters": errors,
                "operational_stats": ops,
            }
        )
        return entry

    def _send(self, kind: str, deadline: float | None = None, *, final: bool = False) -> bool:
        """Send what is queued (and a batch being retried) as one JSON array."""
        with self._send_lock:
            queue = self.queues[kind]
            drops = queue.unreported_drops()
            if drops:
                self.telemetry.error(f"lock.{kind}_entries_dropped", drops)
                self._note(
                    "WARN",
                    f"{drops} {kind} entries dropped: the queue was full "
                    f"(ENGINE_LOCK_LOG_CHANNEL_CAPACITY={queue.capacity}; oldest first)",
                    error=False,
                )
            batch = self._pending.pop(kind, [])
            for item in queue.take():
                batch.append(self._entry(item))
            if len(batch) > queue.capacity:  # a retried batch and a full queue
                extra = len(batch) - queue.capacity
                del batch[:extra]
                self.entries_dropped[kind] += extra
                self.telemetry.error(f"lock.{kind}_entries_dropped", extra)
            if not batch:
                self._retry_at.pop(kind, None)
                return True
            assert self.endpoints is not None
            url = self.endpoints.audit[kind]
            error = self._post(url, json.dumps(batch).encode(), deadline)
            if error is None:
                self.sent[kind] += len(batch)
                self._attempts.pop(kind, None)
                self._retry_at.pop(kind, None)
                self.last_error = None  # the Lock takes entries again
                return True
            self._attempts[kind] += 1
            attempts = self._attempts[kind]
            self.telemetry.error(f"lock.{kind}_send_failures")
            if final or attempts > self.config.lock_log_max_retries:
                self._attempts.pop(kind, None)
                self._retry_at.pop(kind, None)
                self.batches_dropped[kind] += 1
                self.entries_dropped[kind] += len(batch)
                self._note(
                    "ERROR",
                    f"{len(batch)} {kind} entries dropped after {attempts} attempts "
                    f"(ENGINE_LOCK_LOG_MAX_RETRIES={self.config.lock_log_max_retries}): {error}",
                )
                return False
            self._pending[kind] = batch
            pause = backoff(attempts)
            self._retry_at[kind] = time.monotonic() + pause
            self._note(
                "WARN",
                f"sending {len(batch)} {kind} entries failed ({error}); retry in {pause:g} s",
            )
            return False

    def _entry(self, item: Any) -> dict[str, Any]:
        if isinstance(item, DecisionRecord):
            return decision_entry(
                item,
                service=self.config.application_name,
                node=self.logger.pdp_id,
                client_id=self.credentials.client_id,
            )
        out: dict[str, Any] = item
        return out

    def _post(self, url: str, body: bytes, deadline: float | None) -> str | None:
        """POST with the bearer token (a new one once after a ``401``); the error or None."""
        assert self.endpoints is not None
        for attempt in range(2):
            try:
                header = self.credentials.header(self.endpoints.issuer, deadline)
            except PolangError as e:
                return str(e)
            try:
                self.fetcher.request(
                    "POST",
                    url,
                    accept="application/json, */*",
                    headers={**header, "Content-Type": "application/json"},
                    body=body,
                    retries=0,
                    deadline=deadline,
                )
                return None
            except FetchError as e:
                if e.status == 401 and attempt == 0 and self.credentials.rejected(header):
                    continue
                return str(e)
        return "the Lock refused the new token too (HTTP 401)"

    # ------------------------------------------------------------ the listener

    def _listen(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if not self._ready.wait(0.05):
                continue
            assert self.endpoints is not None
            url = self.endpoints.config.get("sse")
            if url is None:
                return  # said at start-up
            started = time.monotonic()
            error: str = "the server ended the stream"
            header: dict[str, str] = {}
            try:
                header = self.credentials.header(self.endpoints.issuer)
                if self.parser.last_id is not None:
                    header["Last-Event-ID"] = self.parser.last_id
                with self.fetcher.stream(
                    url, idle_timeout=SSE_MAX_SILENCE, idle_name="SSE_MAX_SILENCE", headers=header
                ) as s:
                    self._stream = s
                    if self._stop.is_set():
                        break
                    self.sse_connections += 1
                    self.parser.restart()
                    for event in parse_events(s, self.parser):
                        if self._stop.is_set():
                            break
                        self._on_event(event)
            except FetchError as e:
                if e.status == 401:
                    self.credentials.rejected(header)
                error = str(e)
            except PolangError as e:
                error = str(e)
            finally:
                self._stream = None
            if self._stop.is_set():
                break
            failures = 1 if time.monotonic() - started >= SSE_HEALTHY_SECONDS else failures + 1
            pause = max(self.parser.retry or 0.0, backoff(failures))
            self._note(
                "WARN", f"lock event stream: {error}; reconnecting in {pause:g} s", error=False
            )
            self._stop.wait(pause)

    def _on_event(self, event: Event) -> None:
        """Handle one event; it is counted once handled (``events``, by name)."""
        name = event.name
        counted = name if name in KNOWN_EVENTS else "unknown"
        try:
            self._handle(event)
        finally:
            self.events[counted] += 1

    def _handle(self, event: Event) -> None:
        name = event.name
        hooks = self.hooks
        if name in ("STATUS_LIST", "STATUS_LIST_UPDATE"):
            if hooks is None:
                return
            try:
                uri = hooks.status_list(event.data.strip())
            except PolangError as e:
                self.telemetry.error("lock.status_lists_refused")
                self._note("WARN", f"{name}: {e}", error=False)
                return
            self.logger.system("INFO", f"{name}: status list {short_url(uri)} updated")
        elif name == "CONFIG_UPDATE":
            self._refresh_now.set()
            self._wake.set()
        elif name == "FORCE_REPORT":
            self._flush_now.set()
            self._wake.set()
        else:
            n = self.events["unknown"] + 1
            if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th...: a flood logs a few lines
                shown = printable(name[:_SHOWN_NAME]) + ("..." if len(name) > _SHOWN_NAME else "")
                self.logger.system(
                    "INFO", f"lock event {shown!r} is not known; ignored ({n} unknown so far)"
                )

    # ------------------------------------------------------------ the end

    def _note(self, level: str, message: str, *, error: bool = True) -> None:
        if error:
            self.last_error = message[:1000]
        self.logger.system(level, message)

    def flush(self) -> None:
        """Send every queue now (what ``FORCE_REPORT`` does), on the sender thread."""
        self._flush_now.set()
        self._wake.set()

    def close(self) -> None:
        """Stop the threads and send what is queued, within ENGINE_LOCK_SHUTDOWN_TIMEOUT."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + self.config.lock_shutdown_timeout
        self._stop.set()
        self._wake.set()
        stream = self._stream
        if stream is not None:
            stream.abort()
        sender = self._threads[0] if self._threads else None
        if sender is not None:
            sender.join(max(0.0, deadline - time.monotonic()))
        if self._ready.is_set() and (sender is None or not sender.is_alive()):
            if self._telemetry_on:
                self._queue_report("telemetry")
            for kind in AUDIT_KINDS:
                if self.intervals[kind] > 0 and (len(self.queues[kind]) or kind in self._pending):
                    self._send(kind, deadline, final=True)
        else:  # the sender is still inside a request (or the Lock was never found)
            for kind in AUDIT_KINDS:
                left = len(self.queues[kind].take()) + len(self._pending.get(kind, ()))
                if left:
                    self.entries_dropped[kind] += left
                    self._note(
                        "WARN",
                        f"{left} {kind} entries not sent before ENGINE_LOCK_SHUTDOWN_TIMEOUT "
                        f"({self.config.lock_shutdown_timeout:g} s)",
                    )
        for t in self._threads[1:]:
            t.join(max(0.0, min(0.5, deadline - time.monotonic())))
        self.fetcher.close()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()
