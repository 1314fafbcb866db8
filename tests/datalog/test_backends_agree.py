"""The two backends derive the same atoms: on the conformance corpus and on random policies.

Both run the same lowered Program; the compiled backend as closures, the pydatalog backend
inside pyDatalog. Any disagreement means one of them does not execute the rules as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polang.conformance as conformance
from polang.datalog.compiled import CompiledBackend, RawDecision
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.lower import lower_policies
from polang.datalog.pydatalog import PyDatalogBackend
from polang.errors import PolangError
from polang.language import ast
from polang.language.entities import Entity, parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue, SetValue, value_eq

CORPUS_STRIDE = 7  # every 7th test file of the pack: 569 of 3,979, spread over all of it
REQUESTS_PER_FILE = 3


def summary(raw: RawDecision) -> tuple[bool, list[str], list[tuple[str, str]]]:
    """What must agree: decision, reasons, and the erroring policies with the error kind."""
    return raw.allow, raw.reasons, [(pid, e.kind) for pid, e in raw.errors]


def run(backend: CompiledBackend | PyDatalogBackend, req: Request, facts: EntityFacts) -> Any:
    """The backend's answer, or the exception it raised (both must fail alike)."""
    try:
        return summary(backend.decide(req, facts))
    except Exception as e:
        return ("raised", type(e).__name__, str(e))


# -- the corpus -----------------------------------------------------------------------------


def test_backends_agree_on_the_corpus(corpus_dir: Path) -> None:
    files = list(conformance.test_files(corpus_dir))[::CORPUS_STRIDE]
    assert len(files) >= 500
    disagreements: list[str] = []
    requests = 0
    for path in files:
        spec = json.loads(path.read_text("utf-8"))
        schema = parse_schema((corpus_dir / spec["schema"]).read_text("utf-8"), spec["schema"])
        text = (corpus_dir / spec["policies"]).read_text("utf-8")
        policies = parse_policies(text, spec["policies"])
        store = parse_entities((corpus_dir / spec["entities"]).read_text("utf-8"), schema)
        program = lower_policies((f"policy{i}", p) for i, p in enumerate(policies))
        compiled, pyd = CompiledBackend(program), PyDatalogBackend(program)
        facts = EntityFacts(store)
        for i, r in enumerate(spec["requests"][:REQUESTS_PER_FILE]):
            try:
                action = parse_entity_uid_json(r["action"])
                req = Request(
                    parse_entity_uid_json(r["principal"]),
                    action,
                    parse_entity_uid_json(r["resource"]),
                    parse_context(r.get("context", {}), schema, action),
                )
            except PolangError:
                continue  # a request the harness rejects: nothing to decide
            requests += 1
            a, b = run(compiled, req, facts), run(pyd, req, facts)
            if a != b:
                disagreements.append(f"{path.relative_to(corpus_dir)} request {i}: {a} != {b}")
    assert requests >= 3 * 500
    assert disagreements == [], "\n".join(disagreements[:20])


# -- random policies over a small universe ----------------------------------------------------


def uid(t: str, i: str) -> EntityUID:
    return EntityUID(t, i)


USERS = [uid("User", "alice"), uid("User", "bob"), uid("User", "ghost")]  # ghost: no entity
GROUPS = [uid("Group", "admins"), uid("Group", "staff")]
DOCS = [uid("Doc", "d1"), uid("Doc", "d2"), uid("Doc", "nope")]  # nope: no entity
FOLDERS = [uid("Folder", "f"), uid("Folder", "g")]
ACTIONS = [uid("Action", "view"), uid("Action", "edit"), uid("Action", "read")]
UIDS = USERS + GROUPS + DOCS + FOLDERS + ACTIONS
TYPES = ["User", "Group", "Doc", "Folder", "Action"]
ATTRS = ["age", "name", "admin", "owner", "level", "tags", "info"]
TAGS = ["name", "age"]
STRINGS = ["", "a", "alice", "red", "a*b", "10.0.0.1", "1.5"]
LONGS = [0, 1, -1, 2, 17, 18, 100, 2**62, 2**63 - 1, -(2**63)]


