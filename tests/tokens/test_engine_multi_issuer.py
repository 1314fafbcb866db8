"""``Engine.authorize_multi_issuer`` end to end against real OpenID providers on loopback.

The store is written to a temp directory with its trusted issuers pointing at the
providers' discovery endpoints; tokens are signed by the providers' keys and the engine
fetches discovery documents and JWKS over HTTPS (a test CA, handed over as ``ssl_context``).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, TokenError, TokenInput, ValidationError

from .conftest import FakeClock
from .oidc_server import OidcProvider, hs256_with_public_key

ACCESS = "Acme::Access_token"
ID = "Acme::Id_token"
PARTNER = "Partner::Access_token"
READ = 'Acme::Action::"read"'
WRITE = 'Acme::Action::"write"'

TOKEN_ATTRS = """{
        "token_type"?: String,
        "jti"?: String,
        "iss"?: TrustedIssuer,
        "exp"?: Long,
        "validated_at"?: Long,
    } tags Set<String>"""

SCHEMA = f"""namespace Acme {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_ATTRS};
    entity Id_token = {TOKEN_ATTRS};
    type TokensContext = {{
        "total_token_count": Long,
        "acme_access_token"?: Access_token,
        "acme_id_token"?: Id_token,
        "partner_access_token"?: Partner::Access_token,
    }};
    entity User;
    entity Document = {{ "locked": Bool }};
    action "read", "write" appliesTo {{
        principal: [User],
        resource: [Document],
        context: {{ "network"?: String, "tokens"?: TokensContext }},
    }};
}}
namespace Partner {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_ATTRS};
}}
"""

POLICIES = """@id("read-with-scope")
permit (principal, action == Acme::Action::"read", resource is Acme::Document)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token.hasTag("scope") &&
    context.tokens.acme_access_token.getTag("scope").contains("docs:read")
};

@id("write-with-partner-editor")
permit (principal, action == Acme::Action::"write", resource is Acme::Document)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token has iss &&
    context.tokens.acme_access_token.iss == Acme::TrustedIssuer::"acme" &&
    context has tokens.partner_access_token &&
    context.tokens.partner_access_token.hasTag("role") &&
    context.tokens.partner_access_token.getTag("role").contains("editor")
};

@id("locked-documents")
forbid (principal, action, resource is Acme::Document)
when { resource.locked }
unless { context has tokens.acme_id_token && context.tokens.acme_id_token.hasTag("acr") &&
         context.tokens.acme_id_token.getTag("acr").contains("mfa") };
