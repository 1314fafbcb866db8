"""Background refresh of URL stores (``ENGINE_POLICY_STORE_REFRESH_INTERVAL``).

A refreshed store replaces the old one only when it loads and checks in full; a failed
refresh keeps the last good store serving and reports the error (the engine writes it
to the system log). The thread is a daemon and stops promptly on :meth:`stop`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from polang.config import Config
from polang.errors import PolangError, PolicyStoreError
from polang.store.model import PolicyStore
from polang.store.source import PolicyStoreSource

if TYPE_CHECKING:
    import ssl

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
    ) -> None:
        self.ssl_context = ssl_context
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

    @property
    def current(self) -> PolicyStore | None:
        """The last store that loaded in full."""
        return self._current

    def start(self) -> StoreRefresher:
        """Start the thread (no-op when the interval is 0 or it already runs)."""
        if self.interval <= 0 or (self._thread is not None and self._thread.is_alive()):
            return self
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

    def refresh_now(self) -> bool:
        """Reload once; ``True`` when a new store replaced the current one."""
        with self._lock:
            try:
                store = self.source.load(self.config, ssl_context=self.ssl_context)
            except PolangError as e:
                self._report(e)
                return False
            except Exception as e:  # an unexpected bug must not kill the refresher
                self._report(PolicyStoreError(f"refreshing {self.source.describe()} failed: {e}"))
                return False
            if self._current is not None and store.digest == self._current.digest:
                return False
            if self._stop.is_set():
                return False
            try:
                self._on_update(store)
            except Exception as e:  # the consumer refused it: the current store stays
                self._report(
                    e
                    if isinstance(e, PolangError)
                    else PolicyStoreError(f"the store update callback failed: {e}")
                )
                return False
            self._current = store
            self.refreshes += 1
            return True

    def _report(self, error: PolangError) -> None:
        self.failures += 1
        self.last_error = error
        if self._on_error is not None:
            # a broken error sink must not stop refreshing
            with contextlib.suppress(Exception):
                self._on_error(error)
