"""Per-request decision time: polang (``compiled``, ``pydatalog``) against cedarpy.

Usage::

    python benchmarks/bench_decide.py [--requests N] [--entities N] [--policies N]
        [--pydatalog-requests N] [--seed S] [--profile] [--split] [--json]

All engines run in one process on the same generated store (``workload.py``) and the same
request dicts. Each engine loads the store once (cedarpy: pre-parsed ``Schema``,
``PolicySet`` and ``Entities`` handles; polang: parsed schema, policies and an
``EntityFacts``), then every request is timed on its own. polang ``compiled`` and cedarpy
are interleaved request by request so that load on a shared machine hits both alike;
``pydatalog`` runs on the first ``--pydatalog-requests`` requests only (it takes seconds
per request over 10,000 entities). Every engine's decision, reasons and erroring policy ids
are compared; mismatches are printed.

``--split`` adds where the headline row's time goes *in situ*: the same loop through the
public ``Engine`` with the entities handed over already done (as ``Entity`` objects, or as
references to the stored ones), so each difference is that part's share of the whole loop
(this thread's CPU time, so that load on a shared host does not count; best of 11 passes).
Each part timed alone in its own loop adds up to about half the loop: a request's parts run
slower together than alone (caches and branch history are shared by the parse, the store
and the policies). ``context parsed`` hands the context over as a ``RecordValue`` (the
same objects every pass: its clean schema check is kept by value, as a parsed JSON
context's is by type, so the difference is the context's parse).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import pstats
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import Workload, generate
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import (
    parse_context,
    parse_entities,
    parse_entity_uid_json,
)
from polang.language.parser import parse_policies
from polang.language.schema import Schema, parse_schema

Outcome = tuple[str, frozenset[str], frozenset[str]]  # decision, reasons, error policy ids


@dataclass
class EngineRun:
    """One engine's timings (seconds per request) and outcomes, in request order."""

    name: str
    load_s: float = 0.0
    times: list[float] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    note: str = ""
    reference: str = "cedarpy"
    """The run this one's ratio is taken against."""

    @property
    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6 if self.times else math.nan

    @property
    def p99_us(self) -> float:
        if not self.times:
            return math.nan
        ordered = sorted(self.times)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1e6

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.times) * 1e6 if self.times else math.nan


@dataclass
class BenchResult:
    workload: Workload
    runs: list[EngineRun]
    reference: str
    mismatches: list[str]
    allowed: int
    profile: str = ""
    split: SplitResult | None = None

    def run(self, name: str) -> EngineRun:
        return next(r for r in self.runs if r.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.workload.counts,
            "allowed": self.allowed,
            "mismatches": len(self.mismatches),
            "engines": {
                r.name: {
                    "requests": len(r.times),
                    "load_s": round(r.load_s, 3),
                    "median_us": round(r.median_us, 1),
                    "p99_us": round(r.p99_us, 1),
                    "mean_us": round(r.mean_us, 1),
                    "reference": r.reference,
                    "speedup_vs_reference_median": round(
                        self.run(r.reference).median_us / r.median_us, 2
                    )
                    if r.times
                    else None,
                    "note": r.note,
                }
                for r in self.runs
            },
            "reference": self.reference,
            **(
                {"split_us_per_request": {k: round(v, 1) for k, v in self.split.us.items()}}
                if self.split is not None
                else {}
            ),
        }


# ----------------------------------------------------------------------------- engines


class PolangEngine:
    """The polang side: parse the store once, then parse and decide each request."""

    def __init__(self, w: Workload, backend: str, parsed: tuple[Schema, Any, EntityFacts] | None):
        t0 = time.perf_counter()
        if parsed is None:
            schema = parse_schema(w.schema_text)
            policies = parse_policies(w.policies_text)
            facts = EntityFacts(parse_entities(w.entities_json, schema))
        else:
            schema, policies, facts = parsed
        self.schema, self.policies, self.facts = schema, policies, facts
        # Positional ids, as cedarpy names policies (``@id`` annotations do not rename).
        self.authorizer = Authorizer(
            {f"policy{i}": p for i, p in enumerate(policies)}, backend=backend
        )
        self.load_s = time.perf_counter() - t0

    def parse_request(self, r: dict[str, Any]) -> tuple[Any, ...]:
        action = parse_entity_uid_json(r["action"])
        return (
            parse_entity_uid_json(r["principal"]),
            action,
            parse_entity_uid_json(r["resource"]),
            parse_context(r["context"], self.schema, action),
        )

    def decide(self, parsed: tuple[Any, ...]) -> Outcome:
        d = self.authorizer.is_authorized(*parsed, self.facts)
        return (
            d.decision,
            frozenset(d.reasons),
            frozenset(e.policy_id for e in d.errors),
        )

    def __call__(self, r: dict[str, Any]) -> Outcome:
        return self.decide(self.parse_request(r))


