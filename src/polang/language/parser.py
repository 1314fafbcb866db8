"""polang policy text -> AST (:mod:`polang.language.ast`).

The lark grammar (``grammar/policy.lark``, LALR) only fixes the *structure*; this module
turns the parse tree into the AST top-down and enforces everything the language decides
after parsing, with the same accept/reject behaviour as Cedar 4: reserved words, template
slots only in the scope, integer range (``-9223372036854775808`` is valid, its negation
is not), string escapes, known extension functions and methods, built-in method arity,
duplicate record keys and annotations, and the extended ``e has a.b.c`` (desugared into
``e has a && e.a has b && e.a.b has c``).

Spans: ``line``/``column`` are 1-based and point at the first character, ``end_line`` /
``end_column`` at the last one; ``start``/``end`` are offsets with ``end`` exclusive, so
``text[span.start:span.end]`` is the node's source.

Every failure is a :class:`PolicyParseError` whose message reads
``file:line:col: what`` followed by the source line and a caret under the column.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

from polang.errors import PolicyParseError
from polang.language import ast, lalr
from polang.language.lalr import Token, Tree
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, is_action_type

if TYPE_CHECKING:
    from lark import Lark
    from lark.exceptions import UnexpectedInput

__all__ = [
    "BUILTIN_METHOD_ARITY",
    "EXTENSION_FUNCTIONS",
    "EXTENSION_METHODS",
    "RESERVED_WORDS",
    "get_parser",
    "is_identifier",
    "parse_entity_uid",
    "parse_expression",
    "parse_policies",
    "parse_policy",
]

# ---------------------------------------------------------------- the language's word lists

RESERVED_WORDS = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has"})
"""Words that can never be an identifier (attribute, record key, type name segment)."""

RESERVED_NAMESPACE = "__cedar"
"""The built-in namespace: no user name segment may be exactly this."""

VARIABLES = frozenset({"principal", "action", "resource", "context"})

EXTENSION_FUNCTIONS = frozenset({"decimal", "ip", "datetime", "duration"})
"""Functions callable as ``name(args)``; their arity is checked at evaluation, not here."""

BUILTIN_METHOD_ARITY: dict[str, int] = {
    "contains": 1,
    "containsAll": 1,
    "containsAny": 1,
    "isEmpty": 0,
    "hasTag": 1,
    "getTag": 1,
}
"""Built-in methods: the language checks their argument count at parse time."""

EXTENSION_METHODS = frozenset(
    {
        "lessThan",
        "lessThanOrEqual",
        "greaterThan",
        "greaterThanOrEqual",
        "isIpv4",
        "isIpv6",
        "isLoopback",
        "isMulticast",
        "isInRange",
        "offset",
        "durationSince",
        "toDate",
        "toTime",
        "toMilliseconds",
        "toSeconds",
        "toMinutes",
        "toHours",
        "toDays",
    }
)
"""Extension methods: names are checked here, argument counts at evaluation."""

MAX_EXPRESSION_DEPTH = 100
"""Deepest expression nesting accepted (docs/validation.md, "Limits"), counted on the tree
later stages walk: each operator, member access, call, ``has``/``like``/``is`` test, set
or record literal is a level, an arithmetic chain nests one level per operator (``a + b +
c`` is ``(a + b) + c``; long ``||``/``&&`` chains are balanced, ``ast.BALANCE_CHAIN_AFTER``)
and ``e has a.b.c`` (``e has a && e.a has b && e.a.b has c``) one per attribute;
parentheses nested deeper are refused too. Real policies stay far below it
(the conformance corpus nests at most 10 levels). It is what keeps every later stage (the
type checker, lowering, the compiled backends, explanations, formatting), which walk the
expression recursively with up to 4 Python frames per level (measured), well inside
Python's default recursion limit of 1,000 frames: at most ~430 frames at this depth, also
on a worker thread, leaving more than half of the limit to the caller."""

MAX_LITERAL_DIGITS = 19
"""The most digits a Long literal can have (``9223372036854775807``), leading zeros apart:
longer ones are refused before Python converts them (it refuses past 4,300 digits)."""

_IDENT_CHARS = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def is_identifier(s: str) -> bool:
    """True when ``s`` can be written bare (``e.s``, ``e has s``, ``{s: ...}``)."""
    return (
        bool(s)
        and not s[0].isdigit()
        and all(c in _IDENT_CHARS for c in s)
        and s not in RESERVED_WORDS
        and s != RESERVED_NAMESPACE
    )


# ---------------------------------------------------------------- the lark parser (built once)

_PARSER: Lark | None = None
_PARSER_LOCK = threading.Lock()


def _grammar_text() -> str:
    # beside this file, as lalr reads it (importlib.resources would import tempfile, shutil
    # and more: 9 ms of every start-up)
    return lalr.grammar_text("policy")


def get_parser() -> Lark:
    """The shared LALR parser; built on first use (table construction is the slow part)."""
    global _PARSER
    if _PARSER is None:
        with _PARSER_LOCK:
            if _PARSER is None:
                from lark import Lark

                _PARSER = Lark(
                    _grammar_text(),
                    parser="lalr",
                    lexer="basic",
                    start=["policies", "expression", "entity_ref"],
                    maybe_placeholders=False,
                    cache=True,  # the LALR tables, reused across processes (start-up time)
                )
    return _PARSER


# ---------------------------------------------------------------- error reporting

Node = Tree | Token

_TOKEN_WORDS: dict[str, str] = {
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "SEMICOLON": "`;`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "DOT": "`.`",
    "AT": "`@`",
    "_DCOLON": "`::`",
    "IDENT": "an identifier",
    "NUMBER": "an integer",
    "STR": "a string literal",
    "PRINCIPAL_SLOT": "`?principal`",
    "RESOURCE_SLOT": "`?resource`",
    "OTHER_SLOT": "a template slot",
    "$END": "end of input",
}

_OPERATOR_TOKENS = frozenset(
    {
        "OROR",
        "ANDAND",
        "EQEQ",
        "NE",
        "LT",
        "LE",
        "GT",
        "GE",
        "EQ",
        "PLUS",
        "MINUS",
        "STAR",
        "SLASH",
        "PERCENT",
        "HAS",
        "LIKE",
        "IS",
        "DOT",
        "LSQB",
    }
)
_EXPR_START = frozenset({"NUMBER", "STR", "LPAR", "LSQB", "LBRACE", "BANG", "TRUE", "IF"})
_IDENT_TOKENS = frozenset(
    {
        "IDENT",
        "PRINCIPAL",
        "ACTION",
        "RESOURCE",
        "CONTEXT",
        "PERMIT",
        "FORBID",
        "WHEN",
        "UNLESS",
        "IN",
        "HAS",
        "LIKE",
        "IS",
        "THEN",
        "ELSE",
        "IF",
        "TRUE",
        "FALSE",
    }
)


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    text = str(tok)
    if tok.type == "STR":
        shown = text if len(text) <= 30 else text[:27] + '..."'
        return f"string literal {shown}"
    if tok.type == "NUMBER":
        return f"integer `{text}`"
    if tok.type == "IDENT":
        return f"identifier `{text}`"
    if tok.type in _IDENT_TOKENS:
        return f"keyword `{text}`"
    return f"`{text}`"


def _describe_expected(expected: set[str]) -> str:
    """Lark's terminal names in plain words, grouped (an expression, an operator...)."""
    exp = set(expected)
    parts: list[str] = []
    if exp == {"SEMICOLON", "WHEN", "UNLESS"}:
        return "`;` after the policy (or a `when`/`unless` condition)"
    if exp <= {"PERMIT", "FORBID", "AT", "$END"} and {"PERMIT", "FORBID"} <= exp:
        return "`permit` or `forbid`" + (" (or an `@annotation`)" if "AT" in exp else "")
    if {"COMMA", "EQEQ", "IN", "IS"} <= exp and "ANDAND" not in exp:
        # right after `principal`/`action`/`resource` in the scope
        more = " or `)`" if "RPAR" in exp else ""
        return f"`==`, `in`, `is` or `,`{more} (a scope reads `principal, action, resource`)"
    if "NUMBER" in exp and "STR" in exp and "LPAR" in exp:
        parts.append("an expression")
        exp -= _EXPR_START | _IDENT_TOKENS | {"MINUS", "PRINCIPAL_SLOT", "RESOURCE_SLOT"}
        exp -= {"OTHER_SLOT", "FALSE"}
    if "IDENT" in exp:
        parts.append("an identifier" if "STR" not in exp else "an attribute name")
        exp -= _IDENT_TOKENS | {"STR"}
    if len(exp & _OPERATOR_TOKENS) >= 3:
        parts.append("an operator")
        exp -= _OPERATOR_TOKENS | {"IN", "BANG"}
    words = []
    for name in exp:
        word = _TOKEN_WORDS.get(name)
        if word is None:
            word = f"`{_terminal_text(name)}`"
        words.append(word)
    parts.extend(sorted(words, key=lambda w: (w == "end of input", w)))
    if not parts:
        return "something else"
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _terminal_text(name: str) -> str:
    try:
        term = get_parser().get_terminal(name)
    except KeyError:
        return name.lower()
    return str(term.pattern.value)


