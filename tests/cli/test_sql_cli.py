"""``--engine duckdb|spark`` on ``who-can``, ``what-can`` and ``matrix``, and ``rules --sql``:
the SQL answers equal the in-process ones, files are streamed, mistakes are one error line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from .helpers import READ, REQUESTS, STORE, Capsys, run

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

ENTS = ["--entities", str(REQUESTS / "alice.json"), str(REQUESTS / "roadmap.json")]
BASE = ["--store", str(STORE), *ENTS, "--context", str(REQUESTS / "office-network.json")]
ALICE = 'Acme::User::"alice"'
ROADMAP = 'Acme::Document::"roadmap"'


def _csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _both(capsys: Capsys, *argv: str) -> tuple[str, str]:
    """The same command in process and on DuckDB: each must succeed."""
    code, inproc, err = run(capsys, *argv)
    assert code == 0, err
    code, sql, err = run(capsys, *argv, "--engine", "duckdb")
    assert code == 0, err
    return inproc, sql


def test_matrix_on_duckdb_gives_the_in_process_rows(capsys: Capsys) -> None:
    inproc, sql = _both(capsys, "matrix", *BASE, "--format", "csv")
    rows = _csv_rows(sql)
    assert len(rows) > 1  # a header and at least one allowed triple
    assert rows == _csv_rows(inproc)
    # and as JSON: the same entries
    inproc, sql = _both(capsys, "matrix", *BASE, "--format", "json")
    assert json.loads(sql)["entries"] == json.loads(inproc)["entries"]


def test_matrix_streams_parquet_that_reads_back_as_the_in_process_rows(
    capsys: Capsys, tmp_path: Path
) -> None:
    out = tmp_path / "m.parquet"
    code, stdout, err = run(
        capsys, "matrix", *BASE, "--engine", "duckdb", "--format", "parquet", "--output", str(out)
    )
    assert (code, stdout) == (0, ""), err
    assert "wrote" in err
    got = duckdb.sql(
        f"SELECT principal_type, principal_id, action_type, action_id, resource_type, "
        f"resource_id, decision FROM read_parquet('{out}')"
    ).fetchall()
    code, inproc, _ = run(capsys, "matrix", *BASE, "--format", "json")
    want = [
        (
            e["principal"]["type"],
            e["principal"]["id"],
            e["action"]["type"],
            e["action"]["id"],
            e["resource"]["type"],
            e["resource"]["id"],
            e["decision"],
        )
        for e in json.loads(inproc)["entries"]
    ]
    assert want and got == want


def test_csv_output_file_on_duckdb(capsys: Capsys, tmp_path: Path) -> None:
    out = tmp_path / "m.csv"
    code, stdout, err = run(
        capsys, "matrix", *BASE, "--engine", "duckdb", "--format", "csv", "--output", str(out)
    )
    assert (code, stdout) == (0, ""), err
    rows = _csv_rows(out.read_text())
    assert rows[0][:2] == ["principal_type", "principal_id"]
    assert rows[1][:2] == ["Acme::User", "alice"]


def test_who_can_and_what_can_on_duckdb_equal_in_process(capsys: Capsys) -> None:
    inproc, sql = _both(
        capsys, "who-can", *BASE, "--action", READ, "--resource", ROADMAP, "--format", "csv"
    )
    assert len(_csv_rows(sql)) == 2 and _csv_rows(sql) == _csv_rows(inproc)
    inproc, sql = _both(capsys, "what-can", *BASE, "--principal", ALICE, "--format", "csv")
    assert len(_csv_rows(sql)) >= 2 and _csv_rows(sql) == _csv_rows(inproc)


def test_an_entity_sql_does_not_hold_is_answered_in_process_and_said(capsys: Capsys) -> None:
    argv = ["who-can", *BASE, "--action", READ, "--resource", 'Acme::Document::"nope"']
    inproc, sql = _both(capsys, *argv, "--format", "csv")
    assert sql == inproc
    code, _, err = run(capsys, *argv, "--engine", "duckdb")
    assert code == 0 and "note: answered in process" in err


def test_entity_files_are_read_by_duckdb(capsys: Capsys, tmp_path: Path) -> None:
    """JSON-lines entity files replace the store's entities (read by DuckDB itself)."""
    ents = json.loads((STORE / "entities" / "organisation.json").read_text())
    ents += [json.loads((REQUESTS / n).read_text()) for n in ("alice.json", "roadmap.json")]
    lines = tmp_path / "ents.jsonl"
    lines.write_text("".join(json.dumps(e) + "\n" for e in ents))
    ctx = ["--context", str(REQUESTS / "office-network.json")]
    code, inproc, err = run(capsys, "matrix", *BASE, "--format", "csv")
    assert code == 0, err
    argv = ["matrix", "--store", str(STORE), "--entities", str(lines), *ctx, "--format", "csv"]
    code, sql, err = run(capsys, *argv, "--engine", "duckdb")
    assert code == 0, err
    assert _csv_rows(sql) == _csv_rows(inproc)
    # the in-process engine does not read them
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: --entities ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "sqlite"], "error: --engine 'sqlite': expected one of"),
        (["--engine", "duckdb", "--format", "parquet"], "error: --format parquet writes a file"),
        (["--format", "parquet", "--output", "x.parquet"], "error: --format parquet needs"),
        (["--engine", "duckdb", "--limit", "1"], "error: --limit and --cursor"),
    ],
)
def test_mistakes_are_one_error_line(capsys: Capsys, extra: list[str], message: str) -> None:
    code, out, err = run(capsys, "matrix", *BASE, *extra)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_missing_sql_package_names_the_extra(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    for name in [m for m in sys.modules if m == "sqlglot" or m.startswith("sqlglot.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in [m for m in sys.modules if m.startswith("polang.datalog.sql")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sqlglot", None)  # import sqlglot -> ImportError
    code, out, err = run(capsys, "matrix", *BASE, "--engine", "spark")
    assert (code, out) == (2, "")
    assert err.startswith("error: --engine spark needs the sqlglot package")
    assert "pip install 'polang[spark]'" in err and err.count("\n") == 1


@pytest.mark.parametrize("dialect", [[], ["--dialect", "duckdb"], ["--dialect", "spark"]])
def test_rules_sql_prints_the_store_as_sql(capsys: Capsys, dialect: list[str]) -> None:
    code, out, err = run(capsys, "rules", "--store", str(STORE), "--sql", *dialect)
    assert code == 0, err
    assert f"-- action {READ}" in out
    assert "SELECT" in out and "secret-needs-corp-network" in out
    # the same from the policy files and the schema file
    files = sorted(str(p) for p in (STORE / "policies").glob("*.polang"))
    schema = str(STORE / "schema.polangschema")
    code, out2, err = run(capsys, "rules", *files, "--schema", schema, "--sql", *dialect)
    assert code == 0, err
    assert out2 == out


def test_rules_sql_prints_each_dialect_and_needs_a_schema(capsys: Capsys, tmp_path: Path) -> None:
    schema = tmp_path / "s.polangschema"
    schema.write_text(
        "entity User { tags: Set<String> }; entity Doc;\n"
        "action view appliesTo { principal: User, resource: Doc };\n"
    )
    pol = tmp_path / "p.polang"
    pol.write_text(
        '@id("tagged") permit(principal, action, resource) '
        'when { principal.tags.containsAll(["x"]) };\n'
    )
    argv = ["rules", str(pol), "--schema", str(schema), "--sql"]
    code, duck, err = run(capsys, *argv)
    assert code == 0, err
    code, spark, err = run(capsys, *argv, "--dialect", "spark")
    assert code == 0, err
    assert "LIST_HAS_ALL" in duck and "ARRAY_EXCEPT" in spark
    policy = str(STORE / "policies" / "guards.polang")
    code, out, err = run(capsys, "rules", policy, "--sql")
    assert (code, out) == (2, "")
    assert err.startswith("error: --sql lays the tables out by the schema") and err.count("\n") == 1
    # without --sql, rules still prints Datalog
    code, out, _ = run(capsys, "rules", policy)
    assert code == 0 and "policy(" in out