"""

METADATA = {
    "polang_version": "4.0.0",
    "policy_store": {
        "id": "docs",
        "name": "Docs",
        "version": "1.0.0",
        "created_date": "2025-01-01T00:00:00Z",
        "updated_date": "2025-01-01T00:00:00Z",
    },
}


def issuers_for(acme: OidcProvider, partner: OidcProvider) -> dict[str, Any]:
    return {
        "acme": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {
                "access_token": {"entity_type_name": ACCESS, "required_claims": ["exp", "jti"]},
                "id_token": {"entity_type_name": ID},
            },
        },
        "partner": {
            "name": "Partner",
            "openid_configuration_endpoint": partner.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": PARTNER}},
        },
    }


def write_store(root: Path, schema: str, issuers: dict[str, Any]) -> Path:
    files = {
        "metadata.json": json.dumps(METADATA),
        "schema.polangschema": schema,
        "policies/docs.polang": POLICIES,
        "trusted-issuers/issuers.json": json.dumps(issuers),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def doc(uid: str = "d1", locked: bool = False) -> dict[str, Any]:
    return {"uid": {"type": "Acme::Document", "id": uid}, "attrs": {"locked": locked}}


@pytest.fixture
def acme(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/realms/acme", keys=("RS256", "ES256"))


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
            **props,
        }
        engine = Engine(cfg, ssl_context=client_ssl_context)
        made.append(engine)
        return engine

    yield make
    for e in made:
        e.close()


@pytest.fixture
def engine(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> Engine:
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    return make_engine(store, ENGINE_LOG_TYPE="memory")


def kinds(result: Any) -> list[tuple[int, str]]:
    return [(d.index, d.kind) for d in result.dropped_tokens or []]


def test_scope_tag_decides(engine: Engine, acme: OidcProvider) -> None:
    ok = engine.authorize_multi_issuer(
        [TokenInput(ACCESS, acme.token(scope=["docs:read", "docs:list"]))], READ, doc()
    )
    assert ok.decision is True
    assert ok.response.diagnostics.reason == ["read-with-scope"]
    assert ok.dropped_tokens == []
    no = engine.authorize_multi_issuer(
        [TokenInput(ACCESS, acme.token(scope=["docs:list"]))], READ, doc()
    )
    assert no.decision is False and no.response.diagnostics.reason == []
    # a scope given as a space-free string is a one-element set
    one = engine.authorize_multi_issuer(
        [TokenInput(ACCESS, acme.token(scope="docs:read"))], READ, doc()
    )
    assert one.decision is True


def test_tokens_of_two_issuers_and_three_types(
    engine: Engine, acme: OidcProvider, partner: OidcProvider
) -> None:
    access = TokenInput(ACCESS, acme.token(jti="a1", scope=["docs:read"]))
    editor = TokenInput(PARTNER, partner.token(jti="p1", role=["editor"]))
    viewer = TokenInput(PARTNER, partner.token(jti="p2", role="viewer"))
    mfa = TokenInput(ID, acme.token(key=acme.keys[1], jti="i1", acr="mfa"))

    r = engine.authorize_multi_issuer([access, editor], WRITE, doc())
    assert (r.decision, r.response.diagnostics.reason) == (True, ["write-with-partner-editor"])
    assert engine.authorize_multi_issuer([access, viewer], WRITE, doc()).decision is False
    assert engine.authorize_multi_issuer([editor], WRITE, doc()).decision is False

    locked = engine.authorize_multi_issuer([access, editor], WRITE, doc(locked=True))
    assert (locked.decision, locked.response.diagnostics.reason) == (False, ["locked-documents"])
    unlocked = engine.authorize_multi_issuer([access, editor, mfa], WRITE, doc(locked=True))
    assert unlocked.decision is True and unlocked.dropped_tokens == []

    logs = engine.get_logs_by_request_id(unlocked.request_id)
    assert logs[0]["tokens"] == {
        f"{ACCESS}#0": {"jti": "a1"},
        f"{PARTNER}#1": {"jti": "p1"},
        f"{ID}#2": {"jti": "i1"},
    }
    text = json.dumps(engine.pop_logs())
    for t in (access, editor, mfa):
        assert t.payload.split(".")[2] not in text


def test_bad_tokens_are_dropped_and_the_rest_decide(
    engine: Engine,
    acme: OidcProvider,
    make_provider: Callable[..., OidcProvider],
    clock: FakeClock,
) -> None:
    rogue = make_provider("/rogue")  # a real provider, but not one the store trusts
    now = int(clock.now)
    forger = acme.add_key("RS256", kid=acme.keys[0].kid, slot=1, publish=False)
    tokens = [
        TokenInput(ACCESS, acme.token(iat=now - 7200, exp=now - 3600, scope=["docs:read"])),
        TokenInput(ACCESS, acme.token(key=forger, scope=["docs:read"])),
        TokenInput(ACCESS, hs256_with_public_key(acme.keys[0], acme.claims(scope="docs:read"))),
        TokenInput(ACCESS, rogue.token(scope=["docs:read"])),
        TokenInput(ACCESS, acme.token(jti=None, scope=["docs:read"])),
        TokenInput(ACCESS, acme.token(nbf=now + 3600, scope=["docs:read"])),
        TokenInput(ACCESS, acme.token(jti="good", scope=["docs:list"])),
    ]
    r = engine.authorize_multi_issuer(tokens, READ, doc())
    assert kinds(r) == [
        (0, "expired"),
        (1, "signature"),
        (2, "signature"),
        (3, "untrusted_issuer"),
        (4, "missing_claim"),
        (5, "not_yet_valid"),
    ]
    # the one good token decides: its scope lacks docs:read
    assert r.decision is False and r.response.diagnostics.reason == []
    for d in r.dropped_tokens or []:
        assert d.mapping == ACCESS and d.message
        assert tokens[d.index].payload not in d.message
    assert rogue.issuer in (r.dropped_tokens or [])[3].message

    # the same bad tokens around a good one with the right scope: allow
    tokens[-1] = TokenInput(ACCESS, acme.token(jti="good2", scope=["docs:read"]))
    r = engine.authorize_multi_issuer(tokens, READ, doc())
    assert r.decision is True and len(r.dropped_tokens or []) == 6
    assert r.to_dict()["dropped_tokens"][3]["reason"]["kind"] == "untrusted_issuer"


def test_all_tokens_bad_is_a_token_error(
    engine: Engine, acme: OidcProvider, make_provider: Callable[..., OidcProvider], clock: FakeClock
) -> None:
    rogue = make_provider("/rogue")
    now = int(clock.now)
    tokens = [
        TokenInput(ACCESS, acme.token(exp=now - 10)),
        TokenInput(ACCESS, rogue.token()),
        TokenInput(ACCESS, "not.a.jwt"),
    ]
    with pytest.raises(TokenError) as exc:
        engine.authorize_multi_issuer(tokens, READ, doc())
    msg = str(exc.value)
    for i, word in enumerate(("expired", "untrusted_issuer", "invalid_input")):
        assert f"token {i} ({ACCESS}): {word}" in msg, msg
    reasons = json.loads(json.dumps(exc.value.reasons))
    assert [(r["index"], r["mapping"], r["reason"]["kind"]) for r in reasons] == [
        (0, ACCESS, "expired"),
        (1, ACCESS, "untrusted_issuer"),
        (2, ACCESS, "invalid_input"),
    ]
    for t in tokens:
        assert t.payload not in msg
    with pytest.raises(TokenError):
        engine.authorize_multi_issuer([], READ, doc())


def test_unknown_mapping_is_dropped(engine: Engine, acme: OidcProvider) -> None:
    r = engine.authorize_multi_issuer(
        [
            TokenInput("Acme::Refresh_token", acme.token()),
            TokenInput(ACCESS, acme.token(scope=["docs:read"])),
        ],
        READ,
        doc(),
    )
    assert r.decision is True
    assert kinds(r) == [(0, "untrusted_issuer")]


def test_schema_without_the_multi_issuer_structure(
    tmp_path: Path,
    acme: OidcProvider,
    partner: OidcProvider,
    make_engine: Callable[..., Engine],
) -> None:
    # Partner has no TrustedIssuer (its token's iss is a String), Id_token has no tags,
    # and `tokens` in the context is not a record with a Long total_token_count.
    partner_part = SCHEMA[SCHEMA.index("namespace Partner") :]
    lacking = (
        SCHEMA.replace(partner_part, "")
        .replace('"tokens"?: TokensContext', '"tokens"?: { "total_token_count": String }')
        .replace(f"entity Id_token = {TOKEN_ATTRS};", 'entity Id_token = { "jti"?: String };')
        + 'namespace Partner {\n    entity Access_token = {\n        "iss"?: String,\n'
        + "    } tags Set<String>;\n}\n"
    )
    policies_without_tokens = """@id("plain")
