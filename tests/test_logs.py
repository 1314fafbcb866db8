"""Tests for polang.logs: entries, sinks, the memory log, UUIDv7 and token redaction."""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import random
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang import logs as logs_module
from polang.errors import ConfigError, PolangError, TokenError
from polang.logs import (
    LEVELS,
    REDACTED_TOKEN,
    DecisionValues,
    LogError,
    Logger,
    LogSettings,
    MemoryLog,
    MetricsCollector,
    UUIDv7Generator,
    format_timestamp,
    redact_tokens,
    reserve_uuid7,
    reserve_uuid7_many,
    token_log_ids,
    uuid7,
    uuid7_text,
)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
HS_KEY = "k" * 32
ACTION = 'Jans::Action::"Read"'
RESOURCE = 'Jans::Issue::"i1"'


class FakeClock:
    """A settable clock, so TTL tests never sleep."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _values(request_id: str | int) -> DecisionValues:
    """An allowed decision's values, nothing else in them."""
    return DecisionValues(request_id, True, ACTION, RESOURCE, None, (), (), None, (), 1, None, None)


def make_logger(log_type: str = "memory", **kw: Any) -> Logger:
    clock = kw.pop("clock", None)
    settings_kw = {k: kw.pop(k) for k in list(kw) if k in LogSettings._fields}
    extra: dict[str, Any] = {}
    if clock is not None:
        extra = {"clock": clock, "monotonic": clock}
    return Logger(LogSettings(log_type=log_type, **settings_kw), **extra, **kw)


def log_decision(logger: Logger, **kw: Any) -> dict[str, Any] | None:
    args: dict[str, Any] = {
        "request_id": uuid7(),
        "decision": True,
        "action": ACTION,
        "resource": RESOURCE,
    }
    args.update(kw)
    return logger.decision(**args)


def make_jwt(**claims: Any) -> str:
    base = {"iss": "https://idp.example.com", "sub": "alice", "jti": "tok-1", "email": "a@x.io"}
    base.update(claims)
    return jwt.encode(base, HS_KEY, algorithm="HS256")


# --------------------------------------------------------------------------- UUIDv7


def test_uuid7_format_version_variant_and_timestamp() -> None:
    gen = UUIDv7Generator(clock_ms=lambda: 1_700_000_000_123)
    s = gen()
    assert UUID_RE.match(s)
    u = uuid.UUID(s)
    assert u.version == 7
    assert u.variant == uuid.RFC_4122
    assert u.int >> 80 == 1_700_000_000_123
    assert str(u) == s


def test_uuid7_public_helper_is_a_v7_uuid_near_now() -> None:
    import time

    before = time.time_ns() // 1_000_000
    u = uuid.UUID(uuid7())
    after = time.time_ns() // 1_000_000
    assert u.version == 7 and u.variant == uuid.RFC_4122
    # The process-wide generator may run ahead only when the counter overflows.
    assert before <= u.int >> 80 <= after + 1


def test_uuid7_monotonic_within_one_millisecond() -> None:
    gen = UUIDv7Generator(clock_ms=lambda: 1_000)
    ids = [gen() for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).int >> 80 == 1_000 for i in ids)


