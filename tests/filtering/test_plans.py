"""Plans from ``Engine.plan`` (principal, scopes, templates evaluated away) translated and
run: the rows equal ``authorize_unsigned``'s, per principal, on every database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from polang.filtering import translate

from .kit import ACTION, USERS, World, make_world, random_docs, world_params

POLICIES = """
@id("owner") permit(principal, action, resource) when { resource.owner == principal };
@id("eng-tree") permit(principal, action, resource in Folder::"f1")
  when { principal has dept && principal.dept == "eng" };
@id("senior") permit(principal, action, resource)
  when { principal has level && resource has n && principal.level > resource.n };
@id("tagged") permit(principal, action, resource)
  when { resource.hasTag("t") && principal has dept && resource.getTag("t") like "*" };
@id("reader") permit(principal, action, resource) when { principal in resource.readers };
@id("no-private") forbid(principal, action, resource)
  unless { resource has public && (resource.public || principal.level >= 5) };
"""

TEMPLATES = """
@id("share") permit(principal == ?principal, action, resource in ?resource);
"""

LINKS = [
    {
        "template_id": "share",
        "link_id": "share-carol",
        "principal": {"type": "User", "id": "carol"},
        "resource": 'Folder::"g1"',
    },
    {
        "template_id": "share",
        "link_id": "share-bob",
        "principal": {"type": "User", "id": "bob"},
        "resource": 'Group::"red"',
    },
]


@pytest.fixture(params=list(world_params()))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    w = make_world(request.param, tmp_path, random_docs(21, 80))
    try:
        yield w
    finally:
        w.drop()


def test_engine_plans_per_principal(world: World) -> None:
    eng = world.engine_text(POLICIES, TEMPLATES, LINKS)
    try:
        kinds = set()
        for user, _, _ in [*USERS, ("ghost", None, None)]:
            principal = (
                f'User::"{user}"'
                if user != "ghost"
                else {"uid": {"type": "User", "id": "ghost"}, "attrs": {"level": 9}, "parents": []}
            )
            plan = eng.plan(ACTION, "Doc", principal=principal)
            kinds.add(plan.kind)
            f = translate(plan, world.mapping, world.dialect)
            want = {
                d.id
                for d in world.docs
                if eng.authorize_unsigned(ACTION, d.entity(), principal=principal).decision
            }
            assert world.run_sql(f.sql()) == want, (user, plan.text(), f.sql())
        assert "conditional" in kinds
    finally:
        eng.close()


def test_always_allowed_and_denied_plans(world: World) -> None:
    for text, kind, rows in (
        ('@id("all") permit(principal, action, resource);', "always_allowed", len(world.docs)),
        ('@id("none") forbid(principal, action, resource);', "always_denied", 0),
    ):
        eng = world.engine_text(text)
        try:
            plan = eng.plan(ACTION, "Doc", principal='User::"alice"')
            assert plan.kind == kind
            assert len(world.run_sql(translate(plan, world.mapping, world.dialect).sql())) == rows
        finally:
            eng.close()
