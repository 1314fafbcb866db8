"""Claim-mapping regexes: RE2 (linear time), the spellings kept from Python's syntax, the
Unicode meaning of \\d \\w \\s, and what happens without the re2 module."""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.tokens import claim_regex
from polang.tokens.claim_regex import (
    MAX_MAPPED_CLAIM_CHARS,
    ClaimRegexError,
    compile_claim_regex,
    to_re2_syntax,
)
from polang.tokens.claims import ClaimError, apply_mapping
from polang.tokens.records import ClaimMapping

# A pattern with nested quantifiers: Python's re needs 2**n steps to fail on n letters and
# a "!" (six seconds at 28 letters), RE2 one pass.
NESTED = r"^(?P<USER>(?:[a-zA-Z0-9]+\.?)+)@example\.com$"


@pytest.mark.timeout(10)
def test_nested_quantifiers_fail_in_linear_time() -> None:
    pattern = compile_claim_regex(NESTED)
    assert pattern.search("a" * 40 + "!") is None  # 2**40 steps for a backtracking engine
    assert pattern.search("a" * 100_000 + "!") is None
    found = pattern.search("john.doe@example.com")
    assert found is not None and found.group("USER") == "john.doe"
    # the same groups as Python's engine gives for a string it can answer quickly
    assert re.search(NESTED, "john.doe@example.com").group("USER") == "john.doe"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("expr", "re2"),
    [
        (r"(?x) ^ (?P<D>[a-z]+) \# (?P<N>[0-9]+) $", r"^(?P<D>[a-z]+)\#(?P<N>[0-9]+)$"),
        (r"(?x) a b  # a comment" "\n" r" c", "abc"),
        (r"(?x) [ #a] \  b", r"[ #a]\ b"),  # classes and escaped spaces are kept
        (r"(?x:a b)c d(?-x: e f)", "(?:ab)c d(?: e f)"),  # x is scoped like any flag
        (r"(?ix)A b(?-ix)c d", "(?i)Ab(?-i)c d"),
        (r"(a b(?x) c d)e f", "(a bcd)e f"),  # (?x) lasts to the end of its group
        (r"[]x ]y\]z", r"[]x ]y\]z"),
        (r"[[:alpha:] ]+ x", r"[[:alpha:] ]+ x"),
        (r"end\Z", r"end\z"),
        (r"(?<n>x)(?P<m>y)", r"(?<n>x)(?P<m>y)"),
        (r"\d+\D", r"\p{Nd}+\P{Nd}"),
        (r"[^\D]", r"[^\P{Nd}]"),
        (r"[\]\d-]", r"[\]\p{Nd}-]"),  # an escaped ']' does not close the class
        (r"[[:alpha:]\d]", r"[[:alpha:]\p{Nd}]"),  # nor does a POSIX class
        (r"(?x) \d \  \d # c", r"\p{Nd}\ \p{Nd}"),
        (r"\\d[\\d]", r"\\d[\\d]"),  # a backslash, then a letter
        (r"\Q\d \E\d", r"\Q\d \E\p{Nd}"),  # RE2's literal text is literal
        (r"[+--\d][a-c-\d]", r"[+--\p{Nd}][a-c-\p{Nd}]"),  # after a range, '-' is a literal
        (r"\bx\B", r"\bx\B"),  # ASCII boundaries, as RE2 has them
    ],
)
def test_python_spellings_become_re2(expr: str, re2: str) -> None:
    assert to_re2_syntax(expr) == re2


@pytest.mark.parametrize(
    ("expr", "texts"),
    [
        (r"(?x) ^ (?P<D>[a-z]+) \# (?P<N>[0-9]+) $", ["sales#42", "sales#", "x#1#2"]),
        (r"(?x) ^ L (?P<n>[0-9.]*) \# (?P<f>[a-z]*) $", ["L3#x", "L#", "L1.2.3#"]),
        (r"(?x) (?P<a> [ #]+ ) (?P<b> \ x )", ["  # x", "# x", "x"]),
        (r"(?P<a>x(?x: y z )) w", ["xyz w", "x y z w"]),
        (r"^(?P<u>[^@]+)@(?P<d>.+)\Z", ["ann@example.com", "no at", "a@b@c"]),
    ],
)
def test_verbose_patterns_match_as_python_matched_them(expr: str, texts: list[str]) -> None:
    mine, python = compile_claim_regex(expr), re.compile(expr)
    for text in texts:
        a, b = mine.search(text), python.search(text)
        assert (a is None) == (b is None), text
        if a is not None and b is not None:
            assert {g: a.group(g) for g in python.groupindex} == b.groupdict(), text


def test_errors_say_rust_and_re2_syntax_and_where() -> None:
    with pytest.raises(ClaimRegexError, match=r"missing \)"):
        compile_claim_regex("(?P<a>x")
    with pytest.raises(ClaimRegexError, match=r"a lookahead \(\?=\.\.\.\) is not supported"):
        compile_claim_regex("(?=x)")


