"""Hostile stores: every attack ends in a clear ``PolicyStoreLoadError``, fast and bounded.

Each test is one attack (issue 11): deep nesting, YAML aliases, huge values and file lists,
links, FIFOs and devices in a directory, unsafe archives. Attacks that already failed
before the fix are kept here too, so they keep failing.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import stat
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polang.config import Config
from polang.errors import MAX_MESSAGE_CHARS, PolangError
from polang.store import PolicyStoreLoadError, PolicyStoreSource
from polang.store.errors import MAX_LISTED_PROBLEMS, MAX_PROBLEM_CHARS, MAX_PROBLEMS
from polang.store.layout import MAX_UNEXPECTED_LISTED, build_manifest
from polang.tokens.records import ISSUER_FIELDS, TOKEN_FIELDS
from store.storekit import ISSUER, METADATA, b64, legacy_doc, store_files, write_tree, zip_bytes

DEEP = 50_000


def deep_list(n: int = DEEP) -> str:
    return "[" * n + "]" * n


def rejected_path(path: Path, **load: Any) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        PolicyStoreSource.from_path(path).load(**load)
    assert len(str(e.value)) <= MAX_MESSAGE_CHARS + 200
    return e.value


def legacy_file(tmp_path: Path, text: str, name: str = "store.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- deep JSON


def test_deep_json_anywhere_in_a_legacy_store_is_a_named_limit(tmp_path: Path) -> None:
    doc = json.dumps(legacy_doc(description="PLACEHOLDER")).replace('"PLACEHOLDER"', deep_list())
    err = rejected_path(legacy_file(tmp_path, doc))
    [p] = err.problems
    assert (p.kind, p.file) == ("limit", "store.json")
    assert "MAX_JSON_DEPTH" in p.message and "128" in p.message


def test_deep_json_in_a_base64_default_entity_is_a_named_limit(tmp_path: Path) -> None:
    ents = {"deep": base64.b64encode(deep_list().encode()).decode()}
    err = rejected_path(legacy_file(tmp_path, json.dumps(legacy_doc(default_entities=ents))))
    [p] = err.problems
    assert (p.kind, p.file) == ("limit", "store.json")
    assert p.location == '$.policy_stores["app-store"].default_entities.deep'
    assert "MAX_JSON_DEPTH" in p.message


@pytest.mark.parametrize(
    "name",
    [
        "manifest.json",
        "metadata.json",
        "entities/users.json",
        "trusted-issuers/idp.json",
        "templates/links.json",
    ],
)
def test_deep_json_in_any_directory_file_is_a_named_limit(tmp_path: Path, name: str) -> None:
    root = write_tree(tmp_path / "s", store_files({name: deep_list()}))
    err = rejected_path(root)
    p = next(p for p in err.problems if p.kind == "limit")
    assert p.file == name
    assert "MAX_JSON_DEPTH" in p.message


def test_deep_json_in_an_archive_is_a_named_limit(tmp_path: Path) -> None:
    path = tmp_path / "s.parc"
    path.write_bytes(zip_bytes(store_files({"entities/users.json": deep_list()})))
    err = rejected_path(path)
    assert [(p.kind, p.file) for p in err.problems] == [("limit", "entities/users.json")]


def test_json_at_the_depth_limit_still_loads(tmp_path: Path) -> None:
    # 127 levels inside the record's one object: exactly at the limit, not past it
    nested = "[" * 126 + "]" * 126
    ents = {"x": base64.b64encode(f'{{"a": {nested}}}'.encode()).decode()}
    err = rejected_path(legacy_file(tmp_path, json.dumps(legacy_doc(default_entities=ents))))
    assert "limit" not in err.kinds  # rejected for the entity's shape, not for its depth


def test_a_huge_json_integer_is_a_syntax_problem(tmp_path: Path) -> None:
    doc = json.dumps(legacy_doc(description="PLACEHOLDER")).replace('"PLACEHOLDER"', "9" * 5000)
    err = rejected_path(legacy_file(tmp_path, doc))
    assert err.kinds == ["json_syntax"]
    assert "4,300 digits" in err.problems[0].message


# ---------------------------------------------------------------- the path itself


@pytest.mark.parametrize("name", ["y" * 5000, "a\x00b", "a/" + "b" * 300 + "/s.json"])
def test_a_path_the_system_cannot_look_up_is_a_source_problem(tmp_path: Path, name: str) -> None:
    """A name too long for the file system or holding a NUL byte: the store is refused
    (``OSError`` / ``ValueError`` from the lookup were outside the family)."""
    err = rejected_path(tmp_path / name)
    assert err.kinds == ["source"]
    assert str(err).endswith("[source]")  # the reason is not cut off by the long name
    assert len(str(err)) < 1000


# ---------------------------------------------------------------- anchored fields


def _with(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("file", "doc", "path", "value"),
    [
        ("metadata.json", METADATA, ("policy_store", "version"), "1.0.0\n"),
        ("metadata.json", METADATA, ("policy_store", "version"), "\u0661.0.0"),  # Arabic one
        ("metadata.json", METADATA, ("polang_version",), "4.0.0\n"),
        ("metadata.json", METADATA, ("policy_store", "created_date"), "2025-01-01T00:00:00Z\n"),
        ("trusted-issuers/idp.json", {"idp": ISSUER}, ("idp", "name"), "Idp\n"),
        (
            "trusted-issuers/idp.json",
            {"idp": ISSUER},
            ("idp", "token_metadata", "access_token", "entity_type_name"),
            "Idp::Access_token\n",
        ),
    ],
)
def test_a_field_with_a_line_end_after_it_or_other_digits_is_refused(
    tmp_path: Path, file: str, doc: dict[str, Any], path: tuple[str, ...], value: str
) -> None:
    """A name, version or date followed by a newline (which a regex's ``$`` lets through)
    or written with non-ASCII digits is not the field's form."""
    root = write_tree(tmp_path / "s", store_files({file: json.dumps(_with(doc, path, value))}))
    err = rejected_path(root)
    assert any(p.file == file for p in err.problems), err


def test_a_manifest_checksum_with_a_line_end_after_it_is_a_format_problem(tmp_path: Path) -> None:
    files = store_files()
    raw = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    manifest = build_manifest(raw, "app-store", "2025-01-01T00:00:00Z")
    manifest["files"]["schema.polangschema"]["checksum"] += "\n"
    root = write_tree(tmp_path / "s", {**files, "manifest.json": json.dumps(manifest)})
    err = rejected_path(root)
    [p] = err.problems
    assert (p.kind, p.location) == ("invalid_field", '$.files["schema.polangschema"].checksum')
    assert "must have the form sha256:" in p.message


# ---------------------------------------------------------------- YAML


def test_deep_yaml_flow_lists_are_a_named_limit(tmp_path: Path) -> None:
    err = rejected_path(legacy_file(tmp_path, f"description: {deep_list()}\n", "s.yaml"))
    [p] = err.problems
    assert (p.kind, p.file) == ("limit", "s.yaml")
    assert "MAX_YAML_DEPTH" in p.message


def test_deep_yaml_block_maps_are_a_named_limit(tmp_path: Path) -> None:
    text = "".join(" " * i + "a:\n" for i in range(3000)) + " " * 3000 + "1\n"
    err = rejected_path(legacy_file(tmp_path, text, "s.yaml"))
    assert [p.kind for p in err.problems] == ["limit"]


LAUGHS = """\
schema: x
policies: {}
trusted_issuers:
  idp:
    name: Idp
    openid_configuration_endpoint: https://idp.example.com/.well-known/openid-configuration
    token_metadata:
      access_token:
        entity_type_name: Idp::Access_token
        FIELD: &l9 [*l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8]
"""
LEVELS = "".join(
    f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, "
    f"*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}]\n"
    for i in range(1, 9)
)


@pytest.mark.parametrize("field", ["role_mapping", "trusted"])
def test_yaml_aliases_are_refused_before_expanding(tmp_path: Path, field: str) -> None:
    text = "l0: &l0 [lol]\n" + LEVELS + LAUGHS.replace("FIELD", field)
    assert len(text) < 2000  # 10**9 items once expanded
    err = rejected_path(legacy_file(tmp_path, text, "s.yaml"))
    [p] = err.problems
    assert (p.kind, p.file, p.location) == ("yaml_syntax", "s.yaml", "1:5")
    assert "anchors" in p.message
    assert len(str(err)) < 500


def test_a_yaml_alias_without_an_anchor_mark_is_refused(tmp_path: Path) -> None:
    err = rejected_path(legacy_file(tmp_path, "schema: *nowhere\n", "s.yaml"))
    assert err.kinds == ["yaml_syntax"]


@pytest.mark.parametrize(
    "text",
    [
        "a: !!binary aGVsbG8=\n",
        "a: !!set {x}\n",
        "a: !!python/object:os.system x\n",
        "a: !!omap []\n",
    ],
)
def test_yaml_tags_outside_json_are_refused(tmp_path: Path, text: str) -> None:
    err = rejected_path(legacy_file(tmp_path, text, "s.yaml"))
    assert err.kinds == ["yaml_syntax"]
    assert "not allowed in a policy store" in err.problems[0].message


def test_yaml_keys_are_text_and_complex_keys_are_refused(tmp_path: Path) -> None:
    err = rejected_path(legacy_file(tmp_path, "? [1]\n: a\n", "s.yaml"))
    assert err.kinds == ["yaml_syntax"]
    err = rejected_path(legacy_file(tmp_path, "1: a\n'1': b\n", "s.yaml"))
    assert "duplicate key '1'" in err.problems[0].message


# ---------------------------------------------------------------- bounded messages


def test_a_huge_value_is_quoted_only_in_part(tmp_path: Path) -> None:
    doc = legacy_doc()
    issuer = doc["policy_stores"]["app-store"]["trusted_issuers"]["idp"]
    issuer["token_metadata"]["access_token"]["trusted"] = ["x" * 1000] * 10_000
    issuer["token_metadata"]["access_token"]["role_mapping"] = {"k": "v" * 1_000_000}
    issuer["openid_configuration_endpoint"] = "http://" + "e" * 1_000_000
    err = rejected_path(legacy_file(tmp_path, json.dumps(doc)))
    assert len(err.problems) == 3
    assert all(len(p.message) < 300 for p in err.problems), [p.message for p in err.problems]
    assert "an array of 10000 items" in str(err)


def test_a_huge_key_is_cut_in_paths_and_messages(tmp_path: Path) -> None:
    doc = legacy_doc()
    doc["policy_stores"]["app-store"]["x" * 100_000] = 1
    err = rejected_path(legacy_file(tmp_path, json.dumps(doc)), strict=True)
    [p] = err.problems
    assert p.kind == "unknown_field"
    assert len(p.message) < 500 and len(p.location or "") < 200


def test_thousands_of_unexpected_files_give_a_bounded_message(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = dict(store_files())
    files.update({f"junk/{i:05}.txt": b"" for i in range(9000)})
    path = tmp_path / "s.parc"
    path.write_bytes(zip_bytes(files))
    err = rejected_path(path)
    assert err.kinds == ["unexpected_file"] * (MAX_UNEXPECTED_LISTED + 1)
    assert err.problems[0].file == "junk/00000.txt"
    last = err.problems[-1]
    assert last.message.startswith(f"{9000 - MAX_UNEXPECTED_LISTED} more files have no place")
    assert last.message.endswith(f"and {9000 - MAX_UNEXPECTED_LISTED - 5} more")
    assert len(str(err)) < 2000


def test_hundreds_of_problems_are_kept_bounded_and_counted(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = dict(store_files())
    files.update({f"entities/bad{i:04}.json": b"{" for i in range(300)})
    root = write_tree(tmp_path / "s", files)
    err = rejected_path(root)
    assert err.total == 300
    assert len(err.problems) == MAX_PROBLEMS
    text = str(err)
    assert text.startswith(f"policy store directory {root} rejected: 300 problems")
    assert text.count("\n  ") == MAX_LISTED_PROBLEMS + 1
    assert text.endswith(f"... and {300 - MAX_LISTED_PROBLEMS} more problems")


def test_every_store_error_is_in_the_family(tmp_path: Path) -> None:
    assert issubclass(PolicyStoreLoadError, PolangError)


# ---------------------------------------------------------------- links, FIFOs, devices


def test_a_fifo_in_a_directory_store_is_refused_without_waiting(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "s", store_files())
    os.mkfifo(root / "policies" / "fifo.polang")
    err = rejected_path(root)
    [p] = err.problems
    assert (p.kind, p.file) == ("unsafe_file", "policies/fifo.polang")
    assert "FIFO" in p.message


def test_a_fifo_named_as_the_store_file_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "store.json")
    err = rejected_path(tmp_path / "store.json")
    assert err.kinds == ["unsafe_file"]
    os.mkfifo(tmp_path / "store.parc")
    err = rejected_path(tmp_path / "store.parc")
    assert err.kinds == ["unsafe_file"]


SECRET = "root:x:0:0:secret-line-that-must-not-be-echoed"


@pytest.mark.parametrize(
    "name", ["policies/passwd.polang", "schema.polangschema", "entities/x.json", "README.md"]
)
def test_a_symlink_out_of_the_store_is_refused_and_never_read(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "passwd"
    outside.write_text(SECRET)
    files = store_files({name: None})
    root = write_tree(tmp_path / "s", files)
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).symlink_to(outside)
    err = rejected_path(root)
    p = next(p for p in err.problems if p.file == name)
    assert p.kind == "unsafe_file"
    assert "symbolic link" in p.message
    assert "secret-line" not in str(err)


def test_a_symlink_inside_the_store_is_refused_too(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "s", store_files())
    (root / "policies" / "again.polang").symlink_to(root / "policies" / "main.polang")
    (root / "more").symlink_to(root / "policies", target_is_directory=True)
    err = rejected_path(root)
    assert sorted((p.kind, p.file) for p in err.problems) == [
        ("unsafe_file", "more"),
        ("unsafe_file", "policies/again.polang"),
    ]


def test_a_socket_in_a_directory_store_is_refused(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "s", store_files())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "entities.sock"))
        err = rejected_path(root)
    finally:
        sock.close()
    assert [(p.kind, p.file) for p in err.problems] == [("unsafe_file", "entities.sock")]
    assert "socket" in err.problems[0].message


