"""A Janssen Lock server on loopback HTTPS, for the Lock client's tests and the example.

One server plays both parts a Lock deployment has: the OpenID provider (discovery, JWKS,
RFC 7591 registration, the ``client_credentials`` token endpoint; it signs the software
statement) and the Lock itself (the configuration document, the audit ``/bulk``
endpoints, the store by id, the event stream). It follows the protocol of docs/lock.md
and records what it receives: every registration, token request, audit entry (parsed),
store fetch and event stream connection (with its ``Last-Event-ID``).

Built on the token tests' provider (``tests/tokens/oidc_server.py``): its ``routes`` and
``fail`` make any path hostile.
"""

from __future__ import annotations

import base64
import json
import queue
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote

from tests.tokens.oidc_server import OidcProvider

CONFIG_PATH = "/.well-known/lock-server-configuration"
AUDIT_KINDS = ("log", "health", "telemetry")


@dataclass
class LockServer(OidcProvider):
    """The Lock; ``stores`` maps a store id to the bytes served for it."""

    stores: dict[str, bytes] = field(default_factory=dict)
    token_lifetime: int | None = 300
    config_override: dict[str, Any] | None = None  # served instead of the real document
    registrations: list[dict[str, Any]] = field(default_factory=list)
    token_grants: list[dict[str, Any]] = field(default_factory=list)
    received: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {k: [] for k in AUDIT_KINDS}
    )
    posts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in AUDIT_KINDS})
    audit_status: dict[str, int] = field(default_factory=dict)  # kind -> status to answer
    store_fetches: list[str] = field(default_factory=list)  # Authorization headers seen
    sse_connections: list[str | None] = field(default_factory=list)  # Last-Event-ID sent
    unauthorized: int = 0  # requests refused with 401
    always_401: bool = False  # refuse every bearer token (a 401 loop)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tokens: dict[str, float] = {}  # access token -> expiry (server clock)
        self.clients: dict[str, str] = {}  # client_id -> secret
        self.streams: list[queue.Queue[bytes | None]] = []  # one per open event stream
        self.stopping = threading.Event()
        self._next_id = 0

    def stop(self) -> None:
        self.stopping.set()
        super().stop()

    # ------------------------------------------------------------ what tests use

    @property
    def configuration_uri(self) -> str:
        return self.url(CONFIG_PATH)

    def configuration_document(self) -> dict[str, Any]:
        if self.config_override is not None:
            return self.config_override
        return {
            "version": "1.0",
            "issuer": self.issuer,
            "audit": {f"{k}_endpoint": self.url(f"/audit/{k}") for k in AUDIT_KINDS},
            "config": {
                "config_endpoint": self.url("/config"),
                "policy_endpoint": self.url("/policy"),
                "sse_endpoint": self.url("/sse"),
            },
        }

    def ssa(self, **overrides: Any) -> str:
        """A software statement signed by the provider's key (claim None removes it)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "software_id": "polang-fleet",
            "grant_types": ["client_credentials"],
            "org_id": "acme",
            "software_roles": ["cedarling"],
            "iat": now,
            "exp": now + 3600,
            "jti": uuid.uuid4().hex,
        }
        for k, v in overrides.items():
            if v is None:
                claims.pop(k, None)
            else:
                claims[k] = v
        return self.keys[0].sign(claims)

    def push(self, name: str, data: str = "", *, raw: bytes | None = None) -> None:
        """Send an event to every open stream (``raw``: these bytes as they are)."""
        if raw is None:
            self._next_id += 1
            lines = [
                f"event: {name}",
                *(f"data: {d}" for d in data.split("\n")),
                f"id: {self._next_id}",
            ]
            raw = ("\n".join(lines) + "\n\n").encode()
        self._broadcast(raw)

    def hang_up(self) -> None:
        """End the open event streams (the client reconnects)."""
        self._broadcast(None)

    def _broadcast(self, item: bytes | None) -> None:
        with self._lock:
            streams = list(self.streams)
        for q in streams:
            q.put(item)

    def entries(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received[kind])

    # ------------------------------------------------------------ serving

    def discovery_document(self) -> dict[str, Any]:
        doc = super().discovery_document()
        doc["registration_endpoint"] = self.url("/register")
        return doc

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        body = self._body(h)
        if path == CONFIG_PATH:
            self._json(h, 200, self.configuration_document())
        elif path == "/register" and h.command == "POST":
            self._register(h, body)
        elif path == "/token" and h.command == "POST":
            self._token(h, body)
        elif path.startswith("/audit/") and path.endswith("/bulk") and h.command == "POST":
            self._audit(h, path.split("/")[2], body)
        elif path.startswith("/policy/"):
            if self._authorized(h):
                store_id = unquote(path[len("/policy/") :])
                with self._lock:
                    self.store_fetches.append(h.headers.get("Authorization", ""))
                data = self.stores.get(store_id)
                if data is None:
                    self._send(h, 404, b"no such store", "text/plain")
                else:
                    self._send(h, 200, data, "application/zip")
        elif path == "/sse":
            if self._authorized(h):
                self._sse(h)
        else:
            super().serve(h)

    @staticmethod
    def _body(h: BaseHTTPRequestHandler) -> bytes:
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def _json(self, h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        self._send(h, status, json.dumps(doc).encode(), "application/json")

    def _authorized(self, h: BaseHTTPRequestHandler) -> bool:
        auth = h.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        with self._lock:
            expiry = self.tokens.get(token or "")
            ok = expiry is not None and time.time() < expiry and not self.always_401
            if not ok:
                self.unauthorized += 1
        if not ok:
            self._send(h, 401, b'{"error":"invalid_token"}', "application/json")
        return ok

    def _register(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        doc = json.loads(body)
        with self._lock:
            self.registrations.append(doc)
        client_id = f"client-{len(self.registrations)}"
        secret = secrets.token_urlsafe(16)
        with self._lock:
            self.clients[client_id] = secret
        self._json(h, 201, {"client_id": client_id, "client_secret": secret})

    def _token(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        auth = h.headers.get("Authorization", "")
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        try:
            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            cid, secret = "", ""
        with self._lock:
            self.token_grants.append({"client_id": unquote(cid), **form})
            good = auth.startswith("Basic ") and self.clients.get(unquote(cid)) == unquote(secret)
        if not good or form.get("grant_type") != "client_credentials":
            self._json(h, 401, {"error": "invalid_client"})
            return
        token = secrets.token_urlsafe(24)
        lifetime = self.token_lifetime
        with self._lock:
            self.tokens[token] = time.time() + (lifetime if lifetime else 3600)
        doc: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "scope": form.get("scope", ""),
        }
        if lifetime is not None:
            doc["expires_in"] = lifetime
        self._json(h, 200, doc)

    def _audit(self, h: BaseHTTPRequestHandler, kind: str, body: bytes) -> None:
        with self._lock:
            self.posts[kind] = self.posts.get(kind, 0) + 1
        if not self._authorized(h):
            return
        forced = self.audit_status.get(kind)
        if forced is not None:
            self._send(h, forced, b"not now", "text/plain")
            return
        entries = json.loads(body)
        assert isinstance(entries, list)
        with self._lock:
            self.received[kind].extend(entries)
        self._json(h, 200, {"success": True})

    def add_token(self, token: str, lifetime: float = 3600) -> None:
        """An access token the tests give the engine directly (ENGINE_LOCK_ACCESS_TOKEN)."""
        with self._lock:
            self.tokens[token] = time.time() + lifetime

    def _sse(self, h: BaseHTTPRequestHandler) -> None:
        events: queue.Queue[bytes | None] = queue.Queue()
        with self._lock:
            self.sse_connections.append(h.headers.get("Last-Event-ID"))
            self.streams.append(events)  # before the head: a push after it is not lost
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        try:
            h.wfile.write(b": welcome\n\n")
            h.wfile.flush()
            while not self.stopping.is_set():
                try:
                    item = events.get(timeout=0.05)
                except queue.Empty:
                    continue
                if item is None:
                    break
                h.wfile.write(item)
                h.wfile.flush()
        finally:
            with self._lock:
                self.streams.remove(events)
            h.close_connection = True
