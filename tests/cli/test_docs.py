"""docs/cli.md matches the command line: every command ``polang --help`` lists has its
section, and every option of a command is named in that section (or, for the options all
commands share, in "What every command shares")."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from polang.cli import build_parser

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
SECTIONS = {s.splitlines()[0]: s for s in re.split(r"\n(?=## )", DOC)}
SHARED = SECTIONS["## What every command shares"]


def commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def options(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from options(sub)
        yield from (o for o in action.option_strings if o not in ("-h", "--help"))


def section(command: str) -> str:
    """The sections whose heading names ``polang COMMAND`` (some share one heading)."""
    found = [text for head, text in SECTIONS.items() if f"`polang {command}`" in head]
    return "\n".join(found)


def test_every_command_has_a_section_and_is_listed() -> None:
    listing = DOC.split("```", 2)[1]
    for name, _ in commands():
        assert section(name), f"docs/cli.md has no section for polang {name}"
        assert f"polang {name} " in listing, f"polang {name} is not in the list at the top"


def test_every_option_is_documented_with_its_command() -> None:
    missing = [
        (name, option)
        for name, parser in commands()
        for option in options(parser)
        if option not in section(name) and option not in SHARED
    ]
    assert missing == []
