"""Fetches through the environment's proxy: a real CONNECT proxy on loopback.

The servers are named ``*.test`` (certificates issued for those names by the test's CA);
only the proxy knows where they are, as a corporate proxy resolves names the client cannot.
Loopback names are never proxied, so every fetch here that succeeds went through the proxy.
"""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import trustme

from polang.http import Fetcher, FetchError, FetchLimits, Proxies
from tokens.oidc_server import OidcProvider, body

PROXY_VARS = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


@dataclass
class ConnectProxy:
    """An HTTP proxy: ``CONNECT`` tunnels and absolute-form requests, to 127.0.0.1."""

    ports: dict[str, int] = field(default_factory=dict)  # host name -> loopback port
    credentials: str | None = None  # "user:password" to demand, else none
    silent: bool = False  # accept and never answer (deadline tests)
    seen: list[str] = field(default_factory=list)  # request lines received

    def start(self) -> ConnectProxy:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        if self.silent:
            conn.recv(1)  # until the client gives up
            return
        text, _, rest = head.partition(b"\r\n\r\n")
        lines = text.decode("latin-1").split("\r\n")
        self.seen.append(lines[0])
        method, target, _ = lines[0].split(" ", 2)
        pairs = (h.partition(":") for h in lines[1:])
        headers = {k.strip().lower(): v.strip() for k, _, v in pairs}
        if self.credentials is not None:
            wanted = "Basic " + base64.b64encode(self.credentials.encode("utf-8")).decode()
            if headers.get("proxy-authorization") != wanted:
                conn.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="t"\r\nContent-Length: 0\r\n\r\n'
                )
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
        else:  # http://host:port/path
            host, _, port = target.split("/", 3)[2].partition(":")
        upstream = socket.create_connection(("127.0.0.1", self.ports.get(host, int(port or 80))))
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            path = "/" + target.split("/", 3)[3]
            kept = [h for h in lines[1:] if not h.lower().startswith("proxy-")]
            upstream.sendall(
                f"{method} {path} HTTP/1.1\r\n".encode()
                + "\r\n".join(kept).encode()
                + b"\r\n\r\n"
                + rest
            )
        self._relay(conn, upstream)

    @staticmethod
    def _relay(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 5)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            return
        finally:
            b.close()


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def named_server(tls_ca: trustme.CA) -> Iterator[Callable[..., OidcProvider]]:
    started: list[OidcProvider] = []

    def make(host: str = "jwks.test", *, tls: bool = True) -> OidcProvider:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls_ca.issue_cert(host).configure_cert(ctx)
        p = OidcProvider(ctx, host=host, tls=tls).start()
        p.routes["/doc"] = body(b'{"via": "proxy"}')
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.fixture
def proxy() -> Iterator[Callable[..., ConnectProxy]]:
    started: list[ConnectProxy] = []

    def make(**kw: object) -> ConnectProxy:
        px = ConnectProxy(**kw).start()  # type: ignore[arg-type]
        started.append(px)
        return px

    yield make
    for px in started:
        px.stop()


def fetch(ctx: ssl.SSLContext, url: str, *, timeout: float = 5, https_only: bool = True) -> bytes:
    with Fetcher(FetchLimits(timeout=timeout, max_retries=0), ctx) as f:
        return f.get(url, https_only=https_only).body