def often(common: st.SearchStrategy[Any], *rare: st.SearchStrategy[Any]) -> Any:
    """``common`` half of the time, else one of ``rare``: scopes that hold get conditions run."""
    return st.booleans().flatmap(lambda c: common if c else st.one_of(*rare))


uids = st.sampled_from(UIDS)
scalars = st.one_of(st.booleans(), st.sampled_from(LONGS), st.sampled_from(STRINGS), uids)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(SetValue),
        st.dictionaries(st.sampled_from(ATTRS), inner, max_size=3).map(RecordValue),
    ),
    max_leaves=5,
)
small_longs = st.integers(-3, 40)
# The value each attribute usually has (so typed conditions evaluate), else anything.
TYPED: dict[str, st.SearchStrategy[Any]] = {
    "age": small_longs,
    "name": st.sampled_from(STRINGS),
    "admin": often(st.booleans(), st.sampled_from([0, 1])),
    "level": small_longs,
    "owner": st.sampled_from(USERS),
    "tags": st.lists(st.sampled_from(STRINGS), max_size=3).map(SetValue),
    "info": st.dictionaries(st.sampled_from(ATTRS), small_longs, max_size=2).map(RecordValue),
}


@st.composite
def record(draw: st.DrawFn, keys: list[str]) -> RecordValue:
    fields = {}
    for k in keys:
        if draw(st.integers(0, 3)):  # present three times in four
            fields[k] = draw(often(TYPED[k], values))
    return RecordValue(fields)


@st.composite
def entities(draw: st.DrawFn) -> list[Entity]:
    out = []
    for u in UIDS:
        if u.id in ("ghost", "nope"):
            continue
        attrs = draw(record(ATTRS)).fields
        tags = draw(record(TAGS)).fields
        parents = draw(st.sets(st.sampled_from(GROUPS + FOLDERS + ACTIONS), max_size=2))
        out.append(Entity(u, attrs, parents, tags))
    return out


VARS: list[ast.VarName] = ["principal", "action", "resource", "context"]
PATTERNS = [("a", ast.WILDCARD), (ast.WILDCARD,), ("r", "e", "d"), (ast.WILDCARD, "*")]

LITERALS: list[bool | int | str] = [True, False, *LONGS, *STRINGS]
ENTITY_VARS: list[ast.VarName] = ["principal", "resource"]
atoms_ = st.one_of(
    st.sampled_from(LITERALS).map(ast.Lit),
    uids.map(ast.EntityLit),
    st.sampled_from(VARS).map(ast.Var),
    st.builds(ast.GetAttr, st.sampled_from(VARS).map(ast.Var), st.sampled_from(ATTRS)),
)
leaves = st.one_of(
    atoms_,
    # comparisons of simple operands: conditions that are often true or false, not errors
    st.builds(ast.Binary, st.sampled_from(["==", "!=", "in", "<", "=="]), atoms_, atoms_),
    st.builds(ast.Has, st.sampled_from(VARS).map(ast.Var), st.sampled_from(ATTRS)),
    st.builds(
        ast.ExtCall,
        st.sampled_from(["decimal", "ip"]),
        st.sampled_from(["1.5", "10.0.0.1", "10.0.0.0/8"]).map(lambda s: (ast.Lit(s),)),
    ),
)


