"""The bounded JSON reader: depth measured without recursion, every failure in the family."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.errors import PolangError, RequestError
from polang.jsonlimits import MAX_JSON_DEPTH, depth_of, json_depth, loads


def test_depth_skips_brackets_inside_strings() -> None:
    assert json_depth('{"a": "[[[[{{{{", "b": [1, [2]]}') == 3
    assert json_depth('"\\"[[["') == 0
    assert json_depth("[]") == 1


def test_deep_input_names_the_limit() -> None:
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RequestError, match=r"token 2: JSON nests deeper than the limit of 128"):
        loads(text, what="token 2", error=RequestError)


def test_unclosed_deep_input_is_refused_without_recursion() -> None:
    with pytest.raises(PolangError, match="MAX_JSON_DEPTH"):
        loads("[" * 100_000, what="body")


def test_at_the_limit_loads() -> None:
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert depth_of(loads(text, what="x")) == MAX_JSON_DEPTH
    with pytest.raises(PolangError):
        loads("[" + text + "]", what="x")


def test_invalid_json_and_bytes() -> None:
    with pytest.raises(PolangError, match=r"f\.json:1:2: invalid JSON"):
        loads("{x", what="f.json")
    with pytest.raises(PolangError, match="not UTF-8"):
        loads(b"\xff\xfe", what="b")
    with pytest.raises(PolangError, match="invalid JSON"):
        loads("1" * 5000, what="big int")
    assert loads(b'{"a": 1}', what="b") == {"a": 1}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"exp": NaN}', "NaN is not valid JSON"),
        ('{"exp": Infinity}', "Infinity is not valid JSON"),
        ("[-Infinity]", "-Infinity is not valid JSON"),
        ('{"ttl": 1e999}', "the number 1e999 is out of range"),
        ("[-" + "9" * 400 + ".0]", "out of range"),
    ],
)
def test_numbers_json_does_not_have_are_refused(text: str, words: str) -> None:
    """NaN compares false with every clock reading (an expiry that never comes) and
    ``1e999`` would be infinity: neither is a JSON number (RFC 8259 section 6)."""
    with pytest.raises(RequestError, match=words):
        loads(text, what="doc", error=RequestError)
    assert loads('{"a": 1.5e300, "b": -0.0}', what="doc") == {"a": 1.5e300, "b": -0.0}


def test_message_is_bounded() -> None:
    e = PolangError("x" * 100_000)
    assert len(str(e)) < 4100
    assert "more characters" in str(e)


def test_depth_of_decoded_values() -> None:
    v: object = 1
    for _ in range(5000):
        v = [v]
    assert depth_of(v) == MAX_JSON_DEPTH + 1
    assert depth_of({"a": [1, {"b": 2}]}) == 3


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_depth_agrees_with_decoded_depth(value: object) -> None:
    assert json_depth(json.dumps(value)) == depth_of(value)
    assert loads(json.dumps(value), what="v") == value


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{}",:\\1a ', max_size=60))
def test_arbitrary_text_only_raises_family_errors(text: str) -> None:
    with contextlib.suppress(PolangError):
        loads(text, what="t")


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "tail",
    [
        pytest.param('"' + '\\"' * 500_000, id="quote-then-escaped-quotes"),
        pytest.param('"\\' * 500_000, id="quote-backslash-repeated"),
        pytest.param('"' + "a" * 1_000_000, id="one-unclosed-string"),
        pytest.param('"a' * 500_000, id="quote-a-repeated"),
    ],
)
def test_strings_are_skipped_in_linear_time(tail: str) -> None:
    # the depth is measured only past 128 brackets; then every quote of an unclosed string
    # was scanned again to the end (n**2: a 64 KiB token took minutes, a 10 MiB body days)
    text = "[" * 200 + tail
    depth = json_depth(text)
    assert depth == 200
    with pytest.raises(PolangError, match="MAX_JSON_DEPTH"):
        loads(text, what="body")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{}",:\\a', max_size=40))
def test_depth_ignores_what_json_reads_as_strings(text: str) -> None:
    # whenever json reads the text, the brackets counted are exactly its own
    with contextlib.suppress(ValueError, RecursionError):
        assert json_depth(text) == depth_of(json.loads(text))
