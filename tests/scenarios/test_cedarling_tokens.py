"""A store shaped like Cedarling's published multi-issuer test store, decided with signed tokens.

Cedarling's ``policy-store-multi-issuer-basic`` store (a legacy YAML file) is written the
way Cedarling's users write theirs, and differs from the layout polang's own docs show:

- token entity types declare the engine's attributes *required* (``token_type: String``,
  ``jti``, ``validated_at``, ``exp``) and a required ``issuer: String``;
- each issuer's ``TrustedIssuer`` declares ``issuer_entity_id`` as a ``String``;
- the actions share one top-level ``type Context = { tokens: { ... } }`` (required
  ``tokens``, an inline record, no ``TokensContext`` name);
- token metadata carry ``workload_id`` and ``principal_mapping``; one issuer has a custom
  token name (``dolphin_token``); a default entity is a base64 JSON entity;
- Cedarling's own tests pass the mapping either as the entity type name or as the token
  name (``"dolphin_token"``).

The store below is written here in that shape (nothing is copied); the two issuers are
loopback OpenID providers and every token is signed by its provider's key.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, RequestError, TokenError, TokenInput, ValidationError
from polang.language import parse_schema
from polang.language.validate import check_multi_issuer_schema
from polang.tokens import IssuerSettings, TokenProcessor
from polang.tokens.processor import check_token_inputs, trusted_issuer_entity
from tokens.oidc_server import OidcProvider

TOKEN_ATTRS = """token_type: String,
    jti: String,
    issuer: String,
    validated_at: Long,
    exp: Long,
    sub?: String,"""

SCHEMA = f"""namespace Acme {{
  entity User = {{ sub?: String, email: String, username: String, id_token?: Id_Token }};
  entity Workload = {{
    iss: Acme::TrustedIssuer, client_id?: String, name: String, access_token: Access_Token
  }};
  entity Access_Token = {{
    {TOKEN_ATTRS}
    scope?: Set<String>,
    location?: String,
  }} tags Set<String>;
  entity Id_Token = {{
    {TOKEN_ATTRS}
    aud?: Set<String>,
  }} tags Set<String>;
  entity TrustedIssuer = {{"issuer_entity_id": String}};
  entity Resource = {{"name": String}};
  entity Any;
  action "GetFood", "ReadProfile", "SwimWithOrca", "ManageDocuments", "SubmitVote",
         "CheckIssuer" appliesTo {{
    principal: [Any],
    resource: [Resource],
    context: Context
  }};
}}

namespace Dolphin {{
  entity Access_Token = {{
    {TOKEN_ATTRS}
    scope?: Set<String>,
    location?: String,
  }} tags Set<String>;
  entity Dolphin_Token = {{
    {TOKEN_ATTRS}
    waiver?: String,
  }} tags Set<String>;
  entity TrustedIssuer = {{"issuer_entity_id": String}};
}}

namespace Jans {{
  type Url = {{"host": String, "path": String, "protocol": String}};
  entity TrustedIssuer = {{"issuer_entity_id": Url}};
  entity Issue = {{"org_id": String}};
  entity Workload = {{"org_id": String}};
  action "Update" appliesTo {{ principal: [Workload], resource: [Issue], context: {{}} }};
}}

