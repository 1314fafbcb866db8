"""Claim-mapping regexes, matched in linear time.

A ``regex`` claim mapping applies the operator's pattern to the token holder's text, so a
backtracking engine would let one crafted claim (or one careless pattern) cost seconds
per character: ``^([a-z0-9]+\\.?)+@example\\.com$`` against 28 letters and a ``!`` takes
Python's ``re`` six seconds, doubling with each letter. Patterns are therefore compiled
with RE2 (PyPI ``google-re2``, module ``re2``), whose matching time is linear in the text
and whose memory is bounded per pattern, the guarantee Cedarling has from Rust's ``regex``
crate. The price is the same as there: no backreferences, no lookaround; a pattern that
uses them is refused when the store loads, naming the construct.

The text is RE2 syntax (https://github.com/google/re2/wiki/Syntax) with three spellings
kept from the Python syntax polang read before: ``(?x)`` verbose mode (whitespace and
``#`` comments outside character classes are dropped before RE2 sees the pattern),
``(?P<name>...)`` beside ``(?<name>...)`` (RE2 reads both) and ``\\Z`` for the end of the
text (RE2's ``\\z``).

``\\d``, ``\\w``, ``\\s`` and their negations mean what they mean in Rust's ``regex`` (and,
nearly, in Python's ``re``): Unicode classes, where RE2's own are ASCII. They are written
out as RE2 Unicode classes before RE2 sees the pattern (:data:`_SHORTHANDS`):

- ``\\d`` is ``\\p{Nd}``, the decimal digits of every script (``٣``), as in Rust and Python.
- ``\\w`` is UTS #18's word character, Rust's definition: Alphabetic, marks (M), decimal
  digits (Nd), connector punctuation (Pc) and Join_Control (U+200C, U+200D). RE2 has no
  ``\\p{Alphabetic}``; it is written as letters (L), letter numbers (Nl, ``Ⅻ``) and the
  code points of Other_Alphabetic that are neither marks nor letters (the circled and
  squared Latin letters ``Ⓐ``, U+1F130...), which is Alphabetic exactly as of Unicode 15
  (RE2's tables; Python 3.11 has 14). Python's ``\\w`` differs: it is ``str.isalnum()`` or
  ``_``, so it has the other numbers (No: ``²``, ``½``, ``①``) and lacks marks (the U+0301 of
  a decomposed ``é``), connector punctuation other than ``_`` (``‿``), U+200C, U+200D and
  ``Ⓐ``.
- ``\\s`` is Unicode's White_Space (:data:`_SPACE`), as in Rust; Python's also has the
  information separators U+001C...U+001F.
- ``\\D``, ``\\W``, ``\\S`` are the complements. In a character class RE2 takes only a union,
  so ``\\D`` becomes ``\\P{Nd}`` and ``\\S`` the ranges around White_Space, both exact;
  ``[...\\W...]`` becomes ``(?:[...]|\\W)`` and ``[^\\W]`` ``\\w``, exact too, but ``\\W`` with
  more in a negated class (``[^\\W\\d_]``) would need an intersection and is refused,
  naming the construct. A shorthand as the end of a range (``[\\w-z]``) is refused, as
  Rust and Python refuse it.
- ``\\b`` and ``\\B`` stay RE2's, ASCII: a boundary between ``[0-9A-Za-z_]`` and anything else
  (Rust's and Python's are Unicode). No translation is exact without lookaround, and
  refusing would break ``\\bdocs\\b``-style patterns whose words are ASCII; next to a
  non-ASCII letter the meaning differs (``\\bJos\\b`` matches in ``José``, ``\\bJosé\\b``
  does not match ``José``).

The ASCII meanings are still written ``[0-9]``, ``[[:word:]]``, ``[[:space:]]``. A
Unicode ``\\w`` is a large automaton: a pattern holds about 390 of them (``\\w{390}``,
counting repetitions) before RE2's memory bound refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Protocol

from polang.inputs.fields import MAX_QUOTED_CHARS
from polang.runtime import unavailable

#: The longest claim text a ``regex`` mapping is applied to (characters, per string: an
#: array claim is mapped element by element). Matching is linear, so this only keeps one
#: claim's cost small; e-mail addresses (at most 320), URLs and ids stay far below it.
MAX_MAPPED_CLAIM_CHARS = 4096

_WHITESPACE = frozenset(" \t\n\r\v\f")  # what Python's verbose mode skips
# An inline flag group, ``(?flags)`` or ``(?flags-flags:``; anchored at one position and
# backtracking only over its own letters.
_FLAG_GROUP = re.compile(r"\(\?([A-Za-z]*+)(?:-([A-Za-z]*+))?([:)])")
# RE2's "invalid perl operator: <text>" for the constructs it leaves out on purpose.
_UNSUPPORTED = (
    ("(?P", "a backreference (?P=name)"),  # RE2 quotes (?P= as "(?P"
    ("(?=", "a lookahead (?=...)"),
    ("(?!", "a negative lookahead (?!...)"),
    ("(?<=", "a lookbehind (?<=...)"),
    ("(?<!", "a negative lookbehind (?<!...)"),
    ("(?>", "an atomic group (?>...)"),
    ("(?#", "a comment group (?#...) (write (?x) and a # comment)"),
)


# White_Space (Unicode PropList.txt, unchanged since 6.3), as code point ranges.
_SPACE_RANGES = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)


def _class_items(ranges: tuple[tuple[int, int], ...]) -> str:
    """``ranges`` as the members of an RE2 character class."""
    return "".join(
        f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in ranges
    )


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The code points outside the sorted, disjoint ``ranges``."""
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= 0x10FFFF:
        out.append((start, 0x10FFFF))
    return tuple(out)


