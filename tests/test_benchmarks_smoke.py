"""The benchmark code on a tiny store, so that it keeps working (no timing is checked)."""

from __future__ import annotations

import subprocess
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


def test_bench_async_runs() -> None:
    """bench_async.py end to end on a short stall and few requests (a process of its own:
    it configures Django). Its numbers are not checked, only that every part ran."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_async.py"),
            "--stall",
            "0.05",
            "--requests",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for row in (
        "sync API in the coroutine",
        "sync API in a thread",
        "AsyncEngine",
        "FastAPI dependency",
        "Flask decorator",
        "Django decorator",
    ):
        assert row in out, out


def test_bench_lock_runs() -> None:
    """bench_lock.py end to end on a few decisions (its numbers are not checked)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_lock.py"), "--requests", "400"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in ("no Lock", "Lock, queued", "Lock, sending"):
        assert row in proc.stdout
    assert "; 0 dropped" in proc.stdout


def test_bench_otel_runs() -> None:
    """bench_otel.py end to end on a few blocks (its numbers are not checked)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_otel.py"),
            "--rounds",
            "2",
            "--block",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in ("off", "auto, API loaded, no SDK", "on, no SDK", "SDK: spans + metrics"):
        assert row in proc.stdout


def test_bench_filter_runs_and_its_pages_agree() -> None:
    """bench_filter on a few hundred rows in SQLite: the filter's first page equals the
    batch pager's and what_can's (the run asserts it), and every number is there."""
    pytest.importorskip("sqlglot")
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.bench_filter import run, table
    finally:
        sys.path.remove(str(ROOT))
    res = run(400, 400, 1, 50, use_pg=False, use_sqlite=True, depth=3)
    assert [r["user"] for r in res["results"]] == ["most", "few", "none"]
    assert all(r["peers_checked_same_page"] for r in res["results"])
    assert res["results"][0]["allowed_on_page"] == 20
    assert res["results"][2]["allowed_on_page"] == 0
    assert "filter walk" in table(res)


@pytest.mark.parametrize(
    ("script", "args", "rows"),
    [
        (
            "bench_logs.py",
            ["--rounds", "2", "--block", "20", "--fill", "100"],
            ("polang memory", "polang python (keeping handler)", "cedarling memory"),
        ),
        (
            "bench_threads.py",
            ["--rounds", "1", "--seconds", "0.05"],
            ("polang memory log", "cedarling logs off", "plain Python work"),
        ),
    ],
)
def test_bench_logs_and_threads_run(script: str, args: list[str], rows: tuple[str, ...]) -> None:
    """bench_logs.py and bench_threads.py end to end, briefly, beside cedarling-python (its
    numbers are not checked, only that every row ran and both engines agree)."""
    pytest.importorskip("cedarling_python", reason="the bench extra's cedarling-python")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in rows:
        assert row in proc.stdout, proc.stdout
