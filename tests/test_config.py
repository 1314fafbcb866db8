"""ENGINE_* configuration: defaults, every kind of value, files, environment, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polang.config import (
    ALL_ALGORITHMS,
    ASYMMETRIC_ALGORITHMS,
    MAX_CONFIG_FILE_BYTES,
    MAX_COUNT,
    MAX_SECONDS,
    MIB,
    PROPERTIES,
    STORE_SOURCE_KEYS,
    Config,
    known_keys,
)
from polang.errors import ConfigError
from polang.logs import LogSettings


def test_defaults_match_the_decisions() -> None:
    c = Config()
    assert c.application_name == "polang"
    assert c.policy_store_local_fn is None
    assert c.policy_store_uri is None
    assert c.policy_store_local is None
    assert c.policy_store_id is None
    assert c.policy_store_validate_checksum is True
    assert c.policy_store_refresh_interval == 0
    assert c.strict_schema_validation is True
    assert c.jwt_sig_validation is True
    assert c.jwt_status_validation is True
    assert c.jwt_signature_algorithms_supported == ASYMMETRIC_ALGORITHMS
    assert "HS256" not in c.jwt_signature_algorithms_supported
    assert c.jwt_clock_skew == 0
    assert c.local_jwks is None
    assert c.jwks_refresh_interval is None
    assert c.jwks_min_refresh_interval == 30
    assert c.jwt_status_list_refresh_interval_max == 300
    assert c.token_cache_capacity == 1000
    assert c.token_cache_max_ttl == 300
    assert c.http_request_timeout == 10
    assert c.http_max_retries == 3
    assert c.http_max_response_size_bytes == 10 * MIB
    assert c.max_default_entities == 1000
    assert c.max_base64_size == MIB
    assert c.log_type == "off"
    assert c.log_level == "WARN"
    assert c.log_ttl == 60
    assert c.log_max_items == 10000
    assert c.decision_log_default_jwt_id == "jti"
    assert c.datalog_backend == "compiled"
    assert c.otel == "auto"


def test_every_property_has_a_field_and_a_key() -> None:
    fields = set(Config._fields)
    assert {p.field for p in PROPERTIES} == fields
    assert all(p.key == "ENGINE_" + p.field.upper() for p in PROPERTIES)
    assert len(list(known_keys())) == len(PROPERTIES) == 48


def test_from_dict_parses_every_kind_of_value() -> None:
    c = Config.from_dict(
        {
            "ENGINE_APPLICATION_NAME": "shop",
            "ENGINE_POLICY_STORE_LOCAL_FN": "stores/shop",
            "ENGINE_POLICY_STORE_ID": "abc",
            "ENGINE_POLICY_STORE_VALIDATE_CHECKSUM": "disabled",
            "ENGINE_POLICY_STORE_REFRESH_INTERVAL": "2.5",
            "ENGINE_STRICT_SCHEMA_VALIDATION": False,
            "ENGINE_JWT_SIG_VALIDATION": "Disabled",
            "ENGINE_JWT_STATUS_VALIDATION": True,
            "ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": "RS256, ES256 EdDSA",
            "ENGINE_JWT_CLOCK_SKEW": 5,
            "ENGINE_LOCAL_JWKS": "keys.json",
            "ENGINE_JWKS_REFRESH_INTERVAL": "600",
            "ENGINE_JWKS_MIN_REFRESH_INTERVAL": 0,
            "ENGINE_JWT_STATUS_LIST_REFRESH_INTERVAL_MAX": 60,
            "ENGINE_TOKEN_CACHE_CAPACITY": "0",
            "ENGINE_TOKEN_CACHE_MAX_TTL": 10,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 0.5,
            "ENGINE_HTTP_MAX_RETRIES": "1",
            "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES": "1_000",
            "ENGINE_MAX_DEFAULT_ENTITIES": 0,
            "ENGINE_MAX_BASE64_SIZE": 2048,
            "ENGINE_LOG_TYPE": "Memory",
            "ENGINE_LOG_LEVEL": "debug",
            "ENGINE_LOG_TTL": 1,
            "ENGINE_LOG_MAX_ITEMS": 5,
            "ENGINE_DECISION_LOG_DEFAULT_JWT_ID": "sid",
            "ENGINE_DATALOG_BACKEND": "pydatalog",
        }
    )
    assert c.application_name == "shop"
    assert c.policy_store_local_fn == "stores/shop"
    assert c.policy_store_validate_checksum is False
    assert c.policy_store_refresh_interval == 2.5
    assert c.strict_schema_validation is False
    assert c.jwt_sig_validation is False
    assert c.jwt_signature_algorithms_supported == ("RS256", "ES256", "EdDSA")
    assert c.jwt_clock_skew == 5
    assert c.jwks_refresh_interval == 600
    assert c.token_cache_capacity == 0
    assert c.http_request_timeout == 0.5
    assert c.http_max_retries == 1
    assert c.http_max_response_size_bytes == 1000
    assert c.max_default_entities == 0
    assert c.log_type == "memory"
    assert c.log_level == "DEBUG"
    assert c.datalog_backend == "pydatalog"
    assert Config.from_dict({"ENGINE_LOG_LEVEL": "warning"}).log_level == "WARN"
    assert Config.from_dict({"ENGINE_LOG_MAX_ITEMS": 0}).log_max_items == 0


def test_algorithm_lists_accept_json_lists_and_drop_duplicates() -> None:
    c = Config.from_dict({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ["HS256", "RS256", "HS256"]})
    assert c.jwt_signature_algorithms_supported == ("HS256", "RS256")
    every = Config.from_dict({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": list(ALL_ALGORITHMS)})
    assert every.jwt_signature_algorithms_supported == ALL_ALGORITHMS


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("ENGINE_POLICY_STORE_VALIDATE_CHECKSUM", "yes", "'enabled' or 'disabled'"),
        ("ENGINE_JWT_SIG_VALIDATION", 1, "'enabled' or 'disabled'"),
        ("ENGINE_POLICY_STORE_REFRESH_INTERVAL", "-1", ">= 0"),
        ("ENGINE_POLICY_STORE_REFRESH_INTERVAL", "soon", "seconds"),
        ("ENGINE_HTTP_REQUEST_TIMEOUT", 0, "seconds"),
        ("ENGINE_HTTP_REQUEST_TIMEOUT", float("nan"), "seconds"),
        ("ENGINE_HTTP_MAX_RETRIES", 1.5, "whole number"),
        ("ENGINE_HTTP_MAX_RETRIES", True, "whole number"),
        ("ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES", 0, ">= 1"),
        ("ENGINE_TOKEN_CACHE_CAPACITY", "ten", "whole number"),
        ("ENGINE_TOKEN_CACHE_CAPACITY", "\uff11\uff12", "whole number"),  # full-width 12
        ("ENGINE_HTTP_REQUEST_TIMEOUT", "\u0661.5", "seconds"),  # an Arabic-Indic one
        ("ENGINE_LOG_TYPE", "file", "off, memory, std_out, python"),
        ("ENGINE_LOG_LEVEL", "LOUD", "FATAL, ERROR, WARN, INFO, DEBUG, TRACE"),
        ("ENGINE_LOG_MAX_ITEMS", -1, ">= 0"),
        ("ENGINE_DATALOG_BACKEND", "souffle", "compiled, pydatalog"),
        ("ENGINE_APPLICATION_NAME", "", "non-empty string"),
        ("ENGINE_APPLICATION_NAME", 42, "non-empty string"),
        ("ENGINE_POLICY_STORE_URI", "ftp://host/store.parc", "http"),
        ("ENGINE_POLICY_STORE_URI", "store.parc", "http"),
        ("ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED", [], "non-empty list"),
        ("ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED", 5, "non-empty list"),
        ("ENGINE_DECISION_LOG_DEFAULT_JWT_ID", " ", "non-empty string"),
        ("ENGINE_LOCAL_JWKS", 3, "path"),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(
    key: str, value: object, allowed: str
) -> None:
    with pytest.raises(ConfigError) as e:
        Config.from_dict({key: value})
    msg = str(e.value)
    assert key in msg
    assert repr(value) in msg
    assert allowed in msg


def test_a_number_of_thousands_of_digits_is_a_config_error_with_a_bounded_message() -> None:
    """CPython refuses to read an integer of more than 4,300 digits (ValueError): the
    key's error instead, its message cut."""
    with pytest.raises(ConfigError) as e:
        Config.from_dict({"ENGINE_TOKEN_CACHE_CAPACITY": "9" * 5000})
    assert "ENGINE_TOKEN_CACHE_CAPACITY" in str(e.value) and "MAX_MESSAGE_CHARS" in str(e.value)


