"""Token status lists: the format, and checks against a real provider's list endpoint."""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polang.errors import TokenError
from polang.tokens import TokenInput, TokenProcessor
from polang.tokens.status_list import (
    StatusUnavailable,
    decode_status_list,
    status_reference,
)

from .conftest import FakeClock, issuer_record
from .oidc_server import OidcProvider, encode_status_list

MAPPING = "Acme::Access_token"

# ---------------------------------------------------------------- the format


def test_draft_example_one_bit() -> None:
    # draft-ietf-oauth-status-list, status list of 16 one-bit entries
    sl = decode_status_list({"bits": 1, "lst": "eNrbuRgAAhcBXQ"})
    assert [sl.status(i) for i in range(16)] == [1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1]


def test_draft_example_two_bits() -> None:
    sl = decode_status_list({"bits": 2, "lst": "eNo76fITAAPfAgc"})
    assert [sl.status(i) for i in range(12)] == [1, 2, 0, 3, 0, 1, 0, 1, 1, 2, 3, 3]


@given(
    st.sampled_from([1, 2, 4, 8]).flatmap(
        lambda bits: st.tuples(
            st.just(bits), st.lists(st.integers(0, (1 << bits) - 1), min_size=1, max_size=300)
        )
    )
)
def test_encode_decode_round_trip(case: tuple[int, list[int]]) -> None:
    bits, statuses = case
    sl = decode_status_list({"bits": bits, "lst": encode_status_list(statuses, bits)})
    assert [sl.status(i) for i in range(len(statuses))] == statuses


def _lst(data: bytes) -> str:
    return base64.urlsafe_b64encode(zlib.compress(data)).decode().rstrip("=")


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ("x", "not an object"),
        ({"bits": 3, "lst": _lst(b"\x00")}, "'bits'"),
        ({"bits": True, "lst": _lst(b"\x00")}, "'bits'"),
        ({"bits": 1}, "'lst'"),
        ({"bits": 1, "lst": "a+b/"}, "base64url"),
        ({"bits": 1, "lst": _lst(b"\x00") + "=="}, "base64url"),
        ({"bits": 1, "lst": "AAAA"}, "ZLIB"),
        ({"bits": 1, "lst": _lst(b"\x00" * 100)[:-4]}, "ZLIB"),
    ],
)
def test_malformed_lists(obj: object, fragment: str) -> None:
    with pytest.raises(StatusUnavailable, match=fragment):
        decode_status_list(obj)


def test_decompression_is_bounded() -> None:
    bomb = _lst(b"\x00" * 200_000)
    with pytest.raises(StatusUnavailable, match="allowed size"):
        decode_status_list({"bits": 1, "lst": bomb}, max_bytes=100_000)


def test_index_outside_the_list() -> None:
    sl = decode_status_list({"bits": 1, "lst": _lst(b"\x00")})
    assert sl.status(7) == 0
    with pytest.raises(StatusUnavailable, match="outside"):
        sl.status(8)


def test_status_reference() -> None:
    assert status_reference({}) is None
    assert status_reference({"status": {"status_list": {"idx": 3, "uri": "https://x/1"}}}) == (
        3,
        "https://x/1",
    )
    bads: list[dict[str, object]] = [
        {"status": "revoked"},
        {"status": {}},
        {"status": {"status_list": {"idx": -1, "uri": "https://x"}}},
        {"status": {"status_list": {"idx": True, "uri": "https://x"}}},
        {"status": {"status_list": {"idx": 1}}},
    ]
    for bad in bads:
        with pytest.raises(StatusUnavailable):
            status_reference(bad)


# ---------------------------------------------------------------- against the provider


def status_claim(uri: str, idx: int) -> dict[str, object]:
    return {"status_list": {"idx": idx, "uri": uri}}


def run(proc: TokenProcessor, token: str) -> tuple[str, str]:
    out = proc.process([TokenInput(MAPPING, token)])
    if out.dropped:
        return out.dropped[0].kind, out.dropped[0].message
    return "ok", ""


