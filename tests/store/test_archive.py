"""``.parc`` archives: packing, reading from bytes, and archives made hostile on purpose."""

from __future__ import annotations

import io
import json
import stat
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from polang.errors import PolicyStoreError
from polang.store import PolicyStoreLoadError, PolicyStoreSource, load_policy_store_archive_bytes
from polang.store.archive import MAX_ENTRIES, MAX_UNCOMPRESSED, unsafe_name_reason, write_archive
from polang.store.tools import pack_store

from .storekit import store_files, zip_bytes

MakeStore = Callable[..., Path]


def rejected(data: bytes) -> PolicyStoreLoadError:
    with pytest.raises(PolicyStoreLoadError) as e:
        load_policy_store_archive_bytes(data)
    return e.value


def with_entries(extra: Callable[[zipfile.ZipFile], None]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, content in store_files().items():
            zf.writestr(rel, content)
        extra(zf)
    return buf.getvalue()


def named(name: str, content: bytes = b"x") -> Callable[[zipfile.ZipFile], None]:
    def add(zf: zipfile.ZipFile) -> None:
        info = zipfile.ZipInfo("placeholder")
        info.filename = name  # ZipInfo would normalise some of these names away
        zf.writestr(info, content)

    return add


# ---------------------------------------------------------------- packing


def test_pack_writes_a_loadable_archive_with_a_fresh_manifest(
    make_store: MakeStore, tmp_path: Path
) -> None:
    root = make_store()
    (root / "manifest.json").write_text('{"stale": true}')  # replaced, not copied
    (root / ".hidden").write_text("noise")
    out = tmp_path / "out" / "app.parc"
    out.parent.mkdir()
    summary = pack_store(root, out)
    assert summary["id"] == "app-store"
    assert summary["files"] == len(store_files())
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("manifest.json"))
    assert names == sorted(names)
    assert ".hidden" not in names
    assert manifest["policy_store_id"] == "app-store"
    assert set(manifest["files"]) == set(store_files())
    assert manifest["files"]["policies/main.polang"]["checksum"].startswith("sha256:")
    from_dir = PolicyStoreSource.directory(make_store()).load()
    from_archive = PolicyStoreSource.from_path(out).load()
    assert from_archive.format == "archive"
    assert from_archive.policies == from_dir.policies
    assert from_archive.templates == from_dir.templates
    assert from_archive.schema == from_dir.schema
    assert from_archive.trusted_issuers == from_dir.trusted_issuers


def test_pack_is_reproducible_apart_from_the_manifest_date(
    make_store: MakeStore, tmp_path: Path
) -> None:
    root = make_store()
    pack_store(root, tmp_path / "a.parc")
    pack_store(root, tmp_path / "b.parc")
    with zipfile.ZipFile(tmp_path / "a.parc") as a, zipfile.ZipFile(tmp_path / "b.parc") as b:
        for name in a.namelist():
            if name != "manifest.json":
                assert a.read(name) == b.read(name)
                assert a.getinfo(name).date_time == (1980, 1, 1, 0, 0, 0)


def test_pack_refuses_an_invalid_store_or_an_output_inside_it(
    make_store: MakeStore, tmp_path: Path
) -> None:
    with pytest.raises(PolicyStoreLoadError) as e:
        pack_store(make_store({"policies/bad.polang": "permit("}), tmp_path / "x.parc")
    assert e.value.kind == "policy_syntax"
    assert not (tmp_path / "x.parc").exists()
    root = make_store()
    with pytest.raises(PolicyStoreLoadError) as e:
        pack_store(root, root / "self.parc")
    assert e.value.kind == "source"


def test_an_empty_policies_folder_survives_packing(make_store: MakeStore, tmp_path: Path) -> None:
    root = make_store({"policies/main.polang": None})
    pack_store(root, tmp_path / "e.parc")
    store = PolicyStoreSource.from_path(tmp_path / "e.parc").load()
    assert store.policies == {}


def test_write_archive_refuses_unsafe_names(tmp_path: Path) -> None:
    with pytest.raises(PolicyStoreError, match="unsafe"):
        write_archive({"../x": b""}, tmp_path / "x.parc")


# ---------------------------------------------------------------- reading


def test_bytes_and_directory_entries_and_macos_noise() -> None:
    def extra(zf: zipfile.ZipFile) -> None:
        zf.writestr("templates/", b"")
        zf.writestr("__MACOSX/._metadata.json", b"\0\0")
        zf.writestr(".DS_Store", b"\0")

    store = load_policy_store_archive_bytes(with_entries(extra))
    assert store.id == "app-store"


def test_not_a_zip_says_what_it_looks_like() -> None:
    err = rejected(b'{"policy_stores": {}}')
    assert err.kind == "archive"
    assert "looks like JSON" in str(err)
    assert rejected(b"").kind == "archive"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("C:/Windows/x", "absolute"),
        ("..", "'..'"),
        ("policies/../../etc/x", "'..'"),
        ("policies\\..\\x", "backslash"),
        ("policies//x.polang", "empty"),
        ("./metadata.json", "'.'"),
    ],
)
def test_hostile_names(name: str, reason: str) -> None:
    assert unsafe_name_reason(name) is not None
    err = rejected(with_entries(named(name)))
    assert err.kind == "archive"
    assert reason in str(err)
    assert repr(name) in str(err)