def _extend(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    ops = st.sampled_from(
        ["==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "&&", "||", "&&", "||"]
    )
    methods_1 = st.sampled_from(
        ["contains", "containsAll", "containsAny", "hasTag", "getTag", "lessThan", "isInRange"]
    )
    methods_0 = st.sampled_from(["isEmpty", "isIpv4", "isLoopback"])
    return st.one_of(
        st.builds(ast.Unary, st.sampled_from(["!", "-"]), e),
        st.builds(ast.Binary, ops, e, e),
        st.builds(ast.Has, e, st.sampled_from(ATTRS)),
        st.builds(ast.GetAttr, e, st.sampled_from(ATTRS)),
        st.builds(ast.Like, e, st.sampled_from(PATTERNS)),
        st.builds(ast.Is, e, st.sampled_from(TYPES), st.none() | e),
        st.builds(ast.If, e, e, e),
        st.builds(ast.SetLit, st.lists(e, max_size=3).map(tuple)),
        st.builds(
            ast.RecordLit,
            st.dictionaries(st.sampled_from(ATTRS), e, max_size=2).map(lambda d: tuple(d.items())),
        ),
        st.builds(ast.MethodCall, e, methods_1, e.map(lambda x: (x,))),
        st.builds(ast.MethodCall, e, methods_0, st.just(())),
        st.builds(ast.ExtCall, st.sampled_from(["decimal", "ip"]), e.map(lambda x: (x,))),
    )


untyped = st.recursive(leaves, _extend, max_leaves=10)

# Well-typed expressions over the usual attribute types: conditions that evaluate to true
# or false (or fail on a missing attribute), so decisions are not all errors.
var = st.sampled_from(VARS).map(ast.Var)
ent_var = st.sampled_from(ENTITY_VARS).map(ast.Var)


def attr(name: str) -> st.SearchStrategy[ast.Expr]:
    return st.builds(ast.GetAttr, st.one_of(ent_var, var), st.just(name))


bools: st.SearchStrategy[ast.Expr] = st.deferred(lambda: _bools)
longs: st.SearchStrategy[ast.Expr] = st.deferred(
    lambda: st.one_of(
        small_longs.map(ast.Lit),
        attr("age"),
        attr("level"),
        st.builds(ast.MethodCall, ent_var, st.just("getTag"), st.just((ast.Lit("age"),))),
        st.builds(ast.Binary, st.sampled_from(["+", "-", "*"]), longs, longs),
        st.builds(ast.Unary, st.just("-"), longs),
        st.builds(ast.If, bools, longs, longs),
    )
)
entity_exprs = st.one_of(uids.map(ast.EntityLit), ent_var, attr("owner"))
sets = st.one_of(
    attr("tags"),
    st.lists(entity_exprs, max_size=3).map(lambda xs: ast.SetLit(tuple(xs))),
    st.lists(st.sampled_from(STRINGS).map(ast.Lit), max_size=3).map(
        lambda xs: ast.SetLit(tuple(xs))
    ),
)
strings = st.one_of(st.sampled_from(STRINGS).map(ast.Lit), attr("name"))
_bools: st.SearchStrategy[ast.Expr] = st.one_of(
    st.booleans().map(ast.Lit),
    attr("admin"),
    st.builds(ast.Has, st.one_of(ent_var, var), st.sampled_from(ATTRS)),
    st.builds(ast.Binary, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), longs, longs),
    st.builds(ast.Binary, st.sampled_from(["==", "!=", "in"]), entity_exprs, entity_exprs),
    st.builds(ast.Binary, st.just("in"), entity_exprs, sets),
    st.builds(ast.Binary, st.sampled_from(["==", "!="]), strings, strings),
    st.builds(ast.Like, strings, st.sampled_from(PATTERNS)),
    st.builds(ast.Is, entity_exprs, st.sampled_from(TYPES), st.none() | entity_exprs),
    st.builds(
        ast.MethodCall,
        sets,
        st.just("contains"),
        st.one_of(strings, entity_exprs).map(lambda x: (x,)),
    ),
    st.builds(
        ast.MethodCall,
        sets,
        st.sampled_from(["containsAll", "containsAny"]),
        sets.map(lambda x: (x,)),
    ),
    st.builds(ast.MethodCall, ent_var, st.just("hasTag"), strings.map(lambda x: (x,))),
    st.builds(ast.Binary, st.sampled_from(["&&", "||"]), bools, bools),
    st.builds(ast.Unary, st.just("!"), bools),
    st.builds(ast.If, bools, bools, bools),
)
# Values Python confuses (True == 1, {1, True} has one element) where the language does not.
mixed = st.one_of(st.sampled_from([0, 1, True, False]).map(ast.Lit), attr("admin"), attr("level"))
confusing = st.one_of(
    mixed,
    st.builds(ast.Binary, st.sampled_from(["==", "!=", "&&", "||"]), mixed, mixed),
    st.builds(ast.If, bools, mixed, mixed),
    st.builds(ast.Unary, st.just("!"), mixed),
    st.builds(
        ast.MethodCall,
        st.lists(mixed, max_size=3).map(lambda xs: ast.SetLit(tuple(xs))),
        st.just("contains"),
        mixed.map(lambda x: (x,)),
    ),
    st.builds(
        ast.Binary,
        st.just("=="),
        st.lists(mixed, max_size=2).map(lambda xs: ast.SetLit(tuple(xs))),
        st.lists(mixed, max_size=2).map(lambda xs: ast.SetLit(tuple(xs))),
    ),
)
exprs = often(bools, bools, confusing, untyped)  # typed half of the time


def scope(var: str) -> st.SearchStrategy[ast.ScopeConstraint]:
    pool = USERS + GROUPS if var == "principal" else DOCS + FOLDERS
    return often(
        st.just(ast.ScopeConstraint(var)),  # type: ignore[arg-type]
        st.builds(ast.ScopeConstraint, st.just(var), st.just("eq"), st.sampled_from(pool)),
        st.builds(ast.ScopeConstraint, st.just(var), st.just("in"), st.sampled_from(pool)),
        st.builds(
            ast.ScopeConstraint,
            st.just(var),
            st.just("is"),
            st.none(),
            st.sampled_from(TYPES),
        ),
        st.builds(
            ast.ScopeConstraint,
            st.just(var),
            st.just("is_in"),
            st.sampled_from(pool),
            st.sampled_from(TYPES),
        ),
    )


actions = often(
    st.just(ast.ActionConstraint()),
    st.builds(ast.ActionConstraint, st.just("eq"), st.sampled_from(ACTIONS).map(lambda a: (a,))),
    st.builds(ast.ActionConstraint, st.just("in"), st.sampled_from(ACTIONS).map(lambda a: (a,))),
    st.builds(
        ast.ActionConstraint,
        st.just("in_set"),
        st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=2, unique=True).map(tuple),
    ),
)

