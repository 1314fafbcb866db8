"""The record checks under their documented name: they live in :mod:`polang.inputs.fields`,
below the store and the token layer, which both check records with them."""

from polang.inputs.fields import (
    MAX_QUOTED_CHARS,
    MISSPELLING_RATIO,
    Checker,
    is_version,
    jpath,
    json_kind,
    listing,
    parse_legacy_date,
    parse_utc,
    show,
)

__all__ = [
    "MAX_QUOTED_CHARS",
    "MISSPELLING_RATIO",
    "Checker",
    "is_version",
    "jpath",
    "json_kind",
    "listing",
    "parse_legacy_date",
    "parse_utc",
    "show",
]
