"""Commands for policy authors and engine developers: ``validate``, ``rules``,
``conformance``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from polang.cli._common import add_command, engine_config, progress_bar, read_text, store_config
from polang.errors import PolangError


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a store (any source) or loose policy files against a schema."""
    from polang.language.parser import parse_policies  # polang --help stays fast
    from polang.language.schema import parse_schema, parse_schema_json
    from polang.language.validate import validate_policies

    findings: list[Any] = []
    if args.schema:
        text = read_text(args.schema, "schema")
        schema = (
            parse_schema_json(text, args.schema)
            if args.schema.endswith(".json")
            else parse_schema(text, args.schema)
        )
        policies: dict[str, Any] = {}
        for f in args.target:
            for i, p in enumerate(parse_policies(read_text(f, "policies"), f)):
                policies[p.policy_id or f"{f}#{i}"] = p
        findings = validate_policies(policies, schema)
    else:
        if len(args.target) != 1:
            raise PolangError("give one store, or policy files with --schema")
        from polang.store.source import PolicyStoreSource  # polang --help stays fast

        config = store_config(args.target[0], None)
        store = PolicyStoreSource.from_config(config).load(config)
        findings = validate_policies({**store.all_policies(), **store.templates}, store.schema)
    from polang.language.values import printable  # polang --help stays fast

    for f in findings:
        print(printable(str(f)))  # one line each, whatever the ids and names hold
    print(f"{len(findings)} finding(s)" if findings else "valid")
    return 1 if findings else 0


def cmd_rules(args: argparse.Namespace) -> int:
    """Print the Datalog program the policies lower to (``--sql``: the SQL it becomes)."""
    from polang.datalog.lower import lower_policies  # polang --help stays fast
    from polang.language.parser import parse_policies

    if args.dialect is not None and not args.sql:
        raise PolangError("--dialect is for --sql")
    schema = None
    pairs: list[Any] = []
    if args.store:
        if args.policies or args.schema:
            raise PolangError("--store cannot be combined with policy files or --schema")
        from polang.store import PolicyStoreSource  # polang --help stays fast

        store = PolicyStoreSource.from_location(args.store).load(engine_config(args.config))
        schema = store.schema
        pairs = list(store.all_policies().items())
    else:
        if not args.policies:
            raise PolangError("give .polang files, or a store with --store")
        index = 0
        for f in args.policies:
            for p in parse_policies(read_text(f, "policies"), f):
                pairs.append((p.policy_id or f"policy{index}", p))
                index += 1
        if args.schema:
            # polang --help stays fast
            from polang.language.schema import parse_schema, parse_schema_json

            text = read_text(args.schema, "schema")  # reported when malformed
            schema = (
                parse_schema_json(text, args.schema)
                if args.schema.endswith(".json")
                else parse_schema(text, args.schema)
            )
    program = lower_policies(pairs)
    if not args.sql:
        sys.stdout.write(program.text())
        return 0
    if schema is None:
        raise PolangError("--sql lays the tables out by the schema: give --schema or --store")
    try:
        from polang.sql import program_to_sql  # polang --help stays fast
    except ImportError as e:
        raise PolangError(
            f"--sql needs the {e.name or 'sqlglot'} package: pip install 'polang[duckdb]'"
        ) from None
    sys.stdout.write(program_to_sql(program, schema, dialect=args.dialect or "duckdb"))
    return 0


def cmd_conformance(args: argparse.Namespace) -> int:
    """Run a corpus laid out like the conformance pack; last line is one JSON object."""
    from polang.conformance import run_corpus  # polang --help stays fast

    with progress_bar("conformance", "files") as progress:
        summary = run_corpus(
            args.dir,
            backend=args.backend,
            validate=not args.no_validation,
            limit=args.limit,
            progress=progress,
        )
    from polang.language.values import printable  # polang --help stays fast

    for f in summary.failures[: args.show]:
        print(printable(str(f)))
    if len(summary.failures) > args.show:
        print(f"... and {len(summary.failures) - args.show} more failures")
    print(json.dumps(summary.to_dict()))
    return 0 if not summary.failures else 1


VALIDATE_EXAMPLES = """examples:
  polang validate examples/stores/directory
  polang validate --schema examples/stores/directory/schema.polangschema my-policy.polang

exit status: 0 valid, 1 findings (each printed), 2 a file cannot be read or parsed
"""
RULES_EXAMPLES = """examples:
  polang rules examples/stores/directory/policies/guards.polang
  polang rules policies/*.polang --schema schema.polangschema
  polang rules --store examples/stores/directory --sql
  polang rules --store examples/stores/directory --sql --dialect spark

exit status: 0, or 2 when a file cannot be read or parsed
"""
CONFORMANCE_EXAMPLES = """examples:
  polang conformance ../shared/conformance
  polang conformance ./my-pack --limit 100 --show 10

The last line is one JSON object with the counts.
exit status: 0 everything agrees, 1 failures (listed), 2 the corpus cannot be read
"""


def register(sub: Any) -> None:
    p = add_command(
        sub, "validate", "strictly validate a store's policies, or policy files", VALIDATE_EXAMPLES
    )
    p.add_argument(
        "target", nargs="+", help="a store (directory, .parc, legacy file, URL), or .polang files"
    )
    p.add_argument(
        "--schema", metavar="FILE", help="schema (.polangschema or JSON) for loose policy files"
    )
    p.set_defaults(func=cmd_validate)

    p = add_command(
        sub, "rules", "print the Datalog program that policies lower to", RULES_EXAMPLES
    )
    p.add_argument("policies", nargs="*", help=".polang files")
    p.add_argument(
        "--schema", metavar="FILE", help="a .polangschema (or JSON .json) file, checked for errors"
    )
    p.add_argument("--store", metavar="STORE", help="a store's policies and schema (no files)")
    p.add_argument(
        "--config", metavar="FILE", help="ENGINE_* properties (JSON or YAML) for loading --store"
    )
    p.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL the policies become (docs/sql.md; needs a schema)",
    )
    p.add_argument(
        "--dialect",
        choices=["duckdb", "spark"],
        help="SQL dialect for --sql (default duckdb)",
    )
    p.set_defaults(func=cmd_rules)

    p = add_command(sub, "conformance", "run a conformance corpus", CONFORMANCE_EXAMPLES)
    p.add_argument(
        "dir", help="a directory laid out like the conformance pack, or a .tar.gz of one"
    )
    p.add_argument(
        "--backend",
        default="compiled",
        choices=["compiled", "pydatalog"],
        help="the backend under test (default: compiled)",
    )
    p.add_argument(
        "--limit", type=int, default=None, metavar="N", help="run only the first N test files"
    )
    p.add_argument(
        "--show", type=int, default=50, metavar="N", help="how many failures to list (default 50)"
    )
    p.add_argument(
        "--no-validation", action="store_true", help="skip the shouldValidate comparison"
    )
    p.set_defaults(func=cmd_conformance)
