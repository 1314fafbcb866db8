"""Directory stores: metadata, layout, policies, templates and links, entities, issuers."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from polang.language.values import EntityUID
from polang.store import PolicyStoreLoadError, PolicyStoreSource

from .storekit import METADATA, TEMPLATE

MakeStore = Callable[..., Path]


def rejected(root: Path) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.directory(root).load()
    return e.value


def test_the_base_store_loads_in_full(make_store: MakeStore) -> None:
    store = PolicyStoreSource.directory(make_store()).load()
    assert store.id == "app-store"
    assert store.name == "App store"
    assert store.description == "test store"
    assert store.version == "1.0.0"
    assert store.polang_version == "4.0.0"
    assert store.created_date == datetime(2025, 1, 1, tzinfo=UTC)
    assert store.updated_date == datetime(2025, 1, 2, 0, 0, 0, 123000, tzinfo=UTC)
    assert store.schema_format == "polang"
    assert set(store.policies) == {"owner-view"}
    assert set(store.templates) == {"share"}
    assert store.templates["share"].is_template
    assert store.policy_origins == {
        "owner-view": "policies/main.polang",
        "share": "templates/share.polang",
    }
    assert len(store.default_entities) == 2
    assert set(store.trusted_issuers) == {"idp"}
    assert len(store.digest) == 64
    summary = store.summary()
    assert (summary["policies"], summary["templates"], summary["entities"]) == (1, 1, 2)
    assert (summary["trusted_issuers"], summary["template_links"]) == (1, 0)


def test_optional_parts_may_be_absent(make_store: MakeStore) -> None:
    root = make_store(
        {
            "templates/share.polang": None,
            "entities/users.json": None,
            "trusted-issuers/idp.json": None,
            "policies/main.polang": None,
        }
    )
    store = PolicyStoreSource.directory(root).load()
    assert store.policies == {} and store.templates == {} and store.trusted_issuers == {}
    assert len(store.default_entities) == 0


def test_metadata_description_is_optional(make_store: MakeStore) -> None:
    meta = json.loads(json.dumps(METADATA))
    del meta["policy_store"]["description"]
    store = PolicyStoreSource.directory(make_store({"metadata.json": json.dumps(meta)})).load()
    assert store.description is None


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("version", "0.0.1", True),
        ("version", "10.20.30", True),
        ("version", "1.0", False),
        ("version", "01.0.0", False),
        ("version", "1.0.0-beta", False),
        ("created_date", "2025-01-01T00:00:00Z", True),
        ("created_date", "2025-01-01T00:00:00.5+00:00", True),
        ("created_date", "2025-01-01T00:00:00", False),
        ("created_date", "2025-02-30T00:00:00Z", False),
        ("updated_date", "2025-01-01", False),
        ("name", "", False),
        ("id", 12, False),
    ],
)
def test_metadata_field_forms(make_store: MakeStore, field: str, value: object, ok: bool) -> None:
    meta = json.loads(json.dumps(METADATA))
    meta["policy_store"][field] = value
    root = make_store({"metadata.json": json.dumps(meta)})
    if ok:
        assert PolicyStoreSource.directory(root).load().id == meta["policy_store"]["id"]
    else:
        err = rejected(root)
        assert err.kind == "invalid_field"
        assert err.problems[0].location == f"$.policy_store.{field}"


def test_metadata_requires_each_field(make_store: MakeStore) -> None:
    for field in ("id", "name", "version"):
        meta = json.loads(json.dumps(METADATA))
        del meta["policy_store"][field]
        err = rejected(make_store({"metadata.json": json.dumps(meta)}))
        assert (err.kind, err.problems[0].location) == ("missing_field", f"$.policy_store.{field}")
    err = rejected(make_store({"metadata.json": json.dumps({"polang_version": "4.0.0"})}))
    assert err.kind == "missing_field"
    err = rejected(
        make_store({"metadata.json": json.dumps({"policy_store": METADATA["policy_store"]})})
    )
    assert (err.kind, err.problems[0].location) == ("missing_field", "$.polang_version")


def test_several_policies_per_file_and_nested_folders(make_store: MakeStore) -> None:
    two = (
        '@id("a") permit (principal, action, resource);\n'
        '@id("b") forbid (principal, action, resource) when { false };\n'
    )
    root = make_store({"policies/team/two.polang": two})
    store = PolicyStoreSource.directory(root).load()
    assert set(store.policies) == {"owner-view", "a", "b"}
    assert store.policies["b"].effect == "forbid"
    assert store.policy_origins["a"] == "policies/team/two.polang"


def test_duplicate_ids_name_both_files(make_store: MakeStore) -> None:
    dup = '@id("owner-view") permit (principal, action, resource);'
    err = rejected(make_store({"policies/other.polang": dup}))
    assert err.kind == "duplicate_id"
    msg = str(err)
    assert "policies/main.polang" in msg and "policies/other.polang" in msg
    # a template may not reuse a policy's id either
    err = rejected(make_store({"templates/t.polang": TEMPLATE.replace('"share"', '"owner-view"')}))
    assert err.kind == "duplicate_id"


def test_missing_id_gives_the_line(make_store: MakeStore) -> None:
    text = (
        '@id("ok") permit (principal, action, resource);\n\npermit (principal, action, resource);\n'
    )
    err = rejected(make_store({"policies/x.polang": text}))
    assert (err.kind, err.file, err.problems[0].location) == (
        "missing_id",
        "policies/x.polang",
        "3:1",
    )


def test_template_links(make_store: MakeStore) -> None:
    links = [
        {
            "template_id": "share",
            "link_id": "share-d1-bob",
            "principal": {"type": "App::User", "id": "bob"},
            "resource": {"type": "App::Doc", "id": "d1"},
        },
        {
            "template_id": "share",
            "link_id": "share-d2-ann",
            "principal": 'App::User::"ann"',
            "resource": {"__entity": {"type": "App::Doc", "id": "d2"}},
        },
    ]
    root = make_store({"templates/links.json": json.dumps(links)})
    store = PolicyStoreSource.directory(root).load()
    assert set(store.links) == {"share-d1-bob", "share-d2-ann"}
    link = store.links["share-d1-bob"]
    assert (link.template_id, link.principal, link.resource) == (
        "share",
        EntityUID("App::User", "bob"),
        EntityUID("App::Doc", "d1"),
    )
    linked = store.linked_policies["share-d2-ann"]
    assert linked.policy_id == "share-d2-ann"
    assert not linked.is_template
    assert linked.principal.entity == EntityUID("App::User", "ann")
    assert set(store.all_policies()) == {"owner-view", "share-d1-bob", "share-d2-ann"}
    assert store.summary()["template_links"] == 2


@pytest.mark.parametrize(
    ("link", "location"),
    [
        (
            {
                "template_id": "share",
                "link_id": "l",
                "principal": "nonsense",
                "resource": 'App::Doc::"d"',
            },
            "$[0].principal",
        ),
        (
            {
                "template_id": "share",
                "link_id": "l",
                "principal": {"type": "App::User"},
                "resource": 'App::Doc::"d"',
            },
            "$[0].principal",
        ),
        (
            {"template_id": "share", "principal": 'App::User::"u"', "resource": 'App::Doc::"d"'},
            "$[0].link_id",
        ),
    ],
)
def test_template_link_field_rules(
    make_store: MakeStore, link: dict[str, object], location: str
) -> None:
    err = rejected(make_store({"templates/links.json": json.dumps([link])}))
    assert err.problems[0].location == location
    assert err.file == "templates/links.json"


def test_an_unknown_link_field_warns_and_is_an_error_when_strict(make_store: MakeStore) -> None:
    link = {
        "template_id": "share",
        "link_id": "l",
        "principal": 'App::User::"u"',
        "resource": 'App::Doc::"d"',
        "context": {},
    }
    root = make_store({"templates/links.json": json.dumps([link])})
    store = PolicyStoreSource.directory(root).load()
    assert set(store.links) == {"l"}
    [w] = store.warnings
    assert (w.kind, w.file, w.location) == ("unknown_field", "templates/links.json", "$[0].context")
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.directory(root).load(strict=True)
    assert e.value.problems[0].location == "$[0].context"


def test_entity_files_may_split_entities(make_store: MakeStore) -> None:
    more = [{"uid": {"type": "App::User", "id": "bob"}, "attrs": {"name": "Bob"}}]
    store = PolicyStoreSource.directory(make_store({"entities/more.json": json.dumps(more)})).load()
    assert EntityUID("App::User", "bob") in store.default_entities
    assert len(store.default_entities) == 3


def test_issuers_may_be_split_across_files(make_store: MakeStore) -> None:
    other = {
        "other": {
            "name": "Other",
            "openid_configuration_endpoint": "https://other.example/.well-known/openid-configuration",
        }
    }
    root = make_store({"trusted-issuers/other.json": json.dumps(other)})
    store = PolicyStoreSource.directory(root).load()
    assert set(store.trusted_issuers) == {"idp", "other"}
    assert store.trusted_issuers["other"].token_metadata == {}


def test_not_a_directory(tmp_path: Path) -> None:
    err = rejected(tmp_path / "missing")
    assert err.kind == "source"


def test_a_bom_is_tolerated(make_store: MakeStore) -> None:
    meta = "\ufeff" + json.dumps(METADATA)
    assert PolicyStoreSource.directory(make_store({"metadata.json": meta.encode()})).load().id


def test_digest_follows_content(make_store: MakeStore) -> None:
    a = PolicyStoreSource.directory(make_store()).load()
    b = PolicyStoreSource.directory(make_store()).load()
    c = PolicyStoreSource.directory(make_store({"policies/x.polang": "// nothing\n"})).load()
    assert a.digest == b.digest != c.digest


def test_store_digest_is_sha256_whichever_implementation_computes_it() -> None:
    """store_digest takes SHA-256 from CPython's own module when there is one (start-up
    time: hashlib loads OpenSSL); the digest is hashlib's all the same."""
    import hashlib

    from polang.store import layout

    files = {"b.polang": b"permit (principal, action, resource);", "a.json": b"{}"}
    inner = b"".join(n.encode() + b"\0" + hashlib.sha256(files[n]).digest() for n in sorted(files))
    assert layout.store_digest(files) == hashlib.sha256(inner).hexdigest()
    assert layout._sha256()(b"x").hexdigest() == hashlib.sha256(b"x").hexdigest()
