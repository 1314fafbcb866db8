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
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang import Engine, TokenError, TokenInput
from polang.config import Config
from polang.errors import MAX_MESSAGE_CHARS, ConfigError
from polang.language.values import RecordValue, SetValue
from polang.store import PolicyStoreLoadError
from polang.tokens import DROP_KINDS, TokenProcessor, TokenSettings
from polang.tokens.claim_regex import MAX_MAPPED_CLAIM_CHARS
from polang.tokens.model import MAX_DROP_MESSAGE
from polang.tokens.settings import DEFAULT_TOKEN_MAX_SIZE
from tokens.conftest import issuer_record
from tokens.oidc_server import OidcProvider, blocked, body, drip, redirect
from tokens.test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, issuers_for, write_store


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


# ---------------------------------------------------------------- request amplification


def one(proc: TokenProcessor, token: str, mapping: str = ACCESS) -> tuple[str, str]:
    out = proc.process([TokenInput(mapping, token)])
    return (out.dropped[0].kind, out.dropped[0].message) if out.dropped else ("ok", "")


def non_well_known(provider: OidcProvider, name: str = "Acme") -> dict[str, Any]:
    """An issuer record whose endpoint does not say the issuer: it must be discovered."""
    provider.routes["/discovery"] = provider.serve_discovery
    return {
        "name": name,
        "openid_configuration_endpoint": provider.url("/discovery"),
        "token_metadata": {"access_token": {"entity_type_name": f"{name}::Access_token"}},
    }


def test_forged_tokens_with_random_iss_cause_no_fetch(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    known = make_provider("/realms/acme")
    hidden = make_provider("/hidden")
    proc = make_processor(
        {"acme": issuer_record(known), "hidden": non_well_known(hidden, "Hidden")},
        token_cache_capacity=0,
    )
    for i in range(50):
        tok = forged({"alg": "RS256", "kid": f"k{i}"}, {"iss": f"https://evil{i}.example/x"})
        assert one(proc, tok)[0] == "untrusted_issuer"
    assert sum(known.requests.values()) == 0
    assert sum(hidden.requests.values()) == 0


def test_discovery_of_an_unknown_identity_is_cooled_down(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    clock: Any,
) -> None:
    p = make_provider("/hidden")
    record = non_well_known(p)
    p.fail["/discovery"] = 500  # the provider is down
    proc = make_processor({"acme": record}, token_cache_capacity=0)
    for i in range(50):  # an iss on the endpoint's host, with random paths
        tok = forged({"alg": "RS256"}, {"iss": f"{p.base}/random{i}", "jti": "j"})
        assert one(proc, tok)[0] == "untrusted_issuer"
    assert p.requests["/discovery"] == 1  # then ENGINE_JWKS_MIN_REFRESH_INTERVAL (30 s)
    clock.advance(31)
    del p.fail["/discovery"]
    assert one(proc, p.token(iss=p.issuer, jti="ok"))[0] == "ok"
    assert p.requests["/discovery"] == 2
    for i in range(20):  # known now: no more discovery for anyone
        one(proc, forged({"alg": "RS256"}, {"iss": f"{p.base}/again{i}"}))
    assert p.requests["/discovery"] == 2


def test_unknown_kids_cause_at_most_one_refetch(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)}, token_cache_capacity=0)
    for i in range(50):
        tok = forged({"alg": "RS256", "kid": f"random-{i}"}, {"iss": p.issuer, "jti": "x"})
        assert one(proc, tok)[0] == "signature"
    assert p.requests[p.discovery_path] == 1
    # the first fetch, then one refetch for an unknown kid (a rotation?), then the
    # ENGINE_JWKS_MIN_REFRESH_INTERVAL cooldown (30 s) for the other 48
    assert p.requests[p.jwks_path] == 2
    assert one(proc, p.token())[0] == "ok"  # real tokens are still fine
    assert p.requests[p.jwks_path] == 2


def test_unverified_tokens_cannot_multiply_status_list_fetches(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)}, sig_validation=False, token_cache_capacity=0)
    for i in range(50):
        claims = p.claims(status={"status_list": {"idx": 0, "uri": p.status_uri(f"r{i}")}})
        assert one(proc, forged({"alg": "RS256"}, claims))[0] == "status_unavailable"
    fetched = sum(n for path, n in p.requests.items() if "/status/" in path)
    assert fetched == 1