EXCERPT_CHARS = 100
"""The longest source excerpt an error message quotes (a window around the column)."""


def _window(line: str, column: int) -> tuple[str, int]:
    """At most :data:`EXCERPT_CHARS` of ``line`` around ``column`` (1-based), and the
    column within that window: a minified policy or a huge literal is not quoted whole."""
    if len(line) <= EXCERPT_CHARS:
        return line, column
    start = max(0, min(column - 1 - EXCERPT_CHARS // 2, len(line) - EXCERPT_CHARS))
    window = line[start : start + EXCERPT_CHARS]
    prefix = "..." if start > 0 else ""
    suffix = "..." if start + EXCERPT_CHARS < len(line) else ""
    return f"{prefix}{window}{suffix}", column - start + len(prefix)


class _Source:
    """The text being parsed: maps offsets to line/column and renders excerpts."""

    __slots__ = ("_line_starts", "filename", "text")

    def __init__(self, text: str, filename: str | None) -> None:
        self.text = text
        self.filename = filename
        self._line_starts: list[int] | None = None

    @property
    def line_starts(self) -> list[int]:
        """Where each line starts: found when an error needs it (most texts parse)."""
        starts = self._line_starts
        if starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        return starts

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def error(self, line: int, column: int, message: str) -> PolicyParseError:
        where = f"{self.filename or '<input>'}:{line}:{column}"
        excerpt = ""
        if 1 <= line <= len(self.line_starts):
            start = self.line_starts[line - 1]
            end = self.text.find("\n", start)
            src_line = self.text[start : end if end >= 0 else len(self.text)].rstrip("\r")
            src_line, at = _window(src_line, column)
            pad = "".join("\t" if c == "\t" else " " for c in src_line[: max(at - 1, 0)])
            excerpt = f"\n  {src_line}\n  {pad}^"
        return PolicyParseError(
            f"{where}: {message}{excerpt}", filename=self.filename, line=line, column=column
        )

    def lark_error(self, e: UnexpectedInput) -> PolicyParseError:
        from lark.exceptions import (
            UnexpectedCharacters,
            UnexpectedEOF,
            UnexpectedInput,
            UnexpectedToken,
        )

        if isinstance(e, UnexpectedCharacters):
            if e.char == '"':
                msg = "unterminated string literal"
            elif e.char in "\\'":
                msg = f"unexpected character `{e.char}` (strings use double quotes)"
            else:
                msg = f"unexpected character {e.char!r}"
            return self.error(e.line, e.column, msg)
        if isinstance(e, UnexpectedToken):
            tok = e.token
            if tok.type == "$END" and tok.end_line is not None and tok.end_column is not None:
                # lark gives the end token the position of the last real token
                line, col = tok.end_line, tok.end_column
            elif tok.type == "$END":
                line, col = self._end_position()
            else:
                line, col = tok.line or 1, tok.column or 1
            expected = set(e.expected)
            if e.interactive_parser is not None:
                # LALR state merging makes `e.expected` too wide; ask the parser instead.
                with contextlib.suppress(UnexpectedInput):
                    expected = set(e.interactive_parser.accepts()) or expected
            found = _describe_token(tok)
            msg = f"expected {_describe_expected(expected)}, found {found}"
            if tok.type == "EQ":
                msg += " (use `==` to compare)"
            return self.error(line, col, msg)
        if isinstance(e, UnexpectedEOF):
            line, col = self._end_position()
            return self.error(line, col, "unexpected end of input")
        return self.error(1, 1, str(e))  # pragma: no cover - lark has no other kinds

    def _end_position(self) -> tuple[int, int]:
        """Where the text ends (used when the input has no token to point at)."""
        return self.position(len(self.text.rstrip()))


# ---------------------------------------------------------------- tree -> AST


def _edge_token(tree: Tree, end: int) -> Token | None:
    """The first (``end=0``) or last (``end=-1``) token under ``tree``, if any."""
    node: Node = tree
    while True:  # the usual case: follow the edge child down to a token
        if isinstance(node, Token):
            return node
        kids = node.children
        if not kids:
            break  # an empty subtree on the edge: search in order below
        node = kids[end]
    stack: list[Node] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Token):
            return node
        kids = node.children
        # push so that the wanted edge is popped first
        stack.extend(reversed(kids) if end == 0 else kids)
    return None


_REL_OPS: dict[str, ast.BinaryOp] = {
    "EQEQ": "==",
    "NE": "!=",
    "LT": "<",
    "LE": "<=",
    "GT": ">",
    "GE": ">=",
    "IN": "in",
}
_ARITH_OPS: dict[str, ast.BinaryOp] = {"PLUS": "+", "MINUS": "-", "STAR": "*"}
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}
_HEX = frozenset("0123456789abcdefABCDEF")


