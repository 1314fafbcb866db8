"""Stores in Cedarling's shapes (renamed ``cedar`` -> ``polang``) load as they are (issue 12).

The fixtures are written here, modelled on how Cedarling's published test stores are laid
out: ``metadata.json`` without timestamps and with an empty description, one issuer record
per ``trusted-issuers/*.json`` file (``configuration_endpoint``, an optional ``id``), issuer
records still carrying the old ``access_tokens`` / ``id_tokens`` fields, a manifest of git
blob hashes (``sha1:``) that lists itself, policy records with ``polang_version: ""``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from polang.config import Config
from polang.store import PolicyStoreLoadError, PolicyStoreSource
from polang.store.layout import git_blob_sha1, is_single_issuer_record
from polang.store.tools import validate_store
from store.storekit import b64, write_tree, zip_bytes

STORE_ID = "a1b2c3d4e5f60718293a4b5c6d7e8f9001122334"

SCHEMA = """namespace Jans {
    type Url = {"host": String, "path": String, "protocol": String};
    entity TrustedIssuer = {"issuer_entity_id": Url};
    entity Role;
    entity User in [Role] = {"sub"?: String, "email"?: String};
    entity Workload = {"client_id"?: String};
    entity Access_token = {"aud"?: String, "exp"?: Long, "iat"?: Long, "jti"?: String};
    entity Id_token = {"aud"?: String, "exp"?: Long, "iat"?: Long, "jti"?: String};
    entity Application = {"name": String};
    action "Read" appliesTo {
        principal: [User, Workload],
        resource: [Application],
        context: {}
    };
}
"""

POLICY = """@id("admins-read")
permit (
    principal in Jans::Role::"admin",
    action == Jans::Action::"Read",
    resource is Jans::Application
);
"""

METADATA: dict[str, Any] = {
    "polang_version": "4.0.0",
    "policy_store": {
        "id": STORE_ID,
        "name": "Jans demo store",
        "description": "",
        "version": "1.0.0",
    },
}

JANS_ISSUER: dict[str, Any] = {
    "id": "7d2c4b8f0e1a",
    "name": "Jans",
    "description": "Jans OpenID Provider",
    "configuration_endpoint": "https://jans.example.test/.well-known/openid-configuration",
    "token_metadata": {
        "access_token": {
            "trusted": True,
            "entity_type_name": "Jans::Access_token",
            "token_id": "jti",
            "user_id": "sub",
            "role_mapping": "role",
            "required_claims": ["exp", "iss"],
        },
        "id_token": {"trusted": False, "entity_type_name": "Jans::Id_token"},
    },
}

# an older record: no id (the file name gives it), the old per-token fields still present
PARTNER_ISSUER: dict[str, Any] = {
    "name": "Partner",
    "description": "a partner's provider",
    "openid_configuration_endpoint": "https://idp.partner.test/.well-known/openid-configuration",
    "access_tokens": {"trusted": True},
    "id_tokens": {"trusted": True, "principal_identifier": "sub"},
    "token_metadata": {"access_token": {"entity_type_name": "Jans::Access_token"}},
}


def cedarling_files(**changes: Any) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        "metadata.json": json.dumps(METADATA, indent=2),
        "schema.polangschema": SCHEMA,
        "policies/admins-read.polang": POLICY,
        "trusted-issuers/jans.json": json.dumps(JANS_ISSUER, indent=2),
        "trusted-issuers/partner.json": json.dumps(PARTNER_ISSUER, indent=2),
        "entities/roles.json": json.dumps(
            [{"uid": {"type": "Jans::Role", "id": "admin"}, "attrs": {}, "parents": []}]
        ),
    }
    for name, content in changes.items():
        name = name.replace("__", "/")
        if content is None:
            files.pop(name, None)
        else:
            files[name] = content
    return files


def sha1_manifest(files: dict[str, str | bytes], *, list_itself: bool = True) -> str:
    """A manifest as Cedarling's tools write it: git blob hashes, listing itself too."""
    entries: dict[str, Any] = {}
    for name, content in sorted(files.items()):
        data = content.encode() if isinstance(content, str) else content
        entries[name] = {"size": len(data), "checksum": "sha1:" + git_blob_sha1(data)}
    if list_itself:
        entries["manifest.json"] = {"size": 0, "checksum": "sha1:" + "0" * 40}
    return json.dumps(
        {"policy_store_id": STORE_ID, "generated_date": "2025-06-01T12:00:00Z", "files": entries}
    )


