"""who_can / what_can on DuckDB over a population read from Parquet (1,000,000 entities).

Usage::

    python benchmarks/bench_query_1m.py [--entities 1000000] [--policies 200] [--seed 7]
        [--queries 10] [--threads 2] [--dir DIR] [--verify]

The entities follow the shapes of ``benchmarks/workload.py`` (a group forest, users in
1-3 groups with department, level, clearance, an optional manager and a project tag, a
folder forest, documents in one folder with owner, labels, classification...), drawn with
NumPy and written with pyarrow as one Parquet file per entity type (``uid`` struct,
``attrs`` struct, ``parents`` list of uid structs, ``tags`` struct): no entity is ever a
Python object. The policies are the workload's own generators (``_Policies``) over these
groups and folders. Reported apart: generating the files, loading them (DuckDB reads
them, checks every value, numbers the uids and builds the closure in SQL), then
``who_can`` (a random action and document) and ``what_can`` (a random user, every
action) medians over ``--queries`` each, with the process's peak RSS. A query's time is
its answer held (counted, ready to stream or write); reading a ``what_can``'s every entry
as Python objects is timed apart (``what_can_entries_read_*``) and with the query
(``what_can_with_entries_max_s``), and so is taking it as a pyarrow Table
(``what_can_to_arrow_max_s``).

``--matrix`` also writes the whole access matrix to ``DIR/matrix.parquet`` (time, rows,
peak RSS: no entity is a Python object, so this is DuckDB's and the writer's memory).
``--verify`` (for small ``--entities``) also parses the same entities in process and
checks every query's rows against the in-process ``who_can`` / ``what_can``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import DEPTS, LABELS, PROJECTS, SCHEMA, _Policies


class _Names:
    """What the workload's policy generators read of a store: group and folder ids."""

    def __init__(self, n_groups: int, n_folders: int) -> None:
        self.groups = [f"g{i:04d}" for i in range(n_groups)]
        self.folders = [f"f{i:04d}" for i in range(n_folders)]


