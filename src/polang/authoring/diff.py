"""What a policy or data change does to who can access what: ``diff(old, new)``.

The diff itself (the sides, the entries, the result, the in-process computation) is
:mod:`polang.analysis.diff`; ``engine="duckdb"`` or ``"spark"`` runs
:func:`polang.sql.diff.sql_diff` instead (an optional extra, imported when asked
for); :mod:`polang.engine.diff` dispatches between them. The names documented here
(docs/diff.md) are re-exported from there.
"""

from __future__ import annotations

from polang.analysis.diff import (
    FULL_FRACTION,
    DiffEntry,
    DiffResult,
    DiffStats,
    Side,
    sides,
)
from polang.engine.diff import diff

__all__ = ["FULL_FRACTION", "DiffEntry", "DiffResult", "DiffStats", "Side", "diff", "sides"]
