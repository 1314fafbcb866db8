"""What every integration test shares: two OpenID providers on loopback HTTPS, a store
trusting both, an engine, the application's "database" of documents, and the checks every
framework must pass (:func:`check_answers`)."""

from __future__ import annotations

import json
import re
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from polang import Engine
from polang.analysis.plan import Plan
from polang.integrations import MAX_TOKEN_HEADER_SIZE, Refusal, RequestInfo
from polang.language.entities import parse_entity
from tokens.oidc_server import OidcProvider
from tokens.test_engine_multi_issuer import ACCESS, ID, PARTNER, SCHEMA, issuers_for, write_store

READ = 'Acme::Action::"read"'
WRITE = 'Acme::Action::"write"'
REALM = "docs"
EXTRA_HEADERS = {"X-Partner-Token": PARTNER, "X-Id-Token": ID}
GUARD = {"token_type": ACCESS, "extra_headers": EXTRA_HEADERS, "realm": REALM}

# the application's own rows, mapped to entities by the resource callable
DOCUMENTS = {"d1": {"locked": False}, "vault": {"locked": True}}


def document(info: RequestInfo) -> dict[str, Any]:
    """The row -> entity mapping an application writes: 404 for a row that is not there."""
    doc_id = str(info.params.get("doc_id") or info.path.rstrip("/").rsplit("/", 1)[-1])
    if doc_id not in DOCUMENTS:
        raise Refusal(404, {"error": "not_found"}, {})
    return document_entity(doc_id)


def document_entity(doc_id: str) -> dict[str, Any]:
    return {"uid": {"type": "Acme::Document", "id": doc_id}, "attrs": dict(DOCUMENTS[doc_id])}


def listed(plan: Plan) -> dict[str, Any]:
    """What the test list views answer: the plan's kind and the rows it allows."""
    ids = [i for i in DOCUMENTS if plan.allows(parse_entity(document_entity(i)))]
    return {"kind": plan.kind, "ids": ids}


def method_action(info: RequestInfo) -> str:
    return READ if info.method in ("GET", "HEAD") else WRITE


@dataclass
class Providers:
    acme: OidcProvider
    partner: OidcProvider


@pytest.fixture
def providers(server_ssl_context: ssl.SSLContext) -> Iterator[Providers]:
    acme = OidcProvider(server_ssl_context, prefix="/realms/acme")
    acme.add_key("RS256")
    partner = OidcProvider(server_ssl_context, prefix="/partner")
    partner.add_key("ES256")
    acme.start()
    partner.start()
    yield Providers(acme, partner)
    acme.stop()
    partner.stop()


@pytest.fixture
def store(tmp_path: Path, providers: Providers) -> Path:
    return write_store(tmp_path / "docs", SCHEMA, issuers_for(providers.acme, providers.partner))


def engine_config(store: Path) -> dict[str, Any]:
    return {
        "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
        "ENGINE_HTTP_MAX_RETRIES": 0,
        "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
    }


@pytest.fixture
def engine(store: Path, client_ssl_context: ssl.SSLContext) -> Iterator[Engine]:
    with Engine(engine_config(store), ssl_context=client_ssl_context) as e:
        yield e


# A client call: (method, path, headers as a list of pairs) -> (status, headers, body).
Call = Callable[[str, str, list[tuple[str, str]]], tuple[int, dict[str, str], Any]]


def bearer(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}")]


