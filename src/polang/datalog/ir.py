"""The intermediate form: the one contract between lowering and the backends.

A :class:`Program` is a list of Datalog rules. Terms are variables or constants; a body
is a sequence of literals:

- :class:`Atom`: ``pred(t1, ..., tn)``, optionally negated (stratified negation only).
- :class:`Builtin`: ``out = op(t1, ..., tn)``: a value operation of the language (attribute
  access, arithmetic, ``in`` over the hierarchy...). It either binds ``out`` or *fails with
  an evaluation error*; failing makes the body fail, exactly like a false literal. Errors
  are therefore the absence of both ``T`` and ``F`` atoms, never a value.

Every rule the lowering emits for an expression node ``n`` has the head ``n(X)`` and at
most one derivable ``X`` per request: value predicates are *functional*. Backends may rely
on that (the compiled backend evaluates them as functions), and bodies are ordered as the
source is, so the first error found is the language's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from polang.language.ast import Span
from polang.language.values import value_repr


@dataclass(frozen=True, slots=True)
class Var:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Const:
    value: Any

    def __str__(self) -> str:
        v = self.value
        if type(v) is tuple:
            return "(" + ", ".join(_const_str(x) for x in v) + ")"
        return _const_str(v)


def _const_str(v: Any) -> str:
    if isinstance(v, frozenset):
        return "{" + ", ".join(sorted(_const_str(x) for x in v)) + "}"
    try:
        return value_repr(v)
    except Exception:  # pragma: no cover - defensive: constants are values
        return repr(v)


Term = Var | Const


@dataclass(frozen=True, slots=True)
class Atom:
    pred: str
    args: tuple[Term, ...] = ()
    negated: bool = False

    def __str__(self) -> str:
        inner = f"{self.pred}({', '.join(map(str, self.args))})" if self.args else self.pred
        return f"not {inner}" if self.negated else inner


@dataclass(frozen=True, slots=True)
class Builtin:
    """``out = op(args)``; ``out`` is ``None`` for tests that only succeed or fail."""

    op: str
    args: tuple[Term, ...]
    out: Var | None = None
    span: Span | None = field(default=None, compare=False)

    def __str__(self) -> str:
        call = f"{self.op}({', '.join(map(str, self.args))})"
        return f"{self.out} = {call}" if self.out is not None else call


Literal = Atom | Builtin


@dataclass(frozen=True, slots=True)
class Rule:
    head: Atom
    body: tuple[Literal, ...] = ()
    policy_id: str | None = field(default=None, compare=False)
    span: Span | None = field(default=None, compare=False)

    def __str__(self) -> str:
        if not self.body:
            return f"{self.head}."
        return f"{self.head} :- {', '.join(map(str, self.body))}."

    def variables(self) -> set[str]:
        names: set[str] = set()
        for lit in (self.head, *self.body):
            for t in lit.args:
                if isinstance(t, Var):
                    names.add(t.name)
            if isinstance(lit, Builtin) and lit.out is not None:
                names.add(lit.out.name)
        return names


@dataclass(slots=True)
class PolicyInfo:
    """What the backends need to know of a lowered policy besides its rules."""

    policy_id: str
    effect: str  # "permit" | "forbid"
    scope_pred: str
    cond_pred: str
    span: Span | None = None


@dataclass(slots=True)
class Program:
    """Rules (policy rules plus the fixed rules of ``rules/*.dl``) and policy metadata."""

    rules: list[Rule] = field(default_factory=list)
    policies: dict[str, PolicyInfo] = field(default_factory=dict)

    def by_head(self) -> dict[str, list[Rule]]:
        out: dict[str, list[Rule]] = {}
        for r in self.rules:
            out.setdefault(r.head.pred, []).append(r)
        return out

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def extend(self, rules: Iterable[Rule]) -> None:
        self.rules.extend(rules)

    def text(self) -> str:
        """The program as readable Datalog, grouped by policy."""
        lines: list[str] = []
        current: str | None = "\0"
        for r in self.rules:
            if r.policy_id != current:
                current = r.policy_id
                lines.append("")
                lines.append(f"% policy {current}" if current else "% fixed rules")
            lines.append(str(r))
        return "\n".join(lines).strip() + "\n"
