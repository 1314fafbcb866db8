"""The core expression form the type checker works on.

The policy AST keeps the author's spelling (``a > b``, ``a != b``, ``e is T in E``,
methods). The checker needs the language's core operations, in the shapes whose typing
rules are defined: ``a > b`` is ``b < a``, ``a != b`` is ``!(a == b)``, ``e is T in E`` is
``e is T && e in E``, the scope is ``principal_part && (action_part && (resource_part &&
conditions))`` and ``unless { c }`` is ``!c``. Each node gets a structural ``key`` (equal
for equal expressions, whatever their position), so "``principal has a`` was tested" can
be looked up in O(1) when ``principal.a`` is checked later.
"""

from __future__ import annotations

from typing import Any

from polang.language import ast
from polang.language.ast import NO_SPAN, Span
from polang.language.values import EntityUID

# the methods that are core operators rather than extension functions, with their arity
BUILTIN_METHODS = {
    "contains": 1,
    "containsAll": 1,
    "containsAny": 1,
    "hasTag": 1,
    "getTag": 1,
    "isEmpty": 0,
}


class Node:
    """One core expression. ``data`` holds the literal, name, attribute or pattern."""

    __slots__ = ("args", "data", "key", "kind", "span")

    def __init__(self, kind: str, args: tuple[Node, ...], data: Any, span: Span, key: int) -> None:
        self.kind = kind
        self.args = args
        self.data = data
        self.span = span
        self.key = key

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.data!r}, {self.args!r})"


