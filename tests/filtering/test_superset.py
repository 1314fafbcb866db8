"""A superset filter plus the exact per-row check; integer ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from polang.errors import FilterRefused
from polang.filtering import Mapping, checked_page, translate
from polang.language.entities import parse_entity

from .kit import ACTION, make_world, random_docs, residuals

sqlalchemy = pytest.importorskip("sqlalchemy")


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "mariadb"])
def test_superset_then_the_exact_check_pages_like_the_truth(kind: str, tmp_path: Path) -> None:
    w = make_world(kind, tmp_path, random_docs(5, 80))
    try:
        policies = [
            ("exact", "permit", 'resource in Folder::"f2"'),
            ("square", "permit", "resource.n * resource.n > 30"),  # refused alone
            ("no-owner", "forbid", "resource.owner.level * resource.n > 3"),  # refused alone
        ]
        with pytest.raises(FilterRefused, match="square"):
            translate(residuals(policies), w.mapping, w.dialect, resource_type="Doc")
        f = translate(residuals(policies), w.mapping, w.dialect, resource_type="Doc", superset=True)
        assert not f.exact and f.rechecks == ("square", "no-owner")
        want = w.truth(policies)
        superset = w.run_sql(f.sql())
        assert want < superset  # the refused permit is taken as true: every row but forbids
        eng = w.engine(policies)
        by_id = {d.id: d for d in w.docs}
        plan = eng.plan(ACTION, "Doc")

        def allows(doc_id: str) -> bool:
            exact = eng.authorize_unsigned(ACTION, by_id[doc_id].entity()).decision
            assert plan.allows(parse_entity(by_id[doc_id].entity())) == exact
            return exact

        def fetch(after: str | None, n: int) -> list[str]:
            q = f.select_sql(["id"], order_by="id")
            q = q[: q.index(" ORDER BY")]
            t = w.table("docs")
            extra = f" AND {t}.id > :after" if after is not None else ""
            with w.db.connect() as c:
                return [
                    r[0]
                    for r in c.execute(
                        sqlalchemy.text(f"{q}{extra} ORDER BY {t}.id LIMIT {n}"), {"after": after}
                    )
                ]

        pages: list[str] = []
        after = None
        while True:
            page = checked_page(
                lambda a, n, s=after: fetch(a if a is not None else s, n),
                allows,
                7,
                key=lambda r: r,
            )
            if not page:
                break
            pages += page
            after = page[-1]
        assert pages == sorted(want)
        eng.close()
    finally:
        w.drop()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "mariadb"])
def test_integer_ids(kind: str, tmp_path: Path) -> None:
    from .kit import make_world as mk

    w = mk(kind, tmp_path, [])
    p = w.prefix
    m = Mapping.from_dict(
        {
            "types": {
                "Item": {
                    "table": f"{p}items",
                    "id_type": "Long",
                    "attributes": {"owner": {"column": "owner", "type": "Person"}},
                    "parents": [{"column": "box", "type": "Box"}],
                },
                "Box": {
                    "table": f"{p}boxes",
                    "id_type": "Long",
                    "parents": [{"column": "up", "type": "Box"}],
                },
                "Person": {"table": f"{p}people", "id_type": "Long"},
            }
        }
    )
    q = w.db.dialect.identifier_preparer.quote
    with w.db.begin() as c:
        c.execute(
            sqlalchemy.text(
                f"CREATE TABLE {q(p + 'items')} (id BIGINT PRIMARY KEY, owner BIGINT, box BIGINT)"
            )
        )
        c.execute(
            sqlalchemy.text(f"CREATE TABLE {q(p + 'boxes')} (id BIGINT PRIMARY KEY, up BIGINT)")
        )
        c.execute(sqlalchemy.text(f"CREATE TABLE {q(p + 'people')} (id BIGINT PRIMARY KEY)"))
        c.execute(
            sqlalchemy.text(
                f"INSERT INTO {q(p + 'boxes')} VALUES (1, NULL), (2, 1), (3, 2), (4, NULL)"
            )
        )
        c.execute(sqlalchemy.text(f"INSERT INTO {q(p + 'people')} VALUES (5), (6)"))
        c.execute(
            sqlalchemy.text(
                f"INSERT INTO {q(p + 'items')} VALUES "
                "(10, 5, 3), (11, 6, 4), (12, NULL, 2), (13, 5, NULL)"
            )
        )
    cases = {
        'resource in Box::"1"': {10, 12},
        'resource in Box::"01"': set(),  # not the canonical text of an id: no row
        'resource == Item::"11"': {11},
        'resource.owner == Person::"5"': {10, 13},
        'resource.owner == Person::"x"': set(),
        'resource in Box::"99999999999999999999"': set(),
    }
    try:
        for cond, want in cases.items():
            f = translate(residuals([("p", "permit", cond)]), m, w.dialect, resource_type="Item")
            with w.db.connect() as c:
                got = {r[0] for r in c.execute(sqlalchemy.text(f.select_sql(["id"])))}
            assert got == want, (cond, f.sql())
    finally:
        with w.db.begin() as c:
            for t in ("items", "boxes", "people"):
                c.execute(sqlalchemy.text(f"DROP TABLE IF EXISTS {q(p + t)}"))
        w.drop()
