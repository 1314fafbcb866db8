"""Generate Python source for a policy's condition from its value-predicate rules.

The closures of :mod:`polang.datalog.compiled` cost one Python call per expression node.
Here the same rule-group forms (:func:`~polang.datalog.eval.shapes.classify`) are written out
as straight-line Python with local temporaries, one function per policy, so a condition
runs as one call. Groups of any other form, and subtrees nested too deeply for Python's
parser, call the compiled closure of that predicate instead: every Program still runs.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from polang.datalog.builtins import direct
from polang.datalog.eval.semantics import REQUEST_VARS, bool_error, no_principal
from polang.datalog.ir import Atom, Builtin, Const, Var
from polang.language.values import EntityUID, RecordValue, SetValue

MAX_DEPTH = 40  # nesting of generated blocks; deeper subtrees fall back to closures

Fn = Callable[..., Any]


OUT_OF_SCOPE = object()
"""What a generated policy function returns when the policy's scope does not hold."""

_GLOBALS: dict[str, Any] = {
    "BE": bool_error,
    "NP": no_principal,
    "OUT": OUT_OF_SCOPE,
    "EMPTY": frozenset(),
    "LOOKUP": (KeyError, AttributeError, TypeError),
    # types whose Python equality is the language's (same type on both sides)
    "PLAIN": frozenset({str, int, bool, EntityUID}),
    "REC": RecordValue,
    "SETV": SetValue,
    "EUID": EntityUID,
}
"""The one globals namespace of all generated code (fixed helpers only)."""

_FACTORIES: dict[str, Callable[..., Fn]] = {}
"""Compiled code by source text. Constants, builtins and fallbacks are closure cells
(``c0``, ``c1``...), so policies of the same form share one code object: less to compile
at load and less code for the processor's caches per request."""
_MAX_FACTORIES = 20_000

_CELL_REPR = reprlib.Repr()
"""Cells in a function's ``__doc__``, shortened: a constant may be a 10 MB string."""
_CELL_REPR.maxstring = _CELL_REPR.maxother = 120


