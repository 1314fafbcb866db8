"""The tracer: what the one interpreter did with a policy's rules, recorded as it happens.

:class:`Tracer` is an observer of ``eval/interpreter.py`` (it never re-evaluates): for each
value predicate ``n(X)`` it records which rule derived the value, the rule's source span and
the facts it read (attribute values, hierarchy paths, context values, tags). A
:class:`PolicyMap` prints each predicate as the expression it came from, which the lowering
recorded as it made the rules (``PolicyInfo.nodes``), so the mapping is exact or absent,
never guessed. Explanations (``explain.py``), repairs (``repairs.py``) and the queries'
residuals (``query.py``) read these records.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import networkx as nx

from polang.datalog.eval.interpreter import Cause, Evaluation, Observer
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, PolicyInfo, Program, Rule
from polang.errors import EvaluationError
from polang.language import ast
from polang.language.entities import Entity, EntityStore
from polang.language.format import format_expr, format_policy
from polang.language.values import (
    EntityUID,
    SetValue,
    quote_string,
    value_repr,
    value_to_json,
)

if TYPE_CHECKING:
    pass

Verdict = Literal["applies", "not_satisfied", "error", "out_of_scope"]


# ======================================================================== policy maps


@dataclass(frozen=True, slots=True)
class Clause:
    """One ``when``/``unless`` clause and the predicate whose truth makes it hold."""

    index: int
    kind: Literal["when", "unless"]
    body: ast.Expr
    pred: str  # the body's predicate (`when`) or the negation's (`unless`)
    body_pred: str
    span: ast.Span

    @property
    def text(self) -> str:
        return f"{self.kind} {{ {format_expr(self.body)} }}"


@dataclass(slots=True)
class PolicyMap:
    """A policy's rules in the Program, with the AST node behind each value predicate.

    ``nodes`` is empty (and ``exact`` false) when the Program's rules were not lowered
    from this policy (a Program built by other means): predicates are then shown by name
    and rule.
    """

    policy_id: str
    policy: ast.Policy | None
    info: PolicyInfo
    rules: list[Rule]
    nodes: dict[str, ast.Expr] = field(default_factory=dict)
    clauses: list[Clause] = field(default_factory=list)
    exact: bool = False
    _policy_text: str | None = None

    @property
    def policy_text(self) -> str | None:
        """The policy in canonical form (formatted once)."""
        if self._policy_text is None and self.policy is not None:
            self._policy_text = format_policy(self.policy)
        return self._policy_text

    def text(self, pred: str) -> str:
        node = self.nodes.get(pred)
        if node is not None:
            try:
                return format_expr(node)
            except Exception:  # pragma: no cover - synthetic nodes always print
                pass
        return pred


def policy_maps(program: Program, policies: Mapping[str, ast.Policy]) -> dict[str, PolicyMap]:
    """A :class:`PolicyMap` for every policy of ``program``."""
    by_policy: dict[str, list[Rule]] = {}
    for r in program.rules:
        if r.policy_id is not None:
            by_policy.setdefault(r.policy_id, []).append(r)
    return {
        pid: _policy_map(pid, info, by_policy.get(pid, []), policies.get(pid))
        for pid, info in program.policies.items()
    }


def _policy_map(
    pid: str, info: PolicyInfo, rules: list[Rule], policy: ast.Policy | None
) -> PolicyMap:
    """The policy's map from the nodes its lowering recorded (``PolicyInfo.nodes``):
    exact when ``policy`` is the policy that was lowered (or an equal one)."""
    pm = PolicyMap(pid, policy, info, rules)
    source = info.source
    if policy is None or source is None or not info.nodes:
        return pm
    if policy is not source:
        if policy != source:
            return pm
        pm.policy = policy = source  # equal: the rules' spans are the lowered one's
    pm.nodes = info.nodes
    pm.exact = True
    by_id = {id(node): pred for pred, node in info.nodes.items()}
    negations = {
        id(node.arg): pred
        for pred, node in info.nodes.items()
        if isinstance(node, ast.Unary) and node.op == "!"
    }
    for i, c in enumerate(policy.conditions):
        body_pred = by_id.get(id(c.body))
        pred = body_pred if c.kind == "when" else negations.get(id(c.body))
        if body_pred is None or pred is None:
            pm.clauses = []
            break
        pm.clauses.append(Clause(i + 1, c.kind, c.body, pred, body_pred, c.span))
    return pm


# ======================================================================== records


def span_dict(span: ast.Span | None) -> dict[str, Any] | None:
    if span is None or span.line == 0:
        return None
    return {
        "file": span.filename,
        "line": span.line,
        "column": span.column,
        "end_line": span.end_line,
        "end_column": span.end_column,
    }


def span_str(span: ast.Span | None) -> str:
    if span is None or span.line == 0:
        return ""
    return str(span)


def value_json(v: Any) -> Any:
    """A value as entity JSON where it has one, else its policy-syntax text."""
    try:
        return value_to_json(v)
    except TypeError:
        return value_repr(v)


def uid_json(u: EntityUID | None) -> Any:
    return None if u is None else u.to_json()


@dataclass(slots=True)
class Read:
    """A fact a rule read: an attribute, a hierarchy path, a context value, a tag."""

    kind: Literal["variable", "attribute", "context", "record", "has", "hierarchy", "tag"]
    text: str
    fact: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text}
        if self.fact:
            out["fact"] = self.fact
        out.update(self.data)
        return out


@dataclass(slots=True)
class Derivation:
    """How one value predicate got its value (or failed): a node of the derivation tree."""

    pred: str
    text: str
    value: Any = None
    error: EvaluationError | None = None
    rule: Rule | None = None
    span: ast.Span | None = None
    reads: list[Read] = field(default_factory=list)
    children: list[Derivation] = field(default_factory=list)
    origin: Derivation | None = None  # for an error: the node where it arose
    node: ast.Expr | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def outcome_text(self) -> str:
        if self.error is not None:
            return f"error: {self.error.message}"
        return value_repr(self.value)

    def all_reads(self) -> list[Read]:
        """The facts read anywhere in this subtree, each once, in evaluation order."""
        out: list[Read] = []
        seen: set[str] = set()

        def walk(d: Derivation) -> None:
            for c in d.children:
                walk(c)
            for r in d.reads:
                if r.text not in seen:
                    seen.add(r.text)
                    out.append(r)

        walk(self)
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"predicate": self.pred, "expression": self.text}
        if self.error is None:
            out["value"] = value_json(self.value)
            out["value_text"] = value_repr(self.value)
        else:
            out["error"] = {"kind": self.error.kind, "message": self.error.message}
        if self.rule is not None:
            out["rule"] = str(self.rule)
        sd = span_dict(self.span)
        if sd is not None:
            out["span"] = sd
        if self.reads:
            out["reads"] = [r.to_dict() for r in self.reads]
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out


# ======================================================================== hierarchy


def hierarchy_path(facts: EntityFacts, a: EntityUID, b: EntityUID) -> list[EntityUID] | None:
    """The shortest chain ``a in p1 in ... in b`` of declared parents, or ``None``.

    Uses the networkx parent graph when it holds ``a`` (it may lag behind request
    entities laid over the store, so a breadth-first walk over the entities' own parents
    is the fallback).
    """
    if a == b:
        return [a]
    if not facts.is_in(a, b):
        return None
    g = facts.graph
    if a in g and b in g and facts.entities.get(a) is not None:
        try:
            path: list[EntityUID] = nx.shortest_path(g, a, b)
            if _path_is_current(facts, path):
                return path
        except nx.NetworkXNoPath:
            pass
    prev: dict[EntityUID, EntityUID | None] = {a: None}
    queue: deque[EntityUID] = deque([a])
    while queue:
        u = queue.popleft()
        ent = facts.get(u)
        if ent is None:
            continue
        for p in sorted(ent.parents):
            if p in prev:
                continue
            prev[p] = u
            if p == b:
                out = [p]
                cur: EntityUID | None = u
                while cur is not None:
                    out.append(cur)
                    cur = prev[cur]
                return out[::-1]
            queue.append(p)
    return None  # pragma: no cover - is_in said there is a path


def _path_is_current(facts: EntityFacts, path: Sequence[EntityUID]) -> bool:
    for child, parent in itertools.pairwise(path):
        ent = facts.get(child)
        if ent is None or parent not in ent.parents:
            return False
    return True


def path_text(path: Sequence[EntityUID]) -> str:
    return " in ".join(str(u) for u in path)


def in_read(facts: EntityFacts, a: Any, b: Any, result: bool) -> Read | None:
    if type(a) is not EntityUID:
        return None
    targets: list[EntityUID]
    if type(b) is EntityUID:
        targets = [b]
    elif type(b) is SetValue:
        targets = sorted(x for x in b if type(x) is EntityUID)
    else:
        return None
    if result:
        for t in targets:
            path = hierarchy_path(facts, a, t)
            if path is not None:
                return Read(
                    "hierarchy",
                    path_text(path),
                    f"in({a}, {t})",
                    {"path": [u.to_json() for u in path]},
                )
        return None
    shown = str(targets[0]) if len(targets) == 1 else "[" + ", ".join(map(str, targets)) + "]"
    anc = sorted(facts.ancestors_of(a))
    detail = f"{a} is not in {shown}"
    detail += f" (its ancestors: {', '.join(map(str, anc))})" if anc else " (it has no ancestors)"
    return Read("hierarchy", detail, None, {"path": None})


# ======================================================================== the tracer


class Tracer(Observer):
    """Derivations of a policy's value predicates, built from the events of the one
    interpreter (:class:`~polang.datalog.eval.interpreter.Evaluation`): this class
    evaluates nothing itself, so the order, values and errors it records are the
    interpreter's (the compiled backend's, rule for rule). Each derivation holds the rule
    that gave the value, its span, the facts its builtins read and its operands'
    derivations; an error's ``origin`` is the derivation where it arose."""

    def __init__(
        self,
        groups: Mapping[str, list[Rule]],
        pm: PolicyMap | None,
        request: Request,
        facts: EntityFacts,
    ) -> None:
        self.groups = groups
        self.pm = pm
        self.request = request
        self.facts = facts
        self.memo: dict[str, Derivation] = {}
        self._open: list[Derivation] = []
        self._evaluation = Evaluation(groups, request, facts, observer=self)

    def node(self, pred: str) -> Derivation:
        """The derivation of ``pred`` (evaluated on first use)."""
        d = self.memo.get(pred)
        if d is None:
            self._evaluation.outcome(pred)
            d = self.memo[pred]
        return d

    def _text(self, pred: str) -> str:
        return self.pm.text(pred) if self.pm is not None else pred

    def _root_var(self, node: ast.Expr | None) -> str | None:
        while isinstance(node, ast.GetAttr | ast.Has):
            node = node.expr
        return node.name if isinstance(node, ast.Var) else None

    # -- the interpreter's events --------------------------------------------------------

    def enter(self, pred: str) -> None:
        if pred in REQUEST_VARS:
            self._open.append(Derivation(pred, pred))
            return
        node = self.pm.nodes.get(pred) if self.pm is not None else None
        self._open.append(Derivation(pred, self._text(pred), node=node))

    def atom(self, pred: str, lit: Atom, ok: bool, value: Any) -> None:
        d = self._open[-1]
        child = self.memo[lit.pred]
        if all(c is not child for c in d.children):
            d.children.append(child)

    def call(self, pred: str, lit: Builtin, args: list[Any], ok: bool, result: Any) -> None:
        if ok:
            d = self._open[-1]
            read = self._read(lit, args, result, d.node)
            if read is not None:
                d.reads.append(read)

    def exit(self, pred: str, ok: bool, value: Any, rule: Rule | None, cause: Cause | None) -> None:
        d = self._open.pop()
        if pred in REQUEST_VARS:
            if ok:
                d.value = value
                text = value_repr(value)
                d.reads.append(Read("variable", f"{pred} = {text}", f"{pred}({text})"))
            else:
                d.error, d.origin = value, d
        elif ok:
            d.value, d.rule = value, rule
            d.span = rule.span if rule is not None else None
        else:
            d.error, d.origin = value, d
            if cause is not None:
                at_rule, lit = cause
                if isinstance(lit, Builtin):
                    d.span = lit.span or at_rule.span
                else:
                    child = self.memo[lit.pred]
                    d.origin = (child.origin or child) if child.error is not None else child
            rules = self.groups.get(pred)
            if d.span is None and rules:
                d.span = rules[0].span
        flatten_chain(d)
        self.memo[pred] = d

    def _read(self, lit: Builtin, args: list[Any], res: Any, node: ast.Expr | None) -> Read | None:
        op = lit.op
        if op == "get_attr":
            obj, name = args[0], args[1]
            if type(obj) is EntityUID:
                return Read(
                    "attribute",
                    f"{obj}.{name} = {value_repr(res)}",
                    f"attr({obj}, {quote_string(name)}, {value_repr(res)})",
                    {"entity": obj.to_json(), "attribute": name, "value": value_json(res)},
                )
            text = self._text_of(node, f"record.{name}")
            kind: Literal["context", "record"] = (
                "context" if self._root_var(node) == "context" else "record"
            )
            return Read(kind, f"{text} = {value_repr(res)}", None, {"value": value_json(res)})
        if op == "has_attr":
            obj, name = args[0], args[1]
            subject = str(obj) if type(obj) is EntityUID else self._text_of(node, "record")
            if type(obj) is EntityUID and not isinstance(node, ast.Has):
                subject = str(obj)
            return Read(
                "has",
                f"{subject} has {name}: {value_repr(res)}",
                f"attr({obj}, {quote_string(name)}, _)" if res and type(obj) is EntityUID else None,
                {"attribute": name, "value": bool(res)},
            )
        if op == "in":
            return in_read(self.facts, args[0], args[1], bool(res))
        if op in ("method:getTag", "method:hasTag"):
            ent, key = args[0], args[1]
            if op == "method:getTag":
                return Read(
                    "tag",
                    f"{ent}.getTag({value_repr(key)}) = {value_repr(res)}",
                    f"tag({ent}, {value_repr(key)}, {value_repr(res)})",
                    {"entity": uid_json(ent), "tag": key, "value": value_json(res)},
                )
            return Read(
                "tag",
                f"{ent}.hasTag({value_repr(key)}): {value_repr(res)}",
                None,
                {"entity": uid_json(ent), "tag": key, "value": bool(res)},
            )
        return None

    @staticmethod
    def _text_of(node: ast.Expr | None, default: str) -> str:
        if isinstance(node, ast.GetAttr | ast.Has):
            try:
                base = format_expr(node.expr)
            except Exception:  # pragma: no cover
                return default
            return f"{base}.{node.attr}" if isinstance(node, ast.GetAttr) else base
        return default


