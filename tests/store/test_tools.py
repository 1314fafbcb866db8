"""The store tools (validate, pack, convert) and their ``polang store`` commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from polang.cli import main
from polang.config import Config
from polang.errors import PolicyStoreError
from polang.language.parser import parse_policies
from polang.store import PolicyStoreLoadError, PolicyStoreSource
from polang.store.tools import convert_legacy, pack_store, validate_store

from .storekit import EXAMPLES, ISSUER, POLICY, legacy_doc, legacy_record

MakeStore = Callable[..., Path]


def same_content(a_path: Path, b_path: Path) -> None:
    a = PolicyStoreSource.from_path(a_path).load()
    b = PolicyStoreSource.from_path(b_path).load()
    assert (a.id, a.name, a.description, a.version) == (b.id, b.name, b.description, b.version)
    assert a.schema == b.schema
    assert a.policies == b.policies
    assert a.templates == b.templates
    assert a.trusted_issuers == b.trusted_issuers
    assert sorted(e.uid for e in a.default_entities) == sorted(e.uid for e in b.default_entities)
    for e in a.default_entities:
        other = b.default_entities.get(e.uid)
        assert other is not None and other.attrs == e.attrs and other.parents == e.parents


# ---------------------------------------------------------------- validate


def test_validate_a_valid_store() -> None:
    report = validate_store(EXAMPLES / "directory")
    assert report["valid"] is True
    assert report["problems"] == [] and report["validation_errors"] == []
    s = report["summary"]
    assert (s["policies"], s["templates"], s["entities"], s["trusted_issuers"]) == (5, 1, 2, 1)


def test_validate_lists_every_problem(make_store: MakeStore) -> None:
    root = make_store({"README": "x", "policies/x.polang": "permit(principal, action, resource);"})
    report = validate_store(str(root))
    assert report["valid"] is False
    assert report["summary"] is None
    assert sorted(p["kind"] for p in report["problems"]) == ["missing_id", "unexpected_file"]
    assert {p["file"] for p in report["problems"]} == {"README", "policies/x.polang"}


def test_validate_applies_strict_schema_validation(make_store: MakeStore) -> None:
    typo = '@id("typo") permit (principal, action, resource) when { resource.ownr == principal };'
    root = make_store({"policies/typo.polang": typo})
    report = validate_store(root)
    assert report["valid"] is False
    assert report["problems"] == []
    assert any("typo" in v for v in report["validation_errors"])
    assert validate_store(root, strict=False)["valid"] is True
    assert validate_store(root, Config(strict_schema_validation=False))["valid"] is True


def test_validate_reports_source_problems(tmp_path: Path) -> None:
    report = validate_store(tmp_path / "store.txt")
    assert report["valid"] is False
    assert report["problems"][0]["kind"] == "source"


# ---------------------------------------------------------------- convert


@pytest.mark.parametrize("legacy", ["legacy.json", "legacy.yaml"])
def test_convert_the_examples(tmp_path: Path, legacy: str) -> None:
    out = tmp_path / "converted"
    summary = convert_legacy(EXAMPLES / legacy, out)
    assert summary["id"] == "acme-docs"
    assert (out / "metadata.json").is_file()
    assert (out / "schema.polangschema").is_file()
    assert (out / "templates" / "share-for-reading.polang").is_file()
    same_content(out, EXAMPLES / "directory")
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["policy_store"]["version"] == "1.2.0"
    assert meta["polang_version"] == "4.0.0"


def test_convert_adds_missing_ids_and_selects_a_store(tmp_path: Path) -> None:
    plain = 'permit (principal, action == App::Action::"edit", resource);'
    rec = legacy_record(
        version="2.1",
        policies={
            "edit all": {
                "policy_content": {"encoding": "none", "content_type": "polang", "body": plain}
            }
        },
    )
    doc = {"policy_stores": {"one": legacy_record(), "two": rec}}
    src = tmp_path / "multi.json"
    src.write_text(json.dumps(doc))
    with pytest.raises(PolicyStoreLoadError) as e:
        convert_legacy(src, tmp_path / "x")
    assert e.value.kind == "store_selection"
    out = tmp_path / "two"
    summary = convert_legacy(src, out, Config(policy_store_id="two"))
    assert summary["id"] == "two"
    assert "note" in summary  # "2.1" is not X.Y.Z
    written = (out / "policies" / "edit_all.polang").read_text()
    assert parse_policies(written)[0].policy_id == "edit all"
    assert json.loads((out / "metadata.json").read_text())["policy_store"]["version"] == "1.0.0"


def test_convert_refuses_a_non_empty_output_and_a_bad_store(tmp_path: Path) -> None:
    src = tmp_path / "s.json"
    src.write_text(json.dumps(legacy_doc()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(PolicyStoreError, match="must not exist or must be empty"):
        convert_legacy(src, out)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(legacy_doc(policies={"p": {"policy_content": "!!"}})))
    with pytest.raises(PolicyStoreLoadError):
        convert_legacy(bad, tmp_path / "never")
    assert not (tmp_path / "never").exists()
    with pytest.raises(PolicyStoreLoadError):
        convert_legacy(tmp_path / "missing.json", tmp_path / "never")


# ---------------------------------------------------------------- the commands


def test_cli_validate(capsys: pytest.CaptureFixture[str], make_store: MakeStore) -> None:
    assert main(["store", "validate", str(EXAMPLES / "legacy.yaml")]) == 0
    out = capsys.readouterr().out
    assert "valid store 'acme-docs' version 1.2.0" in out
    assert "policies: 5" in out and "trusted issuers: 1" in out
    bad = make_store({"policies/main.polang": "permit("})
    assert main(["store", "validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "policies/main.polang:1:" in out and "[policy_syntax]" in out
    assert main(["store", "validate", "--json", str(bad)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["problems"][0]["kind"] == "policy_syntax"


def test_cli_validate_with_store_id(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "multi.json"
    src.write_text(json.dumps({"policy_stores": {"a": legacy_record(), "b": legacy_record()}}))
    assert main(["store", "validate", str(src)]) == 1
    assert "ENGINE_POLICY_STORE_ID" in capsys.readouterr().out
    assert main(["store", "validate", "--store-id", "b", str(src)]) == 0


def test_cli_pack_and_convert(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "acme.parc"
    assert main(["store", "pack", str(EXAMPLES / "directory"), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    same_content(out, EXAMPLES / "directory")
    conv = tmp_path / "conv"
    assert main(["store", "convert", str(EXAMPLES / "legacy.json"), "-o", str(conv)]) == 0
    assert "5 policies" in capsys.readouterr().out
    same_content(conv, EXAMPLES / "directory")
    # a second conversion into the same directory is refused (exit 2, the common handler)
    assert main(["store", "convert", str(EXAMPLES / "legacy.json"), "-o", str(conv)]) == 2
    assert "must not exist" in capsys.readouterr().err


def test_cli_checksum_switch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import zipfile

    from .storekit import zip_bytes

    with zipfile.ZipFile(EXAMPLES / "store.parc") as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files["policies/documents.polang"] = files["policies/documents.polang"].replace(
        b"Owners do", b"Owners DO"
    )
    tampered = tmp_path / "tampered.parc"
    tampered.write_bytes(zip_bytes(files))
    assert main(["store", "validate", str(tampered)]) == 1
    assert "SHA-256" in capsys.readouterr().out
    assert main(["store", "validate", "--no-checksum", str(tampered)]) == 0


def test_cli_validate_prints_warnings_and_strict_makes_them_errors(
    capsys: pytest.CaptureFixture[str], make_store: MakeStore
) -> None:
    issuer = {"idp": {**ISSUER, "access_tokens": {"trusted": True}}}
    root = make_store({"trusted-issuers/idp.json": json.dumps(issuer)})
    assert main(["store", "validate", str(root)]) == 0
    out = capsys.readouterr().out
    assert "valid store 'app-store'" in out
    assert "warning: trusted-issuers/idp.json at $.idp.access_tokens: unknown field" in out
    assert main(["store", "validate", "--strict", str(root)]) == 1
    out = capsys.readouterr().out
    assert "trusted-issuers/idp.json at $.idp.access_tokens: unknown field" in out
    assert "[unknown_field]" in out and "warning:" not in out
    assert main(["store", "validate", "--json", str(root)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [w["location"] for w in report["warnings"]] == ["$.idp.access_tokens"]


def test_validate_strict_levels(make_store: MakeStore) -> None:
    issuer = {"idp": {**ISSUER, "access_tokens": {}}}
    root = make_store({"trusted-issuers/idp.json": json.dumps(issuer)})
    for strict, valid in ((None, True), (False, True), (True, False)):
        report = validate_store(root, strict=strict)
        assert report["valid"] is valid
        assert bool(report["warnings"]) is valid  # a warning, or (strict) a problem


def test_policy_fixture_is_a_policy() -> None:
    assert parse_policies(POLICY)[0].policy_id == "owner-view"


def test_tools_report_unwritable_outputs_as_store_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PolicyStoreError, match="cannot write the archive"):
        pack_store(EXAMPLES / "directory", blocker / "out.parc")
    with pytest.raises(PolicyStoreError, match="cannot write the store"):
        convert_legacy(EXAMPLES / "legacy.json", blocker / "out")