def with_manifest(files: dict[str, str | bytes]) -> dict[str, str | bytes]:
    return {**files, "manifest.json": sha1_manifest(files)}


def load_dir(tmp_path: Path, files: dict[str, str | bytes], **kw: Any) -> Any:
    root = write_tree(tmp_path / "store", files)
    return PolicyStoreSource.directory(root).load(**kw)


def rejected_dir(tmp_path: Path, files: dict[str, str | bytes], **kw: Any) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        load_dir(tmp_path, files, **kw)
    return e.value


# ---------------------------------------------------------------- the whole store


def test_a_cedarling_directory_store_loads(tmp_path: Path) -> None:
    store = load_dir(tmp_path, with_manifest(cedarling_files()))
    assert store.id == STORE_ID
    assert store.description == ""
    assert store.created_date is None and store.updated_date is None
    assert set(store.trusted_issuers) == {"7d2c4b8f0e1a", "partner"}
    jans = store.trusted_issuers["7d2c4b8f0e1a"]
    assert jans.name == "Jans"
    assert jans.openid_configuration_endpoint == JANS_ISSUER["configuration_endpoint"]
    assert jans.token_metadata["access_token"].required_claims == ("exp", "iss")
    assert jans.token_metadata["id_token"].trusted is False
    partner = store.trusted_issuers["partner"]
    assert partner.openid_configuration_endpoint == PARTNER_ISSUER["openid_configuration_endpoint"]
    # what polang does not use is reported, not silently dropped
    warned = {(w.kind, w.file, w.location) for w in store.warnings}
    assert ("unknown_field", "trusted-issuers/partner.json", "$.access_tokens") in warned
    assert ("unknown_field", "trusted-issuers/partner.json", "$.id_tokens") in warned
    sha1 = [w for w in store.warnings if w.kind == "manifest"]
    assert len(sha1) == 1 and "SHA-1 is weak" in sha1[0].message
    assert store.summary()["warnings"] == len(store.warnings) == 3


def test_the_same_store_as_a_parc_archive_loads_the_same(tmp_path: Path) -> None:
    files = with_manifest(cedarling_files())
    from_dir = load_dir(tmp_path, files)
    path = tmp_path / "store.parc"
    path.write_bytes(zip_bytes(files))
    from_zip = PolicyStoreSource.from_path(path).load()
    assert from_zip.trusted_issuers == from_dir.trusted_issuers
    assert from_zip.policies == from_dir.policies
    assert [str(w) for w in from_zip.warnings] == [str(w) for w in from_dir.warnings]


def test_strict_loading_turns_unknown_fields_into_errors(tmp_path: Path) -> None:
    err = rejected_dir(tmp_path, cedarling_files(), strict=True)
    assert sorted(p.location or "" for p in err.problems) == ["$.access_tokens", "$.id_tokens"]
    assert err.kinds == ["unknown_field", "unknown_field"]


def test_validate_reports_warnings_and_strict_makes_them_problems(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "store", with_manifest(cedarling_files()))
    report = validate_store(root)
    assert report["valid"] is True
    assert {w["location"] for w in report["warnings"]} >= {"$.access_tokens", "$.id_tokens"}
    strict = validate_store(root, strict=True)
    assert strict["valid"] is False
    assert {p["kind"] for p in strict["problems"]} == {"unknown_field"}


def test_an_unknown_field_warning_keeps_its_did_you_mean(tmp_path: Path) -> None:
    rec = copy.deepcopy(JANS_ISSUER)
    rec["token_metadata"]["access_token"]["entity_type"] = "Jans::Access_token"
    store = load_dir(tmp_path, cedarling_files(**{"trusted-issuers__jans.json": json.dumps(rec)}))
    [w] = [w for w in store.warnings if w.file == "trusted-issuers/jans.json"]
    assert w.location == "$.token_metadata.access_token.entity_type"
    assert "did you mean 'entity_type_name'?" in w.message
    assert "(ignored)" in w.message


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("required_claim", "required_claims"),
        ("expected_audiance", "expected_audience"),
        ("trustd", "trusted"),
    ],
)
def test_a_misspelt_field_is_an_error_even_when_unknown_fields_warn(
    tmp_path: Path, key: str, meant: str
) -> None:
    # A misspelling would silently leave a check off (no audience check, no required claims).
    rec = copy.deepcopy(JANS_ISSUER)
    meta = rec["token_metadata"]["access_token"]
    meta.pop(meant, None)
    meta[key] = ["exp"] if key != "trustd" else False
    err = rejected_dir(tmp_path, cedarling_files(**{"trusted-issuers__jans.json": json.dumps(rec)}))
    [p] = [p for p in err.problems if p.kind == "unknown_field"]
    assert p.location == f"$.token_metadata.access_token.{key}"
    assert f"misspelling of {meant!r}" in p.message