@pytest.mark.parametrize("value", [10**400, "1" + "0" * 400, 1e10, 1_000_000_001, "2_000_000_000"])
def test_seconds_beyond_max_seconds_are_refused_naming_the_limit(value: object) -> None:
    """Longer than any timer takes (``threading.TIMEOUT_MAX``): refused at load, instead of
    an OverflowError in a request or a refresh thread later."""
    for key in ("ENGINE_HTTP_REQUEST_TIMEOUT", "ENGINE_POLICY_STORE_REFRESH_INTERVAL"):
        with pytest.raises(ConfigError, match="MAX_SECONDS"):
            Config.from_dict({key: value})
    assert Config.from_dict({"ENGINE_HTTP_REQUEST_TIMEOUT": MAX_SECONDS}).http_request_timeout


@pytest.mark.parametrize(
    "key",
    ["ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES", "ENGINE_TOKEN_CACHE_CAPACITY", "ENGINE_LOG_MAX_ITEMS"],
)
def test_counts_and_sizes_beyond_max_count_are_refused_naming_the_limit(key: str) -> None:
    """A size reaches C-level reads (``zlib``'s ``max_length``), which raise OverflowError
    beyond 2**63: such numbers are refused at load."""
    for value in (10**30, str(MAX_COUNT + 1)):
        with pytest.raises(ConfigError, match="MAX_COUNT"):
            Config.from_dict({key: value})
    assert Config.from_dict({key: MAX_COUNT})