type Context = {{
  tokens: {{
    acme_access_token?: Acme::Access_Token,
    acme_id_token?: Acme::Id_Token,
    dolphin_access_token?: Dolphin::Access_Token,
    dolphin_dolphin_token?: Dolphin::Dolphin_Token,
    total_token_count: Long
  }}
}};
"""


def has_tag(token: str, tag: str, value: str) -> str:
    t = f"context.tokens.{token}"
    test = f'{t}.hasTag("{tag}") && {t}.getTag("{tag}").contains("{value}")'
    return f"(context has tokens.{token} && {test})"


def policies(acme: OidcProvider) -> dict[str, str]:
    """Policy id -> text: the token queries of Cedarling's store, plus one reading the
    engine-filled attributes."""
    return {
        "food": 'permit(principal, action == Acme::Action::"GetFood", '
        'resource in Acme::Resource::"ApprovedFoods") when { '
        + has_tag("dolphin_access_token", "location", "miami")
        + " };",
        "food_default_entity": 'permit(principal, action == Acme::Action::"GetFood", '
        'resource in Acme::Resource::"5f1c0d3e9a2b") when { '
        + has_tag("dolphin_access_token", "location", "miami")
        + " };",
        "wiki": 'permit(principal, action == Acme::Action::"ReadProfile", '
        'resource in Acme::Resource::"WikiPages") when { '
        + has_tag("acme_access_token", "scope", "read:wiki")
        + " };",
        "orca": 'permit(principal, action == Acme::Action::"SwimWithOrca", '
        'resource == Acme::Resource::"Aquarium") when { '
        + has_tag("dolphin_dolphin_token", "waiver", "signed")
        + " };",
        "docs_any": 'permit(principal, action == Acme::Action::"ManageDocuments", '
        'resource in Acme::Resource::"SharedDocs") when { '
        + has_tag("acme_access_token", "scope", "write:documents")
        + " || "
        + has_tag("dolphin_access_token", "scope", "write:documents")
        + " };",
        "vote_both": 'permit(principal, action == Acme::Action::"SubmitVote", '
        'resource == Acme::Resource::"Election") when { '
        + has_tag("acme_access_token", "scope", "trade:vote")
        + " && "
        + has_tag("dolphin_access_token", "member_status", "verified")
        + " };",
        "issuer_attrs": 'permit(principal, action == Acme::Action::"CheckIssuer", resource) '
        "when { context has tokens.acme_access_token && "
        f'context.tokens.acme_access_token.issuer == "{acme.issuer}" && '
        'context.tokens.acme_access_token.token_type == "Acme::Access_Token" && '
        'context.tokens.acme_access_token.jti == "acme-1" && '
        "context.tokens.acme_access_token.exp > context.tokens.acme_access_token.validated_at"
        " && "
        f'Acme::TrustedIssuer::"AcmeIssuer".issuer_entity_id == "{acme.issuer}" }};',
        "jans_workload": "permit(principal is Jans::Workload, "
        'action == Jans::Action::"Update", resource is Jans::Issue) '
        "when { principal.org_id == resource.org_id };",
    }


def store_yaml(acme: OidcProvider, dolphin: OidcProvider) -> str:
    """The legacy YAML store: ``policy_stores`` wrapper, object-form schema and policies,
    issuers keyed by id, a base64 default entity."""
    default = {"uid": {"type": "Acme::Resource", "id": "5f1c0d3e9a2b"}, "attrs": {"name": "F"}}
    record = {
        "polang_version": "v4.0.0",
        "name": "MultiIssuerBasic",
        "description": "multi-issuer authorization with token queries",
        "trusted_issuers": {
            "AcmeIssuer": {
                "name": "Acme",
                "description": "Acme identity provider",
                "openid_configuration_endpoint": acme.discovery_url,
                "token_metadata": {
                    "access_token": {
                        "entity_type_name": "Acme::Access_Token",
                        "workload_id": "client_id",
                        "principal_mapping": ["Acme::Workload"],
                    },
                    "id_token": {
                        "entity_type_name": "Acme::Id_Token",
                        "principal_mapping": ["Acme::User"],
                    },
                },
            },
            "DolphinIssuer": {
                "name": "Dolphin",
                "description": "Dolphin identity provider",
                "openid_configuration_endpoint": dolphin.discovery_url,
                "token_metadata": {
                    "access_token": {
                        "entity_type_name": "Dolphin::Access_Token",
                        "workload_id": "client_id",
                        "principal_mapping": ["Dolphin::Workload"],
                    },
                    "dolphin_token": {
                        "entity_type_name": "Dolphin::Dolphin_Token",
                        "principal_mapping": ["Dolphin::User"],
                    },
                },
            },
        },
        "policies": {
            pid: {
                "description": pid,
                "creation_date": "2025-01-02T10:00:00.000000",
                "policy_content": {"encoding": "none", "content_type": "polang", "body": text},
            }
            for pid, text in policies(acme).items()
        },
        "schema": {"encoding": "none", "content_type": "polang", "body": SCHEMA},
        "default_entities": {
            "5f1c0d3e9a2b": base64.b64encode(json.dumps(default).encode()).decode()
        },
    }
    doc = {"polang_version": "v4.0.0", "policy_stores": {"multi_issuer_basic": record}}
    # JSON is YAML: the file is read by the YAML loader like Cedarling's .yaml stores
    return json.dumps(doc, indent=2)


@pytest.fixture
def acme(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/acme", keys=("RS256",))


@pytest.fixture
def dolphin(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("/dolphin", keys=("ES256",))


@pytest.fixture
def store_file(tmp_path: Path, acme: OidcProvider, dolphin: OidcProvider) -> Path:
    path = tmp_path / "policy-store-multi-issuer.yaml"
    path.write_text(store_yaml(acme, dolphin), encoding="utf-8")
    return path


@pytest.fixture
def make_engine(
    client_ssl_context: ssl.SSLContext, store_file: Path
) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(**props: Any) -> Engine:
        cfg = {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(store_file),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            **props,
        }
        e = Engine(cfg, ssl_context=client_ssl_context)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


@pytest.fixture
def engine(make_engine: Callable[..., Engine]) -> Engine:
    return make_engine()


def resource(rid: str) -> dict[str, Any]:
    return {"cedar_entity_mapping": {"entity_type": "Acme::Resource", "id": rid}, "name": rid}


def act(name: str) -> str:
    return f'Acme::Action::"{name}"'


def decide(engine: Engine, tokens: list[Any], action: str, rid: str) -> tuple[bool, list[str]]:
    r = engine.authorize_multi_issuer(tokens, act(action), resource(rid))
    assert r.dropped_tokens == [], r.dropped_tokens
    return r.decision, r.response.diagnostics.reason


# ---------------------------------------------------------------- the store decides


def test_single_tokens_of_each_issuer_decide(
    engine: Engine, acme: OidcProvider, dolphin: OidcProvider
) -> None:
    d_access = dolphin.token(location=["miami", "orlando"], scope=["read", "write"])
    d_custom = dolphin.token(waiver=["signed", "approved"])
    a_access = acme.token(scope=["read:wiki", "write:profile"], client_id="c-1")
    both = [
        TokenInput("Dolphin::Access_Token", d_access),
        TokenInput("Dolphin::Dolphin_Token", d_custom),
    ]
    assert decide(engine, both, "GetFood", "ApprovedFoods") == (True, ["food"])
    assert decide(
        engine, [TokenInput("Acme::Access_Token", a_access)], "ReadProfile", "WikiPages"
    ) == (
        True,
        ["wiki"],
    )
    # the resource found among the store's default entities
    assert decide(engine, both[:1], "GetFood", "5f1c0d3e9a2b") == (True, ["food_default_entity"])
    # a location that is not Miami, a scope the policy does not ask for
    other = TokenInput("Dolphin::Access_Token", dolphin.token(location="orlando"))
    assert decide(engine, [other], "GetFood", "ApprovedFoods") == (False, [])
    assert decide(
        engine,
        [TokenInput("Acme::Access_Token", acme.token(scope=["x"]))],
        "ReadProfile",
        "WikiPages",
    ) == (False, [])


def test_the_mapping_may_be_the_token_name(engine: Engine, dolphin: OidcProvider) -> None:
    """Cedarling's tests pass ``"dolphin_token"`` (the token_metadata key) as the mapping."""
    token = dolphin.token(waiver="signed")
    by_name = decide(
        engine, [{"mapping": "dolphin_token", "payload": token}], "SwimWithOrca", "Aquarium"
    )
    by_type = decide(
        engine, [TokenInput("Dolphin::Dolphin_Token", token)], "SwimWithOrca", "Aquarium"
    )
    assert by_name == by_type == (True, ["orca"])
    # a token name is resolved in the token's own issuer only, and must be one of its names
    r = engine.authorize_multi_issuer(
        [
            TokenInput("dolphin_token", dolphin.token(waiver="signed")),
            TokenInput("dolphin_tokn", dolphin.token()),
            TokenInput("id_token", dolphin.token()),
        ],
        act("SwimWithOrca"),
        resource("Aquarium"),
    )
    assert r.decision is True
    assert [(d.index, d.kind, d.mapping) for d in r.dropped_tokens] == [
        (1, "untrusted_issuer", "dolphin_tokn"),
        (2, "untrusted_issuer", "id_token"),
    ]
    assert "'dolphin_tokn' nor a token of that name" in r.dropped_tokens[0].message


