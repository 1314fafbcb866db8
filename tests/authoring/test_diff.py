"""diff: equal to the difference of two full matrices on generated stores."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from polang.analysis.query import access_matrix
from polang.authoring.diff import DiffResult, Side, diff
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue, SetValue

from .gen import CONDITIONS, RESOURCE_SCOPES, U, random_context, random_entities, random_policies

Triple = tuple[EntityUID, EntityUID, EntityUID]


def statuses(side: Side, ctx: RecordValue | None) -> dict[Triple, str]:
    res = access_matrix(side.authorizer, side.facts, ctx, schema=side.schema)
    return {e.triple: e.decision for e in res.iter_entries()}


def expected_changes(
    old: Side, new: Side, ctx: RecordValue | None
) -> dict[Triple, tuple[str, str]]:
    a, b = statuses(old, ctx), statuses(new, ctx)
    out = {}
    for t in a.keys() | b.keys():
        sa, sb = a.get(t, "deny"), b.get(t, "deny")
        if sa != sb:
            out[t] = (sa, sb)
    return out


def decide(side: Side, t: Triple, ctx: RecordValue) -> Any:
    """The decision, or a deny without reasons for a triple the store does not hold."""
    from polang.datalog.authorizer import Decision

    if side.facts.get(t[0]) is None or side.facts.get(t[2]) is None:
        return Decision(False)
    return side.authorizer.is_authorized(*t, ctx, side.facts)


def got_changes(d: DiffResult) -> dict[Triple, tuple[str, str]]:
    return {e.triple: (e.before, e.after) for e in d.entries}


def authorizer(text: str) -> Authorizer:
    return Authorizer({p.policy_id or "": p for p in parse_policies(text, "gen.polang")})


def mutate_policies(rng: random.Random, text: str) -> str:
    policies = [p.strip() + ";" for p in text.split(";") if p.strip()]
    i = rng.randrange(len(policies))
    kind = rng.choice(["edit", "edit", "drop", "add", "scope"])
    if kind == "drop" and len(policies) > 1:
        policies.pop(i)
    elif kind == "add":
        more = random_policies(rng, 1).replace('@id("p0")', f'@id("new{i}")')
        policies.append(more)
    elif kind == "scope":
        old = policies[i]
        for scope in RESOURCE_SCOPES:
            if scope in old and scope != "resource":
                policies[i] = old.replace(scope, rng.choice(RESOURCE_SCOPES), 1)
                break
        else:
            policies[i] = old[:-1] + f" when {{ {rng.choice(CONDITIONS)} }};"
    else:
        policies[i] = policies[i][:-1] + f" unless {{ {rng.choice(CONDITIONS)} }};"
    return "\n".join(policies)


def mutate_entities(rng: random.Random, ents: list[Entity]) -> list[Entity]:
    out = [Entity(e.uid, dict(e.attrs), set(e.parents), dict(e.tags)) for e in ents]
    people = [e for e in out if e.uid.type in ("User", "Doc")]
    for _ in range(rng.randrange(1, 3)):
        e = rng.choice(people)
        kind = rng.choice(["attr", "parent", "drop", "add", "group"])
        if kind == "attr":
            e.attrs["level"] = rng.randrange(0, 6)
            e.attrs["dept"] = rng.choice(["x", "y", "z"])
        elif kind == "parent":
            pool = [U("Group", "g0"), U("Group", "g1"), U("Folder", "f0"), U("Folder", "f2")]
            e.parents ^= {rng.choice(pool)}
        elif kind == "drop":
            out.remove(e)
            people.remove(e)
        elif kind == "add":
            out.append(Entity(U(e.uid.type, "fresh"), dict(e.attrs), set(e.parents)))
        else:
            g = next(x for x in out if x.uid == U("Group", "g2"))
            g.parents = set() if g.parents else {U("Group", "g0")}
    return out


@pytest.mark.parametrize("seed", range(12))
def test_diff_equals_the_difference_of_two_full_matrices(seed: int) -> None:
    rng = random.Random(seed)
    text = random_policies(rng, 8)
    ents = random_entities(rng)
    old = Side(authorizer(text), EntityFacts(ents))
    what = seed % 3
    new_text = mutate_policies(rng, text) if what in (0, 2) else text
    new_ents = mutate_entities(rng, ents) if what in (1, 2) else ents
    new = Side(authorizer(new_text), EntityFacts(new_ents))
    for ctx in (random_context(rng), None):
        want = expected_changes(old, new, ctx)
        d = diff(old, new, context=ctx)
        assert got_changes(d) == want, (seed, d.stats.to_dict())
        full = diff(old, new, context=ctx, force_full=True)
        assert got_changes(full) == want and full.stats.mode == "full"
        inc = diff(old, new, context=ctx, full_fraction=2.0)
        assert got_changes(inc) == want
        assert inc.stats.mode in ("incremental", "unchanged") or (
            "literal" in inc.stats.reason or "context" in inc.stats.reason
        ), inc.stats.reason
        assert [e.to_dict() for e in inc.entries] == [e.to_dict() for e in d.entries]
        for e in d.gained:
            assert e.change == "gained"
        if ctx is not None:
            assert not any(e.conditional for e in d.entries)
            for e in d.entries:
                before = decide(old, e.triple, ctx)
                after = decide(new, e.triple, ctx)
                assert before.allow == (e.change == "lost") and after.allow == (
                    e.change == "gained"
                )
                assert list(e.policies) == after.reasons
                assert list(e.previous_policies) == before.reasons


def test_a_one_policy_edit_is_incremental() -> None:
    rng = random.Random(3)
    ents = random_entities(rng, users=30, docs=40)
    base = (
        '@id("a") permit(principal, action, resource) when { resource.level < principal.level };\n'
        '@id("b") permit(principal in Group::"g0", action == Action::"view",\n'
        '  resource in Folder::"f1");\n'
        '@id("c") forbid(principal, action == Action::"delete", resource)\n'
        "unless { principal.level > 4 };\n"
    )
    edited = base.replace(
        '  resource in Folder::"f1")', 'resource in Folder::"f1") when { principal.level > 2 }'
    )
    old = Side(authorizer(base), EntityFacts(ents))
    new = Side(authorizer(edited), EntityFacts(ents))
    ctx = RecordValue()
    d = diff(old, new, context=ctx)
    assert d.stats.mode == "incremental" and d.stats.changed_policies == ["b"]
    assert d.stats.steps < d.stats.total_steps // 4
    assert got_changes(d) == expected_changes(old, new, ctx)
    assert d.lost and not d.gained
    # an unchanged store
    same = diff(old, old, context=ctx)
    assert same.stats.mode == "unchanged" and not same.changed
    # a data change: one user's level
    ents2 = [Entity(e.uid, dict(e.attrs), set(e.parents), dict(e.tags)) for e in ents]
    u = next(e for e in ents2 if e.uid == U("User", "u0"))
    u.attrs["level"] = 5
    d2 = diff(old, Side(old.authorizer, EntityFacts(ents2)), context=ctx)
    assert d2.stats.mode == "incremental" and d2.stats.changed_entities == 1
    assert got_changes(d2) == expected_changes(old, Side(old.authorizer, EntityFacts(ents2)), ctx)
    # the same data change given as entities laid over the store
    d3 = diff(old, entities=[u], context=ctx)
    assert got_changes(d3) == got_changes(d2)


def test_to_dict_csv_table_and_summary() -> None:
    text = (
        '@id("a") permit(principal is User, action == Action::"view", resource is Doc) '
        "when { principal.level > 2 };"
    )
    ents = [
        Entity(U("User", "u"), {"level": 1}),
        Entity(U("Doc", "d")),
        Entity(U("Action", "view")),
    ]
    old = Side(authorizer(text), EntityFacts(ents))
    new = Side(authorizer(text.replace("> 2", "> 0")), EntityFacts(ents))
    d = diff(old, new, context={})
    data = d.to_dict()
    assert data["gained"] == [
        {
            "principal": 'User::"u"',
            "action": 'Action::"view"',
            "resource": 'Doc::"d"',
            "policies": ["a"],
            "previous_policies": [],
            "before": "deny",
            "after": "allow",
        }
    ]
    assert data["lost"] == []
    assert data["summary"]["by_policy"] == {"a": {"gained": 1, "lost": 0}}
    assert data["summary"]["by_principal_type"] == {"User": {"gained": 1, "lost": 0}}
    assert d.csv().splitlines() == [
        "change,principal,action,resource,before,after,policies,previous_policies",
        'gained,"User::""u""","Action::""view""","Doc::""d""",deny,allow,a,',
    ]
    assert "1 gained, 0 lost" in d.table()
    # unknown context: conditional entries are reported as such
    new2 = Side(authorizer(text.replace("principal.level > 2", "context.ok")), EntityFacts(ents))
    d2 = diff(old, new2)
    (e,) = d2.gained
    assert e.conditional and e.after == "conditional"
    assert e.to_dict()["residuals"][0]["policy_id"] == "a"


