"""Identity-provider recipes: tokens shaped like Keycloak's, Auth0's, Okta's and Microsoft
Entra ID's, signed by loopback OpenID providers, decided by ``examples/stores/identity-providers``.

The example store is copied with its trusted issuers' endpoints pointed at the loopback
providers (each with the provider's own path: ``/realms/acme``, the root for Auth0,
``/oauth2/default``, ``/<tenant id>/v2.0``); everything else is the store as shipped.
Claim shapes follow the providers' public documentation:

- Keycloak: access tokens with ``realm_access.roles``, ``resource_access.<client>.roles``
  and a space-delimited ``scope`` (Server Administration Guide, "Role scope mappings" and
  the "roles" client scope,
  https://www.keycloak.org/docs/latest/server_admin/index.html#_role_scope_mappings;
  Securing Applications, https://www.keycloak.org/docs/latest/securing_apps/index.html).
- Auth0: the Auth0 token profile (``iss`` with a trailing ``/``, no ``jti``, ``aud`` array
  with the userinfo URL, ``azp``, space-delimited ``scope``, RBAC ``permissions``;
  https://auth0.com/docs/secure/tokens/access-tokens/access-token-profiles) and namespaced
  custom claims (https://auth0.com/docs/secure/tokens/json-web-tokens/create-custom-claims).
- Okta: custom authorization server access tokens (``ver``, ``jti`` ``AT.``..., ``cid``,
  ``uid``, ``scp`` as an array; https://developer.okta.com/docs/reference/api/oidc/#access-token,
  reserved claims https://support.okta.com/help/s/article/list-of-reserved-claim-names) with
  a groups claim
  (https://developer.okta.com/docs/guides/customize-tokens-returned-from-okta/overview/).
- Microsoft Entra ID: v2.0 access tokens (``uti`` instead of ``jti``, ``tid``, ``oid``,
  ``azp``, ``scp`` a space-delimited string, ``roles``, ``wids``, ``ver`` ``2.0``;
  https://learn.microsoft.com/en-us/entra/identity-platform/access-token-claims-reference)
  and per-tenant issuers ``https://login.microsoftonline.com/<tenant id>/v2.0``
  (https://learn.microsoft.com/en-us/entra/identity-platform/access-tokens#validate-tokens,
  https://learn.microsoft.com/en-us/entra/identity-platform/v2-protocols-oidc).
"""

from __future__ import annotations

import json
import shutil
import ssl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, TokenInput
from polang.cli import main
from polang.errors import PolicyStoreError
from polang.inputs.problems import PolicyStoreLoadError
from polang.store.source import PolicyStoreSource
from polang.tokens import IssuerSettings, TokenProcessor, TokenSettings
from polang.tokens.claim_paths import MAX_CLAIM_PATH_DEPTH, MAX_NESTED_CLAIM_TAGS
from polang.tokens.claims import MAX_SCOPE_CHARS, MAX_SCOPES
from tokens.conftest import FakeClock
from tokens.oidc_server import OidcProvider, SigningKey, body, private_key

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "stores" / "identity-providers"

CONTOSO = "8c0a0b0e-3f1d-4c27-9d2e-6a5b4c3d2e1f"
FABRIKAM = "3b9d1f2a-5e6c-4a7b-8c9d-0e1f2a3b4c5d"
UNTRUSTED_TENANT = "0f0f0f0f-1e1e-4d4d-8c8c-7b7b7b7b7b7b"
ENTRA_APP = "6e2f4a1b-7c3d-4e5f-8a9b-0c1d2e3f4a5b"

READ = 'Docs::Action::"read"'
WRITE = 'Docs::Action::"write"'
ADMIN = 'Docs::Action::"administer"'
DOC = {"uid": {"type": "Docs::Document", "id": "d1"}, "attrs": {"classification": "internal"}}


