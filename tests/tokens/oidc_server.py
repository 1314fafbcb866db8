"""A real OpenID provider on loopback HTTPS, for token tests.

It serves what a relying party needs: the discovery document, the JWKS (keys can be
added, rotated and removed while it runs) and token status lists; it signs tokens with
RSA, EC and EdDSA keys. Every request is counted by path so tests can check caching,
and any path can be made to fail. TLS uses a certificate from a test CA (trustme).

Reusable: ``OidcProvider(server_ssl_context, prefix="/realms/a")`` then ``.start()``;
or use the ``oidc`` fixtures from ``tests/tokens/conftest.py``.

Hostile behaviour for fetch tests: ``routes`` maps a path to a handler that answers
instead (see :func:`redirect`, :func:`drip`, :func:`blocked`, :func:`status`), and
``tls=None`` serves plain HTTP. ``connections`` counts accepted connections, including
those whose TLS handshake failed.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

_KEY_POOL: dict[tuple[str, int], Any] = {}
_POOL_LOCK = threading.Lock()


def private_key(alg: str, slot: int = 0) -> Any:
    """A private key for ``alg``; keys are made once per process and shared (RSA is slow)."""
    family = alg[:2] if alg != "EdDSA" else "Ed"
    curve = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}.get(alg, "")
    pool_key = (family + curve, slot)
    with _POOL_LOCK:
        key = _KEY_POOL.get(pool_key)
        if key is None:
            if family in ("RS", "PS"):
                key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            elif family == "ES":
                c = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
                key = ec.generate_private_key(c[curve])
            elif family == "Ed":
                key = ed25519.Ed25519PrivateKey.generate()
            else:
                raise ValueError(f"no key family for {alg}")
            _KEY_POOL[pool_key] = key
        return key


def public_jwk(key: Any, kid: str, alg: str | None) -> dict[str, Any]:
    pub = key.public_key()
    if isinstance(pub, rsa.RSAPublicKey):
        data = json.loads(RSAAlgorithm.to_jwk(pub))
    elif isinstance(pub, ec.EllipticCurvePublicKey):
        data = json.loads(ECAlgorithm.to_jwk(pub))
    else:
        data = json.loads(OKPAlgorithm.to_jwk(pub))
    data["kid"] = kid
    data["use"] = "sig"
    if alg:
        data["alg"] = alg
    return data


@dataclass
class SigningKey:
    alg: str
    kid: str
    key: Any
    publish_alg: bool = True

    @property
    def jwk(self) -> dict[str, Any]:
        return public_jwk(self.key, self.kid, self.alg if self.publish_alg else None)

    def sign(self, claims: dict[str, Any], headers: dict[str, Any] | None = None) -> str:
        h = {"kid": self.kid, "typ": "JWT"}
        h.update(headers or {})
        # the JWS layer signs any JSON, so tests can send malformed claims too
        body = json.dumps(claims, separators=(",", ":")).encode()
        return jwt.api_jws.encode(body, self.key, algorithm=self.alg, headers=h)


def encode_status_list(statuses: Sequence[int], bits: int) -> str:
    """The ``lst`` of a status list: packed LSB-first, ZLIB, base64url without padding."""
    per_byte = 8 // bits
    data = bytearray((len(statuses) + per_byte - 1) // per_byte)
    for i, s in enumerate(statuses):
        pos = i * bits
        data[pos // 8] |= (s & ((1 << bits) - 1)) << (pos % 8)
    raw = zlib.compress(bytes(data), 9)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass
class StatusListDoc:
    statuses: list[int]
    bits: int = 1
    ttl: int | None = None
    exp_in: int | None = 3600
    typ: str = "statuslist+jwt"
    sub: str | None = None  # None: the list's own URI
    signer: SigningKey | None = None  # None: the provider's first key
    raw: str | None = None  # serve this text instead


@dataclass
class OidcProvider:
    """One issuer. ``issuer`` is ``https://localhost:<port><prefix>`` once started."""

    server_context: ssl.SSLContext
    prefix: str = ""
    host: str = "localhost"
    jwks_cache_control: str | None = None
    clock: Callable[[], float] = time.time
    keys: list[SigningKey] = field(default_factory=list)
    unpublished: list[SigningKey] = field(default_factory=list)
    status_lists: dict[str, StatusListDoc] = field(default_factory=dict)
    fail: dict[str, int] = field(default_factory=dict)  # path -> HTTP status to answer
    discovery_issuer: str | None = None  # a different issuer in the discovery document
    requests: Counter[str] = field(default_factory=Counter)
    routes: dict[str, Handler] = field(default_factory=dict)  # path -> custom answer
    tls: bool = True  # False: plain HTTP on loopback
    connections: int = 0

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> OidcProvider:
        provider = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                try:
                    provider._handle(self)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    self.close_connection = True  # the client gave up (deadline tests)

            do_POST = do_GET  # subclasses (the test Lock server) answer POSTs in serve()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> Any:
                with provider._lock:
                    provider.connections += 1
                return super().get_request()

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # failed handshakes and dropped clients are what these tests make

        server = Server((self.host_ip, 0), RequestHandler)
        if self.tls:
            server.socket = self.server_context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def host_ip(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        assert self._port is not None, "start() the provider first"
        return self._port  # kept after stop(), so tokens can still name the issuer

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    @property
    def issuer(self) -> str:
        return f"{self.base}{self.prefix}"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def jwks_path(self) -> str:
        return f"{self.prefix}/jwks"

    @property
    def discovery_path(self) -> str:
        return f"{self.prefix}/.well-known/openid-configuration"

    def status_uri(self, name: str) -> str:
        return f"{self.issuer}/status/{name}"

    def status_path(self, name: str) -> str:
        return f"{self.prefix}/status/{name}"

    # ------------------------------------------------------------ keys and tokens

    def add_key(
        self, alg: str, kid: str | None = None, *, slot: int = 0, publish: bool = True
    ) -> SigningKey:
        k = SigningKey(alg=alg, kid=kid or f"{alg.lower()}-{slot}", key=private_key(alg, slot))
        with self._lock:
            (self.keys if publish else self.unpublished).append(k)
        return k

    def remove_key(self, kid: str) -> None:
        with self._lock:
            self.keys = [k for k in self.keys if k.kid != kid]

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(self.clock())
        c: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": "client-1",
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + 600,
        }
        for k, v in overrides.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        return c

    def token(
        self,
        key: SigningKey | None = None,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A signed token; claim ``None`` removes a default claim."""
        signer = key or self.keys[0]
        return signer.sign(self.claims(**claims), headers)

    # ------------------------------------------------------------ status lists

    def set_status_list(self, name: str, statuses: Sequence[int], **kw: Any) -> str:
        with self._lock:
            self.status_lists[name] = StatusListDoc(statuses=list(statuses), **kw)
        return self.status_uri(name)

    def status_list_jwt(self, name: str) -> str:
        doc = self.status_lists[name]
        if doc.raw is not None:
            return doc.raw
        now = int(self.clock())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": doc.sub if doc.sub is not None else self.status_uri(name),
            "iat": now,
            "status_list": {"bits": doc.bits, "lst": encode_status_list(doc.statuses, doc.bits)},
        }
        if doc.exp_in is not None:
            claims["exp"] = now + doc.exp_in
        if doc.ttl is not None:
            claims["ttl"] = doc.ttl
        signer = doc.signer or self.keys[0]
        return signer.sign(claims, {"typ": doc.typ})

    # ------------------------------------------------------------ serving

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        with self._lock:
            self.requests[path] += 1
            failing = self.fail.get(path)
            route = self.routes.get(path)
        if failing is not None:
            self._send(h, failing, b"failing on purpose", "text/plain")
            return
        if route is not None:
            route(h)
            return
        self.serve(h)

    def discovery_document(self) -> dict[str, Any]:
        return {
            "issuer": self.discovery_issuer or self.issuer,
            "jwks_uri": f"{self.base}{self.jwks_path}",
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "id_token_signing_alg_values_supported": sorted({k.alg for k in self.keys}),
        }

    def serve_discovery(self, h: BaseHTTPRequestHandler) -> None:
        """The discovery document (also usable as a route at any path)."""
        self._send(h, 200, json.dumps(self.discovery_document()).encode(), "application/json")

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        """The provider's own answer for ``h.path`` (custom routes may end with it)."""
        path = h.path.split("?", 1)[0]
        if path == self.discovery_path:
            self.serve_discovery(h)
        elif path == self.jwks_path:
            with self._lock:
                body = json.dumps({"keys": [k.jwk for k in self.keys]}).encode()
            extra = {"Cache-Control": self.jwks_cache_control} if self.jwks_cache_control else {}
            self._send(h, 200, body, "application/json", extra)
        elif path.startswith(f"{self.prefix}/status/"):
            name = path.rsplit("/", 1)[1]
            if name not in self.status_lists:
                self._send(h, 404, b"no such list", "text/plain")
                return
            body = self.status_list_jwt(name).encode()
            self._send(h, 200, body, "application/statuslist+jwt")
        else:
            self._send(h, 404, b"not found", "text/plain")

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)


