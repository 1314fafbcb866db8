"""The ``duration`` extension type: literals, methods, ordering, and cedarpy agreement."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import EvaluationError
from polang.language.extensions import FUNCTIONS, METHODS, compare_ext
from polang.language.extensions.duration import MAX_MS, MIN_MS, Duration, parse_duration
from polang.language.values import value_eq

from .oracle import Call, Expr, Lit, Method, Op, constructor_check, value_check

DAY = 86_400_000

VALID = [
    ("0ms", 0),
    ("-0ms", 0),
    ("1ms", 1),
    ("1s", 1000),
    ("1m", 60_000),
    ("1h", 3_600_000),
    ("1d", DAY),
    ("1d2h3m4s5ms", DAY + 2 * 3_600_000 + 3 * 60_000 + 4000 + 5),
    ("-1d2h3m4s5ms", -(DAY + 2 * 3_600_000 + 3 * 60_000 + 4000 + 5)),
    ("1m5ms", 60_005),
    ("90m", 5_400_000),
    ("25h", 90_000_000),
    ("00001d", DAY),
    ("9223372036854775807ms", MAX_MS),
    ("-9223372036854775808ms", MIN_MS),
    ("106751991167d7h12m55s807ms", MAX_MS),
    ("-106751991167d7h12m55s808ms", MIN_MS),
    ("106751991167d", 106_751_991_167 * DAY),
]

INVALID = [
    "",
    "-",
    "1",
    "d",
    "ms",
    "1D",
    "1H",
    "1.5h",
    "+1d",
    "--1d",
    "1h1d",  # units must come in the order d, h, m, s, ms
    "1ms1s",
    "1s1m",
    "1d1d",
    "1m1m",
    "1d-1h",
    "1 d",
    "1d ",
    "1d\n",
    "1w",
    "1y",
    "1us",
    "١d",
    "9223372036854775808ms",
    "-9223372036854775809ms",
    "106751991168d",
    "106751991167d7h12m55s808ms",
    "-106751991167d7h12m55s809ms",
    "18446744073709551616ms",  # past u64
    "9" * 5000 + "ms",  # far past Python's int() digit limit: still a clean error
]


@pytest.mark.parametrize(("text", "ms"), VALID)
def test_valid_literals(text: str, ms: int) -> None:
    d = parse_duration(text)
    assert type(d) is Duration and d.ms == ms
    assert parse_duration(d.text()) == d


@pytest.mark.parametrize("text", INVALID)
def test_invalid_literals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["duration"](text)
    assert info.value.kind == "extension"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (1, "1ms"),
        (-1, "-1ms"),
        (DAY, "1d"),
        (-(DAY + 1), "-1d1ms"),
        (3_723_004, "1h2m3s4ms"),
        (MIN_MS, "-106751991167d7h12m55s808ms"),
    ],
)
def test_repr_and_json(ms: int, text: str) -> None:
    d = Duration(ms)
    assert d.text() == text
    assert repr(d) == f'duration("{text}")'
    assert d.to_json() == {"__extn": {"fn": "duration", "arg": text}}


CONVERSIONS = [
    # ms, toSeconds, toMinutes, toHours, toDays: truncation toward zero
    (0, 0, 0, 0, 0),
    (999, 0, 0, 0, 0),
    (-999, 0, 0, 0, 0),
    (1000, 1, 0, 0, 0),
    (-1000, -1, 0, 0, 0),
    (-61_000, -61, -1, 0, 0),
    (DAY - 1, 86_399, 1439, 23, 0),
    (-(DAY - 1), -86_399, -1439, -23, 0),
    (-2 * DAY - 1, -172_800, -2880, -48, -2),
    (MAX_MS, 9_223_372_036_854_775, 153_722_867_280_912, 2_562_047_788_015, 106_751_991_167),
    (MIN_MS, -9_223_372_036_854_775, -153_722_867_280_912, -2_562_047_788_015, -106_751_991_167),
]


@pytest.mark.parametrize(("ms", "secs", "mins", "hours", "days"), CONVERSIONS)
def test_conversions(ms: int, secs: int, mins: int, hours: int, days: int) -> None:
    d = Duration(ms)
    assert METHODS["toMilliseconds"](d) == ms
    assert METHODS["toSeconds"](d) == secs
    assert METHODS["toMinutes"](d) == mins
    assert METHODS["toHours"](d) == hours
    assert METHODS["toDays"](d) == days


def test_ordering_operators() -> None:
    a, b = parse_duration("59m"), parse_duration("1h")
    assert compare_ext("<", a, b) and compare_ext("<=", a, b)
    assert not compare_ext(">", a, b) and not compare_ext(">=", a, b)
    assert compare_ext("<=", b, parse_duration("60m")) and compare_ext(">=", b, b)
    assert compare_ext("<", parse_duration("-1d"), parse_duration("0ms"))
    for other in (3_600_000, "1h", FUNCTIONS["datetime"]("1970-01-01")):
        with pytest.raises(EvaluationError) as info:
            compare_ext("<", b, other)
        assert info.value.kind == "type"
        with pytest.raises(EvaluationError):
            compare_ext(">=", other, b)


def test_method_errors() -> None:
    d = parse_duration("1h")
    for name in ("toMilliseconds", "toSeconds", "toMinutes", "toHours", "toDays"):
        for receiver in ("1h", 1, FUNCTIONS["datetime"]("1970-01-01")):
            with pytest.raises(EvaluationError) as info:
                METHODS[name](receiver)
            assert info.value.kind == "type"
        with pytest.raises(EvaluationError) as info:
            METHODS[name](d, d)
        assert info.value.kind == "arity"


def test_value_semantics() -> None:
    d = parse_duration("1h")
    assert d == parse_duration("60m") and hash(d) == hash(parse_duration("3600s"))
    assert d != 3_600_000 and d != "1h"
    assert not value_eq(Duration(0), 0)
    assert Duration(5) != FUNCTIONS["datetime"]("1970-01-01").offset(Duration(5))
    assert Duration.TYPE_NAME == "duration"
    with pytest.raises(AttributeError):
        d.ms = 1
    with pytest.raises(ValueError):
        Duration(MAX_MS + 1)


# ---- agreement with cedarpy ----------------------------------------------------------

_units = st.sampled_from(["d", "h", "m", "s", "ms", "ms", "D", "", "x"])
_amount = st.one_of(
    st.integers(0, 10**6).map(str),
    st.text("0123456789", min_size=1, max_size=21),
    st.just(""),
)


@st.composite
def _pairs(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(_amount, _units), max_size=5))
    if draw(st.booleans()):
        order = {"d": 0, "h": 1, "m": 2, "s": 3, "ms": 4}
        pairs.sort(key=lambda p: order.get(p[1], 9))  # mostly well-ordered
    sign = draw(st.sampled_from(["", "", "-", "+", "--"]))
    return sign + "".join(a + u for a, u in pairs)


def _spellings(n: int) -> list[str]:
    """Ways to write ``n`` ms (plus one just past it), to probe the 64-bit limits."""
    sign = "-" if n < 0 else ""
    return [
        f"{sign}{abs(n)}ms",
        Duration(n).text(),
        f"{sign}{abs(n) // 1000}s{abs(n) % 1000}ms",
        f"{sign}{abs(n) + 1}ms",
    ]


_near_limits = st.one_of(
    st.integers(MIN_MS, MIN_MS + 10**6),
    st.integers(MAX_MS - 10**6, MAX_MS),
    st.integers(MIN_MS, MAX_MS),
    st.integers(-(10**12), 10**12),
).flatmap(lambda n: st.sampled_from(_spellings(n)))
duration_strings = st.one_of(_pairs(), _near_limits, st.text("0123456789dhms-", max_size=10))


def _expressions(texts: list[str]) -> list[Expr]:
    exprs: list[Expr] = []
    for a, b in zip(texts, texts[1:] + texts[:1], strict=True):
        exprs.append(constructor_check("duration", a))
        x, y = Call("duration", (Lit(a),)), Call("duration", (Lit(b),))
        exprs.append(Op("==", x, y))
        exprs.append(Op("<", x, y))
        exprs.append(Op(">=", x, y))
        for name in ("toMilliseconds", "toSeconds", "toMinutes", "toHours", "toDays"):
            exprs.append(value_check(Method(name, x)))
    return exprs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(duration_strings, min_size=1, max_size=8))
def test_agrees_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], texts: list[str]
) -> None:
    same_as_cedar(_expressions(texts))


def test_tables_agree_with_cedar(same_as_cedar: Callable[[Sequence[Expr]], None]) -> None:
    """The literal tables above are what the oracle says, too."""
    same_as_cedar(_expressions([t for t, _ in VALID] + INVALID[:-1]))