class Idps:
    """The four providers; Entra ID's two trusted tenants share one host, as they do."""

    def __init__(self, make: Callable[..., OidcProvider]) -> None:
        self.keycloak = make("/realms/acme")
        self.auth0 = make("")
        self.auth0.discovery_issuer = self.auth0.issuer + "/"  # Auth0's issuer ends in "/"
        self.okta = make("/oauth2/default")
        self.entra = make(f"/{CONTOSO}/v2.0")
        self.fabrikam_key = SigningKey("RS256", "fabrikam-1", private_key("RS256", slot=1))
        self.fabrikam_issuer = self.serve_tenant(FABRIKAM, self.fabrikam_key)

    def serve_tenant(self, tenant: str, key: SigningKey) -> str:
        """Another tenant on the Entra host: its discovery document and keys."""
        base = self.entra.base
        issuer = f"{base}/{tenant}/v2.0"
        doc = {"issuer": issuer, "jwks_uri": f"{base}/{tenant}/discovery/v2.0/keys"}
        self.entra.routes[f"/{tenant}/v2.0/.well-known/openid-configuration"] = body(
            json.dumps(doc).encode()
        )
        self.entra.routes[f"/{tenant}/discovery/v2.0/keys"] = body(
            json.dumps({"keys": [key.jwk]}).encode()
        )
        return issuer

    def endpoints(self) -> dict[str, str]:
        """Issuer id -> the loopback endpoint that replaces the store's."""
        return {
            "keycloak": self.keycloak.discovery_url,
            "auth0": self.auth0.discovery_url,
            "okta": self.okta.discovery_url,
            "contoso": self.entra.discovery_url,
            "fabrikam": f"{self.fabrikam_issuer}/.well-known/openid-configuration",
        }

    # ---------------------------------------------------------- tokens as sent

    def keycloak_token(self, **over: Any) -> str:
        now = int(self.keycloak.clock())
        claims = {
            "exp": now + 300,
            "iat": now,
            "auth_time": now - 5,
            "jti": str(uuid.uuid4()),
            "iss": self.keycloak.issuer,
            "aud": ["docs-api", "account"],
            "sub": "f1c3a0de-1b5e-4f0a-9d7c-2c3b4a5d6e7f",
            "typ": "Bearer",
            "azp": "docs-web",
            "sid": str(uuid.uuid4()),
            "acr": "1",
            "allowed-origins": ["https://docs.example.com"],
            "realm_access": {
                "roles": ["default-roles-acme", "offline_access", "uma_authorization", "editor"]
            },
            "resource_access": {
                "docs-api": {"roles": ["reader"]},
                "account": {"roles": ["manage-account", "manage-account-links", "view-profile"]},
            },
            "scope": "openid docs:read email profile",
            "email_verified": True,
            "name": "Alice Doe",
            "preferred_username": "alice",
            "given_name": "Alice",
            "family_name": "Doe",
            "email": "alice@example.com",
        }
        return self.keycloak.keys[0].sign(_with(claims, over))

    def auth0_token(self, **over: Any) -> str:
        now = int(self.auth0.clock())
        claims = {
            "https://docs.example.com/roles": ["admin"],
            "iss": self.auth0.issuer + "/",
            "sub": "auth0|6553da60a54af58e29493993",
            "aud": ["https://docs.example.com/api", f"{self.auth0.issuer}/userinfo"],
            "iat": now,
            "exp": now + 86400,
            "azp": "K1AUPhZq8mRi0Q0pjhkfu1D7y6KjDQja",
            "scope": "openid profile email read:documents",
            "permissions": ["read:documents", "write:documents"],
        }
        return self.auth0.keys[0].sign(_with(claims, over))

    def okta_token(self, **over: Any) -> str:
        now = int(self.okta.clock())
        claims = {
            "ver": 1,
            "jti": "AT.u0r2Zp8sC0pSK6fVvPbp3dA5mK9yYdQwL0oN2Zk3xRc",
            "iss": self.okta.issuer,
            "aud": "api://docs",
            "iat": now,
            "exp": now + 3600,
            "cid": "0oa1b2c3d4e5f6g7h8i9",
            "uid": "00u1a2b3c4d5e6f7g8h9",
            "scp": ["openid", "docs.read", "docs.write"],
            "auth_time": now - 10,
            "sub": "alice@example.com",
            "groups": ["Everyone", "Docs Writers"],
        }
        return self.okta.keys[0].sign(_with(claims, over))

    def entra_token(self, tenant: str = CONTOSO, key: SigningKey | None = None, **over: Any) -> str:
        now = int(self.entra.clock())
        claims = {
            "aud": ENTRA_APP,
            "iss": f"{self.entra.base}/{tenant}/v2.0",
            "iat": now,
            "nbf": now,
            "exp": now + 3600,
            "aio": "AWQAm/8YAAAA",
            "azp": "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9",
            "azpacr": "0",
            "name": "Alice Doe",
            "oid": "00000000-0000-0000-66f3-3332eca7ea81",
            "preferred_username": "alice@contoso.com",
            "rh": "0.ARoAv4j5cvGGr0GRqy180BHbR",
            "roles": ["Docs.Write", "Docs.Admin"],
            "scp": "Docs.Read User.Read",
            "sub": "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ",
            "tid": tenant,
            "uti": uuid.uuid4().hex[:22],
            "ver": "2.0",
            "wids": ["b79fbf4d-3ef9-4689-8143-76b194e85509"],
        }
        signer = key or (self.fabrikam_key if tenant == FABRIKAM else self.entra.keys[0])
        return signer.sign(_with(claims, over))


