"""Bulk queries on the benchmark store: the full access matrix, who_can and what_can.

Usage::

    python benchmarks/bench_query.py [--entities N] [--policies N] [--seed S]
        [--queries N] [--verify N] [--profile] [--json]
    python benchmarks/bench_query.py --engine in-process,duckdb[,spark] [--entities N]
        [--threads T] [--output DIR] [--files]

``--engine`` (other than the default ``in-process`` alone, or with ``--matrix-only``)
runs the SQL comparison instead: the same matrix, who_can and what_can on each engine
side by side, the matrix written to Parquet (``--output``, default a temporary
directory), times (wall and CPU: DuckDB runs two threads and a writer thread) and ratios
to the in-process evaluator, each matrix's peak resident memory (sampled), the load
average, and the row counts checked equal. The in-process matrix is the evaluator's own
answer (sets of principals per action and resource, counted), never expanded to entries;
``--check-rows`` (small sizes: it keeps that answer and walks its entries) compares the
Parquet files with it row by row. ``--matrix-only`` skips who_can/what_can (the long
runs at 100,000 entities). ``--files`` also loads the entities from a Parquet file with
DuckDB (no Python objects) and times who_can/what_can on it. Spark runs in local mode;
its JVM start is reported apart.

Targets (docs/queries.md): the full allowed matrix of the 200-policy / 10,000-entity store
in under 10 s and 1 GiB; ``who_can`` / ``what_can`` in under 100 ms. Reported:

- load: parsing the store and building ``EntityFacts`` (not part of any query);
- index: ``prepare`` (entity indexes for queries), paid once per store;
- matrix: wall time and peak memory (``tracemalloc``: Python allocations made by the
  query, plus the process's peak RSS) with a known context, and with ``context=None``
  (policies reading the context become conditional);
- who_can / what_can: per query, cold (first query on a new index) and warm (the index
  kept, as an engine does), median and max over ``--queries`` random queries;
- verification: ``--verify N`` random (principal, action, resource) triples of the matrix
  domain are decided by ``is_authorized`` and compared with the matrix.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import generate
from polang.analysis.query import QueryIndex, access_matrix, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import parse_context, parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue


def _rss_mib() -> float:
    """The process's current resident set size."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0  # pragma: no cover - not Linux


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _timed(fn: Any, *, trace_memory: bool = False) -> tuple[Any, float, float]:
    gc.collect()
    if trace_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    peak = 0.0
    if trace_memory:
        _cur, peak_b = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peak = peak_b / 2**20
    return out, dt, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--queries", type=int, default=50, help="who_can/what_can queries")
    ap.add_argument("--verify", type=int, default=2000, help="random triples checked")
    ap.add_argument("--columns", type=int, default=10, help="(action, resource) columns checked")
    ap.add_argument("--profile", action="store_true", help="profile the matrix")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--engine", default="in-process", help="in-process,duckdb,spark (comma list)")
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    ap.add_argument("--output", default=None, help="directory for the Parquet answers")
    ap.add_argument("--files", action="store_true", help="also load entities from Parquet")
    ap.add_argument("--batch-pairs", type=int, default=None, help="DuckDB matrix batch size")
    ap.add_argument(
        "--check-rows",
        action="store_true",
        help="compare the SQL engines' Parquet answers with the in-process matrix row by row",
    )
    ap.add_argument(
        "--matrix-only",
        action="store_true",
        help="the side-by-side run (as with --engine) without who_can/what_can",
    )
    args = ap.parse_args(argv)
    if args.engine != "in-process" or args.matrix_only:
        return sql_main(args)

    w = generate(n_entities=args.entities, n_policies=args.policies, seed=args.seed)
    t0 = time.perf_counter()
    schema = parse_schema(w.schema_text)
    policies = parse_policies(w.policies_text)
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    auth = Authorizer(policies)
    load_s = time.perf_counter() - t0
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    counts = w.counts
    del w
    gc.collect()
    report: dict[str, Any] = {"workload": counts, "load_s": round(load_s, 3)}
    rss_loaded = _rss_mib()
    report["rss_after_load_mib"] = round(rss_loaded, 1)

    def matrix(index: QueryIndex, context: RecordValue | None) -> Any:
        return access_matrix(auth, index, context, schema=schema)

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        matrix(QueryIndex(auth, facts, schema), ctx)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(30)

    # the full matrix: cold (a new index: every table built), then warm (tables kept)
    qi, index_s, _ = _timed(lambda: QueryIndex(auth, facts, schema))
    report["index_s"] = round(index_s, 3)
    m, m_s, _ = _timed(lambda: matrix(qi, ctx))
    report["matrix"] = {
        "seconds_cold": round(m_s, 3),
        "allowed": len(m),
        "complete": m.complete,
        "steps": m.stats.steps,
        "fallback_evaluations": m.stats.fallback_evaluations,
        "rss_with_result_mib": round(_rss_mib(), 1),
        "rss_over_store_mib": round(_rss_mib() - rss_loaded, 1),
    }
    _, m_warm, _ = _timed(lambda: matrix(qi, ctx))
    report["matrix"]["seconds_warm"] = round(m_warm, 3)
    _, m_pk, m_peak = _timed(
        lambda: matrix(QueryIndex(auth, facts, schema), ctx), trace_memory=True
    )
    report["matrix"]["peak_traced_mib"] = round(m_peak, 1)
    report["matrix"]["seconds_under_tracemalloc"] = round(m_pk, 3)
    m2, m2_s, _ = _timed(lambda: matrix(qi, None))
    report["matrix_unknown_context"] = {
        "seconds": round(m2_s, 3),
        "entries": len(m2),
        "conditional": len(m2) - sum(1 for _ in m2.triples()) if args.entities <= 2000 else None,
        "complete": m2.complete,
    }
    del m2
    gc.collect()

    # who_can / what_can: cold = a new index per query; warm = an index after warm()
    warmed = QueryIndex(auth, facts, schema)
    built, warm_s, _ = _timed(warmed.warm)
    report["warm_up"] = {"seconds": round(warm_s, 3), "tables": built}
    rng = random.Random(args.seed)
    users = sorted(qi.candidates("principal", EntityUID("Action", "view")))
    docs = sorted(qi.candidates("resource", EntityUID("Action", "view")))
    actions = [a for a in qi.actions if (ad := schema.action(a)) is not None and ad.principal_types]

    def timings(make: Any) -> dict[str, float]:
        cold, warm = [], []
        for _ in range(args.queries):
            call = make(rng)
            fresh = QueryIndex(auth, facts, schema)
            cold.append(_timed(lambda call=call, fresh=fresh: call(fresh))[1])
            warm.append(_timed(lambda call=call: call(warmed))[1])
        return {
            "cold_median_ms": round(statistics.median(cold) * 1000, 2),
            "cold_max_ms": round(max(cold) * 1000, 2),
            "warm_median_ms": round(statistics.median(warm) * 1000, 2),
            "warm_max_ms": round(max(warm) * 1000, 2),
        }

    def who(r: random.Random) -> Any:
        a, res = r.choice(actions), r.choice(docs)
        return lambda index: who_can(auth, index, a, res, ctx, schema=schema)

    def what(r: random.Random) -> Any:
        p = r.choice(users)
        return lambda index: what_can(auth, index, p, None, ctx, schema=schema)

    def what_one(r: random.Random) -> Any:
        p, a = r.choice(users), r.choice(actions)
        return lambda index: what_can(auth, index, p, a, ctx, schema=schema)

    report["who_can"] = timings(who)
    report["what_can_all_actions"] = timings(what)
    report["what_can_one_action"] = timings(what_one)

    # verification against is_authorized: whole (action, resource) columns, random triples
    bad = checked = 0
    for _ in range(args.columns):
        a, r = rng.choice(actions), rng.choice(docs)
        for p in users:
            checked += 1
            want = "allow" if auth.is_authorized(p, a, r, ctx, facts).allow else None
            bad += m.lookup(p, a, r) != want
    for _ in range(args.verify):
        p, a, r = rng.choice(users), rng.choice(actions), rng.choice(docs)
        checked += 1
        want = "allow" if auth.is_authorized(p, a, r, ctx, facts).allow else None
        bad += m.lookup(p, a, r) != want
    report["verify"] = {"checked": checked, "mismatches": bad}
    report["peak_rss_mib"] = round(_peak_rss_mib(), 1)

    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))
    return 0 if not bad else 1


