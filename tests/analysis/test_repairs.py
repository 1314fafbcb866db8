"""Repairs: every one verified independently (from its JSON form) on generated stores."""

from __future__ import annotations

import random
from typing import Any

import pytest

from authoring.gen import ACTIONS, U, make_case, random_context
from polang.analysis.explain import explain
from polang.analysis.repairs import (
    MAX_REPAIRS,
    Repairs,
    apply_changes,
    changed_facts,
    find_repairs,
)
from polang.analysis.trace import hierarchy_path
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts, Request
from polang.errors import PolangError
from polang.language.entities import Entity, parse_value
from polang.language.extensions.decimal import parse_decimal
from polang.language.parser import parse_entity_uid, parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue, SetValue

# -------------------------------------------------------------------- independent checking


def _set_path(rec: RecordValue, path: list[str], value: Any) -> RecordValue:
    fields = dict(rec.fields)
    if len(path) == 1:
        if value is None:
            fields.pop(path[0], None)
        else:
            fields[path[0]] = value
    else:
        inner = fields.get(path[0])
        fields[path[0]] = _set_path(
            inner if isinstance(inner, RecordValue) else RecordValue(), path[1:], value
        )
    return RecordValue(fields)


def apply_json(
    entities: list[Entity], context: RecordValue, changes: list[dict[str, Any]]
) -> tuple[EntityFacts, RecordValue]:
    """The changes made from their JSON form alone, on copies, with a fresh closure."""
    ents = {e.uid: Entity(e.uid, dict(e.attrs), set(e.parents), dict(e.tags)) for e in entities}
    for c in changes:
        kind = c["kind"]
        if kind in ("set_context", "remove_context"):
            assert isinstance(c["path"], list) and c["path"]
            value = parse_value(c["value"], None, path="$") if kind == "set_context" else None
            context = _set_path(context, c["path"], value)
            continue
        uid = parse_entity_uid(c["entity"])
        ent = ents.setdefault(uid, Entity(uid))
        if kind == "set_attribute":
            ent.attrs[c["attribute"]] = parse_value(c["value"], None, path="$")
        elif kind == "remove_attribute":
            del ent.attrs[c["attribute"]]
        elif kind == "set_tag":
            ent.tags[c["tag"]] = parse_value(c["value"], None, path="$")
        elif kind == "remove_tag":
            del ent.tags[c["tag"]]
        elif kind == "add_parent":
            ent.parents.add(parse_entity_uid(c["parent"]))
        elif kind == "remove_parent":
            ent.parents.remove(parse_entity_uid(c["parent"]))
        else:  # pragma: no cover - an unknown kind fails the test
            raise AssertionError(kind)
    return EntityFacts(list(ents.values())), context


def decide(auth: Authorizer, req: Request, facts: EntityFacts, ctx: RecordValue) -> Any:
    return auth.is_authorized(req.principal, req.action, req.resource, ctx, facts)


def check_repairs(
    auth: Authorizer,
    entities: list[Entity],
    req: Request,
    repairs: Repairs,
) -> None:
    before = decide(auth, req, EntityFacts(entities), req.context)
    assert repairs.goal == ("deny" if before.allow else "allow")
    assert len(repairs) <= repairs.limit
    sizes = [r.size for r in repairs]
    assert sizes == sorted(sizes), "ranked by size"
    places = [r.places() for r in repairs]
    for i, a in enumerate(places):
        for j, b in enumerate(places):
            assert i == j or not a <= b, f"repair {j} contains repair {i}"
    for r in repairs:
        d = r.to_dict()
        assert set(d) >= {"policy", "changes"}
        assert d["policy"] == r.policy
        facts, ctx = apply_json(entities, req.context, d["changes"])
        after = decide(auth, req, facts, ctx)
        assert after.allow != before.allow, f"not a repair: {r.describe()}"
        assert after.reasons == list(r.reasons)
        if r.outcome == "applies":
            assert r.policy in after.reasons
            assert r.policy not in before.reasons
        elif before.allow:
            assert r.policy in before.reasons  # a permit it stopped
        else:
            assert r.policy in before.reasons and r.policy not in after.reasons  # a forbid
        # minimal: without any one change it is no repair
        if r.size > 1:
            for k in range(r.size):
                fewer = d["changes"][:k] + d["changes"][k + 1 :]
                facts, ctx = apply_json(entities, req.context, fewer)
                assert decide(auth, req, facts, ctx).allow == before.allow, (
                    f"not minimal: {r.describe()} without change {k}"
                )


