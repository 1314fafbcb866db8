"""The policy and schema grammars' LALR tables, run without building a lark parser.

lark computes a grammar's tables when a parser is made; even from its cache, loading them
and building the lexer cost about 15 ms per grammar, most of an engine's start-up. The
tables only change with the grammar, so ``grammar_tables.py`` stores them, generated from
``grammar/*.lark`` by ``python -m polang.language.tablegen``, and
:func:`parse` runs them with a small driver that builds the same trees as lark: rule
aliases, ``?rule`` inlining, filtered anonymous tokens, spliced ``_rule`` children and
``[x]`` placeholders.

The driver only produces trees. On any lexing or parsing problem it returns ``None`` and
the caller parses the text again with lark, whose exception the error messages are made
of, so every message stays exactly as it was. A grammar whose text no longer matches the
hash stored with its tables is run with tables taken from lark at run time (slower, never
wrong); ``tests/language/test_lalr.py`` fails until the tables are regenerated.

The trees are made of this module's :class:`Token` and :class:`Tree` (lark's shapes, its
attribute names), so a first decision never imports lark: it is loaded only for a syntax
error's message, a changed grammar, or the schema's lark parser.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polang.language import grammar_tables

if TYPE_CHECKING:
    from lark import Lark


class Token(str):
    """A terminal: its text (the ``str``), ``type`` and position, as lark's ``Token``."""

    type: str
    value: str
    start_pos: int | None
    line: int | None
    column: int | None
    end_line: int | None
    end_column: int | None
    end_pos: int | None

    def __new__(
        cls,
        type: str,
        value: str,
        start_pos: int | None = None,
        line: int | None = None,
        column: int | None = None,
        end_line: int | None = None,
        end_column: int | None = None,
        end_pos: int | None = None,
    ) -> Token:
        tok = str.__new__(cls, value)
        tok.type = type
        tok.value = value
        tok.start_pos = start_pos
        tok.line = line
        tok.column = column
        tok.end_line = end_line
        tok.end_column = end_column
        tok.end_pos = end_pos
        return tok

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r})"


class Tree:
    """A rule's node: its name (``data``) and children, as lark's ``Tree``."""

    __slots__ = ("children", "data")

    def __init__(self, data: str, children: list[Any]) -> None:
        self.data = data
        self.children = children

    def __repr__(self) -> str:
        return f"Tree({self.data!r}, {self.children!r})"


def from_lark(tree: Any) -> Any:
    """lark's tree as this module's (iteratively: trees may be deep)."""
    import lark

    def convert(x: Any) -> Any:
        if isinstance(x, lark.Token):
            return Token(
                x.type, x.value, x.start_pos, x.line, x.column, x.end_line, x.end_column, x.end_pos
            )
        return x

    if not isinstance(tree, lark.Tree):
        return convert(tree)
    root = Tree(str(tree.data), [])
    todo: list[tuple[Any, Tree]] = [(tree, root)]
    while todo:
        src, dst = todo.pop()
        for child in src.children:
            if isinstance(child, lark.Tree):
                node = Tree(str(child.data), [])
                dst.children.append(node)
                todo.append((child, node))
            else:
                dst.children.append(convert(child))
    return root


GRAMMARS = ("policy", "schema")
"""The grammars with stored tables: ``grammar/<name>.lark``."""

IDENT_RE = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
"""A name: an identifier token of both grammars (and a keyword's shape)."""

# A rule: (origin, tree name, length, expand1, children to keep or None for all, Nones
# appended). A kept child is (index, splice its children, Nones inserted before it).
Rule = tuple[str, str, int, bool, tuple[tuple[int, bool, int], ...] | None, int]


class States(dict[int, dict[str, int]]):
    """``states[s][symbol]``: a state to shift or go to (``>= 0``), or ``-1 - r`` to reduce
    by rule ``r``. A state's row is built on first use (most are never needed)."""

    def __init__(self, symbols: list[str], keysets: list[str], rows: list[str]):
        super().__init__()
        self._symbols = symbols
        self._keysets = keysets
        self._rows = rows

    def __missing__(self, state: int) -> dict[str, int]:
        # rows and symbol sets are comma-separated integers, decoded when first needed
        keyset, *codes = map(int, self._rows[state].split(","))
        symbols = self._symbols
        keys = [symbols[int(i)] for i in self._keysets[keyset].split(",")]
        actions = dict(zip(keys, codes, strict=True))
        self[state] = actions
        return actions


