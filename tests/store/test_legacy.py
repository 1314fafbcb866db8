"""The legacy single-file store: wrapper and flat forms, every encoding, every field rule."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from polang._record import replace
from polang.config import Config
from polang.language.schema import parse_schema
from polang.language.values import EntityUID
from polang.store import PolicyStore, PolicyStoreLoadError, PolicyStoreSource

from .storekit import (
    ENTITIES,
    POLICY,
    SCHEMA,
    TEMPLATE,
    b64,
    legacy_doc,
    legacy_record,
    problem_of,
)


def load_json(
    doc: Any, tmp_path: Path, config: Config | None = None, *, strict: bool = False
) -> PolicyStore:
    path = tmp_path / "store.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return PolicyStoreSource.from_path(path).load(config, strict=strict)


def load_yaml(text: str, tmp_path: Path, config: Config | None = None) -> PolicyStore:
    path = tmp_path / "store.yaml"
    path.write_text(text)
    return PolicyStoreSource.from_path(path).load(config)


def rejected(
    doc: Any, tmp_path: Path, config: Config | None = None, *, strict: bool = False
) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        load_json(doc, tmp_path, config, strict=strict)
    return e.value


def test_wrapper_with_one_store(tmp_path: Path) -> None:
    store = load_json(legacy_doc(), tmp_path)
    assert store.id == "app-store"
    assert store.name == "App store"
    assert store.description == "test store"
    assert store.polang_version == "4.0.0"
    assert set(store.policies) == {"owner-view"}
    assert set(store.templates) == {"share"}
    assert store.schema == parse_schema(SCHEMA)
    assert {str(e.uid) for e in store.default_entities} == {
        'App::Group::"staff"',
        'App::User::"alice"',
    }
    assert set(store.trusted_issuers) == {"idp"}
    assert store.policy_origins["owner-view"].startswith("store.json $.policy_stores")


def test_policy_store_id_selects_one_of_several(tmp_path: Path) -> None:
    doc = {
        "polang_version": "v4.0.0",
        "policy_stores": {
            "first": legacy_record(name="First"),
            "second": legacy_record(name="Second", policies={}),
        },
    }
    store = load_json(doc, tmp_path, Config(policy_store_id="second"))
    assert (store.id, store.name, store.policies) == ("second", "Second", {})
    err = rejected(doc, tmp_path)
    assert err.kind == "store_selection"
    assert "ENGINE_POLICY_STORE_ID" in str(err)
    assert "first, second" in str(err)


def test_flat_form(tmp_path: Path) -> None:
    rec = legacy_record(name=None)
    rec["polang_version"] = "v4.1.0"
    store = load_json(rec, tmp_path)
    assert store.id == "default"
    assert store.name == "default"
    assert store.polang_version == "4.1.0"
    named = load_json(rec, tmp_path, Config(policy_store_id="mine"))
    assert named.id == "mine"


def test_policy_store_version_is_an_alias_of_version(tmp_path: Path) -> None:
    assert load_json(legacy_doc(policy_store_version="2.0.1"), tmp_path).version == "2.0.1"
    assert load_json(legacy_doc(version="3.0.0"), tmp_path).version == "3.0.0"
    err = rejected(legacy_doc(version="1.0.0", policy_store_version="1.0.0"), tmp_path)
    assert err.kind == "invalid_field"


def test_polang_version_form(tmp_path: Path) -> None:
    doc = legacy_doc()
    doc["polang_version"] = "4.0"
    err = rejected(doc, tmp_path)
    assert (err.kind, err.problems[0].location) == ("invalid_field", "$.polang_version")
    doc["polang_version"] = "4.2.0"  # the v is optional
    assert load_json(doc, tmp_path).polang_version == "4.2.0"


# ---------------------------------------------------------------- schema forms


def test_schema_string_form_is_base64_json(tmp_path: Path) -> None:
    schema_json = parse_schema(SCHEMA).to_json()
    store = load_json(legacy_doc(schema=b64(json.dumps(schema_json))), tmp_path)
    assert store.schema_format == "polang-json"
    assert store.schema == parse_schema(SCHEMA)


@pytest.mark.parametrize(
    ("encoding", "content_type"),
    [("none", "polang"), ("base64", "polang"), ("none", "polang-json"), ("base64", "polang-json")],
)
def test_schema_object_forms(tmp_path: Path, encoding: str, content_type: str) -> None:
    text = SCHEMA if content_type == "polang" else json.dumps(parse_schema(SCHEMA).to_json())
    body = b64(text) if encoding == "base64" else text
    schema = {"encoding": encoding, "content_type": content_type, "body": body}
    store = load_json(legacy_doc(schema=schema), tmp_path)
    assert store.schema_format == content_type
    assert store.schema == parse_schema(SCHEMA)
    assert store.schema_text == text


@pytest.mark.parametrize("missing", ["encoding", "content_type", "body"])
def test_schema_object_form_fields_are_required(tmp_path: Path, missing: str) -> None:
    schema = {"encoding": "none", "content_type": "polang", "body": SCHEMA}
    del schema[missing]
    err = rejected(legacy_doc(schema=schema), tmp_path)
    assert err.kind == "missing_field"
    assert err.problems[0].location == f'$.policy_stores["app-store"].schema.{missing}'


def test_schema_errors_keep_their_position(tmp_path: Path) -> None:
    bad = {"encoding": "none", "content_type": "polang", "body": "namespace App {\n  entity ;\n}"}
    err = rejected(legacy_doc(schema=bad), tmp_path)
    p = problem_of_kind(err, "schema")
    assert p.file == "store.json"
    assert p.location.startswith('$.policy_stores["app-store"].schema (text 2:')
    bad_json = b64('{"App": ')
    err = rejected(legacy_doc(schema=bad_json), tmp_path)
    assert err.kind == "json_syntax"
    assert "decoded text" in err.problems[0].message


def problem_of_kind(err: PolicyStoreLoadError, kind: str) -> Any:
    for p in err.problems:
        if p.kind == kind:
            return p
    raise AssertionError(str(err))


# ---------------------------------------------------------------- policy records


def test_policy_content_forms_and_ids(tmp_path: Path) -> None:
    plain = 'permit (principal, action == App::Action::"edit", resource);'
    policies = {
        "as-string": {"policy_content": b64(plain)},
        "as-none": {
            "policy_content": {"encoding": "none", "content_type": "polang", "body": plain}
        },
        "as-base64": {
            "policy_content": {"encoding": "base64", "content_type": "polang", "body": b64(plain)}
        },
        "share": {"policy_content": b64(TEMPLATE)},
    }
    store = load_json(legacy_doc(policies=policies), tmp_path)
    assert set(store.policies) == {"as-string", "as-none", "as-base64"}
    assert set(store.templates) == {"share"}
    # the record's key becomes the @id of a policy that has none
    for pid, policy in store.all_policies().items():
        assert policy.policy_id == pid
    # the three encodings give the same policy (ids aside)
    bare = {pid: replace(p, annotations=()) for pid, p in store.policies.items()}
    assert bare["as-string"] == bare["as-none"] == bare["as-base64"]


def test_policy_record_fields(tmp_path: Path) -> None:
    rec = {
        "polang_version": "v4.0.0",
        "name": "n",
        "description": "",
        "creation_date": "2024-12-31T23:59:59.123456",
        "policy_content": b64(POLICY),
    }
    assert load_json(legacy_doc(policies={"owner-view": rec}), tmp_path).policies
    for key, value, kind in [
        ("creation_date", "2024-12-31 23:59:59", "invalid_field"),
        ("creation_date", "2024-13-01T00:00:00.0", "invalid_field"),
        ("polang_version", "4", "invalid_field"),
        ("name", 3, "invalid_field"),
        ("author", "me", "unknown_field"),
    ]:
        doc = legacy_doc(policies={"owner-view": {**rec, key: value}})
        err = rejected(doc, tmp_path, strict=True)
        assert err.kind == kind, str(err)
        assert (
            err.problems[0].location == f'$.policy_stores["app-store"].policies["owner-view"].{key}'
        )
    err = rejected(legacy_doc(policies={"owner-view": {"name": "x"}}), tmp_path)
    assert err.kind == "missing_field"


def test_policy_errors_name_the_record_and_the_text_position(tmp_path: Path) -> None:
    err = rejected(
        legacy_doc(policies={"p": {"policy_content": b64("permit(\n  principal,")}}), tmp_path
    )
    p = err.problems[0]
    assert (p.kind, p.file) == ("policy_syntax", "store.json")
    assert p.location is not None
    assert p.location.startswith('$.policy_stores["app-store"].policies.p.policy_content (text 2:')


def test_duplicate_ids_are_impossible_across_records_but_checked_with_links(
    tmp_path: Path,
) -> None:
    # keys of one object are unique; the JSON reader refuses duplicate keys
    text = json.dumps(legacy_doc()).replace(
        '"share": {', '"owner-view": {"policy_content": "x"}, "share": {', 1
    )
    err = rejected(text, tmp_path)
    assert err.kind == "json_syntax"
    assert "duplicate key 'owner-view'" in str(err)


def test_base64_variants(tmp_path: Path) -> None:
    wrapped = base64.encodebytes(POLICY.encode()).decode()  # lines of 76 characters
    assert "\n" in wrapped
    urlsafe = base64.urlsafe_b64encode(POLICY.encode()).decode().rstrip("=")
    for content in (wrapped, urlsafe):
        store = load_json(
            legacy_doc(policies={"owner-view": {"policy_content": content}}), tmp_path
        )
        assert set(store.policies) == {"owner-view"}
    latin1 = base64.b64encode("café".encode("latin-1")).decode()
    err = rejected(legacy_doc(policies={"x": {"policy_content": latin1}}), tmp_path)
    assert err.kind == "encoding"


# ---------------------------------------------------------------- default entities


def test_default_entities_in_both_forms(tmp_path: Path) -> None:
    legacy_form = {"entity_type": "App::User", "entity_id": "bob", "name": "Bob"}
    entities = {
        "staff": b64(json.dumps(ENTITIES[0])),
        "bob": b64(json.dumps(legacy_form)),
        "alice": ENTITIES[1],  # already decoded: accepted too
    }
    store = load_json(legacy_doc(default_entities=entities), tmp_path)
    bob = store.default_entities.get(EntityUID("App::User", "bob"))
    assert bob is not None and bob.attrs == {"name": "Bob"}
    alice = store.default_entities.get(EntityUID("App::User", "alice"))
    assert alice is not None and alice.parents == {EntityUID("App::Group", "staff")}


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (42, "invalid_field"),
        (b64("[1, 2]"), "entity"),
        (b64(json.dumps({"uid": {"type": "App::User", "id": "z"}, "attrs": {}})), "entity"),
        (b64(json.dumps({"entity_type": "App::Nope", "entity_id": "z"})), "entity"),
    ],
)
def test_default_entity_rules(tmp_path: Path, value: Any, kind: str) -> None:
    err = rejected(legacy_doc(default_entities={"z": value}), tmp_path)
    assert err.kind == kind, str(err)
    assert err.problems[0].location is not None
    assert err.problems[0].location.startswith('$.policy_stores["app-store"].default_entities.z')


def test_default_entity_limit(tmp_path: Path) -> None:
    config = Config(max_default_entities=1)
    err = rejected(legacy_doc(), tmp_path, config)
    assert err.kind == "limit"
    assert "ENGINE_MAX_DEFAULT_ENTITIES" in str(err)
    assert load_json(legacy_doc(), tmp_path, Config(max_default_entities=0)).default_entities


def test_base64_limit_is_off_at_zero(tmp_path: Path) -> None:
    big = POLICY + "\n// " + "x" * 5000 + "\n"
    doc = legacy_doc(policies={"owner-view": {"policy_content": b64(big)}})
    assert rejected(doc, tmp_path, Config(max_base64_size=1000)).kind == "limit"
    assert load_json(doc, tmp_path, Config(max_base64_size=0)).policies


# ---------------------------------------------------------------- file level


def test_tokens_metadata_anywhere_names_token_metadata(tmp_path: Path) -> None:
    err = rejected(legacy_doc(tokens_metadata={}), tmp_path)
    assert err.kind == "deprecated_field"
    assert "'token_metadata'" in str(err)
    doc = {**legacy_doc(), "tokens_metadata": {}}
    err = rejected(doc, tmp_path)
    assert (err.kind, err.problems[0].location) == ("deprecated_field", "$.tokens_metadata")
    flat = {**legacy_record(), "tokens_metadata": {}}
    assert rejected(flat, tmp_path).kind == "deprecated_field"


@pytest.mark.parametrize(
    ("doc", "kind"),
    [
        ("", "json_syntax"),
        ("[]", "invalid_field"),
        ('{"policy_stores": []}', "invalid_field"),
        ('{"policy_stores": {}}', "store_selection"),
        ('{"policy_stores": {"a": 1}}', "invalid_field"),
        ('{"policy_stores": {"a": {}}, "extra": 1}', "unknown_field"),
        ('{"schema": "x", "policies": {}, "x": NaN}', "json_syntax"),
    ],
)
def test_file_level_rules(tmp_path: Path, doc: str, kind: str) -> None:
    err = rejected(doc, tmp_path, strict=True)
    assert kind in err.kinds, str(err)
    assert all(p.file == "store.json" for p in err.problems)


def test_yaml_keeps_dates_as_text_and_refuses_duplicate_keys(tmp_path: Path) -> None:
    doc = legacy_doc()
    text = yaml.safe_dump(doc).replace(
        "creation_date: '2025-01-01T10:00:00.000000'", "creation_date: 2025-01-01T10:00:00.000000"
    )
    assert "creation_date: 2025-01-01T10" in text
    assert load_yaml(text, tmp_path).id == "app-store"
    dup = "policy_stores:\n  a: {}\n  a: {}\n"
    with pytest.raises(PolicyStoreLoadError) as e:
        load_yaml(dup, tmp_path)
    assert e.value.kind == "yaml_syntax"
    assert e.value.problems[0].location == "3:3"
    with pytest.raises(PolicyStoreLoadError) as e:
        load_yaml("policy_stores: [\n", tmp_path)
    assert e.value.kind == "yaml_syntax"


def test_inline_store_problems_name_the_property() -> None:
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.inline('{"policy_stores": {}}').load()
    assert e.value.file == "ENGINE_POLICY_STORE_LOCAL"


def test_problem_helper(tmp_path: Path) -> None:
    with pytest.raises(PolicyStoreLoadError) as e:
        load_json(legacy_doc(schema=None), tmp_path)
    assert problem_of(e, "missing_field").file == "store.json"
