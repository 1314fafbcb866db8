"""Fixtures of the store tests (helpers live in ``storekit``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .storekit import Files, StoreServer, store_files, write_tree


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., Path]:
    """``make_store(changes, name="store")`` writes a directory store and returns its path."""
    counter = iter(range(1000))

    def make(changes: Files | None = None, name: str | None = None) -> Path:
        return write_tree(tmp_path / (name or f"store{next(counter)}"), store_files(changes))

    return make


@pytest.fixture
def server() -> Iterator[StoreServer]:
    s = StoreServer()
    try:
        yield s
    finally:
        s.close()
