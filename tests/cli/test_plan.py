"""``polang plan``: the plan printed in policy syntax (it parses back) or as JSON, the
request read as ``authorize`` reads it, bad input a one-line error and status 2."""

from __future__ import annotations

import json
from pathlib import Path

from polang.language.parser import parse_policies

from .helpers import EDIT, READ, REQUESTS, STORE, Capsys, run, write_json

ALICE = str(REQUESTS / "alice.json")
BASE = ["plan", "--store", str(STORE), "--resource-type", "Acme::Document"]


def test_the_plan_in_policy_syntax_and_as_json(capsys: Capsys) -> None:
    code, out, err = run(capsys, *BASE, "--action", READ, "--principal", ALICE, "--context", "{}")
    assert (code, err) == (0, "")
    assert out.startswith('// plan conditional: principal Acme::User::"alice"')
    ids = [p.policy_id for p in parse_policies(out)]
    assert ids == ["owner-full-access", "org-members-read", "secret-needs-corp-network"]
    assert 'resource.owner == Acme::User::"alice"' in out
    code, out, err = run(
        capsys,
        *BASE,
        "--action",
        EDIT,
        "--principal",
        ALICE,
        "--context",
        '{"network": "corp"}',
        "--json",
    )
    assert (code, err) == (0, "")
    d = json.loads(out)
    assert d["kind"] == "conditional" and d["resource_type"] == "Acme::Document"
    assert [r["policy_id"] for r in d["residuals"]] == ["owner-full-access"]


def test_entities_files_are_laid_over_the_store(capsys: Capsys, tmp_path: Path) -> None:
    bob = json.loads(Path(ALICE).read_text())
    bob["uid"]["id"] = "bob"
    bob["attrs"]["clearance"] = 5
    f = write_json(tmp_path / "bob.json", [bob])
    code, out, err = run(
        capsys, *BASE, "--action", EDIT, "--principal", 'Acme::User::"bob"', "--entities", f
    )
    assert (code, err) == (0, "")
    assert "cleared-editors" in out  # bob's clearance, read from the file
    code, out, err = run(capsys, *BASE, "--action", EDIT, "--principal", 'Acme::User::"bob"')
    assert (code, out) == (2, "") and "store has no entity" in err


def test_bad_input_is_one_error_line(capsys: Capsys, tmp_path: Path) -> None:
    typo = ["plan", "--store", str(STORE), "--resource-type", "Acme::Documnt"]
    code, out, err = run(capsys, *typo, "--action", READ, "--principal", ALICE)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "did you mean 'Acme::Document'" in err
    code, out, err = run(
        capsys, *BASE, "--action", READ, "--principal", ALICE, "--token", "A=b.c.d"
    )
    assert (code, out) == (2, "") and "cannot be combined" in err
    code, out, err = run(capsys, *BASE, "--action", READ, "--token", "nojwt")
    assert (code, out) == (2, "") and "MAPPING=JWT" in err
    bad = write_json(tmp_path / "bad.json", 5)
    code, out, err = run(capsys, *BASE, "--action", READ, "--principal", ALICE, "--entities", bad)
    assert (code, out) == (2, "") and "expected an entity object" in err
    code, out, err = run(
        capsys, *BASE, "--action", READ, "--principal", ALICE, "--context", '{"network": 1}'
    )
    assert (code, out) == (2, "") and "network" in err
