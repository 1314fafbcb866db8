"""``Engine.plan_multi_issuer``: a plan for a caller known by tokens signed by real
providers on loopback, read as ``authorize_multi_issuer`` reads them, and equal row for
row to ``authorize_multi_issuer`` with the row as the resource."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polang import Engine, RequestError, TokenError, TokenInput
from polang.language.entities import parse_entity

from .oidc_server import OidcProvider
from .test_engine_multi_issuer import ACCESS, ID, READ, SCHEMA, WRITE, doc, issuers_for, write_store


@pytest.fixture
def docs(
    tmp_path: Path,
    make_provider: Callable[..., OidcProvider],
    client_ssl_context: ssl.SSLContext,
) -> Iterator[tuple[Engine, OidcProvider]]:
    """test_engine_multi_issuer's store, trusting two providers on loopback."""
    acme = make_provider("/realms/acme", keys=("RS256",))
    partner = make_provider("/partner", keys=("EdDSA",))
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
    cfg = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_HTTP_MAX_RETRIES": 0}
    engine = Engine(cfg, ssl_context=client_ssl_context)
    yield engine, acme
    engine.close()


ROWS = [doc("open", locked=False), doc("shut", locked=True)]


def check_rows(engine: Engine, tokens: list[TokenInput], action: str) -> str:
    p = engine.plan_multi_issuer(tokens, action, "Acme::Document")
    assert p.principal is None
    for row in ROWS:
        want = engine.authorize_multi_issuer(tokens, action, row).decision
        assert p.allows(parse_entity(row, engine.schema)) is want, (row, p.text())
    return p.kind


def test_token_plans_equal_the_decisions(docs: tuple[Engine, OidcProvider]) -> None:
    engine, acme = docs
    reader = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]
    assert check_rows(engine, reader, READ) == "conditional"
    p = engine.plan_multi_issuer(reader, READ, "Acme::Document")
    assert [(r.effect, r.text()) for r in p.residuals] == [
        ("permit", "true"),
        ("forbid", "resource.locked"),
    ]
    mfa = [*reader, TokenInput(ID, acme.token(acr=["mfa"]))]
    assert check_rows(engine, mfa, READ) == "always_allowed"
    nobody = [TokenInput(ACCESS, acme.token(scope=["docs:list"]))]
    assert check_rows(engine, nobody, READ) == "always_denied"
    assert check_rows(engine, reader, WRITE) == "always_denied"


def test_bad_tokens_are_refused_as_authorize_refuses_them(
    docs: tuple[Engine, OidcProvider],
) -> None:
    engine, acme = docs
    with pytest.raises(TokenError):
        engine.plan_multi_issuer("not-a-list", READ, "Acme::Document")  # type: ignore[arg-type]
    with pytest.raises(TokenError):
        engine.plan_multi_issuer([TokenInput(ACCESS, "x.y")], READ, "Acme::Document")
    good = [TokenInput(ACCESS, acme.token(scope=["docs:read"]))]
    with pytest.raises(RequestError, match="tokens"):
        engine.plan_multi_issuer(good, READ, "Acme::Document", {"tokens": {}})
    with pytest.raises(RequestError, match="did you mean 'Acme::Document'"):
        engine.plan_multi_issuer(good, READ, "Acme::Docment")
