"""Why a request was allowed or denied, read off the same Program that decided it.

The decision and each policy's verdict come from the authorizer's backend
(``decide(..., trace=True)``), so an explanation can never contradict the decision. The
*derivation* of each verdict is what the one interpreter (``eval/interpreter.py``) does
with the policy's rules in the Program (not the AST): the :class:`Tracer` observes it
evaluate every value predicate ``n(X)`` rule by rule, and records which rule derived the
value, the rule's source span, and the facts it read (attribute values, hierarchy paths,
context values, tags). The AST is only used to print each predicate as the expression it
came from, which the lowering recorded as it made the rules (``PolicyInfo.nodes``), so
the mapping is exact or absent, never guessed.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import networkx as nx

from polang.datalog.builtins import builtin
from polang.datalog.compiled import PolicyOutcome
from polang.datalog.eval.interpreter import Cause, Evaluation, Observer
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, PolicyInfo, Program, Rule, Var
from polang.errors import EvaluationError, PolangError
from polang.language import ast
from polang.language.entities import Entity, EntityStore, context_record
from polang.language.format import format_expr, format_policy
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    printable,
    quote_string,
    value_repr,
    value_to_json,
)

if TYPE_CHECKING:
    from polang.authoring.repairs import Repairs
    from polang.language.schema import Schema

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


def _span_str(span: ast.Span | None) -> str:
    if span is None or span.line == 0:
        return ""
    return str(span)


def value_json(v: Any) -> Any:
    """A value as entity JSON where it has one, else its policy-syntax text."""
    try:
        return value_to_json(v)
    except TypeError:
        return value_repr(v)


def _uid_json(u: EntityUID | None) -> Any:
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


@dataclass(slots=True)
class ScopePart:
    """The principal, action or resource part of a policy's scope, and whether it held."""

    var: Literal["principal", "action", "resource"]
    constraint: str
    holds: bool | None  # None: not reached (an earlier literal failed to bind)
    detail: str = ""
    path: list[EntityUID] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "var": self.var,
            "constraint": self.constraint,
            "holds": self.holds,
            "detail": self.detail,
        }
        if self.path is not None:
            out["path"] = [u.to_json() for u in self.path]
        return out


@dataclass(slots=True)
class ClauseResult:
    """One evaluated ``when``/``unless`` clause (clauses after a false one are not reached)."""

    clause: Clause
    holds: bool | None  # None = the clause errored
    derivation: Derivation

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.clause.index,
            "kind": self.clause.kind,
            "text": self.clause.text,
            "holds": self.holds,
            "derivation": self.derivation.to_dict(),
        }
        sd = span_dict(self.clause.span)
        if sd is not None:
            out["span"] = sd
        return out


@dataclass(slots=True)
class ConditionFailure:
    """The first condition that did not hold, and the values it saw."""

    clause: Clause | None
    culprit: Derivation
    values: list[Read]

    @property
    def text(self) -> str:
        if self.clause is None:
            return self.culprit.text
        return self.clause.text

    def describe(self) -> str:
        what = self.text
        if self.clause is not None and self.clause.kind == "unless":
            head = f"{what} held"
        else:
            head = f"{what} was false"
        inner = self.culprit.text
        if self.clause is not None and inner != format_expr(self.clause.body):
            head += f" (`{inner}` is {self.culprit.outcome_text()})"
        return head

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "condition": self.text,
            "description": self.describe(),
            "expression": self.culprit.text,
            "value": value_json(self.culprit.value),
            "values": [r.to_dict() for r in self.values],
        }
        if self.clause is not None:
            out["clause_index"] = self.clause.index
            out["clause_kind"] = self.clause.kind
            sd = span_dict(self.clause.span)
            if sd is not None:
                out["span"] = sd
        return out


@dataclass(slots=True)
class PolicyErrorDetail:
    """An erroring policy: its cause and the expression where evaluation failed."""

    message: str
    kind: str
    expression: str | None = None
    span: ast.Span | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "kind": self.kind}
        if self.expression is not None:
            out["expression"] = self.expression
        sd = span_dict(self.span)
        if sd is not None:
            out["span"] = sd
        return out


