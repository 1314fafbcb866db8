"""The Lock server as the engine sees it: its configuration document and the bearer token.

:func:`read_configuration` reads ``/.well-known/lock-server-configuration``: every
endpoint it names must be an ``https`` URL on the Lock's own host (the bearer token is
sent there); one that is absent or refused switches its feature off, and says why.
:class:`Credentials` holds the token: given (``ENGINE_LOCK_ACCESS_TOKEN``), or obtained by
registering with the software statement (``ENGINE_LOCK_SSA_JWT``, verified first) and a
``client_credentials`` grant, refreshed before it expires and after a ``401``.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from polang.errors import LockError
from polang.http import Fetcher, FetchError, short_url
from polang.inputs.problems import MAX_NAME_CHARS
from polang.tokens.issuers import IssuerKeys, normalize_issuer
from polang.tokens.jwt_checks import (
    check_required,
    check_times,
    decode_unverified,
    verify_signature,
)
from polang.tokens.model import TokenDrop
from polang.tokens.records import IssuerSettings
from polang.tokens.settings import WELL_KNOWN_SUFFIX, TokenSettings

#: Claims a software statement must carry (as Cedarling requires them).
SSA_REQUIRED_CLAIMS = (
    "software_id",
    "grant_types",
    "org_id",
    "iss",
    "software_roles",
    "exp",
    "iat",
    "jti",
)
#: The scopes the Lock grants, by what the engine uses them for.
SCOPES = {
    "log": "https://jans.io/oauth/lock/log.write",
    "health": "https://jans.io/oauth/lock/health.write",
    "telemetry": "https://jans.io/oauth/lock/telemetry.write",
    "policy": "https://jans.io/oauth/lock/policy.readonly",
    "sse": "https://jans.io/oauth/lock/sse.read",
}
#: Longest client id, secret or access token read from the provider (real ones are far
#: shorter; a longer one is refused, not kept).
MAX_CREDENTIAL_CHARS = 16 * 1024
#: A token is renewed when this share of its lifetime is left (and always 1 s early).
REFRESH_BEFORE = 0.2

AUDIT_KINDS = ("log", "health", "telemetry")
CONFIG_KINDS = ("config", "issuers", "policy", "schema", "sse")


def _quoted(text: object) -> str:
    s = str(text)
    return repr(s if len(s) <= MAX_NAME_CHARS else s[: MAX_NAME_CHARS - 3] + "...")


@dataclass(frozen=True)
class LockEndpoints:
    """What the configuration document gave: endpoints by feature, and what was refused."""

    uri: str
    issuer: str | None
    version: str | None
    audit: dict[str, str] = field(default_factory=dict)  # log/health/telemetry -> .../bulk
    config: dict[str, str] = field(default_factory=dict)  # policy, sse, config, ...
    notes: list[str] = field(default_factory=list)  # why a feature is off

    def store_url(self, store_id: str) -> str | None:
        """Where the store ``store_id`` is fetched: ``<policy_endpoint>/<id>``, else the
        older ``<config_endpoint>?policy_store_format=json&policy_store_id=<id>``."""
        if "policy" in self.config:
            return f"{self.config['policy'].rstrip('/')}/{quote(store_id, safe='')}"
        if "config" in self.config:
            q = urlencode({"policy_store_format": "json", "policy_store_id": store_id})
            return f"{self.config['config']}?{q}"
        return None


def read_configuration(doc: object, uri: str) -> LockEndpoints:
    """The configuration document's endpoints; ``LockError`` when it is not an object."""
    if not isinstance(doc, dict):
        raise LockError(f"lock server configuration {short_url(uri)}: not a JSON object")
    host = _origin(uri)
    notes: list[str] = []

    def endpoint(group: str, name: str, value: object) -> str | None:
        where = f"{group}.{name}"
        if value is None:
            return None  # absent: the client says so if it wanted the feature
        if not isinstance(value, str) or not value.strip():
            notes.append(f"{where} is not a URL string")
            return None
        v = value.strip()
        if _origin(v) != host:
            notes.append(
                f"{where} {_quoted(v)} refused: not an https URL on the Lock's own host "
                f"{host[1]}:{host[2]} (the bearer token goes there)"
            )
            return None
        return v

    audit: dict[str, str] = {}
    config: dict[str, str] = {}
    for group, kinds, out in (("audit", AUDIT_KINDS, audit), ("config", CONFIG_KINDS, config)):
        section = doc.get(group)
        if section is not None and not isinstance(section, dict):
            notes.append(f"'{group}' is not an object: its endpoints are off")
            section = None
        for kind in kinds:
            url = endpoint(group, f"{kind}_endpoint", (section or {}).get(f"{kind}_endpoint"))
            if url is not None:
                out[kind] = url.rstrip("/") + "/bulk" if group == "audit" else url
    issuer = doc.get("issuer")
    if issuer is not None and (not isinstance(issuer, str) or not issuer.strip()):
        notes.append("'issuer' is not a string")
        issuer = None
    version = doc.get("version")
    return LockEndpoints(
        uri=uri,
        issuer=issuer.strip() if isinstance(issuer, str) else None,
        version=version if isinstance(version, str) else None,
        audit=audit,
        config=config,
        notes=notes,
    )