#: Class members: Unicode's White_Space (``\\s``) and the rest (``\\S`` in a class).
_SPACE = _class_items(_SPACE_RANGES)
_NOT_SPACE = _class_items(_complement(_SPACE_RANGES))
#: Class members: UTS #18's word character as Rust's regex has it (Alphabetic, M, Nd, Pc,
#: Join_Control), Alphabetic being L, Nl and Other_Alphabetic's symbols (Ⓐ...).
_WORD = (
    r"\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\x{200C}\x{200D}"
    r"\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}"
)
#: ``\\d``, ``\\w``, ``\\s`` and their negations outside a character class, in RE2 syntax.
_SHORTHANDS = {
    "d": r"\p{Nd}",
    "D": r"\P{Nd}",
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
}
#: The same as members of a class; ``\\W`` has none (see :func:`_translate_class`).
_IN_CLASS = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": _WORD, "s": _SPACE, "S": _NOT_SPACE}
_CLASS_SHORTHANDS = frozenset("dDwWsS")


class ClaimRegexError(ValueError):
    """A ``regex_expression`` RE2 cannot compile; the message names the construct."""


class ClaimMatch(Protocol):
    """What a claim mapping reads from a match (RE2's match object, like ``re.Match``)."""

    def group(self, name: str, /) -> str | None: ...


class ClaimPattern(Protocol):
    """A compiled ``regex_expression`` (RE2's pattern object, like ``re.Pattern``)."""

    @property
    def groupindex(self) -> Mapping[str, int]: ...

    def search(self, text: str, /) -> ClaimMatch | None: ...


