"""Plans (``polang.analysis.plan``): a plan's residuals, evaluated on each row by the one
interpreter, give exactly the decision the engine gives with that row as the resource.

The truth is the engine's decision (``Authorizer.verdict``, which ``authorize_unsigned``
returns for a request it has read; ``tests/engine/test_plan.py`` goes through
``authorize_unsigned`` itself) on generated scenarios, on the authoring generator's
stores and on a sample of the conformance corpus; the full corpus is
``benchmarks/bench_plan.py --corpus``. Each row is tried three ways
(``bench_plan.compare``): stored among the store's entities; as a service's row is,
outside the store (every entity of the resource type taken out, the row laid over what is
left); and given another row's data while the store holds its uid with its own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bench_plan import Key, compare, corpus_report
from hypothesis import HealthCheck, given, settings

from authoring.gen import ACTIONS, make_case
from datalog.strategies import Scenario, random_scenario, scenarios
from datalog.test_eval import scenario_inputs
from polang.analysis.plan import ERROR, Plan, is_error, plan
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.errors import RequestError
from polang.language import ast
from polang.language.entities import Entity
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue


def variables(e: ast.Expr) -> set[str]:
    """The request variables an expression reads."""
    if type(e) is ast.Var:
        return {e.name}
    out: set[str] = set()
    for k in ast.children(e):
        out |= variables(k)
    return out


def inspect(p: Plan) -> None:
    """A plan's form: residuals over ``resource`` alone, none never true, a
    conditional plan with a permit, its text a policy set of the residuals' ids."""
    for r in p.residuals:
        assert variables(r.expr) <= {"resource"}, r.text()
        assert r.effect in ("permit", "forbid")
        assert not is_error(r.expr) and r.expr != ast.Lit(False)
    if p.kind != "conditional":
        assert not p.residuals
        return
    assert p.permits, p.text()
    ids = [q.policy_id for q in parse_policies(p.text())]
    assert ids == [r.policy_id for r in p.residuals]


def check_both_ways(
    authorizer: Authorizer,
    facts: EntityFacts,
    keys: Iterable[Key],
    extra_rows: Iterable[Entity] = (),
) -> Counter[str]:
    """Every key's plan, rows stored and rows outside the store: no mismatch."""
    got = compare(authorizer, facts, keys, extra_rows, inspect)
    assert not got.mismatches, got.mismatches[0]
    return got.kinds


# ---------------------------------------------------------------- generated scenarios


def scenario_keys(sc: Scenario) -> tuple[Authorizer, EntityFacts, list[Key], list[Entity]]:
    authorizer, facts, requests = scenario_inputs(sc)
    keys = [(r.principal, r.action, r.resource.type, r.context) for r in requests]
    extra = [Entity(r.resource) for r in requests]  # a resource the store lacks: a bare row
    return authorizer, facts, keys, extra


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios(max_policies=6, max_requests=6))
def test_plans_equal_the_decisions_on_generated_scenarios(sc: Scenario) -> None:
    authorizer, facts, keys, extra = scenario_keys(sc)
    check_both_ways(authorizer, facts, keys, extra)


def test_plans_equal_the_decisions_on_a_seeded_sweep() -> None:
    kinds: Counter[str] = Counter()
    for seed in range(120):
        authorizer, facts, keys, extra = scenario_keys(random_scenario(40_000 + seed, 6, 8))
        kinds += check_both_ways(authorizer, facts, keys, extra)
    # every kind is met (the sweep is not all one kind)
    assert kinds["conditional"] > 100 and kinds["always_denied"] > 50, kinds
    assert kinds["always_allowed"] > 0, kinds


def test_plans_equal_the_decisions_on_the_authoring_generator() -> None:
    kinds: Counter[str] = Counter()
    for seed in range(30):
        case = make_case(seed, 10)
        ctxs = [RecordValue({"mfa": True, "n": 3}), RecordValue()]
        keys = [(p, a, "Doc", ctx) for p in case.principals for a in ACTIONS for ctx in ctxs]
        kinds += check_both_ways(case.authorizer, case.facts, keys)
    assert kinds["conditional"] > 50, kinds


# ---------------------------------------------------------------- simplification


