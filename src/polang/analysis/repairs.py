"""Repairs: the smallest changes to the *data* that would flip a decision, each verified.

For a deny, a repair is a set of fact changes (an attribute value, a membership added or
removed, a context field, a tag) after which the same request is allowed; for an allow,
one after which it is denied. The request's principal, action and resource identities
and the policies are never changed.

How they are found. Each policy's condition is walked top down (the AST, with every
sub-expression's current value read off the Program by the explanation's tracer) asking
"what would make this node true (or false)?": ``&&`` needs both operands, ``||`` either,
a comparison whose one side reads the data (an attribute, a context field, a tag) yields
a *requirement* on that place with the boundary value (``principal.level >= 3`` with the
level 2 -> the level 3), ``in`` yields a membership to add (or the memberships to cut),
``has`` an attribute to add, ``like`` a sample string that matches, the extension
methods their boundary. A policy's scope adds its membership requirement. The
requirements of one alternative are turned into concrete changes (one value per place
that satisfies every requirement on it), and then **every candidate is verified** by
deciding the changed request again with the authorizer's backend: only candidates that
flip the decision are kept (so a permit that would apply but trips a forbid is not a
repair; the search then tries to add the change that stops the forbid).

Minimal: every kept repair is shrunk (a change whose removal still flips the decision is
dropped, verified again) and a repair that changes a superset of the places another
repair changes is left out. Repairs are ranked by size. The search is bounded: at most
``MAX_DECISIONS`` verifications, ``MAX_ALTERNATIVES`` alternatives per expression and
``MAX_REPAIR_SIZE`` changes per repair; ``Repairs.complete`` says whether the bounded
search ran out before trying everything, and ``more`` whether more repairs than the
limit were found.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polang.analysis.trace import PolicyMap, Tracer, hierarchy_path, program_views
from polang.datalog.builtins import b_like
from polang.datalog.facts import EntityFacts, Request
from polang.errors import EvaluationError, PolangError
from polang.language import ast
from polang.language.entities import Entity, EntityStore
from polang.language.extensions import DateTime, Decimal, Duration, IPAddr
from polang.language.values import (
    LONG_MAX,
    LONG_MIN,
    EntityUID,
    RecordValue,
    SetValue,
    is_action_type,
    value_key,
    value_repr,
    value_to_json,
)

if TYPE_CHECKING:
    from polang.language.schema import Schema, SchemaType

MAX_REPAIRS = 10
"""Repairs returned by default (``limit``); ``Repairs.more`` says when more were found."""

MAX_DECISIONS = 200
"""Verifications (decisions of a changed request) one search may make."""

MAX_ALTERNATIVES = 48
"""Alternatives kept per expression while the candidates are built (smallest first)."""

MAX_REPAIR_SIZE = 4
"""Changes in one repair; larger candidates are not tried."""

ChangeKind = Literal[
    "set_attribute",
    "remove_attribute",
    "add_parent",
    "remove_parent",
    "set_context",
    "remove_context",
    "set_tag",
    "remove_tag",
]

#: The change to an entity's attribute (``False``) or tag (``True``): set, or (``True``) removed.
_VALUE_CHANGES: dict[bool, dict[bool, ChangeKind]] = {
    False: {False: "set_attribute", True: "remove_attribute"},
    True: {False: "set_tag", True: "remove_tag"},
}

_MISSING = object()


# ======================================================================== results


@dataclass(frozen=True, slots=True)
class Change:
    """One fact changed: an attribute, a membership, a context field or a tag.

    ``path`` is the context path (``set_context``) or, for an attribute, the record keys
    below ``attribute`` that the constraint is about (the value is then the attribute's
    whole new record). ``membership`` is the chain ``entity in ... in group`` that the
    change creates (``add_parent``) or cuts (``remove_parent``).
    """

    kind: ChangeKind
    entity: EntityUID | None = None
    attribute: str | None = None
    tag: str | None = None
    parent: EntityUID | None = None
    path: tuple[str, ...] = ()
    value: Any = field(default=None, compare=False)
    value_key: Any = None
    constraint: str = ""
    membership: tuple[EntityUID, ...] = field(default=(), compare=False)

    @property
    def place(self) -> tuple[Any, ...]:
        """What the change is about, whatever the new value (for minimality)."""
        if self.kind in ("add_parent", "remove_parent"):
            return ("parent", self.entity, self.parent)
        if self.kind in ("set_context", "remove_context"):
            return ("context", self.path)
        if self.kind in ("set_tag", "remove_tag"):
            return ("tag", self.entity, self.tag)
        return ("attribute", self.entity, self.attribute)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind in ("set_context", "remove_context"):
            out["path"] = list(self.path)
        else:
            out["entity"] = str(self.entity)
        if self.attribute is not None:
            out["attribute"] = self.attribute
            if self.path:
                out["path"] = list(self.path)
        if self.tag is not None:
            out["tag"] = self.tag
        if self.parent is not None:
            out["parent"] = str(self.parent)
        if self.kind.startswith("set_"):
            out["value"] = value_to_json(self.value)
        if self.constraint:
            out["constraint"] = self.constraint
        if self.membership:
            out["membership"] = [str(u) for u in self.membership]
        return out

    def describe(self) -> str:
        """One line for people: ``set User::"alice".clearance = 3  (>= 3)``."""
        k = self.kind
        if k == "add_parent":
            chain = " in ".join(map(str, self.membership)) if self.membership else ""
            return f"add {self.entity} to {self.parent}" + (f"  ({chain})" if chain else "")
        if k == "remove_parent":
            chain = " in ".join(map(str, self.membership)) if self.membership else ""
            return f"remove {self.entity} from {self.parent}" + (
                f"  (cuts {chain})" if chain else ""
            )
        if k in ("set_context", "remove_context"):
            where = "context." + ".".join(self.path)
        elif k in ("set_tag", "remove_tag"):
            where = f"{self.entity}.getTag({value_repr(self.tag)})"
        else:
            where = f"{self.entity}.{self.attribute}"
        if k.startswith("remove_"):
            return f"remove {where}"
        text = f"set {where} = {value_repr(self.value)}"
        if self.constraint and self.constraint != f"== {value_repr(self.value)}":
            inner = ".".join(self.path) if k != "set_context" else ""
            text += f"  ({inner + ' ' if inner else ''}{self.constraint})"
        return text


@dataclass(frozen=True, slots=True)
class Repair:
    """A verified set of changes, and the policy whose verdict it changes.

    ``outcome`` is ``applies`` (the repair makes ``policy`` apply: a permit for a deny,
    a forbid for an allow) or ``stops_applying`` (the repair stops ``policy``: the forbid
    that denied, or the permit(s) that allowed). ``policies`` lists every policy whose
    verdict the repair changes in that sense; ``reasons`` is the changed request's
    decision's determining policies.
    """

    policy: str
    outcome: Literal["applies", "stops_applying"]
    changes: tuple[Change, ...]
    decision: Literal["allow", "deny"]
    policies: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.changes)

    def places(self) -> frozenset[tuple[Any, ...]]:
        return frozenset(c.place for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "outcome": self.outcome,
            "policies": list(self.policies),
            "decision": self.decision,
            "reasons": list(self.reasons),
            "changes": [c.to_dict() for c in self.changes],
        }

    def describe(self) -> str:
        verb = "applies" if self.outcome == "applies" else "stops applying"
        return f"{value_repr(self.policy)} {verb}: " + "; ".join(c.describe() for c in self.changes)


class Repairs(Sequence[Repair]):
    """The repairs found for one request, smallest first.

    ``more``: more repairs were found than ``limit`` shows. ``complete``: the search
    tried every candidate it generated within its bounds (when false, other repairs
    may exist). ``note`` says either in words.
    """

    def __init__(
        self,
        items: Sequence[Repair],
        *,
        goal: Literal["allow", "deny"],
        limit: int,
        more: bool,
        complete: bool,
        decisions: int,
    ) -> None:
        self.items = list(items)
        self.goal = goal
        self.limit = limit
        self.more = more
        self.complete = complete
        self.decisions = decisions

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: Any) -> Any:
        return self.items[i]

    def __iter__(self) -> Iterator[Repair]:
        return iter(self.items)

    def __repr__(self) -> str:
        return f"Repairs({len(self.items)} to {self.goal}, more={self.more})"

    @property
    def note(self) -> str | None:
        if self.more:
            return f"more repairs exist; showing the {len(self.items)} smallest"
        if not self.complete:
            return "the search stopped at its bounds; other repairs may exist"
        if not self.items:
            word = "allowed" if self.goal == "allow" else "denied"
            return f"no repair found: no change of the kinds searched makes this request {word}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "repairs": [r.to_dict() for r in self.items],
            "more": self.more,
            "complete": self.complete,
            "note": self.note,
        }


# ======================================================================== requirements


@dataclass(frozen=True, slots=True)
class _Place:
    """A place in the data: an entity attribute (with a record path below it), a context
    path, a tag (with a path below it), or an entity's membership in groups."""

    kind: Literal["attr", "ctx", "tag", "parent"]
    entity: EntityUID | None
    path: tuple[str, ...] = ()
    groups: frozenset[EntityUID] = frozenset()


