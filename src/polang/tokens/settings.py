"""The inputs of token handling: trusted issuers, token metadata and ``ENGINE_*`` values.

These typed records are the one model of a trusted issuer: the store loader
(:mod:`polang.store.issuers`) builds them when it checks a store, and the engine hands
them to token handling as they are. The ``from_dict`` constructors run that same parser
on a record given in code (importing it when called, since the store package imports
this module); every error names the JSON path of the bad value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polang.errors import ConfigError, PolicyStoreError
from polang.language.schema import has_name_shape

if TYPE_CHECKING:
    import ssl

    from polang.http import FetchLimits
    from polang.tokens.claim_regex import ClaimPattern

ASYMMETRIC_ALGORITHMS: tuple[str, ...] = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
SYMMETRIC_ALGORITHMS: tuple[str, ...] = ("HS256", "HS384", "HS512")
ALL_ALGORITHMS: tuple[str, ...] = ASYMMETRIC_ALGORITHMS + SYMMETRIC_ALGORITHMS

WELL_KNOWN_SUFFIX = "/.well-known/openid-configuration"

#: ``ENGINE_TOKEN_MAX_SIZE``: the longest token read at all (characters; a compact JWT is
#: ASCII, so bytes). Far above any token that fits in an HTTP header (servers refuse
#: headers past 8-16 KiB), and small enough that refusing costs nothing.
DEFAULT_TOKEN_MAX_SIZE = 64 * 1024

# Token names the spec gives defaults for; any other name needs ``entity_type_name``.
DEFAULT_ENTITY_TYPES: dict[str, str] = {
    "access_token": "Svc::Access_token",
    "id_token": "Svc::Id_token",
    "userinfo_token": "Svc::Userinfo_token",
    "tx_token": "Svc::Tx_token",
}


RegexValueType = Literal["String", "Number", "Boolean"]


def describe_json(v: object) -> str:
    """A claim's or record field's JSON kind, for messages ("a string", "an array"...)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


@dataclass(frozen=True, slots=True)
class RegexGroup:
    """Where one named group of a ``regex`` claim mapping goes and how it is typed."""

    attr: str
    type: RegexValueType


@dataclass(frozen=True)
class ClaimMapping:
    """``claim_mapping.<claim>``: a claim turned into a value of schema type ``type``.

    ``regex``: ``pattern`` is the compiled ``regex_expression`` (RE2, matched in linear
    time: :mod:`polang.tokens.claim_regex`) and ``groups`` maps each named group to its
    attribute. ``json``: the claim (a JSON object or a string holding
    one) becomes a record of ``type``.
    """

    parser: Literal["regex", "json"]
    type: str
    regex_expression: str | None = None
    groups: Mapping[str, RegexGroup] = field(default_factory=dict)
    pattern: ClaimPattern | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: object, path: str) -> ClaimMapping:
        """Validate one JSON record with the store's rules; raises ``PolicyStoreError``."""
        from polang.store.issuers import check_claim_mapping, parse_record

        return parse_record(lambda ck: check_claim_mapping(d, ck, path))


@dataclass(frozen=True)
class TokenMetadata:
    """One ``token_metadata`` entry: how tokens of one type are checked and mapped.

    ``role_mapping`` is a tuple of claim names; the empty tuple means disabled (``""``).
    ``expected_audience``: a token of this type must name one of these in its ``aud``
    (empty: the issuer's ``expected_audience``, and no check when that is empty too).
    ``role_mapping_explicit`` records whether the store set it (the userinfo fallback
    applies only when no token type sets it).
    """

    entity_type_name: str
    trusted: bool = True
    token_id: str = "jti"
    user_id: str = "sub"
    workload_id: str = "aud"
    role_mapping: tuple[str, ...] = ("role",)
    principal_mapping: tuple[str, ...] = ()
    required_claims: tuple[str, ...] = ()
    claim_mapping: Mapping[str, ClaimMapping] = field(default_factory=dict)
    role_mapping_explicit: bool = False
    expected_audience: tuple[str, ...] = ()

    @classmethod
    def from_dict(
        cls, d: object, path: str = "token_metadata", *, token_name: str | None = None
    ) -> TokenMetadata:
        """Validate one JSON record. ``token_name`` supplies the spec's default type name."""
        from polang.store.issuers import check_token_metadata, parse_record

        return parse_record(lambda ck: check_token_metadata(token_name, d, ck, path))


