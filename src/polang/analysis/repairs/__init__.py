"""Repairs: the smallest changes to the *data* that would flip a decision, each verified.

For a deny, a repair is a set of fact changes (an attribute value, a membership added or
removed, a context field, a tag) after which the same request is allowed; for an allow,
one after which it is denied. The request's principal, action and resource identities
and the policies are never changed.

How they are found (:mod:`.walk`). Each policy's condition is walked top down (the AST, with
every sub-expression's current value read off the Program by the explanation's tracer)
asking "what would make this node true (or false)?": ``&&`` needs both operands, ``||``
either, a comparison whose one side reads the data (an attribute, a context field, a tag)
yields a *requirement* (:mod:`.requirements`) on that place with the boundary value
(``principal.level >= 3`` with the level 2 -> the level 3), ``in`` yields a membership to
add (or the memberships to cut), ``has`` an attribute to add, ``like`` a sample string that
matches, the extension methods their boundary (:mod:`.boundaries`). A policy's scope adds its
membership requirement. The requirements of one alternative are turned into concrete
changes (:mod:`.changes`: one value per place that satisfies every requirement on it), and
then **every candidate is verified** (:mod:`.search`) by deciding the changed request again
with the authorizer's backend: only candidates that flip the decision are kept (so a permit
that would apply but trips a forbid is not a repair; the search then tries to add the change
that stops the forbid).

Minimal: every kept repair is shrunk (a change whose removal still flips the decision is
dropped, verified again) and a repair that changes a superset of the places another
repair changes is left out. Repairs are ranked by size. The search is bounded: at most
``MAX_DECISIONS`` verifications, ``MAX_ALTERNATIVES`` alternatives per expression and
``MAX_REPAIR_SIZE`` changes per repair; ``Repairs.complete`` says whether the bounded
search ran out before trying everything, and ``more`` whether more repairs than the
limit were found.
"""

from .changes import SMALL_STORE, apply_changes, changed_facts
from .requirements import Alt
from .results import (
    MAX_ALTERNATIVES,
    MAX_DECISIONS,
    MAX_REPAIR_SIZE,
    MAX_REPAIRS,
    Change,
    ChangeKind,
    Repair,
    Repairs,
)
from .search import find_repairs, repairs
from .walk import format_like

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_DECISIONS",
    "MAX_REPAIRS",
    "MAX_REPAIR_SIZE",
    "SMALL_STORE",
    "Alt",
    "Change",
    "ChangeKind",
    "Repair",
    "Repairs",
    "apply_changes",
    "changed_facts",
    "find_repairs",
    "format_like",
    "repairs",
]