def test_the_store_root_may_itself_be_a_link(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "s", store_files())
    (tmp_path / "current").symlink_to(root, target_is_directory=True)
    assert PolicyStoreSource.from_path(tmp_path / "current").load().id == "app-store"
    legacy = tmp_path / "store.json"
    legacy.write_text(json.dumps(legacy_doc()))
    (tmp_path / "link.json").symlink_to(legacy)
    assert PolicyStoreSource.from_path(tmp_path / "link.json").load().id == "app-store"


def test_a_directory_with_too_many_entries_is_a_named_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polang.store import layout

    monkeypatch.setattr(layout, "MAX_ENTRIES", 20)
    root = write_tree(tmp_path / "s", store_files())
    for i in range(30):
        (root / "entities" / f"d{i}").mkdir()  # empty folders count too
    err = rejected_path(root)
    assert err.kinds == ["limit"]
    assert "MAX_ENTRIES" in err.problems[0].message


def test_a_directory_store_over_the_size_limit_is_a_named_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polang.store import layout

    monkeypatch.setattr(layout, "MAX_UNCOMPRESSED", 5000)
    root = write_tree(tmp_path / "s", store_files({"entities/big.json": "[" + " " * 6000 + "]"}))
    err = rejected_path(root)
    assert err.kinds == ["limit"]
    assert "MAX_UNCOMPRESSED" in err.problems[0].message


