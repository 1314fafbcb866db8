"""The ``ENGINE_*`` values token handling reads, and the algorithms it knows.

The trusted issuers and their token metadata (the store's records) are
:mod:`polang.tokens.records`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polang.errors import ConfigError
from polang.http import FetchLimits

if TYPE_CHECKING:
    import ssl

    from polang.http import FetchObserver

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


@dataclass(frozen=True)
class TokenSettings:
    """The ``ENGINE_*`` values token handling reads (see the configuration table).

    A JWKS response's Cache-Control ``max-age`` wins over ``jwks_refresh_interval``,
    which applies when the response has none (``None``: 3600 s). ``ssl_context``
    replaces the default trust (system store plus ``SSL_CERT_FILE``) for embedders and
    tests; ``fetch_observer`` is told of each fetch (the engine's telemetry).
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
    fetch_observer: FetchObserver | None = field(default=None, compare=False, repr=False)

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
