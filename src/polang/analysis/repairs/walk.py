"""The walk: a policy's scope and condition, top down, asking what would make each node true
(or false)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from polang.analysis.trace import PolicyMap
from polang.datalog.builtins import b_like
from polang.datalog.facts import EntityFacts, Request
from polang.language import ast
from polang.language.extensions import Decimal, IPAddr
from polang.language.values import (
    EntityUID,
    SetValue,
    is_action_type,
    value_key,
    value_repr,
)

from .boundaries import (
    _BUILTIN_OF,
    _DECIMAL_METHODS,
    _FLIP,
    _NEGATE,
    _decimal_values,
    _entities_of_type,
    _ips,
    _like_sample,
    _relation_values,
)
from .requirements import _TRIVIAL, Alt, _binary_test, _holds, _Place, _Req, _req
from .results import MAX_ALTERNATIVES, MAX_REPAIR_SIZE

if TYPE_CHECKING:
    pass


# ======================================================================== the walk


class _Oracle:
    """The current value of any expression node of one policy, in one world."""

    def __init__(self, tracer: Any, pm: PolicyMap) -> None:
        self.tracer = tracer
        self.preds = {id(node): pred for pred, node in pm.nodes.items()}

    def value(self, node: ast.Expr) -> tuple[bool, Any]:
        """``(True, value)`` or ``(False, None)`` when it errors or cannot be evaluated."""
        if isinstance(node, ast.Lit):
            return True, node.value
        if isinstance(node, ast.EntityLit):
            return True, node.uid
        pred = self.preds.get(id(node))
        if pred is None:
            return False, None
        d = self.tracer.node(pred)
        if d.error is not None:
            return False, None
        return True, d.value


class _Walker:
    """What would make an expression true or false: alternatives of requirements."""

    def __init__(self, oracle: _Oracle, facts: EntityFacts, request: Request) -> None:
        self.o = oracle
        self.facts = facts
        self.request = request
        self.truncated = False

    # -- combinators --------------------------------------------------------------------

    def _bound(self, alts: list[Alt]) -> list[Alt]:
        uniq = list(dict.fromkeys(a for a in alts if len(a) <= MAX_REPAIR_SIZE))
        if any(not a for a in uniq):
            return list(_TRIVIAL)  # nothing to change dominates every alternative
        uniq.sort(key=len)
        if len(uniq) > MAX_ALTERNATIVES:
            self.truncated = True
            uniq = uniq[:MAX_ALTERNATIVES]
        return uniq

    def cross(self, a: list[Alt], b: list[Alt]) -> list[Alt]:
        if not a or not b:
            return []
        out = [x | y for x in a for y in b if len(x) + len(y) <= MAX_REPAIR_SIZE]
        if len(out) < len(a) * len(b):
            self.truncated = True
        return self._bound(out)

    def union(self, *parts: list[Alt]) -> list[Alt]:
        return self._bound([x for p in parts for x in p])

    # -- sources: the places an expression reads directly ------------------------------

    def source(self, node: ast.Expr) -> _Place | None:
        if isinstance(node, ast.GetAttr):
            return self._member(node.expr, node.attr)
        if isinstance(node, ast.MethodCall) and node.name == "getTag" and len(node.args) == 1:
            ok, ent = self.o.value(node.receiver)
            okk, key = self.o.value(node.args[0])
            if ok and okk and type(ent) is EntityUID and type(key) is str:
                return _Place("tag", ent, (key,))
        return None

    def _member(self, base: ast.Expr, attr: str) -> _Place | None:
        if isinstance(base, ast.Var) and base.name == "context":
            return _Place("ctx", None, (attr,))
        ok, v = self.o.value(base)
        if ok and type(v) is EntityUID:
            return _Place("attr", v, (attr,))
        inner = self.source(base)
        if inner is not None and inner.kind in ("attr", "ctx", "tag"):
            return _Place(inner.kind, inner.entity, (*inner.path, attr))
        return None

    # -- the walk -----------------------------------------------------------------------

    def want(self, node: ast.Expr, goal: bool) -> list[Alt]:
        ok, cur = self.o.value(node)
        if ok and cur is goal:
            return list(_TRIVIAL)
        if isinstance(node, ast.Unary) and node.op == "!":
            return self.want(node.arg, not goal)
        if isinstance(node, ast.Binary):
            if node.op in ("&&", "||"):
                return self._logic(node, goal)
            if node.op in _BUILTIN_OF:
                return self._compare(node.op, node.left, node.right, goal)
            if node.op == "in":
                return self._in(node.left, node.right, goal)
            return []
        if isinstance(node, ast.If):
            return self.union(
                self.cross(self.want(node.cond, True), self.want(node.then, goal)),
                self.cross(self.want(node.cond, False), self.want(node.else_, goal)),
            )
        if isinstance(node, ast.Has):
            place = self._member(node.expr, node.attr)
            if place is None:
                return []
            if goal:
                return [frozenset({_Req(place, "exists", "has")})]
            return [frozenset({_Req(place, "absent", "absent")})]
        if isinstance(node, ast.Like):
            return self._like(node, goal)
        if isinstance(node, ast.Is):
            return self._is(node, goal)
        if isinstance(node, ast.MethodCall):
            return self._method(node, goal)
        place = self.source(node)
        if place is not None:  # a Bool read straight from the data
            return [frozenset({_req(place, f"== {value_repr(goal)}", [goal], goal.__eq__)})]
        return []

    def _logic(self, node: ast.Binary, goal: bool) -> list[Alt]:
        a, b = node.left, node.right
        short = node.op == "||"  # the value that decides alone
        if goal is short:
            return self.union(
                self.want(a, short), self.cross(self.want(a, not short), self.want(b, short))
            )
        return self.cross(self.want(a, not short), self.want(b, not short))

    def _compare(self, op: str, left: ast.Expr, right: ast.Expr, goal: bool) -> list[Alt]:
        rel = op if goal else _NEGATE[op]
        out: list[Alt] = []
        for side, other in ((left, right), (right, left)):
            place = self.source(side)
            if place is None:
                continue
            ok, ov = self.o.value(other)
            if not ok:
                continue
            r = rel if side is left else _FLIP[rel]
            cands = _relation_values(r, ov, self.facts)
            if not cands:
                continue
            bop = _BUILTIN_OF[r]
            from polang.datalog.builtins import builtin

            fn = builtin(bop)
            test = _binary_test(fn, self.facts, ov, True)
            out.append(frozenset({_req(place, f"{r} {value_repr(ov)}", cands, test)}))
        return self._bound(out)

    def _in(self, x: ast.Expr, y: ast.Expr, goal: bool) -> list[Alt]:
        okx, vx = self.o.value(x)
        oky, vy = self.o.value(y)
        out: list[Alt] = []
        facts = self.facts
        groups: list[EntityUID] = []
        if oky and type(vy) is EntityUID:
            groups = [vy]
        elif oky and type(vy) is SetValue and all(type(g) is EntityUID for g in vy):
            groups = sorted(vy)
        # 1. the hierarchy: a membership added, or the memberships cut
        if okx and type(vx) is EntityUID and groups and not is_action_type(vx.type):
            if goal:
                for g in groups[:3]:
                    out.append(
                        frozenset(
                            {_Req(_Place("parent", vx, (), frozenset({g})), "add", f"in {g}")}
                        )
                    )
            elif vx not in groups:
                out.append(
                    frozenset(
                        {_Req(_Place("parent", vx, (), frozenset(groups)), "remove", "not in")}
                    )
                )
        # 2. the right side read from the data: an entity (or set) the left side is in
        ysrc = self.source(y)
        if ysrc is not None and okx and type(vx) is EntityUID:
            anc = [vx, *sorted(facts.ancestors_of(vx))]
            if goal:
                if oky and type(vy) is SetValue:
                    cands: list[Any] = [SetValue([*vy, vx])]
                    text = f"contains {vx}"
                else:
                    same = [a for a in anc if oky and type(vy) is EntityUID and a.type == vy.type]
                    cands = same + [a for a in anc if a not in same]
                    text = f"an entity {vx} is in"
                test = _holds(lambda v: _in_value(facts, vx, v))
                out.append(frozenset({_req(ysrc, text, cands[:4], test)}))
            elif oky and type(vy) is EntityUID:
                others = [
                    u
                    for u in _entities_of_type(facts, vy.type, exclude=vy, limit=8)
                    if not facts.is_in(vx, u)
                ]
                test = _holds(lambda v: not _in_value(facts, vx, v))
                if others:
                    text = f"an entity {vx} is not in"
                    out.append(frozenset({_req(ysrc, text, others[:2], test)}))
            elif oky and type(vy) is SetValue:
                keep = [g for g in vy if not (type(g) is EntityUID and facts.is_in(vx, g))]
                test = _holds(lambda v: not _in_value(facts, vx, v))
                out.append(
                    frozenset({_req(ysrc, f"without {vx}'s groups", [SetValue(keep)], test)})
                )
        # 3. the left side read from the data: set it to the group (or a member of the set)
        xsrc = self.source(x)
        if xsrc is not None and goal and groups:
            test = _holds(lambda v: _in_value(facts, v, vy))
            out.append(frozenset({_req(xsrc, f"in {value_repr(vy)}", groups[:3], test)}))
        return self._bound(out)

    def _like(self, node: ast.Like, goal: bool) -> list[Alt]:
        place = self.source(node.expr)
        if place is None:
            return []
        pattern = "".join(
            "*" if isinstance(p, ast.Wildcard) else ("\\" + p if p in ("*", "\\") else p)
            for p in node.pattern
        )
        shown = format_like(node)
        samples = _like_sample(pattern)
        if goal:
            cands = samples
            text = f"like {shown}"
        else:
            cands = ["", "x", *(s + "x" for s in samples), *("x" + s for s in samples)]
            text = f"not like {shown}"
        facts = self.facts
        test = _holds(lambda v: b_like(facts, v, pattern) is goal)
        return [frozenset({_req(place, text, cands, test)})]

    def _is(self, node: ast.Is, goal: bool) -> list[Alt]:
        ok, v = self.o.value(node.expr)
        if not ok or type(v) is not EntityUID:
            return []
        if v.type != node.entity_type:
            return []  # an entity's type is its identity
        if node.in_expr is None:
            return list(_TRIVIAL) if goal else []
        return self._in(node.expr, node.in_expr, goal)

    def _method(self, node: ast.MethodCall, goal: bool) -> list[Alt]:
        name = node.name
        facts = self.facts
        recv = node.receiver
        args = node.args
        out: list[Alt] = []
        if name in ("contains", "containsAll", "containsAny") and len(args) == 1:
            oks, s = self.o.value(recv)
            oka, a = self.o.value(args[0])
            ssrc = self.source(recv)
            asrc = self.source(args[0])
            from polang.datalog.builtins import builtin

            fn = builtin(f"method:{name}")
            if ssrc is not None and oka:
                base = list(s) if oks and type(s) is SetValue else []
                if name == "contains":
                    new = [SetValue([*base, a])] if goal else [SetValue(x for x in base if x != a)]
                    text = f"{'contains' if goal else 'does not contain'} {value_repr(a)}"
                elif type(a) is SetValue and goal:
                    items = list(a) if name == "containsAll" else list(a)[:1]
                    new = [SetValue([*base, *items])]
                    text = f"{name} {value_repr(a)}"
                elif type(a) is SetValue:
                    drop = a.keys
                    new = [SetValue(x for x in base if value_key(x) not in drop)]
                    text = f"not {name} {value_repr(a)}"
                else:
                    new = []
                    text = ""
                test = _holds(lambda v: fn(facts, v, a) is goal)
                if new:
                    out.append(frozenset({_req(ssrc, text, new, test)}))
            if asrc is not None and oks and type(s) is SetValue and goal:
                elems = sorted(s, key=value_repr)
                if name == "contains":
                    cands: list[Any] = elems[:3]
                elif name == "containsAny":
                    cands = [SetValue([e]) for e in elems[:3]]
                else:
                    cands = [SetValue()]
                test = _holds(lambda v: fn(facts, s, v) is True)
                if cands:
                    out.append(frozenset({_req(asrc, f"in {value_repr(s)}", cands, test)}))
            return self._bound(out)
        if name == "isEmpty" and not args:
            src = self.source(recv)
            if src is not None and goal:
                out.append(
                    frozenset({_req(src, "is empty", [SetValue()], lambda v: v == SetValue())})
                )
            return out
        if name == "hasTag" and len(args) == 1:
            ok, ent = self.o.value(recv)
            okk, key = self.o.value(args[0])
            if ok and okk and type(ent) is EntityUID and type(key) is str:
                place = _Place("tag", ent, (key,))
                op: Literal["exists", "absent"] = "exists" if goal else "absent"
                return [frozenset({_Req(place, op, "has tag" if goal else "no tag")})]
            return []
        if name in _DECIMAL_METHODS and len(args) == 1:
            rel = _DECIMAL_METHODS[name]
            rel = rel if goal else _NEGATE[rel]
            from polang.datalog.builtins import builtin

            fn = builtin(f"method:{name}")
            for side, other, r in ((recv, args[0], rel), (args[0], recv, _FLIP[rel])):
                src = self.source(side)
                ok, ov = self.o.value(other)
                if src is None or not ok or type(ov) is not Decimal:
                    continue
                cands = _decimal_values(r, ov)
                test = _binary_test(fn, facts, ov, goal, source_first=side is recv)
                if cands:
                    out.append(frozenset({_req(src, f"{r} {value_repr(ov)}", cands, test)}))
            return self._bound(out)
        if name == "isInRange" and len(args) == 1:
            from polang.datalog.builtins import builtin

            fn = builtin("method:isInRange")
            okr, rng = self.o.value(args[0])
            src = self.source(recv)
            if src is not None and okr and type(rng) is IPAddr:
                cands = _range_samples(rng, goal)
                test = _holds(lambda v: fn(facts, v, rng) is goal)
                text = f"{'in' if goal else 'not in'} range {value_repr(rng)}"
                out.append(frozenset({_req(src, text, cands, test)}))
            oka, addr = self.o.value(recv)
            asrc = self.source(args[0])
            if asrc is not None and oka and type(addr) is IPAddr and goal:
                test = _holds(lambda v: fn(facts, addr, v) is True)
                out.append(
                    frozenset({_req(asrc, f"a range holding {value_repr(addr)}", [addr], test)})
                )
            return self._bound(out)
        if name in ("isIpv4", "isIpv6", "isLoopback", "isMulticast") and not args:
            from polang.datalog.builtins import builtin

            fn = builtin(f"method:{name}")
            src = self.source(recv)
            if src is not None:
                test = _holds(lambda v: fn(facts, v) is goal)
                cands = [ip for ip in _ips() if test(ip)]
                if cands:
                    text = f"{name}() is {value_repr(goal)}"
                    out.append(frozenset({_req(src, text, cands[:1], test)}))
            return out
        read = self.source(node)  # getTag(...) of a Bool
        if read is not None:
            return [frozenset({_req(read, f"== {value_repr(goal)}", [goal], goal.__eq__)})]
        return []


def _range_samples(rng: IPAddr, inside: bool) -> list[IPAddr]:
    bits = 128 if rng.v6 else 32
    if inside:
        return [IPAddr(rng.v6, rng.network, bits)]
    out = []
    if rng.network > 0:
        out.append(IPAddr(rng.v6, rng.network - 1, bits))
    if rng.broadcast < (1 << bits) - 1:
        out.append(IPAddr(rng.v6, rng.broadcast + 1, bits))
    out.extend(_ips())
    return out


def _in_value(facts: EntityFacts, x: Any, y: Any) -> bool:
    from polang.datalog.builtins import b_in

    return b_in(facts, x, y)


def format_like(node: ast.Like) -> str:
    from polang.language.format import format_expr

    text = format_expr(node)
    i = text.rfind(" like ")
    return text[i + 6 :] if i >= 0 else text


# ======================================================================== scopes


def _scope_alts(
    policy: ast.Policy | None, request: Request, facts: EntityFacts, goal: bool
) -> list[Alt] | None:
    """Alternatives that make the policy's scope hold (``goal``) or fail; ``None``: the
    scope cannot be read (no AST)."""
    if policy is None:
        return None
    parts: list[list[Alt]] = []
    act = _action_holds(policy.action, request, facts)
    if not act:
        return [] if goal else list(_TRIVIAL)
    for c in (policy.principal, policy.resource):
        value = request.var(c.var)
        parts.append(_scope_part(c, value, facts, goal))
    if goal:
        out = list(_TRIVIAL)
        for p in parts:
            out = [x | y for x in out for y in p]
        return out
    return [a for p in parts for a in p]


def _action_holds(c: ast.ActionConstraint, request: Request, facts: EntityFacts) -> bool:
    a = request.action
    if c.kind == "any":
        return True
    if c.kind == "eq":
        return a == c.entities[0]
    return any(facts.is_in(a, e) for e in c.entities)


def _scope_part(c: ast.ScopeConstraint, value: Any, facts: EntityFacts, goal: bool) -> list[Alt]:
    if c.kind == "any":
        return list(_TRIVIAL) if goal else []
    if value is None or isinstance(c.entity, ast.Slot):
        return [] if goal else list(_TRIVIAL)
    ent = c.entity
    type_ok = c.kind not in ("is", "is_in") or value.type == c.entity_type
    if c.kind == "eq":
        holds = value == ent
        return list(_TRIVIAL) if holds is goal else []
    if c.kind == "is":
        return list(_TRIVIAL) if type_ok is goal else []
    assert isinstance(ent, EntityUID)
    member = facts.is_in(value, ent)
    if goal:
        if not type_ok:
            return []
        if member:
            return list(_TRIVIAL)
        return [
            frozenset({_Req(_Place("parent", value, (), frozenset({ent})), "add", f"in {ent}")})
        ]
    if not type_ok or not member:
        return list(_TRIVIAL)
    if value == ent:
        return []
    return [frozenset({_Req(_Place("parent", value, (), frozenset({ent})), "remove", "not in")})]
