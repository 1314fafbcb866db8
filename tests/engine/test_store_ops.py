"""Operating an engine whose store comes from a URL: ``refresh_store``, store listeners
and ``health()``, against real HTTPS servers on loopback (a trustme CA).

One provider serves the store archive (with ``ETag``s, ``304``s and failures on demand)
and is the store's trusted issuer (discovery and JWKS); a second issuer's discovery
fails, so its health says why.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, PolicyStoreError, RequestError
from polang.engine.health import StoreEvent
from tokens.oidc_server import OidcProvider

from .test_engine import SHOP_SCHEMA, VIEW, item, parc_bytes, shop_files, user

BAD_NAMESPACE = """
namespace Bad {
    type Url = { "host": String, "path": String, "protocol": String };
    entity TrustedIssuer = { "issuer_entity_id": Url };
}
"""
ALL_VIEW = '@id("all-view") permit (principal, action == Shop::Action::"view", resource);\n'


class StoreSite:
    """The provider's ``/shop.parc``: the current archive and its ETag; a 304 when the
    request names it; ``status`` to fail on purpose."""

    def __init__(self, provider: OidcProvider, bad: OidcProvider) -> None:
        self.provider, self.bad = provider, bad
        self.version = 0
        self.status: int | None = None
        self.seen: list[str | None] = []
        self.publish("1.0.0")
        provider.routes["/shop.parc"] = self.answer

    def files(
        self, version: str, policies: str | None = None, schema: str = SHOP_SCHEMA
    ) -> dict[str, str]:
        files = shop_files(version=version, schema=schema + BAD_NAMESPACE)
        if policies is not None:
            files["policies/shop.polang"] = policies
        files["trusted-issuers/shop.json"] = json.dumps(
            {
                "shop_idp": {
                    "name": "Shop",
                    "openid_configuration_endpoint": self.provider.discovery_url,
                    "token_metadata": {"access_token": {"entity_type_name": "Shop::Access_token"}},
                },
                "bad_idp": {
                    "name": "Bad",
                    "openid_configuration_endpoint": self.bad.discovery_url,
                    "token_metadata": {},
                },
            }
        )
        return files

    def publish(self, version: str, policies: str | None = None, schema: str = SHOP_SCHEMA) -> None:
        self.body = parc_bytes(self.files(version, policies, schema))
        self.etag = f'"{version}"'

    def answer(self, h: Any) -> None:
        from tokens.oidc_server import send

        inm = h.headers.get("If-None-Match")
        self.seen.append(inm)
        if self.status is not None:
            send(h, self.status, b"down", {"ETag": '"error"'})
        elif inm == self.etag:
            send(h, 304, b"", {"ETag": self.etag})
        else:
            send(h, 200, self.body, {"ETag": self.etag})

    @property
    def url(self) -> str:
        return self.provider.url("/shop.parc")


@pytest.fixture
def site(server_ssl_context: ssl.SSLContext) -> Iterator[StoreSite]:
    provider = OidcProvider(server_ssl_context)
    provider.add_key("RS256")
    bad = OidcProvider(server_ssl_context)
    provider.start(), bad.start()
    bad.fail[bad.discovery_path] = 500
    try:
        yield StoreSite(provider, bad)
    finally:
        provider.stop()
        bad.stop()


@pytest.fixture
def make_engine(client_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(url: str, **props: Any) -> Engine:
        config = {
            "ENGINE_POLICY_STORE_URI": url,
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            "ENGINE_LOG_TYPE": "memory",
            "ENGINE_LOG_LEVEL": "INFO",
            **props,
        }
        e = Engine(config, ssl_context=client_ssl_context)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def decide(e: Engine) -> bool:
    return e.authorize_unsigned(VIEW, item("lamp", owner="carol"), None, user("bob")).decision


def test_refresh_store_is_conditional_from_the_first_load(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    e = make_engine(site.url)
    assert site.seen == [None]
    assert e.refresh_store() == "not_modified"  # the first load's ETag went back
    assert site.seen == [None, '"1.0.0"']
    site.publish("2.0.0", ALL_VIEW)
    assert decide(e) is False
    assert e.refresh_store() == "updated"
    assert e.store.version == "2.0.0" and decide(e) is True


def test_listeners_hear_of_swaps_and_failures_and_cannot_break_them(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    e = make_engine(site.url)
    events: list[StoreEvent] = []

    def broken(event: StoreEvent) -> None:
        raise RuntimeError("the pager is down")

    e.add_store_listener(broken)
    e.add_store_listener(events.append)
    site.publish("2.0.0", ALL_VIEW)
    assert e.refresh_store() == "updated"
    assert [(x.kind, x.previous_version, x.version) for x in events] == [
        ("store_updated", "1.0.0", "2.0.0")
    ]
    assert decide(e) is True  # the swap happened whatever the broken listener did
    logged = [x["msg"] for x in e.get_logs_by_tag("ERROR")]
    assert any("store listener" in m and "the pager is down" in m for m in logged)

    site.status = 503
    assert e.refresh_store() == "failed"
    assert events[-1].kind == "refresh_failed" and events[-1].version == "2.0.0"
    assert "503" in (events[-1].reason or "") and events[-1].error is not None
    assert json.loads(json.dumps(events[-1].to_dict()))["kind"] == "refresh_failed"
    assert decide(e) is True  # the last good store keeps serving

    assert e.remove_store_listener(broken) is True
    assert e.remove_store_listener(broken) is False
    with pytest.raises(TypeError, match="callable"):
        e.add_store_listener("not a function")  # type: ignore[arg-type]


def test_a_listener_may_call_the_engine_back(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    e = make_engine(site.url)
    seen: list[str] = []

    def again(event: StoreEvent) -> None:  # on the refreshing thread, outside its lock
        seen.append(e.refresh_store())
        seen.append(e.health()["store"]["version"])

    e.add_store_listener(again)
    site.publish("2.0.0")
    assert e.refresh_store() == "updated"
    assert seen == ["not_modified", "2.0.0"]


def test_the_background_refresher_sends_events(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    e = make_engine(site.url, ENGINE_POLICY_STORE_REFRESH_INTERVAL=0.05)
    got = threading.Event()
    events: list[StoreEvent] = []

    def listen(event: StoreEvent) -> None:
        events.append(event)
        got.set()

    def broken(event: StoreEvent) -> None:
        raise RuntimeError("a bug on the refresher's thread")

    e.add_store_listener(broken)  # first: the thread and the next listener carry on
    e.add_store_listener(listen)
    site.publish("3.0.0")
    assert got.wait(20), "no store_updated event"
    assert events[0].kind == "store_updated" and e.store.version == "3.0.0"
    got.clear()
    site.publish("4.0.0")  # the refresher thread survived the broken listener
    assert got.wait(20), "no second store_updated event"
    assert e.store.version == "4.0.0"


def test_health_is_plain_data_a_probe_can_serve(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    e = make_engine(site.url)
    h = e.health()
    assert json.loads(json.dumps(h)) == h
    assert h["store"]["id"] == "shop" and h["store"]["version"] == "1.0.0"
    assert h["store"]["loaded_at"].endswith("Z") and h["store"]["age_seconds"] >= 0
    assert h["refresh"]["last_outcome"] == "loaded" and h["refresh"]["etag"] == '"1.0.0"'
    fresh = h["trusted_issuers"]["shop_idp"]
    assert (fresh["name"], fresh["contacted"], fresh["keys"]) == ("Shop", False, 0)
    assert fresh["keys_age_seconds"] is None and fresh["last_failure_reason"] is None
    assert h["data"]["entries"] == 0
    assert h["status"] == "ok"

    failed = e.prefetch()
    assert failed["shop_idp"] is None and "500" in (failed["bad_idp"] or "")
    h = e.health()
    good, bad = h["trusted_issuers"]["shop_idp"], h["trusted_issuers"]["bad_idp"]
    assert good["keys"] == 1 and 0 <= good["keys_age_seconds"] < 60 and not good["failing"]
    assert good["last_failure_reason"] is None
    assert bad["keys"] == 0 and bad["failing"] and "500" in bad["last_failure_reason"]
    assert h["status"] == "degraded"  # an issuer's keys cannot be had

    site.status = 500
    e.refresh_store()
    h = e.health()
    assert h["refresh"]["last_outcome"] == "failed" and "500" in h["refresh"]["last_failure_reason"]
    assert h["refresh"]["consecutive_failures"] == 1 and h["store"]["version"] == "1.0.0"
    site.status = None
    assert e.refresh_store() == "not_modified"
    h = e.health()
    assert h["refresh"]["last_outcome"] == "not_modified" and h["refresh"]["last_failure_at"]


def test_a_store_not_from_a_url(tmp_path: Path) -> None:
    from .test_engine import write_store

    root = write_store(tmp_path / "shop", shop_files())
    with Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root)}) as e:
        with pytest.raises(PolicyStoreError, match="not read from a URL"):
            e.refresh_store()
        h = e.health()
        assert h["refresh"] is None and h["status"] == "ok" and h["store"]["id"] == "shop"


def test_pushed_data_outlives_a_refresh_and_a_schema_that_refuses_it_says_so(
    site: StoreSite, make_engine: Callable[..., Engine]
) -> None:
    from .test_context_data import DATA_POLICIES, DATA_SCHEMA

    site.publish("1.0.0", DATA_POLICIES, DATA_SCHEMA)
    e = make_engine(site.url)
    e.push_data("plan", "premium")
    assert decide(e) is True
    site.publish("1.1.0", DATA_POLICIES, DATA_SCHEMA)  # the same data schema: kept as is
    assert e.refresh_store() == "updated" and decide(e) is True
    retyped = DATA_SCHEMA.replace('"plan"?: String', '"plan"?: Long')
    site.publish("2.0.0", DATA_POLICIES.replace('"premium"', "3"), retyped)
    e.pop_logs()
    assert e.refresh_store() == "updated"
    warned = [x["msg"] for x in e.get_logs_by_tag("WARN")]
    assert any("context data: entry 'plan'" in m for m in warned), warned
    with pytest.raises(RequestError, match="'plan' pushed with push_data does not fit"):
        decide(e)  # never decided as if the entry were not there
    e.push_data("plan", 3)
    assert decide(e) is True
