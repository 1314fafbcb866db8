"""``polang diff --engine duckdb``: the in-process answer, rows streamed to ``--output``,
and every mistake one ``error:`` line with status 2 before any store loads."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from .helpers import STORE, Capsys, run

pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pytest.importorskip("pyarrow")

PEOPLE = [
    {
        "uid": {"type": "Acme::User", "id": name},
        "attrs": {
            "email": f"{name}@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": level,
        },
        "parents": [{"type": "Acme::Team", "id": "finance"}],
    }
    for name, level in (("alice", 2), ("bob", 4), ("carol", 1))
] + [
    {
        "uid": {"type": "Acme::Document", "id": doc},
        "attrs": {
            "owner": {"__entity": {"type": "Acme::User", "id": "bob"}},
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "classification": kind,
            "public": False,
        },
    }
    for doc, kind in (("plan", "secret"), ("roadmap", "internal"))
]


@pytest.fixture
def stores(tmp_path: Path) -> list[str]:
    """``--store OLD --store NEW``: editors need clearance 1 instead of 3 in NEW."""
    out = []
    for name in ("old", "new"):
        d = tmp_path / name
        shutil.copytree(STORE, d)
        (d / "entities" / "people.json").write_text(json.dumps(PEOPLE), "utf-8")
        out += ["--store", str(d)]
    pol = tmp_path / "new" / "policies" / "documents.polang"
    pol.write_text(pol.read_text("utf-8").replace("clearance >= 3", "clearance >= 1"), "utf-8")
    return out


def _json_without_engine(text: str) -> dict[str, object]:
    data = json.loads(text)
    for k in ("stats", "engine", "output", "rows", "complete", "fallbacks"):
        data.pop(k, None)
    return data


def test_duckdb_prints_the_in_process_answer(capsys: Capsys, stores: list[str]) -> None:
    base = ["diff", *stores, "--context", "{}"]
    code, inproc, err = run(capsys, *base, "--format", "json")
    assert code == 0, err
    code, sql, err = run(capsys, *base, "--format", "json", "--engine", "duckdb")
    assert code == 0, err
    assert _json_without_engine(sql) == _json_without_engine(inproc)
    assert len(json.loads(sql)["gained"]) == 2  # alice and carol may edit the roadmap now
    assert json.loads(sql)["engine"] == "duckdb"
    for fmt in ("csv", "jsonl", "table"):
        code, inproc, _ = run(capsys, *base, "--format", fmt)
        code2, sql, _ = run(capsys, *base, "--format", fmt, "--engine", "duckdb")
        assert code == code2 == 0
        if fmt == "table":  # the header line names how it was computed
            assert inproc.splitlines()[1:] == sql.splitlines()[1:]
            assert sql.startswith("2 gained, 0 lost  [full: duckdb")
        else:
            assert sql == inproc and sql.count("cleared-editors") == 2
    # --exit-code on a SQL engine
    code, _, _ = run(capsys, *base, "--engine", "duckdb", "--exit-code", "--format", "csv")
    assert code == 1


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_rows_are_streamed_to_the_output_file(
    capsys: Capsys, stores: list[str], tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"changes.{fmt}"
    code, stdout, err = run(
        capsys, "diff", *stores, "--context", "{}", "--engine", "duckdb",
        "--format", fmt, "--output", str(out), "--exit-code",
    )  # fmt: skip
    assert code == 1 and stdout == ""
    assert "2 gained, 0 lost: wrote 2 rows to" in err
    if fmt == "parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(out).to_pylist()
    elif fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    else:
        rows = list(csv.DictReader(io.StringIO(out.read_text("utf-8"))))
    assert [(r["change"], r["principal_id"], r["action_id"], r["resource_id"]) for r in rows] == [
        ("gained", "alice", "edit", "roadmap"),
        ("gained", "carol", "edit", "roadmap"),
    ]
    pol = rows[0]["policies"]
    assert pol == (["cleared-editors"] if fmt != "csv" else "cleared-editors")


def test_entity_files_are_each_sides_entities(
    capsys: Capsys, stores: list[str], tmp_path: Path
) -> None:
    """``--old-entities`` / ``--entities`` JSON-lines files (read by DuckDB) against the
    same data given in process: the same answer."""
    org = json.loads((STORE / "entities" / "organisation.json").read_text("utf-8"))
    carol = dict(PEOPLE[2], attrs=dict(PEOPLE[2]["attrs"], clearance=3))
    old_f, new_f, carol_f = tmp_path / "old.jsonl", tmp_path / "new.jsonl", tmp_path / "c.json"
    old_f.write_text("".join(json.dumps(e) + "\n" for e in org + PEOPLE), "utf-8")
    new = [carol if e is PEOPLE[2] else e for e in PEOPLE]
    new_f.write_text("".join(json.dumps(e) + "\n" for e in org + new), "utf-8")
    carol_f.write_text(json.dumps([carol]), "utf-8")
    one = stores[:2]
    code, want, err = run(capsys, "diff", *one, "--entities", str(carol_f), "--context", "{}",
                          "--format", "csv")  # fmt: skip
    assert code == 0, err
    assert want.count("\n") == 2  # carol may edit the roadmap now (plan is secret)
    code, got, err = run(
        capsys, "diff", *one, "--old-entities", str(old_f), "--entities", str(new_f),
        "--context", "{}", "--format", "csv", "--engine", "duckdb",
    )  # fmt: skip
    assert code == 0, err
    assert got == want


def test_entities_given_once_are_both_stores_data(
    capsys: Capsys, stores: list[str], tmp_path: Path
) -> None:
    """Two stores and ``--entities`` alone: the data is laid over both sides, so the diff
    is the stores' difference (2 rows), not every entity of the file looking gained.
    ``--old-entities`` takes the same files as ``--entities`` (``.json`` too), on every
    engine."""
    extra = [
        {
            "uid": {"type": "Acme::User", "id": "dave"},
            "attrs": {
                "email": "dave@acme.example",
                "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
                "clearance": 0,
            },
            "parents": [{"type": "Acme::Team", "id": "finance"}],
        },
        {
            "uid": {"type": "Acme::Document", "id": "memo"},
            "attrs": {
                "owner": {"__entity": {"type": "Acme::User", "id": "dave"}},
                "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
                "classification": "secret",
                "public": True,
            },
        },
    ]
    f = tmp_path / "extra.json"
    f.write_text(json.dumps(extra), "utf-8")
    base = ["diff", *stores, "--context", "{}", "--format", "csv"]
    code, plain, err = run(capsys, *base)
    assert code == 0, err
    assert plain.count("\n") == 3 and plain.count("cleared-editors") == 2  # header, 2 rows
    for engine in ("in-process", "duckdb"):
        code, got, err = run(capsys, *base, "--entities", str(f), "--engine", engine)
        assert code == 0, err
        assert got == plain, engine  # dave and memo are on both sides: no change of theirs
        both = ["--old-entities", str(f), "--entities", str(f)]
        code, got, err = run(capsys, *base, *both, "--engine", engine)
        assert (code, got) == (0, plain), err
    # each side its own data: dave and memo exist on the new side only
    empty = tmp_path / "none.json"
    empty.write_text("[]", "utf-8")
    code, got, err = run(capsys, *base, "--old-entities", str(empty), "--entities", str(f))
    assert code == 0, err
    assert got.count("\n") > 3 and '"Acme::User::""dave"""' in got


