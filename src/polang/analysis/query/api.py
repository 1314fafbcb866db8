"""The public API: ``who_can``, ``what_can``, ``access_matrix`` and the prepared index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from polang.analysis.trace import value_json
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity, EntityStore, context_record
from polang.language.schema import Schema
from polang.language.values import (
    EntityUID,
    RecordValue,
)

from .evaluation import QueryIndex, _Run, prepare
from .results import QueryResult
from .run import _fingerprint, _run_steps

# ======================================================================== public API


def who_can(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    action: EntityUID,
    resource: EntityUID,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> QueryResult:
    """Every principal allowed ``action`` on ``resource``, sorted.

    Candidates are the stored entities the schema allows as the action's principals (all
    non-action entities without a schema). ``context=None`` means the context is not
    known: policies that read it make their principals conditional.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "principal", ctx)
    query = {
        "action": action.to_json(),
        "resource": resource.to_json(),
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "who_can", [action, resource, ctx])
    return _run_steps(run, "who_can", query, [(action, [resource])], fp, limit, cursor)


def what_can(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    principal: EntityUID,
    action: EntityUID | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> QueryResult:
    """Every (action, resource) ``principal`` is allowed, by action then resource.

    ``action=None`` asks about every action (the schema's, else the action entities of
    the store and the actions the policies name). A principal the store does not hold is
    allowed only conditionally where a policy reads its attributes or ancestors.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "resource", ctx)
    actions = [action] if action is not None else qi.actions
    steps = []
    for a in actions:
        if qi.schema is not None:
            ad = qi.schema.action(a)
            if ad is None or not ad.applies_to or principal.type not in ad.principal_types:
                continue
        steps.append((a, [principal]))
    query = {
        "principal": principal.to_json(),
        "action": action.to_json() if action is not None else None,
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "what_can", [principal, action, ctx])
    return _run_steps(run, "what_can", query, steps, fp, limit, cursor)


def access_matrix(
    authorizer: Any,
    facts: EntityFacts | EntityStore | Iterable[Entity] | QueryIndex,
    context: RecordValue | Mapping[str, Any] | None = None,
    *,
    schema: Schema | None = None,
    actions: Sequence[EntityUID] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> QueryResult:
    """Every allowed (principal, action, resource) over the entity set.

    Ordered by action, resource, principal. With ``limit`` only the steps needed for one
    page are evaluated; pass ``next_cursor`` back to continue. ``progress(done, total)``
    is called as resources are processed.
    """
    qi = prepare(authorizer, facts, schema)
    ctx = None if context is None else context_record(context)
    run = _Run(qi, "principal", ctx)
    acts = list(actions) if actions is not None else qi.actions
    steps = [(a, sorted(qi.candidates("resource", a))) for a in acts]
    query = {
        "actions": None if actions is None else [a.to_json() for a in acts],
        "context": None if ctx is None else _ctx_json(ctx),
    }
    fp = _fingerprint(qi, "matrix", [tuple(acts), ctx])
    return _run_steps(run, "matrix", query, steps, fp, limit, cursor, progress)


def _ctx_json(ctx: RecordValue) -> Any:

    return value_json(ctx)
