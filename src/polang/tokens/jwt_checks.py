"""JWT checks: structure, signature (polang.tokens.signatures), times, claims.

Signatures are verified only with keys of the issuer the token's ``iss`` names, for an
``alg`` on the allow-list whose key type matches the key. ``none`` is never valid and
header-supplied key locations (``jku``, ``x5u``, ``x5c``, ``jwk``) are never used.
"""

from __future__ import annotations

import binascii
import math
import re
from dataclasses import dataclass
from typing import Any

from polang.errors import PolangError
from polang.jsonlimits import loads
from polang.language.values import LONG_MAX, LONG_MIN
from polang.tokens import signatures
from polang.tokens.claim_paths import resolve
from polang.tokens.issuers import IssuerKeys, KeyLookupError
from polang.tokens.model import TokenDrop


@dataclass(frozen=True, slots=True)
class DecodedJwt:
    raw: str
    header: dict[str, Any]
    payload: dict[str, Any]


_NOT_BASE64URL = re.compile(r"[+/= \t\r\n]")
_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64url(segment: str, what: str) -> bytes:
    if not segment or _NOT_BASE64URL.search(segment):
        raise TokenDrop("invalid_input", f"the JWT {what} is not base64url")
    try:
        # base64.urlsafe_b64decode(segment + padding), its wrappers inlined
        raw = (segment + "=" * (-len(segment) % 4)).encode("ascii").translate(_URLSAFE)
        return binascii.a2b_base64(raw, strict_mode=False)
    except (binascii.Error, ValueError) as e:
        raise TokenDrop("invalid_input", f"the JWT {what} is not base64url") from e


class _RefusedJson(PolangError):
    """A token part that is not JSON or nests too deep (becomes a drop reason)."""


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    # bounded nesting: the claims are read before the signature is checked, so an
    # unsigned token must not be able to make the parser recurse
    try:
        obj = loads(data, what=f"the JWT {what}", error=_RefusedJson)
    except _RefusedJson as e:
        raise TokenDrop("invalid_input", str(e)) from None
    if not isinstance(obj, dict):
        raise TokenDrop("invalid_input", f"the JWT {what} is not a JSON object")
    return obj


_HEADERS: dict[str, dict[str, Any]] = {}
"""Decoded headers by their base64url text; never modified (only read by the checks)."""


def decode_unverified(token: str) -> DecodedJwt:
    """Split and parse a compact JWS without trusting anything in it."""
    if not isinstance(token, str):
        raise TokenDrop("invalid_input", "the token payload is not a string")
    token = token.strip()
    parts = token.split(".")
    if len(parts) == 5:
        raise TokenDrop("invalid_input", "encrypted tokens (JWE) are not supported")
    if len(parts) != 3:
        raise TokenDrop("invalid_input", "not a JWT (expected three dot-separated parts)")
    header = _HEADERS.get(parts[0])
    if header is None:
        header = _json_object(_b64url(parts[0], "header"), "header")
        if len(_HEADERS) < 256:  # an issuer's tokens share a few headers (alg, kid)
            _HEADERS[parts[0]] = header
    payload = _json_object(_b64url(parts[1], "payload"), "payload")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise TokenDrop("invalid_input", "the JWT header has no 'alg'")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise TokenDrop("invalid_input", "the JWT header 'kid' is not a string")
    return DecodedJwt(raw=token, header=header, payload=payload)


def check_header(decoded: DecodedJwt, allowed: tuple[str, ...]) -> str:
    """The header's ``alg``, if it is one we may verify."""
    alg: str = decoded.header["alg"]
    if alg.lower() == "none":
        raise TokenDrop("signature", "unsigned tokens (alg 'none') are never accepted")
    if alg not in allowed:
        raise TokenDrop(
            "signature",
            f"algorithm {alg!r} is not allowed (ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED: "
            f"{' '.join(allowed)})",
        )
    crit = decoded.header.get("crit")
    if crit is not None:
        raise TokenDrop("signature", f"critical header extensions {crit!r} are not understood")
    if "b64" in decoded.header:
        raise TokenDrop("signature", "unencoded payloads ('b64' header) are not supported")
    return alg


