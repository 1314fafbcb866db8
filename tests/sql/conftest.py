"""The SQL engines are optional extras: their tests skip with the reason when not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("duckdb", reason="the DuckDB engine's tests need polang[duckdb] (duckdb)")
pytest.importorskip("sqlglot", reason="the SQL engines' tests need sqlglot")
pytest.importorskip("pyarrow", reason="the DuckDB engine's tests need pyarrow")
