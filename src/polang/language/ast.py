"""The policy AST: immutable records with source spans.

Spans are excluded from equality (``Node._uncompared``) so that ``format(parse(x))``
re-parses to an *equal* AST: that is the formatter's property test. The classes are
:class:`polang._record.Record` classes, not dataclasses: generating 21 dataclasses cost
about 15 ms of every process's start-up (``benchmarks/README.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, Literal, TypeVar

from polang._record import Record, replace
from polang.language.values import EntityUID

T = TypeVar("T")

_set = object.__setattr__


class Span(Record):
    """Where a node came from: 1-based line/column of its first and last character."""

    __slots__ = ("column", "end", "end_column", "end_line", "filename", "line", "start")
    line: int
    column: int
    end_line: int
    end_column: int
    start: int  # character offsets into the source text
    end: int
    filename: str | None

    def __init__(
        self,
        line: int,
        column: int,
        end_line: int,
        end_column: int,
        start: int = 0,
        end: int = 0,
        filename: str | None = None,
    ) -> None:
        _set(self, "line", line)
        _set(self, "column", column)
        _set(self, "end_line", end_line)
        _set(self, "end_column", end_column)
        _set(self, "start", start)
        _set(self, "end", end)
        _set(self, "filename", filename)

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}"
        return f"{self.filename}:{where}" if self.filename else where


NO_SPAN = Span(0, 0, 0, 0)


class Node(Record):
    """Base of the AST's node classes: the span is neither compared nor shown."""

    __slots__ = ()
    _uncompared: ClassVar[tuple[str, ...]] = ("span",)
    _unshown: ClassVar[tuple[str, ...]] = ("span",)


# ---------------------------------------------------------------- expressions


class Lit(Node):
    """A Bool, Long or String literal (negative Long literals are folded: ``-5``).

    Equality includes the value's type: Python's ``True == 1`` must not make the
    literals ``true`` and ``1`` the same node.
    """

    __slots__ = ("span", "value")
    value: bool | int | str
    span: Span

    def __init__(self, value: bool | int | str, span: Span = NO_SPAN) -> None:
        _set(self, "value", value)
        _set(self, "span", span)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Lit
            and type(self.value) is type(other.value)
            and self.value == other.value
        )

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


class EntityLit(Node):
    __slots__ = ("span", "uid")
    uid: EntityUID
    span: Span

    def __init__(self, uid: EntityUID, span: Span = NO_SPAN) -> None:
        _set(self, "uid", uid)
        _set(self, "span", span)


VarName = Literal["principal", "action", "resource", "context"]


class Var(Node):
    __slots__ = ("name", "span")
    name: VarName
    span: Span

    def __init__(self, name: VarName, span: Span = NO_SPAN) -> None:
        _set(self, "name", name)
        _set(self, "span", span)


SlotName = Literal["?principal", "?resource"]


class Slot(Node):
    __slots__ = ("name", "span")
    name: SlotName
    span: Span

    def __init__(self, name: SlotName, span: Span = NO_SPAN) -> None:
        _set(self, "name", name)
        _set(self, "span", span)


class Unary(Node):
    __slots__ = ("arg", "op", "span")
    op: Literal["!", "-"]
    arg: Expr
    span: Span

    def __init__(self, op: Literal["!", "-"], arg: Expr, span: Span = NO_SPAN) -> None:
        _set(self, "op", op)
        _set(self, "arg", arg)
        _set(self, "span", span)


