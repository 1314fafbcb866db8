"""The wheel ships every package, the grammars and the fixed rules; the metadata is the
one ``python -m build`` accepts without a warning; the lowest-versions CI run pins every
direct dependency at the lower bound ``pyproject.toml`` declares."""

from __future__ import annotations

import importlib.resources
import re
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOWEST = REPO / ".ci" / "lowest-constraints.txt"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO / "src").parts)
        for p in (REPO / "src" / "polang").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_data_directories_are_packages_with_declared_data() -> None:
    """A directory of data inside a package is listed as a package of its own with its
    files declared (else setuptools warns "Package would be ignored")."""
    setuptools = pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    data = setuptools["package-data"]
    for d in (REPO / "src" / "polang").rglob("*"):
        if not d.is_dir() or d.name == "__pycache__" or (d / "__init__.py").exists():
            continue
        files = [f for f in d.iterdir() if f.is_file() and not f.name.endswith(".pyc")]
        if not files:
            continue
        name = ".".join(d.relative_to(REPO / "src").parts)
        assert name in listed, f"{name}: list it in [tool.setuptools] packages"
        patterns = data.get(name, [])
        for f in files:
            assert any(Path(f.name).match(p) for p in patterns), f"{f}: not in package-data"


def test_fixed_rules_and_grammars_are_installed() -> None:
    rules = importlib.resources.files("polang.rules")
    assert rules.joinpath("decision.dl").read_text().strip()
    assert rules.joinpath("hierarchy.dl").read_text().strip()
    grammar = importlib.resources.files("polang.language").joinpath("grammar")
    assert grammar.joinpath("policy.lark").read_text().strip()
    assert grammar.joinpath("schema.lark").read_text().strip()


def test_metadata() -> None:
    data = pyproject()
    project = data["project"]
    assert project["license"] == "Apache-2.0"  # an SPDX expression, not a table
    assert project["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639
    assert project["authors"] == [{"name": "polang contributors"}]
    assert project["scripts"] == {"polang": "polang.cli:main"}
    assert "wheel" not in " ".join(data["build-system"]["requires"])
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    test_extra = " ".join(project["optional-dependencies"]["test"])
    assert "build" in test_extra and "twine" in test_extra


def _name(requirement: str) -> str:
    m = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert m, requirement
    return re.sub(r"[-_.]+", "-", m.group()).lower()


def test_lowest_constraints_pin_every_direct_dependency_at_its_lower_bound() -> None:
    """CI's second run installs these: they must be exactly the declared lower bounds."""
    bounds = {}
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    web = [*extras["fastapi"], *extras["flask"], *extras["django"]]
    servers = [r for r in extras["test"] if _name(r) == "uvicorn"]  # the integrations' tests
    # polang.filtering's extra and the database drivers of its tests
    drivers = [r for r in extras["test"] if _name(r) in ("psycopg", "pymysql")]
    web += [*extras["filtering"], *extras["sqlalchemy"], *drivers]
    # polang[otel] and the SDK its tests export with
    web += [*extras["otel"], *(r for r in extras["test"] if _name(r) == "opentelemetry-sdk")]
    for req in [*project["dependencies"], *extras["duckdb"], *extras["spark"], *web, *servers]:
        m = re.search(r">=\s*([0-9][^,;\s]*)", req)
        assert m, f"{req}: every dependency has a lower bound"
        bounds[_name(req)] = m.group(1)
    pins = {}
    for line in LOWEST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, line
            pins[_name(name)] = version.strip()
    assert pins == bounds
