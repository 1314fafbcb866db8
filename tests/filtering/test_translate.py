"""Rows a plan's filter returns == rows ``authorize_unsigned`` allows, on real databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from polang.errors import FilterRefused
from polang.filtering import translate

from .kit import World, make_world, random_docs, residuals, world_params

# one condition per construct and edge: absent/NULL, errors under ||, overflow, strings
# and collation, like with escapes, entity references, `in` over 6 levels, `is`, sets,
# tags, decimals, datetimes, if-then-else
CONDITIONS = [
    "resource.n == 7",
    "resource.n != 7",
    "resource.n == 1 || true",
    "true && resource.n < 3",
    "!(resource.n > 0)",
    "resource.n + 5 > 10",
    "resource.n - 10 < 0",
    "resource.n * 2 > 5",
    "resource.n * -3 < 0",
    "-resource.n > 0",
    "resource has n && resource.n >= 100",
    "!(resource has n) || resource.n == 0",
    'resource.title == "alpha"',
    'resource.title != "alpha"',
    'resource.title == "ALPHA"',
    'resource.title < "b"',
    'resource.title like "a*"',
    'resource.title like "*A*"',
    'resource.title like "a%b"',
    'resource.title like "a_b"',
    r'resource.title like "x\*y"',
    'resource.title like "*"',
    'resource.title like "b\\\\c"',
    'resource.title like "🙂*"',
    "resource.public",
    "resource.public == false",
    "!resource.public",
    "resource.public || resource.n == 1",
    'resource.owner == User::"alice"',
    'resource.owner.dept == "eng"',
    "resource.owner.level > 2",
    "resource.owner has dept",
    'resource.owner has dept && resource.owner.dept like "*ng"',
    'resource in Folder::"f0"',
    'resource in Folder::"f3"',
    'resource in Folder::"g1"',
    'resource in [Folder::"f5", Folder::"lone"]',
    'resource in Group::"red"',
    'resource in Doc::"d3"',
    'resource in User::"alice"',
    'resource.owner in User::"alice"',
    "resource is Doc",
    'resource is Doc in Folder::"f2"',
    "resource.owner is User",
    'resource.labels.contains("x")',
    'resource.labels.containsAll(["x", "y"])',
    'resource.labels.containsAny(["Z", "q"])',
    "resource.labels.isEmpty()",
    "resource.labels.contains(1)",
    '["alpha", "beta"].contains(resource.title)',
    'resource.hasTag("t")',
    'resource.getTag("t") == "v"',
    'resource.hasTag("t") && resource.getTag("t") == "V"',
    'resource.amount.lessThan(decimal("1.5"))',
    'resource.amount.greaterThanOrEqual(decimal("1.5001"))',
    'resource.amount == decimal("100.0")',
    'resource.created < datetime("2025-01-01")',
    'resource.created >= datetime("2023-11-14T22:13:20Z")',
    "if resource.public then resource.n > 0 else resource.n < 0",
    "(if resource has n then resource.n else 0) > 5",
    "resource.title == 1",
    "resource.n == resource.n",
    "resource.n + resource.n > 0",
    "resource.n - resource.n == 0",
    "resource.level == 3",
    "resource.level < 0",
    "resource has level",
    'resource.kind == "memo"',
    'resource.kind like "M*"',
    "resource has kind",
    "resource.flag",
    "!resource.flag",
    "resource has flag",
    'resource.readers.contains(User::"alice")',
    'resource.readers.containsAny([User::"bob", User::"ghost"])',
    'resource.readers.containsAll([User::"alice", User::"bob"])',
    "resource.readers.isEmpty()",
    'resource.readers.contains(Folder::"f1")',
]


@pytest.fixture(params=list(world_params()))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    w = make_world(request.param, tmp_path, random_docs(7, 90))
    try:
        yield w
    finally:
        w.drop()


def check(world: World, policies: list[tuple[str, str, str]]) -> None:
    want = world.truth(policies)
    f = translate(residuals(policies), world.mapping, world.dialect, resource_type="Doc")
    got = world.run_sql(f.sql())
    assert got == want, (policies, sorted(got ^ want), f.sql())


def test_every_construct_alone(world: World) -> None:
    for i, cond in enumerate(CONDITIONS):
        check(world, [(f"p{i}", "permit", cond)])


def test_a_closure_table_instead_of_the_walk(world: World) -> None:
    from polang.filtering import Mapping

    from .kit import mapping_dict

    closed = Mapping.from_dict(mapping_dict(world.prefix, closure=True))
    for i, cond in enumerate(c for c in CONDITIONS if " in " in c or "in Folder" in c):
        ps = [(f"c{i}", "permit", cond)]
        f = translate(residuals(ps), closed, world.dialect, resource_type="Doc")
        if "Folder::" in cond:
            assert "folder_closure" in f.sql(), f.sql()
        assert world.run_sql(f.sql()) == world.truth(ps), (cond, f.sql())


def test_forbids_with_unless_and_templates_of_permits(world: World) -> None:
    check(
        world,
        [
            ("p1", "permit", 'resource in Folder::"f1"'),
            ("p2", "permit", "resource.public"),
            ("f1", "forbid", "unless:resource.n > 0"),
            ("f2", "forbid", 'resource.title like "a*"'),
        ],
    )
    # an erring forbid forbids nothing: rows without n stay allowed by p2
    check(world, [("p", "permit", "true"), ("f", "forbid", "resource.n > 5")])


def test_refusals_name_the_policy_and_the_construct(world: World) -> None:
    with pytest.raises(FilterRefused) as e:
        translate(
            residuals([("pz", "permit", "resource.n * resource.n > 2")]),
            world.mapping,
            world.dialect,
            resource_type="Doc",
        )
    assert e.value.policy_id == "pz" and "`*`" in str(e.value)
    with pytest.raises(FilterRefused, match=r"pq.*nope"):
        translate(
            residuals([("pq", "permit", "resource.nope == 1")]),
            world.mapping,
            world.dialect,
            resource_type="Doc",
        )


def test_postgres_arrays(tmp_path: Path) -> None:
    import json

    from sqlalchemy import text

    from polang.filtering import Mapping

    w = make_world("postgres", tmp_path, [])
    t = w.prefix + "arr"
    m = Mapping.from_dict(
        {
            "types": {
                "Doc": {
                    "table": t,
                    "attributes": {
                        "codes": {"array": "codes", "type": "Long"},
                        "names": {"array": "names", "type": "String"},
                    },
                }
            }
        }
    )
    rows = [("a", [1, 2], ["x", "Y"]), ("b", [], []), ("c", None, ["y"]), ("d", [3], None)]
    try:
        with w.db.begin() as c:
            c.execute(text(f'CREATE TABLE "{t}" (id TEXT, codes BIGINT[], names TEXT[])'))
            for r in rows:
                c.execute(
                    text(f'INSERT INTO "{t}" VALUES (:i, :c, :n)'),
                    {"i": r[0], "c": r[1], "n": r[2]},
                )
        for cond in (
            "resource.codes.contains(2)",
            'resource.names.containsAny(["y", "z"])',
            'resource.names.containsAll(["x", "Y"])',
            "resource.codes.isEmpty()",
            "!resource.codes.isEmpty()",
            "resource has names",
            'resource.codes.contains("2")',
        ):
            ps = [("p", "permit", cond)]
            eng = w.engine(ps)
            want = set()
            for i, codes, names in rows:
                attrs: dict[str, object] = {"labels": [], "readers": []}
                if codes is not None:
                    attrs["codes"] = codes
                if names is not None:
                    attrs["names"] = names
                ent = {"uid": {"type": "Doc", "id": i}, "attrs": attrs, "parents": []}
                if eng.authorize_unsigned('Action::"read"', json.loads(json.dumps(ent))).decision:
                    want.add(i)
            eng.close()
            f = translate(residuals(ps), m, "postgres", resource_type="Doc")
            with w.db.connect() as c:
                got = {r[0] for r in c.execute(text(f.select_sql(["id"])))}
            assert got == want, (cond, f.sql())
        with pytest.raises(FilterRefused, match="PostgreSQL"):
            translate(
                residuals([("p", "permit", "resource.codes.contains(2)")]),
                m,
                "sqlite",
                resource_type="Doc",
            )
    finally:
        with w.db.begin() as c:
            c.execute(text(f'DROP TABLE IF EXISTS "{t}"'))
        w.drop()


@pytest.mark.parametrize("kind", ["sqlite", "mariadb"])
def test_values_of_another_type_read_as_absent(kind: str, tmp_path: Path) -> None:
    """SQLite's dynamic types and MySQL's TINYINT Booleans: a value that is not of the
    mapping's type is the attribute absent, in the filter as in the row's entity."""
    from sqlalchemy import text

    w = make_world(kind, tmp_path, [])
    try:
        bad = (
            [("w1", "abc", "seven", 2), ("w2", None, 5, 1), ("w3", "t", 3.5, 0)]
            if kind == "sqlite"
            else [("w1", "abc", 7, 2), ("w2", None, 5, 1), ("w3", "t", 3, 0)]
        )
        with w.db.begin() as c:
            for i, title, n, public in bad:
                c.execute(
                    text(
                        f"INSERT INTO {w.table('docs')} (id, title, n, public) "
                        "VALUES (:i, :t, :n, :p)"
                    ),
                    {"i": i, "t": title, "n": n, "p": public},
                )

        def entity(i: str, title: object, n: object, public: object) -> dict[str, object]:
            attrs: dict[str, object] = {"labels": [], "readers": []}
            if isinstance(title, str):
                attrs["title"] = title
            if type(n) is int:
                attrs["n"] = n
            if public in (0, 1):
                attrs["public"] = bool(public)
            return {"uid": {"type": "Doc", "id": i}, "attrs": attrs, "parents": []}

        for cond in ("resource has n", "resource.n > 4", "resource has public", "!resource.public"):
            ps = [("p", "permit", cond)]
            eng = w.engine(ps)
            want = {
                i
                for i, t, n, p in bad
                if eng.authorize_unsigned('Action::"read"', entity(i, t, n, p)).decision
            }
            eng.close()
            f = translate(residuals(ps), w.mapping, w.dialect, resource_type="Doc")
            assert w.run_sql(f.sql()) == want, (cond, f.sql())
    finally:
        w.drop()
