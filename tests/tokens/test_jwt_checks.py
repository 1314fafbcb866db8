"""The JWT checks on their own: malformed input never escapes as anything but a drop."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.tokens import TokenInput, TokenProcessor
from polang.tokens.jwt_checks import check_required, check_times, decode_unverified
from polang.tokens.model import TokenDrop


def b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


@given(st.text(max_size=200))
def test_decoding_arbitrary_text_only_ever_drops(text: str) -> None:
    try:
        decode_unverified(text)
    except TokenDrop as e:
        assert e.kind == "invalid_input"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=60)
@given(json_values, json_values)
def test_arbitrary_json_parts_only_ever_drop(header: object, payload: object) -> None:
    token = f"{b64(header)}.{b64(payload)}.c2ln"
    try:
        d = decode_unverified(token)
    except TokenDrop as e:
        assert e.kind == "invalid_input"
    else:
        assert isinstance(d.header, dict) and isinstance(d.payload, dict)


@settings(max_examples=60)
@given(
    st.dictionaries(
        st.sampled_from(["iss", "sub", "aud", "exp", "nbf", "iat", "jti", "x"]), json_values
    )
)
def test_claim_checks_only_ever_drop(claims: dict[str, object]) -> None:
    for check in (
        lambda: check_times(claims, 1_000.0, 0),
        lambda: check_required(claims, ("iss", "sub", "aud", "exp", "jti", "x")),
    ):
        try:
            check()
        except TokenDrop as e:
            assert e.kind in ("invalid_input", "missing_claim", "expired", "not_yet_valid")


@given(st.text(max_size=40), st.text(max_size=80))
def test_processing_never_raises(mapping: str, payload: str) -> None:
    proc = TokenProcessor([])
    out = proc.process([TokenInput(mapping, payload), {"mapping": mapping, "payload": payload}])
    assert len(out.dropped) == 2 and not out.tokens


def test_decoded_parts() -> None:
    d = decode_unverified(f"{b64({'alg': 'ES256', 'kid': 'k'})}.{b64({'a': 1})}.c2ln")
    assert d.header == {"alg": "ES256", "kid": "k"} and d.payload == {"a": 1}


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ({"typ": "JWT"}, "no 'alg'"),
        ({"alg": "RS256", "kid": 7}, "'kid' is not a string"),
    ],
)
def test_header_requirements(header: dict[str, object], fragment: str) -> None:
    with pytest.raises(TokenDrop, match=fragment):
        decode_unverified(f"{b64(header)}.{b64({})}.c2ln")
