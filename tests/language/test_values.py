"""What polang prints of a string: ``quote_string`` (a literal that parses back to the same
string), ``printable`` (text shown outside a literal) and ``printable_json`` (JSON lines)
never carry a control character, a line separator or a bidi control raw
(docs/security.md, "What polang prints")."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.language import ast
from polang.language.parser import parse_expression
from polang.language.values import (
    EntityUID,
    printable,
    printable_json,
    printable_lines,
    quote_string,
)

# written out here rather than imported, so that a character dropped from the library's
# set fails these tests
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
HOSTILE = [
    "\x1b[2J\x1b]0;title\x07",  # ESC: clear the screen, set the window title
    "a\x9b31mred",  # U+009B: a one-character CSI
    "line\x85next",  # NEL
    "line\u2028sep\u2029para",
    "\u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c",  # bidi overrides and marks
    "\x7f\x80\x9f",
    "\r\n\t\0\\\"'",
]
NO_SURROGATES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@pytest.mark.parametrize("s", HOSTILE)
def test_quote_string_escapes_every_unsafe_character_and_parses_back(s: str) -> None:
    q = quote_string(s)
    assert not UNSAFE.search(q)
    assert q.splitlines() == [q]  # one line, by every line break str.splitlines knows
    lit = parse_expression(q)
    assert isinstance(lit, ast.Lit) and lit.value == s


@pytest.mark.parametrize(
    ("s", "quoted"),
    [
        ("", '""'),
        ("alice", '"alice"'),
        ("".join(map(chr, range(32, 127))).replace('"', "").replace("\\", ""), None),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("del\x7f", '"del\\u{7f}"'),
        ("é", '"é"'),
    ],
)
def test_quote_string_writes_plain_text_as_it_is_and_escapes_the_rest(
    s: str, quoted: str | None
) -> None:
    """Printable ASCII but the quote and the backslash is written as it is (the usual id);
    the quote, the backslash and DEL are escaped; what is safe beyond ASCII stays."""
    q = quote_string(s)
    assert q == (f'"{s}"' if quoted is None else quoted)
    lit = parse_expression(q)
    assert isinstance(lit, ast.Lit) and lit.value == s


def test_c1_and_bidi_escapes_are_the_parser_s_own() -> None:
    assert quote_string("\x9b") == '"\\u{9b}"'
    assert quote_string("\u202e") == '"\\u{202e}"'
    assert quote_string("\x85\u2028") == '"\\u{85}\\u{2028}"'
    assert str(EntityUID("User", "a\x9bb")) == 'User::"a\\u{9b}b"'


@settings(max_examples=300, deadline=None)
@given(NO_SURROGATES)
def test_quote_string_round_trips_any_string(s: str) -> None:
    q = quote_string(s)
    assert not UNSAFE.search(q)
    lit = parse_expression(q)
    assert isinstance(lit, ast.Lit) and lit.value == s


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_printable_leaves_nothing_unsafe_and_safe_text_alone(s: str) -> None:
    p = printable(s)
    assert not UNSAFE.search(p)
    if not UNSAFE.search(s):
        assert p == s  # quotes, backslashes, brackets, non-ASCII letters: as they are


def test_printable_forms() -> None:
    assert printable('[/] a\x9b[31m\nb\u202e"é') == '[/] a\\u{9b}[31m\\nb\\u{202e}"é'
    assert printable("\ud800") == "\\u{d800}"  # a lone surrogate: UTF-8 cannot print it
    # text whose own line breaks are meant keeps them (and tabs), nothing else
    assert printable_lines("a\x9b\n\tb\r\u2028") == "a\\u{9b}\n\tb\\r\\u{2028}"


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4))
def test_printable_json_is_the_same_json_value(d: dict[str, str]) -> None:
    text = json.dumps(d, ensure_ascii=False)
    p = printable_json(text)
    assert not UNSAFE.search(p)
    assert json.loads(p) == json.loads(text)
