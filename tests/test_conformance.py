"""The conformance corpus (../shared/conformance) on the default backend: every request."""

from __future__ import annotations

import json
from pathlib import Path

from polang.conformance import run_corpus


def test_corpus_compiled_backend(corpus_dir: Path) -> None:
    summary = run_corpus(corpus_dir, backend="compiled")
    report = json.dumps(summary.to_dict())
    print(report)  # the pass rate, visible with -s and in CI logs on failure
    assert summary.files == 3979, report
    assert summary.requests == 31730, report
    listing = "\n".join(str(f) for f in summary.failures[:30])
    assert not summary.failures, f"{report}\n{listing}"
    assert summary.validation_ok == summary.files, report
