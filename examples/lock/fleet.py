"""One engine under a Janssen Lock server, end to end, on loopback (docs/lock.md).

Run from a checkout with the test extra installed (``pip install -e ".[test]"``):
``python examples/lock/fleet.py``. Nothing leaves this machine:

1. The test Lock server of ``tests/lock/`` starts on loopback HTTPS (a private CA made
   with trustme): it is also the OpenID provider that signs the software statement,
   registers clients and grants tokens, and it serves ``examples/stores/store.parc`` as the
   store ``acme-docs``.
2. An engine starts with only ``ENGINE_LOCK_*`` properties and ``ENGINE_POLICY_STORE_ID``:
   it finds the Lock, verifies the statement, registers, gets a token and fetches its
   store by id.
3. It decides a few requests; the Lock receives the decision logs, health and telemetry,
   and pushes ``FORCE_REPORT`` and ``CONFIG_UPDATE`` events; ``close()`` sends the rest.
"""

from __future__ import annotations

import json
import ssl
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the test Lock server lives in tests/lock/

import trustme  # noqa: E402
from tests.lock.lock_server import LockServer  # noqa: E402

from polang import Engine  # noqa: E402

REQUESTS = REPO / "examples" / "requests"


def wait_for(what: Any, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not what() and time.monotonic() < end:
        time.sleep(0.02)


def main() -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)

    lock = LockServer(server_tls)
    lock.add_key("RS256")
    lock.stores["acme-docs"] = (REPO / "examples" / "stores" / "store.parc").read_bytes()
    lock.start()
    print(f"lock server: {lock.configuration_uri}")
    try:
        engine = Engine(
            {
                "ENGINE_APPLICATION_NAME": "documents-api",
                "ENGINE_LOCK": "enabled",
                "ENGINE_LOCK_SERVER_CONFIGURATION_URI": lock.configuration_uri,
                "ENGINE_LOCK_SSA_JWT": lock.ssa(),
                "ENGINE_POLICY_STORE_ID": "acme-docs",
                "ENGINE_LOCK_LOG_INTERVAL": 0.2,
                "ENGINE_LOCK_HEALTH_INTERVAL": 0.2,
                "ENGINE_LOCK_TELEMETRY_INTERVAL": 0.2,
                "ENGINE_LOCK_LISTEN_SSE": "enabled",
            },
            ssl_context=client_tls,
        )
        print(f"store {engine.store.id} version {engine.store.version}, fetched by id")
        name = lock.registrations[0]["client_name"]
        print(f"registered as {name!r}: {engine.lock.credentials.client_id}")
        alice = json.loads((REQUESTS / "alice.json").read_text())
        roadmap = json.loads((REQUESTS / "roadmap.json").read_text())
        for action in ("read", "edit"):
            result = engine.authorize_unsigned(
                f'Acme::Action::"{action}"', roadmap, principal=alice
            )
            print(f"{'ALLOW' if result.decision else 'DENY '}  alice {action}s the roadmap")
        wait_for(lambda: engine.lock.sse_connections)
        lock.push("FORCE_REPORT")
        wait_for(lambda: len(lock.entries("log")) == 2)
        fetches = len(lock.store_fetches)
        lock.push("CONFIG_UPDATE")
        wait_for(lambda: len(lock.store_fetches) > fetches)
        print(f"events handled: {dict(sorted(engine.lock.events.items()))}")
        engine.close()
        for entry in lock.entries("log"):
            print(
                f"lock got a decision: {entry['decision_result']} {entry['action']} on "
                f"{entry['requested_resource']} by {entry['principal_id']}"
            )
        health = lock.entries("health")
        print(f"lock got health: {health[-1]['status']} ({len(health)} entries)")
        total = sum(
            t["operational_stats"].get("authz.requests_total", 0) for t in lock.entries("telemetry")
        )
        print(f"lock got telemetry: {total} decisions counted")
    finally:
        lock.stop()


if __name__ == "__main__":
    main()
