"""Seeded small stores for the authoring tests (repairs, coverage, diff), drawn by
``tests/random_stores.py`` with the conditions below.

The conditions cover every shape repairs and coverage handle: comparisons with their
boundaries, memberships (scope and ``in``), ``has``, ``like``, tags, sets, the extension
types, the context, ``&&``/``||``/``!``/``if``, and errors (missing attributes, wrong
types).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.random_stores import DELETE, EDIT, RESOURCE_SCOPES, VIEW, WRITE, U, random_context
from tests.random_stores import random_entities as random_entities
from tests.random_stores import random_policies as _random_policies

from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import Entity
from polang.language.parser import parse_policies
from polang.language.values import EntityUID

__all__ = [
    "ACTIONS",
    "CONDITIONS",
    "RESOURCE_SCOPES",
    "WRITE",
    "Case",
    "U",
    "make_case",
    "random_context",
    "random_entities",
    "random_policies",
]

ACTIONS = [VIEW, EDIT, DELETE]

CONDITIONS = [
    "principal.dept == resource.dept",
    "resource.dept != principal.dept",
    "resource.owner == principal",
    "principal in resource.viewers",
    "resource in principal.folders",
    "resource.public",
    "principal.level > 2",
    "principal.level >= resource.level",
    "resource.level < principal.level",
    "3 <= principal.level",
    "resource has public && resource.public",
    "resource has secret",
    'resource.tags.contains("x")',
    '["x", "y"].contains(resource.dept)',
    "resource.viewers.contains(principal)",
    "principal.groups.containsAny(resource.groups)",
    'resource.tags.containsAll(["x", "q"])',
    "principal has manager && principal.manager == resource.owner",
    "if principal.level > 3 then true else resource.public",
    "!resource.public",
    "resource.public || principal.level > 4",
    'principal.getTag("team") == "a"',
    'principal.hasTag("team")',
    'resource is Doc in Folder::"f0"',
    'principal in Group::"g0"',
    "resource.owner in principal",
    'principal.nick like "a*b"',
    'resource.dept like "*y"',
    "context.mfa",
    "context.level > 1 && principal.level > 1",
    "context.mfa || resource.public",
    "principal.level > context.level",
    'context.ip.isInRange(ip("10.0.0.0/8"))',
    "context.ip.isLoopback()",
    'resource.score.lessThan(decimal("1.5"))',
    'resource.score.greaterThanOrEqual(decimal("0.5"))',
    'context.now < datetime("2024-06-01")',
    'resource.address.city == "paris"',
    'resource.status != "archived"',
]


def random_policies(rng: random.Random, n: int) -> str:
    """``n`` policies over the authoring conditions."""
    return _random_policies(rng, n, CONDITIONS)


@dataclass
class Case:
    seed: int
    text: str
    authorizer: Authorizer
    entities: list[Entity]
    facts: EntityFacts
    principals: list[EntityUID]
    resources: list[EntityUID]


def make_case(seed: int, n_policies: int = 8) -> Case:
    rng = random.Random(seed)
    text = random_policies(rng, n_policies)
    policies = {p.policy_id or "": p for p in parse_policies(text, f"seed{seed}.polang")}
    ents = random_entities(rng)
    facts = EntityFacts(ents)
    principals = sorted(e.uid for e in ents if e.uid.type == "User")
    resources = sorted(e.uid for e in ents if e.uid.type == "Doc")
    return Case(seed, text, Authorizer(policies), ents, facts, principals, resources)
