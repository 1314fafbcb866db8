"""The one interpreter (``datalog/eval/``) against the compiled backend's fast paths.

The generated code (``pycode``), the closures and the interpreter must give every policy
the same outcome (out of scope, its Bool, or its error message) on every request: on a
sample of the conformance corpus and on generated scenarios (``strategies.py``). With
unknowns, a known answer must be the real one whatever the unknowns turn out to be, and
a residual, printed in policy syntax and evaluated once they are known, must give the
policy's real outcome.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from polang import conformance
from polang.datalog.authorizer import Authorizer
from polang.datalog.compiled import CompiledBackend
from polang.datalog.eval.interpreter import Evaluation, Observer, policy_outcome
from polang.datalog.eval.partial import Unknown, Unknowns
from polang.datalog.eval.residual import Residual
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Program, Rule
from polang.errors import EvaluationError, PolangError
from polang.language.ast import Policy, link_template
from polang.language.entities import (
    Entity,
    parse_context,
    parse_entities,
    parse_entity_uid_json,
)
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue

from .strategies import Scenario, random_scenario, scenarios

Outcome = Any
"""A policy's outcome as compared here: ``None`` (out of scope), a Bool, or
``("error", message)``."""


def _key(out: Any) -> Outcome:
    if isinstance(out, EvaluationError):
        return ("error", out.message)
    return out


def interpreted(program: Program, request: Request, facts: EntityFacts) -> dict[str, Outcome]:
    """Every policy's outcome by the interpreter (no unknowns: never a residual)."""
    ev = Evaluation(program.by_head(), request, facts)
    return {pid: _key(policy_outcome(ev, info)) for pid, info in program.policies.items()}


def traced(backend: CompiledBackend, request: Request, facts: EntityFacts) -> dict[str, Outcome]:
    """Every policy's outcome by a backend's traced decision (out of scope when the
    action index left it out)."""
    raw = backend.decide(request, facts, trace=True)
    out: dict[str, Outcome] = dict.fromkeys(backend.program.policies)
    errors = dict(raw.errors)
    for o in raw.outcomes:
        if not o.scope:
            continue
        err = errors.get(o.policy_id) or o.error
        out[o.policy_id] = ("error", err.message) if err is not None else o.value
    return out


def decision(program: Program, outcomes: dict[str, Outcome]) -> tuple[Any, ...]:
    """``rules/decision.dl`` over per-policy outcomes: (allow, reasons, errors)."""
    effect = {pid: info.effect for pid, info in program.policies.items()}
    applies = [pid for pid, o in outcomes.items() if o is True]
    forbids = [pid for pid in applies if effect[pid] == "forbid"]
    permits = [pid for pid in applies if effect[pid] == "permit"]
    allow = bool(permits) and not forbids
    errors = [(pid, o[1]) for pid, o in outcomes.items() if type(o) is tuple]
    return allow, permits if allow else forbids, errors


def decided(backend: CompiledBackend, request: Request, facts: EntityFacts) -> tuple[Any, ...]:
    raw = backend.decide(request, facts)
    return raw.allow, raw.reasons, [(pid, e.message) for pid, e in raw.errors]


def check_agree(program: Program, requests: list[Request], facts: EntityFacts) -> int:
    """The interpreter, the generated code and the closures on every request."""
    fast = CompiledBackend(program)
    closures = CompiledBackend(program, mode="closures")
    for request in requests:
        want = interpreted(program, request, facts)
        assert traced(fast, request, facts) == want, request
        assert traced(closures, request, facts) == want, request
        d = decision(program, want)
        assert decided(fast, request, facts) == d, request
        assert decided(closures, request, facts) == d, request
    return len(requests)


# ---------------------------------------------------------------- the corpus


def corpus_cases(
    root: Path, step: int
) -> Iterator[tuple[str, Program, EntityFacts, list[Request]]]:
    """Every ``step``-th test file of the corpus: its Program, facts and requests."""
    for f in list(conformance.test_files(root))[::step]:
        spec = json.loads(f.read_text("utf-8"))
        try:
            schema = parse_schema((root / spec["schema"]).read_text("utf-8"))
            policies = parse_policies((root / spec["policies"]).read_text("utf-8"))
            store = parse_entities((root / spec["entities"]).read_text("utf-8"), schema)
            authorizer = Authorizer({f"policy{i}": p for i, p in enumerate(policies)})
        except PolangError:
            continue  # the corpus runner reports these; nothing to compare
        requests = []
        for req in spec["requests"]:
            action = parse_entity_uid_json(req["action"])
            try:
                context = parse_context(req.get("context", {}), schema, action)
            except PolangError:
                continue
            requests.append(
                Request(
                    parse_entity_uid_json(req["principal"]),
                    action,
                    parse_entity_uid_json(req["resource"]),
                    context,
                )
            )
        yield f.name, authorizer.program, EntityFacts(store), requests