def test_log_settings_refuse_an_integer_beyond_any_float() -> None:
    with pytest.raises(ConfigError, match="ENGINE_LOG_TTL"):
        LogSettings.from_mapping({"ENGINE_LOG_TTL": 10**400})
    with pytest.raises(ConfigError, match="ENGINE_LOG_MAX_ITEMS"):
        LogSettings.from_mapping({"ENGINE_LOG_MAX_ITEMS": "9" * 5000})


def test_bad_algorithm_names_suggest_or_explain() -> None:
    with pytest.raises(ConfigError, match=r"'rs256'.*did you mean RS256"):
        Config.from_dict({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": "rs256"})
    with pytest.raises(ConfigError, match="'none' is never a valid"):
        Config.from_dict({"ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ["RS256", "none"]})


def test_unknown_keys_are_errors_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"'ENGINE_LOG_TPYE'.*did you mean ENGINE_LOG_TYPE"):
        Config.from_dict({"ENGINE_LOG_TPYE": "memory"})
    with pytest.raises(ConfigError, match="unknown configuration key 'FOO'"):
        Config.from_dict({"FOO": 1})
    with pytest.raises(ConfigError, match="not a string"):
        Config.from_dict(cast(dict[str, Any], {1: 1}))


def test_engine_lock_properties() -> None:
    """ENGINE_LOCK's properties (docs/lock.md); Cedarling's bootstrap names are read too."""
    uri = "https://lock.example/.well-known/lock-server-configuration"
    base = {
        "ENGINE_LOCK": "enabled",
        "ENGINE_LOCK_SERVER_CONFIGURATION_URI": uri,
        "ENGINE_LOCK_SSA_JWT": "a.b.c",
        "ENGINE_POLICY_STORE_ID": "acme",
    }
    c = Config.from_dict(
        {
            **base,
            "ENGINE_LOCK_LOG_INTERVAL": "0.5",
            "ENGINE_LOCK_HEALTH_INTERVAL": 30,
            "ENGINE_LOCK_DYNAMIC_CONFIGURATION": "enabled",  # Cedarling's older name
            "ENGINE_LOCK_TRANSPORT": "REST",
            "ENGINE_LOCK_ACCEPT_INVALID_CERTS": "disabled",
            "ENGINE_LOCK_LOG_CHANNEL_CAPACITY": 10,
            "ENGINE_LOCK_LOG_MAX_RETRIES": 0,
        }
    )
    assert c.lock and c.lock_server_configuration_uri == uri
    assert (c.lock_log_interval, c.lock_health_interval, c.lock_telemetry_interval) == (
        0.5,
        30.0,
        0.0,
    )
    assert c.lock_listen_sse and c.lock_transport == "rest"
    assert (c.lock_log_channel_capacity, c.lock_log_max_retries) == (10, 0)
    assert "a.b.c" not in repr(c)  # secrets are not shown
    # Cedarling's two names of one switch: either turns it on, in any order
    for first, second in [("enabled", "disabled"), ("disabled", "enabled")]:
        both = {
            **base,
            "ENGINE_LOCK_LISTEN_SSE": first,
            "ENGINE_LOCK_DYNAMIC_CONFIGURATION": second,
        }
        assert Config.from_dict(both).lock_listen_sse
        both = {
            **base,
            "ENGINE_LOCK_DYNAMIC_CONFIGURATION": second,
            "ENGINE_LOCK_LISTEN_SSE": first,
        }
        assert Config.from_dict(both).lock_listen_sse
    same = {**base, "ENGINE_LOCK_ACCESS_TOKEN": "t", "ENGINE_LOCK_ACCESS_TOKEN_JWT": "t"}
    assert Config.from_dict(same).lock_access_token == "t"
    assert Config.from_dict(c.to_dict()) == c
    # asking for the feature to be off is harmless, and needs nothing else
    assert Config.from_dict({"ENGINE_LOCK": "disabled"}) == Config()
    bad: list[tuple[dict[str, Any], str]] = [
        ({"ENGINE_LOCK": "enabled"}, "ENGINE_LOCK_SERVER_CONFIGURATION_URI is not set"),
        ({**base, "ENGINE_LOCK_SSA_JWT": None}, "neither ENGINE_LOCK_SSA_JWT"),
        ({**base, "ENGINE_POLICY_STORE_ID": None}, "without a store"),
        (
            {**base, "ENGINE_LOCK_SERVER_CONFIGURATION_URI": "http://lock.example/x"},
            "https:// URL",
        ),
        ({**base, "ENGINE_LOCK_TRANSPORT": "grpc"}, "'grpc' is not built"),
        ({**base, "ENGINE_LOCK_ACCEPT_INVALID_CERTS": "enabled"}, "never turns certificate"),
        ({**base, "ENGINE_LOCK_LOG_CHANNEL_CAPACITY": 0}, "ENGINE_LOCK_LOG_CHANNEL_CAPACITY"),
        (
            {**base, "ENGINE_LOCK_LOG_CHANNEL_CAPACITY": 10**6},
            "MAX_LOCK_CHANNEL_CAPACITY",
        ),
        ({**base, "ENGINE_LOCK_LOG_MAX_RETRIES": 32}, "MAX_LOCK_LOG_RETRIES"),
        ({**base, "ENGINE_LOCK_LOG_INTERVAL": -1}, "ENGINE_LOCK_LOG_INTERVAL"),
        ({**base, "ENGINE_LOCK_LOG_INTERVAL": "soon"}, "ENGINE_LOCK_LOG_INTERVAL"),
        ({**base, "ENGINE_LOCK_LISTEN_SSE": "yes"}, "ENGINE_LOCK_LISTEN_SSE"),
        (
            {**base, "ENGINE_LOCK_ACCESS_TOKEN": "t", "ENGINE_LOCK_ACCESS_TOKEN_JWT": "u"},
            "same property with different values",
        ),
        ({**base, "ENGINE_LOCK_LOG_INTERVL": 1}, "did you mean ENGINE_LOCK_LOG_INTERVAL"),
    ]
    for d, message in bad:
        with pytest.raises(ConfigError, match=message):
            Config.from_dict(d)


def test_none_means_default() -> None:
    assert Config.from_dict({"ENGINE_LOG_TYPE": None}).log_type == "off"


def test_at_most_one_store_source() -> None:
    with pytest.raises(ConfigError) as e:
        Config.from_dict(
            {
                "ENGINE_POLICY_STORE_URI": "https://example.com/s.parc",
                "ENGINE_POLICY_STORE_LOCAL_FN": "store/",
            }
        )
    assert "ENGINE_POLICY_STORE_URI" in str(e.value)
    assert "ENGINE_POLICY_STORE_LOCAL_FN" in str(e.value)
    assert Config(policy_store_local="{}").store_source_key == "ENGINE_POLICY_STORE_LOCAL"
    assert Config().store_source_key is None


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ConfigError, match="ENGINE_LOG_LEVEL"):
        Config(log_level="LOUD")
    with pytest.raises(ConfigError, match="ENGINE_LOG_TYPE"):
        Config(log_type=cast(str, None))
    as_path: Any = Path("x/y")
    assert Config(policy_store_local_fn=as_path).policy_store_local_fn == "x/y"


def test_from_file_json_and_yaml(tmp_path: Path) -> None:
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"ENGINE_LOG_TYPE": "memory", "ENGINE_HTTP_MAX_RETRIES": 0}))
    assert Config.from_file(j).log_type == "memory"
    y = tmp_path / "c.yaml"
    y.write_text("ENGINE_JWT_SIG_VALIDATION: disabled\nENGINE_JWT_CLOCK_SKEW: 30\n")
    c = Config.from_file(y)
    assert c.jwt_sig_validation is False
    assert c.jwt_clock_skew == 30
    yml = tmp_path / "c.yml"
    yml.write_text("")
    assert Config.from_file(yml) == Config()


