"""``polang plan --mapping M --dialect D``: the plan followed by the SQL over the service's
tables (run here on SQLite against ``authorize_unsigned``), its JSON form, and bad input as
one ``error:`` line with status 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from polang.engine.facade import Engine

from .helpers import READ, REPO, REQUESTS, STORE, Capsys, run

pytest.importorskip("sqlglot")

MAPPING = str(REPO / "examples" / "mappings" / "directory.yaml")
ALICE = str(REQUESTS / "alice.json")
BASE = ["plan", "--store", str(STORE), "--resource-type", "Acme::Document", "--action", READ]
DOCS = [  # id, owner, org, classification, public
    ("d1", "alice", "acme", "internal", 0),
    ("d2", "bob", "acme", "secret", 1),
    ("d3", "bob", "other", "internal", 1),
    ("d4", "alice", "acme", "secret", 0),
    ("d5", None, "acme", None, None),
    ("d6", "bob", None, "public", 1),
]


def test_the_sql_selects_the_rows_authorize_allows(capsys: Capsys, tmp_path: Path) -> None:
    code, out, err = run(
        capsys,
        *BASE,
        "--principal",
        ALICE,
        "--context",
        "{}",
        "--mapping",
        MAPPING,
        "--dialect",
        "sqlite",
    )
    assert (code, err) == (0, "")
    plan_text, sql = out.split("-- SQL for sqlite:\n")
    assert plan_text.startswith("// plan conditional")
    db = sqlite3.connect(tmp_path / "d.sqlite")
    db.execute(
        "CREATE TABLE documents (id TEXT, owner_id TEXT, org_id TEXT, classification TEXT, "
        "public INTEGER)"
    )
    db.executemany("INSERT INTO documents VALUES (?, ?, ?, ?, ?)", DOCS)
    got = {r[0] for r in db.execute(sql.strip().rstrip(";"))}
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})
    principal = json.loads(Path(ALICE).read_text())
    want = set()
    for i, owner, org, cls, public in DOCS:
        attrs: dict[str, object] = {}
        if owner:
            attrs["owner"] = {"__entity": {"type": "Acme::User", "id": owner}}
        if org:
            attrs["org"] = {"__entity": {"type": "Acme::Org", "id": org}}
        if cls:
            attrs["classification"] = cls
        if public is not None:
            attrs["public"] = bool(public)
        doc = {"uid": {"type": "Acme::Document", "id": i}, "attrs": attrs, "parents": []}
        if _decide(engine, doc, principal):
            want.add(i)
    engine.close()
    assert got == want == {"d1"}


def _decide(engine: Engine, doc: dict[str, object], principal: object) -> bool:
    from polang.errors import RequestError

    try:
        return engine.authorize_unsigned(READ, doc, {}, principal).decision
    except RequestError:  # a row the schema refuses (a missing required attribute)
        return False


def test_json_and_the_default_dialect(capsys: Capsys) -> None:
    code, out, err = run(
        capsys, *BASE, "--principal", ALICE, "--context", "{}", "--mapping", MAPPING, "--json"
    )
    assert (code, err) == (0, "")
    f = json.loads(out)["filter"]
    assert f["dialect"] == "postgres" and f["exact"] is True and f["rechecks"] == []
    assert f["sql"].startswith('SELECT * FROM "documents" WHERE')


def test_bad_mappings_and_options(capsys: Capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("types:\n  Acme::Document:\n    tabel: documents\n")
    code, out, err = run(capsys, *BASE, "--principal", ALICE, "--mapping", str(bad))
    assert code == 2 and out == "" and "did you mean 'table'" in err
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("types:\n  Acme::Document:\n    table: d\n    attributes: {ownr: owner}\n")
    code, out, err = run(capsys, *BASE, "--principal", ALICE, "--mapping", str(wrong))
    assert code == 2 and "did you mean 'owner'" in err
    code, out, err = run(capsys, *BASE, "--principal", ALICE, "--dialect", "sqlite")
    assert code == 2 and "--dialect and --superset need --mapping" in err
    short = tmp_path / "short.yaml"
    short.write_text(
        "types:\n  Acme::Document:\n    table: d\n"
        "    attributes: {owner: {column: o, type: Acme::User}}\n  Acme::User: {table: u}\n"
    )
    code, out, err = run(
        capsys, *BASE, "--principal", ALICE, "--context", "{}", "--mapping", str(short)
    )
    assert code == 2 and "org-members-read" in err and "not in the mapping" in err
    code, out, err = run(
        capsys,
        *BASE,
        "--principal",
        ALICE,
        "--context",
        "{}",
        "--mapping",
        str(short),
        "--superset",
    )
    assert code == 0 and "a superset: check each row for org-members-read" in out
