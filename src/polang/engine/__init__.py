"""The engine: a policy store compiled for decisions, plus tokens and logs.

One module per job (docs/design.md, "The engine package"):

- :mod:`.facade`: ``Engine``, the public face: it wires the parts and owns no decision
  logic of its own; the store's lifecycle, decision logs and metrics;
- :mod:`.snapshot`: the loaded store (policies compiled, entities as facts, token
  processor, check caches), swapped whole on a refresh;
- :mod:`.requests`: reading a request's action, principal, resource, context and
  entities in every form, and its schema check with the snapshot's caches;
- :mod:`.batch`: many requests on one snapshot, sharing what they can;
- :mod:`.results`: ``AuthorizeResult``, ``Response``, ``Diagnostics``, ``BatchItemError``;
- :mod:`.data`: the context data (``push_data``) that fills ``context.data``;
- :mod:`.health`: store events for listeners, and what ``engine.health()`` reports;
- :mod:`.diff`: ``diff(old, new)``, in process or in SQL (``Engine.diff``; imported when
  called).

The store comes from :mod:`polang.store`, policies are lowered and compiled by
:mod:`polang.datalog`, tokens are validated by :mod:`polang.tokens`, and every decision
is logged through :mod:`polang.logs`.
"""

from __future__ import annotations

from .data import DataEntry
from .facade import Engine, init_from_archive_bytes
from .health import StoreEvent
from .results import AuthorizeResult, BatchItemError, BatchResult, Diagnostics, Response

__all__ = [
    "AuthorizeResult",
    "BatchItemError",
    "BatchResult",
    "DataEntry",
    "Diagnostics",
    "Engine",
    "Response",
    "StoreEvent",
    "init_from_archive_bytes",
]
