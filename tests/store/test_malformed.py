"""Malformed stores: each breaks one rule and must fail with exactly that problem.

Every case starts from a valid store and changes one thing; the store must be rejected
with exactly one problem, of the expected kind, naming the expected file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from polang.config import Config
from polang.store import PolicyStoreLoadError, PolicyStoreSource
from polang.store.layout import build_manifest

from .storekit import (
    ENTITIES,
    ISSUER,
    METADATA,
    POLICY,
    SCHEMA,
    TEMPLATE,
    b64,
    legacy_doc,
    legacy_record,
    store_files,
    write_tree,
    zip_bytes,
)


@dataclass
class Case:
    kind: str
    file: str
    files: dict[str, Any] | None = None  # directory changes
    legacy: Any = None  # legacy JSON document (or text)
    archive: bytes | None = None
    manifest: bool = False  # add a correct manifest before `mutate_manifest`
    mutate_manifest: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    in_message: str = ""
    strict: bool = False  # unknown fields are errors only when loaded strictly


def meta(**store_changes: Any) -> str:
    m = copy.deepcopy(METADATA)
    for k, v in store_changes.items():
        if v is None:
            m["policy_store"].pop(k, None)
        else:
            m["policy_store"][k] = v
    return json.dumps(m)


def issuer(**changes: Any) -> str:
    rec = copy.deepcopy(ISSUER)
    rec.update(changes)
    return json.dumps({"idp": rec})


def manifest_files(files: dict[str, Any]) -> dict[str, bytes]:
    return {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}


def symlink_zip() -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, content in store_files().items():
            zf.writestr(rel, content)
        info = zipfile.ZipInfo("policies/link.polang")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def raw_zip(names: dict[str, str]) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, content in store_files().items():
            zf.writestr(rel, content)
        for name, content in names.items():
            info = zipfile.ZipInfo("x")
            info.filename = name  # bypass ZipInfo's own normalisation
            zf.writestr(info, content)
    return buf.getvalue()


def set_checksum(m: dict[str, Any]) -> None:
    m["files"]["policies/main.polang"]["checksum"] = "sha256:" + "0" * 64


def set_size(m: dict[str, Any]) -> None:
    m["files"]["policies/main.polang"]["size"] += 1


def set_id(m: dict[str, Any]) -> None:
    m["policy_store_id"] = "other-store"


def add_listed(m: dict[str, Any]) -> None:
    m["files"]["policies/gone.polang"] = {
        "size": 1,
        "checksum": "sha256:" + hashlib.sha256(b"x").hexdigest(),
    }


def drop_listed(m: dict[str, Any]) -> None:
    del m["files"]["entities/users.json"]


def bad_date(m: dict[str, Any]) -> None:
    m["generated_date"] = "yesterday"


LEGACY_FILE = "store.json"

CASES: dict[str, Case] = {
    # ---- layout
    "metadata missing": Case("missing_file", "metadata.json", files={"metadata.json": None}),
    "schema missing": Case("missing_file", "schema.polangschema", {"schema.polangschema": None}),
    "policies folder missing": Case(
        "missing_file",
        "policies/",
        archive=zip_bytes(
            {k: v for k, v in store_files().items() if not k.startswith("policies/")}
        ),
    ),
    "store nested in a folder": Case(
        "missing_file",
        "metadata.json",
        archive=zip_bytes({f"app/{k}": v for k, v in store_files().items()}),
        in_message="must be at the archive root",
    ),
    "unknown root file": Case("unexpected_file", "README.md", {"README.md": "hello"}),
    "wrong extension in policies": Case(
        "unexpected_file", "policies/notes.txt", {"policies/notes.txt": "x"}
    ),
    "cedar extension": Case("unexpected_file", "policies/a.cedar", {"policies/a.cedar": POLICY}),
    # ---- metadata.json
    "metadata not JSON": Case("json_syntax", "metadata.json", {"metadata.json": "{"}),
    "metadata duplicate key": Case(
        "json_syntax",
        "metadata.json",
        {"metadata.json": '{"polang_version": "4.0.0", "polang_version": "4.0.0"}'},
    ),
    "version not X.Y.Z": Case(
        "invalid_field", "metadata.json", {"metadata.json": meta(version="1.0")}
    ),
    "created_date not UTC": Case(
        "invalid_field",
        "metadata.json",
        {"metadata.json": meta(created_date="2025-01-01T00:00:00+02:00")},
    ),
    "store id missing": Case("missing_field", "metadata.json", {"metadata.json": meta(id=None)}),
    "unknown metadata field": Case(
        "unknown_field", "metadata.json", {"metadata.json": meta(owner="me")}, strict=True
    ),
    "polang_version with v": Case(
        "invalid_field",
        "metadata.json",
        {"metadata.json": json.dumps({**METADATA, "polang_version": "v4.0.0"})},
    ),
    # ---- schema and policies
    "schema syntax": Case(
        "schema", "schema.polangschema", {"schema.polangschema": "namespace App { entity }"}
    ),
    "policy syntax": Case(
        "policy_syntax", "policies/main.polang", {"policies/main.polang": "permit(principal"}
    ),
    "policy not UTF-8": Case("encoding", "policies/main.polang", {"policies/main.polang": b"\xff"}),
    "policy without @id": Case(
        "missing_id",
        "policies/extra.polang",
        {"policies/extra.polang": "permit(principal, action, resource);"},
    ),
    "empty @id": Case(
        "missing_id",
        "policies/extra.polang",
        {"policies/extra.polang": '@id("") permit(principal, action, resource);'},
    ),
    "duplicate id across files": Case(
        "duplicate_id", "policies/zz.polang", {"policies/zz.polang": POLICY}
    ),
    "template among policies": Case(
        "template", "policies/t.polang", {"policies/t.polang": TEMPLATE.replace("share", "s2")}
    ),
    "template without slots": Case(
        "template",
        "templates/plain.polang",
        {"templates/plain.polang": '@id("plain") permit(principal, action, resource);'},
    ),
    # ---- template links
    "link to an unknown template": Case(
        "template_link",
        "templates/links.json",
        {"templates/links.json": json.dumps([{"template_id": "nope", "link_id": "l1"}])},
    ),
    "link misses a slot": Case(
        "template_link",
        "templates/links.json",
        {
            "templates/links.json": json.dumps(
                [
                    {
                        "template_id": "share",
                        "link_id": "l1",
                        "principal": {"type": "App::User", "id": "bob"},
                    }
                ]
            )
        },
    ),
    "link id used by a policy": Case(
        "duplicate_id",
        "templates/links.json",
        {
            "templates/links.json": json.dumps(
                [
                    {
                        "template_id": "share",
                        "link_id": "owner-view",
                        "principal": {"type": "App::User", "id": "bob"},
                        "resource": {"type": "App::Doc", "id": "d1"},
                    }
                ]
            )
        },
    ),
    "links not an array": Case(
        "template_link", "templates/links.json", {"templates/links.json": "{}"}
    ),
    # ---- entities
    "entity file not an array": Case(
        "invalid_field", "entities/users.json", {"entities/users.json": json.dumps(ENTITIES[0])}
    ),
    "entity attribute of the wrong type": Case(
        "entity",
        "entities/users.json",
        {
            "entities/users.json": json.dumps(
                [{"uid": {"type": "App::User", "id": "x"}, "attrs": {"name": 3}, "parents": []}]
            )
        },
    ),
    "entity of an undeclared type": Case(
        "entity",
        "entities/users.json",
        {
            "entities/users.json": json.dumps(
                [{"uid": {"type": "App::Robot", "id": "x"}, "attrs": {}, "parents": []}]
            )
        },
    ),
    "entity defined twice": Case(
        "entity", "entities/zz.json", {"entities/zz.json": json.dumps(ENTITIES[:1])}
    ),
    "legacy entity form in a directory": Case(
        "entity",
        "entities/more.json",
        {"entities/more.json": json.dumps([{"entity_type": "App::Group", "entity_id": "g2"}])},
    ),
    "entity hierarchy cycle": Case(
        "entity",
        "entities/users.json",
        {
            "schema.polangschema": SCHEMA.replace("entity Group;", "entity Group in [Group];"),
            "entities/users.json": json.dumps(
                [
                    {
                        "uid": {"type": "App::Group", "id": "a"},
                        "attrs": {},
                        "parents": [{"type": "App::Group", "id": "b"}],
                    },
                    {
                        "uid": {"type": "App::Group", "id": "b"},
                        "attrs": {},
                        "parents": [{"type": "App::Group", "id": "a"}],
                    },
                ]
            ),
        },
    ),
    "too many default entities": Case(
        "limit", "entities/users.json", config={"max_default_entities": 1}
    ),
    # ---- trusted issuers
    "issuer file not an object": Case(
        "invalid_field", "trusted-issuers/idp.json", {"trusted-issuers/idp.json": "[]"}
    ),
    "issuer endpoint not https": Case(
        "issuer",
        "trusted-issuers/idp.json",
        {
            "trusted-issuers/idp.json": issuer(
                openid_configuration_endpoint="http://idp.example.com/.well-known/x"
            )
        },
    ),
    "issuer tokens_metadata": Case(
        "deprecated_field",
        "trusted-issuers/idp.json",
        {"trusted-issuers/idp.json": json.dumps({"idp": {**ISSUER, "tokens_metadata": {}}})},
        in_message="token_metadata",
    ),
    "issuer defined twice": Case(
        "issuer", "trusted-issuers/z.json", {"trusted-issuers/z.json": issuer()}
    ),
    # ---- manifest
    "manifest checksum": Case(
        "manifest",
        "policies/main.polang",
        manifest=True,
        mutate_manifest=set_checksum,
        in_message="SHA-256",
    ),
    "manifest size": Case(
        "manifest",
        "policies/main.polang",
        manifest=True,
        mutate_manifest=set_size,
        in_message="size",
    ),
    "manifest store id": Case("manifest", "manifest.json", manifest=True, mutate_manifest=set_id),
    "manifest lists a missing file": Case(
        "manifest", "manifest.json", manifest=True, mutate_manifest=add_listed
    ),
    "file not in the manifest": Case(
        "manifest", "entities/users.json", manifest=True, mutate_manifest=drop_listed
    ),
    "manifest date": Case(
        "invalid_field", "manifest.json", manifest=True, mutate_manifest=bad_date
    ),
    # ---- archives
    "not a zip": Case("archive", "bad.parc", archive=b"this is not a zip"),
    "absolute entry": Case("archive", "bad.parc", archive=raw_zip({"/etc/cron.d/x": "x"})),
    "dot-dot entry": Case("archive", "bad.parc", archive=raw_zip({"policies/../../x": "x"})),
    "symlink entry": Case("archive", "bad.parc", archive=symlink_zip()),
    # ---- legacy files
    "legacy tokens_metadata": Case(
        "deprecated_field",
        LEGACY_FILE,
        legacy=legacy_doc(trusted_issuers={"idp": {**ISSUER, "tokens_metadata": {}}}),
        in_message="token_metadata",
    ),
    "legacy bad base64": Case(
        "base64",
        LEGACY_FILE,
        legacy=legacy_doc(policies={"p": {"policy_content": "%%% not base64 %%%"}}),
    ),
    "legacy schema content type": Case(
        "invalid_field",
        LEGACY_FILE,
        legacy=legacy_doc(schema={"encoding": "none", "content_type": "cedar", "body": "x"}),
    ),
    "legacy policy content type": Case(
        "invalid_field",
        LEGACY_FILE,
        legacy=legacy_doc(
            policies={
                "p": {
                    "policy_content": {
                        "encoding": "none",
                        "content_type": "polang-json",
                        "body": POLICY,
                    }
                }
            }
        ),
    ),
    "legacy encoding": Case(
        "invalid_field",
        LEGACY_FILE,
        legacy=legacy_doc(schema={"encoding": "gzip", "content_type": "polang", "body": "x"}),
    ),
    "legacy several stores": Case(
        "store_selection",
        LEGACY_FILE,
        legacy={"policy_stores": {"a": legacy_record(), "b": legacy_record()}},
    ),
    "legacy unknown store id": Case(
        "store_selection", LEGACY_FILE, legacy=legacy_doc(), config={"policy_store_id": "zzz"}
    ),
    "legacy @id differs from key": Case(
        "id_mismatch",
        LEGACY_FILE,
        legacy=legacy_doc(policies={"other-key": {"policy_content": b64(POLICY)}}),
    ),
    "legacy two policies in one record": Case(
        "policy_syntax",
        LEGACY_FILE,
        legacy=legacy_doc(policies={"owner-view": {"policy_content": b64(POLICY + POLICY)}}),
    ),
    "legacy not JSON": Case("json_syntax", LEGACY_FILE, legacy='{"policy_stores": '),
    "legacy Base64 over the limit": Case(
        "limit", LEGACY_FILE, legacy=legacy_doc(), config={"max_base64_size": 160}
    ),
    "legacy default entity not JSON": Case(
        "json_syntax", LEGACY_FILE, legacy=legacy_doc(default_entities={"x": b64("{nope")})
    ),
    "legacy schema missing": Case("missing_field", LEGACY_FILE, legacy=legacy_doc(schema=None)),
    "legacy unknown record field": Case(
        "unknown_field", LEGACY_FILE, legacy=legacy_doc(polices={}), strict=True
    ),
    "legacy creation_date": Case(
        "invalid_field",
        LEGACY_FILE,
        legacy=legacy_doc(
            policies={"owner-view": {"creation_date": "2025-01-01", "policy_content": b64(POLICY)}}
        ),
    ),
}


def load_case(case: Case, tmp_path: Path) -> None:
    config = Config(**case.config)
    if case.archive is not None:
        path = tmp_path / "bad.parc"
        path.write_bytes(case.archive)
        PolicyStoreSource.from_path(path).load(config, strict=case.strict)
    elif case.legacy is not None:
        path = tmp_path / LEGACY_FILE
        text = case.legacy if isinstance(case.legacy, str) else json.dumps(case.legacy)
        path.write_text(text)
        PolicyStoreSource.from_path(path).load(config, strict=case.strict)
    else:
        files: dict[str, Any] = store_files(case.files)
        if case.manifest:
            m = build_manifest(manifest_files(files), "app-store", "2025-01-03T00:00:00Z")
            if case.mutate_manifest:
                case.mutate_manifest(m)
            files["manifest.json"] = json.dumps(m)
        root = write_tree(tmp_path / "store", files)
        PolicyStoreSource.from_path(root).load(config, strict=case.strict)


def test_there_are_at_least_25_cases() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_store_is_rejected_with_one_named_problem(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    with pytest.raises(PolicyStoreLoadError) as e:
        load_case(case, tmp_path)
    problems = e.value.problems
    assert len(problems) == 1, f"expected one problem, got:\n{e.value}"
    p = problems[0]
    assert (p.kind, p.file) == (case.kind, case.file), str(e.value)
    assert case.file in str(e.value)
    assert case.in_message in p.message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "s",
        store_files(
            {
                "metadata.json": meta(version="x"),
                "policies/extra.polang": "permit(principal, action, resource);",
                "README.md": "x",
                "trusted-issuers/idp.json": issuer(name="not a namespace"),
            }
        ),
    )
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.directory(root).load()
    assert sorted(e.value.kinds) == ["invalid_field", "issuer", "missing_id", "unexpected_file"]


def test_checksum_validation_can_be_switched_off(tmp_path: Path) -> None:
    files: dict[str, Any] = store_files()
    m = build_manifest(manifest_files(files), "app-store", "2025-01-03T00:00:00Z")
    set_checksum(m)
    files["manifest.json"] = json.dumps(m)
    root = write_tree(tmp_path / "s", files)
    with pytest.raises(PolicyStoreLoadError):
        PolicyStoreSource.directory(root).load()
    store = PolicyStoreSource.directory(root).load(Config(policy_store_validate_checksum=False))
    assert store.id == "app-store"
    # sizes are still checked when checksums are off
    set_size(m)
    (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.directory(root).load(Config(policy_store_validate_checksum=False))
    assert e.value.kind == "manifest"


def test_a_correct_manifest_loads(tmp_path: Path) -> None:
    files: dict[str, Any] = store_files()
    m = build_manifest(manifest_files(files), "app-store", "2025-01-03T00:00:00Z")
    files["manifest.json"] = json.dumps(m)
    root = write_tree(tmp_path / "s", files)
    assert PolicyStoreSource.directory(root).load().id == "app-store"
    # dot files are tooling noise, neither store files nor manifest entries
    (root / ".DS_Store").write_bytes(b"\0")
    (root / "policies" / ".gitkeep").write_text("")
    assert PolicyStoreSource.directory(root).load().id == "app-store"


def test_unused_helpers_stay_valid() -> None:
    # the base pieces the cases are built from must themselves be valid
    assert json.loads(issuer())["idp"]["name"] == "Idp"
    assert TEMPLATE.startswith("@id")