class CedarEngine:
    """cedarpy with pre-parsed handles: only the request is converted per call."""

    def __init__(self, w: Workload, with_schema: bool) -> None:
        import cedarpy

        self.cedarpy = cedarpy
        t0 = time.perf_counter()
        schema = cedarpy.Schema.from_str(w.schema_text)
        self.policies = cedarpy.PolicySet.from_str(w.policies_text)
        self.entities = cedarpy.Entities.from_json_str(w.entities_json, schema)
        self.schema = schema if with_schema else None
        self.load_s = time.perf_counter() - t0

    def __call__(self, r: dict[str, Any]) -> Outcome:
        res = self.cedarpy.is_authorized(r, self.policies, self.entities, self.schema)
        return self.outcome(res)

    @staticmethod
    def outcome(res: Any) -> Outcome:
        errors = set()
        for e in res.diagnostics.errors:
            start = e.find("policy `")
            errors.add(e[start + 8 : e.index("`", start + 8)] if start >= 0 else e)
        return (res.decision.value.lower(), frozenset(res.diagnostics.reasons), frozenset(errors))

    def batch(self, requests: Sequence[dict[str, Any]]) -> tuple[float, list[Outcome]]:
        t0 = time.perf_counter()
        results = self.cedarpy.is_authorized_batch(
            list(requests), self.policies, self.entities, self.schema
        )
        return time.perf_counter() - t0, [self.outcome(r) for r in results]


