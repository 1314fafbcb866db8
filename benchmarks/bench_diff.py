"""Diff of two access matrices: a one-policy edit, a one-user data edit and a broad edit (a
new permit reaching a department's documents) against the full matrix, on the generated
benchmark store (``benchmarks/workload.py``), in process or on a SQL engine.

    python -m benchmarks.bench_diff [--entities 10000] [--policies 200] [--verify] [--json]
    python -m benchmarks.bench_diff --engine in-process,duckdb      # side by side

The in-process diff recomputes only what the change reaches (the edited policy's columns,
the edited entity's row and columns); the full matrix is the baseline it is compared
with. ``--engine duckdb|spark`` computes the same diff in SQL (both matrices, joined in
SQL: docs/diff.md). Several engines run one after the other, each in its own process, so
each one's peak resident memory is its own (``peak_rss_mb``: the process's peak after the
diff; ``loaded_rss_mb``: after generating and loading the store, before any diff). The
full in-process matrix is computed last (in-process only), so it never counts in a
diff's peak. ``--verify`` checks the diff against the in-process diff from both full
matrices (in process) or the in-process diff (SQL).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.workload import generate
from polang.analysis.query import QueryIndex, access_matrix
from polang.authoring.diff import Side, diff
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity, parse_context, parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID

ENGINES = ("in-process", "duckdb", "spark")


def _timed(fn: Any) -> tuple[Any, float]:
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _rss_mb() -> float:
    """The process's peak resident set so far (Linux: KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _edit(policies_text: str) -> tuple[str, str]:
    """The first role policy, narrowed by a condition (a typical review-sized edit)."""
    head = '@id("role-1")\n'
    i = policies_text.index(head)
    j = policies_text.index(";", i)
    edited = policies_text[:j] + "\nwhen { principal.level > 2 }" + policies_text[j:]
    return "role-1", edited


def run(
    n_entities: int,
    n_policies: int,
    seed: int,
    verify: bool,
    engine: str = "in-process",
    output: str | None = None,
    threads: int | None = None,
    batch_pairs: int | None = None,
) -> dict[str, Any]:
    w = generate(n_entities=n_entities, n_policies=n_policies, n_requests=1, seed=seed)
    schema = parse_schema(w.schema_text)
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    auth = Authorizer(parse_policies(w.policies_text))
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    pid, edited_text = _edit(w.policies_text)
    auth2 = Authorizer(parse_policies(edited_text))
    report: dict[str, Any] = {
        "workload": w.counts,
        "edited_policy": pid,
        "engine": engine,
        "loaded_rss_mb": _rss_mb(),
    }
    opts: dict[str, Any] = {}
    if engine != "in-process":
        opts["engine"] = engine
        if threads and engine == "duckdb":
            opts["threads"] = threads
        if batch_pairs:
            opts["batch_pairs"] = batch_pairs
            report["batch_pairs"] = batch_pairs
    tmp = tempfile.TemporaryDirectory(prefix="bench-diff-")

    def out(name: str) -> dict[str, Any]:
        if output is None or engine == "in-process":
            return {}
        return {"output": os.path.join(tmp.name, f"{name}.{output}"), "format": output}

    old = Side(auth, facts, schema, "old")
    new = Side(auth2, facts, schema, "edited")
    d, diff_s = _timed(lambda: diff(old, new, context=ctx, **opts, **out("policy")))
    report["policy_edit"] = {
        "seconds": round(diff_s, 3),
        "gained": d.summary()["gained"],
        "lost": d.summary()["lost"],
        "peak_rss_mb": _rss_mb(),
        "stats": d.stats.to_dict(),
    }

    # a data edit: one user leaves their groups and gets another level
    user = next(e for e in facts.entities if e.uid.type == "User" and e.parents)
    moved = Entity(user.uid, {**user.attrs, "level": 0}, set(), dict(user.tags))
    moved_side = Side(auth, facts.with_entities([moved]), schema)
    d2, data_s = _timed(lambda: diff(old, moved_side, context=ctx, **opts, **out("data")))
    report["data_edit"] = {
        "entity": str(user.uid),
        "seconds": round(data_s, 3),
        "gained": d2.summary()["gained"],
        "lost": d2.summary()["lost"],
        "peak_rss_mb": _rss_mb(),
        "stats": d2.stats.to_dict(),
    }
    # a broad edit: a new permit reaching a whole department (a diff of ~10^5 triples)
    broad_text = w.policies_text + (
        '\n@id("eng-view")\npermit(principal, action == Action::"view", resource is Document)\n'
        'when { principal.dept == "eng" && resource.dept == "eng" };\n'
    )
    broad = Side(Authorizer(parse_policies(broad_text)), facts, schema, "broad")
    d3, broad_s = _timed(lambda: diff(old, broad, context=ctx, **opts, **out("broad")))
    report["broad_edit"] = {
        "seconds": round(broad_s, 3),
        "gained": d3.summary()["gained"],
        "lost": d3.summary()["lost"],
        "peak_rss_mb": _rss_mb(),
        "stats": d3.stats.to_dict(),
    }
    del d3
    if verify:
        if engine == "in-process":
            f, f_s = _timed(lambda: diff(old, new, context=ctx, force_full=True))
            same = [e.to_dict() for e in f.entries] == [e.to_dict() for e in d.entries]
            report["verify"] = {"full_diff_seconds": round(f_s, 3), "agree": same}
        elif output is None:
            ref = [diff(old, new, context=ctx), diff(old, moved_side, context=ctx)]
            same = all(
                [e.to_dict() for e in a.entries] == [e.to_dict() for e in b.entries]
                for a, b in zip(ref, (d, d2), strict=True)
            )
            report["verify"] = {"agree_with_in_process": same}
        else:
            same = True
            report["verify"] = {"skipped": "the rows were written to files"}
        if not same:
            raise SystemExit("the diffs disagree")
    if engine == "in-process":  # the baseline, last: it never counts in a diff's peak
        m, full_s = _timed(
            lambda: access_matrix(auth, QueryIndex(auth, facts, schema), ctx, schema=schema)
        )
        report["full_matrix"] = {"seconds": round(full_s, 3), "allowed": len(m)}
        for key in ("policy_edit", "data_edit", "broad_edit"):
            report[key]["ratio_to_full"] = round(report[key]["seconds"] / full_s, 3)
    tmp.cleanup()
    return report


