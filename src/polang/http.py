"""One HTTP client for everything polang fetches: store URLs, discovery, JWKS, status lists.

The policy, documented in docs/configuration.md ("Outbound HTTP"), is the same for every
fetch:

- **Deadline.** ``ENGINE_HTTP_REQUEST_TIMEOUT`` bounds the whole fetch: resolving the
  host name (at most :data:`MAX_DNS_LOOKUPS` lookups at once), connecting, TLS, every
  read (a body dripped a byte a second included), redirects, retries and the pauses
  between them. Each socket operation waits at most for what is left of it.
- **Retries.** At most ``ENGINE_HTTP_MAX_RETRIES`` more attempts, after a connection that
  failed or broke, or a ``408``, ``425``, ``429``, ``500``, ``502``, ``503`` or ``504``.
  The pause starts at 0.1 s and doubles up to 2 s; a ``Retry-After`` that asks for longer
  is honoured when it fits before the deadline (else the fetch fails at once, saying so).
  TLS failures, other statuses, refused redirects and oversized bodies are final.
- **Redirects.** ``301``, ``302``, ``303``, ``307`` and ``308``, at most
  :data:`MAX_REDIRECTS` of them, to any host, over http(s) only. Never from ``https`` to
  ``http``; fetches that must be HTTPS (discovery, JWKS, status lists) never leave it.
- **Size.** ``ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES`` caps the body after decoding (gzip and
  deflate are decoded here, within the cap; other encodings are refused).
- **Trust.** The system trust store plus ``SSL_CERT_FILE``/``SSL_CERT_DIR``, or the
  caller's ``ssl.SSLContext``. No cookies.
- **Proxies.** ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` (either case) and
  ``NO_PROXY``, read when the client is built, as the standard library reads them: an
  ``http://`` proxy (with ``user:password@`` for Basic authentication) tunnels https with
  ``CONNECT``. Loopback hosts are never proxied. A proxy URL of another scheme fails the
  fetch, saying so (never a silent direct connection).

httpx (and httpcore below it) is imported on the first fetch only: an engine that never
fetches never loads it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from polang._version import __version__
from polang.errors import ConfigError, PolangError
from polang.jsonlimits import loads
from polang.runtime import WASM, Needed, needs_refused, unavailable

if TYPE_CHECKING:
    import ssl

    import httpx

MIB = 1024 * 1024
#: Most redirects one fetch follows.
MAX_REDIRECTS = 5
#: Statuses worth another attempt (the server says "not now", or it broke).
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
BACKOFF_START = 0.1
BACKOFF_MAX = 2.0
#: Most host-name lookups running at once. A lookup runs on a thread of its own so that
#: the fetch deadline bounds it; a resolver that never answers keeps its thread until the
#: system gives up, and once this many are stuck, fetches fail at once instead of piling up
#: threads.
MAX_DNS_LOOKUPS = 8
_URL_IN_MESSAGE = 200  # characters of a URL quoted in a message

FetchObserver = Callable[[str, str, float, "str | None"], None]
"""Told of each fetch a :class:`Fetcher` ends: ``(kind, outcome, seconds, error_type)``,
``outcome`` being ``ok``, ``not_modified`` or ``failed`` (see :func:`error_type`)."""


class FetchError(PolangError):
    """A fetch failed; ``reason`` says why without the URL, the message says both."""

    def __init__(
        self, message: str, *, url: str = "", reason: str = "", status: int | None = None
    ) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason or message
        self.status = status
        """The HTTP status that ended the fetch, when a server answered one (``401``...)."""


def error_type(e: FetchError) -> str:
    """How a fetch failed, in a closed set (telemetry's ``error.type``): the HTTP status
    the server answered (``"503"``), else ``timeout``, ``tls``, ``too_large`` or
    ``_OTHER`` (connection failures, refused redirects, bad encodings)."""
    if e.status is not None and 100 <= e.status <= 599:
        return str(e.status)
    reason = e.reason
    if "ENGINE_HTTP_REQUEST_TIMEOUT" in reason:
        return "timeout"
    if reason.startswith("TLS failed"):
        return "tls"
    if "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES" in reason:
        return "too_large"
    return "_OTHER"


def short_url(url: str) -> str:
    """A URL as quoted in messages (bounded: it may come from a hostile document)."""
    return url if len(url) <= _URL_IN_MESSAGE else url[: _URL_IN_MESSAGE - 3] + "..."


def _fail(url: str, reason: str, status: int | None = None) -> FetchError:
    return FetchError(f"{short_url(url)}: {reason}", url=url, reason=reason, status=status)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """The ``ENGINE_HTTP_*`` values a fetcher obeys."""

    timeout: float = 10.0
    max_retries: int = 3
    max_response_size: int = 10 * MIB
    max_redirects: int = MAX_REDIRECTS

    def __post_init__(self) -> None:
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise ConfigError(f"ENGINE_HTTP_REQUEST_TIMEOUT: must be positive, got {self.timeout}")
        if self.max_retries < 0:
            raise ConfigError(f"ENGINE_HTTP_MAX_RETRIES: must be 0 or more, got {self.max_retries}")
        if self.max_response_size <= 0:
            raise ConfigError(
                "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES: must be positive, got "
                f"{self.max_response_size}"
            )


@dataclass(frozen=True, slots=True)
class Response:
    """A complete ``200`` response (or a ``304`` to a conditional request: no body).
    ``url`` is the URL asked for, ``final_url`` where the body came from (after
    redirects); header names are lowercase."""

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON, read with bounded nesting; failures are :class:`FetchError`."""
        return loads(self.body, what=f"{short_url(self.url)}: the response", error=FetchError)


# ---------------------------------------------------------------- TLS


@lru_cache(maxsize=8)
def _ssl_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    import ssl  # with the first fetch: building a context reads the trust store anyway

    ctx = ssl.create_default_context()
    if cafile or capath:
        try:
            ctx.load_verify_locations(cafile=cafile, capath=capath)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                f"SSL_CERT_FILE/SSL_CERT_DIR: cannot load CA certificates ({e})"
            ) from e
    return ctx