def _plan(policies: str, entities: list[Entity], rtype: str = "Doc", **ctx: Any) -> Plan:
    authorizer = Authorizer({p.policy_id or "": p for p in parse_policies(policies)})
    return plan(
        authorizer,
        EntityUID("Action", "view"),
        rtype,
        EntityFacts(entities),
        principal=ALICE,
        context=RecordValue(ctx),
    )


ALICE = EntityUID("User", "alice")
F0, F1 = EntityUID("Folder", "f0"), EntityUID("Folder", "f1")
STORE = [
    Entity(ALICE, {"level": 5, "dept": "eng"}, {EntityUID("Group", "g")}),
    Entity(F1, {}, {F0}),
]


def _texts(p: Plan) -> list[str]:
    return [f"{r.effect} {r.policy_id}: {r.text()}" for r in p.residuals]


def test_known_parts_are_evaluated_away() -> None:
    p = _plan(
        """
        @id("a") permit(principal, action, resource) when { resource.dept == principal.dept };
        @id("b") permit(principal, action, resource in Folder::"f1")
          when { principal.level > 3 && context.mfa };
        @id("c") permit(principal, action, resource) when { principal in resource };
        @id("d") permit(principal, action, resource) when { principal in resource.viewers };
        """,
        STORE,
        mfa=True,
    )
    assert _texts(p) == [
        'permit a: resource.dept == "eng"',
        'permit b: resource in Folder::"f1"',
        # the principal's ancestors are known: the row is one of them, or not
        "permit d: " + 'User::"alice" in resource.viewers',
    ]
    p = _plan("permit(principal, action, resource) when { principal in resource };", STORE, "Group")
    assert [r.text() for r in p.residuals] == ['[Group::"g"].contains(resource)']


def test_an_erroring_part_never_counts_as_true() -> None:
    p = _plan(
        """
        @id("or") permit(principal, action, resource) when { resource.x == 1 || principal.nope };
        @id("and") permit(principal, action, resource) when { resource.x == 1 && principal.nope };
        @id("sql") permit(principal, action, resource) when { resource.x == 1 || true };
        @id("neg") forbid(principal, action, resource) unless { resource.y || principal.nope };
        """,
        STORE,
    )
    assert _texts(p) == [
        "permit or: resource.x == 1",  # `a || error` is true only when a is
        # `resource.x == 1 || true` errs on a row without x: not `true`
        "permit sql: resource.x == 1 || true",
        "forbid neg: !(resource.y || 1 + true)",  # under `!` the error must stay
    ]
    neg = p.residuals[-1].expr
    assert isinstance(neg, ast.Unary) and is_error(neg.arg.right)  # type: ignore[attr-defined]
    assert p.text().count("1 + true") == 1
    row = Entity(EntityUID("Doc", "d"), {"y": False})
    assert not p.allows(row)  # no x: `resource.x == 1 || true` errs
    assert p.allows(Entity(EntityUID("Doc", "d"), {"x": 2, "y": True}))
    # forbid neg: !(false || error) is an error: it does not forbid
    assert p.allows(Entity(EntityUID("Doc", "d"), {"x": 2, "y": False}))


def test_contradictions_and_repeats_at_the_top() -> None:
    p = _plan(
        """
        @id("two") permit(principal, action, resource)
          when { resource.p == "a" && resource.x && "b" == resource.p };
        @id("types") permit(principal, action, resource)
          when { resource.n == 1 && resource.n == true };
        @id("same") permit(principal, action, resource)
          when { resource.n == 1 && resource.x && resource.n == 1 };
        @id("under-not") permit(principal, action, resource)
          when { !(resource.p == "a" && resource.p == "b") };
        @id("caught") permit(principal, action, resource) when { resource.y };
        @id("f") forbid(principal, action, resource) when { resource.y };
        """,
        STORE,
    )
    assert _texts(p) == [
        "permit same: resource.n == 1 && resource.x",
        'permit under-not: !(resource.p == "a" && resource.p == "b")',
        "forbid f: resource.y",
    ]


