"""The pydatalog backend on hand-written policies: decisions, errors, traces, threads."""

from __future__ import annotations

import gc
import threading

import pytest
from pyDatalog import pyEngine
from pyDatalog.Logic import Logic

from polang.datalog.authorizer import Authorizer, make_backend
from polang.datalog.compiled import CompiledBackend
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.fixed_rules import parse_rules
from polang.datalog.ir import Atom, Builtin, Const, PolicyInfo, Program, Rule, Var
from polang.datalog.lower import lower_policies
from polang.datalog.pydatalog import PyDatalogBackend, PyDatalogBackendError, Token, token
from polang.language.ast import Policy
from polang.language.entities import Entity
from polang.language.extensions import FUNCTIONS
from polang.language.parser import parse_policies
from polang.language.values import EntityUID, RecordValue, SetValue


def uid(t: str, i: str) -> EntityUID:
    return EntityUID(t, i)


ALICE = uid("User", "alice")
BOB = uid("User", "bob")
ADMINS = uid("Group", "admins")
STAFF = uid("Group", "staff")
DOC = uid("Doc", "d1")
SECRET = uid("Doc", "secret")
FOLDER = uid("Folder", "f")
VIEW = uid("Action", "view")
EDIT = uid("Action", "edit")
READ = uid("Action", "read")

ENTITIES = [
    Entity(ALICE, {"age": 30, "name": "alice", "admin": True}, {ADMINS}),
    Entity(BOB, {"age": 17, "name": "bob", "admin": False}, {STAFF}),
    Entity(ADMINS, {}, {STAFF}),
    Entity(STAFF),
    Entity(DOC, {"owner": ALICE, "level": 1}, {FOLDER}, {"color": "red"}),
    Entity(SECRET, {"owner": BOB, "level": 3, "secret": True}, {FOLDER}),
    Entity(FOLDER),
    Entity(VIEW, parents={READ}),
    Entity(EDIT),
    Entity(READ),
]
FACTS = EntityFacts(ENTITIES)


def ids(text: str) -> dict[str, Policy]:
    return {f"policy{i}": p for i, p in enumerate(parse_policies(text))}


def decide(
    text: str,
    principal: EntityUID | None = ALICE,
    action: EntityUID = VIEW,
    resource: EntityUID = DOC,
    context: dict[str, object] | None = None,
    facts: EntityFacts = FACTS,
) -> tuple[bool, list[str], dict[str, str]]:
    """The pydatalog decision, checked against the compiled backend on the way."""
    out = []
    for backend in ("pydatalog", "compiled"):
        a = Authorizer(ids(text), backend=backend)
        d = a.is_authorized(principal, action, resource, context or {}, facts)
        out.append((d.allow, d.reasons, {e.policy_id: e.error for e in d.errors}))
    assert (out[0][0], out[0][1], set(out[0][2])) == (out[1][0], out[1][1], set(out[1][2]))
    return out[0]


# -- tokens -------------------------------------------------------------------------------


def test_tokens_keep_python_equal_values_apart() -> None:
    assert token(True) is not token(1)
    assert token(False) is not token(0)
    assert token(1) is token(1)
    assert token("a") is token("a")
    assert token(SetValue([1])) is not token(SetValue([True]))
    assert token(SetValue([1, 2])) is token(SetValue([2, 1]))
    assert token(RecordValue({"a": 1})) is not token(RecordValue({"a": True}))
    assert token(RecordValue({"a": 1})) is token(RecordValue({"a": 1}))
    assert token(ALICE) is token(uid("User", "alice"))
    assert token(ALICE) is not token(uid("Admin", "alice"))
    one = FUNCTIONS["decimal"]("1.0")
    assert token(one) is token(FUNCTIONS["decimal"]("1.0000"))
    assert token(one) is not token(1)
    t = token(True)
    assert isinstance(t, Token) and t != token(1) and str(t) == "true"
    assert str(token("x")) == '"x"'


