"""The formatter: exact output for the tricky cases, and format -> parse round trips of
random ASTs (checked against cedarpy's reading of the same text as well)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.language import ast
from polang.language.ast import (
    WILDCARD,
    ActionConstraint,
    Annotation,
    Binary,
    Condition,
    EntityLit,
    ExtCall,
    GetAttr,
    Has,
    If,
    Is,
    Like,
    Lit,
    MethodCall,
    Policy,
    RecordLit,
    ScopeConstraint,
    SetLit,
    Slot,
    Unary,
    Var,
)
from polang.language.format import (
    format_expr,
    format_policies,
    format_policy,
    policies_to_json,
    policy_to_json,
)
from polang.language.parser import (
    BUILTIN_METHOD_ARITY,
    EXTENSION_FUNCTIONS,
    EXTENSION_METHODS,
    RESERVED_WORDS,
    parse_expression,
    parse_policies,
)
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID

P, R, C = Var("principal"), Var("resource"), Var("context")
T, F = Lit(True), Lit(False)


def same(a: object, b: object) -> bool:
    """AST equality that also tells ``true`` from ``1`` (dataclass ``==`` does not)."""
    return a == b and repr(a) == repr(b)


# ---------------------------------------------------------------- exact output


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (Binary("&&", Binary("&&", T, F), T), "true && false && true"),
        (Binary("&&", T, Binary("&&", F, T)), "true && (false && true)"),
        (Binary("||", Binary("&&", T, F), T), "true && false || true"),
        (Binary("&&", Binary("||", T, F), T), "(true || false) && true"),
        (Binary("-", Binary("-", Lit(1), Lit(2)), Lit(3)), "1 - 2 - 3"),
        (Binary("-", Lit(1), Binary("-", Lit(2), Lit(3))), "1 - (2 - 3)"),
        (Binary("-", Binary("+", Lit(1), Lit(2)), Lit(3)), "1 + 2 - 3"),
        (Binary("*", Binary("+", Lit(1), Lit(2)), Lit(3)), "(1 + 2) * 3"),
        (Binary("+", Lit(1), Binary("*", Lit(2), Lit(3))), "1 + 2 * 3"),
        (Binary("==", Binary("==", Lit(1), Lit(2)), T), "(1 == 2) == true"),
        (Binary("==", T, Binary("<", Lit(1), Lit(2))), "true == (1 < 2)"),
        (Binary("in", P, SetLit(())), "principal in []"),
        (Binary("==", Has(P, "a"), T), "(principal has a) == true"),
        (Has(Binary("+", Lit(1), Lit(2)), "a"), "1 + 2 has a"),
        (Has(Binary("==", Lit(1), Lit(2)), "a"), "(1 == 2) has a"),
        (Has(P, "first name"), 'principal has "first name"'),
        (Has(P, "if"), 'principal has "if"'),
        (Has(P, "__cedar"), 'principal has "__cedar"'),
        (Has(P, "principal"), "principal has principal"),
        (GetAttr(P, "a b"), 'principal["a b"]'),
        (GetAttr(P, "in"), 'principal["in"]'),
        (GetAttr(GetAttr(P, "a"), "b"), "principal.a.b"),
        (GetAttr(Lit(-5), "a"), "(-5).a"),
        (GetAttr(Lit(5), "a"), "5.a"),
        (GetAttr(Unary("!", T), "a"), "(!true).a"),
        (GetAttr(Binary("+", Lit(1), Lit(2)), "a"), "(1 + 2).a"),
        (Lit(-5), "-5"),
        (Lit(LONG_MIN), "-9223372036854775808"),
        (Unary("-", Lit(5)), "-(5)"),
        (Unary("-", Lit(-5)), "--5"),
        (Unary("-", Unary("-", Unary("-", Lit(-5)))), "----5"),
        (Unary("-", Unary("-", Unary("-", Unary("-", Lit(-5))))), "----(-5)"),
        (Unary("-", Unary("-", Unary("-", Unary("-", Lit(5))))), "----(5)"),
        (Unary("-", GetAttr(P, "n")), "-principal.n"),
        (Unary("!", Unary("!", T)), "!!true"),
        (Unary("!", Unary("!", Unary("!", Unary("!", Unary("!", T))))), "!!!!(!true)"),
        (Unary("!", Unary("-", P)), "!(-principal)"),
        (Unary("-", Unary("!", P)), "-(!principal)"),
        (Unary("!", Lit(-1)), "!(-1)"),
        (Unary("!", Has(P, "a")), "!(principal has a)"),
        (Binary("-", Lit(1), Lit(-1)), "1 - -1"),
        (Binary("*", Lit(2), Unary("-", P)), "2 * -principal"),
        (If(T, Lit(1), Binary("||", F, T)), "if true then 1 else false || true"),
        (Binary("+", If(T, Lit(1), Lit(2)), Lit(3)), "(if true then 1 else 2) + 3"),
        (Binary("||", F, If(T, T, F)), "false || (if true then true else false)"),
        (If(If(T, F, T), Lit(1), Lit(2)), "if if true then false else true then 1 else 2"),
        (Unary("!", If(T, T, F)), "!(if true then true else false)"),
        (SetLit((If(T, Lit(1), Lit(2)),)), "[if true then 1 else 2]"),
        (Like(P, ("a", WILDCARD, "*", "\\", '"')), 'principal like "a*\\*\\\\\\""'),
        (Like(Binary("+", Lit(1), Lit(2)), (WILDCARD,)), '1 + 2 like "*"'),
        (Is(P, "Ns::User"), "principal is Ns::User"),
        (Is(P, "User", EntityLit(EntityUID("G", "g"))), 'principal is User in G::"g"'),
        (Is(P, "User", Binary("in", P, R)), "principal is User in (principal in resource)"),
        (
            RecordLit((("a", Lit(1)), ("b c", Lit("\n")), ("if", SetLit(())))),
            '{a: 1, "b c": "\\n", "if": []}',
        ),
        (EntityLit(EntityUID("A::B", 'x"y')), 'A::B::"x\\"y"'),
        (MethodCall(GetAttr(C, "s"), "contains", (Lit(1),)), "context.s.contains(1)"),
        (MethodCall(Lit(-1), "isEmpty", ()), "(-1).isEmpty()"),
        (ExtCall("ip", (Lit("10.0.0.1"),)), 'ip("10.0.0.1")'),
        (Slot("?principal"), "?principal"),
    ],
)
def test_format_expr(expr: ast.Expr, text: str) -> None:
    assert format_expr(expr) == text
    if not isinstance(expr, Slot):
        assert same(parse_expression(text), expr)


def test_format_policy_layout() -> None:
    p = Policy(
        "permit",
        ScopeConstraint("principal", "is_in", Slot("?principal"), "Ns::User"),
        ActionConstraint("in_set", (EntityUID("Action", "a"), EntityUID("Ns::Action", "b"))),
        ScopeConstraint("resource", "eq", EntityUID("Doc", "d")),
        (Condition("when", Binary("&&", T, F)), Condition("unless", Has(R, "x"))),
        (Annotation("id", 'say "hi"'), Annotation("flag", None)),
    )
    assert format_policy(p) == (
        '@id("say \\"hi\\"")\n'
        "@flag\n"
        'permit (principal is Ns::User in ?principal, action in [Action::"a", Ns::Action::"b"], '
        'resource == Doc::"d")\n'
        "when {\n"
        "  true && false\n"
        "}\n"
        "unless {\n"
        "  resource has x\n"
        "};"
    )
    q = Policy(
        "forbid", ScopeConstraint("principal"), ActionConstraint(), ScopeConstraint("resource")
    )
    assert format_policy(q) == "forbid (principal, action, resource);"
    assert format_policies([p, q]) == format_policy(p) + "\n\n" + format_policy(q) + "\n"
    assert format_policies([]) == ""
    assert same(parse_policies(format_policies([p, q])), [p, q])


def test_formatted_policies_carry_no_control_or_bidi_character_raw() -> None:
    # ids, entity ids, attribute names and strings with line breaks, C1 controls and bidi
    # overrides: the text is one line per line the formatter means, and parses back
    hostile = "x\n// */ -- \r\u2028\u2029\x85\x9b[2J\x1b[31m\u202eevil\u2066\u200f\x7f"
    p = Policy(
        "permit",
        ScopeConstraint("principal", "eq", EntityUID("User", hostile)),
        ActionConstraint(),
        ScopeConstraint("resource"),
        (Condition("when", Binary("==", GetAttr(R, hostile), Lit(hostile))),),
        (Annotation("id", hostile),),
    )
    text = format_policies([p])
    assert text.splitlines() == text.split("\n")[:-1]  # no line break but the formatter's
    assert not any(0x7F <= ord(c) <= 0x9F or (ord(c) < 0x20 and c != "\n") for c in text)
    assert not any(c in text for c in "\u2028\u2029\u202e\u2066\u200f")
    assert same(parse_policies(text), [p])


@pytest.mark.parametrize(
    ("scope", "text"),
    [
        (ActionConstraint(), "action"),
        (ActionConstraint("eq", (EntityUID("Action", "v"),)), 'action == Action::"v"'),
        (ActionConstraint("in", (EntityUID("Action", "v"),)), 'action in Action::"v"'),
        (ActionConstraint("in_set", ()), "action in []"),
    ],
)
def test_format_action_scope(scope: ActionConstraint, text: str) -> None:
    p = Policy("permit", ScopeConstraint("principal"), scope, ScopeConstraint("resource"))
    assert format_policy(p) == f"permit (principal, {text}, resource);"
    assert same(parse_policies(format_policy(p)), [p])


def test_long_chains_do_not_recurse_per_operand() -> None:
    e: ast.Expr = Lit(0)
    for i in range(1, 3000):
        e = Binary("&&", e, Lit(i))
    text = format_expr(e)
    assert text.startswith("0 && 1 && 2") and "(" not in text


def test_policies_to_json() -> None:
    ps = parse_policies(
        '@id("a") permit(principal == ?principal, action, resource) when { principal.x like "a*" };'
        'forbid(principal, action in [Action::"a"], resource) unless { -1 < principal.n };'
    )
    js = policies_to_json(ps)
    assert list(js["templates"]) == ["policy0"] and list(js["staticPolicies"]) == ["policy1"]
    assert js["templates"]["policy0"]["principal"] == {"op": "==", "slot": "?principal"}
    assert js["templates"]["policy0"]["annotations"] == {"id": "a"}
    assert js["templates"]["policy0"]["conditions"][0]["body"] == {
        "like": {
            "left": {".": {"left": {"Var": "principal"}, "attr": "x"}},
            "pattern": [{"Literal": "a"}, "Wildcard"],
        }
    }
    assert js["staticPolicies"]["policy1"]["action"] == {
        "op": "in",
        "entities": [{"type": "Action", "id": "a"}],
    }
    assert "annotations" not in js["staticPolicies"]["policy1"]


# ---------------------------------------------------------------- random ASTs

_IDENT = st.from_regex(r"[_a-zA-Z][_a-zA-Z0-9]{0,6}", fullmatch=True)
idents = _IDENT.filter(lambda s: s not in RESERVED_WORDS and s != "__cedar")
type_names = st.lists(idents, min_size=1, max_size=3).map("::".join)
chars = st.characters(exclude_categories=["Cs"])
texts = st.text(chars, max_size=6)
attr_names = st.one_of(
    idents,
    st.sampled_from([*sorted(RESERVED_WORDS), "__cedar", "", "a b", "*", "principal"]),
    texts,
)
entity_uids = st.builds(EntityUID, type_names, texts)
action_uids = st.builds(
    EntityUID,
    st.one_of(st.just("Action"), type_names.map(lambda t: t + "::Action")),
    texts,
)
literals = st.one_of(
    st.booleans().map(Lit),
    st.integers(LONG_MIN, LONG_MAX).map(Lit),
    st.sampled_from([0, -1, 1, LONG_MIN, LONG_MAX]).map(Lit),
    texts.map(Lit),
)
leaves = st.one_of(
    literals,
    st.sampled_from([Var("principal"), Var("action"), Var("resource"), Var("context")]),
    entity_uids.map(EntityLit),
)
patterns = st.lists(st.one_of(chars, st.just(WILDCARD), st.just("*")), max_size=5).map(tuple)


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    args = st.lists(children, max_size=2).map(tuple)
    builtin = st.sampled_from(sorted(BUILTIN_METHOD_ARITY)).flatmap(
        lambda m: st.tuples(
            children,
            st.just(m),
            st.lists(
                children, min_size=BUILTIN_METHOD_ARITY[m], max_size=BUILTIN_METHOD_ARITY[m]
            ).map(tuple),
        )
    )
    return st.one_of(
        st.builds(Unary, st.sampled_from(["!", "-"]), children),
        st.builds(
            Binary,
            st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "&&", "||"]),
            children,
            children,
        ),
        st.builds(Has, children, attr_names),
        st.builds(Like, children, patterns),
        st.builds(Is, children, type_names, st.none() | children),
        st.builds(GetAttr, children, attr_names),
        builtin.map(lambda t: MethodCall(*t)),
        st.builds(MethodCall, children, st.sampled_from(sorted(EXTENSION_METHODS)), args),
        st.builds(ExtCall, st.sampled_from(sorted(EXTENSION_FUNCTIONS)), args),
        st.builds(If, children, children, children),
        st.lists(children, max_size=3).map(lambda xs: SetLit(tuple(xs))),
        st.dictionaries(attr_names, children, max_size=3).map(
            lambda d: RecordLit(tuple(d.items()))
        ),
    )


exprs = st.recursive(leaves, _extend, max_leaves=12)


def _scope(var: str) -> st.SearchStrategy[ScopeConstraint]:
    slot = Slot("?principal") if var == "principal" else Slot("?resource")
    target = st.one_of(entity_uids, st.just(slot))
    v: Any = var
    return st.one_of(
        st.just(ScopeConstraint(v)),
        st.builds(lambda e: ScopeConstraint(v, "eq", e), target),
        st.builds(lambda e: ScopeConstraint(v, "in", e), target),
        st.builds(lambda t: ScopeConstraint(v, "is", entity_type=t), type_names),
        st.builds(lambda e, t: ScopeConstraint(v, "is_in", e, t), target, type_names),
    )


action_scopes = st.one_of(
    st.just(ActionConstraint()),
    action_uids.map(lambda u: ActionConstraint("eq", (u,))),
    action_uids.map(lambda u: ActionConstraint("in", (u,))),
    st.lists(action_uids, max_size=3).map(lambda us: ActionConstraint("in_set", tuple(us))),
)
annotation_sets = st.dictionaries(_IDENT, st.none() | texts, max_size=3).map(
    lambda d: tuple(Annotation(k, v) for k, v in d.items())
)
policies = st.builds(
    Policy,
    st.sampled_from(["permit", "forbid"]),
    _scope("principal"),
    action_scopes,
    _scope("resource"),
    st.lists(st.builds(Condition, st.sampled_from(["when", "unless"]), exprs), max_size=3).map(
        tuple
    ),
    annotation_sets,
)


def _settings(n: int) -> Any:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings(200)
@given(exprs)
def test_expression_round_trip(e: ast.Expr) -> None:
    text = format_expr(e)
    assert same(parse_expression(text), e), text


@_settings(80)
@given(st.lists(policies, max_size=3))
def test_policy_round_trip(ps: list[Policy]) -> None:
    text = format_policies(ps)
    assert same(parse_policies(text), ps), text
    # formatting is canonical: a second pass gives the same text
    assert format_policies(parse_policies(text)) == text


def _normalize(d: Any) -> Any:
    act = d.get("action", {})
    if act.get("op") == "in" and len(act.get("entities", [])) == 1:
        d = dict(d, action={"op": "in", "entity": act["entities"][0]})
    return d


@_settings(100)
@given(policies)
def test_cedarpy_reads_formatted_policies_as_we_do(p: Policy) -> None:
    cedarpy = pytest.importorskip("cedarpy")
    text = format_policy(p)
    ref: dict[str, Any] = json.loads(cedarpy.policies_to_json_str(text))
    found: list[Any] = list(ref["staticPolicies"].values()) + list(ref["templates"].values())
    assert len(found) == 1
    theirs = found[0]
    assert _normalize(theirs) == _normalize(policy_to_json(p)), text
