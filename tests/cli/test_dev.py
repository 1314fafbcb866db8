"""``polang validate``, ``polang rules`` and ``polang conformance``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from polang.language.values import quote_string

from .helpers import (
    STORE,
    Capsys,
    run,
    write_json,
)

# ---------------------------------------------------------------- validate


def test_validate_a_good_store(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "validate", str(STORE))
    assert code == 0 and out.strip() == "valid"


def _copy_store(tmp_path: Path, extra_policy: str) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(STORE, dest)
    (dest / "policies" / "extra.polang").write_text(extra_policy)
    return dest


BAD = """@id("bad-attr")
permit (principal is Acme::User, action == Acme::Action::"read", resource is Acme::Document)
when { principal.salary > 10 };
"""


def test_validate_a_bad_store(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "validate", str(_copy_store(tmp_path, BAD)))
    assert code == 1
    assert "salary" in out and "bad-attr" in out
    assert out.splitlines()[-1] == "1 finding(s)"


def test_validate_loose_files_with_a_schema(capsys: Capsys, tmp_path: Path) -> None:
    good = tmp_path / "good.polang"
    shutil.copy(STORE / "policies" / "documents.polang", good)
    bad = tmp_path / "bad.polang"
    bad.write_text(BAD)
    schema = str(STORE / "schema.polangschema")
    assert run(capsys, "validate", "--schema", schema, str(good))[:2] == (0, "valid\n")
    code, out, _ = run(capsys, "validate", "--schema", schema, str(good), str(bad))
    assert code == 1 and "salary" in out


def test_validate_errors_exit_2(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path / "missing"))
    assert code == 2 and "missing" in err
    broken = _copy_store(tmp_path, '@id("x") permit (principal, action, resource) when {')
    code, _, err = run(capsys, "validate", str(broken))
    assert code == 2 and "extra.polang" in err


# ---------------------------------------------------------------- rules


def test_rules_prints_the_lowered_program(capsys: Capsys) -> None:
    code, out, _ = run(
        capsys,
        "rules",
        str(STORE / "policies" / "guards.polang"),
        "--schema",
        str(STORE / "schema.polangschema"),
    )
    assert code == 0
    for line in (
        '% policy "secret-needs-corp-network"',
        'policy("secret-needs-corp-network").',
        'effect("secret-needs-corp-network", "forbid").',
        'policy("public-read-with-token").',
        'effect("public-read-with-token", "permit").',
    ):
        assert line in out.splitlines(), line
    assert 'get_attr(A1, "classification")' in out
    assert 'has_attr(A1, "network")' in out
    assert out.count("scope(") >= 2 and out.count("cond(") >= 2
    assert 'action(Acme::Action::"read")' in out


#: A policy id (from an ``@id`` or a file name) that tries every way out of a comment or a
#: line: line breaks of every kind, comment ends and starts, a quote and SQL after it.
HOSTILE_ID = (
    "x\n-- evil\rCREATE TABLE pwned(a int); */ /* \u2028y\u2029z\x85w\x9b[2J\u202e"
    "'); CREATE TABLE pwned2(a int); --"
)


def _polang_string(s: str) -> str:
    """``s`` as a policy literal with every character an escape (what a hostile file holds)."""
    return '"' + "".join(f"\\u{{{ord(c):x}}}" for c in s) + '"'


def test_rules_prints_one_rule_per_line_whatever_the_policy_ids(
    capsys: Capsys, tmp_path: Path
) -> None:
    pol = tmp_path / "p.polang"
    hostile = _polang_string(HOSTILE_ID)
    pol.write_text(
        f"@id({hostile})\n"
        f"permit (principal, action, resource) when {{ resource.n == {hostile} }};\n"
        '@id("plain") forbid (principal, action, resource);\n',
        encoding="utf-8",
    )
    code, out, err = run(capsys, "rules", str(pol))
    assert code == 0, err
    lines = out.split("\n")[:-1]
    assert out.splitlines() == lines  # no \r, U+2028, U+0085... that would break a line
    for line in lines:  # every line a comment, a rule or a blank between policies
        assert line == "" or line.startswith("% ") or line.endswith("."), line
    assert '% policy "x\\n-- evil\\rCREATE TABLE pwned(a int); */ /* \\u{2028}y' in out
    assert [line for line in lines if line.startswith("% policy")] == [
        "% policy " + quote_string(HOSTILE_ID),
        '% policy "plain"',
    ]
    assert sum(line.startswith("policy(") for line in lines) == 2
    assert not any(line.startswith("CREATE") for line in lines)


def test_rules_reports_a_parse_error(capsys: Capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.polang"
    bad.write_text("permit (principal, action, resource) when { 1 + };\n")
    code, _, err = run(capsys, "rules", str(bad))
    assert code == 2 and f"{bad}:1:" in err


# ---------------------------------------------------------------- conformance


def _pack(root: Path, requests: list[dict[str, Any]], should_validate: bool = True) -> Path:
    tests = root / "corpus-tests"
    tests.mkdir(parents=True)
    name = "0000feed"
    (tests / f"{name}.polangschema").write_text(
        'entity User; entity Doc = { "public": Bool };\n'
        'action "read" appliesTo { principal: [User], resource: [Doc] };\n'
    )
    (tests / f"{name}.polang").write_text(
        'permit (principal, action == Action::"read", resource) when { resource.public };\n'
        'forbid (principal == User::"mallory", action, resource);\n'
    )
    write_json(
        tests / f"{name}.entities.json",
        [
            {"uid": {"type": "User", "id": "alice"}, "attrs": {}, "parents": []},
            {"uid": {"type": "Doc", "id": "open"}, "attrs": {"public": True}, "parents": []},
            {"uid": {"type": "Doc", "id": "closed"}, "attrs": {"public": False}, "parents": []},
        ],
    )
    write_json(
        tests / f"{name}.json",
        {
            "policies": f"corpus-tests/{name}.polang",
            "entities": f"corpus-tests/{name}.entities.json",
            "schema": f"corpus-tests/{name}.polangschema",
            "shouldValidate": should_validate,
            "requests": requests,
        },
    )
    return root


def _req(principal: str, doc: str, decision: str, reason: list[str]) -> dict[str, Any]:
    return {
        "description": f"{principal} reads {doc}",
        "principal": {"type": "User", "id": principal},
        "action": {"type": "Action", "id": "read"},
        "resource": {"type": "Doc", "id": doc},
        "context": {},
        "validateRequest": True,
        "decision": decision,
        "reason": reason,
        "errors": [],
    }


def test_conformance_on_a_tiny_pack(capsys: Capsys, tmp_path: Path) -> None:
    pack = _pack(
        tmp_path / "pack",
        [
            _req("alice", "open", "allow", ["policy0"]),
            _req("alice", "closed", "deny", []),
            _req("mallory", "open", "deny", ["policy1"]),
        ],
    )
    code, out, _ = run(capsys, "conformance", str(pack))
    assert code == 0, out
    summary = json.loads(out.splitlines()[-1])
    assert summary == {
        "files": 1,
        "requests": 3,
        "decisions_ok": 3,
        "reasons_ok": 3,
        "errors_ok": 3,
        "validation_ok": 1,
        "failed_requests": 0,
    }
    code, out, _ = run(capsys, "conformance", str(pack), "--backend", "pydatalog")
    assert code == 0 and json.loads(out.splitlines()[-1])["decisions_ok"] == 3


def test_conformance_reports_failures(capsys: Capsys, tmp_path: Path) -> None:
    pack = _pack(
        tmp_path / "pack",
        [
            _req("alice", "open", "allow", ["policy0"]),
            _req("alice", "closed", "allow", ["policy0"]),  # wrong on purpose
        ],
        should_validate=False,  # wrong on purpose: the policies validate
    )
    code, out, _ = run(capsys, "conformance", str(pack))
    assert code == 1
    assert "alice reads closed" in out and "expected allow" in out
    assert "shouldValidate=False" in out
    summary = json.loads(out.splitlines()[-1])
    assert summary["failed_requests"] == 1 and summary["decisions_ok"] == 1
    assert summary["validation_ok"] == 0
    code, out, _ = run(capsys, "conformance", str(pack), "--no-validation")
    assert "shouldValidate" not in out and json.loads(out.splitlines()[-1])["validation_ok"] is None


def test_conformance_reads_a_packed_corpus(capsys: Capsys, tmp_path: Path) -> None:
    """``../shared/conformance`` holds the pack as a .tar.gz: the archive, or a directory
    with only the archive in it, is extracted for the run."""
    import tarfile

    pack = _pack(tmp_path / "pack", [_req("alice", "open", "allow", ["policy0"])])
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    archive = shelf / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack / "corpus-tests", arcname="corpus-tests")
    for where in (archive, shelf):
        code, out, _ = run(capsys, "conformance", str(where))
        assert code == 0, out
        assert json.loads(out.splitlines()[-1])["decisions_ok"] == 1
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tar archive")
    code, _, err = run(capsys, "conformance", str(broken))
    assert code == 2 and "broken.tar.gz" in err and "cannot extract" in err


def test_conformance_on_an_empty_or_missing_directory_is_an_error(
    capsys: Capsys, tmp_path: Path
) -> None:
    code, _, err = run(capsys, "conformance", str(tmp_path / "no-such-pack"))
    assert code == 2 and "no-such-pack" in err
