"""Small stores built on the fly: a valid base that each test breaks in one place."""

from __future__ import annotations

import base64
import copy
import io
import json
import threading
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from polang.store.errors import PolicyStoreLoadError

if TYPE_CHECKING:
    from polang.errors import PolangError
    from polang.store.model import PolicyStore

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "stores"

SCHEMA = """namespace App {
    entity Group;
    entity User in [Group] = { "name": String };
    entity Doc = { "owner": User, "public": Bool };
    action "view", "edit" appliesTo { principal: [User], resource: [Doc] };
}
"""

POLICY = """@id("owner-view")
permit (principal, action == App::Action::"view", resource)
when { resource.owner == principal };
"""

TEMPLATE = """@id("share")
permit (principal == ?principal, action == App::Action::"view", resource == ?resource);
"""

METADATA: dict[str, Any] = {
    "polang_version": "4.0.0",
    "policy_store": {
        "id": "app-store",
        "name": "App store",
        "description": "test store",
        "version": "1.0.0",
        "created_date": "2025-01-01T00:00:00Z",
        "updated_date": "2025-01-02T00:00:00.123Z",
    },
}

ISSUER: dict[str, Any] = {
    "name": "Idp",
    "openid_configuration_endpoint": "https://idp.example.com/.well-known/openid-configuration",
    "token_metadata": {"access_token": {"entity_type_name": "Idp::Access_token"}},
}

ENTITIES: list[dict[str, Any]] = [
    {"uid": {"type": "App::Group", "id": "staff"}, "attrs": {}, "parents": []},
    {
        "uid": {"type": "App::User", "id": "alice"},
        "attrs": {"name": "Alice"},
        "parents": [{"type": "App::Group", "id": "staff"}],
    },
]


def base_files() -> dict[str, str | bytes]:
    return {
        "metadata.json": json.dumps(METADATA, indent=2),
        "schema.polangschema": SCHEMA,
        "policies/main.polang": POLICY,
        "templates/share.polang": TEMPLATE,
        "entities/users.json": json.dumps(ENTITIES),
        "trusted-issuers/idp.json": json.dumps({"idp": ISSUER}),
    }


Files = Mapping[str, "str | bytes | None"]


def write_tree(root: Path, files: Files) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policies").mkdir(exist_ok=True)
    for rel, content in files.items():
        if content is None:
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return root


def store_files(changes: Files | None = None) -> dict[str, str | bytes]:
    """The base store with ``changes`` applied (``None`` removes a file)."""
    files: dict[str, str | bytes] = dict(base_files())
    for rel, content in (changes or {}).items():
        if content is None:
            files.pop(rel, None)
        else:
            files[rel] = content
    return files


def zip_bytes(files: Mapping[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, content in files.items():
            zf.writestr(rel, content)
    return buf.getvalue()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def legacy_record(**changes: Any) -> dict[str, Any]:
    """One legacy store record (the base store's content)."""
    rec: dict[str, Any] = {
        "name": "App store",
        "description": "test store",
        "schema": {"encoding": "none", "content_type": "polang", "body": SCHEMA},
        "policies": {
            "owner-view": {
                "name": "owner view",
                "creation_date": "2025-01-01T10:00:00.000000",
                "policy_content": b64(POLICY),
            },
            "share": {
                "policy_content": {"encoding": "none", "content_type": "polang", "body": TEMPLATE}
            },
        },
        "trusted_issuers": {"idp": copy.deepcopy(ISSUER)},
        "default_entities": {e["uid"]["id"]: b64(json.dumps(e)) for e in ENTITIES},
    }
    for k, v in changes.items():
        if v is None:
            rec.pop(k, None)
        else:
            rec[k] = v
    return rec


def legacy_doc(store_id: str = "app-store", **changes: Any) -> dict[str, Any]:
    return {"polang_version": "v4.0.0", "policy_stores": {store_id: legacy_record(**changes)}}


def problem_of(exc: pytest.ExceptionInfo[PolicyStoreLoadError], kind: str) -> Any:
    """The first problem of ``kind`` (fails the test listing all when there is none)."""
    for p in exc.value.problems:
        if p.kind == kind:
            return p
    raise AssertionError(f"no {kind!r} problem in:\n{exc.value}")


# ---------------------------------------------------------------- a loopback HTTP server


class Route:
    """What the server answers on one path (mutable: tests change it between fetches)."""

    def __init__(
        self,
        body: bytes = b"",
        status: int = 200,
        *,
        content_type: str = "application/octet-stream",
        delay: float = 0.0,
        send_length: bool = True,
        fail_first: int = 0,
    ) -> None:
        self.fail_first = fail_first  # answer 503 this many times before the real answer
        self.body = body
        self.status = status
        self.content_type = content_type
        self.delay = delay
        self.send_length = send_length
        self.hits = 0


class StoreServer:
    """``http.server`` on 127.0.0.1 (port 0) in a thread, serving ``routes``."""

    def __init__(self, tls: Any = None) -> None:
        """``tls``: a server-side ``ssl.SSLContext`` to serve HTTPS instead of HTTP."""
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.routes: dict[str, Route] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                import time

                route = routes.get(self.path)
                if route is None:
                    self.send_error(404, "Not Found")
                    return
                route.hits += 1
                if route.delay:
                    time.sleep(route.delay)
                status = route.status
                if route.fail_first > 0:
                    route.fail_first -= 1
                    status = 503
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", route.content_type)
                    if route.send_length:
                        self.send_header("Content-Length", str(len(route.body)))
                    self.end_headers()
                    self.wfile.write(route.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class Sink:
    """Collects refresher callbacks; ``wait`` blocks until one arrives."""

    def __init__(self) -> None:
        self.stores: list[PolicyStore] = []
        self.errors: list[PolangError] = []
        self.event = threading.Event()

    def update(self, store: PolicyStore) -> None:
        self.stores.append(store)
        self.event.set()

    def error(self, e: PolangError) -> None:
        self.errors.append(e)
        self.event.set()

    def wait(self) -> None:
        assert self.event.wait(20), "the refresher reported nothing"
        self.event.clear()