def _with(claims: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(claims)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def copy_store(root: Path, endpoints: dict[str, str], **metadata: dict[str, Any]) -> Path:
    """The example store with its endpoints on loopback; ``metadata`` replaces token
    metadata fields per issuer id (``{"keycloak": {"role_mapping": ...}}``)."""
    shutil.copytree(EXAMPLE, root)
    for f in (root / "trusted-issuers").glob("*.json"):
        records = json.loads(f.read_text())
        for issuer_id, rec in records.items():
            rec["openid_configuration_endpoint"] = endpoints[issuer_id]
            rec["token_metadata"]["access_token"].update(metadata.get(issuer_id, {}))
        f.write_text(json.dumps(records, indent=2))
    return root


@pytest.fixture
def idps(make_provider: Callable[..., OidcProvider]) -> Idps:
    return Idps(make_provider)


@pytest.fixture
def make_engine(
    tmp_path: Path, idps: Idps, client_ssl_context: ssl.SSLContext
) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(metadata: dict[str, dict[str, Any]] | None = None, **props: Any) -> Engine:
        store = copy_store(tmp_path / f"store{len(made)}", idps.endpoints(), **(metadata or {}))
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
def engine(make_engine: Callable[..., Engine]) -> Engine:
    return make_engine()


def decide(engine: Engine, mapping: str, jwt: str, action: str) -> tuple[bool, list[str]]:
    r = engine.authorize_multi_issuer([TokenInput(mapping, jwt)], action, DOC)
    assert r.dropped_tokens == [], r.dropped_tokens
    return r.decision, list(r.response.diagnostics.reason)


def dropped(engine: Engine, idps: Idps, mapping: str, jwt: str) -> tuple[str, str]:
    """(kind, message) of a dropped token; a good Okta token beside it keeps the call
    deciding (with no token left the call raises)."""
    good = TokenInput("Okta::Access_token", idps.okta_token())
    r = engine.authorize_multi_issuer([TokenInput(mapping, jwt), good], READ, DOC)
    [d] = r.dropped_tokens
    return d.kind, d.message


def warnings(engine: Engine) -> list[str]:
    return [x["msg"] for x in engine.pop_logs() if x.get("level") == "WARN"]


def processor(
    idps: Idps, client_ssl_context: ssl.SSLContext, clock: FakeClock, issuer_id: str
) -> TokenProcessor:
    """A token processor for one issuer of the example store (roles, tags to inspect)."""
    files = (EXAMPLE / "trusted-issuers").glob("*.json")
    records = {k: v for f in files for k, v in json.loads(f.read_text()).items()}
    rec = dict(records[issuer_id], openid_configuration_endpoint=idps.endpoints()[issuer_id])
    settings = TokenSettings(ssl_context=client_ssl_context, http_max_retries=0)
    return TokenProcessor([IssuerSettings.from_dict(issuer_id, rec)], settings, clock=clock)


# ---------------------------------------------------------------- the example store


def test_the_example_store_validates_strictly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "validate", "--strict", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "valid store 'docs-idp-recipes'" in out and "trusted issuers: 5" in out


# ---------------------------------------------------------------- Keycloak


def test_keycloak_nested_roles_and_scope_decide(engine: Engine, idps: Idps) -> None:
    kc = "Keycloak::Access_token"
    assert decide(engine, kc, idps.keycloak_token(), READ) == (True, ["keycloak-readers"])
    assert decide(engine, kc, idps.keycloak_token(), WRITE) == (True, ["keycloak-realm-editors"])
    assert decide(engine, kc, idps.keycloak_token(), ADMIN) == (False, [])
    # the client role read from resource_access.docs-api.roles, not from another client
    other_client = {"account": {"roles": ["reader"]}}
    assert decide(engine, kc, idps.keycloak_token(resource_access=other_client), READ) == (
        False,
        [],
    )
    # the scope attribute is declared Set<String>: each space-delimited scope is in it
    no_scope = idps.keycloak_token(scope="openid email profile")
    assert decide(engine, kc, no_scope, READ) == (False, [])
    suspended = {"roles": ["editor", "suspended"]}
    assert decide(engine, kc, idps.keycloak_token(realm_access=suspended), WRITE) == (
        False,
        ["keycloak-suspended"],
    )


def test_keycloak_role_mapping_paths_collect_roles(
    idps: Idps, client_ssl_context: ssl.SSLContext, clock: FakeClock
) -> None:
    proc = processor(idps, client_ssl_context, clock, "keycloak")
    try:
        out = proc.process([TokenInput("Keycloak::Access_token", idps.keycloak_token())])
    finally:
        proc.close()
    [tok] = out.tokens
    assert tok.roles == (
        "default-roles-acme",
        "offline_access",
        "uma_authorization",
        "editor",
        "reader",
    )
    tags = tok.entity.tags
    assert set(tags["realm_access.roles"]) == {
        "default-roles-acme",
        "offline_access",
        "uma_authorization",
        "editor",
    }
    assert set(tags["resource_access.account.roles"]) == {
        "manage-account",
        "manage-account-links",
        "view-profile",
    }
    assert set(tags["scope"]) == {"openid", "docs:read", "email", "profile"}
    assert len(tags["realm_access"]) == 1  # the object itself stays its JSON text


# ---------------------------------------------------------------- Auth0


def test_auth0_scope_string_permissions_and_namespaced_roles(engine: Engine, idps: Idps) -> None:
    a0 = "Auth0::Access_token"
    assert decide(engine, a0, idps.auth0_token(), READ) == (True, ["auth0-readers"])
    assert decide(engine, a0, idps.auth0_token(), WRITE) == (True, ["auth0-writers"])
    assert decide(engine, a0, idps.auth0_token(), ADMIN) == (True, ["auth0-admins"])
    assert decide(engine, a0, idps.auth0_token(scope="openid profile"), READ) == (False, [])
    not_admin = idps.auth0_token(**{"https://docs.example.com/roles": ["viewer"]})
    assert decide(engine, a0, not_admin, ADMIN) == (False, [])


def test_auth0_token_for_another_api_is_dropped(engine: Engine, idps: Idps) -> None:
    other = idps.auth0_token(aud=["https://billing.example.com/api"])
    kind, message = dropped(engine, idps, "Auth0::Access_token", other)
    assert kind == "audience" and "https://docs.example.com/api" in message


def test_auth0_namespaced_role_mapping(
    idps: Idps, client_ssl_context: ssl.SSLContext, clock: FakeClock
) -> None:
    proc = processor(idps, client_ssl_context, clock, "auth0")
    try:
        out = proc.process([TokenInput("Auth0::Access_token", idps.auth0_token())])
    finally:
        proc.close()
    [tok] = out.tokens
    assert tok.roles == ("admin",)
    assert tok.uid.id == "auth0|6553da60a54af58e29493993"  # token_id "sub": no jti in the profile
    assert set(tok.entity.tags["https://docs.example.com/roles"]) == {"admin"}


# ---------------------------------------------------------------- Okta


def test_okta_scp_array_and_groups(engine: Engine, idps: Idps) -> None:
    ok = "Okta::Access_token"
    assert decide(engine, ok, idps.okta_token(), READ) == (True, ["okta-readers"])
    assert decide(engine, ok, idps.okta_token(), WRITE) == (True, ["okta-writers"])
    assert decide(engine, ok, idps.okta_token(groups=["Everyone"]), WRITE) == (False, [])
    assert decide(engine, ok, idps.okta_token(scp=["openid"]), READ) == (False, [])


# ---------------------------------------------------------------- Entra ID


def test_entra_tenants_are_issuers_of_their_own(engine: Engine, idps: Idps) -> None:
    en = "Entra::Access_token"
    assert decide(engine, en, idps.entra_token(), READ) == (True, ["entra-readers"])
    assert decide(engine, en, idps.entra_token(), WRITE) == (True, ["entra-writers"])
    assert decide(engine, en, idps.entra_token(), ADMIN) == (True, ["entra-home-tenant-admins"])
    # the partner tenant: same host, its own keys; Docs.Admin counts only at home
    fab = idps.entra_token(FABRIKAM)
    assert decide(engine, en, fab, READ) == (True, ["entra-readers"])
    assert decide(engine, en, idps.entra_token(FABRIKAM), ADMIN) == (False, [])


def test_entra_tenant_forgery_and_strangers_are_dropped(engine: Engine, idps: Idps) -> None:
    en = "Entra::Access_token"
    # fabrikam's iss, signed with contoso's key: fabrikam's keys do not verify it
    forged = idps.entra_token(FABRIKAM, key=idps.entra.keys[0])
    assert dropped(engine, idps, en, forged)[0] == "signature"
    # contoso's iss, signed by fabrikam
    assert (
        dropped(engine, idps, en, idps.entra_token(CONTOSO, key=idps.fabrikam_key))[0]
        == "signature"
    )
    # a tenant nobody trusts, on the same host: dropped without a fetch for it
    kind, message = dropped(engine, idps, en, idps.entra_token(UNTRUSTED_TENANT))
    assert kind == "untrusted_issuer" and UNTRUSTED_TENANT in message
    assert not [p for p in idps.entra.requests if UNTRUSTED_TENANT in p]
    # a token of contoso's issuer but another app: expected_audience
    assert dropped(engine, idps, en, idps.entra_token(aud="api://someone-else"))[0] == "audience"


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        ("https://login.microsoftonline.com/common/v2.0", "serves many tenants"),
        ("https://login.microsoftonline.com/organizations/v2.0", "serves many tenants"),
        ("https://login.microsoftonline.com/consumers/v2.0", "9188040d-6c67-4c5b-b112"),
        ("https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0", "is not a tenant id"),
        (f"https://login.microsoftonline.com/{CONTOSO}", "v1.0 endpoint"),
        (f"https://login.microsoftonline.us/{CONTOSO}", "v1.0 endpoint"),
    ],
)
def test_entra_endpoints_that_never_match_refuse_the_store(endpoint: str, says: str) -> None:
    rec = {
        "name": "Entra",
        "openid_configuration_endpoint": f"{endpoint}/.well-known/openid-configuration",
    }
    with pytest.raises(PolicyStoreError) as e:
        IssuerSettings.from_dict("entra", rec)
    assert "openid_configuration_endpoint" in str(e.value) and says in str(e.value)
    assert "<tenant id>/v2.0/.well-known/openid-configuration" in str(e.value)


