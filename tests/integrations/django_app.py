"""A small Django project for the tests: settings, views and URLs in one module."""

from __future__ import annotations

from typing import Any, ClassVar

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tests-only",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["polang.integrations.django.PolangMiddleware"],
        INSTALLED_APPS=[],
        DATABASES={},
        USE_TZ=True,
        REST_FRAMEWORK={
            "DEFAULT_AUTHENTICATION_CLASSES": [],
            "DEFAULT_PERMISSION_CLASSES": [],
            "UNAUTHENTICATED_USER": None,
            "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        },
    )
    django.setup()

from django.http import HttpRequest, JsonResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from polang.integrations.django import PolangPermission, polang_list_plan, polang_required

from .conftest import READ, WRITE, document, listed, method_action, result_body


@polang_required(method_action, resource=document)
def doc_view(request: HttpRequest, doc_id: str) -> JsonResponse:
    return JsonResponse(result_body(request.polang))  # type: ignore[attr-defined]


@polang_required(READ, resource=document)
async def async_doc_view(request: HttpRequest, doc_id: str) -> JsonResponse:
    return JsonResponse(result_body(request.polang))  # type: ignore[attr-defined]


@polang_list_plan(READ, "Acme::Document")
def list_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(listed(request.polang_plan))  # type: ignore[attr-defined]


@polang_list_plan(READ, "Acme::Document")
async def async_list_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(listed(request.polang_plan))  # type: ignore[attr-defined]


def open_view(request: HttpRequest, doc_id: str) -> JsonResponse:
    """Guarded by the middleware alone (when settings.POLANG says ACTION and RESOURCE)."""
    result = request.polang  # type: ignore[attr-defined]
    return JsonResponse(result_body(result) if result is not None else {"decision": None})


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


class DocAPI(APIView):
    permission_classes: ClassVar[list[type]] = [PolangPermission]

    def polang_action(self, info: Any) -> str:
        return READ if info.method == "GET" else WRITE

    def polang_resource(self, info: Any) -> Any:
        return document(info)

    def get(self, request: Any, doc_id: str) -> Response:
        return Response(result_body(request.polang))

    def post(self, request: Any, doc_id: str) -> Response:
        return Response(result_body(request.polang))


urlpatterns = [
    path("docs", list_view),
    path("async/docs", async_list_view),
    path("docs/<str:doc_id>", doc_view),
    path("async/docs/<str:doc_id>", async_doc_view),
    path("api/docs/<str:doc_id>", DocAPI.as_view()),
    path("open/docs/<str:doc_id>", open_view),
    path("health", health),
]
