"""The wheel ships every package, the grammars and the fixed rules."""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(REPO / "src").parts)
        for p in (REPO / "src" / "polang").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_fixed_rules_and_grammars_are_installed() -> None:
    rules = importlib.resources.files("polang.rules")
    assert rules.joinpath("decision.dl").read_text().strip()
    assert rules.joinpath("hierarchy.dl").read_text().strip()
    grammar = importlib.resources.files("polang.language").joinpath("grammar")
    assert grammar.joinpath("policy.lark").read_text().strip()
    assert grammar.joinpath("schema.lark").read_text().strip()
