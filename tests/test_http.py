"""The engine's one HTTP client against real loopback HTTPS servers (trustme certificates).

Deadline, retries (Retry-After), redirects, size caps, content decoding and the pool's
lifecycle. Store and token fetches go through this client; their own tests check how
failures become load errors and drop reasons.
"""

from __future__ import annotations

import gzip
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler

import pytest
import trustme

from polang.errors import ConfigError, PolangError
from polang.http import (
    MAX_REDIRECTS,
    Fetcher,
    FetchError,
    FetchLimits,
    cache_control_max_age,
    retry_after_seconds,
)
from tokens.oidc_server import (
    OidcProvider,
    blocked,
    body,
    drip,
    redirect,
    send,
    status,
)


@pytest.fixture
def serve(server_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., OidcProvider]]:
    """``serve(tls=True)``: a loopback server answering only the routes a test sets."""
    started: list[OidcProvider] = []

    def make(*, tls: bool = True, context: ssl.SSLContext | None = None) -> OidcProvider:
        p = OidcProvider(context or server_ssl_context, tls=tls).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.fixture
def fetcher(client_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., Fetcher]]:
    made: list[Fetcher] = []

    def make(**limits: float) -> Fetcher:
        limits.setdefault("timeout", 5)
        limits.setdefault("max_retries", 0)
        f = Fetcher(FetchLimits(**limits), client_ssl_context)  # type: ignore[arg-type]
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def fails(f: Fetcher, url: str, *, https_only: bool = True) -> FetchError:
    with pytest.raises(FetchError) as e:
        f.get(url, https_only=https_only)
    assert isinstance(e.value, PolangError)
    return e.value


def test_a_plain_fetch(serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]) -> None:
    p = serve()
    p.routes["/doc"] = body(b'{"a": [1]}', {"Cache-Control": "max-age=60"})
    r = fetcher().get(p.url("/doc"))
    assert (r.status, r.json(), r.final_url) == (200, {"a": [1]}, p.url("/doc"))
    assert cache_control_max_age(r.headers) == 60


