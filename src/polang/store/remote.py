"""Fetching a store over HTTP(S) with the configuration's timeout, retries and size cap.

HTTPS uses the system trust store and honours ``SSL_CERT_FILE`` (private CAs), through
an ``ssl`` default context rather than a bundled CA list.
"""

from __future__ import annotations

import ssl
import time
from functools import lru_cache

import httpx

from polang import __version__
from polang.config import Config
from polang.store.errors import Problems

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_BACKOFF_START = 0.2
_BACKOFF_MAX = 2.0


@lru_cache(maxsize=4)
def _ssl_context(_cert_file: str | None) -> ssl.SSLContext:
    # keyed by SSL_CERT_FILE so a changed variable gives a fresh context
    return ssl.create_default_context()


def default_ssl_context() -> ssl.SSLContext:
    """The system trust store (plus ``SSL_CERT_FILE`` when it is set)."""
    import os

    return _ssl_context(os.environ.get("SSL_CERT_FILE"))


def fetch_bytes(
    url: str,
    config: Config,
    *,
    accept: str = "*/*",
    ssl_context: ssl.SSLContext | None = None,
) -> bytes:
    """GET ``url``; raises ``PolicyStoreLoadError`` (kind ``fetch``) when it fails.

    Connection errors, timeouts and transient statuses (5xx, 408, 429) are retried
    ``ENGINE_HTTP_MAX_RETRIES`` times with a short backoff; other statuses are not.
    ``ssl_context`` replaces the default trust (system store plus ``SSL_CERT_FILE``).
    """
    problems = Problems(url)
    cap = config.http_max_response_size_bytes
    attempts = 1 + config.http_max_retries
    last = ""
    headers = {"Accept": accept, "User-Agent": f"polang/{__version__}"}
    with httpx.Client(
        timeout=config.http_request_timeout,
        follow_redirects=True,
        verify=ssl_context or default_ssl_context(),
        headers=headers,
    ) as client:
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(_BACKOFF_START * 2 ** (attempt - 1), _BACKOFF_MAX))
            try:
                with client.stream("GET", url) as resp:
                    if resp.status_code != 200:
                        last = f"HTTP status {resp.status_code} {resp.reason_phrase}".rstrip()
                        if resp.status_code in RETRY_STATUSES:
                            continue
                        problems.fail("fetch", url, f"fetching the store failed: {last}")
                    declared = resp.headers.get("content-length")
                    if declared is not None and declared.isdigit() and int(declared) > cap:
                        problems.fail(
                            "fetch",
                            url,
                            f"the response is {declared} bytes, more than "
                            f"ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})",
                        )
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in resp.iter_bytes():
                        size += len(chunk)
                        if size > cap:
                            problems.fail(
                                "fetch",
                                url,
                                "the response is larger than "
                                f"ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})",
                            )
                        chunks.append(chunk)
                    return b"".join(chunks)
            except httpx.TimeoutException:
                last = f"timed out after {config.http_request_timeout:g} s"
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
    problems.fail("fetch", url, f"fetching the store failed: {last}{tries}")
