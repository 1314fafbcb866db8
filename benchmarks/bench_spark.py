"""Spark local mode beside DuckDB and the in-process evaluator, on the benchmark store.

Usage::

    python benchmarks/bench_spark.py [--entities N] [--policies N] [--queries N]
        [--master local[2]] [--conf KEY=VALUE ...] [--variants kept,inline]
        [--output DIR]

One process: the in-process matrix (kept, not written) and who_can/what_can medians;
DuckDB (2 threads) matrix to Parquet and medians; then Spark: the JVM start apart, the
tables staged, and per ``--variants`` the matrix to Parquet and the medians. ``kept`` is
the engine as shipped (a collected query's ``WITH`` tables computed once and kept by
Spark; a written answer in one plan); ``kept-all`` keeps them for written answers too;
``inline`` lets Spark inline every ``WITH`` table (the engine before that change), for a
before/after in the same JVM. Spark's answer is compared with
DuckDB's row by row (a DuckDB ``EXCEPT ALL`` both ways over the two Parquet answers).
The load average is printed at the start and the end: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
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
from polang.language.values import EntityUID


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _same_rows(a: Path, b: Path) -> str:
    """Two Parquet answers (a file or a directory of part files) as multisets of rows."""
    import duckdb

    def src(p: Path) -> str:
        return f"read_parquet('{p}/*.parquet')" if p.is_dir() else f"read_parquet('{p}')"

    cols = "principal_type, principal_id, action_type, action_id, resource_type, resource_id"
    cols += ", decision"
    con = duckdb.connect()
    try:
        counts = [
            con.execute(
                f"SELECT count(*) FROM (SELECT {cols} FROM {src(x)} EXCEPT ALL "
                f"SELECT {cols} FROM {src(y)})"
            ).fetchall()[0][0]
            for x, y in ((a, b), (b, a))
        ]
    finally:
        con.close()
    if counts == [0, 0]:
        return "equal"
    return f"differ: {counts[0]} rows only in {a.name}, {counts[1]} only in {b.name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entities", type=int, default=1000)
    ap.add_argument("--policies", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--queries", type=int, default=3, help="who_can/what_can queries")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], help="a spark.* KEY=VALUE")
    ap.add_argument("--variants", default="kept", help="kept,kept-all,inline (comma list)")
    ap.add_argument("--skip", default="", help="in-process,duckdb,matrix: not run")
    ap.add_argument("--output", default=None, help="directory for the Parquet answers")
    args = ap.parse_args(argv)

    report: dict[str, Any] = {"load_avg_start": os.getloadavg()}
    w = generate(n_entities=args.entities, n_policies=args.policies, seed=args.seed)
    schema = parse_schema(w.schema_text)
    auth = Authorizer(parse_policies(w.policies_text))
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    report["workload"] = w.counts
    del w
    rng = random.Random(args.seed)
    view = EntityUID("Action", "view")
    users = sorted(e.uid for e in facts.entities if e.uid.type == "User")
    docs = sorted(e.uid for e in facts.entities if e.uid.type == "Document")
    picks = [(rng.choice(users), rng.choice(docs)) for _ in range(max(1, args.queries))]
    out = Path(args.output or tempfile.mkdtemp(prefix="polang-bench-spark-"))
    out.mkdir(parents=True, exist_ok=True)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    def queries(who: Any, what: Any) -> dict[str, Any]:
        tw, tt, nw, nt = [], [], [], []
        for u, d in picks:
            r, dt = _timed(lambda d=d: who(d))
            tw.append(dt)
            nw.append(len(r))
            r, dt = _timed(lambda u=u: what(u))
            tt.append(dt)
            nt.append(len(r))
        return {
            "who_can_median_s": round(statistics.median(tw), 3),
            "what_can_median_s": round(statistics.median(tt), 3),
            "who_can_rows": nw,
            "what_can_rows": nt,
        }

    def show(name: str, r: dict[str, Any]) -> None:
        r = {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
        report[name] = r
        print(json.dumps({name: r}), flush=True)

    if "in-process" not in skip:
        r: dict[str, Any] = {}
        qi, r["load_s"] = _timed(lambda: QueryIndex(auth, facts, schema))
        m, r["matrix_s"] = _timed(lambda: access_matrix(auth, qi, ctx, schema=schema))
        r["rows"] = len(m)
        del m
        r.update(
            queries(
                lambda d: who_can(auth, qi, view, d, ctx, schema=schema),
                lambda u: what_can(auth, qi, u, None, ctx, schema=schema),
            )
        )
        show("in-process", r)

    from polang.sql import sql_engine

    duck_out = out / "matrix-duckdb.parquet"
    if "duckdb" not in skip:
        r = {}
        eng, r["load_s"] = _timed(
            lambda: sql_engine(auth, facts.entities, schema, engine="duckdb", threads=2)
        )
        res, r["matrix_to_parquet_s"] = _timed(lambda: eng.access_matrix(ctx, output=duck_out))
        r["rows"] = res.stats.rows
        r.update(queries(lambda d: eng.who_can(view, d, ctx), lambda u: eng.what_can(u, None, ctx)))
        eng.close()
        show("duckdb", r)

    from polang.sql.spark import SparkEngine, SparkRunner, spark_session

    conf = {"spark.ui.showConsoleProgress": "false"}
    conf.update(kv.split("=", 1) for kv in args.conf)
    spark, jvm_s = _timed(lambda: spark_session(args.master, config=conf))
    spark.sparkContext.setLogLevel("ERROR")
    eng, load_s = _timed(lambda: sql_engine(auth, facts, schema, engine="spark", spark=spark))
    assert isinstance(eng, SparkEngine)
    show("spark-start", {"jvm_start_s": jvm_s, "tables_staged_s": load_s, "master": args.master})
    runner = eng.runner
    assert isinstance(runner, SparkRunner)
    kept_frame = runner.frame
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        runner.keep_in_writes = variant == "kept-all"
        if variant == "inline":
            runner.frame = lambda text: (spark.sql(text), [])
        elif variant in ("kept", "kept-all"):
            runner.frame = kept_frame
        else:
            raise SystemExit(f"unknown variant {variant!r}: kept, kept-all or inline")
        r = {}
        target = out / f"matrix-spark-{variant}"
        if "matrix" not in skip:
            res, r["matrix_to_parquet_s"] = _timed(
                lambda t=target: eng.access_matrix(ctx, output=t)
            )
            r["rows"] = res.stats.rows
            if duck_out.exists():
                r["rows_vs_duckdb"] = _same_rows(duck_out, target)
        r.update(queries(lambda d: eng.who_can(view, d, ctx), lambda u: eng.what_can(u, None, ctx)))
        show(f"spark-{variant}", r)
    eng.close()
    spark.stop()
    report["load_avg_end"] = os.getloadavg()
    print(json.dumps({"load_avg": [report["load_avg_start"], report["load_avg_end"]]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
