"""What the three web examples share: the loopback identity providers and store of
``multi_issuer/run.py``, the application's rows (and how its list endpoint's filter reads
their table), and the requests each example sends to its running server.

Not an example by itself: ``fastapi_app/app.py``, ``flask_app/app.py`` and
``django_app/app.py`` import it.
"""

from __future__ import annotations

import json
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from multi_issuer.run import Provider, make_tls, providers, write_store

from polang import Engine
from polang.filtering import Mapping
from polang.integrations import Refusal, RequestInfo

READ = 'Acme::Action::"read"'
DOCUMENT = "Acme::Document"
COMMENT = 'Acme::Action::"comment"'
# the Authorization bearer token is an Acme access token; two more headers carry the
# Acme id token (MFA) and the partner company's access token
GUARD: dict[str, Any] = {
    "token_type": "Acme::Access_token",
    "extra_headers": {"X-Id-Token": "Acme::Id_token", "X-Partner-Token": "Partner::Access_token"},
    "realm": "docs",
}

# the application's own table of documents: each example creates it in SQLite (its
# framework's way) and lists it newest first
ROWS = {
    "plan": {"title": "Plan 2026", "classification": "internal", "created": "2026-01-12"},
    "vault": {"title": "Vault keys", "classification": "secret", "created": "2026-03-02"},
    "handbook": {"title": "Handbook", "classification": "public", "created": "2025-06-01"},
    "audit": {"title": "Audit findings", "classification": "secret", "created": "2025-11-20"},
    "minutes": {"title": "Board minutes", "classification": "internal", "created": "2026-02-14"},
}
# how a document entity's attributes are read from that table (docs/filtering.md)
MAPPING = Mapping.from_dict(
    {
        "types": {
            DOCUMENT: {"table": "documents", "attributes": {"classification": "classification"}}
        }
    }
)
PAGE, MAX_PAGE = 20, 100  # the list endpoint's page size: default and largest


def document(info: RequestInfo) -> dict[str, Any]:
    """Row -> entity: the document the path names, or 404 when there is no such row."""
    doc_id = str(info.params["doc_id"])
    row = ROWS.get(doc_id)
    if row is None:
        raise Refusal(404, {"error": "not_found"}, {})
    return {
        "uid": {"type": DOCUMENT, "id": doc_id},
        "attrs": {"classification": row["classification"]},
    }


def page_size(raw: str | None) -> int:
    """The list endpoint's ``?limit=``: PAGE when absent or not a number, at most MAX_PAGE."""
    if raw is None or not (raw.isascii() and raw.isdigit()):
        return PAGE
    return MAX_PAGE if len(raw) > 3 else max(1, min(int(raw), MAX_PAGE))  # never a huge int


@dataclass
class Setup:
    engine: Engine
    acme: Provider
    partner: Provider
    ssl_context: ssl.SSLContext  # trusts the providers' certificate authority
    database: Path  # where the example keeps its SQLite database


@contextmanager
def setup() -> Iterator[Setup]:
    """Two identity providers on loopback HTTPS, a store trusting both, an engine."""
    with tempfile.TemporaryDirectory(prefix="polang-web-") as tmp:
        work = Path(tmp)
        server_tls, client_tls = make_tls(work)
        with providers(server_tls) as (acme, partner):
            store = write_store(work / "store", acme, partner)
            config = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_HTTP_MAX_RETRIES": 0}
            with Engine(config, ssl_context=client_tls) as engine:
                yield Setup(engine, acme, partner, client_tls, work / "documents.sqlite3")


