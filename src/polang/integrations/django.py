"""Django: a middleware, a view decorator and a DRF permission class (``polang[django]``).

Settings, one mapping (keys checked; a misspelt one is refused with a suggestion)::

    POLANG = {
        "ENGINE": engine,                       # an Engine, or its ENGINE_* properties
        "TOKEN_TYPE": "Acme::Access_token",     # the Authorization bearer token's type
        "EXTRA_HEADERS": {"X-Id-Token": "Acme::Id_token"},   # optional
        "REALM": "docs",                        # optional, WWW-Authenticate's realm
        # optional: guard every view through PolangMiddleware
        "ACTION": 'Acme::Action::"read"',       # or a callable of the RequestInfo
        "RESOURCE": resource_of,                # a callable of the RequestInfo
        "EXEMPT": ["/health"],                  # paths the middleware lets through
    }

- :class:`PolangMiddleware` sets ``request.polang`` (``None`` until a decision) and, with
  ``ACTION`` and ``RESOURCE``, decides every view but the exempt paths before it runs
  (``info.params`` are the view's URL keyword arguments);
- :func:`polang_required` decides one view (sync or async);
- :func:`polang_list_plan` gives a list view the caller's plan over the rows of a resource
  type, ``request.polang_plan`` (``polang.filtering.django.plan_q`` makes it a ``Q``);
- :class:`PolangPermission` is a Django REST framework permission: the view's
  ``polang_action`` and ``polang_resource`` (a callable of the ``RequestInfo``; a method
  gets the view first).

Every allowing result is ``request.polang``; refusals are JSON answers as in
docs/integrations.md.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from polang.engine.aio import AsyncEngine
from polang.engine.facade import Engine
from polang.engine.requests import EntityInput
from polang.errors import ConfigError
from polang.inputs.fields import closest

from ._common import Guard, Refusal, RequestInfo

__all__ = [
    "SETTINGS_KEYS",
    "PolangMiddleware",
    "PolangPermission",
    "polang_list_plan",
    "polang_required",
]

#: The keys of ``settings.POLANG``.
SETTINGS_KEYS = ("ENGINE", "TOKEN_TYPE", "EXTRA_HEADERS", "REALM", "ACTION", "RESOURCE", "EXEMPT")

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_built: list[tuple[object, Engine]] = []  # the engine built from settings' properties


def _settings() -> Mapping[str, Any]:
    conf = getattr(settings, "POLANG", None)
    if not isinstance(conf, Mapping):
        raise ConfigError("settings.POLANG: expected a mapping (see polang.integrations.django)")
    for key in conf:
        if key not in SETTINGS_KEYS:
            near = closest(str(key).upper(), SETTINGS_KEYS)
            hint = f"; did you mean {near!r}?" if near else ""
            raise ConfigError(
                f"settings.POLANG: unknown key {str(key)[:60]!r} (known: "
                f"{', '.join(SETTINGS_KEYS)}){hint}"
            )
    for key in ("ENGINE", "TOKEN_TYPE"):
        if key not in conf:
            raise ConfigError(f"settings.POLANG: {key!r} is required")
    return conf


def _engine(conf: Mapping[str, Any]) -> Engine | AsyncEngine:
    """The configured engine; one built from properties is built once per settings."""
    given = conf["ENGINE"]
    if isinstance(given, Engine | AsyncEngine):
        return given
    if not isinstance(given, Mapping):
        raise ConfigError("settings.POLANG['ENGINE']: an Engine or a mapping of properties")
    with _lock:  # one engine per properties mapping: rebuilt only when it is replaced
        if not _built or _built[0][0] is not given:
            _built[:] = [(given, Engine(dict(given)))]
        return _built[0][1]


def guard(
    action: str | Callable[[RequestInfo], str],
    resource: Callable[[RequestInfo], EntityInput] | None,
    context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
    resource_type: str | None = None,
) -> Guard:
    """A :class:`Guard` with the engine and token headers of ``settings.POLANG``."""
    conf = _settings()
    return Guard(
        _engine(conf),
        action=action,
        resource=resource,
        token_type=conf["TOKEN_TYPE"],
        extra_headers=conf.get("EXTRA_HEADERS"),
        context=context,
        realm=conf.get("REALM", "polang"),
        resource_type=resource_type,
    )


def refusal_response(r: Refusal) -> HttpResponse:
    """A :class:`Refusal` as a Django JSON response."""
    response = JsonResponse(r.body, status=r.status)
    for name, value in r.headers.items():
        response[name] = value
    return response


def _info(request: HttpRequest, params: Mapping[str, Any]) -> RequestInfo:
    return RequestInfo(
        request.method or "GET", request.path, request.headers.items(), params, request
    )


class PolangMiddleware:
    """Sets ``request.polang``; with ``ACTION`` and ``RESOURCE``, guards every view."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        conf = _settings()
        self.exempt = frozenset(conf.get("EXEMPT", ()))
        self._guard: Guard | None = None
        if "ACTION" in conf or "RESOURCE" in conf:
            if "ACTION" not in conf or "RESOURCE" not in conf:
                raise ConfigError("settings.POLANG: 'ACTION' and 'RESOURCE' go together")
            self._guard = guard(conf["ACTION"], conf["RESOURCE"])

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.polang = None
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        if self._guard is None or request.path in self.exempt:
            return None
        try:
            request.polang = self._guard.check(_info(request, view_kwargs))
        except Refusal as r:
            return refusal_response(r)
        return None


