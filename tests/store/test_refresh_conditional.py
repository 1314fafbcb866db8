"""Store refresh by conditional GET against a real HTTPS server on loopback.

The server answers as a CDN does (``ETag``, ``Last-Modified``, ``304 Not Modified`` to
matching conditions), and as a broken or lying one does: a ``304`` to a request that
named no copy, an ``ETag`` on a body that does not load or on an error, validators too
long to send back, conditions ignored. Each refresh either keeps the last good store or
replaces it with one that loaded in full, and says which.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from polang.config import Config
from polang.store import PolicyStoreLoadError, PolicyStoreSource, StoreRefresher
from polang.store.remote import MAX_VALIDATOR_CHARS, Validators
from tokens.oidc_server import OidcProvider, redirect, send

from .storekit import Sink, store_files, zip_bytes

FAST = Config(http_request_timeout=5, http_max_retries=0)
EXTRA = '@id("extra") permit (principal, action == App::Action::"edit", resource);\n'
DATE = "Wed, 21 Oct 2015 07:28:00 GMT"


def archive(extra: bool = False) -> bytes:
    return zip_bytes(store_files({"policies/extra.polang": EXTRA} if extra else None))


class Versioned:
    """A store URL's answers: the body with its validators, ``304`` when a condition
    matches (``If-None-Match`` first, as RFC 9110 13.2.2 orders them), and the
    conditions each request carried."""

    def __init__(self, body: bytes, etag: str | None = '"v1"', last_modified: str | None = None):
        self.body = body
        self.etag = etag
        self.last_modified = last_modified
        self.honour = True  # False: conditions ignored (always the body)
        self.status: int | None = None  # answer this status (with the validators) instead
        self.seen: list[tuple[str | None, str | None]] = []
        self.lock = threading.Lock()

    def __call__(self, h: BaseHTTPRequestHandler) -> None:
        inm, ims = h.headers.get("If-None-Match"), h.headers.get("If-Modified-Since")
        with self.lock:
            self.seen.append((inm, ims))
        headers = {}
        if self.etag is not None:
            headers["ETag"] = self.etag
        if self.last_modified is not None:
            headers["Last-Modified"] = self.last_modified
        if self.status is not None:
            send(h, self.status, b"", headers)
            return
        if self.honour and (
            (inm is not None and inm == self.etag)
            or (inm is None and ims is not None and ims == self.last_modified)
        ):
            send(h, 304, b"", headers)
            return
        send(h, 200, self.body, headers)

    @property
    def last(self) -> tuple[str | None, str | None]:
        return self.seen[-1]


@pytest.fixture
def serve(server_ssl_context: ssl.SSLContext) -> Iterator[Callable[[], OidcProvider]]:
    started: list[OidcProvider] = []

    def make() -> OidcProvider:
        p = OidcProvider(server_ssl_context).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


Site = tuple[Versioned, Callable[[], StoreRefresher], Sink]


@pytest.fixture
def site(serve: Callable[[], OidcProvider], client_ssl_context: ssl.SSLContext) -> Site:
    """A served store, and refreshers of it (with their sink)."""
    provider = serve()
    route = Versioned(archive())
    provider.routes["/s.parc"] = route
    sink = Sink()

    def refresher() -> StoreRefresher:
        source = PolicyStoreSource.url(provider.url("/s.parc"))
        return StoreRefresher(
            source, FAST, sink.update, sink.error, interval=60, ssl_context=client_ssl_context
        )

    return route, refresher, sink


def test_a_304_keeps_the_store_without_reading_a_body(site: Site) -> None:
    route, refresher, sink = site
    r = refresher()
    first = r.load_first()
    assert route.last == (None, None)  # nothing to name yet: a plain GET
    assert r.validators == Validators('"v1"', None)
    # the server now holds a body that would not load, yet says nothing changed
    route.body = b"not a store at all"
    assert r.refresh_now() is False
    assert route.last == ('"v1"', None)
    assert (r.last_outcome, r.not_modified, r.current) == ("not_modified", 1, first)
    assert sink.stores == [] and sink.errors == [] and r.last_error is None
    status = r.status()
    assert status["last_outcome"] == "not_modified" and status["etag"] == '"v1"'
    assert status["last_success_at"].endswith("Z") and status["last_failure_at"] is None


def test_a_new_etag_brings_the_new_store(site: Site) -> None:
    route, refresher, sink = site
    r = refresher()
    r.load_first()
    route.body, route.etag = archive(extra=True), '"v2"'
    assert r.refresh_now() is True
    assert route.last == ('"v1"', None)
    assert "extra" in sink.stores[-1].policies and r.current is sink.stores[-1]
    assert (r.last_outcome, r.validators.etag) == ("updated", '"v2"')
    assert r.refresh_now() is False
    assert route.last == ('"v2"', None) and r.last_outcome == "not_modified"


def test_last_modified_alone(site: Site) -> None:
    route, refresher, _ = site
    route.etag, route.last_modified = None, DATE
    r = refresher()
    r.load_first()
    assert r.refresh_now() is False
    assert route.last == (None, DATE) and r.last_outcome == "not_modified"


def test_a_304_to_a_request_naming_no_copy_is_a_lie(site: Site) -> None:
    route, refresher, _ = site
    route.status = 304
    with pytest.raises(PolicyStoreLoadError) as e:
        refresher().load_first()
    assert e.value.kind == "fetch"
    assert "304 Not Modified to a request without If-None-Match" in str(e.value)


def test_a_refresher_without_validators_refuses_a_304(site: Site) -> None:
    route, refresher, sink = site
    made = refresher()
    first = made.load_first()
    # a refresher given a store it holds no validators for (loaded elsewhere)
    r = StoreRefresher(
        made.source, FAST, sink.update, sink.error, current=first, ssl_context=made.ssl_context
    )
    route.status = 304
    assert r.refresh_now() is False
    assert route.last == (None, None)  # it held no validators: it sent none
    assert r.last_outcome == "failed" and r.current is first
    assert "names no copy the engine holds" in str(sink.errors[-1])
    assert r.status()["last_failure_reason"] and r.status()["consecutive_failures"] == 1


def test_an_etag_on_a_body_that_fails_is_never_sent_back(
    site: Site,
) -> None:
    route, refresher, sink = site
    r = refresher()
    first = r.load_first()
    route.body, route.etag = zip_bytes(store_files({"policies/main.polang": "permit("})), '"v2"'
    assert r.refresh_now() is False
    assert r.last_outcome == "failed" and "policy_syntax" in str(sink.errors[-1])
    assert r.validators.etag == '"v1"'  # the broken body's ETag is not kept
    assert r.refresh_now() is False  # so the next refresh reads the body again
    assert route.last == ('"v1"', None) and r.status()["consecutive_failures"] == 2
    # an error answer that carries an ETag lends it to nothing either
    route.status, route.etag = 500, '"v9"'
    assert r.refresh_now() is False and r.validators.etag == '"v1"'
    assert "500" in str(sink.errors[-1]) and r.current is first
    # fixed on the server: read, loaded, swapped in
    route.status, route.body, route.etag = None, archive(extra=True), '"v3"'
    assert r.refresh_now() is True
    assert (r.validators.etag, r.status()["consecutive_failures"]) == ('"v3"', 0)
    assert r.status()["last_failure_reason"]  # the last failure stays on record


def test_a_server_that_ignores_conditions(site: Site) -> None:
    route, refresher, sink = site
    route.honour = False
    r = refresher()
    first = r.load_first()
    assert r.refresh_now() is False and r.last_outcome == "unchanged" and r.current is first
    route.etag = '"v1-gzip"'  # the same bytes under a new ETag: the new one is kept
    assert r.refresh_now() is False and r.validators.etag == '"v1-gzip"'
    assert sink.stores == [] and sink.errors == []


def test_unusable_validators_are_never_sent(site: Site) -> None:
    route, refresher, _ = site
    route.etag = '"' + "a" * MAX_VALIDATOR_CHARS + '"'
    route.last_modified = DATE
    r = refresher()
    r.load_first()
    assert r.validators == Validators(None, DATE)
    r.refresh_now()
    assert route.last == (None, DATE)
    for bad in ("x\x01y", "caf\u00e9", "", "  "):
        assert Validators.from_headers({"etag": bad}).etag is None
    assert Validators.from_headers({"etag": ' W/"weak" '}).etag == 'W/"weak"'


def test_validators_follow_a_redirect_to_another_origin(
    serve: Callable[[], OidcProvider], client_ssl_context: ssl.SSLContext
) -> None:
    front, cdn = serve(), serve()
    route = Versioned(archive())
    cdn.routes["/s.parc"] = route
    front.routes["/s.parc"] = redirect(cdn.url("/s.parc"))
    sink = Sink()
    source = PolicyStoreSource.url(front.url("/s.parc"))
    r = StoreRefresher(source, FAST, sink.update, sink.error, ssl_context=client_ssl_context)
    r.load_first()
    assert r.refresh_now() is False
    assert route.last == ('"v1"', None) and r.last_outcome == "not_modified"
    assert sink.errors == []
