"""The policy AST: frozen dataclasses with source spans.

Spans are excluded from equality (``compare=False``) so that ``format(parse(x))``
re-parses to an *equal* AST: that is the formatter's property test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from polang.language.values import EntityUID


@dataclass(frozen=True, slots=True)
class Span:
    """Where a node came from: 1-based line/column of its first and last character."""

    line: int
    column: int
    end_line: int
    end_column: int
    start: int = 0  # character offsets into the source text
    end: int = 0
    filename: str | None = None

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}"
        return f"{self.filename}:{where}" if self.filename else where


NO_SPAN = Span(0, 0, 0, 0)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True, eq=False)
class Lit:
    """A Bool, Long or String literal (negative Long literals are folded: ``-5``).

    Equality includes the value's type: Python's ``True == 1`` must not make the
    literals ``true`` and ``1`` the same node.
    """

    value: bool | int | str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Lit
            and type(self.value) is type(other.value)
            and self.value == other.value
        )

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


@dataclass(frozen=True, slots=True)
class EntityLit:
    uid: EntityUID
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


VarName = Literal["principal", "action", "resource", "context"]


@dataclass(frozen=True, slots=True)
class Var:
    name: VarName
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


SlotName = Literal["?principal", "?resource"]


@dataclass(frozen=True, slots=True)
class Slot:
    name: SlotName
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Unary:
    op: Literal["!", "-"]
    arg: Expr
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


BinaryOp = Literal["==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "&&", "||"]


@dataclass(frozen=True, slots=True)
class Binary:
    op: BinaryOp
    left: Expr
    right: Expr
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Has:
    """``expr has attr`` (the parser desugars ``e has a.b`` into ``e has a && e.a has b``)."""

    expr: Expr
    attr: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


class Wildcard:
    """The ``*`` of a ``like`` pattern."""

    _instance: Wildcard | None = None

    def __new__(cls) -> Wildcard:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "WILDCARD"


WILDCARD = Wildcard()

PatternElem = str | Wildcard
"""A pattern is a tuple of literal characters (one-character strings) and ``WILDCARD``."""


@dataclass(frozen=True, slots=True)
class Like:
    expr: Expr
    pattern: tuple[PatternElem, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Is:
    """``expr is T`` or ``expr is T in in_expr``; ``entity_type`` is the full name."""

    expr: Expr
    entity_type: str
    in_expr: Expr | None = None
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class GetAttr:
    """``expr.attr`` and ``expr["attr"]`` (the same operation)."""

    expr: Expr
    attr: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class MethodCall:
    """``receiver.name(args)``: ``contains``, ``hasTag``, ``lessThan``, ``isIpv4``..."""

    receiver: Expr
    name: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ExtCall:
    """``name(args)``: extension functions such as ``decimal``, ``ip``, ``datetime``."""

    name: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Expr
    else_: Expr
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class SetLit:
    elements: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RecordLit:
    """Fields in source order; duplicate keys are a parse error."""

    fields: tuple[tuple[str, Expr], ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


Expr = (
    Lit
    | EntityLit
    | Var
    | Slot
    | Unary
    | Binary
    | Has
    | Like
    | Is
    | GetAttr
    | MethodCall
    | ExtCall
    | If
    | SetLit
    | RecordLit
)


def children(e: Expr) -> tuple[Expr, ...]:
    """The operand expressions of ``e``, in evaluation order."""
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, GetAttr | Has | Like):
        return (e.expr,)
    if isinstance(e, Unary):
        return (e.arg,)
    if isinstance(e, MethodCall):
        return (e.receiver, *e.args)
    if isinstance(e, If):
        return (e.cond, e.then, e.else_)
    if isinstance(e, Is):
        return (e.expr,) if e.in_expr is None else (e.expr, e.in_expr)
    if isinstance(e, ExtCall):
        return e.args
    if isinstance(e, SetLit):
        return e.elements
    if isinstance(e, RecordLit):
        return tuple(v for _, v in e.fields)
    return ()


def too_deep(e: Expr, limit: int) -> Expr | None:
    """The first node (in evaluation order) nested deeper than ``limit`` levels, or
    ``None``: found without recursion, so any tree can be asked."""
    stack: list[tuple[Expr, int]] = [(e, 1)]
    while stack:
        node, d = stack.pop()
        if d > limit:
            return node
        kids = children(node)
        if kids:
            stack.extend((k, d + 1) for k in reversed(kids))
    return None


# ---------------------------------------------------------------- scope


@dataclass(frozen=True, slots=True)
class ScopeConstraint:
    """The principal or resource part of the scope.

    ``kind``: ``any`` (``principal``), ``eq`` (``== E``), ``in`` (``in E``), ``is``
    (``is T``), ``is_in`` (``is T in E``). ``entity`` is an ``EntityUID`` or a ``Slot``.
    """

    var: Literal["principal", "resource"]
    kind: Literal["any", "eq", "in", "is", "is_in"] = "any"
    entity: EntityUID | Slot | None = None
    entity_type: str | None = None
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ActionConstraint:
    """``action``, ``action == A``, ``action in A`` or ``action in [A, B]`` (``in_set``)."""

    kind: Literal["any", "eq", "in", "in_set"] = "any"
    entities: tuple[EntityUID, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Condition:
    kind: Literal["when", "unless"]
    body: Expr
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Annotation:
    """``@key("value")`` or ``@key`` (value ``None``)."""

    key: str
    value: str | None
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Policy:
    """A policy, or a template when it uses ``?principal``/``?resource`` slots."""

    effect: Literal["permit", "forbid"]
    principal: ScopeConstraint
    action: ActionConstraint
    resource: ScopeConstraint
    conditions: tuple[Condition, ...] = ()
    annotations: tuple[Annotation, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def policy_id(self) -> str | None:
        """The ``@id`` annotation, if any (stores require it; the harness does not)."""
        for a in self.annotations:
            if a.key == "id":
                return a.value
        return None

    def annotation(self, key: str) -> str | None:
        for a in self.annotations:
            if a.key == key:
                return a.value
        return None

    @property
    def slots(self) -> tuple[SlotName, ...]:
        """Slots used by the scope (templates only put slots in the scope)."""
        out: list[SlotName] = []
        for c in (self.principal, self.resource):
            if isinstance(c.entity, Slot):
                out.append(c.entity.name)
        return tuple(out)

    @property
    def is_template(self) -> bool:
        return bool(self.slots)


def link_template(
    template: Policy, principal: EntityUID | None = None, resource: EntityUID | None = None
) -> Policy:
    """Fill a template's slots, giving a static policy (errors if a slot is left open)."""
    from dataclasses import replace

    values = {"?principal": principal, "?resource": resource}

    def fill(c: ScopeConstraint) -> ScopeConstraint:
        if isinstance(c.entity, Slot):
            v = values[c.entity.name]
            if v is None:
                raise ValueError(f"template slot {c.entity.name} needs a value")
            return replace(c, entity=v)
        return c

    for name, v in values.items():
        if v is not None and name not in template.slots:
            raise ValueError(f"template has no slot {name}")
    return replace(template, principal=fill(template.principal), resource=fill(template.resource))