def _side_by_side(args: argparse.Namespace, engines: list[str]) -> list[dict[str, Any]]:
    """Each engine in its own process (its own peak RSS), one after the other."""
    reports = []
    for e in engines:
        cmd = [sys.executable, "-m", "benchmarks.bench_diff", "--engine", e, "--json"]
        cmd += ["--entities", str(args.entities), "--policies", str(args.policies)]
        cmd += ["--seed", str(args.seed)]
        if args.verify:
            cmd.append("--verify")
        if args.output:
            cmd += ["--output", args.output]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        if args.batch_pairs:
            cmd += ["--batch-pairs", str(args.batch_pairs)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        reports.append(json.loads(done.stdout))
    return reports


def _print(report: dict[str, Any]) -> None:
    bp = f" (batch_pairs {report['batch_pairs']})" if "batch_pairs" in report else ""
    print(f"engine {report['engine']}{bp}: store {report['workload']['entities']} entities, "
          f"{report['workload']['policies']} policies; loaded, peak RSS "
          f"{report['loaded_rss_mb']} MB")  # fmt: skip
    for name, key in (
        ("one-policy edit", "policy_edit"),
        ("one-user data edit", "data_edit"),
        ("broad edit (new permit)", "broad_edit"),
    ):
        r = report[key]
        ratio = f" ({r['ratio_to_full']:.2f}x the full matrix)" if "ratio_to_full" in r else ""
        print(
            f"  diff, {name:<20} {r['seconds']:8.3f} s{ratio}  peak RSS {r['peak_rss_mb']} MB; "
            f"{r['stats']['mode']}: {r['stats']['reason']}; +{r['gained']} -{r['lost']}"
        )
    if "full_matrix" in report:
        fm = report["full_matrix"]
        print(f"  full matrix (known context) {fm['seconds']:8.3f} s  {fm['allowed']} allowed")
    if "verify" in report:
        print(f"  verify: {report['verify']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--engine",
        default="in-process",
        help="in-process (default), duckdb, spark, or a comma-separated list (each in its "
        "own process, side by side)",
    )
    ap.add_argument(
        "--output",
        choices=["parquet", "csv", "jsonl"],
        help="a SQL engine streams the rows to a file of this format (in a temporary directory)",
    )
    ap.add_argument("--threads", type=int, help="DuckDB threads (default: DuckDB's)")
    ap.add_argument(
        "--batch-pairs", type=int, help="the SQL engines' batch_pairs (default: theirs)"
    )
    ap.add_argument("--verify", action="store_true", help="check the diff (see above)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"--engine {e!r}: expected one of {', '.join(ENGINES)}")
    if len(engines) > 1:
        reports = _side_by_side(args, engines)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    else:
        reports = [
            run(
                args.entities,
                args.policies,
                args.seed,
                args.verify,
                engines[0],
                args.output,
                args.threads,
                args.batch_pairs,
            )
        ]
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        return 0
    for r in reports:
        _print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
