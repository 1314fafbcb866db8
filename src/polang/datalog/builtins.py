"""The value operations that rule bodies call (``X = op(A, B)``).

Each builtin takes the entity facts first, then its arguments, and returns the result or
raises :class:`EvaluationError`: the body fails and the error is the policy's error. These
are the language's primitive operations on values; all control flow (short-circuiting,
``if``, the decision itself) lives in the rules, not here. Both backends call this table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from polang.datalog.facts import EntityFacts
from polang.errors import EvaluationError
from polang.language import extensions
from polang.language.values import (
    LONG_MAX,
    LONG_MIN,
    EntityUID,
    RecordValue,
    SetValue,
    Value,
    type_name,
    value_eq,
    value_repr,
)

Builtin = Callable[..., Any]


def _type_error(expected: str, got: Value) -> EvaluationError:
    return EvaluationError("type", f"type error: expected {expected}, got {type_name(got)}")


def _long(v: Value) -> int:
    if type(v) is not int:
        raise _type_error("Long", v)
    return v


def _checked(n: int, what: str) -> int:
    if n < LONG_MIN or n > LONG_MAX:
        raise EvaluationError("overflow", f"integer overflow in {what}")
    return n


def b_eq(_f: EntityFacts, a: Value, b: Value) -> bool:
    return type(a) is type(b) and bool(a == b)


def b_neq(_f: EntityFacts, a: Value, b: Value) -> bool:
    return not (type(a) is type(b) and a == b)


_OP_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare(op: str, a: Value, b: Value) -> bool:
    """Ordering beyond Long/Long: datetimes and durations (the extension registry decides)."""
    return extensions.compare_ext(_OP_SYMBOL[op], a, b)


def b_lt(_f: EntityFacts, a: Value, b: Value) -> bool:
    if type(a) is int and type(b) is int:
        return a < b
    return _compare("lt", a, b)


def b_le(_f: EntityFacts, a: Value, b: Value) -> bool:
    if type(a) is int and type(b) is int:
        return a <= b
    return _compare("le", a, b)


def b_gt(_f: EntityFacts, a: Value, b: Value) -> bool:
    if type(a) is int and type(b) is int:
        return a > b
    return _compare("gt", a, b)


def b_ge(_f: EntityFacts, a: Value, b: Value) -> bool:
    if type(a) is int and type(b) is int:
        return a >= b
    return _compare("ge", a, b)


def b_add(_f: EntityFacts, a: Value, b: Value) -> int:
    return _checked(_long(a) + _long(b), "addition")


def b_sub(_f: EntityFacts, a: Value, b: Value) -> int:
    return _checked(_long(a) - _long(b), "subtraction")


def b_mul(_f: EntityFacts, a: Value, b: Value) -> int:
    return _checked(_long(a) * _long(b), "multiplication")


def b_neg(_f: EntityFacts, a: Value) -> int:
    return _checked(-_long(a), "negation")


def _entity(v: Value) -> EntityUID:
    if type(v) is not EntityUID:
        raise _type_error("entity", v)
    return v


def b_in(f: EntityFacts, a: Value, b: Value) -> bool:
    """``a in b``: ``b`` an entity or a set of entities; reflexive and transitive."""
    ea = _entity(a)
    if type(b) is EntityUID:
        return ea == b or b in f.ancestors_of(ea)
    if type(b) is SetValue:
        targets = list(b)
        for t in targets:
            if type(t) is not EntityUID:
                raise _type_error("set of entities", t)
        if ea in b.keys:
            return True
        anc = f.ancestors_of(ea)
        return any(t in anc for t in targets)
    raise _type_error("entity or set of entities", b)


def b_has_attr(f: EntityFacts, obj: Value, name: str) -> bool:
    t = type(obj)
    if t is EntityUID:
        e = f.get(obj)
        return e is not None and name in e.attrs
    if t is RecordValue:
        return name in obj.fields
    raise _type_error("entity or record", obj)


def b_get_attr(f: EntityFacts, obj: Value, name: str) -> Value:
    t = type(obj)
    if t is EntityUID:
        e = f.get(obj)
        if e is None:
            raise EvaluationError("entity", f"entity {obj} does not exist")
        try:
            return e.attrs[name]
        except KeyError:
            raise EvaluationError(
                "attribute", f"entity {obj} does not have the attribute `{name}`"
            ) from None
    if t is RecordValue:
        try:
            return obj.fields[name]
        except KeyError:
            raise EvaluationError(
                "attribute", f"record does not have the attribute `{name}`"
            ) from None
    raise _type_error("entity or record", obj)


_LIKE_TOKENS = re.compile(r"\\.?|\*", re.DOTALL)


@lru_cache(maxsize=4096)
def _like_segments(pattern: str) -> tuple[str, ...]:
    """The literal text between a pattern's wildcards (``\\*`` and ``\\\\`` are literal
    characters): ``a*b*`` is ``("a", "b", "")``; no wildcard, one segment."""
    segments: list[str] = []
    current: list[str] = []
    pos = 0
    for m in _LIKE_TOKENS.finditer(pattern):
        current.append(pattern[pos : m.start()])
        token = m.group()
        if token == "*":
            segments.append("".join(current))
            current = []
        else:  # an escaped character (a lone trailing backslash is itself)
            current.append(token[1:] or "\\")
        pos = m.end()
    current.append(pattern[pos:])
    segments.append("".join(current))
    return tuple(segments)


def like_match(s: str, segments: tuple[str, ...]) -> bool:
    """Whether ``s`` matches the pattern of these segments, in linear time: the first
    must start it, the last end it, and each one between is found leftmost after the one
    before (for ``*``-only patterns the leftmost match is always a right choice). Never a
    backtracking regular expression: ``*a*a*a*a*b`` against 200 ``a``s took seconds."""
    first = segments[0]
    if len(segments) == 1:
        return s == first
    last = segments[-1]
    if len(first) + len(last) > len(s) or not s.startswith(first) or not s.endswith(last):
        return False
    pos, end = len(first), len(s) - len(last)
    find = s.find
    for seg in segments[1:-1]:
        k = find(seg, pos, end)
        if k < 0:
            return False
        pos = k + len(seg)
    return True


def b_like(_f: EntityFacts, s: Value, pattern: str) -> bool:
    if type(s) is not str:
        raise _type_error("String", s)
    return like_match(s, _like_segments(pattern))


def b_is_type(_f: EntityFacts, v: Value, entity_type: str) -> bool:
    return _entity(v).type == entity_type


def b_make_set(_f: EntityFacts, *elements: Value) -> SetValue:
    return SetValue(elements)


def b_make_record(_f: EntityFacts, *args: Any) -> RecordValue:
    *values, keys = args
    return RecordValue(dict(zip(keys, values, strict=True)))


# -- methods on core types ------------------------------------------------------------------


def _set(v: Value) -> SetValue:
    if type(v) is not SetValue:
        raise _type_error("Set", v)
    return v


def m_contains(_f: EntityFacts, s: Value, x: Value) -> bool:
    return _set(s).contains(x)


def m_contains_all(_f: EntityFacts, s: Value, other: Value) -> bool:
    return _set(other).keys <= _set(s).keys


def m_contains_any(_f: EntityFacts, s: Value, other: Value) -> bool:
    return not _set(s).keys.isdisjoint(_set(other).keys)


def m_is_empty(_f: EntityFacts, s: Value) -> bool:
    return len(_set(s)) == 0


def _tag_key(k: Value) -> str:
    if type(k) is not str:
        raise _type_error("String", k)
    return k


def m_has_tag(f: EntityFacts, e: Value, key: Value) -> bool:
    uid = _entity(e)
    k = _tag_key(key)
    ent = f.get(uid)
    return ent is not None and k in ent.tags


def m_get_tag(f: EntityFacts, e: Value, key: Value) -> Value:
    uid = _entity(e)
    k = _tag_key(key)
    ent = f.get(uid)
    if ent is None:
        raise EvaluationError("entity", f"entity {uid} does not exist")
    try:
        return ent.tags[k]
    except KeyError:
        raise EvaluationError(
            "tag", f"entity {uid} does not have the tag {value_repr(k)}"
        ) from None


CORE_METHODS: dict[str, Builtin] = {
    "contains": m_contains,
    "containsAll": m_contains_all,
    "containsAny": m_contains_any,
    "isEmpty": m_is_empty,
    "hasTag": m_has_tag,
    "getTag": m_get_tag,
}

_ARITY = {"contains": 1, "containsAll": 1, "containsAny": 1, "isEmpty": 0, "hasTag": 1, "getTag": 1}


def _method(name: str) -> Builtin:
    core = CORE_METHODS.get(name)
    if core is not None:
        arity = _ARITY[name]

        def call_core(f: EntityFacts, recv: Value, *args: Value) -> Value:
            if len(args) != arity:
                raise EvaluationError(
                    "arity", f"`{name}` takes {arity} argument(s), got {len(args)}"
                )
            return core(f, recv, *args)

        return call_core
    ext = extensions.METHODS.get(name)
    if ext is None:

        def unknown(_f: EntityFacts, *_args: Value) -> Value:
            raise EvaluationError("unknown", f"unknown method `{name}`")

        return unknown

    def call_ext(_f: EntityFacts, *args: Value) -> Value:
        return ext(*args)

    return call_ext


def _function(name: str) -> Builtin:
    fn = extensions.FUNCTIONS.get(name)
    if fn is None:

        def unknown(_f: EntityFacts, *_args: Value) -> Value:
            raise EvaluationError("unknown", f"unknown extension function `{name}`")

        return unknown

    def call_fn(_f: EntityFacts, *args: Value) -> Value:
        return fn(*args)

    return call_fn


# -- scope tests (succeed or fail; never errors) -------------------------------------------


def s_scope_in(f: EntityFacts, a: Value, b: EntityUID) -> bool:
    return type(a) is EntityUID and (a == b or b in f.ancestors_of(a))


def s_scope_in_any(f: EntityFacts, a: Value, bs: frozenset[EntityUID]) -> bool:
    if type(a) is not EntityUID:
        return False
    return a in bs or not bs.isdisjoint(f.ancestors_of(a))


def s_scope_is(_f: EntityFacts, a: Value, t: str) -> bool:
    return type(a) is EntityUID and a.type == t


BUILTINS: dict[str, Builtin] = {
    "eq": b_eq,
    "neq": b_neq,
    "lt": b_lt,
    "le": b_le,
    "gt": b_gt,
    "ge": b_ge,
    "add": b_add,
    "sub": b_sub,
    "mul": b_mul,
    "neg": b_neg,
    "in": b_in,
    "has_attr": b_has_attr,
    "get_attr": b_get_attr,
    "like": b_like,
    "is_type": b_is_type,
    "make_set": b_make_set,
    "make_record": b_make_record,
    "scope_in": s_scope_in,
    "scope_in_any": s_scope_in_any,
    "scope_is": s_scope_is,
}

TESTS = frozenset({"scope_in", "scope_in_any", "scope_is"})
"""Builtins that only succeed or fail (no output): a false result is not an error."""


def direct(op: str, nargs: int) -> tuple[Builtin, bool]:
    """The implementation of ``op`` for a call site with ``nargs`` arguments (receiver
    included), without the checks that the call site already settles.

    Returns ``(fn, takes_facts)``: extension functions and methods do not take the facts.
    A core method called with the wrong number of arguments keeps its checking wrapper,
    so the error stays an evaluation error of that policy.
    """
    if op.startswith("method:"):
        name = op[7:]
        core = CORE_METHODS.get(name)
        if core is not None and _ARITY[name] == nargs - 1:
            return core, True
        ext = extensions.METHODS.get(name)
        if core is None and ext is not None:
            return ext, False
    elif op.startswith("function:"):
        fn = extensions.FUNCTIONS.get(op[9:])
        if fn is not None:
            return fn, False
    return builtin(op), True


def builtin(op: str) -> Builtin:
    """The implementation of ``op`` (``method:NAME`` and ``function:NAME`` included)."""
    if op.startswith("method:"):
        return _method(op[7:])
    if op.startswith("function:"):
        return _function(op[9:])
    try:
        return BUILTINS[op]
    except KeyError:
        raise ValueError(f"unknown builtin {op!r}") from None


__all__ = ["BUILTINS", "TESTS", "builtin", "direct", "value_eq"]