class Tables:
    """A grammar's parse tables and the tree-shaping rule of each reduction (hashed by
    identity: the lexers are cached per tables)."""

    __slots__ = ("literals", "rules", "starts", "states")
    states: States
    rules: list[Rule]
    starts: dict[str, tuple[int, int]]
    """Per start symbol: its start state and the state that accepts."""
    literals: dict[str, str]
    """Terminals written as fixed text (keywords, punctuation): text -> terminal name."""

    def __init__(
        self,
        states: States,
        rules: list[Rule],
        starts: dict[str, tuple[int, int]],
        literals: dict[str, str],
    ) -> None:
        self.states = states
        self.rules = rules
        self.starts = starts
        self.literals = literals

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tables:
        rules: list[Rule] = [
            (
                r[0],
                r[1],
                r[2],
                r[3],
                None if r[4] is None else tuple((i, e, n) for i, e, n in r[4]),
                r[5],
            )
            for r in data["rules"]
        ]
        return cls(
            States(data["symbols"], data["keysets"], data["rows"]),
            rules,
            {k: (v[0], v[1]) for k, v in data["starts"].items()},
            data["literals"],
        )


# ---------------------------------------------------------------- tables from lark


def grammar_hash(text: str) -> str:
    """A checksum of a grammar's text: tells stored tables made for another text (an edited
    grammar). CRC-32 rather than SHA-256: it guards against forgetting to regenerate, not
    against an adversary, and ``hashlib`` costs 3 ms of start-up (OpenSSL)."""
    return f"{zlib.crc32(text.encode('utf-8')):08x}"


def tables_from_lark(parser: Lark, grammar_text: str) -> dict[str, Any]:
    """The JSON form of a lark LALR parser's tables and tree-shaping rules.

    A state's actions are stored as the index of its set of symbols (states share few
    distinct sets) followed by the codes in that set's order, as a string of integers
    decoded when the state is first used.
    """
    from lark.parsers.lalr_analysis import Shift

    table = parser.parser.parser.parser.parse_table
    placeholders = bool(parser.options.maybe_placeholders)
    reductions = {
        arg
        for actions in table.states.values()
        for action, arg in actions.values()
        if action is not Shift
    }
    lark_rules = sorted(
        reductions, key=lambda r: (r.origin.name, [s.name for s in r.expansion], r.alias or "")
    )
    index = {r: i for i, r in enumerate(lark_rules)}
    symbols = sorted({sym for actions in table.states.values() for sym in actions})
    position = {sym: i for i, sym in enumerate(symbols)}
    keysets: list[str] = []
    keyset_index: dict[str, int] = {}
    rows: list[str] = ["" for _ in range(len(table.states))]
    for s, actions in table.states.items():
        ordered = sorted(actions.items())
        ks = ",".join(str(position[sym]) for sym, _ in ordered)
        if ks not in keyset_index:
            keyset_index[ks] = len(keysets)
            keysets.append(ks)
        codes = [arg if action is Shift else -1 - index[arg] for _, (action, arg) in ordered]
        rows[s] = ",".join(str(c) for c in [keyset_index[ks], *codes])
    starts = {k: [table.start_states[k], table.end_states[k]] for k in sorted(table.start_states)}
    literals = {str(t.pattern.value): t.name for t in parser.terminals if t.pattern.type == "str"}
    return {
        "grammar_crc32": grammar_hash(grammar_text),
        "symbols": symbols,
        "keysets": keysets,
        "rows": rows,
        "rules": [_rule_json(r, placeholders) for r in lark_rules],
        "starts": starts,
        "literals": dict(sorted(literals.items())),
    }


def _rule_json(rule: Any, placeholders: bool) -> list[Any]:
    """What lark's parse-tree builder does on a reduction by ``rule``, as data."""
    opts = rule.options
    expansion = rule.expansion
    empty = list(opts.empty_indices) if placeholders and opts.empty_indices else []
    if empty:
        bits = "".join(str(int(b)) for b in empty)
        nones = [len(ones) for ones in bits.split("0")]
    else:
        nones = [0] * (len(expansion) + 1)
    include: list[list[Any]] = []
    pending = 0
    for i, sym in enumerate(expansion):
        pending += nones[i]
        if opts.keep_all_tokens or not (sym.is_term and sym.filter_out):
            splice = not sym.is_term and sym.name.startswith("_")
            include.append([i, splice, pending])
            pending = 0
    pending += nones[len(expansion)]
    filtered = bool(empty) or len(include) < len(expansion) or any(x[1] for x in include)
    name = rule.alias or opts.template_source or rule.origin.name
    return [
        rule.origin.name,
        name,
        len(expansion),
        bool(opts.expand1 and not rule.alias),
        include if filtered else None,
        pending if filtered else 0,
    ]


