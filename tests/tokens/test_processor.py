"""Token entities, context.tokens, duplicates, the validated-token cache, threads."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest

from polang.errors import TokenError
from polang.language.schema import (
    LONG,
    STRING,
    Attribute,
    EntityRefType,
    EntityTypeDef,
    RecordType,
    Schema,
    SetType,
)
from polang.language.values import EntityUID, RecordValue, SetValue
from polang.tokens import (
    DROP_KINDS,
    IssuerSettings,
    TokenInput,
    TokenProcessor,
    TokenSettings,
    context_key,
    trusted_issuer_entity,
)
from polang.tokens.model import TokenDrop

from .conftest import FakeClock, issuer_record
from .oidc_server import OidcProvider

ACCESS = "Acme::Access_token"
ID = "Acme::Id_token"


@pytest.fixture
def records(oidc: OidcProvider) -> dict[str, dict[str, Any]]:
    return {
        "acme": issuer_record(
            oidc,
            access_token={"entity_type_name": ACCESS},
            id_token={"entity_type_name": ID, "role_mapping": ["role", "groups"]},
            userinfo_token={"entity_type_name": "Acme::Userinfo_token", "role_mapping": ""},
        )
    }


@pytest.fixture
def proc(
    records: dict[str, dict[str, Any]], make_processor: Callable[..., TokenProcessor]
) -> TokenProcessor:
    return make_processor(records)


def test_token_entity_shape(oidc: OidcProvider, proc: TokenProcessor, clock: FakeClock) -> None:
    token = oidc.token(
        jti="tok-1",
        scope=["read", "write"],
        client_id="app",
        amount=12,
        address={"city": "Oslo"},
        exp=int(clock.now) + 100,
    )
    out = proc.process([TokenInput(ACCESS, token)])
    (tok,) = out.tokens
    e = tok.entity
    assert e.uid == EntityUID(ACCESS, "tok-1")
    assert e.attrs == {
        "token_type": ACCESS,
        "jti": "tok-1",
        "iss": EntityUID("Acme::TrustedIssuer", "acme"),
        "exp": int(clock.now) + 100,
        "validated_at": int(clock.now),
    }
    assert e.tags["scope"] == SetValue(["read", "write"])
    assert e.tags["client_id"] == SetValue(["app"])
    assert e.tags["amount"] == SetValue(["12"])
    assert e.tags["address"] == SetValue(['{"city":"Oslo"}'])
    assert e.tags["sub"] == SetValue(["user-1"]) and e.tags["aud"] == SetValue(["client-1"])
    assert "jti" not in e.tags and "exp" not in e.tags and "iss" not in e.tags
    assert e.parents == set()
    assert tok.user_id == "user-1" and tok.workload_id == "client-1"


def test_context_tokens_record(oidc: OidcProvider, proc: TokenProcessor) -> None:
    out = proc.process(
        [TokenInput(ACCESS, oidc.token(jti="a")), TokenInput(ID, oidc.token(jti="i"))]
    )
    assert out.context_tokens == RecordValue(
        {
            "acme_access_token": EntityUID(ACCESS, "a"),
            "acme_id_token": EntityUID(ID, "i"),
            "total_token_count": 2,
        }
    )
    assert [e.uid.id for e in out.entities] == ["a", "i"]


def test_context_key_rules() -> None:
    assert context_key("Acme", "Jans::Access_Token") == "acme_access_token"
    assert context_key("Dolphin", "Acme::DolphinToken") == "dolphin_dolphintoken"
    assert context_key("idp.acme-corp.com", "A::B::Tx-Token") == "idp_acme_corp_com_tx_token"
    assert context_key("Ünï", "A::T") == "_n__t"


def test_duplicate_tokens_keep_the_first(oidc: OidcProvider, proc: TokenProcessor) -> None:
    first = oidc.token(jti="one")
    out = proc.process(
        [
            TokenInput(ACCESS, first),
            TokenInput(ACCESS, oidc.token(jti="two")),
            TokenInput(ACCESS, first),
        ]
    )
    assert [t.entity.uid.id for t in out.tokens] == ["one"]
    assert [(d.index, d.kind) for d in out.dropped] == [
        (1, "duplicate_token"),
        (2, "duplicate_token"),
    ]
    assert "token 0" in out.dropped[0].message
    assert out.context_tokens.fields["total_token_count"] == 1


def test_same_entity_from_two_issuers_is_a_duplicate(
    oidc: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    other = make_provider("/other", keys=("ES256",))
    proc = make_processor(
        {
            "acme": issuer_record(oidc, access_token={"entity_type_name": ACCESS}),
            "other": issuer_record(other, name="Other", access_token={"entity_type_name": ACCESS}),
        }
    )
    out = proc.process(
        [TokenInput(ACCESS, oidc.token(jti="same")), TokenInput(ACCESS, other.token(jti="same"))]
    )
    assert [t.issuer_id for t in out.tokens] == ["acme"]
    assert out.dropped[0].kind == "duplicate_token" and "already built" in out.dropped[0].message
    out = proc.process(
        [TokenInput(ACCESS, oidc.token(jti="x")), TokenInput(ACCESS, other.token(jti="y"))]
    )
    assert set(out.context_tokens.fields) == {
        "acme_access_token",
        "other_access_token",
        "total_token_count",
    }


def test_reserved_context_key(
    make_provider: Callable[..., OidcProvider], make_processor: Callable[..., TokenProcessor]
) -> None:
    p = make_provider("/t")
    proc = make_processor(
        {"t": issuer_record(p, name="Total", tc={"entity_type_name": "Total::Token_count"})}
    )
    out = proc.process([TokenInput("Total::Token_count", p.token())])
    assert out.dropped[0].kind == "duplicate_token" and "reserved" in out.dropped[0].message


def test_trusted_issuer_entities(oidc: OidcProvider, proc: TokenProcessor) -> None:
    (e,) = proc.trusted_issuer_entities()
    assert e.uid == EntityUID("Acme::TrustedIssuer", "acme")
    assert e.attrs["issuer_entity_id"] == RecordValue(
        {"host": f"localhost:{oidc.port}", "path": "/realms/acme", "protocol": "https"}
    )
    root = IssuerSettings.from_dict(
        "g",
        {
            "name": "G",
            "openid_configuration_endpoint": "https://Accounts.Example.com/.well-known/openid-configuration",
        },
    )
    assert trusted_issuer_entity(root).attrs["issuer_entity_id"] == RecordValue(
        {"host": "accounts.example.com", "path": "/", "protocol": "https"}
    )


def test_no_issuers_is_allowed(make_processor: Callable[..., TokenProcessor]) -> None:
    proc = make_processor({})
    assert proc.trusted_issuer_entities() == []
    out = proc.process([])
    assert out.tokens == [] and out.context_tokens == RecordValue({"total_token_count": 0})
    with pytest.raises(TokenError, match="no token was given"):
        out.require_any()


def test_roles(oidc: OidcProvider, proc: TokenProcessor) -> None:
    out = proc.process(
        [
            TokenInput(ACCESS, oidc.token(role="reader")),
            TokenInput(ID, oidc.token(role=["admin"], groups=["ops", "admin"])),
            TokenInput("Acme::Userinfo_token", oidc.token(role="ignored")),
        ]
    )
    assert [t.roles for t in out.tokens] == [("reader",), ("admin", "ops"), ()]
    assert out.roles == ["reader", "admin", "ops"]


def test_log_ids_show_one_claim_only(
    oidc: OidcProvider,
    records: dict[str, dict[str, Any]],
    make_processor: Callable[..., TokenProcessor],
) -> None:
    token = oidc.token(jti="j-1", sub="ann")
    out = make_processor(records).process([TokenInput(ACCESS, token)])
    assert [x.to_dict() for x in out.log_ids] == [{"mapping": ACCESS, "jti": "j-1"}]
    out = make_processor(records, decision_log_jwt_id="sub").process([TokenInput(ACCESS, token)])
    assert out.log_ids[0].to_dict() == {"mapping": ACCESS, "sub": "ann"}


def test_no_token_left_raises_token_error_with_every_reason(
    oidc: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    out = proc.process(
        [TokenInput(ACCESS, oidc.token(exp=int(clock.now) - 1)), TokenInput(ACCESS, "junk")]
    )
    with pytest.raises(TokenError) as e:
        out.require_any()
    assert e.value.reasons == [d.to_dict() for d in out.dropped]
    assert [d.kind for d in out.dropped] == ["expired", "invalid_input"]
    assert "token 0" in str(e.value) and "token 1" in str(e.value)
    assert out.dropped[0].to_dict() == {
        "mapping": ACCESS,
        "index": 0,
        "reason": {"kind": "expired", "message": out.dropped[0].message},
    }


def test_every_drop_kind_is_known() -> None:
    assert DROP_KINDS == (
        "invalid_input",
        "untrusted_issuer",
        "signature",
        "expired",
        "not_yet_valid",
        "missing_claim",
        "audience",
        "revoked",
        "status_unavailable",
        "duplicate_token",
        "entity_build_failed",
    )


# ---------------------------------------------------------------- schema-directed attributes

EMAIL_T = RecordType({"uid": Attribute(STRING), "domain": Attribute(STRING)})


def schema() -> Schema:
    shape = RecordType(
        {
            "token_type": Attribute(STRING, required=False),
            "jti": Attribute(STRING, required=False),
            "iss": Attribute(EntityRefType("Acme::TrustedIssuer"), required=False),
            "exp": Attribute(LONG, required=False),
            "validated_at": Attribute(LONG, required=False),
            "scope": Attribute(SetType(STRING), required=False),
            "iat": Attribute(LONG, required=False),
            "email": Attribute(EMAIL_T, required=False),
            "sub": Attribute(STRING, required=False),
        }
    )
    return Schema(
        entity_types={ACCESS: EntityTypeDef(name=ACCESS, shape=shape, tags=SetType(STRING))},
        common_types={"Acme::email_address": EMAIL_T},
    )


def test_schema_declared_claims_become_attributes(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor], clock: FakeClock
) -> None:
    rec = issuer_record(
        oidc,
        access_token={
            "entity_type_name": ACCESS,
            "claim_mapping": {
                "email": {
                    "parser": "regex",
                    "type": "Acme::email_address",
                    "regex_expression": r"^(?P<UID>[^@]+)@(?P<DOMAIN>.+)$",
                    "UID": {"attr": "uid", "type": "String"},
                    "DOMAIN": {"attr": "domain", "type": "String"},
                }
            },
        },
    )
    proc = make_processor({"acme": rec}, schema())
    out = proc.process(
        [TokenInput(ACCESS, oidc.token(scope=["read"], email="ann@example.com", name="Ann"))]
    )
    e = out.tokens[0].entity
    assert e.attrs["scope"] == SetValue(["read"])
    assert e.attrs["iat"] == int(clock.now)
    assert e.attrs["sub"] == "user-1"
    assert e.attrs["email"] == RecordValue({"uid": "ann", "domain": "example.com"})
    assert e.tags["scope"] == SetValue(["read"]) and e.tags["sub"] == SetValue(["user-1"])
    assert e.tags["email"] == SetValue(["ann@example.com"])
    assert e.tags["name"] == SetValue(["Ann"]) and e.tags["aud"] == SetValue(["client-1"])


def test_claim_of_the_wrong_type_is_a_tag_only(
    oidc: OidcProvider, make_processor: Callable[..., TokenProcessor]
) -> None:
    # `iat?: Long` and a fractional iat: the token is kept, the attribute left out, the tag
    # kept, and the log told (tests/tokens/test_token_shapes.py covers the engine's log)
    heard: list[tuple[str, str]] = []
    proc = make_processor({"acme": issuer_record(oidc)}, schema())
    proc._log = lambda level, msg: heard.append((level, msg))
    out = proc.process([TokenInput(ACCESS, oidc.token(iat=1.5))])
    assert out.dropped == []
    e = out.tokens[0].entity
    assert "iat" not in e.attrs and e.tags["iat"] == SetValue(["1.5"])
    assert [level for level, _ in heard] == ["WARN"] and "'iat'" in heard[0][1]


def test_claims_named_like_fixed_attributes_stay_tags(
    oidc: OidcProvider, proc: TokenProcessor
) -> None:
    out = proc.process([TokenInput(ACCESS, oidc.token(token_type="forged", validated_at=1))])
    e = out.tokens[0].entity
    assert e.attrs["token_type"] == ACCESS
    assert e.tags["token_type"] == SetValue(["forged"])
    assert e.attrs["validated_at"] != 1


# ---------------------------------------------------------------- the validated-token cache


def test_a_token_seen_again_is_not_verified_again(
    oidc: OidcProvider,
    proc: TokenProcessor,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = oidc.token(exp=int(clock.now) + 100)
    first = proc.process([TokenInput(ACCESS, token)]).tokens[0]
    calls: list[str] = []

    def no_more(*args: object, **kw: object) -> None:
        calls.append("verify")
        raise TokenDrop("signature", "verified again")

    monkeypatch.setattr("polang.tokens.processor.verify_signature", no_more)
    clock.advance(50)
    again = proc.process([TokenInput(ACCESS, "junk"), TokenInput(ACCESS, token)])
    assert calls == []
    assert again.tokens[0].index == 1
    assert again.tokens[0] == dataclasses.replace(first, index=1)
    assert first.index == 0  # the cached token itself is never changed
    assert again.tokens[0].entity is first.entity
    assert again.tokens[0].validated_at == first.validated_at
    assert proc.cache.hits == 1
    assert proc.process([TokenInput(ACCESS, token)]).tokens[0] == first  # same position
    # a different mapping is a different cache entry: it is verified
    out = proc.process([TokenInput(ID, token)])
    assert calls == ["verify"] and out.dropped[0].message == "verified again"


def test_cached_tokens_expire_with_the_token(
    oidc: OidcProvider, proc: TokenProcessor, clock: FakeClock
) -> None:
    token = oidc.token(exp=int(clock.now) + 100)
    assert proc.process([TokenInput(ACCESS, token)]).tokens
    clock.advance(100)
    out = proc.process([TokenInput(ACCESS, token)])
    assert out.dropped[0].kind == "expired"


def test_cache_max_ttl_and_capacity(
    oidc: OidcProvider,
    records: dict[str, dict[str, Any]],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    proc = make_processor(records, token_cache_capacity=2, token_cache_max_ttl=60)
    tokens = [oidc.token(jti=str(i)) for i in range(3)]
    for t in tokens:
        proc.process([TokenInput(ACCESS, t)])
    assert len(proc.cache) == 2
    proc.process([TokenInput(ACCESS, tokens[2])])
    hits = proc.cache.hits
    assert hits == 1
    clock.advance(61)
    proc.process([TokenInput(ACCESS, tokens[2])])
    assert proc.cache.hits == hits  # max ttl passed: verified again


def test_revocation_is_seen_once_the_cache_entry_expires(
    oidc: OidcProvider,
    records: dict[str, dict[str, Any]],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    proc = make_processor(records, token_cache_max_ttl=30, status_list_refresh_max=30)
    uri = oidc.set_status_list("s", [0])
    token = oidc.token(status={"status_list": {"idx": 0, "uri": uri}})
    assert proc.process([TokenInput(ACCESS, token)]).tokens
    oidc.status_lists["s"].statuses = [1]
    clock.advance(10)
    assert proc.process([TokenInput(ACCESS, token)]).tokens  # cached
    clock.advance(25)
    assert proc.process([TokenInput(ACCESS, token)]).dropped[0].kind == "revoked"


# ---------------------------------------------------------------- threads


def test_one_processor_from_eight_threads(
    oidc: OidcProvider,
    records: dict[str, dict[str, Any]],
    make_processor: Callable[..., TokenProcessor],
    clock: FakeClock,
) -> None:
    proc = make_processor(records, token_cache_capacity=16)
    uri = oidc.set_status_list("s", [0, 1])
    good = [oidc.token(key=oidc.keys[i % 3], jti=f"g{i}") for i in range(6)]
    revoked = oidc.token(jti="r", status={"status_list": {"idx": 1, "uri": uri}})
    expired = oidc.token(jti="e", exp=int(clock.now) - 1)
    errors: list[str] = []

    def work(n: int) -> None:
        for round_ in range(15):
            g = good[(n + round_) % len(good)]
            out = proc.process(
                [TokenInput(ACCESS, g), TokenInput(ID, revoked), TokenInput(ID, expired)]
            )
            want_id = g.split(".")[1]
            if len(out.tokens) != 1 or out.tokens[0].claims["jti"] not in (
                f"g{i}" for i in range(6)
            ):
                errors.append(f"thread {n}: kept {[t.claims.get('jti') for t in out.tokens]}")
            elif out.tokens[0].entity.uid.id != out.tokens[0].claims["jti"]:
                errors.append(f"thread {n}: uid mismatch for {want_id}")
            kinds = [(d.index, d.kind) for d in out.dropped]
            if kinds != [(1, "revoked"), (2, "expired")]:
                errors.append(f"thread {n}: dropped {kinds}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert oidc.requests[oidc.jwks_path] == 1
    assert oidc.requests[oidc.status_path("s")] == 1


def test_processed_token_build_is_the_constructor(oidc: OidcProvider, proc: TokenProcessor) -> None:
    from polang.tokens.model import ProcessedToken

    tok = proc.process([TokenInput(ACCESS, oidc.token())]).tokens[0]
    values = {f.name: getattr(tok, f.name) for f in dataclasses.fields(ProcessedToken)}
    assert ProcessedToken.build(**values) == ProcessedToken(**values) == tok
    with pytest.raises(dataclasses.FrozenInstanceError):
        ProcessedToken.build(**values).index = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="exactly"):
        ProcessedToken.build(**{k: v for k, v in values.items() if k != "roles"})


def test_a_shared_fetcher_outlives_its_processors() -> None:
    from polang.http import Fetcher

    shared = Fetcher()
    proc = TokenProcessor([], TokenSettings(), fetcher=shared)
    assert proc.http is shared and proc.registry.issuers == []
    proc.close()
    assert not shared._closed  # the owner (an engine) closes it, not each store's processor
    own = TokenProcessor([], TokenSettings())
    own.close()
    assert own.http._closed
