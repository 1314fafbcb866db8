"""polang.wasm and the WebAssembly switches, checked on CPython.

The real thing (Pyodide under Node.js, the runtime's fetch, WebCrypto) is
tests/wasm/test_pyodide.py. Here: what each part does with its environment switched to
WebAssembly (``polang.runtime.WASM`` patched where it is read), and WasmEngine's driver
(fetches and verifications asked for, done, and the code run again) with CPython's own
client and ``cryptography`` answering in the JavaScript runtime's place, against a real
loopback OpenID provider.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from tests.tokens.oidc_server import OidcProvider, body
from tests.tokens.test_engine_multi_issuer import (
    ACCESS,
    PARTNER,
    READ,
    SCHEMA,
    WRITE,
    doc,
    issuers_for,
    write_store,
)

from polang import http, wasm
from polang.config import Config
from polang.datalog import compiled
from polang.engine import Engine
from polang.errors import ConfigError, PolicyStoreError, TokenError
from polang.http import Fetcher, FetchError, FetchLimits, FetchNeeded, Response, held_responses
from polang.runtime import unavailable
from polang.store import refresh
from polang.store.source import PolicyStoreSource
from polang.store.tools import pack_store
from polang.tokens import TokenInput, signatures


def test_messages_name_the_environment_and_the_page() -> None:
    text = unavailable("X", "no Y", "use Z")
    assert text.startswith("X is not available in CPython on ")
    assert text.endswith("(no Y); use Z (docs/wasm.md)")


# ---------------------------------------------------------------- what each part does


def test_a_fetch_is_answered_from_the_table_or_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "WASM", True)
    fetcher = Fetcher(FetchLimits(timeout=3))
    url = "https://idp.example/jwks"
    with pytest.raises(FetchError, match=r"a synchronous fetch is not available in"):
        fetcher.get(url)  # the sync API: no sockets, said so
    table: dict[tuple[str, str], Response | FetchError] = {}
    with held_responses(table), pytest.raises(FetchNeeded) as asked:
        fetcher.get(url, accept="application/jwk-set+json")
    need = asked.value
    assert (need.url, need.accept, need.https_only, need.limits) == (
        url,
        "application/jwk-set+json",
        True,
        fetcher.limits,
    )
    answer = Response(url, url, 200, {}, b"{}")
    table[(url, "application/json")] = answer
    table[("https://idp.example/gone", "application/json")] = FetchError("gone", url=url)
    with held_responses(table):
        assert fetcher.get(url) is answer
        with pytest.raises(FetchError, match="gone"):
            fetcher.get("https://idp.example/gone")
        with pytest.raises(FetchError, match="only https"):
            fetcher.get("http://idp.example/jwks")  # the policy is checked first, as ever


def test_no_refresh_thread_in_webassembly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(refresh, "WASM", True)
    config = Config.from_dict(
        {"ENGINE_POLICY_STORE_URI": "https://s/x.parc", "ENGINE_POLICY_STORE_REFRESH_INTERVAL": 5}
    )
    refresher = refresh.StoreRefresher(PolicyStoreSource.url("https://s/x.parc"), config, print)
    with pytest.raises(
        ConfigError, match=r"ENGINE_POLICY_STORE_REFRESH_INTERVAL .* \(no threads\)"
    ):
        refresher.start()
    assert not refresher.running


def test_yaml_without_pyyaml_is_refused_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` raises ImportError
    with pytest.raises(PolicyStoreError, match=r"reading YAML is not available in .*use JSON"):
        PolicyStoreSource.inline("policies: {}\n").load()


def test_generated_code_is_made_inline_without_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "WASM", True)
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": "examples/stores/directory"})
    try:
        assert engine.authorizer.backend.wait_generated(0)  # done before the engine returned
        assert "polang-codegen" not in started
    finally:
        engine.close()


def test_redirects_follow_the_fetch_policy() -> None:
    target = wasm._redirect_target
    assert target("u", "https://a/x/y", "../z", 302, True, False) == "https://a/z"
    for location, https_only, headers, why in [
        ("http://a/z", False, False, "a downgrade from https"),
        ("http://a/z", True, False, "only https is fetched here"),
        ("file:///etc/passwd", False, False, "not http"),
        ("https://elsewhere/z", False, True, "credentials never leave"),
    ]:
        with pytest.raises(FetchError, match=why):
            target("u", "https://a/x", location, 302, https_only, headers)
    with pytest.raises(FetchError, match="without a Location header"):
        target("u", "https://a/x", None, 301, True, False)
    with pytest.raises(FetchError, match="a downgrade from https"):
        wasm._check_followed("https://a/x", "http://a/y", False)


def test_webcrypto_algorithms() -> None:
    params = wasm._webcrypto_params
    assert params("RS256", {}) == (
        {"name": "RSASSA-PKCS1-v1_5", "hash": "SHA-256"},
        {"name": "RSASSA-PKCS1-v1_5"},
    )
    assert params("PS384", {})[1] == {"name": "RSA-PSS", "saltLength": 48}
    assert params("ES512", {"crv": "P-521"})[0] == {"name": "ECDSA", "namedCurve": "P-521"}
    assert params("EdDSA", {"crv": "Ed25519"}) == ({"name": "Ed25519"}, {"name": "Ed25519"})
    assert params("HS512", {})[0] == {"name": "HMAC", "hash": "SHA-512"}
    for alg in ("none", "RS1", "XX256"):
        with pytest.raises(ValueError):
            params(alg, {})


def test_the_runtime_fetch_runs_only_under_pyodide() -> None:
    with pytest.raises(FetchError, match="runs only under Pyodide"):
        asyncio.run(wasm.fetch("https://a/", limits=FetchLimits()))


# ---------------------------------------------------------------- the driver


@pytest.fixture
def providers(server_ssl_context: ssl.SSLContext) -> Iterator[tuple[OidcProvider, OidcProvider]]:
    acme = OidcProvider(server_ssl_context, prefix="/realms/acme")
    acme.add_key("RS256")
    partner = OidcProvider(server_ssl_context, prefix="/partner")
    partner.add_key("ES256")
    acme.start()
    partner.start()
    yield acme, partner
    acme.stop()
    partner.stop()


@pytest.fixture
def as_if_wasm(
    monkeypatch: pytest.MonkeyPatch, client_ssl_context: ssl.SSLContext
) -> dict[str, int]:
    """WebAssembly's switches on; the runtime's fetch and WebCrypto answered by CPython."""
    calls = {"fetch": 0, "verify": 0}
    monkeypatch.setattr(http, "WASM", True)
    monkeypatch.setattr(signatures, "verifier", lambda: "webcrypto")

    async def fetch(url: str, *, limits: FetchLimits, **kw: Any) -> Response:
        calls["fetch"] += 1
        real = Fetcher(limits, client_ssl_context)
        monkeypatch.setattr(http, "WASM", False)  # this thread's fetch is CPython's
        try:
            kw.pop("headers", None)
            return real.get(url, **kw)
        finally:
            monkeypatch.setattr(http, "WASM", True)
            real.close()

    async def verify(need: signatures.VerifyNeeded) -> bool:
        calls["verify"] += 1
        key = jwt.PyJWK(need.jwk, algorithm=need.alg)
        return bool(
            jwt.get_algorithm_by_name(need.alg).verify(need.signed, key.key, need.signature)
        )

    monkeypatch.setattr(wasm, "fetch", fetch)
    monkeypatch.setattr(wasm, "webcrypto_verify", verify)
    return calls


def test_the_driver_fetches_verifies_and_decides(
    providers: tuple[OidcProvider, OidcProvider], as_if_wasm: dict[str, int], tmp_path: Path
) -> None:
    acme, partner = providers
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    pack_store(store, tmp_path / "docs.parc")
    acme.routes["/docs.parc"] = body((tmp_path / "docs.parc").read_bytes())
    config = {"ENGINE_HTTP_MAX_RETRIES": 0, "ENGINE_LOG_TYPE": "off"}
    status = {"status_list": {"idx": 1, "uri": acme.set_status_list("l", [0, 1])}}

    async def scenario() -> list[Any]:
        engine = await wasm.WasmEngine.create(
            {**config, "ENGINE_POLICY_STORE_URI": acme.url("/docs.parc")}
        )
        try:
            assert as_if_wasm["fetch"] == 1  # the store
            two = [
                TokenInput(ACCESS, acme.token(scope=["docs:read"])),
                TokenInput(PARTNER, partner.token(role=["editor"])),
            ]
            first = await engine.authorize_multi_issuer(two, WRITE, doc())
            steps = engine.steps
            again = await engine.authorize_multi_issuer(two, WRITE, doc())  # all held now
            revoked = [TokenInput(ACCESS, acme.token(scope=["docs:read"], status=status))]
            with pytest.raises(TokenError, match="revoked"):
                await engine.authorize_multi_issuer(revoked, READ, doc())
            return [first.decision, steps, again.decision, engine.steps - steps]
        finally:
            await engine.aclose()

    first, steps, again, more = asyncio.run(scenario())
    assert first is True and again is True
    # discovery and JWKS of two issuers, two signatures
    assert steps == 6
    # the revoked token: its signature, its status list and the list's signature
    assert more == 3 and as_if_wasm["verify"] == 4


def test_without_the_tables_nothing_waits(
    providers: tuple[OidcProvider, OidcProvider], as_if_wasm: dict[str, int], tmp_path: Path
) -> None:
    acme, partner = providers
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_LOG_TYPE": "off"})
    try:
        with pytest.raises(TokenError, match=r"a synchronous fetch is not available"):
            engine.authorize_multi_issuer(
                [TokenInput(ACCESS, acme.token(scope=["docs:read"]))], READ, doc()
            )
        with pytest.raises(PolicyStoreError, match=r"a synchronous fetch is not available"):
            Engine({"ENGINE_POLICY_STORE_URI": acme.url("/docs.parc")})
    finally:
        engine.close()
    assert as_if_wasm == {"fetch": 0, "verify": 0}


def test_hostile_tokens_end_in_the_family(
    providers: tuple[OidcProvider, OidcProvider], as_if_wasm: dict[str, int], tmp_path: Path
) -> None:
    acme, partner = providers
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    engine = wasm.WasmEngine(
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_LOG_TYPE": "off"})
    )
    header = base64.urlsafe_b64encode(json.dumps({"alg": "RS256", "kid": "x" * 50}).encode())
    forged = f"{header.decode().rstrip('=')}.{acme.token().split('.')[1]}.AAAA"
    many = [TokenInput(ACCESS, acme.token(kid=f"k{i}")) for i in range(20)]

    async def scenario() -> list[str]:
        out = []
        for tokens in ([TokenInput(ACCESS, forged)], many):
            try:
                await engine.authorize_multi_issuer(tokens, READ, doc())
                out.append("accepted")
            except TokenError as e:
                out.append(str(e)[:60])
        await engine.aclose()
        return out

    forged_out, many_out = asyncio.run(scenario())
    assert forged_out.startswith("no valid token left")
    assert many_out == "accepted" or many_out.startswith("no valid token left")
    assert engine.steps <= 2 * wasm.MAX_WASM_ROUNDS


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("MAX_WASM_ROUNDS", "this decision took MAX_WASM_ROUNDS (1) asynchronous steps"),
        ("MAX_FETCHES_PER_RUN", "it needed more than MAX_FETCHES_PER_RUN (1) fetches"),
    ],
)
def test_the_step_limits_name_themselves(
    limit: str,
    message: str,
    providers: tuple[OidcProvider, OidcProvider],
    as_if_wasm: dict[str, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acme, partner = providers
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    engine = wasm.WasmEngine(
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_LOG_TYPE": "off"})
    )
    monkeypatch.setattr(wasm, limit, 1)
    token = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]
    with pytest.raises(TokenError, match=re.escape(message)):
        asyncio.run(engine.authorize_multi_issuer(token, READ, doc()))
    asyncio.run(engine.aclose())
