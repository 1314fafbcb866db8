"""The compiled backend: specialised closures agree with the plain rule interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang.datalog.compiled import CompiledBackend
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.lower import lower_policies
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue, SetValue


def _outcome(backend: CompiledBackend, request: Request, facts: EntityFacts) -> tuple:
    d = backend.decide(request, facts)
    return d.allow, tuple(d.reasons), tuple(pid for pid, _ in d.errors)


def test_specialised_and_generic_agree_on_corpus(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "corpus-tests").glob("*.json"))
    files = [f for f in files if not f.name.endswith(".entities.json")][::8]
    assert len(files) > 400
    compared = 0
    for f in files:
        spec = json.loads(f.read_text())
        schema = parse_schema((corpus_dir / spec["schema"]).read_text())
        policies = parse_policies((corpus_dir / spec["policies"]).read_text())
        program = lower_policies((f"policy{i}", p) for i, p in enumerate(policies))
        fast = CompiledBackend(program)
        closures = CompiledBackend(program, mode="closures")
        plain = CompiledBackend(program, mode="generic")
        facts = EntityFacts(parse_entities((corpus_dir / spec["entities"]).read_text(), schema))
        for req in spec["requests"]:
            action = parse_entity_uid_json(req["action"])
            request = Request(
                parse_entity_uid_json(req["principal"]),
                action,
                parse_entity_uid_json(req["resource"]),
                parse_context(req["context"], schema, action),
            )
            got = _outcome(fast, request, facts)
            assert got == _outcome(plain, request, facts), f.name
            assert got == _outcome(closures, request, facts), f.name
            assert got == (
                req["decision"] == "allow",
                tuple(sorted(req["reason"], key=lambda s: int(s[6:]))),
                tuple(sorted(req["errors"], key=lambda s: int(s[6:]))),
            ), f.name
            compared += 1
    assert compared > 3000


POLICIES = """
permit(principal, action, resource) when { principal.level > 3 && resource.open };
forbid(principal, action, resource) unless { context.ok };
permit(principal == U::"root", action, resource);
"""


@pytest.mark.parametrize("mode", CompiledBackend.MODES)
def test_three_valued_conditions(mode: str) -> None:
    from polang.language.entities import Entity

    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(POLICIES)))
    backend = CompiledBackend(program, mode=mode)
    u = EntityUID("U", "u")
    root = EntityUID("U", "root")
    doc = EntityUID("D", "d")
    act = EntityUID("Action", "a")
    facts = EntityFacts([Entity(u, {"level": 5}), Entity(root), Entity(doc, {"open": True})])
    # context.ok missing: the forbid errors (it does not apply), the permit applies.
    d = backend.decide(Request(u, act, doc, RecordValue()), facts)
    assert (d.allow, d.reasons, [p for p, _ in d.errors]) == (True, ["policy0"], ["policy1"])
    # context.ok false: the forbid applies (unless false) and overrides.
    d = backend.decide(Request(u, act, doc, RecordValue({"ok": False})), facts)
    assert (d.allow, d.reasons) == (False, ["policy1"])
    # root has no level: policy0 errors, policy2 applies.
    d = backend.decide(Request(root, act, doc, RecordValue({"ok": True})), facts)
    assert (d.allow, d.reasons, [p for p, _ in d.errors]) == (True, ["policy2"], ["policy0"])
    # a non-Bool condition is an error, never true.
    program = lower_policies(
        [("p", parse_policies("permit(principal,action,resource) when { 1 };")[0])]
    )
    d = CompiledBackend(program, mode=mode).decide(Request(u, act, doc, RecordValue()), facts)
    assert (d.allow, [p for p, _ in d.errors]) == (False, ["p"])
    assert "Bool" in d.errors[0][1].message


# -- candidate index: scope rules read as keys ---------------------------------------------

INDEXED = """
permit(principal == U::"a", action == Action::"read", resource);
permit(principal in G::"g", action in Action::"all", resource in F::"f");
permit(principal is U, action in [Action::"read", Action::"write"], resource is D in F::"f");
permit(principal, action, resource) when { resource.open };
forbid(principal is U in G::"g", action, resource == D::"secret");
"""


def _scope_body(program, pid: str):  # type: ignore[no-untyped-def]
    info = program.policies[pid]
    (rule,) = [r for r in program.rules if r.head.pred == info.scope_pred]
    return rule.body


def test_scope_keys_read_every_scope_form() -> None:
    from polang.datalog.compiled import scope_keys

    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(INDEXED)))
    k0 = scope_keys(_scope_body(program, "policy0"))
    assert k0.keys == {
        "principal": ("eq", EntityUID("U", "a")),
        "action": ("eq", EntityUID("Action", "read")),
    }
    assert k0.residual == () and k0.bound == {"principal", "action"}
    k1 = scope_keys(_scope_body(program, "policy1"))
    assert {v: k[0] for v, k in k1.keys.items()} == {
        "principal": "in",
        "action": "in",
        "resource": "in",
    }
    assert k1.residual == ()
    k2 = scope_keys(_scope_body(program, "policy2"))
    assert k2.keys["principal"] == ("is", "U")
    assert k2.keys["action"][0] == "in_any"
    # `is D in F::"f"`: the index answers `in`; `is D` is left to the policy's function
    assert k2.keys["resource"] == ("in", EntityUID("F", "f"))
    assert [str(lit) for lit in k2.residual] == ["resource(R)", 'scope_is(R, "D")']
    k3 = scope_keys(_scope_body(program, "policy3"))
    assert k3.keys == {} and k3.bound == frozenset() and k3.residual == ()


def _random_world(seed: int):  # type: ignore[no-untyped-def]
    import random

    from polang.language.entities import Entity

    rng = random.Random(seed)
    groups = [EntityUID("G", n) for n in ("g", "h", "k")]
    folders = [EntityUID("F", n) for n in ("f", "e")]
    ents = [
        Entity(g, {}, frozenset(rng.sample(groups[:i], rng.randint(0, i))))
        for i, g in enumerate(groups)
    ]
    ents += [Entity(f) for f in folders]
    ents += [Entity(EntityUID("Action", "all"))]
    ents += [
        Entity(EntityUID("Action", a), {}, frozenset([EntityUID("Action", "all")]))
        for a in ("read", "write")
    ]
    users = [EntityUID("U", n) for n in ("a", "b", "c")] + [EntityUID("V", "v")]
    for u in users:
        ents.append(Entity(u, {}, frozenset(rng.sample(groups, rng.randint(0, 2)))))
    docs = [EntityUID("D", n) for n in ("d1", "d2", "secret")] + [EntityUID("X", "x")]
    for d in docs:
        ents.append(
            Entity(
                d, {"open": rng.random() < 0.5}, frozenset(rng.sample(folders, rng.randint(0, 1)))
            )
        )
    return ents, users, docs


@pytest.mark.parametrize("seed", range(12))
def test_indexed_selection_decides_as_every_scope_checked(seed: int) -> None:
    """The index and each policy's residual scope decide as the full scope rules do, for
    requests with and without a principal, and over facts whose hierarchy changes (the
    per-entity selection cache must not outlive an ancestor set)."""
    import random

    from polang.language.entities import Entity

    rng = random.Random(seed)
    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(INDEXED)))
    backend = CompiledBackend(program)
    ents, users, docs = _random_world(seed)
    base = EntityFacts(ents)
    actions = [EntityUID("Action", a) for a in ("read", "write", "all", "other")]
    for _ in range(60):
        facts = base
        if rng.random() < 0.4:  # a request entity re-parenting a user or a document
            who = rng.choice(users + docs)
            parents = rng.sample([EntityUID("G", "g"), EntityUID("G", "h"), EntityUID("F", "f")], 1)
            facts = base.with_entities([Entity(who, {"open": True}, frozenset(parents))])
        principal = rng.choice([*users, None])
        request = Request(principal, rng.choice(actions), rng.choice(docs), RecordValue())
        fast = backend.decide(request, facts)
        full = backend.decide(request, facts, trace=True)
        assert (fast.allow, fast.reasons, [p for p, _ in fast.errors]) == (
            full.allow,
            full.reasons,
            [p for p, _ in full.errors],
        ), request
        in_scope = {o.policy_id for o in full.outcomes if o.scope}
        assert set(fast.reasons) <= in_scope


def test_pairs_that_allow_the_same_policies_share_one_runnable_list() -> None:
    """The runnable list (and its memo of combined decisions) is kept per set of policies
    a principal and a resource both allow, not per pair: principals in different groups
    asking for a resource outside every indexed folder share one list."""
    from polang.language.entities import Entity

    text = """
    permit(principal in G::"a", action, resource in F::"x");
    permit(principal in G::"b", action, resource in F::"y");
    permit(principal, action, resource) when { context.ok };
    """
    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(text)))
    backend = CompiledBackend(program)
    g, f = EntityUID("G", "a"), EntityUID("F", "x")
    users = {
        "u1": [g],
        "u2": [EntityUID("G", "b")],
        "u3": [g, EntityUID("G", "b")],
    }
    facts = EntityFacts(
        [Entity(EntityUID("U", u), {}, frozenset(ps)) for u, ps in users.items()]
        + [Entity(EntityUID("D", "in-x"), {}, frozenset([f])), Entity(EntityUID("D", "out"))]
    )
    action = EntityUID("Action", "read")
    plan = backend._plan(action, facts.ancestors_of(action))
    ctx = RecordValue({"ok": True})
    lists = {
        u: plan.select(Request(EntityUID("U", u), action, EntityUID("D", "out"), ctx), facts)
        for u in users
    }
    assert lists["u1"] is lists["u2"] is lists["u3"]
    assert [sorted(pids) for _, pids in lists["u1"]] == [["policy2"]]
    inside = plan.select(Request(EntityUID("U", "u1"), action, EntityUID("D", "in-x"), ctx), facts)
    assert [sorted(pids) for _, pids in inside] == [["policy0"], ["policy2"]]
    for u in users:
        d = backend.decide(Request(EntityUID("U", u), action, EntityUID("D", "out"), ctx), facts)
        assert (d.allow, d.reasons) == (True, ["policy2"])


TRICKY = [
    "permit(principal, action, resource) when { principal.flag == 1 };",  # Bool vs Long
    "permit(principal, action, resource) when { principal.n == 1 };",
    "permit(principal, action, resource) when { principal.n != 1 };",
    "permit(principal, action, resource) when { principal.flag == true };",
    'permit(principal, action, resource) when { principal.name == "a" };',
    'permit(principal, action, resource) when { principal.missing == "a" };',
    "permit(principal, action, resource) when { resource.owner == principal };",
    "permit(principal, action, resource) when { resource.owner != principal };",
    "permit(principal, action, resource) when { principal.set == resource.set };",
    "permit(principal, action, resource) when { principal.rec.inner == 2 };",
    "permit(principal, action, resource) when { principal.rec.nope == 2 };",
    'permit(principal, action, resource) when { resource.owner.name == "a" };',
    "permit(principal, action, resource) when { principal has rec && principal.rec has inner };",
    "permit(principal, action, resource) when { resource has owner };",
    "permit(principal, action, resource) when { context.ok };",
    "permit(principal, action, resource) when { context.n < principal.n };",
    "permit(principal, action, resource) when { principal.n >= resource.n };",
    "permit(principal, action, resource) when { principal.name > 1 };",
    'permit(principal, action, resource) when { principal.hasTag("t") };',
    'permit(principal, action, resource) when { principal.getTag("t") == "x" };',
    'permit(principal, action, resource) when { resource.getTag("t") == "x" };',
    'permit(principal, action, resource) when { resource.owner.getTag("t") == "x" };',
    'permit(principal, action, resource) when { resource.owner.hasTag("t") };',
    'permit(principal, action, resource) when { context.rec.getTag("t") == "x" };',
    "permit(principal, action, resource) when { principal.n == context.n };",
    "permit(principal, action, resource) when { context.rec.t == 1 };",
    "permit(principal, action, resource) when { context.rec.nope == 1 };",
    "permit(principal, action, resource) when { context.n.x == 1 };",
    "permit(principal, action, resource) when { resource.owner.rec.inner == 2 };",
    "permit(principal, action, resource) when { context has rec && context.rec has t };",
    "permit(principal, action, resource) when { context has n && context.n has x };",
    "permit(principal, action, resource) when { resource.owner has name };",
    "permit(principal, action, resource) when { principal.rec has inner };",
    'permit(principal, action, resource) when { context.rec.hasTag("t") };',
    'permit(principal, action, resource) when { context.n.hasTag("t") };',
    "permit(principal, action, resource) when { principal.set.contains(1) };",
    "permit(principal, action, resource) when { principal.set.contains(true) };",
    'permit(principal, action, resource) when { principal.name.contains("a") };',
    'permit(principal, action, resource) when { resource.set.contains("x") };',
]


def test_a_record_operand_is_read_as_a_record_without_an_entity_lookup() -> None:
    """``context.rec.t``: an operand that is not a variable may be a record or an entity
    reference; the generated code reads a record's field directly (no failed entity
    lookup and exception per request)."""
    program = lower_policies(
        [
            (
                "p",
                parse_policies("permit(principal, action, resource) when { context.rec.t == 1 };")[
                    0
                ],
            )
        ]
    )
    backend = CompiledBackend(program)
    [cp] = backend.policies
    assert "is REC" in (cp.run.__doc__ or "")


@pytest.mark.parametrize("policy", TRICKY)
def test_generated_fast_paths_match_the_rule_interpreter(policy: str) -> None:
    """Inline attribute, tag, equality and comparison code gives the builtins' values and
    the same error messages, for present, absent and mistyped operands."""
    from polang.language.entities import Entity

    program = lower_policies([("p", parse_policies(policy)[0])])
    fast = CompiledBackend(program)
    plain = CompiledBackend(program, mode="generic")
    u, ghost, d = EntityUID("U", "u"), EntityUID("U", "ghost"), EntityUID("D", "d")
    users = [
        Entity(
            u,
            {
                "flag": True,
                "n": 1,
                "name": "a",
                "set": SetValue([1, 2]),
                "rec": RecordValue({"inner": 2}),
            },
            tags={"t": "x"},
        ),
        Entity(EntityUID("U", "v"), {"n": 2, "flag": 1, "name": 5}),
    ]
    docs = [
        Entity(d, {"owner": u, "set": SetValue([2, 1]), "n": 0}, tags={"t": "y"}),
        Entity(EntityUID("D", "e"), {"owner": ghost}),
        Entity(EntityUID("D", "f"), {"owner": "u"}),
    ]
    facts = EntityFacts(users + docs)
    contexts = [
        RecordValue(),
        RecordValue({"ok": True, "n": 0, "rec": RecordValue({"t": 1})}),
        RecordValue({"ok": 1, "n": True}),
    ]
    act = EntityUID("Action", "a")
    for p in [u, EntityUID("U", "v"), ghost, None]:
        for r in [e.uid for e in docs] + [ghost]:
            for c in contexts:
                request = Request(p, act, r, c)
                a, b = fast.decide(request, facts), plain.decide(request, facts)
                assert (a.allow, a.reasons) == (b.allow, b.reasons), request
                assert [(pid, e.kind, e.message) for pid, e in a.errors] == [
                    (pid, e.kind, e.message) for pid, e in b.errors
                ], request


def test_equal_policies_share_one_function_and_each_reports_its_outcome() -> None:
    from polang.language.entities import Entity

    text = """
    permit(principal, action == Action::"a", resource) when { resource.owner == principal };
    permit(principal, action in [Action::"a", Action::"b"], resource)
        when { resource.owner == principal };
    forbid(principal, action, resource) when { principal.missing };
    forbid(principal, action, resource) when { principal.missing };
    permit(principal, action, resource) when { resource.owner != principal };
    """
    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(text)))
    backend = CompiledBackend(program)
    runs = [cp.run for cp in backend.policies]
    assert runs[0] is runs[1] and runs[2] is runs[3]
    assert runs[0] is not runs[4]
    u, d = EntityUID("U", "u"), EntityUID("D", "d")
    facts = EntityFacts([Entity(u), Entity(d, {"owner": u})])
    got = backend.decide(Request(u, EntityUID("Action", "a"), d, RecordValue()), facts)
    assert got.allow and got.reasons == ["policy0", "policy1"]
    assert [p for p, _ in got.errors] == ["policy2", "policy3"]
    assert got.errors[0][1] is got.errors[1][1]
    got = backend.decide(Request(u, EntityUID("Action", "b"), d, RecordValue()), facts)
    assert got.reasons == ["policy1"]


def test_extension_calls_on_literals_fold_and_bad_literals_still_error_per_request() -> None:
    from polang.language.entities import Entity

    text = """
    permit(principal, action, resource) when { context.ip.isInRange(ip("10.0.0.0/8")) };
    permit(principal, action, resource) when { ip("nonsense").isLoopback() };
    """
    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(text)))
    backend = CompiledBackend(program)
    assert "ip(" not in backend.policies[0].run.__doc__.split("# c")[0]  # folded to a cell
    u, d = EntityUID("U", "u"), EntityUID("D", "d")
    facts = EntityFacts([Entity(u), Entity(d)])
    ctx = parse_context({"ip": {"__extn": {"fn": "ip", "arg": "10.1.2.3"}}}, None, None)
    got = backend.decide(Request(u, EntityUID("Action", "a"), d, ctx), facts)
    plain = CompiledBackend(program, mode="generic").decide(
        Request(u, EntityUID("Action", "a"), d, ctx), facts
    )
    assert got.reasons == plain.reasons == ["policy0"]
    assert [(p, e.message) for p, e in got.errors] == [(p, e.message) for p, e in plain.errors]
    assert [p for p, _ in got.errors] == ["policy1"]


def test_background_generation_decides_the_same_before_and_after() -> None:
    """The engine's tier: closures at once, generated code swapped in on a thread."""
    from polang.language.entities import Entity

    program = lower_policies(
        (f"policy{i}", p) for i, p in enumerate(parse_policies(INDEXED + "\n" + "\n".join(TRICKY)))
    )
    backend = CompiledBackend(program, background=True)
    eager = CompiledBackend(program)
    u, d = EntityUID("U", "a"), EntityUID("D", "d1")
    facts = EntityFacts(
        [
            Entity(u, {"n": 1, "name": "a", "flag": True}, frozenset([EntityUID("G", "g")])),
            Entity(d, {"owner": u, "open": True}, frozenset([EntityUID("F", "f")])),
        ]
    )
    request = Request(u, EntityUID("Action", "read"), d, RecordValue({"ok": True, "n": 0}))

    def outcome(b: CompiledBackend) -> tuple:
        got = b.decide(request, facts)
        return got.allow, got.reasons, [(p, e.message) for p, e in got.errors]

    before = outcome(backend)
    assert not backend.wait_generated(timeout=0)  # not started: closures only
    backend.generate_in_background()
    assert backend.wait_generated(timeout=60)
    assert before == outcome(backend) == outcome(eager)
    assert all(cp.run.__doc__ for cp in backend.policies)  # generated functions now
