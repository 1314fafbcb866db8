"""Long ``||`` / ``&&`` chains: built balanced (``ast.BALANCE_CHAIN_AFTER``), decided and
validated as cedarpy (the Rust engine) decides and validates them, printed flat again.

Generated conditions often list hundreds of alternatives; written left to right they used
to nest one level per operator and hit ``MAX_EXPRESSION_DEPTH`` from 99 operators on.
"""

from __future__ import annotations

import random

import pytest

from polang.datalog.authorizer import Authorizer
from polang.language import ast
from polang.language.format import format_policies
from polang.language.parser import MAX_EXPRESSION_DEPTH, parse_policies
from polang.language.schema import parse_schema
from polang.language.validate import validate_policies

cedarpy = pytest.importorskip("cedarpy")

from datalog.test_differential_cedarpy import cedar_decide, polang_decide  # noqa: E402

SCHEMA = """
entity User { level: Long, tags: Set<String>, opt?: Long };
entity Doc { n: Long };
action view appliesTo { principal: User, resource: Doc, context: { k: Long } };
"""

# operands: true, false, decided by the data, and erroring ones (a missing attribute, an
# overflow), so that the order of evaluation and where it stops are both observable
OPERANDS = [
    "true",
    "false",
    "principal.level > {k}",
    "principal.level == {k}",
    'principal.tags.contains("t{k}")',
    "principal has opt && principal.opt > {k}",
    "principal.opt > {k}",
    "resource.n + 9223372036854775800 > {k}",
    "context.k == {k}",
    "resource.n < {k}",
]


def chain(rng: random.Random, n: int, depth: int = 0) -> str:
    op = rng.choice(["||", "&&"])
    parts = []
    for _ in range(n):
        if depth < 1 and rng.random() < 0.04:
            parts.append(f"({chain(rng, rng.randrange(2, 24), depth + 1)})")
        else:
            parts.append(rng.choice(OPERANDS).format(k=rng.randrange(0, 6)))
    return f" {op} ".join(parts)


def policies(rng: random.Random) -> str:
    out = []
    for i in range(6):
        effect = "forbid" if i == 5 else "permit"
        n = rng.choice([17, 40, 150, 400])
        out.append(
            f'@id("p{i}")\n{effect}(principal, action, resource) when {{ {chain(rng, n)} }};'
        )
    return "\n".join(out)


def entities(rng: random.Random) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(4):
        attrs: dict[str, object] = {
            "level": rng.randrange(0, 6),
            "tags": [f"t{k}" for k in range(6) if rng.random() < 0.3],
        }
        if rng.random() < 0.5:
            attrs["opt"] = rng.randrange(0, 6)
        out.append({"uid": {"type": "User", "id": f"u{i}"}, "attrs": attrs, "parents": []})
    for i in range(3):
        n = rng.choice([0, 3, 100])
        out.append({"uid": {"type": "Doc", "id": f"d{i}"}, "attrs": {"n": n}, "parents": []})
    return out


def requests(rng: random.Random) -> list[dict[str, object]]:
    return [
        {
            "principal": {"type": "User", "id": f"u{rng.randrange(4)}"},
            "action": {"type": "Action", "id": "view"},
            "resource": {"type": "Doc", "id": f"d{rng.randrange(3)}"},
            "context": {"k": rng.randrange(0, 6)},
        }
        for _ in range(8)
    ]


