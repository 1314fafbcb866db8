"""Plans (list endpoints): planning time per request on the benchmark store, and every
plan of the conformance corpus checked row by row against the engine's decisions.

Usage::

    python benchmarks/bench_plan.py [--entities N] [--policies N] [--requests N]
        [--seed S] [--verify N] [--json]
    python benchmarks/bench_plan.py --corpus [PATH] [--step K] [--json]

The first form builds the workload store (``workload.py``) as a service runs it (an
``Engine`` over a store directory, ``bench_decide.PolangService``) and, for each request's
(principal, action, resource type, context), times:

- ``Engine.plan``: the public call, the principal given in full (entity JSON, as the
  service holds it) and the context as JSON: reading and checking the request included;
- ``plan()``: the planning alone over the store's facts (request already read), in
  wall-clock time and in the thread's CPU time (which other processes' load on a shared
  machine does not inflate);
- ``authorize_unsigned``: one decision of the same request, the peer the plan's time is
  set beside (a list endpoint that plans once instead of deciding each row).

``median``/``p99``/``mean`` are wall-clock microseconds per request after a warm-up.
``--verify N`` checks the first N plans on every document of the store: each row's
``Plan.allows`` against ``authorize_unsigned`` with that row as the resource.

``--corpus`` plans, for every test file of the conformance corpus (``PATH``: the
directory or the ``polang-corpus.tar.gz`` archive; default ``../shared/conformance``), each
(principal, action, resource type, context) of its requests, and compares every row (the
file's entities of that type, and requests' resources the file lacks, as bare entities)
with the engine's decision: once with the rows among the store's entities, once with
every entity of that type taken out of the store and the row laid over the rest (a
service's rows), and once with each stored row given another row's data (a row that is
not what the store holds under its uid). It reports the plans by kind (of the first two
passes) and the mismatches (there must be none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import generate
from polang import conformance
from polang.analysis.plan import Plan, plan
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts, Request
from polang.errors import PolangError
from polang.language.entities import Entity, parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue

Key = tuple[EntityUID | None, EntityUID, str, RecordValue]
"""A plan's request: principal, action, resource type, context."""


# ---------------------------------------------------------------- plans against decisions


@dataclass
class Compared:
    """Plans made and rows compared; every mismatch, described."""

    kinds: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    mismatches: list[str] = field(default_factory=list)

    def add(self, other: Compared) -> None:
        self.kinds += other.kinds
        self.rows += other.rows
        self.mismatches.extend(other.mismatches)


def compare(
    authorizer: Authorizer,
    facts: EntityFacts,
    keys: Iterable[Key],
    extra_rows: Iterable[Entity] = (),
    inspect: Callable[[Plan], None] | None = None,
) -> Compared:
    """Each key's plan over the stored rows of its type, then over the same rows outside
    the store, then over rows that differ from the stored entity of their uid; each row's
    ``Plan.allows`` against the engine's decision (the authorizer's verdict over the same
    entities with the row laid over them). ``inspect`` sees every plan (the tests' checks
    of its form)."""
    stored: dict[str, list[Entity]] = {}
    for e in facts.entities:
        stored.setdefault(e.uid.type, []).append(e)
    for e in extra_rows:
        if facts.get(e.uid) is None:
            stored.setdefault(e.uid.type, []).append(e)
    out = Compared()
    outside: dict[tuple[str, EntityUID | None], EntityFacts] = {}
    for key in dict.fromkeys(keys):
        principal, _a, rtype, _c = key
        rows = stored.get(rtype, [])
        k = (rtype, principal)
        if k not in outside:  # the principal stays, as authorize_unsigned's caller gives it
            outside[k] = EntityFacts(
                [e for e in facts.entities if e.uid.type != rtype or e.uid == principal]
            )
        for over in (facts, outside[k]):
            p = _compare_rows(authorizer, over, key, rows, out)
            if inspect is not None:
                inspect(p)
        # rows whose data is not the stored entity's: each stored row given the next
        # one's attributes, parents and tags (the plan is the first pass's)
        _compare_rows(authorizer, facts, key, _shifted(rows), out, count=False)
    return out


