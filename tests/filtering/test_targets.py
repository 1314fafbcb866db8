"""The same filter through SQLAlchemy (Core and ORM) and Django, on real databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from polang.errors import FilterRefused

sqlalchemy = pytest.importorskip("sqlalchemy")
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from .kit import World, make_world, random_docs, residuals, world_params  # noqa: E402

POLICIES = [
    ("p1", "permit", 'resource in Folder::"f2" || resource.title like "a*"'),
    ("p2", "permit", 'resource.owner.dept == "eng" && resource.labels.contains("x")'),
    ("f1", "forbid", "unless:resource has n && resource.n > -5"),
]


def plan_of(policies: list[tuple[str, str, str]]) -> SimpleNamespace:
    return SimpleNamespace(kind="conditional", residuals=residuals(policies), resource_type="Doc")


@pytest.fixture(params=list(world_params()))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    w = make_world(request.param, tmp_path, random_docs(11, 60))
    try:
        yield w
    finally:
        w.drop()


def test_sqlalchemy_core_and_orm(world: World) -> None:
    from sqlalchemy import String, column, select, table

    from polang.filtering.sqlalchemy import plan_filter

    want = world.truth(POLICIES)
    cond = plan_filter(plan_of(POLICIES), world.mapping, world.db)
    docs = table(world.prefix + "docs", column("id"), column("title"))
    with world.db.connect() as c:
        got = {r[0] for r in c.execute(select(docs.c.id).where(cond))}
    assert got == want

    class Base(DeclarativeBase):
        pass

    class Document(Base):
        __tablename__ = world.prefix + "docs"
        id: Mapped[str] = mapped_column(String(64), primary_key=True)
        title: Mapped[str | None] = mapped_column(String(200))

    with Session(world.db) as session:
        rows = session.scalars(select(Document).where(cond).order_by(Document.id).limit(5)).all()
        assert [d.id for d in rows] == sorted(want)[:5]
    # the element compiles only for the dialect it was translated for
    other = "sqlite" if world.dialect != "sqlite" else "postgresql"
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    dialect = {"sqlite": sqlite, "postgresql": postgresql, "mysql": mysql}[other].dialect()
    with pytest.raises(FilterRefused, match="translated for"):
        select(docs.c.id).where(cond).compile(dialect=dialect)


def test_sqlalchemy_binds_hostile_literals(world: World) -> None:
    from sqlalchemy import column, select, table

    from polang.filtering.sqlalchemy import plan_filter

    evil = [
        ("p1", "permit", "resource.title == \"x' OR '1'='1\""),
        ("p2", "permit", 'resource.title like "*\\\\\' OR 1=1 -- %*"'),
        ("p3", "permit", 'resource.title == "a\\u{0}b" || resource.title == "polang_0_1"'),
    ]
    want = world.truth(evil)
    docs = table(world.prefix + "docs", column("id"))
    with world.db.connect() as c:
        got = {
            r[0]
            for r in c.execute(
                select(docs.c.id).where(plan_filter(plan_of(evil), world.mapping, world.db))
            )
        }
    assert got == want == set()
    assert (
        world.run_sql(
            __import__("polang.filtering", fromlist=["translate"])
            .translate(plan_of(evil), world.mapping, world.dialect)
            .sql()
        )
        == set()
    )


@pytest.mark.parametrize("vendor", ["sqlite", "postgres"])
def test_django_q(vendor: str, tmp_path: Path) -> None:
    django = pytest.importorskip("django")
    from django.conf import settings

    w = make_world(vendor, tmp_path, random_docs(13, 50))
    try:
        if vendor == "sqlite":
            db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db.sqlite")}
        else:
            db = {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "test",
                "USER": "postgres",
                "HOST": "127.0.0.1",
                "PORT": "5432",
            }
        if not settings.configured:
            settings.configure(DATABASES={}, INSTALLED_APPS=[], USE_TZ=True)
            django.setup()
        from django.db import connections, models

        from polang.filtering.django import plan_q

        alias = f"polang_{w.prefix}"
        connections.settings[alias] = {**connections.settings.get("default", {}), **db}
        connections.settings[alias].setdefault("TIME_ZONE", None)
        connections.settings[alias].setdefault("CONN_MAX_AGE", 0)
        connections.settings[alias].setdefault("CONN_HEALTH_CHECKS", False)
        connections.settings[alias].setdefault("OPTIONS", {})
        connections.settings[alias].setdefault("AUTOCOMMIT", True)
        connections.settings[alias].setdefault("ATOMIC_REQUESTS", False)
        connections.settings[alias].setdefault("TEST", {})

        attrs = {
            "__module__": __name__,
            "id": models.CharField(max_length=64, primary_key=True),
            "title": models.CharField(max_length=200, null=True),
            "Meta": type(
                "Meta",
                (),
                {"db_table": w.prefix + "docs", "app_label": "polang_tests", "managed": False},
            ),
        }
        Document = type(f"Doc{w.prefix}", (models.Model,), attrs)
        want = w.truth(POLICIES)
        q = plan_q(plan_of(POLICIES), w.mapping)
        got = set(Document.objects.using(alias).filter(q).values_list("id", flat=True))
        assert got == want
        first = list(
            Document.objects.using(alias).filter(q).order_by("id")[:3].values_list("id", flat=True)
        )
        assert first == sorted(want)[:3]
        connections[alias].close()
    finally:
        w.drop()
