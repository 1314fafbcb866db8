"""The one writer of the query commands' csv, jsonl and parquet answers: the same bytes
from entries (in process) as from a SQL engine's record batches, whatever the batches'
sizes; text a UTF-8 file cannot hold is refused, never written otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang.analysis.query import AccessEntry, Residual
from polang.cli import answers
from polang.cli.answers import AnswerWriter
from polang.language.values import EntityUID

from .helpers import Capsys, run

pa = pytest.importorskip("pyarrow")

ACTION = EntityUID("Action", "view")


P7 = Residual("p7", "permit", None)  # a SQL engine's residual: the conditions stay there


def _rows(n: int) -> list[AccessEntry]:
    """Entries with uids that need quoting, one, two or no policies, and undecided ones."""
    out = []
    for k in range(n):
        reasons = (("p2", "p10") if k % 3 == 0 else ("p1",)) if k % 5 else ()
        residuals = (P7,) if not reasons else ()
        out.append(
            AccessEntry(
                EntityUID("User", f'u{k % 4}, "q"'),
                ACTION,
                EntityUID("Doc", f"d{k}"),
                "allow" if reasons else "conditional",
                reasons,
                residuals,
            )
        )
    return out


def _batch(rows: list[AccessEntry]) -> object:
    """The rows as a SQL engine hands them (``answer_schema(reasons=True)``)."""
    cols = [
        [e.principal.type for e in rows],
        [e.principal.id for e in rows],
        [e.action.type for e in rows],
        [e.action.id for e in rows],
        [e.resource.type for e in rows],
        [e.resource.id for e in rows],
        [e.decision for e in rows],
        [list(e.reasons) for e in rows],
        [[r.policy_id for r in e.residuals] for e in rows],
    ]
    names = [*answers.SPLIT_COLUMNS[:7], "reasons", "residuals"]
    types = [pa.string()] * 7 + [pa.list_(pa.string())] * 2
    return pa.record_batch(cols, schema=pa.schema(list(zip(names, types, strict=True))))


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_entries_and_batches_of_any_size_give_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, split: bool
) -> None:
    if fmt == "jsonl" and split:
        pytest.skip("--split-uids is csv and parquet only")
    monkeypatch.setattr(answers, "ROWS_AT_ONCE", 4)  # row groups and slices of 4 rows
    rows = _rows(23)
    a = AnswerWriter(fmt, str(tmp_path / "entries"), split=split)
    a.write(rows)
    a.close()
    b = AnswerWriter(fmt, str(tmp_path / "batches"), split=split, residuals={"p7": P7})
    for start, stop in ((0, 1), (1, 10), (10, 11), (11, 23)):  # uneven engine batches
        b.write_batch(_batch(rows[start:stop]))
    b.close()
    assert a.rows == b.rows == 23
    got = (tmp_path / "batches").read_bytes()
    assert got == (tmp_path / "entries").read_bytes()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(tmp_path / "batches").metadata
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [4] * 5 + [3]
        table = pq.read_table(tmp_path / "batches")
        assert table.column("policies").to_pylist()[:2] == [[], ["p1"]]
        assert table.column("residual").to_pylist()[0] == "permit p7: (conditional in SQL)"
    elif fmt == "csv":
        text = got.decode()
        assert "p2 p10" in text and "\r\n" in text
        assert ('"u0, ""q"""' if split else '"User::""u0, \\""q\\""""') in text
    else:
        first = json.loads(got.decode().splitlines()[0])
        assert first["residuals"] == [{"policy_id": "p7", "effect": "permit"}]


def test_an_empty_answer_is_a_file_with_the_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for fmt in ("csv", "parquet"):
        w = AnswerWriter(fmt, str(tmp_path / f"e.{fmt}"))
        w.close()
    assert (tmp_path / "e.csv").read_bytes() == (",".join(answers.COLUMNS) + "\r\n").encode()
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.num_rows == 0 and table.column_names == list(answers.COLUMNS)


def test_a_lone_surrogate_written_as_it_is_is_refused(capsys: Capsys, tmp_path: Path) -> None:
    """An id with a lone surrogate: as ``Type::"id"`` (and in JSON lines) it is escaped; in
    a column of its own (``--split-uids``) a UTF-8 file cannot hold it: status 2 and one
    line naming the column, never a traceback."""
    policies = tmp_path / "p.polang"
    policies.write_text('permit(principal, action == Action::"view", resource);\n')
    entities = tmp_path / "e.json"
    entities.write_text(
        '[{"uid": {"type": "User", "id": "a\\ud800b"}, "attrs": {}},'
        ' {"uid": {"type": "Doc", "id": "d"}, "attrs": {}}]'
    )
    base = ["matrix", "--policies", str(policies), "--entities", str(entities), "--context", "{}"]
    out = tmp_path / "m"
    code, _, err = run(capsys, *base, "--format", "csv", "--output", str(out))
    assert code == 0, err
    assert 'User::""a\\u{d800}b""' in out.read_text(encoding="utf-8")
    code, _, err = run(capsys, *base, "--format", "jsonl", "--output", str(out))
    assert code == 0 and "\\ud800" in out.read_text(encoding="utf-8"), err
    for fmt in ("csv", "parquet"):
        code, stdout, err = run(
            capsys, *base, "--format", fmt, "--output", str(out), "--split-uids"
        )
        assert (code, stdout) == (2, ""), err
        assert err.startswith(f"error: --format {fmt}: the answer's principal_id ")
        assert "lone surrogate" in err and err.count("\n") == 1
