"""The conformance runner: decide every request of a corpus laid out like the pack.

Follows ``conformance/README.md``: schema (human form), policies as one set with
positional ids ``policy0..``, entities parsed with the schema (action entities from the
schema too), strict validation compared with ``shouldValidate``, and per request the
decision, the set of reasons and the set of erroring policy ids.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.errors import PolangError
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import Schema, parse_schema
from polang.language.validate import validate_policies, validate_request


@dataclass(slots=True)
class Failure:
    file: str
    request: str
    what: str

    def __str__(self) -> str:
        return f"{self.file} [{self.request}]: {self.what}"


@dataclass(slots=True)
class Summary:
    files: int = 0
    requests: int = 0
    decisions_ok: int = 0
    reasons_ok: int = 0
    errors_ok: int = 0
    validation_ok: int | None = None
    validation_checked: int = 0
    failed_requests: int = 0
    failures: list[Failure] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "requests": self.requests,
            "decisions_ok": self.decisions_ok,
            "reasons_ok": self.reasons_ok,
            "errors_ok": self.errors_ok,
            "validation_ok": self.validation_ok,
            "failed_requests": self.failed_requests,
        }


def test_files(root: Path) -> Iterator[Path]:
    """Every test file of a pack-shaped directory, in a stable order."""
    for p in sorted((root / "corpus-tests").glob("*.json")):
        if not p.name.endswith(".entities.json"):
            yield p
    yield from sorted((root / "tests").glob("*/*.json"))


def run_file(
    root: Path, path: Path, summary: Summary, *, backend: str = "compiled", validate: bool = True
) -> None:
    """Run one test file, adding its counts and failures to ``summary``."""
    rel = str(path.relative_to(root))
    spec = json.loads(path.read_text("utf-8"))
    summary.files += 1
    requests = spec.get("requests", [])

    def fail_all(what: str) -> None:
        summary.requests += len(requests)
        summary.failed_requests += len(requests)
        summary.failures.append(Failure(rel, "*", what))

    try:
        schema_file = root / spec["schema"]
        schema: Schema = parse_schema(schema_file.read_text("utf-8"), str(schema_file))
        policy_file = root / spec["policies"]
        policies = parse_policies(policy_file.read_text("utf-8"), str(policy_file))
        entities_file = root / spec["entities"]
        store = parse_entities(entities_file.read_text("utf-8"), schema)
    except PolangError as e:
        fail_all(f"could not load: {e}")
        return
    ids = {f"policy{i}": p for i, p in enumerate(policies)}
    validators = (validate_policies, validate_request) if validate else None
    if validators is not None:
        findings = validators[0](ids, schema)
        ok = (not findings) == bool(spec.get("shouldValidate"))
        summary.validation_checked += 1
        summary.validation_ok = (summary.validation_ok or 0) + int(ok)
        if not ok:
            first = "; ".join(str(f) for f in findings[:2])
            summary.failures.append(
                Failure(
                    rel,
                    "validation",
                    f"shouldValidate={spec.get('shouldValidate')} but found "
                    f"{len(findings)} findings {first}",
                )
            )
    try:
        authorizer = Authorizer(ids, backend=backend)
    except PolangError as e:
        fail_all(f"could not compile: {e}")
        return
    facts = EntityFacts(store)
    for i, req in enumerate(requests):
        summary.requests += 1
        name = req.get("description") or f"request {i}"
        try:
            principal = parse_entity_uid_json(req["principal"], f"$.requests[{i}].principal")
            action = parse_entity_uid_json(req["action"], f"$.requests[{i}].action")
            resource = parse_entity_uid_json(req["resource"], f"$.requests[{i}].resource")
            context = parse_context(
                req.get("context", {}), schema, action, path=f"$.requests[{i}].context"
            )
            if validators is not None and req.get("validateRequest"):
                problems = validators[1](principal, action, resource, context, schema)
                if problems:
                    raise _RequestInvalid("; ".join(str(p) for p in problems))
        except (PolangError, _RequestInvalid) as e:
            summary.failed_requests += 1
            summary.failures.append(Failure(rel, name, f"request rejected: {e}"))
            continue
        d = authorizer.is_authorized(principal, action, resource, context, facts)
        want_reasons = set(req.get("reason", []))
        want_errors = set(req.get("errors", []))
        got_errors = {e.policy_id for e in d.errors}
        ok_d = d.decision == req["decision"]
        ok_r = set(d.reasons) == want_reasons
        ok_e = got_errors == want_errors
        summary.decisions_ok += ok_d
        summary.reasons_ok += ok_r
        summary.errors_ok += ok_e
        if not (ok_d and ok_r and ok_e):
            summary.failed_requests += 1
            summary.failures.append(
                Failure(
                    rel,
                    name,
                    f"expected {req['decision']} reasons={sorted(want_reasons)} "
                    f"errors={sorted(want_errors)}; got {d.decision} reasons={sorted(d.reasons)} "
                    f"errors={sorted(got_errors)} "
                    f"({'; '.join(e.policy_id + ': ' + e.error for e in d.errors)})",
                )
            )


class _RequestInvalid(Exception):
    pass


def run_corpus(
    root: Path | str,
    *,
    backend: str = "compiled",
    validate: bool = True,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    """Run a pack: a directory laid out like it, a ``.tar.gz`` of one, or a directory that
    holds only such an archive (as ``../shared/conformance`` does)."""
    with _unpacked(Path(root)) as where:
        files = list(test_files(where))
        if not files:
            raise PolangError(
                f"{root}: no conformance test files (expected corpus-tests/*.json or "
                "tests/*/*.json, or a .tar.gz archive of them)"
            )
        if limit is not None:
            files = files[:limit]
        summary = Summary()
        for n, f in enumerate(files, 1):
            run_file(where, f, summary, backend=backend, validate=validate)
            if progress is not None:
                progress(n, len(files))
        return summary


@contextmanager
def _unpacked(root: Path) -> Iterator[Path]:
    """The pack's directory; an archive is extracted to a temporary one for the run."""
    archive: Path | None = None
    if root.is_file() and root.name.endswith((".tar.gz", ".tgz")):
        archive = root
    elif root.is_dir() and not any(test_files(root)):
        found = sorted(root.glob("*.tar.gz")) + sorted(root.glob("*.tgz"))
        archive = found[0] if len(found) == 1 else None
    if archive is None:
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="polang-corpus-") as tmp:
        try:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as e:
            raise PolangError(f"{archive}: cannot extract the conformance pack: {e}") from e
        yield Path(tmp)