def test_tokens_of_both_issuers_with_or_and_and(
    engine: Engine, acme: OidcProvider, dolphin: OidcProvider
) -> None:
    def a(**c: Any) -> TokenInput:
        return TokenInput("Acme::Access_Token", acme.token(**c))

    def d(**c: Any) -> TokenInput:
        return TokenInput("Dolphin::Access_Token", dolphin.token(**c))

    docs = "ManageDocuments", "SharedDocs"
    assert decide(engine, [a(scope=["write:documents"])], *docs)[0] is True
    assert decide(engine, [d(scope=["write:documents"])], *docs)[0] is True
    assert decide(engine, [a(scope=["read:profile"]), d(scope=["read:data"])], *docs)[0] is False
    vote = "SubmitVote", "Election"
    assert decide(engine, [a(scope=["trade:vote"]), d(member_status=["verified"])], *vote) == (
        True,
        ["vote_both"],
    )
    assert decide(engine, [a(scope=["trade:vote"])], *vote)[0] is False
    assert decide(engine, [a(scope=["trade:vote"]), d(member_status="pending")], *vote)[0] is False


def test_the_entities_have_what_the_schema_requires(engine: Engine, acme: OidcProvider) -> None:
    """``issuer`` is the token's ``iss``; ``TrustedIssuer.issuer_entity_id`` is the issuer
    URL as a String; the engine's attributes are filled though declared required."""
    tok = TokenInput("Acme::Access_Token", acme.token(jti="acme-1"))
    assert decide(engine, [tok], "CheckIssuer", "any") == (True, ["issuer_attrs"])
    other = TokenInput("Acme::Access_Token", acme.token(jti="acme-2"))
    assert decide(engine, [other], "CheckIssuer", "any") == (False, [])


