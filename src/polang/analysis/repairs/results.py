"""What a repair search returns: changes, repairs, and the bounds of the search."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polang.language.values import (
    EntityUID,
    value_repr,
    value_to_json,
)

if TYPE_CHECKING:
    pass


MAX_REPAIRS = 10
"""Repairs returned by default (``limit``); ``Repairs.more`` says when more were found."""

MAX_DECISIONS = 200
"""Verifications (decisions of a changed request) one search may make."""

MAX_ALTERNATIVES = 48
"""Alternatives kept per expression while the candidates are built (smallest first)."""

MAX_REPAIR_SIZE = 4
"""Changes in one repair; larger candidates are not tried."""

ChangeKind = Literal[
    "set_attribute",
    "remove_attribute",
    "add_parent",
    "remove_parent",
    "set_context",
    "remove_context",
    "set_tag",
    "remove_tag",
]

#: The change to an entity's attribute (``False``) or tag (``True``): set, or (``True``) removed.
_VALUE_CHANGES: dict[bool, dict[bool, ChangeKind]] = {
    False: {False: "set_attribute", True: "remove_attribute"},
    True: {False: "set_tag", True: "remove_tag"},
}

_MISSING = object()


# ======================================================================== results


@dataclass(frozen=True, slots=True)
class Change:
    """One fact changed: an attribute, a membership, a context field or a tag.

    ``path`` is the context path (``set_context``) or, for an attribute, the record keys
    below ``attribute`` that the constraint is about (the value is then the attribute's
    whole new record). ``membership`` is the chain ``entity in ... in group`` that the
    change creates (``add_parent``) or cuts (``remove_parent``).
    """

    kind: ChangeKind
    entity: EntityUID | None = None
    attribute: str | None = None
    tag: str | None = None
    parent: EntityUID | None = None
    path: tuple[str, ...] = ()
    value: Any = field(default=None, compare=False)
    value_key: Any = None
    constraint: str = ""
    membership: tuple[EntityUID, ...] = field(default=(), compare=False)

    @property
    def place(self) -> tuple[Any, ...]:
        """What the change is about, whatever the new value (for minimality)."""
        if self.kind in ("add_parent", "remove_parent"):
            return ("parent", self.entity, self.parent)
        if self.kind in ("set_context", "remove_context"):
            return ("context", self.path)
        if self.kind in ("set_tag", "remove_tag"):
            return ("tag", self.entity, self.tag)
        return ("attribute", self.entity, self.attribute)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind in ("set_context", "remove_context"):
            out["path"] = list(self.path)
        else:
            out["entity"] = str(self.entity)
        if self.attribute is not None:
            out["attribute"] = self.attribute
            if self.path:
                out["path"] = list(self.path)
        if self.tag is not None:
            out["tag"] = self.tag
        if self.parent is not None:
            out["parent"] = str(self.parent)
        if self.kind.startswith("set_"):
            out["value"] = value_to_json(self.value)
        if self.constraint:
            out["constraint"] = self.constraint
        if self.membership:
            out["membership"] = [str(u) for u in self.membership]
        return out

    def describe(self) -> str:
        """One line for people: ``set User::"alice".clearance = 3  (>= 3)``."""
        k = self.kind
        if k == "add_parent":
            chain = " in ".join(map(str, self.membership)) if self.membership else ""
            return f"add {self.entity} to {self.parent}" + (f"  ({chain})" if chain else "")
        if k == "remove_parent":
            chain = " in ".join(map(str, self.membership)) if self.membership else ""
            return f"remove {self.entity} from {self.parent}" + (
                f"  (cuts {chain})" if chain else ""
            )
        if k in ("set_context", "remove_context"):
            where = "context." + ".".join(self.path)
        elif k in ("set_tag", "remove_tag"):
            where = f"{self.entity}.getTag({value_repr(self.tag)})"
        else:
            where = f"{self.entity}.{self.attribute}"
        if k.startswith("remove_"):
            return f"remove {where}"
        text = f"set {where} = {value_repr(self.value)}"
        if self.constraint and self.constraint != f"== {value_repr(self.value)}":
            inner = ".".join(self.path) if k != "set_context" else ""
            text += f"  ({inner + ' ' if inner else ''}{self.constraint})"
        return text


@dataclass(frozen=True, slots=True)
class Repair:
    """A verified set of changes, and the policy whose verdict it changes.

    ``outcome`` is ``applies`` (the repair makes ``policy`` apply: a permit for a deny,
    a forbid for an allow) or ``stops_applying`` (the repair stops ``policy``: the forbid
    that denied, or the permit(s) that allowed). ``policies`` lists every policy whose
    verdict the repair changes in that sense; ``reasons`` is the changed request's
    decision's determining policies.
    """

    policy: str
    outcome: Literal["applies", "stops_applying"]
    changes: tuple[Change, ...]
    decision: Literal["allow", "deny"]
    policies: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.changes)

    def places(self) -> frozenset[tuple[Any, ...]]:
        return frozenset(c.place for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "outcome": self.outcome,
            "policies": list(self.policies),
            "decision": self.decision,
            "reasons": list(self.reasons),
            "changes": [c.to_dict() for c in self.changes],
        }

    def describe(self) -> str:
        verb = "applies" if self.outcome == "applies" else "stops applying"
        return f"{value_repr(self.policy)} {verb}: " + "; ".join(c.describe() for c in self.changes)


class Repairs(Sequence[Repair]):
    """The repairs found for one request, smallest first.

    ``more``: more repairs were found than ``limit`` shows. ``complete``: the search
    tried every candidate it generated within its bounds (when false, other repairs
    may exist). ``note`` says either in words.
    """

    def __init__(
        self,
        items: Sequence[Repair],
        *,
        goal: Literal["allow", "deny"],
        limit: int,
        more: bool,
        complete: bool,
        decisions: int,
    ) -> None:
        self.items = list(items)
        self.goal = goal
        self.limit = limit
        self.more = more
        self.complete = complete
        self.decisions = decisions

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: Any) -> Any:
        return self.items[i]

    def __iter__(self) -> Iterator[Repair]:
        return iter(self.items)

    def __repr__(self) -> str:
        return f"Repairs({len(self.items)} to {self.goal}, more={self.more})"

    @property
    def note(self) -> str | None:
        if self.more:
            return f"more repairs exist; showing the {len(self.items)} smallest"
        if not self.complete:
            return "the search stopped at its bounds; other repairs may exist"
        if not self.items:
            word = "allowed" if self.goal == "allow" else "denied"
            return f"no repair found: no change of the kinds searched makes this request {word}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "repairs": [r.to_dict() for r in self.items],
            "more": self.more,
            "complete": self.complete,
            "note": self.note,
        }
