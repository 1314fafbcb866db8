"""Audit entries for the Lock (decision logs, health, telemetry) and their bounded queues.

A decision only appends a tuple of what it already has to a queue (no formatting, no
I/O); the sender thread turns it into the Lock's entry. Each queue holds at most
``ENGINE_LOCK_LOG_CHANNEL_CAPACITY`` entries: when it is full the oldest entry is dropped
and counted (telemetry and the system log report the count). Every string of an entry
goes through the logs' redaction (no compact JWT survives), and a token appears only as
its id claim, as in the decision log.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from polang.logs import DecisionValues, format_timestamp, jsonable, uuid7_text

#: The most distinct policy ids telemetry counts per interval (a store holds a bounded
#: number, but a store change may bring new ones).
MAX_POLICY_STATS = 10_000


class AuditQueue:
    """A bounded queue that drops its oldest entry when full, counting the drops."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self.dropped = 0  # since the start
        self._unreported = 0

    def put(self, item: Any) -> None:
        with self._lock:
            if len(self._items) >= self.capacity:
                self._items.popleft()
                self.dropped += 1
                self._unreported += 1
            self._items.append(item)

    def take(self) -> list[Any]:
        """Everything queued, oldest first (the queue is left empty)."""
        with self._lock:
            items = list(self._items)
            self._items.clear()
        return items

    def unreported_drops(self) -> int:
        """Drops since the last call (for one system log line per send)."""
        with self._lock:
            n, self._unreported = self._unreported, 0
        return n

    def __len__(self) -> int:
        return len(self._items)


class DecisionRecord(NamedTuple):
    """A decision as the audit queue holds it: when it was queued, and its values
    (built into an entry by the sender)."""

    when: float
    decided: DecisionValues


def decision_entry(
    r: DecisionRecord, *, service: str, node: str, client_id: str | None
) -> dict[str, Any]:
    """The Lock's decision entry (Cedarling's shape): top-level what the Lock indexes,
    the rest in ``context_information``."""
    stamp = format_timestamp(r.when)
    d = r.decided
    rid = d.request_id if isinstance(d.request_id, str) else uuid7_text(d.request_id)
    tokens = (
        {} if not d.log_ids else {f"{t.mapping}#{t.index}": {t.claim: t.value} for t in d.log_ids}
    )
    entry: dict[str, Any] = {
        "creation_date": stamp,
        "event_time": stamp,
        "service": service,
        "node_name": node,
        "event_type": "Decision",
        "action": str(d.action),
        "decision_result": "ALLOW" if d.allow else "DENY",
        "requested_resource": str(d.resource),
    }
    if d.principal is not None:
        entry["principal_id"] = str(d.principal)
    if client_id is not None:
        entry["client_id"] = client_id
    entry["context_information"] = {
        "request_id": rid,
        "policystore_id": d.store_id,
        "policystore_version": d.store_version,
        "diagnostics": {"reason": list(d.reasons), "errors": list(d.errors)},
        "decision_time_micro_sec": d.micro_sec,
        "tokens": tokens,
        "dropped_tokens": [t.to_dict() for t in d.dropped],
    }
    out: dict[str, Any] = jsonable(entry)
    return out


class Telemetry:
    """Counters over one telemetry interval (thread-safe; a decision adds a few ints)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._policies: Counter[str] = Counter()

    def decision(self, allow: bool, reasons: Sequence[str], errors: int, dropped: int) -> None:
        with self._lock:
            ops = self._ops
            ops["authz.requests_total"] += 1
            ops["authz.decision_allow" if allow else "authz.decision_deny"] += 1
            if errors:
                self._errors["authz.policy_errors"] += errors
            if dropped:
                self._errors["jwt.validation_failed"] += dropped
            policies = self._policies
            for reason in reasons:
                if reason in policies or len(policies) < MAX_POLICY_STATS:
                    policies[reason] += 1

    def error(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self._errors[name] += n

    def operation(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self._ops[name] += n

    def take(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """(policy_stats, error_counters, operational_stats) since the last call."""
        with self._lock:
            out = (dict(self._policies), dict(self._errors), dict(self._ops))
            self._policies.clear()
            self._errors.clear()
            self._ops.clear()
        return out


def overall(components: Mapping[str, Mapping[str, Any]]) -> str:
    """``degraded`` when a component is, else ``running``."""
    bad = any(c.get("status") != "running" for c in components.values())
    return "degraded" if bad else "running"