@pytest.fixture
def provider(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/realms/acme", keys=("ES256",))


@pytest.fixture
def proc(provider: OidcProvider, make_processor: Callable[..., TokenProcessor]) -> TokenProcessor:
    return make_processor({"acme": issuer_record(provider)}, token_cache_capacity=0)


def test_valid_revoked_and_suspended(provider: OidcProvider, proc: TokenProcessor) -> None:
    uri = provider.set_status_list("1", [0, 1, 2, 3], bits=2)
    assert run(proc, provider.token(status=status_claim(uri, 0)))[0] == "ok"
    kind, msg = run(proc, provider.token(status=status_claim(uri, 1)))
    assert kind == "revoked" and "INVALID" in msg
    kind, msg = run(proc, provider.token(status=status_claim(uri, 2)))
    assert kind == "revoked" and "SUSPENDED" in msg
    kind, msg = run(proc, provider.token(status=status_claim(uri, 3)))
    assert kind == "revoked" and "application-specific" in msg
    assert provider.requests[provider.status_path("1")] == 1  # one fetch, cached


def test_tokens_without_status_are_not_checked(
    provider: OidcProvider, proc: TokenProcessor
) -> None:
    assert run(proc, provider.token())[0] == "ok"
    assert sum(n for p, n in provider.requests.items() if "/status/" in p) == 0


def test_status_validation_can_be_disabled(
    provider: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": issuer_record(provider)}, status_validation=False)
    uri = provider.set_status_list("1", [1])
    assert run(proc, provider.token(status=status_claim(uri, 0)))[0] == "ok"
    assert provider.requests[provider.status_path("1")] == 0


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ({"signer": "stranger"}, "signature"),
        ({"typ": "JWT"}, "typ"),
        ({"sub": "https://elsewhere.example/1"}, "'sub'"),
        ({"exp_in": -10}, "expired"),
        ({"raw": "not a jwt"}, "invalid"),
        ({"fail": 500}, "unreachable"),
        ({"missing": True}, "unreachable"),
        ({"ttl": 10**400}, "'ttl'"),  # beyond any float
        ({"ttl": float("nan")}, "NaN"),  # a list that would never expire
        ({"ttl": float("inf")}, "Infinity"),
        ({"exp_in": 10**400}, "'exp'"),
    ],
)
def test_invalid_or_unreachable_lists_fail_closed(
    provider: OidcProvider, proc: TokenProcessor, setup: dict[str, object], fragment: str
) -> None:
    kw: dict[str, object] = {}
    if setup.get("signer") == "stranger":
        kw["signer"] = provider.add_key("ES256", kid=provider.keys[0].kid, slot=4, publish=False)
    for key in ("typ", "sub", "exp_in", "raw", "ttl"):
        if key in setup:
            kw[key] = setup[key]
    uri = provider.set_status_list("1", [0, 0], **kw)
    if "fail" in setup:
        provider.fail[provider.status_path("1")] = int(setup["fail"])  # type: ignore[call-overload]
    if setup.get("missing"):
        uri = provider.status_uri("nope")
    kind, msg = run(proc, provider.token(status=status_claim(uri, 0)))
    assert kind == "status_unavailable"
    assert fragment in msg


def test_index_beyond_the_list_fails_closed(provider: OidcProvider, proc: TokenProcessor) -> None:
    uri = provider.set_status_list("1", [0] * 8)
    kind, msg = run(proc, provider.token(status=status_claim(uri, 64)))
    assert kind == "status_unavailable" and "outside" in msg


def test_malformed_status_claim_fails_closed(provider: OidcProvider, proc: TokenProcessor) -> None:
    assert run(proc, provider.token(status={"status_list": {"idx": "x"}}))[0] == (
        "status_unavailable"
    )