# ---------------------------------------------------------------- no lock across the network


def test_a_known_key_never_waits_for_a_refetch(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)}, token_cache_capacity=0, http_timeout=20)
    assert one(proc, p.token())[0] == "ok"  # keys known
    release, entered = threading.Event(), threading.Event()
    p.routes[p.jwks_path] = blocked(release, p.serve, entered)  # a slow JWKS from now on
    stranger = p.add_key("RS256", kid="made-up", slot=2, publish=False)
    results: dict[str, str] = {}
    attacker = threading.Thread(
        target=lambda: results.update(attacker=one(proc, p.token(key=stranger))[0])
    )
    good_done = threading.Event()

    def good() -> None:
        results["good"] = one(proc, p.token())[0]
        good_done.set()

    try:
        attacker.start()
        assert entered.wait(10)  # the unknown kid's refetch is now stuck on the JWKS
        threading.Thread(target=good).start()
        assert good_done.wait(10), "a token with a known kid waited for the refetch"
        assert not release.is_set() and attacker.is_alive()
        assert results["good"] == "ok"
    finally:
        release.set()
        attacker.join(10)
    assert results["attacker"] == "signature"


def test_stale_keys_serve_while_another_thread_refreshes(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    clock: Any,
) -> None:
    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)}, token_cache_capacity=0, http_timeout=20)
    assert one(proc, p.token())[0] == "ok"
    clock.advance(4000)  # past the JWKS lifetime: the next token refreshes
    release, entered = threading.Event(), threading.Event()
    p.routes[p.jwks_path] = blocked(release, p.serve, entered)
    results: dict[str, str] = {}
    refresher = threading.Thread(target=lambda: results.update(first=one(proc, p.token())[0]))
    try:
        refresher.start()
        assert entered.wait(10)
        done = threading.Event()
        threading.Thread(
            target=lambda: (results.update(second=one(proc, p.token())[0]), done.set())
        ).start()
        assert done.wait(10), "a token with a known kid waited for the expiry refresh"
        assert results["second"] == "ok" and refresher.is_alive()
    finally:
        release.set()
        refresher.join(10)
    assert results["first"] == "ok"


# ---------------------------------------------------------------- deadlines and redirects


def test_a_dripping_jwks_is_a_drop_within_the_deadline(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/realms/acme")
    p.routes[p.jwks_path] = drip(b'{"keys": []}' * 100, every=0.05)
    proc = make_processor({"acme": issuer_record(p)}, http_timeout=0.5, http_max_retries=3)
    kind, message = one(proc, p.token())
    assert kind == "signature"
    assert "JWKS fetch failed" in message and "timed out after 0.5 s" in message


@pytest.mark.parametrize("which", ["discovery", "jwks"])
def test_deeply_nested_provider_documents_are_a_drop(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    which: str,
) -> None:
    p = make_provider("/realms/acme")
    path = p.discovery_path if which == "discovery" else p.jwks_path
    p.routes[path] = body(b"[" * 100_000)
    kind, message = one(make_processor({"acme": issuer_record(p)}), p.token())
    assert kind == "signature"
    assert "deeper than the limit of 128 levels" in message


def test_discovery_redirected_to_http_is_refused(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    server_ssl_context: ssl.SSLContext,
) -> None:
    p = make_provider("/realms/acme")
    plain = OidcProvider(server_ssl_context, prefix="/realms/acme", tls=False)
    plain.keys = p.keys
    plain.start()
    try:
        p.routes[p.discovery_path] = redirect(plain.url(plain.discovery_path))
        proc = make_processor({"acme": issuer_record(p)})
        kind, message = one(proc, p.token())
        assert kind == "signature"
        assert "redirect from https://" in message and "refused" in message
        assert sum(plain.requests.values()) == 0
    finally:
        plain.stop()


# ---------------------------------------------------------------- numbers outside Long


@pytest.mark.parametrize(
    ("claim", "value"),
    [("exp", 10**20), ("exp", 10**400), ("nbf", -(10**19)), ("iat", 1e300)],
)
def test_time_claims_outside_long_are_a_clear_drop(
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
    claim: str,
    value: int | float,
) -> None:
    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)})
    kind, message = one(proc, p.token(**{claim: value}))
    assert kind == "invalid_input"
    assert f"claim {claim!r}" in message and "outside the 64-bit Long range" in message
    assert len(message) < 200


