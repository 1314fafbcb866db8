"""Fixtures for token tests: a test CA, loopback OpenID providers, a fake clock."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polang.tokens import IssuerSettings, TokenProcessor, TokenSettings

from .oidc_server import OidcProvider


class FakeClock:
    """Seconds since the epoch, moved only by the test."""

    def __init__(self, start: float | None = None) -> None:
        self.now = float(int(start if start is not None else time.time()))

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_provider(
    server_ssl_context: ssl.SSLContext, clock: FakeClock
) -> Iterator[Callable[..., OidcProvider]]:
    """Start providers on demand (each with an RSA key unless ``keys`` says otherwise)."""
    started: list[OidcProvider] = []

    def make(prefix: str = "", keys: tuple[str, ...] = ("RS256",), **kw: Any) -> OidcProvider:
        p = OidcProvider(server_ssl_context, prefix=prefix, clock=clock, **kw)
        for alg in keys:
            p.add_key(alg)
        p.start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.fixture
def oidc(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    """One provider with an RSA, an EC and an EdDSA key (RSA signs by default)."""
    return make_provider("/realms/acme", keys=("RS256", "ES256", "EdDSA"))


def issuer_record(
    provider: OidcProvider, name: str = "Acme", **token_metadata: dict[str, Any]
) -> dict[str, Any]:
    """A trusted issuer JSON record for a provider (token metadata by token name)."""
    tm = token_metadata or {"access_token": {"entity_type_name": f"{name}::Access_token"}}
    return {
        "name": name,
        "description": "test issuer",
        "openid_configuration_endpoint": provider.discovery_url,
        "token_metadata": tm,
    }


@pytest.fixture
def make_processor(
    client_ssl_context: ssl.SSLContext, clock: FakeClock
) -> Iterator[Callable[..., TokenProcessor]]:
    made: list[TokenProcessor] = []

    def make(
        issuers: dict[str, dict[str, Any]], schema: Any = None, **settings: Any
    ) -> TokenProcessor:
        settings.setdefault("ssl_context", client_ssl_context)
        settings.setdefault("http_max_retries", 0)
        parsed = [IssuerSettings.from_dict(i, d) for i, d in issuers.items()]
        proc = TokenProcessor(parsed, TokenSettings(**settings), schema, clock=clock)
        made.append(proc)
        return proc

    yield make
    for p in made:
        p.close()
