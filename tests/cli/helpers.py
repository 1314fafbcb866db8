"""What the CLI tests share: the example store, and running ``polang.cli.main`` in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polang.cli import main

REPO = Path(__file__).resolve().parent.parent.parent
STORE = REPO / "examples" / "stores" / "directory"
REQUESTS = REPO / "examples" / "requests"
READ = 'Acme::Action::"read"'
EDIT = 'Acme::Action::"edit"'

Capsys = pytest.CaptureFixture[str]


def run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def authorize(capsys: Capsys, *extra: str, action: str = READ) -> tuple[int, str, str]:
    return run(
        capsys,
        "authorize",
        "--store",
        str(STORE),
        "--action",
        action,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        *extra,
    )


def write_json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def secret_doc(tmp_path: Path) -> str:
    doc = json.loads((REQUESTS / "roadmap.json").read_text())
    doc["attrs"]["classification"] = "secret"
    return write_json(tmp_path / "secret.json", doc)
