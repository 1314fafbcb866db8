"""lark's lexer for the schema grammar, for lark's own schema parser.

A module of its own so that lark is imported only when that parser is built (a syntax
error's message, a changed grammar): the stored tables parse with ``lalr.schema_lexer``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lark import Token as LarkToken
from lark.common import LexerConf
from lark.exceptions import UnexpectedCharacters
from lark.lexer import Lexer, LexerState

from polang.language.lalr import IDENT_RE


class SchemaLexer(Lexer):
    """A contextual lexer tuned for the schema grammar.

    A word is a keyword only when the parser, in its current state, accepts that keyword
    (so ``entity tags;`` declares a type named ``tags``), exactly like lark's contextual
    lexer; one combined regular expression makes it several times faster, which matters
    for large generated schemas.
    """

    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        literals = {t.pattern.value: t.name for t in conf.terminals if t.pattern.type == "str"}
        self.keywords = {v: n for v, n in literals.items() if IDENT_RE.match(v)}
        self.punctuation = {v: n for v, n in literals.items() if v not in self.keywords}
        symbols = sorted(self.punctuation, key=len, reverse=True)
        self.regex = re.compile(
            r'(\s+|//[^\n]*)|("[^"\\]*+(?:\\[\s\S][^"\\]*+)*+")|([_a-zA-Z][_a-zA-Z0-9]*)|('
            + "|".join(re.escape(x) for x in symbols)
            + ")"
        )

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[LarkToken]:
        text_slice: Any = lexer_state.text
        text: str = getattr(text_slice, "text", text_slice)
        states = parser_state.parse_conf.states
        match = self.regex.match
        keywords = self.keywords
        pos, line, line_start, end_of_text = 0, 1, 0, len(text)
        while pos < end_of_text:
            m = match(text, pos)
            if m is None:
                raise UnexpectedCharacters(
                    text, pos, line, pos - line_start + 1, state=parser_state
                )
            end = m.end()
            group = m.lastindex or 0
            value = m.group(group)
            if group == 1 or group == 2:
                newlines = value.count("\n")
                if group == 1:
                    if newlines:
                        line += newlines
                        line_start = text.rindex("\n", pos, end) + 1
                    pos = end
                    continue
                tok = LarkToken("STR", value, pos, line, pos - line_start + 1)
                if newlines:
                    line += newlines
                    line_start = text.rindex("\n", pos, end) + 1
            elif group == 3:
                kind = keywords.get(value)
                if kind is None or kind not in states[parser_state.position]:
                    kind = "IDENT"
                tok = LarkToken(kind, value, pos, line, pos - line_start + 1)
            else:
                tok = LarkToken(self.punctuation[value], value, pos, line, pos - line_start + 1)
            lexer_state.last_token = tok
            yield tok
            pos = end