def test_a_renamed_field_stays_an_error(tmp_path: Path) -> None:
    rec = copy.deepcopy(JANS_ISSUER)
    rec["tokens_metadata"] = rec.pop("token_metadata")
    err = rejected_dir(tmp_path, cedarling_files(**{"trusted-issuers__jans.json": json.dumps(rec)}))
    p = next(p for p in err.problems if p.kind == "deprecated_field")
    assert "renamed 'token_metadata'" in p.message


# ---------------------------------------------------------------- metadata.json


@pytest.mark.parametrize(
    "dates",
    [{}, {"created_date": "2025-01-01T00:00:00Z"}, {"updated_date": "2025-01-02T00:00:00Z"}],
)
def test_metadata_timestamps_are_optional(tmp_path: Path, dates: dict[str, str]) -> None:
    meta = copy.deepcopy(METADATA)
    meta["policy_store"].update(dates)
    store = load_dir(tmp_path, cedarling_files(**{"metadata.json": json.dumps(meta)}))
    assert (store.created_date is None) == ("created_date" not in dates)
    assert (store.updated_date is None) == ("updated_date" not in dates)


def test_a_metadata_timestamp_that_is_given_must_still_be_valid(tmp_path: Path) -> None:
    meta = copy.deepcopy(METADATA)
    meta["policy_store"]["updated_date"] = "yesterday"
    err = rejected_dir(tmp_path, cedarling_files(**{"metadata.json": json.dumps(meta)}))
    assert (err.kind, err.problems[0].location) == ("invalid_field", "$.policy_store.updated_date")


# ---------------------------------------------------------------- issuer files


def test_issuer_file_forms_are_told_apart_unambiguously() -> None:
    assert is_single_issuer_record({"name": "Jans"})
    assert is_single_issuer_record({"configuration_endpoint": "https://x/"})
    assert is_single_issuer_record({"openid_configuration_endpoint": "https://x/"})
    # a map's values are objects, even under an issuer id that looks like a field name
    assert not is_single_issuer_record({"name": {"name": "Jans"}})
    assert not is_single_issuer_record({"jans": JANS_ISSUER})
    assert not is_single_issuer_record({})


def test_a_map_under_an_id_called_name_is_still_a_map(tmp_path: Path) -> None:
    rec = {k: v for k, v in JANS_ISSUER.items() if k != "id"}
    files = cedarling_files(**{"trusted-issuers__jans.json": json.dumps({"name": rec})})
    store = load_dir(tmp_path, files)
    assert store.trusted_issuers["name"].name == "Jans"


def test_the_map_form_and_the_record_form_mix(tmp_path: Path) -> None:
    rec = {k: v for k, v in JANS_ISSUER.items() if k != "id"}
    files = cedarling_files(**{"trusted-issuers__more.json": json.dumps({"other": rec})})
    assert set(load_dir(tmp_path, files).trusted_issuers) == {"7d2c4b8f0e1a", "partner", "other"}


def test_a_record_id_comes_from_the_id_field_else_the_file_name(tmp_path: Path) -> None:
    rec = {**JANS_ISSUER, "id": "  "}  # a blank id counts as absent, like a missing one
    nested = cedarling_files(
        **{"trusted-issuers__jans.json": None, "trusted-issuers__idps__main.json": json.dumps(rec)}
    )
    err = rejected_dir(tmp_path, nested)  # the blank id is still a bad field value
    assert (err.kind, err.problems[0].location) == ("invalid_field", "$.id")
    rec.pop("id")
    nested["trusted-issuers/idps/main.json"] = json.dumps(rec)
    store = load_dir(tmp_path / "b", nested)
    assert set(store.trusted_issuers) == {"main", "partner"}


