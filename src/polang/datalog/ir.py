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
from typing import Any, ClassVar

from polang._record import Record
from polang.language.ast import Expr, Policy, Span
from polang.language.values import quote_string, value_repr

_set = object.__setattr__


class Var(Record):
    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        _set(self, "name", name)

    def __str__(self) -> str:
        return self.name


class Const(Record):
    __slots__ = ("value",)
    value: Any

    def __init__(self, value: Any) -> None:
        _set(self, "value", value)

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


class Atom(Record):
    __slots__ = ("args", "negated", "pred")
    pred: str
    args: tuple[Term, ...]
    negated: bool

    def __init__(self, pred: str, args: tuple[Term, ...] = (), negated: bool = False) -> None:
        _set(self, "pred", pred)
        _set(self, "args", args)
        _set(self, "negated", negated)

    def __str__(self) -> str:
        inner = f"{self.pred}({', '.join(map(str, self.args))})" if self.args else self.pred
        return f"not {inner}" if self.negated else inner


class Builtin(Record):
    """``out = op(args)``; ``out`` is ``None`` for tests that only succeed or fail."""

    __slots__ = ("args", "op", "out", "span")
    _uncompared: ClassVar[tuple[str, ...]] = ("span",)
    op: str
    args: tuple[Term, ...]
    out: Var | None
    span: Span | None

    def __init__(
        self, op: str, args: tuple[Term, ...], out: Var | None = None, span: Span | None = None
    ) -> None:
        _set(self, "op", op)
        _set(self, "args", args)
        _set(self, "out", out)
        _set(self, "span", span)

    def __str__(self) -> str:
        call = f"{self.op}({', '.join(map(str, self.args))})"
        return f"{self.out} = {call}" if self.out is not None else call


Literal = Atom | Builtin


class Rule(Record):
    __slots__ = ("body", "head", "policy_id", "span")
    _uncompared: ClassVar[tuple[str, ...]] = ("policy_id", "span")
    head: Atom
    body: tuple[Literal, ...]
    policy_id: str | None
    span: Span | None

    def __init__(
        self,
        head: Atom,
        body: tuple[Literal, ...] = (),
        policy_id: str | None = None,
        span: Span | None = None,
    ) -> None:
        _set(self, "head", head)
        _set(self, "body", body)
        _set(self, "policy_id", policy_id)
        _set(self, "span", span)

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


class PolicyInfo(Record):
    """What the backends need to know of a lowered policy besides its rules, and where
    its value predicates come from.

    ``source`` is the policy the lowering read and ``nodes`` the expression of it each
    value predicate computes, recorded as the rules were made: explanations, repairs and
    queries print and walk the source through them (a Program built by other means has
    neither, and is shown by predicate names and rules)."""

    __slots__ = ("cond_pred", "effect", "nodes", "policy_id", "scope_pred", "source", "span")
    _frozen: ClassVar[bool] = False
    _uncompared: ClassVar[tuple[str, ...]] = ("nodes", "source")
    _unshown: ClassVar[tuple[str, ...]] = ("nodes", "source")
    policy_id: str
    effect: str  # "permit" | "forbid"
    scope_pred: str
    cond_pred: str
    span: Span | None
    source: Policy | None
    nodes: dict[str, Expr]

    def __init__(
        self,
        policy_id: str,
        effect: str,
        scope_pred: str,
        cond_pred: str,
        span: Span | None = None,
        source: Policy | None = None,
        nodes: dict[str, Expr] | None = None,
    ) -> None:
        self.policy_id = policy_id
        self.effect = effect
        self.scope_pred = scope_pred
        self.cond_pred = cond_pred
        self.span = span
        self.source = source
        self.nodes = {} if nodes is None else nodes


class Program(Record):
    """Rules (policy rules plus the fixed rules of ``rules/*.dl``) and policy metadata."""

    __slots__ = ("policies", "rules")
    _frozen: ClassVar[bool] = False
    rules: list[Rule]
    policies: dict[str, PolicyInfo]

    def __init__(
        self, rules: list[Rule] | None = None, policies: dict[str, PolicyInfo] | None = None
    ) -> None:
        self.rules = [] if rules is None else rules
        self.policies = {} if policies is None else policies

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
        """The program as readable Datalog, grouped by policy, one rule per line. A policy
        id is written quoted, as in the program's facts: in a ``%`` comment a line break
        in it would start a rule of its own."""
        lines: list[str] = []
        current: str | None = "\0"
        for r in self.rules:
            if r.policy_id != current:
                current = r.policy_id
                lines.append("")
                lines.append(f"% policy {quote_string(current)}" if current else "% fixed rules")
            lines.append(str(r))
        return "\n".join(lines).strip() + "\n"