def test_an_entra_tenant_endpoint_is_accepted() -> None:
    rec = {
        "name": "Entra",
        "openid_configuration_endpoint": (
            f"https://login.microsoftonline.com/{CONTOSO}/v2.0/.well-known/openid-configuration"
        ),
    }
    assert IssuerSettings.from_dict("contoso", rec).issuer_id == "contoso"


# ---------------------------------------------------------------- scopes, hostile


def test_scope_limits_drop_the_token_naming_the_limit(
    make_engine: Callable[..., Engine], idps: Idps
) -> None:
    engine = make_engine(ENGINE_TOKEN_MAX_SIZE=4_000_000)
    a0 = "Auth0::Access_token"
    at_limit = " ".join(f"s{i}" for i in range(MAX_SCOPES - 1)) + " read:documents"
    assert decide(engine, a0, idps.auth0_token(scope=at_limit), READ) == (True, ["auth0-readers"])
    many = " ".join(f"s{i}" for i in range(5000)) + " read:documents"
    kind, message = dropped(engine, idps, a0, idps.auth0_token(scope=many))
    assert kind == "invalid_input" and "'scope'" in message and "MAX_SCOPES" in message
    huge = "read:documents " + "x" * (1024 * 1024)  # one megabyte
    kind, message = dropped(engine, idps, a0, idps.auth0_token(scope=huge))
    assert kind == "invalid_input" and "MAX_SCOPE_CHARS" in message
    assert len(huge) > MAX_SCOPE_CHARS
    as_array = [f"s{i}" for i in range(MAX_SCOPES + 1)]
    kind, message = dropped(engine, idps, "Okta::Access_token", idps.okta_token(scp=as_array))
    assert kind == "invalid_input" and "'scp'" in message and "MAX_SCOPES" in message


