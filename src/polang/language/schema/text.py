"""The human-readable form (``.polangschema``): the LALR parser's tree -> declarations."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

from polang.errors import SchemaError
from polang.inputs.fields import closest
from polang.language import lalr
from polang.language.lalr import IDENT_RE, Token, Tree
from polang.language.values import EntityUID

from .declarations import (
    _Loc,
    _RAction,
    _RApplies,
    _RAttr,
    _RCommon,
    _REntity,
    _RName,
    _RNamespace,
    _RRecord,
    _RRef,
    _RSet,
    _RType,
    _Source,
)
from .model import MAX_SCHEMA_TYPE_DEPTH, Annotations, Schema, too_deep_type_message
from .names import CEDAR_NAMESPACE, RESERVED_WORDS, SCHEMA_KEYWORDS, _action_type, _qualify
from .resolve import _Resolver

if TYPE_CHECKING:
    from lark import Lark
    from lark.exceptions import UnexpectedInput

# ================================================================ human-readable form


@functools.cache
def _schema_lexer(tables: lalr.Tables) -> lalr.Lexer:
    return lalr.schema_lexer(tables)


@functools.cache
def _lark_parser() -> Lark:
    from lark import Lark  # lark: for a syntax error's message only (start-up time)

    from polang.language.schema_lexer import SchemaLexer  # lark's lexer

    grammar = (Path(__file__).parent.parent / "grammar" / "schema.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer=SchemaLexer, maybe_placeholders=True, cache=True)


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}
_UNICODE_ESCAPE = re.compile(r"u\{([0-9a-fA-F]{1,6})\}")


def unescape_string(body: str) -> str:
    """The text of a string literal's body (without quotes); ValueError on a bad escape."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("a string cannot end with a lone `\\`")
        esc = body[i + 1]
        simple = _ESCAPES.get(esc)
        if simple is not None:
            out.append(simple)
            i += 2
            continue
        m = _UNICODE_ESCAPE.match(body, i + 1)
        if m is None:
            raise ValueError(f"invalid escape `\\{esc}`")
        code = int(m.group(1), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"`\\u{{{m.group(1)}}}` is not a Unicode scalar value")
        out.append(chr(code))
        i = m.end()
    return "".join(out)