@dataclass(frozen=True, slots=True)
class _Req:
    """A requirement on a place. ``op``: ``value`` (the value must pass ``test``; the
    ``candidates`` are tried in order), ``exists``, ``absent``, ``add`` (a membership in
    the one group of the place) or ``remove`` (no membership in any group of it)."""

    place: _Place
    op: Literal["value", "exists", "absent", "add", "remove"]
    constraint: str
    candidates: tuple[Any, ...] = field(default=(), compare=False)
    cand_keys: tuple[Any, ...] = ()
    test: Callable[[Any], bool] | None = field(default=None, compare=False)


Alt = frozenset[_Req]
_NONE: list[Alt] = []
_TRIVIAL: list[Alt] = [frozenset()]


def _req(
    place: _Place, constraint: str, candidates: Iterable[Any], test: Callable[[Any], bool]
) -> _Req:
    cands = tuple(candidates)
    return _Req(place, "value", constraint, cands, tuple(_vk(c) for c in cands), test)


def _vk(v: Any) -> Any:
    try:
        return (type(v), value_key(v))
    except Exception:
        return (type(v), repr(v))


def _binary_test(
    fn: Callable[..., Any], facts: EntityFacts, other: Any, goal: bool, *, source_first: bool = True
) -> Callable[[Any], bool]:
    """``fn(source, other) is goal`` (or ``fn(other, source)``) as a test of the source."""
    if source_first:
        return _holds(lambda v: fn(facts, v, other) is goal)
    return _holds(lambda v: fn(facts, other, v) is goal)


def _holds(fn: Callable[[Any], Any]) -> Callable[[Any], bool]:
    def test(v: Any) -> bool:
        try:
            return fn(v) is True
        except (EvaluationError, TypeError, ValueError, AttributeError):
            return False

    return test


