"""Cold start: whole processes, polang against cedarling-python, side by side.

Usage::

    python benchmarks/bench_coldstart.py [--runs N] [--json] [--baseline SRC]

What a CLI call, a serverless cold start, a worker restart or a test process pays before
its first answer. Each sample is one new Python process (``sys.executable``), timed from
``subprocess`` start to exit (wall clock), that:

- ``first decision``: imports the engine, builds it on a one-policy directory store
  (schema, one policy, metadata; written once under polang's file names and once under
  Cedar's) and decides one ``authorize_unsigned`` request (principal and resource as
  ``cedar_entity_mapping`` dicts); the two engines must answer the same;
- ``import only``: ``import polang`` / ``import cedarling_python``;
- ``polang --help``: the CLI's help (``python -m polang --help``, the same code as the
  ``polang`` script);
- ``python -c pass``: the interpreter alone, the floor under every row.

Rows run ``--runs`` (default 15) times each, interleaved and rotating which goes first,
so load on a shared machine hits them alike. Medians in milliseconds; ``ratio`` is polang's
median over cedarling's for the same row (the goal of ``design.md``: at most 2 for the first
decision). The child processes also report where their time went (import, build, decide),
medians in the last table. Bytecode caches are warm (each script runs once before timing).
CPU time (user + system of the child, from ``getrusage``) is reported beside wall clock:
on a shared machine it moves less, since it leaves out the time spent waiting for a core.

``--baseline SRC`` adds the polang rows once more with ``PYTHONPATH=SRC`` (another
checkout's ``src``, e.g. ``git archive <commit> | tar -x -C /tmp/base``), interleaved with
the others: before and after measured side by side under the same load. A bare ``src``
has no ``polang.rules`` (the package maps it from the repository's ``rules/``): run from an
editable install (``pip install -e``), whose finder supplies it, or give an installed tree
(a ``site-packages``, or ``pip install --target DIR <checkout>``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCHEMA = """namespace App {
    entity User = { "name": String, "level": Long };
    entity Doc = { "owner": String, "level": Long };
    action "read" appliesTo { principal: [User], resource: [Doc] };
}
"""

POLICY = """@id("owners-and-seniors-read")
permit (principal is App::User, action == App::Action::"read", resource is App::Doc)
when { resource.owner == principal.name || principal.level > resource.level };
"""

REQUEST = {
    "action": 'App::Action::"read"',
    "resource": {
        "cedar_entity_mapping": {"entity_type": "App::Doc", "id": "d1"},
        "owner": "bob",
        "level": 3,
    },
    "principal": {
        "cedar_entity_mapping": {"entity_type": "App::User", "id": "alice"},
        "name": "alice",
        "level": 5,
    },
}


def write_stores(root: Path) -> tuple[Path, Path]:
    def meta(key: str) -> str:
        return json.dumps(
            {
                key: "4.4.0",
                "policy_store": {
                    "id": "c01d57a7",
                    "name": "Cold",
                    "description": "bench_coldstart.py",
                    "version": "1.0.0",
                },
            }
        )

    polang, cedar = root / "polang", root / "cedarling"
    for d, ext, schema_ext, key in (
        (polang, "polang", "polangschema", "polang_version"),
        (cedar, "cedar", "cedarschema", "cedar_version"),
    ):
        (d / "policies").mkdir(parents=True)
        (d / "metadata.json").write_text(meta(key), encoding="utf-8")
        (d / f"schema.{schema_ext}").write_text(SCHEMA, encoding="utf-8")
        (d / "policies" / f"read.{ext}").write_text(POLICY, encoding="utf-8")
    return polang, cedar


POLANG_FIRST = """
import json, sys, time
t0 = time.perf_counter()
from polang import Engine
t1 = time.perf_counter()
e = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": sys.argv[1], "ENGINE_LOG_TYPE": "off",
            "ENGINE_JWT_SIG_VALIDATION": "disabled", "ENGINE_JWT_STATUS_VALIDATION": "disabled"})
t2 = time.perf_counter()
r = json.loads(sys.argv[2])
d = e.authorize_unsigned(r["action"], r["resource"], {}, r["principal"])
t3 = time.perf_counter()
print(json.dumps({"decision": d.decision, "reason": sorted(d.response.diagnostics.reason),
                  "import": t1 - t0, "build": t2 - t1, "decide": t3 - t2}))
"""

CEDARLING_FIRST = """
import json, sys, time
t0 = time.perf_counter()
import cedarling_python as cp
t1 = time.perf_counter()
e = cp.Cedarling(cp.BootstrapConfig({
    "CEDARLING_APPLICATION_NAME": "cold", "CEDARLING_POLICY_STORE_LOCAL_FN": sys.argv[1],
    "CEDARLING_LOG_TYPE": "off", "CEDARLING_JWT_SIG_VALIDATION": "disabled",
    "CEDARLING_JWT_STATUS_VALIDATION": "disabled"}))
