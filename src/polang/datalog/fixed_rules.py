"""Load the fixed rules (``rules/*.dl``) shipped inside the wheel as ``polang.rules``.

The syntax is plain Datalog: ``head(T, ...) :- lit, not lit, ... .`` with ``%`` comments.
Identifiers starting with an upper-case letter are variables; others are constants
(``true``/``false`` are the Bools, anything else a symbol string).
"""

from __future__ import annotations

import importlib
import os
import re
from functools import cache

from polang.datalog.ir import Atom, Const, Rule, Term, Var
from polang.errors import PolangError

_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<comment>%[^\n]*)|(?P<tok>:-|[A-Za-z_][A-Za-z0-9_]*|\"[^\"]*\"|[(),.])"
    r"|(?P<bad>.)",
    re.DOTALL,
)


class RuleSyntaxError(PolangError):
    """A fixed-rule file is malformed (a packaging bug, reported with its position)."""


def _tokens(text: str, filename: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    line = 1
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "tok":
            out.append((m.group(), line))
        elif kind == "bad":
            raise RuleSyntaxError(f"{filename}:{line}: unexpected character {m.group()!r}")
        elif kind == "ws":
            line += m.group().count("\n")
    return out


def _term(tok: str) -> Term:
    if tok.startswith('"'):
        return Const(tok[1:-1])
    if tok[0].isupper():
        return Var(tok)
    if tok == "true":
        return Const(True)
    if tok == "false":
        return Const(False)
    return Const(tok)


def parse_rules(text: str, filename: str = "<rules>") -> list[Rule]:
    toks = _tokens(text, filename)
    last_line = toks[-1][1] if toks else 1
    toks.append(("<end of file>", last_line))  # sentinel: errors instead of IndexError
    i = 0
    rules: list[Rule] = []

    def expect(t: str) -> None:
        nonlocal i
        if toks[i][0] != t:
            line, found = toks[i][1], toks[i][0]
            raise RuleSyntaxError(f"{filename}:{line}: expected {t!r}, found {found!r}")
        i += 1

    def atom() -> Atom:
        nonlocal i
        negated = False
        if toks[i][0] == "not":
            negated = True
            i += 1
        name = toks[i][0]
        if not (name[0].isalpha() or name[0] == "_"):
            raise RuleSyntaxError(f"{filename}:{toks[i][1]}: expected a predicate, found {name!r}")
        i += 1
        args: list[Term] = []
        if i < len(toks) and toks[i][0] == "(":
            i += 1
            while True:
                args.append(_term(toks[i][0]))
                i += 1
                if toks[i][0] == ",":
                    i += 1
                    continue
                expect(")")
                break
        return Atom(name, tuple(args), negated)

    while toks[i][0] != "<end of file>":
        head = atom()
        body: list[Atom] = []
        if toks[i][0] == ":-":
            i += 1
            while True:
                body.append(atom())
                if toks[i][0] == ",":
                    i += 1
                    continue
                break
        expect(".")
        rules.append(Rule(head, tuple(body)))
    return rules


@cache
def fixed_rules(name: str) -> tuple[Rule, ...]:
    """The rules of ``rules/<name>.dl``, read from the package's directory when it has
    one (``importlib.resources`` imports tempfile, shutil and more: 9 ms of start-up).

    ``polang.rules`` is a data package (the repository's ``rules/``), found by name: it
    holds no code, and an ``import polang.rules`` would read as an import of the root
    package ``polang``, which sits above every layer (``tests/test_layers.py``)."""
    for where in importlib.import_module("polang.rules").__path__:
        try:
            with open(os.path.join(where, f"{name}.dl"), encoding="utf-8") as f:
                text = f.read()
            break
        except OSError:
            continue
    else:  # a zipped install, say (importlib.resources: start-up time, see above)
        from importlib import resources

        text = resources.files("polang.rules").joinpath(f"{name}.dl").read_text("utf-8")
    return tuple(parse_rules(text, f"rules/{name}.dl"))
