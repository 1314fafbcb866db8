"""Scenario suites (hostile input, other tools' stores and tokens, the public API audit) run
against the same fixtures as the packages' own tests: the loopback OpenID providers and
token processors (``tokens``), the store servers (``store``) and the test Lock server
(``lock``)."""

from lock.conftest import lock, make_engine, make_lock
from store.conftest import make_store, server
from tokens.conftest import clock, make_processor, make_provider, oidc

__all__ = [
    "clock",
    "lock",
    "make_engine",
    "make_lock",
    "make_processor",
    "make_provider",
    "make_store",
    "oidc",
    "server",
]