class _Writer:
    def __init__(self, compiler: Any) -> None:
        self.compiler = compiler
        self.lines: list[str] = []
        self.cells: list[Any] = []
        self.names: dict[tuple[type, Any], str] = {}
        self.temps = 0
        self.uses_get = False

    def name_of(self, obj: Any) -> str:
        """The closure cell holding a constant, builtin or fallback function."""
        key = (type(obj), obj) if type(obj) in (str, int) else (type(obj), id(obj))
        n = self.names.get(key)
        if n is None:
            n = f"c{len(self.cells)}"
            self.cells.append(obj)
            self.names[key] = n
        return n

    def temp(self) -> str:
        self.temps += 1
        return f"t{self.temps}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def emit(self, pred: str, target: str, depth: int) -> bool:
        """Write code setting ``target`` to ``pred``'s value (or raising its error).

        Returns whether the value is surely a Bool, so the caller can skip its check."""
        if pred in REQUEST_VARS:
            self.line(depth, f"{target} = r.{pred}")
            if pred == "principal":
                self.line(depth, f"if {target} is None: raise NP()")
            return False
        if depth > MAX_DEPTH:
            self.line(depth, f"{target} = {self.name_of(self.compiler.fn(pred))}(r, fx)")
            return False
        shape = self.compiler.shape(pred)
        kind, preds = shape.kind, shape.preds
        if kind in ("const", "alias", "call") and (known := self.const_value(pred))[0]:
            self.line(depth, f"{target} = {self.literal(known[1])}")
            return type(known[1]) is bool
        if kind == "alias":
            return self.emit(preds[0], target, depth)
        if kind == "call":
            args = [self.operand(p, depth) for p in preds]
            args.extend(self.literal(c) for c in shape.consts)
            fn, takes_facts = direct(shape.op, len(preds))
            op = self.name_of(fn)
            call = f"{op}({', '.join(['fx', *args] if takes_facts else args)})"
            if not self.intrinsic(shape, args, call, target, depth):
                self.line(depth, f"{target} = {call}")
            return shape.op in _BOOL_OPS
        if kind == "not":
            a = self.temp()
            if self.emit(preds[0], a, depth):
                self.line(depth, f"{target} = not {a}")
            else:
                self.line(depth, f"if {a} is True: {target} = False")
                self.line(depth, f"elif {a} is False: {target} = True")
                self.line(depth, f"else: raise BE({a})")
            return True
        if kind in ("and", "or"):
            short, other = ("False", "True") if kind == "and" else ("True", "False")
            a = self.temp()
            a_bool = self.emit(preds[0], a, depth)
            self.line(depth, f"if {a} is {short}: {target} = {short}")
            self.line(depth, "else:" if a_bool else f"elif {a} is {other}:")
            b = self.temp()
            if self.emit(preds[1], b, depth + 1):
                self.line(depth + 1, f"{target} = {b}")
            else:
                self.line(depth + 1, f"if {b} is True or {b} is False: {target} = {b}")
                self.line(depth + 1, f"else: raise BE({b})")
            if not a_bool:
                self.line(depth, f"else: raise BE({a})")
            return True
        if kind == "if":
            c = self.temp()
            c_bool = self.emit(preds[0], c, depth)
            self.line(depth, f"if {c} is True:")
            then_bool = self.emit(preds[1], target, depth + 1)
            self.line(depth, "else:" if c_bool else f"elif {c} is False:")
            else_bool = self.emit(preds[2], target, depth + 1)
            if not c_bool:
                self.line(depth, f"else: raise BE({c})")
            return then_bool and else_bool
        if kind == "and_then":
            c = self.temp()
            c_bool = self.emit(preds[0], c, depth)
            self.line(depth, f"if {c} is False: {target} = False")
            self.line(depth, "else:" if c_bool else f"elif {c} is True:")
            then_bool = self.emit(preds[1], target, depth + 1)
            if not c_bool:
                self.line(depth, f"else: raise BE({c})")
            return then_bool
        self.line(depth, f"{target} = {self.name_of(self.compiler.fn(pred))}(r, fx)")
        return False

    def operand(self, pred: str, depth: int) -> str:
        """An expression for an operand: its literal when it is a constant, else a
        temporary written here."""
        known, value = self.const_value(pred)
        if known:
            return self.literal(value)
        t = self.temp()
        self.emit(pred, t, depth)
        return t

    def literal(self, c: Any) -> str:
        return repr(c) if c is None or type(c) is bool else self.name_of(c)

    def source_var(self, pred: str) -> str | None:
        """The request variable a value predicate is (through aliases), if any."""
        seen = 0
        while pred not in REQUEST_VARS:
            shape = self.compiler.shape(pred)
            if shape.kind != "alias" or seen > 50:
                return None
            pred, seen = shape.preds[0], seen + 1
        return pred

    def const_value(self, pred: str, depth: int = 0) -> tuple[bool, Any]:
        """``(True, value)`` when ``pred`` has one value for every request: a fact, or an
        extension function or method (pure: they never read the facts) applied to such
        values without error, as in ``ip("10.0.0.0/8")``. Folded once per predicate (the
        answer is kept on the compiler, as every policy's code asks again)."""
        memo: dict[str, tuple[bool, Any]] = self.compiler.consts
        known = memo.get(pred)
        if known is None:
            known = memo[pred] = self._fold(pred, depth)
        return known

    def _fold(self, pred: str, depth: int) -> tuple[bool, Any]:
        if pred in REQUEST_VARS or depth > 50:
            return (False, None)
        shape = self.compiler.shape(pred)
        if shape.kind == "const":
            return (True, shape.value)
        if shape.kind == "alias":
            return self.const_value(shape.preds[0], depth + 1)
        if shape.kind != "call":
            return (False, None)
        fn, takes_facts = direct(shape.op, len(shape.preds))
        if takes_facts:
            return (False, None)
        values = []
        for p in shape.preds:
            known, v = self.const_value(p, depth + 1)
            if not known:
                return (False, None)
            values.append(v)
        try:
            return (True, fn(*values, *shape.consts))
        except Exception:  # any failure is the policy's, at request time
            return (False, None)

    def receiver(self, pred: str, temp: str) -> tuple[str, str] | None:
        """How to reach the entity record (or context record) of an operand directly:
        ``("entity", expr)`` where ``expr`` is the Entity (or None), ``("record", expr)``
        for the context's fields, ``("value", temp)`` for any other operand (an entity
        reference or a record, as ``context.tokens``: known at run time only). The fast
        paths fall back to the builtin call whenever the direct access fails, so errors
        stay the builtin's."""
        var = self.source_var(pred)
        if var == "principal":
            return ("entity", "pe")
        if var == "resource":
            return ("entity", "re")
        if var == "context":
            return ("record", f"{temp}.fields")
        if var is None:
            self.uses_get = True
            return ("value", temp)
        return None

    def intrinsic(self, shape: Any, args: list[str], call: str, target: str, depth: int) -> bool:
        """Inline fast paths for the commonest builtins (attribute and tag access, ``==``
        with a literal, Long comparisons); each falls back to ``call`` where it does not
        apply, so every value and error is the builtin's."""
        op, preds = shape.op, shape.preds
        consts = shape.consts
        if op in ("get_attr", "has_attr") and len(preds) == 1 and len(consts) == 1:
            how = self.receiver(preds[0], args[0])
            if how is None:
                return False
            kind, expr = how
            name = self.literal(consts[0])
            if kind == "value":  # a record's field, or an entity's attribute
                if op == "get_attr":
                    self.line(
                        depth,
                        f"try: {target} = {expr}.fields[{name}] if type({expr}) is REC "
                        f"else get({expr}).attrs[{name}]",
                    )
                    self.line(depth, f"except LOOKUP: {target} = {call}")
                else:
                    self.line(
                        depth,
                        f"{target} = {name} in {expr}.fields if type({expr}) is REC else {call}",
                    )
                return True
            table = f"{expr}.attrs" if kind == "entity" else expr
            if op == "get_attr":
                self.line(depth, f"try: {target} = {table}[{name}]")
                self.line(depth, f"except LOOKUP: {target} = {call}")
            elif kind == "entity" and expr in ("pe", "re"):
                # principal/resource are entity uids: a missing entity has no attribute
                self.line(depth, f"{target} = {expr} is not None and {name} in {table}")
            elif kind == "record":  # the context (a record, but for callers' own requests)
                temp = args[0]
                self.line(depth, f"{target} = {name} in {table} if type({temp}) is REC else {call}")
            else:
                return False
            return True
        if op in ("method:getTag", "method:hasTag") and len(preds) == 2 and not consts:
            how = self.receiver(preds[0], args[0])
            if how is None or how[0] == "record":
                return False
            operand = how[1]
            if how[0] == "value":  # tags are entities' only
                how = ("entity", f"get({operand})")
            known, key = self.const_value(preds[1])
            if not known or type(key) is not str:
                return False
            expr = how[1]
            k = self.literal(key)
            if op == "method:getTag":
                self.line(depth, f"try: {target} = {expr}.tags[{k}]")
                self.line(depth, f"except LOOKUP: {target} = {call}")
            elif expr in ("pe", "re"):
                self.line(depth, f"{target} = {expr} is not None and {k} in {expr}.tags")
            else:  # an entity reference: a missing entity has no tag; anything else errors
                found = f"{target}_e"
                self.line(depth, f"if type({operand}) is EUID:")
                self.line(depth + 1, f"{found} = {expr}")
                self.line(depth + 1, f"{target} = {found} is not None and {k} in {found}.tags")
                self.line(depth, f"else: {target} = {call}")
            return True
        if op == "method:contains" and len(preds) == 2 and not consts:
            known, c = self.const_value(preds[1])
            if known and type(c) in (str, int):  # its own key in a set (value_key)
                s = args[0]
                self.line(
                    depth,
                    f"{target} = {self.literal(c)} in {s}.keys if type({s}) is SETV else {call}",
                )
                return True
        if op in ("eq", "neq") and len(preds) == 2 and not consts:
            for this, other in ((0, 1), (1, 0)):
                known, c = self.const_value(preds[other])
                if known and type(c) in (str, int, bool):
                    # `==` never errors: a value of another type is simply unequal
                    a = args[this]
                    test = f"type({a}) is {type(c).__name__} and {a} == {self.literal(c)}"
                    self.line(depth, f"{target} = {test if op == 'eq' else f'not ({test})'}")
                    return True
            a, b = args
            sym = "==" if op == "eq" else "!="
            self.line(
                depth,
                f"{target} = {a} {sym} {b} if type({a}) is type({b}) "
                f"and type({a}) in PLAIN else {call}",
            )
            return True
        if op in _COMPARE and len(preds) == 2 and not consts:
            a, b = args
            self.line(
                depth,
                f"{target} = {a} {_COMPARE[op]} {b} "
                f"if type({a}) is int and type({b}) is int else {call}",
            )
            return True
        return False


