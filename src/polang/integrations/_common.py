"""What every web integration shares: reading bearer tokens from headers, building the
request, and turning the engine's answer into an HTTP answer.

A :class:`Guard` holds one protection rule: the action, how the resource (and context) is
built from the request, and which headers carry which token types. Each framework module
gives it a :class:`RequestInfo` and turns a :class:`Refusal` into its own response:

- no token at all (no ``Authorization: Bearer``, no configured extra header): ``401`` with
  ``WWW-Authenticate: Bearer realm="..."`` and no error code (RFC 6750 3.1);
- tokens, none of them valid (:class:`~polang.errors.TokenError`): ``401`` with
  ``error="invalid_token"`` and the drop reasons' kinds (never a token's contents);
- a malformed header (repeated, oversized, several tokens in one, not token68 syntax):
  ``400`` with ``error="invalid_request"``, the limit named;
- deny: ``403`` with the decision's ``request_id`` (never the policies' text);
- a request the engine cannot read (the resource the application built does not fit the
  schema): ``400`` with the request's description kept out of the answer and logged.

Nothing here imports a web framework.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polang.engine.aio import AsyncEngine
from polang.engine.facade import Engine
from polang.engine.requests import EntityInput
from polang.engine.results import AuthorizeResult
from polang.errors import ConfigError, PolangError, TokenError
from polang.language.schema import has_name_shape
from polang.tokens.model import TokenInput

if TYPE_CHECKING:
    from polang.analysis.plan import Plan

__all__ = [
    "MAX_REQUEST_TOKENS",
    "MAX_TOKEN_HEADER_SIZE",
    "Guard",
    "Refusal",
    "RequestInfo",
    "from_path",
]

#: Longest value of a header that carries a token (``Authorization`` or an extra token
#: header), in characters. Tokens themselves are bounded by ``ENGINE_TOKEN_MAX_SIZE``; a
#: longer header is refused before anything is parsed.
MAX_TOKEN_HEADER_SIZE = 32 * 1024
#: Most tokens one HTTP request carries (the ``Authorization`` bearer token plus extra
#: token headers); a guard configured with more extra headers is refused at start.
MAX_REQUEST_TOKENS = 8

log = logging.getLogger("polang.integrations")

# RFC 6750 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
_QUOTED_UNSAFE = re.compile(r'[^\x20-\x7e]|["\\]')


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """One HTTP request as a guard sees it, whatever the framework.

    ``headers``: (name, value) pairs as received, repeated names repeated (names in any
    case); ``params``: the route's path parameters; ``request``: the framework's own
    request object, for the application's callables.
    """

    method: str
    path: str
    headers: Iterable[tuple[str, str]]
    params: Mapping[str, Any] = field(default_factory=dict)
    request: Any = None


class Refusal(Exception):
    """The HTTP answer that ends a request the guard does not let through."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(f"{status} {body.get('error', '')}")
        self.status = status
        self.body = body
        self.headers = headers


def _quoted(text: str) -> str:
    """A value for an auth-param quoted-string (RFC 9110 5.6.4), bounded and plain ASCII."""
    return _QUOTED_UNSAFE.sub("?", text[:300])


def from_path(
    entity_type: str, param: str, attrs: Callable[[RequestInfo], Mapping[str, Any]] | None = None
) -> Callable[[RequestInfo], EntityInput]:
    """A resource built from a path parameter: ``entity_type`` with id ``params[param]``,
    attributes from ``attrs(info)`` (none by default)."""
    if not has_name_shape(entity_type):
        raise ConfigError(f"from_path: {entity_type!r} is not an entity type name")

    def build(info: RequestInfo) -> EntityInput:
        value = info.params.get(param)
        if value is None:
            raise Refusal(404, {"error": "not_found"}, {})
        return {
            "uid": {"type": entity_type, "id": str(value)},
            "attrs": dict(attrs(info)) if attrs is not None else {},
        }

    return build


