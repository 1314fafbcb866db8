"""Start-up stays honest: what ``import polang`` and a first decision load (no timing).

Each check runs in a fresh interpreter (``sys.modules`` of this one is full of everything
the other tests imported).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("networkx", "httpx", "jwt", "yaml", "rich", "lark", "cryptography", "ssl")
"""Libraries a process may never need: each is imported by the call that needs it."""


NOT_FOR_A_FIRST_DECISION = (
    # the token layer (the issuer records' parser included) and the store's readers for
    # other sources
    "polang.tokens",
    "polang.store.legacy",
    "polang.store.remote",
    "polang.http",
    # tooling
    "polang.cli",
    "polang.authoring",
    "polang.language.format",
    "polang.analysis.explain",
    "polang.analysis.query",
    "polang.datalog.pydatalog",
    # standard library modules only some stores or errors need (zipfile: archives;
    # datetime: dated metadata; importlib.resources: brings tempfile and shutil)
    "zipfile",
    "datetime",
    "importlib.resources",
    "tempfile",
    "shutil",
    "urllib.request",
    # start-up cost for nothing: record classes are polang._record's (``@dataclass``
    # compiles each class's methods at import, and ``dataclasses`` brings ``inspect``,
    # ``ast``, ``dis`` and ``tokenize``); ``logging`` for the ``python`` log type only;
    # ``difflib`` for a misspelt key's hint only
    "dataclasses",
    "inspect",
    "logging",
    "difflib",
    # OpenTelemetry (polang[otel], installed here): ENGINE_OTEL=auto never imports it; it
    # reports once the application's SDK has (tests/test_telemetry.py)
    "opentelemetry.trace",
    "opentelemetry.metrics",
    "opentelemetry.context",
)
"""Modules a first decision on a directory store without issuers never imports: each is
imported by the call that needs it (``benchmarks/bench_coldstart.py`` measures the time)."""


def modules_after(code: str, *args: str) -> set[str]:
    """Every module in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def loaded_after(code: str, *args: str) -> set[str]:
    """The HEAVY top-level packages in ``sys.modules`` after ``code`` ran."""
    return {m.split(".")[0] for m in modules_after(code, *args)} & set(HEAVY)


def loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(m.startswith(name + ".") for m in modules)


def test_import_polang_loads_none_of_the_heavy_libraries() -> None:
    assert loaded_after("import polang") == set()