def test_without_the_re2_module_regex_mappings_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes `import re2` raise ImportError, as on a platform without a
    # wheel; a backtracking fallback would bring the attack back, so the store is refused
    try:
        with monkeypatch.context() as patched:
            patched.setitem(sys.modules, "re2", None)
            claim_regex._re2.cache_clear()
            with pytest.raises(ClaimRegexError, match=r"needs the module re2 of the google-re2"):
                compile_claim_regex("(?P<a>x)")
    finally:
        claim_regex._re2.cache_clear()
    assert compile_claim_regex("(?P<a>x)").search("x") is not None


def test_claim_text_longer_than_the_limit_is_not_matched() -> None:
    m = ClaimMapping.from_dict(
        {
            "parser": "regex",
            "type": "A::E",
            "regex_expression": NESTED,
            "USER": {"attr": "user", "type": "String"},
        },
        "cm",
    )
    at_limit = "a" * (MAX_MAPPED_CLAIM_CHARS - len("@example.com")) + "@example.com"
    assert apply_mapping(at_limit, m, "c") == {"user": at_limit.split("@")[0]}
    with pytest.raises(ClaimError, match=r"4,097 characters, .*\(4,096: MAX_MAPPED_CLAIM_CHARS\)"):
        apply_mapping("b" + at_limit, m, "claim 'email'")
    # array claims are bounded element by element
    with pytest.raises(ClaimError, match=r"claim 'e'\[1\]: .*MAX_MAPPED_CLAIM_CHARS"):
        apply_mapping(["x@example.com", "b" + at_limit], m, "claim 'e'")


# \d \w \s: what Rust's regex (UTS #18) means, which is Python's meaning nearly.


def _rust_only_or_python_only(c: str) -> bool:
    """Where Python's ``re`` and Rust's ``regex`` (which polang follows) legitimately
    differ: ``\\w`` in Rust also holds marks (M), connector punctuation other than ``_``,
    Join_Control and the Other_Alphabetic symbols (circled and squared Latin letters);
    in Python also the other numbers (No); ``\\s`` in Python also the information
    separators U+001C...U+001F. Unassigned code points (Python 3.11 knows Unicode 14,
    RE2 15) are left out too."""
    category = unicodedata.category(c)
    return (
        category in ("Cn", "Cs", "No")
        or category.startswith("M")
        or (category == "Pc" and c != "_")
        or c in "\u200c\u200d\x1c\x1d\x1e\x1f"
        or "\u24b6" <= c <= "\u24e9"
        or any(lo <= ord(c) <= lo + 25 for lo in (0x1F130, 0x1F150, 0x1F170))
    )


SAMPLES = ["José", "Ωμέγα", "٣٤5", "a\u00a0b", "x\u3000y", "José Ωμέγα ٣\u00a0\u3000_!"]
SHORTHAND_PATTERNS = [
    *(rf"\{k}+" for k in "dDwWsS"),
    *(rf"[\{k}]+" for k in "dDwWsS"),
    *(rf"[.\{k}]+" for k in "dDwWsS"),
    *(rf"[^\{k}]+" for k in "dwsDS"),
    r"[^\W]+",
    r"[\W_]+",
    r"[^\d\s]+",
]


def _findall(pattern: str, text: str) -> list[Any]:
    found: Any = compile_claim_regex(pattern)
    return list(found.findall(text))


@pytest.mark.parametrize("pattern", SHORTHAND_PATTERNS)
@pytest.mark.parametrize("text", SAMPLES)
def test_shorthands_are_unicode_as_in_python(pattern: str, text: str) -> None:
    assert _findall(pattern, text) == re.findall(pattern, text)


def test_shorthands_on_names_digits_and_spaces() -> None:
    found = compile_claim_regex(r"^(?P<first>\w+)\s(?P<last>\w+)\s(?P<n>\d+)$").search(
        "José\u3000Ωμέγα\u00a0٣٤"
    )
    assert found is not None
    assert (found.group("first"), found.group("last"), found.group("n")) == ("José", "Ωμέγα", "٣٤")
    assert _findall(r"[\w.]+", "josé.ωμέγα@x") == ["josé.ωμέγα", "x"]
    assert _findall(r"\W+", "José\u00a0Ωμέγα") == ["\u00a0"]
    m = ClaimMapping.from_dict(
        {
            "parser": "regex",
            "type": "A::E",
            "regex_expression": r"^(?P<USER>\w+)@",
            "USER": {"attr": "user", "type": "String"},
        },
        "cm",
    )
    assert apply_mapping("José@example.com", m, "c") == {"user": "José"}


@cache
def _agreed_text() -> str:
    """Every code point on which Python's re and Rust's regex agree, once."""
    return "".join(c for c in map(chr, range(0x110000)) if not _rust_only_or_python_only(c))


@pytest.mark.parametrize(
    "pattern",
    [*SHORTHAND_PATTERNS, *(rf"[!\{k}]+" for k in "dDwWsS"), r"[^\D!]+", r"[^\S!]+"],
)
def test_every_code_point_is_classed_as_python_classes_it(pattern: str) -> None:
    # outside the documented differences, polang's class is Python's, code point by code
    # point (the text is in code point order, so the matched characters are too)
    text = _agreed_text()
    assert "".join(_findall(pattern, text)) == "".join(re.findall(pattern, text))