def test_an_issuer_id_given_twice_names_both_files(tmp_path: Path) -> None:
    rec = {k: v for k, v in JANS_ISSUER.items() if k != "id"}
    files = cedarling_files(**{"trusted-issuers__other.json": json.dumps({"7d2c4b8f0e1a": rec})})
    err = rejected_dir(tmp_path, files)
    [p] = err.problems
    assert p.kind == "issuer"
    assert "defined twice" in p.message and "trusted-issuers/jans.json" in p.message


def test_an_id_field_in_a_map_record_must_match_its_key(tmp_path: Path) -> None:
    files = cedarling_files(**{"trusted-issuers__jans.json": json.dumps({"other": JANS_ISSUER})})
    err = rejected_dir(tmp_path, files)
    assert (err.kind, err.problems[0].location) == ("issuer", "$.other.id")


@pytest.mark.parametrize(
    ("endpoints", "kind", "location"),
    [
        ({"configuration_endpoint": "https://a.test/"}, None, None),
        ({"openid_configuration_endpoint": "https://a.test/"}, None, None),
        (
            {
                "configuration_endpoint": "https://a.test/",
                "openid_configuration_endpoint": "https://a.test/",
            },
            None,
            None,
        ),
        (
            {
                "configuration_endpoint": "https://a.test/",
                "openid_configuration_endpoint": "https://b.test/",
            },
            "issuer",
            "$.configuration_endpoint",
        ),
        ({}, "missing_field", "$.openid_configuration_endpoint"),
        ({"configuration_endpoint": "http://a.test/"}, "issuer", "$.configuration_endpoint"),
    ],
)
def test_configuration_endpoint_is_an_alias(
    tmp_path: Path, endpoints: dict[str, str], kind: str | None, location: str | None
) -> None:
    rec = {"name": "Jans", **endpoints}
    files = cedarling_files(**{"trusted-issuers__jans.json": json.dumps(rec)})
    if kind is None:
        store = load_dir(tmp_path, files)
        assert store.trusted_issuers["jans"].openid_configuration_endpoint == "https://a.test/"
    else:
        err = rejected_dir(tmp_path, files)
        assert (err.kind, err.problems[0].location) == (kind, location), str(err)


# ---------------------------------------------------------------- manifest


def test_a_sha1_manifest_that_does_not_match_is_refused(tmp_path: Path) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files))
    manifest["files"]["policies/admins-read.polang"]["checksum"] = "sha1:" + "1" * 40
    err = rejected_dir(tmp_path, {**files, "manifest.json": json.dumps(manifest)})
    [p] = err.problems
    assert (p.kind, p.file) == ("manifest", "policies/admins-read.polang")
    assert "SHA-1 (git blob) checksum" in p.message


def test_a_plain_sha1_is_not_a_git_blob_hash_and_the_message_says_so(tmp_path: Path) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files))
    plain = hashlib.sha1(POLICY.encode(), usedforsecurity=False).hexdigest()
    manifest["files"]["policies/admins-read.polang"]["checksum"] = "sha1:" + plain
    err = rejected_dir(tmp_path, {**files, "manifest.json": json.dumps(manifest)})
    assert "git blob hashes" in err.problems[0].message


def test_git_blob_hash_is_the_one_git_computes() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


@pytest.mark.parametrize("checksum", ["md5:" + "0" * 32, "sha1:xyz", "sha512:" + "0" * 128, 7])
def test_unknown_checksum_forms_are_refused_unless_checksums_are_off(
    tmp_path: Path, checksum: object
) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files))
    manifest["files"]["schema.polangschema"]["checksum"] = checksum
    files["manifest.json"] = json.dumps(manifest)
    err = rejected_dir(tmp_path, files)
    assert (err.kind, err.problems[0].location) == (
        "invalid_field",
        '$.files["schema.polangschema"].checksum',
    )
    off = Config(policy_store_validate_checksum=False)
    store = load_dir(tmp_path / "off", files, config=off)
    assert store.id == STORE_ID
    assert not [w for w in store.warnings if w.kind == "manifest"]  # nothing was verified


