"""Claims as tags, as schema-typed attributes, and through claim mappings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.language.schema import (
    BOOL,
    LONG,
    STRING,
    Attribute,
    EntityRefType,
    EntityTypeDef,
    ExtensionType,
    RecordType,
    Schema,
    SetType,
)
from polang.language.values import EntityUID, RecordValue, SetValue
from polang.tokens.claims import (
    ClaimError,
    apply_mapping,
    claim_attributes,
    first_text,
    roles_from,
    tag_value,
    to_value,
)
from polang.tokens.records import ClaimMapping

# ---------------------------------------------------------------- tags


def test_tags_are_sets_of_strings() -> None:
    assert tag_value("read") == SetValue(["read"])
    assert tag_value(["a", "b", "a"]) == SetValue(["a", "b"])
    assert tag_value(42) == SetValue(["42"])
    assert tag_value(1.5) == SetValue(["1.5"])
    assert tag_value(2.0) == SetValue(["2"])
    assert tag_value(True) == SetValue(["true"])
    assert tag_value({"b": 1, "a": [1, 2]}) == SetValue(['{"b":1,"a":[1,2]}'])
    assert tag_value([1, {"x": "é"}, None]) == SetValue(["1", '{"x":"é"}'])
    assert tag_value(None) is None
    assert tag_value([]) == SetValue([])


json_scalars = st.one_of(
    st.text(max_size=20),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(max_examples=60)
@given(json_values)
def test_every_claim_becomes_a_set_of_strings(v: Any) -> None:
    tag = tag_value(v)
    assert isinstance(tag, SetValue)
    assert all(isinstance(e, str) for e in tag)
    if isinstance(v, list):
        assert len(tag) <= len(v)
    else:
        assert len(tag) == 1
    if isinstance(v, dict):
        (text,) = list(tag)
        assert json.loads(text) == v


# ---------------------------------------------------------------- typed


def test_conversion_to_declared_types() -> None:
    assert to_value(5, LONG, "c") == 5
    assert to_value(5.0, LONG, "c") == 5
    assert to_value("12", LONG, "c") == 12
    assert to_value(["x"], STRING, "c") == "x"
    assert to_value(7, STRING, "c") == "7"
    assert to_value("true", BOOL, "c") is True
    assert to_value("a", SetType(STRING), "c") == SetValue(["a"])
    assert to_value(["a", "b"], SetType(STRING), "c") == SetValue(["a", "b"])
    assert to_value("u1", EntityRefType("Acme::User"), "c") == EntityUID("Acme::User", "u1")
    rec = RecordType({"n": Attribute(LONG), "s": Attribute(STRING, required=False)})
    assert to_value({"n": 1, "extra": 2}, rec, "c") == RecordValue({"n": 1})
    open_rec = RecordType({"n": Attribute(LONG)}, additional=True)
    assert to_value({"n": 1, "extra": "x"}, open_rec, "c") == RecordValue({"n": 1, "extra": "x"})


@pytest.mark.parametrize(
    ("value", "t", "fragment"),
    [
        (1.5, LONG, "not a whole number"),
        (True, LONG, "got a boolean"),
        ("x1", LONG, "got the string"),
        (2**64, LONG, "64-bit"),
        ("yes", BOOL, "expected a Bool"),
        ({"a": 1}, STRING, "an object"),
        ({"s": "x"}, RecordType({"n": Attribute(LONG)}), "'n' is missing"),
        (3, EntityRefType("A::U"), "entity id"),
        ("1.5", ExtensionType("decimal"), "extension type decimal"),
    ],
)
def test_conversion_errors_name_the_claim(value: Any, t: Any, fragment: str) -> None:
    with pytest.raises(ClaimError, match=fragment) as e:
        to_value(value, t, "claim 'c'")
    assert "claim 'c'" in str(e.value)


def test_untyped_conversion() -> None:
    assert to_value({"a": [1, 2], "b": None}, None, "c") == RecordValue({"a": SetValue([1, 2])})


# ---------------------------------------------------------------- mappings

EMAIL = ClaimMapping.from_dict(
    {
        "parser": "regex",
        "type": "Acme::email_address",
        "regex_expression": r"^(?P<UID>[^@]+)@(?P<DOMAIN>.+)$",
        "UID": {"attr": "uid", "type": "String"},
        "DOMAIN": {"attr": "domain", "type": "String"},
    },
    "cm.email",
)
TYPED = ClaimMapping.from_dict(
    {
        "parser": "regex",
        "type": "Acme::Level",
        "regex_expression": r"(?x) ^ L (?P<n>[0-9.]*) \# (?P<flag>[a-z]*) $",
        "n": {"attr": "level", "type": "Number"},
        "flag": {"attr": "flagged", "type": "Boolean"},
    },
    "cm.lvl",
)
JSON = ClaimMapping.from_dict({"parser": "json", "type": "Acme::Address"}, "cm.addr")


def test_regex_mapping() -> None:
    assert apply_mapping("ann@example.com", EMAIL, "c") == {"uid": "ann", "domain": "example.com"}
    assert apply_mapping("no at sign", EMAIL, "c") is None
    assert apply_mapping(["a@b", "x", "c@d"], EMAIL, "c") == [
        {"uid": "a", "domain": "b"},
        {"uid": "c", "domain": "d"},
    ]
    with pytest.raises(ClaimError, match="needs a string"):
        apply_mapping(5, EMAIL, "c")


def test_regex_typing_number_and_boolean() -> None:
    assert apply_mapping("L3#x", TYPED, "c") == {"level": 3.0, "flagged": True}
    assert apply_mapping("L#", TYPED, "c") == {"level": 0.0, "flagged": False}
    assert apply_mapping("L1.2.3#", TYPED, "c") == {"level": 0.0, "flagged": False}


def test_json_mapping() -> None:
    assert apply_mapping({"city": "Oslo"}, JSON, "c") == {"city": "Oslo"}
    assert apply_mapping('{"city": "Oslo"}', JSON, "c") == {"city": "Oslo"}
    with pytest.raises(ClaimError, match="JSON object"):
        apply_mapping("[1]", JSON, "c")
    with pytest.raises(ClaimError, match="JSON object"):
        apply_mapping("{bad", JSON, "c")
    # a claim string holding JSON nested past the limit is a claim error, not a crash
    deep = '{"a":' * 5_000 + "1" + "}" * 5_000
    with pytest.raises(ClaimError, match="deeper than the limit of 128 levels"):
        apply_mapping(deep, JSON, "c")


EMAIL_T = RecordType({"uid": Attribute(STRING), "domain": Attribute(STRING)})
ADDRESS_T = RecordType({"city": Attribute(STRING), "zip": Attribute(LONG, required=False)})
LEVEL_T = RecordType({"level": Attribute(LONG), "flagged": Attribute(BOOL)})
SCHEMA = Schema(
    entity_types={
        "Acme::Access_token": EntityTypeDef(
            name="Acme::Access_token",
            shape=RecordType(
                {
                    "scope": Attribute(SetType(STRING), required=False),
                    "iat": Attribute(LONG, required=False),
                    "email": Attribute(EMAIL_T, required=False),
                }
            ),
            tags=SetType(STRING),
        )
    },
    common_types={
        "Acme::email_address": EMAIL_T,
        "Acme::Address": ADDRESS_T,
        "Acme::Level": LEVEL_T,
    },
)


def test_declared_and_mapped_claims_are_attributes_as_well_as_tags() -> None:
    shape = SCHEMA.entity_types["Acme::Access_token"].shape
    claims = {
        "scope": "read write",
        "iat": 100,
        "email": "ann@example.com",
        "address": '{"city": "Oslo", "zip": 150}',
        "lvl": "L2#y",
        "sub": "ann",
        "groups": ["a", "b"],
    }
    mappings = {"email": EMAIL, "address": JSON, "lvl": TYPED}
    attrs, tags = claim_attributes(claims, shape, mappings, SCHEMA, frozenset())
    assert attrs == {
        "scope": SetValue(["read", "write"]),  # a space-delimited list (RFC 9068 2.2.3)
        "iat": 100,
        "email": RecordValue({"uid": "ann", "domain": "example.com"}),
        "address": RecordValue({"city": "Oslo", "zip": 150}),
        "lvl": RecordValue({"level": 2, "flagged": True}),
    }
    # every claim is also a tag (policies may use either form)
    assert tags == {
        "scope": SetValue(["read", "write"]),
        "iat": SetValue(["100"]),
        "email": SetValue(["ann@example.com"]),
        "address": SetValue(['{"city": "Oslo", "zip": 150}']),
        "lvl": SetValue(["L2#y"]),
        "sub": SetValue(["ann"]),
        "groups": SetValue(["a", "b"]),
    }


def test_unmatched_mapping_leaves_the_claim_a_tag() -> None:
    attrs, tags = claim_attributes({"email": "nobody"}, None, {"email": EMAIL}, None, frozenset())
    assert attrs == {} and tags == {"email": SetValue(["nobody"])}


def test_mapping_without_schema_gives_an_untyped_record() -> None:
    attrs, _ = claim_attributes({"lvl": "L4#"}, None, {"lvl": TYPED}, None, frozenset())
    assert attrs == {"lvl": RecordValue({"level": 4, "flagged": False})}


def test_roles_and_ids() -> None:
    claims = {"role": ["admin", "dev"], "groups": "ops", "other": 3}
    assert roles_from(claims, ("role", "groups", "missing", "other")) == ["admin", "dev", "ops"]
    assert roles_from(claims, ()) == []
    assert first_text(["client-a", "client-b"]) == "client-a"
    assert first_text(12) == "12"
    assert first_text(None) is None and first_text({"a": 1}) is None
