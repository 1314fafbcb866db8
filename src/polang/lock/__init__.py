"""A fleet of engines under one Janssen Lock server (``ENGINE_LOCK``; docs/lock.md).

The engine finds the Lock (its configuration document), registers with the software
statement or uses the token it was given, fetches its store by id, ships decision logs,
health and telemetry, and takes pushed events, all on daemon threads: a decision only
appends to a bounded queue.
"""

from polang.errors import LockError

from .audit import AuditQueue
from .client import LockClient, LockHooks
from .events import MAX_EVENT_BYTES, Event, EventParser, EventStreamError
from .server import Credentials, LockEndpoints, read_configuration

__all__ = [
    "MAX_EVENT_BYTES",
    "AuditQueue",
    "Credentials",
    "Event",
    "EventParser",
    "EventStreamError",
    "LockClient",
    "LockEndpoints",
    "LockError",
    "LockHooks",
    "read_configuration",
]