def test_json_bodies_are_read_with_bounded_nesting(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/deep"] = body(b"[" * 100_000)
    r = fetcher().get(p.url("/deep"))
    with pytest.raises(FetchError, match="deeper than the limit of 128 levels"):
        r.json()


# ---------------------------------------------------------------- the deadline


def test_a_dripping_body_ends_at_the_deadline(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/drip"] = drip(b"x" * 10_000, every=0.05)  # would take 500 s
    err = fails(fetcher(timeout=0.5, max_retries=2), p.url("/drip"))
    assert "timed out after 0.5 s (ENGINE_HTTP_REQUEST_TIMEOUT" in str(err)
    assert p.requests["/drip"] == 1  # no time was left for another attempt


def test_dripping_headers_end_at_the_deadline(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/drip"] = drip(b"x" * 100, every=0.05, in_headers=True)
    err = fails(fetcher(timeout=0.4), p.url("/drip"))
    assert "timed out after 0.4 s" in str(err)


def test_a_server_that_never_answers_ends_at_the_deadline(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    release = threading.Event()
    p.routes["/hang"] = blocked(release, body(b"late"))
    try:
        assert "timed out after 0.3 s" in str(fails(fetcher(timeout=0.3), p.url("/hang")))
    finally:
        release.set()


# ---------------------------------------------------------------- retries


def test_retry_statuses_and_final_statuses(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    answers = iter([status(503), status(429), body(b"ok")])
    p.routes["/flaky"] = lambda h: next(answers)(h)
    assert fetcher(max_retries=2).get(p.url("/flaky")).body == b"ok"
    assert p.requests["/flaky"] == 3
    p.routes["/gone"] = status(404)
    err = fails(fetcher(max_retries=3), p.url("/gone"))
    assert "HTTP status 404" in str(err) and p.requests["/gone"] == 1
    p.routes["/down"] = status(502)
    err = fails(fetcher(max_retries=1), p.url("/down"))
    assert "HTTP status 502" in str(err) and "(after 2 attempts)" in str(err)


def test_retry_after_is_honoured_within_the_deadline(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    answers = iter([status(503, {"Retry-After": "1"}), body(b"ok")])
    p.routes["/later"] = lambda h: next(answers)(h)
    assert fetcher(timeout=10, max_retries=1).get(p.url("/later")).body == b"ok"
    assert p.requests["/later"] == 2
    # a Retry-After past the deadline: the fetch ends at once, saying why (the usual
    # 0.1 s pause would have fitted, so the header was read)
    p.routes["/busy"] = status(429, {"Retry-After": "1"})
    err = fails(fetcher(timeout=0.5, max_retries=3), p.url("/busy"))
    assert "the server asked to retry after 1 s" in str(err)
    assert "ENGINE_HTTP_REQUEST_TIMEOUT" in str(err) and p.requests["/busy"] == 1


def test_retry_after_values() -> None:
    now = time.time()
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("9" * 40) is None
    when = datetime.fromtimestamp(now, UTC) + timedelta(seconds=30)
    assert retry_after_seconds(format_datetime(when, usegmt=True), now=now) == pytest.approx(
        30, abs=1
    )
    past = datetime.fromtimestamp(now, UTC) - timedelta(days=1)
    assert retry_after_seconds(format_datetime(past, usegmt=True), now=now) == 0


def test_tls_failures_are_not_retried(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    stranger = trustme.CA()  # a certificate the client does not trust
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    stranger.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
    p = serve(context=ctx)
    p.routes["/x"] = body(b"never")
    err = fails(fetcher(max_retries=3), p.url("/x"))
    assert "TLS failed" in str(err) and "not retried" in str(err)
    assert "CERTIFICATE_VERIFY_FAILED" in str(err)
    assert p.connections == 1 and p.requests["/x"] == 0


def test_connection_refused_is_retried_then_reported(fetcher: Callable[..., Fetcher]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = fails(fetcher(max_retries=1), f"https://127.0.0.1:{port}/x")
    assert "ConnectError" in str(err) and "(after 2 attempts)" in str(err)


# ---------------------------------------------------------------- redirects


def test_https_to_http_redirects_are_refused(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    secure, plain = serve(), serve(tls=False)
    plain.routes["/store"] = body(b"permit-all")
    secure.routes["/store"] = redirect(plain.url("/store"))
    err = fails(fetcher(), secure.url("/store"), https_only=False)
    assert f"redirect from {secure.url('/store')} to {plain.url('/store')} refused" in str(err)
    assert "downgrade from https" in str(err)
    assert plain.requests["/store"] == 0  # not even asked
    # an https-only fetch never starts on http, nor goes there from http
    assert "only https:// URLs" in str(fails(fetcher(), plain.url("/store")))
    plain.routes["/hop"] = redirect(plain.url("/store"))
    assert fetcher().get(plain.url("/hop"), https_only=False).body == b"permit-all"


def test_redirects_within_https_are_followed_to_any_host_and_bounded(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    a, b = serve(), serve()
    b.routes["/keys"] = body(b"{}")
    a.routes["/keys"] = redirect(b.url("/keys"), 301)
    a.routes["/rel"] = redirect("/keys", 307)  # relative
    r = fetcher().get(a.url("/keys"))
    assert (r.url, r.final_url, r.body) == (a.url("/keys"), b.url("/keys"), b"{}")
    assert fetcher().get(a.url("/rel")).final_url == b.url("/keys")
    a.routes["/loop"] = redirect("/loop")
    err = fails(fetcher(), a.url("/loop"))
    assert f"more than {MAX_REDIRECTS} redirects" in str(err)
    assert a.requests["/loop"] == MAX_REDIRECTS + 1
    a.routes["/nowhere"] = lambda h: send(h, 302)
    assert "without a Location" in str(fails(fetcher(), a.url("/nowhere")))
    a.routes["/file"] = redirect("file:///etc/passwd")
    assert "not http(s)" in str(fails(fetcher(), a.url("/file")))


# ---------------------------------------------------------------- size and encoding


def test_size_cap_with_and_without_content_length(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/big"] = body(b"x" * 1000)

    def no_length(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b"x" * 1000)
        h.close_connection = True

    p.routes["/chunky"] = no_length
    small = fetcher(max_response_size=999)
    assert "the response is 1000 bytes, more than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (999)" in str(
        fails(small, p.url("/big"))
    )
    assert "larger than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (999)" in str(
        fails(small, p.url("/chunky"))
    )
    assert len(fetcher(max_response_size=1000).get(p.url("/chunky")).body) == 1000


def test_compressed_bodies_are_decoded_within_the_cap(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/gz"] = body(gzip.compress(b'{"keys": []}'), {"Content-Encoding": "gzip"})
    p.routes["/zz"] = body(zlib.compress(b"hello"), {"Content-Encoding": "deflate"})
    assert fetcher().get(p.url("/gz")).json() == {"keys": []}
    assert fetcher().get(p.url("/zz")).body == b"hello"
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))  # 8 MiB from ~8 KB
    p.routes["/bomb"] = body(bomb, {"Content-Encoding": "gzip"})
    err = fails(fetcher(max_response_size=1024 * 1024), p.url("/bomb"))
    assert "larger than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (1048576)" in str(err)
    p.routes["/br"] = body(b"??", {"Content-Encoding": "br"})
    assert "unsupported Content-Encoding 'br'" in str(fails(fetcher(), p.url("/br")))
    p.routes["/bad"] = body(b"not gzip", {"Content-Encoding": "gzip"})
    assert "corrupt" in str(fails(fetcher(), p.url("/bad")))


# ---------------------------------------------------------------- lifecycle


def test_close_never_breaks_a_fetch_in_flight(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    release, entered = threading.Event(), threading.Event()
    p.routes["/slow"] = blocked(release, body(b"made it"), entered)
    p.routes["/fast"] = body(b"fast")
    f = fetcher(timeout=20)
    got: dict[str, object] = {}

    def run() -> None:
        try:
            got["body"] = f.get(p.url("/slow")).body
        except Exception as e:  # recorded for the assertion below
            got["error"] = e

    t = threading.Thread(target=run)
    t.start()
    try:
        assert entered.wait(10)
        f.close()  # what a store refresh does to the old store's client
        assert f.in_flight == 1
    finally:
        release.set()
        t.join(10)
    assert got == {"body": b"made it"}
    assert f.in_flight == 0 and f._client is None  # the pool went with the last fetch
    assert f.get(p.url("/fast")).body == b"fast"  # a late fetch still works...
    assert f._client is None  # ...and its pool is closed again


def test_limits_are_checked() -> None:
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"max_response_size": 0}):
        with pytest.raises(ConfigError):
            FetchLimits(**bad)  # type: ignore[arg-type]


def test_urls_that_are_not_http_are_refused(fetcher: Callable[..., Fetcher]) -> None:
    assert "only http:// and https://" in str(fails(fetcher(), "ftp://x/y", https_only=False))
    assert "only https://" in str(fails(fetcher(), "file:///etc/passwd"))
    long = "https://" + "a" * 10_000 + ".example/x"
    assert len(str(fails(fetcher(max_retries=0, timeout=1), long))) < 1000


# ---------------------------------------------------------------- host-name lookups


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """``socket.getaddrinfo`` with made-up names: a name mapped to an ``Event`` hangs until
    it is set; a name mapped to a list resolves to those addresses."""
    import socket

    real = socket.getaddrinfo
    names: dict[str, object] = {}

    def fake(host: str, port: int, *args: object, **kwargs: object) -> object:
        got = names.get(host)
        if isinstance(got, threading.Event):
            got.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "the resolver gave up")
        if isinstance(got, list):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in got]
        return real(host, port, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield names
    for v in names.values():
        if isinstance(v, threading.Event):
            v.set()


def _lookups_running() -> int:
    return sum(t.name == "polang-dns" for t in threading.enumerate())


def test_a_resolver_that_never_answers_ends_at_the_deadline(
    resolver: dict[str, object], fetcher: Callable[..., Fetcher]
) -> None:
    hang = threading.Event()
    resolver["hang.test"] = hang
    err = fails(fetcher(timeout=0.3, max_retries=2), "https://hang.test/x")
    assert "timed out after 0.3 s" in str(err)
    assert not hang.is_set()  # the fetch returned while the lookup was still stuck


def test_stuck_lookups_are_bounded(
    resolver: dict[str, object], fetcher: Callable[..., Fetcher]
) -> None:
    from polang.http import MAX_DNS_LOOKUPS

    hang = threading.Event()
    resolver["hang.test"] = hang
    f = fetcher(timeout=0.05)
    for _ in range(MAX_DNS_LOOKUPS):
        fails(f, "https://hang.test/x")
    assert _lookups_running() >= MAX_DNS_LOOKUPS
    err = fails(f, "https://hang.test/x")
    assert "MAX_DNS_LOOKUPS" in str(err)
    assert _lookups_running() == MAX_DNS_LOOKUPS  # no thread was started for it
    hang.set()
    for _ in range(500):
        if not _lookups_running():
            break
        time.sleep(0.01)
    assert not _lookups_running()
    assert "cannot resolve hang.test" in str(fails(f, "https://hang.test/x"))


def test_each_address_of_a_name_is_tried(
    serve: Callable[..., OidcProvider],
    resolver: dict[str, object],
    fetcher: Callable[..., Fetcher],
) -> None:
    p = serve(tls=False)
    p.routes["/doc"] = body(b'{"ok": true}')
    # 127.0.0.2 refuses (the server listens on 127.0.0.1 only); the next address answers
    resolver["two.test"] = ["127.0.0.2", "127.0.0.1"]
    url = p.url("/doc").replace("localhost", "two.test")
    assert url.startswith("http://two.test:")
    assert fetcher().get(url, https_only=False).json() == {"ok": True}
    resolver["none.test"] = ["127.0.0.2"]
    err = fails(fetcher(), url.replace("two.test", "none.test"), https_only=False)
    assert "none.test" in str(err)


# ---------------------------------------------------------------- requests with credentials
# (the Lock client: POSTs, bearer tokens, the event stream)


def test_a_post_with_credentials(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    seen: list[tuple[str, str, bytes]] = []

    def echo(h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        seen.append((h.command, h.headers.get("Authorization", ""), h.rfile.read(n)))
        send(h, 201, b'{"ok": true}', ctype="application/json")

    p.routes["/bulk"] = echo
    r = fetcher().request(
        "POST", p.url("/bulk"), headers={"Authorization": "Bearer t"}, body=b"[1]"
    )
    assert (r.status, r.json()) == (201, {"ok": True})
    assert seen == [("POST", "Bearer t", b"[1]")]
    p.routes["/bulk"] = status(401)
    e = fails_request(fetcher(), "POST", p.url("/bulk"))
    assert e.status == 401 and "401" in str(e)


def fails_request(f: Fetcher, method: str, url: str, **kw: object) -> FetchError:
    with pytest.raises(FetchError) as e:
        f.request(method, url, **kw)  # type: ignore[arg-type]
    return e.value


def test_a_post_follows_no_redirect_and_credentials_keep_their_origin(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    p.routes["/moved"] = redirect("/here", 307)
    p.routes["/here"] = body(b"{}")
    e = fails_request(fetcher(), "POST", p.url("/moved"), body=b"[]")
    assert "a POST follows no redirect" in str(e) and e.status == 307
    # the same origin: followed, with the header; another (by name): refused
    r = fetcher().request("GET", p.url("/moved"), headers={"Authorization": "Bearer t"})
    assert r.final_url == p.url("/here")
    p.routes["/away"] = redirect(f"https://127.0.0.1:{p.port}/here")
    e = fails_request(fetcher(), "GET", p.url("/away"), headers={"Authorization": "Bearer t"})
    assert "credentials stay with their origin" in str(e)
    assert fetcher().get(p.url("/away")).final_url.endswith("/here")  # no credentials: fine


def test_a_shared_deadline_ends_a_request_sooner(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    release = threading.Event()
    p.routes["/slow"] = blocked(release, body(b"{}"))
    try:
        e = fails_request(
            fetcher(timeout=30), "GET", p.url("/slow"), deadline=time.monotonic() + 0.3
        )
        assert "timed out" in str(e)
    finally:
        release.set()


def test_a_stream_hands_over_chunks_and_can_be_aborted(
    serve: Callable[..., OidcProvider], fetcher: Callable[..., Fetcher]
) -> None:
    p = serve()
    gate = threading.Event()

    def stream(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b"data: one\n\n")
        h.wfile.flush()
        gate.wait(10)  # then silence
        h.close_connection = True

    p.routes["/sse"] = stream
    f = fetcher()
    # silence past the idle limit ends the stream, naming the limit
    silent = pytest.raises(FetchError, match=r"silent for 0.3 s \(SSE_TEST_LIMIT\)")
    with silent, f.stream(p.url("/sse"), idle_timeout=0.3, idle_name="SSE_TEST_LIMIT") as s:
        chunks = iter(s)
        assert next(chunks) == b"data: one\n\n"
        next(chunks)
    # abort() from another thread ends a read that waits (the stream ends, or breaks)
    with f.stream(p.url("/sse"), idle_timeout=30) as s:
        chunks = iter(s)
        next(chunks)
        threading.Timer(0.1, s.abort).start()
        try:
            rest = list(chunks)
        except FetchError as e:
            assert "the stream broke" in str(e)
        else:
            assert rest == []
    gate.set()
    p.routes["/denied"] = status(401)
    with pytest.raises(FetchError) as e, f.stream(p.url("/denied"), idle_timeout=1):
        pass
    assert e.value.status == 401
    with (
        pytest.raises(FetchError, match="only https"),
        f.stream(p.url("/sse").replace("https", "http"), idle_timeout=1),
    ):
        pass
