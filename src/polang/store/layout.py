"""The directory layout (shared by directories and ``.parc`` archives) and its manifest.

Both sources reduce to the same thing, a map of relative paths to bytes, so the layout
rules and the manifest check are written once. Files whose name (or a parent folder's)
starts with ``.``, and ``__MACOSX/``, are tooling noise and are ignored everywhere.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from polang.config import Config
from polang.inputs.fields import Checker, is_version, jpath, listing, parse_utc, show
from polang.inputs.files import NOT_REGULAR, InputFileError, describe_mode
from polang.inputs.files import read_regular_file as read_file
from polang.inputs.problems import Problems
from polang.inputs.strict import decode_text, load_json
from polang.store.archive import MAX_ENTRIES, MAX_UNCOMPRESSED
from polang.store.raw import JsonPart, PolicyPart, RawStore, TextPart

METADATA = "metadata.json"
MANIFEST = "manifest.json"
SCHEMA = "schema.polangschema"
LINKS = "templates/links.json"
POLICY_EXT = ".polang"

METADATA_FIELDS = ("polang_version", "policy_store", "policy_store_spec_version")
#: Largest ``policy_store_spec_version`` (Cedarling's directory format version) read.
MAX_SPEC_VERSION = 2**32 - 1
STORE_FIELDS = ("id", "name", "description", "version", "created_date", "updated_date")
MANIFEST_FIELDS = ("policy_store_id", "generated_date", "files")
_CHECKSUM = re.compile(r"(sha256:[0-9a-fA-F]{64}|sha1:[0-9a-fA-F]{40})\Z")
CHECKSUM_FORMS = "sha256:<64 hex digits> or sha1:<40 hex digits> (a git blob hash)"

#: A top-level string under one of these keys marks a single issuer record.
SINGLE_ISSUER_KEYS = ("name", "openid_configuration_endpoint", "configuration_endpoint")

#: Unexpected files reported one by one; the rest are counted in one more problem.
MAX_UNEXPECTED_LISTED = 5

LAYOUT_HELP = (
    "metadata.json, manifest.json, schema.polangschema, policies/*.polang, "
    "templates/*.polang, templates/links.json, entities/*.json, trusted-issuers/*.json, "
    "custom-issuers/*.json"
)


def is_single_issuer_record(data: Mapping[str, Any]) -> bool:
    """Whether a ``trusted-issuers/*.json`` object is one issuer record (Cedarling's form).

    It is when a top-level ``name``, ``openid_configuration_endpoint`` or
    ``configuration_endpoint`` holds a string; otherwise the file is a map of issuer ids to
    records. A map's values are all objects, so the two forms never overlap.
    """
    return any(isinstance(data.get(k), str) for k in SINGLE_ISSUER_KEYS)


def is_ignored(path: str) -> bool:
    """Tooling noise that is not part of a store (dot files, macOS archive folders)."""
    return any(p.startswith(".") or p == "__MACOSX" for p in path.split("/"))


#: The store's problem kind for each reason ``polang.inputs`` gives for a file not read.
_PROBLEM_KINDS = {"link": "unsafe_file", "not_regular": "unsafe_file", "too_large": "limit"}


def read_named_file(
    path: str | os.PathLike[str], limit: int, limit_name: str = "MAX_UNCOMPRESSED"
) -> bytes:
    """A store file the caller names (``.parc``, a legacy file): the path may be a symbolic
    link (followed: mounted stores are links), the file must be regular (a FIFO or a device
    is refused, never waited on) and at most ``limit`` bytes (``StoreFileError``
    otherwise, the limit called ``limit_name``)."""
    return read_regular_file(path, limit, limit_name, only=NOT_REGULAR, follow_links=True)


def read_regular_file(
    path: str | os.PathLike[str],
    limit: int,
    limit_name: str = "MAX_UNCOMPRESSED",
    only: str = "a store holds only regular files and folders",
    *,
    follow_links: bool = False,
) -> bytes:
    """The bytes of a regular file, at most ``limit`` of them (``StoreFileError`` otherwise).

    The one bounded reader (``polang.inputs``), its refusals turned into store problem
    kinds: inside a store a link is never followed and a FIFO or a device never opened.
    """
    try:
        return read_file(path, limit, limit_name, follow_links=follow_links, refusal=only)
    except InputFileError as e:
        raise StoreFileError(_PROBLEM_KINDS.get(e.kind, "source"), e.reason) from None


class StoreFileError(Exception):
    """Why a path was not read (internal: becomes a store problem of ``kind``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def read_directory(root: Path, *, problems: Problems) -> tuple[dict[str, bytes], set[str]]:
    """Every store file under ``root`` (relative POSIX path -> bytes) and every folder.

    Only regular files and folders are read. A symbolic link (even one pointing inside the
    store), a FIFO, a socket or a device is refused by name and never opened, so nothing
    outside the store root is read or quoted. Entries (files and folders) count towards
    :data:`MAX_ENTRIES` and bytes towards :data:`MAX_UNCOMPRESSED`.
    """
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    total = entries = 0
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        folder, rel_dir = stack.pop()
        try:
            with os.scandir(folder) as it:
                listing = sorted(it, key=lambda e: e.name)
        except OSError as e:
            problems.add("source", rel_dir or ".", f"cannot list: {e.strerror or e}")
            continue
        subdirs: list[tuple[Path, str]] = []
        for entry in listing:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if is_ignored(rel):
                continue
            entries += 1
            if entries > MAX_ENTRIES:
                problems.fail(
                    "limit", "", f"more than {MAX_ENTRIES} entries in the store (MAX_ENTRIES)"
                )
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as e:
                problems.add("source", rel, f"cannot read: {e.strerror or e}")
                continue
            if stat.S_ISDIR(mode):
                dirs.add(rel)
                subdirs.append((Path(entry.path), rel))
                continue
            if not stat.S_ISREG(mode):
                problems.add(
                    "unsafe_file",
                    rel,
                    f"{describe_mode(mode)}: a store holds only regular files and folders",
                )
                continue
            try:
                content = read_regular_file(entry.path, MAX_UNCOMPRESSED - total)
            except StoreFileError as e:
                if e.kind == "limit":
                    problems.fail(
                        "limit",
                        "",
                        f"the store holds more than {MAX_UNCOMPRESSED} bytes (MAX_UNCOMPRESSED)",
                    )
                problems.add(e.kind, rel, str(e))
                continue
            total += len(content)
            files[rel] = content
        stack.extend(reversed(subdirs))
    return files, dirs


def _sha256() -> Callable[..., Any]:
    """SHA-256 from CPython's own module when there is one (``_sha2``, 3.12+; ``_sha256``
    before), else from hashlib: every store load computes its digest, and hashlib loads
    OpenSSL (3-7 ms of a cold start). The same digest either way (tests compare)."""
    for name in ("_sha2", "_sha256"):
        try:
            sha256: Callable[..., Any] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
        return sha256
    import hashlib

    return hashlib.sha256


def store_digest(files: Mapping[str, bytes]) -> str:
    """One SHA-256 over every file's path and content (manifest excluded)."""
    sha256 = _sha256()
    h = sha256()
    for name in sorted(files):
        if name == MANIFEST:
            continue
        h.update(name.encode() + b"\0" + sha256(files[name]).digest())
    return h.hexdigest()


def build_manifest(files: Mapping[str, bytes], store_id: str, generated: str) -> dict[str, Any]:
    """A manifest listing exactly ``files`` (``manifest.json`` itself excluded)."""
    import hashlib  # on first use: hashlib loads OpenSSL (start-up time)

    return {
        "policy_store_id": store_id,
        "generated_date": generated,
        "files": {
            name: {
                "size": len(files[name]),
                "checksum": "sha256:" + hashlib.sha256(files[name]).hexdigest(),
            }
            for name in sorted(files)
            if name != MANIFEST
        },
    }


def read_layout(
    files: Mapping[str, bytes],
    dirs: set[str],
    *,
    fmt: str,
    source: str,
    config: Config,
    problems: Problems,
) -> RawStore:
    """Check the layout rules and the manifest; gather every part for the builder."""
    files = {k: v for k, v in files.items() if not is_ignored(k)}
    dirs = {d for d in dirs if not is_ignored(d)}
    raw = RawStore(
        format="archive" if fmt == "archive" else "directory",
        source=source,
        digest=store_digest(files),
    )

    tops = {n.split("/", 1)[0] for n in files if "/" in n}
    if METADATA not in files and len(tops) == 1 and not any("/" not in n for n in files):
        top = next(iter(tops))
        if f"{top}/{METADATA}" in files:
            where = "archive" if fmt == "archive" else "directory"
            problems.fail(
                "missing_file",
                METADATA,
                f"required file is missing (found {top}/{METADATA}: the store files must be "
                f"at the {where} root, not in a folder {top}/)",
            )

    # metadata.json
    if METADATA not in files:
        nested = sorted(n for n in files if n.endswith("/" + METADATA))
        hint = (
            f" (found {nested[0]}: the store files must be at the "
            f"{'archive' if fmt == 'archive' else 'directory'} root)"
            if nested
            else ""
        )
        problems.add("missing_file", METADATA, f"required file is missing{hint}")
    else:
        _read_metadata(files[METADATA], raw, problems)

    if MANIFEST in files:
        _check_manifest(files, raw.id, config, problems)

    if SCHEMA not in files:
        problems.add("missing_file", SCHEMA, "required file is missing (the schema, human form)")
    else:
        text = decode_text(files[SCHEMA], file=SCHEMA, problems=problems)
        if text is not None:
            raw.schema = TextPart(SCHEMA, text)
            raw.schema_format = "polang"

    if "policies" not in dirs:
        problems.add("missing_file", "policies/", "required directory is missing")

    unexpected: list[str] = []
    for name in sorted(files):
        if name in (METADATA, MANIFEST, SCHEMA):
            continue
        top = name.split("/", 1)[0]
        if name == LINKS:
            data = _json_file(files[name], name, problems)
            if data is not None:
                raw.links.append(JsonPart(name, "$", data))
        elif top in ("policies", "templates") and "/" in name and name.endswith(POLICY_EXT):
            text = decode_text(files[name], file=name, problems=problems)
            if text is not None:
                if top == "policies":
                    raw.policies.append(PolicyPart(name, text, role="policies"))
                else:
                    raw.policies.append(PolicyPart(name, text, role="templates"))
        elif top == "entities" and "/" in name and name.endswith(".json"):
            data = _json_file(files[name], name, problems)
            if data is None:
                continue
            if not isinstance(data, list):
                problems.add(
                    "invalid_field",
                    name,
                    "an entity file must be a JSON array of entity objects",
                    "$",
                )
                continue
            for i, item in enumerate(data):
                raw.entities.append(JsonPart(name, jpath("$", i), item))
        elif top == "trusted-issuers" and "/" in name and name.endswith(".json"):
            data = _json_file(files[name], name, problems)
            if data is None:
                continue
            if not isinstance(data, dict):
                problems.add(
                    "invalid_field",
                    name,
                    "an issuer file must be a JSON object: one issuer record, or an object "
                    "mapping issuer ids to issuer records",
                    "$",
                )
                continue
            if is_single_issuer_record(data):
                iid = data.get("id")
                if not isinstance(iid, str) or not iid.strip():
                    iid = PurePosixPath(name).stem  # Cedarling: the file name without .json
                raw.issuers.append(JsonPart(name, "$", data, issuer_id=iid))
                raw.issuer_records[iid] = data
            else:
                raw.issuers.append(JsonPart(name, "$", data))
                raw.issuer_records.update(data)
        elif top == "custom-issuers" and "/" in name and name.endswith(".json"):
            data = _json_file(files[name], name, problems)
            if data is not None:
                raw.custom_issuers.append(JsonPart(name, "$", data))
        else:
            unexpected.append(name)
    for name in unexpected[:MAX_UNEXPECTED_LISTED]:
        problems.add(
            "unexpected_file",
            name,
            f"this file has no place in a policy store (layout: {LAYOUT_HELP})",
        )
    rest = unexpected[MAX_UNEXPECTED_LISTED:]
    if rest:
        problems.add(
            "unexpected_file",
            rest[0],
            f"{len(rest)} more files have no place in a policy store: {listing(rest, 5)}",
        )
    return raw


def _json_file(data: bytes, name: str, problems: Problems) -> Any:
    text = decode_text(data, file=name, problems=problems)
    if text is None:
        return None
    return load_json(text, file=name, problems=problems)


def _read_metadata(data: bytes, raw: RawStore, problems: Problems) -> None:
    meta = _json_file(data, METADATA, problems)
    if meta is None:
        return
    ck = Checker(problems, METADATA)
    rec = ck.obj(meta, "$")
    if rec is None:
        return
    ck.known(rec, "$", METADATA_FIELDS)
    pv = ck.string(rec, "polang_version", "$", required=True)
    if pv is not None and not is_version(pv):
        ck.add("invalid_field", "$.polang_version", f"must have the form X.Y.Z, got {show(pv)}")
    raw.polang_version = pv
    spec = rec.get("policy_store_spec_version")  # Cedarling's format version: read, not used
    if spec is not None and (
        isinstance(spec, bool) or not isinstance(spec, int) or not 0 <= spec <= MAX_SPEC_VERSION
    ):
        ck.add(
            "invalid_field",
            "$.policy_store_spec_version",
            f"must be a whole number from 0 to {MAX_SPEC_VERSION}, got {show(spec)}",
        )
    if "policy_store" not in rec:
        ck.add("missing_field", "$.policy_store", "required field 'policy_store' is missing")
        return
    ps = ck.obj(rec["policy_store"], "$.policy_store")
    if ps is None:
        return
    p = "$.policy_store"
    ck.known(ps, p, STORE_FIELDS)
    raw.id = ck.string(ps, "id", p, required=True)
    raw.name = ck.string(ps, "name", p, required=True)
    raw.description = ck.string(ps, "description", p, non_empty=False)
    version = ck.string(ps, "version", p, required=True)
    if version is not None and not is_version(version):
        ck.add("invalid_field", f"{p}.version", f"must have the form X.Y.Z, got {show(version)}")
    raw.version = version
    for key in ("created_date", "updated_date"):  # both optional (as in Cedarling's stores)
        value = ck.string(ps, key, p)
        if value is None:
            continue
        parsed = parse_utc(value)
        if parsed is None:
            ck.add(
                "invalid_field",
                f"{p}.{key}",
                f"must be an ISO 8601 UTC timestamp (YYYY-MM-DDTHH:MM:SSZ), got {show(value)}",
            )
        setattr(raw, key, parsed)


def _check_manifest(
    files: Mapping[str, bytes], store_id: str | None, config: Config, problems: Problems
) -> None:
    """Checksums (switchable), sizes, store id, and exactly the listed files."""
    import hashlib  # on first use: hashlib loads OpenSSL (start-up time)

    data = _json_file(files[MANIFEST], MANIFEST, problems)
    if data is None:
        return
    ck = Checker(problems, MANIFEST)
    rec = ck.obj(data, "$")
    if rec is None:
        return
    ck.known(rec, "$", MANIFEST_FIELDS)
    mid = ck.string(rec, "policy_store_id", "$", required=True)
    if mid is not None and store_id is not None and mid != store_id:
        problems.add(
            "manifest",
            MANIFEST,
            f"policy_store_id {show(mid)} differs from the id in metadata.json ({show(store_id)})",
            "$.policy_store_id",
        )
    gen = ck.string(rec, "generated_date", "$", required=True)
    if gen is not None and parse_utc(gen) is None:
        ck.add(
            "invalid_field",
            "$.generated_date",
            f"must be an ISO 8601 UTC timestamp (YYYY-MM-DDTHH:MM:SSZ), got {show(gen)}",
        )
    if "files" not in rec:
        ck.add("missing_field", "$.files", "required field 'files' is missing")
        return
    listed = ck.obj(rec["files"], "$.files", "an object mapping file paths to {size, checksum}")
    if listed is None:
        return
    verify = config.policy_store_validate_checksum
    sha1_files: list[str] = []
    for path, entry in listed.items():
        ep = jpath("$.files", path)
        if path == MANIFEST:  # Cedarling's tools list the manifest in itself: skipped
            continue
        e = ck.obj(entry, ep, "an object {size, checksum}")
        if e is None:
            continue
        ck.known(e, ep, ("size", "checksum"))
        size = e.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            ck.add(
                "missing_field" if "size" not in e else "invalid_field",
                jpath(ep, "size"),
                f"must be a whole number of bytes, got {show(size)}",
            )
            size = None
        checksum = e.get("checksum")
        ok = isinstance(checksum, str) and _CHECKSUM.match(checksum) is not None
        if verify and not ok:  # with checksums off, no checksum form rejects a store
            ck.add(
                "missing_field" if "checksum" not in e else "invalid_field",
                jpath(ep, "checksum"),
                f"must have the form {CHECKSUM_FORMS}, got {show(checksum)}",
            )
        if path not in files:
            problems.add("manifest", MANIFEST, f"lists {show(path)}, which is not in the store", ep)
            continue
        content = files[path]
        if size is not None and size != len(content):
            problems.add(
                "manifest",
                path,
                f"size {len(content)} bytes differs from the manifest's {size}",
            )
        if ok and verify:
            assert isinstance(checksum, str)
            algorithm, _, expected = checksum.partition(":")
            expected = expected.lower()
            if algorithm == "sha1":
                sha1_files.append(path)
                actual = git_blob_sha1(content)
                what = "SHA-1 (git blob) checksum"
            else:
                actual = hashlib.sha256(content).hexdigest()
                what = "SHA-256 checksum"
            if actual != expected:
                hint = ""
                if (
                    algorithm == "sha1"
                    and hashlib.sha1(content, usedforsecurity=False).hexdigest() == expected
                ):
                    hint = (
                        " (the manifest holds the file's plain SHA-1: sha1: checksums are "
                        'git blob hashes, SHA-1 of b"blob <size>\\0" + content)'
                    )
                problems.add(
                    "manifest",
                    path,
                    f"{what} {actual} differs from the manifest's {expected}{hint}",
                )
    if sha1_files:
        problems.warn(
            "manifest",
            MANIFEST,
            f"{len(sha1_files)} files are checked with sha1: checksums ({listing(sha1_files, 3)}):"
            " SHA-1 is weak (collisions can be made on purpose); prefer sha256: "
            "(polang store pack writes sha256:)",
        )
    for path in sorted(files):
        if path != MANIFEST and path not in listed:
            problems.add(
                "manifest",
                path,
                "this file is not listed in manifest.json (the manifest must list every file)",
            )


def git_blob_sha1(content: bytes) -> str:
    """The git blob hash of ``content``: SHA-1 of ``b"blob <size>\\0" + content``."""
    import hashlib  # on first use: hashlib loads OpenSSL (start-up time)

    h = hashlib.sha1(b"blob %d\0" % len(content), usedforsecurity=False)
    h.update(content)
    return h.hexdigest()