def _literal_pattern(out: list[ast.PatternElem], text: str) -> None:
    """Append a ``like`` pattern's text without escapes: ``*`` is the wildcard."""
    if "*" not in text:
        out.extend(text)
        return
    for j, part in enumerate(text.split("*")):
        if j:
            out.append(ast.WILDCARD)
        out.extend(part)


class _Converter:
    """Walks the lark tree top-down (so each construct knows its context) into the AST."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.filename = src.filename
        # Where template slots are being read: None inside the scope, else a phrase for
        # the error message ("a `when` clause").
        self.slot_context: str | None = "an expression"
        self.depth = 0
        self.expr_handlers: dict[str, Callable[[Tree], ast.Expr]] = {
            "if_expr": self.if_expr,
            "or_expr": self.or_expr,
            "and_expr": self.and_expr,
            "rel": self.rel,
            "has": self.has,
            "like": self.like,
            "is_": self.is_,
            "add": self.arith,
            "mult": self.arith,
            "not_": self.not_,
            "neg": self.neg,
            "member": self.member,
            "var": self.var,
            "entity": self.entity,
            "call": self.call,
            "paren": self.paren,
            "set": self.set_,
            "record": self.record,
        }

    # ---- positions and errors

    def span(self, node: Node) -> ast.Span:
        if isinstance(node, Token):
            return ast.Span(
                node.line or 0,
                node.column or 0,
                node.end_line or 0,
                (node.end_column or 1) - 1,
                node.start_pos or 0,
                node.end_pos or 0,
                self.filename,
            )
        first, last = _edge_token(node, 0), _edge_token(node, -1)
        if first is None or last is None:
            return ast.Span(0, 0, 0, 0, 0, 0, self.filename)
        return ast.Span(
            first.line or 0,
            first.column or 0,
            last.end_line or 0,
            (last.end_column or 1) - 1,
            first.start_pos or 0,
            last.end_pos or 0,
            self.filename,
        )

    def join(self, a: ast.Span, b: ast.Span) -> ast.Span:
        return ast.Span(a.line, a.column, b.end_line, b.end_column, a.start, b.end, self.filename)

    def fail(self, node: Node | ast.Span, message: str) -> NoReturn:
        sp = node if isinstance(node, ast.Span) else self.span(node)
        raise self.src.error(sp.line, sp.column, message)

    def fail_at(self, offset: int, message: str) -> NoReturn:
        line, col = self.src.position(offset)
        raise self.src.error(line, col, message)

    # ---- identifiers, names, strings

    def ident(self, tok: Token, what: str = "an identifier") -> str:
        name = str(tok)
        if name in RESERVED_WORDS:
            self.fail(tok, f"`{name}` is a reserved word and cannot be used as {what}")
        if name == RESERVED_NAMESPACE:
            self.fail(tok, f"`{name}` is reserved for the built-in namespace")
        return name

    def path(self, toks: Sequence[Node], what: str) -> str:
        """A ``::``-separated name from its segment tokens (the separators are dropped)."""
        segs = []
        for t in toks:
            tok = cast(Token, t)
            name = str(tok)
            if name in RESERVED_WORDS:
                self.fail(tok, f"`{name}` is a reserved word and cannot be used in {what}")
            if name == RESERVED_NAMESPACE:
                full = "::".join(str(x) for x in toks)
                self.fail(tok, f"`{full}` uses `__cedar`, which is reserved for built-in types")
            segs.append(name)
        return "::".join(segs)

    def string(self, tok: Token) -> str:
        return cast(str, self._unescape(tok, pattern=False))

    def pattern(self, tok: Token) -> tuple[ast.PatternElem, ...]:
        return cast(tuple[ast.PatternElem, ...], self._unescape(tok, pattern=True))

    def _unescape(self, tok: Token, pattern: bool) -> str | tuple[ast.PatternElem, ...]:
        # One step per escape, not per character: the text between escapes is copied by
        # slices and joins (a 10 MB literal loads in a fraction of a second).
        raw = str(tok)
        body = raw[1:-1]
        base = (tok.start_pos or 0) + 1
        if "\\" not in body and not pattern:
            return body
        find = body.find
        pos = 0
        if not pattern:
            pieces: list[str] = []
            while True:
                k = find("\\", pos)
                if k < 0:
                    pieces.append(body[pos:])
                    return "".join(pieces)
                pieces.append(body[pos:k])
                ch, pos = self._escape(body, k, base, pattern)
                pieces.append(ch)
        out: list[ast.PatternElem] = []
        while True:
            k = find("\\", pos)
            _literal_pattern(out, body[pos:] if k < 0 else body[pos:k])
            if k < 0:
                return tuple(out)
            ch, pos = self._escape(body, k, base, pattern)
            if ch == "*" and body[k + 1] != "*":  # `\u{2a}` is a wildcard, `\*` a star
                out.append(ast.WILDCARD)
            else:
                out.append(ch)

    def _escape(self, body: str, i: int, base: int, pattern: bool) -> tuple[str, int]:
        """The character of the escape at ``body[i]`` (a backslash) and where it ends."""
        e = body[i + 1] if i + 1 < len(body) else ""
        ch = _SIMPLE_ESCAPES.get(e)
        if ch is not None:
            return ch, i + 2
        if e == "*" and pattern:
            return "*", i + 2  # the one escape only patterns have: a literal star
        if e == "x":
            digits = body[i + 2 : i + 4]
            if len(digits) != 2 or not set(digits) <= _HEX or int(digits, 16) > 0x7F:
                self._bad_escape(base + i, body[i : i + 4])
            return chr(int(digits, 16)), i + 4
        if e == "u":
            close = body.find("}", i, i + 10)  # `\u{` and at most 6 digits
            digits = body[i + 3 : close] if close >= 0 and body[i + 2 : i + 3] == "{" else ""
            if not (1 <= len(digits) <= 6 and set(digits) <= _HEX):
                end = close + 1 if close >= 0 else i + 3
                self._bad_escape(base + i, body[i:end])
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                self._bad_escape(base + i, body[i : close + 1])
            return chr(code), close + 1
        self._bad_escape(base + i, body[i : i + 2])

    def _bad_escape(self, offset: int, text: str) -> NoReturn:
        self.fail_at(offset, f"`{text}` is not a valid escape sequence")

    def number(self, tok: Token, negative: bool = False) -> int:
        digits = str(tok).lstrip("0") or "0"
        value = int(digits) if len(digits) <= MAX_LITERAL_DIGITS else LONG_MAX + 2
        if negative:
            value = -value
        if value > LONG_MAX or value < LONG_MIN:
            shown = str(tok) if len(tok) <= 40 else f"{tok[:20]}...({len(tok)} digits)"
            shown = f"-{shown}" if negative else shown
            self.fail(tok, f"integer literal `{shown}` does not fit in 64 bits (a Long)")
        return value

    # ---- policies

    def policies(self, tree: Tree) -> list[ast.Policy]:
        return [self.policy(cast(Tree, p)) for p in tree.children]

    def policy(self, tree: Tree) -> ast.Policy:
        annotations: list[ast.Annotation] = []
        conditions: list[ast.Condition] = []
        effect = ""
        scope: Tree | None = None
        for child in tree.children:
            if isinstance(child, Token):
                if child.type != "SEMICOLON":
                    effect = str(child)
            elif child.data == "annotation":
                annotations.append(self.annotation(child, annotations))
            elif child.data == "scope":
                scope = child
            elif child.data == "condition":
                conditions.append(self.condition(child))
            else:  # empty_condition
                kind = cast(Token, child.children[0])
                self.fail(child, f"the `{kind}` condition is empty; write an expression in `{{}}`")
        assert scope is not None
        # the clauses are joined by `&&`: a level each up to BALANCE_CHAIN_AFTER (16), about
        # log2(n) once balanced, so the join alone never reaches MAX_EXPRESSION_DEPTH
        budget = MAX_EXPRESSION_DEPTH - ast.chain_levels(len(conditions))
        for c in conditions:
            self.checked(c.body, budget)
        p_tree, a_tree, r_tree = (cast(Tree, c) for c in scope.children)
        return ast.Policy(
            effect=cast(Any, effect),
            principal=self.scope_var(p_tree, "principal"),
            action=self.action_scope(a_tree),
            resource=self.scope_var(r_tree, "resource"),
            conditions=tuple(conditions),
            annotations=tuple(annotations),
            span=self.span(tree),
        )

    def annotation(self, tree: Tree, seen: list[ast.Annotation]) -> ast.Annotation:
        kids = tree.children  # `@`, key, and the value and `)` when present
        key_tok = cast(Token, kids[1])
        key = str(key_tok)
        if any(a.key == key for a in seen):
            self.fail(key_tok, f"duplicate annotation `@{key}`")
        value = self.string(cast(Token, kids[2])) if len(kids) > 2 else None
        return ast.Annotation(key, value, self.span(tree))

    def condition(self, tree: Tree) -> ast.Condition:
        kind_tok = cast(Token, tree.children[0])
        kind = str(kind_tok)
        self.slot_context = f"a `{kind}` clause" if kind == "when" else f"an `{kind}` clause"
        body = self.expr(tree.children[1])
        return ast.Condition(cast(Any, kind), body, self.span(tree))

    def scope_var(self, tree: Tree, var: str) -> ast.ScopeConstraint:
        sp = self.span(tree)
        v = cast(Any, var)
        if len(tree.children) == 1:
            return ast.ScopeConstraint(v, "any", span=sp)
        rhs = cast(Tree, tree.children[1])
        kids = rhs.children
        if rhs.data == "scope_bad":
            self._bad_scope_op(cast(Token, kids[0]))
        if rhs.data == "scope_is":
            etype = self.type_name(cast(Tree, kids[1]))
            if len(kids) == 2:
                return ast.ScopeConstraint(v, "is", entity_type=etype, span=sp)
            ent = self.scope_entity(kids[3], var)
            return ast.ScopeConstraint(v, "is_in", entity=ent, entity_type=etype, span=sp)
        kind: Any = "eq" if rhs.data == "scope_eq" else "in"
        return ast.ScopeConstraint(v, kind, entity=self.scope_entity(kids[1], var), span=sp)

    def _bad_scope_op(self, op: Token) -> NoReturn:
        if op.type == "EQ":
            self.fail(op, "`=` is not an operator; use `==` in the policy scope")
        self.fail(op, f"`{op}` cannot be used in the policy scope; use `==`, `in` or `is`")

    def scope_entity(self, node: Node, var: str) -> EntityUID | ast.Slot:
        self.slot_context = None
        try:
            e = self.expr(node)
        finally:
            self.slot_context = "an expression"
        if isinstance(e, ast.EntityLit):
            return e.uid
        if isinstance(e, ast.Slot):
            if e.name != "?" + var:
                self.fail(node, f"expected an entity or `?{var}` here, found the slot `{e.name}`")
            return e
        if isinstance(e, ast.SetLit):
            self.fail(node, f"the {var} scope takes a single entity, not a set")
        self.fail(node, f'expected an entity (like `Type::"id"`) or `?{var}` in the {var} scope')

    def action_scope(self, tree: Tree) -> ast.ActionConstraint:
        sp = self.span(tree)
        if len(tree.children) == 1:
            return ast.ActionConstraint("any", span=sp)
        rhs = cast(Tree, tree.children[1])
        kids = rhs.children
        if rhs.data == "scope_bad":
            self._bad_scope_op(cast(Token, kids[0]))
        if rhs.data == "scope_is":
            self.fail(kids[0], "`is` cannot be used in the action scope")
        self.slot_context = "the action scope"
        e = self.expr(kids[1])
        self.slot_context = "an expression"
        if rhs.data == "scope_eq":
            if isinstance(e, ast.SetLit):
                self.fail(kids[1], "`action ==` takes a single action; use `action in [...]`")
            return ast.ActionConstraint("eq", (self.action_uid(e, kids[1]),), span=sp)
        if isinstance(e, ast.SetLit):
            uids = tuple(self.action_uid(x, x.span) for x in e.elements)
            return ast.ActionConstraint("in_set", uids, span=sp)
        return ast.ActionConstraint("in", (self.action_uid(e, kids[1]),), span=sp)

    def action_uid(self, e: ast.Expr, where: Node | ast.Span) -> EntityUID:
        if not isinstance(e, ast.EntityLit):
            self.fail(
                where, 'expected an action entity (like `Action::"view"`) in the action scope'
            )
        t = e.uid.type
        if not is_action_type(t):
            self.fail(where, f"expected an entity of type `Action` here, found `{e.uid}`")
        return e.uid

    def type_name(self, tree: Tree) -> str:
        return self.path(tree.children, "a type name")

    # ---- expressions

    def expr(self, node: Node) -> ast.Expr:
        if isinstance(node, Token):
            return self.token_expr(node)
        # parentheses are unwrapped here (no frame each), but still count as nesting
        levels = 1
        while node.data == "paren":
            inner: Node = node.children[0]
            if isinstance(inner, Token):
                if self.depth + levels > MAX_EXPRESSION_DEPTH:
                    self.too_deep(node)
                return self.token_expr(inner)
            node = inner
            levels += 1
        self.depth += levels
        if self.depth > MAX_EXPRESSION_DEPTH:
            self.too_deep(node)
        try:
            return self.expr_handlers[node.data](node)
        finally:
            self.depth -= levels

    def too_deep(self, where: Node | ast.Span) -> NoReturn:
        self.fail(
            where,
            f"expression nests deeper than the limit of {MAX_EXPRESSION_DEPTH} levels "
            "(MAX_EXPRESSION_DEPTH; a chain `a + b + c` nests one level per operator: "
            "split the expression or the condition)",
        )

    def checked(self, e: ast.Expr, limit: int = MAX_EXPRESSION_DEPTH) -> ast.Expr:
        """``e``, once its whole tree is known to nest within ``limit`` levels."""
        deep = ast.too_deep(e, limit)
        if deep is not None:
            self.too_deep(deep.span)
        return e

    def token_expr(self, tok: Token) -> ast.Expr:
        t = tok.type
        if t == "NUMBER":
            return ast.Lit(self.number(tok), self.span(tok))
        if t == "STR":
            return ast.Lit(self.string(tok), self.span(tok))
        if t == "TRUE":
            return ast.Lit(True, self.span(tok))
        if t == "FALSE":
            return ast.Lit(False, self.span(tok))
        # template slots
        name = str(tok)
        if t == "OTHER_SLOT":
            self.fail(tok, f"`{name}` is not a template slot (only ?principal and ?resource)")
        if self.slot_context is not None:
            var = name[1:]
            self.fail(
                tok,
                f"template slot `{name}` cannot be used in {self.slot_context}; it is only "
                f"allowed in the {var} part of the scope (e.g. `{var} == {name}`)",
            )
        return ast.Slot(cast(Any, name), self.span(tok))

    def if_expr(self, tree: Tree) -> ast.Expr:
        k = tree.children
        return ast.If(self.expr(k[1]), self.expr(k[3]), self.expr(k[5]), self.span(tree))

    def _fold(self, tree: Tree, op: ast.BinaryOp) -> ast.Expr:
        operands = [self.expr(k) for k in tree.children[0::2]]
        if len(operands) <= ast.BALANCE_CHAIN_AFTER:
            left = operands[0]
            for right in operands[1:]:
                left = ast.Binary(op, left, right, self.join(left.span, right.span))
            return left
        return ast.join_balanced(  # BALANCE_CHAIN_AFTER
            operands, lambda a, b: ast.Binary(op, a, b, self.join(a.span, b.span))
        )

    def or_expr(self, tree: Tree) -> ast.Expr:
        return self._fold(tree, "||")

    def and_expr(self, tree: Tree) -> ast.Expr:
        return self._fold(tree, "&&")

    def rel(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        op = cast(Token, kids[1])
        if op.type == "EQ":
            self.fail(op, "`=` is not an operator; use `==` to compare")
        if len(kids) > 3:
            self.fail(
                kids[3],
                "comparison operators (==, !=, <, <=, >, >=, in) cannot be chained; "
                "add parentheses to make the order explicit",
            )
        left, right = self.expr(kids[0]), self.expr(kids[2])
        return ast.Binary(_REL_OPS[op.type], left, right, self.span(tree))

    def has(self, tree: Tree) -> ast.Expr:
        target = self.expr(tree.children[0])
        path = cast(Tree, tree.children[2]).children
        sp = self.span(tree)
        first = cast(Token, path[0])
        if first.type == "STR":
            if len(path) > 1:
                self.fail(
                    path[1], "after `has`, write an attribute path as identifiers: `e has a.b`"
                )
            return ast.Has(target, self.string(first), sp)
        if len(path) >= MAX_EXPRESSION_DEPTH:
            # `e has a.b.c` is `e has a && e.a has b && e.a.b has c`: one level per
            # attribute, and k(k+1)/2 attribute reads for k of them
            self.fail(
                path[MAX_EXPRESSION_DEPTH - 1],
                f"the attribute path after `has` has {len(path)} attributes: it nests deeper "
                f"than the limit of {MAX_EXPRESSION_DEPTH} levels (MAX_EXPRESSION_DEPTH; "
                "each attribute of the path is a level)",
            )
        attrs = [self.ident(cast(Token, t), "an attribute name") for t in path]
        result: ast.Expr = ast.Has(target, attrs[0], sp)
        prefix: ast.Expr = target
        for prev, attr in itertools.pairwise(attrs):
            prefix = ast.GetAttr(prefix, prev, sp)
            result = ast.Binary("&&", result, ast.Has(prefix, attr, sp), sp)
        return result

    def like(self, tree: Tree) -> ast.Expr:
        target = self.expr(tree.children[0])
        return ast.Like(target, self.pattern(cast(Token, tree.children[2])), self.span(tree))

    def is_(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        target = self.expr(kids[0])
        etype = self.type_name(cast(Tree, kids[2]))
        in_expr = self.expr(kids[4]) if len(kids) > 3 else None
        return ast.Is(target, etype, in_expr, self.span(tree))

    def arith(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        if len(kids) > 2 * MAX_EXPRESSION_DEPTH:
            self.too_deep(kids[2 * MAX_EXPRESSION_DEPTH - 1])
        left = self.expr(kids[0])
        for i in range(1, len(kids), 2):
            op = cast(Token, kids[i])
            if op.type == "SLASH":
                self.fail(op, "division (`/`) is not supported")
            if op.type == "PERCENT":
                self.fail(op, "the remainder operator (`%`) is not supported")
            right = self.expr(kids[i + 1])
            left = ast.Binary(_ARITH_OPS[op.type], left, right, self.join(left.span, right.span))
        return left

    def _unary_count(self, tree: Tree, sym: str) -> int:
        count = len(tree.children) - 1
        if count > 4:
            self.fail(tree.children[4], f"too many `{sym}` in a row (at most 4)")
        return count

    def not_(self, tree: Tree) -> ast.Expr:
        count = self._unary_count(tree, "!")
        e = self.expr(tree.children[-1])
        for i in range(count - 1, -1, -1):
            e = ast.Unary("!", e, self.join(self.span(tree.children[i]), e.span))
        return e

    def neg(self, tree: Tree) -> ast.Expr:
        count = self._unary_count(tree, "-")
        operand = tree.children[-1]
        if isinstance(operand, Token) and operand.type == "NUMBER":
            # `-5` is the literal -5 (so that the smallest Long can be written).
            minus = self.span(tree.children[count - 1])
            e: ast.Expr = ast.Lit(
                self.number(operand, negative=True), self.join(minus, self.span(operand))
            )
            count -= 1
        else:
            e = self.expr(operand)
        for i in range(count - 1, -1, -1):
            e = ast.Unary("-", e, self.join(self.span(tree.children[i]), e.span))
        return e

    def member(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        if len(kids) > MAX_EXPRESSION_DEPTH:
            self.too_deep(kids[MAX_EXPRESSION_DEPTH])
        e = self.expr(kids[0])
        for acc in kids[1:]:
            acc = cast(Tree, acc)
            sp = self.join(e.span, self.span(acc))
            if acc.data == "field":
                e = ast.GetAttr(e, self.ident(cast(Token, acc.children[0]), "an attribute"), sp)
            elif acc.data == "index":
                e = ast.GetAttr(e, self.string(cast(Token, acc.children[0])), sp)
            else:
                name_tok = cast(Token, acc.children[0])
                args = self.args(cast(Tree, acc.children[1]))
                e = ast.MethodCall(e, self.method_name(name_tok, len(args)), args, sp)
        return e

    def method_name(self, tok: Token, nargs: int) -> str:
        name = self.ident(tok, "a method name")
        if name in BUILTIN_METHOD_ARITY:
            want = BUILTIN_METHOD_ARITY[name]
            if nargs != want:
                s = "" if want == 1 else "s"
                self.fail(tok, f"`{name}` takes exactly {want} argument{s}, got {nargs}")
        elif name in EXTENSION_FUNCTIONS:
            self.fail(tok, f"`{name}` is a function, not a method: call it as `{name}(...)`")
        elif name not in EXTENSION_METHODS:
            self.fail(tok, f"`{name}` is not a known method")
        return name

    def args(self, tree: Tree) -> tuple[ast.Expr, ...]:
        out = []
        for a in tree.children:  # a loop, not a generator: one frame less per level
            out.append(self.expr(a))
        return tuple(out)

    def var(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        if len(kids) == 1 and str(kids[0]) in VARIABLES:
            return ast.Var(cast(Any, str(kids[0])), self.span(tree))
        name = "::".join(str(k) for k in kids)
        if len(kids) == 1 and name in RESERVED_WORDS:
            self.fail(tree, f"`{name}` is a reserved word and cannot start an expression")
        self.fail(
            tree,
            f"unknown variable `{name}` (the variables are principal, action, resource and "
            f'context; an entity reference is written `{name}::"id"`)',
        )

    def entity(self, tree: Tree) -> ast.Expr:
        kids = tree.children
        etype = self.path(kids[:-1], "an entity type")
        uid = EntityUID(etype, self.string(cast(Token, kids[-1])))
        return ast.EntityLit(uid, self.span(tree))

    def call(self, tree: Tree) -> ast.Expr:
        kids = tree.children  # name segments, args, `)`
        name = "::".join(str(k) for k in kids[:-2])
        if name not in EXTENSION_FUNCTIONS:
            if name in BUILTIN_METHOD_ARITY or name in EXTENSION_METHODS:
                self.fail(tree, f"`{name}` is a method, not a function: call it as `x.{name}(...)`")
            if RESERVED_NAMESPACE in name.split("::"):
                self.path(kids[:-2], "a function name")
            self.fail(tree, f"`{name}` is not a known extension function")
        args = self.args(cast(Tree, kids[-2]))
        return ast.ExtCall(name, args, self.span(tree))

    def paren(self, tree: Tree) -> ast.Expr:
        return self.expr(tree.children[0])

    def set_(self, tree: Tree) -> ast.Expr:
        return ast.SetLit(self.args(cast(Tree, tree.children[1])), self.span(tree))

    def record(self, tree: Tree) -> ast.Expr:
        fields: list[tuple[str, ast.Expr]] = []
        seen: set[str] = set()
        for init in tree.children[1:-1]:  # between `{` and `}`
            init = cast(Tree, init)
            key_tok = cast(Token, init.children[0])
            key = self.string(key_tok) if key_tok.type == "STR" else self.ident(key_tok, "a key")
            if key in seen:
                self.fail(key_tok, f"duplicate key `{key}` in record literal")
            seen.add(key)
            fields.append((key, self.expr(init.children[1])))
        return ast.RecordLit(tuple(fields), self.span(tree))

    def entity_ref(self, tree: Tree) -> EntityUID:
        kids = tree.children
        return EntityUID(self.path(kids[:-1], "an entity type"), self.string(cast(Token, kids[-1])))


# ---------------------------------------------------------------- public API


@functools.cache
def _lalr() -> tuple[lalr.Tables, lalr.Lexer]:
    tables = lalr.load_tables("policy", get_parser)
    return tables, lalr.policy_lexer(tables)


def _parse_tree(src: _Source, start: str) -> Tree:
    # The stored tables parse without building lark's parser (start-up time); text they
    # reject is parsed again by lark, whose exception the error message is made of.
    tables, lexer = _lalr()
    tree = lalr.parse(tables, lexer, src.text, start)
    if tree is not None:
        return tree
    from lark.exceptions import UnexpectedInput

    try:
        tree = lalr.from_lark(get_parser().parse(src.text, start=start))
    except UnexpectedInput as e:
        raise src.lark_error(e) from None
    return cast(Tree, tree)


def parse_policies(text: str, filename: str | None = None) -> list[ast.Policy]:
    """All policies and templates of a ``.polang`` text, in source order.

    Results are memoized per ``(text, filename)`` (the AST is immutable), because stores
    and test corpora parse the same texts again and again; texts longer than
    :data:`MAX_CACHED_TEXT` are not kept (the cache's memory stays bounded).
    """
    if len(text) > MAX_CACHED_TEXT:
        return list(_parse_policies_text(text, filename))
    return list(_parse_policies_cached(text, filename))


MAX_CACHED_TEXT = 256 * 1024
"""The longest policy text whose parse is memoized (characters)."""


def _parse_policies_text(text: str, filename: str | None) -> tuple[ast.Policy, ...]:
    src = _Source(text, filename)
    return tuple(_Converter(src).policies(_parse_tree(src, "policies")))


_parse_policies_cached = functools.lru_cache(maxsize=512)(_parse_policies_text)


def parse_policy(text: str, filename: str | None = None) -> ast.Policy:
    """Exactly one policy (or template); anything else is a parse error."""
    policies = parse_policies(text, filename)
    if len(policies) != 1:
        src = _Source(text, filename)
        if not policies:
            raise src.error(1, 1, "expected one policy, found none")
        sp = policies[1].span
        raise src.error(sp.line, sp.column, f"expected one policy, found {len(policies)}")
    return policies[0]


def parse_expression(text: str, filename: str | None = None) -> ast.Expr:
    """A standalone expression (template slots are not allowed outside a scope)."""
    src = _Source(text, filename)
    tree = _parse_tree(src, "expression")
    conv = _Converter(src)
    return conv.checked(conv.expr(tree.children[0]))


def parse_entity_uid(text: str) -> EntityUID:
    """An entity reference in policy syntax, e.g. ``Ns::Action::"view"``."""
    src = _Source(text, None)
    return _Converter(src).entity_ref(_parse_tree(src, "entity_ref"))
