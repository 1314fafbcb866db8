"""Requirements: what a place (an attribute, a context field, a tag, a membership) must become."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polang.datalog.facts import EntityFacts
from polang.errors import EvaluationError
from polang.language.values import (
    EntityUID,
    value_key,
)

if TYPE_CHECKING:
    pass


# ======================================================================== requirements


@dataclass(frozen=True, slots=True)
class _Place:
    """A place in the data: an entity attribute (with a record path below it), a context
    path, a tag (with a path below it), or an entity's membership in groups."""

    kind: Literal["attr", "ctx", "tag", "parent"]
    entity: EntityUID | None
    path: tuple[str, ...] = ()
    groups: frozenset[EntityUID] = frozenset()


@dataclass(frozen=True, slots=True)
class _Req:
    """A requirement on a place. ``op``: ``value`` (the value must pass ``test``; the
    ``candidates`` are tried in order), ``exists``, ``absent``, ``add`` (a membership in
    the one group of the place) or ``remove`` (no membership in any group of it)."""

    place: _Place
    op: Literal["value", "exists", "absent", "add", "remove"]
    constraint: str
    candidates: tuple[Any, ...] = field(default=(), compare=False)
    cand_keys: tuple[Any, ...] = ()
    test: Callable[[Any], bool] | None = field(default=None, compare=False)


Alt = frozenset[_Req]
_NONE: list[Alt] = []
_TRIVIAL: list[Alt] = [frozenset()]


def _req(
    place: _Place, constraint: str, candidates: Iterable[Any], test: Callable[[Any], bool]
) -> _Req:
    cands = tuple(candidates)
    return _Req(place, "value", constraint, cands, tuple(_vk(c) for c in cands), test)


def _vk(v: Any) -> Any:
    try:
        return (type(v), value_key(v))
    except Exception:
        return (type(v), repr(v))


def _binary_test(
    fn: Callable[..., Any], facts: EntityFacts, other: Any, goal: bool, *, source_first: bool = True
) -> Callable[[Any], bool]:
    """``fn(source, other) is goal`` (or ``fn(other, source)``) as a test of the source."""
    if source_first:
        return _holds(lambda v: fn(facts, v, other) is goal)
    return _holds(lambda v: fn(facts, other, v) is goal)


def _holds(fn: Callable[[Any], Any]) -> Callable[[Any], bool]:
    def test(v: Any) -> bool:
        try:
            return fn(v) is True
        except (EvaluationError, TypeError, ValueError, AttributeError):
            return False

    return test