class Guard:
    """One protection rule: who may do ``action`` on the request's resource.

    ``action``: an action uid (``'Acme::Action::"read"'``) or a callable of the
    :class:`RequestInfo` giving one. ``resource``: a callable of the ``RequestInfo`` giving
    the resource (an entity in full, or a reference to one of the store's; see
    :func:`from_path`); it may raise :class:`Refusal` (a 404 for a row that does not
    exist). A list endpoint's guard has ``resource_type`` instead (the rows' entity type):
    :meth:`plan` answers which rows the caller may see. ``token_type``: the mapping of
    the ``Authorization`` bearer token.
    ``extra_headers``: other headers that carry one raw JWT each, by header name ->
    token type (``{"X-Id-Token": "Acme::Id_token"}``). ``context``: a callable giving the
    request's context. ``realm``: the ``WWW-Authenticate`` realm.
    """

    def __init__(
        self,
        engine: Engine | AsyncEngine,
        *,
        action: str | Callable[[RequestInfo], str],
        resource: Callable[[RequestInfo], EntityInput] | None = None,
        token_type: str,
        extra_headers: Mapping[str, str] | None = None,
        context: Callable[[RequestInfo], Mapping[str, Any]] | None = None,
        realm: str = "polang",
        resource_type: str | None = None,
    ) -> None:
        if not isinstance(engine, Engine | AsyncEngine):
            raise ConfigError(
                f"a polang guard needs an Engine or an AsyncEngine, got {type(engine).__name__}"
            )
        if (resource is None) == (resource_type is None):
            raise ConfigError(
                "give resource (a callable of the request, see from_path) to guard one "
                "resource, or resource_type (an entity type name) to plan a list endpoint"
            )
        if resource is not None and not callable(resource):
            raise ConfigError("resource: give a callable of the request (see from_path)")
        if resource_type is not None and (
            not isinstance(resource_type, str) or not has_name_shape(resource_type)
        ):
            raise ConfigError(f"resource_type: {resource_type!r} is not an entity type name")
        if not isinstance(token_type, str) or not has_name_shape(token_type):
            raise ConfigError(f"token_type: {token_type!r} is not a token type name")
        extras: dict[str, str] = {}
        for name, mapping in (extra_headers or {}).items():
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise ConfigError(f"extra_headers: {name!r} is not an HTTP header name")
            if name.lower() == "authorization":
                raise ConfigError("extra_headers: Authorization carries token_type's token")
            if not isinstance(mapping, str) or not has_name_shape(mapping):
                raise ConfigError(f"extra_headers[{name!r}]: {mapping!r} is not a token type")
            extras[name.lower()] = mapping
        if 1 + len(extras) > MAX_REQUEST_TOKENS:
            raise ConfigError(
                f"extra_headers: {len(extras)} headers; a request carries at most "
                f"MAX_REQUEST_TOKENS ({MAX_REQUEST_TOKENS}) tokens"
            )
        if not isinstance(realm, str) or not realm or _QUOTED_UNSAFE.search(realm):
            raise ConfigError(f"realm: {realm!r} must be printable ASCII without quotes")
        self.engine = engine
        self.action = action
        self.resource = resource
        self.resource_type = resource_type
        self.token_type = token_type
        self.extra_headers = extras
        self.context = context
        self.realm = realm
        self._async: AsyncEngine | None = None

    # -- answers ------------------------------------------------------------------------

    def _challenge(self, status: int, error: str | None, description: str) -> Refusal:
        params = f'Bearer realm="{self.realm}"'
        if error is not None:
            params += f', error="{error}", error_description="{_quoted(description)}"'
        body: dict[str, Any] = {"error": error or "unauthorized"}
        if error is not None:
            body["error_description"] = description[:300]
        return Refusal(status, body, {"WWW-Authenticate": params})

    def _forbidden(self, result: AuthorizeResult) -> Refusal:
        return Refusal(403, {"error": "forbidden", "request_id": result.request_id}, {})

    # -- tokens -------------------------------------------------------------------------

    def tokens(self, headers: Iterable[tuple[str, str]]) -> list[TokenInput]:
        """The request's tokens; raises :class:`Refusal` for a malformed header or none."""
        seen: dict[str, list[str]] = {}
        wanted = self.extra_headers
        for name, value in headers:
            key = name.lower()
            if key == "authorization" or key in wanted:
                seen.setdefault(key, []).append(value)
                if len(seen[key]) > 1:
                    raise self._challenge(400, "invalid_request", f"the {name} header is repeated")
                if len(value) > MAX_TOKEN_HEADER_SIZE:
                    raise self._challenge(
                        400,
                        "invalid_request",
                        f"the {name} header is {len(value)} characters long, more than "
                        f"MAX_TOKEN_HEADER_SIZE ({MAX_TOKEN_HEADER_SIZE})",
                    )
        out: list[TokenInput] = []
        auth = seen.get("authorization")
        if auth:
            jwt = self._bearer(auth[0])
            if jwt is not None:
                out.append(TokenInput(self.token_type, jwt))
        for key, mapping in wanted.items():
            values = seen.get(key)
            if values:
                raw = values[0].strip()
                if not _B64TOKEN.fullmatch(raw):
                    raise self._challenge(
                        400, "invalid_request", f"the {key} header does not hold one token"
                    )
                out.append(TokenInput(mapping, raw))
        if not out:
            raise self._challenge(401, None, "")
        return out

    def _bearer(self, value: str) -> str | None:
        """The token of an ``Authorization: Bearer <token>`` value; None for another
        scheme (no bearer credentials: a plain challenge)."""
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = rest.strip()
        if not _B64TOKEN.fullmatch(token):
            raise self._challenge(
                400,
                "invalid_request",
                "the Authorization header must be 'Bearer <token>' with one token",
            )
        return token

    # -- deciding -----------------------------------------------------------------------

    def _request(self, info: RequestInfo) -> tuple[list[TokenInput], str, EntityInput, Any]:
        if self.resource is None:
            raise ConfigError("this guard plans a list endpoint (resource_type): use plan()")
        tokens = self.tokens(info.headers)
        action = self.action(info) if callable(self.action) else self.action
        resource = self.resource(info)
        context = self.context(info) if self.context is not None else None
        return tokens, action, resource, context

    def _plan_request(self, info: RequestInfo) -> tuple[list[TokenInput], str, str, Any]:
        if self.resource_type is None:
            raise ConfigError("this guard decides one resource (resource): use check()")
        tokens = self.tokens(info.headers)
        action = self.action(info) if callable(self.action) else self.action
        context = self.context(info) if self.context is not None else None
        return tokens, action, self.resource_type, context

    def _refuse(self, error: PolangError) -> Refusal:
        if isinstance(error, TokenError):
            found: set[str] = set()
            for r in error.reasons:
                reason = r.get("reason")
                if isinstance(reason, dict) and isinstance(reason.get("kind"), str):
                    found.add(reason["kind"])
            kinds = sorted(found)
            why = f"no valid token ({', '.join(kinds)})" if kinds else "no valid token"
            return self._challenge(401, "invalid_token", why)
        log.warning("polang: the request could not be authorized: %s", error)
        return Refusal(400, {"error": "bad_request"}, {})

    def _answer(self, result: AuthorizeResult) -> AuthorizeResult:
        if not result.decision:
            raise self._forbidden(result)
        return result

    def check(self, info: RequestInfo) -> AuthorizeResult:
        """Decide (sync engine); the allowing result, or :class:`Refusal`."""
        tokens, action, resource, context = self._request(info)
        engine = self.engine.engine if isinstance(self.engine, AsyncEngine) else self.engine
        try:
            result = engine.authorize_multi_issuer(tokens, action, resource, context)
        except PolangError as e:
            raise self._refuse(e) from None
        return self._answer(result)

    async def acheck(self, info: RequestInfo) -> AuthorizeResult:
        """Decide with the async API (fetches never block the loop); as :meth:`check`."""
        tokens, action, resource, context = self._request(info)
        try:
            result = await self.async_engine.authorize_multi_issuer(
                tokens, action, resource, context
            )
        except PolangError as e:
            raise self._refuse(e) from None
        return self._answer(result)

    def plan(self, info: RequestInfo) -> Plan:
        """A list endpoint's plan (sync engine): which rows of ``resource_type`` the
        request's tokens may see (``Engine.plan_multi_issuer``; docs/filtering.md). No
        token, or none valid, is refused as :meth:`check` refuses; a plan that allows no
        row is not a refusal (the list is empty)."""
        tokens, action, resource_type, context = self._plan_request(info)
        engine = self.engine.engine if isinstance(self.engine, AsyncEngine) else self.engine
        try:
            return engine.plan_multi_issuer(tokens, action, resource_type, context)
        except PolangError as e:
            raise self._refuse(e) from None

    async def aplan(self, info: RequestInfo) -> Plan:
        """:meth:`plan` with the async API (fetches never block the loop)."""
        tokens, action, resource_type, context = self._plan_request(info)
        try:
            return await self.async_engine.plan_multi_issuer(tokens, action, resource_type, context)
        except PolangError as e:
            raise self._refuse(e) from None

    @property
    def async_engine(self) -> AsyncEngine:
        """The guard's engine for asyncio (a sync ``Engine`` is wrapped once)."""
        if isinstance(self.engine, AsyncEngine):
            return self.engine
        if self._async is None:
            self._async = AsyncEngine(self.engine)
        return self._async
