"""DuckDB, embedded: loads the tables and runs the generated SQL.

Entities held in process (a store's, an engine's) are converted to Arrow tables, one per
entity type, and copied into DuckDB; entity files are read by DuckDB itself
(:mod:`polang.sql.files`, with its ``DuckDBFileEngine``). The hierarchy closure
is built by a recursive CTE. Answers are fetched as Arrow record batches and written with
pyarrow's Parquet / CSV writers, one batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from polang.datalog.compiled import Compiler
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.ir import Program
from polang.errors import EvaluationError
from polang.language.entities import Entity
from polang.language.hierarchy import check_hierarchy, too_deep_message
from polang.language.schema import Schema
from polang.language.values import EntityUID, RecordValue

from .engine import (
    DEFAULT_BATCH_PAIRS,
    Columns,
    Fetched,
    Format,
    Job,
    Output,
    SqlEngine,
    answer_schema,
    is_sink,
)
from .lower import ANC, Layout, num
from .plan import UDF_NAME, Population, is_action_type, read_program
from .tables import SqlError, TableSpec, _Mismatch, convert, entity_uids, program_uids, table_spec
from .types import any_surrogate, arrow_type, has_surrogate, sql_name, to_sql_text

ANC_SQL = f"""
CREATE OR REPLACE TABLE {ANC} AS
WITH RECURSIVE closure(eid, aeid) AS (
    SELECT eid, eid FROM polang_uid
    UNION
    SELECT c.eid, p.peid FROM closure AS c JOIN polang_parent AS p ON p.eid = c.aeid
)
SELECT eid, aeid FROM closure
"""


def build_closure(con: Any) -> None:
    """``polang_anc`` from ``polang_parent``, once the parents are known to be at most
    ``MAX_HIERARCHY_DEPTH`` deep: the closure of a chain grows with the square of its
    depth (the in-process readers refuse such chains with the same walk and message)."""
    rows = con.execute("SELECT eid, list(peid) FROM polang_parent GROUP BY eid").fetchall()
    if rows:
        parents: dict[int, list[int]] = dict(rows)
        problem = check_hierarchy(parents, lambda e: parents.get(e, ()), cycles=False)
        if problem is not None:
            chain = problem.chain
            uids = {
                eid: EntityUID(t, i)
                for eid, t, i in con.execute(
                    "SELECT eid, type, id FROM polang_uid WHERE list_contains(?, eid)",
                    [chain],
                ).fetchall()
            }
            raise SqlError(
                too_deep_message(
                    "entity hierarchy", chain, lambda e: str(uids.get(e, f"entity #{e}"))
                )
            )
    con.execute(ANC_SQL)


DICTIONARY_PAGE_BYTES = 64 << 20
"""The Parquet dictionary page limit for answers: a batch's distinct ids must fit, or the
writer falls back to plain strings (files several times larger)."""


def _compact(eids: Any, ids: Any) -> Any:
    """``ids[eids]`` as a dictionary array over the batch's own distinct ids (a dictionary
    of every uid would be written whole into every row group).

    The distinct eids are marked in a mask over the batch's eid span (linear; NumPy's
    ``unique`` with an inverse costs ~15x more on a million rows), or found by
    ``unique`` when the span is much wider than the batch."""
    import numpy as np
    import pyarrow as pa

    lo = int(eids.min())
    span = int(eids.max()) - lo + 1
    if span <= 4 * len(eids) + (1 << 20):
        off = eids - lo
        seen = np.zeros(span, dtype=bool)
        seen[off] = True
        uniq = np.flatnonzero(seen) + lo
        inv = (np.cumsum(seen, dtype=np.int32) - 1)[off]
    else:
        uniq, inv = np.unique(eids, return_inverse=True)
    return pa.DictionaryArray.from_arrays(
        pa.array(inv.astype(np.int32, copy=False)), ids.take(pa.array(uniq))
    )


def _type_column(eids: Any, codes: Any, names: Any, zeros: Any) -> Any:
    """The type names of ``eids`` as a dictionary array. eids are numbered in (type, id)
    order, so each type is one range of eids: when the batch's first and last eids
    have the same type, so have all (one name, all-zero indexes, no gather)."""
    import pyarrow as pa

    lo, hi = codes[int(eids.min())], codes[int(eids.max())]
    if lo == hi:
        return pa.DictionaryArray.from_arrays(zeros, names.take(pa.array([lo])))
    return pa.DictionaryArray.from_arrays(pa.array(codes[eids]), names)


def _sorted_unique(pairs: list[Any]) -> tuple[Any, Any]:
    """The pairs ``(r, p)`` ordered by ``r`` then ``p``, each once: one sort of a single
    integer key ``(r - r0) * width + (p - p0)`` (32 bits when the pairs' span fits; NumPy
    sorts those with SIMD, far faster than an ``ORDER BY`` of two columns).

    ``pairs`` is the list ``[r, p]``, emptied: the fetched arrays (with their repeats) are
    freed as soon as the key is built, not held through the sort."""
    import numpy as np

    p = pairs.pop()
    r = pairs.pop()
    r0, p0 = int(r.min()), int(p.min())
    width = int(p.max()) - p0 + 1
    span = (int(r.max()) - r0 + 1) * width
    dt = np.int32 if span < (1 << 31) else np.int64
    key = r.astype(dt)
    del r
    key -= r0
    key *= width
    key += p
    del p
    key -= p0
    key.sort()
    keep = np.empty(len(key), dtype=bool)
    keep[0] = True
    np.not_equal(key[1:], key[:-1], out=keep[1:])
    key = key[keep]
    rs, ps = np.divmod(key, width)
    rs += r0
    ps += p0
    return rs.astype(np.int32, copy=False), ps.astype(np.int32, copy=False)


def _texts(arr: Any) -> list[str]:
    """A string column as Python strings; a dictionary column through its indexes
    (pyarrow's own ``to_pylist`` of a dictionary array makes a scalar per row: ~1.5 µs)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(arr.type):
        return list(arr.to_pylist())
    names = arr.dictionary.to_pylist()
    return [names[i] for i in arr.indices.to_numpy(zero_copy_only=False).tolist()]


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise SqlError(
            "the DuckDB engine needs the duckdb package: pip install 'polang[duckdb]'"
        ) from None
    return duckdb


def connect(
    database: str = ":memory:", *, threads: int | None = None, memory_limit: str | None = None
) -> Any:
    duckdb = _import_duckdb()
    config: dict[str, Any] = {}
    if threads is not None:
        config["threads"] = threads
    if memory_limit is not None:
        config["memory_limit"] = memory_limit
    return duckdb.connect(database, config=config)


@contextmanager
def duckdb_errors(what: str, names: Mapping[str, str] | None = None) -> Iterator[None]:
    """DuckDB's own errors (``duckdb.Error``: malformed input, a memory limit reached...)
    as a :class:`SqlError` saying ``what`` failed, with DuckDB's first line (the paths
    ``names`` maps written as the names the caller gave)."""
    duckdb = _import_duckdb()
    try:
        yield
    except duckdb.Error as e:
        text = str(e).strip()
        text = text.splitlines()[0] if text else type(e).__name__
        for path, name in (names or {}).items():
            text = text.replace(path, name)
        raise SqlError(f"{what}: {text[:500]}") from None


class DuckRunner:
    """Runs the integer queries; uids and policy ids are decoded with Arrow ``take`` (in
    order, no join, no strings in DuckDB's sort)."""

    dialect = "duckdb"
    drops_sorted_dups = True
    batch_rows = 1_000_000
    """Rows per Arrow batch fetched (and written) at a time."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.uids: list[EntityUID] = []
        self.policy_ids: list[str] = []
        self._arrays: tuple[Any, Any, Any] | None = None
        self._codes: tuple[Any, Any] | None = None
        self._unwritable: Any = None
        """Per eid, whether its uid has a lone surrogate (None: no uid has one)."""
        self._bad_policy: str | None = None

    def _uid_arrays(self) -> tuple[Any, Any, Any]:
        import pyarrow as pa

        if self._arrays is None:
            if self.uids:
                tl, il = [u.type for u in self.uids], [u.id for u in self.uids]
                if any_surrogate(tl) or any_surrogate(il):  # Arrow holds UTF-8 only
                    import numpy as np

                    self._unwritable = np.array(
                        [has_surrogate(u.type) or has_surrogate(u.id) for u in self.uids]
                    )
                    tl, il = _names(tl), _names(il)
                types, ids = pa.array(tl, pa.string()), pa.array(il, pa.string())
            else:  # the numbering lives in DuckDB (entities read from files)
                t = self.con.sql("SELECT type, id FROM polang_uid ORDER BY eid").to_arrow_table()
                types, ids = t.column("type").combine_chunks(), t.column("id").combine_chunks()
            self._bad_policy = next((x for x in self.policy_ids if has_surrogate(x)), None)
            pols = pa.array([sql_name(x) for x in self.policy_ids], pa.string())
            self._arrays = (types, ids, pols)
        return self._arrays

    def _type_codes(self) -> tuple[Any, Any]:
        """Per eid the index of its type in the (few) type names, and the names."""
        import pyarrow.compute as pc

        if self._codes is None:
            enc = pc.dictionary_encode(self._uid_arrays()[0])
            self._codes = (enc.indices.to_numpy(zero_copy_only=False), enc.dictionary)
        return self._codes

    def _uid_list(self, eids: Any) -> list[EntityUID]:
        """The uids of ``eids`` (a NumPy array), one ``EntityUID`` per distinct eid (a
        what_can's principal, a who_can's resource) and type names shared, not copied."""
        if self.uids:
            uids = self.uids
            return [uids[i] for i in eids.tolist()]
        import numpy as np

        if not len(eids):
            return []
        ids = self._uid_arrays()[1]
        codes, names = self._type_codes()
        rising = bool((eids[1:] > eids[:-1]).all())
        uniq, inv = (eids, None) if rising else np.unique(eids, return_inverse=True)
        tn = names.to_pylist()
        new = tuple.__new__
        made = [
            new(EntityUID, (tn[c], i))
            for c, i in zip(codes[uniq].tolist(), ids.take(uniq).to_pylist(), strict=True)
        ]
        return made if inv is None else [made[k] for k in inv.tolist()]

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with duckdb_errors("DuckDB could not run the query"):
            return list(self.con.execute(sql).fetchall())

    def _batches(self, job: Job) -> Iterator[Any]:
        """The job's rows as Arrow batches, ordered by (r, p)."""
        self._uid_arrays()  # before the query: one open result per connection
        if job.sorted_dups:
            yield from self._pair_batches(job)
            return
        for batch in self.con.sql(job.sql).to_arrow_reader(self.batch_rows):
            if batch.num_rows:
                yield batch

    def _pair_batches(self, job: Job) -> Iterator[Any]:
        """A ``sorted_dups`` job: its pairs, fetched unordered (DuckDB free to run every
        thread without keeping an order), then ordered and made unique in NumPy
        (:func:`_sorted_unique`). A job holds one matrix batch, so at most ``batch_pairs``
        distinct pairs (and their repeats) are held at once."""
        yield from self._ordered_batches(self._fetch_pairs(job))

    def _fetch_pairs(self, job: Job) -> list[Any] | None:
        """A ``sorted_dups`` job's pairs as fetched: unordered, repeats kept."""
        import numpy as np

        rs: list[Any] = []
        ps: list[Any] = []
        con = self.con
        before = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()
        con.execute("SET preserve_insertion_order = false")
        try:
            for b in con.sql(job.sql).to_arrow_reader(self.batch_rows):
                if b.num_rows:
                    rs.append(b.column("r").to_numpy(zero_copy_only=False))
                    ps.append(b.column("p").to_numpy(zero_copy_only=False))
        finally:
            con.execute(f"SET preserve_insertion_order = {bool(before[0][0])}")
        if not rs:
            return None
        pairs = [np.concatenate(rs)]
        rs.clear()
        pairs.append(np.concatenate(ps))
        return pairs

    def _ordered_batches(self, pairs: list[Any] | None) -> Iterator[Any]:
        """Fetched pairs ordered, each once, as the answer's record batches (the list is
        emptied: see :func:`_sorted_unique`)."""
        import numpy as np
        import pyarrow as pa

        if pairs is None:
            return
        r, p = _sorted_unique(pairs)
        allow = pa.array(["allow"], pa.string())
        step = self.batch_rows
        for i in range(0, len(r), step):
            n = min(step, len(r) - i)
            yield pa.record_batch(
                {
                    "r": pa.array(r[i : i + n]),
                    "p": pa.array(p[i : i + n]),
                    "decision": pa.DictionaryArray.from_arrays(
                        pa.array(np.zeros(n, dtype=np.int32)), allow
                    ),
                }
            )

    def _written_batches(self, jobs: Sequence[Job]) -> Iterator[tuple[Any, EntityUID]]:
        """Every job's batches, in order. When every job leaves its pairs to NumPy, the
        next job's query runs in a thread while this one's pairs are sorted (DuckDB and
        NumPy each keep a core busy: alone, each leaves one of two idle)."""
        if len(jobs) < 2 or not all(j.sorted_dups for j in jobs):
            for job in jobs:
                for raw in self._batches(job):
                    yield raw, job.action
            return
        from concurrent.futures import ThreadPoolExecutor

        self._uid_arrays()
        with ThreadPoolExecutor(1, thread_name_prefix="polang-sql-fetch") as pool:
            nxt = pool.submit(self._fetch_pairs, jobs[0])
            for k, job in enumerate(jobs):
                pairs = nxt.result()
                if k + 1 < len(jobs):
                    nxt = pool.submit(self._fetch_pairs, jobs[k + 1])
                for raw in self._ordered_batches(pairs):
                    yield raw, job.action
                del pairs

    def rows(self, job: Job, reasons: bool) -> Fetched:
        with duckdb_errors("DuckDB could not run the query"):
            batches = list(self._batches(job))
        n = sum(b.num_rows for b in batches)

        def decode() -> Iterator[Columns]:
            for b in batches:
                ps = self._uid_list(b.column("p").to_numpy(zero_copy_only=False))
                rs = self._uid_list(b.column("r").to_numpy(zero_copy_only=False))
                ds = _texts(b.column("decision"))
                if reasons:
                    yield (
                        ps,
                        rs,
                        ds,
                        b.column("reasons").to_pylist(),
                        b.column("residuals").to_pylist(),
                    )
                else:
                    yield ps, rs, ds, None, None

        def arrow() -> Iterator[Any]:
            for b in batches:
                yield self._decode(b, job.action, False, "jsonl")

        return Fetched(job.action, n, decode, arrow)

    def _decode(self, batch: Any, action: EntityUID, reasons: bool, fmt: Format) -> Any:
        """A batch of eids as the answer's columns. For Parquet every column is a
        dictionary array (types over the type names, ids over the batch's own ids): no
        string is hashed, the writer puts the indexes in the file and, the file's schema
        saying ``string``, readers see text."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        types, ids, pols = self._uid_arrays()
        self._check_writable(batch, action, reasons)
        n = batch.num_rows
        p, r = batch.column("p"), batch.column("r")
        dec = batch.column("decision")
        if fmt == "parquet":
            d = pa.DictionaryArray.from_arrays
            codes, names = self._type_codes()
            pn = p.to_numpy(zero_copy_only=False)
            rn = r.to_numpy(zero_copy_only=False)
            zeros = pa.array(np.zeros(n, dtype=np.int32))
            p_t, r_t = _type_column(pn, codes, names, zeros), _type_column(rn, codes, names, zeros)
            p_i, r_i = _compact(pn, ids), _compact(rn, ids)
            a_t = d(zeros, pa.array([sql_name(action.type)], pa.string()))
            a_i = d(zeros, pa.array([sql_name(action.id)], pa.string()))
            if not pa.types.is_dictionary(dec.type):
                dec = dec.dictionary_encode()
        else:
            if pa.types.is_dictionary(dec.type):
                dec = dec.dictionary_decode()
            p_t, p_i, r_t, r_i = types.take(p), ids.take(p), types.take(r), ids.take(r)
            a_t = pa.repeat(pa.scalar(sql_name(action.type), pa.string()), n)
            a_i = pa.repeat(pa.scalar(sql_name(action.id), pa.string()), n)
        cols = {
            "principal_type": p_t,
            "principal_id": p_i,
            "action_type": a_t,
            "action_id": a_i,
            "resource_type": r_t,
            "resource_id": r_i,
            "decision": dec,
        }
        if reasons:
            for name in ("reasons", "residuals"):
                lst = batch.column(name)
                flat = pols.take(pc.list_flatten(lst))
                named = pa.ListArray.from_arrays(lst.offsets, flat)
                cols[name] = pc.binary_join(named, " ") if fmt == "csv" else named
        return pa.record_batch(cols)

    def _check_writable(self, batch: Any, action: EntityUID, reasons: bool) -> None:
        """An answer as Arrow (files, ``to_arrow``) holds UTF-8 text only: one that would
        hold a uid (or, with reasons, a policy id) with a lone surrogate is refused, never
        written otherwise. (The answer's entries hold such a uid as it is.)"""
        bad = None
        if self._unwritable is not None:
            for side in ("p", "r"):
                eids = batch.column(side).to_numpy(zero_copy_only=False)
                hit = self._unwritable[eids]
                if hit.any():
                    bad = f"the entity {self.uids[int(eids[hit.argmax()])]}"
                    break
        if bad is None and (has_surrogate(action.type) or has_surrogate(action.id)):
            bad = f"the action {action}"
        if bad is None and reasons and self._bad_policy is not None:
            bad = f"the policy {json.dumps(self._bad_policy)}"
        if bad is not None:
            raise SqlError(
                f"the answer holds {bad}, whose text has a lone surrogate: Arrow, and so a "
                "Parquet, CSV or JSON-lines answer, holds UTF-8 text only (read the "
                "answer's entries instead)"
            )

    def write(self, jobs: Sequence[Job], target: Output, fmt: Format, reasons: bool) -> int:
        """Every job's rows to the file ``target``, a batch at a time: DuckDB computes the
        next batch (in a thread of its own, see :meth:`_written_batches`) while this thread
        orders the last one's pairs and a writer thread decodes and writes the one before
        (at most two record batches wait, so memory stays flat in the answer's size).
        ``target`` an ``AnswerSink``: the decoded batches are handed to it instead."""
        sink = target if is_sink(target) else None
        path = Path(str(target)) if sink is None else Path()
        import queue
        import threading

        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        self._uid_arrays()
        todo: queue.Queue[tuple[Any, EntityUID] | None] = queue.Queue(maxsize=2)
        failed: list[BaseException] = []
        total = 0

        def writer_loop() -> None:
            writer: Any = None
            text = None
            try:
                while (item := todo.get()) is not None:
                    if failed:
                        continue  # drain: the producer must not block on a full queue
                    raw, action = item
                    if sink is not None:  # plain columns, lists of policy ids
                        sink.write_batch(self._decode(raw, action, reasons, "jsonl"))
                        continue
                    batch = self._decode(raw, action, reasons, fmt)
                    if fmt == "jsonl":
                        if text is None:
                            text = path.open("w", encoding="utf-8")
                        for row in batch.to_pylist():
                            text.write(json.dumps(row, separators=(",", ":")) + "\n")
                    else:
                        if writer is None:
                            writer = (
                                pq.ParquetWriter(
                                    str(path),
                                    batch.schema,
                                    store_schema=False,
                                    write_statistics=False,  # min/max cost half the writing
                                    dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES,
                                )
                                if fmt == "parquet"
                                else pacsv.CSVWriter(str(path), batch.schema)
                            )
                        writer.write_batch(batch)
            except BaseException as e:  # handed to the calling thread
                failed.append(e)
                while todo.get() is not None:
                    pass
            finally:
                try:
                    if writer is not None:
                        writer.close()
                    if text is not None:
                        text.close()
                except BaseException as e:
                    failed.append(e)

        thread = threading.Thread(target=writer_loop, name="polang-sql-writer", daemon=True)
        thread.start()
        try:
            with duckdb_errors("DuckDB could not run the query"):
                for raw, action in self._written_batches(jobs):
                    if failed:
                        break
                    todo.put((raw, action))
                    total += raw.num_rows
        finally:
            todo.put(None)
            thread.join()
        if failed:
            import pyarrow as pa

            if sink is None and isinstance(failed[0], OSError | pa.ArrowException):
                raise SqlError(f"cannot write the answer to {target}: {failed[0]}") from None
            raise failed[0]
        if total == 0 and sink is None:  # an empty answer still makes a file, with the columns
            self._write_empty(path, fmt, reasons)
        return total

    def _write_empty(self, path: Path, fmt: Format, reasons: bool) -> None:
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        table = answer_schema(reasons, csv=fmt == "csv").empty_table()
        if fmt == "parquet":
            pq.write_table(table, str(path))
        elif fmt == "csv":
            pacsv.write_csv(table, str(path))
        else:
            path.write_text("", encoding="utf-8")


# ======================================================================== loading


def _actions(
    schema: Schema | None, types: Iterable[EntityUID], program: Program
) -> list[EntityUID]:
    if schema is not None:
        return sorted(schema.actions)
    found = set(types)
    for pol in read_program(program):
        for _op, arg in pol.tests["action"]:
            for u in arg if isinstance(arg, frozenset) else (arg,):
                if type(u) is EntityUID:
                    found.add(u)
    return sorted(found)


class _Loaded:
    """What a load leaves for the engine: the uid numbering and the population."""

    def __init__(self, uids: list[EntityUID], spec: TableSpec, stored_types: set[str]) -> None:
        self.uids = uids
        self.eid = {u: i for i, u in enumerate(uids)}
        self.spec = spec
        self.stored_types = frozenset(stored_types)
        self._unknown: dict[EntityUID, int] = {}

    def eid_exp(self, uid: EntityUID) -> Any:
        i = self.eid.get(uid)
        if i is None:  # a uid no table holds (from the context): equal only to itself
            i = self._unknown.setdefault(uid, -1 - len(self._unknown))
        return num(i)


def load_entities(
    con: Any, entities: Iterable[Entity], schema: Schema | None, program: Program
) -> _Loaded:
    """Copy entities held in process into DuckDB tables (via Arrow)."""
    import pyarrow as pa

    ents = list(entities)
    spec = table_spec(schema, ents)
    uid_set = set(entity_uids(ents)) | program_uids(program)
    if schema is not None:
        uid_set.update(schema.actions)
    uids = sorted(uid_set)
    loaded = _Loaded(uids, spec, {e.uid.type for e in ents})
    eid = loaded.eid
    by_type: dict[str, list[Entity]] = {}
    for e in ents:
        by_type.setdefault(e.uid.type, []).append(e)
    for etype, tbl in spec.tables.items():
        rows = by_type.get(etype, [])
        rows.sort(key=lambda e: eid[e.uid])
        cols: dict[str, Any] = {"eid": pa.array([eid[e.uid] for e in rows], pa.int32())}
        for attr, (cname, ty) in tbl.attrs.items():
            if not ty.supported:
                continue
            vals = []
            for e in rows:
                v = e.attrs.get(attr)
                try:
                    vals.append(None if v is None else convert(ty, v, eid))
                except _Mismatch:
                    raise SqlError(
                        f"entity {e.uid}: attribute `{attr}` does not have the type {ty} "
                        "the table was laid out with"
                    ) from None
            cols[cname] = pa.array(vals, arrow_type(ty))
        if tbl.tags is not None and tbl.tags.supported:
            mt = pa.map_(pa.string(), arrow_type(tbl.tags))
            tv = []
            for e in rows:
                try:
                    tv.append(
                        [
                            (to_sql_text(k), convert(tbl.tags, v, eid))
                            for k, v in sorted(e.tags.items())
                        ]
                    )
                except _Mismatch:
                    raise SqlError(
                        f"entity {e.uid}: a tag does not have the type {tbl.tags}"
                    ) from None
            cols["tags"] = pa.array(tv, mt)
        _create(con, tbl.table, pa.table(cols))
    stored = {e.uid for e in ents}
    _create(
        con,
        "polang_uid",
        pa.table(
            {
                "eid": pa.array(range(len(uids)), pa.int32()),
                "type": pa.array(_names([u.type for u in uids]), pa.string()),
                "id": pa.array(_names([u.id for u in uids]), pa.string()),
                "stored": pa.array([u in stored for u in uids], pa.bool_()),
            }
        ),
    )
    edges = [(eid[e.uid], eid[p]) for e in ents for p in e.parents]
    _create(
        con,
        "polang_parent",
        pa.table(
            {
                "eid": pa.array([a for a, _ in edges], pa.int32()),
                "peid": pa.array([b for _, b in edges], pa.int32()),
            }
        ),
    )
    build_closure(con)
    return loaded


def _names(texts: list[str]) -> list[str]:
    """Uid strings as SQL holds them (:func:`types.sql_name`; one search when none needs it)."""
    return [sql_name(x) for x in texts] if any_surrogate(texts) else texts


def _create(con: Any, name: str, table: Any) -> None:
    con.register("_polang_load", table)
    try:
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _polang_load')
    finally:
        con.unregister("_polang_load")


# ======================================================================== the engine


class DuckDBEngine(SqlEngine):
    """The queries on DuckDB over entities held in process.

    Policies SQL cannot express run as a Python UDF over the same entities (exact, one
    call per candidate pair of their scope), so every answer is complete.
    """

    def __init__(
        self,
        program: Program,
        entities: EntityFacts | Iterable[Entity],
        schema: Schema | None = None,
        *,
        con: Any = None,
        threads: int | None = None,
        memory_limit: str | None = None,
        batch_pairs: int = DEFAULT_BATCH_PAIRS,
        udf: bool = True,
    ) -> None:
        self.con = con if con is not None else connect(threads=threads, memory_limit=memory_limit)
        facts = entities if isinstance(entities, EntityFacts) else EntityFacts(entities)
        self.facts = facts
        with duckdb_errors("DuckDB could not load the entities"):
            loaded = load_entities(self.con, facts.entities, schema, program)
        self.loaded = loaded
        action_anc = schema.action_ancestors if schema is not None else facts.ancestors_of
        pop = Population(
            Layout(loaded.spec.tables, loaded.eid_exp, to_sql_text),
            loaded.stored_types,
            _actions(
                schema,
                (u for u in loaded.uids if u in facts.entities and is_action_type(u.type)),
                program,
            ),
            action_anc,
            schema,
        )
        self._ctx: RecordValue = RecordValue()
        runner = DuckRunner(self.con)
        runner.uids = loaded.uids
        super().__init__(
            runner,
            program,
            pop,
            udf=udf,
            uid_of=loaded.uids.__getitem__,
            eid_of=self._eid_of_stored,
            set_context=self._set_ctx,
            resource_eids=self._eids_of_types,
            batch_pairs=batch_pairs,
            count_of=self._count,
        )
        runner.policy_ids = self.policy_ids
        if udf:
            self._register_udf(program)

    def _eid_of_stored(self, uid: EntityUID) -> int | None:
        if self.facts.get(uid) is None:
            return None
        return self.loaded.eid.get(uid)

    def _set_ctx(self, ctx: RecordValue | None) -> None:
        self._ctx = ctx if ctx is not None else RecordValue()

    def _eids_of_types(self, types: list[str]) -> list[int]:
        out: list[int] = []
        for t in types:
            tbl = self.loaded.spec.tables.get(t)
            if tbl is None:
                continue
            out.extend(r[0] for r in self.con.execute(f'SELECT eid FROM "{tbl.table}"').fetchall())
        out.sort()
        return out

    def _count(self, types: list[str]) -> int:
        n = 0
        for t in types:
            tbl = self.loaded.spec.tables.get(t)
            if tbl is not None:
                n += self.con.execute(f'SELECT count(*) FROM "{tbl.table}"').fetchall()[0][0]
        return n

    def _register_udf(self, program: Program) -> None:
        from duckdb.sqltypes import INTEGER

        compiler = Compiler(program)
        fns = [compiler.fn(p.cond_pred) for p in read_program(program)]
        uids = self.loaded.uids
        facts = self.facts

        def policy(i: int, a: int, p: int, r: int) -> int | None:
            req = Request(uids[p], uids[a], uids[r], self._ctx)
            try:
                v = fns[i](req, facts)
            except EvaluationError:
                return None
            if v is True:
                return 1
            if v is False:
                return 0
            return None  # a non-Bool condition is a type error

        self.con.create_function(
            UDF_NAME,
            policy,
            [INTEGER, INTEGER, INTEGER, INTEGER],
            INTEGER,
            null_handling="special",
            side_effects=False,
        )

    def close(self) -> None:
        self.con.close()
