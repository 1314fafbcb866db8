"""Small helpers for checking JSON records field by field, reporting JSON paths.

Below the store and the token layer, which both check records with them (the store's
files; issuer records given in code); ``polang.store.fields`` re-exports them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from polang._record import Record
from polang.inputs.problems import Problems

if TYPE_CHECKING:
    from datetime import datetime, tzinfo

_IDENT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Longest piece of input (a key, a value) quoted in a message or a JSON path: a store is
#: hostile input, so a message quotes the start of a value and says how long it was.
MAX_QUOTED_CHARS = 80


def jpath(base: str, key: str | int) -> str:
    """Extend a JSON path (``$.a.b``, ``$.a["odd key"]``, ``$.a[0]``); long keys are cut."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    if not isinstance(key, str):
        key = str(key)
    if len(key) > MAX_QUOTED_CHARS:
        return base + "[" + _quote(key[:MAX_QUOTED_CHARS]) + f"...({len(key)} chars)]"
    if _IDENT_KEY.match(key):
        return f"{base}.{key}"
    return base + "[" + _quote(key) + "]"


def show(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """A bounded rendering of an input value for a message: never a full ``repr``.

    Strings are quoted up to ``limit`` characters (with their length when cut); arrays and
    objects are named by type and size, never expanded (an expanded YAML alias or a deep
    array would otherwise make the message as large as the attack).
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return repr(value[:limit]) + f"... ({len(value)} characters)"
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 200:
            return f"a {value.bit_length()}-bit number"
        return repr(value)
    if isinstance(value, list | tuple):
        return f"an array of {len(value)} items"
    if isinstance(value, Mapping):
        return f"an object of {len(value)} fields"
    return json_kind(value)


def closest(name: object, candidates: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The candidate a misspelt ``name`` most likely meant (for a "did you mean" hint), or
    ``None``. The one place polang compares names for a hint: a name longer than
    ``MAX_QUOTED_CHARS`` is not compared (hostile input costs nothing), and ``difflib`` is
    imported on a mistake only (start-up time)."""
    if not isinstance(name, str) or len(name) > MAX_QUOTED_CHARS:
        return None
    import difflib

    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=cutoff)
    return found[0] if found else None


def listing(items: Iterable[object], limit: int = 10) -> str:
    """``a, b, c`` for at most ``limit`` items, then how many more (bounded messages)."""
    shown: list[str] = []
    rest = 0
    for item in items:
        if len(shown) < limit:
            plain = isinstance(item, str) and len(item) <= MAX_QUOTED_CHARS
            shown.append(str(item) if plain else show(item))
        else:
            rest += 1
    return ", ".join(shown) + (f" and {rest} more" if rest else "")