class _PeakRss:
    """The process's resident memory sampled every 50 ms while a phase runs (``ru_maxrss``
    only ever grows, so it cannot give the second engine's peak)."""

    def __init__(self) -> None:
        import threading

        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _rss_mib())

    def __enter__(self) -> _PeakRss:
        self.peak = _rss_mib()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())


def _matrix_timed(fn: Any) -> tuple[Any, dict[str, float]]:
    """``fn()`` with its wall and CPU seconds (every thread), peak RSS and load average."""
    import os

    gc.collect()
    load0 = os.getloadavg()[0]
    with _PeakRss() as rss:
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return out, {
        "s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": rss.peak,
        "load_avg_1m": (load0 + os.getloadavg()[0]) / 2,
    }


def sql_main(args: Any) -> int:
    """The SQL engines beside the in-process evaluator (see the module docstring)."""
    import tempfile

    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    w = generate(n_entities=args.entities, n_policies=args.policies, seed=args.seed)
    schema = parse_schema(w.schema_text)
    auth = Authorizer(parse_policies(w.policies_text))
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    rng = random.Random(args.seed)
    view = EntityUID("Action", "view")
    users = sorted(e.uid for e in facts.entities if e.uid.type == "User")
    docs = sorted(e.uid for e in facts.entities if e.uid.type == "Document")
    picks = [(rng.choice(users), rng.choice(docs)) for _ in range(max(1, args.queries))]
    out_dir = Path(args.output or tempfile.mkdtemp(prefix="polang-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"workload": w.counts, "engines": {}}
    entities_json = w.entities
    del w

    def queries(who: Any, what: Any) -> dict[str, float]:
        if args.matrix_only:
            return {}
        tw, tt = [], []
        for u, d in picks:
            tw.append(_timed(lambda d=d: who(d))[1])
            tt.append(_timed(lambda u=u: what(u))[1])
        return {
            "who_can_median_ms": round(statistics.median(tw) * 1000, 1),
            "what_can_median_ms": round(statistics.median(tt) * 1000, 1),
        }

    kept: dict[str, Any] = {}
    for name in engines:
        r: dict[str, Any] = {}
        rss0 = _rss_mib()
        if name == "in-process":
            qi, r["load_s"], _ = _timed(lambda: QueryIndex(auth, facts, schema))
            # the evaluator's answer: per (action, resource) a group of principal sets,
            # counted (len), not expanded to entries
            m, t = _matrix_timed(lambda qi=qi: access_matrix(auth, qi, ctx, schema=schema))
            r.update({f"matrix_{k}": v for k, v in t.items()})
            r["rows"] = len(m)
            if args.check_rows:
                kept["matrix"] = m
            del m
            r.update(
                queries(
                    lambda d, qi=qi: who_can(auth, qi, view, d, ctx, schema=schema),
                    lambda u, qi=qi: what_can(auth, qi, u, None, ctx, schema=schema),
                )
            )
        else:
            from polang.sql import sql_engine

            opts: dict[str, Any] = {}
            if name == "duckdb":
                opts["threads"] = args.threads
                if args.batch_pairs:
                    opts["batch_pairs"] = args.batch_pairs
            else:
                from polang.sql.spark import spark_session

                spark, r["jvm_start_s"], _ = _timed(
                    lambda: spark_session(config={"spark.ui.showConsoleProgress": "false"})
                )
                spark.sparkContext.setLogLevel("ERROR")
                opts["spark"] = spark
            eng, r["load_s"], _ = _timed(
                lambda name=name, opts=opts: sql_engine(
                    auth, facts.entities, schema, engine=name, **opts
                )
            )
            target = out_dir / f"matrix-{name}.parquet"
            res, t = _matrix_timed(
                lambda eng=eng, target=target: eng.access_matrix(ctx, output=target)
            )
            r.update({f"matrix_to_parquet_{k}": v for k, v in t.items()})
            r["parquet_mib"] = _size_mib(target)
            r["rows"] = res.stats.rows
            r["batches"] = res.stats.batches
            r["complete"] = res.complete
            r.update(
                queries(
                    lambda d, eng=eng: eng.who_can(view, d, ctx),
                    lambda u, eng=eng: eng.what_can(u, None, ctx),
                )
            )
            eng.close()
        r["rss_growth_mib"] = round(_rss_mib() - rss0, 1)
        report["engines"][name] = {
            k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()
        }
        print(json.dumps({name: report["engines"][name]}), flush=True)

    if args.files:
        import duckdb

        src = out_dir / "entities.jsonl"
        src.write_text("".join(json.dumps(e) + "\n" for e in entities_json))
        pq_path = out_dir / "entities.parquet"
        duckdb.sql(
            f"COPY (SELECT * FROM read_json('{src}', format = 'newline_delimited')) "
            f"TO '{pq_path}' (FORMAT parquet)"
        )
        from polang.sql import sql_engine

        r = {}
        eng, r["load_s"], _ = _timed(
            lambda: sql_engine(auth, None, schema, files=[pq_path], threads=args.threads)
        )
        r.update(
            queries(
                lambda d: eng.who_can(view, d, ctx),
                lambda u: eng.what_can(u, None, ctx),
            )
        )
        eng.close()
        report["engines"]["duckdb-parquet-files"] = r
        print(json.dumps({"duckdb-parquet-files": r}), flush=True)

    if args.check_rows and "matrix" in kept:
        report["rows_checked"] = {
            name: _same_rows(kept["matrix"], out_dir / f"matrix-{name}.parquet")
            for name in engines
            if name != "in-process"
        }
        print(json.dumps({"rows_checked": report["rows_checked"]}), flush=True)
    base = report["engines"].get("in-process")
    if base:
        ratios = {}
        for name, r in report["engines"].items():
            if name == "in-process" or "matrix_to_parquet_s" not in r:
                continue
            ratios[name] = {
                "matrix_vs_in_process_matrix": round(
                    r["matrix_to_parquet_s"] / base["matrix_s"], 2
                ),
                "cpu_vs_in_process_cpu": round(
                    r["matrix_to_parquet_cpu_s"] / base["matrix_cpu_s"], 2
                ),
                "rows_equal": r["rows"] == base["rows"],
            }
        report["ratios"] = ratios
    report["peak_rss_mib"] = round(_peak_rss_mib(), 1)
    print(json.dumps(report, indent=None if args.json else 2))
    bad = any(not x["rows_equal"] for x in report.get("ratios", {}).values())
    bad = bad or any(v != "equal" for v in report.get("rows_checked", {}).values())
    return 1 if bad else 0


def _size_mib(path: Path) -> float:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
    return path.stat().st_size / 2**20


def _same_rows(matrix: Any, path: Path) -> str:
    """The in-process matrix and a Parquet answer compared row by row, in order (both are
    by action, resource, principal), streamed: ``equal`` or the first difference."""
    import itertools

    import pyarrow.parquet as pq

    names = ["principal_type", "principal_id", "action_type", "action_id"]
    names += ["resource_type", "resource_id"]

    if path.is_dir():  # Spark: part files, not in one order
        return "not checked (a directory of part files)"

    def from_file() -> Any:
        for batch in pq.ParquetFile(str(path)).iter_batches(1_000_000, columns=names):
            yield from zip(*(batch.column(n).to_pylist() for n in names), strict=True)

    rows = from_file()
    want = (
        (
            e.principal.type,
            e.principal.id,
            e.action.type,
            e.action.id,
            e.resource.type,
            e.resource.id,
        )
        for e in matrix.iter_entries()
    )
    for i, (w, g) in enumerate(itertools.zip_longest(want, rows)):
        if w != g:
            return f"row {i}: in-process {w}, file {g}"
    return "equal"


if __name__ == "__main__":
    raise SystemExit(main())
