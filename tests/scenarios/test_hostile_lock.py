"""Hostile Lock servers: slow, dripping, 5xx, 401 loops, lying configuration documents,
huge bodies, malformed or endless event streams, an http:// redirect. Each ends in
bounded time and memory, with a ``PolangError`` or a logged failure, never a crash, and
never makes a decision wait."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from tests.tokens.oidc_server import SigningKey, blocked, body, drip, private_key, redirect, send

from lock.conftest import REPO, lock_config
from lock.lock_server import CONFIG_PATH, LockServer
from lock.test_client import decide, system_logs, wait_for
from polang import Engine
from polang.errors import LockError, PolangError

LOCAL_STORE = str(REPO / "examples" / "stores" / "store.parc")


def local(server: LockServer, **props: Any) -> dict[str, Any]:
    """An engine with its own store: the Lock only receives audit entries."""
    return lock_config(
        server, ENGINE_POLICY_STORE_ID=None, ENGINE_POLICY_STORE_LOCAL_FN=LOCAL_STORE, **props
    )


def test_a_5xx_audit_endpoint_retries_then_drops_and_counts(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    lock.audit_status["log"] = 503
    engine = make_engine(local(lock, ENGINE_LOCK_LOG_INTERVAL=0.02, ENGINE_LOCK_LOG_MAX_RETRIES=2))
    decide(engine, 4)
    wait_for(lambda: engine.lock.batches_dropped["log"] == 1)
    assert lock.posts["log"] == 3  # the first attempt and two retries
    assert engine.lock.entries_dropped["log"] == 4
    assert any("4 log entries dropped after 3 attempts" in m for m in system_logs(engine))
    del lock.audit_status["log"]  # the Lock is back: new entries go through
    decide(engine)
    wait_for(lambda: lock.entries("log"))


def test_a_401_loop_costs_a_bounded_number_of_token_requests(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(local(lock, ENGINE_LOCK_LOG_INTERVAL=0.02, ENGINE_LOCK_LOG_MAX_RETRIES=3))
    wait_for(lambda: engine.lock.ready)
    lock.always_401 = True
    decide(engine, 2)
    wait_for(lambda: engine.lock.batches_dropped["log"] == 1)
    # each of the 4 attempts: a POST refused, one new token, the POST refused again
    assert lock.posts["log"] == 8
    assert len(lock.token_grants) <= 5
    assert lock.entries("log") == []
    assert engine.lock.lock_health()["status"] == "degraded"


def test_a_decision_never_waits_on_a_stuck_audit_endpoint(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    release, entered = threading.Event(), threading.Event()
    lock.routes["/audit/log/bulk"] = blocked(release, lambda h: lock.serve(h), entered)
    engine = make_engine(
        local(
            lock,
            ENGINE_LOCK_LOG_INTERVAL=0.02,
            ENGINE_HTTP_REQUEST_TIMEOUT=30,
            ENGINE_LOCK_SHUTDOWN_TIMEOUT=0.5,
        )
    )
    decide(engine)
    entered.wait(10)
    # the sender is held inside its POST: decisions go on, and queue
    decide(engine, 50)
    assert not release.is_set()
    assert len(engine.lock.queues["log"]) == 50
    release.set()


def test_a_lying_configuration_document_switches_features_off(
    make_lock: Callable[..., LockServer], make_engine: Callable[..., Engine]
) -> None:
    lock = make_lock()
    lock.config_override = {
        "version": 7,
        "issuer": ["not", "a", "string"],
        "audit": {
            "log_endpoint": "https://evil.example/audit/log",  # another host: the token leaks
            "health_endpoint": lock.url("/audit/health").replace("https", "http"),
            "telemetry_endpoint": 12,
        },
        "config": "not an object",
    }
    engine = make_engine(
        local(
            lock,
            ENGINE_LOCK_LOG_INTERVAL=0.02,
            ENGINE_LOCK_HEALTH_INTERVAL=0.02,
            ENGINE_LOCK_TELEMETRY_INTERVAL=0.02,
            ENGINE_LOCK_LISTEN_SSE="enabled",
        )
    )
    wait_for(lambda: engine.lock.ready)
    decide(engine, 3)
    logs = "\n".join(system_logs(engine))
    assert "audit.log_endpoint 'https://evil.example/audit/log' refused" in logs
    assert "audit.health_endpoint" in logs and "audit.telemetry_endpoint" in logs
    assert "'config' is not an object" in logs
    assert "no usable config.sse_endpoint" in logs
    assert not engine.lock.wants_decisions  # nothing is queued for nowhere
    assert lock.posts == {"log": 0, "health": 0, "telemetry": 0}


def test_a_lock_without_a_policy_endpoint_cannot_serve_the_store(
    lock: LockServer, client_ssl_context: Any
) -> None:
    lock.config_override = {"version": "1", "issuer": lock.issuer, "audit": {}, "config": {}}
    with pytest.raises(LockError, match="names no policy_endpoint"):
        Engine(lock_config(lock), ssl_context=client_ssl_context)


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (body(b"[" * 10_000), "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES"),
        (body(b"[" * 5_000), "MAX_JSON_DEPTH"),
        (body(b"{" + b" " * 20_000 + b"}"), "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES"),
        (body(b"[1, 2]"), "not a JSON object"),
        (body(b"{not json"), "lock server configuration"),
        (drip(b'{"issuer": "x"}', every=0.3), "timed out after 1 s"),
        (lambda h: send(h, 503, b"later"), "503"),
    ],
)
def test_hostile_configuration_documents_fail_start_up_cleanly(
    lock: LockServer, client_ssl_context: Any, route: Any, message: str
) -> None:
    lock.routes[CONFIG_PATH] = route
    config = lock_config(
        lock, ENGINE_HTTP_REQUEST_TIMEOUT=1, ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES=8192
    )
    with pytest.raises(PolangError, match=message):
        Engine(config, ssl_context=client_ssl_context)


def test_an_http_redirect_is_refused(lock: LockServer, client_ssl_context: Any) -> None:
    lock.routes[CONFIG_PATH] = redirect(
        f"http://127.0.0.1:{lock.port}/.well-known/lock-server-configuration"
    )
    with pytest.raises(LockError, match="refused"):
        Engine(lock_config(lock), ssl_context=client_ssl_context)


def test_a_redirect_of_the_store_to_another_host_keeps_the_token(
    lock: LockServer, client_ssl_context: Any
) -> None:
    other = f"https://127.0.0.1:{lock.port}/policy/acme-docs"  # another origin (by name)
    lock.routes["/policy/acme-docs"] = redirect(other)
    with pytest.raises(PolangError, match="credentials stay with their origin"):
        Engine(lock_config(lock), ssl_context=client_ssl_context)


def test_a_forged_or_incomplete_software_statement_is_refused(
    make_lock: Callable[..., LockServer], client_ssl_context: Any
) -> None:
    lock = make_lock()
    claims = jwt.decode(lock.ssa(), options={"verify_signature": False})
    # the Lock's kid, another key: what a forger can make
    forged = SigningKey("RS256", lock.keys[0].kid, private_key("RS256", slot=1)).sign(claims)
    for ssa, message in [
        (forged, "signature does not verify"),
        (lock.ssa(org_id=None), "'org_id'"),
        (lock.ssa(exp=1), "expired"),
        (lock.ssa(iss="https://other.example"), "not the Lock's OpenID provider"),
        ("not-a-jwt", "ENGINE_LOCK_SSA_JWT"),
    ]:
        with pytest.raises(LockError, match=message):
            Engine(lock_config(lock, ENGINE_LOCK_SSA_JWT=ssa), ssl_context=client_ssl_context)
    assert lock.registrations == []  # nothing was registered with a bad statement


def test_a_huge_access_token_is_refused(lock: LockServer, client_ssl_context: Any) -> None:
    def huge(h: Any) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        h.rfile.read(n)
        doc = b'{"access_token": "' + b"a" * 20_000 + b'", "token_type": "Bearer"}'
        send(h, 200, doc, ctype="application/json")

    lock.routes["/token"] = huge
    with pytest.raises(LockError, match="MAX_CREDENTIAL_CHARS"):
        Engine(lock_config(lock), ssl_context=client_ssl_context)


def test_malformed_and_endless_event_streams(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(local(lock, ENGINE_LOCK_LISTEN_SSE="enabled"))
    client = engine.lock
    wait_for(lambda: client.sse_connections == 1)
    # endless: thousands of events, most of them unknown, are counted and forgotten
    for i in range(2000):
        lock.push(f"NOISE_{i}", "x" * 100)
    wait_for(lambda: client.events["unknown"] == 2000)
    assert set(client.events) == {"unknown"}
    noted = [m for m in system_logs(engine) if "is not known" in m]
    assert len(noted) == 11  # 1, 2, 4, ... 1024: a flood writes a few lines
    # an event that never ends (no line break) is cut at MAX_EVENT_BYTES: reconnect
    lock.push("", raw=b"data: " + b"x" * (1024 * 1024 + 10))
    wait_for(lambda: client.sse_connections == 2)
    assert any("MAX_EVENT_BYTES" in m for m in system_logs(engine))
    # after a reconnect, events are read again; a bad status list is refused and counted
    lock.push("STATUS_LIST", "not.a.jwt")
    refused = "STATUS_LIST: pushed status list refused"
    wait_for(lambda: any(m.startswith(refused) for m in system_logs(engine)))
    assert client.events["STATUS_LIST"] == 1
    decide(engine)  # decisions are unaffected


def test_an_event_stream_that_refuses_the_token(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(local(lock, ENGINE_LOCK_LISTEN_SSE="enabled"))
    wait_for(lambda: engine.lock.ready)
    grants = len(lock.token_grants)
    lock.always_401 = True
    lock.hang_up()
    wait_for(lambda: lock.unauthorized >= 2)
    assert len(lock.token_grants) > grants  # a new token is asked for after a 401
    assert any("401 Unauthorized; reconnecting in" in m for m in system_logs(engine))
    lock.always_401 = False
    wait_for(lambda: lock.sse_connections)  # back, once the Lock takes the token again


def test_a_provider_that_forgets_the_client_gets_a_new_registration(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(lock_config(lock, ENGINE_LOCK_LOG_INTERVAL=0.02))
    assert len(lock.registrations) == 1
    with lock._lock:
        lock.clients.clear()  # the provider restarted: the client and its token are gone
        lock.tokens.clear()
    decide(engine)
    wait_for(lambda: lock.entries("log"))
    assert len(lock.registrations) == 2