# -- decisions ----------------------------------------------------------------------------


def test_permit_forbid_and_default_deny() -> None:
    text = """
    permit(principal == User::"alice", action == Action::"view", resource);
    permit(principal in Group::"staff", action, resource in Folder::"f");
    forbid(principal, action, resource) when { resource.level > 2 };
    """
    assert decide(text) == (True, ["policy0", "policy1"], {})
    assert decide(text, resource=SECRET) == (False, ["policy2"], {})
    assert decide(text, principal=uid("User", "eve")) == (False, [], {})
    assert decide("") == (False, [], {})


def test_bool_and_long_stay_distinct_in_evaluation() -> None:
    assert (
        decide("permit(principal, action, resource) when { context.x == 1 };", context={"x": True})[
            0
        ]
        is False
    )
    assert (
        decide("permit(principal, action, resource) when { context.x == true };", context={"x": 1})[
            0
        ]
        is False
    )
    assert (
        decide("permit(principal, action, resource) when { context.x == 1 };", context={"x": 1})[0]
        is True
    )
    text = "permit(principal, action, resource) when { [1, 2].contains(context.x) };"
    assert decide(text, context={"x": True})[0] is False
    assert decide(text, context={"x": 1})[0] is True
    text = "permit(principal, action, resource) when { context.s == [1] };"
    assert decide(text, context={"s": SetValue([True])})[0] is False
    assert decide(text, context={"s": SetValue([1])})[0] is True
    text = 'permit(principal, action, resource) when { context.r == {"a": 1} };'
    assert decide(text, context={"r": RecordValue({"a": True})})[0] is False
    assert decide(text, context={"r": RecordValue({"a": 1})})[0] is True


def test_condition_value_that_is_not_a_bool_is_an_error() -> None:
    allow, reasons, errors = decide("permit(principal, action, resource) when { 1 };")
    assert (allow, reasons) == (False, [])
    assert errors == {"policy0": "type error: expected Bool, got Long"}
    allow, _, errors = decide("permit(principal, action, resource) when { !1 };")
    assert not allow and set(errors) == {"policy0"}


def test_errors_do_not_apply_and_are_reported() -> None:
    text = """
    permit(principal, action, resource);
    forbid(principal, action, resource) unless { resource.secret };
    forbid(principal, action, resource) when { resource.owner.nosuch == 1 };
    """
    allow, reasons, errors = decide(text)
    assert (allow, reasons) == (True, ["policy0"])
    assert set(errors) == {"policy1", "policy2"}
    assert "secret" in errors["policy1"]
    assert "nosuch" in errors["policy2"]


def test_short_circuits_are_the_languages() -> None:
    assert decide('permit(principal, action, resource) when { false && (1 + "a") };')[2] == {}
    assert decide('permit(principal, action, resource) when { true || (1 + "a") };')[:2] == (
        True,
        ["policy0"],
    )
    assert decide('permit(principal, action, resource) when { if false then 1 + "a" else true };')[
        0
    ]
    _, _, errors = decide('permit(principal, action, resource) when { true && (1 + "a") };')
    assert set(errors) == {"policy0"} and "Long" in errors["policy0"]


def test_overflow_is_an_error() -> None:
    text = "permit(principal, action, resource) when { context.n * 2 > 0 };"
    assert decide(text, context={"n": 2**62})[2].keys() == {"policy0"}
    assert decide(text, context={"n": 2**61})[0] is True


def test_hierarchy_scopes_and_action_groups() -> None:
    text = """
    permit(principal in Group::"staff", action in Action::"read", resource is Doc in Folder::"f");
    """
    assert decide(text) == (True, ["policy0"], {})
    assert decide(text, action=EDIT)[0] is False
    assert decide(text, resource=FOLDER)[0] is False
    text = 'permit(principal, action in [Action::"edit", Action::"read"], resource);'
    assert decide(text)[0] is True
    text = 'permit(principal, action, resource) when { principal in [Group::"admins"] };'
    assert decide(text)[0] is True
    assert decide(text, principal=BOB)[0] is False