Handler = Callable[[BaseHTTPRequestHandler], None]


def send(
    h: BaseHTTPRequestHandler,
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    ctype: str = "application/octet-stream",
) -> None:
    """Answer ``h`` with ``status``, ``body`` (Content-Length set) and extra headers."""
    OidcProvider._send(h, status, body, ctype, dict(headers or {}))


def body(data: bytes, headers: Mapping[str, str] | None = None, status: int = 200) -> Handler:
    """Always answer ``status`` with ``data``."""
    return lambda h: send(h, status, data, headers)


def redirect(location: str, status: int = 302) -> Handler:
    return lambda h: send(h, status, b"", {"Location": location})


def status(code: int, headers: Mapping[str, str] | None = None) -> Handler:
    return lambda h: send(h, code, b"not now", headers, "text/plain")


def drip(data: bytes, every: float, *, in_headers: bool = False) -> Handler:
    """Send ``data`` one byte at a time, ``every`` seconds apart (a slow-loris server).

    ``in_headers``: drip the status line and headers too, so not even they complete.
    """

    def handle(h: BaseHTTPRequestHandler) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        if in_headers:
            stream = head + data
        else:
            h.wfile.write(head)
            h.wfile.flush()
            stream = data
        for i in range(len(stream)):
            h.wfile.write(stream[i : i + 1])
            h.wfile.flush()
            time.sleep(every)
        h.close_connection = True

    return handle


def blocked(
    release: threading.Event, then: Handler, entered: threading.Event | None = None
) -> Handler:
    """Hold the request until ``release`` is set (``entered`` tells when it arrived), then
    answer with ``then``."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        if entered is not None:
            entered.set()
        release.wait(30)
        then(h)

    return handle


def hs256_with_public_key(provider_key: SigningKey, claims: dict[str, Any]) -> str:
    """The classic alg-confusion forgery: HS256 keyed with the issuer's RSA public key (PEM)."""
    from cryptography.hazmat.primitives import serialization

    pem = provider_key.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": provider_key.kid}

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    import hashlib
    import hmac

    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    sig = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(sig)}"


def unsigned_token(claims: dict[str, Any], alg: str = "none") -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    header = {"alg": alg, "typ": "JWT"}
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}."
