"""Tables: a predicate's values over the free variable's entities, indexed by value, by set
element or by ancestor for the joins."""

from __future__ import annotations

from typing import Any

from polang.datalog.eval.partial import Unknown
from polang.language.values import (
    EntityUID,
    SetValue,
    value_key,
)

# ======================================================================== tables


class _Table:
    """A predicate that reads only the free variable, over one domain of entities.

    ``ok`` holds the known values, ``unk`` the unknown ones (open-world queries); every
    other entity of ``dom`` errors. Indexes are built on first use.
    """

    __slots__ = (
        "_bools",
        "_elem",
        "_ents",
        "_eq",
        "_ints",
        "_member",
        "_ok",
        "dom",
        "lookups",
        "ok",
        "unk",
    )

    def __init__(
        self, dom: frozenset[EntityUID], ok: dict[EntityUID, Any], unk: dict[EntityUID, Unknown]
    ) -> None:
        self.dom = dom
        self.ok = ok
        self.unk = unk
        self._bools: tuple[frozenset[EntityUID], ...] | None = None
        self._ok: frozenset[EntityUID] | None = None
        self.lookups: dict[Any, tuple[Any, Any] | None] = {}  # memoised index answers
        self._ents: frozenset[EntityUID] | None = None
        self._eq: dict[Any, set[EntityUID]] | None = None
        self._elem: tuple[dict[Any, set[EntityUID]], frozenset[EntityUID]] | None = None
        self._member: tuple[dict[EntityUID, set[EntityUID]], frozenset[EntityUID]] | None = None
        self._ints: tuple[list[int], list[EntityUID]] | bool | None = None

    def bools(self) -> tuple[frozenset[EntityUID], ...]:
        """The entities for which the value may be true / false / an error."""
        if self._bools is None:
            t = {v for v, x in self.ok.items() if x is True}
            f = {v for v, x in self.ok.items() if x is False}
            e = set(self.dom) - t - f
            for v, u in self.unk.items():
                if u.t:
                    t.add(v)
                if u.f:
                    f.add(v)
            self._bools = (frozenset(t), frozenset(f), frozenset(e))
        return self._bools

    def ok_set(self) -> frozenset[EntityUID]:
        """The entities whose value is known (not an error)."""
        if self._ok is None:
            self._ok = self.dom if len(self.ok) == len(self.dom) else frozenset(self.ok)
        return self._ok

    def entity_set(self) -> frozenset[EntityUID]:
        """The entities whose value is an entity."""
        if self._ents is None:
            self._ents = frozenset(v for v, x in self.ok.items() if type(x) is EntityUID)
            if len(self._ents) == len(self.dom):
                self._ents = self.dom
        return self._ents

    def eq_index(self) -> dict[Any, set[EntityUID]]:
        """(type, value key) -> entities: the language's ``==``."""
        if self._eq is None:
            idx: dict[Any, set[EntityUID]] = {}
            for v, x in self.ok.items():
                idx.setdefault((type(x), value_key(x)), set()).add(v)
            self._eq = idx
        return self._eq

    def key_index(self) -> dict[Any, set[EntityUID]]:
        """value key -> entities: what ``S.contains(value)`` compares."""
        return self._key_index()

    def _key_index(self) -> dict[Any, set[EntityUID]]:
        idx: dict[Any, set[EntityUID]] = {}
        for (_t, k), vs in self.eq_index().items():
            idx.setdefault(k, set()).update(vs)
        return idx

    def elem_index(self) -> tuple[dict[Any, set[EntityUID]], frozenset[EntityUID]]:
        """Set element key -> entities whose set contains it; and the set-valued entities."""
        if self._elem is None:
            idx: dict[Any, set[EntityUID]] = {}
            sets: set[EntityUID] = set()
            for v, x in self.ok.items():
                if type(x) is SetValue:
                    sets.add(v)
                    for k in x.keys:
                        idx.setdefault(k, set()).add(v)
            self._elem = (idx, frozenset(sets))
        return self._elem

    def member_index(self) -> tuple[dict[EntityUID, set[EntityUID]], frozenset[EntityUID]]:
        """For ``x in value``: target -> entities; and the entities whose value is valid."""
        if self._member is None:
            idx: dict[EntityUID, set[EntityUID]] = {}
            valid: set[EntityUID] = set()
            for v, x in self.ok.items():
                if type(x) is EntityUID:
                    valid.add(v)
                    idx.setdefault(x, set()).add(v)
                elif type(x) is SetValue:
                    items = list(x)
                    if all(type(i) is EntityUID for i in items):
                        valid.add(v)
                        for i in items:
                            idx.setdefault(i, set()).add(v)
            self._member = (idx, frozenset(valid))
        return self._member

    def ints(self) -> tuple[list[int], list[EntityUID]] | None:
        """The values sorted, when every known value is a Long (else ``None``)."""
        if self._ints is None:
            if any(type(x) is not int for x in self.ok.values()):
                self._ints = False
            else:
                pairs = sorted(self.ok.items(), key=lambda kv: kv[1])
                self._ints = ([x for _v, x in pairs], [v for v, _x in pairs])
        return self._ints if isinstance(self._ints, tuple) else None


class _Identity(_Table):
    """The free variable itself: each entity is its own value."""

    __slots__ = ()

    def __init__(self, dom: frozenset[EntityUID]) -> None:
        super().__init__(dom, {v: v for v in dom}, {})
