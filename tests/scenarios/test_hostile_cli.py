"""What the command line prints of hostile ids and names (docs/security.md, "What polang
prints"): every table, tree, report and ``error:`` line shows a caller's text as text.
No control character, line separator or bidi control reaches the terminal raw, and rich
markup (``[/]``, ``[bold red]``) or an emoji code in an id is shown as written: never
styled away, never a crash."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cli.helpers import READ, REQUESTS, STORE, Capsys, run, write_json
from polang.cli import main

# written out here, not imported from polang, so that the test fails if the library's set
# loses a character; \n is the printers' own line break
UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
MARKUP_ID = "[bold red]admin[/bold red]"
CLOSE_ID = "[/]"
#: an id that clears the screen (ESC and the one-character CSI U+009B), breaks the line
#: three ways and reverses what follows it
CONTROL_ID = "x\x1b[2J\x9b31m\u2028\x85\r\u202eevil"
CONTROL_SHOWN = "x\\u{1b}[2J\\u{9b}31m\\u{2028}\\u{85}\\r\\u{202e}evil"


def _polang_string(s: str) -> str:
    """``s`` as a policy literal with every character an escape (what a hostile file holds)."""
    return '"' + "".join(f"\\u{{{ord(c):x}}}" for c in s) + '"'


HOSTILE_POLICIES = f"""
@id({_polang_string(CLOSE_ID)})
permit (principal == Acme::User::{_polang_string(CLOSE_ID)}, action, resource);
@id({_polang_string(MARKUP_ID)})
permit (principal == Acme::User::"alice", action == Acme::Action::"read", resource);
@id({_polang_string(CONTROL_ID)})
permit (principal == Acme::User::{_polang_string(CONTROL_ID)}, action, resource);
@id(":thumbs_up:")
permit (principal == Acme::User::{_polang_string(MARKUP_ID)}, action, resource);
"""


def _user(uid: str) -> dict[str, object]:
    return {
        "uid": {"type": "Acme::User", "id": uid},
        "attrs": {
            "email": "x@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": 1,
        },
        "parents": [],
    }


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    """The example store, and a copy with the hostile policies; an entity file with users
    whose ids are hostile."""
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    changed = tmp_path / "changed"
    shutil.copytree(STORE, changed)
    (changed / "policies" / "hostile.polang").write_text(HOSTILE_POLICIES, encoding="utf-8")
    entities = write_json(
        tmp_path / "people.json",
        [
            json.loads((REQUESTS / "alice.json").read_text("utf-8")),
            json.loads((REQUESTS / "roadmap.json").read_text("utf-8")),
            _user(MARKUP_ID),
            _user(CLOSE_ID),
            _user(CONTROL_ID),
        ],
    )
    return {"store": str(store), "changed": str(changed), "entities": entities}


def _safe(text: str) -> None:
    assert not UNSAFE.search(text), repr(UNSAFE.search(text))


def test_query_tables_show_ids_as_text(capsys: Capsys, hostile: dict[str, str]) -> None:
    base = ["--store", hostile["changed"], "--entities", hostile["entities"], "--context", "{}"]
    roadmap = 'Acme::Document::"roadmap"'
    for argv in (
        ["who-can", *base, "--action", READ, "--resource", roadmap],
        ["what-can", *base, "--principal", f"Acme::User::{_polang_string(CONTROL_ID)}"],
        ["matrix", *base],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        _safe(out + err)
        if argv[0] != "what-can":
            assert f'Acme::User::"{MARKUP_ID}"' in out and f'Acme::User::"{CLOSE_ID}"' in out
            assert f"│ {CLOSE_ID} " in out  # the policy `[/]` in the policies column
            assert f"org-members-read, {MARKUP_ID}" in out  # alice's policies
            assert ":thumbs_up:" in out  # a policy id, not an emoji
        assert CONTROL_SHOWN in out


@pytest.mark.parametrize(
    ("uid", "reason"),
    [
        (CLOSE_ID, CLOSE_ID),
        ("alice", MARKUP_ID),
        (CONTROL_ID, CONTROL_SHOWN),
    ],
)
def test_authorize_shows_policy_ids_as_text(
    capsys: Capsys, hostile: dict[str, str], tmp_path: Path, uid: str, reason: str
) -> None:
    principal = write_json(tmp_path / "principal.json", _user(uid))
    code, out, err = run(
        capsys,
        "authorize",
        "--store",
        hostile["changed"],
        "--action",
        READ,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        "--principal",
        principal,
    )
    assert code == 0, err
    _safe(out + err)
    assert out == f"ALLOW\nreason: {reason}\n"


def test_explain_tree_escapes_ids_and_values(capsys: Capsys, hostile: dict[str, str]) -> None:
    code, out, err = run(
        capsys,
        "explain",
        "--store",
        hostile["changed"],
        "--entities",
        hostile["entities"],
        "--principal",
        f"Acme::User::{_polang_string(CONTROL_ID)}",
        "--action",
        READ,
        "--resource",
        'Acme::Document::"roadmap"',
        "--all",
    )
    assert code == 0, err
    _safe(out + err)
    assert f'permit "{CONTROL_SHOWN}"' in out
    assert f'"{CLOSE_ID}"' in out and f'"{MARKUP_ID}"' in out


def test_diff_table_shows_markup_ids_as_text(capsys: Capsys, hostile: dict[str, str]) -> None:
    argv = ["diff", "--store", hostile["store"], "--store", hostile["changed"]]
    argv += ["--entities", hostile["entities"], "--context", "{}"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err  # `[/]` used to raise rich's MarkupError
    _safe(out + err)
    assert CLOSE_ID in out and MARKUP_ID in out and ":thumbs_up:" in out
    assert CONTROL_SHOWN in out
    code, out, err = run(capsys, *argv, "--exit-code")
    assert code == 1 and "gained" in out  # changed, and said so: not a crash


def test_validate_prints_one_line_per_finding(capsys: Capsys, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    (store / "policies" / "bad.polang").write_text(
        f"@id({_polang_string(CONTROL_ID + chr(10) + 'forged: finding')})\n"
        'permit (principal is Acme::User, action == Acme::Action::"read", resource) '
        "when { principal.salary > 10 };\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, "validate", str(store))
    assert code == 1, err
    _safe(out)
    lines = out.splitlines()
    assert lines[-1] == "1 finding(s)" and len(lines) == 2
    assert CONTROL_SHOWN + "\\nforged: finding" in lines[0]


def test_test_reports_and_coverage_escape_names_and_ids(
    capsys: Capsys, hostile: dict[str, str], tmp_path: Path
) -> None:
    cases = [
        {
            "name": f"case {CLOSE_ID} {CONTROL_ID}",
            "principal": f"Acme::User::{_polang_string(CONTROL_ID)}",
            "action": READ,
            "resource": 'Acme::Document::"roadmap"',
            "context": {},
            "decision": "deny",
        }
    ]
    spec = {"store": hostile["changed"], "entities": hostile["entities"], "cases": cases}
    (tmp_path / "t.polangtest.json").write_text(json.dumps(spec), encoding="utf-8")
    code, out, err = run(capsys, "test", str(tmp_path / "t.polangtest.json"), "--coverage")
    assert code == 1, err
    _safe(out + err)
    assert f"FAIL case {CLOSE_ID} {CONTROL_SHOWN}" in out
    assert MARKUP_ID in out and ":thumbs_up:" in out  # the coverage table's policy ids


def test_error_lines_escape_what_they_quote(capsys: Capsys, tmp_path: Path) -> None:
    bad = write_json(
        tmp_path / "bad.json",
        [{"uid": {"type": "Acme\x9b[2J\u202e", "id": "x"}, "attrs": {}, "parents": []}],
    )
    code, out, err = run(
        capsys, "matrix", "--store", str(STORE), "--entities", bad, "--context", "{}"
    )
    assert code == 2 and out == ""
    _safe(err)
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "Acme\\u{9b}[2J\\u{202e}" in err


def test_os_error_lines_escape_file_names(capsys: Capsys, tmp_path: Path) -> None:
    name = tmp_path / "missing\x9b[2J\u2028.json"
    code, _, err = run(
        capsys, "matrix", "--store", str(STORE), "--entities", str(name), "--context", "{}"
    )
    assert code == 2
    _safe(err)
    assert "missing\\u{9b}[2J\\u{2028}.json" in err and err.count("\n") == 1


def test_main_never_writes_a_lone_surrogate(capsys: Capsys, tmp_path: Path) -> None:
    # "\ud800" in JSON is a lone surrogate: UTF-8 cannot encode it, printing it raised
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[{"uid": {"type": "A\\ud800", "id": "x"}, "attrs": {}, "parents": []}]', "utf-8"
    )
    code = main(["matrix", "--store", str(STORE), "--entities", str(bad), "--context", "{}"])
    err = capsys.readouterr().err
    assert code == 2 and "A\\u{d800}" in err
