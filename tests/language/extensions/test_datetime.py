"""The ``datetime`` extension type: literals, methods, ordering, and cedarpy agreement."""

from __future__ import annotations

import datetime as pydt
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import EvaluationError
from polang.language.extensions import FUNCTIONS, METHODS, compare_ext
from polang.language.extensions.datetime import MAX_MS, MIN_MS, DateTime, parse_datetime
from polang.language.extensions.duration import Duration, parse_duration
from polang.language.values import value_eq

from .oracle import Call, Expr, Lit, Method, Op, constructor_check, value_check

DAY = 86_400_000
YEAR_0 = -62_167_219_200_000  # 0000-01-01T00:00:00Z


def _epoch_ms(year: int, month: int, day: int, hh: int = 0, mm: int = 0, ss: int = 0) -> int:
    """Milliseconds since the epoch computed independently with Python's datetime (year >= 1)."""
    dt = pydt.datetime(year, month, day, hh, mm, ss, tzinfo=pydt.UTC)
    delta = dt - pydt.datetime(1970, 1, 1, tzinfo=pydt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


VALID = [
    ("1970-01-01", 0),
    ("1970-01-02", DAY),
    ("1969-12-31", -DAY),
    ("2024-02-29", _epoch_ms(2024, 2, 29)),
    ("2000-02-29", _epoch_ms(2000, 2, 29)),
    ("0001-01-01", _epoch_ms(1, 1, 1)),
    ("0000-01-01", YEAR_0),
    ("0000-02-29", YEAR_0 + 59 * DAY),  # year 0 is a leap year (proleptic Gregorian)
    ("0000-12-31", YEAR_0 + 365 * DAY),
    ("9999-12-31", _epoch_ms(9999, 12, 31)),
    ("2020-01-01T00:00:00Z", _epoch_ms(2020, 1, 1)),
    ("2020-06-15T13:45:30Z", _epoch_ms(2020, 6, 15, 13, 45, 30)),
    ("2020-06-15T13:45:30.123Z", _epoch_ms(2020, 6, 15, 13, 45, 30) + 123),
    ("2020-06-15T13:45:30+0100", _epoch_ms(2020, 6, 15, 12, 45, 30)),
    ("2020-06-15T13:45:30-0130", _epoch_ms(2020, 6, 15, 15, 15, 30)),
    ("2020-06-15T13:45:30.999+2359", _epoch_ms(2020, 6, 14, 13, 46, 30) + 999),
    ("2020-06-15T13:45:30.000-0000", _epoch_ms(2020, 6, 15, 13, 45, 30)),
    ("9999-12-31T23:59:59.999Z", _epoch_ms(9999, 12, 31, 23, 59, 59) + 999),
    ("9999-12-31T23:59:59.999-2359", _epoch_ms(9999, 12, 31, 23, 59, 59) + 999 + 86_340_000),
    ("0000-01-01T00:00:00+2359", YEAR_0 - 86_340_000),
]

INVALID = [
    "",
    "2020",
    "2020-01",
    "2020-1-01",
    "2020-01-1",
    "20200-01-01",
    "-2020-01-01",
    "+2020-01-01",
    "2020/01/01",
    "2020-00-01",
    "2020-13-01",
    "2020-01-00",
    "2020-01-32",
    "2019-02-29",
    "1900-02-29",
    "2020-04-31",
    "2020-01-01T",
    "2020-01-01Z",
    "2020-01-01T00:00:00",  # a time needs Z or an offset
    "2020-01-01T00:00Z",
    "2020-01-01 00:00:00Z",
    "2020-01-01t00:00:00Z",
    "2020-01-01T00:00:00z",
    "2020-01-01T24:00:00Z",
    "2020-01-01T00:60:00Z",
    "2020-01-01T23:59:60Z",  # no leap seconds
    "2020-01-01T00:00:00.1Z",
    "2020-01-01T00:00:00.12Z",
    "2020-01-01T00:00:00.1234Z",
    "2020-01-01T00:00:00.Z",
    "2020-01-01T00:00:00+01",
    "2020-01-01T00:00:00+01:00",
    "2020-01-01T00:00:00+2400",
    "2020-01-01T00:00:00+0060",
    "2020-01-01T00:00:00Z+0100",
    "2020-01-01T00:00:00.000",
    "2020-01-01\n",
    "2020-01-01T00:00:00Z\n",
    " 2020-01-01",
    "２０２０-01-01",
]


@pytest.mark.parametrize(("text", "ms"), VALID)
def test_valid_literals(text: str, ms: int) -> None:
    d = parse_datetime(text)
    assert type(d) is DateTime and d.ms == ms
    canonical = d.text()
    assert canonical is not None and parse_datetime(canonical) == d


@pytest.mark.parametrize("text", INVALID)
def test_invalid_literals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_datetime(text)
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["datetime"](text)
    assert info.value.kind == "extension"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1970-01-01", "1970-01-01"),
        ("2020-06-15T00:00:00+0000", "2020-06-15"),
        ("2020-06-15T13:45:30+0100", "2020-06-15T12:45:30Z"),
        ("2020-06-15T13:45:30.120Z", "2020-06-15T13:45:30.120Z"),
        ("0000-01-01", "0000-01-01"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
    ],
)
def test_repr_and_json(text: str, canonical: str) -> None:
    d = parse_datetime(text)
    assert d.text() == canonical
    assert repr(d) == f'datetime("{canonical}")'
    assert d.to_json() == {"__extn": {"fn": "datetime", "arg": canonical}}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0000-01-01T00:00:00+0001", "0000-01-01T23:58:00+2359"),
        ("0000-01-01T00:00:00+2359", "0000-01-01T00:00:00+2359"),
        ("9999-12-31T23:59:00-0001", "9999-12-31T00:01:00-2359"),
        ("9999-12-31T23:59:59.999-2359", "9999-12-31T23:59:59.999-2359"),
    ],
)
def test_text_just_outside_years_0000_9999(text: str, canonical: str) -> None:
    """An offset still names instants up to a day beyond the years a date can spell."""
    d = parse_datetime(text)
    assert d.text() == canonical
    assert parse_datetime(canonical) == d
    assert d.to_json() == {"__extn": {"fn": "datetime", "arg": canonical}}


