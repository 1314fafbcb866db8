"""The ``decimal`` extension type: fixed point, exactly four fractional digits.

A decimal is stored as a Python ``int`` scaled by 10^4 and must stay inside the signed
64-bit range, as the language requires (``922337203685477.5807`` is the largest value).
The constructor only accepts ``digits.digits`` with one to four fractional digits and an
optional leading ``-``; everything else (exponents, ``+``, missing digits) is an error.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

SCALE = 10_000
"""Four fractional digits."""

MIN_SCALED = -(2**63)
MAX_SCALED = 2**63 - 1


# ASCII digits only (Python's ``\d`` would accept other scripts' digits) and ``\Z``, not
# ``$``, so a trailing newline is not silently accepted.
@cache
def _decimal_re() -> re.Pattern[str]:
    """Compiled on first use (start-up time)."""
    return re.compile(r"(-?)([0-9]+)\.([0-9]+)\Z")


HELP = (
    "a decimal looks like `12.34`: digits on both sides of `.`, at most 4 fractional "
    "digits, and a value from -922337203685477.5808 to 922337203685477.5807"
)


class Decimal:
    """An immutable decimal value; equal only to another ``Decimal`` of the same value."""

    __slots__ = ("scaled",)

    TYPE_NAME = "decimal"
    CONSTRUCTOR = "decimal"

    scaled: int

    def __init__(self, scaled: int) -> None:
        if not MIN_SCALED <= scaled <= MAX_SCALED:
            raise ValueError(f"decimal out of range: {scaled} / 10^4 overflows 64 bits")
        object.__setattr__(self, "scaled", scaled)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("decimal values are immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is Decimal and other.scaled == self.scaled

    def __hash__(self) -> int:
        return hash((Decimal, self.scaled))

    def text(self) -> str:
        """The canonical string (always four fractional digits), as the language prints it."""
        n = self.scaled
        sign = "-" if n < 0 else ""
        whole, frac = divmod(abs(n), SCALE)
        return f"{sign}{whole}.{frac:04d}"

    def __repr__(self) -> str:
        return f'decimal("{self.text()}")'

    __str__ = __repr__

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"__extn": {"fn": self.CONSTRUCTOR, "arg": self.text()}}

    # The language's comparison methods (the operators ``<`` etc. do not accept decimals).
    def less_than(self, other: Decimal) -> bool:
        return self.scaled < other.scaled

    def less_than_or_equal(self, other: Decimal) -> bool:
        return self.scaled <= other.scaled

    def greater_than(self, other: Decimal) -> bool:
        return self.scaled > other.scaled

    def greater_than_or_equal(self, other: Decimal) -> bool:
        return self.scaled >= other.scaled


@lru_cache(maxsize=4096)
def parse_decimal(s: str) -> Decimal:
    """Parse the constructor's string; ``ValueError`` (with the reason) when invalid.

    Cached because policies call ``decimal("...")`` on literals for every request.
    """
    m = _decimal_re().match(s)
    if m is None:
        raise ValueError(f"`{s}` is not a well-formed decimal value ({HELP})")
    sign, whole, frac = m.groups()
    if len(frac) > 4:
        raise ValueError(f"too many digits after the decimal point in `{s}` (at most 4)")
    whole = whole.lstrip("0")
    # More than 16 integer digits always overflows; checking first also keeps ``int()``
    # away from its limit on very long digit strings.
    scaled = 0
    if len(whole) <= 16:
        magnitude = int(whole or "0") * SCALE + int(frac) * 10 ** (4 - len(frac))
        scaled = -magnitude if sign else magnitude
    if len(whole) > 16 or not MIN_SCALED <= scaled <= MAX_SCALED:
        raise ValueError(
            f"overflow when converting `{s}` to decimal: the value must be in range "
            "-922337203685477.5808 to 922337203685477.5807"
        )
    return Decimal(scaled)