def test_other_big_numbers_are_tags_only(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    from polang.language.values import LONG_MAX

    p = make_provider("/realms/acme")
    proc = make_processor({"acme": issuer_record(p)})
    out = proc.process([TokenInput(ACCESS, p.token(big=10**20, jti="n1"))])
    [tok] = out.tokens
    assert "big" not in tok.entity.attrs
    assert list(tok.entity.tags["big"]) == ["100000000000000000000"]  # type: ignore[call-overload]
    for v in tok.entity.attrs.values():
        assert not isinstance(v, int) or abs(v) <= LONG_MAX


# ---------------------------------------------------------------- the expected audience


def aud_record(p: OidcProvider, issuer_aud: Any = None, token_aud: Any = None) -> dict[str, Any]:
    rec = issuer_record(p)
    if issuer_aud is not None:
        rec["expected_audience"] = issuer_aud
    if token_aud is not None:
        rec["token_metadata"]["access_token"]["expected_audience"] = token_aud
    return rec


def test_expected_audience(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/realms/acme")
    off = make_processor({"acme": aud_record(p)})
    assert one(off, p.token(aud="anything"))[0] == "ok"  # off unless configured

    proc = make_processor({"acme": aud_record(p, token_aud="docs-api")}, token_cache_capacity=0)
    assert one(proc, p.token(aud="docs-api"))[0] == "ok"
    assert one(proc, p.token(aud=["billing", "docs-api"]))[0] == "ok"
    kind, message = one(proc, p.token(aud="billing-api"))
    assert kind == "audience"
    assert "'billing-api'" in message and "'docs-api'" in message
    assert "issued for another service" in message
    kind, message = one(proc, p.token(aud=None))
    assert (kind, "no 'aud' claim" in message) == ("audience", True)
    assert one(proc, p.token(aud=5))[0] == "invalid_input"

    # the issuer's expected_audience is the default; a token type's wins over it
    both = make_processor(
        {"acme": aud_record(p, issuer_aud=["a", "b"], token_aud="c")}, token_cache_capacity=0
    )
    assert one(both, p.token(aud="c"))[0] == "ok"
    assert one(both, p.token(aud="a"))[0] == "audience"
    issuer_only = make_processor({"acme": aud_record(p, issuer_aud=["a", "b"])})
    assert one(issuer_only, p.token(aud="b"))[0] == "ok"
    assert one(issuer_only, p.token(aud="z"))[0] == "audience"


# ---------------------------------------------------------------- refresh while fetching


@pytest.fixture
def url_store_engine(
    tmp_path: Path,
    client_ssl_context: ssl.SSLContext,
    make_provider: Callable[..., OidcProvider],
) -> Iterator[tuple[Engine, OidcProvider, Callable[[str], None]]]:
    """An engine over a store served by a loopback URL, refreshed by hand, and a function
    that publishes a new version of the store."""
    import io
    import zipfile

    acme = make_provider("/realms/acme", keys=("RS256",))
    partner = make_provider("/partner", keys=("EdDSA",))
    host = make_provider("/stores", keys=())

    def publish(version: str) -> None:
        root = write_store(tmp_path / version, SCHEMA, issuers_for(acme, partner))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for f in sorted(root.rglob("*")):
                if f.is_file():
                    text = f.read_text()
                    if f.name == "docs.polang":
                        text += f"\n// {version}\n"
                    zf.writestr(str(f.relative_to(root)), text)
        host.routes["/stores/docs.parc"] = body(buf.getvalue())

    publish("v1")
    engine = Engine(
        {
            "ENGINE_POLICY_STORE_URI": host.url("/stores/docs.parc"),
            "ENGINE_POLICY_STORE_REFRESH_INTERVAL": 3600,  # refreshed by hand
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 20,
        },
        ssl_context=client_ssl_context,
    )
    try:
        yield engine, acme, publish
    finally:
        engine.close()


def test_a_store_refresh_never_breaks_a_request_in_flight(
    url_store_engine: tuple[Engine, OidcProvider, Callable[[str], None]],
) -> None:
    engine, acme, publish = url_store_engine
    release, entered = threading.Event(), threading.Event()
    acme.routes[acme.jwks_path] = blocked(release, acme.serve, entered)
    got: dict[str, Any] = {}

    def request() -> None:
        try:
            tok = acme.token(scope=["docs:read"])
            got["result"] = engine.authorize_multi_issuer([TokenInput(ACCESS, tok)], READ, doc())
        except Exception as e:  # recorded for the assertion below
            got["error"] = e

    t = threading.Thread(target=request)
    try:
        t.start()
        assert entered.wait(10)  # the request is fetching keys on the v1 snapshot
        publish("v2")
        assert engine._refresher.refresh_now() is True  # v1's HTTP client is retired
    finally:
        release.set()
        t.join(20)
    assert "error" not in got, got.get("error")
    assert got["result"].decision is True and got["result"].dropped_tokens == []


def test_concurrent_requests_during_store_swaps(
    url_store_engine: tuple[Engine, OidcProvider, Callable[[str], None]],
) -> None:
    engine, acme, publish = url_store_engine
    stop = threading.Event()
    failures: list[str] = []
    done = [0]

    def client() -> None:
        while not stop.is_set():
            tok = acme.token(scope=["docs:read"])
            try:
                r = engine.authorize_multi_issuer([TokenInput(ACCESS, tok)], READ, doc())
                if r.decision is not True:
                    failures.append(str(r.dropped_tokens))
            except Exception as e:  # recorded for the assertion below
                failures.append(repr(e))
            done[0] += 1

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(5):  # each new snapshot fetches its keys while requests run
            publish(f"v{i + 2}")
            assert engine._refresher.refresh_now() is True
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert failures == []
    assert done[0] >= 3


# ---------------------------------------------------------------- property-based fuzzing

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_HEADER_KEYS = ["alg", "kid", "typ", "crit", "b64", "jku", "x5u", "jwk", "zip"]
_CLAIM_KEYS = ["iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "role", "acr"]


@st.composite
def near_jwts(draw: st.DrawFn, iss: str) -> str:
    """Tokens shaped like JWTs, with any JSON (or not-quite JSON) in their parts."""
    header = draw(st.dictionaries(st.sampled_from(_HEADER_KEYS), _json, max_size=4))
    if draw(st.booleans()):
        header["alg"] = draw(st.sampled_from(["RS256", "ES256", "HS256", "none", "EdDSA"]))
    claims = draw(st.dictionaries(st.sampled_from(_CLAIM_KEYS) | st.text(max_size=6), _json))
    if draw(st.booleans()):
        claims["iss"] = iss
    parts = [json.dumps(header), json.dumps(claims)]  # may hold NaN/Infinity: not JSON
    if draw(st.booleans()):
        i = draw(st.integers(0, 1))
        cut = draw(st.integers(0, len(parts[i])))
        parts[i] = parts[i][:cut]
    sig = draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", max_size=40))
    return f"{b64(parts[0])}.{b64(parts[1])}.{sig}"


def _only_drops(engine: Engine, tokens: list[str]) -> None:
    try:
        result = engine.authorize_multi_issuer([TokenInput(ACCESS, t) for t in tokens], READ, doc())
    except TokenError as e:  # every token dropped: a PolangError, bounded
        assert len(str(e)) <= MAX_MESSAGE_CHARS + 200
        for r in e.reasons:
            assert r["reason"]["kind"] in DROP_KINDS
            assert len(r["reason"]["message"]) <= MAX_DROP_MESSAGE + 100
        return
    for d in result.dropped_tokens or []:
        assert d.kind in DROP_KINDS and len(d.message) <= MAX_DROP_MESSAGE + 100


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_tokens_only_ever_drop(
    engine_for: Callable[..., tuple[Engine, OidcProvider]], data: st.DataObject
) -> None:
    engine, acme = _fuzz_engine(engine_for, "verified")
    tokens = data.draw(
        st.lists(
            near_jwts(acme.issuer)
            | st.text(max_size=300)
            | st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
            min_size=1,
            max_size=3,
        )
    )
    _only_drops(engine, tokens)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_unverified_tokens_only_ever_drop(
    engine_for: Callable[..., tuple[Engine, OidcProvider]], data: st.DataObject
) -> None:
    # with signatures off every claim reaches entity building, so this fuzzes that too
    engine, acme = _fuzz_engine(
        engine_for,
        "unverified",
        ENGINE_JWT_SIG_VALIDATION="disabled",
        ENGINE_JWT_STATUS_VALIDATION="disabled",  # no fetches of made-up status URIs
    )
    tokens = data.draw(st.lists(near_jwts(acme.issuer), min_size=1, max_size=3))
    _only_drops(engine, tokens)


_FUZZ_ENGINES: dict[tuple[int, str], tuple[Engine, OidcProvider]] = {}


def _fuzz_engine(
    engine_for: Callable[..., tuple[Engine, OidcProvider]], name: str, **props: Any
) -> tuple[Engine, OidcProvider]:
    """One engine per test (the fixture's own), not one per example."""
    key = (id(engine_for), name)
    if key not in _FUZZ_ENGINES:
        _FUZZ_ENGINES.clear()
        _FUZZ_ENGINES[key] = engine_for(**props)
    return _FUZZ_ENGINES[key]


# ---------------------------------------------------------------- linear-time matching

# Nested quantifiers: a backtracking engine needs 2**n steps to fail on n letters and a "!"
# (six seconds at 28 letters with Python's re); claim mappings match with RE2 in one pass.
NESTED_EMAIL = r"^(?P<USER>(?:[a-zA-Z0-9]+\.?)+)@example\.com$"


def email_record(provider: OidcProvider, expr: str = NESTED_EMAIL) -> dict[str, Any]:
    mapping = {
        "parser": "regex",
        "type": "Acme::Email",
        "regex_expression": expr,
        "USER": {"attr": "user", "type": "String"},
    }
    return issuer_record(
        provider, access_token={"entity_type_name": ACCESS, "claim_mapping": {"email": mapping}}
    )


@pytest.mark.timeout(10)
def test_a_claim_against_a_backtracking_pattern_is_matched_in_linear_time(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": email_record(oidc)})
    heard: list[tuple[str, str]] = []
    proc._log = lambda level, msg: heard.append((level, msg))
    for hostile in ("a" * 40 + "!", "a." * 2_000 + "!"):
        out = proc.process([TokenInput(ACCESS, oidc.token(email=hostile))])
        assert out.dropped == []
        entity = out.tokens[0].entity
        assert "email" not in entity.attrs  # no match: the claim stays a tag
        assert entity.tags["email"] == SetValue([hostile])
    out = proc.process([TokenInput(ACCESS, oidc.token(email="john.doe@example.com"))])
    assert out.tokens[0].entity.attrs["email"] == RecordValue({"user": "john.doe"})
    assert heard == []


def test_a_claim_longer_than_a_mapping_reads_stays_a_tag(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    proc = make_processor({"acme": email_record(oidc)})
    heard: list[tuple[str, str]] = []
    proc._log = lambda level, msg: heard.append((level, msg))
    long = "a" * MAX_MAPPED_CLAIM_CHARS + "@example.com"
    out = proc.process([TokenInput(ACCESS, oidc.token(email=long))])
    entity = out.tokens[0].entity
    assert "email" not in entity.attrs and entity.tags["email"] == SetValue([long])
    [(level, message)] = heard
    assert level == "WARN" and "MAX_MAPPED_CLAIM_CHARS" in message and "'email'" in message


def test_a_pattern_re2_refuses_refuses_the_store(
    tmp_path: Path, oidc: OidcProvider, client_ssl_context: ssl.SSLContext
) -> None:
    # a backreference cannot be matched in linear time: the store is refused at load,
    # naming the issuer, the claim and the construct
    record = email_record(oidc, r"^(?P<USER>\w+)\.\1@example\.com$")
    store = write_store(tmp_path / "store", SCHEMA, {"acme": record})
    with pytest.raises(PolicyStoreLoadError) as e:
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store)}, ssl_context=client_ssl_context)
    message = str(e.value)
    assert "acme.token_metadata.access_token.claim_mapping.email.regex_expression" in message
    assert r"a backreference (\1) is not supported" in message


@pytest.mark.timeout(10)
def test_an_unclosed_string_in_a_deep_token_is_measured_in_linear_time(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    # more than 128 brackets make the depth check look at the strings; a quote followed by
    # escaped quotes was scanned again from every quote (minutes for one 64 KiB token)
    engine, acme = engine_for()
    payload = "[" * 200 + '"' + '\\"' * 23_000
    [(kind, message)] = drop_reasons(engine, forged({"alg": "RS256"}, payload))
    assert kind == "invalid_input" and "the JWT payload" in message
    assert sum(acme.requests.values()) == 0