def polang_required(
    action: str | Callable[[RequestInfo], str],
    resource: Callable[[RequestInfo], EntityInput],
    context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Decide before the view runs (``params``: its URL keyword arguments); the allowing
    result is ``request.polang``. An async view decides with the async API."""
    return _decorator(lambda: guard(action, resource, context), planning=False)


def polang_list_plan(
    action: str | Callable[[RequestInfo], str],
    resource_type: str,
    context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
) -> Callable[[F], F]:
    """For a list view: ``request.polang_plan`` is the caller's plan over the rows of
    ``resource_type`` (no token, or none valid, is refused as ``polang_required`` does; a
    plan that allows no row is an empty list). An async view plans with the async API."""
    return _decorator(
        lambda: guard(action, None, context, resource_type=resource_type), planning=True
    )


def _decorator(make: Callable[[], Guard], *, planning: bool) -> Callable[[F], F]:
    built: list[tuple[object, Guard]] = []

    def get() -> Guard:
        # built on first use (settings are read then), again when settings.POLANG changes
        conf = getattr(settings, "POLANG", None)
        if not built or built[-1][0] is not conf:
            built[:] = [(conf, make())]
        return built[-1][1]

    def decorator(view: F) -> F:
        if inspect.iscoroutinefunction(view):

            @functools.wraps(view)
            async def awrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                info = _info(request, kwargs)
                try:
                    if planning:
                        request.polang_plan = await get().aplan(info)
                    else:
                        request.polang = await get().acheck(info)
                except Refusal as r:
                    return refusal_response(r)
                return await view(request, *args, **kwargs)

            return awrapped  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            info = _info(request, kwargs)
            try:
                if planning:
                    request.polang_plan = get().plan(info)
                else:
                    request.polang = get().check(info)
            except Refusal as r:
                return refusal_response(r)
            return view(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorator


# -- Django REST framework ------------------------------------------------------------


def _drf_refusal(r: Refusal) -> Exception:
    """A refusal as a DRF exception: its handler answers ``detail`` (our body) as JSON
    with the status, and ``auth_header`` as ``WWW-Authenticate``."""
    from rest_framework.exceptions import APIException  # DRF is needed by this class only

    exc = APIException(detail=r.body)
    exc.status_code = r.status
    challenge = r.headers.get("WWW-Authenticate")
    if challenge is not None:
        exc.auth_header = challenge
    return exc


class PolangPermission:
    """A DRF permission: ``permission_classes = [PolangPermission]`` on a view that has
    ``polang_action`` and ``polang_resource``."""

    def has_permission(self, request: Any, view: Any) -> bool:
        action = getattr(view, "polang_action", None)
        resource = getattr(view, "polang_resource", None)
        if action is None or resource is None:
            raise ConfigError(
                f"{type(view).__name__}: PolangPermission needs polang_action and polang_resource"
            )
        # per request: a method of the view is bound to this request's view instance
        checker = guard(action, resource, getattr(view, "polang_context", None))
        params = getattr(view, "kwargs", None) or {}
        info = RequestInfo(request.method, request.path, request.headers.items(), params, request)
        try:
            result = checker.check(info)
        except Refusal as r:
            raise _drf_refusal(r) from None
        request.polang = result
        django_request = getattr(request, "_request", None)
        if django_request is not None:
            django_request.polang = result
        return True

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return True