@pytest.mark.parametrize(
    ("text", "rust", "python"),
    [
        ("Jose\u0301", "Jose\u0301", "Jose"),  # a decomposed é: the combining accent is a mark
        ("a\u203fb", "a\u203fb", "a"),  # connector punctuation beyond _
        ("\u24b6x", "\u24b6x", "x"),  # a circled letter is Alphabetic
        ("\u2160x", "\u2160x", "\u2160x"),  # a Roman numeral (Nl) is Alphabetic: both
        ("x\u00b2", "x", "x\u00b2"),  # a superscript two (No) is not a word character
    ],
)
def test_word_is_rusts_where_python_differs(text: str, rust: str, python: str) -> None:
    assert _findall(r"\w+", text)[0] == rust
    assert re.findall(r"\w+", text)[0] == python


def test_space_is_white_space_where_python_differs() -> None:
    assert _findall(r"\s", "a\x1cb") == []  # an information separator: \s in Python only
    assert re.findall(r"\s", "a\x1cb") == ["\x1c"]
    assert _findall(
        r"\s", "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u200a\u2028\u202f\u205f\u3000"
    ) == list("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u200a\u2028\u202f\u205f\u3000")
    assert _findall(r"\s", "\u200b\u180e\ufeff") == []  # zero-width: not White_Space


def test_word_boundaries_stay_ascii() -> None:
    # RE2's \b is a boundary between [0-9A-Za-z_] and anything else (Rust's and Python's
    # are Unicode): the same for ASCII words, different next to a non-ASCII letter
    assert _findall(r"\bdocs\b", "the docs, docsx") == ["docs"]
    assert _findall(r"\bJos\b", "José") == ["Jos"]
    assert re.findall(r"\bJos\b", "José") == []
    assert _findall(r"\bJosé\b", "José") == []
    assert _findall(r"s\Bé", "José") == []  # RE2 sees a boundary between s and é
    assert re.findall(r"s\Bé", "José") == ["sé"]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (r"^[^\W\d_]+$", r"\[\^\\W\\d_\]; \\W in a negated character class is not supported"),
        (r"[\w-z]", r"\[\\w-z\]; a range with the class \\w as an end is not supported"),
        (r"[a-\d]", r"\[a-\\d\]; a range with the class \\d as an end is not supported"),
        (r"[--\s]", r"a range with the class \\s as an end"),
        (r"\w{400}", r"pattern too large .*large Unicode classes"),
    ],
)
def test_what_re2_cannot_write_is_refused_naming_it(expr: str, message: str) -> None:
    with pytest.raises(ClaimRegexError, match=message):
        compile_claim_regex(expr)
    if "-" in expr:  # Python (and Rust) refuse a class as a range's end too
        with pytest.raises(re.error, match="bad character range"):
            re.compile(expr)


def test_negated_shorthands_in_a_class_are_exact() -> None:
    assert to_re2_syntax(r"[^\W]") == to_re2_syntax(r"\w")
    assert to_re2_syntax(r"[\W]") == to_re2_syntax(r"\W")
    assert to_re2_syntax(r"[\W^]") == r"(?:[\^]|" + to_re2_syntax(r"\W") + ")"
    assert _findall(r"[\W^]+", "a^!é ") == ["^!", " "]
    assert _findall(r"[a\S]+", "a b\u3000c") == ["a", "b", "c"]
    assert _findall(r"[^\S\n]+", "a \u3000\nb") == [" \u3000"]
    assert _findall(r"[\D]+", "ab٣c") == ["ab", "c"]


# Random text over the characters where the two definitions agree, and the samples.
_AGREED = st.characters(blacklist_categories=("Cs", "Cn")).filter(
    lambda c: not _rust_only_or_python_only(c)
)
_TEXT = st.text(_AGREED | st.sampled_from("José Ωμέγα٣٤\u00a0\u3000\t\n_-.@#\\]wsd"), max_size=24)
PROPERTY_PATTERNS = [
    *SHORTHAND_PATTERNS,
    r"(?P<a>\w+)\s+(?P<b>\d+)",
    r"^(?P<user>[\w.\-]+)@(?P<host>[\w.]+)",
    r"[\]\w]+",
    r"\\w|\\s|\\d",
    r"(?x) (?P<w> \w+ ) \s* \# (?P<n> \d* )",
    r"\w*?\d",
    r"(?P<x>\S+?)\s*\Z",
    r"[\W\d]{2,}",
    r"[-\d]+\D",
]


@pytest.mark.parametrize("pattern", PROPERTY_PATTERNS)
@settings(max_examples=60, deadline=None)
@given(text=_TEXT)
def test_shorthands_match_as_python_matches(pattern: str, text: str) -> None:
    mine: Any = compile_claim_regex(pattern)
    a, b = mine.search(text), re.search(pattern, text)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert a.span() == b.span()
        assert a.groups() == b.groups()