class PolangService:
    """The public ``Engine`` as a service calls it: the store (schema, policies, the
    entities as default entities) in a directory, and each request with its principal and
    resource given in full (entity JSON with attributes and parents, as the service holds
    them) and the action as text. Every call parses and checks both entities and the
    context, lays the entities over the store and decides (``authorize_unsigned``)."""

    def __init__(self, w: Workload, root: Path) -> None:
        from polang import Engine

        t0 = time.perf_counter()
        (root / "policies").mkdir(parents=True)
        (root / "entities").mkdir()
        meta = {
            "polang_version": "4.0.0",
            "policy_store": {"id": "b", "name": "B", "version": "1.0.0"},
        }
        (root / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
        (root / "schema.polangschema").write_text(w.schema_text, encoding="utf-8")
        # positional ids, as cedarpy names policies (``@id`` annotations do not rename there)
        text = "\n\n".join(
            f'@id("policy{i}")\n' + re.sub(r'^@id\("[^"]*"\)\s*', "", p)
            for i, p in enumerate(w.policies)
        )
        (root / "policies" / "all.polang").write_text(text, encoding="utf-8")
        (root / "entities" / "all.json").write_text(w.entities_json, encoding="utf-8")
        self.engine = Engine(
            {
                "ENGINE_POLICY_STORE_LOCAL_FN": str(root),
                "ENGINE_LOG_TYPE": "off",
                "ENGINE_MAX_DEFAULT_ENTITIES": max(1000, len(w.entities)),
            }
        )
        self.engine.authorizer.backend.wait_generated(60)  # type: ignore[attr-defined]
        self.load_s = time.perf_counter() - t0
        self.by_uid = {(e["uid"]["type"], e["uid"]["id"]): e for e in w.entities}

    def args(self, r: dict[str, Any]) -> tuple[Any, ...]:
        """A request as the service has it (not timed): the entities in full."""
        p, a, res = r["principal"], r["action"], r["resource"]
        return (
            f'{a["type"]}::"{a["id"]}"',
            self.by_uid[(res["type"], res["id"])],
            r["context"],
            self.by_uid[(p["type"], p["id"])],
        )

    def __call__(self, args: tuple[Any, ...]) -> Outcome:
        d = self.engine.authorize_unsigned(*args)
        diag = d.response.diagnostics
        return (
            d.response.decision,
            frozenset(diag.reason),
            frozenset(e["policy_id"] for e in diag.errors),
        )


def _timed(fn: Callable[[Any], Outcome], r: Any, run: EngineRun) -> None:
    t0 = time.perf_counter()
    out = fn(r)
    run.times.append(time.perf_counter() - t0)
    run.outcomes.append(out)


# ----------------------------------------------------------------------------- the run


def run_bench(
    *,
    n_requests: int = 1_000,
    n_entities: int = 10_000,
    n_policies: int = 200,
    pydatalog_requests: int = 20,
    seed: int = 7,
    warmup: int = 20,
    block: int = 20,
    profile: bool = False,
    split: bool = False,
    log: Callable[[str], None] = lambda s: None,
) -> BenchResult:
    """Load every engine, time every request, compare outcomes. No printing but ``log``."""
    t0 = time.perf_counter()
    w = generate(n_entities=n_entities, n_policies=n_policies, n_requests=n_requests, seed=seed)
    log(f"generated the store in {time.perf_counter() - t0:.1f} s: {w.counts}")

    compiled = PolangEngine(w, "compiled", None)
    log(f"polang compiled loaded in {compiled.load_s:.1f} s")
    cedar = CedarEngine(w, with_schema=True)
    log(f"cedarpy loaded in {cedar.load_s:.1f} s")
    cedar_ns = CedarEngine.__new__(CedarEngine)
    cedar_ns.__dict__.update(cedar.__dict__)
    cedar_ns.schema = None
    tmp = tempfile.TemporaryDirectory()
    service = PolangService(w, Path(tmp.name) / "store")
    log(f"polang Engine loaded in {service.load_s:.1f} s")
    service_args = [service.args(r) for r in w.requests]

    runs = {
        "polang Engine, full entities": EngineRun(
            "polang Engine, full entities",
            service.load_s,
            note="authorize_unsigned, principal and resource in full",
        ),
        "polang compiled": EngineRun("polang compiled", compiled.load_s),
        "polang compiled, decide only": EngineRun(
            "polang compiled, decide only", note="request already parsed"
        ),
        "cedarpy": EngineRun("cedarpy", cedar.load_s, note="pre-parsed Schema/PolicySet/Entities"),
        "cedarpy, no schema": EngineRun("cedarpy, no schema", note="request not validated"),
    }
    reqs = w.requests
    for r, a in zip(reqs[:warmup], service_args, strict=False):
        compiled(r)
        cedar(r)
        service(a)
    gc.collect()
    for i, r in enumerate(reqs):
        # Alternate who goes first so that neither always runs on a warmer cache.
        order = (3, 1, 0, 2) if i % 2 == 0 else (2, 0, 1, 3)
        for k in order:
            if k == 3:
                _timed(service, service_args[i], runs["polang Engine, full entities"])
            elif k == 0:
                t_a = time.perf_counter()
                parsed = compiled.parse_request(r)
                t_b = time.perf_counter()
                out = compiled.decide(parsed)
                t_c = time.perf_counter()
                runs["polang compiled"].times.append(t_c - t_a)
                runs["polang compiled"].outcomes.append(out)
                runs["polang compiled, decide only"].times.append(t_c - t_b)
                runs["polang compiled, decide only"].outcomes.append(out)
            elif k == 1:
                _timed(cedar, r, runs["cedarpy"])
            else:
                _timed(cedar_ns, r, runs["cedarpy, no schema"])
    log(f"timed {len(reqs)} requests on polang compiled and cedarpy")

    # The same requests in alternating blocks: within a block each engine runs on caches
    # it warmed itself, as in a service that authorizes many requests in a row.
    warm = {
        "polang Engine": EngineRun(
            f"polang Engine, full, blocks of {block}",
            note="the steady state of a service",
            reference=f"cedarpy, blocks of {block}",
        ),
        "polang compiled": EngineRun(
            f"polang compiled, blocks of {block}",
            note="request parsing included",
            reference=f"cedarpy, blocks of {block}",
        ),
        "cedarpy": EngineRun(f"cedarpy, blocks of {block}", note="pre-parsed handles"),
    }
    warm["cedarpy"].reference = warm["cedarpy"].name
    for start in range(0, len(reqs), block):
        chunk = reqs[start : start + block]
        chunk_args = service_args[start : start + block]
        engines: list[tuple[str, Callable[[Any], Outcome], Sequence[Any]]] = [
            ("polang Engine", service, chunk_args),
            ("polang compiled", compiled, chunk),
            ("cedarpy", cedar, chunk),
        ]
        if (start // block) % 2:
            engines.reverse()
        for key, engine, inputs in engines:
            for r in inputs:
                _timed(engine, r, warm[key])
    log(f"timed {len(reqs)} requests in blocks of {block}")

    batch_s, batch_out = cedar.batch(reqs)
    batch_run = EngineRun(
        "cedarpy batch", note="is_authorized_batch, mean only (one call for all requests)"
    )
    batch_run.times = [batch_s / max(1, len(reqs))] * len(reqs)
    batch_run.outcomes = batch_out
    all_runs = [*runs.values(), batch_run, *warm.values()]

    if pydatalog_requests > 0:
        py = PolangEngine(w, "pydatalog", (compiled.schema, compiled.policies, compiled.facts))
        py_run = EngineRun(
            "polang pydatalog",
            py.load_s,
            note=f"first {min(pydatalog_requests, len(reqs))} requests only",
        )
        # The first request loads the entity facts into pyDatalog: count it as load time.
        t_first = time.perf_counter()
        py(reqs[0])
        py_run.load_s += time.perf_counter() - t_first
        for r in reqs[:pydatalog_requests]:
            _timed(py, r, py_run)
        log(f"timed {len(py_run.times)} requests on polang pydatalog")
        all_runs.append(py_run)

    reference = runs["cedarpy"].outcomes
    mismatches = []
    for run in all_runs:
        for i, out in enumerate(run.outcomes):
            if out != reference[i]:
                mismatches.append(
                    f"{run.name} request {i} {json.dumps(reqs[i])}: {_show(out)}; "
                    f"cedarpy: {_show(reference[i])}"
                )
    prof_text = ""
    if profile:
        prof_text = profile_polang(service, service_args) + profile_polang(compiled, reqs)
    split_result = None
    if split:
        split_result = split_service(service, service_args)
        mismatches.extend(split_result.mismatches)
        log("timed the in-situ split of the headline row")
    service.engine.close()
    tmp.cleanup()
    allowed = sum(1 for o in reference if o[0] == "allow")
    return BenchResult(w, all_runs, "cedarpy", mismatches, allowed, prof_text, split_result)


SPLIT_VARIANTS = (
    ("full", "entities and context as JSON (the headline row)"),
    ("entities parsed", "the entities as Entity objects (still laid over the store)"),
    ("references", "the entities as uids of the stored ones (nothing laid over)"),
    ("context parsed", "the context as a RecordValue (entities as JSON)"),
    ("full, 20 repeated", "the first 20 requests over and over (a small working set)"),
)


@dataclass
class SplitResult:
    """Per variant of :data:`SPLIT_VARIANTS`: the fastest pass, in us per request."""

    us: dict[str, float]
    passes: int
    mismatches: list[str]

    def table(self) -> str:
        full = self.us["full"]
        lines = [
            f"where the headline row's time goes (in situ, CPU time, best of {self.passes} "
            "passes over every request, loop only):",
            f"  {'variant':<20} {'us/request':>10} {'less than full':>15}  what is given",
        ]
        for name, what in SPLIT_VARIANTS:
            us = self.us[name]
            lines.append(f"  {name:<20} {us:>10.1f} {full - us:>15.1f}  {what}")
        return "\n".join(lines)


def split_service(
    service: PolangService,
    service_args: Sequence[tuple[Any, ...]],
    passes: int = 11,
) -> SplitResult:
    """The headline loop with parts of the request done beforehand (see the module doc).

    Every variant must decide as the full one does (the request entities are the stored
    ones, so a reference decides alike); a difference is reported as a mismatch."""
    from polang.language.entities import parse_context, parse_entity
    from polang.language.parser import parse_entity_uid

    engine = service.engine
    schema = engine.schema
    variants: dict[str, list[tuple[Any, ...]]] = {"full": list(service_args)}
    ents_parsed = []
    refs = []
    ctx_parsed = []
    for action, resource, context, principal in service_args:
        res_e = parse_entity(resource, schema)
        prin_e = parse_entity(principal, schema)
        ents_parsed.append((action, res_e, context, prin_e))
        refs.append((action, res_e.uid, context, prin_e.uid))
        ctx = parse_context(context, schema, parse_entity_uid(action))
        ctx_parsed.append((action, resource, ctx, principal))
    variants["entities parsed"] = ents_parsed
    variants["references"] = refs
    variants["context parsed"] = ctx_parsed
    first = list(service_args[:20])
    variants["full, 20 repeated"] = (first * (len(service_args) // max(1, len(first))))[
        : len(service_args)
    ] or first
    mismatches = []
    for name, inputs in variants.items():
        if name == "full, 20 repeated":
            continue
        for i, a in enumerate(inputs):
            if service(a) != service(service_args[i]):
                mismatches.append(f"--split variant {name!r}: request {i} decided differently")
    call = engine.authorize_unsigned
    best = {name: math.inf for name in variants}
    # this thread's CPU time: a pass takes tens of milliseconds, and on a loaded host
    # hardly one runs without losing the core (wall clock read 2x at load 8)
    clock = time.thread_time
    names = list(variants)
    for k in range(passes):
        for name in names[k % len(names) :] + names[: k % len(names)]:  # rotating order
            inputs = variants[name]
            t0 = clock()
            for a in inputs:
                call(*a)
            best[name] = min(best[name], (clock() - t0) / len(inputs))
    return SplitResult({n: v * 1e6 for n, v in best.items()}, passes, mismatches)


def _show(o: Outcome) -> str:
    return f"{o[0]} reasons={sorted(o[1])} errors={sorted(o[2])}"


def profile_polang(engine: Callable[[Any], Outcome], reqs: Sequence[Any], top: int = 30) -> str:
    """Where polang spends its per-request time (request parsing included)."""
    prof = cProfile.Profile()
    prof.enable()
    for r in reqs:
        engine(r)
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


# ----------------------------------------------------------------------------- output


def table(res: BenchResult) -> str:
    head = (
        f"{'engine':<30} {'requests':>8} {'load s':>7} {'median us':>10} {'p99 us':>10} "
        f"{'mean us':>10} {'cedarpy/x':>10}  note"
    )
    lines = [head, "-" * len(head)]
    for r in res.runs:
        is_batch = r.name == "cedarpy batch"
        ratio = res.run(r.reference).median_us / (r.mean_us if is_batch else r.median_us)
        lines.append(
            f"{r.name:<30} {len(r.times):>8} {r.load_s:>7.1f} "
            f"{'-' if is_batch else f'{r.median_us:.1f}':>10} "
            f"{'-' if is_batch else f'{r.p99_us:.1f}':>10} {r.mean_us:>10.1f} "
            f"{ratio:>9.3g}x  {r.note}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000)
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--policies", type=int, default=200)
    ap.add_argument(
        "--pydatalog-requests",
        type=int,
        default=20,
        help="requests run on the pydatalog backend (slow; 0 skips it)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--block", type=int, default=20, help="requests per block in the blocked pass")
    ap.add_argument("--profile", action="store_true", help="cProfile polang compiled afterwards")
    ap.add_argument(
        "--split",
        action="store_true",
        help="also time the headline loop with parts of the request done beforehand",
    )
    ap.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = ap.parse_args(argv)

    res = run_bench(
        n_requests=args.requests,
        n_entities=args.entities,
        n_policies=args.policies,
        pydatalog_requests=args.pydatalog_requests,
        seed=args.seed,
        block=args.block,
        profile=args.profile,
        split=args.split,
        log=lambda s: print(s, file=sys.stderr, flush=True),
    )
    c = res.workload.counts
    print(
        f"\nstore: {c['policies']} policies, {c['entities']} entities, {c['requests']} requests "
        f"({res.allowed} allowed by cedarpy), seed {res.workload.seed}\n"
    )
    print(table(res))
    print(
        "\ncedarpy/x = cedarpy median / this engine's median (batch: its mean; blocked rows:"
        " against cedarpy in blocks); above 1 means faster than cedarpy."
    )
    if res.mismatches:
        print(f"\n{len(res.mismatches)} MISMATCHES with cedarpy:")
        for m in res.mismatches[:20]:
            print("  " + m)
    else:
        print("\ndecisions, reasons and error ids: identical across all engines")
    if res.split is not None:
        print("\n" + res.split.table())
    if res.profile:
        print("\n" + res.profile)
    if args.json:
        print(json.dumps(res.to_dict()))
    return 1 if res.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