_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_BOOL_OPS = frozenset(
    {
        "eq",
        "neq",
        "lt",
        "le",
        "gt",
        "ge",
        "in",
        "has_attr",
        "like",
        "is_type",
        "method:contains",
        "method:containsAll",
        "method:containsAny",
        "method:isEmpty",
        "method:hasTag",
    }
)
"""Builtins whose value, when they do not raise, is always a Bool."""


def _scope_lines(w: _Writer, body: Sequence[Any]) -> bool:
    """Scope literals as early returns; False when a literal is not of a known form."""
    bound: dict[str, str] = {}
    for lit in body:
        if isinstance(lit, Atom) and lit.pred in REQUEST_VARS and len(lit.args) == 1:
            t = lit.args[0]
            if isinstance(t, Const):
                w.line(1, f"if r.{lit.pred} != {w.name_of(t.value)}: return OUT")
            else:
                local = f"s_{lit.pred}"
                bound[t.name] = local
                w.line(1, f"{local} = r.{lit.pred}")
                if lit.pred == "principal":
                    w.line(1, f"if {local} is None: return OUT")
            continue
        if (
            isinstance(lit, Builtin)
            and len(lit.args) == 2
            and isinstance(lit.args[0], Var)
            and lit.args[0].name in bound
            and isinstance(lit.args[1], Const)
        ):
            v, c = bound[lit.args[0].name], w.name_of(lit.args[1].value)
            if lit.op == "scope_in":
                w.line(1, f"if not ({v} == {c} or {c} in anc({v})): return OUT")
                continue
            if lit.op == "scope_in_any":
                w.line(1, f"if not ({v} in {c} or not {c}.isdisjoint(anc({v}))): return OUT")
                continue
            if lit.op == "scope_is":
                w.line(1, f"if {v}.type != {c}: return OUT")
                continue
        return False
    return True


