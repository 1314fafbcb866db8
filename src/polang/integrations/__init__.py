"""Web framework integrations: bearer tokens in, 401/403 out, the result to the view.

One module per framework, each behind its optional extra and imported only when used:

- :mod:`.asgi`: FastAPI / Starlette, a dependency (``Depends(...)``) and an ASGI
  middleware (``polang[fastapi]``);
- :mod:`.flask`: a Flask extension with a decorator (``polang[flask]``);
- :mod:`.django`: a middleware, a view decorator and a Django REST framework permission
  class (``polang[django]``).

A list endpoint gets the caller's plan over a resource type's rows from the same token
headers (``ListPlan``, ``Polang.list_plan``, ``polang_list_plan``; ``Guard.plan``), for
``polang.filtering`` to turn into its query's filter.

What they share (token headers, answers, limits) is :mod:`._common`; docs/integrations.md
describes them.
"""

from __future__ import annotations

from ._common import (
    MAX_REQUEST_TOKENS,
    MAX_TOKEN_HEADER_SIZE,
    Guard,
    Refusal,
    RequestInfo,
    from_path,
)

__all__ = [
    "MAX_REQUEST_TOKENS",
    "MAX_TOKEN_HEADER_SIZE",
    "Guard",
    "Refusal",
    "RequestInfo",
    "from_path",
]