def _sizes(n: int) -> tuple[int, int, int, int]:
    """Groups, folders, users, documents: the workload's proportions."""
    g, f, u = max(2, n * 2 // 100), max(2, n * 8 // 100), max(2, n * 30 // 100)
    return g, f, u, max(2, n - g - f - u)


def generate_files(n: int, seed: int, out: Path) -> tuple[list[Path], _Names]:
    """One Parquet file per entity type, drawn vectorised with the workload's shapes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n_g, n_f, n_u, n_d = _sizes(n)
    names = _Names(n_g, n_f)
    uid_t = pa.struct([("type", pa.string()), ("id", pa.string())])

    def ids(prefix: str, k: int, width: int) -> Any:
        return pa.array([f"{prefix}{i:0{width}d}" for i in range(k)], pa.string())

    g_ids, f_ids = ids("g", n_g, 4), ids("f", n_f, 4)
    u_ids, d_ids = ids("u", n_u, 5), ids("d", n_d, 5)

    def uids(type_name: str, id_arr: Any) -> Any:
        return pa.StructArray.from_arrays(
            [pa.repeat(pa.scalar(type_name), len(id_arr)), id_arr], fields=list(uid_t)
        )

    def parents(type_name: str, id_arr: Any, idx: Any, offsets: Any) -> Any:
        """``idx``: parent indexes into ``id_arr``; ``offsets``: per entity."""
        refs = uids(type_name, id_arr.take(pa.array(idx, pa.int64())))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), refs)

    def forest(k: int, roots: int, p: float) -> tuple[Any, Any]:
        """A parent (an earlier node) with probability ``p`` for every node after ``roots``."""
        i = np.arange(k)
        has = (i >= roots) & (rng.random(k) < p)
        par = (rng.random(k) * np.maximum(i, 1)).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(has)])
        return par[has], offsets

    def choice(options: tuple[str, ...], k: int) -> Any:
        return pa.array(np.array(options, dtype=object)[rng.integers(0, len(options), k)])

    def write(name: str, cols: dict[str, Any]) -> Path:
        path = out / f"{name}.parquet"
        pq.write_table(pa.table(cols), str(path))
        return path

    paths = []
    gp, go = forest(n_g, 5, 0.85)
    paths.append(
        write(
            "groups",
            {"uid": uids("Group", g_ids), "parents": parents("Group", g_ids, gp, go)},
        )
    )

    # users: 1-3 distinct groups each
    k = rng.integers(1, 4, n_u)
    draw = rng.integers(0, n_g, (n_u, 3))
    keep = np.arange(3)[None, :] < k[:, None]
    keep[:, 1] &= draw[:, 1] != draw[:, 0]
    keep[:, 2] &= (draw[:, 2] != draw[:, 0]) & (draw[:, 2] != draw[:, 1])
    u_par = draw[keep]
    u_off = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    u_dept_i = rng.integers(0, len(DEPTS), n_u)
    i = np.arange(n_u)
    has_mgr = (i > 0) & (rng.random(n_u) < 0.7)
    mgr = (rng.random(n_u) * np.maximum(i, 1)).astype(np.int64)
    mgr_ref = uids("User", u_ids.take(pa.array(mgr)))
    mgr_ref = pa.StructArray.from_arrays(
        [mgr_ref.field("type"), mgr_ref.field("id")],
        fields=list(uid_t),
        mask=pa.array(~has_mgr),
    )
    u_attrs = pa.StructArray.from_arrays(
        [
            pa.array([f"user {j}" for j in range(n_u)]),
            pa.array(np.array(DEPTS, dtype=object)[u_dept_i]),
            pa.array(rng.integers(1, 11, n_u)),
            pa.array(rng.integers(0, 6, n_u)),
            pa.array(rng.random(n_u) < 0.95),
            mgr_ref,
        ],
        names=["name", "dept", "level", "clearance", "active", "manager"],
    )
    proj = choice(PROJECTS, n_u)
    u_tags = pa.StructArray.from_arrays(
        [pa.array(np.where(rng.random(n_u) < 0.5, np.array(proj), None), pa.string())],
        names=["project"],
    )
    paths.append(
        write(
            "users",
            {
                "uid": uids("User", u_ids),
                "attrs": u_attrs,
                "parents": parents("Group", g_ids, u_par, u_off),
                "tags": u_tags,
            },
        )
    )

    fp, fo = forest(n_f, 10, 0.9)
    f_attrs = pa.StructArray.from_arrays(
        [
            uids("User", u_ids.take(pa.array(rng.integers(0, n_u, n_f)))),
            choice(DEPTS, n_f),
            pa.array(rng.random(n_f) < 0.1),
        ],
        names=["owner", "dept", "public"],
    )
    paths.append(
        write(
            "folders",
            {
                "uid": uids("Folder", f_ids),
                "attrs": f_attrs,
                "parents": parents("Folder", f_ids, fp, fo),
            },
        )
    )

    owner = rng.integers(0, n_u, n_d)
    dept_i = np.where(rng.random(n_d) < 0.7, u_dept_i[owner], rng.integers(0, len(DEPTS), n_d))
    n_lab = rng.integers(0, 3, n_d)
    lab = np.argsort(rng.random((n_d, len(LABELS))), axis=1)[:, :2]
    lab_keep = np.arange(2)[None, :] < n_lab[:, None]
    labels = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(n_lab)]), pa.int32()),
        pa.array(np.array(LABELS, dtype=object)[lab[lab_keep]], pa.string()),
    )
    d_attrs = pa.StructArray.from_arrays(
        [
            uids("User", u_ids.take(pa.array(owner))),
            pa.array(np.array(DEPTS, dtype=object)[dept_i]),
            pa.array(rng.integers(0, 6, n_d)),
            labels,
            pa.array(rng.random(n_d) < 0.05),
            pa.array(rng.integers(1, 10_000_001, n_d)),
        ],
        names=["owner", "dept", "classification", "labels", "archived", "size"],
    )
    dproj = choice(PROJECTS, n_d)
    d_tags = pa.StructArray.from_arrays(
        [pa.array(np.where(rng.random(n_d) < 0.4, np.array(dproj), None), pa.string())],
        names=["project"],
    )
    paths.append(
        write(
            "documents",
            {
                "uid": uids("Document", d_ids),
                "attrs": d_attrs,
                "parents": parents("Folder", f_ids, rng.integers(0, n_f, n_d), np.arange(n_d + 1)),
                "tags": d_tags,
            },
        )
    )
    return paths, names


def policies_text(names: _Names, n_policies: int, seed: int) -> str:
    """The workload's policy mix (50% role, 20% attribute, 10% owner, 20% forbids)."""
    gen = _Policies(random.Random(seed), names)  # type: ignore[arg-type]
    n_role, n_attr, n_owner = n_policies * 50 // 100, n_policies * 20 // 100, n_policies // 10
    out = [gen.role() for _ in range(n_role)]
    out += [gen.attribute() for _ in range(n_attr)]
    out += [gen.owner() for _ in range(n_owner)]
    out += [gen.forbid() for _ in range(n_policies - n_role - n_attr - n_owner)]
    return "\n\n".join(out) + "\n"


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where the Parquet files go (kept)")
    ap.add_argument("--verify", action="store_true", help="compare with in process")
    ap.add_argument(
        "--matrix", action="store_true", help="also write the whole matrix to DIR/matrix.parquet"
    )
    args = ap.parse_args(argv)

    import tempfile

    from polang.datalog.authorizer import Authorizer
    from polang.language.parser import parse_policies
    from polang.language.schema import parse_schema
    from polang.language.values import EntityUID, RecordValue
    from polang.sql import sql_engine

    out = Path(args.dir or tempfile.mkdtemp(prefix="polang-1m-"))
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"entities": args.entities, "threads": args.threads}
    t0 = time.perf_counter()
    paths, names = generate_files(args.entities, args.seed, out)
    report["generate_s"] = round(time.perf_counter() - t0, 2)
    report["parquet_mib"] = round(sum(p.stat().st_size for p in paths) / 2**20, 1)
    schema = parse_schema(SCHEMA)
    auth = Authorizer(parse_policies(policies_text(names, args.policies, args.seed)))
    ctx = RecordValue({"mfa": True, "hour": 10})  # the ip is not read by a lowered policy

    t0 = time.perf_counter()
    eng = sql_engine(auth, None, schema, files=paths, threads=args.threads)
    report["load_s"] = round(time.perf_counter() - t0, 2)
    report["rss_after_load_mib"] = round(_peak_rss_mib(), 1)

    rng = random.Random(args.seed)
    _n_g, _n_f, n_u, n_d = _sizes(args.entities)
    actions = [EntityUID("Action", a) for a in ("view", "comment", "download", "edit", "share")]
    actions.append(EntityUID("Action", "delete"))
    who, what = [], []
    who_rows, what_rows = [], []
    picks = [
        (
            rng.choice(actions),
            EntityUID("Document", f"d{rng.randrange(n_d):05d}"),
            EntityUID("User", f"u{rng.randrange(n_u):05d}"),
        )
        for _ in range(args.queries)
    ]
    results = []
    read = []  # building every what_can entry as Python objects, after the answer
    arrow = []  # the same answer as a pyarrow Table (``to_arrow``)
    for a, d, u in picks:
        t0 = time.perf_counter()
        w = eng.who_can(a, d, ctx)
        who.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m = eng.what_can(u, None, ctx)
        what.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m.to_arrow()
        arrow.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m_entries = m.entries
        read.append(time.perf_counter() - t0)
        who_rows.append(len(w.entries))
        what_rows.append(len(m_entries))
        results.append((a, d, u, w, m))
    report["who_can_median_s"] = round(statistics.median(who), 3)
    report["who_can_max_s"] = round(max(who), 3)
    report["who_can_rows_median"] = statistics.median(who_rows)
    report["what_can_median_s"] = round(statistics.median(what), 3)
    report["what_can_max_s"] = round(max(what), 3)
    report["what_can_rows_median"] = statistics.median(what_rows)
    report["what_can_rows_max"] = max(what_rows)
    report["what_can_entries_read_median_s"] = round(statistics.median(read), 3)
    report["what_can_entries_read_max_s"] = round(max(read), 3)
    report["what_can_to_arrow_max_s"] = round(max(arrow), 3)
    report["what_can_with_entries_max_s"] = round(
        max(x + y for x, y in zip(what, read, strict=True)), 3
    )
    report["complete"] = all(w.complete and m.complete for _a, _d, _u, w, m in results)
    report["peak_rss_mib"] = round(_peak_rss_mib(), 1)
    if args.matrix:
        import os

        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        res = eng.access_matrix(ctx, output=out / "matrix.parquet")
        report["matrix"] = {
            "to_parquet_s": round(time.perf_counter() - t0, 2),
            "cpu_s": round(time.process_time() - c0, 2),  # every thread: DuckDB's two, writer
            "load_avg_1m": round((load0 + os.getloadavg()[0]) / 2, 2),
            "rows": res.stats.rows,
            "batches": res.stats.batches,
            "complete": res.complete,
            "parquet_mib": round((out / "matrix.parquet").stat().st_size / 2**20, 1),
            "peak_rss_mib": round(_peak_rss_mib(), 1),
        }
    eng.close()

    bad = 0
    if args.verify:
        import pyarrow.parquet as pq

        from polang.analysis.query import what_can, who_can
        from polang.datalog.facts import EntityFacts
        from polang.language.entities import parse_entities

        ents = []
        for p in paths:
            for row in pq.read_table(p).to_pylist():
                attrs = {k: v for k, v in (row.get("attrs") or {}).items() if v is not None}
                tags = {k: v for k, v in (row.get("tags") or {}).items() if v is not None}
                ents.append(
                    {"uid": row["uid"], "attrs": attrs, "parents": row["parents"], "tags": tags}
                )
        facts = EntityFacts(parse_entities(json.dumps(ents), schema))
        for a, d, u, w, m in results:
            want_w = who_can(auth, facts, a, d, ctx, schema=schema)
            bad += [e.principal for e in w.entries] != list(want_w.principals)
            want_m = what_can(auth, facts, u, None, ctx, schema=schema)
            got_m = [(e.action, e.resource) for e in m.entries]
            bad += sorted(got_m) != sorted((e.action, e.resource) for e in want_m.iter_entries())
        report["verify_mismatches"] = bad
    print(json.dumps(report, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