def test_a_legacy_file_over_the_size_limit_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polang.store import source

    monkeypatch.setattr(source, "MAX_UNCOMPRESSED", 100)
    err = rejected_path(legacy_file(tmp_path, json.dumps(legacy_doc())))
    assert err.kinds == ["limit"]
    assert "MAX_UNCOMPRESSED" in err.problems[0].message


# ---------------------------------------------------------------- archives (already held)


def archive_with(entry: zipfile.ZipInfo, content: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, text in store_files().items():
            zf.writestr(rel, text)
        zf.writestr(entry, content)
    return buf.getvalue()


def unix_entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (stat.S_IFIFO | 0o644, "FIFO"),
        (stat.S_IFCHR | 0o644, "device"),
        (stat.S_IFLNK | 0o777, "symbolic link"),
    ],
)
def test_archive_entries_that_are_not_files_are_refused(
    tmp_path: Path, mode: int, words: str
) -> None:
    path = tmp_path / "s.parc"
    path.write_bytes(archive_with(unix_entry("entities/x.json", mode), b"/etc/passwd"))
    err = rejected_path(path)
    assert err.kinds == ["archive"]
    assert words in err.problems[0].message


@pytest.mark.parametrize("name", ["/etc/passwd", "../../x.json", "entities/../../x", "C:/x"])
def test_archive_paths_out_of_the_root_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "s.parc"
    path.write_bytes(archive_with(zipfile.ZipInfo(name), b"[]"))
    err = rejected_path(path)
    assert err.kinds == ["archive"]
    assert "unsafe entry" in err.problems[0].message


