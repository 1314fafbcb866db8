"""Token layouts others write: the spec's default multi-issuer layout and Cedarling's.

Real stores on disk, real loopback OpenID providers (HTTPS, a test CA) and real signed
tokens. The layouts:

- **the spec's**: token entity types in a shared namespace (``Svc::Access_token``) used
  by two issuers, each issuer's ``TrustedIssuer`` in its own namespace (named by the
  issuer ``name``); ``iss`` left out of the shared type, declared on a type only one issuer
  produces;
- **Cedarling's**: token types per issuer namespace with no ``iss`` attribute, ``tokens``
  required in a top-level ``Context`` type, an action used only without tokens whose
  context is ``{}``, claims that are arrays where the schema declares a String.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, RequestError, TokenError, TokenInput, ValidationError
from polang.language.schema import parse_schema
from polang.language.validate import check_multi_issuer_schema
from polang.language.values import EntityUID, SetValue

from .oidc_server import OidcProvider

METADATA = {
    "polang_version": "4.0.0",
    "policy_store": {
        "id": "shapes",
        "name": "Shapes",
        "version": "1.0.0",
        "created_date": "2025-01-01T00:00:00Z",
        "updated_date": "2025-01-01T00:00:00Z",
    },
}

# ---------------------------------------------------------------- the spec's layout

SVC_ACCESS = "Svc::Access_token"
SVC_ID = "Svc::Id_token"
READ = 'Svc::Action::"read"'
AUDIT = 'Svc::Action::"audit"'
SHIP = 'Svc::Action::"ship"'
LOCAL = 'Svc::Action::"local"'

SPEC_SCHEMA = """namespace Svc {
    type Url = { host: String, path: String, protocol: String };
    entity Access_token = {
        token_type?: String,
        jti?: String,
        exp?: Long,
        validated_at?: Long,
        scope?: Set<String>,
        country?: String,
    } tags Set<String>;
    entity Id_token = {
        token_type: String,
        jti: String,
        iss?: Acme::TrustedIssuer,
        exp: Long,
        validated_at: Long,
        acr?: String,
    } tags Set<String>;
    type TokensContext = {
        total_token_count: Long,
        acme_access_token?: Access_token,
        partner_access_token?: Access_token,
        acme_id_token?: Id_token,
    };
    entity User;
    entity Document = { public: Bool };
    action "read", "audit", "ship" appliesTo {
        principal: [User],
        resource: [Document],
        context: { tokens: TokensContext, network?: String },
    };
    action "local" appliesTo { principal: [User], resource: [Document], context: {} };
}
namespace Acme { entity TrustedIssuer = { issuer_entity_id: Svc::Url }; }
namespace Partner { entity TrustedIssuer = { issuer_entity_id: Svc::Url }; }
"""

SPEC_POLICIES = """@id("acme-readers")
permit (principal, action == Svc::Action::"read", resource is Svc::Document)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token.hasTag("scope") &&
    context.tokens.acme_access_token.getTag("scope").contains("docs:read")
};

@id("partner-readers")
permit (principal, action == Svc::Action::"read", resource is Svc::Document)
when {
    context has tokens.partner_access_token &&
    context.tokens.partner_access_token has scope &&
    context.tokens.partner_access_token.scope.contains("docs:read")
};

@id("audit-with-acme-mfa")
permit (principal, action == Svc::Action::"audit", resource)
when {
    context has tokens.acme_id_token &&
    context.tokens.acme_id_token has iss &&
    context.tokens.acme_id_token.iss == Acme::TrustedIssuer::"acme" &&
    context.tokens.acme_id_token.iss.issuer_entity_id.protocol == "https" &&
    context.tokens.acme_id_token has acr &&
    context.tokens.acme_id_token.acr == "mfa"
};

@id("ship-to-us")
permit (principal, action == Svc::Action::"ship", resource)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token has country &&
    context.tokens.acme_access_token.country == "US"
};

@id("ship-to-canada-by-tag")
permit (principal, action == Svc::Action::"ship", resource)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token.hasTag("country") &&
    context.tokens.acme_access_token.getTag("country").contains("CA")
};

