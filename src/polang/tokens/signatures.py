"""JWT signature verification: the one place that chooses how signatures are checked.

- With the ``cryptography`` package (every CPython install; a Pyodide that loaded its own
  build), PyJWT verifies.
- Without it under Pyodide (PyPI has no WebAssembly build of ``cryptography``), the
  runtime's WebCrypto (``crypto.subtle``, in browsers and Node.js) verifies RS*, PS*,
  ES*, EdDSA and HS*. WebCrypto answers asynchronously, so synchronous code cannot wait
  for it: ``polang.wasm``'s driver decides with a table of verifications set
  (:func:`verified_results`); a verification not in it raises :class:`VerifyNeeded`, the
  driver runs it through WebCrypto and decides again.
- Without either, there is no verifier: a signed token is dropped with a reason that says
  so. Signature validation is never silently off.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from polang.runtime import WASM, Needed, needs_refused, unavailable
from polang.tokens.model import TokenDrop

if TYPE_CHECKING:
    import jwt

#: Members of a public JWK that WebCrypto reads, by key type (the rest, such as ``alg``,
#: ``use`` or ``kid``, are left out: WebCrypto refuses a JWK whose ``alg`` differs from the
#: algorithm asked for, and polang has already matched the key to the token's ``alg``).
PUBLIC_MEMBERS = {
    "RSA": ("n", "e"),
    "EC": ("crv", "x", "y"),
    "OKP": ("crv", "x"),
    "oct": ("k",),
}

_DECODE_OPTIONS: dict[str, Any] = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
    "require": [],
}


class VerifiableKey(Protocol):
    """What a verifier reads from a JWKS key (:class:`polang.tokens.issuers.JsonWebKey`)."""

    data: dict[str, Any]

    def pyjwk(self, alg: str) -> jwt.PyJWK: ...


@cache
def verifier() -> str | None:
    """``"cryptography"`` (PyJWT), ``"webcrypto"`` or None: chosen once per process."""
    try:
        import cryptography.hazmat.primitives.asymmetric.rsa  # noqa: F401 - only a probe
    except ImportError:
        return "webcrypto" if WASM else None
    return "cryptography"


def no_verifier_reason() -> str:
    return unavailable(
        "verifying JWT signatures",
        "neither the cryptography package nor the runtime's WebCrypto can be used",
        "signed tokens are dropped",
    )


def check_key(data: dict[str, Any]) -> None:
    """Load ``data`` once as the verifier will (``ValueError`` and the like if it cannot),
    so that a bad key is refused when the JWKS is read, not per token."""
    if verifier() == "cryptography":
        import jwt  # PyJWT and cryptography load with the first key, not at import

        jwt.PyJWK(data)
        return
    for name in PUBLIC_MEMBERS.get(data.get("kty", ""), ()):
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"the member {name!r} is missing or not a string")
        if name != "crv":
            _b64url(value, name)


def verify(raw: str, key: VerifiableKey, alg: str) -> bool:
    """Whether ``key`` verifies the compact JWS ``raw`` with ``alg`` (already checked to
    fit the key). Raises :class:`TokenDrop` when no verifier can run here."""
    how = verifier()
    if how == "cryptography":
        import jwt  # PyJWT (and cryptography) only once a signature is verified
        from jwt.exceptions import PyJWTError

        try:
            jwt.decode(raw, key=key.pyjwk(alg), algorithms=[alg], options=_DECODE_OPTIONS)  # type: ignore[arg-type]
        except (PyJWTError, ValueError, TypeError):
            return False
        return True
    if how is None:
        raise TokenDrop("signature", no_verifier_reason())
    return _webcrypto(raw, key.data, alg)


# ---------------------------------------------------------------- WebCrypto

_RESULTS: ContextVar[MutableMapping[bytes, bool] | None] = ContextVar(
    "polang_webcrypto_results", default=None
)


class VerifyNeeded(Needed):
    """(WebAssembly.) This signature must be verified with WebCrypto before the code that
    raised this runs again; the driver stores the answer under ``digest``."""

    def __init__(
        self, digest: bytes, jwk: dict[str, str], alg: str, signed: bytes, signature: bytes
    ) -> None:
        super().__init__(f"verify a {alg} signature")
        self.digest = digest
        self.jwk = jwk
        self.alg = alg
        self.signed = signed
        self.signature = signature


@contextmanager
def verified_results(table: MutableMapping[bytes, bool]) -> Iterator[None]:
    """Within this block (this task only), WebCrypto verifications are answered from
    ``table`` (digest -> verified), and a missing one raises :class:`VerifyNeeded`."""
    token = _RESULTS.set(table)
    try:
        yield
    finally:
        _RESULTS.reset(token)


def _webcrypto(raw: str, data: dict[str, Any], alg: str) -> bool:
    table = _RESULTS.get()
    if table is None:
        raise TokenDrop(
            "signature",
            unavailable(
                "verifying a signature synchronously",
                "WebCrypto answers asynchronously",
                "decide through polang.wasm.WasmEngine",
            ),
        )
    signed, _, signature_text = raw.rpartition(".")
    try:
        signature = _b64url(signature_text, "signature")
    except ValueError:
        return False
    jwk = {n: data[n] for n in PUBLIC_MEMBERS.get(data.get("kty", ""), ()) if n in data}
    jwk["kty"] = data.get("kty", "")
    digest = hashlib.sha256(
        json.dumps([alg, jwk, raw], sort_keys=True, separators=(",", ":")).encode()
    ).digest()
    answer = table.get(digest)
    refused = needs_refused()
    if answer is None and refused:
        raise TokenDrop("signature", f"the signature was not verified: {refused}")
    if answer is None:
        raise VerifyNeeded(digest, jwk, alg, signed.encode(), signature)
    return answer


_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


def _b64url(text: str, what: str) -> bytes:
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError(f"{what!r} is not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"{what!r} is not base64url") from None