permit (principal, action == Acme::Action::"read", resource is Acme::Document)
when { !resource.locked };
"""
    store = write_store(tmp_path / "lacking", lacking, issuers_for(acme, partner))
    (store / "policies" / "docs.polang").write_text(policies_without_tokens)
    engine = make_engine(store)
    with pytest.raises(ValidationError) as exc:
        engine.authorize_multi_issuer([TokenInput(ACCESS, acme.token())], READ, doc())
    findings = [str(f) for f in exc.value.findings]
    wanted = [
        "entity type `Partner::TrustedIssuer` is not declared",
        "`Acme::Id_token` must declare `tags Set<String>`",
        "`Partner::Access_token.iss` is declared as `String`, but issuer `Partner` builds `iss` "
        "as `Partner::TrustedIssuer`",
        'context of Acme::Action::"read" lacks the required Long field `total_token_count`',
    ]
    for w in wanted:
        assert any(w in f for f in findings), (w, findings)
        assert w in str(exc.value)
    assert not any("Acme::Access_token" in f for f in findings)  # that one is complete
    # the five engine-filled attributes may be left out (Id_token declares only jti)
    assert not any("lacks the attribute" in f for f in findings), findings
    # only the requested action's context is checked
    assert not any("write" in f for f in findings), findings
    with pytest.raises(ValidationError, match=r'Acme::Action::"write"'):
        engine.authorize_multi_issuer([TokenInput(ACCESS, acme.token())], WRITE, doc())
    # unsigned authorization does not need that structure
    assert engine.authorize_unsigned(READ, doc(), None, None).decision is True