def test_symlinks_are_refused() -> None:
    def link(zf: zipfile.ZipFile) -> None:
        info = zipfile.ZipInfo("entities/link.json")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "../../../../etc/passwd")

    err = rejected(with_entries(link))
    assert err.kind == "archive"
    assert "symbolic link" in str(err)


def test_every_unsafe_entry_is_reported() -> None:
    def two(zf: zipfile.ZipFile) -> None:
        named("/abs")(zf)
        named("a/../../b")(zf)

    err = rejected(with_entries(two))
    assert err.kinds == ["archive", "archive"]


def test_duplicate_and_encrypted_entries() -> None:
    def dup(zf: zipfile.ZipFile) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zf.writestr("policies/main.polang", b"// again")

    err = rejected(with_entries(dup))
    assert "more than once" in str(err)

    data = zip_bytes({**store_files(), "policies/secret.polang": "garbage"})
    err = rejected(_patch_entry(data, b"policies/secret.polang", flag=0x1))
    assert "encrypted" in str(err)


def test_too_many_entries() -> None:
    def many(zf: zipfile.ZipFile) -> None:
        for i in range(MAX_ENTRIES):
            zf.writestr(f"policies/p{i}.polang", b"")

    err = rejected(with_entries(many))
    assert err.kind == "archive"
    assert "too many entries" in str(err)


def test_too_much_data() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, content in store_files().items():
            zf.writestr(rel, content)
        with zf.open("entities/huge.json", "w") as fh:
            chunk = b" " * (1024 * 1024)
            for _ in range(MAX_UNCOMPRESSED // len(chunk) + 1):
                fh.write(chunk)
    data = buf.getvalue()
    assert len(data) < MAX_UNCOMPRESSED // 100  # a small archive...
    err = rejected(data)  # ...that unpacks to too much
    assert err.kind == "archive"
    assert "too much data" in str(err)


def _patch_entry(data: bytes, name: bytes, *, size: int | None = None, flag: int = 0) -> bytes:
    """Make an entry lie in its headers (local and central): its size, or its flags."""
    out = bytearray(data)
    i = out.find(b"PK\x03\x04")
    while i != -1:  # local header: flags at 6, uncompressed size at 22, name length at 26
        n = struct.unpack_from("<H", out, i + 26)[0]
        if out[i + 30 : i + 30 + n] == name:
            if size is not None:
                struct.pack_into("<I", out, i + 22, size)
            out[i + 6] |= flag
        i = out.find(b"PK\x03\x04", i + 4)
    j = out.find(b"PK\x01\x02")
    while j != -1:  # central header: flags at 8, uncompressed size at 24, name length at 28
        n = struct.unpack_from("<H", out, j + 28)[0]
        if out[j + 46 : j + 46 + n] == name:
            if size is not None:
                struct.pack_into("<I", out, j + 24, size)
            out[j + 8] |= flag
        j = out.find(b"PK\x01\x02", j + 4)
    return bytes(out)


def test_declared_sizes_are_not_trusted() -> None:
    data = zip_bytes({**store_files(), "entities/lie.json": "[" + " " * 5000 + "]"})
    lying = _patch_entry(data, b"entities/lie.json", size=10)
    with zipfile.ZipFile(io.BytesIO(lying)) as zf:
        assert zf.getinfo("entities/lie.json").file_size == 10
    err = rejected(lying)
    assert err.kind == "archive"
    assert "entities/lie.json" in str(err)


def test_read_budget_stops_a_lying_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    # with a small budget, the real (not the declared) size is what counts
    import polang.store.archive as archive

    monkeypatch.setattr(archive, "MAX_UNCOMPRESSED", 3000)
    data = zip_bytes({**store_files(), "entities/big.json": "[" + " " * 2500 + "]"})
    err = rejected(data)
    assert "too much data" in str(err)


SEGMENT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/\\\x00"), min_size=1, max_size=8
).filter(lambda s: s not in (".", ".."))


@given(st.lists(SEGMENT, min_size=1, max_size=5))
def test_plain_relative_names_are_safe(parts: list[str]) -> None:
    assume(not (len(parts[0]) >= 2 and parts[0][1] == ":" and parts[0][0].isalpha()))
    assert unsafe_name_reason("/".join(parts)) is None
    assert unsafe_name_reason("/".join(parts) + "/") is None  # a directory entry


@given(st.lists(SEGMENT, max_size=3), st.lists(SEGMENT, max_size=3))
def test_any_dot_dot_segment_is_unsafe(before: list[str], after: list[str]) -> None:
    assert unsafe_name_reason("/".join([*before, "..", *after])) is not None
    assert unsafe_name_reason("/" + "/".join([*before, "x"])) is not None
