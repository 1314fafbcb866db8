"""Values near others: the boundary value that satisfies a comparison, a ``like``, an extension
method."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from polang.datalog.facts import EntityFacts
from polang.language.extensions import DateTime, Decimal, Duration, IPAddr
from polang.language.values import (
    LONG_MAX,
    LONG_MIN,
    EntityUID,
    SetValue,
)

if TYPE_CHECKING:
    pass


# ======================================================================== values near others


def _succ(v: Any) -> Any:
    """The next value of an ordered type (``None`` at the end of its range)."""
    return _step(v, 1)


def _pred(v: Any) -> Any:
    return _step(v, -1)


def _step(v: Any, d: int) -> Any:
    t = type(v)
    try:
        if t is int:
            return v + d if LONG_MIN <= v + d <= LONG_MAX else None
        if t is DateTime:
            return DateTime(v.ms + d)
        if t is Duration:
            return Duration(v.ms + d)
        if t is Decimal:
            return Decimal(v.scaled + d)
    except (ValueError, OverflowError):
        return None
    return None


_IP_SAMPLES = ("10.0.0.1", "127.0.0.1", "224.0.0.1", "192.168.0.1", "::1", "2001:db8::1", "ff02::1")


def _ips() -> list[IPAddr]:
    from polang.language.extensions.ipaddr import parse_ipaddr

    return [parse_ipaddr(s) for s in _IP_SAMPLES]


def _other_than(v: Any, facts: EntityFacts | None = None) -> list[Any]:
    """Values of ``v``'s type that differ from it (a few, the simplest first)."""
    t = type(v)
    if t is bool:
        return [not v]
    if t is int:
        return [x for x in (_succ(v), _pred(v)) if x is not None]
    if t is str:
        return ["" if v else "x", v + "x"]
    if t in (DateTime, Duration, Decimal):
        return [x for x in (_succ(v), _pred(v)) if x is not None]
    if t is IPAddr:
        return [x for x in _ips() if x != v]
    if t is SetValue:
        return [SetValue()] if len(v) else []
    if t is EntityUID and facts is not None:
        return _entities_of_type(facts, v.type, exclude=v)[:2]
    return []


def _entities_of_type(
    facts: EntityFacts,
    type_name: str,
    exclude: EntityUID | None = None,
    scan: int = 20000,
    limit: int = 3,
) -> list[EntityUID]:
    """A few stored entities of a type (from the first ``scan`` entities)."""
    out: list[EntityUID] = []
    for e in itertools.islice(facts.entities, scan):
        if e.uid.type == type_name and e.uid != exclude:
            out.append(e.uid)
            if len(out) >= limit:
                break
    return out


def _like_sample(pattern: str) -> list[str]:
    """Strings that may match ``pattern`` (the lowering's text: ``*`` wildcard, ``\\``
    escapes): the literal characters alone, and with an ``x`` for each wildcard."""
    plain: list[str] = []
    filled: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            plain.append(pattern[i + 1])
            filled.append(pattern[i + 1])
            i += 2
            continue
        if ch == "*":
            filled.append("x")
        else:
            plain.append(ch)
            filled.append(ch)
        i += 1
    return ["".join(plain), "".join(filled)]


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_BUILTIN_OF = {"==": "eq", "!=": "neq", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _relation_values(rel: str, other: Any, facts: EntityFacts) -> list[Any]:
    """Values ``x`` with ``x rel other`` (the boundary first)."""
    if rel == "==":
        return [other]
    if rel == "!=":
        return _other_than(other, facts)
    if type(other) not in (int, DateTime, Duration):
        return []
    if rel == "<":
        v = _pred(other)
    elif rel == ">":
        v = _succ(other)
    else:
        v = other
    return [] if v is None else [v]


_DECIMAL_METHODS = {
    "lessThan": "<",
    "lessThanOrEqual": "<=",
    "greaterThan": ">",
    "greaterThanOrEqual": ">=",
}


def _decimal_values(rel: str, other: Decimal) -> list[Any]:
    if rel == "<":
        v = _pred(other)
    elif rel == ">":
        v = _succ(other)
    elif rel in ("<=", ">="):
        v = other
    else:
        return []
    return [] if v is None else [v]
