"""Explanations: derivations read off the Program, agreeing with both backends."""

from __future__ import annotations

import json
import random

import pytest

from polang.analysis.explain import Explanation, explain
from polang.analysis.trace import hierarchy_path, policy_maps
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue, SetValue

from .test_query import CONTEXTS, random_entities, random_policies


def U(t: str, i: str) -> EntityUID:
    return EntityUID(t, i)


ALICE, BOB = U("User", "alice"), U("User", "bob")
TEAM, STAFF, ORG = U("Team", "t"), U("Group", "staff"), U("Org", "o")
DOC, FOLDER = U("Doc", "d"), U("Folder", "f")
VIEW, EDIT = U("Action", "view"), U("Action", "edit")

POLICIES = """
@id("dept")
permit(principal in Org::"o", action == Action::"view", resource is Doc in Folder::"f")
when { principal.dept == resource.dept }
when { context.mfa }
unless { resource has secret && resource.secret };

@id("interns")
forbid(principal, action in [Action::"view", Action::"edit"], resource)
when { principal.level < 2 };

@id("owner")
permit(principal, action, resource) when { resource.owner == principal };

@id("broken")
permit(principal, action == Action::"edit", resource)
when { resource.missing == 1 };

@id("team-tag")
permit(principal == User::"bob", action, resource)
when { principal.getTag("team") == "blue" };
"""

ENTITIES = [
    Entity(ALICE, {"dept": "eng", "level": 3}, {TEAM}),
    Entity(TEAM, {}, {STAFF}),
    Entity(STAFF, {}, {ORG}),
    Entity(ORG),
    Entity(BOB, {"dept": "ops", "level": 1}, set(), {"team": "blue"}),
    Entity(DOC, {"dept": "eng", "owner": BOB, "secret": False}, {FOLDER}),
    Entity(FOLDER),
]


@pytest.fixture(scope="module")
def auth() -> Authorizer:
    return Authorizer({p.policy_id or "": p for p in parse_policies(POLICIES, "store.polang")})


FACTS = EntityFacts(ENTITIES)


def ex(
    auth: Authorizer,
    principal: EntityUID,
    action: EntityUID = VIEW,
    context: dict[str, object] | None = None,
) -> Explanation:
    return explain(auth, principal, action, DOC, context or {"mfa": True}, FACTS)


def test_allow_shows_the_hierarchy_path_and_values_read(auth: Authorizer) -> None:
    e = ex(auth, ALICE)
    assert e.allow and e.reasons == ["dept"]
    p = e.policy("dept")
    assert p.verdict == "applies"
    principal_part = p.scope[0]
    assert principal_part.holds
    assert principal_part.path == [ALICE, TEAM, STAFF, ORG]
    assert principal_part.detail == 'User::"alice" in Team::"t" in Group::"staff" in Org::"o"'
    texts = [c.clause.text for c in p.conditions]
    assert texts == [
        "when { principal.dept == resource.dept }",
        "when { context.mfa }",
        "unless { resource has secret && resource.secret }",
    ]
    reads = [r.text for c in p.conditions for r in c.derivation.all_reads()]
    assert 'User::"alice".dept = "eng"' in reads
    assert 'Doc::"d".dept = "eng"' in reads
    assert "context.mfa = true" in reads
    assert 'Doc::"d" has secret: true' in reads
    d = e.to_dict()
    json.dumps(d)
    assert d["decision"] == "allow" and d["applied_permits"] == ["dept"]
    assert d["summary"] == 'allowed by permit "dept"'


