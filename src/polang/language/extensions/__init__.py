"""The language's extension types and functions, behind one registry.

The evaluator, the validator and the entity-JSON parser use only the names defined here:

- :data:`FUNCTIONS`: the constructors called function-style (``decimal("1.5")``);
- :data:`METHODS`: the methods called on a receiver (``ip(...).isInRange(...)``), each
  taking ``(receiver, *args)``;
- :func:`compare_ext`: ``<``, ``<=``, ``>``, ``>=`` (Longs, datetimes and durations only:
  decimals and IP addresses are not ordered by the operators, only by their methods);
- :func:`parse_extension_value` / :func:`call_function`: the ``__extn`` escapes of
  entity JSON (``{"fn": "ip", "arg": "10.0.0.1"}`` and ``{"fn": "offset", "args": [...]}``);
- :data:`SIGNATURES`: every function's calling style and types, for the validator.

Errors inside evaluation are :class:`~polang.errors.EvaluationError` with ``kind`` one of
:data:`KIND_TYPE` (a wrong argument type), :data:`KIND_ARITY` (a wrong number of
arguments) or :data:`KIND_EXTENSION` (an unparsable string, or an overflow in datetime
arithmetic), as the language distinguishes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from polang.errors import EvaluationError
from polang.language.extensions.datetime import DateTime, parse_datetime
from polang.language.extensions.decimal import Decimal, parse_decimal
from polang.language.extensions.duration import Duration, parse_duration
from polang.language.extensions.ipaddr import IPAddr, parse_ipaddr
from polang.language.values import Value, type_name

__all__ = [
    "CONSTRUCTOR_OF_TYPE",
    "EXTENSION_CLASSES",
    "EXTENSION_TYPE_OF_FUNCTION",
    "FUNCTIONS",
    "KIND_ARITY",
    "KIND_EXTENSION",
    "KIND_TYPE",
    "METHODS",
    "ORDERED",
    "SIGNATURES",
    "DateTime",
    "Decimal",
    "Duration",
    "IPAddr",
    "Signature",
    "call_function",
    "compare_ext",
    "is_extension_value",
    "parse_extension_value",
]

KIND_TYPE = "type"
KIND_ARITY = "arity"
KIND_EXTENSION = "extension"

EXTENSION_TYPE_OF_FUNCTION: dict[str, str] = {
    "decimal": "decimal",
    "ip": "ipaddr",
    "datetime": "datetime",
    "duration": "duration",
}
"""Constructor name -> the extension type it builds."""

CONSTRUCTOR_OF_TYPE: dict[str, str] = {t: f for f, t in EXTENSION_TYPE_OF_FUNCTION.items()}
"""Extension type name -> its constructor (schema-directed parsing turns strings into values)."""

EXTENSION_CLASSES: dict[str, type] = {
    "decimal": Decimal,
    "ipaddr": IPAddr,
    "datetime": DateTime,
    "duration": Duration,
}
"""Extension type name -> the Python class of its values."""

_EXT_CLASSES = frozenset(EXTENSION_CLASSES.values())

ORDERED: frozenset[type] = frozenset({int, DateTime, Duration})
"""Types the operators ``<``, ``<=``, ``>``, ``>=`` accept (both operands the same type)."""


def is_extension_value(v: Value) -> bool:
    """Whether ``v`` is a value of one of the extension types."""
    return type(v) in _EXT_CLASSES


class Signature(NamedTuple):
    """How a function is called and its types (``params`` include a method's receiver).

    Type names are the language's: ``String``, ``Long``, ``Bool`` and the extension type
    names ``decimal``, ``ipaddr``, ``datetime``, ``duration``.
    """

    style: str  # "function" or "method"
    params: tuple[str, ...]
    returns: str


# ---------------------------------------------------------------------------------------
# Error helpers


def _type_error(fn: str, expected: str, got: Value) -> NoReturn:
    advice = ""
    if type(got) is str and expected in CONSTRUCTOR_OF_TYPE:
        advice = f" (maybe you forgot to apply the `{CONSTRUCTOR_OF_TYPE[expected]}` constructor?)"
    raise EvaluationError(
        KIND_TYPE, f"type error in `{fn}`: expected {expected}, got {type_name(got)}{advice}"
    )


def _arity(fn: str, args: tuple[Value, ...], expected: int) -> None:
    if len(args) != expected:
        raise EvaluationError(
            KIND_ARITY,
            f"wrong number of arguments provided to extension function `{fn}`: "
            f"expected {expected}, got {len(args)}",
        )


def _extension_error(fn: str, message: str) -> NoReturn:
    raise EvaluationError(KIND_EXTENSION, f"error while evaluating `{fn}`: {message}")


# ---------------------------------------------------------------------------------------
# Constructors


def _constructor(name: str, parse: Callable[[str], Any]) -> Callable[..., Value]:
    def construct(*args: Value) -> Value:
        _arity(name, args, 1)
        arg = args[0]
        if type(arg) is not str:
            _type_error(name, "String", arg)
        try:
            return parse(arg)
        except ValueError as e:
            _extension_error(name, str(e))

    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"The `{name}` constructor: one String argument."
    return construct


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "decimal": _constructor("decimal", parse_decimal),
    "ip": _constructor("ip", parse_ipaddr),
    "datetime": _constructor("datetime", parse_datetime),
    "duration": _constructor("duration", parse_duration),
}
"""Function-style extension functions (the constructors), by name."""


# ---------------------------------------------------------------------------------------
# Methods: (receiver, *args); the receiver counts as the first argument for arity.


def _typed(name: str, args: tuple[Value, ...], types: tuple[type, ...]) -> None:
    _arity(name, args, len(types))
    for arg, cls in zip(args, types, strict=True):
        if type(arg) is not cls:
            _type_error(name, cls.TYPE_NAME, arg)  # type: ignore[attr-defined]


def _decimal_method(name: str, op: Callable[[Decimal, Decimal], bool]) -> Callable[..., Value]:
    def method(*args: Any) -> Value:
        _typed(name, args, (Decimal, Decimal))
        return op(args[0], args[1])

    method.__name__ = method.__qualname__ = name
    return method


def _unary_method(name: str, cls: type, op: Callable[[Any], Value]) -> Callable[..., Value]:
    def method(*args: Any) -> Value:
        _typed(name, args, (cls,))
        return op(args[0])

    method.__name__ = method.__qualname__ = name
    return method


def _is_in_range(*args: Any) -> Value:
    _typed("isInRange", args, (IPAddr, IPAddr))
    return args[0].is_in_range(args[1])


def _offset(*args: Any) -> Value:
    _typed("offset", args, (DateTime, Duration))
    result = args[0].offset(args[1])
    if result is None:
        _extension_error("offset", f"overflow when adding {args[1]!r} to {args[0]!r}")
    return result


def _duration_since(*args: Any) -> Value:
    _typed("durationSince", args, (DateTime, DateTime))
    result = args[0].duration_since(args[1])
    if result is None:
        _extension_error(
            "durationSince", f"overflow computing the duration from {args[1]!r} to {args[0]!r}"
        )
    return result


def _to_date(*args: Any) -> Value:
    _typed("toDate", args, (DateTime,))
    result = args[0].to_date()
    if result is None:
        _extension_error("toDate", f"overflow computing the date of {args[0]!r}")
    return result


METHODS: dict[str, Callable[..., Value]] = {
    "lessThan": _decimal_method("lessThan", Decimal.less_than),
    "lessThanOrEqual": _decimal_method("lessThanOrEqual", Decimal.less_than_or_equal),
    "greaterThan": _decimal_method("greaterThan", Decimal.greater_than),
    "greaterThanOrEqual": _decimal_method("greaterThanOrEqual", Decimal.greater_than_or_equal),
    "isIpv4": _unary_method("isIpv4", IPAddr, IPAddr.is_ipv4),
    "isIpv6": _unary_method("isIpv6", IPAddr, IPAddr.is_ipv6),
    "isLoopback": _unary_method("isLoopback", IPAddr, IPAddr.is_loopback),
    "isMulticast": _unary_method("isMulticast", IPAddr, IPAddr.is_multicast),
    "isInRange": _is_in_range,
    "offset": _offset,
    "durationSince": _duration_since,
    "toDate": _to_date,
    "toTime": _unary_method("toTime", DateTime, DateTime.to_time),
    "toMilliseconds": _unary_method("toMilliseconds", Duration, Duration.to_milliseconds),
    "toSeconds": _unary_method("toSeconds", Duration, Duration.to_seconds),
    "toMinutes": _unary_method("toMinutes", Duration, Duration.to_minutes),
    "toHours": _unary_method("toHours", Duration, Duration.to_hours),
    "toDays": _unary_method("toDays", Duration, Duration.to_days),
}
"""Method-style extension functions, by name, taking ``(receiver, *args)``."""


def _sig(style: str, *types: str) -> Signature:
    return Signature(style, types[:-1], types[-1])


SIGNATURES: dict[str, Signature] = {
    "decimal": _sig("function", "String", "decimal"),
    "ip": _sig("function", "String", "ipaddr"),
    "datetime": _sig("function", "String", "datetime"),
    "duration": _sig("function", "String", "duration"),
    "lessThan": _sig("method", "decimal", "decimal", "Bool"),
    "lessThanOrEqual": _sig("method", "decimal", "decimal", "Bool"),
    "greaterThan": _sig("method", "decimal", "decimal", "Bool"),
    "greaterThanOrEqual": _sig("method", "decimal", "decimal", "Bool"),
    "isIpv4": _sig("method", "ipaddr", "Bool"),
    "isIpv6": _sig("method", "ipaddr", "Bool"),
    "isLoopback": _sig("method", "ipaddr", "Bool"),
    "isMulticast": _sig("method", "ipaddr", "Bool"),
    "isInRange": _sig("method", "ipaddr", "ipaddr", "Bool"),
    "offset": _sig("method", "datetime", "duration", "datetime"),
    "durationSince": _sig("method", "datetime", "datetime", "duration"),
    "toDate": _sig("method", "datetime", "datetime"),
    "toTime": _sig("method", "datetime", "duration"),
    "toMilliseconds": _sig("method", "duration", "Long"),
    "toSeconds": _sig("method", "duration", "Long"),
    "toMinutes": _sig("method", "duration", "Long"),
    "toHours": _sig("method", "duration", "Long"),
    "toDays": _sig("method", "duration", "Long"),
}
"""Every extension function's style and types (``params`` include a method's receiver)."""


# ---------------------------------------------------------------------------------------
# Ordering operators


def compare_ext(op: str, a: Any, b: Any) -> bool:
    """``a <op> b`` for ``op`` in ``<``, ``<=``, ``>``, ``>=``.

    Both operands must be Longs, both datetimes or both durations; anything else (decimals
    and IP addresses included) is a type error, as in the language.
    """
    ta = type(a)
    if ta not in ORDERED:
        raise EvaluationError(
            KIND_TYPE,
            f"type error in `{op}`: expected one of [Long, datetime, duration], got {type_name(a)}",
        )
    if type(b) is not ta:
        raise EvaluationError(
            KIND_TYPE, f"type error in `{op}`: expected {type_name(a)}, got {type_name(b)}"
        )
    x: int = a if ta is int else a.ms
    y: int = b if ta is int else b.ms
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    raise ValueError(f"not an ordering operator: {op!r}")


# ---------------------------------------------------------------------------------------
# Entity JSON


def call_function(fn: str, args: Sequence[Value]) -> Value:
    """Apply the extension function ``fn`` (constructor or method, receiver first) to
    already-parsed ``args``: the ``{"__extn": {"fn": ..., "args": [...]}}`` escape.

    Raises ``ValueError`` with a clear message on an unknown function or a failed call;
    the entity-JSON parser wraps it with the JSON path.
    """
    impl = FUNCTIONS.get(fn) or METHODS.get(fn)
    if impl is None:
        raise ValueError(f"unknown extension function `{fn}`")
    try:
        return impl(*args)
    except EvaluationError as e:
        raise ValueError(e.message) from None


def parse_extension_value(fn: str, arg: Value) -> Value:
    """The value of ``{"__extn": {"fn": fn, "arg": arg}}`` (e.g. ``("ip", "10.0.0.0/8")``).

    Raises ``ValueError`` with a clear message when ``fn`` is unknown or ``arg`` does not
    parse; the entity-JSON parser wraps it with the JSON path.
    """
    return call_function(fn, (arg,))