policies = st.builds(
    ast.Policy,
    st.sampled_from(["permit", "forbid"]),
    scope("principal"),
    actions,
    scope("resource"),
    st.lists(st.builds(ast.Condition, st.sampled_from(["when", "unless"]), exprs), max_size=2).map(
        tuple
    ),
)

requests = st.builds(
    Request,
    often(st.sampled_from(USERS[:2]), st.sampled_from(USERS + GROUPS), st.none()),
    st.sampled_from(ACTIONS),
    often(st.sampled_from(DOCS[:2]), st.sampled_from(DOCS + FOLDERS + USERS)),
    record(ATTRS),
)


def atoms(raw: RawDecision) -> dict[str, tuple[bool, Any, bool]]:
    return {o.policy_id: (o.scope, o.value, o.error is not None) for o in raw.outcomes}


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(policies, min_size=1, max_size=4),
    entities(),
    st.lists(requests, min_size=1, max_size=3),
)
def test_backends_agree_on_random_policies(
    pols: list[ast.Policy], ents: list[Entity], reqs: list[Request]
) -> None:
    program = lower_policies((f"policy{i}", p) for i, p in enumerate(pols))
    compiled, pyd = CompiledBackend(program), PyDatalogBackend(program)
    facts = EntityFacts(ents)
    for req in reqs:
        a, b = run(compiled, req, facts), run(pyd, req, facts)
        assert a == b, program.text()
        if a[0] == "raised":
            continue
        ta = compiled.decide(req, facts, trace=True)
        tb = pyd.decide(req, facts, trace=True)
        got = atoms(tb)
        # The compiled backend traces only its candidates (policies indexed by action).
        for pid, (in_scope, value, errored) in atoms(ta).items():
            g_scope, g_value, g_errored = got[pid]
            assert (g_scope, g_errored) == (in_scope, errored), (pid, program.text())
            assert value_eq(g_value, value), (pid, g_value, value)
        for pid, (in_scope, _, _) in got.items():
            if pid not in atoms(ta):
                assert not in_scope, f"{pid} in scope but not a compiled candidate"
