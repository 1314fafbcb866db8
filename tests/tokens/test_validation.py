"""JWT validation against a real OpenID provider on loopback HTTPS."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polang.errors import ConfigError
from polang.tokens import TokenInput, TokenProcessor
from polang.tokens.issuers import normalize_issuer

from .conftest import FakeClock, issuer_record
from .oidc_server import OidcProvider, hs256_with_public_key, unsigned_token

MAPPING = "Acme::Access_token"


def one(proc: TokenProcessor, token: str, mapping: str = MAPPING) -> Any:
    """Process a single token: the kept token, or the drop."""
    out = proc.process([TokenInput(mapping, token)])
    if out.tokens:
        assert not out.dropped
        return out.tokens[0]
    assert len(out.dropped) == 1
    return out.dropped[0]


def kind(proc: TokenProcessor, token: str, mapping: str = MAPPING) -> str:
    r = one(proc, token, mapping)
    return getattr(r, "kind", "ok")


@pytest.fixture
def proc(oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]) -> TokenProcessor:
    return make_processor({"acme": issuer_record(oidc)})


# ---------------------------------------------------------------- good tokens


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_tokens_signed_with_rsa_ec_and_eddsa_keys_are_accepted(
    oidc: OidcProvider, proc: TokenProcessor, alg: str
) -> None:
    key = next(k for k in oidc.keys if k.alg == alg)
    tok = one(proc, oidc.token(key=key, jti="t-1"))
    assert getattr(tok, "kind", None) is None, tok
    assert tok.verified
    assert tok.issuer_id == "acme"
    assert tok.entity.uid.type == MAPPING and tok.entity.uid.id == "t-1"


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256", "PS512", "ES384", "ES512"])
def test_other_asymmetric_algorithms(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    alg: str,
) -> None:
    p = make_provider(keys=(alg,))
    proc = make_processor({"acme": issuer_record(p)})
    assert kind(proc, p.token()) == "ok"


def test_key_without_kid_is_found_by_algorithm(oidc: OidcProvider, proc: TokenProcessor) -> None:
    key = oidc.keys[1]  # ES256
    claims = oidc.claims()
    import jwt as pyjwt

    token = pyjwt.encode(claims, key.key, algorithm="ES256")  # no kid header
    assert kind(proc, token) == "ok"


def test_issuer_matching_ignores_trailing_slash_and_host_case(
    oidc: OidcProvider, proc: TokenProcessor
) -> None:
    upper = oidc.issuer.replace("https://localhost", "HTTPS://LocalHost") + "/"
    assert kind(proc, oidc.token(iss=upper)) == "ok"
    assert normalize_issuer("https://Ex.COM/a/") == normalize_issuer("https://ex.com/a")
    assert normalize_issuer("https://ex.com/A") != normalize_issuer("https://ex.com/a")


def test_aud_may_be_a_string_or_an_array(oidc: OidcProvider, proc: TokenProcessor) -> None:
    assert kind(proc, oidc.token(aud="x")) == "ok"
    tok = one(proc, oidc.token(aud=["x", "y"]))
    assert sorted(tok.entity.tags["aud"]) == ["x", "y"]


# ---------------------------------------------------------------- signatures


def test_forged_signature_is_dropped(oidc: OidcProvider, proc: TokenProcessor) -> None:
    token = oidc.token()
    head, body, sig = token.split(".")
    claims = json.loads(_b64d(body))
    claims["sub"] = "admin"
    forged = f"{head}.{_b64e(json.dumps(claims).encode())}.{sig}"
    r = one(proc, forged)
    assert r.kind == "signature"


def test_token_signed_by_an_unknown_key_with_a_known_kid_is_dropped(
    oidc: OidcProvider, proc: TokenProcessor
) -> None:
    attacker = oidc.add_key("RS256", kid=oidc.keys[0].kid, slot=7, publish=False)
    r = one(proc, oidc.token(key=attacker))
    assert r.kind == "signature"


def test_alg_confusion_hs256_with_the_rsa_public_key_is_rejected(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    forged = hs256_with_public_key(oidc.keys[0], oidc.claims())
    default = make_processor({"acme": issuer_record(oidc)})
    r = one(default, forged)
    assert r.kind == "signature" and "not allowed" in r.message
    # even with HS256 allowed, an RSA key never verifies an HMAC signature
    lax = make_processor(
        {"acme": issuer_record(oidc)}, algorithms=("RS256", "ES256", "EdDSA", "HS256")
    )
    r = one(lax, forged)
    assert r.kind == "signature" and "no HS256 key" in r.message


def test_alg_none_is_never_accepted(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    for alg in ("none", "None", "NONE"):
        token = unsigned_token(oidc.claims(), alg=alg)
        proc = make_processor({"acme": issuer_record(oidc)})
        assert kind(proc, token) == "signature"
        off = make_processor({"acme": issuer_record(oidc)}, sig_validation=False)
        assert kind(off, token) == "signature"


def test_algorithm_must_be_on_the_allow_list(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": issuer_record(oidc)}, algorithms=("ES256",))
    r = one(proc, oidc.token())  # RS256
    assert r.kind == "signature" and "RS256" in r.message
    assert kind(proc, oidc.token(key=oidc.keys[1])) == "ok"


def test_alg_must_match_the_key_type(oidc: OidcProvider, proc: TokenProcessor) -> None:
    # an RS256 token whose kid names the EC key: the EC key cannot verify RS256
    token = oidc.keys[0].sign(oidc.claims(), {"kid": oidc.keys[1].kid})
    r = one(proc, token)
    assert r.kind == "signature"


def test_header_key_urls_are_never_followed(oidc: OidcProvider, proc: TokenProcessor) -> None:
    attacker = oidc.add_key("RS256", kid="evil", slot=3, publish=False)
    evil_jwks = f"{oidc.base}/evil-jwks"
    token = attacker.sign(
        oidc.claims(), {"jku": evil_jwks, "x5u": f"{oidc.base}/evil-x5u", "jwk": attacker.jwk}
    )
    r = one(proc, token)
    assert r.kind == "signature"
    assert oidc.requests["/evil-jwks"] == 0
    assert oidc.requests["/evil-x5u"] == 0


# ---------------------------------------------------------------- times


def test_expired_token(oidc: OidcProvider, proc: TokenProcessor, clock: FakeClock) -> None:
    r = one(proc, oidc.token(exp=int(clock.now) - 1))
    assert r.kind == "expired"
    r = one(proc, oidc.token(exp=int(clock.now)))
    assert r.kind == "expired"  # exp is the first instant the token is no longer valid


def test_not_yet_valid_token(oidc: OidcProvider, proc: TokenProcessor, clock: FakeClock) -> None:
    assert kind(proc, oidc.token(nbf=int(clock.now) + 30)) == "not_yet_valid"
    assert kind(proc, oidc.token(iat=int(clock.now) + 30)) == "not_yet_valid"
    assert kind(proc, oidc.token(nbf=int(clock.now))) == "ok"


def test_clock_skew_gives_leeway(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor], clock: FakeClock
) -> None:
    proc = make_processor({"acme": issuer_record(oidc)}, clock_skew=60)
    assert kind(proc, oidc.token(exp=int(clock.now) - 30)) == "ok"
    assert kind(proc, oidc.token(nbf=int(clock.now) + 30)) == "ok"
    assert kind(proc, oidc.token(exp=int(clock.now) - 61)) == "expired"
    assert kind(proc, oidc.token(nbf=int(clock.now) + 61)) == "not_yet_valid"


def test_non_numeric_times_are_invalid(oidc: OidcProvider, proc: TokenProcessor) -> None:
    assert kind(proc, oidc.token(exp="tomorrow")) == "invalid_input"
    assert kind(proc, oidc.token(nbf=True)) == "invalid_input"


# ---------------------------------------------------------------- issuers


def test_wrong_issuer_is_untrusted(oidc: OidcProvider, proc: TokenProcessor) -> None:
    r = one(proc, oidc.token(iss="https://evil.example.com/realms/acme"))
    assert r.kind == "untrusted_issuer" and "evil.example.com" in r.message
    assert kind(proc, oidc.token(iss=None)) == "untrusted_issuer"
    assert kind(proc, oidc.token(iss=42)) == "invalid_input"


def test_token_of_another_provider_signed_with_its_keys_is_rejected(
    oidc: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    proc: TokenProcessor,
) -> None:
    other = make_provider("/other")
    # claims to come from the trusted issuer but is signed by the other provider's key
    token = other.keys[0].sign(oidc.claims(), {"kid": "someone-else"})
    assert kind(proc, token) == "signature"


def test_discovery_issuer_must_match_its_endpoint(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    p = make_provider("/realms/x", discovery_issuer="https://elsewhere.example.com/realms/x")
    proc = make_processor({"x": issuer_record(p, name="X")})
    r = one(proc, p.token(), mapping="X::Access_token")
    assert r.kind == "untrusted_issuer" and "4.3" in r.message


def test_mapping_selects_the_token_metadata(oidc: OidcProvider, proc: TokenProcessor) -> None:
    r = one(proc, oidc.token(), mapping="Acme::Id_token")
    assert r.kind == "untrusted_issuer" and "Acme::Id_token" in r.message


def test_untrusted_token_type_is_ignored(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    rec = issuer_record(
        oidc,
        access_token={"entity_type_name": MAPPING, "trusted": False},
        id_token={"entity_type_name": "Acme::Id_token"},
    )
    proc = make_processor({"acme": rec})
    r = one(proc, oidc.token())
    assert r.kind == "untrusted_issuer" and "trusted: false" in r.message
    assert kind(proc, oidc.token(), mapping="Acme::Id_token") == "ok"


def test_two_issuers_are_kept_apart(
    oidc: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    other = make_provider("/realms/globex", keys=("ES384",))
    proc = make_processor(
        {"acme": issuer_record(oidc), "globex": issuer_record(other, name="Globex")}
    )
    out = proc.process(
        [
            TokenInput(MAPPING, oidc.token()),
            TokenInput("Globex::Access_token", other.token()),
            TokenInput("Globex::Access_token", oidc.token()),  # acme has no such type
        ]
    )
    assert [t.issuer_id for t in out.tokens] == ["acme", "globex"]
    assert [(d.index, d.kind) for d in out.dropped] == [(2, "untrusted_issuer")]


# ---------------------------------------------------------------- claims


def test_required_claims(oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]) -> None:
    rec = issuer_record(
        oidc,
        access_token={
            "entity_type_name": MAPPING,
            "required_claims": ["sub", "scope", "exp", "aud"],
        },
    )
    proc = make_processor({"acme": rec})
    r = one(proc, oidc.token(scope=None))
    assert r.kind == "missing_claim" and "'scope'" in r.message
    assert kind(proc, oidc.token(scope="read", exp=None)) == "missing_claim"
    assert kind(proc, oidc.token(scope="read")) == "ok"
    # registered claims among the required ones are validated (RFC 7519 4.1)
    assert kind(proc, oidc.token(scope="read", sub=7)) == "invalid_input"
    assert kind(proc, oidc.token(scope="read", aud=[1])) == "invalid_input"
    assert kind(proc, oidc.token(scope="read", aud=[])) == "invalid_input"


def test_token_id_claim_is_needed(oidc: OidcProvider, proc: TokenProcessor) -> None:
    r = one(proc, oidc.token(jti=None))
    assert r.kind == "missing_claim" and "token_id" in r.message
    assert kind(proc, oidc.token(jti={"a": 1})) == "entity_build_failed"


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    "payload",
    ["", "abc", "a.b", "a.b.c", "!!!.e30.x", "e30.W10.x", "a.b.c.d.e"],
)
def test_malformed_tokens_are_invalid_input(proc: TokenProcessor, payload: str) -> None:
    assert kind(proc, payload) == "invalid_input"


def test_malformed_inputs_are_dropped_not_raised(proc: TokenProcessor) -> None:
    out = proc.process(
        [
            TokenInput("not a type", "x.y.z"),
            {"mapping": MAPPING},
            {"payload": "x"},
            42,
            TokenInput(MAPPING + "\n", "x.y.z"),  # a name, then a line end
            TokenInput("A::", "x.y.z"),
        ]
    )
    assert [d.kind for d in out.dropped] == ["invalid_input"] * 6
    assert [d.index for d in out.dropped] == [0, 1, 2, 3, 4, 5]
    assert "'mapping' must be an entity type name" in out.dropped[4].message


def test_messages_never_contain_the_token(oidc: OidcProvider, proc: TokenProcessor) -> None:
    token = oidc.token(exp=1)
    r = one(proc, token)
    assert token not in r.message and token.split(".")[2] not in r.message


# ---------------------------------------------------------------- signature validation off


def test_disabled_signature_validation(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor], clock: FakeClock
) -> None:
    proc = make_processor({"acme": issuer_record(oidc)}, sig_validation=False)
    forged = oidc.add_key("RS256", kid="whatever", slot=5, publish=False)
    tok = one(proc, oidc.token(key=forged))
    assert not tok.verified
    assert "iss" not in tok.entity.attrs
    assert tok.entity.attrs["token_type"] == MAPPING
    assert oidc.requests[oidc.jwks_path] == 0  # nothing fetched
    assert kind(proc, oidc.token(key=forged, exp=int(clock.now) - 5)) == "expired"
    assert kind(proc, oidc.token(key=forged, nbf=int(clock.now) + 50)) == "not_yet_valid"
    # an unknown iss: the mapping names the issuer; the context key uses the iss host
    tok = one(proc, oidc.token(key=forged, iss="https://Other.Example.org/x"))
    assert tok.context_key == "other_example_org_access_token"


# ---------------------------------------------------------------- local JWKS


def test_local_jwks_needs_no_network(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor], tmp_path: Path
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"acme": [oidc.keys[0].jwk, oidc.keys[2].jwk]}))
    proc = make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(path))
    oidc.stop()  # the provider is gone: only the local keys can help
    assert kind(proc, oidc.token()) == "ok"
    assert kind(proc, oidc.token(key=oidc.keys[2])) == "ok"
    assert kind(proc, oidc.token(key=oidc.keys[1])) == "signature"  # EC key not listed


def test_local_jwks_errors_name_the_file(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor], tmp_path: Path
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"nobody": []}))
    with pytest.raises(ConfigError, match="nobody"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(path))
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"jwks\.json"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(path))
    path.write_text(json.dumps({"acme": [{"kty": "RSA", "n": "zz", "e": "AQAB"}]}))
    with pytest.raises(ConfigError, match=r"keys\[0\]"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(tmp_path / "nope"))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    with pytest.raises(ConfigError, match="FIFO"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path=str(fifo))
    with pytest.raises(ConfigError, match="null byte"):
        make_processor({"acme": issuer_record(oidc)}, local_jwks_path="a\x00b")


# ---------------------------------------------------------------- TLS trust


def test_ssl_cert_file_is_honoured(
    oidc: OidcProvider,
    make_processor: Callable[..., TokenProcessor],
    ca_pem_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem_file))
    proc = make_processor({"acme": issuer_record(oidc)}, ssl_context=None)
    assert kind(proc, oidc.token()) == "ok"


def test_a_provider_with_an_untrusted_certificate_is_not_used(
    oidc: OidcProvider,
    make_processor: Callable[..., TokenProcessor],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    proc = make_processor({"acme": issuer_record(oidc)}, ssl_context=None)
    r = one(proc, oidc.token())
    assert r.kind == "signature" and "TLS" in r.message


def _b64d(s: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def _b64e(b: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(b).decode().rstrip("=")
