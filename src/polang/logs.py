"""Decision, system and metric logs of the engine.

Entries are plain JSON-ready dicts so that every sink (memory, stdout, stdlib ``logging``)
sees exactly the same data and callers can forward them anywhere without adapters. Tokens
are never logged whole: a decision entry keeps only each token's id claim, and every string
that goes into an entry is scanned for compact JWTs, which are replaced by a marker.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import os
import re
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TextIO

from polang._record import Record
from polang.errors import ConfigError, PolangError, TokenError
from polang.escapes import printable_json
from polang.jsonlimits import check_depth

if TYPE_CHECKING:
    import logging

__all__ = [
    "DEFAULT_APPLICATION_ID",
    "LEVELS",
    "LOG_KINDS",
    "LOG_TYPES",
    "MEMORY_LOG_TRIM_SLACK",
    "METRICS_FOLD_AT",
    "PYTHON_LOGGER_NAME",
    "REDACTED_TOKEN",
    "SETTING_KEYS",
    "DecisionValues",
    "LogError",
    "LogSettings",
    "Logger",
    "MemoryLog",
    "MetricsCollector",
    "UUIDv7Generator",
    "format_timestamp",
    "jsonable",
    "redact_tokens",
    "reserve_uuid7",
    "reserve_uuid7_many",
    "token_log_ids",
    "uuid7",
    "uuid7_many",
    "uuid7_text",
]

LOG_TYPES: Final = ("off", "memory", "std_out", "python")
# Most severe first; a configured level lets through itself and everything before it.
LEVELS: Final = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
LOG_KINDS: Final = ("Decision", "System", "Metric")
DEFAULT_APPLICATION_ID: Final = "polang"
REDACTED_TOKEN: Final = "[redacted JWT]"

_SEVERITY: Final = {name: len(LEVELS) - i for i, name in enumerate(LEVELS)}
TRACE_LEVELNO: Final = 5
_PY_INFO: Final = 20
# The stdlib ``logging`` level numbers (CRITICAL, ERROR, WARNING, INFO, DEBUG: fixed by its
# documentation), written out so that the module is imported only by a ``python`` log
# (start-up time); tests/test_logs.py compares them with ``logging``'s.
_PY_LEVELS: Final = {
    "FATAL": 50,
    "ERROR": 40,
    "WARN": 30,
    "INFO": _PY_INFO,
    "DEBUG": 10,
    "TRACE": TRACE_LEVELNO,
}
PYTHON_LOGGER_NAME: Final = "polang"

_set = object.__setattr__

# Fields every entry carries, plus those of each kind: caller extras may not shadow them.
_COMMON_FIELDS: Final = frozenset({"id", "timestamp", "log_kind", "application_id", "pdp_id"})
_DECISION_FIELDS: Final = _COMMON_FIELDS | {
    "request_id",
    "policystore_id",
    "policystore_version",
    "principal",
    "action",
    "resource",
    "decision",
    "diagnostics",
    "tokens",
    "dropped_tokens",
    "decision_time_micro_sec",
}
_SYSTEM_FIELDS: Final = _COMMON_FIELDS | {"level", "msg"}
_METRIC_FIELDS: Final = _COMMON_FIELDS | {"counters", "gauges", "timings"}

# A token id claim longer than this is not an id: it is dropped rather than logged.
_MAX_TOKEN_ID_LEN: Final = 256


class LogError(PolangError):
    """A log call was given something that cannot become a log entry."""


# --------------------------------------------------------------------------- UUIDv7


_UUID7_VERSION: Final = 0x7 << 76
_UUID7_VARIANT: Final = 0b10 << 62
_UUID7_RAND_B: Final = (1 << 62) - 1

# an array typecode of 4-byte unsigned items (``I`` on every common platform)
_TAIL_TYPECODE: Final = next(c for c in "IL" if array(c).itemsize == 4)

_time_ns: Final = time.time_ns

_FORKS = [0]
"""Forks this process has made a child of (counted in the child): a generator's random
pool drawn before the last fork is its parent's, and is drawn afresh."""


def _forked() -> None:
    _FORKS[0] += 1


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forked)