def default_ssl_context() -> ssl.SSLContext:
    """The system trust store, plus ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set.

    Cached per value of those variables (building a context reads the trust store).
    """
    return _ssl_context(
        os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    )


def _is_tls_failure(e: BaseException) -> bool:
    """A failed TLS handshake (certificate, protocol): never worth another attempt."""
    import ssl

    cur: BaseException | None = e
    seen = 0
    while cur is not None and seen < 20:
        if isinstance(cur, ssl.SSLError) and not isinstance(cur, ssl.SSLEOFError):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


# ---------------------------------------------------------------- WebAssembly

# Under Pyodide there are no sockets: a fetch is the runtime's asynchronous ``fetch``,
# which synchronous code cannot wait for. ``polang.wasm`` decides with this table set:
# a URL already fetched (by ``polang.wasm.fetch``, under the limits of this module) is
# answered from it, any other raises :class:`FetchNeeded`, which the driver fetches before
# it runs the same code again. Without the table (the sync API) a fetch fails, saying so.
_HELD: ContextVar[dict[tuple[str, str], Response | FetchError] | None] = ContextVar(
    "polang_http_held", default=None
)


class FetchNeeded(Needed):
    """(WebAssembly.) ``url`` must be fetched asynchronously before this code runs again."""

    def __init__(
        self,
        url: str,
        accept: str,
        https_only: bool,
        limits: FetchLimits,
        headers: dict[str, str],
    ) -> None:
        super().__init__(f"fetch {short_url(url)}")
        self.headers = headers
        self.url = url
        self.accept = accept
        self.https_only = https_only
        self.limits = limits


@contextlib.contextmanager
def held_responses(table: dict[tuple[str, str], Response | FetchError]) -> Iterator[None]:
    """Within this block (this task only), fetches are answered from ``table``
    (``(url, accept)`` -> the response, or the error the fetch ended with)."""
    token = _HELD.set(table)
    try:
        yield
    finally:
        _HELD.reset(token)


def _held(
    fetcher: Fetcher,
    method: str,
    url: str,
    accept: str,
    https_only: bool,
    headers: Mapping[str, str] | None,
) -> Response:
    table = _HELD.get()
    if method.upper() != "GET" or table is None:
        raise _fail(
            url,
            unavailable(
                "a synchronous fetch",
                "no sockets; the runtime's fetch is asynchronous",
                "use polang.wasm.WasmEngine, whose fetches go through it",
            ),
        )
    got = table.get((url, accept))
    if got is None and needs_refused():
        raise _fail(url, f"not fetched: {needs_refused()}")
    if got is None:
        raise FetchNeeded(url, accept, https_only, fetcher.limits, dict(headers or {}))
    if isinstance(got, FetchError):
        raise got
    return got


# ---------------------------------------------------------------- the deadline

# The deadline of the fetch running on this thread (``time.monotonic()`` seconds). Every
# socket operation of the connection pool is clamped to it, so no read can wait past it
# however the server paces its bytes.
_DEADLINE: ContextVar[float | None] = ContextVar("polang_http_deadline", default=None)


