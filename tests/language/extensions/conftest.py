"""Fixtures for the extension tests: the cedarpy oracle, skipped cleanly when absent."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from .oracle import Expr, assert_same_as_cedar


@pytest.fixture(scope="session")
def same_as_cedar() -> Callable[[Sequence[Expr]], None]:
    """Asserts every expression has the same outcome in cedarpy (the Rust engine) and here."""
    pytest.importorskip("cedarpy", reason="cedarpy (the differential oracle) is not installed")
    return assert_same_as_cedar
