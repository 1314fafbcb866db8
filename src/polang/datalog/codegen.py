"""Compile non-recursive Datalog rules (no builtins) to one Python function.

The compiled backend runs the fixed decision rules (``rules/decision.dl``) this way: the
rules are turned into straight nested loops and membership tests, generated as Python
source once and ``exec``-ed, instead of being interpreted per request.

Restriction (checked): values in the relations must compare by Python equality without
the ``True == 1`` trap, i.e. symbols (``str``) and Bools only, which is what the decision
relations hold. Recursive rules are refused: use :mod:`polang.datalog.seminaive`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from polang.datalog.ir import Atom, Const, Rule, Var
from polang.datalog.seminaive import stratify

Relations = Mapping[str, AbstractSet[tuple[Any, ...]]]


class CodegenError(ValueError):
    """The rules are outside what this compiler accepts."""


def _lit(v: Any) -> str:
    if isinstance(v, bool | str):
        return repr(v)
    raise CodegenError(f"constant {v!r}: only symbols and Bools can be compiled")


def compile_rules(
    rules: Iterable[Rule], inputs: Iterable[str]
) -> Callable[[Relations], dict[str, set[tuple[Any, ...]]]]:
    rules = list(rules)
    inputs = set(inputs)
    heads = {r.head.pred for r in rules}
    for r in rules:
        for lit in r.body:
            if not isinstance(lit, Atom):
                raise CodegenError(f"builtin in {r}: not supported by codegen")
            if lit.pred in heads and lit.pred == r.head.pred:
                raise CodegenError(f"recursive rule {r}")
            if lit.pred not in heads and lit.pred not in inputs:
                raise CodegenError(f"{lit.pred} is neither an input nor derived")
    preds = sorted(inputs | heads)
    names = {p: f"R_{i}" for i, p in enumerate(preds)}
    lines = ["def run(rels):"]
    for p in preds:
        if p in inputs:
            lines.append(f"    {names[p]} = rels.get({p!r}, EMPTY)")
        else:
            lines.append(f"    {names[p]} = set()")
    for stratum in stratify(rules):
        for r in stratum:
            lines.extend(_rule(r, names))
    out = ", ".join(f"{p!r}: {names[p]}" for p in sorted(heads))
    lines.append(f"    return {{{out}}}")
    src = "\n".join(lines)
    ns: dict[str, Any] = {"EMPTY": frozenset()}
    exec(compile(src, "<polang decision rules>", "exec"), ns)
    fn: Callable[[Relations], dict[str, set[tuple[Any, ...]]]] = ns["run"]
    fn.__doc__ = src  # keep the generated code inspectable
    return fn


def _rule(r: Rule, names: Mapping[str, str]) -> list[str]:
    bound: set[str] = set()
    out: list[str] = [f"    # {r}"]
    depth = 1
    counter = 0

    def term(t: Any) -> str:
        return t.name if isinstance(t, Var) else _lit(t.value)

    def pad() -> str:
        return "    " * depth

    for lit in r.body:
        assert isinstance(lit, Atom)  # compile_rules refused builtins
        rel = names[lit.pred]
        args = lit.args
        if lit.negated or all(isinstance(t, Const) or t.name in bound for t in args):
            tup = "(" + "".join(term(t) + ", " for t in args) + ")"
            test = "not in" if lit.negated else "in"
            out.append(f"{pad()}if {tup} {test} {rel}:")
            depth += 1
            continue
        counter += 1
        tv = f"t{counter}"
        out.append(f"{pad()}for {tv} in {rel}:")
        depth += 1
        conds: list[str] = []
        for i, t in enumerate(args):
            if isinstance(t, Const):
                conds.append(f"{tv}[{i}] == {_lit(t.value)}")
            elif t.name in bound:
                conds.append(f"{tv}[{i}] == {t.name}")
            else:
                out.append(f"{pad()}{t.name} = {tv}[{i}]")
                bound.add(t.name)
        if conds:
            out.append(f"{pad()}if {' and '.join(conds)}:")
            depth += 1
    head = "(" + "".join(term(t) + ", " for t in r.head.args) + ")"
    out.append(f"{pad()}{names[r.head.pred]}.add({head})")
    return out