@id("public-local")
permit (principal, action == Svc::Action::"local", resource is Svc::Document)
when { resource.public };
"""


def spec_issuers(acme: OidcProvider, partner: OidcProvider) -> dict[str, Any]:
    return {
        "acme": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {
                "access_token": {"entity_type_name": SVC_ACCESS},
                "id_token": {"entity_type_name": SVC_ID},
            },
        },
        "partner": {
            "name": "Partner",
            "openid_configuration_endpoint": partner.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": SVC_ACCESS}},
        },
    }


def write_store(root: Path, schema: str, policies: str, issuers: dict[str, Any]) -> Path:
    files = {
        "metadata.json": json.dumps(METADATA),
        "schema.polangschema": schema,
        "policies/all.polang": policies,
        "trusted-issuers/issuers.json": json.dumps(issuers),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


DOC = {"uid": {"type": "Svc::Document", "id": "d1"}, "attrs": {"public": False}, "parents": []}


@pytest.fixture
def acme(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/realms/acme", keys=("ES256",))


@pytest.fixture
def partner(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/partner", keys=("EdDSA",))


@pytest.fixture
def make_engine(client_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(store: Path, **props: Any) -> Engine:
        cfg = {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            "ENGINE_LOG_TYPE": "memory",
            **props,
        }
        engine = Engine(cfg, ssl_context=client_ssl_context)
        made.append(engine)
        return engine

    yield make
    for e in made:
        e.close()


@pytest.fixture
def spec_engine(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> Engine:
    store = write_store(tmp_path / "spec", SPEC_SCHEMA, SPEC_POLICIES, spec_issuers(acme, partner))
    return make_engine(store)


def token_entity(engine: Engine, mapping: str, payload: str) -> Any:
    """The entity the engine builds for one token (through its own token processor)."""
    out = engine._snap.tokens.process([TokenInput(mapping, payload)])
    assert out.dropped == [], out.dropped
    return out.tokens[0].entity


def test_the_spec_layout_decides_with_tokens_of_two_issuers(
    spec_engine: Engine, acme: OidcProvider, partner: OidcProvider
) -> None:
    a = TokenInput(SVC_ACCESS, acme.token(jti="a1", scope=["docs:read"]))
    p = TokenInput(SVC_ACCESS, partner.token(jti="p1", scope=["docs:read"]))
    p_none = TokenInput(SVC_ACCESS, partner.token(jti="p2", scope=["docs:list"]))
    r = spec_engine.authorize_multi_issuer([a], READ, DOC)
    assert (r.decision, r.response.diagnostics.reason, r.dropped_tokens) == (
        True,
        ["acme-readers"],
        [],
    )
    r = spec_engine.authorize_multi_issuer([p], READ, DOC, {"network": "corp"})
    assert (r.decision, r.response.diagnostics.reason) == (True, ["partner-readers"])
    assert spec_engine.authorize_multi_issuer([p_none], READ, DOC).decision is False
    # one shared type, two issuers: two context.tokens keys, two entities
    both = spec_engine.authorize_multi_issuer([a, p], READ, DOC)
    assert sorted(both.response.diagnostics.reason) == ["acme-readers", "partner-readers"]


def test_iss_is_set_only_where_the_schema_declares_it(
    spec_engine: Engine, acme: OidcProvider, partner: OidcProvider
) -> None:
    shared = token_entity(spec_engine, SVC_ACCESS, acme.token(jti="a1", scope=["x"]))
    # Svc::Access_token declares neither iss nor the claim-less extras: none is set
    assert set(shared.attrs) == {"token_type", "jti", "exp", "validated_at", "scope"}
    # as for every verified token, the iss claim is not a tag either (nor are jti and exp)
    assert "iss" not in shared.tags and shared.tags["scope"] == SetValue(["x"])
    own = token_entity(spec_engine, SVC_ID, acme.token(jti="i1", acr="mfa"))
    assert own.attrs["iss"] == EntityUID("Acme::TrustedIssuer", "acme")
    assert own.attrs["token_type"] == SVC_ID and own.attrs["acr"] == "mfa"

    ok = spec_engine.authorize_multi_issuer([TokenInput(SVC_ID, acme.token(acr="mfa"))], AUDIT, DOC)
    assert (ok.decision, ok.response.diagnostics.reason) == (True, ["audit-with-acme-mfa"])
    assert ok.response.diagnostics.errors == []
    sso = spec_engine.authorize_multi_issuer(
        [TokenInput(SVC_ID, acme.token(acr="pwd"))], AUDIT, DOC
    )
    assert sso.decision is False


def test_a_claim_that_does_not_fit_its_attribute_stays_a_tag(
    spec_engine: Engine, acme: OidcProvider
) -> None:
    """country?: String and a token with country ["US", "CA"]: the token is kept, the
    attribute left out, the tag kept, and the system log says so."""
    spec_engine.pop_logs()
    two = TokenInput(SVC_ACCESS, acme.token(jti="c2", country=["US", "CA"]))
    r = spec_engine.authorize_multi_issuer([two], SHIP, DOC)
    assert r.dropped_tokens == []
    assert (r.decision, r.response.diagnostics.reason) == (True, ["ship-to-canada-by-tag"])
    assert r.response.diagnostics.errors == []  # `has country` is false: no error
    e = token_entity(spec_engine, SVC_ACCESS, acme.token(jti="c3", country=["US", "CA"]))
    assert "country" not in e.attrs and e.tags["country"] == SetValue(["US", "CA"])
    warns = [x for x in spec_engine.pop_logs() if x.get("level") == "WARN"]
    assert len(warns) == 2, warns  # once per token built (a cached token is not re-logged)
    msg = warns[0]["msg"]
    assert "token 0 (Svc::Access_token)" in msg and "'country'" in msg and "kept as a tag" in msg
    assert two.payload not in json.dumps(warns)
    # a token seen again comes from the cache: decided the same, not logged again
    again = spec_engine.authorize_multi_issuer([two], SHIP, DOC)
    assert again.decision is True
    assert not [x for x in spec_engine.pop_logs() if x.get("level") == "WARN"]
    # a fitting value is an attribute as before (a one-element array where a String is
    # declared is that string)
    us = spec_engine.authorize_multi_issuer(
        [TokenInput(SVC_ACCESS, acme.token(country=["US"]))], SHIP, DOC
    )
    assert us.response.diagnostics.reason == ["ship-to-us"]


def test_tokens_required_in_the_context_and_actions_without_tokens(
    spec_engine: Engine, acme: OidcProvider
) -> None:
    # `tokens: TokensContext` is required on read/audit/ship: the caller's context is
    # checked without it (the engine fills it), strict validation included
    r = spec_engine.authorize_multi_issuer(
        [TokenInput(SVC_ACCESS, acme.token(scope="docs:read"))], READ, DOC, {"network": "vpn"}
    )
    assert r.decision is True
    # `local` (context {}) is only for unsigned requests: it does not make the store unfit
    public = {**DOC, "attrs": {"public": True}}
    user = {"uid": {"type": "Svc::User", "id": "u"}, "attrs": {}, "parents": []}
    assert spec_engine.authorize_unsigned(LOCAL, public, {}, user).decision is True
    # ... but a multi-issuer request for it is refused, naming that action only
    with pytest.raises(ValidationError) as exc:
        spec_engine.authorize_multi_issuer([TokenInput(SVC_ACCESS, acme.token())], LOCAL, public)
    assert exc.value.findings == [
        'the context of Svc::Action::"local" lacks the field `tokens` (`tokens?: TokensContext`)'
    ]
    # unsigned requests for read must now give `tokens` themselves (it is required)
    with pytest.raises(RequestError, match="tokens"):
        spec_engine.authorize_unsigned(READ, DOC, {}, user)


def test_the_check_names_the_issuer_whose_iss_does_not_fit(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> None:
    # iss declared on the shared type as the shared namespace's TrustedIssuer: neither
    # issuer builds that (each builds its own namespace's)
    text = SPEC_SCHEMA.replace(
        "        country?: String,\n", "        country?: String,\n        iss?: TrustedIssuer,\n"
    ).replace(
        "namespace Svc {", "namespace Svc {\n    entity TrustedIssuer = { issuer_entity_id: Url };"
    )
    store = write_store(tmp_path / "s1", text, SPEC_POLICIES, spec_issuers(acme, partner))
    engine = make_engine(store)
    with pytest.raises(ValidationError) as exc:
        engine.authorize_multi_issuer([TokenInput(SVC_ACCESS, acme.token())], READ, DOC)
    assert [str(f) for f in exc.value.findings] == [
        f"`{SVC_ACCESS}.iss` is declared as `Svc::TrustedIssuer`, but issuer `{who}` builds "
        f"`iss` as `{who}::TrustedIssuer` (the issuer's own TrustedIssuer); leave `iss` out: "
        f"issuers `Acme`, `Partner` share `{SVC_ACCESS}`, and each builds `iss` in its own "
        "namespace"
        for who in ("Acme", "Partner")
    ]
    # iss as Acme's on the shared type fits Acme, not Partner
    text = SPEC_SCHEMA.replace(
        "        country?: String,\n",
        "        country?: String,\n        iss?: Acme::TrustedIssuer,\n",
    )
    store = write_store(tmp_path / "s2", text, SPEC_POLICIES, spec_issuers(acme, partner))
    engine = make_engine(store)
    with pytest.raises(ValidationError) as exc:
        engine.authorize_multi_issuer([TokenInput(SVC_ACCESS, acme.token())], READ, DOC)
    (only,) = exc.value.findings
    assert "but issuer `Partner` builds `iss` as `Partner::TrustedIssuer`" in str(only)
    # ... and when only Acme produces the type, it fits
    issuers = spec_issuers(acme, partner)
    issuers["partner"]["token_metadata"]["access_token"]["trusted"] = False
    store = write_store(tmp_path / "s3", text, SPEC_POLICIES, issuers)
    engine = make_engine(store)
    tok = TokenInput(SVC_ACCESS, acme.token(scope="docs:read"))
    assert engine.authorize_multi_issuer([tok], READ, DOC).decision is True
    assert token_entity(engine, SVC_ACCESS, tok.payload).attrs["iss"] == EntityUID(
        "Acme::TrustedIssuer", "acme"
    )


def test_check_per_token_type_and_issuer_without_an_engine() -> None:
    s = parse_schema(SPEC_SCHEMA)
    users = {SVC_ACCESS: ["Acme", "Partner"], SVC_ID: ["Acme"]}
    assert check_multi_issuer_schema(s, ["Acme", "Partner"], users, actions=()) == []
    # Svc::Id_token's iss is Acme's: a Partner id token would not fit
    found = check_multi_issuer_schema(
        s, ["Acme", "Partner"], {SVC_ID: ["Acme", "Partner"]}, actions=()
    )
    assert (
        len(found) == 1
        and "issuer `Partner` builds `iss` as `Partner::TrustedIssuer`" in (found[0])
    )
    # the context check is per action
    read = EntityUID("Svc::Action", "read")
    local = EntityUID("Svc::Action", "local")
    assert check_multi_issuer_schema(s, ["Acme"], {SVC_ID: ["Acme"]}, actions=[read]) == []
    assert check_multi_issuer_schema(s, ["Acme"], {}, actions=[local]) == [
        'the context of Svc::Action::"local" lacks the field `tokens` (`tokens?: TokensContext`)'
    ]


def test_a_required_attribute_the_engine_cannot_fill_drops_the_token(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> None:
    """`iss: Acme::TrustedIssuer` required, signatures not checked: no token can have it
    (iss is set only on verified tokens), so each is dropped, saying why."""
    text = SPEC_SCHEMA.replace("iss?: Acme::TrustedIssuer", "iss: Acme::TrustedIssuer")
    store = write_store(tmp_path / "req", text, SPEC_POLICIES, spec_issuers(acme, partner))
    signed = make_engine(store)
    tok = TokenInput(SVC_ID, acme.token(acr="mfa"))
    assert signed.authorize_multi_issuer([tok], AUDIT, DOC).decision is True
    unsigned = make_engine(
        store, ENGINE_JWT_SIG_VALIDATION="disabled", ENGINE_JWT_STATUS_VALIDATION="disabled"
    )
    with pytest.raises(TokenError) as exc:
        unsigned.authorize_multi_issuer([tok], AUDIT, DOC)
    (reason,) = exc.value.reasons
    assert reason["reason"]["kind"] == "entity_build_failed"
    assert "`iss` (set only on tokens whose signature was verified)" in reason["reason"]["message"]
    # Id_token declares `exp: Long` and `jti: String` required: a token without exp, or
    # whose jti is not a string (its id comes from another claim), cannot fill them
    issuers = spec_issuers(acme, partner)
    issuers["acme"]["token_metadata"]["id_token"]["token_id"] = "sid"
    store = write_store(tmp_path / "exp", SPEC_SCHEMA, SPEC_POLICIES, issuers)
    engine = make_engine(store)
    r = engine.authorize_multi_issuer(
        [
            TokenInput(SVC_ID, acme.token(sid="s1", exp=None, acr="mfa")),
            TokenInput(SVC_ID, acme.token(sid="s2", jti={"n": 1}, acr="mfa")),
            TokenInput(SVC_ACCESS, acme.token(jti="a1", scope="docs:read")),
        ],
        READ,
        DOC,
    )
    assert r.decision is True
    assert [(d.index, d.kind) for d in r.dropped_tokens or []] == [
        (0, "entity_build_failed"),
        (1, "entity_build_failed"),
    ]
    msgs = [d.message for d in r.dropped_tokens or []]
    assert "requires `exp` (the token has no usable claim for it)" in msgs[0]
    assert "requires `jti` (the token has no usable claim for it)" in msgs[1]


# ---------------------------------------------------------------- Cedarling's layout

CEDARLING_SCHEMA = """namespace Acme {
    entity Access_Token = {
        token_type: String,
        jti: String,
        validated_at: Long,
        exp: Long,
        sub?: String,
        scope?: Set<String>,
        location?: String,
    } tags Set<String>;
    type Url = { host: String, path: String, protocol: String };
    entity TrustedIssuer = { issuer_entity_id: Url };
    entity Resource = { name: String };
    entity Any;
    action "GetFood", "ReadProfile" appliesTo {
        principal: [Any],
        resource: [Resource],
        context: Context
    };
}
namespace Dolphin {
    entity Access_Token = {
        token_type: String,
        jti: String,
        validated_at: Long,
        exp: Long,
        location?: String,
    } tags Set<String>;
    entity TrustedIssuer = { issuer_entity_id: Acme::Url };
}
namespace Jans {
    entity Issue = { country: String };
    entity User = { country: String };
    action "Update" appliesTo { principal: [User], resource: [Issue], context: {} };
}
type Context = {
    tokens: {
        acme_access_token?: Acme::Access_Token,
        dolphin_access_token?: Dolphin::Access_Token,
        total_token_count: Long
    }
};
"""

CEDARLING_POLICIES = """@id("dolphin-food")
permit (principal, action == Acme::Action::"GetFood", resource in Acme::Resource::"foods")
when {
    context has tokens.dolphin_access_token &&
    context.tokens.dolphin_access_token.hasTag("location") &&
    context.tokens.dolphin_access_token.getTag("location").contains("miami")
};

