"""What the Lock costs a decision (docs/lock.md): the same engine without the Lock, with
decision logs queued for it, and with them sent while deciding.

Run: ``python benchmarks/bench_lock.py [--requests N] [--json]``. Nothing leaves this
machine: the Lock is the test server of ``tests/lock/`` on loopback HTTPS (a private CA
made with trustme), the store ``examples/stores/store.parc``, the request the README's.
It asserts nothing.

Three engines decide the same request in alternating blocks of 200, so load on a shared
machine hits them alike:

- ``no Lock``: the reference;
- ``Lock, queued``: ``ENGINE_LOCK_LOG_INTERVAL`` and ``..._TELEMETRY_INTERVAL`` of an hour,
  so what is measured is the decision path alone (a record appended to the bounded queue,
  the telemetry counters);
- ``Lock, sending``: both intervals 0.2 s, so the sender thread builds, serializes and
  POSTs the entries while the decisions run (it competes with them for the interpreter).

No peer engine ships decision logs in process from Python, so the ratio is against the
same engine without the Lock. Reported: median, p99 and mean microseconds per decision,
the ratio of medians, and what the Lock received.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test Lock server lives in tests/lock/

import trustme  # noqa: E402
from tests.lock.lock_server import LockServer  # noqa: E402

from polang import Engine  # noqa: E402

BLOCK = 200
ACTION = 'Acme::Action::"read"'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="decisions per engine")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()

    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    lock = LockServer(server_tls)
    lock.add_key("RS256")
    lock.add_token("bench")
    lock.start()
    store = str(ROOT / "examples" / "stores" / "store.parc")
    requests = ROOT / "examples" / "requests"
    principal = json.loads((requests / "alice.json").read_text())
    resource = json.loads((requests / "roadmap.json").read_text())

    def locked(interval: float) -> dict[str, Any]:
        return {
            "ENGINE_POLICY_STORE_LOCAL_FN": store,
            "ENGINE_LOCK": "enabled",
            "ENGINE_LOCK_SERVER_CONFIGURATION_URI": lock.configuration_uri,
            "ENGINE_LOCK_ACCESS_TOKEN": "bench",
            "ENGINE_LOCK_LOG_INTERVAL": interval,
            "ENGINE_LOCK_TELEMETRY_INTERVAL": interval,
            "ENGINE_LOCK_LOG_CHANNEL_CAPACITY": 100_000,
        }

    engines = {
        "no Lock": Engine({"ENGINE_POLICY_STORE_LOCAL_FN": store}),
        "Lock, queued": Engine(locked(3600), ssl_context=client_tls),
        "Lock, sending": Engine(locked(0.2), ssl_context=client_tls),
    }
    times: dict[str, list[float]] = {name: [] for name in engines}
    try:
        for engine in engines.values():  # warm-up, not timed
            for _ in range(BLOCK):
                engine.authorize_unsigned(ACTION, resource, principal=principal)
        done = 0
        while done < args.requests:
            for name, engine in engines.items():
                samples = times[name]
                for _ in range(min(BLOCK, args.requests - done)):
                    start = time.perf_counter()
                    engine.authorize_unsigned(ACTION, resource, principal=principal)
                    samples.append((time.perf_counter() - start) * 1e6)
            done += BLOCK
        sent = engines["Lock, sending"].lock
        for engine in engines.values():
            engine.close()
        received = len(lock.entries("log"))
    finally:
        lock.stop()

    base = statistics.median(times["no Lock"])
    rows: dict[str, dict[str, float]] = {}
    print(f"{'engine':<16}{'median':>9}{'p99':>9}{'mean':>9}{'x no Lock':>11}   (us/decision)")
    for name, samples in times.items():
        ordered = sorted(samples)
        row = {
            "median": statistics.median(ordered),
            "p99": ordered[int(len(ordered) * 0.99) - 1],
            "mean": statistics.fmean(ordered),
        }
        row["ratio"] = row["median"] / base
        rows[name] = row
        print(
            f"{name:<16}{row['median']:>9.1f}{row['p99']:>9.1f}{row['mean']:>9.1f}"
            f"{row['ratio']:>11.2f}"
        )
    dropped = sum(sent.entries_dropped.values()) + sum(q.dropped for q in sent.queues.values())
    print(
        f"the Lock received {received} decision entries from both Lock engines (the "
        f"queued one's at close); {dropped} dropped"
    )
    if args.json:
        print(json.dumps({"rows": rows, "received": received, "dropped": dropped}))


if __name__ == "__main__":
    main()
