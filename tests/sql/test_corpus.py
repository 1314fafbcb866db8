"""SQL answers equal the in-process ones on conformance corpus files (matrix, who/what can).

A deterministic sample by default (every ``POLANG_SQL_CORPUS_EVERY``-th file, 200 unless
set); ``POLANG_SQL_CORPUS=all`` runs every file (minutes). The corpus is read from
../shared at test time (see tests/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polang.conformance import test_files as corpus_files

from .corpus_check import check_file


def _files(root: Path) -> list[Path]:
    files = list(corpus_files(root))
    if os.environ.get("POLANG_SQL_CORPUS") == "all":
        return files
    every = int(os.environ.get("POLANG_SQL_CORPUS_EVERY", "200"))
    return files[::every]


@pytest.mark.parametrize("udf", [True, False], ids=["udf", "no-udf"])
def test_corpus_sample_matches_in_process(corpus_dir: Path, udf: bool) -> None:
    files = _files(corpus_dir)
    if not udf:
        files = files[::2]
    assert files
    bad = []
    queries = 0
    for f in files:
        out = check_file(corpus_dir, f, udf=udf)
        queries += out.queries
        if out.mismatches:
            bad.append(f"{out.file}: {out.mismatches[:2]}")
        if udf:
            assert not any(k.startswith("conditional") for k in out.fallbacks), out.fallbacks
    assert queries > len(files)
    assert not bad, "\n".join(bad[:10])
