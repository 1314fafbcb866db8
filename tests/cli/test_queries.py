"""``polang who-can``, ``what-can`` and ``matrix`` as a user meets them: the same request
checks as ``authorize``, a word when the entity asked about does not exist, progress on
stderr only on a terminal, tables never cut in a file."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from .helpers import READ, REQUESTS, STORE, Capsys, authorize, run, write_json

BASE = ["--store", str(STORE), "--entities", str(REQUESTS / "alice.json")]
ROADMAP = 'Acme::Document::"roadmap"'


def _authorize_error(capsys: Capsys, action: str, principal: str | None = None) -> str:
    """The error ``authorize`` gives for the same mistake (the reference wording)."""
    extra = ["--principal", principal] if principal else []
    code, _, err = authorize(capsys, *extra, action=action)
    assert code == 2
    return err


def test_who_can_rejects_an_undeclared_action_as_authorize_does(capsys: Capsys) -> None:
    typo = 'Acme::Action::"reed"'
    expected = _authorize_error(capsys, typo, str(REQUESTS / "alice.json"))
    assert "not declared in the schema" in expected
    for argv in (
        ["who-can", *BASE, "--action", typo, "--resource", ROADMAP],
        ["matrix", *BASE, "--action", typo],
        ["what-can", *BASE, "--principal", 'Acme::User::"alice"', "--action", typo],
    ):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), (argv, err)
        assert err == expected, argv


def test_what_can_rejects_an_undeclared_principal_type(capsys: Capsys) -> None:
    code, out, err = run(capsys, "what-can", *BASE, "--principal", 'Acme::Usr::"alice"')
    assert (code, out) == (2, "")
    assert err.startswith("error: the request does not match the schema: ")
    assert "`Acme::Usr`, which the schema does not declare" in err
    assert "not valid for" not in err  # no action was named: only the type is checked


def test_who_can_says_when_the_resource_does_not_exist(capsys: Capsys) -> None:
    argv = ["who-can", *BASE, "--action", READ, "--context", "{}", "--format", "json"]
    code, out, err = run(capsys, *argv, "--resource", 'Acme::Document::"nope"')
    assert code == 0
    assert all(e["decision"] != "allow" for e in json.loads(out)["entries"])
    assert err.startswith('note: resource Acme::Document::"nope" is not in the store')
    # supplied entities are answered for, without a note
    code, out, err = run(capsys, *argv, "--resource", str(REQUESTS / "roadmap.json"))
    assert code == 0 and err == ""
    principals = [e["principal"] for e in json.loads(out)["entries"]]
    assert principals == [{"type": "Acme::User", "id": "alice"}]


def test_principal_and_resource_take_files_and_references(capsys: Capsys) -> None:
    by_file = run(
        capsys,
        "who-can",
        "--store",
        str(STORE),
        "--action",
        READ,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        "--entities",
        str(REQUESTS / "alice.json"),
        "--context",
        "{}",
        "--format",
        "csv",
    )
    by_ref = run(
        capsys,
        "who-can",
        "--store",
        str(STORE),
        "--action",
        READ,
        "--resource",
        ROADMAP,
        "--entities",
        str(REQUESTS / "alice.json"),
        str(REQUESTS / "roadmap.json"),
        "--context",
        "{}",
        "--format",
        "csv",
    )
    assert by_file == by_ref and by_file[0] == 0
    assert 'Acme::User::""alice""' in by_file[1]
    # what-can with the principal as a file
    code, out, _ = run(
        capsys, "what-can", "--store", str(STORE), "--principal", str(REQUESTS / "alice.json")
    )
    assert code == 0 and "entr" in out


def test_authorize_takes_references(capsys: Capsys) -> None:
    """A reference is handed to the engine as an ``EntityUID`` (an entity of the store),
    not read as a file: the engine's request check answers, naming the entity's type."""
    code, out, err = authorize(capsys, "--principal", 'Acme::Org::"acme"')
    assert (code, out) == (2, "")
    assert "Acme::Org" in err and "no such file" not in err and "cannot read" not in err


LONG = "u" * 120


def _long_ids(tmp_path: Path) -> list[str]:
    policies = tmp_path / "p.polang"
    policies.write_text('permit (principal, action == Action::"view", resource);\n')
    entities = write_json(
        tmp_path / "e.json",
        [
            {"uid": {"type": "User", "id": LONG}, "attrs": {}, "parents": []},
            {"uid": {"type": "Doc", "id": "d" * 100}, "attrs": {}, "parents": []},
        ],
    )
    return ["--policies", str(policies), "--entities", entities]


def test_matrix_table_in_a_file_is_never_cut(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "matrix", *_long_ids(tmp_path), "--context", "{}")
    assert code == 0
    row = next(line for line in out.splitlines() if LONG in line)
    assert f'User::"{LONG}"' in row and 'Doc::"' + "d" * 100 + '"' in row
    assert "\x1b[" not in out  # no colour codes in a file


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_goes_to_stderr_on_a_terminal_only(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["matrix", *_long_ids(tmp_path), "--context", "{}", "--format", "csv"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == ""  # not a terminal: no bar
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    code, out, _ = run(capsys, *argv)
    drawn = terminal.getvalue()
    assert code == 0 and "2/2" in drawn and "(action, resource) pairs" in drawn, drawn
    assert "/s" in drawn  # the rate
    assert "━" not in out and out.startswith("principal,action,resource")
