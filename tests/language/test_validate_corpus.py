"""Conformance: strict validation agrees with ``shouldValidate`` on every corpus test file.

Each test file names a schema (human form) and a policy set; policy ids are positional
(``policy0``, ``policy1``...) as the corpus README says. The whole pack is one test, so a
regression shows up as a compact list of the files that disagree, with their findings.
Requests marked ``validateRequest`` are validated against the schema too (after parsing
their context by the action's context type): the corpus expects a decision for each, so
each must conform.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from polang.language.entities import parse_context
from polang.language.parser import parse_policies
from polang.language.schema import Schema, parse_schema
from polang.language.validate import validate_policies, validate_request
from polang.language.values import EntityUID

EXPECTED_FILES = 3979


def _test_files(root: Path) -> list[Path]:
    files = sorted((root / "corpus-tests").glob("*.json"))
    files += sorted((root / "tests").glob("*/*.json"))
    return [f for f in files if not f.name.endswith(".entities.json")]


def _uid(obj: dict[str, Any]) -> EntityUID:
    inner = obj.get("__entity", obj)
    return EntityUID(inner["type"], inner["id"])


def _request_problems(spec: dict[str, Any], schema: Schema) -> tuple[int, list[str]]:
    checked, problems = 0, []
    for req in spec["requests"]:
        if not req.get("validateRequest", True):
            continue
        action = _uid(req["action"])
        context = parse_context(req["context"], schema, action)
        found = validate_request(
            _uid(req["principal"]), action, _uid(req["resource"]), context, schema
        )
        checked += 1
        if found:
            problems.append(f"{req['description']}: {found[0]}")
    return checked, problems


def test_should_validate_agrees_on_every_file(corpus_dir: Path) -> None:
    files = _test_files(corpus_dir)
    assert len(files) == EXPECTED_FILES
    failures: list[str] = []
    requests_checked = 0
    for f in files:
        spec = json.loads(f.read_text())
        schema_path = corpus_dir / spec["schema"]
        policies_path = corpus_dir / spec["policies"]
        try:
            schema = parse_schema(schema_path.read_text(), str(schema_path))
            policies = parse_policies(policies_path.read_text(), str(policies_path))
            found = validate_policies({f"policy{i}": p for i, p in enumerate(policies)}, schema)
            checked, problems = _request_problems(spec, schema)
        except Exception as exc:  # a crash is a disagreement, reported with the rest
            failures.append(f"{f.name}: {type(exc).__name__}: {exc}")
            continue
        if (found == []) != spec["shouldValidate"]:
            detail = "; ".join(str(x) for x in found[:3]) or "no findings"
            failures.append(f"{f.name}: shouldValidate={spec['shouldValidate']}: {detail}")
        requests_checked += checked
        failures.extend(f"{f.name}: request {p}" for p in problems)
    agreed = len(files) - len(failures)
    rate = 100.0 * agreed / len(files)
    print(f"shouldValidate agreement: {agreed}/{len(files)} ({rate:.2f}%)")
    print(f"requests validated against their schema: {requests_checked}")
    assert requests_checked > 30_000
    assert not failures, f"{len(failures)} disagreements:\n" + "\n".join(failures[:50])
