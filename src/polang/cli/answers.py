"""The answers ``who-can``, ``what-can`` and ``matrix`` write as ``--format csv``, ``jsonl``
or ``parquet``: one writer for every engine, so that one answer has one shape (columns,
quoting, order, the policies of each entry, Parquet row groups) whether it was computed
in process, by DuckDB or by Spark.

The in-process engine hands the writer its entries; a SQL engine hands it its record
batches as it produces them (the writer is the query's ``output``, an ``AnswerSink``), a
batch at a time, so that a large answer is never held whole. A batch is turned into the
same columns as entries are, column by column (no Python object per row but its cells).
Only the standard library is imported here (pyarrow for SQL batches and Parquet).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, TextIO

from polang.errors import RequestError

WRITTEN = ("csv", "jsonl", "parquet")
"""The formats this module writes (``table`` and ``json`` are printed by the commands)."""

COLUMNS = ("principal", "action", "resource", "decision", "policies", "residual")
"""CSV and Parquet columns: each uid as its text, ``Type::"id"``."""

SPLIT_COLUMNS = (
    "principal_type",
    "principal_id",
    "action_type",
    "action_id",
    "resource_type",
    "resource_id",
    "decision",
    "policies",
    "residual",
)
"""CSV and Parquet columns with ``--split-uids``: each uid as its type and its id."""

ROWS_AT_ONCE = 65_536
"""Entries the writer converts or holds at once: entries and a SQL engine's batches are
taken in slices of this many rows, and a Parquet row group has this many (whatever the
engine's batches were, so the files are the same)."""

UID_TEXTS_KEPT = 100_000
"""Uid texts remembered (a uid's text is made once, not once per entry naming it)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _undecided(r: Any) -> str:
    """One undecided policy: ``effect id: conditions``; a SQL engine's residual names the
    policy only (its conditions stay in the database)."""
    if r.conditions is None:
        return f"{r.effect} {r.policy_id}: (conditional in SQL)"
    return f"{r.effect} {r.policy_id}: " + (" and ".join(r.conditions) or "(scope)")


def residual_text(entry: Any) -> str:
    """An entry's undecided policies, ``; ``-separated (the ``residual`` column)."""
    return "; ".join(map(_undecided, entry.residuals))


def _sql_rows(batch: Any, residuals: Mapping[str, Any]) -> list[Any]:
    """A SQL answer's record batch (``answer_schema(reasons=True)``) as entries
    (``residuals``: the engine's residual per policy id)."""
    from polang.analysis.query import AccessEntry  # polang --help stays fast
    from polang.language.values import EntityUID

    cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
    pt, pi, at, ai, rt, ri, ds, why, res = cols
    new = tuple.__new__
    return [
        new(
            AccessEntry,
            (
                new(EntityUID, (pt[k], pi[k])),
                new(EntityUID, (at[k], ai[k])),
                new(EntityUID, (rt[k], ri[k])),
                ds[k],
                tuple(why[k] or ()),
                tuple(residuals[x] for x in res[k] or ()),
            ),
        )
        for k in range(len(ds))
    ]


class AnswerWriter:
    """Writes an answer to ``output`` (a file name; standard output when ``None``) as
    ``fmt``: entries from the in-process engine (:meth:`write`) or record batches from a
    SQL engine (:meth:`write_batch`), in the answer's order, then :meth:`close`.

    - ``csv``: :data:`COLUMNS` (or :data:`SPLIT_COLUMNS` with ``split``), Python's CSV
      dialect (fields quoted where needed, ``\\r\\n``), the policies space-separated;
    - ``jsonl``: one entry per line, as ``--format json`` lists them (uids as
      ``{"type", "id"}`` objects);
    - ``parquet`` (needs pyarrow): the CSV columns, the policies as a list of strings,
      row groups of :data:`ROWS_AT_ONCE` entries.

    Nothing is written before the first entry or :meth:`close` (a query that turns out
    to be answered elsewhere leaves no file behind)."""

    def __init__(
        self,
        fmt: str,
        output: str | None = None,
        *,
        split: bool = False,
        residuals: Mapping[str, Any] | None = None,
    ) -> None:
        """``residuals``: a SQL engine's residual per policy id (its batches name the
        policies of a conditional entry by id)."""
        if fmt not in WRITTEN:
            raise RequestError(f"--format {fmt}: not a written answer ({', '.join(WRITTEN)})")
        self.fmt = fmt
        self.output = output
        self.split = split
        self.residuals = residuals or {}
        self.rows = 0
        self._file: TextIO | None = None
        self._csv: Any = None
        self._parquet: Any = None
        self._pending: list[Any] = []  # Parquet: record batches not yet in a row group
        self._pending_rows = 0
        self._texts: dict[tuple[str, str], str] = {}
        self._closed = False

    # -- what goes in -----------------------------------------------------------------------

    def write(self, entries: Iterable[Any]) -> None:
        """In-process entries (or any with their fields and ``to_dict``)."""
        self._open()
        it = iter(entries)
        while chunk := list(islice(it, ROWS_AT_ONCE)):
            self.rows += len(chunk)
            if self.fmt == "jsonl":
                assert self._file is not None
                self._file.writelines(json.dumps(e.to_dict()) + "\n" for e in chunk)
            else:
                columns = self._entry_columns(chunk)
                self._check_text(columns)
                self._put(columns)

    def write_batch(self, batch: Any) -> None:
        """A SQL engine's record batch (the ``AnswerSink`` the engine writes to), read a
        slice at a time (DuckDB's batches hold up to a million rows)."""
        self._open()
        for start in range(0, batch.num_rows, ROWS_AT_ONCE):
            part = batch.slice(start, ROWS_AT_ONCE)
            if self.fmt == "jsonl":
                self.write(_sql_rows(part, self.residuals))
            else:
                self.rows += part.num_rows
                self._put(self._batch_columns(part))

    def close(self) -> None:
        if self._closed:
            return
        self._open()
        self._closed = True
        if self.fmt == "parquet":
            self._flush(final=True)
            self._parquet.close()
        if self._file is not None and self._file is not sys.stdout:
            self._file.close()
        elif self._file is not None:
            self._file.flush()

    # -- the columns ------------------------------------------------------------------------

    def _uid_texts(self, types: list[str], ids: list[str]) -> list[str]:
        """``Type::"id"`` of each (type, id), each distinct uid formatted once."""
        from polang.language.values import EntityUID  # polang --help stays fast

        texts = self._texts
        if len(texts) >= UID_TEXTS_KEPT:
            texts.clear()
        new = tuple.__new__
        out = []
        for key in zip(types, ids, strict=True):
            t = texts.get(key)
            if t is None:
                t = texts[key] = str(new(EntityUID, key))
            out.append(t)
        return out

    def _uid_columns(self, uids: list[tuple[list[str], list[str]]]) -> list[list[str]]:
        if self.split:
            return [c for pair in uids for c in pair]
        return [self._uid_texts(t, i) for t, i in uids]

    def _entry_columns(self, chunk: list[Any]) -> list[Any]:
        """The columns of entries (``AccessEntry``)."""
        uids = [
            ([getattr(e, who).type for e in chunk], [getattr(e, who).id for e in chunk])
            for who in ("principal", "action", "resource")
        ]
        policies: list[Any] = (
            [" ".join(e.reasons) for e in chunk]
            if self.fmt == "csv"
            else [list(e.reasons) for e in chunk]
        )
        return [
            *self._uid_columns(uids),
            [e.decision for e in chunk],
            policies,
            [residual_text(e) for e in chunk],
        ]

    def _batch_columns(self, batch: Any) -> list[Any]:
        """The columns of a SQL engine's batch, made column by column: the same cells as
        :meth:`_entry_columns` gives the same entries."""
        import pyarrow.compute as pc

        text = [batch.column(i).to_pylist() for i in range(7)]
        uids = [(text[0], text[1]), (text[2], text[3]), (text[4], text[5])]
        reasons, residuals = batch.column(7), batch.column(8)
        policies = pc.binary_join(reasons, " ").to_pylist() if self.fmt == "csv" else reasons
        if pc.max(pc.list_value_length(residuals)).as_py():
            of = self.residuals
            residual = [
                "; ".join(_undecided(of[x]) for x in r or ()) for r in residuals.to_pylist()
            ]
        else:  # the usual case: nothing undecided
            residual = [""] * batch.num_rows
        return [*self._uid_columns(uids), text[6], policies, residual]

    def _check_text(self, columns: list[Any]) -> None:
        """CSV and Parquet files hold UTF-8 text: a cell written as it is (an id with
        ``split``, a policy id) holding a lone surrogate is refused with its column named,
        never written otherwise. (A uid as ``Type::"id"`` escapes it, as JSON does; a SQL
        engine's batches cannot hold one.)"""
        names = SPLIT_COLUMNS if self.split else COLUMNS
        for name, col in zip(names, columns, strict=True):
            if name in ("principal", "action", "resource"):
                continue
            texts = [t for v in col for t in ([v] if isinstance(v, str) else v)]
            if _SURROGATE.search("\x00".join(texts)) is None:
                continue
            from polang.language.values import quote_string  # polang --help stays fast

            bad = next(t for t in texts if _SURROGATE.search(t))
            raise RequestError(
                f"--format {self.fmt}: the answer's {name} {quote_string(bad)} has a lone "
                "surrogate, which a UTF-8 file cannot hold as it is (--format jsonl escapes "
                'it, as the uids\' Type::"id" text does)'
            )

    # -- how it comes out -------------------------------------------------------------------

    def _open(self) -> None:
        if self._file is not None or self._parquet is not None:
            return
        if self.fmt == "parquet":
            if self.output is None:
                raise RequestError("--format parquet writes a file: give --output FILE")
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise RequestError(
                    "--format parquet needs the pyarrow package: pip install 'polang[duckdb]'"
                ) from None
            self._parquet = pq.ParquetWriter(self.output, self._arrow_schema())
            return
        if self.output is None:
            self._file = sys.stdout
        else:
            self._file = open(self.output, "w", encoding="utf-8", newline="")  # noqa: SIM115
        if self.fmt == "csv":
            self._csv = csv.writer(self._file)
            self._csv.writerow(SPLIT_COLUMNS if self.split else COLUMNS)

    def _put(self, columns: list[Any]) -> None:
        if self.fmt == "csv":
            py = [c if isinstance(c, list) else c.to_pylist() for c in columns]
            self._csv.writerows(zip(*py, strict=True))
            return
        import pyarrow as pa

        batch = pa.record_batch(columns, schema=self._arrow_schema())
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        if self._pending_rows >= ROWS_AT_ONCE:
            self._flush()

    def _arrow_schema(self) -> Any:
        import pyarrow as pa

        names = SPLIT_COLUMNS if self.split else COLUMNS
        return pa.schema(
            [(n, pa.list_(pa.string()) if n == "policies" else pa.string()) for n in names]
        )

    def _flush(self, final: bool = False) -> None:
        """Whole row groups of :data:`ROWS_AT_ONCE` entries (and the rest when ``final``)."""
        import pyarrow as pa

        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self._arrow_schema())
        for group in _groups(table, final):
            self._parquet.write_table(group, row_group_size=ROWS_AT_ONCE)
        done = table.num_rows - table.num_rows % ROWS_AT_ONCE if not final else table.num_rows
        rest = table.slice(done)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows


def _groups(table: Any, final: bool) -> Iterator[Any]:
    """``table`` in row groups of :data:`ROWS_AT_ONCE` rows (the last one shorter only
    when ``final``)."""
    n = table.num_rows
    for start in range(0, n, ROWS_AT_ONCE):
        if start + ROWS_AT_ONCE > n and not final:
            return
        yield table.slice(start, ROWS_AT_ONCE)
