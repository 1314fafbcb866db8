"""Flask: an extension with a decorator (``polang[flask]``).

::

    polang = Polang(app, engine, token_type="Acme::Access_token")

    @app.get("/documents/<doc_id>")
    @polang.require('Acme::Action::"read"', resource=lambda info: load(info.params["doc_id"]))
    def read(doc_id):
        g.polang.request_id  # the allowing AuthorizeResult

The resource callable gets a :class:`~polang.integrations.RequestInfo` whose ``params``
are the route's view arguments. A list endpoint is decorated with
``@polang.list_plan(action, "Acme::Document")``: ``g.polang_plan`` is then the caller's
plan over the rows of that type (``polang.filtering`` turns it into the query's filter).
A refusal is a JSON answer (401 with ``WWW-Authenticate``, 403 with the request id, 400
for a malformed header); the view is not called. Flask serves views on threads, so the
sync engine decides.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from flask import Flask, Response, g, jsonify, request

from polang.engine.aio import AsyncEngine
from polang.engine.facade import Engine
from polang.engine.requests import EntityInput
from polang.errors import ConfigError

from ._common import Guard, Refusal, RequestInfo

__all__ = ["Polang"]

F = TypeVar("F", bound=Callable[..., Any])


class Polang:
    """The extension: one engine and token headers for the app, a guard per view."""

    def __init__(
        self,
        app: Flask | None = None,
        engine: Engine | AsyncEngine | None = None,
        *,
        token_type: str,
        extra_headers: Mapping[str, str] | None = None,
        realm: str = "polang",
    ) -> None:
        self.engine = engine
        self.token_type = token_type
        self.extra_headers = dict(extra_headers or {})
        self.realm = realm
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, engine: Engine | AsyncEngine | None = None) -> None:
        """Register with ``app`` (the app factory pattern: the engine may come now)."""
        if engine is not None:
            self.engine = engine
        app.extensions["polang"] = self

    def guard(
        self,
        action: str | Callable[[RequestInfo], str],
        resource: Callable[[RequestInfo], EntityInput] | None,
        context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
        resource_type: str | None = None,
    ) -> Guard:
        if self.engine is None:
            raise ConfigError("Polang: no engine (give one to Polang(...) or init_app)")
        return Guard(
            self.engine,
            action=action,
            resource=resource,
            token_type=self.token_type,
            extra_headers=self.extra_headers,
            context=context,
            realm=self.realm,
            resource_type=resource_type,
        )

    def require(
        self,
        action: str | Callable[[RequestInfo], str],
        resource: Callable[[RequestInfo], EntityInput],
        context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Decorate a view: decide before it runs; the result is ``g.polang``."""
        return self._decorator(lambda: self.guard(action, resource, context), planning=False)

    def list_plan(
        self,
        action: str | Callable[[RequestInfo], str],
        resource_type: str,
        context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Decorate a list endpoint: ``g.polang_plan`` is the caller's plan over the rows
        of ``resource_type`` (no token, or none valid, is refused as ``require`` does)."""
        return self._decorator(
            lambda: self.guard(action, None, context, resource_type=resource_type),
            planning=True,
        )

    def _decorator(self, make: Callable[[], Guard], *, planning: bool) -> Callable[[F], F]:
        built: list[tuple[object, Guard]] = []

        def decorator(view: F) -> F:
            @functools.wraps(view)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                # built on first use (init_app may give the engine late), again when the
                # engine is replaced
                if not built or built[-1][0] is not self.engine:
                    built[:] = [(self.engine, make())]
                guard = built[-1][1]
                info = RequestInfo(
                    request.method,
                    request.path,
                    request.headers.items(),
                    dict(request.view_args or {}),
                    request,
                )
                try:
                    if planning:
                        g.polang_plan = guard.plan(info)
                    else:
                        g.polang = guard.check(info)
                except Refusal as r:
                    return refusal_response(r)
                return view(*args, **kwargs)

            return wrapped  # type: ignore[return-value]

        return decorator


def refusal_response(r: Refusal) -> Response:
    """A :class:`Refusal` as a Flask JSON response."""
    response = jsonify(r.body)
    response.status_code = r.status
    for name, value in r.headers.items():
        response.headers[name] = value
    return response
