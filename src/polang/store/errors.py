"""The store's problems under their documented name: the collector lives in
:mod:`polang.inputs.problems`, below the store, the token layer and the configuration,
which all report with it."""

from polang.inputs.problems import (
    KINDS,
    MAX_LISTED_PROBLEMS,
    MAX_NAME_CHARS,
    MAX_PROBLEM_CHARS,
    MAX_PROBLEMS,
    PolicyStoreLoadError,
    Problems,
    StoreProblem,
    short_name,
    strip_position_prefix,
)

__all__ = [
    "KINDS",
    "MAX_LISTED_PROBLEMS",
    "MAX_NAME_CHARS",
    "MAX_PROBLEMS",
    "MAX_PROBLEM_CHARS",
    "PolicyStoreLoadError",
    "Problems",
    "StoreProblem",
    "short_name",
    "strip_position_prefix",
]