@dataclass(slots=True)
class PolicyExplanation:
    policy_id: str
    effect: str
    verdict: Verdict
    span: ast.Span | None = None
    text: str | None = None
    scope: list[ScopePart] = field(default_factory=list)
    scope_failure: ScopePart | None = None
    conditions: list[ClauseResult] = field(default_factory=list)
    derivation: Derivation | None = None  # the whole condition's predicate
    failure: ConditionFailure | None = None
    error: PolicyErrorDetail | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy_id": self.policy_id,
            "effect": self.effect,
            "verdict": self.verdict,
        }
        sd = span_dict(self.span)
        if sd is not None:
            out["span"] = sd
        if self.text is not None:
            out["text"] = self.text
        out["scope"] = [p.to_dict() for p in self.scope]
        if self.scope_failure is not None:
            out["scope_failure"] = self.scope_failure.to_dict()
        if self.verdict != "out_of_scope":
            if self.conditions:
                out["conditions"] = [c.to_dict() for c in self.conditions]
            elif self.derivation is not None:
                out["derivation"] = self.derivation.to_dict()
        if self.failure is not None:
            out["failed_condition"] = self.failure.to_dict()
        if self.error is not None:
            out["error"] = self.error.to_dict()
        return out


@dataclass(slots=True)
class Explanation:
    """A decision with the derivation of every policy's verdict."""

    allow: bool
    principal: EntityUID | None
    action: EntityUID
    resource: EntityUID
    context: RecordValue
    reasons: list[str]
    policies: list[PolicyExplanation]
    backend: str = "compiled"
    schema: Schema | None = field(default=None, repr=False, compare=False)
    _source: tuple[Any, Request, EntityFacts] | None = field(
        default=None, repr=False, compare=False
    )
    _repairs: Repairs | None = field(default=None, repr=False, compare=False)

    @property
    def decision(self) -> str:
        return "allow" if self.allow else "deny"

    # -- repairs ------------------------------------------------------------------------

    @property
    def repairs(self) -> Repairs:
        """The smallest verified changes to the data that flip this decision (computed on
        first use; see :mod:`polang.authoring.repairs`)."""
        if self._repairs is None:
            self._repairs = self.find_repairs()
        return self._repairs

    def find_repairs(
        self,
        *,
        schema: Schema | None = None,
        limit: int | None = None,
        max_decisions: int | None = None,
    ) -> Repairs:
        """Repairs with other bounds (the result also becomes ``repairs``)."""
        from polang.authoring import repairs as rp

        if self._source is None:
            raise PolangError("this explanation was not made by explain(): no repairs")
        authorizer, request, facts = self._source
        self._repairs = rp.find_repairs(
            authorizer,
            request,
            facts,
            schema=schema if schema is not None else self.schema,
            limit=rp.MAX_REPAIRS if limit is None else limit,
            max_decisions=rp.MAX_DECISIONS if max_decisions is None else max_decisions,
        )
        return self._repairs

    def by_verdict(self, verdict: Verdict, effect: str | None = None) -> list[PolicyExplanation]:
        return [
            p
            for p in self.policies
            if p.verdict == verdict and (effect is None or p.effect == effect)
        ]

    @property
    def applied_forbids(self) -> list[PolicyExplanation]:
        return self.by_verdict("applies", "forbid")

    @property
    def applied_permits(self) -> list[PolicyExplanation]:
        return self.by_verdict("applies", "permit")

    @property
    def errors(self) -> list[PolicyExplanation]:
        return self.by_verdict("error")

    def policy(self, policy_id: str) -> PolicyExplanation:
        for p in self.policies:
            if p.policy_id == policy_id:
                return p
        raise KeyError(policy_id)

    def summary(self) -> str:
        if self.allow:
            ids = ", ".join(quote_string(p.policy_id) for p in self.applied_permits)
            return f"allowed by permit {ids}"
        forbids = self.applied_forbids
        if forbids:
            ids = ", ".join(quote_string(p.policy_id) for p in forbids)
            return f"denied: forbid {ids} applied"
        return "denied: no permit applied"

    def to_dict(self, *, repairs: bool | None = None) -> dict[str, Any]:
        """JSON-ready. ``repairs``: include them (computing them if needed); ``None``
        includes them when they were already computed."""
        out = self._to_dict()
        if repairs or (repairs is None and self._repairs is not None):
            r = self.repairs
            out["repairs"] = [x.to_dict() for x in r]
            out["repairs_more"] = r.more
            out["repairs_complete"] = r.complete
            out["repairs_note"] = r.note
        return out

    def _to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "summary": self.summary(),
            "backend": self.backend,
            "request": {
                "principal": _uid_json(self.principal),
                "action": self.action.to_json(),
                "resource": self.resource.to_json(),
                "context": value_json(self.context),
            },
            "reasons": list(self.reasons),
            "applied_forbids": [p.policy_id for p in self.applied_forbids],
            "applied_permits": [p.policy_id for p in self.applied_permits],
            "not_satisfied": [p.policy_id for p in self.by_verdict("not_satisfied")],
            "errors": [
                {"policy_id": p.policy_id, **(p.error.to_dict() if p.error else {})}
                for p in self.errors
            ],
            "out_of_scope": [p.policy_id for p in self.by_verdict("out_of_scope")],
            "policies": [p.to_dict() for p in self.policies],
        }

    # -- for people -------------------------------------------------------------------------

    def rich(
        self, *, show_rules: bool = False, all_policies: bool = False, repairs: bool = False
    ) -> Any:
        """A ``rich`` renderable (a tree) for terminals; ``repairs`` adds them under it."""
        tree = _explanation_tree(self, show_rules=show_rules, all_policies=all_policies)
        if repairs:
            _repairs_branch(tree, self.repairs, self.allow)
        return tree

    def render(
        self,
        *,
        width: int = 100,
        color: bool = False,
        show_rules: bool = False,
        all_policies: bool = False,
        repairs: bool = False,
    ) -> str:
        """The explanation as a readable tree (plain text unless ``color``)."""
        from rich.console import Console

        buf = io.StringIO()
        console = Console(
            file=buf,
            width=width,
            force_terminal=color,
            color_system="standard" if color else None,
            no_color=not color,
            highlight=False,
        )
        console.print(self.rich(show_rules=show_rules, all_policies=all_policies, repairs=repairs))
        return buf.getvalue()


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


