"""Fixtures: a test Lock server on loopback HTTPS and engines configured for it."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine

from .lock_server import LockServer

REPO = Path(__file__).resolve().parents[2]
STORE = (REPO / "examples" / "stores" / "store.parc").read_bytes()
STORE_ID = "acme-docs"


@pytest.fixture
def make_lock(server_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., LockServer]]:
    started: list[LockServer] = []

    def make(**kw: Any) -> LockServer:
        server = LockServer(server_ssl_context, **kw)
        server.add_key("RS256")
        server.stores.setdefault(STORE_ID, STORE)
        server.start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def lock(make_lock: Callable[..., LockServer]) -> LockServer:
    return make_lock()


def lock_config(server: LockServer, **props: Any) -> dict[str, Any]:
    """Properties for an engine under ``server``: store by id, registration by SSA."""
    cfg: dict[str, Any] = {
        "ENGINE_LOCK": "enabled",
        "ENGINE_LOCK_SERVER_CONFIGURATION_URI": server.configuration_uri,
        "ENGINE_LOCK_SSA_JWT": server.ssa(),
        "ENGINE_POLICY_STORE_ID": STORE_ID,
        "ENGINE_HTTP_REQUEST_TIMEOUT": 2,
        "ENGINE_HTTP_MAX_RETRIES": 0,
        "ENGINE_LOCK_SHUTDOWN_TIMEOUT": 2,
        "ENGINE_LOG_TYPE": "memory",
        "ENGINE_LOG_LEVEL": "INFO",
    }
    cfg.update(props)
    return {k: v for k, v in cfg.items() if v is not None}


@pytest.fixture
def make_engine(client_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(config: dict[str, Any]) -> Engine:
        engine = Engine(config, ssl_context=client_ssl_context)
        made.append(engine)
        return engine

    yield make
    for e in made:
        e.close()
