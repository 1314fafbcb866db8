"""Stores over HTTP from a real server on loopback, and the background refresher."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from polang.config import Config
from polang.errors import PolangError
from polang.store import PolicyStore, PolicyStoreLoadError, PolicyStoreSource, StoreRefresher

from .storekit import Route, Sink, StoreServer, legacy_doc, store_files, zip_bytes

FAST = Config(http_request_timeout=5, http_max_retries=0)
EXTRA = '@id("extra") permit (principal, action == App::Action::"edit", resource);\n'


def archive(extra_policy: bool = False) -> bytes:
    changes = {"policies/extra.polang": EXTRA} if extra_policy else None
    return zip_bytes(store_files(changes))


def fetch_error(url: str, config: Config = FAST) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.url(url).load(config)
    assert e.value.kind == "fetch", str(e.value)
    assert e.value.file == url
    return e.value


def test_archive_and_legacy_json_over_http(server: StoreServer) -> None:
    server.routes["/a.parc"] = Route(archive())
    server.routes["/legacy"] = Route(json.dumps(legacy_doc()).encode())
    a = PolicyStoreSource.url(server.url("/a.parc")).load(FAST)
    b = PolicyStoreSource.url(server.url("/legacy")).load(FAST)
    assert a.policies == b.policies
    assert a.source.startswith("archive url http://127.0.0.1:")


def test_404_is_not_retried(server: StoreServer) -> None:
    err = fetch_error(server.url("/missing.parc"), Config(http_max_retries=3))
    assert "404" in str(err)


def test_server_errors_are_retried(server: StoreServer) -> None:
    route = server.routes["/flaky.parc"] = Route(archive(), fail_first=2)
    store = PolicyStoreSource.url(server.url("/flaky.parc")).load(Config(http_max_retries=2))
    assert store.id == "app-store"
    assert route.hits == 3
    route = server.routes["/down.parc"] = Route(b"", status=503)
    err = fetch_error(server.url("/down.parc"), Config(http_max_retries=1))
    assert route.hits == 2
    assert "503" in str(err) and "after 2 attempts" in str(err)


def test_timeout(server: StoreServer) -> None:
    server.routes["/slow.parc"] = Route(archive(), delay=2.0)
    err = fetch_error(
        server.url("/slow.parc"), Config(http_request_timeout=0.2, http_max_retries=0)
    )
    assert "timed out after 0.2 s" in str(err)


def test_oversize_body_with_and_without_content_length(server: StoreServer) -> None:
    body = archive()
    small = Config(http_max_response_size_bytes=len(body) - 1, http_max_retries=0)
    server.routes["/big.parc"] = Route(body)
    err = fetch_error(server.url("/big.parc"), small)
    assert "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES" in str(err)
    assert str(len(body)) in str(err)
    server.routes["/big2.parc"] = Route(body, send_length=False)
    err = fetch_error(server.url("/big2.parc"), small)
    assert "larger than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES" in str(err)
    exact = Config(http_max_response_size_bytes=len(body), http_max_retries=0)
    assert PolicyStoreSource.url(server.url("/big2.parc")).load(exact).id == "app-store"


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = fetch_error(f"http://127.0.0.1:{port}/store.parc")
    assert "fetching the store failed" in str(err)


def test_a_bad_remote_store_names_the_url(server: StoreServer) -> None:
    server.routes["/legacy"] = Route(b'{"policy_stores": ')
    url = server.url("/legacy")
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.url(url).load(FAST)
    assert (e.value.kind, e.value.file) == ("json_syntax", url)


# ---------------------------------------------------------------- refresh


def test_refresh_replaces_only_with_a_store_that_loads(server: StoreServer) -> None:
    route = server.routes["/s.parc"] = Route(archive())
    source = PolicyStoreSource.url(server.url("/s.parc"))
    first = source.load(FAST)
    sink = Sink()
    r = StoreRefresher(source, FAST, sink.update, sink.error, current=first, interval=60)

    assert r.refresh_now() is False  # same content: nothing to do
    assert sink.stores == [] and sink.errors == []

    route.body = archive(extra_policy=True)
    assert r.refresh_now() is True
    assert set(sink.stores[-1].policies) == {"owner-view", "extra"}
    good = r.current
    assert good is sink.stores[-1]

    route.status = 500  # the server breaks: the last good store stays
    assert r.refresh_now() is False
    assert r.current is good
    last = sink.errors[-1]
    assert isinstance(last, PolicyStoreLoadError) and last.kind == "fetch"

    route.status = 200
    route.body = zip_bytes(store_files({"policies/main.polang": "permit("}))  # a broken store
    assert r.refresh_now() is False
    assert r.current is good
    assert "policy_syntax" in str(sink.errors[-1])
    assert (r.refreshes, r.failures) == (1, 2)


def test_refresh_thread_updates_then_survives_a_failure(server: StoreServer) -> None:
    route = server.routes["/s.parc"] = Route(archive())
    source = PolicyStoreSource.url(server.url("/s.parc"))
    config = FAST.replace(policy_store_refresh_interval=0.05)
    sink = Sink()
    r = StoreRefresher(source, config, sink.update, sink.error, current=source.load(config))
    r.start()
    try:
        assert r.running
        route.body = archive(extra_policy=True)
        sink.wait()
        assert sink.stores and "extra" in sink.stores[-1].policies
        route.status = 404
        sink.wait()
        assert sink.errors and "404" in str(sink.errors[-1])
        assert r.current is sink.stores[-1]  # the last good store keeps serving
    finally:
        r.stop()
    assert not r.running


def test_failing_callbacks_do_not_stop_the_refresher(server: StoreServer) -> None:
    route = server.routes["/s.parc"] = Route(archive())
    source = PolicyStoreSource.url(server.url("/s.parc"))
    errors: list[PolangError] = []

    def boom(store: PolicyStore) -> None:
        raise RuntimeError("engine is busy")

    first = source.load(FAST)
    r = StoreRefresher(source, FAST, boom, errors.append, current=first)
    route.body = archive(extra_policy=True)
    # the consumer refused the new store: reported, and the current store stays
    assert r.refresh_now() is False
    assert "engine is busy" in str(errors[-1])
    assert r.current is first
    assert r.refresh_now() is False  # tried again next time
    assert len(errors) == 2

    def broken_sink(e: PolangError) -> None:
        raise RuntimeError("log is down")

    r2 = StoreRefresher(source, FAST, boom, broken_sink)
    assert r2.refresh_now() is False  # the broken error sink is ignored, not raised
    assert r2.failures == 1


def test_interval_zero_never_starts() -> None:
    r = StoreRefresher(PolicyStoreSource.url("http://127.0.0.1:9/x.parc"), FAST, print)
    assert r.interval == 0
    r.start()
    assert not r.running
    r.stop()


# ---------------------------------------------------------------- HTTPS


@pytest.fixture
def tls_server() -> Iterator[tuple[StoreServer, trustme.CA]]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(ctx)
    s = StoreServer(tls=ctx)
    try:
        yield s, ca
    finally:
        s.close()


def test_https_with_a_private_ca(
    tls_server: tuple[StoreServer, trustme.CA],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca = tls_server
    server.routes["/s.parc"] = Route(archive())
    url = server.url("/s.parc")
    assert url.startswith("https://")
    # unknown CA: refused
    err = fetch_error(url)
    assert "fetching the store failed" in str(err)
    # a caller-supplied context trusts it
    client = ssl.create_default_context()
    ca.configure_trust(client)
    assert PolicyStoreSource.url(url).load(FAST, ssl_context=client).id == "app-store"
    # and so does SSL_CERT_FILE (the system store plus a private CA bundle)
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    assert PolicyStoreSource.url(url).load(FAST).id == "app-store"
    # the refresher passes its context on
    sink = Sink()
    r = StoreRefresher(
        PolicyStoreSource.url(url), FAST, sink.update, sink.error, ssl_context=client
    )
    assert r.refresh_now() is True