@dataclass(frozen=True)
class IssuerSettings:
    """One trusted issuer: ``issuer_id`` is its key in ``trusted_issuers``.

    ``expected_audience`` is the default of its token types' ``expected_audience``.
    """

    issuer_id: str
    name: str
    openid_configuration_endpoint: str
    token_metadata: Mapping[str, TokenMetadata] = field(default_factory=dict)
    description: str = ""
    expected_audience: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not has_name_shape(self.name):  # it names the TrustedIssuer namespace
            raise PolicyStoreError(
                f"trusted issuer {self.issuer_id!r}: name {self.name!r} must be a namespace "
                "(identifiers joined by '::'), because it names the issuer's TrustedIssuer type"
            )

    @classmethod
    def from_dict(cls, issuer_id: str, d: object, path: str | None = None) -> IssuerSettings:
        """Validate one trusted issuer record (``trusted_issuers.<issuer_id>``).

        The rules and messages are the store loader's (one parser for both); every problem
        is reported, each as ``<JSON path>: <message>``.
        """
        from polang.store.fields import jpath
        from polang.store.issuers import check_trusted_issuer, parse_record

        where = path or jpath("trusted_issuers", issuer_id)
        return parse_record(lambda ck: check_trusted_issuer(issuer_id, d, ck, where))

    def audience_for(self, meta: TokenMetadata) -> tuple[str, ...]:
        """The audiences a token of type ``meta`` must name one of (empty: no check)."""
        return meta.expected_audience or self.expected_audience

    def metadata_for(self, mapping: str) -> tuple[str, TokenMetadata] | None:
        """The token name and metadata whose ``entity_type_name`` is the request mapping,
        or, for a mapping without ``::``, whose token name it is (Cedarling accepts
        ``"access_token"`` as well as ``"Acme::Access_Token"``)."""
        for token_name, meta in self.token_metadata.items():
            if meta.entity_type_name == mapping:
                return token_name, meta
        named = self.token_metadata.get(mapping) if "::" not in mapping else None
        return (mapping, named) if named is not None else None


@dataclass(frozen=True)
class TokenSettings:
    """The ``ENGINE_*`` values token handling reads (see the configuration table).

    A JWKS response's Cache-Control ``max-age`` wins over ``jwks_refresh_interval``,
    which applies when the response has none (``None``: 3600 s). ``ssl_context``
    replaces the default trust (system store plus ``SSL_CERT_FILE``) for embedders and
    tests.
    """

    sig_validation: bool = True
    status_validation: bool = True
    algorithms: tuple[str, ...] = ASYMMETRIC_ALGORITHMS
    clock_skew: int = 0
    local_jwks_path: str | None = None
    jwks_refresh_interval: int | None = None
    jwks_min_refresh_interval: int = 30
    status_list_refresh_max: int = 300
    token_cache_capacity: int = 1000
    token_cache_max_ttl: int = 300
    http_timeout: float = 10.0
    http_max_retries: int = 3
    http_max_response_size: int = 10 * 1024 * 1024
    decision_log_jwt_id: str = "jti"
    token_max_size: int = DEFAULT_TOKEN_MAX_SIZE
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for alg in self.algorithms:
            if alg not in ALL_ALGORITHMS:
                raise ConfigError(
                    f"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED: unknown algorithm {alg!r} "
                    f"(allowed: {' '.join(ALL_ALGORITHMS)})"
                )
        checks: tuple[tuple[str, float | None], ...] = (
            ("ENGINE_JWT_CLOCK_SKEW", self.clock_skew),
            ("ENGINE_JWKS_REFRESH_INTERVAL", self.jwks_refresh_interval),
            ("ENGINE_JWKS_MIN_REFRESH_INTERVAL", self.jwks_min_refresh_interval),
            ("ENGINE_JWT_STATUS_LIST_REFRESH_INTERVAL_MAX", self.status_list_refresh_max),
            ("ENGINE_TOKEN_CACHE_CAPACITY", self.token_cache_capacity),
            ("ENGINE_TOKEN_CACHE_MAX_TTL", self.token_cache_max_ttl),
            ("ENGINE_HTTP_MAX_RETRIES", self.http_max_retries),
        )
        for key, value in checks:
            if value is not None and value < 0:
                raise ConfigError(f"{key}: must be 0 or more, got {value}")
        if self.http_timeout <= 0:
            raise ConfigError(
                f"ENGINE_HTTP_REQUEST_TIMEOUT: must be positive, got {self.http_timeout}"
            )
        if self.http_max_response_size <= 0:
            raise ConfigError(
                "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES: must be positive, got "
                f"{self.http_max_response_size}"
            )
        if self.token_max_size <= 0:
            raise ConfigError(f"ENGINE_TOKEN_MAX_SIZE: must be positive, got {self.token_max_size}")
        if not self.decision_log_jwt_id:
            raise ConfigError("ENGINE_DECISION_LOG_DEFAULT_JWT_ID: must not be empty")

    def fetch_limits(self) -> FetchLimits:
        """The ``ENGINE_HTTP_*`` values as the HTTP client takes them."""
        from polang.http import FetchLimits

        return FetchLimits(
            timeout=self.http_timeout,
            max_retries=self.http_max_retries,
            max_response_size=self.http_max_response_size,
        )

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], *, ssl_context: ssl.SSLContext | None = None
    ) -> TokenSettings:
        """Read the ``ENGINE_*`` keys token handling uses; other keys are left to the config.

        Values may be raw (``"enabled"``, ``"30"``, ``"RS256 ES256"``) or already parsed
        (``True``, ``30``, ``["RS256"]``); ``None`` means the default.
        """
        kw: dict[str, Any] = {"ssl_context": ssl_context}
        for key, (attr, kind) in _PROPERTIES.items():
            if key not in props or props[key] is None:
                continue
            kw[attr] = _parse_property(key, props[key], kind)
        return cls(**kw)


