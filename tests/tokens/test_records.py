"""Trusted issuer records and token metadata: every field, default and rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from polang.inputs.problems import Problems
from polang.tokens.records import (
    DEFAULT_ENTITY_TYPES,
    IssuerSettings,
    compile_claim_regex,
    parse_issuer_map,
    parse_trusted_issuer,
)

ENDPOINT = "https://idp.example.com/.well-known/openid-configuration"


def record(**changes: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "name": "Idp",
        "description": "the test issuer",
        "openid_configuration_endpoint": ENDPOINT,
        "token_metadata": {"access_token": {"entity_type_name": "Idp::Access_token"}},
    }
    rec.update(changes)
    return rec


def token(**fields: Any) -> dict[str, Any]:
    return record(token_metadata={"access_token": {"entity_type_name": "Idp::Tok", **fields}})


def parse(
    rec: object, issuer_id: str = "idp", *, strict: bool = True
) -> tuple[IssuerSettings | None, Problems]:
    problems = Problems("test", strict=strict)
    out = parse_trusted_issuer(issuer_id, rec, file="issuers.json", path="$.idp", problems=problems)
    return out, problems


def only_problem(rec: object) -> tuple[str, str, str]:
    out, problems = parse(rec)
    assert out is None
    assert len(problems) == 1, [str(p) for p in problems.items]
    p = problems.items[0]
    assert p.file == "issuers.json"
    return p.kind, p.location or "", p.message


def test_defaults_of_the_spec() -> None:
    out, problems = parse(record())
    assert not problems
    assert out is not None
    assert out.issuer_id == "idp"
    assert out.name == "Idp"
    assert out.description == "the test issuer"
    tm = out.token_metadata["access_token"]
    assert tm.entity_type_name == "Idp::Access_token"
    assert tm.trusted is True
    assert tm.token_id == "jti"
    assert tm.user_id == "sub"
    assert tm.workload_id == "aud"
    assert tm.role_mapping == ("role",)
    assert tm.role_mapping_explicit is False
    assert tm.principal_mapping == ()
    assert tm.required_claims == ()
    assert tm.claim_mapping == {}
    assert out.metadata_for("Idp::Access_token") == ("access_token", tm)
    assert out.metadata_for("Idp::Other") is None


def test_every_field_set() -> None:
    out, problems = parse(
        token(
            trusted=False,
            token_id="sid",
            user_id="email",
            workload_id="client_id",
            role_mapping=["role", "groups"],
            principal_mapping=["Idp::Workload", "Idp::User"],
            required_claims=["exp", "iss"],
        )
    )
    assert not problems
    assert out is not None
    tm = out.token_metadata["access_token"]
    assert tm.trusted is False
    assert (tm.token_id, tm.user_id, tm.workload_id) == ("sid", "email", "client_id")
    assert tm.role_mapping == ("role", "groups")
    assert tm.role_mapping_explicit is True
    assert tm.principal_mapping == ("Idp::Workload", "Idp::User")
    assert tm.required_claims == ("exp", "iss")


def test_role_mapping_forms() -> None:
    for value, expected in [("roles", ("roles",)), ("", ()), (["a"], ("a",)), ([], ())]:
        out, problems = parse(token(role_mapping=value))
        assert not problems
        assert out is not None
        assert out.token_metadata["access_token"].role_mapping == expected
    rpath = "$.idp.token_metadata.access_token.role_mapping"
    for bad, where in [(5, ""), ({"a": 1}, ""), ([""], "[0]"), (["a", 3], "[1]")]:
        kind, loc, _ = only_problem(token(role_mapping=bad))
        assert (kind, loc) == ("invalid_field", rpath + where)


def test_standard_token_names_have_default_entity_types() -> None:
    tm: dict[str, dict[str, Any]] = {name: {} for name in DEFAULT_ENTITY_TYPES}
    out, problems = parse(record(token_metadata=tm))
    assert not problems
    assert out is not None
    got = {k: v.entity_type_name for k, v in out.token_metadata.items()}
    assert got == DEFAULT_ENTITY_TYPES


def test_null_fields_mean_not_given() -> None:
    out, problems = parse(token(entity_type_name=None, role_mapping=None, trusted=None))
    assert not problems
    assert out is not None
    tm = out.token_metadata["access_token"]
    assert tm.entity_type_name == "Svc::Access_token" and tm.trusted
    assert tm.role_mapping == ("role",) and not tm.role_mapping_explicit
    # a null entity_type_name of a custom token name is still missing
    kind, loc, _ = only_problem(record(token_metadata={"badge": {"entity_type_name": None}}))
    assert (kind, loc) == ("missing_field", "$.idp.token_metadata.badge.entity_type_name")


def test_custom_token_names_need_an_entity_type() -> None:
    kind, loc, msg = only_problem(record(token_metadata={"badge": {"trusted": True}}))
    assert kind == "missing_field"
    assert loc == "$.idp.token_metadata.badge.entity_type_name"
    assert "access_token" in msg
    out, problems = parse(record(token_metadata={"badge": {"entity_type_name": "Idp::Badge"}}))
    assert out is not None and not problems


@pytest.mark.parametrize(
    ("rec", "kind", "location"),
    [
        ("not an object", "invalid_field", "$.idp"),
        (record(name=None), "missing_field", "$.idp.name"),
        (record(name="Has Space"), "issuer", "$.idp.name"),
        (record(name=7), "invalid_field", "$.idp.name"),
        (
            record(openid_configuration_endpoint=None),
            "missing_field",
            "$.idp.openid_configuration_endpoint",
        ),
        (
            record(openid_configuration_endpoint="http://idp.example.com/x"),
            "issuer",
            "$.idp.openid_configuration_endpoint",
        ),
        (
            record(openid_configuration_endpoint="https:///nohost"),
            "issuer",
            "$.idp.openid_configuration_endpoint",
        ),
        (
            record(openid_configuration_endpoint="https://u:p@idp.example.com/x"),
            "issuer",
            "$.idp.openid_configuration_endpoint",
        ),
        (record(tokens_metadata={}), "deprecated_field", "$.idp.tokens_metadata"),
        (record(issuer="x"), "unknown_field", "$.idp.issuer"),
        (record(token_metadata=[]), "invalid_field", "$.idp.token_metadata"),
        (
            token(entity_type_name="Access_token"),
            "issuer",
            "$.idp.token_metadata.access_token.entity_type_name",
        ),
        (token(trusted="yes"), "invalid_field", "$.idp.token_metadata.access_token.trusted"),
        (token(token_id=""), "invalid_field", "$.idp.token_metadata.access_token.token_id"),
        (token(user_id=5), "invalid_field", "$.idp.token_metadata.access_token.user_id"),
        (
            token(principal_mapping="Idp::User"),
            "invalid_field",
            "$.idp.token_metadata.access_token.principal_mapping",
        ),
        (
            token(principal_mapping=["User"]),
            "issuer",
            "$.idp.token_metadata.access_token.principal_mapping[0]",
        ),
        (
            token(required_claims="exp"),
            "invalid_field",
            "$.idp.token_metadata.access_token.required_claims",
        ),
        (
            token(required_claim=["exp"]),
            "unknown_field",
            "$.idp.token_metadata.access_token.required_claim",
        ),
        (
            token(claim_mapping=[]),
            "invalid_field",
            "$.idp.token_metadata.access_token.claim_mapping",
        ),
    ],
)
def test_field_rules(rec: object, kind: str, location: str) -> None:
    got_kind, got_loc, _ = only_problem(rec)
    assert (got_kind, got_loc) == (kind, location)


def test_unknown_fields_suggest_the_known_one() -> None:
    _, _, msg = only_problem(token(required_claim=["exp"]))
    assert "did you mean 'required_claims'" in msg
    _, _, msg = only_problem(record(tokens_metadata={}))
    assert "'token_metadata'" in msg


def test_two_tokens_of_one_entity_type_are_ambiguous() -> None:
    tm = {"a": {"entity_type_name": "Idp::T"}, "b": {"entity_type_name": "Idp::T"}}
    kind, loc, msg = only_problem(record(token_metadata=tm))
    assert (kind, loc) == ("issuer", "$.idp.token_metadata.b.entity_type_name")
    assert "token 'a'" in msg


# ---------------------------------------------------------------- claim mapping

CM = "$.idp.token_metadata.access_token.claim_mapping.emp"


def mapping(**m: Any) -> dict[str, Any]:
    return token(claim_mapping={"emp": m})


def test_regex_mapping_compiles_with_groups() -> None:
    out, problems = parse(
        mapping(
            parser="regex",
            type="Idp::Employee",
            regex_expression=r"^(?P<DEPT>[a-z]+)-(?P<NUM>\d+)-(?P<ACTIVE>.*)$",
            DEPT={"attr": "department", "type": "String"},
            NUM={"attr": "number", "type": "Number"},
            ACTIVE={"attr": "active", "type": "Boolean"},
        )
    )
    assert not problems, problems.items
    assert out is not None
    cm = out.token_metadata["access_token"].claim_mapping["emp"]
    assert cm.parser == "regex"
    assert cm.type == "Idp::Employee"
    assert cm.pattern is not None
    m = cm.pattern.match("sales-42-x")
    assert m is not None and m.group("NUM") == "42"
    assert {k: (g.attr, g.type) for k, g in cm.groups.items()} == {
        "DEPT": ("department", "String"),
        "NUM": ("number", "Number"),
        "ACTIVE": ("active", "Boolean"),
    }


def test_verbose_regex_needs_escaped_hash() -> None:
    expr = r"(?x) ^ (?P<DEPT>[a-z]+) \# (?P<NUM>[0-9]+) $"
    pattern = compile_claim_regex(expr)
    m = pattern.match("sales#42")
    assert m is not None and m.group("DEPT") == "sales" and m.group("NUM") == "42"
    out, problems = parse(
        mapping(
            parser="regex",
            type="Idp::Employee",
            regex_expression=expr,
            DEPT={"attr": "d", "type": "String"},
            NUM={"attr": "n", "type": "String"},
        )
    )
    assert out is not None and not problems
    # an unescaped '#' starts a comment: the second group disappears, and the message says why
    kind, loc, msg = only_problem(
        mapping(
            parser="regex",
            type="Idp::Employee",
            regex_expression="(?x) ^ (?P<DEPT>[a-z]+) # (?P<NUM>[0-9]+) $",
            DEPT={"attr": "d", "type": "String"},
            NUM={"attr": "n", "type": "String"},
        )
    )
    assert (kind, loc) == ("issuer", f"{CM}.NUM")
    assert "\\#" in msg


def test_other_engines_named_group_spelling_is_accepted() -> None:
    pattern = compile_claim_regex(r"(?<user>\w+)@(?P<domain>[\w.]+)\Z")
    m = pattern.search("ann@example.com")
    assert m is not None and m.group("user") == "ann" and m.group("domain") == "example.com"


@pytest.mark.parametrize(
    ("expr", "construct"),
    [
        (r"(?P<A>x)\1", r"a backreference (\1)"),
        (r"(?P<A>x)(?P=A)", "a backreference (?P=name)"),
        (r"(?P<A>x)(?=y)", "a lookahead (?=...)"),
        (r"(?P<A>x)(?!y)", "a negative lookahead (?!...)"),
        (r"(?<=y)(?P<A>x)", "a lookbehind (?<=...)"),
        (r"(?<!y)(?P<A>x)", "a negative lookbehind (?<!...)"),
        (r"(?>(?P<A>x))", "an atomic group (?>...)"),
    ],
)
def test_constructs_without_linear_time_matching_refuse_the_record(
    expr: str, construct: str
) -> None:
    # claim_mapping regexes are RE2 (linear time): what RE2 cannot match in linear time is
    # refused when the store loads, at the expression, naming the construct
    kind, loc, msg = only_problem(
        mapping(
            parser="regex",
            type="Idp::E",
            regex_expression=expr,
            A={"attr": "a", "type": "String"},
        )
    )
    assert (kind, loc) == ("issuer", f"{CM}.regex_expression")
    assert f"{construct} is not supported" in msg
    assert "RE2 syntax, matched in linear time" in msg


def test_json_mapping() -> None:
    out, problems = parse(mapping(parser="json", type="Idp::Address"))
    assert out is not None and not problems
    cm = out.token_metadata["access_token"].claim_mapping["emp"]
    assert (cm.parser, cm.type, cm.pattern) == ("json", "Idp::Address", None)


@pytest.mark.parametrize(
    ("m", "kind", "location"),
    [
        ({"type": "Idp::E"}, "missing_field", f"{CM}.parser"),
        ({"parser": "xml", "type": "Idp::E"}, "issuer", f"{CM}.parser"),
        ({"parser": "json"}, "missing_field", f"{CM}.type"),
        ({"parser": "json", "type": "E"}, "issuer", f"{CM}.type"),
        ({"parser": "json", "type": "Idp::E", "extra": 1}, "unknown_field", f"{CM}.extra"),
        ({"parser": "regex", "type": "Idp::E"}, "missing_field", f"{CM}.regex_expression"),
        (
            {"parser": "regex", "type": "Idp::E", "regex_expression": "(unclosed"},
            "issuer",
            f"{CM}.regex_expression",
        ),
        (
            {"parser": "regex", "type": "Idp::E", "regex_expression": "(?P<A>x)"},
            "issuer",
            f"{CM}.A",
        ),
        (
            {
                "parser": "regex",
                "type": "Idp::E",
                "regex_expression": "(?P<A>x)",
                "A": {"attr": "a", "type": "Float"},
            },
            "issuer",
            f"{CM}.A.type",
        ),
        (
            {
                "parser": "regex",
                "type": "Idp::E",
                "regex_expression": "(?P<A>x)",
                "A": {"type": "String"},
            },
            "missing_field",
            f"{CM}.A.attr",
        ),
        (
            {"parser": "regex", "type": "Idp::E", "regex_expression": "(?P<A>x)", "A": "String"},
            "invalid_field",
            f"{CM}.A",
        ),
        (
            {
                "parser": "regex",
                "type": "Idp::E",
                "regex_expression": "(?P<A>x)",
                "A": {"attr": "a", "type": "String"},
                "B": {"attr": "b", "type": "String"},
            },
            "issuer",
            f"{CM}.B",
        ),
    ],
)
def test_claim_mapping_rules(m: dict[str, Any], kind: str, location: str) -> None:
    got_kind, got_loc, _ = only_problem(mapping(**m))
    assert (got_kind, got_loc) == (kind, location)


def test_issuer_maps_collect_every_problem() -> None:
    problems = Problems("test")
    good = record()
    bad = copy.deepcopy(good)
    bad["openid_configuration_endpoint"] = "ftp://x"
    out = parse_issuer_map(
        {"a": good, "b": bad, "c": 3}, file="f.json", path="$", problems=problems
    )
    assert set(out) == {"a"}
    assert [p.location for p in problems.items] == ["$.b.openid_configuration_endpoint", "$.c"]
    problems = Problems("test")
    assert parse_issuer_map([], file="f.json", path="$", problems=problems) == {}
    assert problems.items[0].kind == "invalid_field"


def test_no_issuer_at_all_is_fine() -> None:
    problems = Problems("test")
    assert parse_issuer_map({}, file="f.json", path="$", problems=problems) == {}
    assert not problems
