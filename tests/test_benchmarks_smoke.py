"""The benchmark code on a tiny store, so that it keeps working (no timing is checked)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("cedarpy")


@pytest.fixture(scope="module")
def bench(pytestconfig: pytest.Config) -> object:
    if not (ROOT / "benchmarks" / "bench_decide.py").exists():
        pytest.skip("benchmarks/ is not in this tree")
    sys.path.insert(0, str(ROOT))
    try:
        import benchmarks.bench_decide as mod
    finally:
        sys.path.remove(str(ROOT))
    return mod


def test_workload_is_deterministic_and_sized() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.workload import generate
    finally:
        sys.path.remove(str(ROOT))
    a = generate(n_entities=200, n_policies=20, n_requests=15, seed=3)
    b = generate(n_entities=200, n_policies=20, n_requests=15, seed=3)
    c = generate(n_entities=200, n_policies=20, n_requests=15, seed=4)
    assert a.entities_json == b.entities_json and a.policies_text == b.policies_text
    assert a.requests == b.requests
    assert a.policies_text != c.policies_text
    assert len(a.entities) == 200 and len(a.policies) == 20 and len(a.requests) == 15
    kinds = {"role", "attribute", "owner", "forbid"}
    assert all(a.counts[k] > 0 for k in kinds)
    assert "unless" in a.policies_text and "forbid" in a.policies_text


def test_all_engines_agree_on_a_tiny_store(bench: object) -> None:
    res = bench.run_bench(  # type: ignore[attr-defined]
        n_requests=25, n_entities=150, n_policies=16, pydatalog_requests=3, warmup=2
    )
    assert not res.mismatches, "\n".join(res.mismatches)
    names = {r.name for r in res.runs}
    assert {"polang compiled", "cedarpy", "polang pydatalog", "cedarpy batch"} <= names
    for r in res.runs:
        assert len(r.outcomes) == len(r.times) > 0
    assert 0 < res.allowed < 25  # the store grants some requests and denies others
    text = bench.table(res)  # type: ignore[attr-defined]
    assert "polang compiled" in text and "median us" in text
    assert res.to_dict()["mismatches"] == 0


def test_command_line_runs_and_profiles(bench: object, capsys: pytest.CaptureFixture[str]) -> None:
    code = bench.main(  # type: ignore[attr-defined]
        [
            "--requests",
            "8",
            "--entities",
            "120",
            "--policies",
            "12",
            "--pydatalog-requests",
            "0",
            "--profile",
            "--split",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "identical across all engines" in out
    assert "cumulative" in out  # the profile of polang compiled was printed
    assert '"mismatches": 0' in out
    # the in-situ split: every variant timed (and decided as the full request, or the
    # mismatch count above would not be 0)
    assert "where the headline row's time goes" in out
    for variant in ("entities parsed", "references", "context parsed", "full, 20 repeated"):
        assert variant in out
    assert '"split_us_per_request"' in out