def test_an_unsigned_token_is_still_refused(engine: Engine, acme: OidcProvider) -> None:
    header, payload, _ = acme.token(scope=["read:wiki"]).split(".")
    forged = f"{header}.{payload}.{'A' * 40}"
    with pytest.raises(TokenError, match="signature"):
        engine.authorize_multi_issuer(
            [TokenInput("Acme::Access_Token", forged)], act("ReadProfile"), resource("WikiPages")
        )


def test_without_signature_checks_issuer_still_comes_from_the_claim(
    make_engine: Callable[..., Engine], acme: OidcProvider
) -> None:
    """Signature validation off: no ``iss`` entity reference, but ``issuer`` is the claim
    text (like every claim of an unverified token); a token without ``iss`` cannot fill the
    required ``issuer`` and is dropped naming it."""
    e = make_engine(ENGINE_JWT_SIG_VALIDATION="disabled", ENGINE_JWT_STATUS_VALIDATION="disabled")
    ok = e.authorize_multi_issuer(
        [TokenInput("Acme::Access_Token", acme.token(jti="acme-1"))],
        act("CheckIssuer"),
        resource("x"),
    )
    assert (ok.decision, ok.dropped_tokens) == (True, [])
    r = e.authorize_multi_issuer(
        [
            TokenInput("Acme::Access_Token", acme.token(scope=["read:wiki"])),
            TokenInput("Acme::Id_Token", acme.token(iss=None)),
        ],
        act("ReadProfile"),
        resource("WikiPages"),
    )
    assert r.decision is True
    [dropped] = r.dropped_tokens
    assert (dropped.index, dropped.kind) == (1, "entity_build_failed")
    assert "`issuer`" in dropped.message