def test_repr_and_json_of_instants_no_string_names() -> None:
    far = DateTime(YEAR_0 - DAY)
    assert far.text() is None
    assert repr(far) == 'datetime("1970-01-01").offset(duration("-719529d"))'
    assert far.to_json() == {
        "__extn": {
            "fn": "offset",
            "args": [
                {"__extn": {"fn": "datetime", "arg": "1970-01-01"}},
                {"__extn": {"fn": "duration", "arg": "-719529d"}},
            ],
        }
    }
    assert DateTime(YEAR_0 - 86_340_000).text() is not None
    assert DateTime(YEAR_0 - 86_340_001).text() is None
    assert DateTime(MAX_MS).text() is None and DateTime(MIN_MS).text() is None
    assert "offset" in repr(DateTime(MAX_MS))


def _dt(text: str) -> DateTime:
    return parse_datetime(text)


def test_offset_and_duration_since() -> None:
    offset, since = METHODS["offset"], METHODS["durationSince"]
    assert offset(_dt("2020-01-01"), parse_duration("1d")) == _dt("2020-01-02")
    assert offset(_dt("2020-01-01"), parse_duration("-1ms")) == _dt("2019-12-31T23:59:59.999Z")
    assert since(_dt("2020-01-02"), _dt("2020-01-01")) == parse_duration("1d")
    assert since(_dt("2020-01-01"), _dt("2020-01-02")) == parse_duration("-1d")
    assert offset(DateTime(MAX_MS - 1), Duration(1)) == DateTime(MAX_MS)
    assert offset(DateTime(MIN_MS + 1), Duration(-1)) == DateTime(MIN_MS)
    for d, dur in [(DateTime(MAX_MS), Duration(1)), (DateTime(MIN_MS), Duration(-1))]:
        with pytest.raises(EvaluationError) as info:
            offset(d, dur)
        assert info.value.kind == "extension"
    with pytest.raises(EvaluationError) as info:
        since(DateTime(MAX_MS), DateTime(-1))
    assert info.value.kind == "extension"
    with pytest.raises(EvaluationError):
        since(DateTime(MIN_MS), DateTime(1))
    assert since(DateTime(MAX_MS), DateTime(0)) == Duration(MAX_MS)