def test_a_zip_bomb_is_refused_by_what_it_unpacks_to(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, text in store_files().items():
            zf.writestr(rel, text)
        with zf.open("entities/bomb.json", "w", force_zip64=True) as fh:
            block = b"\0" * (1 << 20)
            for _ in range(101):
                fh.write(block)
    path = tmp_path / "bomb.parc"
    path.write_bytes(buf.getvalue())
    assert path.stat().st_size < 1 << 20
    err = rejected_path(path)
    assert err.kinds == ["archive"]
    assert "too much data" in err.problems[0].message


# ---------------------------------------------------------------- memory and the YAML parser


@pytest.mark.parametrize("fmt", ["json", "yaml", "directory", "parc"])
def test_memory_while_loading_is_a_small_multiple_of_the_store(tmp_path: Path, fmt: str) -> None:
    big = "d" * 4_000_000
    if fmt in ("json", "yaml"):
        doc = legacy_doc(description=big)
        text = json.dumps(doc)  # JSON text is YAML too: the .yaml file goes through YAML
        path = legacy_file(tmp_path, text, f"s.{fmt}")
    else:
        meta = {**METADATA, "policy_store": {**METADATA["policy_store"], "description": big}}
        files = store_files({"metadata.json": json.dumps(meta)})
        if fmt == "directory":
            path = write_tree(tmp_path / "s", files)
        else:
            path = tmp_path / "s.parc"
            path.write_bytes(zip_bytes(files))
    tracemalloc.start()
    try:
        store = PolicyStoreSource.from_path(path).load()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert store.description == big
    assert peak < 5 * len(big), f"{peak / len(big):.1f} x the store"


def test_the_pure_python_yaml_parser_follows_the_same_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polang.inputs import strict as raw
    from polang.store.errors import Problems

    _, resolver, constructor = raw._yaml_parts()
    monkeypatch.setattr(raw, "_yaml_parts", lambda: (yaml.SafeLoader, resolver, constructor))
    cases: dict[str, Any] = {
        "a: [1, 2.5, true, null, '3', 2025-01-01]\n": {
            "a": [1, 2.5, True, None, "3", "2025-01-01"]
        },
        "l0: &a [x]\nl1: *a\n": "anchors",
        f"a: {deep_list(200)}\n": "MAX_YAML_DEPTH",
        "a: !!binary aGk=\n": "not allowed",
        "a: 1\na: 2\n": "duplicate key 'a'",
        "<<: {a: 1}\n": "merge keys",
        "a: 1\n---\nb: 2\n": "one YAML document",
    }
    for text, expected in cases.items():
        problems = Problems("t")
        got = raw.load_yaml(text, file="f.yaml", problems=problems)
        if isinstance(expected, dict):
            assert got == expected and not problems, problems.items
        else:
            assert got is None and expected in problems.items[0].message, (text, problems.items)


# ---------------------------------------------------------------- property-based fuzzing

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "https://a.test/", "Idp::T", "sha256:00", "sha1:" + "0" * 40, "4.0.0"])
)
FIELD_NAMES = st.sampled_from(
    [
        *ISSUER_FIELDS,
        *TOKEN_FIELDS,
        "id",
        "uid",
        "attrs",
        "parents",
        "type",
        "policy_store",
        "polang_version",
        "files",
        "size",
        "checksum",
        "policy_store_id",
        "generated_date",
        "parser",
        "regex_expression",
        "access_token",
        "schema",
        "policies",
        "policy_stores",
        "trusted_issuers",
        "default_entities",
        "policy_content",
        "entity_type",
        "entity_id",
        "encoding",
        "content_type",
        "body",
    ]
) | st.text(max_size=6)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(FIELD_NAMES, inner, max_size=6),
    max_leaves=25,
)
RECORDS = st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=8)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_bounded(err: PolangError) -> None:
    assert len(str(err)) <= MAX_MESSAGE_CHARS + 100
    for p in getattr(err, "problems", []):
        assert len(p.message) <= MAX_PROBLEM_CHARS + 100
        assert len(p.location or "") <= MAX_PROBLEM_CHARS + 100