# ======================================================================== values near others


def _succ(v: Any) -> Any:
    """The next value of an ordered type (``None`` at the end of its range)."""
    return _step(v, 1)


def _pred(v: Any) -> Any:
    return _step(v, -1)


def _step(v: Any, d: int) -> Any:
    t = type(v)
    try:
        if t is int:
            return v + d if LONG_MIN <= v + d <= LONG_MAX else None
        if t is DateTime:
            return DateTime(v.ms + d)
        if t is Duration:
            return Duration(v.ms + d)
        if t is Decimal:
            return Decimal(v.scaled + d)
    except (ValueError, OverflowError):
        return None
    return None


_IP_SAMPLES = ("10.0.0.1", "127.0.0.1", "224.0.0.1", "192.168.0.1", "::1", "2001:db8::1", "ff02::1")


def _ips() -> list[IPAddr]:
    from polang.language.extensions.ipaddr import parse_ipaddr

    return [parse_ipaddr(s) for s in _IP_SAMPLES]


def _other_than(v: Any, facts: EntityFacts | None = None) -> list[Any]:
    """Values of ``v``'s type that differ from it (a few, the simplest first)."""
    t = type(v)
    if t is bool:
        return [not v]
    if t is int:
        return [x for x in (_succ(v), _pred(v)) if x is not None]
    if t is str:
        return ["" if v else "x", v + "x"]
    if t in (DateTime, Duration, Decimal):
        return [x for x in (_succ(v), _pred(v)) if x is not None]
    if t is IPAddr:
        return [x for x in _ips() if x != v]
    if t is SetValue:
        return [SetValue()] if len(v) else []
    if t is EntityUID and facts is not None:
        return _entities_of_type(facts, v.type, exclude=v)[:2]
    return []


def _entities_of_type(
    facts: EntityFacts,
    type_name: str,
    exclude: EntityUID | None = None,
    scan: int = 20000,
    limit: int = 3,
) -> list[EntityUID]:
    """A few stored entities of a type (from the first ``scan`` entities)."""
    out: list[EntityUID] = []
    for e in itertools.islice(facts.entities, scan):
        if e.uid.type == type_name and e.uid != exclude:
            out.append(e.uid)
            if len(out) >= limit:
                break
    return out


