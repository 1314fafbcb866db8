"""What an operator watches: store events for listeners, and ``engine.health()``.

A **store event** is sent to every listener registered with
:meth:`polang.Engine.add_store_listener` when a refreshed store is swapped in
(``store_updated``) and when a refresh fails (``refresh_failed``; the last good store
keeps serving). Listeners run on the thread that refreshed (the refresher's, or the
caller's of ``refresh_store``), after the swap, outside every engine lock; an exception a
listener raises is written to the system log and goes no further: it never stops a
refresh, a decision or the other listeners.

**Health** is plain data (JSON-ready: strings, numbers, booleans, ``None``), built for a
readiness probe to serve as it is; :func:`health_report` says what it holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from polang._record import Record
from polang.errors import PolangError
from polang.logs import Logger, format_timestamp

if TYPE_CHECKING:
    from .data import ContextData
    from .snapshot import Snapshot

__all__ = ["MAX_EVENT_REASON_CHARS", "StoreEvent", "StoreListener", "health_report"]

_set = object.__setattr__
MAX_EVENT_REASON_CHARS = 1000
"""Characters of an error a store event's ``reason`` (and a listener's failure in the
system log) keeps: an error may quote what a hostile server sent."""

StoreEventKind = Literal["store_updated", "refresh_failed"]


class StoreEvent(Record):
    """What happened to the engine's store.

    ``store_id`` and ``version`` are the store serving after the event (for
    ``refresh_failed``, the last good one, still serving); ``previous_version`` is the
    one replaced (``store_updated`` only); ``error`` and ``reason`` say why a refresh
    failed. ``at`` is epoch seconds.
    """

    __slots__ = ("at", "error", "kind", "previous_version", "reason", "store_id", "version")
    kind: StoreEventKind
    store_id: str
    version: str | None
    at: float
    previous_version: str | None
    error: PolangError | None
    reason: str | None

    def __init__(
        self,
        kind: StoreEventKind,
        store_id: str,
        version: str | None,
        at: float,
        previous_version: str | None = None,
        error: PolangError | None = None,
        reason: str | None = None,
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "store_id", store_id)
        _set(self, "version", version)
        _set(self, "at", at)
        _set(self, "previous_version", previous_version)
        _set(self, "error", error)
        _set(self, "reason", reason)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the error as its message)."""
        return {
            "kind": self.kind,
            "store_id": self.store_id,
            "version": self.version,
            "previous_version": self.previous_version,
            "at": format_timestamp(self.at),
            "reason": self.reason,
        }


StoreListener = Callable[[StoreEvent], object]


class Listeners:
    """The registered listeners. Events are queued where they happen (under the
    refresher's lock) and sent by :meth:`flush` once it is released, so a listener may
    call the engine, ``refresh_store`` included; :meth:`send` shields the sender from
    each listener."""

    def __init__(self, logger: Logger) -> None:
        self._logger = logger
        self._lock = threading.Lock()
        self._items: tuple[StoreListener, ...] = ()
        self._queue: list[StoreEvent] = []
        self._flushing = threading.local()

    def queue(self, event: StoreEvent) -> None:
        with self._lock:
            self._queue.append(event)

    def flush(self) -> None:
        """Send the queued events in order. On a thread already sending (a listener that
        refreshed), the outer loop sends them: listeners are never nested."""
        if getattr(self._flushing, "on", False):
            return
        self._flushing.on = True
        try:
            while True:
                with self._lock:
                    if not self._queue:
                        return
                    event = self._queue.pop(0)
                self.send(event)
        finally:
            self._flushing.on = False

    def add(self, listener: object) -> None:
        if not callable(listener):
            raise TypeError(
                f"add_store_listener: expected a callable taking a StoreEvent, got "
                f"{type(listener).__name__}"
            )
        with self._lock:
            if listener not in self._items:
                self._items = (*self._items, listener)

    def remove(self, listener: object) -> bool:
        with self._lock:
            if listener not in self._items:
                return False
            self._items = tuple(x for x in self._items if x is not listener and x != listener)
            return True

    def send(self, event: StoreEvent) -> None:
        for listener in self._items:  # the tuple of this moment: (un)registering is safe
            try:
                listener(event)
            except Exception as e:  # a listener's bug is its own: logged, never raised
                name = getattr(listener, "__qualname__", type(listener).__name__)
                self._logger.system(
                    "ERROR",
                    f"store listener {name} raised {type(e).__name__} on {event.kind}: "
                    f"{str(e)[:MAX_EVENT_REASON_CHARS]}",
                )


def reason_of(error: BaseException) -> str:
    """An error as an event or the health view shows it (bounded)."""
    text = str(error)
    return text if len(text) <= MAX_EVENT_REASON_CHARS else text[:MAX_EVENT_REASON_CHARS] + "..."


def health_report(
    snap: Snapshot,
    loaded_at: float,
    refresher: Any,
    data: ContextData,
) -> dict[str, Any]:
    """The engine's health as plain data:

    - ``status``: ``ok``, or ``degraded`` when the last store refresh failed or a
      trusted issuer's last key fetch failed (the engine still decides: a degraded
      engine serves its last good store and keys);
    - ``store``: ``id``, ``name``, ``version``, ``digest``, ``source``, ``loaded_at``
      (when the store serving was swapped in, ISO 8601 UTC) and ``age_seconds``;
    - ``refresh``: ``None`` for a store not read from a URL, else how refreshing goes
      (``last_outcome``, ``last_success_at``, ``last_failure_at`` and
      ``last_failure_reason``, ``consecutive_failures``, counts, the validators kept);
    - ``trusted_issuers``: per issuer id, the keys held, their ``keys_age_seconds``, and
      the last key fetch failure (``contacted`` is false before the first token or
      prefetch made the engine fetch anything);
    - ``data``: the context data's entry count and bytes, and its limits.
    """
    now = time.time()
    store = snap.store
    issuers: dict[str, Any] = {}
    processor = snap.processor
    held = (
        {} if processor is None else {k.settings.issuer_id: k for k in processor.registry.issuers}
    )
    degraded = False
    for issuer_id, settings in store.trusted_issuers.items():
        keys = held.get(issuer_id)
        if keys is None:  # no token processor yet: nothing was fetched
            issuers[issuer_id] = {
                "name": settings.name,
                "issuer": None,
                "local_keys": False,
                "contacted": False,
                "keys": 0,
                "keys_age_seconds": None,
                "failing": False,
                "last_failure_seconds_ago": None,
                "last_failure_reason": None,
            }
            continue
        entry = keys.health()
        degraded = degraded or bool(entry.get("failing"))
        issuers[issuer_id] = entry
    refresh = None
    if refresher is not None:
        refresh = refresher.status()
        degraded = degraded or refresh["last_outcome"] == "failed"
    return {
        "status": "degraded" if degraded else "ok",
        "checked_at": format_timestamp(now),
        "store": {
            "id": store.id,
            "name": store.name,
            "version": store.version,
            "digest": store.digest,
            "source": store.source,
            "loaded_at": format_timestamp(loaded_at),
            "age_seconds": round(max(0.0, now - loaded_at), 3),
            "policies": len(store.all_policies()),
        },
        "refresh": refresh,
        "trusted_issuers": issuers,
        "data": data.stats(),
    }
