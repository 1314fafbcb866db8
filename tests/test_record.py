"""polang._record: the dataclass behaviour the AST, schema and IR classes rely on."""

from __future__ import annotations

import dataclasses
import pickle
from typing import ClassVar

import pytest

from polang._record import Record, fields, replace
from polang.language import ast
from polang.language.parser import parse_policies

_set = object.__setattr__


class Point(Record):
    __slots__ = ("label", "x", "y")
    _uncompared: ClassVar[tuple[str, ...]] = ("label",)
    _unshown: ClassVar[tuple[str, ...]] = ("label",)
    x: int
    y: int
    label: str

    def __init__(self, x: int, y: int, label: str = "") -> None:
        _set(self, "x", x)
        _set(self, "y", y)
        _set(self, "label", label)


class Box(Record):
    __slots__ = ("_cache", "items")
    _frozen: ClassVar[bool] = False
    items: list[int]

    def __init__(self, items: list[int]) -> None:
        self.items = items
        self._cache = None


def test_fields_in_annotation_order_and_match_args() -> None:
    assert fields(Point) == ("x", "y", "label") == Point.__match_args__
    assert fields(Box) == ("items",)


def test_equality_and_hash_leave_out_the_uncompared_fields() -> None:
    assert Point(1, 2, "a") == Point(1, 2, "b")
    assert hash(Point(1, 2, "a")) == hash(Point(1, 2, "b"))
    assert Point(1, 2) != Point(2, 1)
    assert Point(1, 2) != (1, 2)
    assert repr(Point(1, 2, "a")) == "Point(x=1, y=2)"


def test_frozen_and_mutable() -> None:
    p = Point(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.x
    b = Box([1])
    b.items = [2]
    assert b == Box([2]) and b.items == [2]
    with pytest.raises(TypeError):
        hash(b)


def test_replace_and_pickle() -> None:
    p = Point(1, 2, "a")
    q = replace(p, y=5)
    assert (q.x, q.y, q.label) == (1, 5, "a")
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)
    r = pickle.loads(pickle.dumps(p))
    assert r == p and r.label == "a"
    b = pickle.loads(pickle.dumps(Box([3])))
    assert b.items == [3] and b._cache is None


def test_a_field_missing_from_slots_is_refused() -> None:
    with pytest.raises(TypeError, match=r"fields \['y'\] not in __slots__"):

        class Bad(Record):
            __slots__ = ("x",)
            x: int
            y: int


class Lazy(Record):
    """A field named in ``_computed``: a property over a private slot, filled on read."""

    __slots__ = ("_text", "n")
    _computed = ("text",)
    _text: str | int
    n: int
    text: str

    def __init__(self, n: int, text: str | int) -> None:
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "_text", text)


def _lazy_text(obj: Lazy) -> str:
    raw = obj._text
    if type(raw) is int:
        raw = f"<{raw}>"
        object.__setattr__(obj, "_text", raw)
    return str(raw)


setattr(Lazy, "text", property(_lazy_text))  # noqa: B010


def test_a_computed_field_needs_no_slot_and_is_a_field() -> None:
    assert fields(Lazy) == ("n", "text") and Lazy.__match_args__ == ("n", "text")
    a, b = Lazy(1, 7), Lazy(1, "<7>")
    assert a == b and hash(a) == hash(b) and Lazy(1, 8) != a
    assert repr(Lazy(2, 3)) == "Lazy(n=2, text='<3>')"
    c = pickle.loads(pickle.dumps(Lazy(4, 5)))
    assert c.text == "<5>" and c._text == "<5>"
    assert replace(Lazy(1, 9), n=2) == Lazy(2, "<9>")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.text = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"fields \['other'\] not in __slots__"):

        class Bad(Record):
            __slots__ = ("_t",)
            _computed = ("t",)
            t: str
            other: int


def test_ast_nodes_compare_without_spans() -> None:
    """Two parses of the same policy at different places are equal (spans left out)."""
    text = 'permit (principal, action, resource) when { principal.a like "x*" };'
    (a,) = parse_policies(text)
    (b,) = parse_policies("\n\n  " + text)
    assert a.span != b.span and a == b and hash(a) == hash(b)
    assert "span" not in repr(a)
    assert replace(a, effect="forbid").effect == "forbid"
    assert isinstance(a.conditions[0].body, ast.Like)
