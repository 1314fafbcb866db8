"""The event loop during a first validation, and requests per second through each web
integration against a bare endpoint (issue 28).

Run: ``python benchmarks/bench_async.py [--stall S] [--requests N] [--json]``. Nothing
leaves this machine: the identity providers, store and apps are the web examples'
(``examples/web_demo.py``, ``examples/*_app/app.py``). It asserts nothing.

1. **Loop lag.** The Acme provider holds its discovery document for ``--stall`` seconds. A
   coroutine ticks every 5 ms while one request validates a token for the first time
   (discovery and JWKS), three ways: the sync API called in the coroutine (what an
   ``async def`` endpoint does without an async API), the sync API in a worker thread
   (``asyncio.to_thread``), and ``AsyncEngine``. Reported: the longest a tick came late,
   and how many ticks the loop ran during the validation.
2. **Through the integrations.** Each framework's test client (in process: no sockets, so
   the framework's own cost is all that surrounds the decision) sends ``--requests``
   requests with a valid token to a guarded endpoint and to the same endpoint without the
   guard, in alternating blocks of 50. Reported: requests per second of each, and what
   the guard costs per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))  # the web examples and their providers

from web_demo import READ, Setup, setup  # noqa: E402

from polang import AsyncEngine, Engine, TokenInput  # noqa: E402

TICK = 0.005
BLOCK = 50


def stall_discovery(provider: Any, seconds: float) -> None:
    """Make ``provider`` hold its discovery document for ``seconds``."""
    handler = provider.httpd.RequestHandlerClass
    serve = handler.do_GET

    def slow(self: Any) -> None:
        if self.path.endswith("/.well-known/openid-configuration"):
            time.sleep(seconds)
        serve(self)

    handler.do_GET = slow


async def _lag(decide: Callable[[], Any]) -> dict[str, float]:
    """Tick while ``decide()`` (a coroutine) runs: the latest tick and the ticks run."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticking() -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append(time.perf_counter() - before - TICK)

    watcher = asyncio.create_task(ticking())
    await asyncio.sleep(0)
    started = time.perf_counter()
    result = await decide()
    elapsed = time.perf_counter() - started
    stop.set()
    await watcher
    assert result.decision is True
    return {
        "validation_ms": elapsed * 1e3,
        "max_lag_ms": max(lags) * 1e3,
        "ticks": len(lags),
        "expected_ticks": elapsed / TICK,
    }


def loop_lag(s: Setup) -> dict[str, Any]:
    out: dict[str, Any] = {}
    token = [TokenInput("Acme::Access_token", s.acme.token(scope=["docs:read"]))]
    resource = {"uid": {"type": "Acme::Document", "id": "plan"}, "attrs": {"classification": "x"}}

    def fresh() -> Engine:  # no keys yet: the first validation fetches them
        return Engine(s.engine.config, ssl_context=s.ssl_context)

    async def inline() -> Any:
        with fresh() as engine:
            return await _lag(lambda: _done(engine.authorize_multi_issuer(token, READ, resource)))

    async def threaded() -> Any:
        with fresh() as engine:
            return await _lag(
                lambda: asyncio.to_thread(engine.authorize_multi_issuer, token, READ, resource)
            )

    async def with_async_api() -> Any:
        engine = AsyncEngine(fresh())
        try:
            return await _lag(lambda: engine.authorize_multi_issuer(token, READ, resource))
        finally:
            await engine.aclose()

    for name, run in (
        ("sync API in the coroutine", inline),
        ("sync API in a thread", threaded),
        ("AsyncEngine", with_async_api),
    ):
        out[name] = asyncio.run(run())
    return out


async def _done(value: Any) -> Any:
    return value


# ---------------------------------------------------------------- the integrations


