"""The playground: one page that runs the real engine in the browser (Pyodide).

A policy author edits the schema, the policies, the entities and a request, and sees, as
they type, the decision, the explanation tree, the repairs, who can and what can, and
every problem with its line and column (:mod:`polang.playground.session`, run by the
page). Nothing comes from a CDN: the page, the Pyodide runtime (the ``pyodide`` npm
package, found with :func:`find_pyodide`) and polang with its pure-Python dependencies
(zipped from this Python's own installation, :func:`packages_zip`) are served from one
place: :func:`serve` (``polang playground``) on localhost, or :func:`export` writes the
same files for any static host. docs/playground.md.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import zipfile
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from polang.errors import PolangError

#: What the page imports in the browser: polang and the pure-Python packages it needs
#: there (lark for parse errors, PyJWT, networkx for the analyses, rich for the tree).
#: ``polang.rules`` is named too: in a source checkout it lives outside ``src/polang``.
PACKAGES: tuple[str, ...] = ("polang", "polang.rules", "lark", "jwt", "networkx", "rich")
#: rich's own dependencies, which differ by its release (markdown-it-py and mdurl since
#: 12.6, commonmark before): shipped when this Python has them
RICH_PACKAGES: tuple[str, ...] = ("markdown_it", "mdurl", "pygments", "commonmark")
#: The files of the ``pyodide`` npm package the page loads (the runtime, its standard
#: library and its lock file); nothing else of the folder is served.
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
#: The page's own files (package data of polang.playground).
STATIC_FILES = ("index.html", "app.js")
PYODIDE_ENV = "POLANG_PYODIDE_DIR"
_STATIC = Path(__file__).parent / "static"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".wasm": "application/wasm",
    ".zip": "application/zip",
    ".json": "application/json",
}


class PlaygroundError(PolangError):
    """The playground cannot be served (the Pyodide runtime is missing, a package...)."""


def find_pyodide(given: str | os.PathLike[str] | None = None) -> Path:
    """The ``pyodide`` npm package's folder: ``given``, else ``$POLANG_PYODIDE_DIR``."""
    where = given or os.environ.get(PYODIDE_ENV)
    if not where:
        raise PlaygroundError(
            "the playground needs the Pyodide runtime: `npm install pyodide@314.0.7`, then "
            f"pass --pyodide node_modules/pyodide (or set {PYODIDE_ENV})"
        )
    root = Path(where)
    missing = [f for f in PYODIDE_FILES if not (root / f).is_file()]
    if missing:
        raise PlaygroundError(
            f"{root}: not the pyodide npm package's folder (no {missing[0]}); `npm install "
            "pyodide@314.0.7` puts it in node_modules/pyodide"
        )
    return root


@cache
def packages_zip() -> bytes:
    """:data:`PACKAGES` (and the :data:`RICH_PACKAGES` installed) as this Python has them,
    in one zip for site-packages (they are pure Python, so the same files run in
    Pyodide)."""
    buf = io.BytesIO()
    written: set[str] = set()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PACKAGES + RICH_PACKAGES:
            spec = importlib.util.find_spec(name)
            if name in RICH_PACKAGES and spec is None:
                continue
            if spec is None or not spec.submodule_search_locations:
                raise PlaygroundError(f"the package {name!r} is not installed here")
            root = Path(next(iter(spec.submodule_search_locations)))
            prefix = name.replace(".", "/")
            for path in sorted(root.rglob("*")):
                arcname = f"{prefix}/{path.relative_to(root).as_posix()}"
                skip = "__pycache__" in path.parts or path.suffix == ".pyc" or arcname in written
                if path.is_file() and not skip:
                    z.write(path, arcname)
                    written.add(arcname)
    return buf.getvalue()


def _routes(pyodide: Path) -> dict[str, Path | bytes]:
    """Every path served, and what: a fixed list (no path from a request reaches a file)."""
    routes: dict[str, Path | bytes] = {"/": _STATIC / "index.html"}
    routes.update({f"/{f}": _STATIC / f for f in STATIC_FILES})
    routes.update({f"/pyodide/{f}": pyodide / f for f in PYODIDE_FILES})
    routes["/site-packages.zip"] = packages_zip()
    return routes


def export(out: str | os.PathLike[str], pyodide: str | os.PathLike[str] | None = None) -> Path:
    """Write the playground's files to ``out`` for a static host; returns the folder."""
    routes = _routes(find_pyodide(pyodide))
    root = Path(out)
    for route, what in routes.items():
        if route == "/":
            continue
        target = root / route.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(what, bytes):
            target.write_bytes(what)
        else:
            shutil.copyfile(what, target)
    return root


def serve(
    host: str = "127.0.0.1", port: int = 8000, pyodide: str | os.PathLike[str] | None = None
) -> ThreadingHTTPServer:
    """A server for the playground (not started: call ``serve_forever``, or run it on a
    thread). GET only, the fixed routes only; everything else is a 404."""
    routes = _routes(find_pyodide(pyodide))

    class Handler(BaseHTTPRequestHandler):
        server_version = "polang-playground"

        def log_message(self, format: str, *args: object) -> None:
            pass  # a page load is some twenty requests: the terminal stays readable

        def do_GET(self) -> None:
            what = routes.get(self.path.split("?", 1)[0])
            if what is None:
                self._send(404, b"not found\n", "text/plain; charset=utf-8")
                return
            data = what if isinstance(what, bytes) else what.read_bytes()
            route = self.path.split("?", 1)[0]
            suffix = ".html" if route == "/" else Path(route).suffix
            self._send(200, data, _TYPES.get(suffix, "application/octet-stream"))

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

    return ThreadingHTTPServer((host, port), Handler)