def test_every_public_name_is_importable_from_polang() -> None:
    code = (
        "import polang\n"
        "for name in polang.__all__:\n"
        "    getattr(polang, name)\n"
        "from polang import *\n"
        "assert set(polang.__all__) <= set(dir(polang))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def write_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    (store / "policies").mkdir(parents=True)
    (store / "metadata.json").write_text(
        json.dumps(
            {
                "polang_version": "4.4.0",
                "policy_store": {"id": "s", "name": "S", "version": "1.0.0"},
            }
        )
    )
    (store / "schema.polangschema").write_text(
        'entity User; entity Doc = { "owner": User };\n'
        'action "read" appliesTo { principal: [User], resource: [Doc] };\n'
    )
    (store / "policies" / "p.polang").write_text(
        '@id("owners")\npermit (principal, action == Action::"read", resource)\n'
        "when { resource.owner == principal };\n"
    )
    return store


FIRST_DECISION = (
    "import sys\n"
    "from polang import Engine\n"
    "e = Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1]})\n"
    "alice = {'uid': {'type': 'User', 'id': 'a'}, 'attrs': {}}\n"
    "doc = {'uid': {'type': 'Doc', 'id': 'd'}, 'attrs': {'owner': alice['uid']}}\n"
    "r = e.authorize_unsigned('Action::\"read\"', doc, None, alice)\n"
    "assert r.decision, r\n"
    "e.close()\n"
)


def test_a_first_decision_loads_only_what_it_needs(tmp_path: Path) -> None:
    """An engine on a directory store without issuers or hierarchy, and one decision: none
    of the heavy libraries, lark included (the stored LALR tables build their own trees),
    and none of the modules other stores, tokens, tools or errors need."""
    modules = modules_after(FIRST_DECISION, str(write_store(tmp_path)))
    assert {m.split(".")[0] for m in modules} & set(HEAVY) == set()
    assert [m for m in NOT_FOR_A_FIRST_DECISION if loaded(modules, m)] == []


def test_a_first_decision_uses_sha256_without_openssl_when_it_can(tmp_path: Path) -> None:
    """The store digest takes CPython's own SHA-256 module (hashlib loads OpenSSL)."""
    import importlib.util

    modules = modules_after(FIRST_DECISION, str(write_store(tmp_path)))
    own = [m for m in ("_sha2", "_sha256") if importlib.util.find_spec(m) is not None]
    assert ("hashlib" in modules) == (not own)


@pytest.mark.parametrize(("log_type", "imports_logging"), [("memory", False), ("python", True)])
def test_logging_comes_in_for_the_python_log_type_only(
    tmp_path: Path, log_type: str, imports_logging: bool
) -> None:
    code = FIRST_DECISION.replace(
        "sys.argv[1]}",
        f"sys.argv[1], 'ENGINE_LOG_TYPE': {log_type!r}, 'ENGINE_LOG_LEVEL': 'INFO'}}",
    )
    assert code != FIRST_DECISION
    modules = modules_after(code, str(write_store(tmp_path)))
    assert ("logging" in modules) is imports_logging


@pytest.mark.parametrize(("otel", "imports_it"), [("auto", False), ("off", False), ("on", True)])
def test_opentelemetry_comes_in_for_engine_otel_on_only(
    tmp_path: Path, otel: str, imports_it: bool
) -> None:
    """With the API installed (it is, here) and no SDK set, ``auto`` loads nothing of it:
    at most the empty ``opentelemetry`` namespace package, looked up to find the API."""
    code = FIRST_DECISION.replace("sys.argv[1]}", f"sys.argv[1], 'ENGINE_OTEL': {otel!r}}}")
    assert code != FIRST_DECISION
    modules = modules_after(code, str(write_store(tmp_path)))
    loaded_otel = sorted(m for m in modules if m.split(".")[0] == "opentelemetry")
    assert (loaded_otel not in ([], ["opentelemetry"])) is imports_it, loaded_otel


def test_lark_comes_in_for_a_syntax_errors_message_only() -> None:
    """A policy or schema that parses loads no lark; one that does not gets lark's message
    (and the same trees either way: tests/language/test_lalr.py)."""
    code = (
        "from polang.language.parser import parse_policies\n"
        "from polang.language.schema import parse_schema\n"
        "parse_policies('permit (principal, action, resource);')\n"
        "parse_schema('entity U; action a appliesTo { principal: U, resource: U };')\n"
        "import sys\n"
        "assert 'lark' not in sys.modules\n"
        "from polang.errors import PolicyParseError, SchemaError\n"
        "for parse, text, error in ((parse_policies, 'permit (', PolicyParseError),\n"
        "                           (parse_schema, 'entity ;', SchemaError)):\n"
        "    try:\n"
        "        parse(text)\n"
        "    except error as e:\n"
        "        assert ':1:' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError(text)\n"
    )
    assert loaded_after(code) == {"lark"}


def test_a_hierarchy_beyond_the_small_size_loads_networkx() -> None:
    code = (
        "from polang.datalog.facts import EntityFacts, SMALL_HIERARCHY\n"
        "from polang.language.entities import Entity\n"
        "from polang.language.values import EntityUID as U\n"
        "small = [Entity(U('T', str(i)), parents={U('T', str(i + 1))}) for i in range(10)]\n"
        "EntityFacts(small)\n"
        "import sys\n"
        "assert 'networkx' not in sys.modules\n"
        "big = [Entity(U('T', str(i)), parents={U('T', str(i + 1))})"
        " for i in range(SMALL_HIERARCHY + 1)]\n"
        "assert EntityFacts(big).ancestors_of(U('T', '0'))\n"
    )
    assert "networkx" in loaded_after(code)
