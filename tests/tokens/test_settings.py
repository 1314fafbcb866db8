"""Trusted issuer and token metadata records, and the token settings."""

from __future__ import annotations

from typing import Any

import pytest

from polang.errors import ConfigError, PolicyStoreError
from polang.tokens import IssuerSettings, TokenMetadata, TokenSettings
from polang.tokens.settings import ASYMMETRIC_ALGORITHMS

ENDPOINT = "https://idp.example.com/.well-known/openid-configuration"


def issuer(**kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "Acme", "openid_configuration_endpoint": ENDPOINT}
    d.update(kw)
    return d


def test_defaults_of_the_spec() -> None:
    m = TokenMetadata.from_dict({"entity_type_name": "Acme::Access_token"}, "tm")
    assert m.trusted is True
    assert (m.token_id, m.user_id, m.workload_id) == ("jti", "sub", "aud")
    assert m.role_mapping == ("role",) and not m.role_mapping_explicit
    assert m.principal_mapping == () and m.required_claims == () and dict(m.claim_mapping) == {}


def test_well_known_token_names_get_a_default_type() -> None:
    i = IssuerSettings.from_dict(
        "acme",
        issuer(token_metadata={"access_token": {}, "id_token": {}, "userinfo_token": {}}),
    )
    assert i.token_metadata["access_token"].entity_type_name == "Svc::Access_token"
    assert i.token_metadata["id_token"].entity_type_name == "Svc::Id_token"
    assert i.metadata_for("Svc::Userinfo_token") is not None
    assert i.metadata_for("Svc::Nope") is None


def test_custom_token_names_need_an_entity_type_name() -> None:
    with pytest.raises(PolicyStoreError, match=r"trusted_issuers\.acme\.token_metadata\.dolphin"):
        IssuerSettings.from_dict("acme", issuer(token_metadata={"dolphin": {}}))


def test_role_mapping_forms() -> None:
    path = "tm"
    base = {"entity_type_name": "A::T"}
    assert TokenMetadata.from_dict({**base, "role_mapping": "roles"}, path).role_mapping == (
        "roles",
    )
    m = TokenMetadata.from_dict({**base, "role_mapping": ["a", "b"]}, path)
    assert m.role_mapping == ("a", "b") and m.role_mapping_explicit
    assert TokenMetadata.from_dict({**base, "role_mapping": ""}, path).role_mapping == ()
    with pytest.raises(PolicyStoreError, match=r"tm\.role_mapping"):
        TokenMetadata.from_dict({**base, "role_mapping": 3}, path)
    with pytest.raises(PolicyStoreError, match=r"tm\.role_mapping\[1\]"):
        TokenMetadata.from_dict({**base, "role_mapping": ["a", 1]}, path)


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        (
            {"entity_type_name": "Access_token"},
            r"tm\.entity_type_name: must have the form <Namespace>::<Type>",
        ),
        ({"entity_type_name": "A::T", "trusted": "yes"}, r"tm\.trusted: must be true or false"),
        ({"entity_type_name": "A::T", "token_id": ""}, r"tm\.token_id: must not be empty"),
        ({"entity_type_name": "A::T", "required_claims": "sub"}, r"tm\.required_claims"),
        ({"entity_type_name": "A::T", "principal_mapping": [""]}, r"principal_mapping\[0\]"),
        ({"entity_type_name": "A::T", "claim_mapping": []}, r"tm\.claim_mapping"),
        ({"entity_type_name": "A::T", "colour": "red"}, r"tm\.colour: unknown field"),
        ("nope", "tm: must be a token metadata object, got a string"),
    ],
)
def test_token_metadata_errors_name_the_json_path(record: Any, fragment: str) -> None:
    with pytest.raises(PolicyStoreError, match=fragment):
        TokenMetadata.from_dict(record, "tm")


