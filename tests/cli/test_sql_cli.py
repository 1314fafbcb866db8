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
        capsys,
        "matrix",
        *BASE,
        "--engine",
        "duckdb",
        "--format",
        "parquet",
        "--output",
        str(out),
        "--split-uids",
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
    """A file has the columns of the printed answer (uids as text), or with
    ``--split-uids`` each uid as its type and id."""
    out = tmp_path / "m.csv"
    code, stdout, err = run(
        capsys, "matrix", *BASE, "--engine", "duckdb", "--format", "csv", "--output", str(out)
    )
    assert (code, stdout) == (0, ""), err
    rows = _csv_rows(out.read_text())
    assert rows[0] == ["principal", "action", "resource", "decision", "policies", "residual"]
    assert rows[1][:4] == [ALICE, READ, ROADMAP, "allow"] and rows[1][4]
    code, stdout, err = run(
        capsys, "matrix", *BASE, "--engine", "duckdb", "--format", "csv", "--output", str(out),
        "--split-uids",
    )  # fmt: skip
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
        (["--format", "jsonl", "--split-uids"], "error: --split-uids: csv and parquet"),
        (["--format", "csv", "--output", "s3a://b/m.csv"], "error: --output s3a://b/m.csv: "),
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
    for name in [m for m in sys.modules if m.startswith("polang.sql")]:
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


def test_rules_sql_comments_cannot_be_left_by_ids_or_names(capsys: Capsys, tmp_path: Path) -> None:
    # policy ids, an attribute name and an action id that break lines every way there is;
    # the policies cannot be SQL, so their ids and the reason (naming the attribute) are
    # printed in comments. Run in DuckDB, the printed SQL is SELECTs that create nothing.
    from polang.datalog.authorizer import Authorizer
    from polang.language.entities import parse_entities
    from polang.language.parser import parse_policies
    from polang.language.schema import parse_schema
    from polang.sql import sql_engine

    schema_text = (
        'entity User; entity Doc { ip: ipaddr, "k\\nCREATE TABLE pwned_k(a int);": ipaddr };\n'
        'action "read\\nCREATE TABLE pwned_a(a int);" '
        "appliesTo { principal: User, resource: Doc };\n"
    )
    policy_text = (
        '@id("ip\\n-- evil\\rCREATE TABLE pwned_r(a int); -- */ /* '
        "\\u{2028}CREATE TABLE pwned_ls(a int);\\u{85}CREATE TABLE pwned_nel(a int);"
        "\\u{9b}\\u{202e}\\n'); CREATE TABLE pwned_q(a int); --\")\n"
        'permit (principal, action, resource) when { resource.ip.isInRange(ip("10.0.0.0/8")) };\n'
        '@id("n\\nCREATE TABLE pwned_n(a int);")\n'
        "permit (principal, action, resource) when "
        '{ resource["k\\nCREATE TABLE pwned_k(a int);"].isLoopback() };\n'
    )
    (tmp_path / "s.polangschema").write_text(schema_text, encoding="utf-8")
    (tmp_path / "p.polang").write_text(policy_text, encoding="utf-8")
    schema = parse_schema(schema_text, "s.polangschema")
    authorizer = Authorizer({p.policy_id: p for p in parse_policies(policy_text, "p.polang")})
    ip = {"__extn": {"fn": "ip", "arg": "10.0.0.1"}}
    doc = {"ip": ip, "k\nCREATE TABLE pwned_k(a int);": ip}
    ents = parse_entities(
        [
            {"uid": {"type": "User", "id": "u"}, "attrs": {}},
            {"uid": {"type": "Doc", "id": "d"}, "attrs": doc},
        ],
        schema,
    )
    eng = sql_engine(authorizer, [*schema.action_entities(), *ents], schema)
    con = eng.con

    def tables() -> list[str]:
        return sorted(
            r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        )

    before = tables()
    code, printed, err = run(
        capsys,
        "rules",
        str(tmp_path / "p.polang"),
        "--schema",
        str(tmp_path / "s.polangschema"),
        "--sql",
    )
    assert code == 0, err
    for sql in (printed, eng.sql_text()):  # `rules --sql` and the engine's own printer
        con.execute(sql)
        assert tables() == before  # nothing created
        assert {s.type for s in duckdb.extract_statements(sql)} == {duckdb.StatementType.SELECT}
        assert sql.splitlines() == sql.split("\n")[:-1]  # no line break but the printer's
        comments = [line for line in sql.splitlines() if line.startswith("--")]
        assert len(comments) == 3 and sql.count("pwned_r") == 1  # the action, two policies
    assert "pwned" not in " ".join(before)
    eng.close()