# ---------------------------------------------------------------- scope


def test_a_space_separated_scope_holds_each_scope(engine: Engine, acme: OidcProvider) -> None:
    """OAuth's ``"scope": "read:wiki write:profile"`` (RFC 8693 section 4.2, RFC 9068 section
    2.2.3) is a space-delimited list: the tag holds each scope (decisions.md), so a policy
    written for an array of scopes decides alike for the string. Cedarling keeps the string
    whole; polang differs on purpose (docs/tokens.md, "Coming from Cedarling")."""
    spaced = TokenInput("Acme::Access_Token", acme.token(scope="read:wiki write:profile"))
    assert decide(engine, [spaced], "ReadProfile", "WikiPages") == (True, ["wiki"])
    listed = TokenInput("Acme::Access_Token", acme.token(scope=["read:wiki", "write:profile"]))
    assert decide(engine, [listed], "ReadProfile", "WikiPages") == (True, ["wiki"])
    other = TokenInput("Acme::Access_Token", acme.token(scope="read:wikis write:profile"))
    assert decide(engine, [other], "ReadProfile", "WikiPages") == (False, [])


def test_the_scope_tag_and_set_attribute_hold_each_scope(
    make_processor: Callable[..., TokenProcessor], acme: OidcProvider
) -> None:
    schema = parse_schema(SCHEMA)
    issuers = {
        "AcmeIssuer": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": "Acme::Access_Token"}},
        }
    }
    proc = make_processor(issuers, schema)
    out = proc.process([TokenInput("Acme::Access_Token", acme.token(scope="a b  c"))])
    [tok] = out.tokens
    assert set(tok.entity.tags["scope"]) == {"a", "b", "c"}  # runs of spaces split once
    assert set(tok.entity.attrs["scope"]) == {"a", "b", "c"}
    assert tok.entity.attrs["issuer"] == acme.issuer
    assert set(tok.entity.attrs) >= {"token_type", "jti", "issuer", "validated_at", "exp"}
    assert "iss" not in tok.entity.attrs  # not declared by this schema
    assert "iss" not in tok.entity.tags and "issuer" not in tok.entity.tags


# ---------------------------------------------------------------- token dicts


def nested_key(depth: int = 10_000) -> tuple[Any, ...]:
    """A hashable key nested deeper than ``repr`` can go."""
    key: tuple[Any, ...] = ()
    for _ in range(depth):
        key = (key,)
    return key


@pytest.mark.parametrize(
    ("item", "words"),
    [
        (
            {"mapping": "Acme::Access_Token", "paylod": "x.y.z"},
            ["'paylod'", "did you mean 'payload'"],
        ),
        ({"mapping": "Acme::Access_Token", "payload": "x.y.z", "kind": "jwt"}, ["'kind'"]),
        ({"Mapping": "Acme::Access_Token", "payload": "x.y.z"}, ["'Mapping'", "'mapping'"]),
        ({"mapping": "A::B", "payload": "x", 7: "x", "y": 1}, ["of type int", "(and 1 more)"]),
        ({"mapping": "A::B", "payload": "x", "k" * 100_000: 1}, ["kkkk'..."]),
        ({"mapping": "A::B", "payload": "x", ("t",) * 3: 1}, ["unknown key of type tuple"]),
        ({"mapping": "A::B", "payload": "x", nested_key(): 1}, ["unknown key of type tuple"]),
    ],
)
def test_an_unknown_key_in_a_token_dict_is_refused(
    engine: Engine, item: dict[Any, Any], words: list[str]
) -> None:
    good = TokenInput("Acme::Access_Token", "a.b.c")
    with pytest.raises(RequestError) as err:
        engine.authorize_multi_issuer([good, item], act("ReadProfile"), resource("WikiPages"))
    msg = str(err.value)
    assert msg.startswith("tokens[1]: unknown key ")
    assert '{"mapping": <entity type name>, "payload": <JWT>}' in msg
    assert len(msg) < 400
    for w in words:
        assert w in msg