def test_scope_of_the_wrong_type_or_odd_spacing(engine: Engine, idps: Idps) -> None:
    a0 = "Auth0::Access_token"
    # a number where a scope string is expected: a one-element tag, no scope matches
    assert decide(engine, a0, idps.auth0_token(scope=5), READ) == (False, [])
    # scopes are split at spaces only (RFC 6749 section 3.3); runs of spaces are one
    spaced = idps.auth0_token(scope="  openid   read:documents ")
    assert decide(engine, a0, spaced, READ) == (True, ["auth0-readers"])
    tabbed = idps.auth0_token(scope="openid\tread:documents")
    assert decide(engine, a0, tabbed, READ) == (False, [])
    # Keycloak declares scope: Set<String>; a number there is left out (logged), kept a tag
    kc = "Keycloak::Access_token"
    assert decide(engine, kc, idps.keycloak_token(scope={"a": 1}), READ) == (False, [])
    assert any("'scope'" in w for w in warnings(engine))


# ---------------------------------------------------------------- nested claims, hostile


def test_nested_claims_too_many_or_too_deep(engine: Engine, idps: Idps) -> None:
    kc = "Keycloak::Access_token"
    flood = {f"client-{i}": {"roles": ["r"]} for i in range(MAX_NESTED_CLAIM_TAGS)}
    kind, message = dropped(engine, idps, kc, idps.keycloak_token(resource_access=flood))
    assert kind == "invalid_input" and "MAX_NESTED_CLAIM_TAGS" in message
    # nesting deeper than MAX_CLAIM_PATH_DEPTH: the deep part stays its parent's JSON text
    deep: Any = {"roles": ["editor"]}
    for i in range(20):
        deep = {f"k{i}": deep}
    token = idps.keycloak_token(realm_access={"roles": ["editor"]}, deep=deep)
    assert decide(engine, kc, token, WRITE) == (True, ["keycloak-realm-editors"])