def test_deny_names_the_first_condition_that_did_not_hold(auth: Authorizer) -> None:
    e = ex(auth, ALICE, context={"mfa": False})
    assert not e.allow and not e.applied_forbids
    assert e.summary() == "denied: no permit applied"
    p = e.policy("dept")
    assert p.verdict == "not_satisfied"
    assert p.failure is not None
    assert p.failure.text == "when { context.mfa }"
    assert p.failure.clause is not None and p.failure.clause.index == 2
    assert [r.text for r in p.failure.values if r.kind == "context"] == ["context.mfa = false"]
    # clauses after the failing one were not evaluated
    assert len(p.conditions) == 2
    owner = e.policy("owner")
    assert owner.verdict == "not_satisfied"
    assert owner.failure is not None
    assert 'Doc::"d".owner = User::"bob"' in [r.text for r in owner.failure.values]
    text = e.render(width=200)
    assert "no permit applied" in text
    assert "when { context.mfa } was false" in text


def test_unless_failure_narrows_to_the_operand_that_held(auth: Authorizer) -> None:
    secret = Entity(DOC, {"dept": "eng", "owner": BOB, "secret": True}, {FOLDER})
    e = explain(auth, ALICE, VIEW, DOC, {"mfa": True}, FACTS.with_entities([secret]))
    p = e.policy("dept")
    assert p.verdict == "not_satisfied" and p.failure is not None
    assert p.failure.text == "unless { resource has secret && resource.secret }"
    assert "held" in p.failure.describe()


def test_forbids_are_shown_apart_from_no_permit(auth: Authorizer) -> None:
    e = ex(auth, BOB)
    assert not e.allow
    assert [p.policy_id for p in e.applied_forbids] == ["interns"]
    assert e.reasons == ["interns"]
    assert e.summary() == 'denied: forbid "interns" applied'
    # the permits that applied are still reported, as overridden
    assert {p.policy_id for p in e.applied_permits} == {"owner", "team-tag"}
    text = e.render(width=200)
    assert "forbids that applied" in text
    assert "overridden" in text
    assert "no permit applied" not in text
    tag_derivation = e.policy("team-tag").derivation
    assert tag_derivation is not None
    tag_reads = [r for r in tag_derivation.all_reads() if r.kind == "tag"]
    assert tag_reads and tag_reads[0].text == 'User::"bob".getTag("team") = "blue"'


def test_errors_carry_policy_span_expression_and_cause(auth: Authorizer) -> None:
    e = ex(auth, ALICE, EDIT)
    p = e.policy("broken")
    assert p.verdict == "error" and p.error is not None
    assert p.error.expression == "resource.missing"
    assert "does not have the attribute `missing`" in p.error.message
    assert p.error.span is not None and p.error.span.filename == "store.polang"
    assert (p.error.span.line, p.error.span.column) == (17, 8)
    d = e.to_dict()
    assert d["errors"][0]["policy_id"] == "broken"
    assert d["errors"][0]["expression"] == "resource.missing"


def test_out_of_scope_names_the_failing_part(auth: Authorizer) -> None:
    e = ex(auth, BOB)
    p = e.policy("dept")
    assert p.verdict == "out_of_scope"
    assert p.scope_failure is not None and p.scope_failure.var == "principal"
    assert p.scope_failure.detail.startswith('User::"bob" is not in Org::"o"')
    e2 = ex(auth, ALICE)
    tag = e2.policy("team-tag")
    assert tag.scope_failure is not None
    assert tag.scope_failure.constraint == 'principal == User::"bob"'


def test_missing_principal_is_reported_in_scope_and_errors(auth: Authorizer) -> None:
    e = explain(auth, None, VIEW, DOC, {"mfa": True}, FACTS)
    dept = e.policy("dept")
    assert dept.verdict == "out_of_scope"
    assert dept.scope_failure is not None
    assert dept.scope_failure.detail == "the request has no principal"
    owner = e.policy("owner")
    assert owner.verdict == "error"
    assert owner.error is not None and owner.error.expression == "principal"


def test_render_shows_rules_on_request(auth: Authorizer) -> None:
    e = ex(auth, ALICE)
    plain = e.render(width=200)
    assert "p0_e" not in plain
    ruled = e.render(width=200, show_rules=True)
    assert "get_attr(" in ruled and ":-" in ruled
    assert "\x1b[" in e.render(color=True)