def test_claim_mapping_records() -> None:
    m = TokenMetadata.from_dict(
        {
            "entity_type_name": "A::T",
            "claim_mapping": {
                "email": {
                    "parser": "regex",
                    "type": "Acme::email_address",
                    "regex_expression": r"^(?P<UID>[^@]+)@(?P<DOMAIN>.+)$",
                    "UID": {"attr": "uid", "type": "String"},
                    "DOMAIN": {"attr": "domain", "type": "String"},
                },
                "address": {"parser": "json", "type": "Acme::Address"},
            },
        },
        "tm",
    )
    email = m.claim_mapping["email"]
    assert email.parser == "regex" and set(email.groups) == {"UID", "DOMAIN"}
    assert email.groups["UID"].attr == "uid"
    assert m.claim_mapping["address"].parser == "json"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"type": "A::B"}, r"x\.parser: required field 'parser' is missing"),
        ({"parser": "xml", "type": "A::B"}, r"claim_mapping\.x\.parser"),
        ({"parser": "json"}, r"x\.type: required field 'type' is missing"),
        ({"parser": "regex", "type": "A::B"}, "regex_expression"),
        (
            {"parser": "regex", "type": "A::B", "regex_expression": "("},
            r"x\.regex_expression: invalid regex",
        ),
        (
            {"parser": "regex", "type": "A::B", "regex_expression": "(?P<a>.)", "b": {}},
            r"claim_mapping\.x\.b: 'b' is not a named group",
        ),
        (
            {
                "parser": "regex",
                "type": "A::B",
                "regex_expression": "(?P<a>.)",
                "a": {"attr": "a", "type": "Float"},
            },
            r"claim_mapping\.x\.a\.type",
        ),
        (
            {"parser": "regex", "type": "A::B", "regex_expression": "(?P<a>.)", "a": {"t": 1}},
            r"claim_mapping\.x\.a\.t: unknown field",
        ),
        ({"parser": "json", "type": "A::B", "extra": 1}, r"claim_mapping\.x\.extra"),
    ],
)
def test_claim_mapping_errors(spec: dict[str, Any], fragment: str) -> None:
    record = {"entity_type_name": "A::T", "claim_mapping": {"x": spec}}
    with pytest.raises(PolicyStoreError, match=fragment):
        TokenMetadata.from_dict(record, "tm").claim_mapping  # noqa: B018


def test_rust_style_named_groups_and_verbose_mode() -> None:
    m = TokenMetadata.from_dict(
        {
            "entity_type_name": "A::T",
            "claim_mapping": {
                "c": {
                    "parser": "regex",
                    "type": "A::R",
                    "regex_expression": r"(?x) ^ (?<tag>[^\#]+) \# (?<rest>.*) $  # a comment",
                    "tag": {"attr": "tag", "type": "String"},
                    "rest": {"attr": "rest", "type": "String"},
                }
            },
        },
        "tm",
    )
    pattern = m.claim_mapping["c"].pattern
    assert pattern is not None
    found = pattern.search("left#right")
    assert found is not None and found.groupdict() == {"tag": "left", "rest": "right"}


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"openid_configuration_endpoint": ENDPOINT}, r"\.name: required field 'name'"),
        ({"name": "Acme"}, "required field 'openid_configuration_endpoint' is missing"),
        (
            issuer(name="Acme Corp"),
            r"trusted_issuers\.acme\.name: issuer name 'Acme Corp' must be a namespace",
        ),
        (issuer(name=""), r"\.name: must not be empty"),
        (issuer(openid_configuration_endpoint="http://idp/x"), "must be an https:// URL"),
        (issuer(token_metadata=[]), r"\.token_metadata: must be an object"),
        (issuer(tokens_metadata={}), "renamed 'token_metadata'"),
        (issuer(colour="red"), r"\.colour: unknown field"),
        (issuer(description=3), r"\.description: must be a string"),
        (
            issuer(
                token_metadata={
                    "access_token": {"entity_type_name": "A::T"},
                    "other": {"entity_type_name": "A::T"},
                }
            ),
            r"other\.entity_type_name: 'A::T' is also the entity type of token 'access_token'",
        ),
    ],
)
def test_issuer_errors_name_the_json_path(record: dict[str, Any], fragment: str) -> None:
    with pytest.raises(PolicyStoreError, match=fragment):
        IssuerSettings.from_dict("acme", record)


def test_issuer_record_round_trip() -> None:
    i = IssuerSettings.from_dict(
        "acme-id",
        issuer(
            description="Acme IdP",
            token_metadata={"access_token": {"entity_type_name": "Acme::Access_token"}},
        ),
        path="store.trusted_issuers.acme-id",
    )
    assert (i.issuer_id, i.name, i.description) == ("acme-id", "Acme", "Acme IdP")
    assert i.openid_configuration_endpoint == ENDPOINT
    found = i.metadata_for("Acme::Access_token")
    assert found is not None and found[0] == "access_token"