def test_an_unknown_key_is_refused_before_any_token_is_read(acme: OidcProvider) -> None:
    """No fetch, no decode: the check runs over the whole list first."""
    proc = TokenProcessor(
        [
            IssuerSettings.from_dict(
                "a", {"name": "A", "openid_configuration_endpoint": acme.discovery_url}
            )
        ]
    )
    try:
        with pytest.raises(RequestError, match=r"tokens\[2\]"):
            proc.process(
                iter(
                    [
                        TokenInput("A::T", acme.token()),
                        {"mapping": "A::T", "payload": "p"},
                        {"payload": "p", "x": 1},
                    ]
                )
            )
        assert acme.requests == {}
    finally:
        proc.close()


def test_token_values_of_the_wrong_type_are_dropped_not_raised(
    engine: Engine, acme: OidcProvider
) -> None:
    """Keys are the caller's code; values come from the network: those are dropped with a
    reason (as before), whatever their type, size or depth."""
    deep: Any = "x"
    for _ in range(10_000):
        deep = [deep]
    r = engine.authorize_multi_issuer(
        [
            TokenInput("Acme::Access_Token", acme.token(scope=["read:wiki"])),
            {"mapping": "Acme::Access_Token", "payload": deep},
            {"mapping": ["Acme::Access_Token"], "payload": "a.b.c"},
            {"mapping": "Acme::Access_Token", "payload": "a" * 70_000},
            {"mapping": "Acme::Access_Token"},
            42,
        ],
        act("ReadProfile"),
        resource("WikiPages"),
    )
    assert r.decision is True
    assert [(d.index, d.kind) for d in r.dropped_tokens] == [
        (i, "invalid_input") for i in range(1, 6)
    ]
    assert all(len(d.message) < 400 for d in r.dropped_tokens)


def test_check_token_inputs_takes_token_inputs_and_objects() -> None:
    check_token_inputs([TokenInput("A::B", "x"), {"mapping": "A::B", "payload": "x"}, object()])
    check_token_inputs([{}])  # missing keys are the values' problem: dropped later


# ---------------------------------------------------------------- the schema check


def _problems(schema_text: str) -> list[str]:
    users = {"Acme::Access_Token": ["Acme"], "Acme::Id_Token": ["Acme"]}
    return check_multi_issuer_schema(parse_schema(schema_text), ["Acme"], users, actions=())


def test_the_schema_check_accepts_the_cedarling_shapes() -> None:
    assert _problems(SCHEMA) == []
    # claim attributes may be required too (a token without the claim is dropped)
    assert _problems(SCHEMA.replace("    sub?: String,", "    sub: String,")) == []


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "    issuer: String,\n    validated_at",
            "    issuer: Long,\n    validated_at",
            "`Acme::Access_Token.issuer` must be String, not Long",
        ),
        (
            'entity TrustedIssuer = {"issuer_entity_id": String};\n  entity Resource',
            'entity TrustedIssuer = {"issuer_entity_id": Long};\n  entity Resource',
            "or a String, not Long",
        ),
        (
            "    validated_at: Long,",
            "    validated_at: String,",
            "`Acme::Access_Token.validated_at` must be Long, not String",
        ),
    ],
)
def test_the_schema_check_still_names_what_does_not_fit(old: str, new: str, problem: str) -> None:
    assert old in SCHEMA
    found = _problems(SCHEMA.replace(old, new, 1))
    assert any(problem in p for p in found), found


