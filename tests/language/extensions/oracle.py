"""Differential-testing helpers: small expressions evaluated by cedarpy and by our registry.

Each expression is built once as a tiny tree, rendered to policy text for cedarpy (the Rust
engine, our oracle) and evaluated with :mod:`polang.language.extensions` for us. Many
expressions go to cedarpy as one policy set (one policy each), so a batch costs one call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from polang.errors import EvaluationError
from polang.language.extensions import FUNCTIONS, METHODS, compare_ext
from polang.language.values import value_eq, value_repr

ERROR = "error"
"""The outcome of an expression whose evaluation fails."""

_REQUEST = {
    "principal": 'User::"p"',
    "action": 'Action::"a"',
    "resource": 'Res::"r"',
    "context": {},
}
_POLICY_ID = re.compile(r"policy `?(policy\d+)`?")


class Expr:
    """An expression node: :meth:`text` for cedarpy, :meth:`ours` for our evaluation."""

    def text(self) -> str:
        raise NotImplementedError

    def ours(self) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Lit(Expr):
    value: Any

    def text(self) -> str:
        v = self.value
        if type(v) is int and v < 0:
            return f"(-{-v})"
        return value_repr(v)

    def ours(self) -> Any:
        return self.value


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]

    def text(self) -> str:
        return f"{self.fn}({', '.join(a.text() for a in self.args)})"

    def ours(self) -> Any:
        return FUNCTIONS[self.fn](*(a.ours() for a in self.args))


@dataclass(frozen=True)
class Method(Expr):
    name: str
    receiver: Expr
    args: tuple[Expr, ...] = ()

    def text(self) -> str:
        return f"{self.receiver.text()}.{self.name}({', '.join(a.text() for a in self.args)})"

    def ours(self) -> Any:
        recv = self.receiver.ours()
        return METHODS[self.name](recv, *(a.ours() for a in self.args))


@dataclass(frozen=True)
class Op(Expr):
    op: str
    left: Expr
    right: Expr

    def text(self) -> str:
        return f"({self.left.text()} {self.op} {self.right.text()})"

    def ours(self) -> Any:
        a, b = self.left.ours(), self.right.ours()
        if self.op == "==":
            return value_eq(a, b)
        if self.op == "!=":
            return not value_eq(a, b)
        return compare_ext(self.op, a, b)


@dataclass(frozen=True)
class Raw(Expr):
    """Policy text for cedarpy with its value known here (to re-parse our own ``repr``)."""

    source: str
    value: Any

    def text(self) -> str:
        return self.source

    def ours(self) -> Any:
        return self.value


def value_check(e: Expr) -> Expr:
    """``e == <our value of e>``: cedarpy agrees exactly when it computes the same value.

    Our value is written with its ``repr`` (so our policy-syntax output is re-parsed by the
    oracle too); when our evaluation fails the check is ``e == 0``, which must fail as well.
    """
    try:
        v = e.ours()
    except EvaluationError:
        return Op("==", e, Lit(0))
    if type(v) in (bool, int, str):
        return Op("==", e, Lit(v))
    return Op("==", e, Raw(repr(v), v))


def constructor_check(fn: str, arg: str) -> Expr:
    """``fn(arg) == <our repr of it>``, or ``fn(arg) == 0`` when we reject ``arg``."""
    return value_check(Call(fn, (Lit(arg),)))


def outcome_ours(e: Expr) -> bool | str:
    """``True``/``False``, or :data:`ERROR` when our evaluation raises ``EvaluationError``
    or gives a non-boolean (a condition must be a Bool, as in the language)."""
    try:
        v = e.ours()
    except EvaluationError:
        return ERROR
    return v if type(v) is bool else ERROR


def outcomes_cedar(exprs: Sequence[Expr]) -> list[bool | str]:
    """The oracle's outcome for each expression, all evaluated in one cedarpy call."""
    import cedarpy

    policies = "\n".join(
        f"permit(principal, action, resource) when {{ {e.text()} }};" for e in exprs
    )
    result = cedarpy.is_authorized(_REQUEST, policies, [])
    assert result.decision != cedarpy.Decision.NoDecision, result.diagnostics.errors
    reasons = set(result.diagnostics.reasons)
    errors = set()
    for message in result.diagnostics.errors:
        m = _POLICY_ID.search(message)
        assert m is not None, f"cannot tell which policy failed: {message}"
        errors.add(m.group(1))
    out: list[bool | str] = []
    for i in range(len(exprs)):
        pid = f"policy{i}"
        out.append(ERROR if pid in errors else pid in reasons)
    return out


def assert_same_as_cedar(exprs: Sequence[Expr]) -> None:
    """Every expression has the same outcome (true / false / error) in cedarpy and here."""
    theirs = outcomes_cedar(exprs)
    mismatches = [
        f"{e.text()}: cedar={t!r} polang={o!r}"
        for e, t, o in zip(exprs, theirs, (outcome_ours(e) for e in exprs), strict=True)
        if t != o
    ]
    assert not mismatches, "differences from cedarpy:\n" + "\n".join(mismatches)
