"""``ENGINE_*`` configuration: parse, validate, defaults.

One frozen :class:`Config` carries every property of the engine. It can be built from a
dict, a JSON or YAML file or the environment (the environment overrides a file). Every
value is checked when the object is built, so a typo or an impossible value fails at
start-up with a message that names the key, the value and what is allowed, never later in
the middle of a request.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from polang._record import Record
from polang.errors import ConfigError
from polang.inputs.fields import closest
from polang.inputs.files import InputFileError, read_regular_file
from polang.inputs.problems import Problems
from polang.inputs.strict import load_yaml
from polang.jsonlimits import loads

_set = object.__setattr__

MIB = 1024 * 1024

ALL_ALGORITHMS: tuple[str, ...] = (
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
    "HS256",
    "HS384",
    "HS512",
)
ASYMMETRIC_ALGORITHMS: tuple[str, ...] = tuple(a for a in ALL_ALGORITHMS if not a.startswith("HS"))
LOG_TYPES: tuple[str, ...] = ("off", "memory", "std_out", "python")
LOG_LEVELS: tuple[str, ...] = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
DATALOG_BACKENDS: tuple[str, ...] = ("compiled", "pydatalog")
OTEL_MODES: tuple[str, ...] = ("auto", "on", "off")

#: The keys that name where the policy store comes from (at most one may be set).
STORE_SOURCE_KEYS: tuple[str, ...] = (
    "ENGINE_POLICY_STORE_URI",
    "ENGINE_POLICY_STORE_LOCAL_FN",
    "ENGINE_POLICY_STORE_LOCAL",
)

#: Cedarling's other names of some ``ENGINE_LOCK_*`` properties (its bootstrap files, renamed
#: from ``CEDARLING_`` to ``ENGINE_``, are read as they are): alias -> property.
ALIASES: dict[str, str] = {
    "ENGINE_LOCK_ACCESS_TOKEN_JWT": "ENGINE_LOCK_ACCESS_TOKEN",
    "ENGINE_LOCK_DYNAMIC_CONFIGURATION": "ENGINE_LOCK_LISTEN_SSE",
}

MAX_LOCK_CHANNEL_CAPACITY = 100_000
"""The most audit entries ``ENGINE_LOCK_LOG_CHANNEL_CAPACITY`` may queue per kind (an
entry is about a kilobyte: the queues stay within a few hundred MiB whatever the Lock
does)."""

MAX_LOCK_LOG_RETRIES = 31
"""The most retries ``ENGINE_LOCK_LOG_MAX_RETRIES`` allows (Cedarling's bound too)."""


# ---------------------------------------------------------------- value parsers
# Each parser takes the key (for messages) and a raw value (a string from the environment,
# or a typed value from a dict / JSON / YAML / the constructor) and returns the typed value.


def _fail(key: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"{key}: invalid value {value!r}; allowed: {allowed}")


def _toggle(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v == "enabled":
            return True
        if v == "disabled":
            return False
    raise _fail(key, value, "'enabled' or 'disabled' (or a boolean)")


def _string(key: str, value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise _fail(key, value, "a non-empty string")


def _optional_string(key: str, value: object) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _string(key, value)


def _optional_path(key: str, value: object) -> str | None:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value
    raise _fail(key, value, "a file system path (string)")


def _optional_url(key: str, value: object) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        parts = urlsplit(value.strip())
        if parts.scheme.lower() in ("http", "https") and parts.hostname:
            return value.strip()
    raise _fail(key, value, "an absolute http:// or https:// URL with a host")


def _optional_https_url(key: str, value: object) -> str | None:
    url = _optional_url(key, value)
    if url is not None and urlsplit(url).scheme.lower() != "https":
        raise _fail(key, value, "an absolute https:// URL with a host")
    return url


def _lock_transport(key: str, value: object) -> str:
    if isinstance(value, str) and value.strip().lower() == "rest":
        return "rest"
    if isinstance(value, str) and value.strip().lower() == "grpc":
        raise ConfigError(
            f"{key}: 'grpc' is not built in polang (the Lock's REST endpoints carry the same "
            "entries); allowed: rest"
        )
    raise _fail(key, value, "rest")


def _never_enabled(key: str, value: object) -> bool:
    if _toggle(key, value):
        raise ConfigError(
            f"{key}: polang never turns certificate checks off; trust a private CA with "
            "SSL_CERT_FILE or the ssl_context given to Engine(...); allowed: disabled"
        )
    return False


_INT_RE = re.compile(r"\s*\+?\d+(_\d+)*\s*\Z", re.ASCII)
# The leading \s*+ is possessive: everything between the two \s* is optional, so a plain
# \s* would try every split of a run of spaces between them (n**2 on a 1 MiB file).
_NUM_RE = re.compile(r"\s*+\+?(\d+(_\d+)*)?(\.\d+)?\s*\Z", re.ASCII)


def _number(key: str, value: object, *, integer: bool, minimum: float, what: str) -> float | int:
    allowed = f"{what} (a {'whole ' if integer else ''}number >= {minimum:g})"
    n: float | int
    if isinstance(value, bool):
        raise _fail(key, value, allowed)
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and not integer:
        if not math.isfinite(value):
            raise _fail(key, value, allowed)
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and _INT_RE.match(value):
        try:
            n = int(value.strip().replace("_", ""))
        except ValueError:  # more than 4,300 digits (CPython's limit)
            raise _fail(key, value, allowed) from None
    elif (
        isinstance(value, str)
        and not integer
        and _NUM_RE.match(value)
        and any(c.isdigit() for c in value)
    ):
        n = float(value.strip().replace("_", ""))
    else:
        raise _fail(key, value, allowed)
    if n < minimum:
        raise _fail(key, value, allowed)
    return n


MAX_CONFIG_FILE_BYTES = 1024 * 1024
"""The largest configuration file ``Config.from_file`` reads (1 MiB: a few dozen keys)."""

MAX_SECONDS = 1_000_000_000
"""The largest number of seconds a property takes (about 31 years): timers and waits
refuse longer timeouts (``threading.TIMEOUT_MAX``), and no interval needs more."""


def _seconds(minimum: float = 0) -> Callable[[str, object], float]:
    def parse(key: str, value: object) -> float:
        n = _number(key, value, integer=False, minimum=minimum, what="seconds")
        if n > MAX_SECONDS:  # compared before float(): a huge int is no float
            raise _fail(key, value, f"seconds (at most {MAX_SECONDS:,}: MAX_SECONDS)")
        return float(n)

    return parse


def _optional_seconds(minimum: float) -> Callable[[str, object], float | None]:
    inner = _seconds(minimum)

    def parse(key: str, value: object) -> float | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return inner(key, value)

    return parse


MAX_COUNT = 2**53
"""The largest count or size a property takes (the largest whole number every JSON reader
holds exactly): sizes reach C-level reads, which refuse numbers beyond 2**63."""


def _count(minimum: int = 0, what: str = "a count") -> Callable[[str, object], int]:
    def parse(key: str, value: object) -> int:
        n = int(_number(key, value, integer=True, minimum=minimum, what=what))
        if n > MAX_COUNT:
            raise _fail(key, value, f"{what} (at most 2**53 = {MAX_COUNT:,}: MAX_COUNT)")
        return n

    return parse


def _bounded_count(
    minimum: int, maximum: int, what: str, name: str
) -> Callable[[str, object], int]:
    inner = _count(minimum, what)

    def parse(key: str, value: object) -> int:
        n = inner(key, value)
        if n > maximum:
            raise _fail(key, value, f"{what} (at most {maximum:,}: {name})")
        return n

    return parse


def _choice(
    choices: tuple[str, ...], *, upper: bool = False, aliases: Mapping[str, str] | None = None
) -> Callable[[str, object], str]:
    def parse(key: str, value: object) -> str:
        if isinstance(value, str):
            v = value.strip().upper() if upper else value.strip().lower()
            v = (aliases or {}).get(v, v)
            if v in choices:
                return v
        raise _fail(key, value, "one of " + ", ".join(choices))

    return parse


def _algorithms(key: str, value: object) -> tuple[str, ...]:
    allowed = "a non-empty list of " + " ".join(ALL_ALGORITHMS)
    items: list[object]
    if isinstance(value, str):
        items = [p for p in re.split(r"[\s,]+", value.strip()) if p]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise _fail(key, value, allowed)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or item not in ALL_ALGORITHMS:
            hint = ""
            if isinstance(item, str):
                if item.strip().lower() == "none":
                    hint = " ('none' is never a valid signature algorithm)"
                else:
                    near = closest(item, ALL_ALGORITHMS, cutoff=0.5)
                    if near:
                        hint = f" (did you mean {near}?)"
            raise ConfigError(
                f"{key}: invalid algorithm {item!r} in {value!r}{hint}; allowed: {allowed}"
            )
        if item not in out:
            out.append(item)
    if not out:
        raise _fail(key, value, allowed)
    return tuple(out)


# ---------------------------------------------------------------- the property table


class Property(Record):
    """One ``ENGINE_*`` property: its key, the Config field, parser and documentation."""

    __slots__ = ("allowed", "doc", "field", "key", "parse")
    key: str
    field: str
    parse: Callable[[str, object], Any]
    allowed: str
    doc: str

    def __init__(
        self, key: str, field: str, parse: Callable[[str, object], Any], allowed: str, doc: str
    ) -> None:
        _set(self, "key", key)
        _set(self, "field", field)
        _set(self, "parse", parse)
        _set(self, "allowed", allowed)
        _set(self, "doc", doc)


PROPERTIES: tuple[Property, ...] = (
    Property(
        "ENGINE_APPLICATION_NAME",
        "application_name",
        _string,
        "a non-empty string",
        "Name of the embedding application, shown in every log entry.",
    ),
    Property(
        "ENGINE_POLICY_STORE_LOCAL_FN",
        "policy_store_local_fn",
        _optional_path,
        "a path: a directory, a .parc archive, a .json or .yaml/.yml legacy file",
        "Local policy store; its format is detected from what the path names.",
    ),
    Property(
        "ENGINE_POLICY_STORE_URI",
        "policy_store_uri",
        _optional_url,
        "an http(s) URL; a path ending in .parc is an archive, anything else legacy JSON",
        "Remote policy store fetched at start-up (and on refresh).",
    ),
    Property(
        "ENGINE_POLICY_STORE_LOCAL",
        "policy_store_local",
        _optional_string,
        "the text of a legacy store (JSON or YAML)",
        "An inline legacy store.",
    ),
    Property(
        "ENGINE_POLICY_STORE_ID",
        "policy_store_id",
        _optional_string,
        "a store id of the legacy file",
        "Selects one store of a multi-store legacy file (default: its only store).",
    ),
    Property(
        "ENGINE_POLICY_STORE_VALIDATE_CHECKSUM",
        "policy_store_validate_checksum",
        _toggle,
        "enabled, disabled",
        "Whether the SHA-256 checksums of manifest.json are verified.",
    ),
    Property(
        "ENGINE_POLICY_STORE_REFRESH_INTERVAL",
        "policy_store_refresh_interval",
        _seconds(0),
        "seconds >= 0 (0 = never)",
        "URL sources are reloaded in the background this often.",
    ),
    Property(
        "ENGINE_STRICT_SCHEMA_VALIDATION",
        "strict_schema_validation",
        _toggle,
        "enabled, disabled",
        "Policies must pass strict schema validation when the store is loaded.",
    ),
    Property(
        "ENGINE_JWT_SIG_VALIDATION",
        "jwt_sig_validation",
        _toggle,
        "enabled, disabled",
        "Verify JWT signatures against the issuer's keys.",
    ),
    Property(
        "ENGINE_JWT_STATUS_VALIDATION",
        "jwt_status_validation",
        _toggle,
        "enabled, disabled",
        "Check token status lists (revocation).",
    ),
    Property(
        "ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED",
        "jwt_signature_algorithms_supported",
        _algorithms,
        "a list of " + " ".join(ALL_ALGORITHMS),
        "JWT signature algorithms accepted.",
    ),
    Property(
        "ENGINE_JWT_CLOCK_SKEW",
        "jwt_clock_skew",
        _seconds(0),
        "seconds >= 0",
        "Leeway applied to exp, nbf and iat.",
    ),
    Property(
        "ENGINE_LOCAL_JWKS",
        "local_jwks",
        _optional_path,
        'a path to a JSON file {"<issuer_id>": [JWK, ...]}',
        "Keys of issuers given locally (no discovery for those issuers).",
    ),
    Property(
        "ENGINE_JWKS_REFRESH_INTERVAL",
        "jwks_refresh_interval",
        _optional_seconds(0.001),
        "seconds > 0; unset = from Cache-Control, else 3600",
        "How often an issuer's JWKS is refetched.",
    ),
    Property(
        "ENGINE_JWKS_MIN_REFRESH_INTERVAL",
        "jwks_min_refresh_interval",
        _seconds(0),
        "seconds >= 0",
        "Cooldown between refetches triggered by an unknown kid.",
    ),
    Property(
        "ENGINE_JWT_STATUS_LIST_REFRESH_INTERVAL_MAX",
        "jwt_status_list_refresh_interval_max",
        _seconds(0),
        "seconds >= 0",
        "Cap on a status list's ttl.",
    ),
    Property(
        "ENGINE_TOKEN_CACHE_CAPACITY",
        "token_cache_capacity",
        _count(0, "a number of tokens"),
        "a whole number >= 0 (0 = no cache)",
        "Validated-token cache size.",
    ),
    Property(
        "ENGINE_TOKEN_CACHE_MAX_TTL",
        "token_cache_max_ttl",
        _seconds(0),
        "seconds >= 0 (0 = no cache)",
        "Longest time a validated token stays cached.",
    ),
    Property(
        "ENGINE_HTTP_REQUEST_TIMEOUT",
        "http_request_timeout",
        _seconds(0.001),
        "seconds > 0",
        "Deadline of each outbound fetch as a whole (retries, redirects and body included).",
    ),
    Property(
        "ENGINE_HTTP_MAX_RETRIES",
        "http_max_retries",
        _count(0, "a number of retries"),
        "a whole number >= 0",
        "Retries of a failed outbound fetch (connection error, 408/425/429/5xx; Retry-After).",
    ),
    Property(
        "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES",
        "http_max_response_size_bytes",
        _count(1, "bytes"),
        "a whole number of bytes >= 1",
        "Largest response body accepted.",
    ),
    Property(
        "ENGINE_TOKEN_MAX_SIZE",
        "token_max_size",
        _count(1, "characters"),
        "a whole number of characters >= 1",
        "Longest token read; a longer one is dropped before it is decoded.",
    ),
    Property(
        "ENGINE_MAX_DEFAULT_ENTITIES",
        "max_default_entities",
        _count(0, "a number of entities"),
        "a whole number >= 0 (0 = unlimited)",
        "Most default entities a store may hold.",
    ),
    Property(
        "ENGINE_MAX_BASE64_SIZE",
        "max_base64_size",
        _count(0, "bytes"),
        "a whole number of bytes >= 0 (0 = unlimited)",
        "Largest Base64 string accepted in a legacy store.",
    ),
    Property(
        "ENGINE_LOG_TYPE",
        "log_type",
        _choice(LOG_TYPES),
        ", ".join(LOG_TYPES),
        "Where logs go.",
    ),
    Property(
        "ENGINE_LOG_LEVEL",
        "log_level",
        _choice(LOG_LEVELS, upper=True, aliases={"WARNING": "WARN"}),
        ", ".join(LOG_LEVELS) + " (WARNING is read as WARN)",
        "Lowest level of system log entries kept.",
    ),
    Property(
        "ENGINE_LOG_TTL",
        "log_ttl",
        _seconds(0),
        "seconds >= 0 (0 = no expiry)",
        "How long the memory log keeps an entry.",
    ),
    Property(
        "ENGINE_LOG_MAX_ITEMS",
        "log_max_items",
        _count(0, "a number of entries"),
        "a whole number >= 0 (0 = no limit)",
        "Most entries the memory log keeps.",
    ),
    Property(
        "ENGINE_DECISION_LOG_DEFAULT_JWT_ID",
        "decision_log_default_jwt_id",
        _string,
        "a claim name",
        "Claim shown for each token in decision logs.",
    ),
    Property(
        "ENGINE_DATA_STORE_MAX_ENTRIES",
        "data_store_max_entries",
        _count(0, "a number of entries"),
        "a whole number >= 0 (0 = no limit)",
        "Most entries the context data (push_data) holds at once.",
    ),
    Property(
        "ENGINE_DATA_STORE_MAX_ENTRY_SIZE",
        "data_store_max_entry_size",
        _count(0, "bytes"),
        "a whole number of bytes >= 0 (0 = no limit)",
        "Largest context data value, counted as its UTF-8 JSON text.",
    ),
    Property(
        "ENGINE_DATA_STORE_DEFAULT_TTL",
        "data_store_default_ttl",
        _optional_seconds(0.001),
        "seconds > 0; unset = entries pushed without a ttl never expire",
        "How long a context data entry pushed without a ttl lives.",
    ),
    Property(
        "ENGINE_DATA_STORE_MAX_TTL",
        "data_store_max_ttl",
        _seconds(0),
        "seconds >= 0 (0 = no cap)",
        "Longest ttl push_data accepts.",
    ),
    Property(
        "ENGINE_OTEL",
        "otel",
        _choice(OTEL_MODES),
        ", ".join(OTEL_MODES),
        "OpenTelemetry spans and metrics: auto (once the application sets an SDK), on, off.",
    ),
    Property(
        "ENGINE_DATALOG_BACKEND",
        "datalog_backend",
        _choice(DATALOG_BACKENDS),
        ", ".join(DATALOG_BACKENDS),
        "Which Datalog backend decides requests.",
    ),
    Property(
        "ENGINE_LOCK",
        "lock",
        _toggle,
        "enabled, disabled",
        "Connect to a Janssen Lock server: the store by id, audit, pushed updates (docs/lock.md).",
    ),
    Property(
        "ENGINE_LOCK_SERVER_CONFIGURATION_URI",
        "lock_server_configuration_uri",
        _optional_https_url,
        "an https URL (.../.well-known/lock-server-configuration)",
        "The Lock server's configuration document.",
    ),
    Property(
        "ENGINE_LOCK_SSA_JWT",
        "lock_ssa_jwt",
        _optional_string,
        "a software statement (a signed JWT)",
        "Registers the engine as a client of the Lock's OpenID provider.",
    ),
    Property(
        "ENGINE_LOCK_ACCESS_TOKEN",
        "lock_access_token",
        _optional_string,
        "an access token for the Lock (replaces registration)",
        "A bearer token given directly; Cedarling's ENGINE_LOCK_ACCESS_TOKEN_JWT is read too.",
    ),
    Property(
        "ENGINE_LOCK_LOG_INTERVAL",
        "lock_log_interval",
        _seconds(0),
        "seconds >= 0 (0 = off)",
        "How often queued decision logs are sent to the Lock.",
    ),
    Property(
        "ENGINE_LOCK_HEALTH_INTERVAL",
        "lock_health_interval",
        _seconds(0),
        "seconds >= 0 (0 = off)",
        "How often a health entry is sent to the Lock.",
    ),
    Property(
        "ENGINE_LOCK_TELEMETRY_INTERVAL",
        "lock_telemetry_interval",
        _seconds(0),
        "seconds >= 0 (0 = off)",
        "How often a telemetry entry is sent to the Lock.",
    ),
    Property(
        "ENGINE_LOCK_LISTEN_SSE",
        "lock_listen_sse",
        _toggle,
        "enabled, disabled",
        "Listen to the Lock's server-sent events (status lists, store updates, reports).",
    ),
    Property(
        "ENGINE_LOCK_TRANSPORT",
        "lock_transport",
        _lock_transport,
        "rest",
        "How audit entries travel (REST; gRPC is not built).",
    ),
    Property(
        "ENGINE_LOCK_ACCEPT_INVALID_CERTS",
        "lock_accept_invalid_certs",
        _never_enabled,
        "disabled",
        "Cedarling's switch to skip certificate checks: only 'disabled' is accepted.",
    ),
    Property(
        "ENGINE_LOCK_LOG_CHANNEL_CAPACITY",
        "lock_log_channel_capacity",
        _bounded_count(
            1, MAX_LOCK_CHANNEL_CAPACITY, "a number of entries", "MAX_LOCK_CHANNEL_CAPACITY"
        ),
        "a whole number >= 1",
        "Most entries each audit queue holds; when full, the oldest are dropped and counted.",
    ),
    Property(
        "ENGINE_LOCK_LOG_MAX_RETRIES",
        "lock_log_max_retries",
        _bounded_count(0, MAX_LOCK_LOG_RETRIES, "a number of retries", "MAX_LOCK_LOG_RETRIES"),
        "a whole number >= 0",
        "Retries of an audit batch the Lock did not take, with backoff; then it is dropped.",
    ),
    Property(
        "ENGINE_LOCK_SHUTDOWN_TIMEOUT",
        "lock_shutdown_timeout",
        _seconds(0),
        "seconds >= 0",
        "How long engine.close() may spend sending what is queued.",
    ),
)

PROPERTY_BY_KEY: dict[str, Property] = {p.key: p for p in PROPERTIES}
PROPERTY_BY_FIELD: dict[str, Property] = {p.field: p for p in PROPERTIES}


def _suggest(key: str) -> str:
    near = closest(key.upper(), [*PROPERTY_BY_KEY, *ALIASES])
    return f" (did you mean {near}?)" if near else ""


# ---------------------------------------------------------------- the config


class Config(Record):
    """Every ``ENGINE_*`` property, typed; field ``x`` is property ``ENGINE_X``.

    Built directly (``Config(policy_store_local_fn="store/")``) or with the ``from_*``
    constructors; either way every value is validated on construction.
    """

    __slots__ = (
        "_explicit",
        "application_name",
        "data_store_default_ttl",
        "data_store_max_entries",
        "data_store_max_entry_size",
        "data_store_max_ttl",
        "datalog_backend",
        "decision_log_default_jwt_id",
        "http_max_response_size_bytes",
        "http_max_retries",
        "http_request_timeout",
        "jwks_min_refresh_interval",
        "jwks_refresh_interval",
        "jwt_clock_skew",
        "jwt_sig_validation",
        "jwt_signature_algorithms_supported",
        "jwt_status_list_refresh_interval_max",
        "jwt_status_validation",
        "local_jwks",
        "lock",
        "lock_accept_invalid_certs",
        "lock_access_token",
        "lock_health_interval",
        "lock_listen_sse",
        "lock_log_channel_capacity",
        "lock_log_interval",
        "lock_log_max_retries",
        "lock_server_configuration_uri",
        "lock_shutdown_timeout",
        "lock_ssa_jwt",
        "lock_telemetry_interval",
        "lock_transport",
        "log_level",
        "log_max_items",
        "log_ttl",
        "log_type",
        "max_base64_size",
        "max_default_entities",
        "otel",
        "policy_store_id",
        "policy_store_local",
        "policy_store_local_fn",
        "policy_store_refresh_interval",
        "policy_store_uri",
        "policy_store_validate_checksum",
        "strict_schema_validation",
        "token_cache_capacity",
        "token_cache_max_ttl",
        "token_max_size",
    )
    application_name: str
    policy_store_local_fn: str | None
    policy_store_uri: str | None
    policy_store_local: str | None
    policy_store_id: str | None
    policy_store_validate_checksum: bool
    policy_store_refresh_interval: float
    strict_schema_validation: bool
    jwt_sig_validation: bool
    jwt_status_validation: bool
    jwt_signature_algorithms_supported: tuple[str, ...]
    jwt_clock_skew: float
    local_jwks: str | None
    jwks_refresh_interval: float | None
    jwks_min_refresh_interval: float
    jwt_status_list_refresh_interval_max: float
    token_cache_capacity: int
    token_cache_max_ttl: float
    http_request_timeout: float
    http_max_retries: int
    http_max_response_size_bytes: int
    token_max_size: int
    max_default_entities: int
    max_base64_size: int
    log_type: str
    log_level: str
    log_ttl: float
    log_max_items: int
    decision_log_default_jwt_id: str
    data_store_max_entries: int
    data_store_max_entry_size: int
    data_store_default_ttl: float | None
    data_store_max_ttl: float
    datalog_backend: str
    otel: str
    lock: bool
    lock_server_configuration_uri: str | None
    lock_ssa_jwt: str | None
    lock_access_token: str | None
    lock_log_interval: float
    lock_health_interval: float
    lock_telemetry_interval: float
    lock_listen_sse: bool
    lock_transport: str
    lock_accept_invalid_certs: bool
    lock_log_channel_capacity: int
    lock_log_max_retries: int
    lock_shutdown_timeout: float
    _explicit: frozenset[str]
    _unshown: ClassVar[tuple[str, ...]] = ("lock_ssa_jwt", "lock_access_token")

    def __init__(
        self,
        application_name: str = "polang",
        policy_store_local_fn: str | None = None,
        policy_store_uri: str | None = None,
        policy_store_local: str | None = None,
        policy_store_id: str | None = None,
        policy_store_validate_checksum: bool = True,
        policy_store_refresh_interval: float = 0.0,
        strict_schema_validation: bool = True,
        jwt_sig_validation: bool = True,
        jwt_status_validation: bool = True,
        jwt_signature_algorithms_supported: tuple[str, ...] = ASYMMETRIC_ALGORITHMS,
        jwt_clock_skew: float = 0.0,
        local_jwks: str | None = None,
        jwks_refresh_interval: float | None = None,
        jwks_min_refresh_interval: float = 30.0,
        jwt_status_list_refresh_interval_max: float = 300.0,
        token_cache_capacity: int = 1000,
        token_cache_max_ttl: float = 300.0,
        http_request_timeout: float = 10.0,
        http_max_retries: int = 3,
        http_max_response_size_bytes: int = 10 * MIB,
        token_max_size: int = 64 * 1024,
        max_default_entities: int = 1000,
        max_base64_size: int = 1 * MIB,
        log_type: str = "off",
        log_level: str = "WARN",
        log_ttl: float = 60.0,
        log_max_items: int = 10000,
        decision_log_default_jwt_id: str = "jti",
        data_store_max_entries: int = 10_000,
        data_store_max_entry_size: int = 1 * MIB,
        data_store_default_ttl: float | None = None,
        data_store_max_ttl: float = 3600.0,
        datalog_backend: str = "compiled",
        otel: str = "auto",
        lock: bool = False,
        lock_server_configuration_uri: str | None = None,
        lock_ssa_jwt: str | None = None,
        lock_access_token: str | None = None,
        lock_log_interval: float = 0.0,
        lock_health_interval: float = 0.0,
        lock_telemetry_interval: float = 0.0,
        lock_listen_sse: bool = False,
        lock_transport: str = "rest",
        lock_accept_invalid_certs: bool = False,
        lock_log_channel_capacity: int = 100,
        lock_log_max_retries: int = 5,
        lock_shutdown_timeout: float = 5.0,
        _explicit: frozenset[str] = frozenset(),
    ) -> None:
        _set(self, "application_name", application_name)
        _set(self, "policy_store_local_fn", policy_store_local_fn)
        _set(self, "policy_store_uri", policy_store_uri)
        _set(self, "policy_store_local", policy_store_local)
        _set(self, "policy_store_id", policy_store_id)
        _set(self, "policy_store_validate_checksum", policy_store_validate_checksum)
        _set(self, "policy_store_refresh_interval", policy_store_refresh_interval)
        _set(self, "strict_schema_validation", strict_schema_validation)
        _set(self, "jwt_sig_validation", jwt_sig_validation)
        _set(self, "jwt_status_validation", jwt_status_validation)
        _set(self, "jwt_signature_algorithms_supported", jwt_signature_algorithms_supported)
        _set(self, "jwt_clock_skew", jwt_clock_skew)
        _set(self, "local_jwks", local_jwks)
        _set(self, "jwks_refresh_interval", jwks_refresh_interval)
        _set(self, "jwks_min_refresh_interval", jwks_min_refresh_interval)
        _set(self, "jwt_status_list_refresh_interval_max", jwt_status_list_refresh_interval_max)
        _set(self, "token_cache_capacity", token_cache_capacity)
        _set(self, "token_cache_max_ttl", token_cache_max_ttl)
        _set(self, "http_request_timeout", http_request_timeout)
        _set(self, "http_max_retries", http_max_retries)
        _set(self, "http_max_response_size_bytes", http_max_response_size_bytes)
        _set(self, "token_max_size", token_max_size)
        _set(self, "max_default_entities", max_default_entities)
        _set(self, "max_base64_size", max_base64_size)
        _set(self, "log_type", log_type)
        _set(self, "log_level", log_level)
        _set(self, "log_ttl", log_ttl)
        _set(self, "log_max_items", log_max_items)
        _set(self, "decision_log_default_jwt_id", decision_log_default_jwt_id)
        _set(self, "data_store_max_entries", data_store_max_entries)
        _set(self, "data_store_max_entry_size", data_store_max_entry_size)
        _set(self, "data_store_default_ttl", data_store_default_ttl)
        _set(self, "data_store_max_ttl", data_store_max_ttl)
        _set(self, "datalog_backend", datalog_backend)
        _set(self, "otel", otel)
        _set(self, "lock", lock)
        _set(self, "lock_server_configuration_uri", lock_server_configuration_uri)
        _set(self, "lock_ssa_jwt", lock_ssa_jwt)
        _set(self, "lock_access_token", lock_access_token)
        _set(self, "lock_log_interval", lock_log_interval)
        _set(self, "lock_health_interval", lock_health_interval)
        _set(self, "lock_telemetry_interval", lock_telemetry_interval)
        _set(self, "lock_listen_sse", lock_listen_sse)
        _set(self, "lock_transport", lock_transport)
        _set(self, "lock_accept_invalid_certs", lock_accept_invalid_certs)
        _set(self, "lock_log_channel_capacity", lock_log_channel_capacity)
        _set(self, "lock_log_max_retries", lock_log_max_retries)
        _set(self, "lock_shutdown_timeout", lock_shutdown_timeout)
        _set(self, "_explicit", _explicit)
        self.__post_init__()

    def __post_init__(self) -> None:
        for name in self._fields:
            prop = PROPERTY_BY_FIELD[name]
            value = getattr(self, name)
            if value is None and _DEFAULTS[name] is not None:
                raise _fail(prop.key, value, prop.allowed)
            _set(self, name, prop.parse(prop.key, value))
        given = [k for k in STORE_SOURCE_KEYS if getattr(self, PROPERTY_BY_KEY[k].field)]
        if len(given) > 1:
            raise ConfigError(
                "more than one policy store source is configured ("
                + ", ".join(given)
                + "); set exactly one of "
                + ", ".join(STORE_SOURCE_KEYS)
            )
        if self.lock:
            self._check_lock(given)

    def _check_lock(self, sources: list[str]) -> None:
        """What ``ENGINE_LOCK=enabled`` needs (the Lock's own failures show at start-up)."""
        if not self.lock_server_configuration_uri:
            raise ConfigError(
                "ENGINE_LOCK is enabled but ENGINE_LOCK_SERVER_CONFIGURATION_URI is not set "
                "(the Lock's https://.../.well-known/lock-server-configuration)"
            )
        if not (self.lock_ssa_jwt or self.lock_access_token):
            raise ConfigError(
                "ENGINE_LOCK is enabled but neither ENGINE_LOCK_SSA_JWT (to register) nor "
                "ENGINE_LOCK_ACCESS_TOKEN is set: the Lock's endpoints need a bearer token"
            )
        if not sources and not self.policy_store_id:
            raise ConfigError(
                "ENGINE_LOCK is enabled without a store: set ENGINE_POLICY_STORE_ID to fetch "
                "the store from the Lock, or one of " + ", ".join(STORE_SOURCE_KEYS)
            )

    # -------------------------------------------------------------- constructors

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Config:
        """Build from ``{"ENGINE_...": value}``; ``None`` means "the default"."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"configuration must be a mapping of ENGINE_* keys, got {d!r}")
        kwargs: dict[str, Any] = {}
        merged: set[str] = set()  # toggles given under both names, already combined
        for key, value in d.items():
            if not isinstance(key, str):
                raise ConfigError(f"configuration key {key!r} is not a string")
            alias = ALIASES.get(key)
            if alias is not None:
                other = d.get(alias)
                if other is not None and value is not None:
                    target = PROPERTY_BY_KEY[alias]
                    mine, theirs = target.parse(key, value), target.parse(alias, other)
                    if target.parse is _toggle:  # Cedarling's two switches: either turns it on
                        kwargs[target.field] = mine or theirs
                        merged.add(target.field)
                        continue
                    if mine != theirs:
                        raise ConfigError(
                            f"{key} and {alias} are the same property with different values; "
                            "set one of them"
                        )
                key = alias
            prop = PROPERTY_BY_KEY.get(key)
            if prop is None:
                raise ConfigError(f"unknown configuration key {key!r}{_suggest(key)}")
            if value is None or prop.field in merged:
                continue
            kwargs[prop.field] = prop.parse(key, value)
        return cls(**kwargs, _explicit=frozenset(kwargs))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Config:
        """Read a JSON or YAML file holding one mapping of ``ENGINE_*`` keys."""
        p = Path(path)
        if p.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise ConfigError(f"{p}: configuration files must end in .json, .yaml or .yml")
        try:  # a regular file (a FIFO would block), a link followed (mounted configs)
            raw = read_regular_file(p, MAX_CONFIG_FILE_BYTES, "MAX_CONFIG_FILE_BYTES")
            text = raw.decode("utf-8-sig")
        except InputFileError as e:
            raise ConfigError(f"{p}: cannot read configuration file: {e.reason}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{p}: not UTF-8 text (byte {e.start})") from None
        data: Any
        suffix = p.suffix.lower()
        if suffix == ".json":
            data = loads(text, what=str(p), error=ConfigError)
        else:
            # the store's YAML reader: no recursion, no aliases, MAX_YAML_DEPTH
            problems = Problems(str(p))
            data = load_yaml(text, file=str(p), problems=problems)
            if problems.items:
                raise ConfigError(str(problems.items[0]))
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: the configuration must be a mapping of ENGINE_* keys")
        try:
            return cls.from_dict(data)
        except ConfigError as e:
            raise ConfigError(f"{p}: {e}") from e

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, base: Config | None = None
    ) -> Config:
        """``ENGINE_*`` variables over ``base`` (e.g. ``Config.from_file(...)``).

        An empty variable unsets an optional property. When the environment names a
        policy store source, the base's other sources are dropped: the environment wins.
        """
        env = os.environ if environ is None else environ
        overrides = {k: v for k, v in env.items() if k.startswith("ENGINE_")}
        merged: dict[str, Any] = base.to_dict() if base is not None else {}
        if any(overrides.get(k, "").strip() for k in STORE_SOURCE_KEYS):
            for k in STORE_SOURCE_KEYS:
                merged.pop(k, None)
        for key, value in overrides.items():
            if value.strip() == "" and key in PROPERTY_BY_KEY:
                merged.pop(key, None)
                continue
            merged[key] = value
        return cls.from_dict(merged)

    # -------------------------------------------------------------- views

    def to_dict(self, *, include_defaults: bool = True) -> dict[str, Any]:
        """``{"ENGINE_...": value}`` in a form :meth:`from_dict` reads back."""
        out: dict[str, Any] = {}
        for prop in PROPERTIES:
            value = getattr(self, prop.field)
            if value is None:
                continue
            if not include_defaults and prop.field not in self._explicit:
                continue
            if prop.parse is _toggle:
                value = "enabled" if value else "disabled"
            elif isinstance(value, tuple):
                value = list(value)
            out[prop.key] = value
        return out

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields changed (validated like any construction)."""
        unknown = changes.keys() - set(self._fields)
        if unknown:
            raise TypeError(f"Config has no field {sorted(unknown)[0]!r}")
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return Config(**values, _explicit=self._explicit | frozenset(changes))

    @property
    def store_source_key(self) -> str | None:
        """Which ``ENGINE_*`` key names the policy store, if any."""
        for key in STORE_SOURCE_KEYS:
            if getattr(self, PROPERTY_BY_KEY[key].field):
                return key
        return None


_DEFAULTS: dict[str, Any] = dict(
    zip(Config._fields, Config.__init__.__defaults__ or (), strict=False)
)
"""Each field's default (every field has one; ``_explicit`` comes last in the signature)."""


def known_keys() -> Iterable[str]:
    """Every recognised ``ENGINE_*`` key (documentation and tooling)."""
    return PROPERTY_BY_KEY.keys()