def test_from_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"ENGINE_LOG_TYPE": }')
    with pytest.raises(ConfigError, match=r"bad\.json:1:\d+: invalid JSON"):
        Config.from_file(bad)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(ConfigError, match=r"deep\.json: JSON nests deeper .*MAX_JSON_DEPTH"):
        Config.from_file(deep)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("ENGINE_LOG_TYPE: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: invalid YAML"):
        Config.from_file(bad_yaml)
    for name, text in {
        "flow.yaml": "ENGINE_LOG_TYPE: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "block.yaml": "".join(" " * i + "a:\n" for i in range(300)),
    }.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=rf"{name}:\d+:\d+: .*MAX_YAML_DEPTH"):
            Config.from_file(tmp_path / name)
    big = tmp_path / "big.json"
    big.write_text('{"ENGINE_APPLICATION_NAME": "' + "x" * MAX_CONFIG_FILE_BYTES + '"}')
    with pytest.raises(ConfigError, match=r"big\.json: .*MAX_CONFIG_FILE_BYTES"):
        Config.from_file(big)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    with pytest.raises(ConfigError, match=r"fifo\.json: .*FIFO"):
        Config.from_file(fifo)
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "good-target.yaml")
    (tmp_path / "good-target.yaml").write_text("ENGINE_LOG_TYPE: memory\n")
    assert Config.from_file(link).log_type == "memory"  # mounted configs are links
    aliased = tmp_path / "aliased.yaml"
    aliased.write_text("ENGINE_APPLICATION_NAME: &a x\nENGINE_LOG_TYPE: *a\n")
    with pytest.raises(ConfigError, match=r"aliased\.yaml:1:\d+: .*anchors"):
        Config.from_file(aliased)
    lst = tmp_path / "list.json"
    lst.write_text("[]")
    with pytest.raises(ConfigError, match="must be a mapping"):
        Config.from_file(lst)
    typo = tmp_path / "typo.json"
    typo.write_text('{"ENGINE_LOG_LEVLE": "INFO"}')
    with pytest.raises(ConfigError, match=r"typo\.json: unknown configuration key"):
        Config.from_file(typo)
    with pytest.raises(ConfigError, match="must end in"):
        Config.from_file(tmp_path / "c.toml")
    with pytest.raises(ConfigError, match="cannot read"):
        Config.from_file(tmp_path / "missing.json")


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(
        json.dumps(
            {
                "ENGINE_LOG_TYPE": "memory",
                "ENGINE_LOG_LEVEL": "INFO",
                "ENGINE_POLICY_STORE_LOCAL_FN": "store/",
                "ENGINE_LOCAL_JWKS": "keys.json",
            }
        )
    )
    base = Config.from_file(f)
    env = {
        "ENGINE_LOG_LEVEL": "DEBUG",
        "ENGINE_POLICY_STORE_URI": "https://example.com/store.parc",
        "ENGINE_LOCAL_JWKS": "",
        "PATH": "/usr/bin",
        "HOME": "/root",
    }
    c = Config.from_env(env, base=base)
    assert c.log_type == "memory"  # from the file
    assert c.log_level == "DEBUG"  # the environment wins
    assert c.local_jwks is None  # an empty variable unsets
    # the environment's store source replaces the file's
    assert c.policy_store_uri == "https://example.com/store.parc"
    assert c.policy_store_local_fn is None


