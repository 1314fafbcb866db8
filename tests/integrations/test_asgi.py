"""FastAPI's dependency and the ASGI middleware: FastAPI's test client, then uvicorn on
loopback (where a slow identity provider must not stall the other requests)."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import Depends, FastAPI, Request
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from polang import AsyncEngine, AuthorizeResult, Engine
from polang.analysis.plan import Plan
from polang.errors import ConfigError
from polang.integrations import Guard
from polang.integrations.asgi import WS_POLICY_VIOLATION, Authorize, ListPlan, PolangMiddleware

from .conftest import (
    GUARD,
    READ,
    WRITE,
    Call,
    Providers,
    bearer,
    check_answers,
    check_plans,
    document,
    listed,
    method_action,
    result_body,
)


def fastapi_app(engine: Engine | AsyncEngine) -> FastAPI:
    app = FastAPI(docs_url=None)  # /docs is the documents here, not the API docs
    read = Authorize(engine, action=READ, resource=document, **GUARD)
    write = Authorize(engine, action=WRITE, resource=document, **GUARD)
    rows = ListPlan(engine, action=READ, resource_type="Acme::Document", **GUARD)

    @app.get("/docs")
    async def list_docs(request: Request, plan: Plan = Depends(rows)) -> dict[str, Any]:  # noqa: B008
        assert request.state.polang_plan is plan
        return listed(plan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/docs/{doc_id}")
    async def get_doc(doc_id: str, result: AuthorizeResult = Depends(read)) -> dict[str, Any]:  # noqa: B008
        return result_body(result)

    @app.post("/docs/{doc_id}")
    async def post_doc(
        doc_id: str,
        request: Request,
        result: AuthorizeResult = Depends(write),  # noqa: B008
    ) -> dict[str, Any]:
        assert request.state.polang is result
        return result_body(result)

    return app


def starlette_app(engine: Engine | AsyncEngine) -> Any:
    async def doc(request: Any) -> JSONResponse:
        return JSONResponse(result_body(request.state.polang))

    async def health(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[Route("/docs/{doc_id}", doc, methods=["GET", "POST"]), Route("/health", health)]
    )
    return PolangMiddleware(
        app, engine, action=method_action, resource=document, exempt=["/health"], **GUARD
    )


def client_call(client: TestClient) -> Call:
    def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
        r = client.request(method, path, headers=headers)
        # FastAPI puts an HTTPException's detail under "detail"
        body = r.json()
        if isinstance(body, dict) and isinstance(body.get("detail"), dict):
            body = body["detail"]
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, body

    return call


def test_fastapi_dependency(engine: Engine, providers: Providers) -> None:
    with TestClient(fastapi_app(engine)) as client:
        check_answers(client_call(client), providers)
        check_plans(client_call(client), providers)  # ListPlan, the list endpoint's


def test_asgi_middleware(engine: Engine, providers: Providers) -> None:
    with TestClient(starlette_app(engine)) as client:
        check_answers(client_call(client), providers)
        assert client.get("/health").json() == {"status": "ok"}  # exempt: no token


def test_websockets_are_guarded_too(engine: Engine, providers: Providers) -> None:
    async def echo(ws: Any) -> None:
        await ws.accept()
        await ws.send_json(result_body(ws.scope["state"]["polang"]))
        await ws.close()

    app = PolangMiddleware(
        Starlette(routes=[WebSocketRoute("/docs/{doc_id}", echo)]),
        engine,
        action=READ,
        resource=document,
        **GUARD,
    )
    token = providers.acme.token(scope=["docs:read"])
    with TestClient(app) as client:
        with client.websocket_connect("/docs/d1", headers=dict(bearer(token))) as ws:
            assert ws.receive_json()["decision"] is True
        for headers in ([], bearer(providers.acme.token(scope=["docs:list"]))):
            with (
                pytest.raises(WebSocketDisconnect) as closed,
                client.websocket_connect("/docs/d1", headers=dict(headers)),
            ):
                pass
            assert closed.value.code == WS_POLICY_VIOLATION


def test_a_repeated_authorization_header_is_refused(engine: Engine, providers: Providers) -> None:
    token = providers.acme.token(scope=["docs:read"])
    with TestClient(fastapi_app(engine)) as client:
        r = client.get("/docs/d1", headers=[*bearer(token), *bearer(token)])
    assert r.status_code == 400
    assert "repeated" in r.headers["www-authenticate"]


def test_guard_options_are_checked(engine: Engine) -> None:
    with pytest.raises(ConfigError, match="not an HTTP header name"):
        Guard(
            engine,
            action=READ,
            resource=document,
            token_type="Acme::Access_token",
            extra_headers={"X Bad": "Acme::Id_token"},
        )
    with pytest.raises(ConfigError, match="MAX_REQUEST_TOKENS"):
        Guard(
            engine,
            action=READ,
            resource=document,
            token_type="Acme::Access_token",
            extra_headers={f"X-T{i}": "Acme::Id_token" for i in range(8)},
        )
    with pytest.raises(ConfigError, match="token type"):
        Guard(engine, action=READ, resource=document, token_type="access token")
    with pytest.raises(ConfigError, match="Engine or an AsyncEngine"):
        Guard(object(), action=READ, resource=document, token_type="Acme::Access_token")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ListPlan plans a list endpoint"):
        ListPlan(engine, action=READ, resource=document, **GUARD)
    with pytest.raises(ConfigError, match="needs resource"):
        Authorize(engine, action=READ, resource_type="Acme::Document", **GUARD)
    with pytest.raises(ConfigError, match="needs resource"):
        PolangMiddleware(
            starlette_app(engine), engine, action=READ, resource_type="Acme::Document", **GUARD
        )


# ---------------------------------------------------------------- a real server


class Served:
    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                break
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.mark.parametrize("make", [fastapi_app, starlette_app])
def test_uvicorn_keeps_serving_while_a_provider_stalls(
    engine: Engine, providers: Providers, make: Any
) -> None:
    """The issue's case: a first validation waits for a slow provider; /health is answered
    meanwhile (the loop is not blocked), then the validation completes."""
    entered, release = threading.Event(), threading.Event()
    acme = providers.acme

    def handle(h: BaseHTTPRequestHandler) -> None:
        entered.set()
        release.wait(10)
        acme.serve_discovery(h)

    acme.routes[acme.discovery_path] = handle
    token = acme.token(scope=["docs:read"])
    with Served(make(engine)) as base:

        async def main() -> tuple[httpx.Response, httpx.Response, bool]:
            async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                first = asyncio.create_task(client.get("/docs/d1", headers=bearer(token)))
                while not entered.is_set():  # the provider has the discovery request
                    await asyncio.sleep(0.01)
                health = await client.get("/health")
                still_waiting = not first.done()
                release.set()
                return await first, health, still_waiting

        first, health, still_waiting = asyncio.run(main())
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert still_waiting  # /health was answered while the validation was stalled
    assert first.status_code == 200 and first.json()["decision"] is True


def test_uvicorn_answers(engine: Engine, providers: Providers) -> None:
    with Served(fastapi_app(engine)) as base, httpx.Client(base_url=base, timeout=10) as client:

        def call(method: str, path: str, headers: list[tuple[str, str]]) -> Any:
            r = client.request(method, path, headers=headers)
            body = (
                r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            )
            if isinstance(body, dict) and isinstance(body.get("detail"), dict):
                body = body["detail"]
            return r.status_code, {k.lower(): v for k, v in r.headers.items()}, body

        check_answers(call, providers)
        check_plans(call, providers)
