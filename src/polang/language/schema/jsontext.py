"""Schema, entity and context JSON text, read strictly, with repeated keys kept for the
walkers to report with their JSON path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polang.jsonlimits import decode

if TYPE_CHECKING:
    pass


# ================================================================ JSON text


class _DupKeyDict(dict[str, Any]):
    """A JSON object that had a repeated key; the walkers report it with its path."""

    duplicate_key: str = ""


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dup = None
    for k, v in pairs:
        if k in out and dup is None:
            dup = k
        out[k] = v
    if dup is None:
        return out
    marked = _DupKeyDict(out)
    marked.duplicate_key = dup
    return marked


def json_loads_checked(text: str | bytes) -> Any:
    """:func:`polang.jsonlimits.decode` keeping track of repeated object keys (see
    :func:`duplicate_key`: the walkers report them with their JSON path)."""
    return decode(text, pairs_hook=_object_pairs)


def non_string_key(obj: dict[Any, Any]) -> object | None:
    """A key that is not a string (a Python dict passed where a JSON object belongs), or
    ``None``: JSON text never has one."""
    for k in obj:
        if type(k) is not str:
            return k
    return None


def duplicate_key(obj: object) -> str | None:
    """The first repeated key of a JSON object read by :func:`json_loads_checked`."""
    return obj.duplicate_key if isinstance(obj, _DupKeyDict) else None
