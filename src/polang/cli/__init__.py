"""The ``polang`` command line.

Every command is a thin layer over the public API: it parses arguments, calls the
library and prints. Errors from the ``PolangError`` family are printed as they are
(they already say what and where) with exit status 2; a deny is exit status 1 for
``authorize`` so scripts can branch on it.

Adding a command group
----------------------
Write ``polang/cli/<group>.py`` with one function::

    def register(subparsers: argparse._SubParsersAction) -> None:
        p = subparsers.add_parser("name", help="...", epilog="examples: ...")
        p.add_argument("--option", help="...")      # every option has help text
        p.set_defaults(func=cmd_name)               # cmd_name(args) -> exit status

and add ``"<group>"`` to ``COMMAND_MODULES`` below (the order is the order of
``polang --help``). ``polang --help`` must stay fast: a command module imports only the
standard library and ``polang.cli._common`` at module level; the engine, the language,
rich, lark, httpx... are imported inside the handler. ``main`` turns ``PolangError`` and
``OSError`` into one ``error:`` line and exit status 2, so handlers just raise.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]

#: The command groups, in the order ``polang --help`` lists them (``polang.cli.<name>``).
COMMAND_MODULES: tuple[str, ...] = ("decide", "explain", "queries", "dev", "store")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polang", description="An embeddable, Datalog-backed authorization engine."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from polang.errors import PolangError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PolangError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `polang ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0


__all__ = ["COMMAND_MODULES", "build_parser", "main"]
