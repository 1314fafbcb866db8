"""What every command shares: ``--version``, ``python -m polang``, help text, one error
line for OS errors, stdout kept for the answer, and a parser that imports nothing heavy."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from polang.cli import COMMAND_MODULES, build_parser, main

from .helpers import READ, REQUESTS, STORE, Capsys, run, write_json


def test_version(capsys: Capsys) -> None:
    import polang

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"polang {polang.__version__}"


def test_python_dash_m_polang() -> None:
    base = [sys.executable, "-m", "polang", "authorize", "--store", str(STORE)]
    req = ["--action", READ, "--resource", str(REQUESTS / "roadmap.json")]
    proc = subprocess.run(
        [*base, *req, "--principal", str(REQUESTS / "alice.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "ALLOW"
    version = subprocess.run(
        [sys.executable, "-m", "polang", "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("polang ")


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser and sub-parser, with its command path."""
    out = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                out.extend(_parsers(sub))
    return out


def test_every_option_has_help_and_every_command_examples() -> None:
    parsers = _parsers(build_parser())
    names = {prog for prog, _ in parsers}
    for command in ("authorize", "explain", "who-can", "what-can", "matrix", "validate"):
        assert f"polang {command}" in names
    for prog, parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, f"{prog} {'/'.join(action.option_strings) or action.dest}"
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions) or (
            prog in ("polang", "polang store")
        ):
            assert parser.epilog and "examples:" in parser.epilog, prog
            assert "exit status" in parser.epilog, prog


def test_help_prints_examples(capsys: Capsys) -> None:
    with pytest.raises(SystemExit):
        main(["who-can", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "polang who-can --store" in out
    assert "--resource ENTITY" in out and "JSON file" in out


def test_building_the_parser_imports_no_command_implementation() -> None:
    """``polang --help`` stays fast: the engine, the language, rich, lark, networkx... are
    imported by the handlers, not by the parser. Measured against what ``import polang``
    itself loads (the package's own start-up is the cold-start issue's)."""
    heavy = (
        "polang.engine",
        "polang.language",
        "polang.datalog",
        "polang.store",
        "polang.tokens",
        "polang.config",
        "polang.conformance",
        "rich",
        "lark",
        "networkx",
        "httpx",
        "jwt",
        "yaml",
        "pyDatalog",
    )
    code = (
        "import sys, json\n"
        "import polang\n"
        "before = set(sys.modules)\n"
        "from polang.cli import build_parser\n"
        "build_parser()\n"
        "print(json.dumps([sorted(before), sorted(set(sys.modules) - before)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, added = json.loads(proc.stdout)
    assert len(COMMAND_MODULES) >= 5
    assert [m for m in added if m.startswith(heavy)] == []
    if not any(m.startswith(heavy) for m in before):  # the package itself is lazy: all of it
        assert [m for m in before if m.startswith(heavy)] == []


@pytest.mark.parametrize("target", ["missing-dir", "a-directory"])
def test_os_errors_are_one_error_line(capsys: Capsys, tmp_path: Path, target: str) -> None:
    out_path = tmp_path / "no" / "such" / "x.parc" if target == "missing-dir" else tmp_path
    code, out, err = run(capsys, "store", "pack", str(STORE), "-o", str(out_path))
    assert code == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert str(out_path) in err and "Traceback" not in err
    assert out == ""


def test_std_out_logs_go_to_stderr(capsys: Capsys, tmp_path: Path) -> None:
    config = write_json(tmp_path / "c.json", {"ENGINE_LOG_TYPE": "std_out"})
    code, out, err = run(
        capsys,
        "authorize",
        "--store",
        str(STORE),
        "--config",
        config,
        "--action",
        READ,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        "--principal",
        str(REQUESTS / "alice.json"),
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["decision"] is True  # stdout is the answer alone
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(e.get("log_kind") == "Decision" for e in logs), err
    # and the library outside the CLI writes to stdout again
    from polang.logs import _std_out_target

    assert _std_out_target is None


def test_engine_variables_apply_to_every_command(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ENGINE_*`` environment variables are read as the library reads them; with
    ``ENGINE_LOG_TYPE=std_out`` the answer alone is on stdout."""
    monkeypatch.setenv("ENGINE_LOG_TYPE", "std_out")
    code, out, err = run(
        capsys,
        "authorize",
        "--store",
        str(STORE),
        "--action",
        READ,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        "--principal",
        str(REQUESTS / "alice.json"),
    )
    assert code == 0, err
    assert out.splitlines() == ["ALLOW", "reason: org-members-read"]
    assert any(json.loads(line).get("log_kind") == "Decision" for line in err.splitlines())
    monkeypatch.setenv("ENGINE_LOG_TYPE", "nonsense")
    code, out, err = run(
        capsys,
        "explain",
        "--store",
        str(STORE),
        "--action",
        READ,
        "--resource",
        'Acme::Document::"x"',
    )
    assert (code, out) == (2, "") and "ENGINE_LOG_TYPE" in err


def test_interrupt_is_status_130_without_a_traceback(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polang.cli.dev

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(polang.cli.dev, "cmd_rules", interrupted)
    code, out, err = run(capsys, "rules", "x.polang")
    assert (code, out, err) == (130, "", "interrupted\n")
