"""Hostile servers behind a store URL: each fetch ends in a clear load error, in time.

Real loopback servers (HTTPS with a trustme CA, plain HTTP where a downgrade is tried).
The fetch policy itself is tested in ``tests/test_http.py``; here it is seen as the
store loader and the refresher see it.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator

import pytest

from polang.config import Config
from polang.store import PolicyStoreLoadError, PolicyStoreSource, StoreRefresher
from store.storekit import Sink, store_files, zip_bytes
from tokens.oidc_server import OidcProvider, blocked, body, drip, redirect, status

FAST = Config(http_request_timeout=5, http_max_retries=0)
EXTRA = '@id("extra") permit (principal, action == App::Action::"edit", resource);\n'


def archive(extra: bool = False) -> bytes:
    return zip_bytes(store_files({"policies/extra.polang": EXTRA} if extra else None))


@pytest.fixture
def serve(server_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., OidcProvider]]:
    started: list[OidcProvider] = []

    def make(tls: bool = True) -> OidcProvider:
        p = OidcProvider(server_ssl_context, tls=tls).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


def load_error(url: str, config: Config, ctx: ssl.SSLContext) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.url(url).load(config, ssl_context=ctx)
    assert e.value.kind == "fetch" and e.value.file == url
    return e.value


def test_an_https_store_redirected_to_http_is_refused(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    secure, plain = serve(), serve(tls=False)
    plain.routes["/s.parc"] = body(archive())  # a store anyone on the path could change
    secure.routes["/s.parc"] = redirect(plain.url("/s.parc"))
    err = load_error(secure.url("/s.parc"), FAST, client_ssl_context)
    assert f"redirect from {secure.url('/s.parc')} to {plain.url('/s.parc')} refused" in str(err)
    assert plain.requests["/s.parc"] == 0


def test_an_https_store_may_move_within_https(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    old, new = serve(), serve()
    new.routes["/v2/s.parc"] = body(archive())
    old.routes["/s.parc"] = redirect(new.url("/v2/s.parc"), 308)
    store = PolicyStoreSource.url(old.url("/s.parc")).load(FAST, ssl_context=client_ssl_context)
    assert store.id == "app-store"


def test_a_dripping_store_ends_at_the_deadline(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    p = serve()
    p.routes["/s.parc"] = drip(archive(), every=0.05)  # minutes at this pace
    config = Config(http_request_timeout=0.5, http_max_retries=3)
    err = load_error(p.url("/s.parc"), config, client_ssl_context)
    assert "fetching the store failed: timed out after 0.5 s" in str(err)
    assert "ENGINE_HTTP_REQUEST_TIMEOUT" in str(err)


def test_retry_after_on_a_store_fetch(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    p = serve()
    p.routes["/s.parc"] = status(503, {"Retry-After": "3600"})
    err = load_error(p.url("/s.parc"), Config(http_max_retries=3), client_ssl_context)
    assert "the server asked to retry after 3600 s" in str(err)
    assert p.requests["/s.parc"] == 1


def test_a_refresh_redirected_to_http_keeps_the_last_good_store(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    secure, plain = serve(), serve(tls=False)
    secure.routes["/s.parc"] = body(archive())
    source = PolicyStoreSource.url(secure.url("/s.parc"))
    first = source.load(FAST, ssl_context=client_ssl_context)
    sink = Sink()
    r = StoreRefresher(
        source, FAST, sink.update, sink.error, current=first, ssl_context=client_ssl_context
    )
    plain.routes["/s.parc"] = body(archive(extra=True))
    secure.routes["/s.parc"] = redirect(plain.url("/s.parc"))
    assert r.refresh_now() is False
    assert r.current is first and sink.stores == []
    assert "refused" in str(sink.errors[-1])


def test_a_slow_refresh_does_not_block_stop(
    serve: Callable[..., OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    """The refresher's fetch has the same deadline: stop() waits for it, never longer."""
    p = serve()
    release, entered = threading.Event(), threading.Event()
    p.routes["/s.parc"] = blocked(release, body(archive()), entered)
    config = Config(http_request_timeout=0.5, http_max_retries=0)
    sink = Sink()
    r = StoreRefresher(
        PolicyStoreSource.url(p.url("/s.parc")),
        config,
        sink.update,
        sink.error,
        ssl_context=client_ssl_context,
    )
    try:
        assert r.refresh_now() is False
        assert entered.is_set()
        assert "timed out after 0.5 s" in str(sink.errors[-1])
    finally:
        release.set()