def test_kinds() -> None:
    allow = '@id("all") permit(principal, action, resource);'
    assert _plan(allow, STORE).kind == "always_allowed"
    assert _plan(allow + ' @id("f") forbid(principal, action, resource);', STORE).kind == (
        "always_denied"
    )
    assert _plan('@id("n") permit(principal, action, resource is Folder);', STORE).kind == (
        "always_denied"
    )
    p = _plan(allow + '@id("f") forbid(principal, action, resource) when { resource.x };', STORE)
    assert p.kind == "conditional" and _texts(p) == ["permit all: true", "forbid f: resource.x"]
    # a forbid that can never apply is dropped, a permit that always does wins over others
    p = _plan(
        allow
        + '@id("p") permit(principal, action, resource) when { resource.x };'
        + '@id("f") forbid(principal, action, resource) when { principal.level > 9 };',
        STORE,
    )
    assert p.kind == "always_allowed"
    assert p.allows(Entity(EntityUID("Doc", "z")))
    assert not _plan('@id("n") permit(principal, action, resource is Folder);', STORE).allows(
        Entity(EntityUID("Doc", "z"))
    )


def test_to_dict_is_json() -> None:
    p = _plan(
        '@id("t") permit(principal, action, resource) when { resource.n < decimal("1.5") || '
        'resource.tags.contains("x") && resource.ip.isInRange(ip("10.0.0.0/8")) };',
        STORE,
    )
    d = json.loads(json.dumps(p.to_dict()))
    assert d["kind"] == "conditional" and d["resource_type"] == "Doc"
    assert d["principal"] == {"type": "User", "id": "alice"}
    assert d["action"] == {"type": "Action", "id": "view"}
    (r,) = d["residuals"]
    assert r["policy_id"] == "t" and r["effect"] == "permit"
    assert 'decimal("1.5000")' in r["condition"] and 'ip("10.0.0.0/8")' in r["condition"]
    assert "||" in r["expr"]
    assert ast.Binary("+", ast.Lit(1), ast.Lit(True)) == ERROR


def test_templates_are_planned() -> None:
    template = parse_policies(
        "permit(principal == ?principal, action, resource in ?resource) when { resource.ok };"
    )[0]
    linked = ast.link_template(template, ALICE, F1)
    authorizer = Authorizer({"link": linked})
    p = plan(authorizer, EntityUID("Action", "view"), "Doc", EntityFacts(STORE), principal=ALICE)
    assert [r.text() for r in p.residuals] == ['resource in Folder::"f1" && resource.ok']
    bob = EntityUID("User", "bob")
    assert (
        plan(authorizer, EntityUID("Action", "view"), "Doc", EntityFacts(STORE), principal=bob).kind
        == "always_denied"
    )


# ---------------------------------------------------------------- the conformance corpus


def test_plans_equal_the_decisions_on_a_corpus_sample(corpus_dir: Path) -> None:
    # every 23rd file (the whole corpus: benchmarks/bench_plan.py --corpus)
    rep = corpus_report(corpus_dir, 23, inspect)
    assert not rep["mismatches"], rep["mismatches"][0]
    assert rep["files"] > 150 and rep["plans"] > 400 and rep["rows"] > 400, rep
    assert all(rep["kinds"].get(k) for k in ("always_allowed", "always_denied", "conditional"))


def test_the_planning_benchmark_runs() -> None:
    # benchmarks/bench_plan.py on a tiny store: its plans verified row for row
    from benchmarks.bench_plan import run_bench, table

    res = run_bench(n_entities=200, n_policies=20, n_requests=12, verify=4, warmup=2)
    assert res["verified_rows"] > 0 and not res["mismatches"], res["mismatches"][:1]
    assert res["plans"] == 12 and "plan() alone" in table(res)


def test_policy_ids_print_quoted_and_a_row_must_be_an_entity() -> None:
    odd = 'we"ird\nid\\'
    authorizer = Authorizer(
        {odd: parse_policies("permit(principal, action, resource) when { resource.ok };")[0]}
    )
    p = plan(authorizer, EntityUID("Action", "view"), "Doc", EntityFacts(STORE), principal=ALICE)
    assert [q.policy_id for q in parse_policies(p.text())] == [odd]
    with pytest.raises(RequestError, match="expected an Entity"):
        p.allows({"uid": {"type": "Doc", "id": "d"}})  # type: ignore[arg-type]
    assert p.allows(Entity(EntityUID("Doc", "d"), {"ok": True}))
    assert not p.allows(Entity(EntityUID("Folder", "d"), {"ok": True}))  # another type