def load_layout(files: dict[str, bytes]) -> None:
    from polang.store.build import build_store
    from polang.store.errors import Problems
    from polang.store.layout import read_layout

    problems = Problems("fuzz")
    dirs = {"policies", *(n.rsplit("/", 1)[0] for n in files if "/" in n)}
    raw = read_layout(files, dirs, fmt="archive", source="fuzz", config=Config(), problems=problems)
    build_store(raw, Config(), problems)


FUZZ_BASE = {
    "metadata.json": json.dumps(METADATA).encode(),
    "schema.polangschema": b"namespace App { entity User; }",
}


@FUZZ
@given(
    name=st.sampled_from(["metadata.json", "manifest.json", "trusted-issuers/x.json"]),
    value=JSON_VALUES | RECORDS,
)
def test_fuzz_store_records_raise_only_bounded_store_errors(name: str, value: Any) -> None:
    try:
        load_layout({**FUZZ_BASE, name: json.dumps(value).encode()})
    except PolangError as e:
        assert isinstance(e, PolicyStoreLoadError)
        assert_bounded(e)


@FUZZ
@given(value=st.dictionaries(FIELD_NAMES, RECORDS | JSON_VALUES, max_size=4) | RECORDS)
def test_fuzz_trusted_issuer_records(value: Any) -> None:
    try:
        load_layout({**FUZZ_BASE, "trusted-issuers/x.json": json.dumps(value).encode()})
    except PolangError as e:
        assert_bounded(e)


