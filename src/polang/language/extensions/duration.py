"""The ``duration`` extension type: a signed span of time in milliseconds (64-bit).

The constructor takes quantity-unit pairs in the fixed order ``d h m s ms``, each optional
but at least one present, with an optional leading ``-`` for the whole duration:
``"1d2h3m4s5ms"``, ``"-1d"``, ``"90m"``. The total must fit a signed 64-bit count of
milliseconds. The conversions (``toSeconds`` ...) truncate toward zero.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

MIN_MS = -(2**63)
MAX_MS = 2**63 - 1

MS_PER_SECOND = 1000
MS_PER_MINUTE = 60 * MS_PER_SECOND
MS_PER_HOUR = 60 * MS_PER_MINUTE
MS_PER_DAY = 24 * MS_PER_HOUR


# ASCII digits only, and ``\Z`` (Python's ``$`` would accept a trailing newline).
@cache
def _duration_re() -> re.Pattern[str]:
    """Compiled on first use (start-up time)."""
    return re.compile(
        r"(-?)(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?\Z"
    )


_UNITS = (MS_PER_DAY, MS_PER_HOUR, MS_PER_MINUTE, MS_PER_SECOND, 1)

HELP = "a duration is quantity-unit pairs in the order d, h, m, s, ms with an optional leading `-`"


def _tdiv(n: int, d: int) -> int:
    """Integer division truncating toward zero (the language's), not Python's floor."""
    q = abs(n) // d
    return -q if n < 0 else q


class Duration:
    """An immutable duration; equal only to another ``Duration`` of the same length."""

    __slots__ = ("ms",)

    TYPE_NAME = "duration"
    CONSTRUCTOR = "duration"

    ms: int

    def __init__(self, ms: int) -> None:
        if not MIN_MS <= ms <= MAX_MS:
            raise ValueError(f"duration of {ms}ms overflows 64 bits")
        object.__setattr__(self, "ms", ms)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("duration values are immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is Duration and other.ms == self.ms

    def __hash__(self) -> int:
        return hash((Duration, self.ms))

    def text(self) -> str:
        """Canonical text, largest units first (``"-1d2h"``, ``"0ms"``); parses back exactly."""
        if self.ms == 0:
            return "0ms"
        rest = abs(self.ms)
        out = ["-"] if self.ms < 0 else []
        for unit, suffix in zip(_UNITS, ("d", "h", "m", "s", "ms"), strict=True):
            q, rest = divmod(rest, unit)
            if q:
                out.append(f"{q}{suffix}")
        return "".join(out)

    def __repr__(self) -> str:
        return f'duration("{self.text()}")'

    __str__ = __repr__

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"__extn": {"fn": self.CONSTRUCTOR, "arg": self.text()}}

    # The language's methods (all total: the results always fit a Long).
    def to_milliseconds(self) -> int:
        return self.ms

    def to_seconds(self) -> int:
        return _tdiv(self.ms, MS_PER_SECOND)

    def to_minutes(self) -> int:
        return _tdiv(self.ms, MS_PER_MINUTE)

    def to_hours(self) -> int:
        return _tdiv(self.ms, MS_PER_HOUR)

    def to_days(self) -> int:
        return _tdiv(self.ms, MS_PER_DAY)


@lru_cache(maxsize=4096)
def parse_duration(s: str) -> Duration:
    """Parse the ``duration`` constructor's string; ``ValueError`` (with reason) when invalid.

    Cached because policies call ``duration("...")`` on literals for every request.
    """
    m = _duration_re().match(s)
    if m is None or s in ("", "-"):
        raise ValueError(f"invalid duration `{s}` ({HELP})")
    total = 0
    for digits, unit in zip(m.groups()[1:], _UNITS, strict=True):
        if digits is None:
            continue
        digits = digits.lstrip("0")
        # 20 digits exceed any 64-bit count; checking first keeps ``int()`` away from its
        # limit on very long digit strings.
        if len(digits) > 19:
            total = MAX_MS + 2
            break
        total += int(digits or "0") * unit
    ms = -total if m.group(1) else total
    if not MIN_MS <= ms <= MAX_MS:
        raise ValueError(f"duration `{s}` overflows a 64-bit count of milliseconds")
    return Duration(ms)