def test_hierarchy_path_with_request_entities_over_the_store() -> None:
    facts = EntityFacts(ENTITIES)
    newcomer = U("User", "new")
    over = facts.with_entities([Entity(newcomer, {}, {TEAM})])
    assert newcomer not in over.graph  # the graph lags behind: the walk must not rely on it
    assert hierarchy_path(over, newcomer, ORG) == [newcomer, TEAM, STAFF, ORG]
    assert hierarchy_path(over, newcomer, DOC) is None
    assert hierarchy_path(over, ORG, ORG) == [ORG]


def test_every_generated_policy_maps_back_to_its_ast() -> None:
    rng = random.Random(4)
    policies = {p.policy_id or "": p for p in parse_policies(random_policies(rng, 40))}
    auth = Authorizer(policies)
    maps = policy_maps(auth.program, auth.policies)
    assert all(m.exact for m in maps.values())
    for pid, m in maps.items():
        assert len(m.clauses) == len(policies[pid].conditions)


def _verdicts(e: Explanation) -> list[tuple[str, str]]:
    return [(p.policy_id, p.verdict) for p in e.policies]


@pytest.mark.parametrize("seed", range(4))
def test_compiled_and_pydatalog_traces_agree(seed: int) -> None:
    rng = random.Random(1000 + seed)
    text = random_policies(rng, 10)
    policies = {p.policy_id or "": p for p in parse_policies(text, f"s{seed}.polang")}
    compiled = Authorizer(policies, backend="compiled")
    reference = Authorizer(policies, backend="pydatalog")
    facts = EntityFacts(random_entities(rng, users=4, docs=4))
    uids = sorted(e.uid for e in facts.entities if e.uid.type != "Action")
    users = [u for u in uids if u.type == "User"]
    docs = [u for u in uids if u.type == "Doc"]
    actions = sorted(e.uid for e in facts.entities if e.uid.type == "Action")
    checked = 0
    for _ in range(25):
        p = rng.choice([*users, *users, *uids, None])
        a = rng.choice(actions)
        r = rng.choice([*docs, *docs, *uids])
        ctx: RecordValue = rng.choice(CONTEXTS)
        e1 = explain(compiled, p, a, r, ctx, facts)
        e2 = explain(reference, p, a, r, ctx, facts)
        assert (e1.allow, e1.reasons) == (e2.allow, e2.reasons)
        assert _verdicts(e1) == _verdicts(e2), (seed, p, a, r, ctx)
        assert [x.policy_id for x in e1.errors] == [x.policy_id for x in e2.errors]
        for pe in e1.policies:
            _check_derivation_matches_verdict(pe)
        for pe in e2.policies:
            _check_derivation_matches_verdict(pe)
        checked += 1
    assert checked == 25


def _check_derivation_matches_verdict(pe: object) -> None:
    """The tracer (rules re-evaluated) and the backend's verdict tell the same story."""
    from polang.analysis.explain import PolicyExplanation

    assert isinstance(pe, PolicyExplanation)
    if pe.verdict == "out_of_scope":
        assert pe.derivation is None
        assert pe.scope_failure is not None and pe.scope_failure.holds is False
        return
    assert all(part.holds for part in pe.scope)
    d = pe.derivation
    assert d is not None
    if pe.verdict == "applies":
        assert d.error is None and d.value is True
    elif pe.verdict == "not_satisfied":
        assert d.error is None and d.value is False
        assert pe.failure is not None
    else:
        assert d.error is not None or type(d.value) is not bool
        assert pe.error is not None


def test_explanation_of_sets_and_records_is_json_ready() -> None:
    auth = Authorizer(
        parse_policies(
            '@id("s") permit(principal, action, resource)\n'
            'when { principal in resource.viewers && {"a": [1, 2]}.a.contains(2) };'
        )
    )
    doc = Entity(DOC, {"viewers": SetValue([ALICE, BOB])})
    e = explain(auth, ALICE, VIEW, DOC, None, [doc, ENTITIES[0], ENTITIES[1]])
    assert e.allow
    json.dumps(e.to_dict())
    derivation = e.policy("s").derivation
    assert derivation is not None
    hier = [r for r in derivation.all_reads() if r.kind == "hierarchy"]
    assert hier[0].text == 'User::"alice"'


