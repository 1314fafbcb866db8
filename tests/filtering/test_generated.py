"""Generated policies (and rows) against the truth, row for row, on every database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.errors import FilterRefused
from polang.filtering import translate

from .kit import Doc, World, make_world, random_docs, residuals, world_params

ATOMS = [
    "resource.n == 7",
    "resource.n > 0",
    "resource.n + 1 > 5",
    "resource.n - 3 <= 0",
    "resource.n * 2 < 10",
    "resource has n",
    'resource.title == "alpha"',
    'resource.title like "a*"',
    'resource.title like "*a"',
    "resource has title",
    "resource.public",
    "resource has public",
    'resource.owner == User::"bob"',
    'resource.owner.dept == "eng"',
    "resource.owner.level >= 3",
    "resource.owner has level",
    'resource in Folder::"f1"',
    'resource in Folder::"f4"',
    'resource in Group::"blue"',
    'resource is Doc in [Folder::"g1", Folder::"lone"]',
    'resource.labels.contains("y")',
    'resource.labels.containsAny(["x", "z"])',
    "resource.labels.isEmpty()",
    'resource.hasTag("u")',
    'resource.getTag("u") == "w"',
    'resource.amount.greaterThan(decimal("1.5"))',
    'resource.created > datetime("2024-01-01")',
    "resource.n",  # a Long where a Bool is needed: a type error
    'resource.title < "z"',  # an error in the language
]


def conditions() -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(ATOMS),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: f"({t[0]}) && ({t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}) || ({t[1]})"),
            inner.map(lambda c: f"!({c})"),
            st.tuples(inner, inner, inner).map(
                lambda t: f"if ({t[0]}) then ({t[1]}) else ({t[2]})"
            ),
        ),
        max_leaves=5,
    )


policies = st.lists(
    st.tuples(st.sampled_from(["permit", "permit", "forbid"]), conditions(), st.booleans()),
    min_size=1,
    max_size=3,
).map(
    lambda ps: [
        (f"g{i}", eff, ("unless:" if unless and eff == "forbid" else "") + cond)
        for i, (eff, cond, unless) in enumerate(ps)
    ]
)


@pytest.fixture(params=list(world_params()))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    w = make_world(request.param, tmp_path, random_docs(3, 70))
    try:
        yield w
    finally:
        w.drop()


def test_generated_policies(world: World) -> None:
    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(policies)
    def run(ps: list[tuple[str, str, str]]) -> None:
        try:
            f = translate(residuals(ps), world.mapping, world.dialect, resource_type="Doc")
        except FilterRefused:
            return  # refused whole: never a different answer
        assert world.run_sql(f.sql()) == world.truth(ps), (ps, f.sql())

    run()


def docs() -> st.SearchStrategy[list[Doc]]:
    big = st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 2**62, 5])
    doc = st.builds(
        Doc,
        id=st.just(""),
        title=st.none() | st.sampled_from(["alpha", "Alpha", "a*", "", "al pha"]),
        n=st.none() | big | st.integers(-20, 20),
        public=st.none() | st.booleans(),
        owner=st.none() | st.sampled_from(["alice", "bob", "carol", "ghost"]),
        folder=st.none() | st.sampled_from(["f0", "f3", "f5", "g2", "lone", "missing"]),
        amount=st.none() | st.integers(-30_000, 30_000),
        created=st.none() | st.sampled_from([0, 1_704_067_200_000, 1_704_067_200_001]),
        labels=st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3),
        tags=st.dictionaries(st.sampled_from(["t", "u"]), st.sampled_from(["v", "w"]), max_size=2),
        groups=st.lists(st.sampled_from(["red", "blue"]), unique=True, max_size=2),
    )
    return st.lists(doc, min_size=1, max_size=12).map(
        lambda ds: [Doc(**{**d.__dict__, "id": f"h{i}"}) for i, d in enumerate(ds)]
    )


def test_generated_rows_and_policies_on_sqlite(tmp_path: Path) -> None:
    w = make_world("sqlite", tmp_path, [])
    try:

        @settings(
            max_examples=30,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(docs(), policies)
        def run(rows: list[Doc], ps: list[tuple[str, str, str]]) -> None:
            from sqlalchemy import text

            with w.db.begin() as c:
                for t in ("docs", "labels", "readers", "tags", "doc_groups"):
                    c.execute(text(f"DELETE FROM {w.table(t)}"))
                w.insert(c, rows)
            w.docs = rows
            try:
                f = translate(residuals(ps), w.mapping, "sqlite", resource_type="Doc")
            except FilterRefused:
                return
            assert w.run_sql(f.sql()) == w.truth(ps), (ps, f.sql())

        run()
    finally:
        w.drop()
