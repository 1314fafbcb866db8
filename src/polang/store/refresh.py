"""Background refresh of URL stores (``ENGINE_POLICY_STORE_REFRESH_INTERVAL``).

A refreshed store replaces the old one only when it loads and checks in full; a failed
refresh keeps the last good store serving and reports the error (the engine writes it
to the system log). The thread is a daemon and stops promptly on :meth:`stop`.

Each refresh is a conditional GET: the ``ETag`` and ``Last-Modified`` of the body the
current store was read from go back as ``If-None-Match`` / ``If-Modified-Since``, and a
``304 Not Modified`` keeps the store without reading anything. Validators are taken only
from a body that became (or already was) the current store: a body that fails to load
never lends its ``ETag`` to the next request, so a server that fixes it is read again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polang.config import Config
from polang.errors import ConfigError, PolangError, PolicyStoreError
from polang.logs import format_timestamp
from polang.runtime import WASM, unavailable
from polang.store.model import PolicyStore
from polang.store.remote import Validators
from polang.store.source import PolicyStoreSource

if TYPE_CHECKING:
    import ssl

    from polang.http import FetchObserver

OnUpdate = Callable[[PolicyStore], None]
OnError = Callable[[PolangError], None]


class StoreRefresher:
    """Reloads ``source`` every ``interval`` seconds in a daemon thread.

    ``on_update(store)`` is called with each new store that loads in full and differs
    from the current one (same digest: same input, nothing to do). ``on_error(error)``
    is called when a reload fails; the current store stays. When ``on_update`` raises
    (the consumer's own checks refuse the store), that is reported the same way and the
    store does not become current, so it is tried again at the next interval. Callback
    errors never kill the thread.
    """

    def __init__(
        self,
        source: PolicyStoreSource,
        config: Config,
        on_update: OnUpdate,
        on_error: OnError | None = None,
        *,
        current: PolicyStore | None = None,
        interval: float | None = None,
        ssl_context: ssl.SSLContext | None = None,
        on_settled: Callable[[], None] | None = None,
        fetch_observer: FetchObserver | None = None,
    ) -> None:
        """``on_settled()`` is called after each refresh, outside the refresher's lock
        (the engine tells its store listeners there, so that one may refresh again);
        ``fetch_observer`` is told of each fetch (the engine's telemetry)."""
        self.fetch_observer = fetch_observer
        self.ssl_context = ssl_context
        self._on_settled = on_settled
        self.source = source
        self.config = config
        self.interval = config.policy_store_refresh_interval if interval is None else interval
        self._on_update = on_update
        self._on_error = on_error
        self._current = current
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: PolangError | None = None
        self.refreshes = 0
        self.failures = 0
        self.not_modified = 0  # refreshes answered 304
        self.validators = Validators()
        """The validators of the body the current store was read from."""
        self.last_outcome: str | None = None
        """``loaded``, ``updated``, ``not_modified``, ``unchanged`` or ``failed``."""
        self.last_success_at: float | None = None  # epoch seconds of the last good check
        self.last_failure: tuple[float, str] | None = None  # when and why, kept after
        self.consecutive_failures = 0

    @property
    def current(self) -> PolicyStore | None:
        """The last store that loaded in full."""
        return self._current

    def start(self) -> StoreRefresher:
        """Start the thread (no-op when the interval is 0 or it already runs)."""
        if self.interval <= 0 or (self._thread is not None and self._thread.is_alive()):
            return self
        if WASM:
            raise ConfigError(
                unavailable(
                    "ENGINE_POLICY_STORE_REFRESH_INTERVAL (refreshing a store in the background)",
                    "no threads",
                    "set it to 0 and build a new engine with polang.wasm.WasmEngine.create "
                    "when a newer store is wanted",
                )
            )
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"polang-store-refresh:{self.source.location}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Ask the thread to stop and wait for it (an in-flight fetch ends first)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh_now()

    def load_first(self) -> PolicyStore:
        """The first load, made here so that its validators are kept for the first
        refresh; raises like :meth:`PolicyStoreSource.load`."""
        with self._lock:
            fetched = self.source.fetch_if_changed(
                self.config, ssl_context=self.ssl_context, observer=self.fetch_observer
            )
            store = self.source.load(self.config, ssl_context=self.ssl_context, body=fetched.body)
            self._current = store
            self.validators = fetched.validators
            self._succeeded("loaded")
            return store

    def refresh_now(self) -> bool:
        """Reload once; ``True`` when a new store replaced the current one."""
        return self.refresh() == "updated"

    def refresh(self) -> str:
        """Reload once; what happened: ``updated``, ``not_modified``, ``unchanged`` or
        ``failed`` (:attr:`last_outcome` keeps it)."""
        try:
            with self._lock:
                self._refresh()
                return str(self.last_outcome)
        finally:
            if self._on_settled is not None:
                with contextlib.suppress(Exception):  # the consumer's: never the thread's
                    self._on_settled()

    def _refresh(self) -> None:
        """(Under the lock.) :meth:`refresh_now`'s work."""
        # validators only name a copy the refresher holds
        sent = self.validators if self._current is not None else Validators()
        try:
            fetched = self.source.fetch_if_changed(
                self.config, sent, ssl_context=self.ssl_context, observer=self.fetch_observer
            )
            if fetched.body is None:  # 304: the current store is the server's
                self.validators = fetched.validators
                self.not_modified += 1
                self._succeeded("not_modified")
                return
            store = self.source.load(self.config, ssl_context=self.ssl_context, body=fetched.body)
        except PolangError as e:
            self._report(e)
            return
        except Exception as e:  # an unexpected bug must not kill the refresher
            self._report(PolicyStoreError(f"refreshing {self.source.describe()} failed: {e}"))
            return
        if self._current is not None and store.digest == self._current.digest:
            self.validators = fetched.validators  # the same body: its validators
            self._succeeded("unchanged")
            return
        if self._stop.is_set():
            return
        try:
            self._on_update(store)
        except Exception as e:  # the consumer refused it: the current store stays
            self._report(
                e
                if isinstance(e, PolangError)
                else PolicyStoreError(f"the store update callback failed: {e}")
            )
            return
        self._current = store
        self.validators = fetched.validators
        self.refreshes += 1
        self._succeeded("updated")

    def _succeeded(self, outcome: str) -> None:
        self.last_error = None  # the source loads again (health reads this)
        self.last_outcome = outcome
        self.last_success_at = time.time()
        self.consecutive_failures = 0

    def status(self) -> dict[str, Any]:
        """Plain data for ``engine.health()``: how refreshing goes."""
        failure = self.last_failure
        return {
            "interval_seconds": self.interval,
            "running": self.running,
            "last_outcome": self.last_outcome,
            "last_success_at": _iso(self.last_success_at),
            "last_failure_at": None if failure is None else _iso(failure[0]),
            "last_failure_reason": None if failure is None else failure[1],
            "consecutive_failures": self.consecutive_failures,
            "updates": self.refreshes,
            "not_modified": self.not_modified,
            "failures": self.failures,
            "etag": self.validators.etag,
            "last_modified": self.validators.last_modified,
        }

    def _report(self, error: PolangError) -> None:
        self.failures += 1
        self.consecutive_failures += 1
        self.last_error = error
        self.last_outcome = "failed"
        self.last_failure = (time.time(), str(error))
        if self._on_error is not None:
            # a broken error sink must not stop refreshing
            with contextlib.suppress(Exception):
                self._on_error(error)


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else format_timestamp(epoch)