# -------------------------------------------------------------------- generated stores


@pytest.mark.parametrize("seed", range(8))
def test_repairs_on_generated_stores_are_verified_minimal_and_ranked(seed: int) -> None:
    case = make_case(seed)
    rng = random.Random(1000 + seed)
    found = 0
    denies = 0
    for _ in range(14):
        p = rng.choice(case.principals)
        r = rng.choice(case.resources)
        a = rng.choice(ACTIONS)
        req = Request(p, a, r, random_context(rng))
        reps = find_repairs(case.authorizer, req, case.facts, limit=5, max_decisions=80)
        check_repairs(case.authorizer, case.entities, req, reps)
        if reps.goal == "allow":
            denies += 1
            found += bool(reps)
    # the search finds something for most denies of these stores (a silent empty answer
    # would pass every check above)
    assert denies == 0 or found >= denies // 2, (found, denies)


def test_changed_facts_equal_a_fresh_closure(monkeypatch: pytest.MonkeyPatch) -> None:
    import polang.analysis.repairs.changes as rp  # where changed_facts reads SMALL_STORE

    monkeypatch.setattr(rp, "SMALL_STORE", 0)  # always the incremental path
    rng = random.Random(5)
    for seed in range(20):
        case = make_case(seed)
        ents = case.entities
        victims = rng.sample(ents, 2)
        pool = [e.uid for e in ents]
        changed = []
        for v in victims:
            parents = set(v.parents)
            if parents and rng.random() < 0.5:
                parents.discard(rng.choice(sorted(parents)))
            else:
                parents.add(rng.choice(pool))
            changed.append(Entity(v.uid, v.attrs, parents, v.tags))
        if rng.random() < 0.5:  # a new entity that stored ones may name as a parent
            changed.append(Entity(U("Group", "g9"), {}, {U("Group", "g1")}))
        got = changed_facts(case.facts, changed)
        fresh = EntityFacts(case.facts.entities.merged(changed))
        for e in fresh.entities:
            assert got.ancestors_of(e.uid) == fresh.ancestors_of(e.uid), (seed, e.uid)
            assert got.get(e.uid) == fresh.get(e.uid)
        assert {k: v for k, v in got.ancestors.items() if v} == {
            k: v for k, v in fresh.ancestors.items() if v
        }
        assert {e.uid for e in got.entities} == {e.uid for e in fresh.entities}
        assert sorted(got.parent_facts()) == sorted(fresh.parent_facts())
        assert sorted(got.in_facts()) == sorted(fresh.in_facts())
        for a in pool[:6]:
            for b in pool[:6]:
                assert got.is_in(a, b) == fresh.is_in(a, b)
                assert (hierarchy_path(got, a, b) is None) == (hierarchy_path(fresh, a, b) is None)
        # decisions over the patched facts are the fresh facts' decisions
        for p in case.principals[:2]:
            for r in case.resources[:2]:
                for act in ACTIONS:
                    ctx = random_context(rng)
                    d1 = case.authorizer.is_authorized(p, act, r, ctx, got)
                    d2 = case.authorizer.is_authorized(p, act, r, ctx, fresh)
                    assert (d1.allow, d1.reasons) == (d2.allow, d2.reasons)


# -------------------------------------------------------------------- each kind of repair

POLICIES = """
@id("edit")
permit(principal in Group::"eng", action == Action::"edit", resource)
when { principal.clearance >= 3 && resource.status != "archived" };

@id("lock")
forbid(principal, action, resource) when { context has locked && context.locked };

@id("office")
permit(principal, action == Action::"view", resource)
when { context.ip.isInRange(ip("10.0.0.0/8")) && principal.email like "*@acme.example" };

@id("tagged")
permit(principal, action == Action::"tag", resource)
when { resource.hasTag("team") && resource.getTag("team") == principal.team };

@id("score")
permit(principal, action == Action::"score", resource)
when { resource.score.greaterThan(decimal("1.5")) && context.now < datetime("2024-01-01") };

@id("has")
permit(principal, action == Action::"has", resource) when { resource has badge };
"""