def compile_claim_regex(expression: str) -> ClaimPattern:
    """Compile a ``regex_expression`` with RE2; raises :class:`ClaimRegexError`.

    Under ``(?x)`` an unescaped ``#`` starts a comment, so a literal ``#`` must be written
    ``\\#``. Without the ``re2`` module (no wheel for the platform, e.g. WebAssembly) every
    regex mapping is refused: falling back to a backtracking engine would bring back the
    attack this module exists to stop.
    """
    re2 = _re2()
    if re2 is None:
        raise ClaimRegexError(
            unavailable(
                "a regex claim mapping",
                "it needs the module re2 of the google-re2 package, which cannot be imported "
                "here, and a backtracking regex engine is never used on token claims",
                "install google-re2 or use the json parser",
            )
        )
    translated = to_re2_syntax(expression)
    options = re2.Options()
    options.log_errors = False  # the error comes back to the store loader, not stderr
    try:
        pattern: ClaimPattern = re2.compile(translated, options)
    except re2.error as e:
        raise ClaimRegexError(_explain(e)) from None
    return pattern


@cache
def _re2() -> Any:
    """The ``re2`` module, imported on first use (start-up time), or None."""
    try:
        import re2
    except ImportError:
        return None
    return re2


def _explain(error: BaseException) -> str:
    """RE2's message (bytes in google-re2), naming the construct, and why RE2 has none."""
    raw = error.args[0] if error.args else error
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    kind, _, construct = text.partition(": ")
    name = ""
    if kind == "invalid perl operator":
        name = next((n for spelling, n in _UNSUPPORTED if construct.startswith(spelling)), "")
    elif kind == "invalid escape sequence" and construct[1:2].isdigit():
        name = f"a backreference ({construct})"
    why = f"; {name} is not supported" if name else ""
    if kind.startswith("pattern too large"):  # RE2's max_mem; the Unicode classes are big
        why = " (\\w, \\W, \\pL are large Unicode classes: a pattern holds about 400 of them)"
    if len(construct) > MAX_QUOTED_CHARS:  # RE2 quotes the rest of the pattern, however long
        construct = f"{construct[:MAX_QUOTED_CHARS]}... ({len(construct)} characters)"
    shown = f"{kind}: {construct}" if construct else kind
    return (
        f"invalid regex: {shown}{why} (claim_mapping regexes are RE2 syntax, matched in "
        "linear time: no backreferences or lookaround)"
    )