TO_DATE_TIME = [
    # datetime, toDate, toTime (ms)
    ("2020-06-15T13:45:30.123Z", "2020-06-15", 49_530_123),
    ("2020-06-15", "2020-06-15", 0),
    ("1970-01-01T00:00:00.001Z", "1970-01-01", 1),
    ("1969-12-31T23:59:59.999Z", "1969-12-31", DAY - 1),  # before 1970: toward the past
    ("1969-12-31T00:00:00Z", "1969-12-31", 0),
    ("0000-01-01T00:00:00+2359", "-", 60_000),
]


@pytest.mark.parametrize(("text", "date", "time_ms"), TO_DATE_TIME)
def test_to_date_and_to_time(text: str, date: str, time_ms: int) -> None:
    d = _dt(text)
    day = METHODS["toDate"](d)
    if date != "-":
        assert day == _dt(date)
    assert day.ms % DAY == 0 and 0 <= d.ms - day.ms < DAY
    assert METHODS["toTime"](d) == Duration(time_ms)


def test_to_date_overflow_and_extremes() -> None:
    with pytest.raises(EvaluationError) as info:
        METHODS["toDate"](DateTime(MIN_MS))  # midnight before it is below the 64-bit range
    assert info.value.kind == "extension"
    assert METHODS["toDate"](DateTime(MAX_MS)).ms == MAX_MS - MAX_MS % DAY
    assert METHODS["toTime"](DateTime(MIN_MS)) == Duration(MIN_MS % DAY)


def test_ordering_operators() -> None:
    a, b = _dt("2020-01-01"), _dt("2020-01-01T00:00:00.001Z")
    assert compare_ext("<", a, b) and compare_ext("<=", a, b)
    assert compare_ext(">", b, a) and compare_ext(">=", b, a)
    assert compare_ext("<=", a, _dt("2020-01-01T01:00:00+0100"))
    assert not compare_ext("<", a, a)
    for other in (0, "2020-01-01", parse_duration("1d")):
        with pytest.raises(EvaluationError) as info:
            compare_ext("<", a, other)
        assert info.value.kind == "type"
        with pytest.raises(EvaluationError):
            compare_ext("<", other, a)


def test_method_errors() -> None:
    d, dur = _dt("2020-01-01"), parse_duration("1d")
    bad_calls: dict[str, list[tuple[object, ...]]] = {
        "offset": [(d, d), (dur, dur), (d, "1d"), ("2020-01-01", dur), (d, 1)],
        "durationSince": [(d, dur), (dur, d), (d, "2020-01-01")],
        "toDate": [(dur,), ("2020-01-01",)],
        "toTime": [(dur,), (0,)],
    }
    for name, calls in bad_calls.items():
        for args in calls:
            with pytest.raises(EvaluationError) as info:
                METHODS[name](*args)
            assert info.value.kind == "type", (name, args)
    for name, args in [("offset", (d,)), ("durationSince", (d, d, d)), ("toDate", (d, d))]:
        with pytest.raises(EvaluationError) as info:
            METHODS[name](*args)
        assert info.value.kind == "arity"


def test_value_semantics() -> None:
    d = _dt("2020-01-01")
    assert d == _dt("2020-01-01T00:00:00Z") and hash(d) == hash(_dt("2020-01-01T01:00:00+0100"))
    assert d != d.ms and d != "2020-01-01" and d != Duration(d.ms)
    assert not value_eq(DateTime(0), Duration(0))
    assert DateTime.TYPE_NAME == "datetime"
    with pytest.raises(AttributeError):
        d.ms = 0
    with pytest.raises(ValueError):
        DateTime(MAX_MS + 1)


# ---- agreement with cedarpy ----------------------------------------------------------


def _two(lo: int, hi: int) -> st.SearchStrategy[str]:
    """Two digits, mostly in ``[lo, hi]``, sometimes just outside it or malformed."""
    return st.one_of(
        st.integers(lo, hi).map(lambda n: f"{n:02d}"),
        st.integers(lo, hi).map(lambda n: f"{n:02d}"),
        st.integers(lo, hi).map(lambda n: f"{n:02d}"),
        st.sampled_from([lo - 1, hi + 1]).filter(lambda n: n >= 0).map(lambda n: f"{n:02d}"),
        st.text("0123456789", max_size=3),
    )


