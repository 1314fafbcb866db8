"""``AsyncEngine``: the sync engine's answers, and an event loop that never waits for the
network (real providers on loopback HTTPS, real signed tokens)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from polang import AsyncEngine, Engine, TokenError, TokenInput
from polang.engine import aio
from tokens.oidc_server import OidcProvider, body
from tokens.test_engine_multi_issuer import ACCESS, PARTNER, READ, SCHEMA, doc, write_store

STALL = 1.0  # seconds the slow provider holds its discovery document
TICK = 0.01  # seconds between two ticks of the watching coroutine


@pytest.fixture
def providers(server_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., OidcProvider]]:
    started: list[OidcProvider] = []

    def make(prefix: str, alg: str = "RS256") -> OidcProvider:
        p = OidcProvider(server_ssl_context, prefix=prefix)
        p.add_key(alg)
        p.start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


def stalled(provider: OidcProvider, seconds: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """The provider's discovery document, after ``seconds`` (an identity provider that is
    slow to answer)."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        provider.serve_discovery(h)

    return handle


def issuers(acme: OidcProvider, partner: OidcProvider) -> dict[str, Any]:
    return {
        "acme": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": ACCESS}},
        },
        "partner": {
            "name": "Partner",
            "openid_configuration_endpoint": partner.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": PARTNER}},
        },
    }


def config(store: Path, **extra: Any) -> dict[str, Any]:
    return {
        "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
        "ENGINE_HTTP_MAX_RETRIES": 0,
        "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
        **extra,
    }


@pytest.fixture
def two(tmp_path: Path, providers: Callable[..., OidcProvider]) -> tuple[Path, Any, Any]:
    acme, partner = providers("/realms/acme"), providers("/partner", "ES256")
    return write_store(tmp_path / "docs", SCHEMA, issuers(acme, partner)), acme, partner


async def ticking(stop: asyncio.Event, lags: list[float]) -> None:
    """Tick every ``TICK`` seconds until ``stop``, recording how late each tick was."""
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(TICK)
        lags.append(time.monotonic() - before - TICK)


