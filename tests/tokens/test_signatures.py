"""The one place that chooses how JWT signatures are verified (polang.tokens.signatures).

On CPython it is PyJWT with ``cryptography``. Without a verifier, signed tokens are
dropped saying so (never accepted unverified). The WebCrypto path's synchronous half (the
table of answers, :class:`VerifyNeeded`) is checked here with ``cryptography`` answering
in WebCrypto's place; WebCrypto itself runs in tests/wasm (Pyodide under Node.js).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jwt
import pytest

from polang.tokens import TokenInput, TokenProcessor, signatures
from polang.tokens.signatures import VerifyNeeded, verified_results

from .conftest import issuer_record
from .oidc_server import OidcProvider

ACCESS = "Acme::Access_token"


@pytest.fixture
def proc(oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]) -> TokenProcessor:
    return make_processor({"acme": issuer_record(oidc)})


def test_cpython_verifies_with_cryptography() -> None:
    assert signatures.verifier() == "cryptography"


def test_without_a_verifier_signed_tokens_are_dropped_saying_so(
    oidc: OidcProvider, proc: TokenProcessor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signatures, "verifier", lambda: None)
    out = proc.process([TokenInput(ACCESS, oidc.token())])
    assert out.tokens == []
    (drop,) = out.dropped
    assert drop.kind == "signature"
    assert "verifying JWT signatures is not available" in drop.message
    assert "signed tokens are dropped" in drop.message


def _cryptography_answer(need: VerifyNeeded) -> bool:
    """What WebCrypto answers, computed with cryptography (PyJWT) from the same parts."""
    key = jwt.PyJWK(need.jwk, algorithm=need.alg)
    algorithm = jwt.get_algorithm_by_name(need.alg)
    return bool(algorithm.verify(need.signed, key.key, need.signature))


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_the_webcrypto_path_asks_then_uses_the_answer(
    alg: str,
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = make_provider("/wc", keys=(alg,))
    proc = make_processor({"acme": issuer_record(provider)})
    monkeypatch.setattr(signatures, "verifier", lambda: "webcrypto")
    good, tampered = provider.token(), provider.token()
    tampered = tampered[:-6] + ("AAAAAA" if not tampered.endswith("AAAAAA") else "BBBBBB")

    # outside polang.wasm's driver there is no table: dropped, naming the environment
    out = proc.process([TokenInput(ACCESS, good)])
    assert out.dropped[0].kind == "signature"
    assert "verifying a signature synchronously is not available" in out.dropped[0].message

    table: dict[bytes, bool] = {}
    answers: list[bool] = []
    for token in (good, tampered):
        with verified_results(table), pytest.raises(VerifyNeeded) as asked:
            proc.process([TokenInput(ACCESS, token)])
        need = asked.value
        assert need.alg == alg
        # only the public members WebCrypto reads: no kid, alg or use that could clash
        assert set(need.jwk) <= {"kty", "n", "e", "crv", "x", "y"}
        assert need.signed == token.rpartition(".")[0].encode()
        table[need.digest] = _cryptography_answer(need)
        answers.append(table[need.digest])
        with verified_results(table):
            out = proc.process([TokenInput(ACCESS, token)])
        assert [d.kind for d in out.dropped] == ([] if token is good else ["signature"])
    assert answers == [True, False]


def test_webcrypto_keys_are_checked_when_the_jwks_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signatures, "verifier", lambda: "webcrypto")
    signatures.check_key({"kty": "RSA", "n": "AQAB", "e": "AQAB"})
    bad: list[dict[str, Any]] = [
        {"kty": "RSA", "e": "AQAB"},
        {"kty": "RSA", "n": "@@@", "e": "AQAB"},
        {"kty": "EC", "crv": "P-256", "x": "AQAB"},
        {"kty": "OKP", "crv": "Ed25519", "x": 7},
    ]
    for jwk in bad:
        with pytest.raises(ValueError):
            signatures.check_key(jwk)
