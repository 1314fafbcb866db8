"""``polang who-can``, ``polang what-can`` and ``polang matrix``: offline questions over
a store's entities (see docs/queries.md), in process or on a SQL engine (``--engine
duckdb|spark``, docs/sql.md). Exit status 0."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from polang.cli._common import (
    ENTITY_HELP,
    add_command,
    add_inputs,
    context_arg,
    echo,
    load_inputs,
    output_console,
    progress_bar,
    uid,
)
from polang.cli.answers import WRITTEN, AnswerWriter
from polang.cli.answers import residual_text as _residual_text
from polang.errors import RequestError

# ---------------------------------------------------------------- queries


def _print_table(result: Any, columns: list[str], out: TextIO | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    from polang.language.values import printable  # polang --help stays fast

    def cell(s: str) -> Text:
        return Text(printable(s))  # ids are data: never markup, never control characters

    table = Table(show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    table.add_column("decision")
    table.add_column("policies", overflow="fold")
    for e in result.iter_entries():
        cells = [cell(str(getattr(e, c))) for c in columns]
        if e.decision == "allow":
            table.add_row(*cells, Text("allow", "green"), cell(", ".join(e.reasons)))
        else:
            table.add_row(*cells, Text("conditional", "yellow"), cell(_residual_text(e)))
    console = output_console(out)
    console.print(table)
    _print_footer(result, console)


def _print_footer(result: Any, console: Any) -> None:
    n = len(result)
    tail = (
        "" if result.complete else " (some are conditional: the answer depends on data not given)"
    )
    console.print(f"{n} entr{'y' if n == 1 else 'ies'}{tail}", style="dim")
    if result.next_cursor:
        console.print(f"more: --cursor {result.next_cursor}", style="dim")


def _write_json(result: Any, out: TextIO) -> None:
    """The result as one JSON object, entries written as they are produced."""
    head = {"kind": result.kind, "query": result.query}
    out.write(json.dumps(head)[:-1] + ', "entries": [')
    n = allowed = 0
    for i, e in enumerate(result.iter_entries()):
        out.write(("," if i else "") + "\n  " + json.dumps(e.to_dict()))
        n += 1
        allowed += e.decision == "allow"
    tail = {
        "count": n,
        "allowed": allowed,
        "conditional": n - allowed,
        "complete": result.complete,
        "next_cursor": result.next_cursor,
        "stats": result.stats.to_dict(),
    }
    out.write("\n], " + json.dumps(tail)[1:] + "\n")


def _emit(
    result: Any, fmt: str, columns: list[str], output: str | None = None, split: bool = False
) -> int:
    """The answer on stdout, or in the ``--output`` file; csv, jsonl and parquet through
    the one ``AnswerWriter`` every engine writes with."""
    if fmt in WRITTEN:
        writer = AnswerWriter(fmt, output, split=split)
        writer.write(result.iter_entries())
        writer.close()
        if result.next_cursor:
            echo(f"more: --cursor {result.next_cursor}", file=sys.stderr)
        return 0
    if output is not None:
        with open(output, "w", encoding="utf-8", newline="") as f:
            _emit_to(result, fmt, columns, f)
    else:
        _emit_to(result, fmt, columns, sys.stdout)
    return 0


def _emit_to(result: Any, fmt: str, columns: list[str], out: TextIO) -> None:
    if fmt == "json":
        _write_json(result, out)
    else:
        _print_table(result, columns, out)


# ---------------------------------------------------------------- SQL engines

ENGINES = ("in-process", "duckdb", "spark")
#: ``--entities`` files a SQL engine reads itself (never as Python objects)
FILE_SUFFIXES = (".parquet", ".jsonl", ".ndjson")
_EXTRA = {"duckdb": "polang[duckdb]", "spark": "polang[spark]"}


def _check_engine(args: argparse.Namespace) -> list[str]:
    """Check ``--engine``/``--format``/``--output`` before anything loads; split the
    ``--entities`` files: those a SQL engine reads (returned) from the JSON ones
    (left in ``args.entities``, laid over the store as in process)."""
    engine = args.engine
    if engine not in ENGINES:
        raise RequestError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if args.format == "parquet" and args.output is None:
        raise RequestError("--format parquet writes a file: give --output FILE")
    if args.split_uids and args.format not in ("csv", "parquet"):
        raise RequestError(
            "--split-uids: csv and parquet columns only (jsonl and json entries give each "
            'uid as {"type", "id"})'
        )
    if args.output is not None and "://" in args.output:
        raise RequestError(
            f"--output {args.output}: the command writes a local file; a SQL engine writes "
            "to cluster storage from Python (docs/sql.md: access_matrix(output=URL))"
        )
    if engine != "in-process" and (args.limit is not None or args.cursor is not None):
        raise RequestError("--limit and --cursor page the in-process engine only")
    files = [f for f in args.entities or () if f.lower().endswith(FILE_SUFFIXES)]
    if files:
        if engine != "duckdb":
            raise RequestError(
                f"--entities {files[0]}: Parquet / JSON-lines entity files are read by "
                "--engine duckdb"
            )
        if len(files) != len(args.entities):
            raise RequestError(
                "--entities: with Parquet / JSON-lines files the entities come from the "
                "files alone; do not mix them with .json entity files"
            )
        args.entities = None
    return files


def _sql_package(engine: str) -> Any:
    """The SQL package, imported here only (it loads sqlglot); a missing optional
    package is one error line naming the extra to install."""
    try:
        import polang.sql as sql  # polang --help stays fast
    except ImportError as e:
        raise RequestError(
            f"--engine {engine} needs the {e.name or 'SQL'} package: pip install '{_EXTRA[engine]}'"
        ) from None
    return sql


class _SqlAnswer:
    """A ``SqlResult`` with the face ``_emit`` prints (one page: no cursor)."""

    next_cursor = None

    def __init__(self, result: Any, engine: str) -> None:
        self.result = result
        self.kind = result.kind
        self.query = {"engine": engine}
        self.complete = result.complete
        self.stats = result.stats

    def iter_entries(self) -> Any:
        return self.result.iter_entries()

    def __len__(self) -> int:
        return len(self.result)


def _run_sql(
    args: argparse.Namespace,
    inputs: Any,
    files: list[str],
    query: Any,
    columns: list[str],
) -> int | None:
    """Answer on ``--engine`` (``query(engine, output, format, reasons)``); ``None`` when
    SQL cannot answer as asked (``SqlFallback``): the caller answers in process.

    csv, jsonl and parquet are written by the ``AnswerWriter`` the in-process answer is
    written with, handed the engine's batches as they come (the query's ``output``)."""
    engine = args.engine
    sql = _sql_package(engine)
    try:
        eng = sql.sql_engine(
            inputs.authorizer,
            None if files else inputs.facts,
            inputs.schema,
            engine=engine,
            files=files or None,
        )
        try:
            writer = None
            if args.format in WRITTEN:
                writer = AnswerWriter(
                    args.format,
                    args.output,
                    split=args.split_uids,
                    residuals={r.policy_id: r for r in eng.residuals},
                )
            try:
                result = query(eng, writer, "parquet", True)
                if writer is not None:
                    writer.close()
            except sql.SqlFallback as e:  # raised before any row: nothing was written
                echo(f"note: answered in process: {e}", file=sys.stderr)
                return None
        finally:
            close = getattr(eng, "close", None)
            if close is not None:
                close()
    except ImportError as e:  # pyarrow, numpy...: what the engine needs besides itself
        raise RequestError(
            f"--engine {engine} needs the {e.name or 'missing'} package: "
            f"pip install '{_EXTRA[engine]}'"
        ) from None
    conditional = [f for f in result.fallbacks if f.how == "conditional"]
    if conditional:
        f = conditional[0]
        echo(
            f"note: {len(conditional)} policy branch(es) are conditional in SQL "
            f"(e.g. {f.policy_id}: {f.reason})",
            file=sys.stderr,
        )
    if writer is not None:
        if args.output is not None:
            n = result.stats.rows
            echo(f"wrote {n} row{'' if n == 1 else 's'} to {args.output}", file=sys.stderr)
        return 0
    return _emit(_SqlAnswer(result, engine), args.format, columns, args.output)


def _note_missing(inputs: Any, uid: Any, what: str) -> None:
    """A query about an entity nobody supplied still runs (policies may not read it), but
    an empty answer must not look like a real one: say so on stderr."""
    if inputs.missing(uid):
        echo(
            f"note: {what} {uid} is not in the store's entities or the --entities files "
            f"(give its data with --{what} FILE or --entities)",
            file=sys.stderr,
        )


def cmd_who_can(args: argparse.Namespace) -> int:
    from polang.analysis.query import who_can  # polang --help stays fast

    files = _check_engine(args)
    inputs = load_inputs(args)
    action = uid(args.action, "action")
    resource = inputs.resource
    context = context_arg(args, inputs, [action])
    inputs.check_request(None, action, resource, context)
    if not files:
        _note_missing(inputs, resource, "resource")
    if args.engine != "in-process":
        code = _run_sql(
            args,
            inputs,
            files,
            lambda eng, out, fmt, reasons: eng.who_can(
                action, resource, context, output=out, format=fmt, reasons=reasons
            ),
            ["principal"],
        )
        if code is not None:
            return code
    result = who_can(
        inputs.authorizer,
        inputs.facts,
        action,
        resource,
        context,
        schema=inputs.schema,
        limit=args.limit,
        cursor=args.cursor,
    )
    return _emit(result, args.format, ["principal"], args.output, args.split_uids)


def cmd_what_can(args: argparse.Namespace) -> int:
    from polang.analysis.query import what_can  # polang --help stays fast

    files = _check_engine(args)
    inputs = load_inputs(args)
    principal = inputs.principal
    action = uid(args.action, "action") if args.action else None
    context = context_arg(args, inputs, [action] if action else [])
    if action is not None:
        inputs.check_request(principal, action, None, context)
    elif inputs.schema is not None:
        # no action to check against: at least the principal's type must be declared
        some_action = next(iter(inputs.schema.actions), None)
        if some_action is not None:
            inputs.check_request(principal, some_action, None, kinds={"unknown_principal_type"})
    if not files:
        _note_missing(inputs, principal, "principal")
    if args.engine != "in-process":
        code = _run_sql(
            args,
            inputs,
            files,
            lambda eng, out, fmt, reasons: eng.what_can(
                principal, action, context, output=out, format=fmt, reasons=reasons
            ),
            ["action", "resource"],
        )
        if code is not None:
            return code
    result = what_can(
        inputs.authorizer,
        inputs.facts,
        principal,
        action,
        context,
        schema=inputs.schema,
        limit=args.limit,
        cursor=args.cursor,
    )
    return _emit(result, args.format, ["action", "resource"], args.output, args.split_uids)


def cmd_matrix(args: argparse.Namespace) -> int:
    from polang.analysis.query import access_matrix  # polang --help stays fast

    files = _check_engine(args)
    inputs = load_inputs(args)
    actions = [uid(a, "action") for a in args.action] if args.action else None
    context = context_arg(args, inputs, actions or [])
    for a in actions or ():
        inputs.check_request(None, a, None, context if len(actions or ()) == 1 else None)
    if args.engine != "in-process":
        code = _run_sql(
            args,
            inputs,
            files,
            lambda eng, out, fmt, reasons: eng.access_matrix(
                context, actions=actions, output=out, format=fmt, reasons=reasons
            ),
            ["principal", "action", "resource"],
        )
        if code is not None:
            return code
    with progress_bar("matrix", "(action, resource) pairs") as progress:
        result = access_matrix(
            inputs.authorizer,
            inputs.facts,
            context,
            schema=inputs.schema,
            actions=actions,
            limit=args.limit,
            cursor=args.cursor,
            progress=progress,
        )
    cols = ["principal", "action", "resource"]
    return _emit(result, args.format, cols, args.output, args.split_uids)


def _add_paging(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument(
        "--limit", type=int, metavar="N", help="at most N entries (then --cursor continues)"
    )
    g.add_argument("--cursor", help="continue after a previous page (the cursor it printed)")
    g.add_argument(
        "--format",
        choices=["table", "json", "csv", "jsonl", "parquet"],
        default="table",
        help="table (default; never cut when written to a file), json, csv, jsonl, or "
        "parquet (with --output; needs pyarrow): the same file whatever the --engine",
    )
    g.add_argument(
        "--output",
        metavar="FILE",
        help="write the answer to FILE (a SQL engine's csv, jsonl and parquet rows are "
        "written as they come)",
    )
    g.add_argument(
        "--split-uids",
        action="store_true",
        help="csv and parquet: each uid as two columns, its type and its id "
        '(principal_type, principal_id, ...) instead of one Type::"id" column',
    )
    g.add_argument(
        "--engine",
        default="in-process",
        metavar="ENGINE",
        help="in-process (default), duckdb or spark: run the query as SQL (docs/sql.md); "
        "--entities FILE.parquet|.jsonl are read by duckdb directly",
    )


_STORE = "--store examples/stores/directory --entities examples/requests/alice.json"
_DOC = "'Acme::Document::\"roadmap\"'"
_FOOT = """
Without --context the context is unknown: entries that depend on it are 'conditional'.
exit status: 0 answered, 2 bad input (one 'error:' line on stderr)
"""
WHO_CAN_EXAMPLES = f"""examples:
  polang who-can {_STORE} \\
      --action 'Acme::Action::"read"' --resource {_DOC} --context '{{}}'
  polang who-can {_STORE} \\
      --action 'Acme::Action::"read"' --resource examples/requests/roadmap.json --format json
{_FOOT}"""
WHAT_CAN_EXAMPLES = f"""examples:
  polang what-can {_STORE} --principal 'Acme::User::"alice"' --context '{{}}'
  polang what-can --store examples/stores/directory --principal examples/requests/alice.json \\
      --action 'Acme::Action::"read"' --format csv
{_FOOT}"""
MATRIX_EXAMPLES = f"""examples:
  polang matrix {_STORE} --context '{{}}' --format csv > access.csv
  polang matrix {_STORE} --context '{{}}' --engine duckdb \\
      --format parquet --output access.parquet
  polang matrix --store S --entities users.parquet docs.jsonl --engine duckdb \\
      --context '{{}}' --format csv --output access.csv
  polang matrix --store examples/stores/directory --action 'Acme::Action::"read"' --limit 100
{_FOOT}"""


def register(sub: Any) -> None:
    def parser(name: str, help: str, epilog: str) -> argparse.ArgumentParser:
        description = help[0].upper() + help[1:] + " (see docs/queries.md)."
        return add_command(sub, name, help, epilog, description=description)

    p = parser("who-can", "every principal allowed an action on a resource", WHO_CAN_EXAMPLES)
    add_inputs(p)
    p.add_argument(
        "--action", required=True, metavar="UID", help="the action, e.g. 'Action::\"view\"'"
    )
    p.add_argument("--resource", required=True, metavar="ENTITY", help=ENTITY_HELP % "Doc")
    _add_paging(p)
    p.set_defaults(func=cmd_who_can)

    p = parser("what-can", "every (action, resource) a principal is allowed", WHAT_CAN_EXAMPLES)
    add_inputs(p)
    p.add_argument("--principal", required=True, metavar="ENTITY", help=ENTITY_HELP % "User")
    p.add_argument("--action", metavar="UID", help="only this action (default: every action)")
    _add_paging(p)
    p.set_defaults(func=cmd_what_can)

    p = parser("matrix", "every allowed (principal, action, resource)", MATRIX_EXAMPLES)
    add_inputs(p)
    p.add_argument(
        "--action",
        action="append",
        metavar="UID",
        help="only this action (repeatable; default: every action)",
    )
    _add_paging(p)
    p.set_defaults(func=cmd_matrix)
