"""What decision logs cost a decision: polang and cedarling-python, logs off and on, side
by side in one process.

Usage::

    python benchmarks/bench_logs.py [--rounds N] [--block N] [--fill N] [--json]

The same ``authorize_unsigned`` request on the one-policy store of ``bench_coldstart.py``
(written once under polang's file names, once under Cedar's), on these engines:

- polang ``off``; ``memory`` (``ENGINE_LOG_MAX_ITEMS`` 10,000, filled with ``--fill``
  entries before timing: the issue's higher figure came once the log held thousands);
  ``python`` with the ``polang`` logger at INFO and a handler that keeps each record in a
  bounded deque (what polang's own work costs: the entry and the record built, nothing
  formatted); ``python`` with a ``StreamHandler`` writing each entry's JSON line to
  ``os.devnull`` (what a formatting handler adds on top; its formatting is the handler's
  work, not polang's);
- cedarling-python ``off`` and ``memory`` (Cedarling's in-process log, the same TTL);
- polang ``off`` / ``memory`` / ``python`` (keeping handler) again on the example store
  (``examples/stores/store.parc``, the README's request: the issue's measurement).

Every engine decides ``--block`` (200) requests in turn, ``--rounds`` (40) times, the
order rotated each round, so load on a shared machine hits them alike. Reported per
engine: the median time per decision; per log type: the ratio to the same engine with
logs off, as the median of the per-round ratios with their spread (the 10th and 90th
percentiles): the machine is shared, so ratios of neighbouring blocks mean more than
microseconds. Nothing is asserted; ``tests/test_benchmarks_smoke.py`` runs it briefly.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_coldstart import REQUEST, write_stores  # noqa: E402

from polang import Engine  # noqa: E402

MAX_ITEMS = 10_000


class KeepingHandler(logging.Handler):
    """Keeps the newest records (a collector such as a test's or a queue's)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: collections.deque[logging.LogRecord] = collections.deque(maxlen=MAX_ITEMS)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def polang_logger(handler: logging.Handler | None) -> None:
    """The ``polang`` logger at INFO with only ``handler`` (none: left alone)."""
    logger = logging.getLogger("polang")
    for h in list(logger.handlers):
        logger.removeHandler(h)
    if handler is not None:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def polang_engine(store: str, log_type: str) -> Engine:
    engine = Engine(
        {
            "ENGINE_POLICY_STORE_LOCAL_FN": store,
            "ENGINE_LOG_TYPE": log_type,
            "ENGINE_LOG_MAX_ITEMS": MAX_ITEMS,
            "ENGINE_JWT_SIG_VALIDATION": "disabled",
            "ENGINE_JWT_STATUS_VALIDATION": "disabled",
        }
    )
    engine.authorizer.backend.wait_generated(30)  # the generated tier, as in a service
    return engine


def cedarling_engine(store: str, log_type: str) -> Callable[[], object]:
    import cedarling_python as cp  # the bench extra

    engine = cp.Cedarling(
        cp.BootstrapConfig(
            {
                "CEDARLING_APPLICATION_NAME": "bench",
                "CEDARLING_POLICY_STORE_LOCAL_FN": store,
                "CEDARLING_LOG_TYPE": log_type,
                "CEDARLING_LOG_LEVEL": "INFO",
                "CEDARLING_LOG_TTL": 60,
                "CEDARLING_JWT_SIG_VALIDATION": "disabled",
                "CEDARLING_JWT_STATUS_VALIDATION": "disabled",
            }
        )
    )
    request = cp.RequestUnsigned(
        REQUEST["action"],
        cp.EntityData.from_dict(REQUEST["resource"]),
        {},
        cp.EntityData.from_dict(REQUEST["principal"]),
    )
    return lambda: engine.authorize_unsigned(request).is_allowed()


