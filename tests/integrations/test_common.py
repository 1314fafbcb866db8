"""The framework-free part: token headers, answers and options, without a server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from polang import Engine
from polang.errors import ConfigError
from polang.integrations import MAX_TOKEN_HEADER_SIZE, Guard, Refusal, RequestInfo, from_path

from .conftest import GUARD, READ, Providers, document


def info(headers: list[tuple[str, str]], **params: str) -> RequestInfo:
    return RequestInfo("GET", "/docs/d1", headers, params)


def refusal(guard: Guard, headers: list[tuple[str, str]]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        guard.tokens(headers)
    return caught.value


def test_header_names_and_scheme_are_case_insensitive(engine: Engine) -> None:
    guard = Guard(engine, action=READ, resource=document, **GUARD)
    got = guard.tokens([("AUTHORIZATION", "bearer a.b.c"), ("x-id-token", " d.e.f ")])
    assert [(t.mapping, t.payload) for t in got] == [
        ("Acme::Access_token", "a.b.c"),
        ("Acme::Id_token", "d.e.f"),
    ]
    # an extra header alone is a token: the request is not anonymous
    assert len(guard.tokens([("X-Partner-Token", "g.h.i")])) == 1


def test_hostile_headers(engine: Engine) -> None:
    guard = Guard(engine, action=READ, resource=document, **GUARD)
    r = refusal(guard, [("X-Id-Token", "a.b.c"), ("x-id-token", "a.b.c")])
    assert r.status == 400 and "repeated" in r.headers["WWW-Authenticate"]
    r = refusal(guard, [("X-Id-Token", "x" * (MAX_TOKEN_HEADER_SIZE + 1))])
    assert r.status == 400 and "MAX_TOKEN_HEADER_SIZE" in r.headers["WWW-Authenticate"]
    r = refusal(guard, [("Authorization", 'Bearer a"b\r\nSet-Cookie: x')])
    assert r.status == 400
    assert "\r" not in r.headers["WWW-Authenticate"] and "\n" not in r.headers["WWW-Authenticate"]
    r = refusal(guard, [("Authorization", "Digest abc")])
    assert r.status == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="docs"'
    # headers that carry no token are never read, however many
    many = [("X-Other", "y" * 100)] * 1000
    assert len(guard.tokens([*many, ("Authorization", "Bearer a.b.c")])) == 1


def test_from_path(engine: Engine, providers: Providers) -> None:
    build = from_path("Acme::Document", "doc_id", attrs=lambda i: {"locked": False})
    assert build(info([], doc_id="d1")) == {
        "uid": {"type": "Acme::Document", "id": "d1"},
        "attrs": {"locked": False},
    }
    with pytest.raises(Refusal) as caught:
        build(info([]))
    assert caught.value.status == 404
    with pytest.raises(ConfigError, match="not an entity type name"):
        from_path("Acme Document", "doc_id")
    guard = Guard(engine, action=READ, resource=build, **GUARD)
    token = providers.acme.token(scope=["docs:read"])
    result = guard.check(info([("Authorization", f"Bearer {token}")], doc_id="d1"))
    assert result.decision is True


def test_a_resource_the_schema_refuses_is_a_400_without_its_message(
    engine: Engine, providers: Providers
) -> None:
    guard = Guard(
        engine,
        action=READ,
        resource=lambda i: {
            "uid": {"type": "Acme::Document", "id": "x"},
            "attrs": {"locked": "no"},
        },
        **GUARD,
    )
    token = providers.acme.token(scope=["docs:read"])
    with pytest.raises(Refusal) as caught:
        guard.check(info([("Authorization", f"Bearer {token}")]))
    assert caught.value.status == 400 and caught.value.body == {"error": "bad_request"}


def test_a_list_guard_plans_and_an_item_guard_decides(engine: Engine, providers: Providers) -> None:
    """One guard, one job: resource (check) or resource_type (plan), checked at start."""
    with pytest.raises(ConfigError, match="resource_type"):
        Guard(engine, action=READ, **GUARD)
    with pytest.raises(ConfigError, match="resource_type"):
        Guard(engine, action=READ, resource=document, resource_type="Acme::Document", **GUARD)
    for bad in ("Acme Document", "", 42, "Acme::"):
        with pytest.raises(ConfigError, match="not an entity type name"):
            Guard(engine, action=READ, resource_type=bad, **GUARD)  # type: ignore[arg-type]
    token = [("Authorization", f"Bearer {providers.acme.token(scope=['docs:read'])}")]
    rows = Guard(engine, action=READ, resource_type="Acme::Document", **GUARD)
    assert rows.plan(info(token)).kind == "conditional"  # locked documents are forbidden
    with pytest.raises(ConfigError, match="use plan"):
        rows.check(info(token))
    with pytest.raises(ConfigError, match="use check"):
        Guard(engine, action=READ, resource=document, **GUARD).plan(info(token))


def test_a_type_the_schema_lacks_is_a_400_without_its_message(
    engine: Engine, providers: Providers
) -> None:
    token = [("Authorization", f"Bearer {providers.acme.token(scope=['docs:read'])}")]
    for rtype in ("Acme::Documnet", "Acme::User"):  # misspelt; no read of a User
        guard = Guard(engine, action=READ, resource_type=rtype, **GUARD)
        with pytest.raises(Refusal) as caught:
            guard.plan(info(token))
        assert caught.value.status == 400 and caught.value.body == {"error": "bad_request"}


def test_aplan_is_plan(engine: Engine, providers: Providers) -> None:
    """The async API (keys fetched off the loop) plans as the sync one."""
    token = [("Authorization", f"Bearer {providers.acme.token(scope=['docs:read'])}")]
    rows = Guard(engine, action=READ, resource_type="Acme::Document", **GUARD)
    planned = asyncio.run(rows.aplan(info(token)))
    assert rows.async_engine.fetches_started >= 1  # the keys, fetched on its threads
    assert planned.to_dict() == rows.plan(info(token)).to_dict()
    with pytest.raises(Refusal) as caught:
        asyncio.run(rows.aplan(info([])))
    assert caught.value.status == 401


def test_realm_is_checked(engine: Engine) -> None:
    with pytest.raises(ConfigError, match="realm"):
        Guard(engine, action=READ, resource=document, token_type="Acme::Access_token", realm='a"b')


def test_no_framework_is_imported_until_its_module_is() -> None:
    """``polang`` and ``polang.integrations`` import no web framework (each is an extra)."""
    code = (
        "import json, sys, polang, polang.integrations\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('fastapi', 'starlette', 'flask', 'werkzeug', 'django', "
        "'rest_framework', 'uvicorn'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == []
