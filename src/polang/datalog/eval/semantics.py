"""The semantics of a value predicate's rule group, stated once for every evaluator.

A value predicate ``n(X)`` has at most one value per request (``ir.py``). Its rules are
tried in order and the first whose body holds gives the value; a body stops at its first
literal that fails. When no rule holds, the predicate errors with, in this order:

1. the first evaluation error met (a builtin that raised, an operand that errored), which
   is the language's first error because bodies keep the source's order;
2. else, when a literal's constant had another type than the operand's value (a
   ``n(false) :- a(false)`` over a non-Bool ``a``), "expected Bool": the boolean rules of
   ``!``, ``&&``, ``||`` and ``if`` match no rule for such an operand;
3. else "no value derived".

A literal ``a(c)`` with a constant ``c`` holds when ``a``'s value has the same type and is
equal (``1 == true`` is false in the language, not in Python). The interpreter
(:mod:`.interpreter`), the compiled closures and the generated code
(``compiled.py``, ``pycode.py``) and the reference backend (``pydatalog.py``) all take
their errors from here.
"""

from __future__ import annotations

from typing import Any

from polang.errors import EvaluationError
from polang.language.values import type_name

REQUEST_VARS = ("principal", "action", "resource", "context")
"""The request variables: predicates with no rules, whose value is the request's."""


def bool_error(v: Any) -> EvaluationError:
    """A boolean rule group's operand that is not a Bool (rule 2 above)."""
    return EvaluationError("type", f"type error: expected Bool, got {type_name(v)}")


def no_principal() -> EvaluationError:
    """Reading ``principal`` in a request without one."""
    return EvaluationError("request", "the request has no principal")


def no_value(pred: str) -> EvaluationError:
    """A rule group where no rule held and nothing erred (rule 3 above)."""
    return EvaluationError("type", f"no value derived for {pred}")


def not_a_bool() -> EvaluationError:
    """A policy that errored without a recorded cause (the decision rules' ``errored``)."""
    return EvaluationError("type", "the condition did not evaluate to a Bool")


def matches(const: Any, value: Any) -> bool:
    """Whether literal ``a(const)`` holds for ``a``'s value: same type and equal."""
    return type(const) is type(value) and bool(const == value)


def group_error(first_error: EvaluationError | None, mismatch: Any, pred: str) -> EvaluationError:
    """The error of a rule group where no rule held, by the rules above (``mismatch``:
    the first operand value of the wrong type, or :data:`NOTHING`)."""
    if first_error is not None:
        return first_error
    if mismatch is not NOTHING:
        return bool_error(mismatch)
    return no_value(pred)


NOTHING: Any = object()
"""No value (a mismatch not seen, a memo entry not computed)."""
