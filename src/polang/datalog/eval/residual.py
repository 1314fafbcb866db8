"""Residuals: what is left of an expression when some of the request is unknown.

A residual is an expression of the language itself (:mod:`polang.language.ast`): known
values are literals, unknown data stays as the expression that reads it (``context``,
``User::"ghost".dept``), and an operand that erred stays as written (evaluating it again
errs again). So a residual prints in policy syntax (:func:`Residual.text`) and can be
lowered like any condition (``lower.py``, then the SQL lowering) once the unknowns have
a meaning there, as a list endpoint's plan over ``resource`` attributes will.

The builtins of ``ir.py`` map back to the syntax the lowering took them from
(:func:`call_expr`), and a predicate's rules map back to its expression
(:func:`source_expr`): the inverse of ``lower.py``, read from the rules alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polang._record import Record
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.eval.shapes import Shape, classify
from polang.datalog.ir import Rule
from polang.language import ast
from polang.language.values import EntityUID, RecordValue, SetValue, value_to_json

_set = object.__setattr__

_SYMBOLS: dict[str, ast.BinaryOp] = {
    "eq": "==",
    "neq": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "add": "+",
    "sub": "-",
    "mul": "*",
    "in": "in",
}
"""The binary operators' builtins (``lower.py``'s table, read backwards)."""


class Residual(Record):
    """A policy whose outcome depends on unknown values: its scope and condition as one
    expression over them (true: the policy applies; false: it does not; an error: it
    errs)."""

    __slots__ = ("effect", "expr", "policy_id")
    policy_id: str
    effect: str
    expr: ast.Expr

    def __init__(self, policy_id: str, effect: str, expr: ast.Expr) -> None:
        _set(self, "policy_id", policy_id)
        _set(self, "effect", effect)
        _set(self, "expr", expr)

    def text(self) -> str:
        """The residual in policy syntax."""
        # imported here: the formatter (and the parser it checks names with) is not
        # part of a decision's cold start, which imports this module
        from polang.language.format import format_expr

        return format_expr(self.expr)


def value_expr(v: Any) -> ast.Expr:
    """A value as the literal expression that evaluates to it."""
    t = type(v)
    if t is bool or t is int or t is str:
        return ast.Lit(v)
    if t is EntityUID:
        return ast.EntityLit(v)
    if t is SetValue:
        return ast.SetLit(tuple(value_expr(x) for x in v))
    if t is RecordValue:
        return ast.RecordLit(tuple((k, value_expr(x)) for k, x in v.fields.items()))
    return _extension_expr(value_to_json(v)["__extn"])


def _extension_expr(extn: Mapping[str, Any]) -> ast.Expr:
    """An extension value's constructor call (``decimal("1.5")``; the multi-argument form
    ``datetime(...).offset(duration(...))`` for instants no string names)."""
    if "arg" in extn:
        return ast.ExtCall(extn["fn"], (ast.Lit(extn["arg"]),))
    first, *rest = (_extension_expr(a["__extn"]) for a in extn["args"])
    return ast.MethodCall(first, extn["fn"], tuple(rest))


def _pattern(text: str) -> tuple[ast.PatternElem, ...]:
    """A ``like`` pattern from the text the lowering made of it (``*`` the wildcard,
    ``\\*`` and ``\\\\`` literal characters)."""
    out: list[ast.PatternElem] = []
    chars = iter(text)
    for c in chars:
        if c == "\\":
            out.append(next(chars, "\\"))
        else:
            out.append(ast.WILDCARD if c == "*" else c)
    return tuple(out)


def call_expr(op: str, operands: Sequence[ast.Expr], consts: Sequence[Any] = ()) -> ast.Expr:
    """``X = op(operands..., consts...)`` as the expression it was lowered from."""
    if op in _SYMBOLS:
        return ast.Binary(_SYMBOLS[op], operands[0], operands[1])
    if op == "neg":
        return ast.Unary("-", operands[0])
    if op == "get_attr":
        return ast.GetAttr(operands[0], consts[0])
    if op == "has_attr":
        return ast.Has(operands[0], consts[0])
    if op == "like":
        return ast.Like(operands[0], _pattern(consts[0]))
    if op in ("is_type", "scope_is"):
        return ast.Is(operands[0], consts[0])
    if op == "scope_in":
        return ast.Binary("in", operands[0], value_expr(consts[0]))
    if op == "scope_in_any":
        return ast.Binary("in", operands[0], ast.SetLit(tuple(map(value_expr, sorted(consts[0])))))
    if op.startswith("method:"):
        return ast.MethodCall(operands[0], op[7:], tuple(operands[1:]))
    if op.startswith("function:"):
        return ast.ExtCall(op[9:], tuple(operands))
    if op == "make_set":
        return ast.SetLit(tuple(operands))
    if op == "make_record":
        return ast.RecordLit(tuple(zip(consts[0], operands, strict=True)))
    return ast.ExtCall(op, (*operands, *map(value_expr, consts)))  # not the lowering's


def shape_expr(pred: str, rules: Sequence[Rule], operand: Any, sh: Shape | None = None) -> ast.Expr:
    """A rule group as an expression over its operands' expressions (``operand(p)``);
    a group of no known form is named by its predicate, as a call of no arguments.
    ``sh``: the group's form when the caller has it (``classify(rules)``)."""
    if sh is None:
        sh = classify(rules)
    kind = sh.kind
    if kind == "const":
        return value_expr(sh.value)
    if kind == "alias":
        return operand(sh.preds[0])
    if kind == "call":
        return call_expr(sh.op, [operand(p) for p in sh.preds], sh.consts)
    if kind == "not":
        return ast.Unary("!", operand(sh.preds[0]))
    if kind in ("and", "or", "and_then"):
        op: ast.BinaryOp = "||" if kind == "or" else "&&"
        return ast.Binary(op, operand(sh.preds[0]), operand(sh.preds[1]))
    if kind == "if":
        c, t, e = (operand(p) for p in sh.preds)
        return ast.If(c, t, e)
    return ast.ExtCall(pred, ())


def source_expr(groups: Mapping[str, Sequence[Rule]], pred: str) -> ast.Expr:
    """The expression a value predicate computes, read back from its rules."""
    if pred in REQUEST_VARS:
        return ast.Var(pred)  # type: ignore[arg-type]
    return shape_expr(pred, groups.get(pred, ()), lambda p: source_expr(groups, p))