def deciders(tmp: Path, streams: list[Any]) -> dict[str, tuple[str, Callable[[], object]]]:
    """Row name -> (the row's logs-off row, one decision)."""
    pstore, cstore = write_stores(tmp)
    action, resource, principal = REQUEST["action"], REQUEST["resource"], REQUEST["principal"]

    def tiny(log_type: str) -> Callable[[], object]:
        engine = polang_engine(str(pstore), log_type)
        return lambda: engine.authorize_unsigned(action, resource, {}, principal).decision

    example = str(ROOT / "examples" / "stores" / "store.parc")
    requests = ROOT / "examples" / "requests"
    ex_principal = json.loads((requests / "alice.json").read_text())
    ex_resource = json.loads((requests / "roadmap.json").read_text())
    ex_action = 'Acme::Action::"read"'

    def on_example(log_type: str) -> Callable[[], object]:
        engine = polang_engine(example, log_type)
        return lambda: (
            engine.authorize_unsigned(ex_action, ex_resource, principal=ex_principal).decision
        )

    keeping = KeepingHandler()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (closed by main)
    streams.append(devnull)
    formatting = logging.StreamHandler(devnull)
    formatting.setFormatter(logging.Formatter("%(message)s"))
    rows: dict[str, tuple[str, Callable[[], object]]] = {}
    rows["polang off"] = ("polang off", tiny("off"))
    rows["polang memory"] = ("polang off", tiny("memory"))
    # one python engine per handler: the handler is set while its block runs
    py_keep, py_format = tiny("python"), tiny("python")
    rows["polang python (keeping handler)"] = (
        "polang off",
        with_handler(keeping, py_keep),
    )
    rows["polang python (formatting handler)"] = (
        "polang off",
        with_handler(formatting, py_format),
    )
    rows["cedarling off"] = ("cedarling off", cedarling_engine(str(cstore), "off"))
    rows["cedarling memory"] = ("cedarling off", cedarling_engine(str(cstore), "memory"))
    rows["example store: polang off"] = ("example store: polang off", on_example("off"))
    rows["example store: polang memory"] = ("example store: polang off", on_example("memory"))
    rows["example store: polang python (keeping)"] = (
        "example store: polang off",
        with_handler(keeping, on_example("python")),
    )
    return rows


def with_handler(handler: logging.Handler, decide: Callable[[], object]) -> Callable[[], object]:
    """``decide`` marked to run its block with ``handler`` on the ``polang`` logger."""
    decide.handler = handler  # type: ignore[attr-defined]
    return decide


def run(rounds: int, block: int, fill: int) -> dict[str, Any]:
    streams: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows = deciders(Path(tmp), streams)
        answers = {name: decide() for name, (_, decide) in rows.items()}
        for name, (_, decide) in rows.items():  # warm up; fill the memory logs
            polang_logger(getattr(decide, "handler", None))
            for _ in range(fill if "memory" in name else 500):
                decide()
        names = list(rows)
        per_round: dict[str, list[float]] = {n: [] for n in names}
        gc_time = {n: 0.0 for n in names}
        gc_started = [0.0]

        def gc_timer(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            elif current[0] is not None:
                gc_time[current[0]] += time.perf_counter() - gc_started[0]

        current: list[str | None] = [None]
        gc.callbacks.append(gc_timer)
        try:
            for r in range(rounds):
                k = r % len(names)
                for name in names[k:] + names[:k]:
                    decide = rows[name][1]
                    polang_logger(getattr(decide, "handler", None))
                    current[0] = name
                    t0 = time.perf_counter()
                    for _ in range(block):
                        decide()
                    per_round[name].append((time.perf_counter() - t0) / block * 1e6)
                    current[0] = None
        finally:
            gc.callbacks.remove(gc_timer)
            polang_logger(None)
            for s in streams:
                s.close()
    medians = {n: statistics.median(v) for n, v in per_round.items()}
    ratios: dict[str, dict[str, float]] = {}
    for name, (base, _) in rows.items():
        if name == base:
            continue
        each = sorted(a / b for a, b in zip(per_round[name], per_round[base], strict=True))
        ratios[name] = {
            "median": statistics.median(each),
            "p10": each[int(0.1 * (len(each) - 1))],
            "p90": each[int(0.9 * (len(each) - 1))],
        }
    gc_us = {n: gc_time[n] / (rounds * block) * 1e6 for n in names}
    return {
        "rounds": rounds,
        "block": block,
        "fill": fill,
        "median_us": medians,
        "ratio_to_logs_off": ratios,
        "gc_us_per_decision": gc_us,
        "answers": answers,
        "load": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40, help="blocks per engine")
    ap.add_argument("--block", type=int, default=200, help="decisions per block")
    ap.add_argument(
        "--fill", type=int, default=MAX_ITEMS, help="decisions into each memory log before timing"
    )
    ap.add_argument("--json", action="store_true", help="also print one line of JSON")
    args = ap.parse_args(argv)
    res = run(args.rounds, args.block, args.fill)
    print(
        f"us per decision (median of {args.rounds} blocks of {args.block}); ratio to the same "
        "engine with logs off (median of per-round ratios, p10-p90)\n"
    )
    print(f"{'engine':42} {'us':>7} {'x logs off':>11} {'p10-p90':>13} {'GC us':>7}")
    for name, us in res["median_us"].items():
        r = res["ratio_to_logs_off"].get(name)
        ratio = f"{r['median']:10.2f}x {r['p10']:5.2f}-{r['p90']:5.2f}" if r else f"{'':25}"
        print(f"{name:42} {us:7.1f} {ratio} {res['gc_us_per_decision'][name]:7.2f}")
    same = len({a for n, a in res["answers"].items() if "example" not in n}) == 1
    print(
        f"\nload average at the end: {' '.join(f'{x:.2f}' for x in res['load'])}; "
        + ("both engines answer the same" if same else f"ANSWERS DIFFER: {res['answers']}")
    )
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "answers"}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
