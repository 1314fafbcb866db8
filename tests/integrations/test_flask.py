"""The Flask extension: Flask's test client, then werkzeug's server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flask import Flask, g, jsonify
from werkzeug.serving import make_server

from polang import Engine
from polang.errors import ConfigError
from polang.integrations.flask import Polang

from .conftest import (
    GUARD,
    READ,
    WRITE,
    Call,
    Providers,
    check_answers,
    check_plans,
    document,
    listed,
    result_body,
)


def flask_app(engine: Engine | None) -> tuple[Flask, Polang]:
    app = Flask(__name__)
    polang = Polang(app, engine, **GUARD)

    @app.get("/docs")
    @polang.list_plan(READ, "Acme::Document")
    def list_docs() -> Any:
        return jsonify(listed(g.polang_plan))

    @app.get("/docs/<doc_id>")
    @polang.require(READ, resource=document)
    def read(doc_id: str) -> Any:
        return jsonify(result_body(g.polang))

    @app.post("/docs/<doc_id>")
    @polang.require(WRITE, resource=document)
    def write(doc_id: str) -> Any:
        return jsonify(result_body(g.polang))

    return app, polang


def as_call(request: Any) -> Call:
    def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
        r = request(method, path, headers=headers)
        json_body = r.json() if callable(getattr(r, "json", None)) else r.get_json()
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, json_body

    return call


def test_flask_extension(engine: Engine, providers: Providers) -> None:
    app, _ = flask_app(engine)
    client = app.test_client()

    def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
        r = client.open(path, method=method, headers=headers)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.get_json()

    check_answers(call, providers)
    check_plans(call, providers)


def test_the_engine_may_come_with_init_app(engine: Engine, providers: Providers) -> None:
    app, polang = flask_app(None)
    app.testing = True  # the app's errors reach the test
    token = providers.acme.token(scope=["docs:read"])
    with pytest.raises(ConfigError, match="no engine"):
        app.test_client().get("/docs/d1", headers={"Authorization": f"Bearer {token}"})
    polang.init_app(app, engine)
    r = app.test_client().get("/docs/d1", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.get_json()["decision"] is True


@pytest.fixture
def served(engine: Engine) -> Iterator[str]:
    app, _ = flask_app(engine)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(10)


def test_werkzeug_server(served: str, providers: Providers) -> None:
    with httpx.Client(base_url=served, timeout=10) as client:
        check_answers(as_call(client.request), providers)
        check_plans(as_call(client.request), providers)