@id("acme-wiki")
permit (principal, action == Acme::Action::"ReadProfile", resource)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token.hasTag("scope") &&
    context.tokens.acme_access_token.getTag("scope").contains("read:wiki")
};

@id("jans-country")
permit (principal is Jans::User, action == Jans::Action::"Update", resource is Jans::Issue)
when { principal.country == resource.country };
"""


def test_a_cedarling_shaped_store(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> None:
    issuers = {
        "AcmeIssuer": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": "Acme::Access_Token"}},
        },
        "DolphinIssuer": {
            "name": "Dolphin",
            "openid_configuration_endpoint": partner.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": "Dolphin::Access_Token"}},
        },
    }
    store = write_store(tmp_path / "cedarling", CEDARLING_SCHEMA, CEDARLING_POLICIES, issuers)
    engine = make_engine(store)
    foods = {
        "cedar_entity_mapping": {"entity_type": "Acme::Resource", "id": "foods"},
        "name": "Approved Dolphin Foods",
    }
    # a location array where the schema says `location?: String`: tag only, token kept
    dolphin = TokenInput(
        "Dolphin::Access_Token", partner.token(jti="d1", location=["miami", "orlando"])
    )
    r = engine.authorize_multi_issuer([dolphin], 'Acme::Action::"GetFood"', foods)
    assert (r.decision, r.response.diagnostics.reason, r.dropped_tokens) == (
        True,
        ["dolphin-food"],
        [],
    )
    wiki = {"cedar_entity_mapping": {"entity_type": "Acme::Resource", "id": "wiki"}, "name": "W"}
    both = [
        TokenInput("Acme::Access_Token", acme.token(jti="a1", scope=["read:wiki"])),
        TokenInput("Dolphin::Access_Token", partner.token(jti="d2", location="miami")),
    ]
    r = engine.authorize_multi_issuer(both, 'Acme::Action::"ReadProfile"', wiki)
    assert (r.decision, r.response.diagnostics.reason) == (True, ["acme-wiki"])
    # no iss declared: the engine does not set it
    e = token_entity(engine, "Acme::Access_Token", acme.token(jti="a2"))
    assert "iss" not in e.attrs and e.attrs["token_type"] == "Acme::Access_Token"
    # the unsigned-only action with context {} works, and does not make the store unfit
    jans_user = {"cedar_entity_mapping": {"entity_type": "Jans::User", "id": "u"}, "country": "US"}
    issue = {"cedar_entity_mapping": {"entity_type": "Jans::Issue", "id": "i"}, "country": "US"}
    assert engine.authorize_unsigned('Jans::Action::"Update"', issue, {}, jans_user).decision
