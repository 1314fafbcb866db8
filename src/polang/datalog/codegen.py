"""Compile non-recursive Datalog rules (no builtins) to one Python function.

The compiled backend runs the fixed decision rules (``rules/decision.dl``) this way: the
rules are turned into straight nested loops and membership tests, generated as Python
source once and ``exec``-ed, instead of being interpreted per request.

Relations have a *compact* form in the generated code, so a request allocates no tuples
for its policy atoms: a 0-ary relation is a Bool (holds or not), a unary one a set of
bare values, and wider ones sets of tuples. :func:`compile_compact` exposes that form (the
backend's per-request path); :func:`compile_rules` wraps it in the plain
"name -> set of tuples" form.

Restriction (checked): values in the relations must compare by Python equality without
the ``True == 1`` trap, i.e. symbols (``str``) and Bools only, which is what the decision
relations hold. Recursive rules (directly or through other rules) are refused: use
:mod:`polang.datalog.seminaive`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from polang.datalog.ir import Atom, Const, Rule, Var
from polang.datalog.seminaive import stratify

Relations = Mapping[str, AbstractSet[tuple[Any, ...]]]


class CodegenError(ValueError):
    """The rules are outside what this compiler accepts."""


@dataclass(frozen=True, slots=True)
class CompactRules:
    """Generated rules over compact relations.

    ``run(*inputs)`` takes the input relations in ``inputs`` order and returns every derived
    relation by name. ``arity`` gives each relation's width (0: Bool, 1: set of values,
    otherwise a set of tuples).
    """

    run: Callable[..., dict[str, Any]]
    inputs: tuple[str, ...]
    arity: Mapping[str, int]
    source: str


def _lit(v: Any) -> str:
    if isinstance(v, bool | str):
        return repr(v)
    raise CodegenError(f"constant {v!r}: only symbols and Bools can be compiled")


def _arities(rules: list[Rule]) -> dict[str, int]:
    arity: dict[str, int] = {}
    for r in rules:
        for lit in (r.head, *r.body):
            if not isinstance(lit, Atom):
                raise CodegenError(f"builtin in {r}: not supported by codegen")
            n = arity.setdefault(lit.pred, len(lit.args))
            if n != len(lit.args):
                raise CodegenError(f"{lit.pred} is used with {n} and {len(lit.args)} arguments")
    return arity


def _ordered(rules: list[Rule], heads: set[str]) -> list[Rule]:
    """Rules so that every derived predicate is complete before any rule reads it."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    deps = {
        h: {lit.pred for r in rules if r.head.pred == h for lit in r.body if isinstance(lit, Atom)}
        for h in heads
    }

    def visit(p: str) -> None:
        if state.get(p) == 2:
            return
        if state.get(p) == 1:
            raise CodegenError(f"recursive rules through {p}")
        state[p] = 1
        for d in sorted(deps[p] & heads):
            visit(d)
        state[p] = 2
        order.append(p)

    stratify(rules)  # refuses negation through recursion with its own error
    for h in sorted(heads):
        visit(h)
    rank = {p: i for i, p in enumerate(order)}
    return sorted(rules, key=lambda r: rank[r.head.pred])  # stable: file order within a head


def compile_compact(rules: Iterable[Rule], inputs: Iterable[str]) -> CompactRules:
    rules = list(rules)
    inputs = tuple(inputs)
    arity = _arities(rules)
    heads = {r.head.pred for r in rules}
    for p in arity:
        if p not in heads and p not in inputs:
            raise CodegenError(f"{p} is neither an input nor derived")
    for p in inputs:
        if p in heads:
            raise CodegenError(f"{p} is both an input and derived")
        arity.setdefault(p, 1)
    names = {p: f"R_{i}" for i, p in enumerate(sorted(set(inputs) | heads))}
    lines = [f"def run({', '.join(names[p] for p in inputs)}):"]
    for p in sorted(heads):
        lines.append(f"    {names[p]} = {'False' if arity[p] == 0 else 'set()'}")
    for r in _ordered(rules, heads):
        lines.extend(_rule(r, names))
    out = ", ".join(f"{p!r}: {names[p]}" for p in sorted(heads))
    lines.append(f"    return {{{out}}}")
    src = "\n".join(lines)
    ns: dict[str, Any] = {}
    exec(compile(src, "<polang decision rules>", "exec"), ns)
    return CompactRules(ns["run"], inputs, arity, src)


def compile_rules(
    rules: Iterable[Rule], inputs: Iterable[str]
) -> Callable[[Relations], dict[str, set[tuple[Any, ...]]]]:
    """The rules over plain relations: ``run({name: set of tuples}) -> {head: set}``."""
    cr = compile_compact(rules, inputs)

    def to_compact(p: str, rel: AbstractSet[tuple[Any, ...]]) -> Any:
        n = cr.arity[p]
        if n == 0:
            return bool(rel)
        if n == 1:
            return {t[0] for t in rel}
        return set(rel)

    def run(rels: Relations) -> dict[str, set[tuple[Any, ...]]]:
        out = cr.run(*(to_compact(p, rels.get(p, frozenset())) for p in cr.inputs))
        plain: dict[str, set[tuple[Any, ...]]] = {}
        for p, rel in out.items():
            n = cr.arity[p]
            if n == 0:
                plain[p] = {()} if rel else set()
            elif n == 1:
                plain[p] = {(v,) for v in rel}
            else:
                plain[p] = set(rel)
        return plain

    run.__doc__ = cr.source  # keep the generated code inspectable
    return run


def _rule(r: Rule, names: Mapping[str, str]) -> list[str]:
    bound: set[str] = set()
    out: list[str] = [f"    # {r}"]
    depth = 1
    counter = 0

    def term(t: Any) -> str:
        return t.name if isinstance(t, Var) else _lit(t.value)

    def pad() -> str:
        return "    " * depth

    def row(args: tuple[Any, ...]) -> str:
        """The compact element for these arguments (0-ary relations have none)."""
        if len(args) == 1:
            return term(args[0])
        return "(" + "".join(term(t) + ", " for t in args) + ")"

    for lit in r.body:
        assert isinstance(lit, Atom)  # _arities refused builtins
        rel = names[lit.pred]
        args = lit.args
        if not args:
            out.append(f"{pad()}if {'not ' if lit.negated else ''}{rel}:")
            depth += 1
            continue
        if lit.negated or all(isinstance(t, Const) or t.name in bound for t in args):
            test = "not in" if lit.negated else "in"
            out.append(f"{pad()}if {row(args)} {test} {rel}:")
            depth += 1
            continue
        if len(args) == 1:  # unbound, hence a variable: the elements are its values
            (v,) = args
            assert isinstance(v, Var)
            out.append(f"{pad()}for {v.name} in {rel}:")
            depth += 1
            bound.add(v.name)
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
    head = names[r.head.pred]
    if r.head.args:
        out.append(f"{pad()}{head}.add({row(r.head.args)})")
    else:
        out.append(f"{pad()}{head} = True")
    return out
