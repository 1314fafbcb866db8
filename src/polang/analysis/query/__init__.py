"""Who can access what: bulk questions answered from the same Program that decides.

``who_can`` (every principal allowed an action on a resource), ``what_can`` (every action
and resource a principal is allowed) and ``access_matrix`` (every allowed triple) evaluate
the Program *set at a time* instead of request by request. For a query, one request
variable is *free* (the principals of ``who_can``, the resources of ``what_can`` and of
each step of the matrix) and the others are fixed per step. Each policy's value
predicates are then relations over the free variable's entities, evaluated bottom up:

- a predicate that does not read the free variable is one value per step (a scalar);
- a predicate that reads only the free variable (``principal.level > 3``) is a table
  computed once over the policy's candidates and reused by every step;
- a predicate that reads both (``resource.owner == principal``,
  ``principal in resource.viewers``, ``principal.dept == resource.dept``) is a hash join:
  the table side is indexed by value, by set element or by ancestor, and the scalar side
  is looked up in it; other shapes fall back to evaluating the rule per entity;
- ``&&``, ``||``, ``!`` and ``if`` rule groups combine the sets of entities for which their
  operands are true / false / error, keeping the language's three outcomes (an operand is
  only evaluated on the entities that reach it, as the rules say).

Scopes prune first: ``principal in G`` limits a policy to the descendants of ``G`` (from the
hierarchy closure), ``== E`` to one entity, ``is T`` to one type; action constraints pick
the policies per action. The fixed rules of ``rules/decision.dl`` are then applied to the
per-policy sets: allowed = (applying permits) - (applying forbids).

Open world. A query may lack data a real request would carry: the context (``context=None``)
or the queried principal/resource itself (not in the entity set; a request would supply
it). Anything read from those is *unknown*: a policy whose outcome depends on it is
reported as **conditional**, with the residual conditions (the scope part or the
``when``/``unless`` clauses that could not be decided), never silently dropped. Entities
the store does hold are the truth: reading a missing attribute of a stored entity is an
error, as in a request.

Results are ordered (actions, then resources, then principals, each sorted) and paged with
``limit`` and an opaque ``cursor`` instead of being truncated.

The modules, bottom up: :mod:`.program`, :mod:`.tables`, :mod:`.evaluation` (the index
and the evaluation), :mod:`.results`, :mod:`.run`, :mod:`.api`.
"""

from polang.language.values import is_action_type, value_repr

from .api import access_matrix, what_can, who_can
from .evaluation import QueryIndex, prepare
from .program import ProgramAnalysis, QueryError, analysis_for
from .results import AccessEntry, QueryResult, QueryStats, Residual

__all__ = [
    "AccessEntry",
    "ProgramAnalysis",
    "QueryError",
    "QueryIndex",
    "QueryResult",
    "QueryStats",
    "Residual",
    "access_matrix",
    "analysis_for",
    "is_action_type",
    "prepare",
    "value_repr",
    "what_can",
    "who_can",
]