class Lowering:
    """Turns AST expressions into :class:`Node` trees, interning structure into keys."""

    def __init__(self) -> None:
        self._keys: dict[tuple[Any, ...], int] = {}

    def node(self, kind: str, args: tuple[Node, ...], data: Any, span: Span) -> Node:
        if kind == "lit":
            dkey: Any = (type(data).__name__, data)
        elif kind == "like":
            dkey = tuple(None if isinstance(p, ast.Wildcard) else p for p in data)
        else:
            dkey = data
        skey = (kind, dkey, *(a.key for a in args))
        key = self._keys.get(skey)
        if key is None:
            key = len(self._keys)
            self._keys[skey] = key
        return Node(kind, args, data, span, key)

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr) -> Node:
        n = self.node
        sp = e.span
        if isinstance(e, ast.Lit):
            return n("lit", (), e.value, sp)
        if isinstance(e, ast.EntityLit):
            return n("euid", (), e.uid, sp)
        if isinstance(e, ast.Var):
            return n("var", (), e.name, sp)
        if isinstance(e, ast.Slot):
            return n("slot", (), e.name, sp)
        if isinstance(e, ast.Unary):
            return n("not" if e.op == "!" else "neg", (self.expr(e.arg),), None, sp)
        if isinstance(e, ast.Binary):
            left, right = self.expr(e.left), self.expr(e.right)
            op = e.op
            if op == "!=":
                return n("not", (n("eq", (left, right), None, sp),), None, sp)
            if op == ">":
                return n("lt", (right, left), None, sp)
            if op == ">=":
                return n("le", (right, left), None, sp)
            kind = {
                "==": "eq",
                "<": "lt",
                "<=": "le",
                "in": "in",
                "+": "add",
                "-": "sub",
                "*": "mul",
                "&&": "and",
                "||": "or",
            }[op]
            return n(kind, (left, right), None, sp)
        if isinstance(e, ast.Has):
            return n("has", (self.expr(e.expr),), e.attr, sp)
        if isinstance(e, ast.GetAttr):
            return n("get", (self.expr(e.expr),), e.attr, sp)
        if isinstance(e, ast.Like):
            return n("like", (self.expr(e.expr),), e.pattern, sp)
        if isinstance(e, ast.Is):
            target = self.expr(e.expr)
            is_node = n("is", (target,), e.entity_type, sp)
            if e.in_expr is None:
                return is_node
            in_node = n("in", (target, self.expr(e.in_expr)), None, sp)
            return n("and", (is_node, in_node), None, sp)
        if isinstance(e, ast.MethodCall):
            recv = self.expr(e.receiver)
            args = tuple(self.expr(a) for a in e.args)
            arity = BUILTIN_METHODS.get(e.name)
            if arity is not None and len(args) == arity:
                if arity == 0:
                    return n(e.name, (recv,), None, sp)
                return n(e.name, (recv, args[0]), None, sp)
            return n("call", (recv, *args), e.name, sp)
        if isinstance(e, ast.ExtCall):
            return n("call", tuple(self.expr(a) for a in e.args), e.name, sp)
        if isinstance(e, ast.If):
            return n("if", (self.expr(e.cond), self.expr(e.then), self.expr(e.else_)), None, sp)
        if isinstance(e, ast.SetLit):
            return n("set", tuple(self.expr(x) for x in e.elements), None, sp)
        if isinstance(e, ast.RecordLit):
            keys = tuple(k for k, _ in e.fields)
            return n("record", tuple(self.expr(v) for _, v in e.fields), keys, sp)
        raise TypeError(f"not an expression: {e!r}")

    # ------------------------------------------------------------ policies

    def scope(self, c: ast.ScopeConstraint) -> Node:
        n = self.node
        sp = c.span
        var = n("var", (), c.var, sp)
        if c.kind == "any":
            return n("lit", (), True, sp)
        target = self._scope_target(c.entity, sp) if c.entity is not None else None
        if c.kind == "eq" and target is not None:
            return n("eq", (var, target), None, sp)
        if c.kind == "in" and target is not None:
            return n("in", (var, target), None, sp)
        if c.kind == "is" and c.entity_type is not None:
            return n("is", (var,), c.entity_type, sp)
        if c.kind == "is_in" and c.entity_type is not None and target is not None:
            is_node = n("is", (var,), c.entity_type, sp)
            return n("and", (is_node, n("in", (var, target), None, sp)), None, sp)
        raise ValueError(f"malformed {c.var} scope constraint: {c!r}")

    def _scope_target(self, entity: EntityUID | ast.Slot, sp: Span) -> Node:
        if isinstance(entity, ast.Slot):
            return self.node("slot", (), entity.name, sp)
        return self.node("euid", (), entity, sp)

    def action_scope(self, c: ast.ActionConstraint) -> Node:
        n = self.node
        sp = c.span
        var = n("var", (), "action", sp)
        if c.kind == "any":
            return n("lit", (), True, sp)
        if c.kind == "eq":
            return n("eq", (var, n("euid", (), c.entities[0], sp)), None, sp)
        # `action in A` and `action in [A, B]` are both a membership test in a set
        elems = tuple(n("euid", (), uid, sp) for uid in c.entities)
        return n("in", (var, n("set", elems, None, sp)), None, sp)

    def condition(self, p: ast.Policy) -> Node:
        """The whole policy as one boolean expression, in the language's shape."""
        n = self.node
        sp = p.span if p.span is not None else NO_SPAN
        balanced = len(p.conditions) > ast.BALANCE_CHAIN_AFTER  # many clauses
        parts: list[Node] = []
        for cond in p.conditions if balanced else reversed(p.conditions):
            c = self.expr(cond.body)
            parts.append(n("not", (c,), None, cond.span) if cond.kind == "unless" else c)
        body: Node
        if not parts:
            body = n("lit", (), True, sp)
        elif balanced:
            body = ast.join_balanced(parts, lambda a, b: n("and", (a, b), None, sp))
        else:  # right-nested, as the clauses were always joined
            body = parts[0]
            for c in parts[1:]:
                body = n("and", (c, body), None, sp)
        inner = n("and", (self.scope(p.resource), body), None, sp)
        inner = n("and", (self.action_scope(p.action), inner), None, sp)
        return n("and", (self.scope(p.principal), inner), None, sp)


def walk(node: Node) -> list[Node]:
    """Every node of the tree, parents before children (iterative: no recursion limit)."""
    out: list[Node] = []
    stack = [node]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(reversed(x.args))
    return out
