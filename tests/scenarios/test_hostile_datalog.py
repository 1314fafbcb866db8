"""Policies at the nesting limit run through every stage within Python's default
recursion limit, with room left for the caller, also on a worker thread (issue 11)."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polang.analysis import explain as explain_mod
from polang.analysis import query
from polang.datalog.authorizer import Authorizer
from polang.datalog.builtins import _like_segments, like_match
from polang.datalog.compiled import CompiledBackend, Compiler
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Atom, Builtin, Const, Program, Rule, Var
from polang.datalog.lower import lower_policies
from polang.datalog.pycode import generate_policy
from polang.datalog.pydatalog import PyDatalogBackend
from polang.errors import PolicyParseError
from polang.language.entities import Entity
from polang.language.format import format_policies, policies_to_json
from polang.language.parser import MAX_EXPRESSION_DEPTH, parse_policies
from polang.language.schema import parse_schema
from polang.language.validate import validate_policies
from polang.language.values import EntityUID, RecordValue

SCHEMA = parse_schema(
    "entity User { n: Long };"
    'action "a" appliesTo { principal: User, resource: User, context: { n: Long } };'
)
USER = EntityUID("User", "u")
ACTION = EntityUID("Action", "a")
REQUEST = Request(USER, ACTION, USER, RecordValue({"n": 1}))
FACTS = EntityFacts([*SCHEMA.action_entities(), Entity(USER, {"n": 1})])

SHAPES: dict[str, Callable[[int], str]] = {
    "plus": lambda d: "context.n" + " + 1" * d + " > 0",
    "and": lambda d: " && ".join(["true"] * d),
    "or": lambda d: " || ".join(["false"] * d),
    "right-nested": lambda d: "(1 + " * d + "1" + ")" * d + " > 0",
    "if": lambda d: "if true then " * d + "true" + " else false" * d,
    "not": lambda d: "!(" * d + "true" + ")" * d,
    "member": lambda d: "context" + ".n" * d + " == 1",
    "has": lambda d: "context has " + ".".join(["n"] * d),
    "sets": lambda d: "[" * d + "1" + "]" * d + " == [1]",
    "records": lambda d: "{a: " * d + "1" + "}" * d + " == {a: 1}",
    "contains": lambda d: "[1].contains(" * d + "1" + ")" * d,
}

CALLER_FRAMES = 500
"""Frames a caller is already using when a stage runs: every stage must fit in the rest
of Python's default limit (1,000). Measured: all fit below a 550-frame caller (the type
checker on nested `if`s needs the most)."""


def deepest(shape: Callable[[int], str], most: int = MAX_EXPRESSION_DEPTH) -> str:
    """The policy of this shape nested as deep as the parser accepts (up to ``most``)."""
    for d in range(most, 0, -1):
        text = f"permit(principal, action, resource) when {{ {shape(d)} }};"
        try:
            parse_policies(text)
        except PolicyParseError:
            continue
        return text
    raise AssertionError("no depth parses")


def below_a_deep_caller(fn: Callable[[], object]) -> None:
    """Run ``fn`` on a new thread, :data:`CALLER_FRAMES` frames down."""
    failure: list[BaseException] = []

    def burn(n: int) -> None:
        if n:
            burn(n - 1)
        else:
            try:
                fn()
            except BaseException as e:  # reported below, in the test's thread
                failure.append(e)

    t = threading.Thread(target=burn, args=(CALLER_FRAMES,))
    t.start()
    t.join()
    if failure:
        raise failure[0]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_stage_fits_at_the_limit(shape: str) -> None:
    assert sys.getrecursionlimit() == 1000  # the default: nothing raised it
    # `has` paths cost k(k+1)/2 reads (explanations: more): recursion is the member chain's
    text = deepest(SHAPES[shape], 40 if shape == "has" else MAX_EXPRESSION_DEPTH)
    policies = parse_policies(text)
    program = lower_policies([("p0", policies[0])])
    authorizer = Authorizer({"p0": policies[0]})

    def parse() -> None:
        parse_policies(text + " ")  # not the memoised text

    def stages() -> None:
        parse()
        # the checker turns a RecursionError into a finding: there must be none
        assert "too_deep" not in {f.kind for f in validate_policies(policies, SCHEMA)}
        format_policies(policies)
        policies_to_json(policies)
        lower_policies([("p0", policies[0])])
        decisions = set()
        for mode in CompiledBackend.MODES:
            backend = CompiledBackend(program, mode=mode)
            decisions.add(backend.decide(REQUEST, FACTS).allow)
        decisions.add(PyDatalogBackend(program).decide(REQUEST, FACTS).allow)
        assert len(decisions) == 1  # the backends agree
        explain_mod.explain(authorizer, USER, ACTION, USER, REQUEST.context, FACTS)
        query.who_can(authorizer, FACTS, ACTION, USER, REQUEST.context, schema=SCHEMA)
        query.what_can(authorizer, FACTS, USER, ACTION, None, schema=SCHEMA)

    below_a_deep_caller(stages)


def test_background_code_generation_fits_at_the_limit() -> None:
    # the engine generates policy code on a thread of its own
    text = deepest(SHAPES["right-nested"])
    program = lower_policies([("p0", parse_policies(text)[0])])
    backend = CompiledBackend(program, background=True)
    backend.generate_in_background()
    assert backend.wait_generated(30)
    assert backend.decide(REQUEST, FACTS).allow

    def gen() -> None:
        comp = Compiler(program)
        info = program.policies["p0"]
        assert generate_policy(comp, (), info.cond_pred) is not None

    below_a_deep_caller(gen)


def test_a_long_chain_compiles_without_recursion() -> None:
    # `5,000-term + chains` made `compiled._compile` recurse once per term; predicates are
    # now compiled in post-order (the parser refuses such a policy; a Program built
    # another way still compiles)
    rules = [Rule(Atom("t0", (Const(1),)), ())]
    for i in range(1, 5000):
        x, a, b = Var("X"), Var("A1"), Var("A2")
        body = (Atom(f"t{i - 1}", (a,)), Atom("one", (b,)), Builtin("add", (a, b), x))
        rules.append(Rule(Atom(f"t{i}", (x,)), body))
    rules.append(Rule(Atom("one", (Const(1),)), ()))
    program = Program()
    program.extend(rules)
    for specialize in (True, False):
        comp = Compiler(program, specialize=specialize)
        assert callable(comp.fn("t4999"))
        assert len(comp.fns) == 5001


# ---------------------------------------------------------------- `like` (found with item 5)


def reference_like(s: str, pattern: str) -> bool:
    """The pattern as a regular expression (the old implementation): fine on small input."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if pattern[i] == "*" else re.escape(pattern[i]))
        i += 1
    return re.fullmatch("".join(out), s, re.DOTALL) is not None


@settings(max_examples=3000, deadline=None)
@given(
    st.text(alphabet="ab*\\\n", max_size=10),
    st.text(alphabet="ab*\\\n", max_size=14),
)
def test_like_matches_as_the_language_says(pattern: str, s: str) -> None:
    assert like_match(s, _like_segments(pattern)) == reference_like(s, pattern)


def test_like_never_backtracks() -> None:
    # `*a*a*a*a*b` against 200 `a`s took 4.5 s with a regular expression (one more `*a`:
    # minutes), and the string is the request's: an attacker's
    text = 'permit(principal, action, resource) when { context.s like "' + "*a" * 40 + '*b" };'
    program = lower_policies([("p0", parse_policies(text)[0])])
    request = Request(USER, ACTION, USER, RecordValue({"s": "a" * 100_000}))
    for mode in CompiledBackend.MODES:
        assert not CompiledBackend(program, mode=mode).decide(request, FACTS).allow
    assert not PyDatalogBackend(program).decide(request, FACTS).allow
    yes = Request(USER, ACTION, USER, RecordValue({"s": "a" * 100_000 + "b"}))
    assert CompiledBackend(program).decide(yes, FACTS).allow