# ---------------------------------------------------------------- the CLI commands


def run_cli(argv: list[str]) -> int:
    import argparse

    from polang.cli.explain import register as add_cli_commands

    parser = argparse.ArgumentParser(prog="polang")
    add_cli_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


@pytest.fixture
def files(tmp_path: object) -> dict[str, str]:
    from pathlib import Path

    from polang.language.entities import entity_to_json

    root = Path(str(tmp_path))
    (root / "p.polang").write_text(POLICIES)
    (root / "e.json").write_text(json.dumps([entity_to_json(e) for e in ENTITIES]))
    return {"policies": str(root / "p.polang"), "entities": str(root / "e.json")}


def test_cli_explain_prints_a_tree_and_exits_by_decision(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--policies", files["policies"], "--entities", files["entities"]]
    req = ["--action", 'Action::"view"', "--resource", 'Doc::"d"']
    rc = run_cli(
        ["explain", *base, "--principal", 'User::"alice"', *req, "--context", '{"mfa": true}']
    )
    out = capsys.readouterr().out
    assert rc == 0 and "ALLOW" in out and 'User::"alice" in Team::"t"' in out
    rc = run_cli(["explain", *base, "--principal", 'User::"bob"', *req, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["applied_forbids"] == ["interns"]


def test_cli_explain_rejects_a_malformed_entity_reference(files: dict[str, str]) -> None:
    from polang.errors import RequestError

    with pytest.raises(RequestError, match="--principal 'alice'"):
        run_cli(
            [
                "explain",
                "--policies",
                files["policies"],
                "--principal",
                "alice",
                "--action",
                'Action::"view"',
                "--resource",
                'Doc::"d"',
            ]
        )


@pytest.mark.parametrize("backend", ["compiled", "pydatalog"])
def test_a_long_chain_is_explained_operand_by_operand(backend: str) -> None:
    """The parser builds a chain of more than 16 operands balanced; its explanation still
    lists the operands as written, and a denial narrows to the one that decided."""
    n = 24
    ands = " && ".join(f"principal.level < {100 + i}" for i in range(n))  # all hold...
    ands = ands.replace("principal.level < 109", "principal.level < 0")  # ...but the 10th
    ors = " || ".join(f"principal.level == {100 + i}" for i in range(n - 1)) + " || true"
    text = f'@id("all")\npermit(principal, action, resource) when {{ {ands} }};\n'
    text += f'@id("any")\npermit(principal, action, resource) when {{ {ors} }};'
    policies = {p.policy_id or "": p for p in parse_policies(text, "chain.polang")}
    a = Authorizer(policies, backend=backend)
    e = explain(a, BOB, VIEW, DOC, {"mfa": True}, FACTS)
    assert e.allow and e.reasons == ["any"]
    chain = e.policy("any").conditions[0].derivation
    assert [c.text for c in chain.children] == [
        *(f"principal.level == {100 + i}" for i in range(n - 1)),
        "true",
    ]
    assert "(" not in chain.text
    denied = e.policy("all")
    assert denied.failure is not None
    assert denied.failure.culprit.text == "principal.level < 0"
    evaluated = denied.conditions[0].derivation.children
    assert [c.text for c in evaluated][-1] == "principal.level < 0"
    assert len(evaluated) == 10  # evaluation stopped at the operand that decided
    alone = Authorizer({"all": policies["all"]}, backend=backend)
    rendered = explain(alone, BOB, VIEW, DOC, {"mfa": True}, FACTS).render(width=4000)
    assert "principal.level < 0" in rendered and "(principal.level" not in rendered