def _in_read(facts: EntityFacts, a: Any, b: Any, result: bool) -> Read | None:
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
        _flatten_chain(d)
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
            return _in_read(self.facts, args[0], args[1], bool(res))
        if op in ("method:getTag", "method:hasTag"):
            ent, key = args[0], args[1]
            if op == "method:getTag":
                return Read(
                    "tag",
                    f"{ent}.getTag({value_repr(key)}) = {value_repr(res)}",
                    f"tag({ent}, {value_repr(key)}, {value_repr(res)})",
                    {"entity": _uid_json(ent), "tag": key, "value": value_json(res)},
                )
            return Read(
                "tag",
                f"{ent}.hasTag({value_repr(key)}): {value_repr(res)}",
                None,
                {"entity": _uid_json(ent), "tag": key, "value": bool(res)},
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


def explain_scope(
    scope_rule: Rule | None,
    policy: ast.Policy | None,
    request: Request,
    facts: EntityFacts,
) -> list[ScopePart]:
    """Each scope part with whether it held, read off the policy's scope rule."""
    constraints: dict[str, ast.ScopeConstraint | ast.ActionConstraint | None] = {
        "principal": policy.principal if policy is not None else None,
        "action": policy.action if policy is not None else None,
        "resource": policy.resource if policy is not None else None,
    }
    parts: dict[str, ScopePart] = {
        v: ScopePart(v, scope_constraint_text(constraints[v], v), True)
        for v in ("principal", "action", "resource")
    }
    bound: dict[str, str] = {}
    for lit in scope_rule.body if scope_rule is not None else ():
        if isinstance(lit, Atom):
            var = lit.pred
            part = parts.get(var)
            if part is None or not lit.args:
                continue
            value = request.var(var)
            t = lit.args[0]
            if isinstance(t, Var):
                bound[t.name] = var
                if value is None:
                    part.holds = False
                    part.detail = f"the request has no {var}"
                continue
            holds = type(value) is type(t.value) and value == t.value
            if part.holds:
                part.holds = holds
                part.detail = f"{var} is {value_repr(value)}" + ("" if holds else f", not {t}")
            continue
        if not isinstance(lit, Builtin) or not lit.args or not isinstance(lit.args[0], Var):
            continue
        var = bound.get(lit.args[0].name, "")
        part = parts.get(var)
        if part is None:
            continue
        value = request.var(var)
        if value is None:
            continue
        target: Any = (
            lit.args[1].value if len(lit.args) > 1 and isinstance(lit.args[1], Const) else None
        )
        try:
            holds = bool(builtin(lit.op)(facts, value, target))
        except EvaluationError:  # pragma: no cover - scope tests never error
            holds = False
        if not part.holds:
            continue  # keep the first failure
        part.holds = holds
        if lit.op == "scope_is":
            part.detail = (
                f"{value} is {target}" if holds else f"{value} is a {value.type}, not a {target}"
            )
        elif lit.op in ("scope_in", "scope_in_any"):
            targets: list[EntityUID] = [target] if lit.op == "scope_in" else sorted(target or ())
            if holds:
                for tg in targets:
                    path = hierarchy_path(facts, value, tg)
                    if path is not None:
                        part.path = path
                        part.detail = path_text(path)
                        break
            else:
                r = _in_read(facts, value, SetValue(targets), False)
                part.detail = r.text if r is not None else f"{value} is not in {target}"
    for p in parts.values():
        if p.holds and not p.detail:
            v = request.var(p.var)
            p.detail = f"{p.var} is {value_repr(v)}" if v is not None else f"no {p.var}"
    return [parts["principal"], parts["action"], parts["resource"]]


# ======================================================================== explain


def _facts_of(entities: EntityFacts | EntityStore | Iterable[Entity]) -> EntityFacts:
    return entities if isinstance(entities, EntityFacts) else EntityFacts(entities)


_VIEWS: weakref.WeakKeyDictionary[Any, tuple[Program, dict[str, PolicyMap], Any]] = (
    weakref.WeakKeyDictionary()
)
_VIEWS_LOCK = threading.Lock()


def _program_views(
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


def _verdict(outcome: PolicyOutcome | None, error: EvaluationError | None) -> Verdict:
    if outcome is None or not outcome.scope:
        return "out_of_scope"
    if error is not None or outcome.error is not None:
        return "error"
    if outcome.value is True:
        return "applies"
    if outcome.value is False:
        return "not_satisfied"
    return "error"


def explain(
    authorizer: Any,
    principal: EntityUID | None,
    action: EntityUID,
    resource: EntityUID,
    context: RecordValue | Mapping[str, Any] | None = None,
    entities: EntityFacts | EntityStore | Iterable[Entity] = (),
    *,
    schema: Schema | None = None,
) -> Explanation:
    """The decision on this request with the derivation of every policy's verdict.

    ``authorizer`` is a :class:`polang.datalog.authorizer.Authorizer` (anything with
    ``program``, ``policies`` and ``backend``): the verdicts come from its backend, the
    derivations from its Program. ``schema`` is only used by ``repairs`` (declared
    types of the values it proposes).
    """
    program: Program = authorizer.program
    facts = _facts_of(entities)
    ctx = RecordValue() if context is None else context_record(context)
    request = Request(principal, action, resource, ctx)
    raw = authorizer.backend.decide(request, facts, trace=True)
    outcomes = {o.policy_id: o for o in raw.outcomes}
    errors = dict(raw.errors)
    maps, groups = _program_views(authorizer, program)
    out: list[PolicyExplanation] = []
    for pid, info in program.policies.items():
        pm = maps[pid]
        verdict = _verdict(outcomes.get(pid), errors.get(pid))
        pe = PolicyExplanation(
            pid,
            info.effect,
            verdict,
            span=info.span,
            text=pm.policy_text,
        )
        scope_rules = groups.get(info.scope_pred, [])
        pe.scope = explain_scope(scope_rules[0] if scope_rules else None, pm.policy, request, facts)
        if verdict == "out_of_scope":
            pe.scope_failure = next((p for p in pe.scope if not p.holds), None)
            out.append(pe)
            continue
        tracer = Tracer(groups, pm, request, facts)
        root = tracer.node(info.cond_pred)
        pe.derivation = root
        for clause in pm.clauses:
            d = tracer.memo.get(clause.pred)
            if d is None:
                break  # not reached: an earlier clause decided
            holds = None if d.error is not None else d.value is True
            pe.conditions.append(ClauseResult(clause, holds, d))
        if verdict == "not_satisfied":
            pe.failure = _first_failure(pe, tracer)
        elif verdict == "error":
            err = errors.get(pid) or (
                outcomes[pid].error if outcomes.get(pid) is not None else None
            )
            origin = root.origin if root.error is not None else None
            if err is None:  # pragma: no cover - backends always name the error
                err = root.error or EvaluationError("type", "the condition did not evaluate")
            if origin is None and root.error is None and type(root.value) is not bool:
                origin = root
            pe.error = PolicyErrorDetail(
                err.message,
                err.kind,
                origin.text if origin is not None else None,
                origin.span if origin is not None else None,
            )
        out.append(pe)
    return Explanation(
        raw.allow,
        principal,
        action,
        resource,
        request.context,
        list(raw.reasons),
        out,
        backend=getattr(authorizer.backend, "name", "compiled"),
        schema=schema,
        _source=(authorizer, request, facts),
    )


def _flatten_chain(d: Derivation) -> None:
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


def _first_failure(pe: PolicyExplanation, tracer: Tracer) -> ConditionFailure:
    """The first clause that did not hold, narrowed to the sub-condition that decided it."""
    for cr in pe.conditions:
        if cr.holds is False:
            culprit = cr.derivation
            if cr.clause.kind == "unless":
                culprit = tracer.memo.get(cr.clause.body_pred, culprit)
            culprit = _narrow(culprit, cr.clause.kind == "when")
            return ConditionFailure(cr.clause, culprit, _values(culprit))
    root = pe.derivation
    assert root is not None
    return ConditionFailure(None, root, _values(root))


def _values(d: Derivation) -> list[Read]:
    """The values a condition saw (the whole context record is left out: its parts show)."""
    return [r for r in d.all_reads() if not (r.kind == "variable" and r.text.startswith("context"))]


def _narrow(d: Derivation, want_false: bool) -> Derivation:
    """Descend ``&&`` (to its false operand) or ``||`` (to its true one) while it decides."""
    while True:
        node = d.node
        target = not want_false
        if not (isinstance(node, ast.Binary) and node.op in ("&&", "||")):
            return d
        if (node.op == "&&") != want_false:
            return d  # `a && b` true, or `a || b` false: both operands matter
        nxt = next(
            (c for c in d.children if c.error is None and c.value is target and c.node is not None),
            None,
        )
        if nxt is None:
            return d
        d = nxt


# ======================================================================== rendering


def _repairs_branch(tree: Any, repairs: Repairs, allow: bool) -> None:
    what = "deny" if allow else "allow"
    sec = tree.add(_t((f"repairs: changes to the data that would {what} it", "bold cyan")))
    for i, r in enumerate(repairs, 1):
        verb = "applies" if r.outcome == "applies" else "stops applying"
        head = sec.add(_t(f"{i}. ", (quote_string(r.policy), "bold yellow"), f" {verb}"))
        for c in r.changes:
            head.add(_t(("· ", "dim"), (c.describe(), "blue")))
    if repairs.note:
        sec.add(_t((repairs.note, "italic dim")))


def _t(*parts: tuple[str, str] | str) -> Any:
    """A line of the tree from (text, style) parts. Every part goes through ``printable``:
    the parts quote ids, names and values, and a control character, line separator or
    bidi control in one must not reach the terminal (a rich ``Text`` is never markup)."""
    from rich.text import Text

    return Text.assemble(
        *(printable(p) if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
    )


def _mark(ok: bool | None) -> tuple[str, str]:
    if ok is None:
        return ("?", "yellow")
    return ("✓", "green") if ok else ("✗", "red")


def _where(span: ast.Span | None) -> str:
    s = _span_str(span)
    return f"  ({s})" if s else ""


def _is_literal(d: Derivation) -> bool:
    return isinstance(d.node, ast.Lit | ast.EntityLit) or (
        d.node is None and not d.children and d.rule is not None and not d.rule.body
    )


def _add_derivation(tree: Any, d: Derivation, show_rules: bool, depth: int = 0) -> None:
    if d.pred in REQUEST_VARS or isinstance(d.node, ast.Var):
        name = d.node.name if isinstance(d.node, ast.Var) else d.pred
        tree.add(_t((name, "cyan"), " = ", d.outcome_text()))
        return
    label = _t(
        (d.text, "bold" if depth == 0 else ""),
        "  →  ",
        (d.outcome_text(), "red" if d.error is not None else "magenta"),
    )
    if show_rules and d.rule is not None:
        label.append(printable(f"    [{d.rule}]"), style="dim")
    branch = tree.add(label)
    for r in d.reads:
        if r.kind != "variable":
            branch.add(_t(("· ", "dim"), (r.text, "blue")))
    for c in d.children:
        if _is_literal(c):
            continue
        _add_derivation(branch, c, show_rules, depth + 1)


def _scope_line(pe: PolicyExplanation) -> Any:
    text = _t(("scope ", "dim"))
    for i, p in enumerate(pe.scope):
        if i:
            text.append("; ", style="dim")
        mark, style = _mark(p.holds)
        text.append(f"{mark} ", style=style)
        text.append(printable(p.constraint))
        if p.path is not None and len(p.path) > 1:
            text.append(printable(f" ({path_text(p.path)})"), style="blue")
    return text


def _policy_branch(
    tree: Any, pe: PolicyExplanation, show_rules: bool, *, brief: bool = False
) -> None:
    head = _t((f"{pe.effect} ", "bold"), (quote_string(pe.policy_id), "bold yellow"))
    head.append(printable(_where(pe.span)), style="dim")
    if brief and pe.verdict == "out_of_scope" and pe.scope_failure is not None:
        sf = pe.scope_failure
        head.append(printable(f"  out of scope: {sf.constraint}: {sf.detail}"), style="dim")
        tree.add(head)
        return
    branch = tree.add(head)
    branch.add(_scope_line(pe))
    if pe.verdict == "out_of_scope":
        f = pe.scope_failure
        if f is not None:
            branch.add(_t(("✗ ", "red"), f"{f.constraint}: ", (f.detail, "blue")))
        return
    if pe.verdict == "not_satisfied" and pe.failure is not None:
        fl = branch.add(_t(("✗ ", "red"), pe.failure.describe()))
        for r in pe.failure.values:
            fl.add(_t(("· ", "dim"), (r.text, "blue")))
    if pe.verdict == "error" and pe.error is not None:
        e = pe.error
        where = f" at {_span_str(e.span)}" if _span_str(e.span) else ""
        expr = f" in `{e.expression}`" if e.expression else ""
        branch.add(_t(("error", "bold red"), f"{where}{expr}: {e.message}"))
    if pe.conditions:
        for cr in pe.conditions:
            mark, style = _mark(cr.holds)
            cb = branch.add(_t((f"{mark} ", style), cr.clause.text))
            _add_derivation(cb, cr.derivation, show_rules)
    elif pe.derivation is not None:
        _add_derivation(branch, pe.derivation, show_rules)


def _explanation_tree(ex: Explanation, *, show_rules: bool, all_policies: bool) -> Any:
    from rich.tree import Tree

    verdict = ("ALLOW", "bold green") if ex.allow else ("DENY", "bold red")
    who = str(ex.principal) if ex.principal is not None else "(no principal)"
    root = Tree(_t(verdict, f"  {who} → {ex.action} → {ex.resource}"))
    root.add(_t((ex.summary(), "italic")))
    if ex.context.fields:
        root.add(_t(("context ", "dim"), value_repr(ex.context)))
    shown: set[str] = set()
    if ex.allow:
        sec = root.add(_t(("permits that applied", "bold green")))
        for pe in ex.applied_permits:
            _policy_branch(sec, pe, show_rules)
            shown.add(pe.policy_id)
    elif ex.applied_forbids:
        sec = root.add(_t(("forbids that applied", "bold red")))
        for pe in ex.applied_forbids:
            _policy_branch(sec, pe, show_rules)
            shown.add(pe.policy_id)
        permits = ex.applied_permits
        if permits:
            sec = root.add(_t(("permits that applied but were overridden", "bold yellow")))
            for pe in permits:
                _policy_branch(sec, pe, show_rules, brief=True)
                shown.add(pe.policy_id)
    else:
        sec = root.add(_t(("no permit applied", "bold red")))
        permits = [p for p in ex.policies if p.effect == "permit"]
        if not permits:
            sec.add(_t(("the policy set has no permit policies", "italic")))
        for pe in sorted(permits, key=lambda p: p.verdict == "out_of_scope"):
            _policy_branch(sec, pe, show_rules, brief=pe.verdict == "out_of_scope")
            shown.add(pe.policy_id)
    errs = [p for p in ex.errors if p.policy_id not in shown]
    if errs:
        sec = root.add(_t(("policies that errored (they do not apply)", "bold red")))
        for pe in errs:
            _policy_branch(sec, pe, show_rules)
            shown.add(pe.policy_id)
    rest = [p for p in ex.policies if p.policy_id not in shown]
    if rest:
        if all_policies:
            sec = root.add(_t(("other policies", "dim")))
            for pe in rest:
                _policy_branch(sec, pe, show_rules, brief=True)
        else:
            root.add(_t((f"{len(rest)} other policies did not apply", "dim")))
    return root


__all__ = [
    "Clause",
    "ClauseResult",
    "ConditionFailure",
    "Derivation",
    "Explanation",
    "PolicyErrorDetail",
    "PolicyExplanation",
    "PolicyMap",
    "Read",
    "ScopePart",
    "Tracer",
    "explain",
    "explain_scope",
    "hierarchy_path",
    "policy_maps",
]
