"""Context data: values a service pushes once and every decision sees as ``context.data``.

Cedarling's data API under the same names (``push_data``, ``get_data``, ``remove_data``,
``clear_data``, ``list_data``; docs/api.md, "Context data"). An entry is a key and a JSON
value with an optional time to live; while it lives, every decision whose action declares
``data`` in its context gets ``context.data.<key>`` (the key must be one the declared
record type names, or the record must be open). What the schema says is checked when the
value is pushed, so a misspelt key or a value of the wrong type is an error at
``push_data`` (a :class:`~polang.errors.DataError`), never a silent gap in a decision.

Bounded: ``ENGINE_DATA_STORE_MAX_ENTRIES`` entries, ``ENGINE_DATA_STORE_MAX_ENTRY_SIZE``
bytes of JSON text per value, :data:`MAX_DATA_KEY_CHARS` characters per key,
``MAX_JSON_DEPTH`` levels of nesting; ``ENGINE_DATA_STORE_MAX_TTL`` caps a ttl.

Thread-safe without a lock on the decision path: writers build a new entry table under
the lock and publish it whole; a decision reads the table it finds (one attribute read)
and the record built for its action from that table, kept until the next change.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from polang._record import Record
from polang.errors import DataError, EntityError, PolangError, RequestError
from polang.escapes import printable
from polang.inputs.fields import closest, listing
from polang.jsonlimits import MAX_JSON_DEPTH, depth_of
from polang.language.entities import parse_value
from polang.language.schema import RecordType, Schema, SchemaType
from polang.language.values import EntityUID, RecordValue, Value
from polang.logs import format_timestamp

__all__ = ["MAX_DATA_KEY_CHARS", "ContextData", "DataEntry", "DataLimits"]

MAX_DATA_KEY_CHARS = 256
"""Longest key ``push_data`` takes: keys are attribute names a policy writes out
(``context.data.plan``), not payloads."""

DATA = "data"
"""The context attribute pushed data fills."""

_set = object.__setattr__
_VIEWS_MAX = 4096  # actions whose data record is kept (a bound on memory only)
_SHOWN = 80  # characters of a key quoted in a message


class DataLimits(Record):
    """The ``ENGINE_DATA_STORE_*`` values; 0 (and ``None`` for ``default_ttl``) = none."""

    __slots__ = ("default_ttl", "max_entries", "max_entry_size", "max_ttl")
    max_entries: int
    max_entry_size: int
    default_ttl: float | None
    max_ttl: float

    def __init__(
        self,
        max_entries: int = 10_000,
        max_entry_size: int = 1024 * 1024,
        default_ttl: float | None = None,
        max_ttl: float = 3600.0,
    ) -> None:
        _set(self, "max_entries", max_entries)
        _set(self, "max_entry_size", max_entry_size)
        _set(self, "default_ttl", default_ttl)
        _set(self, "max_ttl", max_ttl)


class DataEntry(Record):
    """One pushed entry as ``list_data`` reports it: the value is a copy, the times are
    epoch seconds (``to_dict`` writes them as ISO 8601 UTC)."""

    __slots__ = ("created_at", "expires_at", "key", "size", "value")
    key: str
    value: Any
    created_at: float
    expires_at: float | None
    size: int
    """Bytes of the value's UTF-8 JSON text (what ``ENGINE_DATA_STORE_MAX_ENTRY_SIZE``
    counts)."""

    def __init__(
        self, key: str, value: Any, created_at: float, expires_at: float | None, size: int
    ) -> None:
        _set(self, "key", key)
        _set(self, "value", value)
        _set(self, "created_at", created_at)
        _set(self, "expires_at", expires_at)
        _set(self, "size", size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "key": self.key,
            "value": self.value,
            "created_at": format_timestamp(self.created_at),
            "expires_at": None if self.expires_at is None else format_timestamp(self.expires_at),
            "size": self.size,
        }


class _Stored:
    """One entry as kept: its JSON text is the one copy (every read gets a fresh value)."""

    __slots__ = ("created_at", "expires_at", "expires_mono", "key", "parsed", "size", "text")

    def __init__(
        self,
        key: str,
        text: str,
        size: int,
        created_at: float,
        expires_mono: float,
        expires_at: float | None,
    ) -> None:
        self.key = key
        self.text = text
        self.size = size
        self.created_at = created_at  # epoch seconds
        self.expires_mono = expires_mono  # time.monotonic() seconds; inf = never
        self.expires_at = expires_at  # epoch seconds
        # the value read by each declared type (each once: entries outlive a store)
        self.parsed: dict[SchemaType | None, Value] = {}

    def value_by(self, t: SchemaType | None, schema: Schema, path: str) -> Value:
        hit = self.parsed.get(t)
        if hit is None:
            hit = self.parsed[t] = parse_value(json.loads(self.text), t, path=path, schema=schema)
        return hit


class _Declared:
    """What one schema declares for ``context.data``: per action its type, per key the
    actions whose record names it (and its type there), and the actions whose record
    takes undeclared keys (``additionalAttributes``)."""

    __slots__ = ("keys", "open_actions", "types")

    def __init__(
        self,
        types: dict[EntityUID, SchemaType],
        keys: dict[str, list[tuple[EntityUID, SchemaType]]],
        open_actions: tuple[EntityUID, ...],
    ) -> None:
        self.types = types
        self.keys = keys
        self.open_actions = open_actions


def _declared(schema: Schema) -> _Declared:
    types: dict[EntityUID, SchemaType] = {}
    keys: dict[str, list[tuple[EntityUID, SchemaType]]] = {}
    open_actions: list[EntityUID] = []
    for uid, action in schema.actions.items():
        attr = action.context.attributes.get(DATA)
        if attr is None:
            continue
        types[uid] = attr.type
        if isinstance(attr.type, RecordType):
            for k, a in attr.type.attributes.items():
                keys.setdefault(k, []).append((uid, a.type))
            if attr.type.additional:
                open_actions.append(uid)
    return _Declared(types, keys, tuple(open_actions))


def _shown(key: str) -> str:
    return repr(printable(key if len(key) <= _SHOWN else key[:_SHOWN] + "..."))


class ContextData:
    """The engine's context data (thread-safe); one per engine, kept across store
    refreshes. ``clock`` (monotonic seconds) and ``wall`` (epoch seconds) are for tests."""

    def __init__(
        self,
        limits: DataLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits or DataLimits()
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._entries: dict[str, _Stored] = {}  # replaced whole, never changed in place
        self.present = False
        """Whether the table holds any entry, live or not yet purged (the decision path
        reads this one attribute when nothing was pushed)."""
        self._next_expiry = math.inf
        self._generation = 0
        self._views: dict[EntityUID, tuple[Schema, int, RecordValue | None, RecordType | None]]
        self._views = {}
        self._declared: tuple[Schema, _Declared] | None = None

    # ------------------------------------------------------------ the data API

    def push(self, key: object, value: object, ttl: object, schema: Schema) -> None:
        """Add or replace ``key``; see :meth:`polang.Engine.push_data`."""
        k = _check_key(key)
        seconds = self._ttl(ttl)
        text, size = self._json(k, value)
        self._fits_schema(k, json.loads(text), schema)
        now = self._clock()
        created = self._wall()
        stored = _Stored(
            k,
            text,
            size,
            created,
            math.inf if seconds is None else now + seconds,
            None if seconds is None else created + seconds,
        )
        with self._lock:
            entries = self._purged(now)
            cap = self.limits.max_entries
            if cap and k not in entries and len(entries) >= cap:
                raise DataError(
                    f"push_data: {len(entries)} entries already, the limit of "
                    f"ENGINE_DATA_STORE_MAX_ENTRIES ({cap}); remove some or raise the limit"
                )
            new = dict(entries)
            new[k] = stored
            self._publish(new)

    def get(self, key: object) -> Any:
        """The value of ``key`` (a fresh copy), or ``None`` (absent or expired)."""
        k = _check_key(key)
        stored = self._live(self._clock()).get(k)
        return None if stored is None else json.loads(stored.text)

    def entry(self, key: object) -> DataEntry | None:
        """``key``'s entry with its times and size, or ``None``."""
        k = _check_key(key)
        stored = self._live(self._clock()).get(k)
        return None if stored is None else _entry(stored)

    def remove(self, key: object) -> bool:
        """Remove ``key``; whether it was there (and alive)."""
        k = _check_key(key)
        with self._lock:
            entries = self._purged(self._clock())
            if k not in entries:
                return False
            new = dict(entries)
            del new[k]
            self._publish(new)
            return True

    def clear(self) -> None:
        with self._lock:
            self._publish({})

    def list_entries(self) -> list[DataEntry]:
        """Every live entry, in key order."""
        entries = self._live(self._clock())
        return [_entry(entries[k]) for k in sorted(entries)]

    def stats(self) -> dict[str, Any]:
        """Plain numbers for ``engine.health()``."""
        entries = self._live(self._clock())
        return {
            "entries": len(entries),
            "bytes": sum(s.size for s in entries.values()),
            "max_entries": self.limits.max_entries,
            "max_entry_size": self.limits.max_entry_size,
        }

    def __len__(self) -> int:
        return len(self._live(self._clock()))

    # ------------------------------------------------------------ decisions

    @property
    def active(self) -> bool:
        """Whether any entry lives (the decision path's one question when there is none)."""
        if not self._entries:
            return False
        if self._clock() >= self._next_expiry:
            self._live(self._clock())
        return bool(self._entries)

    def record_for(
        self, schema: Schema, action: EntityUID
    ) -> tuple[RecordValue, RecordType] | None:
        """``(data record, the rest of the context type)`` for a decision of ``action``,
        or ``None`` when its context does not declare ``data`` (nothing is added).

        The rest is the action's context type without ``data``: the caller's part of the
        context is read by it. A pushed value that no longer fits (the store changed
        since it was pushed) or a required key never pushed is a ``RequestError``."""
        generation = self._generation
        hit = self._views.get(action)
        if hit is not None and hit[0] is schema and hit[1] == generation:
            return None if hit[2] is None or hit[3] is None else (hit[2], hit[3])
        view = self._build(schema, action)
        if len(self._views) >= _VIEWS_MAX:
            self._views = {}
        if view is None:
            self._views[action] = (schema, generation, None, None)
        else:
            self._views[action] = (schema, generation, view[0], view[1])
        return view

    def _build(self, schema: Schema, action: EntityUID) -> tuple[RecordValue, RecordType] | None:
        declared = schema.action(action)
        if declared is None:
            return None
        attr = declared.context.attributes.get(DATA)
        if attr is None:
            return None
        t = attr.type
        where = f"action {action}"
        if not isinstance(t, RecordType):
            raise RequestError(
                f"context.data: the schema declares it as {t} for {where}, but pushed data "
                "(push_data) fills a record"
            )
        fields: dict[str, Value] = {}
        for key, stored in self._entries.items():
            declared_key = t.attributes.get(key)
            if declared_key is None and not t.additional:
                continue  # another action's key
            path = f"$.context.data.{key}"
            try:
                fields[key] = stored.value_by(
                    None if declared_key is None else declared_key.type, schema, path
                )
            except EntityError as e:
                raise RequestError(
                    f"context.data: the entry {_shown(key)} pushed with push_data does not "
                    f"fit the schema of {where} (the store changed since it was pushed?): "
                    f"{e}; push it again or remove it"
                ) from None
        missing = [k for k, a in t.attributes.items() if a.required and k not in fields]
        if missing:
            raise RequestError(
                f"context.data: the schema of {where} requires the key "
                f"{_shown(missing[0])}, which no live entry holds; push it with push_data"
            )
        rest = dict(declared.context.attributes)
        del rest[DATA]
        return RecordValue(fields), RecordType(rest, declared.context.additional)

    # ------------------------------------------------------------ inside

    def _live(self, now: float) -> dict[str, _Stored]:
        """The entry table with expired entries gone (published when some were)."""
        if now < self._next_expiry:
            return self._entries
        with self._lock:
            return self._purged(now)

    def _purged(self, now: float) -> dict[str, _Stored]:
        """(Under the lock.) :meth:`_live`'s table."""
        entries = self._entries
        if now < self._next_expiry:
            return entries
        kept = {k: s for k, s in entries.items() if s.expires_mono > now}
        self._publish(kept)
        return kept

    def _publish(self, entries: dict[str, _Stored]) -> None:
        """(Under the lock.) Make ``entries`` the table decisions read. The table goes
        first and the generation after it: a decision that sees the new generation
        builds its record from the new table."""
        self._next_expiry = min((s.expires_mono for s in entries.values()), default=math.inf)
        self._entries = entries
        self.present = bool(entries)
        self._generation += 1

    def _ttl(self, ttl: object) -> float | None:
        if ttl is None:
            return self.limits.default_ttl
        if type(ttl).__name__ == "timedelta" and hasattr(ttl, "total_seconds"):
            seconds = float(ttl.total_seconds())
        elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
            seconds = float(ttl)
        else:
            raise DataError(
                f"push_data: ttl: expected seconds (a number) or a timedelta, got "
                f"{type(ttl).__name__}"
            )
        if not math.isfinite(seconds) or seconds <= 0:
            raise DataError(f"push_data: ttl: expected more than 0 seconds, got {ttl!r}")
        cap = self.limits.max_ttl
        if cap and seconds > cap:
            raise DataError(
                f"push_data: ttl: {seconds:g} s is longer than ENGINE_DATA_STORE_MAX_TTL "
                f"({cap:g} s)"
            )
        return seconds

    def _json(self, key: str, value: object) -> tuple[str, int]:
        """The value's JSON text and its size; ``DataError`` when it is not JSON's."""
        where = f"push_data: the value of {_shown(key)}"
        if value is None:
            raise DataError(f"{where}: None is no value a policy can read; use remove_data")
        if depth_of(value) > MAX_JSON_DEPTH:
            raise DataError(
                f"{where} nests deeper than the limit of {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)"
            )
        bad = _not_json(value)
        if bad is not None:
            raise DataError(f"{where} is not JSON-ready: {bad}")
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            size = len(text.encode("utf-8"))
        except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as e:
            raise DataError(f"{where} is not JSON-ready: {str(e)[:200]}") from None
        cap = self.limits.max_entry_size
        if cap and size > cap:
            raise DataError(
                f"{where} is {size} bytes of JSON, more than ENGINE_DATA_STORE_MAX_ENTRY_SIZE "
                f"({cap})"
            )
        return text, size

    def _fits_schema(self, key: str, value: object, schema: Schema) -> None:
        """The schema must have a place for ``key`` and the value must fit its type
        there (for every action that declares it)."""
        declared = self._declared_by(schema)
        if not declared.types:
            raise DataError(
                "push_data: no action's context in the schema declares `data`, so no "
                "decision would see the pushed value; declare it in the context of the "
                'actions whose policies read it (`data?: {"plan": String, ...}`)'
            )
        places = declared.keys.get(key, [])
        if not places and not declared.open_actions:
            known = sorted(declared.keys)
            near = closest(key, known)
            hint = f"; did you mean {near!r}?" if near else ""
            listed = listing((_shown(k) for k in known), limit=20) or "none"
            raise DataError(
                f"push_data: the key {_shown(key)} is not declared in `data` of any "
                f"action's context (declared: {listed}){hint}"
            )
        checks: list[tuple[str, SchemaType | None]] = [(f"action {a}", t) for a, t in places]
        if not places:  # an undeclared key of an open record: read as its JSON says
            checks = [(f"action {declared.open_actions[0]}", None)]
        for where, t in checks:
            try:
                parse_value(value, t, path=f"$.context.data.{key}", schema=schema)
            except PolangError as e:
                raise DataError(f"push_data: {e} ({where})") from None

    def _declared_by(self, schema: Schema) -> _Declared:
        hit = self._declared
        if hit is None or hit[0] is not schema:
            hit = self._declared = (schema, _declared(schema))
        return hit[1]

    def unfit(self, schema: Schema) -> list[str]:
        """Keys a (new) schema has no place for or whose value no longer fits: what a
        store refresh would leave out of decisions (the engine logs them)."""
        declared = _declared(schema)
        out: list[str] = []
        for key, stored in self._live(self._clock()).items():
            places = declared.keys.get(key, [])
            if not places and not declared.open_actions:
                out.append(f"{_shown(key)}: not declared in `data` of any action")
                continue
            for action, t in places:
                try:
                    parse_value(json.loads(stored.text), t, path=f"$.data.{key}", schema=schema)
                except PolangError as e:
                    out.append(f"{_shown(key)}: does not fit action {action}: {e}")
                    break
        return out


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise DataError(f"data key: expected a string, got {type(key).__name__}")
    if not key:
        raise DataError("data key: the key is empty")
    if len(key) > MAX_DATA_KEY_CHARS:
        raise DataError(
            f"data key {_shown(key)}: {len(key)} characters, more than MAX_DATA_KEY_CHARS "
            f"({MAX_DATA_KEY_CHARS})"
        )
    if printable(key) != key:
        raise DataError(
            f"data key {_shown(key)}: holds a control, bidi or lone surrogate character"
        )
    return key


def _not_json(value: object) -> str | None:
    """What keeps a value from being JSON (without recursion), or None."""
    stack: list[object] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str | int):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return f"the number {v!r} is not JSON"
            continue
        if isinstance(v, Mapping):
            for k in v:
                if not isinstance(k, str):
                    return f"an object key is {type(k).__name__}, not a string"
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        else:
            kind = type(v).__name__
            return f"a {kind} is no JSON value (objects, arrays, strings, numbers, booleans)"
    return None


def _entry(stored: _Stored) -> DataEntry:
    return DataEntry(
        stored.key, json.loads(stored.text), stored.created_at, stored.expires_at, stored.size
    )