def test_tags_records_like_and_extensions() -> None:
    text = """
    permit(principal, action, resource) when {
        resource.hasTag("color") && resource.getTag("color") like "r*" &&
        {"a": principal.age}.a >= 18 &&
        decimal("1.5").lessThan(decimal("2.0")) &&
        ip("10.0.0.1").isInRange(ip("10.0.0.0/8"))
    };
    """
    assert decide(text) == (True, ["policy0"], {})
    assert decide(text, principal=BOB)[0] is False
    _, _, errors = decide(text, resource=SECRET)
    assert errors == {}  # hasTag is false: && short-circuits before getTag
    _, _, errors = decide('permit(principal, action, resource) when { resource.getTag("x") == 1 };')
    assert set(errors) == {"policy0"}


def test_missing_principal() -> None:
    text = """
    permit(principal, action, resource);
    permit(principal == User::"alice", action, resource);
    permit(principal, action, resource) when { principal == User::"alice" };
    """
    allow, reasons, errors = decide(text, principal=None)
    assert (allow, reasons) == (True, ["policy0"])
    assert errors == {"policy2": "the request has no principal"}


def test_entity_that_does_not_exist() -> None:
    text = "permit(principal, action, resource) when { principal.age > 1 };"
    _, _, errors = decide(text, principal=uid("User", "ghost"))
    assert set(errors) == {"policy0"} and "does not exist" in errors["policy0"]
    text = (
        'permit(principal, action, resource) when { principal has age || principal in User::"x" };'
    )
    assert decide(text, principal=uid("User", "ghost"))[:2] == (False, [])


# -- the engine itself ----------------------------------------------------------------------


def backend_for(text: str) -> PyDatalogBackend:
    b = make_backend(lower_policies(ids(text).items()), "pydatalog")
    assert isinstance(b, PyDatalogBackend) and b.name == "pydatalog"
    return b


def test_trace_outcomes() -> None:
    b = backend_for(
        """
        permit(principal, action == Action::"edit", resource);
        permit(principal, action, resource) when { resource.level };
        forbid(principal, action, resource) when { resource.nope };
        permit(principal, action, resource) unless { principal.admin };
        """
    )
    raw = b.decide(Request(ALICE, VIEW, DOC), FACTS, trace=True)
    got = {o.policy_id: (o.scope, o.value, o.error is not None) for o in raw.outcomes}
    assert got == {
        "policy0": (False, None, False),
        "policy1": (True, 1, True),
        "policy2": (True, None, True),
        "policy3": (True, False, False),
    }
    assert [pid for pid, _ in raw.errors] == ["policy1", "policy2"]
    assert raw.errors[0][1].message == "type error: expected Bool, got Long"
    assert b.decide(Request(ALICE, VIEW, DOC), FACTS).outcomes == []


@pytest.mark.parametrize("cyclic", [False, True])
def test_hierarchy_in_pydatalog_is_the_closure(cyclic: bool) -> None:
    """``in`` inside pyDatalog equals the networkx closure (cycles: asserted, not derived)."""
    a, b, c, d, e = (uid("G", x) for x in "abcde")
    facts = EntityFacts(
        [
            Entity(a, parents={b}),
            Entity(b, parents={c, e}),
            Entity(c, parents={a} if cyclic else set()),
            Entity(d, parents={a}),
        ]
    )
    backend = backend_for("permit(principal, action, resource);")
    with backend.session(Request(a, VIEW, d), facts) as s:
        got = {(row[0], row[1]) for row in s.ask("in", None, None)}
        bound = {row for x in (a, b, c, d, e) for row in s.ask("in", x, None)}
        assert s.ask("entity", d) == [(d,)]
        assert s.ask("entity", e) == []
        assert s.ask("principal", None) == [(a,)]
        assert len(s.ask("parent", None, None)) == (0 if cyclic else 4)
    want = {(x, y) for x in (a, b, c, d) for y in (a, b, c, d, e) if facts.is_in(x, y)}
    assert got == want == bound
    assert ((c, a) in got) is cyclic and (a, c) in got and (d, e) in got