def chain_depth(e: ast.Binary) -> int:
    """How many nodes of ``e``'s own chain (same operator) the longest path crosses."""
    deepest, stack = 0, [(e, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        for kid in (node.left, node.right):
            if isinstance(kid, ast.Binary) and kid.op == e.op:
                stack.append((kid, d + 1))
    return deepest


@pytest.mark.parametrize("seed", range(12))
def test_long_chains_decide_as_cedarpy_decides(seed: int) -> None:
    rng = random.Random(seed)
    text, ents, reqs = policies(rng), entities(rng), requests(rng)
    want = cedar_decide(
        cedarpy.PolicySet.from_str(text), cedarpy.Schema.from_str(SCHEMA), ents, reqs
    )
    by_id = {f"policy{i}": p for i, p in enumerate(parse_policies(text))}  # cedarpy's ids
    for backend in ("compiled", "pydatalog") if seed < 4 else ("compiled",):
        got = polang_decide(Authorizer(by_id, backend=backend), SCHEMA, ents, reqs)
        assert got == want, backend

    c_valid = cedarpy.validate_policies(text, SCHEMA).validation_passed
    assert (not validate_policies(by_id, parse_schema(SCHEMA))) == c_valid


def test_a_chain_far_past_the_depth_limit_is_accepted_and_printed_flat() -> None:
    n = 50 * MAX_EXPRESSION_DEPTH
    body = " || ".join(f"principal.level == {i}" for i in range(n))
    (p,) = parse_policies(f"permit(principal, action, resource) when {{ {body} }};")
    top = p.conditions[0].body
    assert isinstance(top, ast.Binary) and len(ast.chain_operands(top)) == n
    assert chain_depth(top) == (n - 1).bit_length()  # balanced: 13 levels for 5,000
    text = format_policies([p])
    assert body in text and "(" not in text.split("when", 1)[1]
    (again,) = parse_policies(text)
    assert again.conditions[0].body == top  # the same balanced tree
    assert cedarpy.validate_policies(text, SCHEMA).validation_passed
    assert not validate_policies({"p": p}, parse_schema(SCHEMA))


def test_short_chains_keep_their_written_shape() -> None:
    n = ast.BALANCE_CHAIN_AFTER
    (p,) = parse_policies(
        "permit(principal, action, resource) when { " + " && ".join(["true"] * n) + " };"
    )
    e = p.conditions[0].body
    depth = 0
    while isinstance(e, ast.Binary):  # left-leaning: a && b && c is (a && b) && c
        assert not isinstance(e.right, ast.Binary)
        e, depth = e.left, depth + 1
    assert depth == n - 1


VALID = [o for o in OPERANDS if o != "principal.opt > {k}"]
INVALID = ['principal.level + "a" > {k}', "resource.missing == {k}", "principal.tags > {k}"]


@pytest.mark.parametrize("seed", range(16))
def test_long_chains_validate_as_cedarpy_validates(seed: int) -> None:
    # seed % 4 == 0: valid operands only; 1: one invalid operand and no literal, so it must
    # be found; 2, 3: one invalid operand among literals, where `false && x` / `true || x`
    # leave x unchecked (the type checker's short circuit), so its place decides
    rng = random.Random(seed)
    n = rng.choice([17, 64, 300])
    pool = [o for o in VALID if o not in ("true", "false")] if seed % 4 == 1 else VALID
    parts = [rng.choice(pool).format(k=rng.randrange(6)) for _ in range(n)]
    if seed % 4:
        parts[rng.randrange(n)] = rng.choice(INVALID).format(k=1)
    op = rng.choice(["||", "&&"])
    text = f"permit(principal, action, resource) when {{ {f' {op} '.join(parts)} }};"
    want = cedarpy.validate_policies(text, SCHEMA).validation_passed
    got = not validate_policies({"policy0": parse_policies(text)[0]}, parse_schema(SCHEMA))
    assert got == want
    if seed % 4 < 2:
        assert want == (seed % 4 == 0)


@pytest.mark.parametrize("seed", range(6))
def test_many_clauses_decide_and_validate_as_cedarpy(seed: int) -> None:
    # more than 16 `when`/`unless` clauses are joined balanced too; odd seeds draw only
    # operands the type checker accepts, so validation is compared both ways
    rng = random.Random(1000 + seed)
    pool = VALID if seed % 2 else OPERANDS
    out = []
    for _ in range(4):
        clauses = []
        for _ in range(rng.choice([17, 40, 120])):
            # a clause holds more often than not, so that some policies apply
            body = " || ".join(rng.choice(pool).format(k=rng.randrange(6)) for _ in range(3))
            if rng.random() < 0.9:
                clauses.append(f"when {{ {body} || true }}")
            else:
                clauses.append(f"unless {{ {body} }}")
        out.append(f"permit(principal, action, resource) {' '.join(clauses)};")
    text = "\n".join(out)
    ents, reqs = entities(rng), requests(rng)
    want = cedar_decide(
        cedarpy.PolicySet.from_str(text), cedarpy.Schema.from_str(SCHEMA), ents, reqs
    )
    by_id = {f"policy{i}": p for i, p in enumerate(parse_policies(text))}
    for backend in ("compiled", "pydatalog") if seed < 2 else ("compiled",):
        assert polang_decide(Authorizer(by_id, backend=backend), SCHEMA, ents, reqs) == want
    valid = cedarpy.validate_policies(text, SCHEMA).validation_passed
    assert (not validate_policies(by_id, parse_schema(SCHEMA))) == valid
    if seed % 2:
        assert valid
