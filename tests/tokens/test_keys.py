"""Discovery and JWKS caching: rotation, cooldown, Cache-Control, failures (requests counted)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from polang.http import cache_control_max_age
from polang.tokens import TokenInput, TokenProcessor
from polang.tokens.issuers import issuer_from_endpoint

from .conftest import FakeClock, issuer_record
from .oidc_server import OidcProvider

MAPPING = "Acme::Access_token"


def run(proc: TokenProcessor, token: str) -> str:
    out = proc.process([TokenInput(MAPPING, token)])
    return out.dropped[0].kind if out.dropped else "ok"


@pytest.fixture
def provider(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/realms/acme", keys=("RS256",))


@pytest.fixture
def proc(provider: OidcProvider, make_processor: Callable[..., TokenProcessor]) -> TokenProcessor:
    # the token cache is off so every token reaches the key lookup
    return make_processor({"acme": issuer_record(provider)}, token_cache_capacity=0)


def test_keys_are_fetched_once_and_reused(provider: OidcProvider, proc: TokenProcessor) -> None:
    for _ in range(5):
        assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.discovery_path] == 1
    assert provider.requests[provider.jwks_path] == 1


def test_key_rotation_refetches_once_for_a_new_kid(
    provider: OidcProvider, proc: TokenProcessor
) -> None:
    assert run(proc, provider.token()) == "ok"
    new = provider.add_key("ES256", kid="rotated")
    provider.remove_key("rs256-0")
    assert run(proc, provider.token(key=new)) == "ok"
    assert provider.requests[provider.jwks_path] == 2
    assert run(proc, provider.token(key=new)) == "ok"
    assert provider.requests[provider.jwks_path] == 2


def test_unknown_kid_refetches_at_most_once_per_cooldown(
    provider: OidcProvider,
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    proc = make_processor(
        {"acme": issuer_record(provider)}, token_cache_capacity=0, jwks_min_refresh_interval=30
    )
    assert run(proc, provider.token()) == "ok"
    stranger = provider.add_key("RS256", kid="unknown", slot=2, publish=False)
    clock.advance(31)
    for _ in range(4):
        assert run(proc, provider.token(key=stranger)) == "signature"
    assert provider.requests[provider.jwks_path] == 2  # one refetch, not four
    clock.advance(31)
    assert run(proc, provider.token(key=stranger)) == "signature"
    assert provider.requests[provider.jwks_path] == 3
    # a rotation seen within the cooldown is picked up once it has passed
    provider.keys.append(stranger)
    assert run(proc, provider.token(key=stranger)) == "signature"
    clock.advance(31)
    assert run(proc, provider.token(key=stranger)) == "ok"
    assert provider.requests[provider.jwks_path] == 4


def test_cache_control_max_age_sets_the_refresh(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    p = make_provider("/cc", jwks_cache_control="public, max-age=120")
    proc = make_processor({"acme": issuer_record(p)}, token_cache_capacity=0)
    assert run(proc, p.token()) == "ok"
    clock.advance(100)
    assert run(proc, p.token()) == "ok"
    assert p.requests[p.jwks_path] == 1
    clock.advance(30)
    assert run(proc, p.token()) == "ok"
    assert p.requests[p.jwks_path] == 2


def test_without_cache_control_the_default_interval_applies(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    assert run(proc, provider.token()) == "ok"
    clock.advance(3599)
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 1
    clock.advance(2)
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 2


def test_configured_refresh_interval_applies_without_cache_control(
    provider: OidcProvider,
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    proc = make_processor(
        {"acme": issuer_record(provider)}, token_cache_capacity=0, jwks_refresh_interval=600
    )
    assert run(proc, provider.token()) == "ok"
    clock.advance(599)
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 1
    clock.advance(2)
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 2


def test_cache_control_wins_over_the_configured_interval(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    p = make_provider("/cfg", jwks_cache_control="max-age=60")
    proc = make_processor(
        {"acme": issuer_record(p)}, token_cache_capacity=0, jwks_refresh_interval=600
    )
    assert run(proc, p.token()) == "ok"
    clock.advance(61)
    assert run(proc, p.token()) == "ok"
    assert p.requests[p.jwks_path] == 2


def test_no_store_refetches_at_most_once_per_cooldown(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    p = make_provider("/ns", jwks_cache_control="no-store")
    proc = make_processor({"acme": issuer_record(p)}, token_cache_capacity=0)
    for _ in range(3):
        assert run(proc, p.token()) == "ok"
    assert p.requests[p.jwks_path] == 1
    clock.advance(30)
    assert run(proc, p.token()) == "ok"
    assert p.requests[p.jwks_path] == 2


def test_a_failed_refresh_keeps_the_last_good_keys(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    assert run(proc, provider.token()) == "ok"
    provider.fail[provider.jwks_path] = 500
    clock.advance(4000)  # keys expired: a refresh is attempted and fails
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 2


def test_unreachable_jwks_drops_the_token(
    provider: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    provider.fail[provider.jwks_path] = 503
    out = proc.process([TokenInput(MAPPING, provider.token())])
    d = out.dropped[0]
    assert d.kind == "signature" and "JWKS" in d.message and "503" in d.message
    # no hammering: within the cooldown the failure is remembered
    assert run(proc, provider.token()) == "signature"
    assert provider.requests[provider.jwks_path] == 1
    del provider.fail[provider.jwks_path]
    clock.advance(31)
    assert run(proc, provider.token()) == "ok"


def test_a_stopped_provider_is_unreachable(provider: OidcProvider, proc: TokenProcessor) -> None:
    provider.stop()
    out = proc.process([TokenInput(MAPPING, provider.token())])
    d = out.dropped[0]
    assert d.kind == "signature" and "discovery failed" in d.message


def test_retries_recover_from_a_transient_failure(
    provider: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": issuer_record(provider)}, http_max_retries=2)
    calls = {"n": 0}
    original = provider._handle

    def flaky(h):  # type: ignore[no-untyped-def]
        if h.path == provider.jwks_path and calls["n"] == 0:
            calls["n"] += 1
            provider.requests[h.path] += 1
            provider._send(h, 502, b"bad gateway", "text/plain")
            return
        original(h)

    provider._handle = flaky  # type: ignore[method-assign]
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 2


def test_responses_over_the_size_limit_are_refused(
    provider: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": issuer_record(provider)}, http_max_response_size=64)
    out = proc.process([TokenInput(MAPPING, provider.token())])
    assert out.dropped[0].kind == "signature"
    assert "more than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (64)" in out.dropped[0].message


def test_prefetch_warms_up_every_issuer(
    provider: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    broken = make_provider("/broken")
    broken.fail[broken.discovery_path] = 404
    proc = make_processor({"acme": issuer_record(provider), "b": issuer_record(broken, name="B")})
    result = proc.prefetch()
    assert result["acme"] is None
    assert result["b"] is not None and "404" in result["b"]
    assert provider.requests[provider.jwks_path] == 1
    assert run(proc, provider.token()) == "ok"
    assert provider.requests[provider.jwks_path] == 1


def test_endpoint_without_the_well_known_suffix_is_discovered_before_matching(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    p = make_provider("/tenant")
    rec = issuer_record(p)
    rec["openid_configuration_endpoint"] = p.discovery_url  # standard form first
    assert issuer_from_endpoint(p.discovery_url) == p.issuer
    rec["openid_configuration_endpoint"] = p.discovery_url + "?x=1"  # not the standard form
    assert issuer_from_endpoint(rec["openid_configuration_endpoint"]) is None
    proc = make_processor({"acme": rec})
    assert run(proc, p.token()) == "ok"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("max-age=60", 60),
        ("public, max-age=300, must-revalidate", 300),
        ('max-age="30"', 30),
        ("no-store", 0),
        ("no-cache, max-age=60", 0),
        ("public", None),
        ("max-age=abc", None),
    ],
)
def test_cache_control_parsing(header: str, expected: int | None) -> None:
    assert cache_control_max_age({"cache-control": header}) == expected
    assert cache_control_max_age({}) is None
