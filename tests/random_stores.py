"""Seeded random stores for the tests that compare an analysis with brute force
(queries, repairs, coverage, diff): policies over every shape the evaluator distinguishes,
entities with missing and mistyped attributes, tags, hierarchies and the extension types,
and contexts. Each suite brings its own list of conditions.
"""

from __future__ import annotations

import random

from polang.language.entities import Entity
from polang.language.extensions.datetime import parse_datetime
from polang.language.extensions.decimal import parse_decimal
from polang.language.extensions.ipaddr import parse_ipaddr
from polang.language.values import EntityUID, RecordValue, SetValue


def U(t: str, i: str) -> EntityUID:
    return EntityUID(t, i)


VIEW, EDIT, DELETE, WRITE = (U("Action", a) for a in ("view", "edit", "delete", "write"))

PRINCIPAL_SCOPES = [
    "principal",
    "principal",
    'principal in Group::"g0"',
    'principal in Group::"g1"',
    'principal == User::"u1"',
    "principal is User",
    'principal is User in Group::"g2"',
]
ACTION_SCOPES = [
    "action",
    'action == Action::"view"',
    'action in [Action::"view", Action::"edit"]',
    'action in Action::"write"',
    'action == Action::"delete"',
]
RESOURCE_SCOPES = [
    "resource",
    "resource",
    'resource in Folder::"f0"',
    'resource in Folder::"f1"',
    "resource is Doc",
    'resource == Doc::"d1"',
    'resource is Doc in Folder::"f2"',
]


def random_policies(rng: random.Random, n: int, conditions: list[str]) -> str:
    """``n`` policies ``p0``... with random scopes and up to two ``when``/``unless``
    clauses drawn from ``conditions`` (a third of them joined by ``&&``)."""
    out = []
    for i in range(n):
        effect = "forbid" if rng.random() < 0.3 else "permit"
        scope = (
            rng.choice(PRINCIPAL_SCOPES),
            rng.choice(ACTION_SCOPES),
            rng.choice(RESOURCE_SCOPES),
        )
        body = [f'@id("p{i}")', f"{effect}({', '.join(scope)})"]
        for _ in range(rng.choice([0, 1, 1, 2])):
            kind = "unless" if rng.random() < 0.25 else "when"
            c = rng.choice(conditions)
            if rng.random() < 0.3:
                c = f"({c}) && ({rng.choice(conditions)})"
            body.append(f"{kind} {{ {c} }}")
        out.append("\n".join(body) + ";")
    return "\n".join(out)


def random_entities(rng: random.Random, users: int = 4, docs: int = 4) -> list[Entity]:
    """Groups and folders in small hierarchies, the actions, and ``users`` users and
    ``docs`` documents whose attributes are often missing and sometimes of the wrong type."""
    groups = [U("Group", f"g{i}") for i in range(3)]
    folders = [U("Folder", f"f{i}") for i in range(3)]
    us = [U("User", f"u{i}") for i in range(users)]
    ds = [U("Doc", f"d{i}") for i in range(docs)]
    ents = [
        Entity(groups[0], {}, {groups[1]}),
        Entity(groups[1]),
        Entity(groups[2], {}, {groups[0]}),
        Entity(folders[0]),
        Entity(folders[1], {}, {folders[0]}),
        Entity(folders[2]),
        Entity(WRITE),
        Entity(VIEW),
        Entity(EDIT, parents={WRITE}),
        Entity(DELETE, parents={WRITE}),
    ]
    for u in us:
        attrs: dict[str, object] = {}
        if rng.random() < 0.85:
            attrs["dept"] = rng.choice(["x", "y", "z"])
        if rng.random() < 0.85:
            attrs["level"] = rng.randrange(0, 6)
        elif rng.random() < 0.5:
            attrs["level"] = "high"  # a type error where compared
        if rng.random() < 0.45:
            attrs["manager"] = rng.choice(us)
        if rng.random() < 0.65:
            attrs["folders"] = SetValue(rng.sample(folders, rng.randrange(0, 3)))
        if rng.random() < 0.65:
            attrs["groups"] = SetValue(rng.sample(["a", "b", "c"], rng.randrange(0, 3)))
        if rng.random() < 0.6:
            attrs["nick"] = rng.choice(["alpha", "bob", "al", "ab", "axb"])
        tags = {"team": rng.choice(["a", "b"])} if rng.random() < 0.5 else {}
        parents = set(rng.sample(groups, rng.randrange(0, 3)))
        ents.append(Entity(u, attrs, parents, tags))
    for d in ds:
        attrs = {}
        if rng.random() < 0.85:
            attrs["owner"] = rng.choice([*us, U("User", "nobody"), groups[0]])
        if rng.random() < 0.8:
            attrs["dept"] = rng.choice(["x", "y", "z"])
        if rng.random() < 0.65:
            attrs["public"] = rng.random() < 0.5
        elif rng.random() < 0.3:
            attrs["public"] = 1  # not a Bool
        if rng.random() < 0.3:
            attrs["secret"] = True
        if rng.random() < 0.8:
            attrs["level"] = rng.randrange(0, 6)
        if rng.random() < 0.75:
            attrs["viewers"] = SetValue(rng.sample(us, rng.randrange(0, min(4, len(us) + 1))))
        if rng.random() < 0.7:
            attrs["tags"] = SetValue(rng.sample(["x", "y", "q"], rng.randrange(0, 3)))
        if rng.random() < 0.65:
            attrs["groups"] = SetValue(rng.sample(["a", "b", "c"], rng.randrange(0, 3)))
        if rng.random() < 0.6:
            attrs["score"] = parse_decimal(rng.choice(["0.2", "1.0", "2.5"]))
        if rng.random() < 0.5:
            attrs["address"] = RecordValue({"city": rng.choice(["paris", "rome"])})
        if rng.random() < 0.6:
            attrs["status"] = rng.choice(["archived", "live"])
        parents = set(rng.sample(folders, rng.randrange(0, 2)))
        ents.append(Entity(d, attrs, parents))
    return ents


def random_context(rng: random.Random) -> RecordValue:
    """A context with ``mfa``, ``level``, ``ip`` and ``now``, each often missing."""
    fields: dict[str, object] = {}
    if rng.random() < 0.8:
        fields["mfa"] = rng.random() < 0.5
    if rng.random() < 0.8:
        fields["level"] = rng.randrange(0, 4)
    if rng.random() < 0.7:
        fields["ip"] = parse_ipaddr(rng.choice(["10.1.2.3", "192.168.1.1", "127.0.0.1"]))
    if rng.random() < 0.6:
        fields["now"] = parse_datetime(rng.choice(["2024-01-01", "2025-01-01"]))
    return RecordValue(fields)