def test_interpreter_and_fast_paths_agree_on_the_corpus(corpus_dir: Path) -> None:
    compared = 0
    for _name, program, facts, requests in corpus_cases(corpus_dir, 3):
        compared += check_agree(program, requests, facts)
    assert compared > 9000


# ---------------------------------------------------------------- generated scenarios


def scenario_inputs(sc: Scenario) -> tuple[Authorizer, EntityFacts, list[Request]]:
    parsed = parse_policies(sc.policies.text)
    by_id: dict[str, Policy] = {}
    templates: dict[str, Policy] = {}
    for pid, p in zip(sc.policies.ids, parsed, strict=True):
        (templates if pid in sc.policies.templates else by_id)[pid] = p
    for link in sc.policies.links:
        by_id[link.new_id] = link_template(
            templates[link.template],
            None if link.principal is None else EntityUID(**link.principal),
            None if link.resource is None else EntityUID(**link.resource),
        )
    schema = parse_schema(sc.schema.text())
    facts = EntityFacts(parse_entities(json.dumps(sc.entities), schema))
    requests = []
    for req in sc.requests:
        action = parse_entity_uid_json(req["action"])
        requests.append(
            Request(
                parse_entity_uid_json(req["principal"]),
                action,
                parse_entity_uid_json(req["resource"]),
                parse_context(req["context"], schema, action),
            )
        )
    return Authorizer(by_id), facts, requests


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_interpreter_and_fast_paths_agree_on_generated_scenarios(sc: Scenario) -> None:
    authorizer, facts, requests = scenario_inputs(sc)
    check_agree(authorizer.program, requests, facts)


def test_interpreter_and_fast_paths_agree_on_a_seeded_sweep() -> None:
    for seed in range(300):
        authorizer, facts, requests = scenario_inputs(random_scenario(20_000 + seed))
        check_agree(authorizer.program, requests, facts)


# ---------------------------------------------------------------- unknowns and residuals


def residual_outcome(res: Residual, request: Request, facts: EntityFacts) -> Outcome:
    """A residual evaluated once the unknowns are known: parsed back as a condition."""
    text = f"permit(principal, action, resource) when {{ {res.text()} }};"
    authorizer = Authorizer({"r": parse_policies(text)[0]})
    ev = Evaluation(authorizer.program.by_head(), request, facts)
    return _key(policy_outcome(ev, authorizer.program.policies["r"]))


def check_partial(program: Program, requests: list[Request], facts: EntityFacts) -> int:
    """With the context unknown, and then the principal's data: a known outcome is the
    real one, and a residual evaluates to it (a policy out of scope to false)."""
    groups = program.by_head()
    residuals = 0
    for request in requests:
        real = interpreted(program, request, facts)
        variants = [Unknowns(groups, context=True)]
        if request.principal is not None:
            variants.append(Unknowns(groups, entities=frozenset((request.principal,))))
        for unknowns in variants:
            ev = Evaluation(groups, request, facts, unknowns=unknowns)
            for pid, info in program.policies.items():
                got = policy_outcome(ev, info)
                if isinstance(got, EvaluationError):
                    # an error whatever the unknowns are (the first error may be one an
                    # unknown part would have raised first in the real request)
                    assert type(real[pid]) is tuple, (pid, request)
                    continue
                if not isinstance(got, Residual):
                    # false with the scope unknown: it does not apply, in scope or not
                    want = False if got is False and real[pid] is None else real[pid]
                    assert got == want, (pid, request)
                    continue
                residuals += 1
                assert got.policy_id == pid and got.effect == info.effect
                want = False if real[pid] is None else real[pid]
                assert residual_outcome(got, request, facts) == want, (pid, got.text())
    return residuals


def test_residuals_evaluate_to_the_real_outcome_on_a_seeded_sweep() -> None:
    residuals = 0
    for seed in range(150):
        authorizer, facts, requests = scenario_inputs(random_scenario(30_000 + seed))
        residuals += check_partial(authorizer.program, requests, facts)
    assert residuals > 200


U = EntityUID("U", "u")
D = EntityUID("D", "d")
G = EntityUID("G", "g")
VIEW = EntityUID("Action", "view")
POLICIES = """
@id("and") permit(principal, action, resource) when { principal.level > 9 && context.mfa };
@id("or") permit(principal, action, resource) when { principal.level > 3 || context.mfa };
@id("rest") permit(principal, action, resource) when { context.mfa && principal.level > 3 };
@id("error") permit(principal, action, resource) when { principal.nope && context.mfa };
@id("if") permit(principal, action, resource)
  when { if context.n > 1 then resource.nope else principal.level < 9 };
@id("member") permit(principal in G::"g", action, resource) when { resource.owner == principal };
"""