def test_nested_tags_stop_at_the_depth_limit(
    idps: Idps, client_ssl_context: ssl.SSLContext, clock: FakeClock
) -> None:
    proc = processor(idps, client_ssl_context, clock, "keycloak")
    deep: Any = "bottom"
    for i in reversed(range(12)):
        deep = {f"k{i}": deep}
    try:
        out = proc.process([TokenInput("Keycloak::Access_token", idps.keycloak_token(deep=deep))])
    finally:
        proc.close()
    tags = out.tokens[0].entity.tags
    paths = sorted(t for t in tags if t.startswith("deep"))
    assert len(paths) == MAX_CLAIM_PATH_DEPTH
    assert max(p.count(".") for p in paths) + 1 == MAX_CLAIM_PATH_DEPTH


def test_a_top_level_claim_named_like_a_path_wins(engine: Engine, idps: Idps) -> None:
    kc = "Keycloak::Access_token"
    token = idps.keycloak_token(
        realm_access={"roles": ["editor"]}, **{"realm_access.roles": ["viewer"]}
    )
    assert decide(engine, kc, token, WRITE) == (False, [])


# ---------------------------------------------------------------- paths that match nothing


def test_unmatched_role_mapping_warns_once_with_a_hint(
    make_engine: Callable[..., Engine], idps: Idps
) -> None:
    engine = make_engine({"keycloak": {"role_mapping": ["realm_access.role"]}})
    engine.pop_logs()
    kc = "Keycloak::Access_token"
    for _ in range(3):  # three tokens, one warning
        decide(engine, kc, idps.keycloak_token(), WRITE)
    [warning] = [w for w in warnings(engine) if "role_mapping" in w]
    assert "'realm_access.role' matched nothing" in warning
    assert "did you mean 'realm_access.roles'?" in warning
    assert "once per path" in warning
    assert "alice" not in warning  # names only, never claim values


