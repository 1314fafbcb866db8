"""What OpenTelemetry costs a decision: ``ENGINE_OTEL`` off, auto without an SDK, on.

Usage::

    python benchmarks/bench_otel.py [--rounds N] [--block N] [--json]

One ``authorize_unsigned`` (the README's request on ``examples/stores/directory``, alice
reading the roadmap: allowed) on engines that differ only in telemetry:

- ``off``: ``ENGINE_OTEL=off`` (no hook at all: the reference);
- ``auto, API loaded, no SDK``: the default with ``opentelemetry-api`` imported (FastAPI
  imports it) and no SDK provider set: the case that must cost next to nothing;
- ``on, no SDK``: ``ENGINE_OTEL=on`` through the API's no-op proxies;
- ``SDK: metrics``: an SDK ``MeterProvider`` (in-memory reader: collection is not timed);
- ``SDK: spans + metrics``: and an SDK ``TracerProvider`` whose batch processor hands the
  spans to an exporter that drops them (the export itself runs on the processor's thread).

The engines are timed in alternating blocks of ``--block`` calls (each runs on caches it
warmed itself) for ``--rounds`` rounds; the row is the median of its blocks' mean time per
call, and ``x off`` that median over the ``off`` row's. cedarling-python has no
OpenTelemetry to compare with; its decision-log ratio is in ``bench_engine.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STORE = str(REPO / "examples" / "stores" / "directory")
ACTION = 'Acme::Action::"read"'


def _request() -> tuple[dict[str, Any], dict[str, Any]]:
    resource = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())
    principal = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
    return resource, principal


def engines() -> tuple[list[tuple[str, Any]], Callable[[], None]]:
    """The engines of the rows, and what shuts their providers down."""
    import opentelemetry.metrics
    import opentelemetry.trace  # noqa: F401  (loaded, as in a FastAPI process)
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from polang import Engine

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropping()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    base = {"ENGINE_POLICY_STORE_LOCAL_FN": STORE}
    rows = [
        ("off", Engine({**base, "ENGINE_OTEL": "off"})),
        ("auto, API loaded, no SDK", Engine(base)),
        ("on, no SDK", Engine({**base, "ENGINE_OTEL": "on"})),
        ("SDK: metrics", Engine(base, meter_provider=meter_provider)),
        (
            "SDK: spans + metrics",
            Engine(base, tracer_provider=tracer_provider, meter_provider=meter_provider),
        ),
    ]

    def close() -> None:
        for _, e in rows:
            e.close()
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return rows, close


def run(rounds: int, block: int) -> dict[str, float]:
    """Median per-call microseconds of each row."""
    resource, principal = _request()
    rows, close = engines()
    try:
        for _, e in rows:  # warm up: generated code, caches
            for _ in range(block):
                assert e.authorize_unsigned(ACTION, resource, principal=principal).decision
        blocks: dict[str, list[float]] = {name: [] for name, _ in rows}
        for r in range(rounds):
            order = rows if r % 2 == 0 else rows[::-1]
            for name, e in order:
                decide = e.authorize_unsigned
                t0 = time.perf_counter()
                for _ in range(block):
                    decide(ACTION, resource, principal=principal)
                blocks[name].append((time.perf_counter() - t0) / block * 1e6)
        return {name: statistics.median(times) for name, times in blocks.items()}
    finally:
        close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    medians = run(args.rounds, args.block)
    base = medians["off"]
    print(f"{'row':<28} {'us/call':>9} {'x off':>7}")
    for name, us in medians.items():
        print(f"{name:<28} {us:>9.2f} {us / base:>7.2f}")
    if args.json:
        print(json.dumps({"us_per_call": medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