def _like_sample(pattern: str) -> list[str]:
    """Strings that may match ``pattern`` (the lowering's text: ``*`` wildcard, ``\\``
    escapes): the literal characters alone, and with an ``x`` for each wildcard."""
    plain: list[str] = []
    filled: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            plain.append(pattern[i + 1])
            filled.append(pattern[i + 1])
            i += 2
            continue
        if ch == "*":
            filled.append("x")
        else:
            plain.append(ch)
            filled.append(ch)
        i += 1
    return ["".join(plain), "".join(filled)]


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_BUILTIN_OF = {"==": "eq", "!=": "neq", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _relation_values(rel: str, other: Any, facts: EntityFacts) -> list[Any]:
    """Values ``x`` with ``x rel other`` (the boundary first)."""
    if rel == "==":
        return [other]
    if rel == "!=":
        return _other_than(other, facts)
    if type(other) not in (int, DateTime, Duration):
        return []
    if rel == "<":
        v = _pred(other)
    elif rel == ">":
        v = _succ(other)
    else:
        v = other
    return [] if v is None else [v]


_DECIMAL_METHODS = {
    "lessThan": "<",
    "lessThanOrEqual": "<=",
    "greaterThan": ">",
    "greaterThanOrEqual": ">=",
}


def _decimal_values(rel: str, other: Decimal) -> list[Any]:
    if rel == "<":
        v = _pred(other)
    elif rel == ">":
        v = _succ(other)
    elif rel in ("<=", ">="):
        v = other
    else:
        return []
    return [] if v is None else [v]


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


# ======================================================================== changes


class _World:
    """A request over entity facts, with changes applied."""

    def __init__(self, request: Request, facts: EntityFacts) -> None:
        self.request = request
        self.facts = facts


def _sample(t: SchemaType | None, facts: EntityFacts) -> Any:
    from polang.language import schema as sch
    from polang.language.extensions.datetime import parse_datetime
    from polang.language.extensions.decimal import parse_decimal
    from polang.language.extensions.duration import parse_duration
    from polang.language.extensions.ipaddr import parse_ipaddr

    if t is None:
        return True
    if isinstance(t, sch.PrimType):
        return {"Long": 0, "String": "", "Bool": True}.get(t.name, True)
    if isinstance(t, sch.ExtensionType):
        return {
            "decimal": lambda: parse_decimal("0.0"),
            "ipaddr": lambda: parse_ipaddr("0.0.0.0"),
            "datetime": lambda: parse_datetime("1970-01-01"),
            "duration": lambda: parse_duration("0ms"),
        }[t.name]()
    if isinstance(t, sch.SetType):
        return SetValue()
    if isinstance(t, sch.EntityRefType):
        found = _entities_of_type(facts, t.name)
        return found[0] if found else EntityUID(t.name, "example")
    if isinstance(t, sch.RecordType):
        return RecordValue(
            {k: _sample(a.type, facts) for k, a in t.attributes.items() if a.required}
        )
    return True


def _schema_type(schema: Schema | None, place: _Place, request: Request) -> SchemaType | None:
    """The declared type of a place, when the schema says."""
    if schema is None:
        return None
    from polang.language import schema as sch

    t: Any
    if place.kind == "ctx":
        ad = schema.action(request.action)
        if ad is None:
            return None
        t = ad.context
        path = place.path
    elif place.kind in ("attr", "tag"):
        assert place.entity is not None
        et = schema.entity_type(place.entity.type)
        if et is None:
            return None
        if place.kind == "tag":
            t = et.tags
            path = place.path[1:]
        else:
            t = et.shape
            path = place.path
    else:
        return None
    for key in path:
        if not isinstance(t, sch.RecordType):
            return None
        a = t.attributes.get(key)
        if a is None:
            return None
        t = a.type
    return t


def _fits(t: SchemaType | None, v: Any) -> bool:
    """Whether a value has the declared type (light: shapes and entity types)."""
    if t is None:
        return True
    from polang.language import schema as sch
    from polang.language.extensions import EXTENSION_CLASSES

    if isinstance(t, sch.PrimType):
        want = {"Long": int, "String": str, "Bool": bool}.get(t.name)
        return want is None or type(v) is want
    if isinstance(t, sch.ExtensionType):
        return type(v) is EXTENSION_CLASSES.get(t.name, type(v))
    if isinstance(t, sch.EntityRefType):
        return type(v) is EntityUID and v.type == t.name
    if isinstance(t, sch.SetType):
        return type(v) is SetValue and all(_fits(t.element, x) for x in v)
    if isinstance(t, sch.RecordType):
        return type(v) is RecordValue
    return True


def _get_path(value: Any, path: Sequence[str]) -> Any:
    for k in path:
        if type(value) is not RecordValue or k not in value.fields:
            return _MISSING
        value = value.fields[k]
    return value


def _set_path(value: Any, path: Sequence[str], new: Any) -> Any:
    """``value`` (a record, or missing) with ``path`` set to ``new`` (``_MISSING``: removed)."""
    if not path:
        return new
    fields = dict(value.fields) if type(value) is RecordValue else {}
    head = path[0]
    inner = _set_path(fields.get(head, _MISSING), path[1:], new)
    if inner is _MISSING:
        fields.pop(head, None)
    else:
        fields[head] = inner
    return RecordValue(fields)


class _Materializer:
    """Requirements -> concrete changes (several ways for a cut membership)."""

    def __init__(self, world: _World, schema: Schema | None) -> None:
        self.world = world
        self.schema = schema

    def current(self, place: _Place) -> Any:
        facts = self.world.facts
        if place.kind == "ctx":
            return _get_path(self.world.request.context, place.path)
        assert place.entity is not None
        ent = facts.get(place.entity)
        if ent is None:
            return _MISSING
        if place.kind == "attr":
            return _get_path(RecordValue(ent.attrs), place.path)
        return _get_path(RecordValue(ent.tags), place.path)

    def changes(self, alt: Alt) -> list[tuple[Change, ...]]:
        by_place: dict[_Place, list[_Req]] = {}
        for r in alt:
            by_place.setdefault(r.place, []).append(r)
        options: list[list[tuple[Change, ...]]] = []
        for place, reqs in sorted(by_place.items(), key=lambda kv: _place_order(kv[0])):
            opts = (
                self._membership(place, reqs)
                if place.kind == "parent"
                else self._value(place, reqs)
            )
            if not opts:
                return []
            options.append(opts)
        out: list[tuple[Change, ...]] = []
        for combo in itertools.islice(itertools.product(*options), 8):
            merged: list[Change] = []
            for part in combo:
                merged.extend(part)
            cs = tuple(dict.fromkeys(merged))
            if len(cs) <= MAX_REPAIR_SIZE:
                out.append(cs)
        return out

    def _value(self, place: _Place, reqs: list[_Req]) -> list[tuple[Change, ...]]:
        """``[()]`` when the place already satisfies every requirement, ``[]`` when no
        value does, else the one change."""
        ops = {r.op for r in reqs}
        cur = self.current(place)
        if "absent" in ops:
            if ops != {"absent"}:
                return []
            if cur is _MISSING:
                return [()]
            return [(self._change(place, _MISSING, "absent"),)]
        tests = [r.test for r in reqs if r.op == "value" and r.test is not None]
        if cur is not _MISSING and all(t(cur) for t in tests):
            return [()]
        declared = _schema_type(self.schema, place, self.world.request)
        cands: list[Any] = []
        texts = [r.constraint for r in reqs if r.op == "value"]
        for r in reqs:
            cands.extend(r.candidates)
        if not tests:  # only `has`: any value will do; the declared type's simplest
            cands = [_sample(declared, self.world.facts)]
            texts = ["has"]
        for c in cands:
            if all(t(c) for t in tests) and _fits(declared, c):
                return [(self._change(place, c, " && ".join(dict.fromkeys(texts))),)]
        return []

    def _change(self, place: _Place, value: Any, constraint: str) -> Change:
        remove = value is _MISSING
        if place.kind == "ctx":
            return Change(
                "remove_context" if remove else "set_context",
                path=place.path,
                value=None if remove else value,
                value_key=None if remove else _vk(value),
                constraint=constraint,
            )
        assert place.entity is not None
        ent = self.world.facts.get(place.entity)
        head, rest = place.path[0], place.path[1:]
        tag = place.kind == "tag"
        values = (ent.tags if tag else ent.attrs) if ent is not None else {}
        old = values.get(head, _MISSING)
        new = _set_path(old, rest, value) if rest else value
        remove = new is _MISSING
        return Change(
            _VALUE_CHANGES[tag][remove],
            place.entity,
            tag=head if tag else None,
            attribute=None if tag else head,
            path=rest,
            value=None if remove else new,
            value_key=None if remove else _vk(new),
            constraint=constraint,
        )

    def _membership(self, place: _Place, reqs: list[_Req]) -> list[tuple[Change, ...]]:

        ops = {r.op for r in reqs}
        facts = self.world.facts
        x = place.entity
        assert x is not None
        if ops == {"add"}:
            (g,) = tuple(place.groups)
            if facts.is_in(x, g):
                return [()]
            return [
                (
                    Change(
                        "add_parent",
                        x,
                        parent=g,
                        constraint=f"in {g}",
                        membership=(x, g),
                    ),
                )
            ]
        if ops != {"remove"}:
            return []
        if not any(facts.is_in(x, g) for g in place.groups):
            return [()]
        cuts = _cuts(facts, x, place.groups)
        out: list[tuple[Change, ...]] = []
        for cut in cuts:
            changes = []
            for child, parent in cut:
                path: tuple[EntityUID, ...] = ()
                for g in sorted(place.groups):
                    p1 = hierarchy_path(facts, x, child)
                    p2 = hierarchy_path(facts, parent, g)
                    if p1 is not None and p2 is not None:
                        path = (*p1, *p2)
                        break
                changes.append(
                    Change(
                        "remove_parent",
                        child,
                        parent=parent,
                        constraint="not in " + ", ".join(map(str, sorted(place.groups))),
                        membership=path,
                    )
                )
            out.append(tuple(changes))
        return out


def _place_order(p: _Place) -> tuple[Any, ...]:
    return (p.kind, str(p.entity), p.path, sorted(map(str, p.groups)))


def _cuts(
    facts: EntityFacts, x: EntityUID, groups: frozenset[EntityUID]
) -> list[list[tuple[EntityUID, EntityUID]]]:
    """Ways to cut every membership path from ``x`` to the groups: ``x``'s own edges into
    them, and a minimum edge cut of the paths (when it differs)."""
    import networkx as nx

    def reaches(u: EntityUID) -> bool:
        return any(facts.is_in(u, g) for g in groups)

    region: set[EntityUID] = set()
    edges: list[tuple[EntityUID, EntityUID]] = []
    stack = [x]
    region.add(x)
    while stack and len(region) < 10000:
        u = stack.pop()
        ent = facts.get(u)
        if ent is None or u in groups:
            continue
        for p in sorted(ent.parents):
            if reaches(p):
                edges.append((u, p))
                if p not in region:
                    region.add(p)
                    stack.append(p)
    own = [(c, p) for c, p in edges if c == x]
    out: list[list[tuple[EntityUID, EntityUID]]] = []
    if own and len(own) <= MAX_REPAIR_SIZE:
        out.append(own)
    g: nx.DiGraph = nx.DiGraph()
    g.add_edges_from(edges)
    sink = ("\0sink", "")
    for t in groups:
        if t in g:
            g.add_edge(t, sink)
    if x in g and sink in g:
        try:
            cut = nx.minimum_edge_cut(g, x, sink)
        except (nx.NetworkXError, nx.NetworkXUnbounded):  # pragma: no cover
            cut = set()
        if cut and all(e[1] != sink for e in cut):
            ordered = sorted(cut, key=lambda e: (str(e[0]), str(e[1])))
            if sorted(ordered) != sorted(own) and len(ordered) <= MAX_REPAIR_SIZE:
                out.append(ordered)
    return out


def apply_changes(
    request: Request, facts: EntityFacts, changes: Iterable[Change]
) -> tuple[Request, EntityFacts]:
    """The request and facts with the changes made (new objects; the inputs are kept)."""
    ctx = request.context
    ents: dict[EntityUID, Entity] = {}

    def entity(uid: EntityUID) -> Entity:
        e = ents.get(uid)
        if e is None:
            old = facts.get(uid)
            e = (
                Entity(uid, dict(old.attrs), set(old.parents), dict(old.tags))
                if old is not None
                else Entity(uid)
            )
            ents[uid] = e
        return e

    for c in changes:
        k = c.kind
        if k == "set_context":
            ctx = _set_path(ctx, c.path, c.value)
        elif k == "remove_context":
            ctx = _set_path(ctx, c.path, _MISSING)
        elif c.entity is not None:
            e = entity(c.entity)
            if k == "set_attribute" and c.attribute is not None:
                e.attrs[c.attribute] = c.value
            elif k == "remove_attribute" and c.attribute is not None:
                e.attrs.pop(c.attribute, None)
            elif k == "set_tag" and c.tag is not None:
                e.tags[c.tag] = c.value
            elif k == "remove_tag" and c.tag is not None:
                e.tags.pop(c.tag, None)
            elif k == "add_parent" and c.parent is not None:
                e.parents.add(c.parent)
            elif k == "remove_parent" and c.parent is not None:
                e.parents.discard(c.parent)
    if type(ctx) is not RecordValue:  # pragma: no cover - paths start at the record
        ctx = RecordValue()
    new_request = Request(request.principal, request.action, request.resource, ctx)
    return new_request, changed_facts(facts, list(ents.values()))


SMALL_STORE = 2000
"""Below this many entities a membership change rebuilds the closure (cheap and simple)."""


class _Own(dict[Any, Any]):
    __slots__ = ("base",)

    def __init__(self, own: Mapping[Any, Any], base: Callable[[Any], Any]) -> None:
        super().__init__(own)
        self.base = base

    def __missing__(self, key: Any) -> Any:
        return self.base(key)


class _PatchedFacts(EntityFacts):
    """Entity facts with a few entities replaced, memberships included, over a base.

    ``EntityFacts.with_entities`` rebuilds the whole closure when a replaced entity's
    parents change (0.3 s at 10,000 entities); a repair search decides many such
    variants, so only the closures that can change are recomputed here: those of the
    changed entities and of the entities below them. Every public member of
    ``EntityFacts`` is provided here from the base's public members (the base class's
    own fields are never set, so its internals may change freely).
    """

    __slots__ = (
        "_p_anc",
        "_p_ancestors",
        "_p_base",
        "_p_entities",
        "_p_get",
        "_p_graph",
        "_p_overlay",
        "_p_own",
    )  # fmt: skip

    def __init__(  # EntityFacts.__init__ is not called: see the class docstring
        self,
        base: EntityFacts,
        overlay: dict[EntityUID, Entity],
        own: dict[EntityUID, frozenset[EntityUID]],
    ) -> None:
        self._p_base = base
        self._p_overlay = overlay
        self._p_own = own
        self._p_get = _Own(overlay, base.get).__getitem__
        self._p_anc = _Own(own, base.ancestors_of).__getitem__
        self._p_entities: EntityStore | None = None
        self._p_ancestors: dict[EntityUID, frozenset[EntityUID]] | None = None
        self._p_graph: Any = None

    @property  # type: ignore[override,misc,unused-ignore]
    def get(self) -> Callable[[EntityUID], Entity | None]:  # type: ignore[override,misc,unused-ignore]
        return self._p_get

    @property  # type: ignore[override,misc,unused-ignore]
    def ancestors_of(self) -> Callable[[EntityUID], frozenset[EntityUID]]:  # type: ignore[override,misc,unused-ignore]
        return self._p_anc

    @property
    def entities(self) -> EntityStore:
        if self._p_entities is None:
            self._p_entities = self._p_base.entities.merged(self._p_overlay.values())
        return self._p_entities

    @property
    def ancestors(self) -> dict[EntityUID, frozenset[EntityUID]]:
        if self._p_ancestors is None:
            merged = dict(self._p_base.ancestors)
            merged.update(self._p_own)
            self._p_ancestors = merged
        return self._p_ancestors

    @property  # type: ignore[override,misc,unused-ignore]
    def graph(self) -> Any:  # type: ignore[override,misc,unused-ignore]
        if self._p_graph is None:
            from polang.datalog.facts import hierarchy_graph

            self._p_graph = hierarchy_graph(self.entities)
        return self._p_graph

    def is_in(self, a: EntityUID, b: EntityUID) -> bool:
        return a == b or b in self._p_anc(a)

    def with_entities(self, extra: Iterable[Entity]) -> EntityFacts:
        extra = list(extra)
        return EntityFacts(self.entities.merged(extra)) if extra else self

    def parent_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            for p in e.parents:
                yield (e.uid, p)

    def in_facts(self) -> Iterator[tuple[EntityUID, EntityUID]]:
        for e in self.entities:
            yield (e.uid, e.uid)
            for a in self._p_anc(e.uid):
                yield (e.uid, a)


def changed_facts(facts: EntityFacts, changed: list[Entity]) -> EntityFacts:
    """``facts`` with ``changed`` laid over them (the same facts a full rebuild gives)."""
    if not changed:
        return facts
    # entities whose parents change (a new entity with parents counts: stored entities
    # may name it as their parent)
    moved = {
        e.uid
        for e in changed
        if ((old := facts.get(e.uid)) is not None and old.parents != e.parents)
        or (old is None and e.parents)
    }
    if not moved:
        return facts.with_entities(changed)
    if len(facts.entities) <= SMALL_STORE:
        return EntityFacts(facts.entities.merged(changed))
    overlay = {e.uid: e for e in changed}
    get = facts.get
    base_anc = facts.ancestors_of
    # the entities whose closure may change: the moved ones, the new ones, and all below
    affected = {u for u in overlay if get(u) is None} | moved
    for e in facts.entities:
        if e.uid not in affected and not base_anc(e.uid).isdisjoint(moved):
            affected.add(e.uid)

    def parents(u: EntityUID) -> Iterable[EntityUID]:
        ent = overlay.get(u) or get(u)
        return ent.parents if ent is not None else ()

    own: dict[EntityUID, frozenset[EntityUID]] = {}
    state: dict[EntityUID, int] = {}
    for start in affected:
        if start in own:
            continue
        stack: list[tuple[EntityUID, bool]] = [(start, False)]
        while stack:
            u, done = stack.pop()
            if done:
                acc: set[EntityUID] = set()
                for p in parents(u):
                    acc.add(p)
                    acc |= own[p] if p in affected else base_anc(p)
                acc.discard(u)
                own[u] = frozenset(acc)
                state[u] = 2
                continue
            if state.get(u) == 2:
                continue
            if state.get(u) == 1:  # a cycle through changed memberships: rebuild all
                return EntityFacts(facts.entities.merged(changed))
            state[u] = 1
            stack.append((u, True))
            for p in parents(u):
                if p in affected and state.get(p) != 2:
                    if state.get(p) == 1:
                        return EntityFacts(facts.entities.merged(changed))
                    stack.append((p, False))
    return _PatchedFacts(facts, overlay, own)


# ======================================================================== the search


@dataclass(slots=True)
class _Outcome:
    allow: bool
    reasons: tuple[str, ...]
    applies: frozenset[str]


class _Search:
    def __init__(
        self,
        authorizer: Any,
        request: Request,
        facts: EntityFacts,
        schema: Schema | None,
        max_decisions: int,
    ) -> None:

        self.auth = authorizer
        self.request = request
        self.facts = facts
        self.schema = schema
        self.max_decisions = max_decisions
        self.decisions = 0
        self.truncated = False
        self.maps, self.groups = program_views(authorizer, authorizer.program)
        self.effects = {pid: info.effect for pid, info in authorizer.program.policies.items()}
        self.cache: dict[frozenset[Change], _Outcome] = {}

    # -- deciding -------------------------------------------------------------------------

    def decide(self, changes: tuple[Change, ...]) -> _Outcome | None:
        key = frozenset(changes)
        got = self.cache.get(key)
        if got is not None:
            return got
        if self.decisions >= self.max_decisions:
            self.truncated = True
            return None
        self.decisions += 1
        req, facts = apply_changes(self.request, self.facts, changes)
        raw = self.auth.backend.decide(req, facts, trace=True)
        applies = frozenset(
            o.policy_id for o in raw.outcomes if o.scope and o.error is None and o.value is True
        )
        out = _Outcome(raw.allow, tuple(raw.reasons), applies)
        self.cache[key] = out
        return out

    def world(self, changes: tuple[Change, ...]) -> _World:
        req, facts = apply_changes(self.request, self.facts, changes)
        return _World(req, facts)

    # -- alternatives ---------------------------------------------------------------------

    def policy_alts(self, pid: str, world: _World, goal: bool) -> list[Alt]:
        """Requirements that make policy ``pid`` apply (``goal``) or stop applying."""

        pm = self.maps[pid]
        scope = _scope_alts(pm.policy, world.request, world.facts, goal)
        if scope is None or not pm.exact:
            return []
        if pm.policy is not None and len(pm.clauses) != len(pm.policy.conditions):
            return []
        tracer = Tracer(self.groups, pm, world.request, world.facts)
        walker = _Walker(_Oracle(tracer, pm), world.facts, world.request)
        if goal:
            alts = scope
            for cl in pm.clauses:
                alts = walker.cross(alts, walker.want(cl.body, cl.kind == "when"))
                if not alts:
                    break
        else:
            parts = [scope]
            for cl in pm.clauses:
                parts.append(walker.want(cl.body, cl.kind != "when"))
            alts = walker.union(*parts)
        if walker.truncated:
            self.truncated = True
        return alts

    # -- the loop --------------------------------------------------------------------------

    def run(self, limit: int) -> Repairs:
        base = self.decide(())
        assert base is not None
        goal: Literal["allow", "deny"] = "deny" if base.allow else "allow"
        heap: list[tuple[int, int, tuple[Change, ...], str, bool]] = []
        seen: set[frozenset[Change]] = set()
        counter = itertools.count()
        root = _World(self.request, self.facts)
        mat = _Materializer(root, self.schema)

        def push(changes: tuple[Change, ...], pid: str, makes_apply: bool) -> None:
            key = frozenset(changes)
            if key in seen or len(changes) > MAX_REPAIR_SIZE:
                return
            seen.add(key)
            heapq.heappush(heap, (len(changes), next(counter), changes, pid, makes_apply))

        def seed(pid: str, alts: list[Alt], makes_apply: bool, m: _Materializer) -> None:
            for alt in alts:
                for cs in m.changes(alt):
                    push(cs, pid, makes_apply)

        # targets: for an allow, forbids to make apply and the permits to stop; for a
        # deny, the permits to make apply (and, when forbids deny, those to stop)
        if goal == "allow":
            for pid, eff in self.effects.items():
                if eff == "permit":
                    seed(pid, self.policy_alts(pid, root, True), True, mat)
        else:
            for pid, eff in self.effects.items():
                if eff == "forbid":
                    seed(pid, self.policy_alts(pid, root, True), True, mat)
            permits = [p for p in base.applies if self.effects.get(p) == "permit"]
            self._stop_all(sorted(permits), (), push)

        found: list[Repair] = []
        while heap:
            _n, _i, changes, pid, makes_apply = heapq.heappop(heap)
            out = self.decide(changes)
            if out is None:
                break
            if out.allow == (goal == "allow"):
                found.append(self._repair(base, out, changes, pid, makes_apply))
                continue
            # blocked: a forbid still applies (allow wanted) or a permit still does
            if goal == "allow" and pid in out.applies:
                blockers = sorted(p for p in out.applies if self.effects.get(p) == "forbid")
            elif goal == "deny" and not makes_apply:
                blockers = sorted(p for p in out.applies if self.effects.get(p) == "permit")
            else:
                continue
            if blockers and len(changes) < MAX_REPAIR_SIZE:
                self._stop_all(blockers, changes, push, pid=pid, makes_apply=makes_apply)
        found = self._shrink(base, found, goal)
        found = _minimal(found)
        found.sort(key=_rank)
        return Repairs(
            found[:limit],
            goal=goal,
            limit=limit,
            more=len(found) > limit,
            complete=not self.truncated,
            decisions=self.decisions,
        )

    def _stop_all(
        self,
        pids: list[str],
        changes: tuple[Change, ...],
        push: Callable[[tuple[Change, ...], str, bool], None],
        *,
        pid: str | None = None,
        makes_apply: bool = False,
    ) -> None:
        """Candidates that stop every policy of ``pids`` in the world ``changes`` made."""
        if not pids:
            return
        world = self.world(changes)
        mat = _Materializer(world, self.schema)
        combos: list[tuple[Change, ...]] = [changes]
        for p in pids:
            alts = self.policy_alts(p, world, False)
            nxt: list[tuple[Change, ...]] = []
            for alt in alts:
                for cs in mat.changes(alt):
                    for base in combos:
                        merged = _merge(base, cs)
                        if merged is not None and len(merged) <= MAX_REPAIR_SIZE:
                            nxt.append(merged)
            if len(nxt) > MAX_ALTERNATIVES:
                self.truncated = True
                nxt.sort(key=len)
                nxt = nxt[:MAX_ALTERNATIVES]
            combos = nxt
            if not combos:
                return
        for cs in combos:
            push(cs, pid if pid is not None else pids[0], makes_apply)

    def _repair(
        self,
        base: _Outcome,
        out: _Outcome,
        changes: tuple[Change, ...],
        pid: str,
        makes_apply: bool,
    ) -> Repair:
        """Named from the verified decision, not from the search's intent."""
        if out.allow:
            newly = sorted(p for p in out.reasons if p not in base.applies)
            stopped = sorted(
                p for p in base.applies if self.effects.get(p) == "forbid" and p not in out.applies
            )
            if newly:
                name = pid if pid in newly else newly[0]
                return Repair(
                    name,
                    "applies",
                    changes,
                    "allow",
                    tuple([name, *(p for p in newly if p != name)]),
                    out.reasons,
                )
            name = stopped[0] if stopped else (out.reasons[0] if out.reasons else pid)
            return Repair(name, "stops_applying", changes, "allow", tuple(stopped), out.reasons)
        newly = sorted(p for p in out.reasons if p not in base.applies)
        if newly:
            name = pid if pid in newly else newly[0]
            return Repair(
                name,
                "applies",
                changes,
                "deny",
                tuple([name, *(p for p in newly if p != name)]),
                out.reasons,
            )
        stopped = sorted(
            p for p in base.applies if self.effects.get(p) == "permit" and p not in out.applies
        )
        name = stopped[0] if stopped else pid
        return Repair(name, "stops_applying", changes, "deny", tuple(stopped), out.reasons)

    def _shrink(self, base: _Outcome, found: list[Repair], goal: str) -> list[Repair]:
        """Drop every change that is not needed (each drop verified by a decision)."""
        out: list[Repair] = []
        for r in found:
            changes = r.changes
            current = r
            i = 0
            while len(changes) > 1 and i < len(changes):
                fewer = changes[:i] + changes[i + 1 :]
                res = self.decide(fewer)
                if res is not None and res.allow == (goal == "allow"):
                    changes = fewer
                    current = self._repair(base, res, fewer, r.policy, r.outcome == "applies")
                    continue
                i += 1
            out.append(current)
        return out


def _merge(a: tuple[Change, ...], b: tuple[Change, ...]) -> tuple[Change, ...] | None:
    """Two change sets together; ``None`` when they set one place two ways."""
    places = {c.place: c for c in a}
    out = list(a)
    for c in b:
        old = places.get(c.place)
        if old is not None:
            if old != c:
                return None
            continue
        out.append(c)
    return tuple(out)


def _rank(r: Repair) -> tuple[Any, ...]:
    """Smallest first; among equals, setting a value before removing one, changes to the
    request's own entities and context before changes elsewhere."""
    removals = sum(1 for c in r.changes if c.kind.startswith("remove_") and c.parent is None)
    return (r.size, removals, [c.describe() for c in r.changes], r.policy)


def _minimal(found: list[Repair]) -> list[Repair]:
    """Leave out repairs whose changed places include another's (and duplicates)."""
    found = sorted(found, key=_rank)
    kept: list[Repair] = []
    kept_places: list[frozenset[tuple[Any, ...]]] = []
    seen: set[frozenset[Change]] = set()
    for r in found:
        key = frozenset(r.changes)
        if key in seen:
            continue
        places = r.places()
        if any(p <= places for p in kept_places):
            continue
        seen.add(key)
        kept.append(r)
        kept_places.append(places)
    return kept


# ======================================================================== public API


def find_repairs(
    authorizer: Any,
    request: Request,
    facts: EntityFacts,
    *,
    schema: Schema | None = None,
    limit: int = MAX_REPAIRS,
    max_decisions: int = MAX_DECISIONS,
) -> Repairs:
    """The smallest verified changes to the data that flip the decision on ``request``.

    ``authorizer`` decides (its backend verifies every repair); ``schema``, when given,
    keeps values of the declared types and picks the sample value of an added attribute.
    """
    if limit < 0 or max_decisions < 1:
        raise PolangError("repairs: limit must be >= 0 and max_decisions >= 1")
    return _Search(authorizer, request, facts, schema, max_decisions).run(limit)


def repairs(
    engine: Any,
    action: Any,
    resource: Any,
    context: Mapping[str, Any] | RecordValue | None = None,
    principal: Any = None,
    *,
    tokens: Any = None,
    limit: int = MAX_REPAIRS,
    max_decisions: int = MAX_DECISIONS,
) -> Repairs:
    """Repairs for a request given as ``engine.explain`` takes it (with the store's schema)."""
    ex = engine.explain(action, resource, context, principal, tokens=tokens)
    return ex.find_repairs(schema=engine.schema, limit=limit, max_decisions=max_decisions)


__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_DECISIONS",
    "MAX_REPAIRS",
    "MAX_REPAIR_SIZE",
    "Change",
    "Repair",
    "Repairs",
    "apply_changes",
    "find_repairs",
    "repairs",
]
