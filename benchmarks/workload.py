"""A generated, realistic policy store for benchmarks (seeded: the same arguments give the
same store, byte for byte).

The shape is a document-management system:

- ``Group`` entities nested in a forest; ``User`` members of 1-3 groups, with department,
  level, clearance, an ``active`` flag, an optional manager and string tags;
- ``Folder`` entities nested in a forest, with an owner and a department;
- ``Document`` entities inside folders, with an owner, department, classification, a set of
  labels, an ``archived`` flag and string tags;
- actions ``view``/``comment``/``download`` (group ``read``) and ``edit``/``share``/
  ``delete`` (group ``write``), both groups in ``all``; the context carries ``mfa``,
  ``hour`` and the caller's ``ip``.

Policies mix role rules (group -> action group -> folder subtree), attribute rules,
owner rules and forbids with ``unless``. Requests are biased so that a good share of them
is granted (a user drawn from a granted group asking for a document in the granted
folder), the rest uniform.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SCHEMA = """\
entity Group in [Group];
entity User in [Group] {
  name: String,
  dept: String,
  level: Long,
  clearance: Long,
  active: Bool,
  manager?: User,
} tags String;
entity Folder in [Folder] {
  owner: User,
  dept: String,
  public: Bool,
};
entity Document in [Folder] {
  owner: User,
  dept: String,
  classification: Long,
  labels: Set<String>,
  archived: Bool,
  size: Long,
} tags String;

type Ctx = { mfa: Bool, hour: Long, ip: ipaddr };

action "all";
action "read" in ["all"];
action "write" in ["all"];
action view, comment, download in ["read"]
  appliesTo { principal: [User], resource: [Document, Folder], context: Ctx };
action edit, share, delete in ["write"]
  appliesTo { principal: [User], resource: [Document, Folder], context: Ctx };