def to_re2_syntax(expression: str) -> str:
    """``expression`` with polang's Python-syntax spellings turned into RE2's.

    ``(?x)`` verbose mode, which RE2 lacks, is applied here with Python's rules:
    whitespace and ``#`` comments are dropped outside character classes, ``\\ `` and
    ``\\#`` stay literal; the ``x`` flag is scoped like any flag (``(?x:...)``,
    ``(?-x)``). ``\\Z`` becomes ``\\z``. ``\\d``, ``\\w``, ``\\s``, ``\\D``, ``\\W``, ``\\S``
    become RE2's Unicode classes, in and out of character classes (module docstring);
    ``\\W`` in a negated class and a shorthand ending a range raise
    :class:`ClaimRegexError`. ``\\Q...\\E`` (RE2's literal text) is passed on untouched.
    Everything else is passed on for RE2 to judge.
    """
    out: list[str] = []
    verbose = [False]  # the x flag of each open group, innermost last
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch == "\\":
            pair = expression[i : i + 2]
            if pair == "\\Q":  # literal up to \E: neither verbose nor shorthands apply
                close = expression.find("\\E", i + 2)
                end = n if close < 0 else close + 2
                out.append(expression[i:end])
                i = end
                continue
            out.append("\\z" if pair == "\\Z" else _SHORTHANDS.get(pair[1:], pair))
            i += 2
        elif ch == "[":
            text, i = _translate_class(expression, i)
            out.append(text)
        elif verbose[-1] and ch in _WHITESPACE:
            i += 1
        elif verbose[-1] and ch == "#":
            newline = expression.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif ch == "(":
            flags = _FLAG_GROUP.match(expression, i)
            if flags is None:
                verbose.append(verbose[-1])
                out.append("(")
                i += 1
                continue
            on, off, closer = flags.group(1), flags.group(2) or "", flags.group(3)
            x = (verbose[-1] or "x" in on) and "x" not in off
            off = off.replace("x", "")
            rest = on.replace("x", "") + (f"-{off}" if off else "")
            if closer == ")":  # (?flags): the rest of the enclosing group
                verbose[-1] = x
                if rest:
                    out.append(f"(?{rest})")
            else:
                verbose.append(x)
                out.append(f"(?{rest}:")
            i = flags.end()
        elif ch == ")":
            if len(verbose) > 1:
                verbose.pop()
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _translate_class(expression: str, start: int) -> tuple[str, int]:
    """The character class opened at ``start`` in RE2 syntax, and the index after its
    ``]``. A class that is not closed is returned as it is, up to the end of the text: RE2
    then reports the missing ``]``."""
    i, n = start + 1, len(expression)
    negated = expression.startswith("^", i)
    if negated:
        i += 1
    items: list[str] = []  # the members, one escape, POSIX class or character each
    not_word = False  # a \\W, written outside the class as an alternative
    opened = False  # the last member can open a range with a '-'
    closing = False  # the last member is a '-' opening a range
    if i < n and expression[i] == "]":  # a leading ']' is a literal
        items.append("]")
        opened = True
        i += 1
    while i < n:
        ch = expression[i]
        if ch == "]":
            return _class_text(negated, items, not_word, expression[start : i + 1]), i + 1
        pair = expression[i : i + 2]
        if ch == "\\" and pair[1:] in _CLASS_SHORTHANDS:
            if closing or (
                expression.startswith("-", i + 2) and expression[i + 3 : i + 4] not in ("]", "")
            ):
                raise _refused(
                    expression[start:],
                    f"a range with the class {pair} as an end",
                    "write the range and the class side by side",
                )
            if pair == "\\W":
                not_word = True
            else:
                items.append(_IN_CLASS[pair[1:]])
            opened, closing, i = False, False, i + 2
            continue
        if ch == "\\":
            member = pair
        elif pair == "[:":  # a POSIX class such as [:alpha:]
            close = expression.find(":]", i + 2)
            member = expression[i : n if close < 0 else close + 2]
        else:
            member = ch
        if member == "-" and opened and expression[i + 1 : i + 2] not in ("]", ""):
            opened, closing = False, True  # a range a-z
        else:
            opened, closing = not closing, False  # a range's end opens no other
        items.append(member)
        i += len(member)
    return expression[start:], n


def _class_text(negated: bool, items: list[str], not_word: bool, source: str) -> str:
    """A class's RE2 text. RE2's classes are unions of Unicode classes and ranges; 'not a
    word character' is none of those, so ``[a\\W]`` is written ``(?:[a]|[^word])`` and a
    negated class holding ``\\W`` and more (an intersection: ``[^\\W\\d_]``) is refused."""
    if not not_word:
        return f"[{'^' if negated else ''}{''.join(items)}]"
    if negated and not items:  # [^\\W] is \\w
        return _SHORTHANDS["w"]
    if negated:
        raise _refused(
            source,
            "\\W in a negated character class",
            "RE2 has no class intersection; write the members, e.g. \\p{L} for letters",
        )
    if not items:
        return _SHORTHANDS["W"]
    rest = "".join(items)
    if rest.startswith("^"):  # no longer after \W: it would negate the class
        rest = "\\" + rest
    return f"(?:[{rest}]|{_SHORTHANDS['W']})"


def _refused(source: str, name: str, hint: str) -> ClaimRegexError:
    """The error for a construct polang cannot write in RE2, in :func:`_explain`'s form."""
    if len(source) > MAX_QUOTED_CHARS:
        source = f"{source[:MAX_QUOTED_CHARS]}... ({len(source)} characters)"
    return ClaimRegexError(
        f"invalid regex: {source}; {name} is not supported ({hint}; claim_mapping regexes "
        "are RE2 syntax, where \\d, \\w, \\s are Unicode classes)"
    )
