"""benchmarks/bench_coldstart.py keeps working (one process per row; no timing checked)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("cedarling_python")


def test_one_run_of_every_row_with_a_baseline() -> None:
    if not (ROOT / "benchmarks" / "bench_coldstart.py").exists():
        pytest.skip("benchmarks/ is not in this tree")
    sys.path.insert(0, str(ROOT))
    try:
        import benchmarks.bench_coldstart as bench
    finally:
        sys.path.remove(str(ROOT))
    import polang

    # the tree polang is imported from, as installed (a checkout's bare src/ lacks
    # polang.rules, which the package maps from the repository's rules/)
    installed = Path(polang.__file__).resolve().parent.parent
    res = bench.run(1, baseline=str(installed))
    assert res["agree"], res["answers"]
    assert {
        "polang first decision",
        "baseline first decision",
        "cedarling first decision",
        "baseline import only",
        "python -c pass",
    } <= set(res["median_cpu_ms"])
    assert set(res["split_ms"]["polang first decision"]) == {"import", "build", "decide"}