def test_a_list_of_another_issuer_is_rejected(
    provider: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    proc: TokenProcessor,
) -> None:
    other = make_provider("/other", keys=("ES256",))
    other.keys[0].kid = provider.keys[0].kid  # same kid, different key
    uri = other.set_status_list("1", [0])
    kind, _ = run(proc, provider.token(status=status_claim(uri, 0)))
    assert kind == "status_unavailable"


def test_lists_are_cached_within_ttl(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    uri = provider.set_status_list("1", [0, 1], ttl=60)
    token = provider.token(status=status_claim(uri, 0))
    assert run(proc, token)[0] == "ok"
    clock.advance(59)
    assert run(proc, token)[0] == "ok"
    assert provider.requests[provider.status_path("1")] == 1
    provider.status_lists["1"].statuses = [1, 1]  # revoked after the first fetch
    clock.advance(2)
    assert run(proc, token)[0] == "revoked"
    assert provider.requests[provider.status_path("1")] == 2


def test_cache_is_capped_by_the_configured_maximum(
    provider: OidcProvider, make_processor: Callable[..., TokenProcessor], clock: FakeClock
) -> None:
    proc = make_processor(
        {"acme": issuer_record(provider)},
        token_cache_capacity=0,
        status_list_refresh_max=30,
    )
    uri = provider.set_status_list("1", [0], ttl=3600)
    token = provider.token(status=status_claim(uri, 0))
    assert run(proc, token)[0] == "ok"
    clock.advance(31)
    assert run(proc, token)[0] == "ok"
    assert provider.requests[provider.status_path("1")] == 2


def test_list_exp_limits_the_cache(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    uri = provider.set_status_list("1", [0], exp_in=20)
    token = provider.token(status=status_claim(uri, 0))
    assert run(proc, token)[0] == "ok"
    clock.advance(21)
    assert run(proc, token)[0] == "ok"
    assert provider.requests[provider.status_path("1")] == 2


def test_an_unreachable_list_is_retried_after_the_cooldown(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    uri = provider.set_status_list("1", [0])
    provider.fail[provider.status_path("1")] = 503
    token = provider.token(status=status_claim(uri, 0))
    assert run(proc, token)[0] == "status_unavailable"
    assert run(proc, token)[0] == "status_unavailable"
    assert provider.requests[provider.status_path("1")] == 1
    del provider.fail[provider.status_path("1")]
    clock.advance(31)
    assert run(proc, token)[0] == "ok"


def test_a_pushed_list_replaces_the_cached_one_at_once(
    provider: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    proc: TokenProcessor,
    clock: FakeClock,
) -> None:
    """A Lock server's STATUS_LIST event (docs/lock.md): the list is checked as a fetched
    one is, and then answers at once, without waiting for the cached one's ttl."""
    uri = provider.set_status_list("1", [0, 0], ttl=600)
    token = provider.token(status=status_claim(uri, 0))
    assert run(proc, token)[0] == "ok"
    provider.status_lists["1"].statuses = [1, 0]  # revoked: the Lock pushes the new list
    assert proc.push_status_list(provider.status_list_jwt("1")) == uri
    assert run(proc, token)[0] == "revoked"
    assert provider.requests[provider.status_path("1")] == 1  # nothing fetched again
    # what a fetched list must be, a pushed one must be too
    other = make_provider("/other", keys=("ES256",))
    other.keys[0].kid = provider.keys[0].kid  # same kid, another key
    forged_uri = other.set_status_list("1", [0, 0])
    other.status_lists["1"].sub = uri
    forged = other.status_list_jwt("1").split(".")
    honest = provider.status_list_jwt("1").split(".")
    for text, message in [
        (f"{honest[0]}.{honest[1]}.{forged[2]}", "signature"),
        (other.status_list_jwt("1"), "not a trusted issuer"),
        ("not-a-jwt", "not a JWT"),
    ]:
        with pytest.raises(TokenError, match=message):
            proc.push_status_list(text)
    assert forged_uri != uri
    assert run(proc, token)[0] == "revoked"  # the refused pushes changed nothing
