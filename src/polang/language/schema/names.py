"""Names in a schema: reserved words, built-in and extension types, qualified names, JSON
paths."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

from polang.language.lalr import IDENT_RE

from .model import BOOL, LONG, STRING, ExtensionType, ExtName, PrimType

if TYPE_CHECKING:
    pass

# ================================================================ names

RESERVED_WORDS = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has"})
"""Words the language reserves: never a name (entity type, attribute identifier, action...)."""

SCHEMA_KEYWORDS = frozenset(
    {"Bool", "Boolean", "Entity", "Extension", "Long", "Record", "Set", "String"}
)
"""Names a common type may not take (they would be ambiguous in the JSON form)."""

CEDAR_NAMESPACE = "__cedar"
EXTENSION_TYPES: tuple[ExtName, ...] = ("decimal", "ipaddr", "datetime", "duration")
EXTENSION_CONSTRUCTORS: dict[str, str] = {
    "decimal": "decimal",
    "ipaddr": "ip",
    "datetime": "datetime",
    "duration": "duration",
}
"""The function that builds each extension type from a string (schema-directed JSON)."""

_PRIMITIVES: dict[str, PrimType] = {"Long": LONG, "String": STRING, "Bool": BOOL}
_EXTENSIONS: dict[str, ExtensionType] = {n: ExtensionType(n) for n in EXTENSION_TYPES}


@functools.lru_cache(maxsize=4096)
def name_error(name: str) -> str | None:
    """Why ``name`` is not a valid (possibly ``::``-qualified) type name, or None."""
    if not name:
        return "a name cannot be empty"
    for part in name.split("::"):
        if not IDENT_RE.match(part):
            return f"`{name}` is not a valid name"
        if part in RESERVED_WORDS:
            return f"`{part}` is a reserved word and cannot be used in the name `{name}`"
        if part == CEDAR_NAMESPACE:
            return f"`{name}` uses the reserved `{CEDAR_NAMESPACE}` namespace"
    return None


def has_name_shape(name: object, *, qualified: bool = False) -> bool:
    """Whether ``name`` is identifiers joined by ``::`` (at least two when ``qualified``):
    the shape only, for names that are not always type names (a token mapping may be a
    token name); :func:`name_error` also refuses reserved words."""
    if type(name) is not str:
        return False
    parts = name.split("::")
    if qualified and len(parts) < 2:
        return False
    return all(IDENT_RE.match(part) for part in parts)


def _qualify(ns: str, name: str) -> str:
    return f"{ns}::{name}" if ns else name


def _action_type(ns: str) -> str:
    return _qualify(ns, "Action")


@functools.lru_cache(maxsize=16384)
def json_path(base: str, key: str | int) -> str:
    """``base`` extended by one key, in the ``$.a.b[0]["odd key"]`` notation."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    if IDENT_RE.match(key):
        return f"{base}.{key}"
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"
