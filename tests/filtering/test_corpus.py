"""Plans of the conformance corpus as SQL on SQLite (``bench_filter.py --corpus``, every
8th file): every row of an exact filter equals ``plan.allows``, a superset loses none."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_corpus_plans_as_sql(corpus_dir: Path) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.bench_filter import corpus_run
    finally:
        sys.path.remove(str(ROOT))
    res = corpus_run(corpus_dir, step=8)
    assert res["mismatches"] == []
    assert res["plans"].get("exact", 0) > 10 and res["rows"] > 0
    assert res["plans"].get("superset", 0) > 0, res["plans"]
