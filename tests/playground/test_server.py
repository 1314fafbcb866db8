"""polang.playground's server and export, and ``polang playground`` (the page itself runs
in tests/playground/test_browser.py)."""

from __future__ import annotations

import io
import threading
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from polang import playground
from polang.cli import main


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """A folder laid out like the pyodide npm package (the server only serves its files)."""
    root = tmp_path / "node_modules" / "pyodide"
    root.mkdir(parents=True)
    for name in playground.PYODIDE_FILES:
        (root / name).write_bytes(f"<{name}>".encode())
    (root / "package.json").write_text("{}")
    return root


@pytest.fixture
def base(runtime: Path) -> Iterator[str]:
    server = playground.serve("127.0.0.1", 0, runtime)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def test_the_page_the_runtime_and_polang_are_served(base: str) -> None:
    status, ctype, body = get(base + "/")
    assert status == 200 and ctype.startswith("text/html") and b"polang playground" in body
    assert get(base + "/app.js")[1].startswith("text/javascript")
    status, ctype, body = get(base + "/pyodide/pyodide.asm.wasm")
    assert (status, ctype, body) == (200, "application/wasm", b"<pyodide.asm.wasm>")
    status, ctype, body = get(base + "/site-packages.zip")
    names = set(zipfile.ZipFile(io.BytesIO(body)).namelist())
    for needed in (
        "polang/playground/session.py",
        "polang/rules/decision.dl",
        "lark/__init__.py",
        "jwt/__init__.py",
        "networkx/__init__.py",
        "rich/tree.py",
    ):
        assert needed in names
    assert not any("__pycache__" in n for n in names)


@pytest.mark.parametrize(
    "path",
    [
        "/pyodide/package.json",  # in the folder, but not one of the runtime's files
        "/pyodide/../pyodide/pyodide.mjs",
        "/../../etc/passwd",
        "/static/index.html",
        "/site-packages.zip/x",
        "/%2e%2e/pyproject.toml",
    ],
)
def test_nothing_else_is_served(base: str, path: str) -> None:
    assert get(base + path)[0] == 404


def test_only_get(base: str) -> None:
    request = urllib.request.Request(base + "/", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=10)
    assert e.value.code == 501


def test_the_runtime_must_be_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(playground.PYODIDE_ENV, raising=False)
    with pytest.raises(playground.PlaygroundError, match=r"npm install pyodide@314.0.7"):
        playground.find_pyodide(None)
    with pytest.raises(playground.PlaygroundError, match=r"no pyodide\.mjs"):
        playground.find_pyodide(tmp_path)


def test_export_and_the_command(
    runtime: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    assert main(["playground", "--pyodide", str(runtime), "--export", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted(
        ["index.html", "app.js", "site-packages.zip"]
        + [f"pyodide/{f}" for f in playground.PYODIDE_FILES]
    )
    assert "wrote the playground" in capsys.readouterr().out
    assert main(["playground", "--pyodide", str(tmp_path), "--export", str(out)]) == 2
    assert "not the pyodide npm package's folder" in capsys.readouterr().err