def test_entity_facts_are_swapped_when_the_set_changes() -> None:
    backend = backend_for('permit(principal, action, resource) when { principal in Group::"g" };')
    g = uid("Group", "g")
    with_parent = EntityFacts([Entity(ALICE, parents={g}), Entity(g)])
    without = EntityFacts([Entity(ALICE), Entity(g), Entity(BOB)])
    req = Request(ALICE, VIEW, DOC)
    assert backend.decide(req, with_parent).allow
    assert not backend.decide(req, without).allow
    with backend.session(req, without) as s:
        assert s.ask("parent", None, None) == []
        assert {r[0] for r in s.ask("entity", None)} == {ALICE, g, BOB}
    assert backend.decide(req, with_parent).allow
    with backend.session(Request(None, EDIT, DOC), with_parent) as s:
        assert s.ask("principal", None) == []
        assert s.ask("action", None) == [(EDIT,)]


def test_generic_rules_with_negation_and_builtins_anywhere() -> None:
    """Any IR program runs, not only the shapes lowering emits today."""
    X, Y = Var("X"), Var("Y")
    rules = [Rule(Atom("num", (Const(n),))) for n in (1, 2, 3)]
    rules.append(Rule(Atom("small", (Const(1),))))
    rules.append(Rule(Atom("big", (X,)), (Atom("num", (X,)), Atom("small", (X,), negated=True))))
    rules.append(
        Rule(
            Atom("double", (X, Y)),
            (Atom("num", (X,)), Builtin("add", (X, X), Y), Atom("small", (X,), negated=True)),
        )
    )
    rules.append(Rule(Atom("even", (X,)), (Atom("num", (X,)), Builtin("le", (Const(2), X)))))
    backend = PyDatalogBackend(Program(rules))
    with backend.session(Request(ALICE, VIEW, DOC), FACTS) as s:
        assert sorted(r[0] for r in s.ask("big", None)) == [2, 3]
        assert s.ask("big", True) == []  # true is not 1
        assert sorted(s.ask("double", None, None)) == [(2, 4), (3, 6)]
        assert sorted(r[0] for r in s.ask("even", None)) == [2, 3]


def test_unsafe_programs_are_rejected() -> None:
    with pytest.raises(PyDatalogBackendError, match="cannot be used"):
        PyDatalogBackend(Program([Rule(Atom("a.b"))]))
    with pytest.raises(PyDatalogBackendError, match="unknown builtin"):
        PyDatalogBackend(Program([Rule(Atom("a", (Var("X"),)), (Builtin("nope", (), Var("X")),))]))
    rule = Rule(Atom("a", (Var("X"),)), (Builtin("neg", (Var("Y"),), Var("X")),))
    backend = PyDatalogBackend(Program([rule]))
    with (
        backend.session(Request(ALICE, VIEW, DOC), FACTS) as s,
        pytest.raises(PyDatalogBackendError, match="unbound"),
    ):
        s.ask("a", None)


