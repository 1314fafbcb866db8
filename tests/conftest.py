"""Shared fixtures: the conformance corpus is read from ../shared at test time, never committed."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def corpus_archive() -> Path | None:
    """Where the conformance pack lives: ``POLANG_CORPUS`` or ``../shared/conformance``."""
    env = os.environ.get("POLANG_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "conformance" / "polang-corpus.tar.gz")
    for c in candidates:
        if c.is_file():
            return c
    return None


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = corpus_archive()
    if archive is None:
        pytest.skip(
            "conformance pack not found (expected ../shared/conformance/polang-corpus.tar.gz)"
        )
    dest = tmp_path_factory.mktemp("corpus")
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")
    return dest
