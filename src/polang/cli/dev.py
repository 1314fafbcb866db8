"""Commands for policy authors and engine developers: ``validate``, ``rules``,
``conformance``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from polang.cli._common import read_text, store_config
from polang.errors import PolangError


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a store (any source) or loose policy files against a schema."""
    from polang.language.parser import parse_policies
    from polang.language.schema import parse_schema, parse_schema_json
    from polang.language.validate import validate_policies

    findings: list[Any] = []
    if args.schema:
        text = Path(args.schema).read_text("utf-8")
        schema = (
            parse_schema_json(text, args.schema)
            if args.schema.endswith(".json")
            else parse_schema(text, args.schema)
        )
        policies: dict[str, Any] = {}
        for f in args.target:
            for i, p in enumerate(parse_policies(Path(f).read_text("utf-8"), f)):
                policies[p.policy_id or f"{f}#{i}"] = p
        findings = validate_policies(policies, schema)
    else:
        if len(args.target) != 1:
            raise PolangError("give one store, or policy files with --schema")
        from polang.store.source import PolicyStoreSource

        config = store_config(args.target[0], None)
        store = PolicyStoreSource.from_config(config).load(config)
        findings = validate_policies({**store.all_policies(), **store.templates}, store.schema)
    for f in findings:
        print(f)
    print(f"{len(findings)} finding(s)" if findings else "valid")
    return 1 if findings else 0


def cmd_rules(args: argparse.Namespace) -> int:
    """Print the Datalog program the policies lower to."""
    from polang.datalog.lower import lower_policies
    from polang.language.parser import parse_policies

    pairs = []
    index = 0
    for f in args.policies:
        for p in parse_policies(read_text(f, "policies"), f):
            pairs.append((p.policy_id or f"policy{index}", p))
            index += 1
    if args.schema:
        from polang.language.schema import parse_schema

        parse_schema(read_text(args.schema, "schema"), args.schema)  # reported when malformed
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


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="strictly validate a store's policies, or policy files")
    p.add_argument("target", nargs="+", help="a store, or .polang files with --schema")
    p.add_argument("--schema", help="schema file (.polangschema or JSON) for loose policy files")
    p.set_defaults(func=cmd_validate)

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