@FUZZ
@given(entities=st.lists(RECORDS | JSON_VALUES, max_size=4))
def test_fuzz_default_entities(entities: list[Any]) -> None:
    try:
        load_layout({**FUZZ_BASE, "entities/x.json": json.dumps(entities).encode()})
    except PolangError as e:
        assert_bounded(e)


@FUZZ
@given(doc=RECORDS | JSON_VALUES, as_yaml=st.booleans())
def test_fuzz_legacy_store_dicts(doc: Any, as_yaml: bool) -> None:
    text = yaml.safe_dump(doc) if as_yaml else json.dumps(doc)
    try:
        PolicyStoreSource.inline(text).load()
    except PolangError as e:
        assert_bounded(e)


@FUZZ
@given(entity=RECORDS | JSON_VALUES)
def test_fuzz_base64_default_entities(entity: Any) -> None:
    doc = legacy_doc(default_entities={"e": b64(json.dumps(entity))})
    doc["policy_stores"]["app-store"].pop("trusted_issuers")
    try:
        PolicyStoreSource.inline(json.dumps(doc)).load()
    except PolangError as e:
        assert_bounded(e)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("[]{}:,-&*!|>'\"\n #ab1?")), max_size=60))
def test_fuzz_store_text_raises_only_store_errors(text: str) -> None:
    try:
        load_layout({**FUZZ_BASE, "manifest.json": text.encode()})
    except PolangError as e:
        assert_bounded(e)
    try:
        PolicyStoreSource.inline("\n" + text).load()  # YAML (JSON when it starts with { or [)
    except PolangError as e:
        assert_bounded(e)


def test_packing_a_directory_whose_file_name_is_unsafe_in_a_zip_is_a_store_error(
    tmp_path: Path,
) -> None:
    from polang.errors import PolicyStoreError
    from polang.store.tools import pack_store

    root = write_tree(tmp_path / "s", store_files({"policies/a\\b.polang": "// empty\n"}))
    with pytest.raises(PolicyStoreError) as e:
        pack_store(root, tmp_path / "out.parc")
    assert "backslash" in str(e.value)
    assert not (tmp_path / "out.parc").exists()
