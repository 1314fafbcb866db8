"""FastAPI: endpoints protected by multi-issuer tokens, served by uvicorn on loopback.

Run: ``python examples/fastapi_app/app.py`` (needs ``polang[fastapi,sqlalchemy]`` and
``uvicorn``). Two identity providers (Acme and Partner, ``multi_issuer/run.py``) run on
loopback HTTPS; :func:`create_app` is the application: the ``Authorize`` dependency decides
each request with the async API (so a slow identity provider never stalls the other
requests), answers 401/403 itself and hands the view the ``AuthorizeResult``. The list
endpoint ``GET /documents`` gets the caller's plan from the ``ListPlan`` dependency and
filters the documents table (SQLAlchemy ORM, SQLite) with it: one query returns a page of
exactly the rows the caller may read. ``main`` serves the app with uvicorn and sends it
real requests.

No ``from __future__ import annotations`` here: FastAPI reads the ``Annotated``
dependencies below from the view's annotations, which would then be strings naming locals.
"""

import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: web_demo

import uvicorn
from fastapi import Depends, FastAPI
from sqlalchemy import create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from web_demo import (
    COMMENT,
    DOCUMENT,
    GUARD,
    MAPPING,
    READ,
    ROWS,
    answer,
    demo,
    document,
    listing,
    page_size,
    setup,
)

from polang import AsyncEngine, AuthorizeResult, Engine
from polang.analysis.plan import Plan
from polang.filtering.sqlalchemy import plan_filter
from polang.integrations.asgi import Authorize, ListPlan


class Base(DeclarativeBase):
    pass


class Document(Base):
    __tablename__ = "documents"  # MAPPING's table

    id: Mapped[str] = mapped_column(primary_key=True)
    title: Mapped[str]
    classification: Mapped[str]
    created: Mapped[str]  # ISO date: the list's order


def create_app(engine: Engine | AsyncEngine, database: Path) -> FastAPI:
    app = FastAPI(title="documents")
    db = create_engine(f"sqlite:///{database}")
    Base.metadata.create_all(db)
    with Session(db) as session, session.begin():
        session.add_all(Document(id=i, **row) for i, row in ROWS.items())

    readers = Authorize(engine, action=READ, resource=document, **GUARD)
    commenters = Authorize(engine, action=COMMENT, resource=document, **GUARD)
    CanRead = Annotated[AuthorizeResult, Depends(readers)]
    CanComment = Annotated[AuthorizeResult, Depends(commenters)]
    Readable = Annotated[
        Plan, Depends(ListPlan(engine, action=READ, resource_type=DOCUMENT, **GUARD))
    ]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/documents")
    def list_documents(plan: Readable, limit: str | None = None) -> dict[str, Any]:
        """The newest documents the caller may read: the plan is the query's filter."""
        with Session(db) as session:
            readable = plan_filter(plan, MAPPING, session)
            query = (
                select(Document.id, Document.title, Document.created)
                .where(readable)
                .order_by(Document.created.desc(), Document.id)
                .limit(page_size(limit))
            )
            return listing(session.execute(query))

    @app.get("/documents/{doc_id}")
    async def read(doc_id: str, result: CanRead) -> dict[str, Any]:
        return answer(result)

    @app.post("/documents/{doc_id}/comments")
    async def comment(doc_id: str, result: CanComment) -> dict[str, Any]:
        return answer(result)

    return app


def main() -> None:
    with setup() as s:
        aengine = AsyncEngine(s.engine)
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(aengine, s.database), host="127.0.0.1", port=0, log_level="warning"
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"serving on http://127.0.0.1:{port} (uvicorn)")
        try:
            demo(f"http://127.0.0.1:{port}", s)
        finally:
            server.should_exit = True
            thread.join(10)


if __name__ == "__main__":
    main()
