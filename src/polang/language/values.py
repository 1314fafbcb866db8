"""Runtime values of the language and their exact equality.

Representation (chosen for speed on the per-request path):

- Long   -> ``int`` (never ``bool``; range checked by :func:`check_long`)
- Bool   -> ``bool``
- String -> ``str``
- Entity -> :class:`EntityUID`
- Set    -> :class:`SetValue`
- Record -> :class:`RecordValue`
- extension values -> classes in :mod:`polang.language.extensions`

Python says ``1 == True`` and ``{1, True}`` has one element; the language says neither.
:func:`value_eq` and the containers' hashing keys keep the two apart, so containers are
never built from raw ``frozenset``/``dict`` equality.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any

from polang.errors import EvaluationError

# re-exported: the escapes of what polang prints are those of the language's literals
from polang.escapes import UNSAFE_CHARS as UNSAFE_CHARS
from polang.escapes import printable as printable
from polang.escapes import printable_json as printable_json
from polang.escapes import printable_lines as printable_lines
from polang.escapes import quote_string

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


class EntityUID(tuple[str, str]):
    """An entity reference ``Type::"id"``; ``type`` is the full name (``NS::Type``).

    A tuple underneath so that hashing and equality run in C: entity uids are compared
    and looked up on every scope check and attribute read. (It follows that a uid equals
    the plain tuple ``(type, id)``; the language never puts plain tuples in values.)
    """

    __slots__ = ()

    def __new__(cls, type: str, id: str) -> EntityUID:
        return tuple.__new__(cls, (type, id))

    type = property(itemgetter(0), doc="The entity type's full name.")
    id = property(itemgetter(1), doc="The entity id.")

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"{self[0]}::{quote_string(self[1])}"

    __str__ = __repr__

    def to_json(self) -> dict[str, str]:
        return {"type": self[0], "id": self[1]}


def is_action_type(name: str) -> bool:
    """Whether ``name`` is an action entity type: exactly those whose last name component
    is ``Action`` (the language fixes the name; a schema only says which actions exist)."""
    return name == "Action" or name.endswith("::Action")


class _BoolKey:
    """Stand-in for a bool inside a container key, so ``True`` and ``1`` stay distinct."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "true" if self.value else "false"


_TRUE_KEY = _BoolKey(True)
_FALSE_KEY = _BoolKey(False)


def value_key(v: Value) -> Any:
    """The hashable identity of a value: equal keys exactly when the language's ``==``."""
    if v is True:
        return _TRUE_KEY
    if v is False:
        return _FALSE_KEY
    return v


def _unkey(k: Any) -> Value:
    if k is _TRUE_KEY:
        return True
    if k is _FALSE_KEY:
        return False
    return k


class SetValue:
    """An immutable set of values with the language's equality."""

    __slots__ = ("_hash", "keys")

    def __init__(self, elements: Iterable[Value] = ()) -> None:
        self.keys: frozenset[Any] = frozenset(value_key(e) for e in elements)
        self._hash: int | None = None

    @classmethod
    def from_keys(cls, keys: frozenset[Any]) -> SetValue:
        s = cls.__new__(cls)
        s.keys = keys
        s._hash = None
        return s

    def __iter__(self) -> Iterator[Value]:
        return (_unkey(k) for k in self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def contains(self, v: Value) -> bool:
        return value_key(v) in self.keys

    def __eq__(self, other: object) -> bool:
        return type(other) is SetValue and self.keys == other.keys

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.keys)
        return self._hash

    def __repr__(self) -> str:
        return "[" + ", ".join(sorted(value_repr(e) for e in self)) + "]"


class RecordValue:
    """An immutable record (string keys) with the language's equality."""

    __slots__ = ("_hash", "fields")

    def __init__(self, fields: Mapping[str, Value] | None = None) -> None:
        self.fields: dict[str, Value] = dict(fields or {})
        self._hash: int | None = None

    def get(self, name: str) -> Value | None:
        return self.fields.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.fields

    def __eq__(self, other: object) -> bool:
        if type(other) is not RecordValue:
            return False
        a, b = self.fields, other.fields
        if a.keys() != b.keys():
            return False
        return all(value_eq(a[k], b[k]) for k in a)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset((k, value_key(v)) for k, v in self.fields.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{quote_string(k)}: {value_repr(v)}" for k, v in self.fields.items())
        return "{" + inner + "}"


Value = Any
"""Any runtime value. Kept as ``Any`` because extension classes are open-ended and
evaluation narrows by ``type(v) is ...`` checks; the members are listed in the module doc."""


def value_eq(a: Value, b: Value) -> bool:
    """The language's ``==``: never an error, false across types."""
    return type(a) is type(b) and bool(a == b)


def check_long(n: int) -> int:
    """Return ``n`` or raise the overflow error the language demands (never wrap)."""
    if n < LONG_MIN or n > LONG_MAX:
        raise EvaluationError("overflow", f"integer overflow: {n} is outside the 64-bit range")
    return n


def type_name(v: Value) -> str:
    """The language's name of a value's type, for error messages."""
    t = type(v)
    if t is bool:
        return "Bool"
    if t is int:
        return "Long"
    if t is str:
        return "String"
    if t is EntityUID:
        return f"Entity<{v.type}>"
    if t is SetValue:
        return "Set"
    if t is RecordValue:
        return "Record"
    return getattr(v, "TYPE_NAME", t.__name__)


def value_repr(v: Value) -> str:
    """A value in policy syntax (used in explanations and messages)."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is str:
        return quote_string(v)
    return repr(v)


def value_to_json(v: Value) -> Any:
    """A value in the entity-JSON form (``__entity`` / ``__extn`` escapes)."""
    t = type(v)
    if t is bool or t is int or t is str:
        return v
    if t is EntityUID:
        return {"__entity": v.to_json()}
    if t is SetValue:
        return [value_to_json(e) for e in v]
    if t is RecordValue:
        return {k: value_to_json(x) for k, x in v.fields.items()}
    to_json = getattr(v, "to_json", None)
    if to_json is not None:
        return to_json()
    raise TypeError(f"not a polang value: {v!r}")
