"""Django: the middleware, the view decorator and the DRF permission class, through
Django's test client, then a real WSGI server (werkzeug's) on loopback."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import Client, override_settings
from werkzeug.serving import make_server

from polang import Engine
from polang.errors import ConfigError

from . import django_app  # configures Django
from .conftest import GUARD, READ, Call, Providers, check_answers, check_plans, document

assert django_app.urlpatterns


def polang_settings(engine: Engine, **more: Any) -> dict[str, Any]:
    return {
        "ENGINE": engine,
        "TOKEN_TYPE": GUARD["token_type"],
        "EXTRA_HEADERS": GUARD["extra_headers"],
        "REALM": GUARD["realm"],
        **more,
    }


def django_call(prefix: str) -> Call:
    client = Client()

    def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
        r = client.generic(method, prefix + path, headers=dict(headers))
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.json()

    return call


@pytest.mark.parametrize("prefix", ["", "/api"], ids=["decorator", "drf-permission"])
def test_django_views(engine: Engine, providers: Providers, prefix: str) -> None:
    with override_settings(POLANG=polang_settings(engine)):
        check_answers(django_call(prefix), providers)


def test_async_view(engine: Engine, providers: Providers) -> None:
    token = providers.acme.token(scope=["docs:read"])
    with override_settings(POLANG=polang_settings(engine)):
        r = Client().get("/async/docs/d1", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["decision"] is True
        r = Client().get("/async/docs/d1")
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="docs"'


@pytest.mark.parametrize("path", ["/docs", "/async/docs"], ids=["sync", "async"])
def test_list_views(engine: Engine, providers: Providers, path: str) -> None:
    """``polang_list_plan``: the caller's plan, sync and async views."""
    with override_settings(POLANG=polang_settings(engine)):
        check_plans(django_call(""), providers, path)


def test_middleware_guards_every_view(engine: Engine, providers: Providers) -> None:
    conf = polang_settings(engine, ACTION=READ, RESOURCE=document, EXEMPT=["/health"])
    with override_settings(POLANG=conf):
        client = Client()
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/open/docs/d1").status_code == 401
        token = providers.acme.token(scope=["docs:read"])
        r = client.get("/open/docs/d1", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["decision"] is True
    with override_settings(POLANG=polang_settings(engine)):  # no ACTION: nothing guarded
        assert Client().get("/open/docs/d1").json() == {"decision": None}


def test_settings_are_checked(engine: Engine) -> None:
    with (
        override_settings(POLANG={**polang_settings(engine), "TOKEN_TPYE": "x"}),
        pytest.raises(ConfigError, match="did you mean 'TOKEN_TYPE'"),
    ):
        Client().get("/health")
    with (
        override_settings(POLANG={"ENGINE": engine}),
        pytest.raises(ConfigError, match="'TOKEN_TYPE' is required"),
    ):
        Client().get("/health")
    with (
        override_settings(POLANG=polang_settings(engine, ACTION=READ)),
        pytest.raises(ConfigError, match="go together"),
    ):
        Client().get("/health")


def test_an_engine_from_properties_is_built_once(
    store: Any, providers: Providers, ca_pem_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .conftest import engine_config

    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem_file))
    conf = polang_settings(engine_config(store))  # type: ignore[arg-type]
    token = providers.acme.token(scope=["docs:read"])
    with override_settings(POLANG=conf):
        for _ in range(3):
            r = Client().get("/docs/d1", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, r.headers.get("WWW-Authenticate")
    assert providers.acme.requests[providers.acme.jwks_path] == 1


def test_wsgi_server(engine: Engine, providers: Providers) -> None:
    with override_settings(POLANG=polang_settings(engine)):
        server = make_server("127.0.0.1", 0, WSGIHandler(), threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            base = f"http://127.0.0.1:{server.server_port}"
            with httpx.Client(base_url=base, timeout=10) as client:

                def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
                    r = client.request(method, prefix + path, headers=headers)
                    return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.json()

                prefix = "/api"
                check_answers(call, providers)
                prefix = ""  # the list view, beside the decorated single-document view
                check_plans(call, providers)
        finally:
            server.shutdown()
            thread.join(10)
