"""Fetching a store over HTTP(S): the engine's one HTTP client, failures as load errors.

Timeout (a deadline for the whole fetch), retries, redirects, the size cap and TLS trust
are those of :mod:`polang.http`, the same for every fetch the engine makes. A store URL
may be ``http://`` (the operator's choice), but a fetch that started on ``https://``
never follows a redirect to ``http://``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polang.config import Config
from polang.http import Fetcher, FetchError, FetchLimits, FetchObserver
from polang.inputs.problems import Problems

if TYPE_CHECKING:
    import ssl

MAX_VALIDATOR_CHARS = 1024
"""Longest ``ETag`` or ``Last-Modified`` value kept to send back (a longer one, or one
with characters a header cannot carry, is not used: the next refresh fetches the whole
body, as without validators)."""


@dataclass(frozen=True, slots=True)
class Validators:
    """What the server said identifies the body the current store was read from
    (RFC 9110 8.8): sent back as ``If-None-Match`` / ``If-Modified-Since``."""

    etag: str | None = None
    last_modified: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Validators:
        """A response's validators (header names lowercase), the unusable left out."""
        return cls(_usable(headers.get("etag")), _usable(headers.get("last-modified")))

    def request_headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.etag is not None:
            out["If-None-Match"] = self.etag
        if self.last_modified is not None:
            out["If-Modified-Since"] = self.last_modified
        return out

    def __bool__(self) -> bool:
        return self.etag is not None or self.last_modified is not None


def _usable(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > MAX_VALIDATOR_CHARS:
        return None
    if any(not (" " <= c <= "~") for c in value):  # visible ASCII and spaces only
        return None
    return value


@dataclass(frozen=True, slots=True)
class Fetched:
    """A conditional fetch's answer: ``body`` is ``None`` when the server said ``304 Not
    Modified`` to the validators sent; ``validators`` are the response's."""

    body: bytes | None
    validators: Validators


def fetch_bytes(
    url: str,
    config: Config,
    *,
    accept: str = "*/*",
    ssl_context: ssl.SSLContext | None = None,
    fetcher: Fetcher | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """GET ``url``; raises ``PolicyStoreLoadError`` (kind ``fetch``) when it fails (its
    ``__context__`` is the :class:`FetchError`, whose ``status`` tells a ``401``).

    ``ssl_context`` replaces the default trust (system store plus ``SSL_CERT_FILE``).
    ``fetcher`` is a long-lived client to reuse; without one, a client is made for this
    fetch and closed after it. ``headers`` (credentials) keep the fetch on its origin.
    """
    body = fetch_if_changed(
        url,
        config,
        Validators(),
        accept=accept,
        ssl_context=ssl_context,
        fetcher=fetcher,
        headers=headers,
    ).body
    assert body is not None  # no validators sent: a 304 is a failure, never an answer
    return body


def fetch_if_changed(
    url: str,
    config: Config,
    validators: Validators,
    *,
    accept: str = "*/*",
    ssl_context: ssl.SSLContext | None = None,
    fetcher: Fetcher | None = None,
    headers: Mapping[str, str] | None = None,
    observer: FetchObserver | None = None,
) -> Fetched:
    """GET ``url`` conditionally on ``validators`` (none: a plain GET); a ``304`` to the
    validators sent is a :class:`Fetched` without a body. Raises ``PolicyStoreLoadError``
    (kind ``fetch``) when the fetch fails, a ``304`` to a request without validators
    included (the server names a copy the engine does not hold). The other arguments are
    :func:`fetch_bytes`'s; ``observer`` is told of the fetch (a client made here)."""
    problems = Problems(url)
    own = fetcher is None
    client = fetcher or Fetcher(fetch_limits(config), ssl_context, observer=observer)
    try:
        response = client.request(
            "GET",
            url,
            accept=accept,
            https_only=False,
            headers=headers,
            conditional=validators.request_headers(),
            kind="store",
        )
    except FetchError as e:
        reason = e.reason
        if e.status == 304:
            reason = (
                "the server answered 304 Not Modified to a request without If-None-Match "
                "or If-Modified-Since: it names no copy the engine holds"
            )
        problems.fail("fetch", url, f"fetching the store failed: {reason}")
    finally:
        if own:
            client.close()
    found = Validators.from_headers(response.headers)
    if response.status == 304:
        # a 304 may carry the validators again; what it leaves out stays as sent
        return Fetched(
            None,
            Validators(
                found.etag or validators.etag, found.last_modified or validators.last_modified
            ),
        )
    return Fetched(response.body, found)


def fetch_limits(config: Config) -> FetchLimits:
    """The ``ENGINE_HTTP_*`` values as the HTTP client takes them: the client does not
    know the configuration (both sit in one layer, below the store)."""
    return FetchLimits(
        timeout=config.http_request_timeout,
        max_retries=config.http_max_retries,
        max_response_size=config.http_max_response_size_bytes,
    )