def test_with_checksums_off_a_missing_checksum_is_fine_but_sizes_still_count(
    tmp_path: Path,
) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files))
    del manifest["files"]["schema.polangschema"]["checksum"]
    files["manifest.json"] = json.dumps(manifest)
    off = Config(policy_store_validate_checksum=False)
    assert load_dir(tmp_path, files, config=off).id == STORE_ID
    manifest["files"]["schema.polangschema"]["size"] = 1
    files["manifest.json"] = json.dumps(manifest)
    err = rejected_dir(tmp_path / "b", files, config=off)
    assert (err.kind, err.file) == ("manifest", "schema.polangschema")


def test_a_manifest_entry_for_itself_is_skipped_whatever_it_says(tmp_path: Path) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files, list_itself=False))
    manifest["files"]["manifest.json"] = {"size": "?", "checksum": "md5:nonsense"}
    store = load_dir(tmp_path, {**files, "manifest.json": json.dumps(manifest)})
    assert store.id == STORE_ID


def test_a_sha256_manifest_gives_no_weak_hash_warning(tmp_path: Path) -> None:
    files = cedarling_files()
    manifest = json.loads(sha1_manifest(files))
    for name, entry in manifest["files"].items():
        if name != "manifest.json":
            content = files[name]
            data = content.encode() if isinstance(content, str) else content
            entry["checksum"] = "sha256:" + hashlib.sha256(data).hexdigest()
    store = load_dir(tmp_path, {**files, "manifest.json": json.dumps(manifest)})
    assert not [w for w in store.warnings if w.kind == "manifest"]


# ---------------------------------------------------------------- legacy YAML / JSON


def legacy_yaml_doc() -> dict[str, Any]:
    return {
        "polang_version": "v4.0.0",
        "policy_stores": {
            STORE_ID: {
                "name": "Jans demo store",
                "description": "",
                "policies": {
                    "f8b1b2c3": {
                        "description": "admins may read",
                        "creation_date": "2024-09-20T17:22:39.996050",
                        "polang_version": "",
                        "policy_content": b64(POLICY.replace('@id("admins-read")\n', "")),
                    }
                },
                "schema": {"encoding": "none", "content_type": "polang", "body": SCHEMA},
                "trusted_issuers": {
                    "7d2c4b8f0e1a": {k: v for k, v in JANS_ISSUER.items() if k != "id"},
                    "partner": PARTNER_ISSUER,
                },
            }
        },
    }


def test_a_cedarling_legacy_yaml_store_loads(tmp_path: Path) -> None:
    path = tmp_path / "store.yaml"
    path.write_text(yaml.safe_dump(legacy_yaml_doc(), sort_keys=False))
    store = PolicyStoreSource.from_path(path).load()
    assert set(store.policies) == {"f8b1b2c3"}
    assert set(store.trusted_issuers) == {"7d2c4b8f0e1a", "partner"}
    assert {w.location for w in store.warnings} == {
        f"$.policy_stores.{STORE_ID}.trusted_issuers.partner.access_tokens",
        f"$.policy_stores.{STORE_ID}.trusted_issuers.partner.id_tokens",
    }


@pytest.mark.parametrize("where", ["policy", "store", "wrapper"])
def test_an_empty_polang_version_is_absent(tmp_path: Path, where: str) -> None:
    doc = legacy_yaml_doc()
    rec = doc["policy_stores"][STORE_ID]
    {"policy": rec["policies"]["f8b1b2c3"], "store": rec, "wrapper": doc}[where][
        "polang_version"
    ] = ""
    path = tmp_path / "store.json"
    path.write_text(json.dumps(doc))
    store = PolicyStoreSource.from_path(path).load()
    assert store.polang_version == (None if where == "wrapper" else "4.0.0")
    doc["polang_version"] = "4"
    path.write_text(json.dumps(doc))
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.from_path(path).load()
    assert e.value.problems[0].location == "$.polang_version"


# ---------------------------------------------------------------- the system log


def test_the_engine_writes_store_warnings_to_the_system_log(tmp_path: Path) -> None:
    from polang.engine import Engine

    root = write_tree(tmp_path / "store", with_manifest(cedarling_files()))
    engine = Engine(Config(policy_store_local_fn=str(root), log_type="memory", log_level="WARN"))
    try:
        warned = [e["msg"] for e in engine.pop_logs() if e.get("level") == "WARN"]
    finally:
        engine.close()
    assert any("partner.json at $.access_tokens: unknown field" in m for m in warned), warned
    assert any("SHA-1 is weak" in m for m in warned), warned


