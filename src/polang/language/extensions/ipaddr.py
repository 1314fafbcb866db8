"""The ``ipaddr`` extension type: an IPv4 or IPv6 address with a prefix length.

The accepted syntax is deliberately narrow and matches the language exactly (it differs
from Python's :mod:`ipaddress`):

- IPv4: four decimal octets, no leading zeros (``010.0.0.1`` is an error), each <= 255;
- IPv6: hex groups of 1-4 digits, ``::`` at most once and standing for at least one group;
  no zone ids (``%eth0``), no brackets, and no embedded IPv4 (``::ffff:1.2.3.4``);
- an optional ``/prefix``: decimal, no leading zeros, <= 32 (IPv4, at most 2 characters)
  or <= 128 (IPv6, at most 3 characters); without it the prefix is the full length;
- the whole string is at most 43 characters.

Equality compares the address as written *and* the prefix: ``ip("10.0.0.1/8")`` is not
``ip("10.0.0.0/8")``, while ``ip("10.0.0.1")`` equals ``ip("10.0.0.1/32")``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

MAX_TEXT_LEN = 43
V4_BITS = 32
V6_BITS = 128

_DEC = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")

HELP = "valid IP strings look like `127.0.0.1`, `10.0.0.0/8` or `ffee::/64`"


class IPAddr:
    """An immutable IP address or range; equal only to another ``IPAddr``."""

    __slots__ = ("addr", "broadcast", "network", "prefix", "v6")

    TYPE_NAME = "ipaddr"
    CONSTRUCTOR = "ip"

    v6: bool
    addr: int
    prefix: int
    network: int
    broadcast: int

    def __init__(self, v6: bool, addr: int, prefix: int) -> None:
        bits = V6_BITS if v6 else V4_BITS
        if not 0 <= addr < (1 << bits) or not 0 <= prefix <= bits:
            raise ValueError(f"invalid IP address value {addr:#x}/{prefix}")
        hostmask = (1 << (bits - prefix)) - 1
        set_ = object.__setattr__
        set_(self, "v6", v6)
        set_(self, "addr", addr)
        set_(self, "prefix", prefix)
        set_(self, "network", addr & ~hostmask)
        set_(self, "broadcast", addr | hostmask)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ipaddr values are immutable")

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is IPAddr
            and other.addr == self.addr
            and other.prefix == self.prefix
            and other.v6 == self.v6
        )

    def __hash__(self) -> int:
        return hash((IPAddr, self.v6, self.addr, self.prefix))

    def text(self) -> str:
        """Canonical text: RFC 5952 for IPv6; the prefix only when it is not the full length."""
        if self.v6:
            host = _format_v6(self.addr)
            full = V6_BITS
        else:
            a = self.addr
            host = f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"
            full = V4_BITS
        return host if self.prefix == full else f"{host}/{self.prefix}"

    def __repr__(self) -> str:
        return f'ip("{self.text()}")'

    __str__ = __repr__

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"__extn": {"fn": self.CONSTRUCTOR, "arg": self.text()}}

    # The language's methods.
    def is_ipv4(self) -> bool:
        return not self.v6

    def is_ipv6(self) -> bool:
        return self.v6

    def is_loopback(self) -> bool:
        """Loopback only when the whole range is: 127.0.0.0/8 (prefix >= 8), or ``::1/128``."""
        if self.v6:
            return self.addr == 1 and self.prefix == V6_BITS
        return self.addr >> 24 == 127 and self.prefix >= 8

    def is_multicast(self) -> bool:
        """Multicast only when the whole range is: 224.0.0.0/4 or ff00::/8."""
        if self.v6:
            return self.addr >> 120 == 0xFF and self.prefix >= 8
        return self.addr >> 28 == 0xE and self.prefix >= 4

    def is_in_range(self, other: IPAddr) -> bool:
        """Whether this range lies inside ``other``; false across IPv4/IPv6."""
        return (
            self.v6 == other.v6
            and other.network <= self.network
            and self.broadcast <= other.broadcast
        )


def _format_v6(addr: int) -> str:
    groups = [(addr >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    # The longest run of two or more zero groups (the first on ties) becomes "::".
    best_start, best_len = -1, 1
    i = 0
    while i < 8:
        if groups[i] == 0:
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    hexes = [f"{g:x}" for g in groups]
    if best_start < 0:
        return ":".join(hexes)
    head = ":".join(hexes[:best_start])
    tail = ":".join(hexes[best_start + best_len :])
    return f"{head}::{tail}"


def _parse_v4(s: str) -> int | None:
    parts = s.split(".")
    if len(parts) != 4:
        return None
    value = 0
    for part in parts:
        if not 1 <= len(part) <= 3 or not _DEC.issuperset(part):
            return None
        if len(part) > 1 and part[0] == "0":
            return None
        octet = int(part)
        if octet > 255:
            return None
        value = (value << 8) | octet
    return value


def _parse_groups(text: str) -> list[int] | None:
    if text == "":
        return []
    groups = []
    for part in text.split(":"):
        if not 1 <= len(part) <= 4 or not _HEX.issuperset(part):
            return None
        groups.append(int(part, 16))
    return groups


def _parse_v6(s: str) -> int | None:
    # Embedded IPv4 never reaches here: the caller rejects it up front, as the language does.
    head_text, sep, tail_text = s.partition("::")
    head = _parse_groups(head_text)
    if head is None:
        return None
    if sep:
        tail = _parse_groups(tail_text)
        # "::" stands for at least one zero group.
        if tail is None or len(head) + len(tail) > 7:
            return None
        groups = head + [0] * (8 - len(head) - len(tail)) + tail
    else:
        if len(head) != 8:
            return None
        groups = head
    value = 0
    for g in groups:
        value = (value << 16) | g
    return value


def _parse_prefix(s: str, maximum: int, max_len: int) -> int:
    if len(s) > max_len:
        raise ValueError(f"error parsing prefix `{s}`: string length {len(s)} is too large")
    if s == "" or not _DEC.issuperset(s):
        raise ValueError(f"error parsing prefix `{s}`: expected decimal digits")
    if len(s) > 1 and s[0] == "0":
        raise ValueError(f"error parsing prefix `{s}`: leading zero(s)")
    n = int(s)
    if n > maximum:
        raise ValueError(f"error parsing prefix: {n} is larger than the limit {maximum}")
    return n


@lru_cache(maxsize=4096)
def parse_ipaddr(s: str) -> IPAddr:
    """Parse the ``ip`` constructor's string; ``ValueError`` (with the reason) when invalid.

    Cached because policies call ``ip("...")`` on literals for every request.
    """
    if len(s) > MAX_TEXT_LEN:
        raise ValueError(f"invalid IP address `{s}`: longer than {MAX_TEXT_LEN} characters")
    if s.count(":") >= 2 and s.count(".") >= 2:
        raise ValueError(
            f"invalid IP address `{s}`: IPv4 embedded in IPv6 (e.g. ::ffff:127.0.0.1) "
            "is not accepted"
        )
    host, slash, prefix_text = s.partition("/")
    v4 = _parse_v4(host)
    if v4 is not None:
        prefix = _parse_prefix(prefix_text, V4_BITS, 2) if slash else V4_BITS
        return IPAddr(False, v4, prefix)
    v6 = None if "." in host else _parse_v6(host)
    if v6 is not None:
        prefix = _parse_prefix(prefix_text, V6_BITS, 3) if slash else V6_BITS
        return IPAddr(True, v6, prefix)
    raise ValueError(f"invalid IP address `{host}` ({HELP})")
