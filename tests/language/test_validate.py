"""Strict policy validation: each rule with a passing and a failing policy.

The failing cases check the finding's kind, a phrase of its message and where it points,
because an author fixes a policy from exactly those three things. A differential test at
the end compares validity with the Rust engine (``cedarpy``) on generated policies.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import PolicyParseError, ValidationError
from polang.language.ast import Span
from polang.language.parser import parse_policies
from polang.language.schema import Schema, parse_schema
from polang.language.typecheck import types as T
from polang.language.typecheck.checker import EMPTY, EnvChecker, Issue, SchemaIndex
from polang.language.typecheck.ir import Lowering
from polang.language.validate import (
    ValidationFinding,
    check_policies,
    validate_policies,
)
from polang.language.values import EntityUID

SCHEMA_TEXT = """
entity Group in [Group] { name: String };
entity User in [Group] {
  name: String,
  age?: Long,
  nicknames: Set<String>,
  manager?: User,
  address: { city: String, zip?: String },
  home: ipaddr,
  budget?: decimal,
  joined: datetime,
  shift?: duration,
  active: Bool,
} tags String;
entity Doc {
  owner: User,
  readers: Set<User>,
  level: Long,
  meta?: { pages: Long, draft?: Bool },
  color: Color,
} tags Set<String>;
entity Color enum ["red", "green"];
entity Folder in [Folder, Group] { title?: String };
entity Svc { name: String };
action read appliesTo {
  principal: [User],
  resource: [Doc],
  context: { ip: ipaddr, authenticated: Bool, attempts?: Long, req: { n: Long, note?: String } }
};
action write appliesTo { principal: [User, Group], resource: [Doc, Folder], context: {} };
action "manage";
action rotate in ["manage"] appliesTo { principal: [Svc], resource: [Svc], context: {} };
action unused;
"""


@pytest.fixture(scope="module")
def schema() -> Schema:
    return parse_schema(SCHEMA_TEXT, "test.polangschema")


def findings(text: str, schema: Schema, **kw: bool) -> list[ValidationFinding]:
    return validate_policies(parse_policies(text, "test.polang"), schema, **kw)


def kinds(text: str, schema: Schema) -> list[str]:
    return [f.kind for f in findings(text, schema)]


# ------------------------------------------------------------------ one case per rule
# (policy, expected finding kinds); [] means the policy is valid.

P = 'permit(principal, action == Action::"read", resource)'
W = 'permit(principal, action == Action::"write", resource)'

CASES: list[tuple[str, str, list[str]]] = [
    # names: entity types, actions, enumerated ids
    ("known entity type", f'{P} when {{ principal == User::"a" }};', []),
    ("unknown entity type", f'{P} when {{ principal == Usr::"a" }};', ["unrecognized_entity_type"]),
    ("unknown type in is", f"{P} when {{ principal is Uzer }};", ["unrecognized_entity_type"]),
    ("known action", 'permit(principal, action in Action::"manage", resource);', []),
    (
        "unknown action",
        'permit(principal, action == Action::"reed", resource);',
        ["unrecognized_action", "invalid_action_application"],
    ),
    ("enum id", f'{P} when {{ resource.color == Color::"red" }};', []),
    (
        "enum id not declared",
        f'{P} when {{ resource.color == Color::"blue" }};',
        ["invalid_enum_entity"],
    ),
    # scope against appliesTo
    ("scope fits", "permit(principal is User, action, resource is Doc);", []),
    (
        "scope never applies",
        'permit(principal is Svc, action == Action::"read", resource);',
        ["invalid_action_application"],
    ),
    # attributes
    ("required attribute", f'{P} when {{ principal.name == "a" }};', []),
    ("missing attribute", f'{P} when {{ principal.nmae == "a" }};', ["attribute_not_found"]),
    ("record attribute", f"{P} when {{ context.req.n > 1 }};", []),
    ("missing record attribute", f"{P} when {{ context.req.m > 1 }};", ["attribute_not_found"]),
    ("action has no attributes", f"{P} when {{ action.name == 1 }};", ["attribute_not_found"]),
    # optional attributes and `has`
    ("optional unguarded", f"{P} when {{ principal.age > 1 }};", ["unsafe_optional_attribute"]),
    ("optional guarded by &&", f"{P} when {{ principal has age && principal.age > 1 }};", []),
    (
        "guard in an earlier when",
        f"{P} when {{ principal has age }} when {{ principal.age > 1 }};",
        [],
    ),
    (
        "guard by if",
        f"{P} when {{ if principal has age then principal.age > 1 else false }};",
        [],
    ),
    (
        "guard is lost in else",
        f"{P} when {{ if principal has age then true else principal.age > 1 }};",
        ["unsafe_optional_attribute"],
    ),
    (
        "guard by || on both sides",
        f"{P} when {{ (principal has age || principal has age) && principal.age > 1 }};",
        [],
    ),
    (
        "guard by || on one side only",
        f"{P} when {{ (principal has age || true) && principal.age > 1 }};",
        ["unsafe_optional_attribute"],
    ),
    (
        "negated guard does not protect",
        f"{P} when {{ !(principal has age) && principal.age > 1 }};",
        ["unsafe_optional_attribute"],
    ),
    (
        "nested optional guarded",
        f"{P} when {{ resource has meta && resource.meta has draft && resource.meta.draft }};",
        [],
    ),
    (
        "nested optional guarded by has path",
        f'{P} when {{ principal has address.zip && principal.address.zip == "1" }};',
        [],
    ),
    ("optional in context", f"{P} when {{ context.attempts < 3 }};", ["unsafe_optional_attribute"]),
    ("has on a set", f"{P} when {{ principal.nicknames has x }};", ["unexpected_type"]),
    # tags
    (
        "tag guarded",
        f'{P} when {{ principal.hasTag("t") && principal.getTag("t") == "v" }};',
        [],
    ),
    ("tag unguarded", f'{P} when {{ principal.getTag("t") == "v" }};', ["unsafe_tag_access"]),
    (
        "tag guarded on another entity",
        f'{P} when {{ resource.hasTag("t") && principal.getTag("t") == "v" }};',
        ["unsafe_tag_access"],
    ),
    (
        "tag type is used",
        f'{P} when {{ resource.hasTag("t") && resource.getTag("t").contains("x") }};',
        [],
    ),
    (
        "tag type mismatch",
        f'{P} when {{ resource.hasTag("t") && resource.getTag("t") == "x" }};',
        ["incompatible_types"],
    ),
    ("hasTag needs a String", f"{P} when {{ principal.hasTag(1) }};", ["unexpected_type"]),
    # like, is, in
    ("like on String", f'{P} when {{ principal.name like "a*" }};', []),
    ("like on Long", f'{P} when {{ resource.level like "1*" }};', ["unexpected_type"]),
    ("is on entity", f"{P} when {{ resource.owner is User }};", []),
    ("is on record", f"{P} when {{ context.req is User }};", ["unexpected_type"]),
    ("in hierarchy", f'{W} when {{ principal in Group::"admins" }};', []),
    ("in a set of entities", f"{P} when {{ principal in resource.readers }};", []),
    ("in on a String", f'{P} when {{ principal.name in Group::"g" }};', ["unexpected_type"]),
    ("in a set of Longs", f"{P} when {{ principal in [1, 2] }};", ["unexpected_type"]),
    # sets
    ("homogeneous set", f"{P} when {{ [1, 2, resource.level].contains(3) }};", []),
    ("empty set", f"{P} when {{ principal.nicknames.containsAll([]) }};", ["empty_set"]),
    ("mixed set", f'{P} when {{ [1, "a"].contains(1) }};', ["incompatible_types"]),
    (
        "set of different entity types",
        f'{P} when {{ principal in [User::"a", Group::"g"] }};',
        ["incompatible_types"],
    ),
    (
        "contains element type",
        f"{P} when {{ principal.nicknames.contains(1) }};",
        ["incompatible_types"],
    ),
    (
        "containsAny element types",
        f"{P} when {{ principal.nicknames.containsAny([1]) }};",
        ["incompatible_types"],
    ),
    ("isEmpty on a set", f"{P} when {{ principal.nicknames.isEmpty() }};", []),
    ("isEmpty on a String", f"{P} when {{ principal.name.isEmpty() }};", ["unexpected_type"]),
    # records and least upper bounds
    ("record equality", f"{P} when {{ context.req == {{n: 1}} }};", ["incompatible_types"]),
    ("record literal", f"{P} when {{ {{a: 1, b: true}}.a == 1 }};", []),
    ("if branches agree", f"{P} when {{ (if context.authenticated then 1 else 2) == 1 }};", []),
    (
        "if branches disagree",
        f'{P} when {{ (if context.authenticated then 1 else "a") == 1 }};',
        ["incompatible_types"],
    ),
    # equality
    ("equal types", f"{P} when {{ resource.level == 3 }};", []),
    ("incompatible equality", f'{P} when {{ resource.level == "3" }};', ["incompatible_types"]),
    ("literals of different types", f'{P} when {{ 1 == "1" }};', []),
    ("different entity types are just unequal", f"{P} when {{ principal == resource }};", []),
    # comparisons and arithmetic
    ("compare Longs", f"{P} when {{ resource.level + 1 < 4 * 2 }};", []),
    ("compare datetimes", f'{P} when {{ principal.joined < datetime("2024-01-01") }};', []),
    (
        "compare durations",
        f'{P} when {{ principal has shift && principal.shift >= duration("1h") }};',
        [],
    ),
    ("compare Strings", f'{P} when {{ principal.name < "b" }};', ["unexpected_type"] * 2),
    (
        "compare decimals",
        f'{P} when {{ decimal("1.0") < decimal("2.0") }};',
        ["unexpected_type"] * 2,
    ),
    ("compare mixed", f'{P} when {{ principal.joined < duration("1h") }};', ["unexpected_type"]),
    ("String concatenation", f"{P} when {{ principal.name + 1 == 2 }};", ["unexpected_type"]),
    ("negation of a Bool", f"{P} when {{ -context.authenticated == 1 }};", ["unexpected_type"]),
    ("condition must be Bool", f"{P} when {{ resource.level }};", ["unexpected_type"]),
    # extension functions
    ("valid ip literal", f'{P} when {{ context.ip.isInRange(ip("10.0.0.0/8")) }};', []),
    (
        "invalid ip literal",
        f'{P} when {{ context.ip.isInRange(ip("10.0.0.0/99")) }};',
        ["extension_argument"],
    ),
    (
        "invalid decimal literal",
        f'{P} when {{ decimal("1.23456").lessThan(decimal("1.0")) }};',
        ["extension_argument"],
    ),
    (
        "invalid datetime literal",
        f'{P} when {{ principal.joined > datetime("2024-13-01") }};',
        ["extension_argument"],
    ),
    (
        "invalid duration literal",
        f'{P} when {{ principal.joined.toTime() > duration("1y") }};',
        ["extension_argument"],
    ),
    (
        "non-literal argument",
        f"{P} when {{ ip(principal.name).isIpv4() }};",
        ["non_literal_extension_argument"],
    ),
    (
        "wrong argument count",
        f'{P} when {{ context.ip.isInRange(ip("1.2.3.4"), ip("1.2.3.4")) }};',
        ["wrong_argument_count"],
    ),
    (
        "wrong argument type",
        f'{P} when {{ decimal("1.0").lessThan(context.ip) }};',
        ["unexpected_type"],
    ),
    (
        "datetime methods",
        f'{P} when {{ principal.joined.offset(duration("1d")).toDate() > principal.joined }};',
        [],
    ),
    # the action variable and action groups
    ("action literal equality", f'{P} when {{ action == Action::"read" }};', []),
    (
        "action in its group",
        'permit(principal, action, resource) when { action in Action::"manage" };',
        [],
    ),
    (
        "action in a set with an unknown action",
        'permit(principal, action, resource) when { action in [Action::"nope"] };',
        ["unrecognized_action"],
    ),
    # unless is a negation
    ("unless Bool", f"{P} unless {{ context.authenticated }};", []),
    ("unless non-Bool", f"{P} unless {{ context.req }};", ["unexpected_type"]),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule(schema: Schema, text: str, expected: list[str]) -> None:
    assert kinds(text, schema) == expected


def test_every_failing_rule_also_has_a_passing_case() -> None:
    names = [c[0] for c in CASES]
    assert len(set(names)) == len(names)
    assert sum(1 for c in CASES if c[2] == []) >= len(CASES) // 3


# ------------------------------------------------------------------ messages and locations


def test_finding_location_and_message(schema: Schema) -> None:
    text = 'permit(principal, action == Action::"read", resource)\nwhen {\n  principal.age > 1\n};'
    [f] = findings(text, schema)
    assert f.policy_id == "policy0"
    assert f.kind == "unsafe_optional_attribute"
    assert f.span is not None and (f.span.line, f.span.column) == (3, 3)
    assert f.span.filename == "test.polang"
    assert "`age` on entity type `User`" in f.message
    assert "principal has age && ..." in f.message
    assert str(f).startswith("test.polang:3:3: [policy0] attribute `age`")


def test_context_access_message(schema: Schema) -> None:
    [f] = findings(f'{P} when {{ context.req.note == "x" }};', schema)
    assert 'in the context of Action::"read"' in f.message
    assert "context.req has note" in f.message


def test_attribute_suggestion(schema: Schema) -> None:
    [f] = findings(f'{P} when {{ principal.nmae == "a" }};', schema)
    assert "attribute `nmae` on entity type `User` not found" in f.message
    assert "did you mean `name`?" in f.message


def test_unknown_names_point_at_the_name(schema: Schema) -> None:
    text = f'{P}\nwhen {{ principal == Usr::"a" }};'
    [f] = findings(text, schema)
    assert f.message == "unknown entity type `Usr`; did you mean `User`?"
    assert f.span is not None and (f.span.line, f.span.column) == (2, 21)


def test_unknown_action_suggestion(schema: Schema) -> None:
    found = findings('permit(principal, action == Action::"reed", resource);', schema)
    assert found[0].message == 'unknown action `Action::"reed"`; did you mean `Action::"read"`?'


def test_application_hint_suggests_in(schema: Schema) -> None:
    [f] = findings('permit(principal == Group::"g", action == Action::"read", resource);', schema)
    assert f.kind == "invalid_action_application"
    assert "try replacing `==` with `in` in the principal clause" in f.message


def test_incompatible_types_message(schema: Schema) -> None:
    [f] = findings(f'{P} when {{ [1, "a"].contains(1) }};', schema)
    assert "the types Long and String are not compatible" in f.message
    assert "elements of a set" in f.message


def test_extension_literal_message(schema: Schema) -> None:
    [f] = findings(f'{P} when {{ context.ip == ip("nope") }};', schema)
    assert f.message.startswith('ip("nope") is not a valid ipaddr value')


def test_argument_count_message_counts_what_the_author_wrote(schema: Schema) -> None:
    [f] = findings(f'{P} when {{ context.ip.isInRange(ip("1.2.3.4"), ip("1.2.3.4")) }};', schema)
    assert f.message == "`.isInRange()` takes 1 argument besides its receiver, got 2"
    [f] = findings(f'{P} when {{ context.ip == ip("1.2.3.4", "x") }};', schema)
    assert f.message == "`ip()` takes 1 argument, got 2"


def test_findings_are_reported_once_per_policy(schema: Schema) -> None:
    # `write` has four environments; the same mistake is one finding
    found = findings(f"{W} when {{ context.nope }};", schema)
    assert [f.kind for f in found] == ["attribute_not_found"]


def test_findings_from_several_policies_keep_their_ids(schema: Schema) -> None:
    text = f'@id("ok")\n{P};\n@id("bad")\n{P} when {{ 1 }};\n{P} when {{ "x" }};'
    found = findings(text, schema)
    assert [(f.policy_id, f.kind) for f in found] == [
        ("bad", "unexpected_type"),
        ("policy2", "unexpected_type"),
    ]
    by_name = validate_policies({"mine": parse_policies(f"{P} when {{ 1 }};")[0]}, schema)
    assert [f.policy_id for f in by_name] == ["mine"]


def test_impossible_policy_is_a_warning(schema: Schema) -> None:
    text = f"{P} when {{ principal is Group }};"
    assert findings(text, schema) == []
    [w] = findings(text, schema, warnings=True)
    assert (w.kind, w.severity) == ("impossible_policy", "warning")
    assert "warning: policy is impossible" in str(w)


def test_scope_rules_out_environments(schema: Schema) -> None:
    # in the Group environments of `write`, `principal.age` would not exist; the scope
    # says the principal is a User, so those environments are never looked at
    assert findings(f"{W} when {{ principal is User && principal has age }};", schema) == []
    assert kinds(f"{W} when {{ principal has age }};", schema) == []
    assert kinds(f"{W} when {{ principal.active }};", schema) == ["attribute_not_found"]


def test_check_policies_raises_with_every_finding(schema: Schema) -> None:
    check_policies(parse_policies(f"{P};"), schema)
    with pytest.raises(ValidationError) as info:
        check_policies(parse_policies(f"{P} when {{ 1 }};\n{P} when {{ 2 }};"), schema)
    assert len(info.value.findings) == 2
    assert "policy validation failed with 2 errors" in str(info.value)
    assert "[policy1]" in str(info.value)


# ------------------------------------------------------------------ templates, namespaces, __cedar


def test_templates_are_checked_for_every_slot_type(schema: Schema) -> None:
    ok = (
        'permit(principal in ?principal, action == Action::"write", resource) '
        'when { principal is User && principal.name == "a" };'
    )
    assert findings(ok, schema) == []
    bad = (
        'permit(principal == ?principal, action == Action::"write", resource) '
        "when { principal.active };"
    )
    assert kinds(bad, schema) == ["attribute_not_found"]  # Group principals have no `active`


def test_namespaces_and_builtin_namespace() -> None:
    s = parse_schema(
        """
        namespace App {
          type Rec = { n: __cedar::Long };
          entity User { name: __cedar::String, rec: Rec, ip?: __cedar::ipaddr };
          entity Doc;
          action view appliesTo { principal: [User], resource: [Doc], context: {} };
        }
        """
    )
    good = (
        'permit(principal is App::User, action == App::Action::"view", resource) '
        "when { principal.rec.n > 1 && (principal has ip && principal.ip.isLoopback()) };"
    )
    assert validate_policies(parse_policies(good), s) == []
    bad = 'permit(principal, action == Action::"view", resource) when { principal is User };'
    assert [f.kind for f in validate_policies(parse_policies(bad), s)] == [
        "unrecognized_entity_type",
        "unrecognized_action",
        "invalid_action_application",
    ]


def test_open_records_from_json_schema() -> None:
    from polang.language.schema import parse_schema_json

    s = parse_schema_json(
        """{"": {"entityTypes": {"U": {"shape": {"type": "Record", "attributes": {},
        "additionalAttributes": true}}}, "actions": {"a": {"appliesTo": {
        "principalTypes": ["U"], "resourceTypes": ["U"]}}}}}"""
    )
    # an open record may have the attribute: `has` is a real test, access is not known safe
    assert (
        validate_policies(
            parse_policies("permit(principal, action, resource) when { principal has x };"), s
        )
        == []
    )
    found = validate_policies(
        parse_policies("permit(principal, action, resource) when { principal.x };"), s
    )
    assert [f.kind for f in found] == ["attribute_not_found"]
    assert "may have attributes" in found[0].message


def test_no_tags_allowed_rule(schema: Schema) -> None:
    # unreachable from policy text in strict mode (`hasTag` on a type without tags is
    # `false`, so the access is never typed); checked on the checker directly
    index = SchemaIndex(schema)
    env = index.envs[0]
    low = Lowering()
    from polang.language.parser import parse_expression

    target = low.expr(parse_expression("resource.owner"))
    svc = low.node("euid", (), EntityUID("Svc", "s"), Span(1, 1, 1, 1))
    tag = low.node("lit", (), "t", Span(1, 1, 1, 1))
    get = low.node("getTag", (svc, tag), None, Span(1, 5, 1, 9))
    issues: list[Issue] = []
    checker = EnvChecker(index, env, issues, lambda k, s: None)
    caps = frozenset({("t", svc.key, tag.key)})
    assert checker.tc(caps, get).ok is False
    assert [i.kind for i in issues] == ["no_tags_allowed"]
    assert checker.tc(EMPTY, target).ty == T.entity("User")


# ------------------------------------------------------------------ least upper bounds


def test_strict_least_upper_bounds() -> None:
    rec = T.RecordType({"a": T.AttrType(T.LONG)})
    opt = T.RecordType({"a": T.AttrType(T.LONG, required=False)})
    wide = T.RecordType({"a": T.AttrType(T.LONG), "b": T.AttrType(T.STRING)})
    assert T.lub(T.TRUE, T.FALSE) == T.BOOL
    assert T.lub(T.SetType(T.TRUE), T.SetType(T.BOOL)) == T.SetType(T.BOOL)
    assert T.lub(rec, rec) == rec
    for a, b, hint in [
        (rec, opt, T.HINT_QUALIFIER),
        (rec, wide, T.HINT_WIDTH),
        (T.entity("A"), T.entity("B"), T.HINT_ENTITY),
        (T.entity("A"), rec, T.HINT_ENTITY_RECORD),
        (T.LONG, T.STRING, T.HINT_NONE),
    ]:
        with pytest.raises(T.LubError) as info:
            T.lub(a, b)
        assert info.value.hint == hint
    # permissive mode (not used by polang, kept for completeness) joins what strict rejects
    assert T.lub(rec, wide, strict=False) == T.RecordType({"a": T.AttrType(T.LONG)}, open=True)
    assert T.lub(T.entity("A"), T.entity("B"), strict=False) == T.EntityType(frozenset("AB"))


# ------------------------------------------------------------------ differential test

cedarpy = pytest.importorskip("cedarpy")

_LEAVES = {
    "bool": ["true", "false", "context.authenticated", "principal.active", "(principal has age)"],
    "long": ["1", "resource.level", "principal.age", "context.req.n", "context.attempts"],
    "str": ['"a"', "principal.name", "principal.address.zip", 'principal.getTag("t")'],
    "ent": [
        "principal",
        "resource",
        "resource.owner",
        "principal.manager",
        'User::"u"',
        'Group::"g"',
    ],
    "set": ["principal.nicknames", "resource.readers", "[1, 2]", "[]", '[1, "a"]', "[principal]"],
}


def _exprs() -> st.SearchStrategy[str]:
    leaf = st.one_of(*(st.sampled_from(v) for v in _LEAVES.values()))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["&&", "||", "==", "!=", "<", "+", "in"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, inner, inner).map(lambda t: f"(if {t[0]} then {t[1]} else {t[2]})"),
            inner.map(lambda e: f"!{e}"),
            st.tuples(inner, st.sampled_from(["age", "name", "level", "meta", "n", "x"])).map(
                lambda t: f"({t[0]} has {t[1]})"
            ),
            st.tuples(inner, st.sampled_from(["age", "name", "level", "owner", "nope"])).map(
                lambda t: f"{t[0]}.{t[1]}"
            ),
            st.tuples(
                inner, st.sampled_from(["contains", "containsAny", "hasTag", "getTag"]), inner
            ).map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
            st.tuples(inner, st.sampled_from(["User", "Group", "Doc"])).map(
                lambda t: f"({t[0]} is {t[1]})"
            ),
            st.lists(inner, max_size=2).map(lambda xs: "[" + ", ".join(xs) + "]"),
        )

    return st.recursive(leaf, extend, max_leaves=6)


_SCOPES = st.sampled_from(
    [
        "principal, action, resource",
        'principal, action == Action::"read", resource',
        'principal is User, action in [Action::"read", Action::"write"], resource',
        'principal in Group::"g", action, resource is Folder',
        'principal, action in Action::"manage", resource',
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=_SCOPES, body=_exprs())
def test_validity_agrees_with_cedarpy(schema: Schema, scope: str, body: str) -> None:
    text = f"permit({scope}) when {{ {body} }};"
    ours = validate_policies(parse_policies(text), schema)
    theirs = cedarpy.validate_policies(text, SCHEMA_TEXT)
    assert (ours == []) == theirs.validation_passed, (
        text,
        [str(f) for f in ours],
        [str(e) for e in theirs.errors],
    )


def test_long_operator_chains(schema: Schema) -> None:
    """Chains up to the nesting limit validate like short ones (the checker walks `&&`
    and `||` chains without recursion); longer ones are refused by the parser, by name."""
    chain = " && ".join(["principal.age > 1"] * 90)
    found = findings(f"{P} when {{ principal has age && {chain} }};", schema)
    assert found == []
    found = findings(f"{P} when {{ principal has age || {chain} }};", schema)
    assert {f.kind for f in found} == {"unsafe_optional_attribute"}
    total = " + ".join(["resource.level"] * 90)
    assert findings(f"{P} when {{ {total} > 0 }};", schema) == []
    total = " + ".join(["resource.level"] * 3000)
    with pytest.raises(PolicyParseError, match=r"1:\d+: expression nests deeper than the limit"):
        findings(f"{P} when {{ {total} > 0 }};", schema)