_PROPERTIES: dict[str, tuple[str, str]] = {
    "ENGINE_JWT_SIG_VALIDATION": ("sig_validation", "toggle"),
    "ENGINE_JWT_STATUS_VALIDATION": ("status_validation", "toggle"),
    "ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ("algorithms", "algorithms"),
    "ENGINE_JWT_CLOCK_SKEW": ("clock_skew", "int"),
    "ENGINE_LOCAL_JWKS": ("local_jwks_path", "str"),
    "ENGINE_JWKS_REFRESH_INTERVAL": ("jwks_refresh_interval", "int"),
    "ENGINE_JWKS_MIN_REFRESH_INTERVAL": ("jwks_min_refresh_interval", "int"),
    "ENGINE_JWT_STATUS_LIST_REFRESH_INTERVAL_MAX": ("status_list_refresh_max", "int"),
    "ENGINE_TOKEN_CACHE_CAPACITY": ("token_cache_capacity", "int"),
    "ENGINE_TOKEN_CACHE_MAX_TTL": ("token_cache_max_ttl", "int"),
    "ENGINE_HTTP_REQUEST_TIMEOUT": ("http_timeout", "float"),
    "ENGINE_HTTP_MAX_RETRIES": ("http_max_retries", "int"),
    "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES": ("http_max_response_size", "int"),
    "ENGINE_DECISION_LOG_DEFAULT_JWT_ID": ("decision_log_jwt_id", "str"),
    "ENGINE_TOKEN_MAX_SIZE": ("token_max_size", "int"),
}


def _parse_property(key: str, value: Any, kind: str) -> Any:
    if kind == "toggle":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("enabled", "disabled"):
            return value.strip().lower() == "enabled"
        raise ConfigError(f"{key}: {value!r} is not a toggle (allowed: enabled, disabled)")
    if kind == "algorithms":
        items = re.split(r"[\s,]+", value.strip()) if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(a, str) for a in items):
            raise ConfigError(f"{key}: {value!r} is not a list of algorithm names")
        return tuple(a for a in items if a)
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{key}: {value!r} is not a string")
        return value
    number: float
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value) if kind == "float" else int(value)
    except (TypeError, ValueError):
        wanted = "a number of seconds" if kind == "float" else "a whole number"
        raise ConfigError(f"{key}: {value!r} is not {wanted}") from None
    return number
