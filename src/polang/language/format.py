"""AST -> canonical polang text.

The output re-parses to an equal AST (``parse_policies(format_policies(ps)) == ps``), so
the printer adds exactly the parentheses the grammar needs and no others: relations do
not chain, binary operators are left-associative, at most four unary operators may be
stacked, ``-5`` is a literal while ``-(5)`` is a negation, and ``if`` only appears bare
where a whole expression is expected.

Layout: each annotation on its own line, the scope on one line, each condition on its
own lines with the body indented by two spaces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polang.language import ast
from polang.language.parser import is_identifier
from polang.language.values import EntityUID, quote_string

__all__ = [
    "expr_to_json",
    "format_expr",
    "format_policies",
    "format_policy",
    "policies_to_json",
    "policy_to_json",
]

# Binding strength, loosest first. A child printed where a stronger level is required
# gets parentheses.
_IF, _OR, _AND, _REL, _ADD, _MUL, _UNARY, _MEMBER = range(8)

_BINARY_LEVEL: dict[str, int] = {
    "||": _OR,
    "&&": _AND,
    "==": _REL,
    "!=": _REL,
    "<": _REL,
    "<=": _REL,
    ">": _REL,
    ">=": _REL,
    "in": _REL,
    "+": _ADD,
    "-": _ADD,
    "*": _MUL,
}

_MAX_UNARY = 4  # the language rejects five or more stacked `!` or `-`


def _level(e: ast.Expr) -> int:
    if isinstance(e, ast.Binary):
        return _BINARY_LEVEL[e.op]
    if isinstance(e, ast.If):
        return _IF
    if isinstance(e, ast.Has | ast.Like | ast.Is):
        return _REL
    if isinstance(e, ast.Unary):
        return _UNARY
    if isinstance(e, ast.Lit) and _is_negative_int(e.value):
        return _UNARY  # `-5` is read as a unary minus folded into the literal
    return _MEMBER


def _is_negative_int(v: object) -> bool:
    return type(v) is int and v < 0


def _attr(name: str) -> str:
    """An attribute or record key: bare when the grammar allows it, else quoted."""
    return name if is_identifier(name) else quote_string(name)


def _uid(u: EntityUID) -> str:
    return f"{u.type}::{quote_string(u.id)}"


def _pattern(pattern: Iterable[ast.PatternElem]) -> str:
    out = []
    for p in pattern:
        if p is ast.WILDCARD:
            out.append("*")
        elif p == "*":
            out.append("\\*")
        else:
            out.append(quote_string(str(p))[1:-1])
    return '"' + "".join(out) + '"'


def _lit(v: bool | int | str) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return quote_string(v)
    return str(v)


class _Printer:
    def __init__(self) -> None:
        self.out: list[str] = []

    def at(self, e: ast.Expr, level: int) -> None:
        """Print ``e`` where the grammar requires binding strength ``level``."""
        if _level(e) < level:
            self.out.append("(")
            self.expr(e)
            self.out.append(")")
        else:
            self.expr(e)

    def args(self, items: Iterable[ast.Expr]) -> None:
        for i, a in enumerate(items):
            if i:
                self.out.append(", ")
            self.expr(a)

    def expr(self, e: ast.Expr) -> None:
        out = self.out
        if isinstance(e, ast.Binary):
            self.binary(e)
        elif isinstance(e, ast.Lit):
            out.append(_lit(e.value))
        elif isinstance(e, ast.Var | ast.Slot):
            out.append(e.name)
        elif isinstance(e, ast.EntityLit):
            out.append(_uid(e.uid))
        elif isinstance(e, ast.GetAttr):
            self.at(e.expr, _MEMBER)
            out.append(f".{e.attr}" if is_identifier(e.attr) else f"[{quote_string(e.attr)}]")
        elif isinstance(e, ast.MethodCall):
            self.at(e.receiver, _MEMBER)
            out.append(f".{e.name}(")
            self.args(e.args)
            out.append(")")
        elif isinstance(e, ast.ExtCall):
            out.append(f"{e.name}(")
            self.args(e.args)
            out.append(")")
        elif isinstance(e, ast.Unary):
            self.unary(e)
        elif isinstance(e, ast.Has):
            self.at(e.expr, _ADD)
            out.append(f" has {_attr(e.attr)}")
        elif isinstance(e, ast.Like):
            self.at(e.expr, _ADD)
            out.append(f" like {_pattern(e.pattern)}")
        elif isinstance(e, ast.Is):
            self.at(e.expr, _ADD)
            out.append(f" is {e.entity_type}")
            if e.in_expr is not None:
                out.append(" in ")
                self.at(e.in_expr, _ADD)
        elif isinstance(e, ast.If):
            out.append("if ")
            self.expr(e.cond)
            out.append(" then ")
            self.expr(e.then)
            out.append(" else ")
            self.expr(e.else_)
        elif isinstance(e, ast.SetLit):
            out.append("[")
            self.args(e.elements)
            out.append("]")
        elif isinstance(e, ast.RecordLit):
            out.append("{")
            for i, (k, v) in enumerate(e.fields):
                if i:
                    out.append(", ")
                out.append(f"{_attr(k)}: ")
                self.expr(v)
            out.append("}")
        else:  # pragma: no cover - the Expr union is closed
            raise TypeError(f"not an expression: {e!r}")

    def binary(self, e: ast.Binary) -> None:
        level = _BINARY_LEVEL[e.op]
        if e.op in ("||", "&&"):
            operands = ast.chain_operands(e)
            if len(operands) > ast.BALANCE_CHAIN_AFTER:  # the parser balanced it: flat again
                for i, x in enumerate(operands):
                    if i:
                        self.out.append(f" {e.op} ")
                    self.at(x, level + 1)
                return
        # Walk the left spine iteratively: long `&&`/`||`/`+` chains stay flat.
        chain: list[ast.Binary] = [e]
        left: ast.Expr = e.left
        if level != _REL:  # relations do not associate at all
            while isinstance(left, ast.Binary) and _BINARY_LEVEL[left.op] == level:
                chain.append(left)
                left = left.left
        self.at(left, level + 1 if level == _REL else level)
        for node in reversed(chain):
            self.out.append(f" {node.op} ")
            self.at(node.right, level + 1)

    def unary(self, e: ast.Unary) -> None:
        op = e.op
        count = 0
        cur: ast.Expr = e
        while isinstance(cur, ast.Unary) and cur.op == op and count < _MAX_UNARY:
            count += 1
            cur = cur.arg
        self.out.append(op * count)
        if isinstance(cur, ast.Lit) and type(cur.value) is int and op == "-":
            # `-5` would be read as the literal -5: a negated non-negative literal needs
            # parentheses, and a negative literal's own `-` counts towards the limit.
            if cur.value < 0 and count < _MAX_UNARY:
                self.out.append(str(cur.value))
            else:
                self.out.append(f"({cur.value})")
            return
        if isinstance(cur, ast.Unary) or _level(cur) < _MEMBER:
            self.out.append("(")
            self.expr(cur)
            self.out.append(")")
        else:
            self.expr(cur)


def format_expr(e: ast.Expr) -> str:
    """One expression on one line, with the minimal safe parentheses."""
    p = _Printer()
    p.expr(e)
    return "".join(p.out)


def _scope(c: ast.ScopeConstraint) -> str:
    def target(x: EntityUID | ast.Slot | None) -> str:
        if isinstance(x, ast.Slot):
            return x.name
        if x is None:  # pragma: no cover - the parser never builds this
            raise ValueError(f"{c.var} scope `{c.kind}` needs an entity")
        return _uid(x)

    if c.kind == "any":
        return c.var
    if c.kind == "eq":
        return f"{c.var} == {target(c.entity)}"
    if c.kind == "in":
        return f"{c.var} in {target(c.entity)}"
    if c.kind == "is":
        return f"{c.var} is {c.entity_type}"
    return f"{c.var} is {c.entity_type} in {target(c.entity)}"


def _action(a: ast.ActionConstraint) -> str:
    if a.kind == "any":
        return "action"
    if a.kind == "eq":
        return f"action == {_uid(a.entities[0])}"
    if a.kind == "in":
        return f"action in {_uid(a.entities[0])}"
    return "action in [" + ", ".join(_uid(u) for u in a.entities) + "]"


def format_policy(p: ast.Policy) -> str:
    """One policy or template, ending with ``;`` (no trailing newline)."""
    lines = [
        f"@{a.key}" if a.value is None else f"@{a.key}({quote_string(a.value)})"
        for a in p.annotations
    ]
    lines.append(f"{p.effect} ({_scope(p.principal)}, {_action(p.action)}, {_scope(p.resource)})")
    for c in p.conditions:
        lines.append(f"{c.kind} {{")
        lines.append(f"  {format_expr(c.body)}")
        lines.append("}")
    lines[-1] += ";"
    return "\n".join(lines)


def format_policies(policies: Iterable[ast.Policy]) -> str:
    """Policies separated by a blank line, with a final newline (empty text for none)."""
    parts = [format_policy(p) for p in policies]
    return "\n\n".join(parts) + "\n" if parts else ""


# ---------------------------------------------------------------- the JSON policy form
# The language's JSON policy format (Cedar's "EST"), output only: it lets tools exchange
# policies with other implementations, and it is how the tests compare our parser with
# the reference implementation.

_BUILTIN_BINARY_METHODS = frozenset({"contains", "containsAll", "containsAny", "hasTag", "getTag"})


def _uid_json(u: EntityUID) -> dict[str, str]:
    return {"type": u.type, "id": u.id}


def expr_to_json(e: ast.Expr) -> Any:
    """One expression in the JSON policy form."""
    if isinstance(e, ast.Lit):
        return {"Value": e.value}
    if isinstance(e, ast.EntityLit):
        return {"Value": {"__entity": _uid_json(e.uid)}}
    if isinstance(e, ast.Var):
        return {"Var": e.name}
    if isinstance(e, ast.Slot):
        return {"Slot": e.name}
    if isinstance(e, ast.Unary):
        return {"!" if e.op == "!" else "neg": {"arg": expr_to_json(e.arg)}}
    if isinstance(e, ast.Binary):
        return {e.op: {"left": expr_to_json(e.left), "right": expr_to_json(e.right)}}
    if isinstance(e, ast.Has):
        return {"has": {"left": expr_to_json(e.expr), "attr": e.attr}}
    if isinstance(e, ast.GetAttr):
        return {".": {"left": expr_to_json(e.expr), "attr": e.attr}}
    if isinstance(e, ast.Like):
        pattern = ["Wildcard" if p is ast.WILDCARD else {"Literal": p} for p in e.pattern]
        return {"like": {"left": expr_to_json(e.expr), "pattern": pattern}}
    if isinstance(e, ast.Is):
        d: dict[str, Any] = {"left": expr_to_json(e.expr), "entity_type": e.entity_type}
        if e.in_expr is not None:
            d["in"] = expr_to_json(e.in_expr)
        return {"is": d}
    if isinstance(e, ast.MethodCall):
        if e.name == "isEmpty" and not e.args:
            return {"isEmpty": {"arg": expr_to_json(e.receiver)}}
        if e.name in _BUILTIN_BINARY_METHODS and len(e.args) == 1:
            return {e.name: {"left": expr_to_json(e.receiver), "right": expr_to_json(e.args[0])}}
        return {e.name: [expr_to_json(e.receiver), *(expr_to_json(a) for a in e.args)]}
    if isinstance(e, ast.ExtCall):
        return {e.name: [expr_to_json(a) for a in e.args]}
    if isinstance(e, ast.If):
        return {
            "if-then-else": {
                "if": expr_to_json(e.cond),
                "then": expr_to_json(e.then),
                "else": expr_to_json(e.else_),
            }
        }
    if isinstance(e, ast.SetLit):
        return {"Set": [expr_to_json(x) for x in e.elements]}
    if isinstance(e, ast.RecordLit):
        return {"Record": {k: expr_to_json(v) for k, v in e.fields}}
    raise TypeError(f"not an expression: {e!r}")  # pragma: no cover


def _scope_json(c: ast.ScopeConstraint) -> dict[str, Any]:
    def target(x: EntityUID | ast.Slot | None) -> dict[str, Any]:
        if isinstance(x, ast.Slot):
            return {"slot": x.name}
        if x is None:  # pragma: no cover - the parser never builds this
            raise ValueError(f"{c.var} scope `{c.kind}` needs an entity")
        return {"entity": _uid_json(x)}

    if c.kind == "any":
        return {"op": "All"}
    if c.kind == "eq":
        return {"op": "==", **target(c.entity)}
    if c.kind == "in":
        return {"op": "in", **target(c.entity)}
    if c.kind == "is":
        return {"op": "is", "entity_type": c.entity_type}
    return {"op": "is", "entity_type": c.entity_type, "in": target(c.entity)}


def _action_json(a: ast.ActionConstraint) -> dict[str, Any]:
    if a.kind == "any":
        return {"op": "All"}
    if a.kind == "eq":
        return {"op": "==", "entity": _uid_json(a.entities[0])}
    if a.kind == "in":
        return {"op": "in", "entity": _uid_json(a.entities[0])}
    return {"op": "in", "entities": [_uid_json(u) for u in a.entities]}


def policy_to_json(p: ast.Policy) -> dict[str, Any]:
    """One policy or template in the JSON policy form (``annotations`` only when present)."""
    d: dict[str, Any] = {
        "effect": p.effect,
        "principal": _scope_json(p.principal),
        "action": _action_json(p.action),
        "resource": _scope_json(p.resource),
        "conditions": [{"kind": c.kind, "body": expr_to_json(c.body)} for c in p.conditions],
    }
    if p.annotations:
        d["annotations"] = {a.key: a.value for a in p.annotations}
    return d


def policies_to_json(policies: Iterable[ast.Policy]) -> dict[str, Any]:
    """A policy set: ``staticPolicies`` and ``templates`` keyed ``policy<N>`` by position
    (as the reference implementation does; ``@id`` stays in ``annotations``)."""
    out: dict[str, Any] = {"templates": {}, "staticPolicies": {}, "templateLinks": []}
    for i, p in enumerate(policies):
        out["templates" if p.is_template else "staticPolicies"][f"policy{i}"] = policy_to_json(p)
    return out