"""

DEPTS = ("eng", "sales", "hr", "finance", "legal", "ops", "marketing", "support")
LABELS = ("public", "internal", "confidential", "draft", "legal-hold")
PROJECTS = ("apollo", "gemini", "mercury", "voyager", "viking", "pioneer")
READ_ACTIONS = ("view", "comment", "download")
WRITE_ACTIONS = ("edit", "share", "delete")
ACTIONS = READ_ACTIONS + WRITE_ACTIONS
ACTION_SETS = ("read", "write", "all", *ACTIONS)


def _ref(type_name: str, id_: str) -> dict[str, Any]:
    return {"__entity": {"type": type_name, "id": id_}}


def _uid(type_name: str, id_: str) -> dict[str, str]:
    return {"type": type_name, "id": id_}


@dataclass
class Workload:
    """Everything an engine needs, as text and JSON (the engines' own input forms)."""

    seed: int
    schema_text: str
    policies: list[str]
    entities: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def policies_text(self) -> str:
        return "\n\n".join(self.policies) + "\n"

    @property
    def entities_json(self) -> str:
        return json.dumps(self.entities)


class _Store:
    """The generated entity graph, kept as plain lists for policy and request choices."""

    def __init__(self, rng: random.Random, n_entities: int) -> None:
        self.rng = rng
        n_groups = max(2, n_entities * 2 // 100)
        n_folders = max(2, n_entities * 8 // 100)
        n_users = max(2, n_entities * 30 // 100)
        n_docs = max(2, n_entities - n_groups - n_folders - n_users)
        self.groups = [f"g{i:04d}" for i in range(n_groups)]
        self.folders = [f"f{i:04d}" for i in range(n_folders)]
        self.users = [f"u{i:05d}" for i in range(n_users)]
        self.docs = [f"d{i:05d}" for i in range(n_docs)]
        self.group_children: dict[str, list[str]] = {g: [] for g in self.groups}
        self.folder_children: dict[str, list[str]] = {f: [] for f in self.folders}
        self.group_users: dict[str, list[str]] = {g: [] for g in self.groups}
        self.folder_docs: dict[str, list[str]] = {f: [] for f in self.folders}
        self.user_dept: dict[str, str] = {}
        self.entities: list[dict[str, Any]] = []
        self._build()

    def _build(self) -> None:
        rng = self.rng
        # Forests: the first few are roots, later ones hang under an earlier node.
        for i, g in enumerate(self.groups):
            parents = []
            if i >= 5 and rng.random() < 0.85:
                p = self.groups[rng.randrange(i)]
                parents.append(p)
                self.group_children[p].append(g)
            self.entities.append(
                {
                    "uid": _uid("Group", g),
                    "attrs": {},
                    "parents": [_uid("Group", p) for p in parents],
                }
            )
        for i, u in enumerate(self.users):
            member_of = rng.sample(self.groups, k=min(len(self.groups), rng.randint(1, 3)))
            for g in member_of:
                self.group_users[g].append(u)
            dept = rng.choice(DEPTS)
            self.user_dept[u] = dept
            attrs: dict[str, Any] = {
                "name": f"user {i}",
                "dept": dept,
                "level": rng.randint(1, 10),
                "clearance": rng.randint(0, 5),
                "active": rng.random() < 0.95,
            }
            if i > 0 and rng.random() < 0.7:
                attrs["manager"] = _ref("User", self.users[rng.randrange(i)])
            tags = {"project": rng.choice(PROJECTS)} if rng.random() < 0.5 else {}
            self.entities.append(
                {
                    "uid": _uid("User", u),
                    "attrs": attrs,
                    "parents": [_uid("Group", g) for g in member_of],
                    "tags": tags,
                }
            )
        for i, f in enumerate(self.folders):
            parents = []
            if i >= 10 and rng.random() < 0.9:
                p = self.folders[rng.randrange(i)]
                parents.append(p)
                self.folder_children[p].append(f)
            self.entities.append(
                {
                    "uid": _uid("Folder", f),
                    "attrs": {
                        "owner": _ref("User", rng.choice(self.users)),
                        "dept": rng.choice(DEPTS),
                        "public": rng.random() < 0.1,
                    },
                    "parents": [_uid("Folder", p) for p in parents],
                }
            )
        for d in self.docs:
            folder = rng.choice(self.folders)
            self.folder_docs[folder].append(d)
            owner = rng.choice(self.users)
            labels = rng.sample(LABELS, k=rng.randint(0, 2))
            tags = {"project": rng.choice(PROJECTS)} if rng.random() < 0.4 else {}
            self.entities.append(
                {
                    "uid": _uid("Document", d),
                    "attrs": {
                        "owner": _ref("User", owner),
                        "dept": self.user_dept[owner] if rng.random() < 0.7 else rng.choice(DEPTS),
                        "classification": rng.randint(0, 5),
                        "labels": labels,
                        "archived": rng.random() < 0.05,
                        "size": rng.randint(1, 10_000_000),
                    },
                    "parents": [_uid("Folder", folder)],
                    "tags": tags,
                }
            )

    def _subtree(self, root: str, children: dict[str, list[str]]) -> list[str]:
        out, todo = [], [root]
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(children[n])
        return out

    def users_under(self, g: str) -> list[str]:
        return [u for sub in self._subtree(g, self.group_children) for u in self.group_users[sub]]

    def docs_under(self, f: str) -> list[str]:
        return [d for sub in self._subtree(f, self.folder_children) for d in self.folder_docs[sub]]


def _quote(s: str) -> str:
    return json.dumps(s)  # the ids and strings used here need no escapes beyond JSON's


def _action_scope(a: str) -> str:
    return (
        f"action in Action::{_quote(a)}"
        if a in ("read", "write", "all")
        else (f"action == Action::{_quote(a)}")
    )


class _Policies:
    """Policy text generators, each a realistic kind of rule."""

    def __init__(self, rng: random.Random, store: _Store) -> None:
        self.rng = rng
        self.s = store
        self.role_rules: list[tuple[str, str, str]] = []  # (group, action set, folder)

    def role(self) -> str:
        rng = self.rng
        g = rng.choice(self.s.groups)
        a = rng.choice(("read", "read", "write", "all", "view", "edit"))
        f = rng.choice(self.s.folders)
        self.role_rules.append((g, a, f))
        return (
            f'@id("role-{len(self.role_rules)}")\n'
            f"permit(principal in Group::{_quote(g)}, {_action_scope(a)}, "
            f"resource in Folder::{_quote(f)});"
        )

    def attribute(self) -> str:
        rng = self.rng
        dept = rng.choice(DEPTS)
        kinds: list[Callable[[], str]] = [
            lambda: (
                f'permit(principal, action in Action::"read", resource is Document)\n'
                f"when {{ principal.dept == {_quote(dept)} && resource.dept == principal.dept &&"
                f" principal.clearance >= resource.classification }};"
            ),
            lambda: (
                f'permit(principal is User, action == Action::"view", resource is Document in '
                f"Folder::{_quote(rng.choice(self.s.folders))})\n"
                f'when {{ resource.labels.contains("public") }};'
            ),
            lambda: (
                f"permit(principal, action == Action::{_quote(rng.choice(READ_ACTIONS))}, "
                f"resource is Document)\n"
                f"when {{ resource.owner has manager && resource.owner.manager == principal }};"
            ),
            lambda: (
                f'permit(principal, action == Action::"download", resource)\n'
                f"when {{ principal.level >= {rng.randint(6, 9)} && context.mfa &&"
                f" principal.dept == {_quote(dept)} }};"
            ),
            lambda: (
                f'permit(principal, action in Action::"read", resource is Document)\n'
                f'when {{ resource.hasTag("project") && principal.hasTag("project") &&'
                f' principal.getTag("project") == resource.getTag("project") &&'
                f' resource.getTag("project") == {_quote(rng.choice(PROJECTS))} }};'
            ),
            lambda: (
                'permit(principal, action == Action::"view", resource is Folder)\n'
                "when { resource.public || resource.dept == principal.dept };"
            ),
        ]
        return rng.choice(kinds)()

    def owner(self) -> str:
        rng = self.rng
        acts = rng.sample(ACTIONS, k=rng.randint(1, 4))
        scope = "action in [" + ", ".join(f"Action::{_quote(a)}" for a in acts) + "]"
        t = rng.choice(("Document", "Document", "Folder"))
        return (
            f"permit(principal, {scope}, resource is {t})\nwhen {{ resource.owner == principal }};"
        )

    def forbid(self) -> str:
        rng = self.rng
        kinds: list[Callable[[], str]] = [
            lambda: (
                f'forbid(principal, action in Action::"write", '
                f"resource in Folder::{_quote(rng.choice(self.s.folders))})\n"
                f"unless {{ principal in Group::{_quote(rng.choice(self.s.groups))} }};"
            ),
            lambda: (
                f'forbid(principal, action in Action::"write", resource is Document)\n'
                f"when {{ resource.archived }} "
                f"unless {{ principal.level >= {rng.randint(8, 10)} }};"
            ),
            lambda: (
                f'forbid(principal, action == Action::"delete", '
                f"resource in Folder::{_quote(rng.choice(self.s.folders))})\n"
                f"unless {{ context.mfa }};"
            ),
            lambda: (
                f'forbid(principal, action == Action::"share", resource is Document)\n'
                f'when {{ resource.labels.contains("confidential") }} '
                f"unless {{ principal.clearance >= {rng.randint(3, 5)} }};"
            ),
            lambda: (
                f"forbid(principal in Group::{_quote(rng.choice(self.s.groups))}, action, "
                f"resource in Folder::{_quote(rng.choice(self.s.folders))})\n"
                f"unless {{ context.hour >= 8 && context.hour < 18 }};"
            ),
            lambda: (
                f'forbid(principal, action in Action::"write", '
                f"resource in Folder::{_quote(rng.choice(self.s.folders))})\n"
                f'unless {{ context.ip.isInRange(ip("10.0.0.0/8")) || principal.level >= 9 }};'
            ),
        ]
        return rng.choice(kinds)()


def _request(
    rng: random.Random, store: _Store, role_rules: list[tuple[str, str, str]]
) -> dict[str, Any]:
    principal = resource = None
    action = rng.choice(ACTIONS)
    if role_rules and rng.random() < 0.5:
        g, a, f = rng.choice(role_rules)
        users, docs = store.users_under(g), store.docs_under(f)
        if users and docs:
            principal = rng.choice(users)
            resource = ("Document", rng.choice(docs))
            if a in ACTIONS:
                action = a
            elif a == "read":
                action = rng.choice(READ_ACTIONS)
            elif a == "write":
                action = rng.choice(WRITE_ACTIONS)
    if principal is None or resource is None:
        principal = rng.choice(store.users)
        resource = (
            ("Folder", rng.choice(store.folders))
            if rng.random() < 0.15
            else ("Document", rng.choice(store.docs))
        )
    ip = (
        f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        if rng.random() < 0.9
        else f"203.0.113.{rng.randrange(1, 255)}"
    )
    return {
        "principal": _uid("User", principal),
        "action": _uid("Action", action),
        "resource": _uid(*resource),
        "context": {
            "mfa": rng.random() < 0.7,
            "hour": rng.randrange(24),
            "ip": {"__extn": {"fn": "ip", "arg": ip}},
        },
    }


def generate(
    *, n_entities: int = 10_000, n_policies: int = 200, n_requests: int = 1_000, seed: int = 7
) -> Workload:
    """The store: ``n_entities`` entities, ``n_policies`` policies (50% role rules, 20%
    attribute rules, 10% owner rules, 20% forbids with ``unless``) and ``n_requests``
    requests."""
    rng = random.Random(seed)
    store = _Store(rng, n_entities)
    gen = _Policies(rng, store)
    n_role = n_policies * 50 // 100
    n_attr = n_policies * 20 // 100
    n_owner = n_policies * 10 // 100
    n_forbid = n_policies - n_role - n_attr - n_owner
    policies = (
        [gen.role() for _ in range(n_role)]
        + [gen.attribute() for _ in range(n_attr)]
        + [gen.owner() for _ in range(n_owner)]
        + [gen.forbid() for _ in range(n_forbid)]
    )
    requests = [_request(rng, store, gen.role_rules) for _ in range(n_requests)]
    counts = {
        "groups": len(store.groups),
        "users": len(store.users),
        "folders": len(store.folders),
        "documents": len(store.docs),
        "entities": len(store.entities),
        "policies": len(policies),
        "role": n_role,
        "attribute": n_attr,
        "owner": n_owner,
        "forbid": n_forbid,
        "requests": len(requests),
    }
    return Workload(seed, SCHEMA, policies, store.entities, requests, counts)
