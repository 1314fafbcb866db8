"""Compile non-recursive Datalog rules (no builtins) to one Python function.

The compiled backend runs the fixed decision rules (``rules/decision.dl``) this way: the
rules are turned into set operations, membership tests and (where those do not fit)
nested loops, generated as Python source once and ``exec``-ed, instead of being
interpreted per request.

Relations have a *compact* form in the generated code, so a request allocates no tuples
for its policy atoms:

- a 0-ary relation is a Bool (holds or not);
- a unary one is a set of bare values;
- an input relation of two columns that every rule reads with a constant in the same
  column (``cond(P, true)``, ``effect(P, forbid)``) is *grouped*: a dict from that
  column's value to the set of the other column's values (``{True: {"p1"}, False: ...}``),
  so a rule over one variable becomes intersections and differences of sets;
- any other relation is a set of tuples.

:func:`compile_compact` exposes that form (the backend's per-request path);
:func:`compile_rules` wraps it in the plain "name -> set of tuples" form.

Restriction (checked): values in the relations must compare by Python equality without
the ``True == 1`` trap, i.e. symbols (``str``) and Bools only, which is what the decision
relations hold. Recursive rules (directly or through other rules) are refused: use
:mod:`polang.datalog.seminaive`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from polang._record import Record
from polang.datalog.ir import Atom, Const, Rule, Var
from polang.datalog.seminaive import stratify

_set = object.__setattr__

Relations = Mapping[str, AbstractSet[tuple[Any, ...]]]

TUPLES = -1
"""``CompactRules.grouped`` value of a relation kept as a set of tuples."""


class CodegenError(ValueError):
    """The rules are outside what this compiler accepts."""


class CompactRules(Record):
    """Generated rules over compact relations.

    ``run(*inputs)`` takes the input relations in ``inputs`` order and returns every derived
    relation by name. ``arity`` gives each relation's width (0: Bool, 1: set of values,
    otherwise a set of tuples), and ``grouped`` the constant column of each grouped input
    (a dict keyed by that column's values; :data:`TUPLES` for any other relation).
    """

    __slots__ = ("arity", "grouped", "inputs", "run", "source")
    run: Callable[..., dict[str, Any]]
    inputs: tuple[str, ...]
    arity: Mapping[str, int]
    grouped: Mapping[str, int]
    source: str

    def __init__(
        self,
        run: Callable[..., dict[str, Any]],
        inputs: tuple[str, ...],
        arity: Mapping[str, int],
        grouped: Mapping[str, int],
        source: str,
    ) -> None:
        _set(self, "run", run)
        _set(self, "inputs", inputs)
        _set(self, "arity", arity)
        _set(self, "grouped", grouped)
        _set(self, "source", source)

    def to_compact(self, pred: str, rel: AbstractSet[tuple[Any, ...]]) -> Any:
        """A plain relation (set of tuples) in this program's form for ``pred``."""
        n = self.arity[pred]
        if n == 0:
            return bool(rel)
        if n == 1:
            return {t[0] for t in rel}
        col = self.grouped.get(pred, TUPLES)
        if col == TUPLES:
            return set(rel)
        out: dict[Any, set[Any]] = {}
        for t in rel:
            out.setdefault(t[col], set()).add(t[1 - col])
        return out

    def to_plain(self, pred: str, rel: Any) -> set[tuple[Any, ...]]:
        n = self.arity[pred]
        if n == 0:
            return {()} if rel else set()
        if n == 1:
            return {(v,) for v in rel}
        return set(rel)  # derived relations are never grouped


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


def _grouping(
    rules: list[Rule], inputs: tuple[str, ...], arity: Mapping[str, int]
) -> dict[str, int]:
    """The constant column of each two-column input every body reads as ``(Var, Const)``
    or ``(Const, Var)`` with the constant always in the same column."""
    cols: dict[str, set[int]] = {p: set() for p in inputs if arity[p] == 2}
    for r in rules:
        for lit in r.body:
            assert isinstance(lit, Atom)
            if lit.pred not in cols:
                continue
            a, b = lit.args
            if isinstance(a, Var) and isinstance(b, Const):
                cols[lit.pred].add(1)
            elif isinstance(a, Const) and isinstance(b, Var):
                cols[lit.pred].add(0)
            else:
                cols[lit.pred].add(TUPLES)
    return {p: c.pop() for p, c in cols.items() if len(c) == 1 and TUPLES not in c}


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
    grouped = _grouping(rules, inputs, arity)
    names = {p: f"R_{i}" for i, p in enumerate(sorted(set(inputs) | heads))}
    gen = _Gen(names, grouped)
    lines = [f"def run({', '.join(names[p] for p in inputs)}):"]
    for p in sorted(heads):
        lines.append(f"    {names[p]} = {'False' if arity[p] == 0 else 'set()'}")
    for r in _ordered(rules, heads):
        lines.extend(gen.rule(r))
    out = ", ".join(f"{p!r}: {names[p]}" for p in sorted(heads))
    lines.append(f"    return {{{out}}}")
    src = "\n".join(lines)
    ns: dict[str, Any] = {"EMPTY": frozenset()}
    exec(compile(src, "<polang decision rules>", "exec"), ns)
    return CompactRules(ns["run"], inputs, arity, grouped, src)


def compile_rules(
    rules: Iterable[Rule], inputs: Iterable[str]
) -> Callable[[Relations], dict[str, set[tuple[Any, ...]]]]:
    """The rules over plain relations: ``run({name: set of tuples}) -> {head: set}``."""
    cr = compile_compact(rules, inputs)

    def run(rels: Relations) -> dict[str, set[tuple[Any, ...]]]:
        out = cr.run(*(cr.to_compact(p, rels.get(p, frozenset())) for p in cr.inputs))
        return {p: cr.to_plain(p, rel) for p, rel in out.items()}

    run.__doc__ = cr.source  # keep the generated code inspectable
    return run


class _Gen:
    def __init__(self, names: Mapping[str, str], grouped: Mapping[str, int]) -> None:
        self.names = names
        self.grouped = grouped

    def group(self, lit: Atom) -> tuple[str, Any, Any] | None:
        """For a grouped atom: (the set expression, its variable term, its constant)."""
        col = self.grouped.get(lit.pred)
        if col is None:
            return None
        const, other = lit.args[col], lit.args[1 - col]
        assert isinstance(const, Const)
        return f"{self.names[lit.pred]}.get({_lit(const.value)}, EMPTY)", other, const

    def rule(self, r: Rule) -> list[str]:
        var = self.single_var(r)
        if var is not None:
            return self.set_rule(r, var)
        return self.loop_rule(r)

    def single_var(self, r: Rule) -> Var | None:
        """The variable of a rule over one variable (each atom mentions it at most once,
        and a positive unary or grouped atom binds it): it compiles to set operations."""
        var: Var | None = None
        for lit in (r.head, *r.body):
            assert isinstance(lit, Atom)
            vs = [t for t in lit.args if isinstance(t, Var)]
            if len(vs) > 1:
                return None
            if vs:
                if var is not None and vs[0] != var:
                    return None
                var = vs[0]
        if var is None or len(r.head.args) > 1:
            return None
        for lit in r.body:
            assert isinstance(lit, Atom)
            if not lit.negated and (lit.args == (var,) or self.group(lit) is not None):
                return var
        return None

    def set_rule(self, r: Rule, var: Var) -> list[str]:
        """``h(V) :- a(V), g(V, k), not b(V), not g(V, j), t(V, c), flag``: one
        intersection less differences, filtered by any tuple-relation tests."""
        out: list[str] = [f"    # {r}"]
        depth = 1
        sets: list[str] = []
        minus: list[str] = []
        tests: list[str] = []
        v = var.name
        for lit in r.body:
            assert isinstance(lit, Atom)
            rel = self.names[lit.pred]
            g = self.group(lit)
            if not lit.args:
                out.append(f"{'    ' * depth}if {'not ' if lit.negated else ''}{rel}:")
                depth += 1
            elif g is not None:  # its other column is the variable
                (minus if lit.negated else sets).append(g[0])
            elif lit.args == (var,):
                (minus if lit.negated else sets).append(rel)
            else:
                parts = [v if t == var else _lit(t.value) for t in lit.args]  # type: ignore[union-attr]
                row = parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ",)"
                tests.append(f"{row} {'not in' if lit.negated else 'in'} {rel}")
        pad = "    " * depth
        base = " & ".join(sets)
        if minus:
            base = (
                f"({base}) - " + " - ".join(minus)
                if len(sets) > 1
                else f"{base} - " + " - ".join(minus)
            )
        head = self.names[r.head.pred]
        if not r.head.args:
            if tests:
                out.append(f"{pad}if not {head}:")
                out.append(f"{pad}    for {v} in {base}:")
                out.append(f"{pad}        if {' and '.join(tests)}:")
                out.append(f"{pad}            {head} = True")
                out.append(f"{pad}            break")
            elif len(sets) == 2 and not minus:
                out.append(f"{pad}if not {sets[0]}.isdisjoint({sets[1]}): {head} = True")
            else:
                out.append(f"{pad}if {base}: {head} = True")
        elif tests:
            out.append(f"{pad}{head}.update([{v} for {v} in {base} if {' and '.join(tests)}])")
        else:
            out.append(f"{pad}{head}.update({base})")
        return out

    def loop_rule(self, r: Rule) -> list[str]:
        """The general case: nested loops over the body, left to right."""
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
            rel = self.names[lit.pred]
            args = lit.args
            g = self.group(lit)
            if not args:
                out.append(f"{pad()}if {'not ' if lit.negated else ''}{rel}:")
                depth += 1
                continue
            if lit.negated or all(isinstance(t, Const) or t.name in bound for t in args):
                test = "not in" if lit.negated else "in"
                elem = term(g[1]) if g is not None else row(args)
                out.append(f"{pad()}if {elem} {test} {g[0] if g is not None else rel}:")
                depth += 1
                continue
            if g is not None or len(args) == 1:  # one unbound variable: iterate its values
                v = g[1] if g is not None else args[0]
                assert isinstance(v, Var)
                out.append(f"{pad()}for {v.name} in {g[0] if g is not None else rel}:")
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
        head = self.names[r.head.pred]
        if r.head.args:
            out.append(f"{pad()}{head}.add({row(r.head.args)})")
        else:
            out.append(f"{pad()}{head} = True")
        return out
