"""The inputs of token handling: trusted issuers, token metadata and ``ENGINE_*`` values.

These are small typed records of their own so token handling does not depend on how a
policy store or a configuration is read. ``TokenMetadata.from_dict`` and
``IssuerSettings.from_dict`` validate the JSON records of the spec ("Trusted issuer",
"Token metadata"); every error names the JSON path of the bad value.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from polang.errors import ConfigError, PolicyStoreError

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

# Token names the spec gives defaults for; any other name needs ``entity_type_name``.
DEFAULT_ENTITY_TYPES: dict[str, str] = {
    "access_token": "Svc::Access_token",
    "id_token": "Svc::Id_token",
    "userinfo_token": "Svc::Userinfo_token",
    "tx_token": "Svc::Tx_token",
}

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_NAMESPACE_RE = re.compile(rf"^{_IDENT}(::{_IDENT})*$")
_TYPE_NAME_RE = re.compile(rf"^{_IDENT}(::{_IDENT})+$")
_GROUP_NAME_RE = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")

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


def _fail(path: str, msg: str) -> PolicyStoreError:
    return PolicyStoreError(f"{path}: {msg}")


def _want_str(d: Mapping[str, Any], key: str, path: str, *, allow_empty: bool = False) -> str:
    v = d[key]
    if not isinstance(v, str):
        raise _fail(f"{path}.{key}", f"expected a string, got {describe_json(v)}")
    if not allow_empty and not v:
        raise _fail(f"{path}.{key}", "must not be empty")
    return v


def _want_str_list(v: object, path: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _fail(path, f"expected an array of strings, got {describe_json(v)}")
    out = []
    for i, e in enumerate(v):
        if not isinstance(e, str) or not e:
            raise _fail(f"{path}[{i}]", f"expected a non-empty string, got {describe_json(e)}")
        out.append(e)
    return tuple(out)


def _present(d: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its ``null`` fields: ``null`` means "not given" (the default)."""
    return {k: v for k, v in d.items() if v is not None}