t2 = time.perf_counter()
r = json.loads(sys.argv[2])
d = e.authorize_unsigned(cp.RequestUnsigned(r["action"], cp.EntityData.from_dict(r["resource"]),
                         {}, cp.EntityData.from_dict(r["principal"])))
t3 = time.perf_counter()
print(json.dumps({"decision": d.is_allowed(), "reason": sorted(d.response.diagnostics.reason),
                  "import": t1 - t0, "build": t2 - t1, "decide": t3 - t2}))
"""


def commands(
    pstore: Path, cstore: Path, baseline: str | None = None
) -> dict[str, tuple[list[str], str]]:
    """Row variant -> (argv, row name)."""
    py = sys.executable
    req = json.dumps(REQUEST)
    extra: dict[str, tuple[list[str], str]] = {}
    if baseline is not None:
        extra = {
            "baseline first decision": (
                [py, "-c", POLANG_FIRST, str(pstore), req],
                "first decision",
            ),
            "baseline import only": ([py, "-c", "import polang"], "import only"),
        }
    return {
        **extra,
        "polang first decision": ([py, "-c", POLANG_FIRST, str(pstore), req], "first decision"),
        "cedarling first decision": (
            [py, "-c", CEDARLING_FIRST, str(cstore), req],
            "first decision",
        ),
        "polang import only": ([py, "-c", "import polang"], "import only"),
        "cedarling import only": ([py, "-c", "import cedarling_python"], "import only"),
        "polang --help": ([py, "-m", "polang", "--help"], "polang --help"),
        "python -c pass": ([py, "-c", "pass"], "python -c pass"),
    }


def run(runs: int, baseline: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env = dict(env)
    if baseline is not None:
        base_env["PYTHONPATH"] = baseline
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    parts: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pstore, cstore = write_stores(Path(tmp))
        cmds = commands(pstore, cstore, baseline)
        names = list(cmds)

        def env_of(name: str) -> dict[str, str]:
            return base_env if name.startswith("baseline") else env

        for name in names:  # warm the bytecode caches and check that each one works
            subprocess.run(cmds[name][0], check=True, capture_output=True, env=env_of(name))
        for i in range(runs):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                argv = cmds[name][0]
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                out = subprocess.run(
                    argv, check=True, capture_output=True, text=True, env=env_of(name)
                )
                times.setdefault(name, []).append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                cpu.setdefault(name, []).append(used)
                if "first decision" in name:
                    parts.setdefault(name, []).append(json.loads(out.stdout))
    answers = {n: {(p["decision"], tuple(p["reason"])) for p in ps} for n, ps in parts.items()}
    agree = len({frozenset(a) for a in answers.values()}) == 1 and all(
        len(a) == 1 for a in answers.values()
    )
    med = {n: statistics.median(ts) * 1e3 for n, ts in times.items()}
    med_cpu = {n: statistics.median(ts) * 1e3 for n, ts in cpu.items()}
    split = {
        n: {k: statistics.median(p[k] for p in ps) * 1e3 for k in ("import", "build", "decide")}
        for n, ps in parts.items()
    }
    return {
        "runs": runs,
        "median_ms": med,
        "median_cpu_ms": med_cpu,
        "split_ms": split,
        "agree": agree,
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="processes per row variant")
    ap.add_argument("--json", action="store_true", help="also print one line of JSON")
    ap.add_argument(
        "--baseline",
        metavar="SRC",
        help="also time polang from this src directory (PYTHONPATH), side by side",
    )
    args = ap.parse_args(argv)
    res = run(args.runs, args.baseline)
    for what, med in (("wall clock", res["median_ms"]), ("CPU time", res["median_cpu_ms"])):
        print(f"whole processes, {what}, median of {args.runs} (ms)\n")
        base = "baseline first decision" in med
        head = f"{'row':22} {'polang':>9} {'cedarling':>10} {'ratio':>7}"
        print(head + (f" {'baseline':>9} {'ratio':>7}" if base else ""))
        for row in ("first decision", "import only"):
            p, c = med[f"polang {row}"], med[f"cedarling {row}"]
            line = f"{row:22} {p:9.1f} {c:10.1f} {p / c:6.2f}x"
            if base:
                b = med[f"baseline {row}"]
                line += f" {b:9.1f} {b / c:6.2f}x"
            print(line)
        print(f"{'polang --help':22} {med['polang --help']:9.1f}")
        floor = med["python -c pass"]
        print(f"{'python -c pass':22} {floor:9.1f} {floor:10.1f}\n")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("inside the first-decision processes, wall clock, medians (ms)")
    print(f"{'':22} {'import':>8} {'build':>8} {'decide':>8}")
    for n, s in res["split_ms"].items():
        print(f"{n:22} {s['import']:8.1f} {s['build']:8.1f} {s['decide']:8.2f}")
    print(
        "\nfirst decisions: "
        + ("the same in both engines" if res["agree"] else f"DIFFER: {res['answers']}")
    )
    if args.json:
        out = {k: v for k, v in res.items() if k != "answers"}
        print(json.dumps(out))
    return 0 if res["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