# ---------------------------------------------------------------- the committed example


def test_the_cedarling_form_example_loads_like_the_directory_example() -> None:
    from store.storekit import EXAMPLES

    example = EXAMPLES / "cedarling-form"
    store = PolicyStoreSource.from_path(example).load()
    plain = PolicyStoreSource.from_path(EXAMPLES / "directory").load()
    assert (store.id, store.version, store.created_date) == (plain.id, plain.version, None)
    assert store.schema == plain.schema
    assert store.all_policies() == plain.all_policies()
    assert store.trusted_issuers == plain.trusted_issuers
    assert [w.kind for w in store.warnings] == ["manifest"]  # SHA-1 is weak
    # the manifest holds git blob hashes: what `git hash-object` prints for each file
    manifest = json.loads((example / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        if name != "manifest.json":
            data = (example / name).read_bytes()
            assert entry["checksum"] == "sha1:" + git_blob_sha1(data)


# ---------------------------------------------------------------- Cedarling's newer format


def _metadata(**top: Any) -> str:
    return json.dumps({**METADATA, **top})


@pytest.mark.parametrize("version", [0, 1, 2, 7])
def test_the_store_format_version_is_read(tmp_path: Path, version: int) -> None:
    """Cedarling's directory format (v1, v2) adds ``policy_store_spec_version``."""
    store = load_dir(
        tmp_path, cedarling_files(**{"metadata.json": _metadata(policy_store_spec_version=version)})
    )
    assert not [w for w in store.warnings if "policy_store_spec_version" in w.message]


@pytest.mark.parametrize("bad", ["2", True, -1, 2**32, 2**80, 2.0, [2], {"v": 2}, None])
def test_a_store_format_version_of_the_wrong_type_is_refused(tmp_path: Path, bad: Any) -> None:
    files = cedarling_files(**{"metadata.json": _metadata(policy_store_spec_version=bad)})
    if bad is None:  # null is absent
        load_dir(tmp_path, files)
        return
    err = rejected_dir(tmp_path, files)
    [p] = err.problems
    assert (p.kind, p.location) == ("invalid_field", "$.policy_store_spec_version")
    assert len(p.message) < 200


def test_a_store_format_version_with_5000_digits_is_refused_briefly(tmp_path: Path) -> None:
    text = _metadata(policy_store_spec_version=1).replace(
        '"policy_store_spec_version": 1', '"policy_store_spec_version": 1' + "0" * 5000
    )
    err = rejected_dir(tmp_path, cedarling_files(**{"metadata.json": text}))
    assert len(err.problems) == 1 and len(str(err)) < 2000


def test_a_misspelt_store_format_version_is_an_error(tmp_path: Path) -> None:
    files = cedarling_files(**{"metadata.json": _metadata(policy_store_spec_versoin=2)})
    err = rejected_dir(tmp_path, files)
    assert err.kinds == ["unknown_field"]
    assert "policy_store_spec_version" in err.problems[0].message


CUSTOM_ISSUER: dict[str, Any] = {
    "id": "devices",
    "tokens_mappings": {
        "Jans::Device_token": {"required": True, "required_claims": ["sub"]},
        "Jans::Sensor_token": {},
    },
}


def test_custom_issuers_load_with_a_warning_and_fail_strict_loading(tmp_path: Path) -> None:
    """``custom-issuers/*.json`` (Cedarling's non-JWT issuers, served by a token processor
    the application registers) are checked, reported, and not used."""
    files = cedarling_files(**{"custom-issuers__devices.json": json.dumps(CUSTOM_ISSUER)})
    store = load_dir(tmp_path, files)
    [w] = [w for w in store.warnings if w.file == "custom-issuers/devices.json"]
    assert w.kind == "issuer"
    assert "custom (non-JWT) token issuers are not supported" in w.message
    assert "Jans::Device_token, Jans::Sensor_token" in w.message
    err = rejected_dir(tmp_path / "strict", files, strict=True)
    assert "custom-issuers/devices.json" in [p.file for p in err.problems]
    # with a manifest the file must be listed like any other
    load_dir(tmp_path / "manifest", with_manifest(files))


def test_a_custom_issuer_id_comes_from_the_file_name(tmp_path: Path) -> None:
    rec = {k: v for k, v in CUSTOM_ISSUER.items() if k != "id"}
    store = load_dir(tmp_path, cedarling_files(**{"custom-issuers__Keys.json": json.dumps(rec)}))
    assert any("custom issuer 'Keys'" in w.message for w in store.warnings)


@pytest.mark.parametrize(
    ("record", "kind", "location", "words"),
    [
        ([], "invalid_field", "$", "an object with `tokens_mappings`"),
        ({"id": "x"}, "missing_field", "$.tokens_mappings", "required field"),
        ({"tokens_mappings": {}}, "invalid_field", "$.tokens_mappings", "declares no tokens"),
        ({"tokens_mappings": [1]}, "invalid_field", "$.tokens_mappings", "got an array"),
        (
            {"tokens_mappings": {"Device": {}}},
            "invalid_field",
            "$.tokens_mappings.Device",
            "not an entity type name",
        ),
        (
            {"tokens_mappings": {"A::Device\n": {}}},
            "invalid_field",
            '$.tokens_mappings["A::Device\\n"]',
            "not an entity type name",
        ),
        (
            {"tokens_mappings": {"A::B": {"requiredd": True}}},
            "unknown_field",
            '$.tokens_mappings["A::B"].requiredd',
            "'requiredd'",
        ),
        (
            {"tokens_mappings": {"A::B": {}}, "requireddd": 1},
            "unknown_field",
            "$.requireddd",
            "'requireddd'",
        ),
        (
            {"tokens_mappings": {"A::B": {"required": "yes"}}},
            "invalid_field",
            '$.tokens_mappings["A::B"].required',
            "true or false",
        ),
        (
            {"tokens_mappings": {"A::B": {"required_claims": "sub"}}},
            "invalid_field",
            '$.tokens_mappings["A::B"].required_claims',
            "array of strings",
        ),
        (
            {"tokens_mappings": {"A::B": 5}},
            "invalid_field",
            '$.tokens_mappings["A::B"]',
            "an object",
        ),
        ({"id": 7, "tokens_mappings": {"A::B": {}}}, "invalid_field", "$.id", "must be a string"),
    ],
)
def test_a_malformed_custom_issuer_is_refused(
    tmp_path: Path, record: Any, kind: str, location: str, words: str
) -> None:
    err = rejected_dir(tmp_path, cedarling_files(**{"custom-issuers__c.json": json.dumps(record)}))
    found = [(p.kind, p.location) for p in err.problems]
    assert (kind, location) in found, found
    assert any(words in p.message for p in err.problems)
    assert all(p.file == "custom-issuers/c.json" for p in err.problems)


def test_custom_issuers_hostile_shapes(tmp_path: Path) -> None:
    deep = "[" * 200 + "]" * 200
    err = rejected_dir(tmp_path / "deep", cedarling_files(**{"custom-issuers__d.json": deep}))
    assert err.kinds == ["limit"]
    huge_key = "A::" + "B" * 100_000
    rec = {"tokens_mappings": {huge_key: {"x": 1}}}
    err = rejected_dir(
        tmp_path / "big", cedarling_files(**{"custom-issuers__b.json": json.dumps(rec)})
    )
    assert all(len(p.message) <= 1000 and len(p.location or "") <= 1000 for p in err.problems)
    many = {"tokens_mappings": {f"A::T{i}": {} for i in range(5000)}}
    store = load_dir(
        tmp_path / "many", cedarling_files(**{"custom-issuers__m.json": json.dumps(many)})
    )
    [w] = [w for w in store.warnings if w.file == "custom-issuers/m.json"]
    assert "4995 more" in w.message and len(w.message) < 400
    twice = json.dumps({"id": "same", "tokens_mappings": {"A::B": {}}})
    err = rejected_dir(
        tmp_path / "twice",
        cedarling_files(**{"custom-issuers__a.json": twice, "custom-issuers__b.json": twice}),
    )
    assert (
        err.kinds == ["issuer"]
        and "defined twice (first in custom-issuers/a.json)" in err.problems[0].message
    )
    # a file outside *.json is still unexpected
    err = rejected_dir(tmp_path / "txt", cedarling_files(**{"custom-issuers__notes.txt": "x"}))
    assert err.kinds == ["unexpected_file"]
