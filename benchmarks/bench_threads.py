"""Decisions per second with 1, 2 and 4 threads deciding at once: polang (logs off and on)
beside cedarling-python and plain Python work, in one process.

Usage::

    python benchmarks/bench_threads.py [--rounds N] [--seconds S] [--json]

What a threaded server (gunicorn's threads, Flask or Django served threaded) gets from
threads: each thread decides ``authorize_unsigned`` on the one-policy store of
``bench_coldstart.py`` in a loop for ``--seconds`` (0.5), and the decisions all threads
made are counted. Rows:

- polang with logs ``off`` and with the ``memory`` log, one engine shared by the threads;
- polang ``off`` with an engine per thread;
- cedarling-python with logs ``off`` and ``memory``, one instance shared;
- plain Python work (a small sum in a loop): the control, what the interpreter lock
  itself allows.

Each (row, thread count) runs once per round, ``--rounds`` (5) rounds, the order rotated
each round, so load on a shared machine hits them alike. Reported per row: the median
decisions per second with one thread, and for 2 and 4 threads the median of the per-round
ratios to one thread with their range, plus the voluntary context switches per 1,000
decisions (``getrusage``): a thread that gives the interpreter away once per decision
shows there, however busy the machine is. With the interpreter lock, no row can beat 1.0x
by much; a row well under 1.0x hands the lock back and forth. Nothing is asserted;
``tests/test_benchmarks_smoke.py`` runs it briefly.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_coldstart import REQUEST, write_stores  # noqa: E402
from bench_logs import cedarling_engine, polang_engine  # noqa: E402

THREADS = (1, 2, 4)

Decider = Callable[[], object]


def plain_work() -> object:
    return sum(i * i for i in range(20))


def rows(tmp: Path) -> dict[str, Callable[[int], list[Decider]]]:
    """Row name -> a function giving one decider per thread."""
    pstore, cstore = write_stores(tmp)
    action, res, principal = REQUEST["action"], REQUEST["resource"], REQUEST["principal"]

    def polang(log_type: str) -> Decider:
        engine = polang_engine(str(pstore), log_type)
        return lambda: engine.authorize_unsigned(action, res, {}, principal).decision

    shared = {
        "polang logs off": polang("off"),
        "polang memory log": polang("memory"),
        "cedarling logs off": cedarling_engine(str(cstore), "off"),
        "cedarling memory log": cedarling_engine(str(cstore), "memory"),
    }
    own = [polang("off") for _ in range(max(THREADS))]
    out: dict[str, Callable[[int], list[Decider]]] = {
        name: (lambda n, d=decide: [d] * n) for name, decide in shared.items()
    }
    out["polang logs off, engine per thread"] = lambda n: own[:n]
    out["plain Python work"] = lambda n: [plain_work] * n
    return out


def run_threads(deciders: list[Decider], seconds: float) -> tuple[float, float]:
    """(operations per second, voluntary context switches per 1,000 operations)."""
    stop = threading.Event()
    counts: list[int] = []
    start = threading.Barrier(len(deciders) + 1)

    def work(decide: Decider) -> None:
        n = 0
        start.wait()
        while not stop.is_set():
            for _ in range(50):
                decide()
            n += 50
        counts.append(n)

    threads = [threading.Thread(target=work, args=(d,)) for d in deciders]
    for t in threads:
        t.start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    total = sum(counts)
    switches = (after.ru_nvcsw - before.ru_nvcsw) / max(total, 1) * 1000
    return total / elapsed, switches


def run(rounds: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        table = rows(Path(tmp))
        for make in table.values():  # warm-up
            for decide in make(max(THREADS)):
                for _ in range(300):
                    decide()
        cells = [(name, n) for name in table for n in THREADS]
        rate: dict[tuple[str, int], list[float]] = {c: [] for c in cells}
        switches: dict[tuple[str, int], list[float]] = {c: [] for c in cells}
        for r in range(rounds):
            k = (r * 7) % len(cells)
            for name, n in cells[k:] + cells[:k]:
                per_s, sw = run_threads(table[name](n), seconds)
                rate[(name, n)].append(per_s)
                switches[(name, n)].append(sw)
    out: dict[str, Any] = {"rounds": rounds, "seconds": seconds, "rows": {}}
    for name in table:
        one = rate[(name, 1)]
        row: dict[str, Any] = {"per_second_1": statistics.median(one)}
        for n in THREADS:
            row[f"switches_per_1000_{n}"] = statistics.median(switches[(name, n)])
            if n == 1:
                continue
            ratios = sorted(a / b for a, b in zip(rate[(name, n)], one, strict=True))
            row[f"ratio_{n}"] = {
                "median": statistics.median(ratios),
                "min": ratios[0],
                "max": ratios[-1],
            }
        out["rows"][name] = row
    out["load"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each (row, threads)")
    ap.add_argument("--seconds", type=float, default=0.5, help="length of one run")
    ap.add_argument("--json", action="store_true", help="also print one line of JSON")
    args = ap.parse_args(argv)
    res = run(args.rounds, args.seconds)
    print(
        f"decisions per second, {args.rounds} rounds of {args.seconds} s; N threads against "
        "one (median of per-round ratios, min-max); voluntary context switches per 1,000\n"
    )
    print(
        f"{'row':36} {'1 thread/s':>11} {'2 threads':>17} {'4 threads':>17} {'switches 1/2/4':>17}"
    )
    for name, row in res["rows"].items():
        cols = [
            f"{row[f'ratio_{n}']['median']:5.2f}x {row[f'ratio_{n}']['min']:4.2f}-"
            f"{row[f'ratio_{n}']['max']:4.2f}"
            for n in THREADS[1:]
        ]
        sw = "/".join(f"{row[f'switches_per_1000_{n}']:.1f}" for n in THREADS)
        print(f"{name:36} {row['per_second_1']:11,.0f} {cols[0]:>17} {cols[1]:>17} {sw:>17}")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in res['load'])}")
    if args.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