BinaryOp = Literal["==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "&&", "||"]


class Binary(Node):
    __slots__ = ("left", "op", "right", "span")
    op: BinaryOp
    left: Expr
    right: Expr
    span: Span

    def __init__(self, op: BinaryOp, left: Expr, right: Expr, span: Span = NO_SPAN) -> None:
        _set(self, "op", op)
        _set(self, "left", left)
        _set(self, "right", right)
        _set(self, "span", span)


class Has(Node):
    """``expr has attr`` (the parser desugars ``e has a.b`` into ``e has a && e.a has b``)."""

    __slots__ = ("attr", "expr", "span")
    expr: Expr
    attr: str
    span: Span

    def __init__(self, expr: Expr, attr: str, span: Span = NO_SPAN) -> None:
        _set(self, "expr", expr)
        _set(self, "attr", attr)
        _set(self, "span", span)


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


class Like(Node):
    __slots__ = ("expr", "pattern", "span")
    expr: Expr
    pattern: tuple[PatternElem, ...]
    span: Span

    def __init__(self, expr: Expr, pattern: tuple[PatternElem, ...], span: Span = NO_SPAN) -> None:
        _set(self, "expr", expr)
        _set(self, "pattern", pattern)
        _set(self, "span", span)


class Is(Node):
    """``expr is T`` or ``expr is T in in_expr``; ``entity_type`` is the full name."""

    __slots__ = ("entity_type", "expr", "in_expr", "span")
    expr: Expr
    entity_type: str
    in_expr: Expr | None
    span: Span

    def __init__(
        self, expr: Expr, entity_type: str, in_expr: Expr | None = None, span: Span = NO_SPAN
    ) -> None:
        _set(self, "expr", expr)
        _set(self, "entity_type", entity_type)
        _set(self, "in_expr", in_expr)
        _set(self, "span", span)


class GetAttr(Node):
    """``expr.attr`` and ``expr["attr"]`` (the same operation)."""

    __slots__ = ("attr", "expr", "span")
    expr: Expr
    attr: str
    span: Span

    def __init__(self, expr: Expr, attr: str, span: Span = NO_SPAN) -> None:
        _set(self, "expr", expr)
        _set(self, "attr", attr)
        _set(self, "span", span)


class MethodCall(Node):
    """``receiver.name(args)``: ``contains``, ``hasTag``, ``lessThan``, ``isIpv4``..."""

    __slots__ = ("args", "name", "receiver", "span")
    receiver: Expr
    name: str
    args: tuple[Expr, ...]
    span: Span

    def __init__(
        self, receiver: Expr, name: str, args: tuple[Expr, ...], span: Span = NO_SPAN
    ) -> None:
        _set(self, "receiver", receiver)
        _set(self, "name", name)
        _set(self, "args", args)
        _set(self, "span", span)


class ExtCall(Node):
    """``name(args)``: extension functions such as ``decimal``, ``ip``, ``datetime``."""

    __slots__ = ("args", "name", "span")
    name: str
    args: tuple[Expr, ...]
    span: Span

    def __init__(self, name: str, args: tuple[Expr, ...], span: Span = NO_SPAN) -> None:
        _set(self, "name", name)
        _set(self, "args", args)
        _set(self, "span", span)


class If(Node):
    __slots__ = ("cond", "else_", "span", "then")
    cond: Expr
    then: Expr
    else_: Expr
    span: Span

    def __init__(self, cond: Expr, then: Expr, else_: Expr, span: Span = NO_SPAN) -> None:
        _set(self, "cond", cond)
        _set(self, "then", then)
        _set(self, "else_", else_)
        _set(self, "span", span)


class SetLit(Node):
    __slots__ = ("elements", "span")
    elements: tuple[Expr, ...]
    span: Span

    def __init__(self, elements: tuple[Expr, ...], span: Span = NO_SPAN) -> None:
        _set(self, "elements", elements)
        _set(self, "span", span)


class RecordLit(Node):
    """Fields in source order; duplicate keys are a parse error."""

    __slots__ = ("fields", "span")
    fields: tuple[tuple[str, Expr], ...]
    span: Span

    def __init__(self, fields: tuple[tuple[str, Expr], ...], span: Span = NO_SPAN) -> None:
        _set(self, "fields", fields)
        _set(self, "span", span)


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


BALANCE_CHAIN_AFTER = 16
"""An ``||`` or ``&&`` chain of more operands than this is built as a balanced tree (each
node joins two neighbouring runs, left to right) instead of one level per operator, so a
generated condition of hundreds of alternatives nests about log2(n) levels. The two
operators are associative in value, error and evaluation order (left to right, stopping
at the first operand that decides), so the shape changes nothing a policy can observe;
shorter chains keep the shape they are written in. :func:`chain_operands` gives the
operands back in order, which is how ``polang.language.format`` prints such a chain flat
again."""


def join_balanced(items: Sequence[T], join: Callable[[T, T], T]) -> T:
    """``items`` joined in order as a balanced tree: each round joins neighbouring pairs
    (what the parser does to a chain longer than :data:`BALANCE_CHAIN_AFTER`)."""
    level = list(items)
    while len(level) > 1:
        joined = [join(x, y) for x, y in zip(level[0::2], level[1::2], strict=False)]
        if len(level) % 2:
            joined.append(level[-1])
        level = joined
    return level[0]


def chain_levels(n: int) -> int:
    """How many levels joining ``n`` operands (or ``when``/``unless`` clauses) takes:
    one per operator as written, about log2(n) once balanced."""
    return n if n <= BALANCE_CHAIN_AFTER else (n - 1).bit_length()


def chain_operands(e: Binary) -> list[Expr]:
    """The operands of the ``||`` or ``&&`` chain ``e`` heads, in order, whatever its
    shape (left-leaning as written, or balanced), found without recursion."""
    out: list[Expr] = []
    stack: list[Expr] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Binary) and node.op == e.op:
            stack.append(node.right)
            stack.append(node.left)
        else:
            out.append(node)
    return out