def test_uuid7_ids_sort_in_creation_order_with_real_clock() -> None:
    ids = [uuid7() for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5000


def test_uuid7_clock_going_backwards_keeps_order() -> None:
    times = iter([5_000, 5_000, 4_000, 3_000, 5_001])
    gen = UUIDv7Generator(clock_ms=lambda: next(times))
    ids = [gen() for _ in range(5)]
    assert ids == sorted(ids)
    stamps = [uuid.UUID(i).int >> 80 for i in ids]
    assert stamps == [5_000, 5_000, 5_000, 5_000, 5_001]


def test_uuid7_counter_overflow_advances_the_timestamp() -> None:
    gen = UUIDv7Generator(clock_ms=lambda: 10, counter_bits=2)
    ids = [gen() for _ in range(40)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 40
    stamps = [uuid.UUID(i).int >> 80 for i in ids]
    assert stamps[0] == 10
    assert stamps[-1] > 10  # 2 counter bits: at most 4 ids per millisecond
    assert all(b - a in (0, 1) for a, b in itertools.pairwise(stamps))


def test_uuid7_counter_seed_leaves_room_to_count() -> None:
    # All-ones randomness: the counter seed still has its top bit clear.
    gen = UUIDv7Generator(clock_ms=lambda: 7, random_bytes=lambda n: b"\xff" * n)
    value = uuid.UUID(gen()).int
    rand_a = (value >> 64) & 0xFFF
    rand_b = value & ((1 << 62) - 1)
    counter = (rand_a << 30) | (rand_b >> 32)
    assert counter == (1 << 41) - 1
    assert (value >> 76) & 0xF == 7
    assert (value >> 62) & 0b11 == 0b10


def test_uuid7_rejects_bad_counter_bits() -> None:
    with pytest.raises(LogError, match="counter_bits"):
        UUIDv7Generator(counter_bits=0)
    with pytest.raises(LogError, match="counter_bits"):
        UUIDv7Generator(counter_bits=75)


def test_uuid7_unique_across_threads() -> None:
    results: list[list[str]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        results[i].extend(uuid7() for _ in range(500))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [x for r in results for x in r]
    assert len(set(everything)) == len(everything)
    for r in results:
        assert r == sorted(r)


def test_format_timestamp() -> None:
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(1_700_000_000.1239) == "2023-11-14T22:13:20.123Z"
    assert format_timestamp(1_700_000_000.9999) == "2023-11-14T22:13:20.999Z"
    assert TS_RE.match(format_timestamp(1_234_567_890.5))
    # the same millisecond again, another in the same second, an earlier one
    for seconds, text in [
        (1_700_000_000.1231, "2023-11-14T22:13:20.123Z"),
        (1_700_000_000.1238, "2023-11-14T22:13:20.123Z"),
        (1_700_000_000.5, "2023-11-14T22:13:20.500Z"),
        (1_700_000_000.1231, "2023-11-14T22:13:20.123Z"),
        (1_700_000_001.5, "2023-11-14T22:13:21.500Z"),
    ]:
        assert format_timestamp(seconds) == text


# --------------------------------------------------------------------------- settings


def test_settings_defaults() -> None:
    s = LogSettings()
    assert (s.log_type, s.level, s.ttl, s.max_items) == ("off", "WARN", 60.0, 10000)
    assert s.application_id == "polang"
    assert s.decision_log_default_jwt_id == "jti"


def test_settings_from_mapping_parses_environment_strings() -> None:
    s = LogSettings.from_mapping(
        {
            "ENGINE_LOG_TYPE": "Memory",
            "ENGINE_LOG_LEVEL": "debug",
            "ENGINE_LOG_TTL": "2.5",
            "ENGINE_LOG_MAX_ITEMS": "7",
            "ENGINE_APPLICATION_NAME": "billing",
            "ENGINE_DECISION_LOG_DEFAULT_JWT_ID": "sid",
            "ENGINE_JWT_CLOCK_SKEW": 5,  # another component's property: ignored here
        }
    )
    assert s == LogSettings("memory", "DEBUG", 2.5, 7, "billing", "sid")


def test_settings_are_a_frozen_value() -> None:
    """LogSettings is a record (start-up time): equal by value, hashable, immutable,
    pickled and replaced through its checks."""
    import dataclasses
    import pickle

    from polang._record import replace

    s = LogSettings("Memory", "debug", "2.5", "7")
    assert s == LogSettings("memory", "DEBUG", 2.5, 7) and hash(s) == hash(
        LogSettings("memory", "DEBUG", 2.5, 7)
    )
    assert s != LogSettings("memory", "DEBUG", 2.5, 8)
    assert repr(s) == (
        "LogSettings(log_type='memory', level='DEBUG', ttl=2.5, max_items=7,"
        " application_id='polang', decision_log_default_jwt_id='jti')"
    )
    assert pickle.loads(pickle.dumps(s)) == s
    assert replace(s, level="trace").level == "TRACE"
    with pytest.raises(ConfigError, match="ENGINE_LOG_TTL"):
        replace(s, ttl="soon")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.level = "INFO"  # type: ignore[misc]


def test_settings_from_mapping_native_values_and_none() -> None:
    s = LogSettings.from_mapping({"ENGINE_LOG_TTL": 0, "ENGINE_LOG_LEVEL": None})
    assert s.ttl == 0.0 and s.level == "WARN"


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"ENGINE_LOG_TYPE": "file"}, "ENGINE_LOG_TYPE"),
        ({"ENGINE_LOG_LEVEL": "LOUD"}, "ENGINE_LOG_LEVEL"),
        ({"ENGINE_LOG_TTL": "-1"}, "ENGINE_LOG_TTL"),
        ({"ENGINE_LOG_TTL": "soon"}, "ENGINE_LOG_TTL"),
        ({"ENGINE_LOG_TTL": True}, "ENGINE_LOG_TTL"),
        ({"ENGINE_LOG_MAX_ITEMS": "1.5"}, "ENGINE_LOG_MAX_ITEMS"),
        ({"ENGINE_LOG_MAX_ITEMS": -3}, "ENGINE_LOG_MAX_ITEMS"),
        ({"ENGINE_APPLICATION_NAME": ""}, "ENGINE_APPLICATION_NAME"),
        ({"ENGINE_DECISION_LOG_DEFAULT_JWT_ID": 3}, "ENGINE_DECISION_LOG_DEFAULT_JWT_ID"),
        ({"ENGINE_LOG_TYP": "memory"}, "ENGINE_LOG_TYP"),
    ],
)
def test_settings_errors_name_the_key(mapping: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        LogSettings.from_mapping(mapping)


# --------------------------------------------------------------------------- entries


def test_common_fields_and_pdp_id() -> None:
    clock = FakeClock(1_700_000_000.25)
    logger = make_logger(application_id="billing", clock=clock, level="TRACE")
    d = log_decision(logger)
    s = logger.system("INFO", "started")
    m = logger.metric(counters={"authorize_calls": 1})
    assert d is not None and s is not None and m is not None
    for entry, kind in ((d, "Decision"), (s, "System"), (m, "Metric")):
        assert entry["log_kind"] == kind
        assert UUID_RE.match(entry["id"])
        assert entry["timestamp"] == "2023-11-14T22:13:20.250Z"
        assert entry["application_id"] == "billing"
        assert entry["pdp_id"] == logger.pdp_id
        json.dumps(entry)  # JSON-ready
    assert UUID_RE.match(logger.pdp_id)
    assert len({d["id"], s["id"], m["id"]}) == 3
    assert make_logger().pdp_id != logger.pdp_id


def test_decision_entry_fields() -> None:
    logger = make_logger()
    rid = uuid7()
    entry = logger.decision(
        request_id=rid,
        decision=False,
        principal='Jans::User::"alice"',
        action=ACTION,
        resource={"type": "Jans::Issue", "id": "i1"},
        reason=["forbid-contractors"],
        errors=[{"policy_id": "p2", "error": "attribute `level` not found"}],
        tokens={"Jans::Access_token": {"jti": "abc", "sub": "alice"}},
        dropped_tokens=[
            {"mapping": "Jans::Id_token", "index": 1, "reason": {"kind": "expired", "message": "x"}}
        ],
        decision_time_micro_sec=123.6,
        policystore_id="a1b2",
        policystore_version="1.0.0",
    )
    assert entry is not None
    assert entry["request_id"] == rid
    assert entry["decision"] == "DENY"
    assert entry["principal"] == 'Jans::User::"alice"'
    assert entry["action"] == ACTION
    assert entry["resource"] == {"type": "Jans::Issue", "id": "i1"}
    assert entry["diagnostics"] == {
        "reason": ["forbid-contractors"],
        "errors": [{"policy_id": "p2", "error": "attribute `level` not found"}],
    }
    assert entry["tokens"] == {"Jans::Access_token": {"jti": "abc"}}
    assert entry["dropped_tokens"][0]["reason"]["kind"] == "expired"
    assert entry["decision_time_micro_sec"] == 124
    assert entry["policystore_id"] == "a1b2"
    assert entry["policystore_version"] == "1.0.0"
    assert logger.get_log_by_id(entry["id"]) == entry


@pytest.mark.parametrize(
    ("given_", "want"), [(True, "ALLOW"), ("deny", "DENY"), ("ALLOW", "ALLOW")]
)
def test_decision_values(given_: object, want: str) -> None:
    entry = log_decision(make_logger(), decision=given_)
    assert entry is not None and entry["decision"] == want


def test_decision_rejects_bad_values() -> None:
    logger = make_logger()
    with pytest.raises(LogError, match="ALLOW/DENY"):
        log_decision(logger, decision="maybe")
    with pytest.raises(LogError, match="decision_time_micro_sec"):
        log_decision(logger, decision_time_micro_sec="fast")
    assert logger.get_log_ids() == []


def test_extra_fields_cannot_shadow_built_in_ones() -> None:
    logger = make_logger()
    with pytest.raises(LogError, match="overwrite"):
        logger.system("ERROR", "x", level="INFO")
    with pytest.raises(LogError, match="overwrite"):
        log_decision(logger, pdp_id="mine")
    with pytest.raises(LogError, match="overwrite"):
        logger.metric(counters={}, timestamp="now")
    assert issubclass(LogError, PolangError)


def test_non_json_values_are_made_json_ready() -> None:
    class Uid:
        def __str__(self) -> str:
            return 'Jans::User::"bob"'

    class Result:
        def to_dict(self) -> dict[str, object]:
            return {"decision": "allow", "ids": ("a", "b")}

    logger = make_logger(level="TRACE")
    entry = logger.system(
        "INFO", "values", uid=Uid(), roles={"b", "a"}, ratio=math.nan, result=Result(), n=(1, 2)
    )
    assert entry is not None
    assert entry["uid"] == 'Jans::User::"bob"'
    assert entry["roles"] == ["a", "b"]
    assert entry["ratio"] == "nan"
    assert entry["result"] == {"decision": "allow", "ids": ["a", "b"]}
    assert entry["n"] == [1, 2]
    json.dumps(entry, allow_nan=False)


# --------------------------------------------------------------------------- level filtering


@pytest.mark.parametrize("threshold", LEVELS)
def test_level_filters_system_entries_only(threshold: str) -> None:
    logger = make_logger(level=threshold)
    written = {lvl for lvl in LEVELS if logger.system(lvl, f"at {lvl}") is not None}
    expected = set(LEVELS[: LEVELS.index(threshold) + 1])
    assert written == expected
    assert {e["level"] for e in logger.get_logs_by_tag("System")} == expected
    assert {lvl for lvl in LEVELS if logger.is_enabled_for(lvl)} == expected
    # Decision and Metric entries ignore the level.
    assert log_decision(logger) is not None
    assert logger.metric(counters={"authorize_calls": 1}) is not None


def test_level_names_are_case_insensitive_and_checked() -> None:
    logger = make_logger(level="INFO")
    entry = logger.system("warning", "alias")
    assert entry is not None and entry["level"] == "WARN"
    assert logger.system("info", "lower") is not None
    with pytest.raises(LogError, match="LOUD"):
        logger.system("LOUD", "nope")


# --------------------------------------------------------------------------- off


def test_off_writes_nothing_and_builds_nothing(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    def counting_ids() -> str:
        nonlocal calls
        calls += 1
        return uuid7()

    caplog.set_level(1, logger="polang")
    logger = make_logger("off", level="TRACE", id_generator=counting_ids)
    assert calls == 1  # the pdp_id only
    assert not logger.enabled
    assert log_decision(logger, tokens={"m": {"jti": "x"}}) is None
    assert logger.system("FATAL", "boom") is None
    assert logger.metric(counters={"authorize_calls": 1}) is None
    logger.metrics.increment("authorize_calls")
    logger.metrics.observe("evaluation_time_micro_sec", 5)
    assert logger.metrics.snapshot() == ({}, {}, {})
    assert logger.flush_metrics() is None
    assert not logger.is_enabled_for("FATAL")
    assert calls == 1
    assert capsys.readouterr() == ("", "")
    assert caplog.records == []
    assert logger.pop_logs() == [] and logger.get_log_ids() == []


# --------------------------------------------------------------------------- std_out


def test_std_out_writes_one_json_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    logger = make_logger("std_out", level="INFO")
    d = log_decision(logger)
    s = logger.system("INFO", "hello\nworld", request_id="r-1")
    assert logger.system("DEBUG", "filtered") is None
    m = logger.metric(gauges={"policy_count": 4})
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert len(lines) == 3
    assert [json.loads(line) for line in lines] == [d, s, m]
    assert logger.get_log_ids() == []  # no memory queries for std_out


def test_std_out_lines_stay_whole_under_threads(capsys: pytest.CaptureFixture[str]) -> None:
    logger = make_logger("std_out")

    def work(i: int) -> None:
        for n in range(100):
            logger.system("ERROR", f"thread {i} line {n}", padding="x" * 200)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 600
    msgs = {json.loads(line)["msg"] for line in lines}
    assert len(msgs) == 600


def test_std_out_lines_carry_no_control_or_bidi_character_raw(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ids and messages quote callers; JSON escapes C0 only. A C1 CSI (U+009B), NEL, line
    # separators, bidi overrides and DEL stay one JSON line that a terminal shows as text;
    # a lone surrogate (UTF-8 cannot encode it) used to make the write raise
    hostile = "a\x9b[2J\x85b\u2028c\u2029\u202eevil\u2066\x7f\x1b[31m\ud800"
    logger = make_logger("std_out", level="INFO")
    d = log_decision(logger, principal=hostile, resource=hostile, reason=[hostile])
    s = logger.system("INFO", hostile, request_id=hostile)
    out = capsys.readouterr().out
    assert not re.search(
        "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]", out
    )
    lines = out.splitlines()
    assert len(lines) == 2 and out.split("\n")[:-1] == lines
    assert [json.loads(line) for line in lines] == [d, s]  # the same entries, escaped
    assert "\\u009b[2J\\u0085b\\u2028" in lines[1]


# --------------------------------------------------------------------------- python logging


def test_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(1, logger="polang")
    logger = make_logger("python", level="TRACE")
    d = log_decision(logger)
    entries = {lvl: logger.system(lvl, f"at {lvl}") for lvl in LEVELS}
    m = logger.metric(timings={"evaluation_time_micro_sec": 40})
    records = [r for r in caplog.records if r.name == "polang"]
    assert len(records) == 2 + len(LEVELS)
    expected_levels = [logging.INFO, logging.CRITICAL, logging.ERROR, logging.WARNING]
    expected_levels += [logging.INFO, logging.DEBUG, 5, logging.INFO]
    assert [r.levelno for r in records] == expected_levels
    assert records[6].levelname == "TRACE"
    assert [r.polang for r in records] == [d, *entries.values(), m]  # type: ignore[attr-defined]
    for r in records:
        assert json.loads(r.getMessage()) == r.polang  # type: ignore[attr-defined]


def test_python_logging_respects_logging_configuration(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="polang")
    logger = make_logger("python", level="TRACE")
    assert log_decision(logger) is None
    assert logger.system("WARN", "below ERROR") is None
    assert logger.system("ERROR", "kept") is not None
    assert not logger.is_enabled_for("INFO") and logger.is_enabled_for("FATAL")
    records = [r for r in caplog.records if r.name == "polang"]
    assert len(records) == 1
    assert json.loads(records[0].getMessage())["msg"] == "kept"


def test_python_level_numbers_are_the_logging_modules() -> None:
    """The level numbers are written out (``logging`` is imported by a ``python`` log
    only): they must be ``logging``'s."""
    from polang.logs import _PY_LEVELS, TRACE_LEVELNO

    assert _PY_LEVELS == {
        "FATAL": logging.CRITICAL,
        "ERROR": logging.ERROR,
        "WARN": logging.WARNING,
        "INFO": logging.INFO,
        "DEBUG": logging.DEBUG,
        "TRACE": TRACE_LEVELNO,
    }


# --------------------------------------------------------------------------- memory log


def test_memory_query_api() -> None:
    logger = make_logger(level="DEBUG")
    rid = uuid7()
    d = log_decision(logger, request_id=rid)
    s1 = logger.system("WARN", "slow issuer", request_id=rid)
    s2 = logger.system("DEBUG", "cache hit")
    m = logger.metric(counters={"authorize_calls": 1})
    other = log_decision(logger)
    assert d and s1 and s2 and m and other
    ids = [d["id"], s1["id"], s2["id"], m["id"], other["id"]]
    assert logger.get_log_ids() == ids
    assert logger.get_log_by_id(s1["id"]) == s1
    assert logger.get_log_by_id("no-such-id") is None
    assert logger.get_logs_by_tag("Decision") == [d, other]
    assert logger.get_logs_by_tag("decision") == [d, other]
    assert logger.get_logs_by_tag("System") == [s1, s2]
    assert logger.get_logs_by_tag("WARN") == [s1]
    assert logger.get_logs_by_tag("debug") == [s2]
    assert logger.get_logs_by_tag("Metric") == [m]
    assert logger.get_logs_by_tag("ERROR") == []
    assert logger.get_logs_by_request_id(rid) == [d, s1]
    assert logger.get_logs_by_request_id(other["request_id"]) == [other]
    assert logger.get_logs_by_request_id("nothing") == []
    assert logger.pop_logs() == [d, s1, s2, m, other]
    assert logger.pop_logs() == []
    assert logger.get_log_ids() == []
    assert logger.get_logs_by_tag("Decision") == []
    assert logger.get_logs_by_request_id(rid) == []


def test_memory_returns_copies() -> None:
    logger = make_logger()
    entry = log_decision(logger, reason=["p1"])
    assert entry is not None
    got = logger.get_log_by_id(entry["id"])
    assert got is not None and got["decision"] == "ALLOW"
    got["decision"] = "tampered"
    got["diagnostics"]["reason"].append("p2")
    again = logger.get_logs_by_tag("Decision")[0]
    assert again["decision"] == "ALLOW"
    assert again["diagnostics"]["reason"] == ["p1"]
    by_request = logger.get_logs_by_request_id(entry["request_id"])[0]
    by_request["tokens"]["x"] = {}
    assert logger.get_log_by_id(entry["id"]) == entry


def test_memory_log_add_copies_caller_data() -> None:
    mem = MemoryLog()
    data: dict[str, Any] = {"id": "a", "log_kind": "System", "items": [1]}
    mem.add(data)
    data["items"].append(2)
    assert mem.get_log_by_id("a") == {"id": "a", "log_kind": "System", "items": [1]}


def test_memory_ttl_expiry_with_injected_clock() -> None:
    clock = FakeClock()
    logger = make_logger(ttl=60, clock=clock, level="INFO")
    rid = uuid7()
    first = log_decision(logger, request_id=rid)
    clock.advance(30)
    second = logger.system("INFO", "later", request_id=rid)
    assert first and second
    clock.advance(29.9)
    assert logger.get_log_ids() == [first["id"], second["id"]]
    clock.advance(0.1)  # first is now exactly 60 s old
    assert logger.get_log_ids() == [second["id"]]
    assert logger.get_log_by_id(first["id"]) is None
    assert logger.get_logs_by_tag("Decision") == []
    assert logger.get_logs_by_request_id(rid) == [second]
    clock.advance(30)
    assert logger.get_logs_by_tag("INFO") == []
    assert logger.pop_logs() == []


def test_memory_ttl_zero_keeps_entries() -> None:
    clock = FakeClock()
    logger = make_logger(ttl=0, clock=clock)
    entry = log_decision(logger)
    clock.advance(10**9)
    assert entry is not None and logger.get_log_ids() == [entry["id"]]


def test_memory_max_items_evicts_oldest() -> None:
    logger = make_logger(max_items=3, level="INFO")
    rid = uuid7()
    entries = [log_decision(logger, request_id=rid) for _ in range(2)]
    entries += [logger.system("INFO", f"n{i}") for i in range(3)]
    ids = [e["id"] for e in entries if e]
    assert logger.get_log_ids() == ids[2:]
    assert logger.get_logs_by_tag("Decision") == []
    assert logger.get_logs_by_request_id(rid) == []
    assert len(logger.get_logs_by_tag("INFO")) == 3
    assert logger.memory is not None and len(logger.memory) == 3


def test_memory_max_items_zero_is_unlimited() -> None:
    logger = make_logger(max_items=0)
    for _ in range(50):
        log_decision(logger)
    assert len(logger.get_log_ids()) == 50


def test_memory_log_standalone_re_add_and_bad_entry() -> None:
    clock = FakeClock()
    mem = MemoryLog(ttl=10, max_items=5, clock=clock)
    mem.add({"id": "a", "log_kind": "System", "level": "WARN", "request_id": "r"})
    mem.add({"id": "a", "log_kind": "Decision", "request_id": "s"})
    assert mem.get_logs_by_tag("WARN") == []
    assert mem.get_logs_by_request_id("r") == []
    assert [e["log_kind"] for e in mem.get_logs_by_request_id("s")] == ["Decision"]
    with pytest.raises(LogError, match="id"):
        mem.add({"log_kind": "System"})


def test_memory_thread_safety() -> None:
    logger = make_logger(level="INFO", max_items=0)
    per_thread = 250
    request_ids = [uuid7() for _ in range(8)]
    ids: list[list[str]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        for n in range(per_thread):
            if n % 2:
                e = log_decision(logger, request_id=request_ids[i])
            else:
                e = logger.system("INFO", f"{i}:{n}", request_id=request_ids[i])
            assert e is not None
            ids[i].append(e["id"])
            if n % 50 == 0:
                logger.get_logs_by_tag("System")  # readers run alongside writers

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_ids = logger.get_log_ids()
    assert len(all_ids) == 8 * per_thread == len(set(all_ids))
    assert set(all_ids) == {x for r in ids for x in r}
    for i in range(8):
        got = logger.get_logs_by_request_id(request_ids[i])
        assert [e["id"] for e in got] == ids[i]
    assert len(logger.get_logs_by_tag("Decision")) == 8 * per_thread // 2
    assert len(logger.pop_logs()) == 8 * per_thread


def test_memory_thread_safety_with_eviction() -> None:
    logger = make_logger(max_items=100)

    def work() -> None:
        for _ in range(200):
            log_decision(logger)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = logger.get_log_ids()
    assert len(ids) == 100
    assert len(logger.get_logs_by_tag("Decision")) == 100


# --------------------------------------------------------------------------- metrics


def test_metric_entry_shape_and_validation() -> None:
    logger = make_logger()
    entry = logger.metric(
        counters={"authorize_calls": 10},
        gauges={"policy_count": 17, "load": 0.5},
        timings={
            "evaluation_time_micro_sec": 300,
            "token_validation_time_micro_sec": {"count": 2, "total": 50, "min": 20, "max": 30},
        },
        request_id="r-9",
    )
    assert entry is not None
    assert entry["counters"] == {"authorize_calls": 10}
    assert entry["gauges"] == {"policy_count": 17, "load": 0.5}
    assert entry["timings"] == {
        "evaluation_time_micro_sec": {"count": 1, "total": 300, "min": 300, "max": 300},
        "token_validation_time_micro_sec": {"count": 2, "total": 50, "min": 20, "max": 30},
    }
    assert logger.get_logs_by_request_id("r-9") == [entry]
    with pytest.raises(LogError, match="counters"):
        logger.metric(counters={"calls": 1.5})  # type: ignore[dict-item]
    with pytest.raises(LogError, match="name"):
        logger.metric(gauges={"bad name": 1})
    with pytest.raises(LogError, match="finite"):
        logger.metric(gauges={"x": math.inf})
    with pytest.raises(LogError, match="keys"):
        logger.metric(timings={"t": {"count": 1}})
    with pytest.raises(LogError, match="count"):
        logger.metric(timings={"t": {"count": 0, "total": 0, "min": 0, "max": 0}})
    with pytest.raises(LogError, match="number"):
        logger.metric(timings={"t": True})
    assert logger.get_logs_by_tag("Metric") == [entry]


def test_metrics_collector_and_flush() -> None:
    logger = make_logger()
    logger.metrics.increment("authorize_calls")
    logger.metrics.increment("authorize_calls", 2)
    logger.metrics.observe("evaluation_time_micro_sec", 100)
    logger.metrics.observe("evaluation_time_micro_sec", 40)
    logger.metrics.observe("evaluation_time_micro_sec", 70)
    logger.metrics.set_gauge("policy_count", 12)
    first = logger.flush_metrics()
    assert first is not None
    assert first["counters"] == {"authorize_calls": 3}
    assert first["gauges"] == {"policy_count": 12}
    assert first["timings"] == {
        "evaluation_time_micro_sec": {"count": 3, "total": 210, "min": 40, "max": 100}
    }
    logger.metrics.increment("authorize_calls")
    second = logger.flush_metrics()
    assert second is not None
    assert second["counters"] == {"authorize_calls": 4}  # counters are totals
    assert second["timings"] == {}  # timings restart after each flush
    assert second["gauges"] == {"policy_count": 12}
    with pytest.raises(LogError):
        logger.metrics.increment("x", True)
    with pytest.raises(LogError):
        logger.metrics.observe("x", "slow")  # type: ignore[arg-type]


def test_metrics_collector_threads() -> None:
    c = MetricsCollector()

    def work() -> None:
        for i in range(1000):
            c.increment("authorize_calls")
            c.observe("t_micro_sec", i)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counters, _, timings = c.snapshot()
    assert counters == {"authorize_calls": 8000}
    assert timings["t_micro_sec"] == {"count": 8000, "total": 8 * 499500, "min": 0, "max": 999}
    assert c.snapshot()[2] == {}


# --------------------------------------------------------------------------- tokens


def test_token_log_ids_keeps_only_the_id_claim() -> None:
    claims = {"jti": "j-1", "sub": "alice", "email": "a@x.io", "sid": 42}
    assert token_log_ids({"Jans::Access_token": claims}) == {"Jans::Access_token": {"jti": "j-1"}}
    assert token_log_ids({"m": claims}, "sid") == {"m": {"sid": 42}}
    assert token_log_ids({"m": {"sub": "alice"}}) == {"m": {}}
    assert token_log_ids({"m": {"jti": ["a"]}}) == {"m": {}}
    assert token_log_ids({"m": {"jti": True}}) == {"m": {}}
    assert token_log_ids({"m": {"jti": "x" * 1000}}) == {"m": {}}
    assert token_log_ids({"m": {"jti": make_jwt()}}) == {"m": {}}
    assert token_log_ids(None) == {}


def test_token_log_ids_refuses_whole_tokens() -> None:
    token = make_jwt()
    with pytest.raises(TokenError) as info:
        token_log_ids({"Jans::Access_token": token})  # type: ignore[dict-item]
    assert token not in str(info.value)
    assert "tokens[0]" in str(info.value)
    with pytest.raises(TokenError):
        token_log_ids({"m": token.encode()})  # type: ignore[dict-item]
    with pytest.raises(TokenError):
        token_log_ids([("m", {"jti": "x"})])  # type: ignore[arg-type]
    with pytest.raises(TokenError):
        log_decision(make_logger(), tokens={"m": token})


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none()),
        max_size=6,
    ),
    st.sampled_from(["jti", "sid", "id"]),
)
@settings(max_examples=100, deadline=None)
def test_token_log_ids_is_idempotent_and_minimal(claims: dict[str, object], claim: str) -> None:
    once = token_log_ids({"m": claims}, claim)
    assert token_log_ids(once, claim) == once
    assert set(once["m"]) <= {claim}
    if once["m"]:
        assert once["m"][claim] == claims[claim]


def test_custom_jwt_id_claim_from_settings() -> None:
    logger = make_logger(decision_log_default_jwt_id="sid")
    entry = log_decision(logger, tokens={"m": {"jti": "j", "sid": "s-1"}})
    assert entry is not None and entry["tokens"] == {"m": {"sid": "s-1"}}


@pytest.mark.parametrize("log_type", ["memory", "std_out", "python"])
def test_whole_tokens_never_appear_in_any_output(
    log_type: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(1, logger="polang")
    token = make_jwt(jti="tok-77", secret_claim="s3cr3t-value")
    _header, payload, signature = token.split(".")
    claims = jwt.decode(token, HS_KEY, algorithms=["HS256"])
    logger = make_logger(log_type, level="TRACE")
    written = [
        log_decision(
            logger,
            principal={"type": "Jans::User", "id": "alice", "token": token},
            tokens={"Jans::Access_token": claims},
            errors=[{"policy_id": "p1", "error": f"bad token {token}"}],
            dropped_tokens=[
                {
                    "mapping": "Jans::Id_token",
                    "index": 0,
                    "reason": {"kind": "invalid_signature", "message": f"token={token};"},
                }
            ],
            raw=token,
        ),
        logger.system("ERROR", f"could not validate {token}", header=f"Bearer {token}"),
        logger.system("DEBUG", "glued", where=f"x.{token}.y", items=[token, {token: token}]),
        logger.metric(counters={"authorize_calls": 1}, note=token),
    ]
    assert all(e is not None for e in written)
    out, err = capsys.readouterr()
    texts = [out, err, caplog.text, json.dumps(written)]
    texts += [json.dumps(r.__dict__.get("polang")) for r in caplog.records]
    if logger.memory is not None:
        texts.append(json.dumps(logger.pop_logs()))
    blob = "\n".join(texts)
    assert REDACTED_TOKEN in blob
    for secret in (token, signature, payload, "s3cr3t-value"):
        assert secret not in blob
    assert '"jti": "tok-77"' in json.dumps(written[0]["tokens"])  # type: ignore[index]


def test_redact_tokens_forms() -> None:
    jws = make_jwt()
    unsigned = jwt.encode({"sub": "x"}, None, algorithm="none")  # type: ignore[arg-type]
    assert unsigned.endswith(".")
    jwe_header = jwt.utils.base64url_encode(b'{"alg":"RSA-OAEP","enc":"A256GCM"}').decode()
    jwe = f"{jwe_header}.a2V5a2V5.aXZpdg.Y2lwaGVydGV4dA.dGFndGFn"
    assert redact_tokens(jws) == REDACTED_TOKEN
    assert redact_tokens(f"t={unsigned} end") == f"t={REDACTED_TOKEN} end"
    assert redact_tokens(f"[{jwe}]") == f"[{REDACTED_TOKEN}]"
    assert redact_tokens(f"{jws},{jws}") == f"{REDACTED_TOKEN},{REDACTED_TOKEN}"
    assert redact_tokens(f"ab.{jws}") == f"ab.{REDACTED_TOKEN}"
    for harmless in ("auth.example.com", "v1.2.3", "a.b.c", "no dots", "x..y..z", ""):
        assert redact_tokens(harmless) == harmless


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=10),
        st.one_of(st.text(max_size=30), st.integers(), st.booleans()),
        max_size=5,
    ),
    st.text(max_size=20),
    st.text(max_size=20),
)
@settings(max_examples=60, deadline=None)
def test_redact_tokens_property(claims: dict[str, object], before: str, after: str) -> None:
    token = jwt.encode(claims, HS_KEY, algorithm="HS256")
    redacted = redact_tokens(before + " " + token + " " + after)
    assert token not in redacted
    assert token.split(".")[2] not in redacted