ALICE, DOC = U("User", "alice"), U("Doc", "d")
TEAM, ENG = U("Team", "t"), U("Group", "eng")


@pytest.fixture(scope="module")
def auth() -> Authorizer:
    return Authorizer({p.policy_id or "": p for p in parse_policies(POLICIES, "x.polang")})


def entities() -> list[Entity]:
    return [
        Entity(ALICE, {"clearance": 2, "email": "alice@other.example", "team": "blue"}, {TEAM}),
        Entity(TEAM, {}, {ENG}),
        Entity(ENG),
        Entity(DOC, {"status": "archived", "score": parse_decimal("1.0")}, set(), {"team": "red"}),
    ]


def repairs_for(
    auth: Authorizer,
    action: str,
    context: dict[str, Any] | None = None,
    ents: list[Entity] | None = None,
) -> tuple[Repairs, Request, list[Entity]]:
    ents = ents if ents is not None else entities()
    ctx = parse_value(context or {}, None, path="$")
    assert isinstance(ctx, RecordValue)
    req = Request(ALICE, U("Action", action), DOC, ctx)
    reps = find_repairs(auth, req, EntityFacts(ents))
    check_repairs(auth, ents, req, reps)
    return reps, req, ents


def changes_of(reps: Repairs) -> list[list[dict[str, Any]]]:
    return [r.to_dict()["changes"] for r in reps]


def test_boundaries_and_forbids_count(auth: Authorizer) -> None:
    reps, _, _ = repairs_for(auth, "edit", {"locked": True})
    assert reps.goal == "allow" and len(reps) >= 1
    (first,) = [r for r in reps if r.policy == "edit"][:1]
    kinds = {
        (c["kind"], c.get("attribute"), tuple(c.get("path", ())))
        for c in first.to_dict()["changes"]
    }
    # the permit alone would trip the forbid: the repair also turns the lock off
    assert ("set_context", None, ("locked",)) in kinds or (
        "remove_context",
        None,
        ("locked",),
    ) in kinds
    clearance = next(c for c in first.to_dict()["changes"] if c.get("attribute") == "clearance")
    assert clearance == {
        "kind": "set_attribute",
        "entity": 'User::"alice"',
        "attribute": "clearance",
        "value": 3,
        "constraint": ">= 3",
    }
    status = next(c for c in first.to_dict()["changes"] if c.get("attribute") == "status")
    assert status["constraint"] == '!= "archived"' and status["value"] != "archived"


def test_membership_is_added_with_its_path_and_cut(auth: Authorizer) -> None:
    ents = entities()
    ents[1] = Entity(TEAM)  # the team is no longer in eng
    ents[0].attrs["clearance"] = 5
    ents[3].attrs["status"] = "live"
    reps, _, _ = repairs_for(auth, "edit", {}, ents)
    adds = [c for cs in changes_of(reps) for c in cs if c["kind"] == "add_parent"]
    assert {
        "kind": "add_parent",
        "entity": 'User::"alice"',
        "parent": 'Group::"eng"',
    }.items() <= adds[0].items()
    assert adds[0]["membership"] == ['User::"alice"', 'Group::"eng"']
    # allowed through Team::"t" in Group::"eng": cutting that path denies
    ents2 = entities()
    ents2[0].attrs["clearance"] = 5
    ents2[3].attrs["status"] = "live"
    reps2, _, _ = repairs_for(auth, "edit", {}, ents2)
    assert reps2.goal == "deny"
    cuts = [c for cs in changes_of(reps2) for c in cs if c["kind"] == "remove_parent"]
    assert cuts and cuts[0]["membership"] == ['User::"alice"', 'Team::"t"', 'Group::"eng"']
    assert any(r.outcome == "stops_applying" and r.policy == "edit" for r in reps2)
    assert any(r.outcome == "applies" and r.policy == "lock" for r in reps2)


