"""The rule-group forms that ``lower.py`` emits, recognised from the rules alone.

The compiled closures, the generated code, the set-at-a-time queries, the SQL lowering
and the interpreter's residuals all read a group through :func:`classify`: a group of
none of these forms is interpreted rule by rule (:mod:`.interpreter`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polang._record import Record
from polang.datalog.ir import Atom, Builtin, Const, Rule, Var

_set = object.__setattr__


class Shape(Record):
    """What a value predicate's rule group computes, when it is one of the lowering's forms.

    ``kind``: ``const`` (``value``), ``alias`` (the value of ``preds[0]``), ``call``
    (``op(preds..., consts...)``), ``not``, ``and``, ``or`` (``preds`` = operands), ``if``
    (condition, then, else), ``and_then`` (``c && t`` where ``t`` may be any value: the
    lowering of ``is T in E``), or ``rules`` (none of these: interpret the rules).
    """

    __slots__ = ("consts", "kind", "op", "preds", "value")
    kind: str
    preds: tuple[str, ...]
    value: Any
    op: str
    consts: tuple[Any, ...]

    def __init__(
        self,
        kind: str,
        preds: tuple[str, ...] = (),
        value: Any = None,
        op: str = "",
        consts: tuple[Any, ...] = (),
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "preds", preds)
        _set(self, "value", value)
        _set(self, "op", op)
        _set(self, "consts", consts)


_RULES = Shape("rules")


def classify(rules: Sequence[Rule]) -> Shape:
    """Recognise the rule-group forms that ``lower.py`` emits (the backends' fast paths)."""
    heads = [r.head.args[0] if r.head.args else None for r in rules]
    bodies = [r.body for r in rules]
    if len(rules) == 1:
        head, body = heads[0], bodies[0]
        if not body and isinstance(head, Const):
            return Shape("const", value=head.value)
        if isinstance(head, Var):
            if (
                len(body) == 1
                and isinstance(body[0], Atom)
                and not body[0].negated
                and body[0].args == (head,)
            ):
                return Shape("alias", (body[0].pred,))
            return _call_shape(head, body)
        return _RULES
    sig = [
        (h.value if isinstance(h, Const) else "X", _body_sig(b))
        for h, b in zip(heads, bodies, strict=True)
    ]
    try:
        first = [_pred(b[0]) for b in bodies]
        second = [_pred(b[1]) if len(b) > 1 else None for b in bodies]
    except TypeError:
        return _RULES
    if len(set(first)) != 1:
        return _RULES
    a = first[0]
    if sig == [(False, [("a", True)]), (True, [("a", False)])]:
        return Shape("not", (a,))
    if len(rules) == 3 and second[1] is not None and second[1] == second[2]:
        b = second[1]
        if sig == [
            (False, [("a", False)]),
            (True, [("a", True), ("a", True)]),
            (False, [("a", True), ("a", False)]),
        ]:
            return Shape("and", (a, b))
        if sig == [
            (True, [("a", True)]),
            (True, [("a", False), ("a", True)]),
            (False, [("a", False), ("a", False)]),
        ]:
            return Shape("or", (a, b))
    if sig == [("X", [("a", True), ("a", "X")]), ("X", [("a", False), ("a", "X")])]:
        return Shape("if", (a, second[0], second[1]))  # type: ignore[arg-type]
    if sig == [(False, [("a", False)]), ("X", [("a", True), ("a", "X")])]:
        return Shape("and_then", (a, second[1]))  # type: ignore[arg-type]
    return _RULES


def _call_shape(head: Var, body: tuple[Any, ...]) -> Shape:
    """``n(X) :- a1(A1), ..., ak(Ak), X = op(A1, ..., Ak, consts...)``."""
    if not body or not isinstance(body[-1], Builtin) or body[-1].out != head:
        return _RULES
    b: Builtin = body[-1]
    preds: list[str] = []
    vars_: list[Var] = []
    for lit in body[:-1]:
        if not (isinstance(lit, Atom) and not lit.negated and len(lit.args) == 1):
            return _RULES
        v = lit.args[0]
        if not isinstance(v, Var):
            return _RULES
        preds.append(lit.pred)
        vars_.append(v)
    n = len(vars_)
    if tuple(b.args[:n]) != tuple(vars_) or not all(isinstance(t, Const) for t in b.args[n:]):
        return _RULES
    consts = tuple(t.value for t in b.args[n:] if isinstance(t, Const))
    return Shape("call", tuple(preds), op=b.op, consts=consts)


def _pred(lit: Any) -> str:
    if not isinstance(lit, Atom):
        raise TypeError("not an atom")
    return lit.pred


def _body_sig(body: tuple[Any, ...]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for lit in body:
        if not isinstance(lit, Atom) or lit.negated or len(lit.args) != 1:
            return [("?", None)]
        t = lit.args[0]
        out.append(("a", t.value if isinstance(t, Const) else "X"))
    return out
