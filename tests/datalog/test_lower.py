"""Lowering: the rules a policy becomes, and the fixed rules they join."""

from __future__ import annotations

import pytest

from polang.datalog.codegen import CodegenError, compile_rules
from polang.datalog.fixed_rules import RuleSyntaxError, fixed_rules, parse_rules
from polang.datalog.lower import LoweringError, lower_policies
from polang.datalog.seminaive import StratificationError, evaluate, stratify
from polang.language.parser import parse_policies


def lower(text: str) -> str:
    ps = parse_policies(text)
    return lower_policies((f"policy{i}", p) for i, p in enumerate(ps)).text()


def test_and_lowers_to_three_valued_rules() -> None:
    text = lower("permit(principal, action, resource) when { context.a && context.b };")
    assert "p0_e1(false) :- p0_e2(false)." in text
    assert "p0_e1(true) :- p0_e2(true), p0_e4(true)." in text
    assert "p0_e1(false) :- p0_e2(true), p0_e4(false)." in text
    assert 'X = get_attr(A1, "a")' in text
    assert 'cond("policy0", V) :- p0_e1(V).' in text


def test_scope_and_unless() -> None:
    text = lower(
        'forbid(principal in G::"g", action in [Action::"x", Action::"y"], resource is D) '
        "unless { resource.ok };"
    )
    assert 'scope_in(P, G::"g")' in text
    assert "scope_in_any(A," in text
    assert 'scope_is(R, "D")' in text
    assert 'effect("policy0", "forbid").' in text
    # unless { e } is !e: true exactly when e is false
    assert "p0_e1(true) :- p0_e2(false)." in text


def test_unlinked_template_cannot_be_lowered() -> None:
    with pytest.raises(LoweringError, match=r"\?principal"):
        lower("permit(principal == ?principal, action, resource);")


def test_fixed_rules_are_stratified_and_compile() -> None:
    rules = fixed_rules("decision")
    strata = stratify(rules)
    heads = [{r.head.pred for r in s} for s in strata]
    # `allow` reads `not forbidden`, `deny` reads `not allow`: later strata
    assert any("allow" in h for h in heads[1:])
    run = compile_rules(rules, ["policy", "effect", "scope", "cond"])
    facts = {
        "policy": {("a",), ("b",)},
        "effect": {("a", "permit"), ("b", "forbid")},
        "scope": {("a",), ("b",)},
        "cond": {("a", True)},
    }
    out = run(facts)
    assert out["allow"] == {()} and out["reason"] == {("a",)} and out["errored"] == {("b",)}
    ref = evaluate(rules, facts)
    assert all(out[k] == ref.get(k, set()) for k in out)


def test_rule_file_errors_name_the_line() -> None:
    with pytest.raises(RuleSyntaxError, match=r"x\.dl:2"):
        parse_rules("a(X) :- b(X).\nc(X) :- d(X)", "x.dl")
    with pytest.raises(RuleSyntaxError, match=r"y\.dl:3: unexpected character '\$'"):
        parse_rules("% note\na(X) :- b(X).\nc(X) :- $d(X).", "y.dl")


def test_negation_through_recursion_is_refused() -> None:
    with pytest.raises(StratificationError):
        stratify(parse_rules("p(X) :- q(X), not p(X).\nq(1).".replace("1", "a")))


def test_codegen_refuses_recursion() -> None:
    with pytest.raises(CodegenError):
        compile_rules(fixed_rules("hierarchy"), ["entity", "parent"])


def test_codegen_refuses_mutual_recursion_and_mixed_arity() -> None:
    with pytest.raises(CodegenError, match="recursive"):
        compile_rules(parse_rules("a(X) :- b(X).\nb(X) :- a(X).\nb(X) :- c(X)."), ["c"])
    with pytest.raises(CodegenError, match="arguments"):
        compile_rules(parse_rules("a(X) :- b(X).\nc(X) :- b(X, X)."), ["b"])


def test_codegen_orders_rules_by_dependency_not_file_order() -> None:
    """A rule reading a relation derived further down the file still sees all of it."""
    rules = parse_rules("top(X) :- mid(X), not low(X).\nmid(X) :- base(X).\nlow(X) :- bad(X).")
    run = compile_rules(rules, ["base", "bad"])
    out = run({"base": {("a",), ("b",)}, "bad": {("b",)}})
    assert out["top"] == {("a",)}
    assert out == {
        k: v
        for k, v in evaluate(rules, {"base": {("a",), ("b",)}, "bad": {("b",)}}).items()
        if k in out
    }


CODEGEN_PROGRAMS = [
    # one variable: set algebra over unary and grouped relations
    "h(P) :- a(P), g(P, true), not g(P, false).\nz :- h(P), k(P, x).\nw(P) :- z, a(P).",
    # grouped relations under loops (two variables), and a tuple relation
    "pair(P, Q) :- g(P, true), k(Q, x), not t(P, Q).\nq(P) :- pair(P, P).",
    # a relation read with its constant in both columns stays a set of tuples
    "u(P) :- k(P, x).\nv(P) :- k(x, P), not a(P).\ne :- not u(y).",
    # rules out of file order
    "top(P) :- mid(P), not low(P).\nmid(P) :- a(P).\nlow(P) :- g(P, false).",
]


@pytest.mark.parametrize("text", CODEGEN_PROGRAMS)
def test_codegen_agrees_with_the_evaluator_on_random_relations(text: str) -> None:
    import random

    rules = parse_rules(text)
    inputs = ["a", "g", "k", "t"]
    heads = {r.head.pred for r in rules}
    used = {lit.pred for r in rules for lit in r.body} - heads
    run = compile_rules(rules, [p for p in inputs if p in used])
    rng = random.Random(text)
    vals = ["x", "y", "p", "q"]
    for _ in range(200):
        facts = {
            "a": {(v,) for v in vals if rng.random() < 0.5},
            "g": {(v, b) for v in vals for b in (True, False) if rng.random() < 0.4},
            "k": {(v, w) for v in vals for w in vals if rng.random() < 0.2},
            "t": {(v, w) for v in vals for w in vals if rng.random() < 0.3},
        }
        facts = {p: rel for p, rel in facts.items() if p in used}
        ref = evaluate(rules, facts)
        out = run(facts)
        assert out == {p: ref.get(p, set()) for p in heads}, facts
