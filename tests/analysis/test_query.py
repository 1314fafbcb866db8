"""who_can / what_can / access_matrix against brute force: is_authorized on every triple."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from tests.random_stores import DELETE, EDIT, VIEW, WRITE, U
from tests.random_stores import random_entities as _random_entities
from tests.random_stores import random_policies as _random_policies

from polang.analysis.query import (
    QueryError,
    QueryIndex,
    access_matrix,
    prepare,
    what_can,
    who_can,
)
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity
from polang.language.hierarchy import MAX_HIERARCHY_DEPTH
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue, SetValue

Triple = tuple[EntityUID, EntityUID, EntityUID]


# Conditions over every shape the evaluator distinguishes: scalars, tables, indexed joins
# (==, !=, in, contains*, <...), fallbacks, &&/||/!/if, errors and the context.
QUERY_CONDITIONS = [
    "principal.dept == resource.dept",
    "resource.dept != principal.dept",
    "resource.owner == principal",
    "principal == resource.owner",
    "principal in resource.viewers",
    "principal in resource.owner",
    "resource in principal.folders",
    "resource.public",
    "principal.level > 2",
    "principal.level >= resource.level",
    "resource.level < principal.level",
    "2 <= principal.level",
    "resource has public && resource.public",
    'resource.tags.contains("x")',
    '["x", "y"].contains(resource.dept)',
    "resource.viewers.contains(principal)",
    "principal.groups.containsAny(resource.groups)",
    'resource.tags.containsAll(["x"])',
    "principal has manager && principal.manager == resource.owner",
    "principal.level + 1 > resource.level",
    "if principal.level > 3 then true else resource.public",
    "!resource.public",
    "resource.public || principal.level > 4",
    'principal.getTag("team") == "a"',
    'principal.hasTag("team")',
    "principal is User",
    'resource is Doc in Folder::"f0"',
    'principal in Group::"g0"',
    "resource.owner.dept == principal.dept",
    "resource.owner in principal",
    "resource.level == 1",
    'principal.nick like "a*"',
    "context.mfa",
    "context.level > 1 && principal.level > 1",
    "context.mfa || resource.public",
    "principal.level > context.level",
    "principal.level > resource.level + context.level",
    "principal.groups.containsAll(resource.groups)",
    "resource.groups.containsAll(principal.groups)",
    "principal in resource.tags",
    "principal in resource.dept",
    "resource.owner in principal.manager",
    "resource.groups.containsAny(principal.groups)",
]


def random_policies(rng: random.Random, n: int, *, context: bool = True) -> str:
    """``n`` policies over the query conditions (``context=False``: none that reads it)."""
    conds = QUERY_CONDITIONS if context else [c for c in QUERY_CONDITIONS if "context" not in c]
    return _random_policies(rng, n, conds)


def random_entities(rng: random.Random, users: int = 7, docs: int = 7) -> list[Entity]:
    return _random_entities(rng, users, docs)


@dataclass
class Case:
    seed: int
    authorizer: Authorizer
    facts: EntityFacts
    actions: list[EntityUID]
    candidates: list[EntityUID]


def make_case(seed: int, n_policies: int = 12, *, context: bool = True) -> Case:
    rng = random.Random(seed)
    text = random_policies(rng, n_policies, context=context)
    policies = {p.policy_id or "": p for p in parse_policies(text, f"seed{seed}.polang")}
    facts = EntityFacts(random_entities(rng))
    actions = sorted(
        {e.uid for e in facts.entities if e.uid.type == "Action"} | {VIEW, EDIT, DELETE, WRITE}
    )
    cands = sorted(e.uid for e in facts.entities if e.uid.type != "Action")
    return Case(seed, Authorizer(policies), facts, actions, cands)


def brute_force(case: Case, context: RecordValue, facts: EntityFacts | None = None) -> set[Triple]:
    facts = facts or case.facts
    out = set()
    for a in case.actions:
        for r in case.candidates:
            for p in case.candidates:
                if case.authorizer.is_authorized(p, a, r, context, facts).allow:
                    out.add((p, a, r))
    return out


CONTEXTS = [
    RecordValue({"mfa": True, "level": 3}),
    RecordValue({"mfa": False, "level": 0}),
    RecordValue({"mfa": 1, "level": 2}),  # a type error where `context.mfa` is a condition
    RecordValue({}),  # every context read errors
]


def entries_by_decision(result: Iterable[object]) -> tuple[set[Triple], set[Triple]]:
    allow: set[Triple] = set()
    cond: set[Triple] = set()
    for e in result:
        (allow if e.decision == "allow" else cond).add(e.triple)  # type: ignore[attr-defined]
    return allow, cond


@pytest.mark.parametrize("seed", range(12))
def test_matrix_equals_brute_force_with_known_context(seed: int) -> None:
    case = make_case(seed)
    ctx = CONTEXTS[seed % len(CONTEXTS)]
    expected = brute_force(case, ctx)
    result = access_matrix(case.authorizer, case.facts, ctx)
    allow, cond = entries_by_decision(result)
    assert not cond and result.complete
    assert allow == expected
    assert set(result.triples()) == expected
    assert len(result) == len(expected)


@pytest.mark.parametrize("seed", range(12, 18))
def test_who_can_and_what_can_equal_brute_force(seed: int) -> None:
    case = make_case(seed)
    ctx = CONTEXTS[seed % len(CONTEXTS)]
    expected = brute_force(case, ctx)
    qi = prepare(case.authorizer, case.facts)
    for a in case.actions:
        for r in case.candidates:
            got = who_can(case.authorizer, qi, a, r, ctx)
            assert got.complete
            want = sorted(p for p, a2, r2 in expected if a2 == a and r2 == r)
            assert got.principals == want, (seed, a, r)
    for p in case.candidates:
        got = what_can(case.authorizer, qi, p, None, ctx)
        assert {e.triple for e in got} == {t for t in expected if t[0] == p}, (seed, p)
        one = what_can(case.authorizer, qi, p, VIEW, ctx)
        assert {e.triple for e in one} == {t for t in expected if t[0] == p and t[1] == VIEW}


@pytest.mark.parametrize("seed", range(18, 26))
def test_unknown_context_is_conditional_never_dropped(seed: int) -> None:
    case = make_case(seed)
    result = access_matrix(case.authorizer, case.facts, None)
    allow, cond = entries_by_decision(result)
    assert not (allow & cond)
    for ctx in CONTEXTS:
        actual = brute_force(case, ctx)
        assert allow <= actual, "a definite answer must hold whatever the context"
        assert actual <= allow | cond, "an answer that depends on the context must be listed"
    for e in result.conditional:
        assert e.residuals, "a conditional entry names the policies that decide it"


def refer_to(case: Case, ghost: EntityUID, rng: random.Random) -> None:
    """Make some stored entities point at ``ghost`` (owner, viewer, manager, parent)."""
    ents = []
    for e in case.facts.entities:
        attrs = dict(e.attrs)
        parents = set(e.parents)
        if e.uid.type == "Doc" and rng.random() < 0.4:
            attrs["owner"] = ghost
        if e.uid.type == "Doc" and rng.random() < 0.4:
            attrs["viewers"] = SetValue([ghost])
        if e.uid.type == "User" and rng.random() < 0.4:
            attrs["manager"] = ghost
        if e.uid.type == ghost.type and e.uid != ghost and rng.random() < 0.3:
            parents.add(ghost)
        ents.append(Entity(e.uid, attrs, parents, e.tags))
    case.facts = EntityFacts(ents)


@pytest.mark.parametrize("seed", range(26, 34))
def test_principal_not_in_store_is_conditional(seed: int) -> None:
    case = make_case(seed, context=False)
    ghost = U("User", "ghost")
    if seed % 2:  # stored data refers to the missing principal, or nothing does
        refer_to(case, ghost, random.Random(seed))
    ctx = RecordValue({"mfa": True, "level": 2})
    result = what_can(case.authorizer, case.facts, ghost, None, ctx)
    allow, cond = entries_by_decision(result)
    rng = random.Random(seed)
    variants = [Entity(ghost)]
    for _ in range(6):
        e = random_entities(rng, users=1, docs=0)[-1]
        variants.append(Entity(ghost, e.attrs, e.parents | {U("User", "u2")}, e.tags))
    for v in variants:
        facts = case.facts.with_entities([v])
        actual = set()
        for a in case.actions:
            for r in case.candidates:
                if case.authorizer.is_authorized(ghost, a, r, ctx, facts).allow:
                    actual.add((ghost, a, r))
        assert allow <= actual
        assert actual <= allow | cond


@pytest.mark.parametrize("seed", range(34, 40))
def test_resource_not_in_store_is_conditional(seed: int) -> None:
    case = make_case(seed, context=False)
    ghost = U("Doc", "ghost")
    if seed % 2:
        refer_to(case, ghost, random.Random(-seed))
    ctx = RecordValue({"mfa": True, "level": 2})
    rng = random.Random(seed)
    for a in case.actions:
        result = who_can(case.authorizer, case.facts, a, ghost, ctx)
        allow, cond = entries_by_decision(result)
        for _ in range(3):
            e = random_entities(rng, users=4, docs=1)[-1]
            facts = case.facts.with_entities([Entity(ghost, e.attrs, e.parents, e.tags)])
            actual = {
                (p, a, ghost)
                for p in case.candidates
                if case.authorizer.is_authorized(p, a, ghost, ctx, facts).allow
            }
            assert allow <= actual
            assert actual <= allow | cond


@pytest.mark.parametrize("seed", [3, 7, 19])
def test_paging_concatenates_to_the_whole_answer(seed: int) -> None:
    case = make_case(seed)
    whole = [e.to_dict() for e in access_matrix(case.authorizer, case.facts, None)]
    for limit in (1, 3, 17):
        pages: list[dict[str, object]] = []
        cursor = None
        n = 0
        while True:
            page = access_matrix(case.authorizer, case.facts, None, limit=limit, cursor=cursor)
            assert len(page) <= limit
            pages.extend(e.to_dict() for e in page)
            cursor = page.next_cursor
            n += 1
            if cursor is None:
                break
            assert len(page) == limit
        assert pages == whole
        assert n == max(1, -(-len(whole) // limit))


def test_cursor_from_another_query_is_rejected() -> None:
    case = make_case(5)
    page = access_matrix(case.authorizer, case.facts, None, limit=1)
    assert page.next_cursor is not None
    with pytest.raises(QueryError, match="another query"):
        access_matrix(case.authorizer, case.facts, RecordValue({}), cursor=page.next_cursor)
    with pytest.raises(QueryError, match="not a cursor"):
        access_matrix(case.authorizer, case.facts, None, cursor="garbage!")
    with pytest.raises(QueryError, match="limit"):
        access_matrix(case.authorizer, case.facts, None, limit=0)


SCHEMA = """
entity Group in [Group];
entity User in [Group] { level: Long };
entity Doc { owner: User };
entity Robot;
action view appliesTo { principal: [User], resource: [Doc] };
action audit appliesTo { principal: [User, Robot], resource: [Doc, User] };
"""


def test_schema_limits_candidates_to_the_action_types() -> None:
    schema = parse_schema(SCHEMA)
    policies = parse_policies(
        '@id("all") permit(principal, action, resource);\n'
        '@id("no") forbid(principal == User::"b", action == Action::"audit", resource);'
    )
    auth = Authorizer(policies)
    ents = [
        Entity(U("User", "a"), {"level": 1}),
        Entity(U("User", "b"), {"level": 2}),
        Entity(U("Robot", "r")),
        Entity(U("Doc", "d"), {"owner": U("User", "a")}),
        Entity(U("Group", "g")),
    ]
    facts = EntityFacts(ents)
    m = access_matrix(auth, facts, RecordValue({}), schema=schema)
    got = set(m.triples())
    want = set()
    for a, ps, rs in (
        (U("Action", "view"), ["User"], ["Doc"]),
        (U("Action", "audit"), ["User", "Robot"], ["Doc", "User"]),
    ):
        for p in (e.uid for e in ents if e.uid.type in ps):
            for r in (e.uid for e in ents if e.uid.type in rs):
                if auth.is_authorized(p, a, r, {}, facts).allow:
                    want.add((p, a, r))
    assert got == want
    assert (U("User", "b"), U("Action", "audit"), U("Doc", "d")) not in got
    # what_can skips actions whose principal types exclude the principal
    robot = what_can(auth, facts, U("Robot", "r"), None, RecordValue({}), schema=schema)
    assert {e.action for e in robot} == {U("Action", "audit")}


def test_reasons_and_residuals_name_the_policies() -> None:
    policies = parse_policies(
        '@id("owner") permit(principal, action == Action::"view", resource)\n'
        "  when { resource.owner == principal };\n"
        '@id("mfa") permit(principal is User in Group::"staff",\n'
        '  action == Action::"view", resource)\n'
        "  when { resource.public } when { context.mfa };\n"
        '@id("lock") forbid(principal, action, resource) when { context.locked };'
    )
    auth = Authorizer(policies)
    alice, bob = U("User", "alice"), U("User", "bob")
    doc = U("Doc", "d")
    facts = EntityFacts(
        [
            Entity(alice, {}, {U("Group", "staff")}),
            Entity(bob),
            Entity(U("Group", "staff")),
            Entity(doc, {"owner": bob, "public": True}),
        ]
    )
    known = who_can(auth, facts, VIEW, doc, {"mfa": True, "locked": False})
    assert known.principals == [alice, bob]
    assert {e.principal: e.reasons for e in known} == {alice: ("mfa",), bob: ("owner",)}
    unknown = who_can(auth, facts, VIEW, doc, None)
    assert not unknown.complete
    by = {e.principal: e for e in unknown}
    assert by[bob].decision == "conditional"
    assert by[bob].reasons == ("owner",)
    assert [(r.policy_id, r.conditions) for r in by[bob].residuals] == [
        ("lock", ("when { context.locked }",))
    ]
    res = {r.policy_id: r.conditions for r in by[alice].residuals}
    assert res == {"mfa": ("when { context.mfa }",), "lock": ("when { context.locked }",)}
    d = unknown.to_dict()
    assert d["complete"] is False and d["conditional"] == 2


def test_scope_pruning_uses_the_hierarchy_and_types() -> None:
    policies = parse_policies(
        '@id("a") permit(principal in Org::"o", action, resource is Doc in Folder::"top");'
    )
    auth = Authorizer(policies)
    ents = [
        Entity(U("Org", "o")),
        Entity(U("Group", "g"), {}, {U("Org", "o")}),
        Entity(U("User", "a"), {}, {U("Group", "g")}),
        Entity(U("User", "b")),
        Entity(U("Folder", "top")),
        Entity(U("Folder", "sub"), {}, {U("Folder", "top")}),
        Entity(U("Doc", "d1"), {}, {U("Folder", "sub")}),
        Entity(U("Doc", "d2")),
    ]
    facts = EntityFacts(ents)
    got = set(access_matrix(auth, facts, {}, actions=[VIEW]).triples())
    assert got == {
        (p, VIEW, U("Doc", "d1")) for p in (U("User", "a"), U("Group", "g"), U("Org", "o"))
    }


def test_a_prepared_index_is_reused_and_checked() -> None:
    case = make_case(8)
    qi = QueryIndex(case.authorizer, case.facts)
    assert prepare(case.authorizer, qi) is qi
    assert prepare(case.authorizer, case.facts) is prepare(case.authorizer, case.facts)
    other = make_case(9)
    with pytest.raises(QueryError, match="another authorizer"):
        who_can(other.authorizer, qi, VIEW, U("Doc", "d1"))


def test_result_to_dict_is_json_ready() -> None:
    import json

    case = make_case(11)
    r = access_matrix(case.authorizer, case.facts, None, limit=5)
    d = r.to_dict()
    json.dumps(d)
    assert d["kind"] == "matrix" and d["count"] == len(r) <= 5
    assert set(d["stats"]) >= {"elapsed_s", "steps", "policies"}


# ---------------------------------------------------------------- the CLI commands


def test_cli_queries_in_every_format(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import csv
    import io
    import json
    from pathlib import Path

    from polang.cli.queries import register as add_cli_commands
    from polang.language.entities import entity_to_json

    case = make_case(2)
    root = Path(str(tmp_path))
    text = random_policies(random.Random(2), 12)
    (root / "p.polang").write_text(text)
    (root / "e.json").write_text(json.dumps([entity_to_json(e) for e in case.facts.entities]))
    base = ["--policies", str(root / "p.polang"), "--entities", str(root / "e.json")]
    ctx = {"mfa": True, "level": 3}

    def run(*argv: str) -> str:
        parser = argparse.ArgumentParser(prog="polang")
        add_cli_commands(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(list(argv))
        assert args.func(args) == 0
        return capsys.readouterr().out

    expected = brute_force(case, RecordValue(ctx))
    rows = list(
        csv.DictReader(
            io.StringIO(run("matrix", *base, "--context", json.dumps(ctx), "--format", "csv"))
        )
    )
    assert {(r["principal"], r["action"], r["resource"]) for r in rows} == {
        (str(p), str(a), str(r)) for p, a, r in expected
    }
    data = json.loads(run("matrix", *base, "--format", "json", "--limit", "3"))
    assert data["count"] <= 3 and "next_cursor" in data and data["kind"] == "matrix"
    if data["next_cursor"]:
        more = json.loads(run("matrix", *base, "--format", "json", "--cursor", data["next_cursor"]))
        assert more["entries"][0] != data["entries"][0]
    doc = 'Doc::"d1"'
    who = json.loads(
        run(
            "who-can",
            *base,
            "--action",
            'Action::"view"',
            "--resource",
            doc,
            "--context",
            json.dumps(ctx),
            "--format",
            "json",
        )
    )
    assert {e["principal"]["id"] for e in who["entries"]} == {
        p.id for p, a, r in expected if a == VIEW and r == U("Doc", "d1")
    }
    table = run("what-can", *base, "--principal", 'User::"u1"')
    assert "entr" in table


def test_lookup_answers_for_the_page_and_warm_builds_the_tables() -> None:
    case = make_case(13)
    ctx = CONTEXTS[1]
    expected = brute_force(case, ctx)
    qi = QueryIndex(case.authorizer, case.facts)
    built = qi.warm()
    assert built > 0 and qi.warm() == 0  # everything is built once
    whole = access_matrix(case.authorizer, qi, ctx)
    assert len(qi.tables) == built, "the matrix needed no table warm() did not build"
    for a in case.actions:
        for r in case.candidates:
            for p in case.candidates:
                want = "allow" if (p, a, r) in expected else None
                assert whole.lookup(p, a, r) == want
    page = access_matrix(case.authorizer, qi, ctx, limit=4)
    listed = {e.triple for e in page}
    for t in expected:
        assert (page.lookup(*t) == "allow") == (t in listed)


def test_membership_of_a_missing_principal_is_conditional() -> None:
    auth = Authorizer(
        parse_policies(
            '@id("viewers") permit(principal, action == Action::"view", resource)\n'
            "  when { principal in resource.viewers };\n"
            '@id("self") permit(principal, action == Action::"view", resource)\n'
            "  when { resource.owner == principal };"
        )
    )
    team = U("Group", "team")
    ghost = U("User", "ghost")
    facts = EntityFacts(
        [
            Entity(team),
            Entity(U("Doc", "shared"), {"viewers": SetValue([team]), "owner": U("User", "x")}),
            Entity(U("Doc", "other"), {"viewers": SetValue([]), "owner": U("User", "x")}),
        ]
    )
    got = {e.resource.id: e for e in what_can(auth, facts, ghost, VIEW, {})}
    assert set(got) == {"shared"}
    assert got["shared"].decision == "conditional"
    assert got["shared"].residuals[0].conditions == ("when { principal in resource.viewers }",)
    # once supplied, the entity decides it
    member = facts.with_entities([Entity(ghost, {}, {team})])
    assert auth.is_authorized(ghost, VIEW, U("Doc", "shared"), {}, member).allow
    # a stored principal is decided exactly
    alice = U("User", "alice")
    with_alice = facts.with_entities([Entity(alice, {}, {team})])
    exact = what_can(auth, with_alice, alice, VIEW, {})
    assert exact.complete and [e.resource.id for e in exact] == ["shared"]


def test_the_index_walks_descendants_on_demand_not_for_every_entity() -> None:
    """Every entity's descendants, built up front, are the hierarchy's closure again: 24 MiB
    for a chain at the depth limit (and 1.2 GB at 5,000 deep) before a query ran."""
    n = MAX_HIERARCHY_DEPTH + 1
    chain = [
        Entity(U("G", str(i)), {}, {U("G", str(i + 1))} if i < n - 1 else set()) for i in range(n)
    ]
    facts = EntityFacts(chain)
    auth = Authorizer(parse_policies(f'permit(principal in G::"{n // 2}", action, resource);'))
    tracemalloc.start()
    try:
        qi = QueryIndex(auth, facts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB"
    assert qi.desc_star(U("G", str(n // 2))) == {U("G", str(i)) for i in range(n // 2 + 1)}
    got = {p for p, _a, _r in who_can(auth, qi, VIEW, U("G", "0"), {}).triples()}
    assert got == {U("G", str(i)) for i in range(n // 2 + 1)}