@pytest.mark.parametrize(
    ("realm_access", "says"),
    [
        (5, "'realm_access' is an integer, not an object with 'roles'"),
        ("editor", "'realm_access' is a string"),
        ({"roles": 7}, "it is an integer, not a role name or an array of them"),
        ({"roles": [1, 2]}, "an array"),
        (None, "the token has no 'realm_access'"),
    ],
)
def test_role_claims_of_the_wrong_type_warn(
    make_engine: Callable[..., Engine], idps: Idps, realm_access: Any, says: str
) -> None:
    engine = make_engine()
    engine.pop_logs()
    token = idps.keycloak_token(realm_access=realm_access)
    assert decide(engine, "Keycloak::Access_token", token, WRITE) == (False, [])
    found = [w for w in warnings(engine) if "realm_access.roles" in w]
    assert len(found) == 1 and says in found[0], found


def test_unmatched_claim_mapping_warns(make_engine: Callable[..., Engine], idps: Idps) -> None:
    mapping = {"resource_access.docs-apj": {"parser": "json", "type": "Keycloak::Url"}}
    engine = make_engine({"keycloak": {"claim_mapping": mapping}})
    engine.pop_logs()
    decide(engine, "Keycloak::Access_token", idps.keycloak_token(), READ)
    [warning] = [w for w in warnings(engine) if "claim_mapping" in w]
    assert "did you mean 'resource_access.docs-api'?" in warning


# ---------------------------------------------------------------- paths refused at load


def write_issuer(root: Path, metadata: dict[str, Any]) -> Path:
    shutil.copytree(EXAMPLE, root)
    f = root / "trusted-issuers" / "keycloak.json"
    records = json.loads(f.read_text())
    records["keycloak"]["token_metadata"]["access_token"].update(metadata)
    f.write_text(json.dumps(records))
    return root


@pytest.mark.parametrize(
    ("metadata", "location", "says"),
    [
        ({"role_mapping": "a.b.c.d.e.f.g.h.i"}, "role_mapping", "MAX_CLAIM_PATH_DEPTH"),
        ({"role_mapping": ["roles", "r" * 300]}, "role_mapping[1]", "MAX_CLAIM_PATH_CHARS"),
        ({"role_mapping": "realm_access..roles"}, "role_mapping", "empty part"),
        ({"role_mapping": ".roles"}, "role_mapping", "empty part"),
        ({"role_mapping": "$.realm_access.roles"}, "role_mapping", "JSONPath"),
        ({"role_mapping": "/realm_access/roles"}, "role_mapping", "JSON Pointer"),
        ({"role_mapping": "groups[0]"}, "role_mapping", "walks objects only"),
        ({"role_mapping": " roles"}, "role_mapping", "whitespace"),
        ({"role_mapping": 5}, "role_mapping", "must be a claim name"),
        ({"role_mapping": ["roles", 7]}, "role_mapping[1]", "non-empty string"),
        ({"user_id": "a\u0007b"}, "user_id", "control character"),
        ({"required_claims": ["realm_access."]}, "required_claims[0]", "empty part"),
        (
            {"claim_mapping": {"a..b": {"parser": "json", "type": "Keycloak::Url"}}},
            'claim_mapping["a..b"]',
            "empty part",
        ),
    ],
)
def test_paths_that_cannot_work_refuse_the_store(
    tmp_path: Path, metadata: dict[str, Any], location: str, says: str
) -> None:
    root = write_issuer(tmp_path / "s", metadata)
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.directory(root).load()
    assert f"access_token.{location}" in str(e.value) and says in str(e.value), str(e.value)


def test_a_misspelt_path_warns_and_fails_strict_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_issuer(tmp_path / "s", {"role_mapping": "realm_acess.roles"})
    store = PolicyStoreSource.directory(root).load()
    [warning] = [w for w in store.warnings if w.kind == "claim_path"]
    assert "did you mean 'realm_access'?" in warning.message
    assert main(["store", "validate", "--strict", str(root)]) != 0
    captured = capsys.readouterr()
    assert "realm_acess.roles" in captured.out + captured.err
    assert "did you mean 'realm_access'?" in captured.out + captured.err
    # a plural or singular of a well-known claim is a claim of its own: no warning
    ok = write_issuer(tmp_path / "t", {"role_mapping": ["group", "scopes"]})
    assert not [
        w for w in PolicyStoreSource.directory(ok).load().warnings if w.kind == "claim_path"
    ]
