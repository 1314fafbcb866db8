"""Store tools: validate, pack a directory into ``.parc``, convert a legacy file.

Each tool loads the store with the same loader the engine uses, so "the tool accepts
it" and "the engine accepts it" mean the same thing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from polang.config import Config
from polang.errors import PolangError, PolicyStoreError
from polang.inputs.fields import is_version
from polang.inputs.problems import PolicyStoreLoadError, Problems, StoreProblem
from polang.language.entities import entity_to_json
from polang.language.parser import parse_policies
from polang.language.validate import validate_policies
from polang.store.archive import write_archive
from polang.store.build import build_store
from polang.store.layout import MANIFEST, build_manifest, read_directory, read_layout
from polang.store.model import PolicyStore
from polang.store.schema_text import SchemaPrintError, schema_to_text
from polang.store.source import PolicyStoreSource

DEFAULT_POLANG_VERSION = "4.0.0"
DEFAULT_STORE_VERSION = "1.0.0"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_source(source: PolicyStoreSource | str | os.PathLike[str]) -> PolicyStoreSource:
    if isinstance(source, PolicyStoreSource):
        return source
    return PolicyStoreSource.from_location(source)


def _problem_dicts(problems: Iterable[StoreProblem]) -> list[dict[str, Any]]:
    return [
        {"kind": p.kind, "file": p.file, "location": p.location, "message": p.message}
        for p in problems
    ]


def validate_store(
    source: PolicyStoreSource | str | os.PathLike[str],
    config: Config | None = None,
    *,
    strict: bool | None = None,
) -> dict[str, Any]:
    """Load and check a store; never raises for a bad store, reports instead.

    Returns ``{"valid", "source", "summary", "problems", "warnings", "validation_errors"}``:
    ``problems`` are store problems (``kind``, ``file``, ``location``, ``message``);
    ``warnings`` what the engine accepts but flags (unknown fields, SHA-1 checksums);
    ``validation_errors`` are strict schema validation findings of the policies and
    templates.

    ``strict=True`` checks as strictly as polang can: unknown fields are problems (not
    warnings) and schema validation runs. ``None`` (the default): unknown fields warn,
    schema validation follows ``ENGINE_STRICT_SCHEMA_VALIDATION``. ``False``: unknown
    fields warn and schema validation is skipped.
    """
    config = config or Config()
    schema_strict = config.strict_schema_validation if strict is None else strict
    out: dict[str, Any] = {
        "valid": False,
        "source": str(source),
        "summary": None,
        "problems": [],
        "warnings": [],
        "validation_errors": [],
    }
    try:
        src = _as_source(source)
        out["source"] = src.describe()
        store = src.load(config, strict=bool(strict))
    except PolicyStoreLoadError as e:
        out["problems"] = _problem_dicts(e.problems)
        if e.total > len(e.problems):
            out["problems"].append(
                {
                    "kind": e.problems[-1].kind,
                    "file": "",
                    "location": None,
                    "message": f"... and {e.total - len(e.problems)} more problems (MAX_PROBLEMS)",
                }
            )
        return out
    except PolangError as e:
        out["problems"] = [{"kind": "source", "file": "", "location": None, "message": str(e)}]
        return out
    out["summary"] = store.summary()
    out["warnings"] = _problem_dicts(store.warnings)
    if schema_strict:
        findings = validate_policies({**store.policies, **store.templates}, store.schema)
        out["validation_errors"] = [str(f) for f in findings if f.severity == "error"]
    out["valid"] = not out["validation_errors"]
    return out


def pack_store(
    directory: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    config: Config | None = None,
) -> dict[str, Any]:
    """Check a directory store and write it as a ``.parc`` with a fresh manifest.

    Any ``manifest.json`` in the directory is replaced by one computed now. Raises
    ``PolicyStoreLoadError`` when the directory is not a valid store.
    """
    config = config or Config()
    root = Path(directory)
    out = Path(out_path)
    src = PolicyStoreSource.directory(root)
    problems = Problems(src.describe())
    if not root.is_dir():
        problems.fail("source", str(root), "not a directory")
    try:
        out.resolve().relative_to(root.resolve())
    except ValueError:
        pass
    else:
        problems.fail("source", str(out), "the archive must be written outside the store")
    files, dirs = read_directory(root, problems=problems)
    files.pop(MANIFEST, None)
    raw = read_layout(
        files, dirs, fmt="directory", source=src.describe(), config=config, problems=problems
    )
    store = build_store(raw, config, problems)
    manifest = build_manifest(files, store.id, _now())
    files[MANIFEST] = (json.dumps(manifest, indent=2) + "\n").encode()
    if "policies" in dirs and not any(n.startswith("policies/") for n in files):
        files["policies/"] = b""  # keep the (empty) required folder
    try:
        write_archive(files, out)
    except OSError as e:
        raise PolicyStoreError(f"{out}: cannot write the archive: {e.strerror or e}") from None
    summary = store.summary()
    summary["archive"] = str(out)
    summary["files"] = len(manifest["files"])
    return summary


def _safe_name(pid: str, used: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", pid).strip(".") or "policy"
    name, n = base, 2
    while name.lower() in used:
        name = f"{base}-{n}"
        n += 1
    used.add(name.lower())
    return name


def _entity_json(store: PolicyStore) -> list[dict[str, Any]]:
    return [entity_to_json(e) for e in sorted(store.default_entities, key=lambda e: e.uid)]


def convert_legacy(
    legacy_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    config: Config | None = None,
) -> dict[str, Any]:
    """Write a legacy JSON/YAML store as a directory store (``ENGINE_POLICY_STORE_ID``
    of ``config`` selects the store of a multi-store file).

    The legacy store is checked in full first; ``out_dir`` must not exist or be empty.
    The result loads to the same policies, schema, issuers and entities.
    """
    config = config or Config()
    src = PolicyStoreSource.legacy_file(legacy_path)
    if not Path(legacy_path).is_file():
        Problems(src.describe()).fail("source", str(legacy_path), "no such file")
    raw = src.read_raw(config)
    store = build_store(raw, config, Problems(src.describe()))
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PolicyStoreError(f"{out}: the output directory must not exist or must be empty")

    if raw.schema_format == "polang" and raw.schema is not None:
        schema_text = raw.schema.text
    else:
        try:
            schema_text = schema_to_text(store.schema)
        except SchemaPrintError as e:
            raise PolicyStoreError(f"{legacy_path}: the schema cannot be converted: {e}") from e

    version = store.version if store.version and is_version(store.version) else None
    now = _now()
    store_rec: dict[str, Any] = {"id": store.id, "name": store.name}
    if store.description:
        store_rec["description"] = store.description
    store_rec.update(version=version or DEFAULT_STORE_VERSION, created_date=now, updated_date=now)
    metadata = {
        "polang_version": store.polang_version or DEFAULT_POLANG_VERSION,
        "policy_store": store_rec,
    }
    files: dict[str, str] = {
        "metadata.json": json.dumps(metadata, indent=2) + "\n",
        "schema.polangschema": schema_text if schema_text.endswith("\n") else schema_text + "\n",
    }
    used: dict[str, set[str]] = {"policies": set(), "templates": set()}
    for part in raw.policies:
        pid = part.expected_id or ""
        folder = "templates" if pid in store.templates else "policies"
        text = part.text
        if parse_policies(text, filename=part.parse_name)[0].policy_id is None:
            text = f"@id({json.dumps(pid)})\n" + text
        if not text.endswith("\n"):
            text += "\n"
        files[f"{folder}/{_safe_name(pid, used[folder])}.polang"] = text
    if len(store.default_entities):
        files["entities/default.json"] = json.dumps(_entity_json(store), indent=2) + "\n"
    if raw.issuer_records:
        files["trusted-issuers/issuers.json"] = (
            json.dumps(raw.issuer_records, indent=2, ensure_ascii=False) + "\n"
        )

    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "policies").mkdir(exist_ok=True)
        for rel, text in files.items():
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PolicyStoreError(f"{out}: cannot write the store: {e.strerror or e}") from None
    converted = PolicyStoreSource.directory(out).load(config)
    summary = converted.summary()
    summary["directory"] = str(out)
    if version is None:
        summary["note"] = (
            f"the legacy store has no X.Y.Z version; metadata.json says {DEFAULT_STORE_VERSION}"
        )
    return summary
