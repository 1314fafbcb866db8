"""Single flight: one fetch in progress that every other caller waits for.

Issuer keys and status lists are fetched by one caller while the others wait for that
fetch (never a second request to the same place). Threads wait with :meth:`Flight.wait`;
an event loop waits through :meth:`Flight.add_done_callback`, so a coroutine waiting for a
fetch holds no thread.

:func:`deferred` is how the async API decides inline without ever blocking its event loop:
inside it, code that would fetch or wait for a fetch raises :class:`FetchPending` instead,
carrying the flight (already registered, so later callers find it) and, for the caller
that started it, the work to run on a thread. The caller runs that work, awaits the flight
and decides again (``polang.engine.aio``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FetchPending", "Flight", "deferred", "deferring"]


class Flight:
    """A fetch in progress: finished once, waited for by threads or event loops."""

    __slots__ = ("_callbacks", "_event", "_lock")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Block this thread until the fetch ends (or ``timeout`` seconds pass)."""
        return self._event.wait(timeout)

    def finish(self) -> None:
        """The fetch ended (well or not): wake every waiter."""
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_done_callback(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when the fetch ends (now, if it has); it runs on the thread
        that ends the fetch, so an event loop passes ``call_soon_threadsafe``."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()


class FetchPending(Exception):
    """Raised inside :func:`deferred` where a fetch would start or be waited for.

    ``run`` is the fetch to run (on a thread, exactly once) when this caller started it;
    ``None`` when another caller's fetch is in flight. Either way ``flight`` ends when the
    fetch does. Deliberately not a :class:`~polang.errors.PolangError`, so no handler of
    request errors catches it on its way out of the decision.
    """

    def __init__(self, flight: Flight, run: Callable[[], object] | None) -> None:
        super().__init__("a fetch is needed before this decision")
        self.flight = flight
        self.run = run


_DEFER: ContextVar[bool] = ContextVar("polang_defer_fetches", default=False)


def deferring() -> bool:
    """Whether fetches raise :class:`FetchPending` here instead of blocking."""
    return _DEFER.get()


@contextmanager
def deferred() -> Iterator[None]:
    """Within this block (this thread or task only), never block on the network."""
    token = _DEFER.set(True)
    try:
        yield
    finally:
        _DEFER.reset(token)
