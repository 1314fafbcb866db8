"""The pytest plugin: each case of a policy test file is a test item (run in a subprocess,
as a project using polang would run it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"


def run_pytest(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "polang.authoring.pytest_plugin",
            "-q",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            "--rootdir",
            str(where),
            str(where),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=where,
    )


def test_each_case_is_an_item_failures_explain_and_bad_files_are_errors(tmp_path: Path) -> None:
    entities = [
        {
            "uid": {"type": "Acme::User", "id": "alice"},
            "attrs": {
                "email": "a@acme.example",
                "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
                "clearance": 2,
            },
            "parents": [{"type": "Acme::Team", "id": "finance"}],
        },
        {
            "uid": {"type": "Acme::Document", "id": "d"},
            "attrs": {
                "owner": {"__entity": {"type": "Acme::User", "id": "alice"}},
                "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
                "classification": "internal",
                "public": False,
            },
        },
    ]
    (tmp_path / "entities.json").write_text(json.dumps(entities), "utf-8")
    case = {
        "principal": 'Acme::User::"alice"',
        "resource": 'Acme::Document::"d"',
        "action": 'Acme::Action::"edit"',
    }
    (tmp_path / "docs.polangtest.json").write_text(
        json.dumps(
            {
                "store": str(STORE),
                "entities": "entities.json",
                "cases": [
                    {**case, "name": "owner edits", "decision": "allow"},
                    {**case, "name": "wrongly expected deny", "decision": "deny"},
                ],
            }
        ),
        "utf-8",
    )
    # a malformed file beside it is a collection error naming the problem
    (tmp_path / "bad.polangtest.yaml").write_text("store: x\ncases: 3\n", "utf-8")
    proc = run_pytest(tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 1 passed, 1 error" in out
    assert "`cases` must be a non-empty list" in out
    assert "FAIL wrongly expected deny" in out
    assert "expected deny, got allow" in out
    assert 'allowed by permit "owner-full-access"' in out