def _answer_inputs(tmp_path: Path) -> list[str]:
    """Policies whose ids are not in alphabetical order, two permits granting the same
    entries, a forbid, and ids that need quoting in CSV (a comma, quotes, non-ASCII)."""
    policies = tmp_path / "p.polang"
    policies.write_text(
        '@id("z-owner") permit(principal, action == Action::"view", resource) '
        "when { resource.owner == principal };\n"
        '@id("a-dept") permit(principal, action == Action::"view", resource) '
        "when { resource.dept == principal.dept };\n"
        '@id("m-edit") permit(principal is User, action == Action::"edit", resource is Doc);\n'
        '@id("b-archived") forbid(principal, action == Action::"edit", resource) '
        "when { resource.archived };\n",
        encoding="utf-8",
    )
    users = ["alice", 'o\'neil, "jr"', "zoë"]
    ents: list[dict[str, object]] = [
        {"uid": {"type": "User", "id": u}, "attrs": {"dept": "eng" if i < 2 else "ops"}}
        for i, u in enumerate(users)
    ]
    for i, d in enumerate(["d1", "d,2", "d3"]):
        attrs = {"owner": {"__entity": {"type": "User", "id": users[i]}}, "dept": "eng"}
        ents.append({"uid": {"type": "Doc", "id": d}, "attrs": {**attrs, "archived": i == 2}})
    entities = tmp_path / "e.json"
    entities.write_text(json.dumps(ents), encoding="utf-8")
    return ["--policies", str(policies), "--entities", str(entities), "--context", "{}"]


@pytest.mark.parametrize(
    ("fmt", "split"),
    [("csv", False), ("csv", True), ("jsonl", False), ("parquet", False), ("parquet", True)],
)
def test_an_answer_file_is_the_same_bytes_whatever_the_engine(
    capsys: Capsys, tmp_path: Path, fmt: str, split: bool
) -> None:
    """matrix, who-can and what-can written by DuckDB are the in-process files, byte for
    byte: the same columns, quoting, order and policies (in the program's order)."""
    inputs = _answer_inputs(tmp_path)
    view = 'Action::"view"'
    commands = {
        "matrix": ["matrix"],
        "who-can": ["who-can", "--action", view, "--resource", 'Doc::"d1"'],
        "what-can": ["what-can", "--principal", 'User::"alice"'],
    }
    extra = ["--split-uids"] if split else []
    for name, command in commands.items():
        files = {}
        for engine in ("in-process", "duckdb"):
            out = tmp_path / f"{name}-{engine}.{fmt}"
            argv = [*command, *inputs, "--format", fmt, "--output", str(out), *extra]
            code, stdout, err = run(capsys, *argv, "--engine", engine)
            assert (code, stdout) == (0, ""), err
            files[engine] = out.read_bytes()
        assert files["duckdb"] == files["in-process"], name
        if fmt == "csv" and not split:
            code, printed, _ = run(capsys, *command, *inputs, "--format", fmt, "--engine", "duckdb")
            assert printed.encode() == files["in-process"]  # stdout: the same bytes
    if fmt == "csv":
        rows = _csv_rows((tmp_path / "matrix-duckdb.csv").read_text(encoding="utf-8"))
        cols = 9 if split else 6
        assert {len(r) for r in rows} == {cols}
        assert sorted({r[cols - 2] for r in rows if " " in r[cols - 2]}) == ["z-owner a-dept"]
        ids = {r[1] for r in rows} if split else {r[0] for r in rows}
        assert ('o\'neil, "jr"' if split else 'User::"o\'neil, \\"jr\\""') in ids
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(tmp_path / "matrix-duckdb.parquet")
        assert table.column_names[:2] == (
            ["principal_type", "principal_id"] if split else ["principal", "action"]
        )
        assert table.num_rows > 3