def check_answers(call: Call, p: Providers) -> None:
    """The answers every integration gives, through its framework's client."""
    acme, partner = p.acme, p.partner
    reader = acme.token(scope=["docs:read"])

    # allowed: the view sees the result
    status, _, body = call("GET", "/docs/d1", bearer(reader))
    assert status == 200, body
    assert body["decision"] is True and body["reasons"] == ["read-with-scope"]
    assert re.fullmatch(r"[0-9a-f-]{36}", body["request_id"])

    # no credentials: a plain challenge (RFC 6750 3.1: no error code)
    for headers in ([], [("Authorization", "Basic dXNlcjpwdw==")]):
        status, h, body = call("GET", "/docs/d1", headers)
        assert status == 401, body
        assert h["www-authenticate"] == f'Bearer realm="{REALM}"'

    # tokens, none valid: invalid_token with the drop kinds, never a token's contents
    expired = acme.token(scope=["docs:read"], exp=int(time.time()) - 600)
    for token, kind in ((expired, "expired"), ("abc.def.ghi", "invalid_input")):
        status, h, body = call("GET", "/docs/d1", bearer(token))
        assert status == 401, body
        challenge = h["www-authenticate"]
        assert challenge.startswith(f'Bearer realm="{REALM}", error="invalid_token"'), challenge
        assert kind in challenge and body["error"] == "invalid_token"
        assert token not in json.dumps(body) and token not in challenge

    # denied: 403 with the request id, never the policies' text
    status, h, body = call("GET", "/docs/d1", bearer(acme.token(scope=["docs:list"])))
    assert status == 403, body
    assert set(body) == {"error", "request_id"} and body["error"] == "forbidden"
    assert "www-authenticate" not in h

    # multi-issuer: the partner's token comes in its own header
    editor = partner.token(role=["editor"])
    status, _, body = call("POST", "/docs/d1", [*bearer(reader), ("X-Partner-Token", editor)])
    assert status == 200, body
    assert body["reasons"] == ["write-with-partner-editor"]
    status, _, body = call("POST", "/docs/d1", bearer(reader))
    assert status == 403, body

    # the application's row lookup decides 404 before anything else
    status, _, body = call("GET", "/docs/nope", bearer(reader))
    assert status == 404, body

    # hostile headers: bounded, named, 400
    huge = "a" * (MAX_TOKEN_HEADER_SIZE + 1)
    status, h, body = call("GET", "/docs/d1", bearer(huge))
    assert status in (400, 431), body  # a real server may refuse it first (431)
    if status == 400:
        assert "MAX_TOKEN_HEADER_SIZE" in h["www-authenticate"]
    for value in (f"Bearer {reader}, Bearer {reader}", f"Bearer {reader} {reader}", "Bearer"):
        status, h, body = call("GET", "/docs/d1", [("Authorization", value)])
        assert status == 400, (value[:20], body)
        assert 'error="invalid_request"' in h["www-authenticate"]
    status, h, body = call("GET", "/docs/d1", [*bearer(reader), ("X-Id-Token", "a b")])
    assert status == 400 and 'error="invalid_request"' in h["www-authenticate"]


def check_plans(call: Call, p: Providers, path: str = "/docs") -> None:
    """A list endpoint's plan, through a framework's client: for three callers with
    different rights, the rows it allows are the rows ``GET /docs/<id>`` allows; without
    a valid token it is refused as the single-document endpoint is."""
    acme = p.acme
    reader = bearer(acme.token(scope=["docs:read"]))
    mfa = [*reader, ("X-Id-Token", acme.token(acr="mfa"))]  # reads locked documents too
    lister = bearer(acme.token(scope=["docs:list"]))  # reads none: an empty list, not a 403
    kinds = {}
    for headers, kind in (
        (reader, "conditional"),
        (mfa, "always_allowed"),
        (lister, "always_denied"),
    ):
        status, _, body = call("GET", path, headers)
        assert status == 200, body
        each = [i for i in DOCUMENTS if call("GET", f"/docs/{i}", headers)[0] == 200]
        assert body == {"kind": kind, "ids": each}
        kinds[kind] = each
    assert kinds == {"conditional": ["d1"], "always_allowed": ["d1", "vault"], "always_denied": []}

    status, h, body = call("GET", path, [])
    assert status == 401 and h["www-authenticate"] == f'Bearer realm="{REALM}"', body
    expired = acme.token(scope=["docs:read"], exp=int(time.time()) - 600)
    status, h, body = call("GET", path, bearer(expired))
    assert status == 401 and 'error="invalid_token"' in h["www-authenticate"], body
    assert "expired" in h["www-authenticate"]
    status, h, body = call("GET", path, [("Authorization", f"Bearer {'a' * 40}, Bearer b")])
    assert status == 400 and 'error="invalid_request"' in h["www-authenticate"], body


def result_body(result: Any) -> dict[str, Any]:
    """What the test views answer: the result they were handed."""
    return {
        "decision": result.decision,
        "request_id": result.request_id,
        "reasons": list(result.response.diagnostics.reason),
    }