# ======================================================================== scope


def _uid_text(u: EntityUID | ast.Slot | None) -> str:
    if isinstance(u, ast.Slot):
        return u.name
    return str(u)


def scope_constraint_text(c: ast.ScopeConstraint | ast.ActionConstraint | None, var: str) -> str:
    if c is None:
        return var
    if isinstance(c, ast.ActionConstraint):
        if c.kind == "any":
            return "action"
        if c.kind == "eq":
            return f"action == {c.entities[0]}"
        if c.kind == "in":
            return f"action in {c.entities[0]}"
        return "action in [" + ", ".join(map(str, c.entities)) + "]"
    if c.kind == "any":
        return c.var
    if c.kind == "eq":
        return f"{c.var} == {_uid_text(c.entity)}"
    if c.kind == "in":
        return f"{c.var} in {_uid_text(c.entity)}"
    if c.kind == "is":
        return f"{c.var} is {c.entity_type}"
    return f"{c.var} is {c.entity_type} in {_uid_text(c.entity)}"


def facts_of(entities: EntityFacts | EntityStore | Iterable[Entity]) -> EntityFacts:
    return entities if isinstance(entities, EntityFacts) else EntityFacts(entities)


_VIEWS: weakref.WeakKeyDictionary[Any, tuple[Program, dict[str, PolicyMap], Any]] = (
    weakref.WeakKeyDictionary()
)
_VIEWS_LOCK = threading.Lock()