def test_engines_two_stores(tmp_path: Path) -> None:
    from polang import Engine

    src = Path(__file__).resolve().parents[2] / "examples" / "stores" / "directory"
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    pol = b / "policies" / "documents.polang"
    pol.write_text(pol.read_text("utf-8").replace("clearance >= 3", "clearance >= 1"), "utf-8")
    alice: dict[str, Any] = {
        "uid": {"type": "Acme::User", "id": "alice"},
        "attrs": {
            "email": "a@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": 2,
        },
        "parents": [{"type": "Acme::Team", "id": "finance"}],
    }
    doc = {
        "uid": {"type": "Acme::Document", "id": "d"},
        "attrs": {
            "owner": {"__entity": {"type": "Acme::User", "id": "alice"}},
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "classification": "internal",
            "public": False,
        },
    }
    bob = {**alice, "uid": {"type": "Acme::User", "id": "bob"}}
    ea = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(a)})
    eb = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(b)})
    d = diff(ea, eb, entities=[alice, bob, doc], context={})
    # two stores, entities given once: laid over both sides, so only the policy shows
    # (bob gains edit through it; alice, the owner, could edit before)
    assert d.stats.changed_entities == 0 and not d.lost
    assert {(e.principal.id, e.action.id, e.policies) for e in d.gained} == {
        ("bob", "edit", ("cleared-editors",))
    }
    # each side's own data: alice and bob exist only on the new side
    d = diff(ea, eb, entities=[alice, bob, doc], old_entities=[], context={})
    assert {e.principal.id for e in d.gained} == {"alice", "bob"}
    d = diff(
        Side.of(ea).__class__(ea.authorizer, Side.of(ea).facts.with_entities([]), ea.schema), eb
    )
    assert d.stats.changed_policies == ["cleared-editors"]
    ea.close()
    eb.close()


def test_sets_in_entities_compare_by_value() -> None:
    from polang.analysis.diff import changed_entities

    a = EntityFacts([Entity(U("User", "u"), {"s": SetValue([1, 2]), "b": True})])
    b = EntityFacts([Entity(U("User", "u"), {"s": SetValue([2, 1]), "b": 1})])
    assert changed_entities(a, b) == {U("User", "u")}  # true is not 1