@st.composite
def _datetime_text(draw: st.DrawFn) -> str:
    year = draw(
        st.one_of(
            st.integers(0, 9999).map(lambda n: f"{n:04d}"),
            st.sampled_from(["0000", "9999", "2000", "1900", "2024", "1969"]),
            st.text("0123456789", max_size=5),
        )
    )
    date = f"{year}-{draw(_two(1, 12))}-{draw(_two(1, 31))}"
    if draw(st.integers(0, 3)) == 0:
        return date + draw(st.sampled_from(["", "", "Z", "\n", "T"]))
    sep = draw(st.sampled_from(["T", "T", "T", "t", " ", ""]))
    time = f"{draw(_two(0, 23))}:{draw(_two(0, 59))}:{draw(_two(0, 59))}"
    millis = draw(
        st.one_of(
            st.just(""),
            st.integers(0, 999).map(lambda n: f".{n:03d}"),
            st.text("0123456789", max_size=4).map(lambda t: "." + t),
        )
    )
    zone = draw(
        st.one_of(
            st.sampled_from(["Z", "Z", "z", "", "+01:00", "+01"]),
            st.builds(
                lambda sign, hh, mm: f"{sign}{hh}{mm}",
                st.sampled_from(["+", "-"]),
                _two(0, 23),
                _two(0, 59),
            ),
        )
    )
    return date + sep + time + millis + zone


datetime_strings = st.one_of(
    _datetime_text(), st.text("0123456789-T:.Z+", max_size=12), st.sampled_from(["0000-01-01"])
)
_offsets = st.one_of(
    st.integers(-(10**13), 10**13),
    st.integers(MIN_MS, MAX_MS),
    st.sampled_from([MIN_MS, MAX_MS, -1, 1, DAY, -DAY]),
).map(lambda n: Duration(n).text())


def _expressions(texts: list[str], offsets: list[str]) -> list[Expr]:
    exprs: list[Expr] = []
    pairs = zip(texts, texts[1:] + texts[:1], offsets, strict=False)
    for a, b, off in pairs:
        exprs.append(constructor_check("datetime", a))
        x, y = Call("datetime", (Lit(a),)), Call("datetime", (Lit(b),))
        dur = Call("duration", (Lit(off),))
        exprs.append(Op("==", x, y))
        exprs.append(Op("<", x, y))
        exprs.append(Op("<=", x, y))
        exprs.append(value_check(Method("durationSince", x, (y,))))
        exprs.append(value_check(Method("toDate", x)))
        exprs.append(value_check(Method("toTime", x)))
        shifted = Method("offset", x, (dur,))
        exprs.append(value_check(shifted))
        exprs.append(value_check(Method("toDate", shifted)))
        exprs.append(value_check(Method("toTime", shifted)))
        exprs.append(value_check(Method("durationSince", shifted, (y,))))
    return exprs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(datetime_strings, min_size=1, max_size=16),
    st.lists(_offsets, min_size=16, max_size=16),
)
def test_agrees_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], texts: list[str], offsets: list[str]
) -> None:
    same_as_cedar(_expressions(texts, offsets))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(MIN_MS, MAX_MS), min_size=1, max_size=10))
def test_any_instant_agrees_with_cedar(
    same_as_cedar: Callable[[Sequence[Expr]], None], instants: list[int]
) -> None:
    """Any 64-bit instant: our repr (a string or the ``offset`` form) and the methods."""
    exprs: list[Expr] = []
    for ms in instants:
        d = Call("datetime", (Lit("1970-01-01"),))
        at = Method("offset", d, (Call("duration", (Lit(Duration(ms).text()),)),))
        exprs += [
            value_check(at),
            value_check(Method("toDate", at)),
            value_check(Method("toTime", at)),
        ]
    same_as_cedar(exprs)


def test_tables_agree_with_cedar(same_as_cedar: Callable[[Sequence[Expr]], None]) -> None:
    """The literal tables above are what the oracle says, too."""
    texts = [t for t, _ in VALID] + INVALID + [t for t, *_ in TO_DATE_TIME if t != "-"]
    offsets = [Duration(n).text() for n in (0, 1, -1, DAY, -DAY, MAX_MS, MIN_MS)]
    same_as_cedar(_expressions(texts, offsets * (len(texts) // len(offsets) + 1)))
