"""``polang test`` (policy test files, with coverage) and ``polang diff`` (what a policy or
data change does to the access matrix). See docs/testing.md and docs/diff.md."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from polang.cli._common import (
    add_command,
    echo,
    json_arg,
    json_file,
    output_console,
    store_config,
)
from polang.errors import RequestError

TEST_EXAMPLES = """examples:
  polang test examples/tests
  polang test examples/tests --coverage --min-coverage 90
  polang test examples/tests/directory.polangtest.yaml --format json

exit status: 0 every case passed (and coverage reached --min-coverage), 1 a case failed
or coverage fell short, 2 a test file or store could not be read
"""

DIFF_EXAMPLES = """examples:
  polang diff --store old-store/ --store new-store/ --context '{}'
  polang diff --store examples/stores/directory --entities new-users.json --format csv
  polang diff --store main.parc --store branch.parc --exit-code   # in CI
  polang diff --store old/ --store new/ --context '{}' --engine duckdb \\
      --format parquet --output changes.parquet

exit status: 0 (with --exit-code: 0 nothing changed, 1 access changed), 2 bad input
"""


# ---------------------------------------------------------------- polang test


def cmd_test(args: argparse.Namespace) -> int:
    from polang.authoring.testing import run_tests  # polang --help stays fast

    run = run_tests(args.paths)
    want_coverage = args.coverage or args.min_coverage is not None
    short = args.min_coverage is not None and run.percent < args.min_coverage
    if args.format == "json":
        out = run.to_dict(coverage=want_coverage)
        if args.min_coverage is not None:
            out["min_coverage"] = args.min_coverage
            out["coverage_ok"] = not short
        print(json.dumps(out, indent=2))
    else:
        console = output_console()
        for r in run.failed:
            console.print(r.report(width=max(console.width, 60) if console.is_terminal else 100),
                          highlight=False, markup=False)  # fmt: skip
            console.print()
        n = len(run.results)
        console.print(
            f"{run.passed} passed, {len(run.failed)} failed ({n} case{'s' if n != 1 else ''} in "
            f"{len(run.files)} file{'s' if len(run.files) != 1 else ''})",
            markup=False,
        )
        if want_coverage:
            for cov in run.coverage.values():
                console.print(cov.table(width=console.width), markup=False)
            console.print(f"coverage: {run.percent}%", markup=False)
        if short:
            console.print(
                f"coverage {run.percent}% is below --min-coverage {args.min_coverage}%",
                markup=False,
            )
    return 1 if (run.failed or short) else 0


# ---------------------------------------------------------------- polang diff


def _engine(store: str, config_file: str | None) -> Any:
    from polang.engine import Engine  # polang --help stays fast

    return Engine(store_config(store, config_file))


DIFF_ENGINES = ("in-process", "duckdb", "spark")
#: formats a SQL engine streams to ``--output`` (the rows of docs/diff.md's table)
DIFF_STREAMED = ("csv", "jsonl", "parquet")


def _check_diff_output(args: argparse.Namespace) -> bool:
    """Check ``--engine``/``--format``/``--output`` before any store loads; true when a
    SQL engine streams the rows to ``--output``."""
    from pathlib import Path

    if args.engine not in DIFF_ENGINES:
        raise RequestError(f"--engine {args.engine!r}: expected one of {', '.join(DIFF_ENGINES)}")
    if args.format == "parquet" and (args.output is None or args.engine == "in-process"):
        raise RequestError(
            "--format parquet writes a file: give --output FILE and --engine duckdb or spark"
        )
    parent = Path(args.output).parent if args.output is not None else None
    if parent is not None and not parent.is_dir():
        raise RequestError(f"--output {args.output}: the directory {str(parent)!r} does not exist")
    return args.engine != "in-process" and args.output is not None and args.format in DIFF_STREAMED


def _entity_files(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--entities`` / ``--old-entities`` files DuckDB reads itself (Parquet, JSON
    lines): a side's whole entity set, never Python objects; ``.json`` files stay
    in-process overlays of their side (left in ``args.entities`` / ``args.old_entities``).
    Both flags take the same files."""
    out: dict[str, list[str]] = {"old_files": [], "new_files": []}
    for key, flag, given in (
        ("new_files", "--entities", args.entities or []),
        ("old_files", "--old-entities", args.old_entities or []),
    ):
        files = [f for f in given if f.lower().endswith((".parquet", ".jsonl", ".ndjson"))]
        if not files:
            continue
        if args.engine != "duckdb":
            raise RequestError(
                f"{flag} {files[0]}: Parquet / JSON-lines entity files are read by --engine duckdb"
            )
        if len(files) != len(given):
            raise RequestError(
                f"{flag}: with Parquet / JSON-lines files the entities come from the files "
                "alone; do not mix them with .json entity files"
            )
        out[key] = files
    if out["new_files"]:
        args.entities = None
    if out["old_files"]:
        args.old_entities = None
    return out


def _entity_objects(paths: list[str] | None, what: str) -> list[Any] | None:
    """The entity objects of ``.json`` entity files (``None`` when none were given)."""
    if not paths:
        return None
    entities: list[Any] = []
    for f in paths:
        data = json_file(f, what)
        items = data if isinstance(data, list) else [data]
        for item in items:
            if not isinstance(item, dict):
                raise RequestError(f"{what} {f}: expected entity objects")
            entities.append(item)
    return entities