def test_https_goes_through_the_proxy_with_connect(
    named_server: Callable[..., OidcProvider],
    proxy: Callable[..., ConnectProxy],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server()
    px = proxy(ports={"jwks.test": server.port})
    monkeypatch.setenv("HTTPS_PROXY", px.url)
    assert fetch(client_ssl_context, server.url("/doc")) == b'{"via": "proxy"}'
    assert px.seen == [f"CONNECT jwks.test:{server.port} HTTP/1.1"]


def test_plain_http_is_forwarded_by_the_http_proxy(
    named_server: Callable[..., OidcProvider],
    proxy: Callable[..., ConnectProxy],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server("store.test", tls=False)
    px = proxy(ports={"store.test": server.port})
    monkeypatch.setenv("http_proxy", px.url)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # not used for http://
    got = fetch(client_ssl_context, server.url("/doc"), https_only=False)
    assert got == b'{"via": "proxy"}'
    assert px.seen == [f"GET http://store.test:{server.port}/doc HTTP/1.1"]


def test_all_proxy_serves_both_schemes(
    named_server: Callable[..., OidcProvider],
    proxy: Callable[..., ConnectProxy],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server()
    px = proxy(ports={"jwks.test": server.port})
    monkeypatch.setenv("ALL_PROXY", px.url.removeprefix("http://"))  # scheme-less: http
    assert fetch(client_ssl_context, server.url("/doc")) == b'{"via": "proxy"}'
    assert len(px.seen) == 1


def test_proxy_credentials_are_sent_and_never_shown(
    named_server: Callable[..., OidcProvider],
    proxy: Callable[..., ConnectProxy],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server()
    px = proxy(ports={"jwks.test": server.port}, credentials="ops:s3cr@té")
    monkeypatch.setenv("HTTPS_PROXY", f"http://ops:s3cr%40t%C3%A9@127.0.0.1:{px.port}")
    assert fetch(client_ssl_context, server.url("/doc")) == b'{"via": "proxy"}'

    monkeypatch.setenv("HTTPS_PROXY", f"http://ops:wrong-pass@127.0.0.1:{px.port}")
    with pytest.raises(FetchError) as e:
        fetch(client_ssl_context, server.url("/doc"))
    assert "the proxy refused the tunnel: 407" in str(e.value)
    assert "not retried" in str(e.value)
    assert "wrong-pass" not in str(e.value)


@pytest.mark.parametrize(
    "value", ["socks5://ops:hunter2@10.0.0.1:1080", "https://ops:hunter2@proxy.example:443"]
)
def test_a_proxy_of_another_scheme_fails_the_fetch_and_hides_credentials(
    value: str,
    named_server: Callable[..., OidcProvider],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server()
    monkeypatch.setenv("HTTPS_PROXY", value)
    with pytest.raises(FetchError) as e:
        fetch(client_ssl_context, server.url("/doc"))
    message = str(e.value)
    assert "HTTPS_PROXY" in message and "only http proxies are supported" in message
    assert "hunter2" not in message and "ops" not in message
    assert server.requests["/doc"] == 0  # no silent direct connection


def test_a_silent_proxy_ends_at_the_deadline(
    named_server: Callable[..., OidcProvider],
    proxy: Callable[..., ConnectProxy],
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = named_server()
    px = proxy(silent=True)
    monkeypatch.setenv("HTTPS_PROXY", px.url)
    with pytest.raises(FetchError, match=r"timed out after 0\.5 s"):
        fetch(client_ssl_context, server.url("/doc"), timeout=0.5)


def test_loopback_and_no_proxy_hosts_go_direct(
    server_ssl_context: ssl.SSLContext,
    client_ssl_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    p = OidcProvider(server_ssl_context).start()
    try:
        p.routes["/doc"] = body(b"{}")
        assert fetch(client_ssl_context, p.url("/doc")) == b"{}"  # localhost: direct
    finally:
        p.stop()


@pytest.mark.parametrize(
    ("no_proxy", "host", "direct"),
    [
        ("", "idp.example.com", False),
        ("*", "idp.example.com", True),
        ("example.com", "idp.example.com", True),
        (".example.com", "idp.example.com", True),
        ("*.example.com", "idp.example.com", True),
        ("example.com:443", "example.com", True),
        ("ample.com", "idp.example.com", False),
        ("other.org, example.com", "example.com", True),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("192.168.1.7", "192.168.1.7", True),
        ("::1/128,fd00::/8", "[fd00::5]", True),
        ("example.com", "127.0.0.1", True),  # loopback: always direct
        ("", "localhost", True),
        ("", "api.localhost", True),
    ],
)
def test_which_hosts_are_proxied(
    no_proxy: str, host: str, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    chosen = Proxies.from_environment().for_url("https", host)
    assert (chosen is None) is direct
    if not direct:
        assert not isinstance(chosen, str) and chosen is not None
        assert chosen.url == "http://proxy.corp:3128"


def test_no_proxy_variables_means_direct() -> None:
    assert Proxies.from_environment().for_url("https", "idp.example.com") is None
