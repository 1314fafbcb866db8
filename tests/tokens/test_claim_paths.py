"""Claim paths: how a path finds a claim, which paths a store may name, nested tags."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.language import parse_schema
from polang.language.values import SetValue
from polang.tokens.claim_paths import (
    MAX_CLAIM_PATH_CHARS,
    MAX_CLAIM_PATH_DEPTH,
    MAX_NESTED_CLAIM_TAGS,
    Miss,
    TooManyNestedTags,
    locate,
    misspelt_claim,
    nested_tags,
    path_depth,
    path_problem,
    resolve,
)
from polang.tokens.claims import (
    MAX_SCOPE_CHARS,
    MAX_SCOPES,
    ScopeLimitError,
    check_scopes,
    claim_attributes,
    split_scopes,
)
from polang.tokens.records import ClaimMapping

KEYCLOAK = {
    "realm_access": {"roles": ["editor", "offline_access"]},
    "resource_access": {"docs-api": {"roles": ["reader"]}, "my.app": {"roles": ["x"]}},
    "https://example.com/roles": ["admin"],
    "https://example.com/app_metadata": {"plan": "gold"},
    "groups": ["a", "b"],
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("groups", ["a", "b"]),
        ("realm_access.roles", ["editor", "offline_access"]),
        ("resource_access.docs-api.roles", ["reader"]),
        ("resource_access.my.app.roles", ["x"]),  # a key with a dot, found whole
        ("https://example.com/roles", ["admin"]),
        ("https://example.com/app_metadata.plan", "gold"),
        ("realm_access.missing", None),
        ("groups.x", None),  # an array is not walked
        ("nothing", None),
    ],
)
def test_resolve(path: str, value: Any) -> None:
    assert resolve(KEYCLOAK, path) == value


def test_a_top_level_claim_named_like_the_path_wins() -> None:
    claims = {"a.b": 1, "a": {"b": 2}}
    assert resolve(claims, "a.b") == 1
    assert nested_tags(claims) == {}  # the nested "a.b" is shadowed, not a second tag


def test_locate_says_where_it_stopped() -> None:
    miss = locate(KEYCLOAK, "realm_access.role")
    assert isinstance(miss, Miss)
    assert miss.describe() == "'realm_access' has no 'role'; did you mean 'realm_access.roles'?"
    assert locate({"realm_access": 5}, "realm_access.roles").describe() == (
        "'realm_access' is an integer, not an object with 'roles'"
    )
    assert locate({}, "groups").describe() == "the token has no 'groups'"
    assert locate({"groups": None}, "groups").describe() == "'groups' is null"
    assert locate({"a": {"b": None}}, "a.b").describe() == "'a.b' is null"
    assert locate(KEYCLOAK, "groups") == ["a", "b"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("", "must not be empty"),
        ("x" * (MAX_CLAIM_PATH_CHARS + 1), "MAX_CLAIM_PATH_CHARS"),
        (".".join("abcdefghi"), "9 levels deep"),
        ("a..b", "empty part"),
        ("a.", "empty part"),
        (" a", "whitespace"),
        ("a\nb", "control character"),
        ("$.a.b", "JSONPath"),
        ("/a/b", "JSON Pointer"),
        ("groups[0]", "objects only"),
        ("groups['a']", "objects only"),
    ],
)
def test_paths_a_store_may_not_name(path: str, says: str) -> None:
    problem = path_problem(path)
    assert problem is not None and says in problem


@pytest.mark.parametrize(
    "path",
    [
        "roles",
        "realm_access.roles",
        "https://example.com/roles",
        "https://a.b.c.d.e.f.g.h.example.com/x",  # host dots are not levels
        ".".join("abcdefgh"),
        "x" * MAX_CLAIM_PATH_CHARS,
        "cognito:groups",
        "allowed-origins",
    ],
)
def test_paths_a_store_may_name(path: str) -> None:
    assert path_problem(path) is None


def test_depth_counts_no_dots_of_a_url_host() -> None:
    assert path_depth("https://a.example.com/app_metadata.plan") == 2
    assert path_depth("a.b.c") == 3


def test_misspelt_well_known_claims() -> None:
    assert misspelt_claim("realm_acess.roles") == "realm_access"
    assert misspelt_claim("resource_acces.api.roles") == "resource_access"
    assert misspelt_claim("realm_access.roles") is None
    assert misspelt_claim("scopes") is None and misspelt_claim("group") is None
    assert misspelt_claim("my_claim") is None


def test_nested_tags_by_path() -> None:
    tags = nested_tags(KEYCLOAK)
    assert tags["realm_access.roles"] == ["editor", "offline_access"]
    assert tags["resource_access.docs-api.roles"] == ["reader"]
    assert tags["resource_access.docs-api"] == {"roles": ["reader"]}
    assert tags["https://example.com/app_metadata.plan"] == "gold"
    assert "groups" not in tags and "realm_access" not in tags  # top-level claims are not here


def test_nested_tags_are_bounded() -> None:
    wide = {"o": {f"k{i}": i for i in range(MAX_NESTED_CLAIM_TAGS + 1)}}
    with pytest.raises(TooManyNestedTags, match="MAX_NESTED_CLAIM_TAGS"):
        nested_tags(wide)
    assert len(nested_tags({"o": {f"k{i}": i for i in range(MAX_NESTED_CLAIM_TAGS)}})) == (
        MAX_NESTED_CLAIM_TAGS
    )
    deep: Any = 1
    for _ in range(100):
        deep = {"d": deep}
    tags = nested_tags({"top": deep})
    assert max(p.count(".") for p in tags) + 1 == MAX_CLAIM_PATH_DEPTH


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=30,
    ),
    st.text(max_size=20),
)
def test_any_token_and_path_resolve_without_error(claims: Any, path: str) -> None:
    """Whatever a token holds and whatever path a store names: a value, None or a Miss."""
    if not isinstance(claims, dict):
        claims = {"c": claims}
    resolve(claims, path)
    found = locate(claims, path)
    if isinstance(found, Miss):
        assert isinstance(found.describe(), str)
    nested_tags(claims)


# ---------------------------------------------------------------- scopes


def test_split_scopes() -> None:
    assert split_scopes("openid  docs:read ") == ["openid", "docs:read"]
    assert split_scopes("") == []
    assert split_scopes("a\tb") == ["a\tb"]
    assert len(split_scopes(" ".join(["s"] * MAX_SCOPES))) == MAX_SCOPES
    with pytest.raises(ScopeLimitError, match="MAX_SCOPES"):
        split_scopes(" ".join(["s"] * (MAX_SCOPES + 1)))
    with pytest.raises(ScopeLimitError, match="MAX_SCOPE_CHARS"):
        split_scopes("x" * (MAX_SCOPE_CHARS + 1))


def test_check_scopes_names_the_claim() -> None:
    check_scopes({"scope": "a b", "scp": ["c"], "other": ["x"] * 5000})
    with pytest.raises(ScopeLimitError, match="claim 'scp'"):
        check_scopes({"scp": ["x"] * (MAX_SCOPES + 1)})


SCHEMA = parse_schema(
    """namespace K {
        type Access = { "roles": Set<String> };
        entity T = {
            "scope"?: Set<String>,
            "scp"?: String,
            "realm_access.roles"?: Set<String>,
        } tags Set<String>;
    }"""
)


def test_declared_and_mapped_paths_are_attributes() -> None:
    shape = SCHEMA.entity_types["K::T"].shape
    mapping = {
        "resource_access.api": ClaimMapping.from_dict({"parser": "json", "type": "K::Access"}, "m")
    }
    claims = {
        "scope": "a b",
        "scp": "c d",
        "realm_access": {"roles": ["editor"]},
        "resource_access": {"api": {"roles": ["reader"]}},
    }
    attrs, tags = claim_attributes(claims, shape, mapping, SCHEMA, frozenset())
    assert attrs["scope"] == SetValue(["a", "b"])  # Set<String>: each scope
    assert attrs["scp"] == "c d"  # declared String: the text as sent
    assert tags["scp"] == SetValue(["c", "d"])
    assert attrs["realm_access.roles"] == SetValue(["editor"])
    assert attrs["resource_access.api"].fields["roles"] == SetValue(["reader"])
