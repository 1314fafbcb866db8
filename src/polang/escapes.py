"""What polang prints: the characters it never prints raw, and their escapes.

At the bottom of the layers, because every layer prints a caller's text somewhere (the
decision log's JSON lines, messages, the command line's tables); the escapes are those of
the language's string literals (``\\n``, ``\\u{9b}``), and :mod:`polang.language.values`
re-exports them.
"""

from __future__ import annotations

import re

_ESCAPES = {
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\\": "\\\\",
    "\0": "\\0",
    '"': '\\"',
}

#: The characters polang never prints raw (docs/security.md, "What polang prints"): C0
#: controls and DEL, C1 controls (U+0080-U+009F: U+009B is a one-character CSI, U+0085 a
#: line break), the line and paragraph separators U+2028/U+2029, the bidirectional
#: controls that reorder what a reader sees (U+061C, U+200E/F, U+202A-E, U+2066-9:
#: "Trojan Source") and lone surrogates (which UTF-8 cannot encode: printing one raises).
_UNSAFE_ABOVE_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE_CHARS = "\x00-\x1f" + _UNSAFE_ABOVE_C0
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
_UNSAFE_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_UNSAFE_ABOVE_C0}]")
_QUOTED = re.compile(f'[{UNSAFE_CHARS}"\\\\]')


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return _ESCAPES.get(ch) or f"\\u{{{ord(ch):x}}}"


def quote_string(s: str) -> str:
    """A polang string literal that parses back to exactly ``s``, with no character of
    :data:`UNSAFE_CHARS` in it (each is an escape): safe to print and one line long."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'  # the usual id (U+0020-U+007E but the two escaped): nothing to escape
    return '"' + _QUOTED.sub(_escape, s) + '"'


def printable(s: str) -> str:
    """``s`` with each character of :data:`UNSAFE_CHARS` written as its escape (``\\n``,
    ``\\u{9b}``), the rest as it is: for a caller's text shown outside a literal (ids in
    tables and trees, messages), so that it cannot move the cursor, restyle or clear the
    terminal, reorder the line or start a new one."""
    if s.isascii() and s.isprintable():  # nothing unsafe in it
        return s
    return _UNSAFE.sub(_escape, s)


def printable_lines(s: str) -> str:
    """:func:`printable` for text whose own line breaks are meant (an error message with a
    source excerpt and a caret under it): ``\\n`` and ``\\t`` are kept, every other
    unsafe character escaped."""
    return _UNSAFE_BUT_LINES.sub(_escape, s)


def printable_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``, which escapes only C0) with
    every other unsafe character as a ``\\uXXXX`` escape: the same JSON value, safe to
    print. Unsafe characters can only stand inside its strings, where the escape is valid."""
    if text.isascii() and text.isprintable():  # the usual line: nothing unsafe in it
        return text
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