class _DeadlinePassed(Exception):
    pass


_DNS_SLOTS = threading.BoundedSemaphore(MAX_DNS_LOOKUPS)


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _resolve(host: str, port: int, timeout: float) -> list[str]:
    """``host``'s addresses, in the resolver's order, waiting at most ``timeout`` seconds
    (``socket.getaddrinfo`` has no timeout of its own, so it runs on a thread).

    Raises ``TimeoutError`` when the lookup outlasts ``timeout`` and ``OSError`` when it
    fails or :data:`MAX_DNS_LOOKUPS` lookups are already running."""
    import socket

    if not _DNS_SLOTS.acquire(blocking=False):
        raise OSError(
            f"{MAX_DNS_LOOKUPS} host-name lookups are still running (MAX_DNS_LOOKUPS); "
            "the resolver is not answering"
        )
    done = threading.Event()
    got: list[Any] = []

    def lookup() -> None:
        try:
            got.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except BaseException as e:  # handed to the waiting fetch
            got.append(e)
        finally:
            _DNS_SLOTS.release()
            done.set()

    threading.Thread(target=lookup, name="polang-dns", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"looking up {host} did not finish before the fetch deadline")
    if isinstance(got[0], BaseException):
        raise OSError(f"cannot resolve {host}: {got[0]}")
    seen: list[str] = []
    for _family, _type, _proto, _name, addr in got[0]:
        if addr[0] not in seen:
            seen.append(str(addr[0]))
    if not seen:
        raise OSError(f"cannot resolve {host}: no address")
    return seen


def _clamp(timeout: float | None) -> float:
    deadline = _DEADLINE.get()
    if deadline is None:
        return 30.0 if timeout is None else timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise _DeadlinePassed
    return left if timeout is None else min(timeout, left)


@dataclass(frozen=True, slots=True)
class Proxy:
    """An ``http://`` proxy from the environment; ``shown`` is its URL without credentials."""

    url: str
    auth: tuple[bytes, bytes] | None  # Basic credentials, UTF-8
    shown: str


@dataclass(frozen=True, slots=True)
class Proxies:
    """Which proxy a URL goes through: per scheme, with ``NO_PROXY``'s exceptions."""

    by_scheme: Mapping[str, Proxy | str]  # a str is why that scheme's proxy is unusable
    no_proxy: str = ""

    @classmethod
    def from_environment(cls) -> Proxies:
        """The standard library's reading of ``*_proxy`` (either case; lowercase wins)."""
        import urllib.request

        found = dict(urllib.request.getproxies_environment())
        no_proxy = found.pop("no", "")
        by_scheme: dict[str, Proxy | str] = {}
        for scheme in ("http", "https"):
            name = f"{scheme.upper()}_PROXY" if found.get(scheme) else "ALL_PROXY"
            raw = found.get(scheme) or found.get("all")
            if raw:
                by_scheme[scheme] = _read_proxy(raw, name)
        return cls(by_scheme, no_proxy)

    def for_url(self, scheme: str, host: str) -> Proxy | str | None:
        """The proxy for a URL, the reason its proxy is unusable, or None (direct)."""
        chosen = self.by_scheme.get(scheme)
        if chosen is None or _is_loopback(host) or self._bypassed(host):
            return None
        return chosen

    def _bypassed(self, host: str) -> bool:
        """``NO_PROXY``: ``*``, host names and domain suffixes (a leading dot optional, a
        ``:port`` ignored), IP addresses and CIDR blocks, separated by commas or spaces."""
        if not self.no_proxy:
            return False
        import ipaddress

        h = host.strip("[]").lower().rstrip(".")
        try:
            ip: Any = ipaddress.ip_address(h)
        except ValueError:
            ip = None
        for entry in self.no_proxy.replace(",", " ").split()[:256]:
            e = entry.strip().lower()
            if e == "*":
                return True
            if ip is not None:
                try:
                    if ip in ipaddress.ip_network(e.strip("[]"), strict=False):
                        return True
                except ValueError:
                    pass
            e = e.rsplit(":", 1)[0] if e.count(":") == 1 else e
            e = e.lstrip("*").lstrip(".").rstrip(".")
            if e and (h == e or h.endswith("." + e)):
                return True
        return False


