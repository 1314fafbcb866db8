"""The example store in its four formats: identical content and identical decisions."""

from __future__ import annotations

import zipfile
from typing import Any

import pytest

from polang.config import Config
from polang.language.entities import entity_to_json
from polang.language.validate import validate_policies
from polang.store import PolicyStore, PolicyStoreSource

from .storekit import EXAMPLES

FORMATS = {
    "directory": "directory",
    "store.parc": "archive",
    "legacy.json": "legacy-json",
    "legacy.yaml": "legacy-yaml",
}


@pytest.fixture(scope="module")
def stores() -> dict[str, PolicyStore]:
    return {name: PolicyStoreSource.from_path(EXAMPLES / name).load() for name in FORMATS}


def content(store: PolicyStore) -> dict[str, Any]:
    return {
        "id": store.id,
        "name": store.name,
        "description": store.description,
        "version": store.version,
        "polang_version": store.polang_version,
        "schema": store.schema,
        "policies": store.policies,
        "templates": store.templates,
        "linked": store.linked_policies,
        "issuers": store.trusted_issuers,
        "entities": sorted(
            (entity_to_json(e) for e in store.default_entities), key=lambda j: str(j["uid"])
        ),
    }


def test_each_format_is_detected(stores: dict[str, PolicyStore]) -> None:
    assert {name: s.format for name, s in stores.items()} == FORMATS


def test_the_four_formats_load_to_identical_content(stores: dict[str, PolicyStore]) -> None:
    base = content(stores["directory"])
    assert base["id"] == "acme-docs"
    assert len(base["policies"]) == 5 and len(base["templates"]) == 1
    assert len(base["entities"]) == 2 and set(base["issuers"]) == {"acme_idp"}
    for name in FORMATS:
        assert content(stores[name]) == base, name


def test_the_example_validates_strictly(stores: dict[str, PolicyStore]) -> None:
    store = stores["directory"]
    assert validate_policies({**store.policies, **store.templates}, store.schema) == []


def test_the_committed_archive_matches_the_directory() -> None:
    # store.parc is generated with `polang store pack`; it must not drift from directory/
    root = EXAMPLES / "directory"
    with zipfile.ZipFile(EXAMPLES / "store.parc") as zf:
        names = {n for n in zf.namelist() if not n.endswith("/")} - {"manifest.json"}
        on_disk = {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        }
        assert names == on_disk
        for n in names:
            assert zf.read(n) == (root / n).read_bytes(), n


REQUESTS: list[tuple[str, str, dict[str, Any], dict[str, Any], bool]] = [
    # (who, action, resource, context, allowed)
    ("alice", "read", {"id": "plan", "owner": "alice", "classification": "internal"}, {}, True),
    ("bob", "read", {"id": "plan", "owner": "alice", "classification": "internal"}, {}, True),
    ("bob", "edit", {"id": "plan", "owner": "alice", "classification": "internal"}, {}, False),
    ("carol", "edit", {"id": "plan", "owner": "alice", "classification": "internal"}, {}, True),
    ("bob", "read", {"id": "m&a", "owner": "alice", "classification": "secret"}, {}, False),
    (
        "alice",
        "delete",
        {"id": "m&a", "owner": "alice", "classification": "secret"},
        {"network": "home"},
        False,
    ),
    (
        "alice",
        "delete",
        {"id": "m&a", "owner": "alice", "classification": "secret"},
        {"network": "corp"},
        True,
    ),
]

USERS = {
    "alice": {"clearance": 1, "team": True},
    "bob": {"clearance": 1, "team": False},
    "carol": {"clearance": 3, "team": False},
}


def user(name: str) -> dict[str, Any]:
    parents = [{"type": "Acme::Org", "id": "acme"}]
    if USERS[name]["team"]:
        parents = [{"type": "Acme::Team", "id": "finance"}]
    return {
        "uid": {"type": "Acme::User", "id": name},
        "attrs": {
            "email": f"{name}@acme.example",
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "clearance": USERS[name]["clearance"],
        },
        "parents": parents,
    }


def document(d: dict[str, Any]) -> dict[str, Any]:
    return {
        "uid": {"type": "Acme::Document", "id": d["id"]},
        "attrs": {
            "owner": {"__entity": {"type": "Acme::User", "id": d["owner"]}},
            "org": {"__entity": {"type": "Acme::Org", "id": "acme"}},
            "classification": d["classification"],
            "public": False,
        },
        "parents": [],
    }


def test_identical_decisions_in_every_format(stores: dict[str, PolicyStore]) -> None:
    engine_mod = pytest.importorskip("polang.engine")
    engines = {
        name: engine_mod.Engine(Config(policy_store_local_fn=str(EXAMPLES / name)))
        for name in FORMATS
    }
    try:
        for who, action, res, ctx, allowed in REQUESTS:
            decisions = set()
            for engine in engines.values():
                result = engine.authorize_unsigned(
                    f'Acme::Action::"{action}"', document(res), ctx, principal=user(who)
                )
                decisions.add((result.decision, tuple(sorted(result.response.diagnostics.reason))))
            assert len(decisions) == 1, (who, action, res, decisions)
            assert next(iter(decisions))[0] is allowed, (who, action, res)
    finally:
        for engine in engines.values():
            engine.close()
