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

from polang._version import __version__
from polang.cli._common import echo
from polang.errors import PolangError

Handler = Callable[[argparse.Namespace], int]

#: The command groups, in the order ``polang --help`` lists them (``polang.cli.<name>``).
COMMAND_MODULES: tuple[str, ...] = (
    "decide",
    "explain",
    "queries",
    "plan",
    "authoring",
    "dev",
    "store",
    "playground",
)


EXAMPLES = """examples:
  polang authorize --store examples/stores/directory --action 'Acme::Action::"read"' \\
      --resource examples/requests/roadmap.json --principal examples/requests/alice.json
  polang explain --store examples/stores/directory --principal examples/requests/alice.json \\
      --action 'Acme::Action::"edit"' --resource examples/requests/roadmap.json
  polang who-can --store examples/stores/directory --entities examples/requests/alice.json \\
      --action 'Acme::Action::"read"' --resource 'Acme::Document::"roadmap"' --context '{}'
  polang store validate examples/stores/legacy.yaml

'polang COMMAND --help' shows each command's options and examples; docs/cli.md has them all.
exit status: 0 success (allow), 1 deny / findings, 2 bad input (one 'error:' line on stderr)
"""


def _version() -> str:
    return f"polang {__version__}"


class _VersionAction(argparse.Action):
    """``--version``, with the version read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polang",
        description="An embeddable, Datalog-backed authorization engine.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def _os_error(e: OSError) -> str:
    """One line for an OSError: the file and the reason, as ``open`` reports them."""
    where = ": ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
    reason = e.strerror or str(e) or type(e).__name__
    return f"{where}: {reason}" if where else reason


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (``polang = "polang.cli:main"``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from polang.logs import redirect_std_out  # after parsing: `polang --help` stays fast

    # ENGINE_LOG_TYPE=std_out: stdout is the command's answer, so log lines go to stderr
    previous = redirect_std_out(sys.stderr)
    try:
        return int(args.func(args))
    except PolangError as e:
        echo(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `polang ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except OSError as e:  # a file that cannot be written, a directory where a file belongs
        echo(f"error: {_os_error(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the shell's status for SIGINT, no traceback
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        redirect_std_out(previous)


__all__ = ["COMMAND_MODULES", "build_parser", "main"]
