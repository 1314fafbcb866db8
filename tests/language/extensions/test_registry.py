"""The extension registry: the only surface the evaluator, validator and entity parser use."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polang.errors import EvaluationError
from polang.language import extensions as ext
from polang.language.extensions import (
    CONSTRUCTOR_OF_TYPE,
    EXTENSION_CLASSES,
    EXTENSION_TYPE_OF_FUNCTION,
    FUNCTIONS,
    METHODS,
    SIGNATURES,
    DateTime,
    Decimal,
    Duration,
    IPAddr,
    call_function,
    compare_ext,
    is_extension_value,
    parse_extension_value,
)
from polang.language.values import EntityUID, RecordValue, SetValue, type_name, value_to_json

_TYPE_OF_NAME = {"String": str, "Long": int, "Bool": bool, **EXTENSION_CLASSES}


def test_names_are_consistent() -> None:
    assert EXTENSION_TYPE_OF_FUNCTION == {
        "decimal": "decimal",
        "ip": "ipaddr",
        "datetime": "datetime",
        "duration": "duration",
    }
    assert set(FUNCTIONS) == set(EXTENSION_TYPE_OF_FUNCTION)
    assert {CONSTRUCTOR_OF_TYPE[t] for t in EXTENSION_CLASSES} == set(FUNCTIONS)
    for type_name_, cls in EXTENSION_CLASSES.items():
        assert type_name_ == cls.TYPE_NAME  # type: ignore[attr-defined]
    assert set(SIGNATURES) == set(FUNCTIONS) | set(METHODS)
    assert not set(FUNCTIONS) & set(METHODS)
    for name, sig in SIGNATURES.items():
        assert sig.style == ("function" if name in FUNCTIONS else "method")
        assert all(p in _TYPE_OF_NAME for p in sig.params)
        assert sig.returns in _TYPE_OF_NAME


# One well-typed argument list per function: each must return its declared type.
_SAMPLES: dict[str, tuple[Any, ...]] = {
    "decimal": ("1.5",),
    "ip": ("10.0.0.1",),
    "datetime": ("2020-01-01",),
    "duration": ("1h",),
}
_VALUES: dict[str, Any] = {
    "decimal": Decimal(15_000),
    "ipaddr": IPAddr(False, 0x0A000001, 32),
    "datetime": DateTime(0),
    "duration": Duration(3_600_000),
    "String": "x",
    "Long": 7,
    "Bool": True,
}
_WRONG: list[Any] = [
    *_VALUES.values(),
    EntityUID("User", "alice"),
    SetValue([1]),
    RecordValue({"a": 1}),
]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_function_follows_its_signature(name: str) -> None:
    sig = SIGNATURES[name]
    impl = FUNCTIONS.get(name) or METHODS[name]
    args = _SAMPLES.get(name) or tuple(_VALUES[p] for p in sig.params)
    result = impl(*args)
    assert type(result) is _TYPE_OF_NAME[sig.returns]
    # Every wrong type in every position is a type error, never a Python exception.
    for i, param in enumerate(sig.params):
        for wrong in _WRONG:
            if type(wrong) is _TYPE_OF_NAME[param]:
                continue
            bad = list(args)
            bad[i] = wrong
            with pytest.raises(EvaluationError) as info:
                impl(*bad)
            assert info.value.kind == "type"
            assert type_name(wrong) in info.value.message
    # Too few and too many arguments.
    for bad_args in (args[:-1], (*args, args[-1])):
        with pytest.raises(EvaluationError) as info:
            impl(*bad_args)
        assert info.value.kind == "arity"
        assert f"`{name}`" in info.value.message


def test_type_error_advises_the_constructor_for_strings() -> None:
    with pytest.raises(EvaluationError) as info:
        METHODS["isInRange"](_VALUES["ipaddr"], "10.0.0.0/8")
    assert "`ip` constructor" in info.value.message


def test_constructor_errors_name_the_function_and_string() -> None:
    with pytest.raises(EvaluationError) as info:
        FUNCTIONS["ip"]("10.0.0.256")
    assert info.value.kind == "extension"
    assert "`ip`" in info.value.message and "10.0.0.256" in info.value.message


def test_compare_ext() -> None:
    assert compare_ext("<", 1, 2) and compare_ext(">=", 2, 2) and not compare_ext(">", 1, 2)
    assert compare_ext("<=", Duration(1), Duration(1))
    assert compare_ext(">", DateTime(1), DateTime(0))
    refused = [
        (Decimal(1), Decimal(2)),
        (IPAddr(False, 1, 32), IPAddr(False, 2, 32)),
        ("a", "b"),
        (True, False),
        (1, True),
        (DateTime(0), Duration(0)),
        (Duration(0), 0),
        (0, DateTime(0)),
        (EntityUID("A", "a"), EntityUID("A", "b")),
    ]
    for a, b in refused:
        for op in ("<", "<=", ">", ">="):
            with pytest.raises(EvaluationError) as info:
                compare_ext(op, a, b)
            assert info.value.kind == "type"
    with pytest.raises(ValueError):
        compare_ext("==", 1, 1)


def test_is_extension_value() -> None:
    assert all(is_extension_value(_VALUES[t]) for t in EXTENSION_CLASSES)
    assert not any(is_extension_value(v) for v in ("1.5", 1, True, SetValue()))


def test_parse_extension_value() -> None:
    assert parse_extension_value("decimal", "1.5") == Decimal(15_000)
    assert parse_extension_value("ip", "10.0.0.1/32") == _VALUES["ipaddr"]
    assert parse_extension_value("datetime", "1970-01-01") == DateTime(0)
    assert parse_extension_value("duration", "60m") == _VALUES["duration"]
    for fn, arg, words in [
        ("decimal", "1.23456", "digits"),
        ("ip", "01.0.0.0", "01.0.0.0"),
        ("duration", "1h1d", "1h1d"),
        ("datetime", "2020-02-30", "2020-02-30"),
        ("decimal", 1, "String"),
        ("nosuch", "x", "unknown extension function `nosuch`"),
        ("offset", "x", "expected 2"),
    ]:
        with pytest.raises(ValueError) as info:
            parse_extension_value(fn, arg)
        assert type(info.value) is ValueError
        assert words in str(info.value)


def test_call_function_multi_argument_form() -> None:
    """``{"fn": "offset", "args": [...]}``, as entity JSON writes far datetimes."""
    epoch = parse_extension_value("datetime", "1970-01-01")
    shift = parse_extension_value("duration", "-55819152000000ms")
    at = call_function("offset", [epoch, shift])
    assert at == DateTime(-55_819_152_000_000)
    assert call_function("isInRange", [_VALUES["ipaddr"], IPAddr(False, 0x0A000000, 8)]) is True
    with pytest.raises(ValueError, match="overflow"):
        call_function("offset", [DateTime(2**63 - 1), Duration(1)])
    with pytest.raises(ValueError, match="expected 2, got 1"):
        call_function("offset", [epoch])


def _from_json(j: dict[str, Any]) -> Any:
    """A minimal ``__extn`` reader, as the entity parser does it, to check ``to_json``."""
    escape = j["__extn"]
    if "arg" in escape:
        return parse_extension_value(escape["fn"], escape["arg"])
    return call_function(escape["fn"], [_from_json(a) for a in escape["args"]])


_any_value = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(Decimal),
    st.integers(-(2**63), 2**63 - 1).map(Duration),
    st.integers(-(2**63), 2**63 - 1).map(DateTime),
    st.integers(-(10**16), 10**16).map(DateTime),
    st.builds(lambda n, p: IPAddr(False, n, p), st.integers(0, 2**32 - 1), st.integers(0, 32)),
    st.builds(lambda n, p: IPAddr(True, n, p), st.integers(0, 2**128 - 1), st.integers(0, 128)),
)


@given(_any_value)
def test_json_round_trip(v: Any) -> None:
    j = v.to_json()
    assert value_to_json(v) == j
    back = _from_json(j)
    assert type(back) is type(v) and back == v and hash(back) == hash(v)
    if "arg" in j["__extn"]:
        assert j["__extn"]["fn"] == CONSTRUCTOR_OF_TYPE[v.TYPE_NAME]
        assert repr(v) == f'{j["__extn"]["fn"]}("{j["__extn"]["arg"]}")'


def test_module_exports() -> None:
    for name in ext.__all__:
        assert hasattr(ext, name), name
