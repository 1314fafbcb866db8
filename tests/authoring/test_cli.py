"""The authoring commands: ``polang test``, ``polang diff`` and ``polang explain --repairs``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from polang.cli import main

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"
REQUESTS = REPO / "examples" / "requests"
EXAMPLE_TESTS = REPO / "examples" / "tests"

Capsys = pytest.CaptureFixture[str]


def run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_polang_test_table_json_and_min_coverage(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "test", str(EXAMPLE_TESTS))
    assert code == 0
    assert "11 passed, 0 failed (11 cases in 1 file)" in out
    code, out, _ = run(capsys, "test", str(EXAMPLE_TESTS), "--coverage")
    assert code == 0 and "coverage: 100.0%" in out and "cleared-editors" in out
    code, out, _ = run(
        capsys, "test", str(EXAMPLE_TESTS), "--format", "json", "--min-coverage", "90"
    )
    data = json.loads(out)
    assert code == 0 and data["failed"] == 0 and data["coverage_ok"] is True
    assert data["coverage"]["percent"] == 100.0


def test_polang_test_failures_exit_1_and_explain(capsys: Capsys, tmp_path: Path) -> None:
    src = (EXAMPLE_TESTS / "directory.polangtest.yaml").read_text("utf-8")
    text = src.replace("store: ../stores/directory", f"store: {STORE}")
    tail = "\n    reasons: [org-members-read]"
    text = text.replace("decision: allow" + tail, "decision: deny" + tail, 1)
    assert text != src.replace("store: ../stores/directory", f"store: {STORE}")
    (tmp_path / "x.polangtest.yaml").write_text(text, "utf-8")
    code, out, _ = run(capsys, "test", str(tmp_path))
    assert code == 1
    assert "FAIL members of the organisation read its documents" in out
    assert "expected deny, got allow" in out
    assert "10 passed, 1 failed" in out
    # coverage short of the threshold also fails
    code, out, _ = run(capsys, "test", str(EXAMPLE_TESTS), "--min-coverage", "100.1")
    assert code == 1 and "below --min-coverage" in out


def test_polang_test_bad_input_is_status_2(capsys: Capsys, tmp_path: Path) -> None:
    (tmp_path / "b.polangtest.yaml").write_text("store: x\ncases: []\n", "utf-8")
    code, _, err = run(capsys, "test", str(tmp_path))
    assert code == 2 and "`cases` must be a non-empty list" in err
    code, _, err = run(capsys, "test", str(tmp_path / "nothing"))
    assert code == 2 and "no such file or directory" in err


def stores(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(STORE, a)
    shutil.copytree(STORE, b)
    pol = b / "policies" / "documents.polang"
    pol.write_text(pol.read_text("utf-8").replace("clearance >= 3", "clearance >= 2"), "utf-8")
    users = [
        json.loads((REQUESTS / "alice.json").read_text("utf-8")),
        json.loads((REQUESTS / "roadmap.json").read_text("utf-8")),
    ]
    for s in (a, b):
        (s / "entities" / "people.json").write_text(json.dumps(users), "utf-8")
    return a, b


def test_polang_diff_two_stores(capsys: Capsys, tmp_path: Path) -> None:
    a, b = stores(tmp_path)
    code, out, _ = run(
        capsys, "diff", "--store", str(a), "--store", str(b), "--context", "{}", "--format", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["gained"] == [
        {
            "principal": 'Acme::User::"alice"',
            "action": 'Acme::Action::"edit"',
            "resource": 'Acme::Document::"roadmap"',
            "policies": ["cleared-editors"],
            "previous_policies": [],
            "before": "deny",
            "after": "allow",
        }
    ]
    assert data["lost"] == [] and data["summary"]["gained"] == 1
    code, out, _ = run(capsys, "diff", "--store", str(a), "--store", str(b), "--exit-code",
                       "--context", "{}", "--format", "csv")  # fmt: skip
    assert code == 1 and out.splitlines()[1].startswith('gained,"Acme::User::""alice"""')
    code, out, _ = run(capsys, "diff", "--store", str(a), "--store", str(a), "--exit-code")
    assert code == 0 and "0 gained, 0 lost" in out
    # unknown context: entries that depend on it are conditional, never dropped
    code, out, _ = run(capsys, "diff", "--store", str(a), "--store", str(b))
    assert code == 0 and "1 gained, 0 lost" in out


def test_polang_diff_new_entity_data(capsys: Capsys, tmp_path: Path) -> None:
    a, _ = stores(tmp_path)
    alice = json.loads((REQUESTS / "alice.json").read_text("utf-8"))
    alice["attrs"]["clearance"] = 5
    f = tmp_path / "alice.json"
    f.write_text(json.dumps(alice), "utf-8")
    code, out, _ = run(
        capsys, "diff", "--store", str(a), "--entities", str(f), "--context", "{}",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert [e["action"] for e in data["gained"]] == ['Acme::Action::"edit"']
    code, _, err = run(capsys, "diff", "--store", str(a))
    assert code == 2 and "--entities" in err


def test_explain_repairs(capsys: Capsys) -> None:
    argv = [
        "explain",
        "--store",
        str(STORE),
        "--principal",
        str(REQUESTS / "alice.json"),
        "--action",
        'Acme::Action::"edit"',
        "--resource",
        str(REQUESTS / "roadmap.json"),
        "--repairs",
    ]
    code, out, _ = run(capsys, *argv)
    assert code == 1
    assert "repairs: changes to the data that would allow it" in out
    assert 'set Acme::User::"alice".clearance = 3  (>= 3)' in out
    code, out, _ = run(capsys, *argv, "--json")
    data = json.loads(out)
    assert isinstance(data["repairs"], list) and data["repairs"]
    assert {"policy", "changes"} <= set(data["repairs"][0])
    code, out, _ = run(capsys, *argv[:-1], "--json")
    assert "repairs" not in json.loads(out)
    code, out, _ = run(capsys, *argv, "--format", "json")  # the spelling
    assert json.loads(out)["repairs"] == data["repairs"]
