"""Decision, system and metric logs of the engine.

Entries are plain JSON-ready dicts so that every sink (memory, stdout, stdlib ``logging``)
sees exactly the same data and callers can forward them anywhere without adapters. Tokens
are never logged whole: a decision entry keeps only each token's id claim, and every string
that goes into an entry is scanned for compact JWTs, which are replaced by a marker.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import sys
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TextIO

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
    "PYTHON_LOGGER_NAME",
    "REDACTED_TOKEN",
    "SETTING_KEYS",
    "LogError",
    "LogSettings",
    "Logger",
    "MemoryLog",
    "MetricsCollector",
    "UUIDv7Generator",
    "format_timestamp",
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
_UUID7_LOW: Final = (1 << 80) - 1

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
    A new millisecond seeds the counter randomly with its top bit clear (room to count); the
    same millisecond, or a clock that went backwards, increments it; on counter overflow the
    timestamp is advanced by one millisecond so ids never go backwards.
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
        # the random tail of every id, precomputed: bytes to draw and the mask to apply
        self._tail_bytes = (self._random_tail_bits + 7) // 8
        self._tail_mask = (1 << self._random_tail_bits) - 1
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0
        # random bytes drawn _POOL_BYTES at a time (one os.urandom call per ~300 ids instead
        # of one or two per id); drawn afresh in a forked child so parent and child never
        # share (os.register_at_fork counts forks: no system call per id)
        self._pool = b""
        self._pool_pos = 0
        self._pool_fork = -1
        # the id's first 14 characters (the millisecond's), kept while the millisecond lasts
        self._prefix_ms = -1
        self._prefix = ""
        # with the default 42 counter bits, the counter's low 16 bits and the 32-bit random
        # tail are whole hex digits: an id is its first 24 characters (kept while the
        # millisecond and the counter's high bits last), 4 digits of counter and 8 random
        self._hex_tail = counter_bits == 42
        self._head_key: tuple[int, int] = (-1, -1)
        self._head = ""
        # reserve()'s random tails, 32-bit integers drawn a pool at a time
        self._tails: array[int] = array(_TAIL_TYPECODE)
        self._tail_pos = 0
        self._tails_fork = -1

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
        clock = self._clock_ms
        now = time.time_ns() // 1_000_000 if clock is None else int(clock())
        if self._hex_tail:  # the default layout, inline (one call per decision)
            with self._lock:
                counter = self._counter + 1
                if now > self._last_ms or counter >> 42:
                    self._advance(now)  # a new millisecond, or the counter's overflow
                    counter = self._counter
                else:
                    self._counter = counter
                key = (self._last_ms, counter >> 16)
                head = self._head if key == self._head_key else self._new_head(key)
                pos = self._pool_pos
                if pos + 4 > len(self._pool) or self._pool_fork != _FORKS[0]:
                    hex_tail = self._draw(4).hex()
                else:
                    self._pool_pos = pos + 4
                    hex_tail = self._pool[pos : pos + 4].hex()
            return f"{head}{counter & 0xFFFF:04x}{hex_tail}"
        with self._lock:
            counter = self._counter + 1
            if now > self._last_ms or counter >> self._counter_bits:
                self._advance(now)  # a new millisecond, or the counter's overflow
                counter = self._counter
            else:
                self._counter = counter
            ms = self._last_ms
            size = self._tail_bytes
            tail = 0
            if size:
                pos = self._pool_pos
                if pos + size > len(self._pool) or self._pool_fork != _FORKS[0]:
                    tail = int.from_bytes(self._draw(size), "big") & self._tail_mask
                else:
                    self._pool_pos = pos + size
                    tail = int.from_bytes(self._pool[pos : pos + size], "big") & self._tail_mask
            prefix = self._prefix if ms == self._prefix_ms else self._new_prefix(ms)
        return self._suffix(prefix, counter, tail)

    def reserve(self) -> int:
        """The next id as its 122 bits, ``ms << 74 | counter << (74 - counter_bits) |
        tail``: drawn now (clock, counter and random tail, in order with every other id of
        this generator; a forked child draws its own random bits), written as text by
        :func:`uuid7_text` only when someone reads it. A decision whose id nobody reads
        skips the formatting (about a microsecond)."""
        if not self._hex_tail:
            return self._reserve_general()
        clock = self._clock_ms
        now = _time_ns() // 1_000_000 if clock is None else int(clock())
        lock = self._lock
        lock.acquire()  # (a third cheaper than `with` on CPython 3.11: once per decision)
        try:
            counter = self._counter + 1
            if now > self._last_ms or counter >> 42:
                self._advance_checked(now)  # a new millisecond, or the counter's overflow
                counter = self._counter
            else:
                self._counter = counter
            # the 32-bit tails come from their own pool, whole integers (no bytes slicing)
            i = self._tail_pos
            if i >= len(self._tails) or self._tails_fork != _FORKS[0]:
                self._refill_tails(1)
                i = 0
            self._tail_pos = i + 1
            return (self._last_ms << 74) | (counter << 32) | self._tails[i]
        finally:
            lock.release()

    def reserve_many(self, n: int) -> list[int]:
        """``n`` ids as ``n`` :meth:`reserve` calls make them, with one clock read and one
        lock (a batch of decisions)."""
        if n <= 1 or not self._hex_tail:
            return [self.reserve() for _ in range(n)]
        clock = self._clock_ms
        now = time.time_ns() // 1_000_000 if clock is None else int(clock())
        out: list[int] = []
        append = out.append
        with self._lock:
            tails = self._tails
            i = self._tail_pos
            if i + n > len(tails) or self._tails_fork != _FORKS[0]:
                tails = self._refill_tails(n)
                i = 0
            self._tail_pos = i + n
            counter = self._counter + 1
            if now > self._last_ms or counter >> 42:
                self._advance_checked(now)
                counter = self._counter
            last = counter + n - 1
            if not last >> 42:  # the usual case: the other ids continue the counter
                self._counter = last
                high = self._last_ms << 74
                return [high | ((counter + k) << 32) | tails[i + k] for k in range(n)]
            self._counter = counter
            append((self._last_ms << 74) | (counter << 32) | tails[i])
            for k in range(i + 1, i + n):  # the counter overflows within the batch
                counter = self._counter + 1
                if now > self._last_ms or counter >> 42:
                    self._advance_checked(now)
                    counter = self._counter
                else:
                    self._counter = counter
                append((self._last_ms << 74) | (counter << 32) | tails[k])
        return out

    def _refill_tails(self, n: int) -> array[int]:
        """A fresh pool of 32-bit random tails, room for ``n`` at least (this process's
        own: a forked child never reuses its parent's); the caller holds the lock."""
        size = max(4 * n, self._POOL_BYTES)
        self._tails = array(_TAIL_TYPECODE, self._random_bytes(size))
        self._tails_fork = _FORKS[0]
        return self._tails

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
        """``n`` ids, as ``n`` calls would make them, with one clock read, one lock and one
        draw of random bytes (a batch of decisions)."""
        if n <= 1:
            return [self() for _ in range(n)]
        clock = self._clock_ms
        now = time.time_ns() // 1_000_000 if clock is None else int(clock())
        if self._hex_tail:
            with self._lock:
                if self._pool_pos + 4 * n > len(self._pool) or self._pool_fork != _FORKS[0]:
                    # one fresh draw for the batch's tails (and a few counter seeds)
                    self._pool = self._random_bytes(max(4 * n + 64, self._POOL_BYTES))
                    self._pool_fork = _FORKS[0]
                    self._pool_pos = 0
                return self._many_hex(now, n)
        size, mask = self._tail_bytes, self._tail_mask
        parts: list[tuple[str, int, int]] = []
        with self._lock:
            pool = self._draw(size * n) if size else b""
            for k in range(n):
                self._advance(now)
                tail = int.from_bytes(pool[k * size : (k + 1) * size], "big") & mask if size else 0
                ms = self._last_ms
                prefix = self._prefix if ms == self._prefix_ms else self._new_prefix(ms)
                parts.append((prefix, self._counter, tail))
        suffix = self._suffix
        return [suffix(p, c, t) for p, c, t in parts]

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

    def _many_hex(self, now: int, n: int) -> list[str]:
        """``n`` ids as ``n`` calls make them, their tails from one slice of the pool
        (the caller holds the lock and made room for ``4 * n`` bytes)."""
        pos = self._pool_pos
        tails = self._pool[pos : pos + 4 * n].hex()
        self._pool_pos = pos + 4 * n
        out: list[str] = []
        append = out.append
        key = self._head_key
        head = self._head
        for k in range(0, 8 * n, 8):
            counter = self._counter + 1
            if now > self._last_ms or counter >> 42:
                self._advance(now)  # may draw a counter seed from the pool (after the tails)
                counter = self._counter
            else:
                self._counter = counter
            if key[0] != self._last_ms or key[1] != counter >> 16:
                key = (self._last_ms, counter >> 16)
                head = self._new_head(key)
            append(f"{head}{counter & 0xFFFF:04x}{tails[k : k + 8]}")
        return out

    def _new_head(self, key: tuple[int, int]) -> str:
        """The first 24 characters of the ids of a millisecond and the counter's high 26
        bits: version 7, the counter's top 12 bits (rand_a), the variant and its next 14."""
        ms, high = key
        prefix = self._prefix if ms == self._prefix_ms else self._new_prefix(ms)
        self._head = head = f"{prefix}7{high >> 14:03x}-{0x8000 | (high & 0x3FFF):04x}-"
        self._head_key = key
        return head

    def _new_prefix(self, ms: int) -> str:
        """The id's text up to its version digit: the 48-bit millisecond, hyphenated. The
        caller holds the lock."""
        if not 0 <= ms < 1 << 48:
            raise LogError(f"UUIDv7 timestamp {ms} ms is outside the 48-bit range")
        h = f"{ms:012x}"
        self._prefix = prefix = f"{h[:8]}-{h[8:]}-"
        self._prefix_ms = ms
        return prefix

    def _suffix(self, prefix: str, counter: int, tail: int) -> str:
        rand = (counter << self._random_tail_bits) | tail
        # version 7, rand_a (12 bits), variant 0b10, rand_b (62 bits): the low 80 bits
        low = _UUID7_VERSION | ((rand >> 62) << 64) | _UUID7_VARIANT | (rand & _UUID7_RAND_B)
        h = f"{low:020x}"
        return f"{prefix}{h[:4]}-{h[4:8]}-{h[8:]}"


_default_uuid7 = UUIDv7Generator()


def uuid7() -> str:
    """A new UUIDv7 string (lowercase, hyphenated), monotonic across the whole process."""
    return _default_uuid7()


def uuid7_text(raw: int) -> str:
    """The text of an id drawn by :meth:`UUIDv7Generator.reserve`: the 48-bit millisecond,
    version 7, the first 12 of the 74 random-or-counter bits, variant ``0b10``, the last 62
    (RFC 9562 section 5.7), lowercase and hyphenated."""
    low = _UUID7_VERSION | ((raw >> 62) & 0xFFF) << 64 | _UUID7_VARIANT | (raw & _UUID7_RAND_B)
    h = f"{(raw >> 74) << 80 | low:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


reserve_uuid7: Final[Callable[[], int]] = _default_uuid7.reserve
"""The next process-wide UUIDv7 (in order with :func:`uuid7`'s) as its bits, for text
made when needed by :func:`uuid7_text` (the bound method itself: one call less per id)."""


reserve_uuid7_many: Final[Callable[[int], list[int]]] = _default_uuid7.reserve_many
"""``n`` :func:`reserve_uuid7` ids at once, in order."""


def uuid7_many(n: int) -> list[str]:
    """``n`` new UUIDv7 strings at once, in order (as many :func:`uuid7` calls)."""
    return _default_uuid7.many(n)


# --------------------------------------------------------------------------- helpers


def format_timestamp(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds and a ``Z`` suffix, e.g. ``2025-01-31T12:00:00.123Z``."""
    total_ms = math.floor(seconds * 1000)
    secs, ms = divmod(total_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


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


def redact_tokens(text: str) -> str:
    """Replace every compact JWT (JWS or JWE) inside ``text`` by ``[redacted JWT]``."""
    if "." not in text:
        return text
    return _DOTTED_RUN.sub(_redact_run, text)


def _jsonable(value: object) -> Any:
    """A JSON-ready copy of ``value`` with every embedded JWT redacted.

    Unknown objects become their ``str`` so a log call never fails on an exotic value (an
    ``EntityUID`` shows in policy syntax); non-finite floats are not JSON and become strings.
    """
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


class MemoryLog:
    """Entries kept in memory for ``ttl`` seconds, at most ``max_items`` (oldest evicted).

    Thread-safe. Expired entries are purged on every access. Readers get copies, so the
    log cannot be changed from outside. Tags are an entry's ``log_kind`` and, for system
    entries, its ``level``; matching is case-insensitive.
    """

    def __init__(
        self,
        ttl: float = 60.0,
        max_items: int = 10000,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max_items = max_items
        self._clock = clock
        self._lock = threading.Lock()
        # id -> (expires_at, entry); insertion order is age order.
        self._entries: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._by_tag: dict[str, dict[str, None]] = {}
        self._by_request: dict[str, dict[str, None]] = {}

    @staticmethod
    def _tags(entry: Mapping[str, Any]) -> list[str]:
        tags = [str(entry.get("log_kind", "")).lower()]
        level = entry.get("level")
        if isinstance(level, str):
            tags.append(level.lower())
        return tags

    def _unindex(self, log_id: str, entry: Mapping[str, Any]) -> None:
        for tag in self._tags(entry):
            ids = self._by_tag.get(tag)
            if ids is not None:
                ids.pop(log_id, None)
                if not ids:
                    del self._by_tag[tag]
        rid = entry.get("request_id")
        if isinstance(rid, str):
            ids = self._by_request.get(rid)
            if ids is not None:
                ids.pop(log_id, None)
                if not ids:
                    del self._by_request[rid]

    def _purge(self, now: float) -> None:
        if self._ttl <= 0:
            return
        while self._entries:
            log_id, (expires, entry) = next(iter(self._entries.items()))
            if expires > now:
                break
            del self._entries[log_id]
            self._unindex(log_id, entry)

    def add(self, entry: Mapping[str, Any]) -> None:
        """Store a copy of one JSON-ready entry (it must have a string ``id``)."""
        self._add(_copy_json(dict(entry)))

    def _add(self, stored: dict[str, Any]) -> None:
        """Store ``stored`` itself: the Logger hands over entries it built and owns."""
        log_id = stored.get("id")
        if not isinstance(log_id, str):
            raise LogError("memory log: an entry needs a string 'id'")
        with self._lock:
            now = self._clock()
            self._purge(now)
            old = self._entries.pop(log_id, None)
            if old is not None:
                self._unindex(log_id, old[1])
            self._entries[log_id] = (now + self._ttl, stored)
            for tag in self._tags(stored):
                self._by_tag.setdefault(tag, {})[log_id] = None
            rid = stored.get("request_id")
            if isinstance(rid, str):
                self._by_request.setdefault(rid, {})[log_id] = None
            if self._max_items > 0:
                while len(self._entries) > self._max_items:
                    old_id, (_, old_entry) = self._entries.popitem(last=False)
                    self._unindex(old_id, old_entry)

    def pop_logs(self) -> list[dict[str, Any]]:
        """Every live entry, oldest first, removing them from the log."""
        with self._lock:
            self._purge(self._clock())
            out = [entry for _, entry in self._entries.values()]
            self._entries.clear()
            self._by_tag.clear()
            self._by_request.clear()
        return out

    def get_log_by_id(self, log_id: str) -> dict[str, Any] | None:
        """The entry with this id, or None when absent or expired."""
        with self._lock:
            self._purge(self._clock())
            item = self._entries.get(log_id)
            return None if item is None else _copy_json(item[1])

    def get_log_ids(self) -> list[str]:
        """Ids of the live entries, oldest first."""
        with self._lock:
            self._purge(self._clock())
            return list(self._entries)

    def _collect(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        return [_copy_json(self._entries[i][1]) for i in ids]

    def get_logs_by_tag(self, tag: str) -> list[dict[str, Any]]:
        """Entries whose ``log_kind`` or ``level`` equals ``tag`` (any case), oldest first."""
        key = str(tag).lower()
        if key == "warning":
            key = "warn"
        with self._lock:
            self._purge(self._clock())
            return self._collect(self._by_tag.get(key, ()))

    def get_logs_by_request_id(self, request_id: str) -> list[dict[str, Any]]:
        """Entries of one request (decision entries and any carrying that ``request_id``)."""
        with self._lock:
            self._purge(self._clock())
            return self._collect(self._by_request.get(request_id, ()))

    def __len__(self) -> int:
        with self._lock:
            self._purge(self._clock())
            return len(self._entries)


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


class MetricsCollector:
    """Thread-safe accumulation between two Metric entries.

    Counters are totals since the collector was created; timings are summaries of the
    samples observed since the last snapshot; gauges keep their latest value.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._gauges: dict[str, int | float] = {}
        self._timings: dict[str, dict[str, int | float]] = {}

    def increment(self, name: str, n: int = 1) -> None:
        """Add ``n`` to a counter."""
        _check_metric_name(name, "counters")
        if isinstance(n, bool) or not isinstance(n, int):
            raise LogError(f"metric counters[{name!r}]: increment must be an integer, got {n!r}")
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + n

    def set_gauge(self, name: str, value: int | float) -> None:
        """Record the current value of a gauge (e.g. ``policy_count``)."""
        _check_metric_name(name, "gauges")
        v = _check_number(value, f"metric gauges[{name!r}]")
        with self._lock:
            self._gauges[name] = v

    def observe(self, name: str, micro_sec: int | float) -> None:
        """Add one timing sample in microseconds (e.g. ``evaluation_time_micro_sec``)."""
        _check_metric_name(name, "timings")
        v = _check_number(micro_sec, f"metric timings[{name!r}]")
        with self._lock:
            s = self._timings.get(name)
            if s is None:
                self._timings[name] = {"count": 1, "total": v, "min": v, "max": v}
            else:
                s["count"] += 1
                s["total"] += v
                s["min"] = min(s["min"], v)
                s["max"] = max(s["max"], v)

    def snapshot(
        self, *, reset_timings: bool = True
    ) -> tuple[dict[str, int], dict[str, int | float], dict[str, dict[str, int | float]]]:
        """``(counters, gauges, timings)`` as copies; timings restart unless told otherwise."""
        with self._lock:
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
        self._threshold = _SEVERITY[self.settings.level]
        self._type = self.settings.log_type
        self._app = self.settings.application_id
        self._jwt_id = self.settings.decision_log_default_jwt_id
        self.memory: MemoryLog | None = None
        self._py: logging.Logger | None = None
        if self._type == "memory":
            self.memory = MemoryLog(self.settings.ttl, self.settings.max_items, clock=monotonic)
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
            self._py.log(_PY_LEVELS[level], "%s", _dumps(entry), extra={"polang": entry})

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
        entry = self._base("Decision")
        entry.update(
            {
                "request_id": _jsonable(request_id),
                "policystore_id": _jsonable(policystore_id),
                "policystore_version": _jsonable(policystore_version),
                "principal": _jsonable(principal),
                "action": _jsonable(action),
                "resource": _jsonable(resource),
                "decision": verdict,
                "diagnostics": {
                    "reason": _jsonable(list(reason)),
                    "errors": _jsonable(list(errors)),
                },
                "tokens": token_log_ids(tokens, self._jwt_id),
                "dropped_tokens": _jsonable(list(dropped_tokens)),
                "decision_time_micro_sec": round(
                    _check_number(decision_time_micro_sec, "decision_time_micro_sec")
                ),
            }
        )
        if extra:
            entry.update(_jsonable(extra))
        self._write(entry, "INFO")
        return entry

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