@given(st.text(alphabet=st.characters(blacklist_characters=".")))
def test_redact_tokens_leaves_dotless_text_alone(text: str) -> None:
    assert redact_tokens(text) == text


# The dotted-run pattern before it was made linear: the reference for what redaction finds.
QUADRATIC_RUN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*){2,}")
JWS_HEADER = jwt.utils.base64url_encode(b'{"alg":"HS256","typ":"JWT"}').decode()


@given(
    st.lists(
        st.sampled_from(["a", "b9", "-", "_", ".", "..", " ", "/", ":", "é", JWS_HEADER, "x.y"]),
        max_size=14,
    ).map("".join)
)
@settings(max_examples=300, deadline=None)
def test_redaction_finds_what_the_backtracking_pattern_found(text: str) -> None:
    reference = QUADRATIC_RUN.sub(logs_module._redact_run, text)
    assert redact_tokens(text) == reference


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(lambda n: "a." * n, id="a.-repeated"),
        pytest.param(lambda n: "." * n, id="dots"),
        pytest.param(lambda n: "a" * n + ".", id="a-run-then-dot"),
        pytest.param(lambda n: "a" * n + ".b", id="a-run-one-dot"),
        pytest.param(lambda n: ("a" * 99 + ".") * (n // 100), id="long-segments"),
        pytest.param(lambda n: "x.y." * (n // 4), id="x.y.-repeated"),
        pytest.param(lambda n: f"{JWS_HEADER}.y." * (n // 30), id="jwt-like-repeated"),
    ],
)
def test_redaction_is_linear_on_hostile_ids(shape: Any) -> None:
    # ids come from URLs and bodies: "a" * 24_000 + "." once cost 8 s (n**2 steps)
    text = shape(100_000)
    out = redact_tokens(text)
    if JWS_HEADER in text:
        assert REDACTED_TOKEN in out and out.count(JWS_HEADER) < text.count(JWS_HEADER)
    else:
        assert out == text


def test_a_segment_decoding_to_deep_json_is_no_header() -> None:
    # a caller's id whose first segment decodes to [[[[...: not a RecursionError out of a
    # log call, just text that is not a token
    deep = jwt.utils.base64url_encode(b"[" * 200_000).decode()
    assert redact_tokens(f"{deep}.a.b") == f"{deep}.a.b"
    deep_header = jwt.utils.base64url_encode(b'{"alg":"HS256","x":' + b"[" * 200_000).decode()
    assert redact_tokens(f"id-{deep_header}.a.b") == f"id-{deep_header}.a.b"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("log_type", ["memory", "std_out"])
def test_an_engine_logs_a_hostile_resource_id_in_linear_time(
    log_type: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from polang import Engine

    store = Path(__file__).resolve().parents[1] / "examples" / "stores" / "directory"
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_LOG_TYPE": log_type})
    hostile = "a" * 100_000 + "."
    resource = {
        "uid": {"type": "Acme::Document", "id": hostile},
        "attrs": {
            "owner": {"__entity": {"type": "Acme::User", "id": "bob"}},
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "classification": "internal",
            "public": False,
        },
    }
    principal = {
        "uid": {"type": "Acme::User", "id": "alice"},
        "attrs": {
            "email": "alice@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": 2,
        },
        "parents": [{"type": "Acme::Team", "id": "finance"}],
    }
    try:
        result = engine.authorize_unsigned('Acme::Action::"read"', resource, principal=principal)
        assert result.decision is True
        written = json.dumps(engine.pop_logs()) if log_type == "memory" else capsys.readouterr().out
        logged = hostile in written  # not in the assertion: pytest would print 100,000 a's
        assert logged
    finally:
        engine.close()


def test_uuid7_draws_random_bytes_in_pools_and_refills_after_a_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One draw of random bytes serves many ids (not one or two draws per id); a process
    with another pid (a forked child) draws its own pool, so it never repeats its parent's
    ids."""
    import polang.logs as logs_mod

    draws: list[int] = []

    def random_bytes(n: int) -> bytes:
        draws.append(n)
        return os.urandom(n)

    ms = itertools.count(1)
    gen = UUIDv7Generator(clock_ms=lambda: next(ms), random_bytes=random_bytes)
    ids = [gen() for _ in range(200)] + gen.many(50)
    assert len(set(ids)) == 250 and ids == sorted(ids)
    assert len(draws) <= 2  # 200 new milliseconds: each id takes a counter seed and a tail
    before, parent = len(draws), gen._tails
    monkeypatch.setattr(logs_mod, "_FORKS", [logs_mod._FORKS[0] + 1])  # as after a fork
    gen()
    assert len(draws) == before + 1 and gen._tails is not parent
    gen()
    assert len(draws) == before + 1  # the child's own pool serves its next ids


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_uuid7_forked_child_draws_its_own_pool() -> None:
    """A real fork: the child's ids come from fresh random bytes, not its parent's pool."""
    gen = UUIDv7Generator(clock_ms=lambda: 5)
    gen()  # the parent's pool is drawn
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id's random tail, then exit at once
        os.close(read)
        os.write(write, gen().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = f.read()
    os.waitpid(pid, 0)
    parent = gen()  # the same counter step in the parent, from the parent's pool
    assert child[:23] == parent[:23]  # same millisecond and counter
    assert child[24:] != parent[24:]  # but not the same random tail


def test_uuid7_default_layout_is_the_rfc_layout_and_carries_into_the_millisecond() -> None:
    """The default layout's text is the UUID built field by field (48-bit ms, version,
    the 42-bit counter split over rand_a and rand_b, the 32-bit tail), and a counter that
    passes 42 bits carries into the millisecond: ids never go backwards."""
    gen = UUIDv7Generator(clock_ms=lambda: 9)
    gen._start = (1 << 42) - 3
    ids = [gen() for _ in range(6)]
    assert ids == sorted(ids) and len(set(ids)) == 6
    stamps = [uuid.UUID(i).int >> 80 for i in ids]
    assert stamps == [9, 9, 9, 10, 10, 10]
    for k, s in enumerate(ids):
        u = uuid.UUID(s)
        counter = ((1 << 42) - 3 + k) & ((1 << 42) - 1)
        rand = counter << 32 | u.int & 0xFFFF_FFFF
        want = stamps[k] << 80 | 7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | rand & (2**62 - 1)
        assert u.int == want and str(u) == s


def test_uuid7_batches_are_ids_in_order_across_counter_carries() -> None:
    """``many`` (a batch's ids, tails from one slice of the pool) gives valid, strictly
    increasing ids through counter carries past 16 bits and new milliseconds, interleaved
    with single ids."""
    ms = iter([3] * 4_000 + list(range(4, 4_000)))
    gen = UUIDv7Generator(clock_ms=lambda: next(ms))
    ids: list[str] = []
    while len(ids) < 80_000:
        ids += gen.many(37)
        ids.append(gen())
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for s in ids[::101]:
        u = uuid.UUID(s)
        assert u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == s


def test_reserved_ids_are_written_as_rfc_9562_uuidv7_text() -> None:
    """``uuid7_text`` of reserved bits is the UUID built field by field: 48-bit ms,
    version 7, 12 bits, variant 0b10, 62 bits (checked with ``uuid.UUID(fields)``)."""
    rng = random.Random(9)
    for _ in range(500):
        ms, rand = rng.getrandbits(48), rng.getrandbits(74)
        want = uuid.UUID(
            int=ms << 80 | 7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | rand & (2**62 - 1)
        )
        assert uuid7_text(ms << 74 | rand) == str(want)
    gen = UUIDv7Generator(clock_ms=lambda: 1_700_000_000_123)
    u = uuid.UUID(uuid7_text(gen.reserve()))
    assert u.version == 7 and u.variant == uuid.RFC_4122 and u.int >> 80 == 1_700_000_000_123


@pytest.mark.parametrize("counter_bits", [42, 2, 30, 74])
def test_reserved_ids_interleave_in_order_with_text_ids(counter_bits: int) -> None:
    """``reserve``, ``reserve_many``, ``__call__`` and ``many`` share one sequence: ids
    sort in the order they were drawn, through counter overflow, a clock standing still
    or going back, and new milliseconds."""
    ticks = itertools.chain([50] * 3_000, [40] * 500, range(51, 100_000))
    gen = UUIDv7Generator(clock_ms=lambda: next(ticks), counter_bits=counter_bits)
    ids: list[str] = []
    for k in range(1_500):
        step = k % 4
        if step == 0:
            ids.append(uuid7_text(gen.reserve()))
        elif step == 1:
            ids.extend(uuid7_text(b) for b in gen.reserve_many(k % 9))
        elif step == 2:
            ids.append(gen())
        else:
            ids.extend(gen.many(3))
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for s in ids[::37]:
        u = uuid.UUID(s)
        assert u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == s


@pytest.mark.parametrize("room", [0, 1, 2, 5, 40])
def test_reserve_many_numbers_ids_as_reserve_calls_do(room: int) -> None:
    """A batch's ids take the clock and counter that as many ``reserve`` calls would,
    also when the counter passes 42 bits inside the batch (``room`` ids before it does)."""
    for n in range(2, 9):
        one, many = (UUIDv7Generator(clock_ms=lambda: 77) for _ in range(2))
        for gen in (one, many):
            gen._start = (1 << 42) - 1 - room
            gen.reserve()
        singles = [one.reserve() for _ in range(n)]
        batch = many.reserve_many(n)
        assert [b >> 32 for b in batch] == [b >> 32 for b in singles], n
        assert batch == sorted(batch) and len(set(batch)) == n
        assert (batch[-1] >> 74) == (77 if room >= n else 78)


def test_reserved_ids_draw_fresh_random_tails_after_a_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parent and child share the counter state at a fork: their next ids differ only by
    the random tail, which the child draws from its own pool."""
    import polang.logs as logs_mod

    gen = UUIDv7Generator(clock_ms=lambda: 5)
    first = gen.reserve()
    parent_tails = gen._tails
    monkeypatch.setattr(logs_mod, "_FORKS", [logs_mod._FORKS[0] + 1])  # as after a fork
    child = gen.reserve()
    assert gen._tails is not parent_tails and child & 0xFFFF_FFFF not in parent_tails
    assert child >> 32 == (first >> 32) + 1  # the same millisecond, the next counter
    batch = gen.reserve_many(3)
    assert gen._tails is not parent_tails and batch == sorted(batch)


def test_reserved_ids_refuse_a_timestamp_beyond_48_bits() -> None:
    gen = UUIDv7Generator(clock_ms=lambda: 1 << 48)
    with pytest.raises(LogError, match="48-bit range"):
        gen.reserve()
    with pytest.raises(LogError, match="48-bit range"):
        gen.reserve_many(4)
    with pytest.raises(LogError, match="48-bit range"):
        UUIDv7Generator(clock_ms=lambda: 1 << 48, counter_bits=10).reserve()


def test_reserved_ids_from_threads_are_unique() -> None:
    bits: list[list[int]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        for _ in range(300):
            bits[i].append(reserve_uuid7())
            bits[i].extend(reserve_uuid7_many(3))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [b for per in bits for b in per]
    assert len(set(flat)) == len(flat) == 4 * 1200
    for per in bits:
        assert per == sorted(per)  # one thread's ids in its drawing order


# --------------------------------------------------------------------------- the engine's records


class _LogId:
    def __init__(self, mapping: str, index: int, claim: str, value: object) -> None:
        self.mapping, self.index, self.claim, self.value = mapping, index, claim, value


class _Dropped:
    def __init__(self, mapping: str, index: int, message: str) -> None:
        self.mapping, self.index, self.message = mapping, index, message

    def to_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "index": self.index,
            "reason": {"kind": "expired", "message": self.message},
        }


class _Uid:
    """Stands for an EntityUID: written with ``str``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


@pytest.mark.parametrize("log_type", ["memory", "std_out", "python"])
@pytest.mark.parametrize("reserved", [True, False])
def test_an_engine_record_is_the_entry_decision_writes(
    log_type: str, reserved: bool, caplog: pytest.LogCaptureFixture, capsys: Any
) -> None:
    """``Logger.decided`` (the engine's call: a record kept, its entry built when read)
    writes the entry ``Logger.decision`` writes for the same values: every field, in
    order, tokens redacted, in every log type."""
    caplog.set_level(logging.INFO, logger="polang")
    clock = FakeClock()
    token = make_jwt(jti="t-1")
    rid_bits = reserve_uuid7()
    rid: str | int = rid_bits if reserved else uuid7_text(rid_bits)
    values = {
        "principal": f'Jans::User::"{token}"',
        "action": ACTION,
        "resource": RESOURCE,
        "reason": ["p1", "p2"],
        "errors": [{"policy_id": "p3", "error": f"bad {token}"}],
        "dropped": [_Dropped("Jans::Id_token", 1, f"token {token} expired")],
        "log_ids": [_LogId("Jans::Access_token", 0, "jti", "t-1"), _LogId("X", 2, "sub", "s")],
    }
    ids = iter(["pdp-1", "id-a", "id-b"])
    logger = make_logger(log_type, clock=clock, id_generator=lambda: next(ids))
    expected = logger.decision(
        request_id=uuid7_text(rid_bits),
        decision=False,
        action=values["action"],
        resource=values["resource"],
        principal=values["principal"],
        reason=values["reason"],
        errors=values["errors"],
        tokens={"Jans::Access_token#0": {"jti": "t-1"}, "X#2": {"sub": "s"}},
        dropped_tokens=[d.to_dict() for d in values["dropped"]],  # type: ignore[attr-defined]
        decision_time_micro_sec=41.6,
        policystore_id="s1",
        policystore_version="1.0.0",
    )
    logger.decided(
        DecisionValues.of(
            rid,
            False,
            _Uid(values["action"]),  # type: ignore[arg-type]
            _Uid(values["resource"]),  # type: ignore[arg-type]
            _Uid(values["principal"]),  # type: ignore[arg-type]
            values["reason"],
            values["errors"],
            values["log_ids"],
            values["dropped"],
            42,
            "s1",
            "1.0.0",
        )
    )
    assert expected is not None
    if log_type == "memory":
        first, got = logger.pop_logs()
    elif log_type == "std_out":
        first, got = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    else:
        records = [r for r in caplog.records if r.name == "polang"]
        first, got = (r.polang for r in records)  # type: ignore[attr-defined]
        assert all(json.loads(r.getMessage()) == r.polang for r in records)  # type: ignore[attr-defined]
        assert {(r.funcName, Path(r.pathname).name) for r in records} == {("_write", "logs.py")}
    assert first == expected
    assert list(got) == list(expected)  # the same fields in the same order
    assert got == {**expected, "id": "id-b"}
    assert token not in json.dumps(got) and REDACTED_TOKEN in got["principal"]


def test_decision_values_keep_their_own_lists_not_the_callers() -> None:
    """``DecisionValues.of`` copies the lists the caller's result shares: changing them
    after the decision does not change the entry."""
    logger = make_logger()
    reasons, errors = ["p1"], [{"policy_id": "p2", "error": "e"}]
    logger.decided(
        DecisionValues.of(
            uuid7(), True, ACTION, RESOURCE, None, reasons, errors, None, None, 1, None, None
        )
    )
    reasons.append("late")
    errors[0]["error"] = "changed"
    errors.append({"policy_id": "p9", "error": "x"})
    (entry,) = logger.pop_logs()
    assert entry["diagnostics"] == {"reason": ["p1"], "errors": [{"policy_id": "p2", "error": "e"}]}


def test_memory_log_finds_records_kept_as_bits_by_their_text() -> None:
    logger = make_logger(level="INFO")
    rid = reserve_uuid7()
    logger.decided(_values(rid))
    logger.system("INFO", "about it", request_id=uuid7_text(rid))
    (log_id,) = [
        i for i in logger.get_log_ids() if logger.get_log_by_id(i)["log_kind"] == "Decision"
    ]  # type: ignore[index]
    assert UUID_RE.match(log_id)
    entry = logger.get_log_by_id(log_id)
    assert entry is not None and entry["request_id"] == uuid7_text(rid)
    by_request = logger.get_logs_by_request_id(uuid7_text(rid))
    assert [e["log_kind"] for e in by_request] == ["Decision", "System"]
    for other in (log_id.upper(), log_id[:-1] + "g", "x" * 36, log_id + " ", "", 7):
        assert logger.get_log_by_id(other) is None  # type: ignore[arg-type]
        assert logger.get_logs_by_request_id(other) == []  # type: ignore[arg-type]
    assert logger.get_logs_by_tag("decision") == [entry]


def test_memory_log_stays_bounded_without_readers() -> None:
    """Writers trim in bursts: with nobody reading, the log holds at most ``MEMORY_LOG_TRIM_SLACK``
    entries more than ``max_items``; expired entries go too (a second past expiry)."""
    clock = FakeClock()
    logger = make_logger(max_items=10, ttl=5, clock=clock)
    memory = logger.memory
    assert memory is not None
    for _ in range(5_000):
        logger.decided(_values(uuid7()))
    assert len(memory._items) <= 10 + logs_module.MEMORY_LOG_TRIM_SLACK + 1
    assert len(logger.get_log_ids()) == 10
    unlimited = make_logger(max_items=0, ttl=5, clock=clock)
    for _ in range(3_000):
        clock.advance(0.01)  # 100 entries a second, 5 seconds each
        unlimited.decided(_values(uuid7()))
    assert unlimited.memory is not None and len(unlimited.memory._items) <= 700
    assert 499 <= len(unlimited.get_log_ids()) <= 501  # the last 5 s (float steps)


def test_memory_log_stays_bounded_while_a_reader_holds_it() -> None:
    """Writers never wait for the log, and while a reader holds it they cannot trim: the
    queue's own bound drops the oldest entries, so the log never grows past
    ``max_items + MEMORY_LOG_TRIM_SLACK`` whatever the threads do."""
    logger = make_logger(max_items=10)
    memory = logger.memory
    assert memory is not None
    with memory._lock:  # a reader, busy
        for _ in range(5_000):
            logger.decided(_values(uuid7()))
        assert len(memory._items) == 10 + logs_module.MEMORY_LOG_TRIM_SLACK
    assert len(logger.get_log_ids()) == 10


def test_metric_samples_are_folded_in_bounded_batches() -> None:
    metrics = MetricsCollector()
    for n in range(10_000):
        metrics.decision(n % 3 != 0, n % 5 == 0, 0, n)
        metrics.increment("other")
    assert len(metrics._queue) < logs_module.METRICS_FOLD_AT
    counters, _, timings = metrics.snapshot()
    assert counters == {
        "authorize_calls": 10_000,
        "allow": 6_666,
        "deny": 3_334,
        "policy_errors": 2_000,
        "other": 10_000,
    }
    assert timings["decision_time_micro_sec"] == {
        "count": 10_000,
        "total": sum(range(10_000)),
        "min": 0,
        "max": 9_999,
    }
    assert metrics.snapshot()[2] == {}  # timings restart


_METRIC_CALLS = st.lists(
    st.one_of(
        st.tuples(
            st.just("decision"),
            st.booleans(),
            st.integers(0, 3),
            st.integers(0, 3),
            st.integers(0, 10**6),
        ),
        st.tuples(  # integers: a float total depends on the order of the additions
            st.just("observe"),
            st.sampled_from(["decision_time_micro_sec", "t"]),
            st.integers(0, 10**6),
        ),
        st.tuples(
            st.just("increment"),
            st.sampled_from(["authorize_calls", "deny", "n"]),
            st.integers(0, 5),
        ),
        st.just(("snapshot",)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_METRIC_CALLS)
def test_metric_folds_agree_with_adding_each_sample_in_turn(calls: list[tuple[Any, ...]]) -> None:
    """However samples are folded (in batches, decisions summed first), the counters and
    timings are those of applying each sample in turn, snapshot after snapshot."""
    metrics = MetricsCollector()
    counters: dict[str, int] = {}
    timings: dict[str, dict[str, Any]] = {}

    def sample(name: str, v: float) -> None:
        t = timings.setdefault(name, {"count": 0, "total": 0, "min": v, "max": v})
        t["count"] += 1
        t["total"] += v
        t["min"], t["max"] = min(t["min"], v), max(t["max"], v)

    def count(name: str, n: int) -> None:
        counters[name] = counters.get(name, 0) + n

    for call in calls:
        if call[0] == "decision":
            _, allow, errors, dropped, micro = call
            metrics.decision(allow, errors, dropped, micro)
            count("authorize_calls", 1)
            count("allow" if allow else "deny", 1)
            if errors:
                count("policy_errors", errors)
            if dropped:
                count("dropped_tokens", dropped)
            sample("decision_time_micro_sec", micro)
        elif call[0] == "observe":
            metrics.observe(call[1], call[2])
            sample(call[1], call[2])
        elif call[0] == "increment":
            metrics.increment(call[1], call[2])
            count(call[1], call[2])
        else:
            got_counters, _, got_timings = metrics.snapshot()
            assert got_counters == counters and got_timings == timings
            timings.clear()
    got_counters, _, got_timings = metrics.snapshot()
    assert got_counters == counters and got_timings == timings


def test_memory_log_readers_run_while_writers_append() -> None:
    """Readers copy the queue in one step: writers appending meanwhile never break a
    read (a loop over the queue itself failed with "deque mutated during iteration")."""
    logger = make_logger(max_items=5_000)
    for _ in range(5_000):
        logger.decided(_values(uuid7()))
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        while not stop.is_set():
            logger.decided(_values(uuid7()))

    writers = [threading.Thread(target=write) for _ in range(2)]
    for t in writers:
        t.start()
    try:
        for _ in range(5):
            try:
                logger.get_log_ids()
                logger.get_logs_by_request_id("none")
            except RuntimeError as exc:  # pragma: no cover - the failure this guards
                errors.append(exc)
    finally:
        stop.set()
        for t in writers:
            t.join()
    assert not errors


def test_uid_texts_are_remembered_by_type_and_bounded() -> None:
    """An entry's uid text is ``str`` with tokens redacted, whether remembered or not: a
    uid and the plain tuple of its parts (equal, with other texts) keep their own, an
    unhashable value is written each time, long texts are not kept, and the memory
    starts afresh past its bound."""
    from polang.language.values import EntityUID

    uid_text = logs_module._uid_text
    uid = EntityUID("App::User", "alice")
    assert uid_text(uid) == 'App::User::"alice"' == uid_text(uid)
    assert uid_text(("App::User", "alice")) == "('App::User', 'alice')"
    assert uid_text(uid) == 'App::User::"alice"'
    token = make_jwt()
    assert uid_text(EntityUID("User", token)) == f'User::"{REDACTED_TOKEN}"'

    class Unhashable(list[str]):
        def __str__(self) -> str:
            return "odd"

    assert uid_text(Unhashable()) == "odd"
    long_uid = EntityUID("User", "x" * 1000)
    assert uid_text(long_uid) == str(long_uid)
    assert (type(long_uid), long_uid) not in logs_module._UID_TEXTS
    for i in range(logs_module._UID_TEXTS_MAX + 10):
        assert uid_text(EntityUID("User", f"u{i}")) == f'User::"u{i}"'
    assert len(logs_module._UID_TEXTS) <= logs_module._UID_TEXTS_MAX


def test_each_entry_names_the_store_it_was_decided_on(capsys: pytest.CaptureFixture[str]) -> None:
    """The store's id and version are scanned once while they stay the same: a new store
    (another version, or an equal text in a new string) is written as it is, and a token
    in an id is redacted every time."""
    logger = make_logger("std_out")
    token = make_jwt()
    stores = [
        ("s1", "1.0.0"),
        ("s1", "1.0.0"),
        ("s1", "2.0.0"),
        ("".join(["s", "1"]), "2.0.0"),
        (f"s {token}", None),
        (None, None),
    ]
    for store_id, version in stores:
        logger.decided(_values(uuid7())._replace(store_id=store_id, store_version=version))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["policystore_id"], e["policystore_version"]) for e in lines] == [
        ("s1", "1.0.0"),
        ("s1", "1.0.0"),
        ("s1", "2.0.0"),
        ("s1", "2.0.0"),
        (f"s {REDACTED_TOKEN}", None),
        (None, None),
    ]
