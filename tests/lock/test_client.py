"""The Lock client against a real Lock server on loopback HTTPS (tests/lock/lock_server.py):
registration, the token and its refresh, the store by id, every audit entry, pushed
events, shutdown."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from polang import Engine
from polang.errors import LockError

from .conftest import STORE_ID, lock_config
from .lock_server import LockServer

ACTION = 'Acme::Action::"read"'


def load(name: str) -> Any:
    from .conftest import REPO

    return json.loads((REPO / "examples" / "requests" / name).read_text())


def decide(engine: Engine, n: int = 1) -> None:
    for _ in range(n):
        engine.authorize_unsigned(ACTION, load("roadmap.json"), principal=load("alice.json"))


def wait_for(cond: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll until ``cond()`` is truthy (a bound for a hung test, not a timing check)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError("the condition never held")


def system_logs(engine: Engine) -> list[str]:
    return [e["msg"] for e in engine.get_logs_by_tag("System")]


def test_store_by_id_after_registration_and_token(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    config = lock_config(lock)
    engine = make_engine(config)
    assert engine.store.id == STORE_ID
    [reg] = lock.registrations
    assert reg["token_endpoint_auth_method"] == "client_secret_basic"
    assert reg["grant_types"] == ["client_credentials"]
    assert reg["software_statement"] == config["ENGINE_LOCK_SSA_JWT"]
    assert reg["access_token_as_jwt"] is True
    [grant] = lock.token_grants
    assert grant["client_id"] == "client-1" and grant["grant_type"] == "client_credentials"
    assert "https://jans.io/oauth/lock/policy.readonly" in grant["scope"].split()
    [auth] = lock.store_fetches
    assert auth.startswith("Bearer ")
    decision = engine.authorize_unsigned(ACTION, load("roadmap.json"), principal=load("alice.json"))
    assert decision.decision is True


def test_decision_health_and_telemetry_entries_arrive(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    config = lock_config(
        lock,
        ENGINE_LOCK_LOG_INTERVAL=0.05,
        ENGINE_LOCK_HEALTH_INTERVAL=0.05,
        ENGINE_LOCK_TELEMETRY_INTERVAL=0.05,
    )
    engine = make_engine(config)
    decide(engine, 3)
    logs = wait_for(lambda: len(lock.entries("log")) >= 3 and lock.entries("log"))
    entry = logs[0]
    assert entry["event_type"] == "Decision"
    assert entry["decision_result"] == "ALLOW"
    assert entry["action"] == ACTION
    assert entry["requested_resource"] == 'Acme::Document::"roadmap"'
    assert entry["principal_id"] == 'Acme::User::"alice"'
    assert entry["service"] == "polang"
    assert entry["node_name"] == engine.logger.pdp_id
    assert entry["client_id"] == "client-1"
    assert entry["creation_date"] == entry["event_time"]
    ctx = entry["context_information"]
    assert ctx["policystore_id"] == STORE_ID and ctx["policystore_version"] == "1.2.0"
    assert ctx["diagnostics"]["reason"] == ["org-members-read"]
    assert isinstance(ctx["decision_time_micro_sec"], int)
    # the decision log of the engine and the Lock's entry share the request id
    assert engine.get_logs_by_request_id(ctx["request_id"])
    health = wait_for(lambda: lock.entries("health"))[0]
    assert health["status"] == "running"
    assert set(health["engine_status"]) == {
        "core",
        "policy_store",
        "trusted_issuers",
        "data",
        "lock",
    }
    assert health["engine_status"]["policy_store"]["policystore_version"] == "1.2.0"

    def counted() -> list[dict[str, Any]]:
        return [
            t
            for t in lock.entries("telemetry")
            if t["operational_stats"].get("authz.requests_total")
        ]

    tele = wait_for(counted)[0]
    assert tele["operational_stats"]["authz.requests_total"] == 3
    assert tele["operational_stats"]["authz.decision_allow"] == 3
    assert tele["policy_stats"] == {"org-members-read": 3}
    assert tele["interval_secs"] == 0.05
    # no secret, no whole token in anything the Lock received
    sent = json.dumps([lock.entries(k) for k in ("log", "health", "telemetry")])
    assert config["ENGINE_LOCK_SSA_JWT"] not in sent
    assert not any(t in sent for t in lock.tokens)
    assert not any(s in sent for s in lock.clients.values())


def test_full_queue_drops_the_oldest_and_counts(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(
        lock_config(
            lock,
            ENGINE_LOCK_LOG_INTERVAL=3600,
            ENGINE_LOCK_TELEMETRY_INTERVAL=3600,
            ENGINE_LOCK_LOG_CHANNEL_CAPACITY=3,
        )
    )
    wait_for(lambda: engine.lock.ready)
    for i in range(10):
        engine.authorize_unsigned(
            ACTION,
            {**load("roadmap.json"), "uid": {"type": "Acme::Document", "id": f"d{i}"}},
            principal=load("alice.json"),
        )
    assert len(engine.lock.queues["log"]) == 3
    engine.flush_lock()
    logs = wait_for(lambda: lock.entries("log"))
    assert [e["requested_resource"] for e in logs] == [f'Acme::Document::"d{i}"' for i in (7, 8, 9)]
    tele = wait_for(lambda: lock.entries("telemetry"))
    assert tele[0]["error_counters"]["lock.log_entries_dropped"] == 7
    assert any("7 log entries dropped" in m for m in system_logs(engine))


def test_close_flushes_what_is_queued(lock: LockServer, client_ssl_context: Any) -> None:
    engine = Engine(
        lock_config(lock, ENGINE_LOCK_LOG_INTERVAL=3600), ssl_context=client_ssl_context
    )
    decide(engine, 5)
    engine.close()
    assert len(lock.entries("log")) == 5


def test_the_token_is_refreshed_before_it_expires_and_after_a_401(
    make_lock: Callable[..., LockServer], make_engine: Callable[..., Engine]
) -> None:
    lock = make_lock(token_lifetime=2)
    engine = make_engine(lock_config(lock, ENGINE_LOCK_LOG_INTERVAL=0.05))
    decide(engine)
    wait_for(lambda: lock.entries("log"))
    # the lifetime is 2 s: renewed when 20% of it (and 1 s) is left, so decisions
    # sent over the next second see a new token, and the Lock never refused one
    wait_for(lambda: (decide(engine), len(lock.token_grants) >= 2)[1])
    assert lock.unauthorized == 0
    assert len(lock.registrations) == 1  # the client is registered once
    with lock._lock:
        lock.tokens.clear()  # the Lock forgets every token: the next POST gets a 401
    before = len(lock.token_grants)
    wait_for(lambda: lock.entries("log") and not engine.lock.queues["log"])
    entries = len(lock.entries("log"))
    decide(engine)
    wait_for(lambda: len(lock.entries("log")) > entries)
    assert len(lock.token_grants) > before
    assert lock.unauthorized >= 1


def test_an_access_token_given_replaces_registration(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    lock.add_token("given-token")
    engine = make_engine(
        lock_config(
            lock,
            ENGINE_LOCK_SSA_JWT=None,
            ENGINE_LOCK_ACCESS_TOKEN_JWT="given-token",  # Cedarling's name of the property
            ENGINE_LOCK_LOG_INTERVAL=0.05,
        )
    )
    decide(engine)
    wait_for(lambda: lock.entries("log"))
    assert lock.registrations == [] and lock.token_grants == []
    assert lock.store_fetches == ["Bearer given-token"]
    assert "client_id" not in lock.entries("log")[0]


def test_pushed_events(lock: LockServer, make_engine: Callable[..., Engine]) -> None:
    engine = make_engine(
        lock_config(lock, ENGINE_LOCK_LISTEN_SSE="enabled", ENGINE_LOCK_LOG_INTERVAL=3600)
    )
    client = engine.lock
    wait_for(lambda: client.sse_connections == 1)
    # FORCE_REPORT: the queue goes now, not in an hour
    decide(engine, 2)
    lock.push("FORCE_REPORT")
    wait_for(lambda: len(lock.entries("log")) == 2)
    # CONFIG_UPDATE: the store is fetched again now
    fetched = len(lock.store_fetches)
    lock.push("CONFIG_UPDATE")
    wait_for(lambda: len(lock.store_fetches) > fetched)
    # unknown events are logged and ignored
    lock.push("SOMETHING_NEW", "x")
    wait_for(lambda: client.events["unknown"] == 1)
    assert any(
        "'SOMETHING_NEW' is not known; ignored (1 unknown so far)" in m for m in system_logs(engine)
    )
    # reconnects carry the last event id
    lock.hang_up()
    wait_for(lambda: len(lock.sse_connections) == 2)
    assert lock.sse_connections == [None, "3"]
    assert client.events["FORCE_REPORT"] == 1 and client.events["CONFIG_UPDATE"] == 1


def test_config_update_with_a_bad_store_keeps_the_last_good_one(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(
        lock_config(
            lock,
            ENGINE_LOCK_LISTEN_SSE="enabled",
            ENGINE_LOCK_HEALTH_INTERVAL=3600,
        )
    )
    wait_for(lambda: engine.lock.sse_connections == 1)
    good = lock.stores[STORE_ID]
    lock.stores[STORE_ID] = good[:-200]  # a truncated archive: refused whole
    lock.push("CONFIG_UPDATE")
    wait_for(lambda: any("refresh failed" in m for m in system_logs(engine)))
    assert engine.store.version == "1.2.0"
    decide(engine)
    lock.push("FORCE_REPORT")
    health = wait_for(lambda: lock.entries("health"))[-1]
    assert health["status"] == "degraded"
    assert health["engine_status"]["policy_store"]["status"] == "degraded"
    assert (
        "archive" in health["engine_status"]["policy_store"]["error"].lower()
        or health["engine_status"]["policy_store"]["error"]
    )


def test_lock_down_with_a_local_store_starts_and_keeps_trying(
    make_engine: Callable[..., Engine],
) -> None:
    from .conftest import REPO

    engine = make_engine(
        {
            "ENGINE_LOCK": "enabled",
            "ENGINE_LOCK_SERVER_CONFIGURATION_URI": "https://127.0.0.1:9/.well-known/lock-server-configuration",
            "ENGINE_LOCK_ACCESS_TOKEN": "t",
            "ENGINE_LOCK_LOG_INTERVAL": 0.05,
            "ENGINE_POLICY_STORE_LOCAL_FN": str(REPO / "examples" / "stores" / "store.parc"),
            "ENGINE_HTTP_REQUEST_TIMEOUT": 1,
            "ENGINE_LOG_TYPE": "memory",
        }
    )
    decide(engine, 2)  # decisions are made (and queued) while the Lock is away
    assert not engine.lock.ready
    wait_for(lambda: any("lock server unreachable" in m for m in system_logs(engine)))
    assert len(engine.lock.queues["log"]) == 2


def test_lock_down_with_the_store_only_there_fails_start_up(
    client_ssl_context: Any,
) -> None:
    config = {
        "ENGINE_LOCK": "enabled",
        "ENGINE_LOCK_SERVER_CONFIGURATION_URI": "https://127.0.0.1:9/.well-known/lock-server-configuration",
        "ENGINE_LOCK_ACCESS_TOKEN": "t",
        "ENGINE_POLICY_STORE_ID": STORE_ID,
        "ENGINE_HTTP_REQUEST_TIMEOUT": 1,
        "ENGINE_HTTP_MAX_RETRIES": 0,
    }
    with pytest.raises(LockError, match="lock server configuration"):
        Engine(config, ssl_context=client_ssl_context)


def test_close_ends_the_event_stream_at_once(lock: LockServer, client_ssl_context: Any) -> None:
    engine = Engine(
        lock_config(lock, ENGINE_LOCK_LISTEN_SSE="enabled"), ssl_context=client_ssl_context
    )
    wait_for(lambda: engine.lock.sse_connections == 1)
    listener = engine.lock._threads[1]
    engine.close()  # the stream is silent: its read is ended, not waited out
    listener.join(5)
    assert not listener.is_alive()


def test_a_lock_that_comes_back_gets_what_was_queued(
    make_lock: Callable[..., LockServer], make_engine: Callable[..., Engine]
) -> None:
    from .conftest import REPO

    lock = make_lock()
    lock.routes["/.well-known/lock-server-configuration"] = lambda h: lock._send(
        h, 503, b"starting", "text/plain"
    )
    lock.add_token("given")
    engine = make_engine(
        {
            "ENGINE_LOCK": "enabled",
            "ENGINE_LOCK_SERVER_CONFIGURATION_URI": lock.configuration_uri,
            "ENGINE_LOCK_ACCESS_TOKEN": "given",
            "ENGINE_LOCK_LOG_INTERVAL": 0.02,
            "ENGINE_POLICY_STORE_LOCAL_FN": str(REPO / "examples" / "stores" / "store.parc"),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_LOG_TYPE": "memory",
        }
    )
    decide(engine, 2)
    wait_for(lambda: engine.lock.lock_health()["status"] == "degraded")
    del lock.routes["/.well-known/lock-server-configuration"]  # the Lock is up
    wait_for(lambda: len(lock.entries("log")) == 2)
    assert engine.lock.lock_health()["status"] == "running"


def test_a_pushed_status_list_is_verified_and_taken(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    """A legacy JSON store from the Lock whose trusted issuer is the Lock's provider: a
    STATUS_LIST event signed by that issuer replaces the list at once, without a fetch."""
    from tests.store.storekit import legacy_doc

    issuer = {
        "name": "Idp",
        "openid_configuration_endpoint": lock.discovery_url,
        "token_metadata": {"access_token": {"entity_type_name": "Idp::Access_token"}},
    }
    lock.stores["app-store"] = json.dumps(
        legacy_doc("app-store", trusted_issuers={"idp": issuer})
    ).encode()
    engine = make_engine(
        lock_config(lock, ENGINE_POLICY_STORE_ID="app-store", ENGINE_LOCK_LISTEN_SSE="enabled")
    )
    assert engine.store.id == "app-store"  # legacy JSON, chosen by id
    wait_for(lambda: engine.lock.sse_connections == 1)
    uri = lock.set_status_list("1", [0, 1])
    lock.push("STATUS_LIST", lock.status_list_jwt("1"))
    wait_for(lambda: any(f"status list {uri} updated" in m for m in system_logs(engine)))
    assert lock.requests[lock.status_path("1")] == 0  # taken as pushed, never fetched
    # a list the issuer did not sign is refused, and counted
    lock.status_lists["1"].signer = lock.add_key("RS256", kid="rogue", slot=1, publish=False)
    lock.push("STATUS_LIST_UPDATE", lock.status_list_jwt("1"))
    refused = "STATUS_LIST_UPDATE: pushed status list refused"
    wait_for(lambda: any(refused in m for m in system_logs(engine)))
    assert engine.lock.events["STATUS_LIST_UPDATE"] == 1


def test_decision_entries_never_carry_a_token(
    lock: LockServer, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(lock_config(lock, ENGINE_LOCK_LOG_INTERVAL=0.02))
    jwt_like = lock.token()  # a caller who puts a token in an id
    resource = {**load("roadmap.json"), "uid": {"type": "Acme::Document", "id": jwt_like}}
    engine.authorize_unsigned(ACTION, resource, principal=load("alice.json"))
    [entry] = wait_for(lambda: lock.entries("log"))
    assert jwt_like not in json.dumps(entry)
    assert "[redacted JWT]" in entry["requested_resource"]


def test_close_is_bounded_when_the_lock_hangs(lock: LockServer, client_ssl_context: Any) -> None:
    import threading

    from tests.tokens.oidc_server import blocked

    release, entered = threading.Event(), threading.Event()
    lock.routes["/audit/log/bulk"] = blocked(release, lambda h: lock.serve(h), entered)
    engine = Engine(
        lock_config(
            lock,
            ENGINE_LOCK_LOG_INTERVAL=0.02,
            ENGINE_HTTP_REQUEST_TIMEOUT=30,
            ENGINE_LOCK_SHUTDOWN_TIMEOUT=0.2,
        ),
        ssl_context=client_ssl_context,
    )
    try:
        decide(engine)
        entered.wait(10)
        decide(engine, 3)  # queued behind the stuck POST
        engine.close()  # returns after ENGINE_LOCK_SHUTDOWN_TIMEOUT, not the HTTP timeout
        assert engine.lock.entries_dropped["log"] == 3
        assert any("not sent before ENGINE_LOCK_SHUTDOWN_TIMEOUT" in m for m in system_logs(engine))
    finally:
        release.set()


def test_a_cedarling_bootstrap_file_renamed_is_accepted(
    lock: LockServer, client_ssl_context: Any, tmp_path: Any
) -> None:
    """Cedarling's Lock properties, as its bootstrap files set them, with CEDARLING_
    renamed ENGINE_ (docs/lock.md#running-a-fleet)."""
    from polang.config import Config

    bootstrap = {
        "CEDARLING_APPLICATION_NAME": "fleet-member",
        "CEDARLING_POLICY_STORE_ID": STORE_ID,
        "CEDARLING_LOCK": "enabled",
        "CEDARLING_LOCK_SERVER_CONFIGURATION_URI": lock.configuration_uri,
        "CEDARLING_LOCK_DYNAMIC_CONFIGURATION": "disabled",
        "CEDARLING_LOCK_SSA_JWT": lock.ssa(),
        "CEDARLING_LOCK_LOG_INTERVAL": 1,
        "CEDARLING_LOCK_HEALTH_INTERVAL": 0,
        "CEDARLING_LOCK_TELEMETRY_INTERVAL": 0,
        "CEDARLING_LOCK_LISTEN_SSE": "disabled",
        "CEDARLING_LOCK_ACCEPT_INVALID_CERTS": "disabled",
        "CEDARLING_LOCK_TRANSPORT": "rest",
        "CEDARLING_LOCK_LOG_CHANNEL_CAPACITY": 100,
        "CEDARLING_LOCK_LOG_MAX_RETRIES": 5,
    }
    path = tmp_path / "bootstrap.json"
    text = json.dumps(bootstrap).replace('"CEDARLING_', '"ENGINE_')
    path.write_text(text)
    engine = Engine(Config.from_file(path), ssl_context=client_ssl_context)
    try:
        assert engine.store.id == STORE_ID
        decide(engine)
    finally:
        engine.close()
    [entry] = lock.entries("log")  # sent by close()
    assert entry["service"] == "fleet-member"
