"""Diff of two access matrices: a one-policy edit and a one-user data edit against the full
matrix, on the generated benchmark store (``benchmarks/workload.py``).

    python -m benchmarks.bench_diff [--entities 10000] [--policies 200] [--verify] [--json]

The diff recomputes only what the change reaches (the edited policy's columns, the edited
entity's row and columns); the full matrix is the baseline it is compared with.
``--verify`` also computes the diff from both full matrices and checks they agree.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

from benchmarks.workload import generate
from polang.authoring.diff import Side, diff
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.datalog.query import QueryIndex, access_matrix
from polang.language.entities import Entity, parse_context, parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID


def _timed(fn: Any) -> tuple[Any, float]:
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _edit(policies_text: str) -> tuple[str, str]:
    """The first role policy, narrowed by a condition (a typical review-sized edit)."""
    head = '@id("role-1")\n'
    i = policies_text.index(head)
    j = policies_text.index(";", i)
    edited = policies_text[:j] + "\nwhen { principal.level > 2 }" + policies_text[j:]
    return "role-1", edited


def run(n_entities: int, n_policies: int, seed: int, verify: bool) -> dict[str, Any]:
    w = generate(n_entities=n_entities, n_policies=n_policies, n_requests=1, seed=seed)
    schema = parse_schema(w.schema_text)
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    auth = Authorizer(parse_policies(w.policies_text))
    ctx = parse_context(w.requests[0]["context"], schema, EntityUID("Action", "view"))
    pid, edited_text = _edit(w.policies_text)
    auth2 = Authorizer(parse_policies(edited_text))
    report: dict[str, Any] = {"workload": w.counts, "edited_policy": pid}

    m, full_s = _timed(
        lambda: access_matrix(auth, QueryIndex(auth, facts, schema), ctx, schema=schema)
    )
    report["full_matrix"] = {"seconds": round(full_s, 3), "allowed": len(m)}
    del m

    old = Side(auth, facts, schema, "old")
    new = Side(auth2, facts, schema, "edited")
    d, diff_s = _timed(lambda: diff(old, new, context=ctx))
    report["policy_edit"] = {
        "seconds": round(diff_s, 3),
        "ratio_to_full": round(diff_s / full_s, 3),
        "gained": len(d.gained),
        "lost": len(d.lost),
        "stats": d.stats.to_dict(),
    }

    # a data edit: one user leaves their groups and gets another level
    user = next(e for e in facts.entities if e.uid.type == "User" and e.parents)
    moved = Entity(user.uid, {**user.attrs, "level": 0}, set(), dict(user.tags))
    d2, data_s = _timed(
        lambda: diff(old, Side(auth, facts.with_entities([moved]), schema), context=ctx)
    )
    report["data_edit"] = {
        "entity": str(user.uid),
        "seconds": round(data_s, 3),
        "ratio_to_full": round(data_s / full_s, 3),
        "gained": len(d2.gained),
        "lost": len(d2.lost),
        "stats": d2.stats.to_dict(),
    }
    if verify:
        f, f_s = _timed(lambda: diff(old, new, context=ctx, force_full=True))
        same = [e.to_dict() for e in f.entries] == [e.to_dict() for e in d.entries]
        report["verify"] = {"full_diff_seconds": round(f_s, 3), "agree": same}
        if not same:
            raise SystemExit("the incremental diff differs from the full one")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verify", action="store_true", help="also diff the two full matrices")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    report = run(args.entities, args.policies, args.seed, args.verify)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    fm = report["full_matrix"]
    print(f"store: {report['workload']['entities']} entities, {report['workload']['policies']} "
          f"policies")  # fmt: skip
    print(f"full matrix (known context)      {fm['seconds']:8.3f} s  {fm['allowed']} allowed")
    for name, key in (("one-policy edit", "policy_edit"), ("one-user data edit", "data_edit")):
        r = report[key]
        print(
            f"diff, {name:<24} {r['seconds']:8.3f} s  ({r['ratio_to_full']:.2f}x the full "
            f"matrix; {r['stats']['mode']}, {r['stats']['steps']} of "
            f"{r['stats']['total_steps']} steps; +{r['gained']} -{r['lost']})"
        )
    if "verify" in report:
        v = report["verify"]
        print(
            f"diff from two full matrices      {v['full_diff_seconds']:8.3f} s  agree: {v['agree']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