def test_like_and_ip_ranges_give_samples(auth: Authorizer) -> None:
    reps, _, _ = repairs_for(auth, "view", {"ip": {"__extn": {"fn": "ip", "arg": "192.168.0.1"}}})
    (r,) = reps
    by = {c.get("attribute") or tuple(c.get("path", ())): c for c in r.to_dict()["changes"]}
    assert by["email"]["value"] == "@acme.example"
    assert by["email"]["constraint"] == 'like "*@acme.example"'
    assert by[("ip",)]["value"] == {"__extn": {"fn": "ip", "arg": "10.0.0.0"}}


def test_tags_decimals_datetimes_and_has(auth: Authorizer) -> None:
    reps, _, _ = repairs_for(auth, "tag")
    assert changes_of(reps) == [
        [
            {
                "kind": "set_tag",
                "entity": 'Doc::"d"',
                "tag": "team",
                "value": "blue",
                "constraint": '== "blue"',
            }
        ],
        [
            {
                "kind": "set_attribute",
                "entity": 'User::"alice"',
                "attribute": "team",
                "value": "red",
                "constraint": '== "red"',
            }
        ],
    ]
    reps, _, _ = repairs_for(
        auth, "score", {"now": {"__extn": {"fn": "datetime", "arg": "2025-01-01"}}}
    )
    (r,) = reps
    values = {c.get("attribute") or c["path"][0]: c["value"] for c in r.to_dict()["changes"]}
    assert values["score"] == {"__extn": {"fn": "decimal", "arg": "1.5001"}}
    assert values["now"]["__extn"]["fn"] == "datetime"
    reps, _, _ = repairs_for(auth, "has")
    (r,) = reps
    (c,) = r.to_dict()["changes"]
    assert c["kind"] == "set_attribute" and c["attribute"] == "badge" and c["constraint"] == "has"


def test_schema_types_pick_the_sample_and_filter_values() -> None:
    schema = parse_schema(
        "entity Group; entity User in [Group] { level: Long }; "
        "entity Doc { badge?: String, owner: User };"
        "action view appliesTo { principal: User, resource: Doc };"
    )
    text = """
    @id("a") permit(principal, action, resource) when { resource has badge };
    @id("b") permit(principal, action, resource) when { principal in resource.owner };
    """
    auth = Authorizer({p.policy_id or "": p for p in parse_policies(text)})
    bob, g = U("User", "bob"), U("Group", "g")
    ents = [
        Entity(ALICE, {"level": 1}, {g}),
        Entity(bob, {"level": 1}),
        Entity(g),
        Entity(DOC, {"owner": bob}),
    ]
    req = Request(ALICE, U("Action", "view"), DOC, RecordValue())
    reps = find_repairs(auth, req, EntityFacts(ents), schema=schema)
    check_repairs(auth, ents, req, reps)
    all_changes = [c for r in reps for c in r.to_dict()["changes"]]
    badge = next(c for c in all_changes if c.get("attribute") == "badge")
    assert badge["value"] == ""  # the declared String's sample
    owners = [c for c in all_changes if c.get("attribute") == "owner"]
    # the owner must stay a User: alice herself, never her Group
    assert owners and all(
        c["value"] == {"__entity": {"type": "User", "id": "alice"}} for c in owners
    )


def test_limit_more_and_the_note(auth: Authorizer) -> None:
    ents = entities()
    req = Request(ALICE, U("Action", "edit"), DOC, RecordValue())
    one = find_repairs(auth, req, EntityFacts(ents), limit=1)
    assert len(one) == 1
    allr = find_repairs(auth, req, EntityFacts(ents), limit=50)
    assert one.more == (len(allr) > 1)
    if one.more:
        assert one.note and "more repairs exist" in one.note
    assert one.to_dict()["repairs"][0] == allr.to_dict()["repairs"][0]
    assert MAX_REPAIRS == 10
    with pytest.raises(PolangError):
        find_repairs(auth, req, EntityFacts(ents), limit=-1)


def test_bounded_search_says_it_stopped(auth: Authorizer) -> None:
    req = Request(ALICE, U("Action", "edit"), DOC, RecordValue({"locked": True}))
    reps = find_repairs(auth, req, EntityFacts(entities()), max_decisions=1)
    assert not reps.complete and reps.decisions == 1
    assert reps.note == "the search stopped at its bounds; other repairs may exist"


