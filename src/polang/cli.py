"""The ``polang`` command line.

Every command is a thin layer over the public API: it parses arguments, calls the
library and prints. Errors from the ``PolangError`` family are printed as they are
(they already say what and where) with exit status 2; a deny is exit status 1 for
``authorize`` so scripts can branch on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from polang.errors import PolangError

Handler = Callable[[argparse.Namespace], int]


def _read(path: str) -> str:
    try:
        return Path(path).read_text("utf-8")
    except OSError as e:
        raise PolangError(f"{path}: cannot read: {e.strerror}") from None


def cmd_rules(args: argparse.Namespace) -> int:
    """Print the Datalog program the policies lower to."""
    from polang.datalog.lower import lower_policies
    from polang.language.parser import parse_policies

    pairs = []
    index = 0
    for f in args.policies:
        for p in parse_policies(_read(f), f):
            pairs.append((p.policy_id or f"policy{index}", p))
            index += 1
    if args.schema:
        from polang.language.schema import parse_schema

        parse_schema(_read(args.schema), args.schema)  # reported when malformed
    sys.stdout.write(lower_policies(pairs).text())
    return 0


def cmd_conformance(args: argparse.Namespace) -> int:
    """Run a corpus laid out like the conformance pack; last line is one JSON object."""
    from polang.conformance import run_corpus

    progress = None
    if sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(transient=True)
        task = bar.add_task("conformance", total=None)
        bar.start()

        def progress(n: int, total: int) -> None:
            bar.update(task, completed=n, total=total)

    try:
        summary = run_corpus(
            args.dir, backend=args.backend, validate=not args.no_validation, limit=args.limit
        )
    finally:
        if progress is not None:
            bar.stop()
    for f in summary.failures[: args.show]:
        print(f)
    if len(summary.failures) > args.show:
        print(f"... and {len(summary.failures) - args.show} more failures")
    print(json.dumps(summary.to_dict()))
    return 0 if not summary.failures else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polang", description="An embeddable, Datalog-backed authorization engine."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("rules", help="print the Datalog program that policies lower to")
    p.add_argument("policies", nargs="+", help=".polang files")
    p.add_argument("--schema", help="a .polangschema file (checked)")
    p.set_defaults(func=cmd_rules)

    p = sub.add_parser("conformance", help="run a conformance corpus directory")
    p.add_argument("dir", help="directory laid out like the conformance pack")
    p.add_argument("--backend", default="compiled", choices=["compiled", "pydatalog"])
    p.add_argument("--limit", type=int, default=None, help="run only the first N test files")
    p.add_argument("--show", type=int, default=50, help="how many failures to list")
    p.add_argument("--no-validation", action="store_true", help="skip shouldValidate checks")
    p.set_defaults(func=cmd_conformance)

    for module in _COMMAND_MODULES:
        try:
            mod = __import__(module, fromlist=["add_cli_commands"])
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        mod.add_cli_commands(sub)
    return parser


_COMMAND_MODULES: tuple[str, ...] = (
    "polang.store.cli",
    "polang.engine_cli",
    "polang.datalog.explain_cli",
)


def main(argv: Sequence[str] | None = None) -> int:
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