def cmd_diff(args: argparse.Namespace) -> int:
    from polang.authoring.diff import diff  # polang --help stays fast

    stream = _check_diff_output(args)
    files = _entity_files(args)
    stores = args.store
    if len(stores) > 2:
        raise RequestError("--store: give one store (with --entities) or two (old, then new)")
    if len(stores) == 1 and not (args.entities or args.old_entities or any(files.values())):
        raise RequestError("with one --store, give the new entity data with --entities")
    # with two stores, --entities alone are both sides' data (polang.authoring.diff.sides)
    entities = _entity_objects(args.entities, "entities")
    old_entities = _entity_objects(args.old_entities, "old entities")
    context = None
    if args.context is not None:
        context = json_arg(args.context, "--context")
        if not isinstance(context, dict):
            raise RequestError("--context: expected a JSON object")
    extra: dict[str, Any] = {k: v for k, v in files.items() if v}
    old = _engine(stores[0], args.config)
    try:
        new = _engine(stores[1], args.config) if len(stores) == 2 else None
        try:
            result = diff(
                old,
                new,
                entities=entities,
                old_entities=old_entities,
                context=context,
                engine=args.engine,
                output=args.output if stream else None,
                format=args.format if stream else "parquet",
                **extra,
            )
        finally:
            if new is not None:
                new.close()
    finally:
        old.close()
    _note_sql(result)
    if stream:
        s = result.summary()
        n = s["gained"] + s["lost"]
        echo(
            f"{s['gained']} gained, {s['lost']} lost"
            + (f" ({s['conditional']} conditional)" if s["conditional"] else "")
            + f": wrote {n} row{'' if n == 1 else 's'} to {args.output}",
            file=sys.stderr,
        )
    elif args.output is not None:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            _print_diff(result, args.format, out)
    else:
        _print_diff(result, args.format, sys.stdout)
    if args.exit_code and result.changed:
        return 1
    return 0


def _note_sql(result: Any) -> None:
    """On a SQL engine, policies left conditional are said on stderr (as the queries do)."""
    conditional = [f for f in getattr(result, "fallbacks", ()) if f["how"] == "conditional"]
    if conditional:
        f = conditional[0]
        echo(
            f"note: {len(conditional)} policy branch(es) are conditional in SQL "
            f"(e.g. {f['policy_id']}: {f['reason']})",
            file=sys.stderr,
        )


def _print_diff(result: Any, fmt: str, out: Any) -> None:
    if fmt == "json":
        out.write(json.dumps(result.to_dict(), indent=2) + "\n")
    elif fmt == "csv":
        out.write(result.csv())
    elif fmt == "jsonl":
        for e in result.entries:
            out.write(json.dumps(e.to_dict()) + "\n")
    else:
        console = output_console(out)
        console.print(result.table(width=console.width), markup=False, highlight=False)


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "test",
        "run policy test files (expected decisions), with coverage",
        TEST_EXAMPLES,
        description="Run every policy test file (*.polangtest.yaml, .yml, .json) under the "
        "paths: each case's decision, reasons and errors are checked; failures show the "
        "explanation of what happened.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="test files or directories")
    p.add_argument(
        "--coverage",
        action="store_true",
        help="report which policies and when/unless clauses the cases exercised",
    )
    p.add_argument(
        "--min-coverage",
        type=float,
        metavar="N",
        help="fail (exit 1) when coverage is below N percent (implies --coverage)",
    )
    p.add_argument(
        "--format", choices=["table", "json"], default="table", help="output (default: table)"
    )
    p.set_defaults(func=cmd_test)

    p = add_command(
        sub,
        "diff",
        "who gains or loses access between two stores (or with new entity data)",
        DIFF_EXAMPLES,
        description="The exact change in the access matrix: every (principal, action, "
        "resource) that gains or loses access, with the policies that grant or block it "
        "now and before.",
    )
    p.add_argument(
        "--store",
        action="append",
        required=True,
        metavar="STORE",
        help="the old store, then the new one (a directory, .parc, legacy file or URL); "
        "one store with --entities compares its entities with the new data",
    )
    p.add_argument(
        "--entities",
        nargs="+",
        metavar="FILE",
        help="entity JSON files laid over the new side's entities (same uid: replaced), "
        "and over the old side's too with two stores and no --old-entities; with --engine "
        "duckdb, .parquet / .jsonl files are the side's entities",
    )
    p.add_argument(
        "--old-entities",
        nargs="+",
        metavar="FILE",
        help="the old side's entity files, taken as --entities takes them",
    )
    p.add_argument(
        "--context",
        metavar="JSON",
        help="the request context (JSON, @file or a file); without it the context is "
        "unknown and entries that depend on it are reported as conditional",
    )
    p.add_argument("--config", metavar="FILE", help="ENGINE_* properties (JSON or YAML)")
    p.add_argument(
        "--format",
        choices=["table", "json", "csv", "jsonl", "parquet"],
        default="table",
        help="output (default: table); with a SQL engine and --output, csv, jsonl and "
        "parquet are streamed to the file (one row per change)",
    )
    p.add_argument("--output", metavar="FILE", help="write the answer to FILE")
    p.add_argument(
        "--engine",
        default="in-process",
        metavar="ENGINE",
        help="in-process (default), duckdb or spark: compare both access matrices in SQL, "
        "at scale (docs/diff.md)",
    )
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when any access changed (for CI), 0 when none did",
    )
    p.set_defaults(func=cmd_diff)
