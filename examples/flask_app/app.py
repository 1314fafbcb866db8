"""Flask: views protected by multi-issuer tokens, served by werkzeug on loopback.

Run: ``python examples/flask_app/app.py`` (needs ``polang[flask,filtering]``). Two
identity providers (Acme and Partner, ``multi_issuer/run.py``) run on loopback HTTPS;
:func:`create_app` is the application: the ``Polang`` extension's ``require`` decorator
decides each request before the view runs, answers 401/403 itself and leaves the
``AuthorizeResult`` at ``g.polang``. The list endpoint ``GET /documents`` is given the
caller's plan by ``list_plan`` (``g.polang_plan``), translates it to SQL text for SQLite
and runs it with the standard library's ``sqlite3``: one query returns a page of exactly
the rows the caller may read. ``main`` serves the app with werkzeug's threaded server
and sends it real requests.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: web_demo

from flask import Flask, g, jsonify, request
from web_demo import (
    COMMENT,
    DOCUMENT,
    GUARD,
    MAPPING,
    READ,
    ROWS,
    answer,
    document,
    listing,
    page_size,
    serve,
    setup,
)
from werkzeug.serving import make_server

from polang import Engine
from polang.filtering import translate
from polang.integrations.flask import Polang

polang = Polang(**GUARD)  # the engine comes with init_app (the app factory pattern)


def create_app(engine: Engine, database: Path) -> Flask:
    app = Flask(__name__)
    polang.init_app(app, engine)
    with closing(sqlite3.connect(database)) as db, db:  # MAPPING's table
        db.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, title, classification, created)")
        db.executemany(
            "INSERT INTO documents VALUES (?, ?, ?, ?)",
            [(i, r["title"], r["classification"], r["created"]) for i, r in ROWS.items()],
        )

    @app.get("/health")
    def health() -> Any:
        return {"status": "ok"}

    @app.get("/documents")
    @polang.list_plan(READ, DOCUMENT)
    def list_documents() -> Any:
        """The newest documents the caller may read: the plan is the query's WHERE."""
        readable = translate(g.polang_plan, MAPPING, "sqlite").sql()
        query = f"SELECT id, title, created FROM documents WHERE {readable} "
        query += "ORDER BY created DESC, id LIMIT ?"
        with closing(sqlite3.connect(database)) as db:
            rows = db.execute(query, (page_size(request.args.get("limit")),)).fetchall()
        return jsonify(listing(rows))

    @app.get("/documents/<doc_id>")
    @polang.require(READ, resource=document)
    def read(doc_id: str) -> Any:
        return jsonify(answer(g.polang))

    @app.post("/documents/<doc_id>/comments")
    @polang.require(COMMENT, resource=document)
    def comment(doc_id: str) -> Any:
        return jsonify(answer(g.polang))

    return app


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    with setup() as s:
        serve(
            make_server("127.0.0.1", 0, create_app(s.engine, s.database), threaded=True),
            "werkzeug",
            s,
        )


if __name__ == "__main__":
    main()