def demo(base: str, s: Setup, say: Callable[[str], object] = print) -> None:
    """Send the example's requests to the server at ``base`` and print each answer; then,
    for three callers, each row's answer from the single-document endpoint (the list
    endpoint lists exactly the rows it allows, newest first)."""
    acme, partner = s.acme, s.partner
    reader = acme.token(scope=["docs:read", "profile"])
    scoped = {"Authorization": f"Bearer {reader}"}
    profile = {"Authorization": f"Bearer {acme.token(scope='profile')}"}
    mfa = {**scoped, "X-Id-Token": acme.token(amr=["pwd", "mfa"])}
    cases: list[tuple[str, str, str, dict[str, str]]] = [
        ("GET", "/health", "no token needed", {}),
        ("GET", "/documents/plan", "no token", {}),
        ("GET", "/documents/plan", "docs:read scope", {"Authorization": f"Bearer {reader}"}),
        (
            "GET",
            "/documents/plan",
            "profile scope only",
            {"Authorization": f"Bearer {acme.token(scope='profile')}"},
        ),
        ("GET", "/documents/vault", "secret, no MFA", {"Authorization": f"Bearer {reader}"}),
        (
            "GET",
            "/documents/vault",
            "secret, with MFA",
            {"Authorization": f"Bearer {reader}", "X-Id-Token": acme.token(amr=["pwd", "mfa"])},
        ),
        (
            "POST",
            "/documents/plan/comments",
            "partner reviewer",
            {"X-Partner-Token": partner.token(role=["reviewer"])},
        ),
        (
            "GET",
            "/documents/plan",
            "expired token",
            {"Authorization": f"Bearer {acme.token(exp=int(time.time()) - 600)}"},
        ),
        ("GET", "/documents/nope", "no such row", {"Authorization": f"Bearer {reader}"}),
        ("GET", "/documents/plan", "not Bearer", {"Authorization": "Basic dXNlcjpwdw=="}),
        ("GET", "/documents", "docs:read scope", scoped),
        ("GET", "/documents?limit=2", "docs:read scope", scoped),
        ("GET", "/documents", "secret, with MFA", mfa),
        ("GET", "/documents", "profile scope only", profile),
        ("GET", "/documents", "no token", {}),
    ]
    with httpx.Client(base_url=base, timeout=10) as client:
        for method, path, what, headers in cases:
            r = client.request(method, path, headers=headers)
            try:
                body = r.json()
            except json.JSONDecodeError:
                body = r.text
            if isinstance(body, dict) and isinstance(body.get("detail"), dict):
                body = body["detail"]  # FastAPI's HTTPException
            line = f"{r.status_code}  {method:4} {path:26} {what:20}"
            if r.status_code == 200 and isinstance(body, dict) and "reasons" in body:
                line += f" [{', '.join(body['reasons'])}]"
            elif r.status_code == 200 and isinstance(body, dict) and "documents" in body:
                line += " " + (", ".join(d["id"] for d in body["documents"]) or "(none)")
            elif r.status_code in (401, 403, 404):
                shown = r.headers.get("www-authenticate") or body.get("error", "")
                line += f" {shown}"
            say(line.rstrip())
        # each row through the single-document endpoint, for the list's three callers
        callers = {
            "docs:read scope": scoped,
            "secret, with MFA": mfa,
            "profile scope only": profile,
        }
        for what, headers in callers.items():
            each = [
                f"{i} {client.get(f'/documents/{i}', headers=headers).status_code}" for i in ROWS
            ]
            say(f"all  GET  {'/documents/<id>':26} {what:20} {', '.join(each)}")


def serve(server: Any, name: str, s: Setup) -> None:
    """Run a WSGI server (``serve_forever``/``shutdown``) on a thread, send it the demo
    requests, stop it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    print(f"serving on {base} ({name})")
    try:
        demo(base, s)
    finally:
        server.shutdown()
        thread.join(10)


def listing(rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """What the list endpoints answer: the page's (id, title, created) rows."""
    return {"documents": [{"id": i, "title": t, "created": c} for i, t, c in rows]}


def answer(result: Any) -> dict[str, Any]:
    """What the example views answer: the AuthorizeResult the integration handed them."""
    return {
        "decision": result.decision,
        "request_id": result.request_id,
        "reasons": list(result.response.diagnostics.reason),
    }