def test_from_env_rejects_unknown_engine_variables() -> None:
    with pytest.raises(ConfigError, match="ENGINE_JWT_SIG_VALIDATON"):
        Config.from_env({"ENGINE_JWT_SIG_VALIDATON": "disabled"})
    assert Config.from_env({"OTHER": "x"}) == Config()


def test_to_dict_round_trips() -> None:
    c = Config(
        policy_store_local_fn="s/",
        jwt_sig_validation=False,
        jwt_signature_algorithms_supported=("ES256",),
        jwks_refresh_interval=5,
    )
    d = c.to_dict()
    assert d["ENGINE_JWT_SIG_VALIDATION"] == "disabled"
    assert d["ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED"] == ["ES256"]
    assert "ENGINE_POLICY_STORE_URI" not in d
    assert Config.from_dict(d) == c
    assert Config.from_dict({"ENGINE_LOG_TYPE": "memory"}).to_dict(include_defaults=False) == {
        "ENGINE_LOG_TYPE": "memory"
    }
    assert json.loads(json.dumps(d)) == d


def test_replace_validates() -> None:
    c = Config().replace(log_type="std_out")
    assert c.log_type == "std_out"
    with pytest.raises(ConfigError):
        c.replace(http_max_retries=-1)


def test_store_source_keys_are_properties() -> None:
    assert set(STORE_SOURCE_KEYS) <= set(known_keys())