class _HumanReader:
    """Walks the lark tree into raw declarations (checking names as it goes)."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.namespaces: dict[str, _RNamespace] = {}

    def read(self, tree: Tree) -> list[_RNamespace]:
        for item in tree.children:
            assert isinstance(item, Tree)
            if item.data == "namespace":
                self._namespace(item)
            else:
                ns = self.namespaces.get("")
                if ns is None:
                    ns = self.namespaces[""] = _RNamespace("", _Loc(1, 1))
                self._decl(ns, item)
        return list(self.namespaces.values())

    # ------------------------------------------------------------ helpers

    def _loc(self, tok: Token) -> _Loc:
        return _Loc(tok.line or 0, tok.column or 0)

    def _err(self, tok: Token, message: str) -> SchemaError:
        return self.src.error(self._loc(tok), message)

    def _str(self, tok: Token) -> str:
        try:
            return unescape_string(tok.value[1:-1])
        except ValueError as e:
            raise self._err(tok, str(e)) from None

    def _ident(self, tok: Token, what: str) -> str:
        """An identifier that names something: never a reserved word."""
        if tok.value in RESERVED_WORDS:
            raise self._err(tok, f"`{tok.value}` is a reserved word and cannot name {what}")
        return str(tok.value)

    def _path(self, tree: Tree, what: str) -> tuple[str, _Loc]:
        toks = [t for t in tree.children if isinstance(t, Token)]
        for t in toks:
            self._ident(t, what)
        return "::".join(t.value for t in toks), self._loc(toks[0])

    def _annotations(self, tree: Tree) -> Annotations:
        out: dict[str, str | None] = {}
        for ann in tree.children:
            assert isinstance(ann, Tree)
            key_tok, value_tok = ann.children
            assert isinstance(key_tok, Token)
            if key_tok.value in out:
                raise self._err(key_tok, f"duplicate annotation `@{key_tok.value}`")
            out[key_tok.value] = None if value_tok is None else self._str(cast(Token, value_tok))
        return tuple(out.items())

    # ------------------------------------------------------------ declarations

    def _namespace(self, tree: Tree) -> None:
        ann_tree, path_tree, *decls = tree.children
        name, loc = self._path(cast(Tree, path_tree), "a namespace")
        if CEDAR_NAMESPACE in name.split("::"):
            raise self.src.error(loc, f"`{name}` uses the reserved `{CEDAR_NAMESPACE}` namespace")
        if name in self.namespaces:
            raise self.src.error(loc, f"namespace `{name}` is declared twice")
        ns = self.namespaces[name] = _RNamespace(name, loc, self._annotations(cast(Tree, ann_tree)))
        for d in decls:
            self._decl(ns, cast(Tree, d))

    def _decl(self, ns: _RNamespace, tree: Tree) -> None:
        if tree.data == "entity_decl":
            self._entity_decl(ns, tree)
        elif tree.data == "action_decl":
            self._action_decl(ns, tree)
        else:
            self._type_decl(ns, tree)

    def _decl_name(self, tok: Token, what: str) -> str:
        name = self._ident(tok, what)
        if name == CEDAR_NAMESPACE:
            raise self._err(tok, f"`{CEDAR_NAMESPACE}` is reserved and cannot name {what}")
        return name

    def _entity_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, idents, body = tree.children
        annotations = self._annotations(cast(Tree, ann_tree))
        assert isinstance(body, Tree)
        member_of: list[tuple[str, _Loc]] = []
        shape: _RType | None = None
        tags: _RType | None = None
        enum: tuple[str, ...] | None = None
        if body.data == "entity_enum":
            enum = tuple(self._str(cast(Token, t)) for t in body.children[1:])
        else:
            _in, parents, record, _tags, tags_type = body.children
            if parents is not None:
                member_of = self._ent_or_types(cast(Tree, parents), "an entity type")
            if record is not None:
                shape = self._record(cast(Tree, record))
            if tags_type is not None:
                tags = self._type(cast(Tree, tags_type))
        for tok in cast(Tree, idents).children:
            assert isinstance(tok, Token)
            name = self._decl_name(tok, "an entity type")
            if name == "Action":
                raise self._err(tok, "`Action` cannot be declared as an entity type")
            if name in ns.entities:
                raise self._err(tok, f"entity type `{_qualify(ns.name, name)}` is declared twice")
            ns.entities[name] = _REntity(
                name, self._loc(tok), member_of, shape, tags, enum, annotations
            )

    def _action_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, names, _in, refs, applies = tree.children
        annotations = self._annotations(cast(Tree, ann_tree))
        member_of = self._refs(cast(Tree, refs)) if refs is not None else []
        applies_to = self._applies(cast(Tree, applies)) if applies is not None else None
        for name_tree in cast(Tree, names).children:
            name, tok = self._name(cast(Tree, name_tree), "an action")
            if name in ns.actions:
                uid = EntityUID(_action_type(ns.name), name)
                raise self._err(tok, f"action `{uid}` is declared twice")
            ns.actions[name] = _RAction(name, self._loc(tok), member_of, applies_to, annotations)

    def _type_decl(self, ns: _RNamespace, tree: Tree) -> None:
        ann_tree, _kw, tok, type_tree = tree.children
        assert isinstance(tok, Token)
        name = self._decl_name(tok, "a common type")
        if name in SCHEMA_KEYWORDS:
            raise self._err(tok, f"`{name}` is a reserved type name and cannot name a common type")
        if name in ns.commons:
            raise self._err(tok, f"common type `{_qualify(ns.name, name)}` is declared twice")
        ns.commons[name] = _RCommon(
            name,
            self._loc(tok),
            self._type(cast(Tree, type_tree)),
            self._annotations(cast(Tree, ann_tree)),
        )

    def _name(self, tree: Tree, what: str) -> tuple[str, Token]:
        (tok,) = tree.children
        assert isinstance(tok, Token)
        if tok.type == "STR":
            return self._str(tok), tok
        return self._ident(tok, what), tok

    def _refs(self, tree: Tree) -> list[_RRef]:
        out = []
        for ref in tree.children:
            assert isinstance(ref, Tree)
            if ref.data == "plain_ref":
                name, tok = self._name(cast(Tree, ref.children[0]), "an action")
                out.append(_RRef(name, None, self._loc(tok)))
            else:
                toks = cast(list[Token], ref.children)
                for t in toks[:-1]:
                    self._ident(t, "an action type")
                out.append(
                    _RRef(
                        self._str(toks[-1]),
                        "::".join(t.value for t in toks[:-1]),
                        self._loc(toks[0]),
                    )
                )
        return out

    def _applies(self, tree: Tree) -> _RApplies:
        kw = cast(Token, tree.children[0])
        principals: list[tuple[str, _Loc]] | None = None
        resources: list[tuple[str, _Loc]] | None = None
        context: _RType | None = None
        seen: set[str] = set()
        for decl in tree.children[1:]:
            if decl is None:
                continue
            assert isinstance(decl, Tree)
            key_tok, value = decl.children
            assert isinstance(key_tok, Token)
            if key_tok.value in seen:
                raise self._err(key_tok, f"`{key_tok.value}` is declared twice in `appliesTo`")
            seen.add(key_tok.value)
            if decl.data == "app_context":
                context = self._type(cast(Tree, value))
                continue
            types = self._ent_or_types(cast(Tree, value), "an entity type")
            if not types:
                raise self._err(
                    key_tok, f"`{key_tok.value}` in `appliesTo` needs at least one entity type"
                )
            if decl.data == "app_principal":
                principals = types
            else:
                resources = types
        if principals is None:
            raise self._err(kw, "`appliesTo` must declare `principal`")
        if resources is None:
            raise self._err(kw, "`appliesTo` must declare `resource`")
        return _RApplies(principals, resources, context)

    def _ent_or_types(self, tree: Tree, what: str) -> list[tuple[str, _Loc]]:
        return [
            self._path(p, what) for p in tree.children if isinstance(p, Tree) and p.data == "path"
        ]

    # ------------------------------------------------------------ types

    def _type(self, tree: Tree, depth: int = 1) -> _RType:
        while tree.data == "type":
            tree = cast(Tree, tree.children[0])
        if tree.data == "type_path":
            name, loc = self._path(cast(Tree, tree.children[0]), "a type")
            if name == "Set":
                raise self.src.error(loc, "`Set` needs an element type: `Set<...>`")
            return _RName(name, "any", loc)
        if tree.data == "type_generic":
            path_tree, elem = tree.children
            name, loc = self._path(cast(Tree, path_tree), "a type")
            if name != "Set":
                raise self.src.error(loc, f"`{name}` takes no type argument (only `Set<...>` does)")
            if depth >= MAX_SCHEMA_TYPE_DEPTH:  # its element would be past the limit
                raise self.src.error(loc, too_deep_type_message())
            return _RSet(self._type(cast(Tree, elem), depth + 1), loc)
        return self._record(tree, depth)

    def _record(self, tree: Tree, depth: int = 1) -> _RRecord:
        brace = cast(Token, tree.children[0])
        if depth >= MAX_SCHEMA_TYPE_DEPTH and any(d is not None for d in tree.children[1:]):
            raise self._err(brace, too_deep_type_message())
        attrs: dict[str, _RAttr] = {}
        for decl in tree.children[1:]:
            if decl is None:
                continue
            assert isinstance(decl, Tree)
            ann_tree, name_tree, qmark, type_tree = decl.children
            name, tok = self._name(cast(Tree, name_tree), "an attribute")
            if name in attrs:
                raise self._err(tok, f"attribute `{name}` is declared twice")
            attrs[name] = _RAttr(
                self._type(cast(Tree, type_tree), depth + 1),
                qmark is None,
                self._annotations(cast(Tree, ann_tree)),
                self._loc(tok),
            )
        return _RRecord(attrs, False, self._loc(brace))


def _syntax_error(src: _Source, text: str, e: UnexpectedInput) -> SchemaError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    line, column = e.line, e.column
    if (isinstance(e, UnexpectedToken) and e.token.type == "$END") or line is None or line < 1:
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
        return src.error(_Loc(line, column), "unexpected end of the schema")
    if isinstance(e, UnexpectedToken):
        tok = e.token
        terminals = e.accepts or e.expected
        expected = sorted(_describe_terminal(t) for t in terminals)
        message = f"unexpected {_describe_token(tok)}"
        if expected:
            message += "; expected " + ", ".join(expected)
        if tok.type == "IDENT":  # a misspelt keyword: `entitty A;`, `Entity A;`
            words = [w for t in terminals if (w := _keyword_of(t)) is not None]
            exact = [w for w in words if w.lower() == str(tok.value).lower()]
            near = exact[0] if exact else closest(str(tok.value), words, cutoff=0.7)
            if near:
                message += f"; did you mean `{near}`?"
        return src.error(_Loc(line, column), message)
    if isinstance(e, UnexpectedCharacters):
        if e.char == '"':
            return src.error(_Loc(line, column), "unterminated string literal")
        return src.error(_Loc(line, column), f"unexpected character {e.char!r}")
    return src.error(_Loc(line, column), "syntax error")


_TERMINAL_TEXT = {
    "IDENT": "a name",
    "STR": "a string",
    "LBRACE": "`{`",
    "LBRACKET": "`[`",
    "QMARK": "`?`",
    "$END": "the end of the schema",
}


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    try:
        pattern = _lark_parser().get_terminal(name).pattern
    except KeyError:  # not a terminal of the grammar's own (lark's end marker, ...)
        return name.lower()
    return f"`{pattern.value}`" if pattern.type == "str" else name.lower()


def _keyword_of(name: str) -> str | None:
    """The word a keyword terminal stands for (``ENTITY`` -> ``entity``), else ``None``."""
    try:
        pattern = _lark_parser().get_terminal(name).pattern
    except KeyError:
        return None
    value = str(pattern.value)
    return value if pattern.type == "str" and IDENT_RE.match(value) else None


@functools.cache
def _keyword_words() -> frozenset[str]:
    terminals = _lark_parser().terminals
    return frozenset(t.pattern.value for t in terminals if t.pattern.type == "str")


def _describe_token(tok: Token) -> str:
    if tok.type == "STR":
        return f"string {tok.value}"
    if tok.type == "IDENT" and tok.value not in _keyword_words():
        return f"name `{tok.value}`"
    return f"`{tok.value}`"


def parse_schema(text: str, filename: str | None = None) -> Schema:
    """Parse the human-readable form (``.polangschema``) into the resolved model.

    Raises ``SchemaError`` naming ``file:line:col`` for syntax errors and for every
    inconsistency (undefined or duplicate names, cycles, reserved names...).
    """
    src = _Source(filename)
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of the schema
    tables = lalr.load_tables("schema", _lark_parser)
    tree = lalr.parse(tables, _schema_lexer(tables), text, "start")
    if tree is None:  # a syntax error: lark's exception makes the message
        from lark.exceptions import UnexpectedInput

        try:
            tree = lalr.from_lark(_lark_parser().parse(text))
        except UnexpectedInput as e:
            raise _syntax_error(src, text, e) from None
    return _Resolver(src, _HumanReader(src).read(tree)).run()