def test_no_repair_changes_identity_or_policies(auth: Authorizer) -> None:
    # `principal == User::"u1"` cannot be repaired by data: no repair names it
    text = '@id("only-u1") permit(principal == User::"u1", action, resource);'
    a = Authorizer({p.policy_id or "": p for p in parse_policies(text)})
    req = Request(ALICE, U("Action", "view"), DOC, RecordValue())
    reps = find_repairs(a, req, EntityFacts(entities()))
    assert list(reps) == [] and reps.complete
    assert reps.note is not None and reps.note.startswith("no repair found")


def test_apply_changes_keeps_the_inputs(auth: Authorizer) -> None:
    ents = entities()
    facts = EntityFacts(ents)
    req = Request(ALICE, U("Action", "edit"), DOC, RecordValue({"locked": True}))
    reps = find_repairs(auth, req, facts)
    for r in reps:
        apply_changes(req, facts, r.changes)
    assert facts.get(ALICE) == ents[0] and ents[0].attrs["clearance"] == 2
    assert req.context == RecordValue({"locked": True})


def test_explanation_exposes_repairs_and_renders_them(auth: Authorizer) -> None:
    ex = explain(auth, ALICE, U("Action", "edit"), DOC, {"locked": True}, entities())
    assert "repairs" not in ex.to_dict()
    reps = ex.repairs
    assert ex.repairs is reps  # computed once
    d = ex.to_dict()
    assert d["repairs"] == [r.to_dict() for r in reps]
    assert d["repairs_more"] is reps.more and d["repairs_complete"] is reps.complete
    text = ex.render(repairs=True)
    assert "repairs: changes to the data that would allow it" in text
    assert 'set User::"alice".clearance = 3  (>= 3)' in text


def test_sets_get_the_element_added() -> None:
    text = (
        '@id("v") permit(principal, action, resource) '
        "when { resource.viewers.contains(principal) };"
    )
    a = Authorizer({p.policy_id or "": p for p in parse_policies(text)})
    ents = [Entity(ALICE), Entity(DOC, {"viewers": SetValue([U("User", "bob")])})]
    req = Request(ALICE, U("Action", "view"), DOC, RecordValue())
    reps = find_repairs(a, req, EntityFacts(ents))
    check_repairs(a, ents, req, reps)
    (r,) = reps
    (c,) = r.to_dict()["changes"]
    assert c["attribute"] == "viewers"
    assert sorted(x["__entity"]["id"] for x in c["value"]) == ["alice", "bob"]


def test_uid_strings_are_entity_references() -> None:
    assert str(EntityUID("Ns::T", 'a"b')) == 'Ns::T::"a\\"b"'
    assert parse_entity_uid(str(EntityUID("Ns::T", 'a"b'))) == EntityUID("Ns::T", 'a"b')


def test_boundaries_at_the_ends_of_the_ranges_and_deep_nesting() -> None:
    text = (
        '@id("max") permit(principal, action, resource) '
        "when { principal.level > 9223372036854775807 };\n"
        '@id("min") permit(principal, action == Action::"min", resource) '
        "when { principal.level < -9223372036854775808 };\n"
        '@id("deep") permit(principal, action == Action::"deep", resource) when { '
        + "!(" * 40
        + "principal.flag"
        + ")" * 40
        + " };"
    )
    a = Authorizer({p.policy_id or "": p for p in parse_policies(text)})
    ents = [Entity(ALICE, {"level": 1, "flag": False}), Entity(DOC)]
    for act in ("view", "min"):
        req = Request(ALICE, U("Action", act), DOC, RecordValue())
        reps = find_repairs(a, req, EntityFacts(ents))
        check_repairs(a, ents, req, reps)
        assert not any(r.policy in ("max", "min") for r in reps)
    req = Request(ALICE, U("Action", "deep"), DOC, RecordValue())
    reps = find_repairs(a, req, EntityFacts(ents))
    check_repairs(a, ents, req, reps)
    assert [c.to_dict()["value"] for r in reps for c in r.changes if r.policy == "deep"] == [True]