def test_the_loop_keeps_running_during_a_first_validation(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, _ = two
    acme.routes[acme.discovery_path] = stalled(acme, STALL)

    async def main() -> tuple[Any, list[float]]:
        engine = await AsyncEngine.create(config(store), ssl_context=client_ssl_context)
        stop, lags = asyncio.Event(), []
        watcher = asyncio.create_task(ticking(stop, lags))
        await asyncio.sleep(0)
        token = TokenInput(ACCESS, acme.token(scope=["docs:read"]))
        result = await engine.authorize_multi_issuer([token], READ, doc())
        stop.set()
        await watcher
        await engine.aclose()
        return result, lags

    result, lags = asyncio.run(main())
    assert result.decision is True
    assert acme.requests[acme.discovery_path] == 1
    # a blocked loop ticks once, late by the whole stall; a free one ticks all along
    assert len(lags) >= 0.25 * STALL / TICK, len(lags)
    assert max(lags) < STALL / 2, max(lags)


def test_same_answers_as_the_sync_engine(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, partner = two
    now = int(time.time())
    cases = [
        [TokenInput(ACCESS, acme.token(scope=["docs:read"]))],
        [TokenInput(ACCESS, acme.token(scope=["docs:list"]))],
        [
            TokenInput(ACCESS, acme.token(exp=now - 60, scope=["docs:read"])),
            TokenInput(PARTNER, partner.token(role=["editor"])),
        ],
    ]
    with Engine(config(store), ssl_context=client_ssl_context) as sync:
        expected = [sync.authorize_multi_issuer(t, READ, doc()) for t in cases]

    async def main() -> list[Any]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            return [await a.authorize_multi_issuer(t, READ, doc()) for t in cases]

    got = asyncio.run(main())
    for e, g in zip(expected, got, strict=True):
        assert g.decision == e.decision
        assert g.response.diagnostics.reason == e.response.diagnostics.reason
        assert [(d.index, d.kind) for d in g.dropped_tokens or []] == [
            (d.index, d.kind) for d in e.dropped_tokens or []
        ]


def test_concurrent_first_requests_share_one_fetch(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, _ = two
    acme.routes[acme.discovery_path] = stalled(acme, 0.3)

    async def main() -> tuple[list[Any], int]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            tokens = [[TokenInput(ACCESS, acme.token(scope=["docs:read"]))] for _ in range(20)]
            results = await asyncio.gather(
                *(a.authorize_multi_issuer(t, READ, doc()) for t in tokens)
            )
            return list(results), a.fetches_started

    results, started = asyncio.run(main())
    assert all(r.decision for r in results)
    assert acme.requests[acme.discovery_path] == 1
    assert acme.requests[acme.jwks_path] == 1
    assert started == 1  # one fetch thread for twenty requests


def test_ready_reports_each_issuer(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, partner = two
    partner.fail[partner.discovery_path] = 503
    acme.routes[acme.discovery_path] = stalled(acme, 0.2)

    async def main() -> tuple[dict[str, str | None], Any]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            report = await a.ready()
            before = acme.requests[acme.jwks_path]
            token = TokenInput(ACCESS, acme.token(scope=["docs:read"]))
            result = await a.authorize_multi_issuer([token], READ, doc())
            assert acme.requests[acme.jwks_path] == before  # warmed: no fetch on the request
            return report, result

    report, result = asyncio.run(main())
    assert report["acme"] is None
    assert report["partner"] is not None and "503" in report["partner"]
    assert result.decision is True


def test_sync_prefetch_reports_each_issuer(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, partner = two
    partner.fail[partner.jwks_path] = 404
    with Engine(config(store), ssl_context=client_ssl_context) as engine:
        report = engine.prefetch()
    assert report["acme"] is None
    assert report["partner"] is not None and "JWKS fetch failed" in report["partner"]
    assert acme.requests[acme.jwks_path] == 1


def test_a_provider_that_never_answers_ends_in_a_token_error(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, _ = two
    acme.routes[acme.discovery_path] = stalled(acme, 3.0)

    async def main() -> tuple[BaseException | None, list[float]]:
        cfg = config(store, ENGINE_HTTP_REQUEST_TIMEOUT=0.5)
        async with await AsyncEngine.create(cfg, ssl_context=client_ssl_context) as a:
            stop, lags = asyncio.Event(), []
            watcher = asyncio.create_task(ticking(stop, lags))
            token = TokenInput(ACCESS, acme.token(scope=["docs:read"]))
            error = None
            try:
                await a.authorize_multi_issuer([token], READ, doc())
            except TokenError as e:
                error = e
            stop.set()
            await watcher
            return error, lags

    error, lags = asyncio.run(main())
    assert isinstance(error, TokenError)
    assert "timed out" in str(error) and "ENGINE_HTTP_REQUEST_TIMEOUT" in str(error)
    assert len(lags) >= 10  # a blocked loop ticks once in the 0.5 s the fetch is given


def test_a_cancelled_request_does_not_strand_the_fetch(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    """The fetch a cancelled request started still ends, and the next request uses it."""
    store, acme, _ = two
    acme.routes[acme.discovery_path] = stalled(acme, 0.3)

    async def main() -> Any:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            token = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]
            first = asyncio.create_task(a.authorize_multi_issuer(token, READ, doc()))
            await asyncio.sleep(0.05)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            return await a.authorize_multi_issuer(token, READ, doc())

    assert asyncio.run(main()).decision is True
    assert acme.requests[acme.discovery_path] == 1


def test_more_fetches_than_rounds_are_finished_on_a_thread(
    two: tuple[Path, OidcProvider, OidcProvider],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two issuers to fetch and one round allowed: the second fetch runs on a worker
    thread, and the answer is the same."""
    store, acme, partner = two
    monkeypatch.setattr(aio, "MAX_DEFERRED_ROUNDS", 1)
    tokens = [
        TokenInput(ACCESS, acme.token(scope=["docs:read"])),
        TokenInput(PARTNER, partner.token(role=["editor"])),
    ]

    async def main() -> tuple[Any, int]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            return await a.authorize_multi_issuer(tokens, READ, doc()), a.fetches_started

    result, started = asyncio.run(main())
    assert result.decision is True and result.dropped_tokens == []
    assert started == 1
    assert acme.requests[acme.jwks_path] == 1 and partner.requests[partner.jwks_path] == 1


def test_status_lists_are_fetched_off_the_loop(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    """A token's status list is a fetch too: shared by concurrent requests, and a revoked
    token is dropped as the sync engine drops it."""
    store, acme, _ = two
    uri = acme.set_status_list("main", [0, 1])
    slow = acme.status_path("main")
    acme.routes[slow] = lambda h: (time.sleep(0.3), acme.serve(h))  # type: ignore[func-returns-value]

    def token(idx: int) -> list[TokenInput]:
        status = {"status_list": {"idx": idx, "uri": uri}}
        return [TokenInput(ACCESS, acme.token(scope=["docs:read"], status=status))]

    async def main() -> tuple[list[Any], Any, int]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            await a.ready()
            stop, lags = asyncio.Event(), []
            watcher = asyncio.create_task(ticking(stop, lags))
            valid = await asyncio.gather(
                *(a.authorize_multi_issuer(token(0), READ, doc()) for _ in range(10))
            )
            stop.set()
            await watcher
            try:
                await a.authorize_multi_issuer(token(1), READ, doc())
                revoked = None
            except TokenError as e:
                revoked = e
            return list(valid), revoked, len(lags)

    valid, revoked, ticks = asyncio.run(main())
    assert all(r.decision for r in valid)
    assert acme.requests[slow] == 1
    assert isinstance(revoked, TokenError) and "revoked" in str(revoked)
    assert ticks >= 5  # the loop ticked while the list was fetched


def test_a_provider_that_lies_or_floods_is_refused_as_in_sync(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    """Through the async API the same checks hold: a discovery document naming another
    issuer, a JWKS larger than the response cap."""
    store, acme, partner = two
    acme.discovery_issuer = "https://evil.example"
    partner.routes[partner.jwks_path] = body(b'{"keys": [' + b"0," * 5000 + b"0]}")

    async def main() -> list[str]:
        cfg = config(store, ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES=4096)
        async with await AsyncEngine.create(cfg, ssl_context=client_ssl_context) as a:
            errors = []
            for tokens in (
                [TokenInput(ACCESS, acme.token(scope=["docs:read"]))],
                [TokenInput(PARTNER, partner.token(role=["editor"]))],
            ):
                with pytest.raises(TokenError) as caught:
                    await a.authorize_multi_issuer(tokens, READ, doc())
                errors.append(str(caught.value))
            return errors

    lied, flooded = asyncio.run(main())
    assert "untrusted_issuer" in lied and "does not match the endpoint" in lied
    assert "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES" in flooded


def test_batches_and_explanations_fetch_off_the_loop(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    store, acme, _ = two
    tokens = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]

    async def main() -> tuple[list[Any], Any, int]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            requests = iter([{"action": READ, "resource": doc(f"d{i}")} for i in range(3)])
            batch = await a.authorize_multi_issuer_batch(requests, tokens=tokens)
            explained = await a.explain(READ, doc(), tokens=tokens)
            return batch, explained, a.fetches_started

    batch, explained, started = asyncio.run(main())
    assert [r.decision for r in batch] == [True, True, True]  # an iterator, decided again
    assert explained.allow is True
    assert started == 1


def test_plans_fetch_off_the_loop(
    two: tuple[Path, OidcProvider, OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    """``plan_multi_issuer`` (a list endpoint's plan) fetches keys on the engine's threads
    and answers as the sync engine; ``plan`` runs inline."""
    store, acme, _ = two
    tokens = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]

    async def main() -> tuple[Any, Any, int]:
        async with await AsyncEngine.create(config(store), ssl_context=client_ssl_context) as a:
            planned = await a.plan_multi_issuer(tokens, READ, "Acme::Document")
            user = {"uid": {"type": "Acme::User", "id": "u"}, "attrs": {}}
            unsigned = await a.plan(READ, "Acme::Document", user)
            synced = a.engine.plan_multi_issuer(tokens, READ, "Acme::Document")
            assert planned.to_dict() == synced.to_dict()
            return planned, unsigned, a.fetches_started

    planned, unsigned, started = asyncio.run(main())
    assert planned.kind == "conditional"  # locked documents are forbidden without MFA
    assert unsigned.kind == "always_denied"  # no token: no scope
    assert started == 1
