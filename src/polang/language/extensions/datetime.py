"""The ``datetime`` extension type: an instant, in milliseconds since the Unix epoch (64-bit).

Accepted constructor strings (and nothing else):

- ``YYYY-MM-DD`` (midnight UTC),
- ``YYYY-MM-DDThh:mm:ssZ`` and ``YYYY-MM-DDThh:mm:ss.SSSZ``,
- the same two with an offset ``+hhmm`` / ``-hhmm`` instead of ``Z`` (hh < 24, mm < 60).

Dates are proleptic Gregorian from year 0000 (a leap year) to 9999; there is no leap
second (ss < 60). Arithmetic (``offset``, ``durationSince``, ``toDate``) errors when the
result leaves the 64-bit range; it never wraps. Python's :mod:`datetime` is not used since
it cannot represent year 0 nor the instants that offsets can reach.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

from polang.language.extensions.duration import MS_PER_DAY, Duration

MIN_MS = -(2**63)
MAX_MS = 2**63 - 1


@cache
def _regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The date and time patterns, compiled on first use (start-up time)."""
    return re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})"), re.compile(
        r"T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{3}))?(?:(Z)|([+-])([0-9]{2})([0-9]{2}))\Z"
    )


HELP = (
    "a datetime looks like `YYYY-MM-DD`, optionally followed by `Thh:mm:ss` and then `Z`, "
    "`.SSSZ`, an offset like `+0700`, or `.SSS` and an offset"
)

_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, including 0)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    """The inverse of :func:`_days_from_civil`."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


# Instants from 0000-01-01 up to (not including) 10000-01-01: what a UTC string can name.
_TEXT_MIN_MS = _days_from_civil(0, 1, 1) * MS_PER_DAY
_TEXT_END_MS = _days_from_civil(10000, 1, 1) * MS_PER_DAY


_MAX_OFFSET_MS = (23 * 60 + 59) * 60_000


def _format(local_ms: int, zone: str) -> str:
    """``local_ms`` (wall-clock milliseconds in ``zone``) as a constructor string."""
    days, ms_of_day = divmod(local_ms, MS_PER_DAY)
    y, m, d = _civil_from_days(days)
    date = f"{y:04d}-{m:02d}-{d:02d}"
    if ms_of_day == 0 and zone == "Z":
        return date
    secs, millis = divmod(ms_of_day, 1000)
    hh, rem = divmod(secs, 3600)
    mm, ss = divmod(rem, 60)
    frac = f".{millis:03d}" if millis else ""
    return f"{date}T{hh:02d}:{mm:02d}:{ss:02d}{frac}{zone}"


class DateTime:
    """An immutable instant; equal only to another ``DateTime`` at the same millisecond."""

    __slots__ = ("ms",)

    TYPE_NAME = "datetime"
    CONSTRUCTOR = "datetime"

    ms: int

    def __init__(self, ms: int) -> None:
        if not MIN_MS <= ms <= MAX_MS:
            raise ValueError(f"datetime of {ms}ms since the epoch overflows 64 bits")
        object.__setattr__(self, "ms", ms)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("datetime values are immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is DateTime and other.ms == self.ms

    def __hash__(self) -> int:
        return hash((DateTime, self.ms))

    def text(self) -> str | None:
        """The canonical string, or ``None`` when no constructor string names this instant.

        UTC (``Z``) for years 0000-9999; just outside them, the ``+2359``/``-2359`` offsets
        still reach a day further; beyond that (only arithmetic gets there) ``None``.
        """
        ms = self.ms
        if _TEXT_MIN_MS <= ms < _TEXT_END_MS:
            return _format(ms, "Z")
        if _TEXT_MIN_MS <= ms + _MAX_OFFSET_MS < _TEXT_END_MS:
            return _format(ms + _MAX_OFFSET_MS, "+2359")
        if _TEXT_MIN_MS <= ms - _MAX_OFFSET_MS < _TEXT_END_MS:
            return _format(ms - _MAX_OFFSET_MS, "-2359")
        return None

    def __repr__(self) -> str:
        text = self.text()
        if text is None:
            return f'datetime("1970-01-01").offset({Duration(self.ms)!r})'
        return f'datetime("{text}")'

    __str__ = __repr__

    def to_json(self) -> dict[str, Any]:
        """``{"__extn": {"fn": "datetime", "arg": ...}}``; the language's multi-argument
        ``offset`` form for the far instants that no constructor string names."""
        text = self.text()
        if text is None:
            return {
                "__extn": {
                    "fn": "offset",
                    "args": [
                        {"__extn": {"fn": "datetime", "arg": "1970-01-01"}},
                        Duration(self.ms).to_json(),
                    ],
                }
            }
        return {"__extn": {"fn": self.CONSTRUCTOR, "arg": text}}

    # The language's methods; ``None`` means the result overflows 64 bits.
    def offset(self, duration: Duration) -> DateTime | None:
        ms = self.ms + duration.ms
        return DateTime(ms) if MIN_MS <= ms <= MAX_MS else None

    def duration_since(self, other: DateTime) -> Duration | None:
        ms = self.ms - other.ms
        return Duration(ms) if MIN_MS <= ms <= MAX_MS else None

    def to_date(self) -> DateTime | None:
        """Midnight (UTC) of the day, rounding toward the past for pre-1970 instants."""
        ms = self.ms - self.ms % MS_PER_DAY
        return DateTime(ms) if ms >= MIN_MS else None

    def to_time(self) -> Duration:
        """Time since that midnight: always in ``[0, 1 day)``."""
        return Duration(self.ms % MS_PER_DAY)


@lru_cache(maxsize=4096)
def parse_datetime(s: str) -> DateTime:
    """Parse the ``datetime`` constructor's string; ``ValueError`` (with reason) when invalid.

    Cached because policies call ``datetime("...")`` on literals for every request.
    """
    date_re, time_re = _regexes()
    m = date_re.match(s)
    if m is None:
        raise ValueError(f"invalid datetime `{s}`: it must start with YYYY-MM-DD ({HELP})")
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    ms_of_day = 0
    offset_s = 0
    if m.end() != len(s):
        t = time_re.match(s, m.end())
        if t is None:
            raise ValueError(f"invalid datetime `{s}`: bad time or offset part ({HELP})")
        hh, mi, ss = int(t.group(1)), int(t.group(2)), int(t.group(3))
        millis = int(t.group(4)) if t.group(4) else 0
        if hh >= 24 or mi >= 60 or ss >= 60:
            raise ValueError(f"invalid datetime `{s}`: invalid hour, minute or second")
        ms_of_day = ((hh * 60 + mi) * 60 + ss) * 1000 + millis
        if t.group(6):
            oh, om = int(t.group(7)), int(t.group(8))
            if oh >= 24 or om >= 60:
                raise ValueError(
                    f"invalid datetime `{s}`: offset hours must be < 24 and minutes < 60"
                )
            offset_s = (oh * 3600 + om * 60) * (1 if t.group(6) == "+" else -1)
    month_days = _MONTH_DAYS[month - 1] if 1 <= month <= 12 else 0
    if month == 2 and _is_leap(year):
        month_days = 29
    if not 1 <= day <= month_days:
        raise ValueError(f"invalid datetime `{s}`: no such date {m.group(0)}")
    days = _days_from_civil(year, month, day)
    return DateTime(days * MS_PER_DAY + ms_of_day - offset_s * 1000)
