"""The ``decimal`` extension type: literals, methods, value semantics, and cedarpy agreement."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import EvaluationError
from polang.language.extensions import FUNCTIONS, METHODS, compare_ext
from polang.language.extensions.decimal import MAX_SCALED, MIN_SCALED, Decimal, parse_decimal
from polang.language.values import value_eq, value_to_json

from .oracle import Call, Expr, Lit, Method, Op, constructor_check

VALID = [
    ("0.0", 0),
    ("1.0", 10_000),
    ("1.2345", 12_345),
    ("1.23", 12_300),
    ("-1.5", -15_000),
    ("-0.0", 0),
    ("-0.0001", -1),
    ("007.5", 75_000),
    ("0.0000", 0),
    ("000000000000000000000000001.1", 11_000),
    ("922337203685477.5807", MAX_SCALED),
    ("-922337203685477.5808", MIN_SCALED),
    ("922337203685477.5", 9_223_372_036_854_775_000),
]

INVALID = [
    "",
    "1",
    "1.",
    ".5",
    ".",
    "-",
    "-.5",
    "+1.0",
    "--1.0",
    "1.23456",
    "1.00000",
    "1e3",
    "1.0e3",
    "1,0",
    "1_0.0",
    " 1.0",
    "1.0 ",
    "1.0\n",
    "١.٥",  # non-ASCII digits
    "922337203685477.5808",
    "-922337203685477.5809",
    "1000000000000000.0",
    "9" * 5000 + ".0",  # far past Python's int() digit limit: still a clean error
    "NaN",
    "inf",
]


@pytest.mark.parametrize(("text", "scaled"), VALID)
def test_valid_literals(text: str, scaled: int) -> None:
    d = parse_decimal(text)
    assert type(d) is Decimal
    assert d.scaled == scaled


@pytest.mark.parametrize("text", INVALID)
def test_invalid_literals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_decimal(text)
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["decimal"](text)
    assert info.value.kind == "extension"


@pytest.mark.parametrize(
    ("scaled", "text"),
    [
        (0, "0.0000"),
        (12_300, "1.2300"),
        (-1, "-0.0001"),
        (-15_000, "-1.5000"),
        (MAX_SCALED, "922337203685477.5807"),
        (MIN_SCALED, "-922337203685477.5808"),
    ],
)
def test_repr_and_json(scaled: int, text: str) -> None:
    d = Decimal(scaled)
    assert repr(d) == f'decimal("{text}")'
    assert d.to_json() == {"__extn": {"fn": "decimal", "arg": text}}
    assert value_to_json(d) == d.to_json()
    assert parse_decimal(text) == d


def test_constructor_argument_errors() -> None:
    ctor = FUNCTIONS["decimal"]
    for bad in (1, True, Decimal(0)):
        with pytest.raises(EvaluationError) as info:
            ctor(bad)
        assert info.value.kind == "type"
    with pytest.raises(EvaluationError) as info:
        ctor()
    assert info.value.kind == "arity"
    with pytest.raises(EvaluationError) as info:
        ctor("1.0", "2.0")
    assert info.value.kind == "arity"


METHOD_TABLE = [
    # a, b, lessThan, lessThanOrEqual, greaterThan, greaterThanOrEqual
    ("1.0", "2.0", True, True, False, False),
    ("2.0", "1.0", False, False, True, True),
    ("1.0", "1.0000", False, True, False, True),
    ("-0.0001", "0.0", True, True, False, False),
    ("-922337203685477.5808", "922337203685477.5807", True, True, False, False),
    ("-1.5", "-1.4999", True, True, False, False),
]


@pytest.mark.parametrize(("a", "b", "lt", "le", "gt", "ge"), METHOD_TABLE)
def test_comparison_methods(a: str, b: str, lt: bool, le: bool, gt: bool, ge: bool) -> None:
    x, y = parse_decimal(a), parse_decimal(b)
    assert METHODS["lessThan"](x, y) is lt
    assert METHODS["lessThanOrEqual"](x, y) is le
    assert METHODS["greaterThan"](x, y) is gt
    assert METHODS["greaterThanOrEqual"](x, y) is ge


@pytest.mark.parametrize(
    "name", ["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"]
)
def test_comparison_method_errors(name: str) -> None:
    one = parse_decimal("1.0")
    for args in [(one, "1.0"), ("1.0", one), (one, 1), (1, one)]:
        with pytest.raises(EvaluationError) as info:
            METHODS[name](*args)
        assert info.value.kind == "type"
    for arity_args in [(one,), (one, one, one)]:
        with pytest.raises(EvaluationError) as info:
            METHODS[name](*arity_args)
        assert info.value.kind == "arity"


def test_operators_do_not_order_decimals() -> None:
    one = parse_decimal("1.0")
    for op in ("<", "<=", ">", ">="):
        with pytest.raises(EvaluationError):
            compare_ext(op, one, one)


def test_value_semantics() -> None:
    d = parse_decimal("1.0")
    assert d == parse_decimal("1.0000")
    assert hash(d) == hash(parse_decimal("1.0000"))
    assert d != parse_decimal("1.0001")
    assert d != 10_000 and d != "1.0"
    assert not value_eq(Decimal(1), 1)
    assert len({Decimal(0), 0, "0.0"}) == 3
    assert Decimal.TYPE_NAME == "decimal"
    with pytest.raises(AttributeError):
        d.scaled = 5
    with pytest.raises(AttributeError):
        d.other = 5
    with pytest.raises(ValueError):
        Decimal(MAX_SCALED + 1)


# ---- agreement with cedarpy ----------------------------------------------------------

_digits = st.text("0123456789", max_size=20)
_structured = st.builds(
    lambda sign, whole, dot, frac, tail: sign + whole + dot + frac + tail,
    st.sampled_from(["", "", "-", "+", "--"]),
    _digits,
    st.sampled_from([".", ".", ".", "", ".."]),
    st.text("0123456789", max_size=6),
    st.sampled_from(["", "", "", "", " ", "\n", "e1", "x"]),
)


def _with_frac_digits(n: int, keep: int) -> str:
    """The text of ``Decimal(n)`` cut to ``keep`` (1-4) fractional digits: still valid."""
    text = Decimal(n).text()
    return text[: len(text) - 4 + keep]


def _out_of_range(excess: int) -> list[str]:
    hi, lo = MAX_SCALED + excess, -(MIN_SCALED - excess)
    return [f"{hi // 10_000}.{hi % 10_000:04d}", f"-{lo // 10_000}.{lo % 10_000:04d}"]


_near_limits = st.builds(
    _with_frac_digits,
    st.one_of(
        st.integers(MIN_SCALED, MIN_SCALED + 100_000),
        st.integers(MAX_SCALED - 100_000, MAX_SCALED),
        st.integers(-100_000, 100_000),
    ),
    st.integers(1, 4),
)
_overflowing = st.integers(1, 10**6).map(_out_of_range).flatmap(st.sampled_from)
decimal_strings = st.one_of(
    _structured, _near_limits, _overflowing, st.text("0123456789.-+e ", max_size=10)
)


def _expressions(texts: list[str]) -> list[Expr]:
    exprs: list[Expr] = []
    for a, b in zip(texts, texts[1:] + texts[:1], strict=True):
        exprs.append(constructor_check("decimal", a))
        x, y = Call("decimal", (Lit(a),)), Call("decimal", (Lit(b),))
        exprs.append(Op("==", x, y))
        for name in ("lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"):
            exprs.append(Method(name, x, (y,)))
        exprs.append(Op("<", x, y))
    return exprs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(decimal_strings, min_size=1, max_size=8))
def test_agrees_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], texts: list[str]
) -> None:
    same_as_cedar(_expressions(texts))


def test_tables_agree_with_cedar(same_as_cedar: Callable[[Sequence[Expr]], None]) -> None:
    """The literal tables above are what the oracle says, too."""
    texts = [t for t, _ in VALID] + INVALID[:-1] + [a for a, *_ in METHOD_TABLE]
    same_as_cedar(_expressions(texts))