def program_views(
    authorizer: Any, program: Program
) -> tuple[dict[str, PolicyMap], Mapping[str, list[Rule]]]:
    """The policy maps and rule groups of an authorizer's Program (computed once)."""
    with _VIEWS_LOCK:
        try:
            got = _VIEWS.get(authorizer)
        except TypeError:  # pragma: no cover - not weak-referenceable
            got = None
        if got is None or got[0] is not program:
            maps = policy_maps(program, getattr(authorizer, "policies", {}))
            got = (program, maps, program.by_head())
            with contextlib.suppress(TypeError):
                _VIEWS[authorizer] = got
    return got[1], got[2]


def flatten_chain(d: Derivation) -> None:
    """A long ``||``/``&&`` chain, which the parser built balanced
    (``ast.BALANCE_CHAIN_AFTER``), shows its operands as it is written: one flat list of
    the operands evaluated, instead of groupings that are not in the source."""
    node = d.node
    if not (isinstance(node, ast.Binary) and node.op in ("&&", "||")):
        return
    if len(ast.chain_operands(node)) <= ast.BALANCE_CHAIN_AFTER:
        return
    flat: list[Derivation] = []
    stack = list(reversed(d.children))
    while stack:
        c = stack.pop()
        if isinstance(c.node, ast.Binary) and c.node.op == node.op:
            stack.extend(reversed(c.children))
        else:
            flat.append(c)
    d.children = flat


__all__ = [
    "Clause",
    "Derivation",
    "PolicyMap",
    "Read",
    "Tracer",
    "Verdict",
    "facts_of",
    "hierarchy_path",
    "path_text",
    "policy_maps",
    "program_views",
    "scope_constraint_text",
    "span_dict",
    "value_json",
]