def generate_policy(compiler: Any, scope_body: Sequence[Any], cond_pred: str) -> Fn | None:
    """One function per policy: ``OUT_OF_SCOPE``, or the condition's value (errors raise).

    ``scope_body`` is the part of the scope rule left to check per request (the backend's
    index answers the rest). ``None`` when a literal has a form this generator does not
    know (the backend then checks the scope with its closures).
    """
    w = _Writer(compiler)
    w.line(0, "def policy(r, fx, pe, re):")
    w.line(1, "anc = fx.ancestors_of")
    w.line(1, "get = fx.get")
    if not _scope_lines(w, scope_body):
        return None
    w.emit(cond_pred, "v", 1)
    w.line(1, "return v")
    if not w.uses_get:
        del w.lines[2]
    if not any("anc(" in line for line in w.lines):
        del w.lines[1]
    return _exec(w, "policy", cond_pred)


def _cell_key(c: Any) -> tuple[Any, ...]:
    try:
        hash(c)
    except TypeError:
        return (type(c), id(c))
    return (type(c), c)


def _exec(w: _Writer, name: str, pred: str) -> Fn:
    """The function for the written code: one per distinct code and cells per compiler,
    so equal policies (same residual scope and condition) share one function, which
    the backend then runs once per request for all of them."""
    src = "\n".join(w.lines)
    memo: dict[Any, Fn] = w.compiler.generated
    key = (src, tuple(_cell_key(c) for c in w.cells))
    same = memo.get(key)
    if same is not None:
        return same
    make = _FACTORIES.get(src)
    if make is None:
        params = ", ".join(f"c{i}" for i in range(len(w.cells)))
        body = "\n".join("    " + line for line in w.lines)
        local: dict[str, Any] = {}
        code = compile(f"def make({params}):\n{body}\n    return {name}", "<polang>", "exec")
        exec(code, _GLOBALS, local)
        make = local["make"]
        if len(_FACTORIES) >= _MAX_FACTORIES:
            _FACTORIES.clear()
        _FACTORIES[src] = make
    fn = make(*w.cells)
    # inspectable: `polang` developers can print it, with the cells' values
    cells = "".join(f"\n# c{i} = {_CELL_REPR.repr(c)}" for i, c in enumerate(w.cells))
    fn.__doc__ = f"# {pred}\n{src}{cells}"
    memo[key] = fn
    return fn


def generate(compiler: Any, pred: str, name: str = "cond") -> Fn:
    """One Python function ``f(request, facts)`` computing value predicate ``pred``."""
    w = _Writer(compiler)
    w.line(0, f"def {name}(r, fx):")
    w.line(1, "get = fx.get")
    w.line(1, "p = r.principal")
    w.line(1, "pe = None if p is None else get(p)")
    w.line(1, "re = get(r.resource)")
    w.emit(pred, "v", 1)
    w.line(1, "return v")
    return _exec(w, name, pred)