def _shifted(rows: list[Entity]) -> list[Entity]:
    """Each row with the data of the next row of the list (its own uid kept)."""
    return [
        Entity(
            r.uid,
            dict(o.attrs),
            {x for x in o.parents if x != r.uid},
            dict(o.tags),
        )
        for r, o in zip(rows, rows[1:] + rows[:1], strict=True)
        if o is not r
    ]


def _compare_rows(
    authorizer: Authorizer,
    facts: EntityFacts,
    key: Key,
    rows: list[Entity],
    out: Compared,
    count: bool = True,
) -> Plan:
    principal, action, rtype, ctx = key
    p = plan(authorizer, action, rtype, facts, principal=principal, context=ctx)
    if count:
        out.kinds[p.kind] += 1
    for row in rows:
        request = Request(principal, action, row.uid, ctx)
        want = authorizer.verdict(request, facts.with_entities([row]))[0]
        out.rows += 1
        if p.allows(row) != want:
            out.mismatches.append(f"{key} row {row.uid}: decision {want}\n{p.text()}")
    return p


def corpus_keys(
    root: Path, step: int = 1
) -> Iterator[tuple[str, Authorizer, EntityFacts, list[Key], list[Entity]]]:
    """Every ``step``-th test file of the corpus: its authorizer, its entities, the
    (principal, action, resource type, context) of its requests, and the requests'
    resources as bare rows (for those the file's entities lack)."""
    for f in list(conformance.test_files(root))[::step]:
        spec = json.loads(f.read_text("utf-8"))
        try:
            schema = parse_schema((root / spec["schema"]).read_text("utf-8"))
            policies = parse_policies((root / spec["policies"]).read_text("utf-8"))
            store = parse_entities((root / spec["entities"]).read_text("utf-8"), schema)
            authorizer = Authorizer({f"policy{i}": p for i, p in enumerate(policies)})
        except PolangError:
            continue  # the corpus runner reports these; nothing to plan
        keys: list[Key] = []
        extra: list[Entity] = []
        for req in spec["requests"]:
            action = parse_entity_uid_json(req["action"])
            try:
                context = parse_context(req.get("context", {}), schema, action)
            except PolangError:
                continue
            resource = parse_entity_uid_json(req["resource"])
            keys.append((parse_entity_uid_json(req["principal"]), action, resource.type, context))
            extra.append(Entity(resource))
        yield f.name, authorizer, EntityFacts(store), keys, extra