# ---------------------------------------------------------------- loading


def grammar_text(name: str) -> str:
    """The text of ``grammar/<name>.lark``."""
    return (Path(__file__).parent / "grammar" / f"{name}.lark").read_text(encoding="utf-8")


@cache
def load_tables(name: str, lark_parser: Callable[[], Lark]) -> Tables:
    """The stored tables of ``grammar/<name>.lark``, or lark's when the grammar changed."""
    text = grammar_text(name)
    data = json.loads(getattr(grammar_tables, name.upper()))
    if data.get("grammar_crc32") != grammar_hash(text):
        data = tables_from_lark(lark_parser(), text)
    return Tables.from_json(data)


# ---------------------------------------------------------------- the driver

Lexer = Callable[[str, States, list[int]], Iterator[Token]]
"""``lexer(text, states, state_stack)``: the tokens of ``text`` (``None`` on a bad one);
it may read the current state (contextual keywords) when asked for the next token."""


class _Stop(Exception):
    """The lexer met text no terminal matches."""


def parse(tables: Tables, lexer: Lexer, text: str, start: str) -> Tree | None:
    """lark's tree for ``text`` from ``start``, or ``None`` when the text does not parse."""
    states = tables.states
    rules = tables.rules
    start_state, end_state = tables.starts[start]
    stack = [start_state]
    values: list[Any] = []
    push_state = stack.append
    push_value = values.append
    end = _END
    try:
        for tok in chain(lexer(text, states, stack), (end,)):
            kind = tok.type
            actions = states[stack[-1]]
            while True:
                code = actions.get(kind)
                if code is None:
                    return None
                if code >= 0:
                    if tok is end:
                        return None
                    push_state(code)
                    push_value(tok)
                    break
                # reduce by rule ~code, then go to the state after its symbol
                origin, name, size, expand1, include, append_none = rules[~code]
                if size == 1 and expand1 and include is None:
                    # a `?rule` handing its one child up (most reductions): no new node
                    state = stack[-1] = states[stack[-2]][origin]
                    if state == end_state and tok is end:
                        tree0: Tree = values[-1]
                        return tree0
                    actions = states[state]
                    continue
                if size:
                    kids = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    kids = []
                if include is not None:
                    out: list[Any] = []
                    for i, splice, nones in include:
                        if nones:
                            out.extend([None] * nones)
                        if splice:
                            if out:
                                out.extend(kids[i].children)
                            else:
                                # take over the spliced node's list (as lark does): a
                                # repetition `(OROR x)*` then grows in place instead of
                                # being copied once per element (quadratic: a 100,000
                                # element chain took minutes)
                                out = kids[i].children
                        else:
                            out.append(kids[i])
                    if append_none:
                        out.extend([None] * append_none)
                    kids = out
                state = states[stack[-1]][origin]
                push_state(state)
                push_value(kids[0] if expand1 and len(kids) == 1 else Tree(name, kids))
                if state == end_state and tok is end:
                    tree: Tree = values[-1]
                    return tree
                actions = states[state]
    except _Stop:
        return None
    return None  # pragma: no cover - the end token always accepts or fails above


_END = Token("$END", "")


# ---------------------------------------------------------------- lexers


def _new_token(
    kind: str,
    value: str,
    start: int,
    line: int,
    column: int,
    end_line: int | None,
    end_column: int | None,
    end: int | None,
) -> Token:
    # lark's Token(...) with its keyword handling skipped: the same object, built directly.
    tok = str.__new__(Token, value)
    tok.type = kind
    tok.value = value
    tok.start_pos = start
    tok.line = line
    tok.column = column
    tok.end_line = end_line
    tok.end_column = end_column
    tok.end_pos = end
    return tok


def _punctuation(literals: dict[str, str]) -> str:
    """The fixed-text terminals that are not words, longest first (lark's order); the
    one-character ones as a single class (quicker to compile than an alternative each)."""
    symbols = [t for t in literals if not IDENT_RE.match(t) and (len(t) == 1 or t[0] != "?")]
    alternatives = [re.escape(t) for t in sorted(symbols, key=len, reverse=True) if len(t) > 1]
    single = "".join(re.escape(t) for t in symbols if len(t) == 1)
    if single:
        alternatives.append(f"[{single}]")
    return "|".join(alternatives)