def test_a_misfit_schema_fails_the_request_not_the_load(
    tmp_path: Path, acme: OidcProvider, dolphin: OidcProvider, client_ssl_context: ssl.SSLContext
) -> None:
    text = store_yaml(acme, dolphin).replace("issuer: String,", "issuer: Long,")
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    cfg = {
        "ENGINE_POLICY_STORE_LOCAL_FN": str(path),
        "ENGINE_STRICT_SCHEMA_VALIDATION": "disabled",  # a policy compares `issuer` to text
    }
    with (
        Engine(cfg, ssl_context=client_ssl_context) as e,
        pytest.raises(ValidationError, match=r"issuer` must be String"),
    ):
        e.authorize_multi_issuer(
            [TokenInput("Acme::Access_Token", acme.token())], act("ReadProfile"), resource("w")
        )


# ---------------------------------------------------------------- TrustedIssuer entities


@pytest.mark.parametrize(
    ("endpoint", "text"),
    [
        ("https://idp.acme.com/.well-known/openid-configuration", "https://idp.acme.com"),
        (
            "https://IdP.Acme.com:8443/realms/x/.well-known/openid-configuration",
            "https://idp.acme.com:8443/realms/x",
        ),
    ],
)
def test_trusted_issuer_url_follows_the_declared_type(endpoint: str, text: str) -> None:
    issuer = IssuerSettings.from_dict(
        "AcmeIssuer", {"name": "Acme", "openid_configuration_endpoint": endpoint}
    )
    as_text = trusted_issuer_entity(issuer, parse_schema(SCHEMA))
    assert as_text.attrs["issuer_entity_id"] == text
    record = trusted_issuer_entity(
        issuer,
        parse_schema(
            SCHEMA.replace('{"issuer_entity_id": String}', '{"issuer_entity_id": Jans::Url}')
        ),
    )
    assert not isinstance(record.attrs["issuer_entity_id"], str)
    assert (
        trusted_issuer_entity(issuer).attrs["issuer_entity_id"] == record.attrs["issuer_entity_id"]
    )


def test_a_claim_named_issuer_stays_a_tag_where_the_engine_fills_issuer(
    make_processor: Callable[..., TokenProcessor], acme: OidcProvider
) -> None:
    issuers = {
        "AcmeIssuer": {
            "name": "Acme",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": "Acme::Access_Token"}},
        }
    }
    proc = make_processor(issuers, parse_schema(SCHEMA))
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    for claim in ["https://elsewhere.example", deep, ["a", "b"], 7]:
        [tok] = proc.process([TokenInput("Acme::Access_Token", acme.token(issuer=claim))]).tokens
        assert tok.entity.attrs["issuer"] == acme.issuer
        assert "issuer" in tok.entity.tags


def test_batches_refuse_an_unknown_token_key_per_request_or_for_the_whole_batch(
    engine: Engine, acme: OidcProvider
) -> None:
    good = TokenInput("Acme::Access_Token", acme.token(scope=["read:wiki"]))
    bad = {"mapping": "Acme::Access_Token", "payload": good.payload, "typ": "JWT"}
    req = {"action": act("ReadProfile"), "resource": resource("WikiPages")}
    out = engine.authorize_multi_issuer_batch(
        [{**req, "tokens": [good]}, {**req, "tokens": [good, bad]}]
    )
    assert out[0].decision is True
    assert (out[1].decision, out[1].kind) == (False, "RequestError")
    assert out[1].message.startswith("requests[1]: tokens[1]: unknown key 'typ'")
    with pytest.raises(RequestError, match=r"tokens\[0\]: unknown key 'typ'"):
        engine.authorize_multi_issuer_batch([req], tokens=[bad])
