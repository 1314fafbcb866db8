"""Fetching a store over HTTP(S): the engine's one HTTP client, failures as load errors.

Timeout (a deadline for the whole fetch), retries, redirects, the size cap and TLS trust
are those of :mod:`polang.http`, the same for every fetch the engine makes. A store URL
may be ``http://`` (the operator's choice), but a fetch that started on ``https://``
never follows a redirect to ``http://``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polang.config import Config
from polang.http import Fetcher, FetchError, FetchLimits
from polang.inputs.problems import Problems

if TYPE_CHECKING:
    import ssl


def fetch_bytes(
    url: str,
    config: Config,
    *,
    accept: str = "*/*",
    ssl_context: ssl.SSLContext | None = None,
    fetcher: Fetcher | None = None,
) -> bytes:
    """GET ``url``; raises ``PolicyStoreLoadError`` (kind ``fetch``) when it fails.

    ``ssl_context`` replaces the default trust (system store plus ``SSL_CERT_FILE``).
    ``fetcher`` is a long-lived client to reuse; without one, a client is made for this
    fetch and closed after it.
    """
    problems = Problems(url)
    own = fetcher is None
    client = fetcher or Fetcher(fetch_limits(config), ssl_context)
    try:
        return client.get(url, accept=accept, https_only=False).body
    except FetchError as e:
        problems.fail("fetch", url, f"fetching the store failed: {e.reason}")
    finally:
        if own:
            client.close()


def fetch_limits(config: Config) -> FetchLimits:
    """The ``ENGINE_HTTP_*`` values as the HTTP client takes them: the client does not
    know the configuration (both sit in one layer, below the store)."""
    return FetchLimits(
        timeout=config.http_request_timeout,
        max_retries=config.http_max_retries,
        max_response_size=config.http_max_response_size_bytes,
    )