def condition_nodes(policy: Policy) -> Iterator[Expr]:
    """Every expression node of a policy's ``when``/``unless`` bodies, each after its
    parent (siblings last to first), found without recursion."""
    stack: list[Expr] = [c.body for c in policy.conditions]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(children(e))


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


class ScopeConstraint(Node):
    """The principal or resource part of the scope.

    ``kind``: ``any`` (``principal``), ``eq`` (``== E``), ``in`` (``in E``), ``is``
    (``is T``), ``is_in`` (``is T in E``). ``entity`` is an ``EntityUID`` or a ``Slot``.
    """

    __slots__ = ("entity", "entity_type", "kind", "span", "var")
    var: Literal["principal", "resource"]
    kind: Literal["any", "eq", "in", "is", "is_in"]
    entity: EntityUID | Slot | None
    entity_type: str | None
    span: Span

    def __init__(
        self,
        var: Literal["principal", "resource"],
        kind: Literal["any", "eq", "in", "is", "is_in"] = "any",
        entity: EntityUID | Slot | None = None,
        entity_type: str | None = None,
        span: Span = NO_SPAN,
    ) -> None:
        _set(self, "var", var)
        _set(self, "kind", kind)
        _set(self, "entity", entity)
        _set(self, "entity_type", entity_type)
        _set(self, "span", span)


class ActionConstraint(Node):
    """``action``, ``action == A``, ``action in A`` or ``action in [A, B]`` (``in_set``)."""

    __slots__ = ("entities", "kind", "span")
    kind: Literal["any", "eq", "in", "in_set"]
    entities: tuple[EntityUID, ...]
    span: Span

    def __init__(
        self,
        kind: Literal["any", "eq", "in", "in_set"] = "any",
        entities: tuple[EntityUID, ...] = (),
        span: Span = NO_SPAN,
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "entities", entities)
        _set(self, "span", span)


class Condition(Node):
    __slots__ = ("body", "kind", "span")
    kind: Literal["when", "unless"]
    body: Expr
    span: Span

    def __init__(self, kind: Literal["when", "unless"], body: Expr, span: Span = NO_SPAN) -> None:
        _set(self, "kind", kind)
        _set(self, "body", body)
        _set(self, "span", span)


class Annotation(Node):
    """``@key("value")`` or ``@key`` (value ``None``)."""

    __slots__ = ("key", "span", "value")
    key: str
    value: str | None
    span: Span

    def __init__(self, key: str, value: str | None, span: Span = NO_SPAN) -> None:
        _set(self, "key", key)
        _set(self, "value", value)
        _set(self, "span", span)


class Policy(Node):
    """A policy, or a template when it uses ``?principal``/``?resource`` slots."""

    __slots__ = ("action", "annotations", "conditions", "effect", "principal", "resource", "span")
    effect: Literal["permit", "forbid"]
    principal: ScopeConstraint
    action: ActionConstraint
    resource: ScopeConstraint
    conditions: tuple[Condition, ...]
    annotations: tuple[Annotation, ...]
    span: Span

    def __init__(
        self,
        effect: Literal["permit", "forbid"],
        principal: ScopeConstraint,
        action: ActionConstraint,
        resource: ScopeConstraint,
        conditions: tuple[Condition, ...] = (),
        annotations: tuple[Annotation, ...] = (),
        span: Span = NO_SPAN,
    ) -> None:
        _set(self, "effect", effect)
        _set(self, "principal", principal)
        _set(self, "action", action)
        _set(self, "resource", resource)
        _set(self, "conditions", conditions)
        _set(self, "annotations", annotations)
        _set(self, "span", span)

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
