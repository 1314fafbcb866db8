"""The ``ipaddr`` extension type: literals, methods, value semantics, and cedarpy agreement."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import EvaluationError
from polang.language.extensions import FUNCTIONS, METHODS, compare_ext
from polang.language.extensions.ipaddr import IPAddr, parse_ipaddr
from polang.language.values import value_eq

from .oracle import Call, Expr, Lit, Method, Op, constructor_check, value_check

V4 = False
V6 = True

VALID = [
    ("0.0.0.0", V4, 0, 32),
    ("1.2.3.4", V4, 0x01020304, 32),
    ("255.255.255.255", V4, 0xFFFFFFFF, 32),
    ("10.0.0.0/8", V4, 0x0A000000, 8),
    ("10.1.2.3/8", V4, 0x0A010203, 8),  # host bits are kept, not masked
    ("1.2.3.4/0", V4, 0x01020304, 0),
    ("1.2.3.4/32", V4, 0x01020304, 32),
    ("::", V6, 0, 128),
    ("::/0", V6, 0, 0),
    ("::1", V6, 1, 128),
    ("1::", V6, 1 << 112, 128),
    ("1:2:3:4:5:6:7:8", V6, 0x00010002000300040005000600070008, 128),
    ("1:2:3:4:5:6:7::", V6, 0x00010002000300040005000600070000, 128),
    ("::2:3:4:5:6:7:8", V6, 0x00000002000300040005000600070008, 128),
    ("FFFF::abCD/16", V6, (0xFFFF << 112) | 0xABCD, 16),
    ("0001::/128", V6, 1 << 112, 128),
    ("ff02::1/8", V6, (0xFF02 << 112) | 1, 8),
    ("1111:2222:3333:4444:5555:6666:7777:8888/128", V6, 0x11112222333344445555666677778888, 128),
]

INVALID = [
    "",
    "1.2.3",
    "1.2.3.4.5",
    "1.2.3.256",
    "01.2.3.4",  # leading zeros are rejected, not read as octal nor decimal
    "1.2.3.00",
    "1.2.3.4/",
    "1.2.3.4/33",
    "1.2.3.4/08",
    "1.2.3.4/-1",
    "1.2.3.4/+8",
    "1.2.3.4/ 8",
    "1.2.3.4/8/8",
    "1.2.3.4/100",
    " 1.2.3.4",
    "1.2.3.4\n",
    "1.2.3.4:80",
    "::/129",
    "::/0128",
    "::/1280",
    "1:2:3:4:5:6:7:8:9",
    "1:2:3:4:5:6:7",
    "1:2:3:4:5:6:7::8",  # "::" must stand for at least one group
    "::1:2:3:4:5:6:7:8",
    "1::2::3",
    ":::",
    ":1::",
    "1::2:",
    "00001::",
    "g::",
    "::ffff:1.2.3.4",  # IPv4 embedded in IPv6 is never accepted
    "::1.2.3.4",
    "64:ff9b::192.0.2.33",
    "fe80::1%eth0",
    "fe80::1%1",
    "[::1]",
    "localhost",
    "1111:2222:3333:4444:5555:6666:7777:8888/1280",  # 44 characters
    "١.٢.٣.٤",
]


@pytest.mark.parametrize(("text", "v6", "addr", "prefix"), VALID)
def test_valid_literals(text: str, v6: bool, addr: int, prefix: int) -> None:
    ip = parse_ipaddr(text)
    assert (ip.v6, ip.addr, ip.prefix) == (v6, addr, prefix)
    assert parse_ipaddr(ip.text()) == ip


@pytest.mark.parametrize("text", INVALID)
def test_invalid_literals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ipaddr(text)
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["ip"](text)
    assert info.value.kind == "extension"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("10.0.0.1", "10.0.0.1"),
        ("10.0.0.1/32", "10.0.0.1"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("1:0:0:2:0:0:0:3/64", "1:0:0:2::3/64"),
        ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"),  # ties: the first run is compressed
        ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),  # a single zero group stays
        ("ABCD:00EF::", "abcd:ef::"),
        ("::ffff:7f00:1", "::ffff:7f00:1"),  # never the dotted form, which would not re-parse
        ("::/0", "::/0"),
    ],
)
def test_repr_and_json(text: str, canonical: str) -> None:
    ip = parse_ipaddr(text)
    assert ip.text() == canonical
    assert repr(ip) == f'ip("{canonical}")'
    assert ip.to_json() == {"__extn": {"fn": "ip", "arg": canonical}}
    assert parse_ipaddr(canonical) == ip


PREDICATES = [
    # text, isIpv4, isIpv6, isLoopback, isMulticast
    ("127.0.0.1", True, False, True, False),
    ("127.255.255.255/8", True, False, True, False),
    ("127.0.0.1/7", True, False, False, False),
    ("127.0.0.1/0", True, False, False, False),
    ("128.0.0.1", True, False, False, False),
    ("224.0.0.1", True, False, False, True),
    ("239.255.255.255/4", True, False, False, True),
    ("224.0.0.0/3", True, False, False, False),
    ("240.0.0.1", True, False, False, False),
    ("::1", False, True, True, False),
    ("::1/127", False, True, False, False),
    ("::ffff:7f00:1", False, True, False, False),  # IPv4-mapped loopback is not loopback
    ("ff00::", False, True, False, True),
    ("ff02::1/8", False, True, False, True),
    ("ff00::/7", False, True, False, False),
    ("fe00::", False, True, False, False),
]


@pytest.mark.parametrize(("text", "v4", "v6", "loopback", "multicast"), PREDICATES)
def test_predicates(text: str, v4: bool, v6: bool, loopback: bool, multicast: bool) -> None:
    ip = parse_ipaddr(text)
    assert METHODS["isIpv4"](ip) is v4
    assert METHODS["isIpv6"](ip) is v6
    assert METHODS["isLoopback"](ip) is loopback
    assert METHODS["isMulticast"](ip) is multicast


RANGES = [
    ("10.1.2.3", "10.0.0.0/8", True),
    ("10.0.0.0/8", "10.0.0.0/8", True),
    ("10.0.0.0/8", "10.0.0.0/7", True),
    ("10.0.0.0/7", "10.0.0.0/8", False),
    ("10.1.2.3/8", "10.0.0.0/8", True),  # host bits do not matter for ranges
    ("11.0.0.0", "10.0.0.0/8", False),
    ("1.2.3.4", "0.0.0.0/0", True),
    ("1.2.3.4", "1.2.3.4", True),
    ("1.2.3.4", "1.2.3.5", False),
    ("1.2.3.4", "::/0", False),  # never across families
    ("::1", "0.0.0.0/0", False),
    ("::1", "::/0", True),
    ("2001:db8::1", "2001:db8::/32", True),
    ("2001:db9::1", "2001:db8::/32", False),
    ("::/0", "::1", False),
]


@pytest.mark.parametrize(("a", "b", "expected"), RANGES)
def test_is_in_range(a: str, b: str, expected: bool) -> None:
    assert METHODS["isInRange"](parse_ipaddr(a), parse_ipaddr(b)) is expected


def test_method_errors() -> None:
    ip = parse_ipaddr("1.2.3.4")
    for name in ("isIpv4", "isIpv6", "isLoopback", "isMulticast"):
        with pytest.raises(EvaluationError) as info:
            METHODS[name]("1.2.3.4")
        assert info.value.kind == "type"
        with pytest.raises(EvaluationError) as info:
            METHODS[name](ip, ip)
        assert info.value.kind == "arity"
    for args in [(ip, "1.2.3.4"), ("1.2.3.4", ip), (ip, 1)]:
        with pytest.raises(EvaluationError) as info:
            METHODS["isInRange"](*args)
        assert info.value.kind == "type"
    with pytest.raises(EvaluationError) as info:
        METHODS["isInRange"](ip, ip, ip)  # one range only, in this version of the language
    assert info.value.kind == "arity"
    for op in ("<", "<=", ">", ">="):
        with pytest.raises(EvaluationError):
            compare_ext(op, ip, ip)
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["ip"](1)
    assert info.value.kind == "type"


def test_value_semantics() -> None:
    a = parse_ipaddr("10.0.0.1")
    assert a == parse_ipaddr("10.0.0.1/32")
    assert hash(a) == hash(parse_ipaddr("10.0.0.1/32"))
    assert parse_ipaddr("10.0.0.1/8") != parse_ipaddr("10.0.0.0/8")
    assert parse_ipaddr("10.0.0.0/8") != parse_ipaddr("10.0.0.0/9")
    assert parse_ipaddr("::a00:1") != a  # same 32-bit number, different family
    assert a != "10.0.0.1" and a != 0x0A000001
    assert not value_eq(a, "10.0.0.1")
    assert IPAddr.TYPE_NAME == "ipaddr"
    with pytest.raises(AttributeError):
        a.prefix = 8
    with pytest.raises(ValueError):
        IPAddr(False, 1 << 32, 32)
    with pytest.raises(ValueError):
        IPAddr(True, 0, 129)


# ---- agreement with cedarpy ----------------------------------------------------------

_octet = st.one_of(
    st.integers(0, 255).map(str),
    st.sampled_from(["127", "224", "239", "240", "223", "0", "255", "256", "00", "01"]),
    st.text("0123456789", max_size=4),
)
_v4 = st.lists(_octet, min_size=3, max_size=5).map(".".join)
_group = st.one_of(
    st.integers(0, 0xFFFF).map(lambda n: f"{n:x}"),
    st.sampled_from(["0", "ff00", "FF02", "1", "0000", "00001"]),
    st.text("0123456789abcdefABCDEFg", max_size=5),
)


@st.composite
def _v6(draw: st.DrawFn) -> str:
    groups = draw(st.lists(_group, min_size=0, max_size=9))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(groups)))
        return ":".join(groups[:at]) + "::" + ":".join(groups[at:])
    return ":".join(groups)


_prefix = st.one_of(
    st.just(""),
    st.integers(0, 130).map(lambda n: f"/{n}"),
    st.text("0123456789", max_size=4).map(lambda t: "/" + t),
)
ip_strings = st.one_of(
    st.builds(lambda h, p: h + p, st.one_of(_v4, _v6()), _prefix),
    st.text("0123456789abcdef:./%", max_size=16),
)


def _expressions(texts: list[str]) -> list[Expr]:
    exprs: list[Expr] = []
    for a, b in zip(texts, texts[1:] + texts[:1], strict=True):
        exprs.append(constructor_check("ip", a))
        x, y = Call("ip", (Lit(a),)), Call("ip", (Lit(b),))
        exprs.append(Op("==", x, y))
        exprs.append(Method("isInRange", x, (y,)))
        exprs.append(Method("isInRange", y, (x,)))
        for name in ("isIpv4", "isIpv6", "isLoopback", "isMulticast"):
            exprs.append(value_check(Method(name, x)))
    return exprs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ip_strings, min_size=1, max_size=8))
def test_agrees_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], texts: list[str]
) -> None:
    same_as_cedar(_expressions(texts))


@st.composite
def _related_ips(draw: st.DrawFn) -> list[IPAddr]:
    """A base address and neighbours: same or nearby bits, with other prefix lengths."""
    v6 = draw(st.booleans())
    bits = 128 if v6 else 32
    special = [0, 1, 127 << 24, 224 << 24, 0xFF << 120, 0xFE << 120]
    base = draw(st.one_of(st.integers(0, 2**bits - 1), st.sampled_from(special))) % (1 << bits)
    out = []
    for _ in range(draw(st.integers(2, 8))):
        flip = draw(st.integers(0, bits)) if draw(st.booleans()) else 0
        addr = base ^ (draw(st.integers(0, (1 << flip) - 1)) if flip else 0)
        out.append(IPAddr(v6, addr, draw(st.integers(0, bits))))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_related_ips())
def test_ranges_agree_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], ips: list[IPAddr]
) -> None:
    """Well-formed addresses and prefixes near each other, through our canonical text."""
    texts = [ip.text() for ip in ips]
    exprs = _expressions(texts)
    exprs += [
        Method("isInRange", Call("ip", (Lit(a),)), (Call("ip", (Lit(b),)),))
        for a in texts
        for b in texts
    ]
    same_as_cedar(exprs)


def test_tables_agree_with_cedar(same_as_cedar: Callable[[Sequence[Expr]], None]) -> None:
    """The literal tables above are what the oracle says, too."""
    texts = [t for t, *_ in VALID] + INVALID + [t for t, *_ in PREDICATES]
    same_as_cedar(_expressions(texts + [t for pair in RANGES for t in pair[:2]]))
