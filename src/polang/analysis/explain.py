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

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polang.analysis import repairs as rp
from polang.analysis.repairs import Repairs
from polang.analysis.trace import (
    Clause,
    Derivation,
    Read,
    Tracer,
    Verdict,
    facts_of,
    hierarchy_path,
    in_read,
    path_text,
    program_views,
    scope_constraint_text,
    span_dict,
    span_str,
    uid_json,
    value_json,
)
from polang.datalog.builtins import builtin
from polang.datalog.compiled import PolicyOutcome
from polang.datalog.eval.semantics import REQUEST_VARS
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.errors import EvaluationError, PolangError
from polang.language import ast
from polang.language.entities import Entity, EntityStore, context_record
from polang.language.format import format_expr
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    printable,
    quote_string,
    value_repr,
)

if TYPE_CHECKING:
    from polang.language.schema import Schema


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
        first use; see :mod:`polang.analysis.repairs`)."""
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
                "principal": uid_json(self.principal),
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


# ======================================================================== scope


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
                r = in_read(facts, value, SetValue(targets), False)
                part.detail = r.text if r is not None else f"{value} is not in {target}"
    for p in parts.values():
        if p.holds and not p.detail:
            v = request.var(p.var)
            p.detail = f"{p.var} is {value_repr(v)}" if v is not None else f"no {p.var}"
    return [parts["principal"], parts["action"], parts["resource"]]


# ======================================================================== explain


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
    facts = facts_of(entities)
    ctx = RecordValue() if context is None else context_record(context)
    request = Request(principal, action, resource, ctx)
    raw = authorizer.backend.decide(request, facts, trace=True)
    outcomes = {o.policy_id: o for o in raw.outcomes}
    errors = dict(raw.errors)
    maps, groups = program_views(authorizer, program)
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
    s = span_str(span)
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
        where = f" at {span_str(e.span)}" if span_str(e.span) else ""
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
    "ClauseResult",
    "ConditionFailure",
    "Explanation",
    "PolicyErrorDetail",
    "PolicyExplanation",
    "ScopePart",
    "explain",
    "explain_scope",
]