@given(st.integers(min_value=0, max_value=10**12))
def test_whole_numbers_round_trip_from_strings(n: int) -> None:
    c = Config.from_env({"ENGINE_MAX_BASE64_SIZE": str(n), "ENGINE_LOG_MAX_ITEMS": str(n)})
    assert c.max_base64_size == n
    assert c.log_max_items == n


@given(st.floats(min_value=0.001, max_value=1e6, allow_nan=False))
def test_seconds_round_trip(x: float) -> None:
    c = Config.from_dict({"ENGINE_HTTP_REQUEST_TIMEOUT": x, "ENGINE_JWT_CLOCK_SKEW": repr(x)})
    assert c.http_request_timeout == x
    assert c.jwt_clock_skew == pytest.approx(x)


def test_every_property_is_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    for key in known_keys():
        assert f"### `{key}`" in doc, key
        assert f"| `{key}` |" in doc, key


def test_every_field_has_its_default_and_config_is_frozen() -> None:
    """Config is a record class (start-up time): its defaults table must cover each field."""
    import dataclasses

    from polang.config import _DEFAULTS

    assert set(_DEFAULTS) == set(Config._fields)
    assert Config(**_DEFAULTS) == Config()
    assert _DEFAULTS["policy_store_uri"] is None and _DEFAULTS["log_type"] == "off"
    c = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.log_type = "std_out"
    with pytest.raises(TypeError, match="no field 'nope'"):
        c.replace(nope=1)


@pytest.mark.timeout(10)
def test_a_file_of_spaces_for_a_number_of_seconds_is_refused_in_linear_time(
    tmp_path: Path,
) -> None:
    """A run of spaces could be split between the number pattern's leading and trailing
    ``\\s*`` in n**2 ways (hours for a 1 MiB file); it is read once."""
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"ENGINE_HTTP_REQUEST_TIMEOUT": " " * 1_000_000 + "x"}))
    assert path.stat().st_size < MAX_CONFIG_FILE_BYTES
    with pytest.raises(ConfigError, match="ENGINE_HTTP_REQUEST_TIMEOUT"):
        Config.from_file(path)
    for text, seconds in ((" 2.5 ", 2.5), ("  +3  ", 3.0), (" .5", 0.5), ("1_0.25 ", 10.25)):
        assert Config.from_dict({"ENGINE_HTTP_REQUEST_TIMEOUT": text}).http_request_timeout == (
            seconds
        )