def _partial(principal: EntityUID, unknowns: dict[str, Any]) -> dict[str, Any]:
    authorizer = Authorizer({p.policy_id or "": p for p in parse_policies(POLICIES)})
    groups = authorizer.program.by_head()
    facts = EntityFacts([Entity(U, {"level": 5}, {G}), Entity(D, {"owner": U})])
    ev = Evaluation(
        groups,
        Request(principal, VIEW, D, RecordValue()),
        facts,
        unknowns=Unknowns(groups, **unknowns),
    )
    out = {}
    for pid, info in authorizer.program.policies.items():
        got = policy_outcome(ev, info)
        out[pid] = got.text() if isinstance(got, Residual) else _key(got)
    return out


def test_known_parts_short_circuit_and_the_rest_is_a_residual() -> None:
    assert _partial(U, {"context": True}) == {
        "and": False,  # false && unknown
        "or": True,  # true || unknown
        "rest": "context.mfa && true",
        "error": ("error", 'entity U::"u" does not have the attribute `nope`'),
        "if": "if context.n > 1 then resource.nope else true",  # the erring branch as written
        "member": True,
    }


def test_an_unknown_entity_leaves_its_attributes_and_ancestors_open() -> None:
    ghost = EntityUID("U", "ghost")
    got = _partial(ghost, {"entities": frozenset((ghost,))})
    assert got["and"] == 'U::"ghost".level > 9 && context.mfa'
    assert got["or"] == 'U::"ghost".level > 3 || context.mfa'
    assert got["member"] is False  # the owner is another: whatever its groups are


class Recorder(Observer):
    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def enter(self, pred: str) -> None:
        self.events.append(("enter", pred))

    def rule(self, pred: str, rule: Rule) -> None:
        self.events.append(("rule", pred))

    def atom(self, pred: str, lit: Atom, ok: bool, value: Any) -> None:
        self.events.append(("atom", pred, lit.pred, repr(value) if ok else "error"))

    def call(self, pred: str, lit: Builtin, args: list[Any], ok: bool, result: Any) -> None:
        self.events.append(("call", pred, lit.op, repr(result) if ok else result.message))

    def rule_done(self, pred: str, rule: Rule, ok: bool) -> None:
        self.events.append(("rule_done", pred, str(ok)))

    def exit(self, pred: str, ok: bool, value: Any, rule: Rule | None, cause: Any) -> None:
        self.events.append(("exit", pred, repr(value) if ok else value.message))


def test_an_observer_sees_the_evaluation_in_order() -> None:
    text = "permit(principal, action, resource) when { !(principal.level > 3) };"
    program = Authorizer({"p": parse_policies(text)[0]}).program
    facts = EntityFacts([Entity(U, {"level": 5})])
    rec = Recorder()
    ev = Evaluation(program.by_head(), Request(U, VIEW, D, RecordValue()), facts, observer=rec)
    assert ev.value(program.policies["p"].cond_pred) is False
    names = [e[0] for e in rec.events]
    # every enter has its exit, nested; operands are entered before their atom is read
    depth = 0
    for name in names:
        depth += {"enter": 1, "exit": -1}.get(name, 0)
        assert depth >= 0
    assert depth == 0 and names[0] == "enter" and names[-1] == "exit"
    assert [e[2:] for e in rec.events if e[0] == "call"] == [("get_attr", "5"), ("gt", "True")]
    assert rec.events[-1] == ("exit", program.policies["p"].cond_pred, "False")
    # the value is the same without an observer (the compiled generic path)
    plain = CompiledBackend(program, mode="generic")
    assert plain.decide(Request(U, VIEW, D, RecordValue()), facts).allow is False


def test_unknown_values_say_what_they_may_be() -> None:
    u = Unknown(
        True,
        False,
        lambda: (
            parse_policies("permit(principal, action, resource) when { context.a };")[0]
            .conditions[0]
            .body
        ),
    )
    assert u.may_be(True) and not u.may_be(False) and u.may_be(3)
    assert repr(u) == "UNK(t=True, f=False)"


@pytest.mark.parametrize("mode", CompiledBackend.MODES)
def test_the_generic_mode_is_the_interpreter(mode: str) -> None:
    # a rule group of no known form runs through the interpreter in every mode
    program = Authorizer(
        {"p": parse_policies("permit(principal, action, resource) when { context.ok };")[0]}
    ).program
    info = program.policies["p"]
    rules = [r for r in program.rules if r.head.pred == info.cond_pred]
    # add a second rule of the same head: the group is no longer of a known form
    program.rules.append(Rule(rules[0].head, rules[0].body, "p"))
    backend = CompiledBackend(program, mode=mode)
    for ctx, allow in (({"ok": True}, True), ({"ok": False}, False), ({}, False)):
        request = Request(U, VIEW, D, RecordValue(ctx))
        assert backend.decide(request, EntityFacts([])).allow is allow
        assert (
            interpreted(program, request, EntityFacts([]))["p"]
            == traced(backend, request, EntityFacts([]))["p"]
        )
