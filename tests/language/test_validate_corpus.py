"""Conformance: strict validation agrees with ``shouldValidate`` on every corpus test file.

Each test file names a schema (human form) and a policy set; policy ids are positional
(``policy0``, ``policy1``...) as the corpus README says. The whole pack is one test, so a
regression shows up as a compact list of the files that disagree, with their findings.
"""

from __future__ import annotations

import json
from pathlib import Path

from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.validate import validate_policies

EXPECTED_FILES = 3979


def _test_files(root: Path) -> list[Path]:
    files = sorted((root / "corpus-tests").glob("*.json"))
    files += sorted((root / "tests").glob("*/*.json"))
    return [f for f in files if not f.name.endswith(".entities.json")]


def test_should_validate_agrees_on_every_file(corpus_dir: Path) -> None:
    files = _test_files(corpus_dir)
    assert len(files) == EXPECTED_FILES
    failures: list[str] = []
    for f in files:
        spec = json.loads(f.read_text())
        schema_path = corpus_dir / spec["schema"]
        policies_path = corpus_dir / spec["policies"]
        try:
            schema = parse_schema(schema_path.read_text(), str(schema_path))
            policies = parse_policies(policies_path.read_text(), str(policies_path))
            found = validate_policies({f"policy{i}": p for i, p in enumerate(policies)}, schema)
        except Exception as exc:  # a crash is a disagreement, reported with the rest
            failures.append(f"{f.name}: {type(exc).__name__}: {exc}")
            continue
        if (found == []) != spec["shouldValidate"]:
            detail = "; ".join(str(x) for x in found[:3]) or "no findings"
            failures.append(f"{f.name}: shouldValidate={spec['shouldValidate']}: {detail}")
    agreed = len(files) - len(failures)
    rate = 100.0 * agreed / len(files)
    print(f"shouldValidate agreement: {agreed}/{len(files)} ({rate:.2f}%)")
    assert not failures, f"{len(failures)} disagreements:\n" + "\n".join(failures[:50])