def _origin(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        return scheme if scheme == "https" else "", (parts.hostname or "").lower(), port
    except ValueError:
        return "", "", 0


def issuer_url(issuer: str) -> str:
    """The OpenID issuer a Lock names: a URL, or a bare host (Cedarling's form)."""
    return issuer if "://" in issuer else f"https://{issuer}"


def _credential(doc: Mapping[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise LockError(f"{where}: the answer has no {key!r}")
    if len(value) > MAX_CREDENTIAL_CHARS:
        raise LockError(
            f"{where}: {key!r} is {len(value)} characters, more than MAX_CREDENTIAL_CHARS "
            f"({MAX_CREDENTIAL_CHARS})"
        )
    return value


class Credentials:
    """The bearer token for the Lock (thread-safe; no lock is held across the network
    except the one that makes sure a single token request runs at a time)."""

    def __init__(
        self,
        fetcher: Fetcher,
        *,
        access_token: str | None,
        ssa_jwt: str | None,
        client_name: str,
        scopes: list[str],
        token_settings: TokenSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._fetcher = fetcher
        self._given = access_token
        self._ssa = ssa_jwt
        self._client_name = client_name
        self._scopes = scopes
        self._ts = token_settings
        self._clock = clock
        self._state = threading.Lock()
        self._renew = threading.Lock()
        self._token: str | None = access_token
        self._expires_at = math.inf
        self._renew_at = math.inf
        self._client: tuple[str, str] | None = None  # registered (client_id, secret)
        self._token_endpoint: str | None = None
        self._registration_endpoint: str | None = None
        self.client_id: str | None = None
        self.token_requests = 0
        self.registrations = 0

    @property
    def registers(self) -> bool:
        return self._given is None

    def header(self, issuer: str | None, deadline: float | None = None) -> dict[str, str]:
        """``Authorization: Bearer ...``, with a token obtained or renewed first if needed."""
        with self._state:
            token = self._token
            fresh = token is not None and self._clock() < self._renew_at
        if not fresh:
            token = self._obtain(issuer, deadline)
        return {"Authorization": f"Bearer {token}"}

    def rejected(self, header: Mapping[str, str]) -> bool:
        """The Lock answered ``401`` to ``header``: drop that token (a new one is asked for
        next). False when nothing can be done (a given token)."""
        if self._given is not None:
            return False
        with self._state:
            if self._token is not None and header.get("Authorization") == f"Bearer {self._token}":
                self._token = None
        return True

    def _obtain(self, issuer: str | None, deadline: float | None) -> str:
        with self._renew:
            with self._state:
                if self._token is not None and self._clock() < self._renew_at:
                    return self._token
            if self._given is not None:
                return self._given
            if issuer is None:
                raise LockError(
                    "the Lock's configuration names no 'issuer': a software statement "
                    "cannot be registered (set ENGINE_LOCK_ACCESS_TOKEN instead)"
                )
            if self._client is None:
                self._register(issuer, deadline)
            try:
                return self._request_token(deadline)
            except LockError as e:
                cause = e.__cause__
                if isinstance(cause, FetchError) and cause.status in (400, 401):
                    self._client = None  # the provider forgot the client: register again
                raise

    def _discover(self, issuer: str, deadline: float | None) -> IssuerKeys:
        url = issuer_url(issuer).rstrip("/") + WELL_KNOWN_SUFFIX
        where = f"the Lock's OpenID provider {short_url(url)}"
        try:
            doc = self._fetcher.request("GET", url, deadline=deadline).json()
        except FetchError as e:
            raise LockError(f"{where}: discovery failed: {e}") from None
        if not isinstance(doc, dict):
            raise LockError(f"{where}: the document is not a JSON object")
        if not isinstance(doc.get("issuer"), str) or normalize_issuer(
            doc["issuer"]
        ) != normalize_issuer(issuer_url(issuer)):
            raise LockError(
                f"{where}: the document's issuer {_quoted(doc.get('issuer'))} is not the "
                "Lock's (OpenID Connect Discovery 4.3)"
            )
        for key in ("registration_endpoint", "token_endpoint"):
            value = doc.get(key)
            if not isinstance(value, str) or urlsplit(value).scheme.lower() != "https":
                raise LockError(f"{where}: {key!r} is missing or not an https URL")
        self._registration_endpoint = doc["registration_endpoint"]
        self._token_endpoint = doc["token_endpoint"]
        settings = IssuerSettings.from_dict(
            "lock", {"name": "lock", "openid_configuration_endpoint": url, "token_metadata": {}}
        )
        return IssuerKeys(settings, self._ts, self._fetcher, self._clock)

    def verify_ssa(self, issuer: str, deadline: float | None = None) -> dict[str, Any]:
        """The software statement's claims, once its signature (the provider's keys),
        times and required claims check; ``LockError`` otherwise."""
        assert self._ssa is not None
        keys = self._discover(issuer, deadline)
        try:
            decoded = decode_unverified(self._ssa)
            verify_signature(decoded, keys, self._ts.algorithms)
            check_times(decoded.payload, self._clock(), self._ts.clock_skew)
            check_required(decoded.payload, SSA_REQUIRED_CLAIMS)
        except TokenDrop as e:
            raise LockError(f"ENGINE_LOCK_SSA_JWT: {e.message}") from None
        iss = decoded.payload["iss"]
        if normalize_issuer(iss) != normalize_issuer(issuer_url(issuer)):
            raise LockError(
                f"ENGINE_LOCK_SSA_JWT: its issuer {_quoted(iss)} is not the Lock's OpenID "
                f"provider {_quoted(issuer_url(issuer))}"
            )
        return decoded.payload

    def _register(self, issuer: str, deadline: float | None) -> None:
        """RFC 7591 registration with the verified software statement."""
        self.verify_ssa(issuer, deadline)
        assert self._registration_endpoint is not None
        body = {
            "client_name": self._client_name,
            "token_endpoint_auth_method": "client_secret_basic",
            "grant_types": ["client_credentials"],
            "scope": " ".join(self._scopes),
            "access_token_as_jwt": True,
            "software_statement": self._ssa,
        }
        where = f"registration at {short_url(self._registration_endpoint)}"
        self.registrations += 1
        doc = self._post(
            self._registration_endpoint,
            {"Content-Type": "application/json"},
            json.dumps(body).encode(),
            where,
            deadline,
        )
        client_id = _credential(doc, "client_id", where)
        secret = _credential(doc, "client_secret", where)
        self._client = (client_id, secret)
        self.client_id = client_id

    def _post(
        self,
        url: str,
        headers: dict[str, str],
        body: bytes,
        where: str,
        deadline: float | None,
    ) -> dict[str, Any]:
        """POST to the provider (no retry: a registration must not happen twice) and
        read the answer as a JSON object; ``LockError`` otherwise."""
        try:
            doc = self._fetcher.request(
                "POST", url, headers=headers, body=body, retries=0, deadline=deadline
            ).json()
        except FetchError as e:
            raise LockError(f"{where} failed: {e}") from e  # the cause tells its status
        if not isinstance(doc, dict):
            raise LockError(f"{where}: the answer is not a JSON object")
        return doc

    def _request_token(self, deadline: float | None) -> str:
        """RFC 6749 4.4: ``client_credentials`` with HTTP Basic authentication."""
        assert self._client is not None and self._token_endpoint is not None
        cid, secret = self._client
        basic = base64.b64encode(
            f"{quote(cid, safe='')}:{quote(secret, safe='')}".encode()
        ).decode()
        where = f"token request at {short_url(self._token_endpoint)}"
        self.token_requests += 1
        doc = self._post(
            self._token_endpoint,
            {
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            urlencode(
                {"grant_type": "client_credentials", "scope": " ".join(self._scopes)}
            ).encode(),
            where,
            deadline,
        )
        token = _credential(doc, "access_token", where)
        kind = doc.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise LockError(f"{where}: token_type {_quoted(kind)} is not Bearer")
        lifetime = doc.get("expires_in")
        now = self._clock()
        if (
            isinstance(lifetime, bool)
            or not isinstance(lifetime, int | float)
            or not (0 < lifetime < 1e9)
        ):
            expires_at = renew_at = math.inf  # no lifetime given: renewed after a 401
        else:
            expires_at = now + lifetime
            renew_at = now + max(0.0, lifetime * (1 - REFRESH_BEFORE) - 1.0)
            renew_at = min(renew_at, expires_at)
        with self._state:
            self._token = token
            self._expires_at = expires_at
            self._renew_at = renew_at
        return token
