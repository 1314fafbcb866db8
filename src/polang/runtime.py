"""Where polang runs: CPython on an operating system, or Pyodide (CPython in WebAssembly).

Detected once, here, so that every place that differs asks the same question. Pyodide
(browsers, Node.js, JupyterLite, Python workers at the edge) has no threads, no sockets
and no file system of the host's: the parts of polang that need one say so through
:func:`unavailable` instead of failing deep inside the standard library
(docs/wasm.md lists what is and is not available there, and why).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: True under Pyodide (``sys.platform == "emscripten"``): no threads, no sockets; fetches
#: go through the runtime's ``fetch`` (:mod:`polang.wasm`).
WASM = sys.platform == "emscripten"

#: How messages name this environment.
ENVIRONMENT = "WebAssembly (Pyodide)" if WASM else f"CPython on {sys.platform}"


def unavailable(what: str, why: str, instead: str = "") -> str:
    """The message for a feature this environment cannot offer (``what``: the feature,
    ``why``: what the environment lacks, ``instead``: what to use)."""
    tail = f"; {instead}" if instead else ""
    return f"{what} is not available in {ENVIRONMENT} ({why}){tail} (docs/wasm.md)"


class Needed(Exception):  # a signal, not an error: never a PolangError
    """(WebAssembly.) Work that only the runtime's asynchronous APIs can do (a fetch, a
    WebCrypto verification) is needed before the code that raised this runs again.

    Raised only inside ``polang.wasm``'s driver, which does the work and runs the same
    code again; never reaches a caller. Deliberately not a PolangError, so no handler of
    request errors catches it on its way out."""


_REFUSING: ContextVar[str | None] = ContextVar("polang_needs_refused", default=None)


@contextmanager
def refusing_needs(reason: str) -> Iterator[None]:
    """Within this block, work that would raise :class:`Needed` fails with ``reason``
    instead (the driver's bound on asynchronous steps was met; the reason names it)."""
    token = _REFUSING.set(reason)
    try:
        yield
    finally:
        _REFUSING.reset(token)


def needs_refused() -> str | None:
    """The reason set by :func:`refusing_needs`, if any."""
    return _REFUSING.get()
