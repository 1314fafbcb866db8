"""Django: views protected by multi-issuer tokens, served by a WSGI server on loopback.

Run: ``python examples/django_app/app.py`` (needs ``polang[django,filtering]``). A one-file
Django project: settings, a model, views and URLs below. Two identity providers (Acme and
Partner, ``multi_issuer/run.py``) run on loopback HTTPS. ``settings.POLANG`` names the engine and
token headers; ``PolangMiddleware`` sets ``request.polang``; the function view is guarded
by ``@polang_required``, the comment endpoint is a Django REST framework view with
``PolangPermission``. The list view ``GET /documents`` is given the caller's plan by
``@polang_list_plan`` and filters the ``Document`` model (SQLite) with it as a ``Q``: one
query returns a page of exactly the rows the caller may read. ``main`` serves it with the
standard library's WSGI server (threaded) and sends it real requests.
"""

from __future__ import annotations

import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, ClassVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: web_demo

import django
from django.conf import settings
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


def configure(engine: Any, database: Path) -> None:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="example-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["polang.integrations.django.PolangMiddleware"],
        INSTALLED_APPS=[],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(database)}},
        REST_FRAMEWORK={
            "DEFAULT_AUTHENTICATION_CLASSES": [],  # the tokens are polang's to check
            "UNAUTHENTICATED_USER": None,
            "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        },
        POLANG={
            "ENGINE": engine,
            "TOKEN_TYPE": GUARD["token_type"],
            "EXTRA_HEADERS": GUARD["extra_headers"],
            "REALM": GUARD["realm"],
        },
    )
    django.setup()


def documents_table() -> Any:
    """The Document model (MAPPING's table), its table created and filled with ROWS."""
    from django.db import connection, models

    class Document(models.Model):
        id = models.CharField(primary_key=True, max_length=64)
        title = models.CharField(max_length=200)
        classification = models.CharField(max_length=32)
        created = models.CharField(max_length=10)  # ISO date: the list's order

        class Meta:
            app_label = "documents"
            db_table = "documents"

    with connection.schema_editor() as editor:
        editor.create_model(Document)
    Document.objects.bulk_create(Document(id=i, **row) for i, row in ROWS.items())
    return Document


def urls(Document: Any) -> list[Any]:
    """Views and routes (defined once Django is configured)."""
    from django.http import HttpRequest, JsonResponse
    from django.urls import path
    from rest_framework.request import Request
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from polang.filtering.django import plan_q
    from polang.integrations.django import PolangPermission, polang_list_plan, polang_required

    def health(request: HttpRequest) -> JsonResponse:
        return JsonResponse({"status": "ok"})

    @polang_list_plan(READ, DOCUMENT)
    def documents(request: HttpRequest) -> JsonResponse:
        """The newest documents the caller may read: the plan is the query's filter."""
        readable = plan_q(request.polang_plan, MAPPING)
        rows = Document.objects.filter(readable).order_by("-created", "id")
        page = rows.values_list("id", "title", "created")[: page_size(request.GET.get("limit"))]
        return JsonResponse(listing(page))

    @polang_required(READ, resource=document)
    def read(request: HttpRequest, doc_id: str) -> JsonResponse:
        return JsonResponse(answer(request.polang))

    class Comments(APIView):
        permission_classes: ClassVar[list[type]] = [PolangPermission]
        polang_action = COMMENT

        def polang_resource(self, info: Any) -> Any:
            return document(info)

        def post(self, request: Request, doc_id: str) -> Response:
            return Response(answer(request.polang))

    return [
        path("health", health),
        path("documents", documents),
        path("documents/<str:doc_id>", read),
        path("documents/<str:doc_id>/comments", Comments.as_view()),
    ]


urlpatterns: list[Any] = []


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    with setup() as s:
        configure(s.engine, s.database)
        urlpatterns.extend(urls(documents_table()))
        from django.core.wsgi import get_wsgi_application

        server = make_server(
            "127.0.0.1", 0, get_wsgi_application(), server_class=Server, handler_class=QuietHandler
        )
        serve(server, "wsgiref", s)


if __name__ == "__main__":
    main()