def test_threads_get_their_own_engines() -> None:
    text = """
    permit(principal, action, resource) when { context.n > 5 };
    forbid(principal, action, resource) when { context.n > 50 };
    permit(principal, action, resource) when { context.n.nope };
    """
    backend = backend_for(text)
    expected = {
        n: (d.allow, d.reasons, [p for p, _ in d.errors])
        for n in range(0, 100, 7)
        for d in [backend.decide(Request(ALICE, VIEW, DOC, RecordValue({"n": n})), FACTS)]
    }
    failures: list[str] = []

    def worker(offset: int) -> None:
        facts = EntityFacts(ENTITIES)  # each thread also swaps fact sets
        for _ in range(3):
            for n in list(expected)[offset:] + list(expected)[:offset]:
                d = backend.decide(Request(ALICE, VIEW, DOC, RecordValue({"n": n})), facts)
                got = (d.allow, d.reasons, [p for p, _ in d.errors])
                if got != expected[n]:
                    failures.append(f"n={n}: {got} != {expected[n]}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_leaves_the_threads_own_pydatalog_engine_alone() -> None:
    mine = Logic.tl.logic
    backend = backend_for("permit(principal, action, resource);")
    assert backend.decide(Request(ALICE, VIEW, DOC), FACTS).allow
    assert Logic.tl.logic is mine
    other = backend_for("forbid(principal, action, resource);")
    assert not other.decide(Request(ALICE, VIEW, DOC), FACTS).allow
    assert backend.decide(Request(ALICE, VIEW, DOC), FACTS).allow  # engines do not mix
    assert Logic.tl.logic is mine


def test_resolvers_are_released_with_the_backend() -> None:
    gc.collect()  # resolvers of backends that earlier tests dropped go first
    before = set(pyEngine.Python_resolvers)
    backend = backend_for("permit(principal, action, resource) when { principal.age > 1 };")
    assert backend.decide(Request(ALICE, VIEW, DOC), FACTS).allow
    mine = set(pyEngine.Python_resolvers) - before
    assert mine
    del backend
    gc.collect()
    assert mine.isdisjoint(pyEngine.Python_resolvers)


def test_policy_info_is_all_the_backend_needs_besides_rules() -> None:
    """A hand-built program: one policy, bridge rules written out by hand."""
    pid = Const("p")
    rules = [
        Rule(Atom("policy", (pid,))),
        Rule(Atom("effect", (pid, Const("permit")))),
        Rule(Atom("scope", (pid,)), (Atom("resource", (Var("R"),)),)),
        Rule(
            Atom("cond", (pid, Var("V"))),
            (Atom("context", (Var("C"),)), Builtin("get_attr", (Var("C"), Const("ok")), Var("V"))),
            policy_id="p",
        ),
        *parse_rules(
            "applies(P) :- policy(P), scope(P), cond(P, true).\n"
            "errored(P) :- policy(P), scope(P), not cond(P, true), not cond(P, false).\n"
            "allow :- applies(P), effect(P, permit).\n"
            "reason(P) :- allow, applies(P), effect(P, permit).\n"
        ),
    ]
    program = Program(rules, {"p": PolicyInfo("p", "permit", "scope", "cond")})
    backend = PyDatalogBackend(program)
    ok = backend.decide(Request(ALICE, VIEW, DOC, RecordValue({"ok": True})), FACTS)
    assert (ok.allow, ok.reasons, ok.errors) == (True, ["p"], [])
    bad = backend.decide(Request(ALICE, VIEW, DOC, RecordValue({})), FACTS)
    assert (bad.allow, bad.reasons, [p for p, _ in bad.errors]) == (False, [], ["p"])
    assert "ok" in bad.errors[0][1].message


@pytest.mark.parametrize(
    ("condition", "principal"),
    [
        ("!1", ALICE),
        ('(false && !1) || !"x"', ALICE),
        ("if 3 then true else false", ALICE),
        ("0 && principal", None),
        ("context.flag || principal == principal", None),
        ("principal.age > 1", None),
        ('true && (1 + "a")', ALICE),
    ],
)
def test_error_messages_are_the_languages_first_error(
    condition: str, principal: EntityUID | None
) -> None:
    """Errors no builtin raises are diagnosed from the atoms, in evaluation order."""
    text = f"permit(principal, action, resource) when {{ {condition} }};"
    program = lower_policies(ids(text).items())
    req = Request(principal, VIEW, DOC, RecordValue({"flag": False}))
    want = CompiledBackend(program).decide(req, FACTS).errors
    got = PyDatalogBackend(program).decide(req, FACTS).errors
    assert [(p, e.kind, e.message) for p, e in got] == [(p, e.kind, e.message) for p, e in want]
    assert len(got) == 1
