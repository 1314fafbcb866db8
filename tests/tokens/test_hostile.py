"""Tokens from an attacker: every one ends as a dropped token with a reason, never a crash.

The engine reads a token's header and claims before it checks the signature (it needs
``iss`` and ``kid`` to find the key), so everything here is reachable by anyone who can
send a request: no key is needed to forge these tokens. Where a provider is involved it is
a real loopback HTTPS server (``oidc_server``) that counts the requests it gets.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, TokenError, TokenInput
from polang.config import Config
from polang.errors import ConfigError
from polang.tokens import TokenProcessor, TokenSettings
from polang.tokens.settings import DEFAULT_TOKEN_MAX_SIZE

from .oidc_server import OidcProvider
from .test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, issuers_for, write_store


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def forged(header: str | dict[str, Any], payload: str | dict[str, Any], sig: str = "c2ln") -> str:
    """A token with any header and payload text and a made-up signature."""
    h = header if isinstance(header, str) else json.dumps(header)
    p = payload if isinstance(payload, str) else json.dumps(payload)
    return f"{b64(h)}.{b64(p)}.{sig}"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def engine_for(
    tmp_path: Path,
    client_ssl_context: ssl.SSLContext,
    make_provider: Callable[..., OidcProvider],
) -> Iterator[Callable[..., tuple[Engine, OidcProvider]]]:
    """An engine over a store trusting two loopback providers (``acme`` and ``partner``)."""
    made: list[Engine] = []

    def make(**props: Any) -> tuple[Engine, OidcProvider]:
        acme = make_provider("/realms/acme", keys=("RS256",))
        partner = make_provider("/partner", keys=("EdDSA",))
        store = write_store(tmp_path / f"store{len(made)}", SCHEMA, issuers_for(acme, partner))
        cfg = {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            **props,
        }
        engine = Engine(cfg, ssl_context=client_ssl_context)
        made.append(engine)
        return engine, acme

    yield make
    for e in made:
        e.close()


def drop_reasons(engine: Engine, *tokens: str) -> list[tuple[str, str]]:
    """(kind, message) of each token, all of which must be dropped."""
    with pytest.raises(TokenError) as e:
        engine.authorize_multi_issuer([TokenInput(ACCESS, t) for t in tokens], READ, doc())
    return [(r["reason"]["kind"], r["reason"]["message"]) for r in e.value.reasons]


# ---------------------------------------------------------------- nesting and size


@pytest.mark.parametrize("part", ["header", "payload"])
def test_deeply_nested_token_json_is_a_drop_not_a_recursion_error(
    engine_for: Callable[..., tuple[Engine, OidcProvider]], part: str
) -> None:
    engine, acme = engine_for()
    deep = nested(2_000)
    if part == "header":
        tok = forged(f'{{"alg":"RS256","x":{deep}}}', {"iss": acme.issuer})
    else:
        tok = forged({"alg": "RS256"}, f'{{"iss":"{acme.issuer}","x":{deep}}}')
    [(kind, message)] = drop_reasons(engine, tok)
    assert kind == "invalid_input"
    assert f"the JWT {part}" in message
    assert "deeper than the limit of 128 levels" in message
    assert sum(acme.requests.values()) == 0  # refused before anything was fetched


def test_a_token_nested_120000_deep_is_refused_by_size_then_by_depth(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    tok = forged({"alg": "RS256"}, nested(120_000))  # 320 KB: once a segfault
    engine, _ = engine_for()
    [(kind, message)] = drop_reasons(engine, tok)
    assert kind == "invalid_input"
    assert f"more than ENGINE_TOKEN_MAX_SIZE ({DEFAULT_TOKEN_MAX_SIZE})" in message
    assert len(message) < 200  # the token itself is never echoed
    # with the size limit raised, the nesting limit still holds
    roomy, _ = engine_for(ENGINE_TOKEN_MAX_SIZE=1_000_000)
    [(kind, message)] = drop_reasons(roomy, tok)
    assert (kind, "deeper than the limit of 128 levels" in message) == ("invalid_input", True)


def test_token_size_limit_is_checked_before_decoding(
    make_processor: Callable[..., TokenProcessor],
) -> None:
    proc = make_processor({}, token_max_size=100)
    # not even valid base64: the size is what is reported, so nothing was decoded
    out = proc.process([{"mapping": ACCESS, "payload": "!" * 101}])
    [d] = out.dropped
    assert d.kind == "invalid_input"
    assert d.message == "the token is 101 characters long, more than ENGINE_TOKEN_MAX_SIZE (100)"
    out = proc.process([{"mapping": ACCESS, "payload": "!" * 100}])
    assert "ENGINE_TOKEN_MAX_SIZE" not in out.dropped[0].message
    out = proc.process([{"mapping": ACCESS, "payload": "é.é.é"}])
    assert out.dropped[0].message == "the token is not ASCII (not a compact JWT)"


def test_token_max_size_property() -> None:
    assert Config().token_max_size == DEFAULT_TOKEN_MAX_SIZE == 65536
    assert Config.from_dict({"ENGINE_TOKEN_MAX_SIZE": "8192"}).token_max_size == 8192
    for bad in (0, -1, "big", 1.5):
        with pytest.raises(ConfigError, match="ENGINE_TOKEN_MAX_SIZE"):
            Config.from_dict({"ENGINE_TOKEN_MAX_SIZE": bad})
    assert TokenSettings.from_properties({"ENGINE_TOKEN_MAX_SIZE": 10}).token_max_size == 10
    with pytest.raises(ConfigError, match="ENGINE_TOKEN_MAX_SIZE"):
        TokenSettings(token_max_size=0)


def test_a_huge_mapping_is_not_echoed_whole(make_processor: Callable[..., TokenProcessor]) -> None:
    proc = make_processor({})
    out = proc.process([{"mapping": "x" * 100_000, "payload": "a.b.c"}])
    assert out.dropped[0].kind == "invalid_input"
    assert len(out.dropped[0].message) < 300
