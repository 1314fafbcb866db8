"""FastAPI and Starlette: a dependency and an ASGI middleware (``polang[fastapi]``).

Both decide with the async API, so a first request's key fetch never blocks the loop:

- :class:`Authorize` is a FastAPI dependency: ``result: AuthorizeResult =
  Depends(Authorize(engine, action=..., resource=..., token_type=...))``. The resource is
  built from the route's path parameters (``info.params``); the view gets the allowing
  :class:`~polang.engine.results.AuthorizeResult` (also at ``request.state.polang``);
  a refusal is an ``HTTPException`` with its status, body and ``WWW-Authenticate``.
- :class:`ListPlan` is the dependency of a list endpoint: ``plan: Plan =
  Depends(ListPlan(engine, action=..., resource_type=..., token_type=...))`` gives the
  caller's plan over the rows of ``resource_type`` (``polang.filtering`` turns it into the
  query's filter), refusing a request without a valid token as ``Authorize`` does.
- :class:`PolangMiddleware` guards every HTTP request and websocket handshake of an ASGI
  app (routing has not run yet, so the resource callable reads ``info.path``; a refused
  websocket is closed before it is accepted, which the server answers with 403); the
  result is put at
  ``scope["state"]["polang"]`` (``request.state.polang`` in Starlette and FastAPI), and
  a refusal is answered as JSON without calling the app. ``exempt`` paths (a health
  probe) pass through.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, cast

from starlette.exceptions import HTTPException
from starlette.requests import Request

# Plan at run time: FastAPI resolves the dependencies' annotations, the return one too
from polang.analysis.plan import Plan
from polang.engine.results import AuthorizeResult
from polang.errors import ConfigError

from ._common import Guard, Refusal, RequestInfo

__all__ = ["WS_POLICY_VIOLATION", "Authorize", "ListPlan", "PolangMiddleware"]

#: The close code of a refused websocket (RFC 6455 7.4.1: policy violation).
WS_POLICY_VIOLATION = 1008

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _guard(guard: Guard | None, engine: Any, options: dict[str, Any], planning: bool) -> Guard:
    if guard is not None:
        if engine is not None or options:
            raise TypeError("give a guard, or an engine with the guard's options, not both")
    else:
        guard = Guard(engine, **options)
    if planning and guard.resource_type is None:
        raise ConfigError("ListPlan plans a list endpoint: give resource_type, not resource")
    if not planning and guard.resource is None:
        raise ConfigError("a guard of one resource needs resource (ListPlan plans a list)")
    return guard


def _info(request: Request) -> RequestInfo:
    return RequestInfo(
        request.method,
        request.scope.get("path", ""),
        request.headers.items(),
        request.path_params,
        request,
    )


def _http_error(r: Refusal) -> HTTPException:
    return HTTPException(r.status, detail=cast(Any, r.body), headers=r.headers or None)


class Authorize:
    """A FastAPI dependency deciding the request; returns the allowing result.

    ``Authorize(guard)`` or ``Authorize(engine, **options)`` with :class:`Guard`'s options.
    """

    def __init__(self, engine: Any = None, *, guard: Guard | None = None, **options: Any) -> None:
        if isinstance(engine, Guard):
            engine, guard = None, engine
        self.guard = _guard(guard, engine, options, planning=False)

    async def __call__(self, request: Request) -> AuthorizeResult:
        try:
            result = await self.guard.acheck(_info(request))
        except Refusal as r:
            raise _http_error(r) from None
        request.state.polang = result
        return result


class ListPlan:
    """A FastAPI dependency for a list endpoint: the caller's plan over the rows of
    ``resource_type`` (also at ``request.state.polang_plan``).

    ``ListPlan(guard)`` or ``ListPlan(engine, action=..., resource_type=..., **options)``
    with :class:`Guard`'s options. A plan that allows no row is an empty list, not a 403.
    """

    def __init__(self, engine: Any = None, *, guard: Guard | None = None, **options: Any) -> None:
        if isinstance(engine, Guard):
            engine, guard = None, engine
        self.guard = _guard(guard, engine, options, planning=True)

    async def __call__(self, request: Request) -> Plan:
        try:
            plan = await self.guard.aplan(_info(request))
        except Refusal as r:
            raise _http_error(r) from None
        request.state.polang_plan = plan
        return plan


class PolangMiddleware:
    """ASGI middleware deciding every HTTP request before the app sees it."""

    def __init__(
        self,
        app: ASGIApp,
        engine: Any = None,
        *,
        guard: Guard | None = None,
        exempt: Iterable[str] = (),
        **options: Any,
    ) -> None:
        self.app = app
        self.guard = _guard(guard, engine, options, planning=False)
        self.exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope.get("path") in self.exempt:
            await self.app(scope, receive, send)  # lifespan, and the exempt paths
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        method = scope.get("method", "GET")  # a websocket handshake is a GET
        info = RequestInfo(method, scope["path"], headers, {}, scope)
        try:
            result = await self.guard.acheck(info)
        except Refusal as r:
            if kind == "websocket":  # closed before accept: the server answers 403
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION})
            else:
                await _send_json(send, r.status, r.body, r.headers)
            return
        scope.setdefault("state", {})["polang"] = result
        await self.app(scope, receive, send)


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str]
) -> None:
    data = json.dumps(body).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