class UUIDv7Generator:
    """RFC 9562 UUIDv7 ids that sort in creation order, even within one millisecond.

    Layout: 48-bit Unix milliseconds, version 7, then 74 bits of which the leftmost
    ``counter_bits`` are a counter (RFC 9562 section 6.2, method 1) and the rest are random.

    The default layout (42 counter bits, a 32-bit random tail) takes no lock: ids are drawn
    on every decision, from many threads, and a lock there made threads hand the
    interpreter to each other once per decision (a thread waiting for the lock owns it
    before it holds the interpreter again, so the next caller blocks in turn). Its counter
    is a random 41-bit start plus a process-wide sequence number that one C call draws
    (``next`` of an ``itertools.count``, atomic under the interpreter lock), so ids of one
    millisecond increase in the order they are drawn; the millisecond is the clock's,
    held when the clock goes back; a counter that passes 42 bits carries into the
    millisecond, so ids never go backwards. Random tails come from a pool drawn 1,024 at a
    time (a list ``pop``: atomic too), drawn afresh in a forked child.

    Other layouts (tests) seed the counter randomly each new millisecond and take a lock.
    """

    _RAND_BITS: Final = 74

    def __init__(
        self,
        *,
        clock_ms: Callable[[], int] | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
        counter_bits: int = 42,
    ) -> None:
        if not 1 <= counter_bits <= self._RAND_BITS:
            raise LogError(f"UUIDv7 counter_bits must be 1..{self._RAND_BITS}, got {counter_bits}")
        self._clock_ms = clock_ms
        self._random_bytes = random_bytes
        self._counter_bits = counter_bits
        self._random_tail_bits = self._RAND_BITS - counter_bits
        self._tail_bytes = (self._random_tail_bits + 7) // 8
        self._tail_mask = (1 << self._random_tail_bits) - 1
        self._lock = threading.Lock()  # other layouts only
        self._last_ms = -1
        self._counter = 0
        # random bytes drawn _POOL_BYTES at a time (other layouts), afresh after a fork
        self._pool = b""
        self._pool_pos = 0
        self._pool_fork = -1
        self._prefix_ms = -1
        self._prefix = ""
        self._lock_free = counter_bits == 42
        # the default layout: counter = _start + a sequence number, tails popped from a list
        self._start = int.from_bytes(random_bytes(6), "big") & ((1 << 41) - 1)
        self._seq = itertools.count()
        self._tails: list[int] = []
        self._tails_fork = _FORKS[0]

    _POOL_BYTES: Final = 4096

    def _draw(self, n: int) -> bytes:
        """``n`` random bytes from the pool; the caller holds the lock."""
        pos = self._pool_pos
        if pos + n > len(self._pool) or self._pool_fork != _FORKS[0]:
            self._pool = self._random_bytes(max(n, self._POOL_BYTES))
            self._pool_fork = _FORKS[0]
            pos = 0
        self._pool_pos = pos + n
        return self._pool[pos : pos + n]

    def _random_int(self, bits: int) -> int:
        if bits <= 0:
            return 0
        raw = int.from_bytes(self._draw((bits + 7) // 8), "big")
        return raw & ((1 << bits) - 1)

    def __call__(self) -> str:
        """The next id as text."""
        if self._lock_free:
            return uuid7_text(self.reserve())
        return uuid7_text(self._reserve_general())

    def reserve(self) -> int:
        """The next id as its 122 bits, ``ms << 74 | counter << (74 - counter_bits) |
        tail``: drawn now (clock, counter and random tail, in order with every other id of
        this generator; a forked child draws its own random bits), written as text by
        :func:`uuid7_text` only when someone reads it. A decision whose id nobody reads
        skips the formatting (about a microsecond)."""
        if not self._lock_free:
            return self._reserve_general()
        clock = self._clock_ms
        return self._bits(_time_ns() // 1_000_000 if clock is None else int(clock()))

    def reserve_many(self, n: int) -> list[int]:
        """``n`` ids as ``n`` :meth:`reserve` calls make them, in order, with one clock
        read (a batch)."""
        if not self._lock_free:
            return [self._reserve_general() for _ in range(n)]
        clock = self._clock_ms
        now = _time_ns() // 1_000_000 if clock is None else int(clock())
        bits = self._bits
        return [bits(now) for _ in range(n)]

    def _bits(self, now: int) -> int:
        """The default layout's next id at clock reading ``now`` (no lock: see the class)."""
        value = self._start + next(self._seq)  # atomic: no two calls get the same number
        try:
            if self._tails_fork != _FORKS[0]:
                raise IndexError  # a forked child: its parent's tails are not its own
            tail = self._tails.pop()  # atomic too
        except IndexError:
            tail = self._refill_tails()
        ms = self._last_ms
        if now > ms:
            if now >> 48:
                raise LogError(f"UUIDv7 timestamp {now} ms is outside the 48-bit range")
            self._last_ms = ms = now
        if value >> 42:  # past 42 bits: the carry goes into the millisecond
            ms += value >> 42
            if ms >> 48:
                raise LogError(f"UUIDv7 timestamp {ms} ms is outside the 48-bit range")
        return (ms << 74) | ((value & _COUNTER_MASK) << 32) | tail

    def _refill_tails(self) -> int:
        """A fresh pool of 32-bit random tails (this process's own: a forked child never
        reuses its parent's), and one of them. Two threads may refill at once: each
        installs its own pool, and no tail is handed out twice."""
        tails = array(_TAIL_TYPECODE, self._random_bytes(self._POOL_BYTES)).tolist()
        tail = tails.pop()
        self._tails = tails
        self._tails_fork = _FORKS[0]
        return tail

    def _reserve_general(self) -> int:
        """:meth:`reserve` for a layout other than the default (tests, mostly)."""
        clock = self._clock_ms
        now = time.time_ns() // 1_000_000 if clock is None else int(clock())
        with self._lock:
            self._advance_checked(now)
            tail = self._random_int(self._random_tail_bits)
            return (self._last_ms << 74) | (self._counter << self._random_tail_bits) | tail

    def _advance_checked(self, now: int) -> None:
        """:meth:`_advance`, refused (state unchanged) past the 48-bit millisecond range."""
        before = (self._last_ms, self._counter)
        self._advance(now)
        if not 0 <= self._last_ms < 1 << 48:
            ms = self._last_ms
            self._last_ms, self._counter = before
            raise LogError(f"UUIDv7 timestamp {ms} ms is outside the 48-bit range")

    def many(self, n: int) -> list[str]:
        """``n`` ids as text, as ``n`` calls would make them (a batch of decisions)."""
        return [uuid7_text(b) for b in self.reserve_many(n)]

    def _advance(self, now: int) -> None:
        """The next (ms, counter) for a clock reading of ``now``: monotonic even when the
        clock stands still or goes back. The caller holds the lock."""
        if now > self._last_ms:
            self._last_ms = now
            self._counter = self._random_int(self._counter_bits - 1)
        else:
            self._counter += 1
            if self._counter >> self._counter_bits:
                self._last_ms += 1
                self._counter = self._random_int(self._counter_bits - 1)


_COUNTER_MASK: Final = (1 << 42) - 1


_default_uuid7 = UUIDv7Generator()


def uuid7() -> str:
    """A new UUIDv7 string (lowercase, hyphenated), monotonic across the whole process."""
    return _default_uuid7()


def uuid7_text(raw: int) -> str:
    """The text of an id drawn by :meth:`UUIDv7Generator.reserve`: the 48-bit millisecond,
    version 7, the first 12 of the 74 random-or-counter bits, variant ``0b10``, the last 62
    (RFC 9562 section 5.7), lowercase and hyphenated."""
    global _last_ms_text
    ms = raw >> 74
    last = _last_ms_text
    if last[0] != ms:  # the millisecond's 14 characters, kept while it lasts
        h = f"{ms:012x}"
        last = _last_ms_text = (ms, f"{h[:8]}-{h[8:]}-")
    # the 80 bits after the millisecond as the UUID has them: the first 12 of the 74 moved
    # up by two (adding three times them) to make room for the variant, which the constant
    # sets with the version
    low = raw & _LOW_74
    h = "%020x" % (low + 3 * (low & _FIRST_12) + _VERSION_AND_VARIANT)
    return f"{last[1]}{h[:4]}-{h[4:8]}-{h[8:]}"


_LOW_74: Final = (1 << 74) - 1
_FIRST_12: Final = 0xFFF << 62
_VERSION_AND_VARIANT: Final = (0x7000 << 64) | (0b10 << 62)
_last_ms_text: tuple[int, str] = (-1, "")
"""The last millisecond :func:`uuid7_text` wrote and its text up to the version digit's
group (one tuple: threads replace it whole)."""


reserve_uuid7: Final[Callable[[], int]] = _default_uuid7.reserve
"""The next process-wide UUIDv7 (in order with :func:`uuid7`'s) as its bits, for text
made when needed by :func:`uuid7_text` (the bound method itself: one call less per id)."""


reserve_uuid7_many: Final[Callable[[int], list[int]]] = _default_uuid7.reserve_many
"""``n`` :func:`reserve_uuid7` ids at once, in order."""


def uuid7_many(n: int) -> list[str]:
    """``n`` new UUIDv7 strings at once, in order (as many :func:`uuid7` calls)."""
    return _default_uuid7.many(n)


# --------------------------------------------------------------------------- helpers


_last_second: tuple[int, str] = (-1, "")
"""The last whole second :func:`format_timestamp` wrote, and its text (one tuple: threads
replace it whole)."""
_last_stamp: tuple[int, str] = (-1, "")
"""The last millisecond :func:`format_timestamp` wrote, and its whole text (the same)."""


def format_timestamp(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds and a ``Z`` suffix, e.g. ``2025-01-31T12:00:00.123Z``."""
    global _last_second, _last_stamp
    total_ms = math.floor(seconds * 1000)
    stamp = _last_stamp
    if stamp[0] == total_ms:  # decisions come many to the millisecond
        return stamp[1]
    secs, ms = divmod(total_ms, 1000)
    last = _last_second
    if last[0] != secs:
        last = _last_second = (secs, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)))
    text = f"{last[1]}.{ms:03d}Z"
    _last_stamp = (total_ms, text)
    return text


# A dot-joined run of base64url segments: where a compact JWS (3 segments, the last empty
# for alg=none) or JWE (5 segments) may hide, possibly glued to other dotted text. Logged
# strings come from callers (ids from URLs and bodies), so the scan is linear: a run starts
# only where the previous character cannot extend it (the leftmost match always does), and
# every quantifier is possessive (nothing to backtrack into), so ``"a" * n + "."`` costs n
# steps, not n**2.
_DOTTED_RUN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]++(?:\.[A-Za-z0-9_-]*+){2,}+")
_MIN_HEADER_LEN = 14  # base64url of the shortest header, {"alg":"x"}


class _NotAHeader(PolangError):
    """A dotted segment that does not decode to a JWT header (never leaves this module)."""


def _jwt_header(segment: str) -> dict[str, Any] | None:
    """The decoded header if ``segment`` is a base64url JSON object naming an ``alg``.

    The segment is caller text: its nesting is measured before decoding, so a segment
    holding ``[`` x 100,000 is simply not a header (not a ``RecursionError`` out of a log
    call). Otherwise anything ``json`` reads counts, so redaction errs towards hiding.
    """
    if len(segment) < _MIN_HEADER_LEN:
        return None
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")  # as json.loads does
        check_depth(text, what="JWT header", error=_NotAHeader)
        header = json.loads(text)
    except (ValueError, _NotAHeader):  # binascii.Error and UnicodeDecodeError included
        return None
    return header if isinstance(header, dict) and "alg" in header else None


def _redact_run(match: re.Match[str]) -> str:
    parts = match.group(0).split(".")
    out: list[str] = []
    i = 0
    while i < len(parts):
        header = _jwt_header(parts[i]) if i + 2 < len(parts) else None
        if header is None:
            out.append(parts[i])
            i += 1
            continue
        size = 5 if "enc" in header and i + 4 < len(parts) else 3
        out.append(REDACTED_TOKEN)
        i += size
    return ".".join(out)


_MIN_TOKEN_LEN: Final = _MIN_HEADER_LEN + 2  # a header and two dots at least


def redact_tokens(text: str) -> str:
    """Replace every compact JWT (JWS or JWE) inside ``text`` by ``[redacted JWT]``."""
    if len(text) < _MIN_TOKEN_LEN or "." not in text:  # too short to hold one
        return text
    return _DOTTED_RUN.sub(_redact_run, text)


_UID_TEXTS: dict[tuple[type, object], str] = {}
_UID_TEXTS_MAX: Final = 4096  # then it starts afresh: a flood of new uids costs the str
_UID_TEXT_MAX_LEN: Final = 256  # longer texts are not kept (the memory stays small)


def _uid_text(uid: object) -> str:
    """``str(uid)`` with tokens redacted (an entry's principal, action and resource),
    remembered for the last few thousand uids of up to ``_UID_TEXT_MAX_LEN``
    characters: requests name the same ones again and again. Keyed by type too, since a
    uid equals the plain tuple of its parts."""
    key = (type(uid), uid)
    try:
        text = _UID_TEXTS.get(key)
    except TypeError:  # not hashable: written each time
        return redact_tokens(str(uid))
    if text is None:
        text = redact_tokens(str(uid))
        if len(text) <= _UID_TEXT_MAX_LEN:
            if len(_UID_TEXTS) >= _UID_TEXTS_MAX:
                _UID_TEXTS.clear()
            _UID_TEXTS[key] = text
    return text


def _jsonable(value: object) -> Any:
    """A JSON-ready copy of ``value`` with every embedded JWT redacted.

    Unknown objects become their ``str`` so a log call never fails on an exotic value (an
    ``EntityUID`` shows in policy syntax); non-finite floats are not JSON and become strings.
    """
    t = type(value)
    if t is str:  # the usual cases first, by exact type
        return redact_tokens(value)  # type: ignore[arg-type]
    if t is list:
        return [_jsonable(v) for v in value]  # type: ignore[attr-defined]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return redact_tokens(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {redact_tokens(str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        items = [_jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict())
    return redact_tokens(str(value))


jsonable: Final[Callable[[object], Any]] = _jsonable
"""A JSON-ready copy of a value with every embedded JWT redacted (what every log entry
holds); other senders of entries (the Lock's audit) use it too."""


def _copy_json(value: Any) -> Any:
    """Copy of JSON-ready data (cheaper than ``deepcopy``) so readers cannot alter the log."""
    t = type(value)
    if t is dict:
        return {k: (_copy_json(v) if type(v) in _CONTAINERS else v) for k, v in value.items()}
    if t is list:
        return [(_copy_json(v) if type(v) in _CONTAINERS else v) for v in value]
    return value


_CONTAINERS: Final = (dict, list)


def _is_safe_token_id(value: object) -> bool:
    """An id worth logging: an integer, or a short string that is not itself a token."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return (
        isinstance(value, str) and len(value) <= _MAX_TOKEN_ID_LEN and redact_tokens(value) == value
    )


def token_log_ids(
    tokens: Mapping[str, Mapping[str, object]] | None, jwt_id_claim: str = "jti"
) -> dict[str, dict[str, str | int]]:
    """What a decision log may say about each token: its id claim and nothing else.

    ``tokens`` maps a token key (its mapping or ``<issuer>_<type>`` name) to the token's
    decoded claims. The result is ``{key: {jwt_id_claim: value}}``; a missing id, an id that
    is not a string or integer, an overlong id or one that is itself a JWT gives ``{}``.
    Applying it to its own output returns the same thing. A raw token (a string or bytes)
    instead of claims is refused: the caller must never hand whole tokens to the log.
    """
    if not tokens:
        return {}
    if not isinstance(tokens, Mapping):
        raise TokenError(
            f"decision log tokens must map a token key to its decoded claims, "
            f"got {type(tokens).__name__}"
        )
    out: dict[str, dict[str, str | int]] = {}
    for index, (key, claims) in enumerate(tokens.items()):
        safe_key = redact_tokens(str(key))
        if not isinstance(claims, Mapping):
            raise TokenError(
                f"decision log tokens[{index}] ({safe_key!r}): expected the decoded claims "
                f"(a mapping), got {type(claims).__name__}; whole tokens are never logged"
            )
        value = claims.get(jwt_id_claim)
        entry: dict[str, str | int] = {}
        if _is_safe_token_id(value):
            entry[jwt_id_claim] = value  # type: ignore[assignment]
        out[safe_key] = entry
    return out


def _check_extra(extra: Mapping[str, object], reserved: frozenset[str], kind: str) -> None:
    clash = sorted(set(extra) & reserved)
    if clash:
        raise LogError(f"{kind} log entry: extra field(s) {clash} would overwrite built-in fields")


def _norm_level(level: object, where: str) -> str:
    name = str(level).strip().upper() if isinstance(level, str) else None
    if name == "WARNING":
        name = "WARN"
    if name not in _SEVERITY:
        raise LogError(f"{where}: log level {level!r} is not one of {' '.join(LEVELS)}")
    return name


# --------------------------------------------------------------------------- settings


def _parse_int(key: str, value: object, *, minimum: int = 0) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    if isinstance(value, int):
        n = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value, re.ASCII)
    ):
        try:
            n = int(value)
        except ValueError:  # more than 4,300 digits (CPython's limit)
            raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}") from None
    else:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    if n < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    return n


def _parse_seconds(key: str, value: object) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    n: float
    if isinstance(value, int | float):
        try:
            n = float(value)
        except OverflowError:  # an int beyond any float
            raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}") from None
    elif isinstance(value, str):
        try:
            n = float(value.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}") from None
    else:
        raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    if not math.isfinite(n) or n < 0:
        raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    return n


# The ENGINE_* property behind each LogSettings field.
SETTING_KEYS: Final = {
    "ENGINE_LOG_TYPE": "log_type",
    "ENGINE_LOG_LEVEL": "level",
    "ENGINE_LOG_TTL": "ttl",
    "ENGINE_LOG_MAX_ITEMS": "max_items",
    "ENGINE_APPLICATION_NAME": "application_id",
    "ENGINE_DECISION_LOG_DEFAULT_JWT_ID": "decision_log_default_jwt_id",
}


class LogSettings(Record):
    """How the engine logs; ``ttl`` and ``max_items`` apply to the memory log (0 = no limit).

    Every value is checked and normalised on construction (``ConfigError`` naming the
    ``ENGINE_*`` property).
    """

    __slots__ = (
        "application_id",
        "decision_log_default_jwt_id",
        "level",
        "log_type",
        "max_items",
        "ttl",
    )
    log_type: str
    level: str
    ttl: float
    max_items: int
    application_id: str
    decision_log_default_jwt_id: str

    def __init__(
        self,
        log_type: str = "off",
        level: str = "WARN",
        ttl: float = 60.0,
        max_items: int = 10000,
        application_id: str = DEFAULT_APPLICATION_ID,
        decision_log_default_jwt_id: str = "jti",
    ) -> None:
        lt = log_type.strip().lower() if isinstance(log_type, str) else None
        if lt not in LOG_TYPES:
            raise ConfigError(f"ENGINE_LOG_TYPE: {log_type!r} is not one of {', '.join(LOG_TYPES)}")
        _set(self, "log_type", lt)
        try:
            _set(self, "level", _norm_level(level, "ENGINE_LOG_LEVEL"))
        except LogError as exc:
            raise ConfigError(str(exc)) from None
        _set(self, "ttl", _parse_seconds("ENGINE_LOG_TTL", ttl))
        _set(self, "max_items", _parse_int("ENGINE_LOG_MAX_ITEMS", max_items))
        for key, value in (
            ("ENGINE_APPLICATION_NAME", application_id),
            ("ENGINE_DECISION_LOG_DEFAULT_JWT_ID", decision_log_default_jwt_id),
        ):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
        _set(self, "application_id", application_id)
        _set(self, "decision_log_default_jwt_id", decision_log_default_jwt_id)

    @classmethod
    def from_mapping(cls, d: Mapping[str, object]) -> LogSettings:
        """Settings from ``ENGINE_*`` keys; other keys are ignored (they belong to Config).

        Values may be strings (environment) or native values (JSON/YAML). An unknown
        ``ENGINE_LOG_*`` key is an error, to catch typos.
        """
        kwargs: dict[str, Any] = {}
        for key, value in d.items():
            if key in SETTING_KEYS:
                if value is not None:
                    kwargs[SETTING_KEYS[key]] = value
            elif isinstance(key, str) and key.startswith("ENGINE_LOG_"):
                known = ", ".join(k for k in SETTING_KEYS if k.startswith("ENGINE_LOG_"))
                raise ConfigError(f"{key}: unknown log property (known: {known})")
        return cls(**kwargs)


# --------------------------------------------------------------------------- memory log


def _uuid7_bits(text: object) -> int | None:
    """The bits :func:`uuid7_text` writes as ``text`` (``None`` if it writes no such
    text): how a reserved id kept as bits is found by its text."""
    if not isinstance(text, str) or len(text) != 36:
        return None
    try:
        value = int(text.replace("-", ""), 16)
    except ValueError:
        return None
    raw = (value >> 80) << 74 | ((value >> 64) & 0xFFF) << 62 | (value & _UUID7_RAND_B)
    return raw if uuid7_text(raw) == text else None


class DecisionValues(NamedTuple):
    """One decision's own values, made once by the engine for whoever records it (the
    decision log, the Lock's audit queue): each writes its entry from them when it needs
    it. The sequences are the decision's own copies (the caller's result shares its lists);
    ``request_id`` is text or bits from :func:`reserve_uuid7`; uids are written with
    ``str``; ``log_ids`` have ``mapping``, ``index``, ``claim`` and ``value``, ``dropped``
    tokens ``to_dict()``."""

    request_id: str | int
    allow: bool
    action: object
    resource: object
    principal: object
    reasons: tuple[str, ...]
    errors: tuple[Mapping[str, object], ...]
    log_ids: tuple[Any, ...] | None
    dropped: tuple[Any, ...]
    micro_sec: int
    store_id: str | None
    store_version: str | None

    @classmethod
    def of(
        cls,
        request_id: str | int,
        allow: bool,
        action: object,
        resource: object,
        principal: object,
        reasons: Iterable[str],
        errors: Iterable[Mapping[str, object]] | None,
        log_ids: Iterable[Any] | None,
        dropped: Iterable[Any] | None,
        micro_sec: int,
        store_id: str | None,
        store_version: str | None,
    ) -> DecisionValues:
        """The values of a decision whose lists the caller keeps (copied: changing them
        afterwards changes no entry)."""
        return tuple.__new__(  # the named tuple's own __new__ is one more Python call
            cls,
            (
                request_id,
                allow,
                action,
                resource,
                principal,
                tuple(reasons),
                tuple(dict(e) for e in errors) if errors else (),
                None if log_ids is None else tuple(log_ids),
                tuple(dropped) if dropped else (),
                micro_sec,
                store_id,
                store_version,
            ),
        )


MEMORY_LOG_TRIM_SLACK: Final = 64
"""Entries a memory log may hold past ``max_items`` before a writer trims it (readers
trim first: they never see more than ``max_items``)."""


class MemoryLog:
    """Entries kept in memory for ``ttl`` seconds, at most ``max_items`` (oldest evicted).

    Thread-safe, and a writer never waits: an entry is appended to a queue (atomic), and
    writers trim expired and surplus entries from the front in bursts (``MEMORY_LOG_TRIM_SLACK``
    entries past ``max_items``, or entries a second past their expiry), and only when no
    other thread holds the log (a reader, or another writer trimming; meanwhile the
    queue's own bound drops the oldest past the slack). Readers trim
    first, so they never see more than ``max_items`` entries or an expired one; an id
    added again replaces its older entry (it moves to the end). Tags
    are an entry's ``log_kind`` and, for system entries, its ``level``; matching is
    case-insensitive.

    ``build`` turns a record the :class:`Logger` queued for a decision (a tuple: the time,
    the entry's id and the :class:`DecisionValues` values, see :meth:`Logger.decided`) into its
    entry: the entry is made when read, so a decision nobody reads costs an append.
    """

    def __init__(
        self,
        ttl: float = 60.0,
        max_items: int = 10000,
        *,
        clock: Callable[[], float] = time.monotonic,
        build: Callable[[tuple[Any, ...]], dict[str, Any]] | None = None,
    ) -> None:
        self._ttl = ttl
        self._max_items = max_items
        self._clock = clock
        self._build = build
        self._lock = threading.Lock()
        # (expires_at, entry or decision record), oldest first; only a holder of _lock
        # takes from the front, writers append at the back. Its maxlen is the count bound
        # that holds whatever the threads do: an append past it drops the oldest entry
        # (in C, atomic), so writers that cannot trim (a reader holds the log) never grow
        # it past max_items + MEMORY_LOG_TRIM_SLACK
        bound = max_items + MEMORY_LOG_TRIM_SLACK if max_items > 0 else None
        self._items: deque[tuple[float, Any]] = deque(maxlen=bound)

    @staticmethod
    def _tags(entry: Mapping[str, Any]) -> list[str]:
        tags = [str(entry.get("log_kind", "")).lower()]
        level = entry.get("level")
        if isinstance(level, str):
            tags.append(level.lower())
        return tags

    def add(self, entry: Mapping[str, Any]) -> None:
        """Store a copy of one JSON-ready entry (it must have a string ``id``)."""
        self._add(_copy_json(dict(entry)))

    def _add(self, stored: dict[str, Any] | tuple[Any, ...]) -> None:
        """Store ``stored`` itself: an entry the Logger built and owns, or its record."""
        if type(stored) is not tuple and not isinstance(stored.get("id"), str):  # type: ignore[union-attr]
            raise LogError("memory log: an entry needs a string 'id'")
        items = self._items
        now = self._clock()
        items.append((now + self._ttl, stored))
        try:  # trimmed in bursts: past MEMORY_LOG_TRIM_SLACK extra entries, or a second's expiry
            due = 0 < self._max_items < len(items) - MEMORY_LOG_TRIM_SLACK or (
                self._ttl > 0 and items[0][0] <= now - 1.0
            )
        except IndexError:  # a reader took everything meanwhile
            return
        if due and self._lock.acquire(False):  # never waits: the holder trims too
            try:
                self._trim(now)
            finally:
                self._lock.release()

    def _trim(self, now: float) -> None:
        """Drop expired entries and those past ``max_items``; the caller holds the lock."""
        items = self._items
        if self._ttl > 0:
            while items and items[0][0] <= now:
                items.popleft()
        if self._max_items > 0:
            # the surplus counted once: writers appending meanwhile cannot keep it going
            for _ in range(len(items) - self._max_items):
                items.popleft()

    @staticmethod
    def _key(stored: Any) -> Any:
        return stored[1] if type(stored) is tuple else stored["id"]

    def _live(self) -> dict[Any, Any]:
        """Id -> entry or record of the live entries, oldest first (the caller holds the
        lock). An id added again keeps its newest entry, in that entry's place."""
        self._trim(self._clock())
        live: dict[Any, Any] = {}
        key = self._key
        # list() copies in one C call (writers append meanwhile: a Python loop over the
        # deque itself would fail with "deque mutated during iteration")
        for _, stored in list(self._items):
            k = key(stored)
            live.pop(k, None)
            live[k] = stored
        return live

    def _entry(self, stored: Any) -> dict[str, Any]:
        """A caller's own copy of one entry (a record is built afresh)."""
        if type(stored) is tuple:
            assert self._build is not None
            return self._build(stored)
        return _copy_json(stored)

    def _matching(self, stored: Any, tag: str) -> bool:
        if type(stored) is tuple:
            return tag == "decision"
        return tag in self._tags(stored)

    def pop_logs(self) -> list[dict[str, Any]]:
        """Every live entry, oldest first, removing them from the log."""
        with self._lock:
            live = self._live()
            items = self._items
            for _ in range(len(items)):  # what was there: appends meanwhile stay
                items.popleft()
        build = self._build
        return [
            build(stored) if type(stored) is tuple and build is not None else stored
            for stored in live.values()
        ]

    def get_log_by_id(self, log_id: str) -> dict[str, Any] | None:
        """The entry with this id, or None when absent or expired."""
        with self._lock:
            live = self._live()
        stored = live.get(log_id)
        if stored is None:
            bits = _uuid7_bits(log_id)
            stored = None if bits is None else live.get(bits)
        return None if stored is None else self._entry(stored)

    def get_log_ids(self) -> list[str]:
        """Ids of the live entries, oldest first."""
        with self._lock:
            live = self._live()
        return [uuid7_text(k) if type(k) is int else k for k in live]

    def get_logs_by_tag(self, tag: str) -> list[dict[str, Any]]:
        """Entries whose ``log_kind`` or ``level`` equals ``tag`` (any case), oldest first."""
        key = str(tag).lower()
        if key == "warning":
            key = "warn"
        with self._lock:
            live = self._live()
        return [self._entry(x) for x in live.values() if self._matching(x, key)]

    def get_logs_by_request_id(self, request_id: str) -> list[dict[str, Any]]:
        """Entries of one request (decision entries and any carrying that ``request_id``)."""
        bits = _uuid7_bits(request_id)
        with self._lock:
            live = self._live()
        out = []
        for stored in live.values():
            if type(stored) is tuple:
                rid = stored[2].request_id
                if rid == request_id or (bits is not None and rid == bits):
                    out.append(self._entry(stored))
            elif stored.get("request_id") == request_id:
                out.append(_copy_json(stored))
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._live())


# --------------------------------------------------------------------------- metrics


_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _check_metric_name(name: object, group: str) -> str:
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise LogError(f"metric {group}: name {name!r} must match [A-Za-z_][A-Za-z0-9_.]*")
    return name


def _check_number(value: object, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LogError(f"{where}: expected a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise LogError(f"{where}: expected a finite number, got {value!r}")
    return value


_SUMMARY_KEYS: Final = ("count", "total", "min", "max")


def _timing_summary(name: str, value: object) -> dict[str, int | float]:
    """A timing is ``{count, total, min, max}`` in microseconds; a number is one sample."""
    where = f"metric timings[{name!r}]"
    if isinstance(value, Mapping):
        keys = set(_SUMMARY_KEYS)
        if set(value) != keys:
            raise LogError(f"{where}: a summary needs exactly the keys {sorted(keys)}")
        summary = {k: _check_number(value[k], f"{where}.{k}") for k in _SUMMARY_KEYS}
        if not isinstance(summary["count"], int) or summary["count"] < 1:
            raise LogError(f"{where}.count: expected an integer >= 1, got {summary['count']!r}")
        return summary
    v = _check_number(value, where)
    return {"count": 1, "total": v, "min": v, "max": v}


METRICS_FOLD_AT: Final = 1024
"""Metric samples queued before a writer folds them into the totals (when no other thread
is folding or reading: writers never wait)."""

# what a queued metric sample is (its first field)
_INCREMENT: Final = 0
_OBSERVE: Final = 1
_DECISION: Final = 2


class MetricsCollector:
    """Thread-safe accumulation between two Metric entries.

    Counters are totals since the collector was created; timings are summaries of the
    samples observed since the last snapshot; gauges keep their latest value.

    Recording takes no lock (it runs on every decision, from many threads: a lock there
    made threads hand the interpreter to each other): a sample is appended to a queue
    (``deque.append``, atomic), and the queue is folded into the totals by a snapshot, or
    by a writer once it holds ``METRICS_FOLD_AT`` samples and no other thread is folding.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple[Any, ...]] = deque()
        self._counters: dict[str, int] = {}
        self._gauges: dict[str, int | float] = {}
        self._timings: dict[str, dict[str, int | float]] = {}

    def _push(self, sample: tuple[Any, ...]) -> None:
        queue = self._queue
        queue.append(sample)
        if len(queue) >= METRICS_FOLD_AT and self._lock.acquire(False):  # never waits
            try:
                self._fold()
            finally:
                self._lock.release()

    def _fold(self) -> None:
        """Apply the queued samples in order; the caller holds the lock. The samples
        there when it starts: writers appending meanwhile cannot keep one fold going
        (they fold theirs next)."""
        queue, counters = self._queue, self._counters
        popleft = queue.popleft
        # decisions are summed here and applied once (sums, minimum and maximum do not
        # depend on the order)
        n = allows = errors = dropped = 0
        total: int | float = 0
        low: Any = None  # the first decision's time sets both
        high: Any = None
        for _ in range(len(queue)):
            sample = popleft()
            kind = sample[0]
            if kind == _DECISION:
                _, allow, e, d, t = sample
                n += 1
                if allow:
                    allows += 1
                errors += e
                dropped += d
                total += t
                if low is None or t < low:
                    low = t
                if high is None or t > high:
                    high = t
            elif kind == _INCREMENT:
                counters[sample[1]] = counters.get(sample[1], 0) + sample[2]
            else:
                self._sample(sample[1], 1, sample[2], sample[2], sample[2])
        if n:
            counters["authorize_calls"] = counters.get("authorize_calls", 0) + n
            for name, count in (("allow", allows), ("deny", n - allows)):
                if count:
                    counters[name] = counters.get(name, 0) + count
            if errors:
                counters["policy_errors"] = counters.get("policy_errors", 0) + errors
            if dropped:
                counters["dropped_tokens"] = counters.get("dropped_tokens", 0) + dropped
            self._sample("decision_time_micro_sec", n, total, low, high)

    def _sample(
        self, name: str, count: int, total: int | float, low: int | float, high: int | float
    ) -> None:
        """Add ``count`` samples summing to ``total``, the least ``low``, the greatest
        ``high``."""
        s = self._timings.get(name)
        if s is None:
            self._timings[name] = {"count": count, "total": total, "min": low, "max": high}
        else:
            s["count"] += count
            s["total"] += total
            s["min"] = min(s["min"], low)
            s["max"] = max(s["max"], high)

    def increment(self, name: str, n: int = 1) -> None:
        """Add ``n`` to a counter."""
        _check_metric_name(name, "counters")
        if isinstance(n, bool) or not isinstance(n, int):
            raise LogError(f"metric counters[{name!r}]: increment must be an integer, got {n!r}")
        self._push((_INCREMENT, name, n))

    def set_gauge(self, name: str, value: int | float) -> None:
        """Record the current value of a gauge (e.g. ``policy_count``)."""
        _check_metric_name(name, "gauges")
        self._gauges[name] = _check_number(value, f"metric gauges[{name!r}]")  # atomic

    def observe(self, name: str, micro_sec: int | float) -> None:
        """Add one timing sample in microseconds (e.g. ``evaluation_time_micro_sec``)."""
        _check_metric_name(name, "timings")
        self._push((_OBSERVE, name, _check_number(micro_sec, f"metric timings[{name!r}]")))

    def decision(self, allow: bool, errors: int, dropped: int, micro_sec: int) -> None:
        """One decision's metrics as one sample: ``authorize_calls``, ``allow`` or
        ``deny``, ``policy_errors`` and ``dropped_tokens`` (when not 0), and the timing
        ``decision_time_micro_sec``."""
        self._push((_DECISION, allow, errors, dropped, micro_sec))

    def snapshot(
        self, *, reset_timings: bool = True
    ) -> tuple[dict[str, int], dict[str, int | float], dict[str, dict[str, int | float]]]:
        """``(counters, gauges, timings)`` as copies; timings restart unless told otherwise."""
        with self._lock:
            self._fold()
            counters = dict(self._counters)
            gauges = dict(self._gauges)
            timings = {k: dict(v) for k, v in self._timings.items()}
            if reset_timings:
                self._timings.clear()
        return counters, gauges, timings


class _NullMetrics(MetricsCollector):
    """The collector of an ``off`` logger: records nothing, costs a method call."""

    def increment(self, name: str, n: int = 1) -> None:
        return None

    def set_gauge(self, name: str, value: int | float) -> None:
        return None

    def observe(self, name: str, micro_sec: int | float) -> None:
        return None

    def decision(self, allow: bool, errors: int, dropped: int, micro_sec: int) -> None:
        return None


# --------------------------------------------------------------------------- sinks


_stdout_lock = threading.Lock()

#: Where ``std_out`` lines go instead of ``sys.stdout`` (``None``: ``sys.stdout``, read at
#: each write). The ``polang`` command line sets ``sys.stderr`` while it runs, so that its
#: stdout carries only the answer (docs/logs.md).
_std_out_target: TextIO | None = None


def redirect_std_out(stream: TextIO | None) -> TextIO | None:
    """Send ``std_out`` log lines to ``stream`` (``None``: back to ``sys.stdout``); returns
    the previous target."""
    global _std_out_target
    previous, _std_out_target = _std_out_target, stream
    return previous


def _dumps(entry: Mapping[str, Any]) -> str:
    """One log line (``std_out`` and ``python``): readable UTF-8 JSON, but entries quote
    callers' ids and values, so the characters ``json`` leaves raw (DEL, C1 controls such
    as U+009B, line separators, bidi controls, lone surrogates) are ``\\uXXXX`` escapes."""
    return printable_json(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))


class _JSONText:
    """A ``python`` log record's message: the entry's JSON line, written when first asked
    for (``record.getMessage()``, a handler's formatter), not for a record no handler
    formats."""

    __slots__ = ("_entry", "_text")

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self._entry = entry
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = _dumps(self._entry)
        return self._text

    def __repr__(self) -> str:
        return repr(str(self))


class Logger:
    """The engine's log facade: builds entries and hands them to the configured sink.

    ``clock`` gives wall-clock seconds for timestamps, ``monotonic`` the time base of the
    memory log's TTL; both are injectable for tests. With ``log_type="off"`` every call
    returns at once without building an entry. The entry a call returns is the logged one
    (the memory log keeps that very dict): treat it as read-only.
    """

    def __init__(
        self,
        settings: LogSettings | None = None,
        *,
        pdp_id: str | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        id_generator: Callable[[], str] = uuid7,
    ) -> None:
        self.settings = settings or LogSettings()
        self.pdp_id = pdp_id or id_generator()
        self._clock = clock
        self._new_id = id_generator
        # a decision's entry id: kept as bits (text made when read) with the default ids
        self._reserve_id: Callable[[], str | int] = (
            reserve_uuid7 if id_generator is uuid7 else id_generator
        )
        self._threshold = _SEVERITY[self.settings.level]
        self._type = self.settings.log_type
        self._app = self.settings.application_id
        self._jwt_id = self.settings.decision_log_default_jwt_id
        self.memory: MemoryLog | None = None
        self._store_text: tuple[object, object, Any, Any] = (None, None, None, None)
        self._py: logging.Logger | None = None
        if self._type == "memory":
            self.memory = MemoryLog(
                self.settings.ttl,
                self.settings.max_items,
                clock=monotonic,
                build=self._decision_of_record,
            )
        elif self._type == "python":
            import logging  # only this log type needs it (start-up time)

            if logging.getLevelName(TRACE_LEVELNO) == f"Level {TRACE_LEVELNO}":
                logging.addLevelName(TRACE_LEVELNO, "TRACE")
            self._py = logging.getLogger(PYTHON_LOGGER_NAME)
        self.metrics = MetricsCollector() if self._type != "off" else _NullMetrics()

    @classmethod
    def from_mapping(cls, d: Mapping[str, object], **kwargs: Any) -> Logger:
        """A logger from ``ENGINE_*`` keys (see ``LogSettings.from_mapping``)."""
        return cls(LogSettings.from_mapping(d), **kwargs)

    # -- what is enabled

    @property
    def log_type(self) -> str:
        return self._type

    @property
    def enabled(self) -> bool:
        """False for ``off``: callers can skip gathering data for decision logs."""
        return self._type != "off"

    def is_enabled_for(self, level: str) -> bool:
        """Whether a system entry at ``level`` would be written."""
        if self._type == "off":
            return False
        name = _norm_level(level, "is_enabled_for")
        if _SEVERITY[name] < self._threshold:
            return False
        return self._py is None or self._py.isEnabledFor(_PY_LEVELS[name])

    # -- building and writing

    def _base(self, kind: str) -> dict[str, Any]:
        return {
            "id": self._new_id(),
            "timestamp": format_timestamp(self._clock()),
            "log_kind": kind,
            "application_id": self._app,
            "pdp_id": self.pdp_id,
        }

    def _write(self, entry: dict[str, Any], level: str) -> None:
        if self.memory is not None:
            self.memory._add(entry)
        elif self._type == "std_out":
            line = _dumps(entry) + "\n"
            with _stdout_lock:
                out = _std_out_target or sys.stdout
                out.write(line)
                out.flush()
        elif self._py is not None:
            # the record made as Logger.log makes it, without its search of the stack for
            # the caller (this line, always) and with the JSON text written when a
            # handler formats the message: getMessage() is that text; the entry is set
            # as makeRecord sets an ``extra`` (its check for clashes is for callers' keys)
            record = self._py.makeRecord(
                PYTHON_LOGGER_NAME,
                _PY_LEVELS[level],
                __file__,
                _WRITE_LINE,
                _JSONText(entry),
                (),
                None,
                "_write",
            )
            record.polang = entry
            self._py.handle(record)

    def decision(
        self,
        *,
        request_id: str,
        decision: bool | str,
        action: object,
        resource: object,
        principal: object = None,
        reason: Iterable[str] = (),
        errors: Iterable[Mapping[str, object]] = (),
        tokens: Mapping[str, Mapping[str, object]] | None = None,
        dropped_tokens: Iterable[Mapping[str, object]] = (),
        decision_time_micro_sec: int | float = 0,
        policystore_id: str | None = None,
        policystore_version: str | None = None,
        **extra: object,
    ) -> dict[str, Any] | None:
        """Write one Decision entry; returns it (None when logging is off or filtered out).

        ``tokens`` are the decoded claims per token key: only each token's
        ``decision_log_default_jwt_id`` claim is kept (see ``token_log_ids``).
        """
        if self._type == "off":
            return None
        if self._py is not None and not self._py.isEnabledFor(_PY_INFO):
            return None
        if isinstance(decision, bool):
            verdict = "ALLOW" if decision else "DENY"
        elif isinstance(decision, str) and decision.strip().upper() in ("ALLOW", "DENY"):
            verdict = decision.strip().upper()
        else:
            raise LogError(f"decision log: decision must be a bool or ALLOW/DENY, got {decision!r}")
        _check_extra(extra, _DECISION_FIELDS, "Decision")
        entry = self._decision_entry(
            self._base("Decision"),
            request_id,
            policystore_id,
            policystore_version,
            principal,
            action,
            resource,
            verdict,
            reason,
            errors,
            tokens,
            dropped_tokens,
            _check_number(decision_time_micro_sec, "decision_time_micro_sec"),
        )
        if extra:
            entry.update(_jsonable(extra))
        self._write(entry, "INFO")
        return entry

    def _decision_entry(
        self,
        entry: dict[str, Any],
        request_id: object,
        policystore_id: object,
        policystore_version: object,
        principal: object,
        action: object,
        resource: object,
        verdict: str,
        reason: Iterable[str],
        errors: Iterable[Mapping[str, object]],
        tokens: Mapping[str, Mapping[str, object]] | None,
        dropped_tokens: Iterable[object],
        micro_sec: int | float,
    ) -> dict[str, Any]:
        """``entry`` (the common fields) completed as a Decision entry, fields in order."""
        entry["request_id"] = _jsonable(request_id)
        entry["policystore_id"] = _jsonable(policystore_id)
        entry["policystore_version"] = _jsonable(policystore_version)
        entry["principal"] = _jsonable(principal)
        entry["action"] = _jsonable(action)
        entry["resource"] = _jsonable(resource)
        entry["decision"] = verdict
        entry["diagnostics"] = {
            "reason": _jsonable(list(reason)),
            "errors": _jsonable(list(errors)),
        }
        entry["tokens"] = token_log_ids(tokens, self._jwt_id)
        entry["dropped_tokens"] = _jsonable(list(dropped_tokens))
        entry["decision_time_micro_sec"] = round(micro_sec)
        return entry

    def decided(self, d: DecisionValues) -> None:
        """The engine's decision: its metrics and its Decision entry, the same entry
        :meth:`decision` writes for the same values. For the memory log the entry is
        built when read."""
        if self._type == "off":
            return
        self.metrics.decision(d.allow, len(d.errors), len(d.dropped), d.micro_sec)
        if self._py is not None and not self._py.isEnabledFor(_PY_INFO):
            return
        if self.memory is not None:
            self.memory._add((self._clock(), self._reserve_id(), d))
        else:
            self._write(self._decision_of(self._clock(), self._reserve_id(), d), "INFO")

    def _decision_of_record(self, r: tuple[Any, ...]) -> dict[str, Any]:
        """The Decision entry of a record the memory log keeps for :meth:`decided`."""
        return self._decision_of(r[0], r[1], r[2])

    def _decision_of(self, when: float, entry_id: object, d: DecisionValues) -> dict[str, Any]:
        """The Decision entry of :meth:`decided`'s values: what :meth:`_decision_entry`
        makes of the same values (a test compares them), built in one literal (for the
        ``python`` and ``std_out`` logs it is built per decision)."""
        (
            request_id,
            allow,
            action,
            resource,
            principal,
            reasons,
            errors,
            log_ids,
            dropped,
            micro_sec,
            policystore_id,
            policystore_version,
        ) = d
        store = self._store_text
        if store[0] is not policystore_id or store[1] is not policystore_version:
            # the loaded store's id and version, scanned once while it stays loaded
            store = self._store_text = (
                policystore_id,
                policystore_version,
                _jsonable(policystore_id),
                _jsonable(policystore_version),
            )
        return {
            "id": uuid7_text(entry_id) if type(entry_id) is int else _jsonable(entry_id),
            "timestamp": format_timestamp(when),
            "log_kind": "Decision",
            "application_id": self._app,
            "pdp_id": self.pdp_id,
            "request_id": (
                uuid7_text(request_id) if type(request_id) is int else _jsonable(request_id)
            ),
            "policystore_id": store[2],
            "policystore_version": store[3],
            "principal": None if principal is None else _uid_text(principal),
            "action": _uid_text(action),
            "resource": _uid_text(resource),
            "decision": "ALLOW" if allow else "DENY",
            "diagnostics": {
                "reason": [_jsonable(x) for x in reasons],
                "errors": [_jsonable(e) for e in errors] if errors else [],
            },
            "tokens": (
                {}
                if log_ids is None
                else token_log_ids(
                    {f"{t.mapping}#{t.index}": {t.claim: t.value} for t in log_ids}, self._jwt_id
                )
            ),
            "dropped_tokens": [_jsonable(x.to_dict()) for x in dropped] if dropped else [],
            "decision_time_micro_sec": round(micro_sec),
        }

    def system(self, level: str, msg: object, /, **extra: object) -> dict[str, Any] | None:
        """Write one System entry if ``level`` passes the configured level."""
        if self._type == "off":
            return None
        name = _norm_level(level, "system log")
        if _SEVERITY[name] < self._threshold:
            return None
        if self._py is not None and not self._py.isEnabledFor(_PY_LEVELS[name]):
            return None
        _check_extra(extra, _SYSTEM_FIELDS, "System")
        entry = self._base("System")
        entry["level"] = name
        entry["msg"] = _jsonable(msg if isinstance(msg, str) else str(msg))
        if extra:
            entry.update(_jsonable(extra))
        self._write(entry, name)
        return entry

    def metric(
        self,
        *,
        counters: Mapping[str, int] | None = None,
        gauges: Mapping[str, int | float] | None = None,
        timings: Mapping[str, int | float | Mapping[str, int | float]] | None = None,
        **extra: object,
    ) -> dict[str, Any] | None:
        """Write one Metric entry; a timing given as a number is a summary of one sample."""
        if self._type == "off":
            return None
        if self._py is not None and not self._py.isEnabledFor(_PY_INFO):
            return None
        _check_extra(extra, _METRIC_FIELDS, "Metric")
        c: dict[str, int] = {}
        for name, value in (counters or {}).items():
            _check_metric_name(name, "counters")
            if isinstance(value, bool) or not isinstance(value, int):
                raise LogError(f"metric counters[{name!r}]: expected an integer, got {value!r}")
            c[name] = value
        g = {
            _check_metric_name(n, "gauges"): _check_number(v, f"metric gauges[{n!r}]")
            for n, v in (gauges or {}).items()
        }
        t = {
            _check_metric_name(n, "timings"): _timing_summary(n, v)
            for n, v in (timings or {}).items()
        }
        entry = self._base("Metric")
        entry.update({"counters": c, "gauges": g, "timings": t})
        if extra:
            entry.update(_jsonable(extra))
        self._write(entry, "INFO")
        return entry

    def flush_metrics(self, **extra: object) -> dict[str, Any] | None:
        """Write what ``self.metrics`` accumulated as one Metric entry (timings restart)."""
        if self._type == "off":
            return None
        counters, gauges, timings = self.metrics.snapshot()
        return self.metric(counters=counters, gauges=gauges, timings=timings, **extra)

    # -- memory log queries (empty results for the other log types)

    def pop_logs(self) -> list[dict[str, Any]]:
        return self.memory.pop_logs() if self.memory is not None else []

    def get_log_by_id(self, log_id: str) -> dict[str, Any] | None:
        return self.memory.get_log_by_id(log_id) if self.memory is not None else None

    def get_log_ids(self) -> list[str]:
        return self.memory.get_log_ids() if self.memory is not None else []

    def get_logs_by_tag(self, tag: str) -> list[dict[str, Any]]:
        return self.memory.get_logs_by_tag(tag) if self.memory is not None else []

    def get_logs_by_request_id(self, request_id: str) -> list[dict[str, Any]]:
        return self.memory.get_logs_by_request_id(request_id) if self.memory is not None else []


_WRITE_LINE: Final = Logger._write.__code__.co_firstlineno
"""The line a ``python`` log record names (``Logger._write``, as ``Logger.log`` found)."""