def _quote(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def json_kind(v: object) -> str:
    """A JSON value's kind, for messages; a Python value that no JSON text gives (a set,
    a tuple, an object of a class) is named as what it is, not as the JSON it is not."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, set | frozenset):
        return "a set"
    if isinstance(v, tuple):
        return "a tuple"
    return f"a Python `{type(v).__name__}`"


class Checker(Record):
    """Field checks on one file: every problem goes to ``problems`` naming ``file``."""

    __slots__ = ("file", "problems")
    _frozen: ClassVar[bool] = False
    problems: Problems
    file: str

    def __init__(self, problems: Problems, file: str) -> None:
        self.problems = problems
        self.file = file

    def add(self, kind: str, path: str, message: str) -> None:
        self.problems.add(kind, self.file, message, path)

    def obj(self, value: object, path: str, what: str = "an object") -> Mapping[str, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.add("invalid_field", path, f"must be {what}, got {json_kind(value)}")
        return None

    def known(
        self,
        record: Mapping[str, Any],
        path: str,
        allowed: Iterable[str],
        renamed: Mapping[str, str] | None = None,
        *,
        refuse: bool = False,
    ) -> None:
        """Report unknown keys (with a suggestion) and renamed ones (naming the new key).

        A renamed key is always an error. An unknown key is a warning (the store loads, the
        warning reaches the system log and ``polang store validate``), an error only when
        the store is loaded strictly: other tools (Cedarling) ignore unknown fields, and the
        did-you-mean hint still catches a misspelt field. With ``refuse`` (records where
        Cedarling too refuses unknown fields) an unknown key is always an error.
        """
        allowed = list(allowed)
        for key in record:
            if key in allowed:
                continue
            if renamed and key in renamed:
                self.add(
                    "deprecated_field",
                    jpath(path, key),
                    f"{show(key)} is no longer accepted: it was renamed {renamed[key]!r}",
                )
                continue
            name = str(key)
            near = closest(name, allowed)
            hint = f" (did you mean {near!r}?)" if near else ""
            message = f"unknown field {show(name)}{hint}; allowed: {', '.join(allowed)}"
            if near and near not in record and _misspelt(name, near):
                # A misspelt field would silently turn its check off (``trustd``,
                # ``expected_audiance``): that is an error even when unknown fields warn.
                self.add(
                    "unknown_field",
                    jpath(path, name),
                    f"{message}: it looks like a misspelling of {near!r}, "
                    "which would leave that setting unset",
                )
            elif refuse or self.problems.strict:
                self.add("unknown_field", jpath(path, name), message)
            else:
                self.problems.warn(
                    "unknown_field", self.file, message + " (ignored)", jpath(path, name)
                )

    def string(
        self,
        record: Mapping[str, Any],
        key: str,
        path: str,
        *,
        required: bool = False,
        non_empty: bool = True,
    ) -> str | None:
        if key not in record or record[key] is None:
            if required:
                self.add("missing_field", jpath(path, key), f"required field {key!r} is missing")
            return None
        value = record[key]
        if not isinstance(value, str):
            self.add("invalid_field", jpath(path, key), f"must be a string, got {json_kind(value)}")
            return None
        if non_empty and not value.strip():
            self.add("invalid_field", jpath(path, key), "must not be empty")
            return None
        return value

    def string_list(self, record: Mapping[str, Any], key: str, path: str) -> tuple[str, ...] | None:
        if key not in record or record[key] is None:
            return None
        value = record[key]
        p = jpath(path, key)
        if not isinstance(value, list):
            self.add("invalid_field", p, f"must be an array of strings, got {json_kind(value)}")
            return None
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.add(
                    "invalid_field",
                    jpath(p, i),
                    f"must be a non-empty string, got {json_kind(item)}",
                )
                continue
            out.append(item)
        return tuple(out)

    def boolean(self, record: Mapping[str, Any], key: str, path: str) -> bool | None:
        if key not in record or record[key] is None:
            return None
        value = record[key]
        if not isinstance(value, bool):
            self.add("invalid_field", jpath(path, key), f"must be true or false, got {show(value)}")
            return None
        return value


_VERSION = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)\Z", re.ASCII)
_ISO_UTC = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]00:?00)\Z", re.ASCII
)
_LEGACY_DATE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?\Z", re.ASCII
)


def is_version(value: str, *, v_prefix: bool = False) -> bool:
    """``X.Y.Z`` (``v`` optional in front when ``v_prefix``)."""
    if v_prefix and value[:1] in ("v", "V"):
        value = value[1:]
    return bool(_VERSION.match(value))


def parse_utc(value: str) -> datetime | None:
    """An ISO 8601 UTC timestamp (``Z`` or ``+00:00``), else ``None``."""
    from datetime import UTC  # on first use (start-up time)

    return _datetime_of(_ISO_UTC.match(value), UTC)


def parse_legacy_date(value: str) -> datetime | None:
    """``YYYY-MM-DDTHH:MM:SS.ssssss`` (the legacy policy record's ``creation_date``)."""
    return _datetime_of(_LEGACY_DATE.match(value), None)


def _datetime_of(m: re.Match[str] | None, tz: tzinfo | None) -> datetime | None:
    """The date and time a match of ``_ISO_UTC`` or ``_LEGACY_DATE`` names (groups 1-6,
    and 7 the fraction with its dot), in ``tz``; ``None`` for no match or no such day."""
    from datetime import datetime  # on first use (start-up time)

    if not m:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    micro = int((frac[1:] + "000000")[:6]) if frac else 0
    try:
        return datetime(y, mo, d, h, mi, s, micro, tzinfo=tz)
    except ValueError:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    micro = int((frac[1:] + "000000")[:6]) if frac else 0
    try:
        return datetime(y, mo, d, h, mi, s, micro)
    except ValueError:
        return None


#: How alike an unknown key and a known one must be (difflib's ratio) to be taken as a
#: misspelling of it, and so refused even when unknown fields only warn.
MISSPELLING_RATIO = 0.85


def _misspelt(key: str, known: str) -> bool:
    import difflib  # on a mistake only (start-up time)

    return difflib.SequenceMatcher(None, key, known).ratio() >= MISSPELLING_RATIO