def _read_proxy(raw: str, name: str) -> Proxy | str:
    from urllib.parse import unquote

    try:
        parts = urlsplit(raw if "://" in raw else "http://" + raw)
        port = parts.port
    except ValueError:
        return f"the proxy in {name} is not a valid URL"
    host = parts.hostname or ""
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    if parts.scheme.lower() != "http":
        return (
            f"the proxy in {name} ({short_url(shown)}) is not an http:// URL; only http "
            "proxies are supported"
        )
    if not host:
        return f"the proxy in {name} has no host"
    auth = None
    if parts.username is not None:
        auth = (
            unquote(parts.username).encode("utf-8", "surrogateescape"),
            unquote(parts.password or "").encode("utf-8", "surrogateescape"),
        )
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port or 80}"
    return Proxy(url, auth, shown)


def _is_loopback(host: str) -> bool:
    import ipaddress

    h = host.strip("[]").lower().rstrip(".")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _transport(ssl_context: ssl.SSLContext, proxies: Proxies | None = None) -> httpx.BaseTransport:
    """An httpx transport whose every socket operation obeys the thread's deadline, and
    which sends each request directly or through the environment's proxy for its URL."""
    import httpcore
    import httpx

    class DeadlineStream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            try:
                t = _clamp(timeout)
            except _DeadlinePassed:
                raise httpcore.ReadTimeout("the fetch deadline passed") from None
            return self._inner.read(max_bytes, t)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            try:
                t = _clamp(timeout)
            except _DeadlinePassed:
                raise httpcore.WriteTimeout("the fetch deadline passed") from None
            self._inner.write(buffer, t)

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self,
            ssl_context: ssl.SSLContext,
            server_hostname: str | None = None,
            timeout: float | None = None,
        ) -> httpcore.NetworkStream:
            try:
                t = _clamp(timeout)
            except _DeadlinePassed:
                raise httpcore.ConnectTimeout("the fetch deadline passed") from None
            return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, t))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class DeadlineBackend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.NetworkStream:
            try:
                t = _clamp(timeout)
            except _DeadlinePassed:
                raise httpcore.ConnectTimeout("the fetch deadline passed") from None
            if _is_ip(host):
                addresses = [host]
            else:
                try:
                    addresses = _resolve(host, port, t)
                except TimeoutError as e:
                    raise httpcore.ConnectTimeout(str(e)) from None
                except OSError as e:
                    raise httpcore.ConnectError(str(e)) from None
            failure: Exception | None = None
            for address in addresses:  # each in turn, as socket.create_connection does
                try:
                    t = _clamp(timeout)
                except _DeadlinePassed:
                    raise httpcore.ConnectTimeout("the fetch deadline passed") from None
                try:
                    stream = self._inner.connect_tcp(
                        address, port, t, local_address, socket_options
                    )
                except httpcore.ConnectTimeout:
                    raise
                except httpcore.ConnectError as e:
                    failure = e
                    continue
                return DeadlineStream(stream)
            assert failure is not None
            raise failure

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore.NetworkStream:  # pragma: no cover - never used for URLs
            raise httpcore.ConnectError("unix sockets are not used")

        def sleep(self, seconds: float) -> None:
            time.sleep(seconds)

    # httpcore exception -> httpx exception (most specific first)
    mapping: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
        (httpcore.ConnectTimeout, httpx.ConnectTimeout),
        (httpcore.ReadTimeout, httpx.ReadTimeout),
        (httpcore.WriteTimeout, httpx.WriteTimeout),
        (httpcore.PoolTimeout, httpx.PoolTimeout),
        (httpcore.TimeoutException, httpx.TimeoutException),
        (httpcore.ConnectError, httpx.ConnectError),
        (httpcore.ReadError, httpx.ReadError),
        (httpcore.WriteError, httpx.WriteError),
        (httpcore.NetworkError, httpx.NetworkError),
        (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
        (httpcore.LocalProtocolError, httpx.LocalProtocolError),
        (httpcore.ProtocolError, httpx.ProtocolError),
        (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    )

    @contextlib.contextmanager
    def mapped() -> Iterator[None]:
        try:
            yield
        except httpcore.ProxyError as e:  # the proxy answered CONNECT with an error
            raise httpx.ProxyError(f"the proxy refused the tunnel: {str(e)[:200]}") from e
        except Exception as e:
            for core, mine in mapping:
                if isinstance(e, core):
                    raise mine(str(e)) from e
            raise

    class Body(httpx.SyncByteStream):
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def __iter__(self) -> Iterator[bytes]:
            with mapped():
                yield from self._stream

        def close(self) -> None:
            with mapped():
                close = getattr(self._stream, "close", None)
                if close is not None:
                    close()

    pool_args: dict[str, Any] = {
        "ssl_context": ssl_context,
        "max_connections": 16,
        "max_keepalive_connections": 8,
        "keepalive_expiry": 30.0,
    }

    class Transport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._pool = httpcore.ConnectionPool(network_backend=DeadlineBackend(), **pool_args)
            self._proxied: dict[str, Any] = {}
            self._lock = threading.Lock()

        def _pool_for(self, request: httpx.Request) -> Any:
            chosen = proxies.for_url(request.url.scheme, request.url.host) if proxies else None
            if chosen is None:
                return self._pool
            if isinstance(chosen, str):
                raise httpx.ProxyError(chosen)
            with self._lock:
                pool = self._proxied.get(chosen.url)
                if pool is None:
                    pool = httpcore.HTTPProxy(
                        proxy_url=chosen.url,
                        proxy_auth=chosen.auth,
                        network_backend=DeadlineBackend(),
                        **pool_args,
                    )
                    self._proxied[chosen.url] = pool
            return pool

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            pool = self._pool_for(request)
            req = httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=request.url.raw_scheme,
                    host=request.url.raw_host,
                    port=request.url.port,
                    target=request.url.raw_path,
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
            with mapped():
                resp = pool.handle_request(req)
            return httpx.Response(
                status_code=resp.status,
                headers=resp.headers,
                stream=Body(resp.stream),
                extensions=resp.extensions,
            )

        def close(self) -> None:
            with self._lock:
                pools = [self._pool, *self._proxied.values()]
                self._proxied.clear()
            with mapped():
                for pool in pools:
                    pool.close()

    return Transport()


# ---------------------------------------------------------------- the fetcher


class _Retry(Exception):
    def __init__(
        self, reason: str, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status


@dataclass(frozen=True, slots=True)
class _Call:
    """What one request sends, the same on every attempt."""

    method: str
    accept: str
    https_only: bool
    headers: dict[str, str]
    body: bytes | None
    conditional: tuple[tuple[str, str], ...] = ()
    """``If-None-Match`` / ``If-Modified-Since``: validators, not credentials (they may
    follow a redirect anywhere), and the only reason a ``304`` is an answer."""


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", "", None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date; None if unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit() and len(value) <= 12:
        return float(value)
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _backoff(attempt: int) -> float:
    return min(BACKOFF_START * 2 ** (attempt - 1), BACKOFF_MAX)


class StreamBody:
    """The chunks of a streamed response, as they arrive; :meth:`abort`, from any thread,
    ends a read that is waiting (the stream then ends with a :class:`FetchError`)."""

    def __init__(self, chunks: Iterator[bytes], resp: httpx.Response) -> None:
        self._chunks = chunks
        self._resp = resp

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def abort(self) -> None:
        import socket

        stream = self._resp.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class Fetcher:
    """A shared, thread-safe HTTP(S) client with one policy (see the module docstring).

    ``close()`` never breaks a fetch in flight: the connection pool is closed when the
    last fetch using it ends, and a fetch started after ``close()`` opens a new pool that
    is closed again when it ends. So a store refresh can retire the old store's fetcher
    while requests on the old store are still fetching.
    """

    def __init__(
        self,
        limits: FetchLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        *,
        observer: FetchObserver | None = None,
    ) -> None:
        """``observer`` is told of each request's end (the engine's telemetry); what it
        raises never reaches the fetch."""
        self.limits = limits or FetchLimits()
        self._ssl_context = ssl_context
        self.observer = observer
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._active = 0
        self._closed = False
        self.request_count = 0  # HTTP requests sent (each attempt and redirect is one)

    # ------------------------------------------------------------ lifecycle

    def _acquire(self) -> httpx.Client:
        import httpx  # on the first fetch only

        with self._lock:
            if self._client is None:
                try:
                    ctx = self._ssl_context or default_ssl_context()
                except ConfigError as e:
                    raise FetchError(str(e), reason=str(e)) from e
                self._client = httpx.Client(
                    transport=_transport(ctx, Proxies.from_environment()),
                    follow_redirects=False,
                    trust_env=False,
                    headers={"User-Agent": f"polang/{__version__}"},
                )
            self._active += 1
            return self._client

    def _release(self) -> None:
        with self._lock:
            self._active -= 1
            client = self._client if (self._closed and self._active == 0) else None
            if client is not None:
                self._client = None
        if client is not None:
            client.close()

    def close(self) -> None:
        """Let go of the connection pool once no fetch uses it (now, if none does)."""
        with self._lock:
            self._closed = True
            client = self._client if self._active == 0 else None
            if client is not None:
                self._client = None
        if client is not None:
            client.close()

    @property
    def in_flight(self) -> int:
        return self._active

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ fetching

    def get(
        self,
        url: str,
        *,
        accept: str = "application/json",
        https_only: bool = True,
        kind: str = "other",
    ) -> Response:
        """GET ``url`` under the policy above; every failure is a :class:`FetchError`.
        ``kind`` names what it is for (the observer's ``discovery``, ``jwks``...)."""
        return self.request("GET", url, accept=accept, https_only=https_only, kind=kind)

    def request(
        self,
        method: str,
        url: str,
        *,
        accept: str = "application/json",
        https_only: bool = True,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        retries: int | None = None,
        deadline: float | None = None,
        conditional: Mapping[str, str] | None = None,
        kind: str = "other",
    ) -> Response:
        """One request under the policy above; every failure is a :class:`FetchError`
        (with the ``status`` the server answered, if any).

        ``conditional`` (``If-None-Match``, ``If-Modified-Since``) makes a ``GET``
        conditional: ``304 Not Modified`` is then an answer (a :class:`Response` with
        status 304 and no body); without them a ``304`` is a failure like any other.

        ``headers`` go with every attempt; when they are given, a redirect to another
        origin is refused (credentials never leave the server they were meant for). A
        method other than ``GET`` follows no redirect, and any ``2xx`` answers it (a
        ``GET`` wants ``200``). ``retries`` replaces ``ENGINE_HTTP_MAX_RETRIES`` for this
        request; ``deadline`` (a ``time.monotonic()`` value) ends it sooner than the
        timeout would (several requests sharing one budget). ``kind`` names what the
        request is for, as the observer hears it.
        """
        observer = self.observer
        if observer is None:
            return self._request(
                method, url, accept, https_only, headers, body, retries, deadline, conditional
            )
        started = time.perf_counter()
        try:
            response = self._request(
                method, url, accept, https_only, headers, body, retries, deadline, conditional
            )
        except FetchError as e:
            _observe(observer, kind, "failed", started, error_type(e))
            raise
        _observe(observer, kind, "not_modified" if response.status == 304 else "ok", started, None)
        return response

    def _request(
        self,
        method: str,
        url: str,
        accept: str,
        https_only: bool,
        headers: Mapping[str, str] | None,
        body: bytes | None,
        retries: int | None,
        deadline: float | None,
        conditional: Mapping[str, str] | None,
    ) -> Response:
        """:meth:`request`'s work."""
        end = time.monotonic() + self.limits.timeout
        if deadline is not None:
            end = min(end, deadline)
        scheme = _scheme(url)
        if https_only and scheme != "https":
            raise _fail(url, "only https:// URLs are fetched")
        if scheme not in ("http", "https"):
            raise _fail(url, "only http:// and https:// URLs are fetched")
        if WASM:  # no sockets: the runtime's fetch answered it, or will (see _held)
            return _held(self, method, url, accept, https_only, headers)
        client = self._acquire()
        token = _DEADLINE.set(end)
        call = _Call(
            method.upper(),
            accept,
            https_only,
            dict(headers or {}),
            body,
            tuple((conditional or {}).items()),
        )
        try:
            return self._get(client, url, call, end, retries)
        finally:
            _DEADLINE.reset(token)
            self._release()

    @contextlib.contextmanager
    def stream(
        self,
        url: str,
        *,
        idle_timeout: float,
        idle_name: str = "",
        accept: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> Iterator[StreamBody]:
        """GET ``url`` and hand its body over in chunks as they arrive (server-sent events).

        Connecting, TLS and the response head obey the fetch deadline; after that each
        read waits at most ``idle_timeout`` seconds (a stream that goes quiet ends with a
        :class:`FetchError` naming ``idle_name``, the limit's name), and the stream may
        last as long as the server keeps it up.
        No retries, no redirects (the caller reconnects); the status must be ``200``.
        What the caller keeps of the chunks is its own to bound.
        """
        import httpx

        if _scheme(url) != "https":
            raise _fail(url, "only https:// URLs are fetched")
        client = self._acquire()
        token = _DEADLINE.set(time.monotonic() + self.limits.timeout)
        try:
            with self._lock:
                self.request_count += 1
            try:
                request = client.build_request(
                    "GET",
                    url,
                    headers={**(headers or {}), "Accept": accept, "Cache-Control": "no-cache"},
                    timeout=httpx.Timeout(
                        self.limits.timeout, read=max(self.limits.timeout, idle_timeout)
                    ),
                )
                resp = client.send(request, stream=True)
            except httpx.TimeoutException:
                raise self._timed_out(url, 1) from None
            except (httpx.HTTPError, ValueError, OSError) as e:
                if _is_tls_failure(e):
                    raise _fail(url, f"TLS failed ({_describe(e)})") from None
                raise _fail(url, _describe(e)) from None
            try:
                if resp.status_code != 200:
                    raise _fail(
                        url, f"fetching failed: {_status_text(resp)}", status=resp.status_code
                    )
                if resp.headers.get("content-encoding", "identity").strip().lower() not in (
                    "",
                    "identity",
                ):
                    raise _fail(url, "a compressed event stream is not read")

                def chunks() -> Iterator[bytes]:
                    raw = resp.iter_raw()
                    while True:
                        _DEADLINE.set(time.monotonic() + idle_timeout)
                        try:
                            chunk = next(raw)
                        except StopIteration:
                            return
                        except httpx.TimeoutException:
                            named = f" ({idle_name})" if idle_name else ""
                            raise _fail(
                                url, f"the stream was silent for {idle_timeout:g} s{named}"
                            ) from None
                        except (httpx.TransportError, OSError) as e:
                            raise _fail(url, f"the stream broke ({_describe(e)})") from None
                        yield chunk

                yield StreamBody(chunks(), resp)
            finally:
                resp.close()
        finally:
            _DEADLINE.reset(token)
            self._release()

    def _timed_out(self, url: str, attempts: int) -> FetchError:
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        return _fail(
            url,
            f"timed out after {self.limits.timeout:g} s (ENGINE_HTTP_REQUEST_TIMEOUT, the "
            f"deadline of the whole fetch){tries}",
        )

    def _get(
        self,
        client: httpx.Client,
        url: str,
        call: _Call,
        deadline: float,
        retries: int | None = None,
    ) -> Response:
        attempts = (self.limits.max_retries if retries is None else retries) + 1
        last = "no attempt made"
        last_status: int | None = None
        retry_after: float | None = None
        for attempt in range(attempts):
            if attempt:
                pause = _backoff(attempt)
                if retry_after is not None and retry_after > pause:
                    pause = retry_after
                left = deadline - time.monotonic()
                if pause >= left:
                    asked = (
                        f"; the server asked to retry after {retry_after:g} s"
                        if retry_after is not None
                        else ""
                    )
                    raise _fail(
                        url,
                        f"{last}{asked}, which the deadline of {self.limits.timeout:g} s "
                        f"(ENGINE_HTTP_REQUEST_TIMEOUT) does not leave time for "
                        f"(after {attempt} attempt{'s' if attempt > 1 else ''})",
                        last_status,
                    )
                time.sleep(pause)
            try:
                return self._attempt(client, url, call, deadline, attempt + 1)
            except _Retry as e:
                last = e.reason
                last_status = e.status
                retry_after = e.retry_after
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        raise _fail(url, f"{last}{tries}", last_status)

    def _attempt(
        self,
        client: httpx.Client,
        url: str,
        call: _Call,
        deadline: float,
        attempt: int,
    ) -> Response:
        import httpx

        current = url
        for _hop in range(self.limits.max_redirects + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(url, attempt)
            with self._lock:
                self.request_count += 1
            try:
                request = client.build_request(
                    call.method,
                    current,
                    headers={
                        **call.headers,
                        **dict(call.conditional),
                        "Accept": call.accept,
                        "Accept-Encoding": "gzip, deflate",
                    },
                    content=call.body,
                    timeout=httpx.Timeout(left),
                )
                resp = client.send(request, stream=True)
            except httpx.TimeoutException:
                raise self._timed_out(url, attempt) from None
            except httpx.ProxyError as e:  # the proxy said no, or cannot be used
                raise _fail(url, f"{e}; not retried") from None
            except httpx.TransportError as e:
                if _is_tls_failure(e):
                    raise _fail(url, f"TLS failed ({_describe(e)}); not retried") from None
                raise _Retry(_describe(e)) from None
            except httpx.HTTPError as e:  # an invalid URL and the like
                raise _fail(url, _describe(e)) from None
            except ValueError as e:  # e.g. a host name IDNA cannot encode
                raise _fail(url, _describe(e)) from None
            except OSError as e:
                raise _Retry(_describe(e)) from None
            try:
                status = resp.status_code
                if status in REDIRECT_STATUSES:
                    if call.method != "GET":
                        raise _fail(
                            url,
                            f"HTTP status {status}: a {call.method} follows no redirect",
                            status,
                        )
                    target = self._redirect(url, current, resp, call.https_only)
                    if call.headers and _origin(target) != _origin(current):
                        raise _fail(
                            url,
                            f"redirect from {short_url(current)} to {short_url(target)} "
                            "refused (credentials stay with their origin)",
                            status,
                        )
                    current = target
                    continue
                if status in RETRY_STATUSES:
                    raise _Retry(
                        _status_text(resp),
                        retry_after_seconds(resp.headers.get("retry-after")),
                        status,
                    )
                if status == 304 and call.conditional:  # what the validators name is current
                    return Response(
                        url=url,
                        final_url=current,
                        status=304,
                        headers={k.lower(): v for k, v in resp.headers.items()},
                        body=b"",
                    )
                ok = status == 200 if call.method == "GET" else 200 <= status < 300
                if not ok:
                    raise _fail(url, f"fetching failed: {_status_text(resp)}", status)
                body = self._read(url, resp, attempt)
                return Response(
                    url=url,
                    final_url=current,
                    status=status,
                    headers={k.lower(): v for k, v in resp.headers.items()},
                    body=body,
                )
            finally:
                resp.close()
        raise _fail(url, f"more than {self.limits.max_redirects} redirects (MAX_REDIRECTS)")

    @staticmethod
    def _redirect(url: str, current: str, resp: httpx.Response, https_only: bool) -> str:
        location = resp.headers.get("location")
        if not location:
            raise _fail(url, f"HTTP status {resp.status_code} without a Location header")
        target = urljoin(current, location.strip())
        scheme = _scheme(target)
        if scheme not in ("http", "https"):
            raise _fail(url, f"redirect to {short_url(target)} refused: not http(s)")
        if scheme != "https" and (https_only or _scheme(current) == "https"):
            why = "only https is fetched here" if https_only else "a downgrade from https"
            raise _fail(
                url,
                f"redirect from {short_url(current)} to {short_url(target)} refused ({why})",
            )
        return target

    def _read(self, url: str, resp: httpx.Response, attempt: int) -> bytes:
        import httpx

        cap = self.limits.max_response_size
        encoding = resp.headers.get("content-encoding", "").strip().lower()
        decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decoder = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise _fail(url, f"unsupported Content-Encoding {encoding[:40]!r}")
        declared = resp.headers.get("content-length", "").strip()
        if decoder is None and declared.isdigit() and len(declared) < 20 and int(declared) > cap:
            raise _fail(
                url,
                f"the response is {declared} bytes, more than "
                f"ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})",
            )
        too_big = f"the response is larger than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})"
        chunks: list[bytes] = []
        size = 0
        try:
            for raw in resp.iter_raw():
                if decoder is None:
                    data = raw
                else:
                    try:
                        data = decoder.decompress(raw, cap - size + 1)
                    except zlib.error as e:
                        raise _fail(url, f"the {encoding} body is corrupt ({e})") from None
                    if decoder.unconsumed_tail:
                        raise _fail(url, too_big)
                size += len(data)
                if size > cap:
                    raise _fail(url, too_big)
                chunks.append(data)
            if decoder is not None:
                tail = decoder.flush()
                size += len(tail)
                if size > cap:
                    raise _fail(url, too_big)
                chunks.append(tail)
        except httpx.TimeoutException:
            raise self._timed_out(url, attempt) from None
        except (httpx.TransportError, OSError) as e:
            raise _Retry(f"the connection broke while reading ({_describe(e)})") from None
        return b"".join(chunks)


def _observe(
    observer: FetchObserver, kind: str, outcome: str, started: float, error: str | None
) -> None:
    with contextlib.suppress(Exception):  # the observer's failure is not the fetch's
        observer(kind, outcome, time.perf_counter() - started, error)


def _scheme(url: str) -> str:
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


def _status_text(resp: httpx.Response) -> str:
    return f"HTTP status {resp.status_code} {resp.reason_phrase}".rstrip()


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text[:300]}"


def cache_control_max_age(headers: Mapping[str, str]) -> int | None:
    """Seconds from ``Cache-Control`` (``no-store``/``no-cache`` count as 0), else None."""
    value = headers.get("cache-control")
    if not value:
        return None
    max_age: int | None = None
    for part in value.split(",")[:32]:
        token = part.strip().lower()
        if token in ("no-store", "no-cache"):
            return 0
        if token.startswith("max-age="):
            raw = token[len("max-age=") :].strip().strip('"')
            if raw.isdigit() and len(raw) <= 12:
                max_age = int(raw)
    return max_age