def _check_keys(d: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for k in d:
        if k not in allowed:
            raise _fail(f"{path}.{k}", f"unknown field (allowed: {', '.join(sorted(allowed))})")


def translate_named_groups(expr: str) -> str:
    """Accept ``(?<name>...)`` (the Rust/PCRE spelling) as well as Python's ``(?P<name>...)``."""
    out: list[str] = []
    i = 0
    n = len(expr)
    while i < n:
        ch = expr[i]
        if ch == "\\" and i + 1 < n:
            out.append(expr[i : i + 2])
            i += 2
            continue
        if expr.startswith("(?<", i) and i + 3 < n and expr[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class RegexGroup:
    """Where one named group of a ``regex`` claim mapping goes and how it is typed."""

    attr: str
    type: RegexValueType


@dataclass(frozen=True)
class ClaimMapping:
    """``claim_mapping.<claim>``: a claim turned into a value of schema type ``type``."""

    parser: Literal["regex", "json"]
    type: str
    regex_expression: str | None = None
    groups: Mapping[str, RegexGroup] = field(default_factory=dict)
    pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: object, path: str) -> ClaimMapping:
        if not isinstance(d, dict):
            raise _fail(path, f"expected an object, got {describe_json(d)}")
        d = _present(d)
        if "parser" not in d:
            raise _fail(path, "missing field 'parser' (regex or json)")
        parser = d["parser"]
        if parser not in ("regex", "json"):
            raise _fail(f"{path}.parser", f"expected 'regex' or 'json', got {parser!r}")
        if "type" not in d:
            raise _fail(path, "missing field 'type'")
        type_name = _want_str(d, "type", path)
        if parser == "json":
            _check_keys(d, ("parser", "type"), path)
            return cls(parser="json", type=type_name)
        if "regex_expression" not in d:
            raise _fail(path, "missing field 'regex_expression'")
        expr = _want_str(d, "regex_expression", path)
        try:
            pattern = re.compile(translate_named_groups(expr))
        except re.error as e:
            raise _fail(f"{path}.regex_expression", f"invalid regular expression: {e}") from e
        group_names = set(pattern.groupindex)
        groups: dict[str, RegexGroup] = {}
        for key, spec in d.items():
            if key in ("parser", "type", "regex_expression"):
                continue
            gpath = f"{path}.{key}"
            if key not in group_names:
                raise _fail(
                    gpath,
                    "no named group of this name in regex_expression "
                    f"(groups: {', '.join(sorted(group_names)) or 'none'})",
                )
            if not isinstance(spec, dict):
                raise _fail(gpath, f"expected an object {{attr, type}}, got {describe_json(spec)}")
            _check_keys(spec, ("attr", "type"), gpath)
            if "attr" not in spec:
                raise _fail(gpath, "missing field 'attr'")
            attr = _want_str(spec, "attr", gpath)
            if "type" not in spec:
                raise _fail(gpath, "missing field 'type'")
            gtype = spec["type"]
            if gtype not in ("String", "Number", "Boolean"):
                raise _fail(f"{gpath}.type", f"expected String, Number or Boolean, got {gtype!r}")
            groups[key] = RegexGroup(attr=attr, type=gtype)
        return cls(
            parser="regex",
            type=type_name,
            regex_expression=expr,
            groups=groups,
            pattern=pattern,
        )


_METADATA_FIELDS = (
    "trusted",
    "entity_type_name",
    "token_id",
    "user_id",
    "workload_id",
    "role_mapping",
    "principal_mapping",
    "required_claims",
    "claim_mapping",
)


@dataclass(frozen=True)
class TokenMetadata:
    """One ``token_metadata`` entry: how tokens of one type are checked and mapped.

    ``role_mapping`` is a tuple of claim names; the empty tuple means disabled (``""``).
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

    @classmethod
    def from_dict(
        cls, d: object, path: str = "token_metadata", *, token_name: str | None = None
    ) -> TokenMetadata:
        """Validate one JSON record. ``token_name`` supplies the spec's default type name."""
        if not isinstance(d, dict):
            raise _fail(path, f"expected an object, got {describe_json(d)}")
        d = _present(d)
        _check_keys(d, _METADATA_FIELDS, path)
        if "entity_type_name" in d:
            etn = _want_str(d, "entity_type_name", path)
            if not _TYPE_NAME_RE.match(etn):
                raise _fail(
                    f"{path}.entity_type_name",
                    f"expected a qualified type name <Namespace>::<Type>, got {etn!r}",
                )
        elif token_name in DEFAULT_ENTITY_TYPES:
            etn = DEFAULT_ENTITY_TYPES[token_name]
        else:
            raise _fail(
                path,
                "missing field 'entity_type_name' (required for token types other than "
                + ", ".join(DEFAULT_ENTITY_TYPES)
                + ")",
            )
        kw: dict[str, Any] = {"entity_type_name": etn}
        if "trusted" in d:
            if not isinstance(d["trusted"], bool):
                raise _fail(
                    f"{path}.trusted", f"expected a boolean, got {describe_json(d['trusted'])}"
                )
            kw["trusted"] = d["trusted"]
        for key in ("token_id", "user_id", "workload_id"):
            if key in d:
                kw[key] = _want_str(d, key, path)
        if "role_mapping" in d:
            rm = d["role_mapping"]
            if isinstance(rm, str):
                kw["role_mapping"] = (rm,) if rm else ()
            elif isinstance(rm, list):
                kw["role_mapping"] = _want_str_list(rm, f"{path}.role_mapping")
            else:
                raise _fail(
                    f"{path}.role_mapping",
                    f"expected a string or an array of strings, got {describe_json(rm)}",
                )
            kw["role_mapping_explicit"] = True
        for key in ("principal_mapping", "required_claims"):
            if key in d:
                kw[key] = _want_str_list(d[key], f"{path}.{key}")
        if "claim_mapping" in d:
            cm = d["claim_mapping"]
            if not isinstance(cm, dict):
                raise _fail(f"{path}.claim_mapping", f"expected an object, got {describe_json(cm)}")
            kw["claim_mapping"] = {
                claim: ClaimMapping.from_dict(spec, f"{path}.claim_mapping.{claim}")
                for claim, spec in cm.items()
            }
        return cls(**kw)


_ISSUER_FIELDS = ("name", "description", "openid_configuration_endpoint", "token_metadata")


def _check_https_url(url: str, path: str) -> None:
    parts = urlsplit(url)
    if parts.scheme.lower() != "https" or not parts.hostname:
        raise _fail(path, f"expected an https:// URL, got {url!r}")


@dataclass(frozen=True)
class IssuerSettings:
    """One trusted issuer: ``issuer_id`` is its key in ``trusted_issuers``."""

    issuer_id: str
    name: str
    openid_configuration_endpoint: str
    token_metadata: Mapping[str, TokenMetadata] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if not _NAMESPACE_RE.match(self.name):
            raise PolicyStoreError(
                f"trusted issuer {self.issuer_id!r}: name {self.name!r} must be a namespace "
                "(identifiers joined by '::'), because it names the issuer's TrustedIssuer type"
            )

    @classmethod
    def from_dict(cls, issuer_id: str, d: object, path: str | None = None) -> IssuerSettings:
        """Validate one trusted issuer record (``trusted_issuers.<issuer_id>``)."""
        path = path or f"trusted_issuers.{issuer_id}"
        if not isinstance(d, dict):
            raise _fail(path, f"expected an object, got {describe_json(d)}")
        d = _present(d)
        if "tokens_metadata" in d:
            raise _fail(
                f"{path}.tokens_metadata",
                "'tokens_metadata' was renamed 'token_metadata'; rename the field",
            )
        _check_keys(d, _ISSUER_FIELDS, path)
        for key in ("name", "openid_configuration_endpoint"):
            if key not in d:
                raise _fail(path, f"missing field {key!r}")
        name = _want_str(d, "name", path)
        if not _NAMESPACE_RE.match(name):
            raise _fail(
                f"{path}.name",
                f"{name!r} must be a namespace (identifiers joined by '::', no spaces): it "
                "names the issuer's TrustedIssuer entity type",
            )
        endpoint = _want_str(d, "openid_configuration_endpoint", path)
        _check_https_url(endpoint, f"{path}.openid_configuration_endpoint")
        description = ""
        if "description" in d:
            description = _want_str(d, "description", path, allow_empty=True)
        metadata: dict[str, TokenMetadata] = {}
        tm = d.get("token_metadata", {})
        if not isinstance(tm, dict):
            raise _fail(f"{path}.token_metadata", f"expected an object, got {describe_json(tm)}")
        seen_types: dict[str, str] = {}
        for token_name, spec in tm.items():
            mpath = f"{path}.token_metadata.{token_name}"
            meta = TokenMetadata.from_dict(spec, mpath, token_name=token_name)
            other = seen_types.get(meta.entity_type_name)
            if other is not None:
                raise _fail(
                    f"{mpath}.entity_type_name",
                    f"{meta.entity_type_name!r} is also the entity type of token "
                    f"{other!r}; a request token's mapping must select one entry",
                )
            seen_types[meta.entity_type_name] = token_name
            metadata[token_name] = meta
        return cls(
            issuer_id=issuer_id,
            name=name,
            openid_configuration_endpoint=endpoint,
            token_metadata=metadata,
            description=description,
        )

    def metadata_for(self, entity_type_name: str) -> tuple[str, TokenMetadata] | None:
        """The token name and metadata whose ``entity_type_name`` is the request mapping."""
        for token_name, meta in self.token_metadata.items():
            if meta.entity_type_name == entity_type_name:
                return token_name, meta
        return None


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
        if not self.decision_log_jwt_id:
            raise ConfigError("ENGINE_DECISION_LOG_DEFAULT_JWT_ID: must not be empty")

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
