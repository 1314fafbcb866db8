"""A plan's filter as a Django ``Q`` (``polang[django]``).

``plan_q(plan, mapping)`` gives a ``Q`` for ``Document.objects.filter(...)``: its one
child is a Boolean expression translated, when the query is compiled, for the
connection's backend (sqlite, postgresql, mysql), with the policies' string literals as
query parameters.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.db.models import BooleanField, Expression, Q

from polang.errors import FilterRefused
from polang.filtering.mapping import Mapping
from polang.filtering.translate import Filter, split_params, translate

_VENDORS = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}
"""Django's ``connection.vendor`` -> the translation's dialect."""


class PlanExpression(Expression):
    """A plan translated per connection (conditional: usable in ``filter()`` and ``Q``)."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, plan: Any, mapping: Mapping, superset: bool = False) -> None:
        super().__init__(output_field=BooleanField())
        self.plan = plan
        self.mapping = mapping
        self.superset = superset
        self.last: Filter | None = None

    def translated(self, vendor: str) -> Filter:
        d = _VENDORS.get(vendor)
        if d is None:
            raise FilterRefused(
                f"no translation for the Django database vendor {vendor!r}: one of "
                + ", ".join(sorted(_VENDORS)),
                construct="dialect",
            )
        self.last = translate(self.plan, self.mapping, d, superset=self.superset)
        return self.last

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        f = self.translated(connection.vendor)
        pieces, values = split_params(f.where, f.dialect, secrets.token_hex(8))
        # Django formats every backend's SQL with %s placeholders: a literal % is %%
        return "(" + "%s".join(p.replace("%", "%%") for p in pieces) + ")", values


def plan_q(plan: Any, mapping: Mapping, *, superset: bool = False, vendor: str = "") -> Q:
    """The plan as a ``Q``; with ``vendor`` (``connection.vendor``) it is translated now,
    so a refusal (FilterRefused) comes here rather than when the query runs."""
    expr = PlanExpression(plan, mapping, superset)
    if vendor:
        expr.translated(vendor)
    return Q(expr)
