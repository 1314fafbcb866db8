"""Weak and absurd keys in an issuer's JWKS: refused when the JWKS is read, never used.

The keys are real (RSA keys of 512 and 1,024 bits made in the test, EC and OKP keys on
the wrong curves, a published HMAC secret, a published private key), served by the
loopback OpenID provider, and the tokens are really signed with them: each such token is
dropped saying that the issuer has no usable key, the system log names the issuer, the
``kid`` and the limit, and the issuer's other keys keep working. ``ENGINE_LOCAL_JWKS`` goes
through the same checks and refuses to load.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa, x25519
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from polang import Engine, TokenError, TokenInput
from polang.errors import ConfigError
from polang.tokens import IssuerSettings, TokenProcessor, TokenSettings
from polang.tokens.issuers import (
    MAX_RSA_EXPONENT_BITS,
    MAX_RSA_KEY_BITS,
    MIN_HMAC_KEY_BITS,
    MIN_RSA_KEY_BITS,
)

from .conftest import FakeClock, issuer_record
from .oidc_server import OidcProvider, SigningKey, body, private_key, public_jwk
from .test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, issuers_for, write_store

MAPPING = "Acme::Access_token"

# PyJWT (2.10+) warns when it signs or reads a short key: here that is the point
pytestmark = [
    pytest.mark.filterwarnings("ignore:The RSA key is"),
    pytest.mark.filterwarnings("ignore:The HMAC key is"),
]


def b64u(data: bytes | int) -> str:
    raw = data if isinstance(data, bytes) else data.to_bytes((data.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _probable_prime(bits: int) -> int:
    """A random prime of exactly ``bits`` bits (Miller-Rabin, 40 rounds)."""
    while True:
        n = secrets.randbits(bits) | (3 << (bits - 2)) | 1  # top two bits: n*m has 2*bits
        if any(n % p == 0 for p in (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)):
            continue
        d, s = n - 1, 0
        while d % 2 == 0:
            d, s = d // 2, s + 1
        for _ in range(40):
            x = pow(secrets.randbelow(n - 3) + 2, d, n)
            if x in (1, n - 1):
                continue
            for _ in range(s - 1):
                x = pow(x, 2, n)
                if x == n - 1:
                    break
            else:
                break  # a witness: n is composite
        else:
            return n


def weak_rsa_key(bits: int) -> rsa.RSAPrivateKey:
    """A real RSA key of ``bits`` bits, built from primes made here: cryptography refuses to
    generate keys under 1,024 bits (and may refuse 1,024 some day), but loads them."""
    e = 65537
    while True:
        p, q = _probable_prime(bits // 2), _probable_prime(bits // 2)
        phi = (p - 1) * (q - 1)
        if p != q and phi % e:
            break
    d = pow(e, -1, phi)
    numbers = rsa.RSAPrivateNumbers(
        p, q, d, d % (p - 1), d % (q - 1), pow(q, -1, p), rsa.RSAPublicNumbers(e, p * q)
    )
    key = numbers.private_key()
    assert key.key_size == bits
    return key


@pytest.fixture
def logged(
    client_ssl_context: ssl.SSLContext, clock: FakeClock
) -> Iterator[Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]]]:
    """A processor for one provider, and the system-log lines it wrote."""
    made: list[TokenProcessor] = []

    def make(
        provider: OidcProvider, **settings: Any
    ) -> tuple[TokenProcessor, list[tuple[str, str]]]:
        lines: list[tuple[str, str]] = []
        settings.setdefault("ssl_context", client_ssl_context)
        settings.setdefault("http_max_retries", 0)
        settings.setdefault("token_cache_capacity", 0)
        issuer = IssuerSettings.from_dict("acme", issuer_record(provider))
        proc = TokenProcessor(
            [issuer], TokenSettings(**settings), clock=clock, log=lambda *e: lines.append(e)
        )
        made.append(proc)
        return proc, lines

    yield make
    for p in made:
        p.close()


def outcome(proc: TokenProcessor, token: str) -> tuple[str, str]:
    out = proc.process([TokenInput(MAPPING, token)])
    if out.tokens:
        return "ok", ""
    return out.dropped[0].kind, out.dropped[0].message


def serve_keys(provider: OidcProvider, *keys: dict[str, Any]) -> None:
    provider.routes[provider.jwks_path] = body(json.dumps({"keys": list(keys)}).encode())


def refusal(lines: list[tuple[str, str]], kid: str) -> str:
    [(level, message)] = [line for line in lines if f"kid {kid!r}" in line[1]]
    assert level == "WARN"
    assert "issuer 'acme'" in message and "refused keys[" in message
    return message


# ---------------------------------------------------------------- RSA


def test_rsa_keys_of_512_and_1024_bits_are_refused_and_2048_is_used(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
    clock: FakeClock,
) -> None:
    provider = make_provider("/realms/acme", keys=("RS256",))  # a 2048-bit key
    weak = {bits: SigningKey("RS256", f"weak-{bits}", weak_rsa_key(bits)) for bits in (512, 1024)}
    provider.keys.extend(weak.values())
    proc, lines = logged(provider)
    assert outcome(proc, provider.token()) == ("ok", "")
    for bits, key in weak.items():
        kind, message = outcome(proc, provider.token(key=key))
        assert kind == "signature"
        assert f"has no usable RS256 key with kid 'weak-{bits}'" in message
        assert f"RSA key of {bits} bits, fewer than MIN_RSA_KEY_BITS (2048" in message
        logged_line = refusal(lines, f"weak-{bits}")
        assert f"RSA key of {bits} bits, fewer than MIN_RSA_KEY_BITS (2048" in logged_line
    assert len(lines) == 2
    # a refetch (an unknown kid, after the cooldown) reads the same keys: not logged again
    clock.advance(31)
    stranger = provider.add_key("RS256", kid="stranger", slot=3, publish=False)
    assert outcome(proc, provider.token(key=stranger))[0] == "signature"
    assert provider.requests[provider.jwks_path] == 2
    assert len(lines) == 2
    # without a kid, every fitting key is tried: the weak ones are not among them
    no_kid = jwt.encode(provider.claims(), weak[1024].key, algorithm="RS256")
    kind, message = outcome(proc, no_kid)
    assert kind == "signature" and "does not verify" in message
    assert MIN_RSA_KEY_BITS == 2048


def test_a_token_without_kid_whose_only_fitting_key_was_refused_says_so(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
) -> None:
    provider = make_provider("/realms/acme", keys=("EdDSA",))
    weak = SigningKey("RS256", "weak-1024", weak_rsa_key(1024))
    provider.keys.append(weak)
    proc, lines = logged(provider)
    kind, message = outcome(proc, jwt.encode(provider.claims(), weak.key, algorithm="RS256"))
    assert kind == "signature"
    assert "has no usable key for algorithm RS256; refused when its JWKS was read" in message
    assert "keys[1] (kid 'weak-1024'): RSA key of 1024 bits" in message
    refusal(lines, "weak-1024")


def test_rsa_exponent_and_modulus_are_bounded(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
) -> None:
    provider = make_provider("/realms/acme", keys=("RS256",))
    good = provider.keys[0]
    huge_n = secrets.randbits(MAX_RSA_KEY_BITS + 8) | (1 << (MAX_RSA_KEY_BITS + 7)) | 1
    variants = {
        "e-one": {"e": b64u(1)},
        "e-even": {"e": b64u(65536)},
        "e-huge": {"e": b64u(2**MAX_RSA_EXPONENT_BITS + 1)},
        "n-huge": {"n": b64u(huge_n)},
    }
    serve_keys(provider, good.jwk, *(dict(good.jwk, kid=kid, **v) for kid, v in variants.items()))
    proc, lines = logged(provider)
    assert outcome(proc, provider.token()) == ("ok", "")  # the JWKS is still read
    expected = {
        "e-one": "RSA public exponent 1 (it must be odd and at least 3)",
        "e-even": "RSA public exponent 65536 (it must be odd and at least 3)",
        "e-huge": "RSA public exponent of 65 bits, more than MAX_RSA_EXPONENT_BITS (64)",
        "n-huge": f"RSA key of {MAX_RSA_KEY_BITS + 8} bits, more than MAX_RSA_KEY_BITS (16384)",
    }
    for kid, reason in expected.items():
        signer = SigningKey("RS256", kid, good.key)
        kind, message = outcome(proc, provider.token(key=signer))
        assert kind == "signature" and "no usable RS256 key" in message and reason in message
        assert reason in refusal(lines, kid)


def test_private_key_material_in_a_fetched_jwks_is_refused(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
) -> None:
    """A JWKS entry with ``d`` made PyJWT load a private key, which cannot verify: the
    AttributeError it raised escaped the engine."""
    provider = make_provider("/realms/acme", keys=("RS256", "ES256"))
    rsa_key, ec_key = provider.keys
    leaked = []
    for key, algorithm in ((rsa_key, RSAAlgorithm), (ec_key, ECAlgorithm)):
        jwk = json.loads(algorithm.to_jwk(key.key))  # the private key, as JSON
        jwk.pop("key_ops", None)
        jwk.update(kid=f"leaked-{key.alg}", use="sig")
        leaked.append(jwk)
    serve_keys(provider, *leaked)
    proc, lines = logged(provider)
    for key in (rsa_key, ec_key):
        signer = SigningKey(key.alg, f"leaked-{key.alg}", key.key)
        kind, message = outcome(proc, provider.token(key=signer))
        assert kind == "signature" and "private key material ('d')" in message
        refusal(lines, f"leaked-{key.alg}")


# ---------------------------------------------------------------- EC, OKP, alg


def test_ec_and_okp_keys_must_be_on_their_curve_and_fit_their_alg(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
) -> None:
    provider = make_provider("/realms/acme", keys=("ES256", "RS256"))
    p256, rsa_key = provider.keys
    k1 = ec.generate_private_key(ec.SECP256K1())
    xpub = x25519.X25519PrivateKey.generate().public_key()
    raw = xpub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    no_alg = {k: v for k, v in p256.jwk.items() if k != "alg"}
    serve_keys(
        provider,
        p256.jwk,
        {**no_alg, "kid": "crv-p384", "crv": "P-384"},  # P-256 coordinates named P-384
        dict(p256.jwk, kid="alg-es384", alg="ES384"),  # a P-256 key claiming ES384
        dict(public_jwk(k1, "k1", None)),  # secp256k1 (ES256K is not verified)
        {"kty": "OKP", "crv": "X25519", "x": b64u(raw), "kid": "x25519", "use": "sig"},
        dict(rsa_key.jwk, kid="rsa-as-es256", alg="ES256"),  # alg disagrees with kty
        dict(p256.jwk, kid="ec-as-rs256", alg="RS256"),
    )
    proc, lines = logged(provider)
    assert outcome(proc, provider.token(key=p256)) == ("ok", "")
    expected = {
        "crv-p384": (p256, "not a valid EC key"),
        "alg-es384": (p256, "its alg 'ES384' does not fit an EC key on P-256"),
        "k1": (p256, "EC curve 'secp256k1' is not one polang verifies with"),
        "x25519": (p256, "OKP curve 'X25519' is not a signature curve (Ed25519, Ed448)"),
        "rsa-as-es256": (rsa_key, "its alg 'ES256' does not fit an RSA key"),
        "ec-as-rs256": (p256, "its alg 'RS256' does not fit an EC key on P-256"),
    }
    for kid, (key, reason) in expected.items():
        kind, message = outcome(proc, provider.token(key=SigningKey(key.alg, kid, key.key)))
        assert kind == "signature" and "no usable" in message and reason in message, message
        assert reason in refusal(lines, kid)
    assert len(lines) == len(expected)


# ---------------------------------------------------------------- symmetric keys


def test_a_symmetric_key_is_never_taken_from_a_fetched_jwks(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
) -> None:
    """A secret in a public JWKS lets anyone sign: even with HS256 allowed it is refused."""
    provider = make_provider("/realms/acme", keys=("RS256",))
    secret = secrets.token_bytes(32)
    oct_jwk = {"kty": "oct", "k": b64u(secret), "kid": "shared", "alg": "HS256", "use": "sig"}
    serve_keys(provider, provider.keys[0].jwk, oct_jwk)
    proc, lines = logged(provider, algorithms=("RS256", "HS256"))
    forged = jwt.encode(provider.claims(), secret, algorithm="HS256", headers={"kid": "shared"})
    kind, message = outcome(proc, forged)
    assert kind == "signature" and "no usable HS256 key with kid 'shared'" in message
    assert "symmetric ('oct') key in a fetched JWKS" in refusal(lines, "shared")
    assert outcome(proc, provider.token()) == ("ok", "")


def test_local_symmetric_keys_need_the_hash_size(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
    tmp_path: Path,
) -> None:
    provider = make_provider("/realms/acme", keys=("RS256",))
    secret = secrets.token_bytes(MIN_HMAC_KEY_BITS // 8)
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"acme": [{"kty": "oct", "k": b64u(secret), "kid": "s"}]}))
    proc, _ = logged(provider, algorithms=("HS256", "HS512"), local_jwks_path=str(path))
    claims = provider.claims()
    hs256 = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "s"})
    assert outcome(proc, hs256) == ("ok", "")
    hs512 = jwt.encode(claims, secret, algorithm="HS512", headers={"kid": "s"})
    assert outcome(proc, hs512)[0] == "signature"  # 256 bits are too few for HS512
    for k, alg, reason in (
        (secrets.token_bytes(16), None, "symmetric key of 128 bits, fewer than MIN_HMAC_KEY_BITS"),
        (secret, "HS512", "its alg 'HS512' needs a key of at least 512 bits"),
    ):
        jwk = {"kty": "oct", "k": b64u(k), "kid": "short"} | ({"alg": alg} if alg else {})
        path.write_text(json.dumps({"acme": [jwk]}))
        with pytest.raises(ConfigError, match=reason) as e:
            logged(provider, algorithms=("HS256",), local_jwks_path=str(path))
        assert "keys[0] (kid 'short')" in str(e.value)
    assert sum(provider.requests.values()) == 0  # local keys: never fetched


# ---------------------------------------------------------------- ENGINE_LOCAL_JWKS


@pytest.mark.parametrize(
    ("kid", "reason"),
    [
        ("weak-1024", "RSA key of 1024 bits, fewer than MIN_RSA_KEY_BITS (2048"),
        ("e-one", "RSA public exponent 1"),
        ("leaked", "private key material ('d')"),
        ("crv-p384", "not a valid EC key"),
    ],
)
def test_local_jwks_keys_go_through_the_same_checks(
    make_provider: Callable[..., OidcProvider],
    logged: Callable[..., tuple[TokenProcessor, list[tuple[str, str]]]],
    tmp_path: Path,
    kid: str,
    reason: str,
) -> None:
    provider = make_provider("/realms/acme", keys=("RS256",))
    good = provider.keys[0].jwk
    bad = {
        "weak-1024": lambda: public_jwk(weak_rsa_key(1024), kid, "RS256"),
        "e-one": lambda: dict(good, kid=kid, e=b64u(1)),
        "leaked": lambda: dict(json.loads(RSAAlgorithm.to_jwk(private_key("RS256"))), kid=kid),
        "crv-p384": lambda: public_jwk(private_key("ES256"), kid, None) | {"crv": "P-384"},
    }[kid]()
    bad.pop("key_ops", None)
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"acme": {"keys": [good, bad]}}))
    with pytest.raises(ConfigError, match="ENGINE_LOCAL_JWKS") as e:
        logged(provider, local_jwks_path=str(path))
    assert f"keys[1] (kid '{kid}')" in str(e.value) and reason in str(e.value)
    path.write_text(json.dumps({"acme": {"keys": [good]}}))
    proc, _ = logged(provider, local_jwks_path=str(path))
    assert outcome(proc, provider.token()) == ("ok", "")


# ---------------------------------------------------------------- through the engine


def test_the_engine_system_log_names_the_issuer_and_the_refused_kid(
    tmp_path: Path,
    client_ssl_context: ssl.SSLContext,
    make_provider: Callable[..., OidcProvider],
) -> None:
    acme = make_provider("/realms/acme", keys=("RS256",))
    partner = make_provider("/partner", keys=("EdDSA",))
    weak = SigningKey("RS256", "legacy-1024", weak_rsa_key(1024))
    acme.keys.append(weak)
    store = write_store(tmp_path / "store", SCHEMA, issuers_for(acme, partner))
    cfg = {
        "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
        "ENGINE_HTTP_MAX_RETRIES": 0,
        "ENGINE_LOG_TYPE": "memory",
    }
    engine = Engine(cfg, ssl_context=client_ssl_context)
    try:
        engine.pop_logs()
        with pytest.raises(TokenError) as e:
            engine.authorize_multi_issuer([TokenInput(ACCESS, acme.token(key=weak))], READ, doc())
        [reason] = e.value.reasons
        assert reason["reason"]["kind"] == "signature"
        assert "no usable RS256 key with kid 'legacy-1024'" in reason["reason"]["message"]
        ok = engine.authorize_multi_issuer(
            [TokenInput(ACCESS, acme.token(scope=["docs:read"]))], READ, doc()
        )
        assert ok.decision is True
        warns = [x for x in engine.pop_logs() if x.get("level") == "WARN"]
        [line] = [x["msg"] for x in warns if "legacy-1024" in x["msg"]]
        assert "issuer 'acme'" in line and "kid 'legacy-1024'" in line
        assert "RSA key of 1024 bits, fewer than MIN_RSA_KEY_BITS (2048" in line
    finally:
        engine.close()