@cache
def _policy_regex(tables: Tables) -> re.Pattern[str]:
    # lark's basic lexer for policy.lark: the same terminals in the same order of
    # preference (the kinds start with different characters; among symbols the longest
    # wins), with the whitespace and comments before a token skipped in the same match.
    # Group 1 string, 2 word, 3 number, 4 slot, 5 symbol; none at the end of the text.
    return re.compile(
        r'(?:\s+|//[^\n\r]*)*(?:("[^"\\]*+(?:\\.[^"\\]*+)*+")|([_a-zA-Z][_a-zA-Z0-9]*)|([0-9]+)'
        r"|(\?[_a-zA-Z][_a-zA-Z0-9]*)|(" + _punctuation(tables.literals) + "))?",
        re.DOTALL,
    )


def policy_lexer(tables: Tables) -> Lexer:
    """lark's basic lexer for ``policy.lark``: keywords and slots are fixed words."""
    regex = _policy_regex(tables)
    literals = tables.literals
    words = {t: n for t, n in literals.items() if IDENT_RE.match(t)}
    slots = {t: n for t, n in literals.items() if t.startswith("?") and len(t) > 1}
    new = str.__new__

    def lex(text: str, _states: States, _stack: list[int]) -> Iterator[Token]:
        match = regex.match
        count = text.count
        pos, line, line_start, end_of_text = 0, 1, 0, len(text)
        while True:
            m = match(text, pos)
            assert m is not None  # everything in the pattern is optional
            group = m.lastindex
            if group is None:
                if m.end() == end_of_text:
                    return
                raise _Stop
            start = m.start(group)
            if start != pos:  # skipped whitespace or comments
                newlines = count("\n", pos, start)
                if newlines:
                    line += newlines
                    line_start = text.rindex("\n", pos, start) + 1
            pos = m.end()
            value = m.group(group)
            if group == 2:
                kind = words.get(value, "IDENT")
            elif group == 5:
                kind = literals[value]
            elif group == 1:
                kind = "STR"
            elif group == 3:
                kind = "NUMBER"
            else:
                kind = slots.get(value, "OTHER_SLOT")
            # lark's Token, built as Token(...) builds it
            tok = new(Token, value)
            tok.type = kind
            tok.value = value
            tok.start_pos = start
            tok.line = line
            tok.column = start - line_start + 1
            if group == 1:
                newlines = count("\n", start, pos)
                if newlines:
                    line += newlines
                    line_start = text.rindex("\n", start, pos) + 1
            tok.end_line = line
            tok.end_column = pos - line_start + 1
            tok.end_pos = pos
            yield tok

    return lex


@cache
def _schema_regex(tables: Tables) -> re.Pattern[str]:
    return re.compile(
        r'(\s+|//[^\n]*)|("[^"\\]*+(?:\\[\s\S][^"\\]*+)*+")|([_a-zA-Z][_a-zA-Z0-9]*)|('
        + _punctuation(tables.literals)
        + ")"
    )


def schema_lexer(tables: Tables) -> Lexer:
    """The schema's contextual lexer (see ``schema_lexer.SchemaLexer``): a word is a keyword
    only where the parser's current state accepts that keyword."""
    regex = _schema_regex(tables)
    literals = tables.literals
    keywords = {t: n for t, n in literals.items() if IDENT_RE.match(t)}

    def lex(text: str, states: States, stack: list[int]) -> Iterator[Token]:
        match = regex.match
        pos, line, line_start, end_of_text = 0, 1, 0, len(text)
        while pos < end_of_text:
            m = match(text, pos)
            if m is None:
                raise _Stop
            end = m.end()
            group = m.lastindex
            value = m.group()
            if group == 1 or group == 2:
                newlines = value.count("\n")
                if group == 1:
                    if newlines:
                        line += newlines
                        line_start = text.rindex("\n", pos, end) + 1
                    pos = end
                    continue
                tok = _new_token("STR", value, pos, line, pos - line_start + 1, None, None, None)
                if newlines:
                    line += newlines
                    line_start = text.rindex("\n", pos, end) + 1
            elif group == 3:
                kind = keywords.get(value)
                if kind is None or kind not in states[stack[-1]]:
                    kind = "IDENT"
                tok = _new_token(kind, value, pos, line, pos - line_start + 1, None, None, None)
            else:
                tok = _new_token(
                    literals[value], value, pos, line, pos - line_start + 1, None, None, None
                )
            yield tok
            pos = end

    return lex