def test_token_settings_validation() -> None:
    s = TokenSettings()
    assert s.algorithms == ASYMMETRIC_ALGORITHMS and "HS256" not in s.algorithms
    with pytest.raises(ConfigError, match="RS999"):
        TokenSettings(algorithms=("RS999",))
    with pytest.raises(ConfigError, match="ENGINE_JWT_CLOCK_SKEW"):
        TokenSettings(clock_skew=-1)
    with pytest.raises(ConfigError, match="ENGINE_HTTP_REQUEST_TIMEOUT"):
        TokenSettings(http_timeout=0)
    with pytest.raises(ConfigError, match="ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES"):
        TokenSettings(http_max_response_size=0)
    with pytest.raises(ConfigError, match="ENGINE_DECISION_LOG_DEFAULT_JWT_ID"):
        TokenSettings(decision_log_jwt_id="")


def test_settings_from_engine_properties() -> None:
    s = TokenSettings.from_properties(
        {
            "ENGINE_JWT_SIG_VALIDATION": "disabled",
            "ENGINE_JWT_STATUS_VALIDATION": True,
            "ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": "RS256, ES256 EdDSA",
            "ENGINE_JWT_CLOCK_SKEW": "30",
            "ENGINE_JWKS_REFRESH_INTERVAL": None,
            "ENGINE_TOKEN_CACHE_CAPACITY": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": "2.5",
            "ENGINE_LOCAL_JWKS": "/etc/jwks.json",
            "ENGINE_LOG_TYPE": "memory",  # not a token setting: left alone
        }
    )
    assert s.sig_validation is False and s.status_validation is True
    assert s.algorithms == ("RS256", "ES256", "EdDSA")
    assert (s.clock_skew, s.token_cache_capacity, s.http_timeout) == (30, 0, 2.5)
    assert s.jwks_refresh_interval is None and s.local_jwks_path == "/etc/jwks.json"
    assert TokenSettings.from_properties(
        {"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ["HS256"]}
    ).algorithms == ("HS256",)


@pytest.mark.parametrize(
    ("props", "fragment"),
    [
        ({"ENGINE_JWT_SIG_VALIDATION": "off"}, "ENGINE_JWT_SIG_VALIDATION: 'off' is not a toggle"),
        ({"ENGINE_JWT_CLOCK_SKEW": "ten"}, "ENGINE_JWT_CLOCK_SKEW: 'ten' is not a whole number"),
        ({"ENGINE_JWT_CLOCK_SKEW": True}, "ENGINE_JWT_CLOCK_SKEW"),
        ({"ENGINE_HTTP_REQUEST_TIMEOUT": "soon"}, "number of seconds"),
        ({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": 3}, "list of algorithm names"),
        ({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": "RS256 none"}, "'none'"),
        ({"ENGINE_LOCAL_JWKS": 5}, "ENGINE_LOCAL_JWKS: 5 is not a string"),
        ({"ENGINE_TOKEN_CACHE_MAX_TTL": "-1"}, "ENGINE_TOKEN_CACHE_MAX_TTL: must be 0 or more"),
    ],
)
def test_bad_engine_properties(props: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        TokenSettings.from_properties(props)


def test_null_fields_mean_not_given() -> None:
    i = IssuerSettings.from_dict(
        "acme",
        issuer(
            description=None,
            token_metadata={
                "access_token": {
                    "entity_type_name": None,
                    "role_mapping": None,
                    "trusted": None,
                    "claim_mapping": {"c": {"parser": "json", "type": "A::B"}},
                }
            },
        ),
    )
    m = i.token_metadata["access_token"]
    assert m.entity_type_name == "Svc::Access_token" and m.trusted
    assert m.role_mapping == ("role",) and not m.role_mapping_explicit
    assert m.claim_mapping["c"].parser == "json"
    # a field the record does not define is a typo even when null: rejected, not ignored
    with pytest.raises(PolicyStoreError, match=r"token_metadata\.access_token\.colour: unknown"):
        IssuerSettings.from_dict("acme", issuer(token_metadata={"access_token": {"colour": None}}))


def test_every_problem_is_reported() -> None:
    with pytest.raises(PolicyStoreError) as e:
        IssuerSettings.from_dict("acme", {"name": "Acme Corp", "colour": 1})
    # one line per problem (the lists of allowed fields and aliases may grow)
    colour, name, endpoint = str(e.value).splitlines()
    assert colour.startswith(
        "trusted_issuers.acme.colour: unknown field 'colour'; allowed: name, description, "
        "openid_configuration_endpoint, token_metadata"
    )
    assert name == (
        "trusted_issuers.acme.name: issuer name 'Acme Corp' must be a namespace name "
        "(identifiers joined by '::'): it names the issuer's TrustedIssuer namespace"
    )
    assert endpoint.startswith(
        "trusted_issuers.acme.openid_configuration_endpoint: required field "
        "'openid_configuration_endpoint' is missing"
    )