def corpus_report(
    root: Path, step: int = 1, inspect: Callable[[Plan], None] | None = None
) -> dict[str, Any]:
    """Every ``step``-th corpus file's plans compared (:func:`compare`)."""
    total = Compared()
    files = 0
    t0 = time.perf_counter()
    for _name, authorizer, facts, keys, extra in corpus_keys(root, step):
        files += 1
        total.add(compare(authorizer, facts, keys, extra, inspect))
    return {
        "files": files,
        "plans": sum(total.kinds.values()),
        "kinds": dict(sorted(total.kinds.items())),
        "rows": total.rows,
        "mismatches": total.mismatches,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _corpus_dir(path: str | None, tmp: Path) -> Path:
    p = (
        Path(path)
        if path
        else Path(__file__).resolve().parents[2] / "shared" / "conformance" / "polang-corpus.tar.gz"
    )
    if p.is_dir():
        return p
    with tarfile.open(p) as tf:
        tf.extractall(tmp, filter="data")
    return tmp


# ---------------------------------------------------------------- planning time


def _stats(times: Sequence[float]) -> dict[str, float]:
    us = sorted(t * 1e6 for t in times)
    return {
        "median": round(statistics.median(us), 1),
        "p99": round(us[min(len(us) - 1, int(len(us) * 0.99))], 1),
        "mean": round(statistics.fmean(us), 1),
    }


def run_bench(
    n_entities: int = 10_000,
    n_policies: int = 200,
    n_requests: int = 1_000,
    seed: int = 7,
    verify: int = 20,
    warmup: int = 20,
) -> dict[str, Any]:
    """Planning time per request on the workload store (module docstring)."""
    from benchmarks.bench_decide import PolangService

    w = generate(n_entities=n_entities, n_policies=n_policies, n_requests=n_requests, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        service = PolangService(w, Path(tmp) / "store")
        engine = service.engine
        snap_facts = engine._snap.facts
        authorizer = engine.authorizer
        schema = engine.schema
        calls = []
        for r in w.requests:
            action, resource, context, principal = service.args(r)
            rtype = resource["uid"]["type"]
            calls.append((action, rtype, principal, context, resource))
        public: list[float] = []
        core: list[float] = []
        core_cpu: list[float] = []  # CPU time: what a shared machine's load does not inflate
        decide: list[float] = []
        kinds: Counter[str] = Counter()
        residuals = 0
        for i, (action, rtype, principal, context, resource) in enumerate(calls):
            t0 = time.perf_counter()
            p = engine.plan(action, rtype, principal, context)
            t1 = time.perf_counter()
            act = p.action
            ctx = parse_context(context, schema, act)
            c2 = time.thread_time()
            t2 = time.perf_counter()
            plan(authorizer, act, rtype, snap_facts, principal=p.principal, context=ctx)
            t3 = time.perf_counter()
            c3 = time.thread_time()
            engine.authorize_unsigned(action, resource, context, principal)
            t4 = time.perf_counter()
            if i >= warmup:
                public.append(t1 - t0)
                core.append(t3 - t2)
                core_cpu.append(c3 - c2)
                decide.append(t4 - t3)
            kinds[p.kind] += 1
            residuals += len(p.residuals)
        checked = Compared()
        docs = [e for e in w.entities if e["uid"]["type"] == "Document"]
        for action, rtype, principal, context, _res in calls[:verify]:
            p = engine.plan(action, rtype, principal, context)
            for doc in docs if rtype == "Document" else ():
                want = engine.authorize_unsigned(action, doc, context, principal).decision
                row = engine._snap.facts.get(EntityUID(rtype, doc["uid"]["id"]))
                assert row is not None
                checked.rows += 1
                if p.allows(row) != want:
                    checked.mismatches.append(f"{action} {principal['uid']} {doc['uid']}")
        engine.close()
    return {
        "store": w.counts,
        "plans": len(calls),
        "kinds": dict(sorted(kinds.items())),
        "residuals_per_conditional_plan": round(residuals / max(1, kinds["conditional"]), 2),
        "Engine.plan": _stats(public),
        "plan() alone": _stats(core),
        "plan() alone, CPU time": _stats(core_cpu),
        "authorize_unsigned": _stats(decide),
        "verified_rows": checked.rows,
        "mismatches": checked.mismatches,
    }


def table(res: dict[str, Any]) -> str:
    lines = [f"{'row':<26}{'median us':>12}{'p99 us':>10}{'mean us':>10}{'x decision':>12}"]
    peer = res["authorize_unsigned"]["median"]
    for name in ("Engine.plan", "plan() alone", "plan() alone, CPU time", "authorize_unsigned"):
        s = res[name]
        ratio = s["median"] / peer if peer else 0.0
        lines.append(
            f"{name:<26}{s['median']:>12.1f}{s['p99']:>10.1f}{s['mean']:>10.1f}{ratio:>11.2f}x"
        )
    lines.append(
        f"plans {res['plans']} {res['kinds']}, residuals per conditional plan "
        f"{res['residuals_per_conditional_plan']}; rows verified {res['verified_rows']}, "
        f"mismatches {len(res['mismatches'])}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument("--requests", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verify", type=int, default=20)
    ap.add_argument("--corpus", nargs="?", const="", default=None, metavar="PATH")
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.corpus is not None:
        with tempfile.TemporaryDirectory() as tmp:
            rep = corpus_report(_corpus_dir(args.corpus or None, Path(tmp)), args.step)
        shown = {**rep, "mismatches": len(rep["mismatches"])}
        print(json.dumps(shown) if args.json else shown)
        for m in rep["mismatches"][:20]:
            print(m)
        return 1 if rep["mismatches"] else 0
    res = run_bench(args.entities, args.policies, args.requests, args.seed, args.verify)
    print(table(res))
    if args.json:
        print(json.dumps({**res, "mismatches": len(res["mismatches"])}))
    return 1 if res["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
