"""The house's layers hold: import-linter checks the contracts of pyproject.toml.

``[tool.importlinter]`` states the layers (cli, authoring -> engine -> store -> tokens ->
datalog -> language -> config, http, logs -> inputs -> errors; docs/design.md, "Layers")
and that no package's modules import one another in a circle. An import that points up,
a new circle, or a new module no layer names fails here with the linter's report (the
chain of imports that breaks a contract, file and line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"
"""``lint-imports`` of the interpreter running the tests (no reliance on a script on PATH)."""


def test_imports_keep_the_layers_and_make_no_circles() -> None:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    run = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=REPO,  # pyproject.toml's [tool.importlinter]
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = run.stdout + run.stderr
    start = report.find("Contracts\n")  # from there: without the logo of newer releases
    report = report[start:] if start >= 0 else report
    assert run.returncode == 0, f"import contracts broken (pyproject.toml):\n{report}"
    assert "0 broken" in report, report
