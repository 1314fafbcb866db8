"""What the WebAssembly and browser tests need from outside Python, cached between runs.

Everything goes into ``.cache/wasm`` in the checkout (ignored by git), or
``POLANG_WASM_CACHE``: npm packages (``pyodide``, ``playwright-core``) and wheels. A test
that cannot get one skips, naming what is missing (``node``, ``npm``, the network on a
first run, Chromium).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The pyodide npm package: Python 3.14.2 compiled to WebAssembly, with its standard library.
PYODIDE_VERSION = "314.0.7"
#: playwright-core drives the system's Chromium (no browser download of its own).
PLAYWRIGHT_VERSION = "1.65.1"
CHROMIUM = "/usr/bin/chromium"


def cache_dir() -> Path:
    return Path(os.environ.get("POLANG_WASM_CACHE") or REPO / ".cache" / "wasm")


def run_or_skip(cmd: list[str], what: str, timeout: float = 600, **kw: Any) -> None:
    """Run ``cmd``; skip the test (naming ``what``) when it fails or times out."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what}: timed out after {timeout:g} s (no network?)")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        pytest.skip(f"{what} failed (no network?): {' | '.join(tail)}")


def npm_package(name: str, version: str, marker: str) -> Path:
    """``node_modules/<name>`` of ``name@version``, installed once into the cache;
    ``marker`` is a file the complete package has."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: this test runs under Node.js")
    where = cache_dir() / f"npm-{name}-{version}"
    package = where / "node_modules" / name
    if not (package / marker).is_file():
        where.mkdir(parents=True, exist_ok=True)
        spec = f"{name}@{version}"
        run_or_skip(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(where), spec],
            f"npm install {spec}",
        )
    return package


def pyodide_package() -> Path:
    return npm_package("pyodide", PYODIDE_VERSION, "pyodide.asm.wasm")


def chromium() -> str:
    """Debian's Chromium, installed with apt-get when it is missing and that can be done."""
    if not os.path.exists(CHROMIUM) and shutil.which("apt-get") and os.geteuid() == 0:
        run_or_skip(
            ["apt-get", "install", "-y", "chromium", "chromium-driver"],
            "apt-get install chromium (Chromium is missing)",
        )
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Chromium is not installed ({CHROMIUM}) and cannot be installed here")
    return CHROMIUM