def _rate(call: Callable[[str], int], guarded: str, bare: str, n: int) -> dict[str, float]:
    times: dict[str, list[float]] = {guarded: [], bare: []}
    for path in (guarded, bare):  # warm: keys fetched, code generated, caches filled
        for _ in range(20):
            assert call(path) == 200, path
    done = 0
    while done < n:
        for path in (guarded, bare):
            started = time.perf_counter()
            for _ in range(BLOCK):
                call(path)
            times[path].append((time.perf_counter() - started) / BLOCK)
        done += BLOCK
    g, b = statistics.median(times[guarded]), statistics.median(times[bare])
    return {
        "guarded_per_s": 1 / g,
        "bare_per_s": 1 / b,
        "ratio": b / g,
        "guard_us": (g - b) * 1e6,
    }


async def _asgi_get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> int:
    """One GET through an ASGI app, no server; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("bench", 80),
    }
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def integrations(s: Setup, n: int) -> dict[str, Any]:
    token = s.acme.token(scope=["docs:read"], exp=int(time.time()) + 3600)
    headers = {"Authorization": f"Bearer {token}"}
    rows: dict[str, Any] = {}

    # FastAPI: the example's app (Authorize dependency, async API) plus a bare route,
    # called as an ASGI app on one event loop (the test client's thread portal costs
    # more than the app itself)
    from fastapi_app.app import create_app as fastapi_app

    app = fastapi_app(AsyncEngine(s.engine), s.database.with_name("fastapi.sqlite3"))

    @app.get("/bare/{doc_id}")
    async def bare(doc_id: str) -> dict[str, Any]:
        return {"doc": doc_id}

    loop = asyncio.new_event_loop()
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    try:
        rows["FastAPI dependency"] = _rate(
            lambda p: loop.run_until_complete(_asgi_get(app, p, raw)),
            "/documents/plan",
            "/bare/plan",
            n,
        )
    finally:
        loop.close()

    # Flask: the example's app (the extension's decorator) plus a bare route
    from flask_app.app import create_app as flask_app

    fapp = flask_app(s.engine, s.database.with_name("flask.sqlite3"))
    fapp.add_url_rule("/bare/<doc_id>", "bare", lambda doc_id: {"doc": doc_id})
    fclient = fapp.test_client()
    rows["Flask decorator"] = _rate(
        lambda p: fclient.get(p, headers=headers).status_code,
        "/documents/plan",
        "/bare/plan",
        n,
    )

    # Django: the example's project (decorator, DRF permission) plus a bare view
    from django_app import app as dj

    dj.configure(s.engine, s.database.with_name("django.sqlite3"))
    from django.http import JsonResponse
    from django.test import Client
    from django.urls import path

    dj.urlpatterns.extend(dj.urls(dj.documents_table()))
    dj.urlpatterns.append(path("bare/<str:doc_id>", lambda r, doc_id: JsonResponse({})))
    dclient = Client()
    rows["Django decorator"] = _rate(
        lambda p: dclient.get(p, headers=headers).status_code,
        "/documents/plan",
        "/bare/plan",
        n,
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stall", type=float, default=1.0, help="discovery delay, seconds")
    parser.add_argument("--requests", type=int, default=1000, help="per endpoint")
    parser.add_argument("--json", action="store_true", help="add one line of JSON")
    args = parser.parse_args()
    with setup() as s:
        stall_discovery(s.acme, args.stall)
        lag = loop_lag(s)
        print(f"event loop during a first validation (provider stalls {args.stall:g} s)")
        print(f"{'':28} {'validation':>11} {'longest lag':>12} {'ticks':>7} {'of':>6}")
        for name, r in lag.items():
            print(
                f"{name:28} {r['validation_ms']:9.0f}ms {r['max_lag_ms']:10.1f}ms "
                f"{r['ticks']:7d} {r['expected_ticks']:6.0f}"
            )
        rows = integrations(s, args.requests)
        print()
        print(f"through each integration ({args.requests} requests per endpoint, medians)")
        print(f"{'':20} {'guarded/s':>10} {'bare/s':>10} {'bare/guarded':>13} {'guard':>9}")
        for name, r in rows.items():
            print(
                f"{name:20} {r['guarded_per_s']:10.0f} {r['bare_per_s']:10.0f} "
                f"{r['ratio']:12.2f}x {r['guard_us']:7.0f}us"
            )
        if args.json:
            print(json.dumps({"loop_lag": lag, "integrations": rows}))


if __name__ == "__main__":
    main()