def verify_signature(decoded: DecodedJwt, issuer: IssuerKeys, allowed: tuple[str, ...]) -> None:
    """Verify with the issuer's keys; ``kid`` picks the key, else every fitting key is tried."""
    alg = check_header(decoded, allowed)
    kid = decoded.header.get("kid")
    try:
        keys = issuer.keys_for(kid, alg)
    except KeyLookupError as e:
        raise TokenDrop(e.kind, e.message) from e  # type: ignore[arg-type]
    if not keys:
        if kid is not None:
            raise TokenDrop(
                "signature",
                f"issuer {issuer.settings.issuer_id!r} has no {alg} key with kid {kid!r}",
            )
        raise TokenDrop(
            "signature", f"issuer {issuer.settings.issuer_id!r} has no key for algorithm {alg}"
        )
    for key in keys:
        if signatures.verify(decoded.raw, key, alg):  # PyJWT or WebCrypto, chosen there
            return
    raise TokenDrop("signature", "the signature does not verify with the issuer's keys")


def _number_text(v: int | float) -> str:
    text = repr(v)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} digits)"


def _numeric(payload: dict[str, Any], claim: str) -> float | None:
    if claim not in payload or payload[claim] is None:
        return None
    v = payload[claim]
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or (isinstance(v, float) and not math.isfinite(v))
    ):
        raise TokenDrop("invalid_input", f"claim {claim!r} is not a NumericDate (RFC 7519 2)")
    if not LONG_MIN <= v <= LONG_MAX:  # compared exactly: a huge int never becomes a float
        raise TokenDrop(
            "invalid_input",
            f"claim {claim!r} ({_number_text(v)}) is outside the 64-bit Long range of the "
            "policy language",
        )
    return float(v)


def check_times(payload: dict[str, Any], now: float, skew: float) -> None:
    """``exp``, ``nbf`` and ``iat`` with leeway (RFC 7519 4.1.4-4.1.6)."""
    exp = _numeric(payload, "exp")
    nbf = _numeric(payload, "nbf")
    iat = _numeric(payload, "iat")
    if exp is not None and now >= exp + skew:
        raise TokenDrop("expired", f"the token expired at {int(exp)} (now {int(now)})")
    if nbf is not None and now + skew < nbf:
        raise TokenDrop(
            "not_yet_valid", f"the token is not valid before {int(nbf)} (now {int(now)})"
        )
    if iat is not None and now + skew < iat:
        raise TokenDrop(
            "not_yet_valid", f"the token was issued in the future ({int(iat)}, now {int(now)})"
        )


def _is_str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(e, str) for e in v)


_REGISTERED_CHECKS = {
    "iss": (lambda v: isinstance(v, str) and bool(v), "a non-empty StringOrURI"),
    "sub": (lambda v: isinstance(v, str) and bool(v), "a non-empty StringOrURI"),
    "aud": (
        lambda v: (isinstance(v, str) and bool(v)) or (_is_str_list(v) and bool(v)),
        "a StringOrURI or a non-empty array of them",
    ),
    "jti": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "exp": (lambda v: not isinstance(v, bool) and isinstance(v, (int, float)), "a NumericDate"),
    "nbf": (lambda v: not isinstance(v, bool) and isinstance(v, (int, float)), "a NumericDate"),
    "iat": (lambda v: not isinstance(v, bool) and isinstance(v, (int, float)), "a NumericDate"),
}


def _shown(values: list[str] | tuple[str, ...]) -> str:
    items = [repr(v if len(v) <= 80 else v[:77] + "...") for v in values[:3]]
    more = f" and {len(values) - 3} more" if len(values) > 3 else ""
    return ", ".join(items) + more


def check_audience(payload: dict[str, Any], expected: tuple[str, ...]) -> None:
    """The token's ``aud`` names one of ``expected`` (no check when it is empty).

    This is what refuses a token the same issuer minted for another service: without it,
    any token of a trusted issuer is accepted whoever it was meant for.
    """
    if not expected:
        return
    aud = payload.get("aud")
    if aud is None:
        raise TokenDrop(
            "audience", f"the token has no 'aud' claim; expected_audience is {_shown(expected)}"
        )
    values = [aud] if isinstance(aud, str) else aud
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TokenDrop("invalid_input", "registered claim 'aud' must be a string or an array")
    if not any(v in expected for v in values):
        raise TokenDrop(
            "audience",
            f"the token's audience {_shown(values) or '[]'} is not the expected audience "
            f"{_shown(expected)} (expected_audience): it was issued for another service",
        )


def check_required(payload: dict[str, Any], required: tuple[str, ...]) -> None:
    """Every required claim (a claim path) present; registered ones among them well-formed
    (RFC 7519 4.1)."""
    missing = [c for c in required if resolve(payload, c) is None]
    if missing:
        raise TokenDrop(
            "missing_claim", f"required claim(s) missing: {', '.join(repr(c) for c in missing)}"
        )
    for c in required:
        check = _REGISTERED_CHECKS.get(c)
        if check is not None and not check[0](payload[c]):
            raise TokenDrop("invalid_input", f"registered claim {c!r} must be {check[1]}")
