"""Outbound HTTPS for discovery, JWKS and status lists: bounded, retried, verified.

Every fetch is HTTPS only, checked against the system trust store (plus ``SSL_CERT_FILE``
when set, for private CAs), bounded in size and time, and retried on transient failures.
Failures are :class:`FetchError`, which callers turn into drop reasons; nothing here
raises to the engine's callers.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from polang.errors import ConfigError
from polang.tokens.settings import TokenSettings

if TYPE_CHECKING:
    import httpx


class FetchError(Exception):
    """A document could not be fetched or parsed; the message says what and from where."""


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise FetchError(f"{self.url}: response is not JSON ({e})") from e


def default_ssl_context() -> ssl.SSLContext:
    """The system trust store, plus ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set."""
    ctx = ssl.create_default_context()
    cafile = os.environ.get("SSL_CERT_FILE")
    capath = os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        try:
            ctx.load_verify_locations(cafile=cafile or None, capath=capath or None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                f"SSL_CERT_FILE/SSL_CERT_DIR: cannot load CA certificates ({e})"
            ) from e
    return ctx


_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class HttpFetcher:
    """A shared, thread-safe HTTPS client with the ``ENGINE_HTTP_*`` limits."""

    def __init__(self, settings: TokenSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self.request_count = 0

    def _get_client(self) -> httpx.Client:
        import httpx  # on first fetch only: an engine that never fetches never loads it

        with self._lock:
            if self._client is None:
                try:
                    ctx = self._settings.ssl_context or default_ssl_context()
                except ConfigError as e:
                    raise FetchError(str(e)) from e
                self._client = httpx.Client(
                    verify=ctx,
                    timeout=httpx.Timeout(self._settings.http_timeout),
                    follow_redirects=True,
                    trust_env=False,
                    headers={"User-Agent": "polang"},
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def get(self, url: str, *, accept: str = "application/json") -> FetchResult:
        """GET ``url`` (HTTPS only), retrying connection errors and 429/5xx responses."""
        parts = urlsplit(url)
        if parts.scheme.lower() != "https" or not parts.hostname:
            raise FetchError(f"{url}: only https:// URLs are fetched")
        client = self._get_client()
        attempts = self._settings.http_max_retries + 1
        last: str = "no attempt made"
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(0.05 * (2 ** (attempt - 1)), 1.0))
            try:
                result = self._get_once(client, url, accept)
            except _Transient as e:
                last = str(e)
                continue
            return result
        raise FetchError(f"{url}: {last} (after {attempts} attempt(s))")

    def _get_once(self, client: httpx.Client, url: str, accept: str) -> FetchResult:
        import httpx

        limit = self._settings.http_max_response_size
        with self._lock:
            self.request_count += 1
        try:
            with client.stream("GET", url, headers={"Accept": accept}) as resp:
                final = str(resp.url)
                if urlsplit(final).scheme.lower() != "https":
                    raise FetchError(f"{url}: redirected to a non-https URL {final}")
                if resp.status_code in _RETRY_STATUSES:
                    raise _Transient(f"HTTP {resp.status_code}")
                if resp.status_code != 200:
                    raise FetchError(f"{url}: HTTP {resp.status_code}")
                declared = resp.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise FetchError(
                        f"{url}: response of {declared} bytes exceeds the limit of {limit} bytes"
                    )
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise FetchError(f"{url}: response exceeds the limit of {limit} bytes")
                    chunks.append(chunk)
                return FetchResult(
                    url=url,
                    status=resp.status_code,
                    headers={k.lower(): v for k, v in resp.headers.items()},
                    body=b"".join(chunks),
                )
        except httpx.TransportError as e:
            if _is_tls_failure(e):
                raise FetchError(f"{url}: TLS verification failed ({e})") from e
            raise _Transient(f"{type(e).__name__}: {e}") from e
        except httpx.HTTPError as e:
            raise FetchError(f"{url}: {type(e).__name__}: {e}") from e


class _Transient(Exception):
    """A failure worth retrying (connection refused, timeout, 5xx)."""


def _is_tls_failure(e: BaseException) -> bool:
    cur: BaseException | None = e
    while cur is not None:
        if isinstance(cur, ssl.SSLCertVerificationError):
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def cache_control_max_age(headers: Mapping[str, str]) -> int | None:
    """Seconds from ``Cache-Control`` (``no-store``/``no-cache`` count as 0), else None."""
    value = headers.get("cache-control")
    if not value:
        return None
    max_age: int | None = None
    for part in value.split(","):
        token = part.strip().lower()
        if token in ("no-store", "no-cache"):
            return 0
        if token.startswith("max-age="):
            raw = token[len("max-age=") :].strip().strip('"')
            if raw.isdigit():
                max_age = int(raw)
    return max_age