def test_in_process_output_writes_the_printed_answer(
    capsys: Capsys, stores: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "d.json"
    code, stdout, err = run(
        capsys, "diff", *stores, "--context", "{}", "--format", "json", "--output", str(out)
    )
    assert code == 0 and stdout == "", err
    assert json.loads(out.read_text("utf-8"))["summary"]["gained"] == 2


def test_without_a_context_sql_says_what_is_conditional(capsys: Capsys, stores: list[str]) -> None:
    code, out, err = run(capsys, "diff", *stores, "--engine", "duckdb", "--format", "json")
    assert code == 0
    assert "conditional in SQL (e.g. " in err
    data = json.loads(out)
    assert data["complete"] is False and data["summary"]["conditional"] > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "sqlite"], "--engine 'sqlite': expected one of in-process, duckdb, spark"),
        (["--format", "parquet"], "--format parquet writes a file"),
        (["--format", "parquet", "--output", "x.parquet"], "and --engine duckdb or spark"),
        (
            ["--engine", "duckdb", "--format", "csv", "--output", "/nonexistent-dir/d.csv"],
            "the directory '/nonexistent-dir' does not exist",
        ),
        (["--entities", "users.parquet"], "are read by --engine duckdb"),
        (["--old-entities", "old.parquet"], "are read by --engine duckdb"),
        (["--engine", "duckdb", "--old-entities", "a.jsonl", "b.json"], "do not mix them"),
        (["--engine", "duckdb", "--entities", "a.jsonl", "b.json"], "do not mix them"),
    ],
)
def test_mistakes_are_one_error_line(
    capsys: Capsys, stores: list[str], extra: list[str], message: str
) -> None:
    code, out, err = run(capsys, "diff", *stores, "--context", "{}", *extra)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_bad_format_is_refused_by_the_parser(capsys: Capsys, stores: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run(capsys, "diff", *stores, "--format", "xml", "--engine", "duckdb")
    assert exc.value.code == 2
