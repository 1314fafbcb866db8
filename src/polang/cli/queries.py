"""``polang who-can``, ``polang what-can`` and ``polang matrix``: offline questions over
a store's entities (see docs/queries.md). Exit status 0."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Generator
from typing import Any, TextIO

from polang.cli._common import add_inputs, context_arg, load_inputs, uid

# ---------------------------------------------------------------- queries


def _residual_text(entry: Any) -> str:
    return "; ".join(
        f"{r.effect} {r.policy_id}: " + (" and ".join(r.conditions) or "(scope)")
        for r in entry.residuals
    )


def _print_table(result: Any, columns: list[str], out: TextIO | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for c in columns:
        table.add_column(c)
    table.add_column("decision")
    table.add_column("policies")
    for e in result.iter_entries():
        cells = [str(getattr(e, c)) for c in columns]
        if e.decision == "allow":
            table.add_row(*cells, "[green]allow[/]", ", ".join(e.reasons))
        else:
            table.add_row(*cells, "[yellow]conditional[/]", _residual_text(e))
    console = Console(file=out, highlight=False)
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


def _write_csv(result: Any, out: TextIO) -> None:
    import csv

    w = csv.writer(out)
    w.writerow(["principal", "action", "resource", "decision", "policies", "residual"])
    for e in result.iter_entries():
        w.writerow(
            [
                str(e.principal),
                str(e.action),
                str(e.resource),
                e.decision,
                " ".join(e.reasons),
                _residual_text(e),
            ]
        )
    if result.next_cursor:
        print(f"more: --cursor {result.next_cursor}", file=sys.stderr)


def _emit(result: Any, fmt: str, columns: list[str]) -> int:
    if fmt == "json":
        _write_json(result, sys.stdout)
    elif fmt == "csv":
        _write_csv(result, sys.stdout)
    else:
        _print_table(result, columns)
    return 0


def cmd_who_can(args: argparse.Namespace) -> int:
    from polang.datalog.query import who_can

    inputs = load_inputs(args)
    action = uid(args.action, "action")
    resource = uid(args.resource, "resource")
    context = context_arg(args, inputs, [action])
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
    return _emit(result, args.format, ["principal"])


def cmd_what_can(args: argparse.Namespace) -> int:
    from polang.datalog.query import what_can

    inputs = load_inputs(args)
    principal = uid(args.principal, "principal")
    action = uid(args.action, "action") if args.action else None
    context = context_arg(args, inputs, [action] if action else [])
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
    return _emit(result, args.format, ["action", "resource"])


def _progress_bar() -> Generator[Any, None, None]:
    """A rich progress callback on a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("matrix"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} resources"),
        TimeRemainingColumn(),
        transient=True,
    )
    task = bar.add_task("matrix", total=None)
    bar.start()

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        yield progress
    finally:
        bar.stop()


def cmd_matrix(args: argparse.Namespace) -> int:
    from polang.datalog.query import access_matrix

    inputs = load_inputs(args)
    actions = [uid(a, "action") for a in args.action] if args.action else None
    context = context_arg(args, inputs, actions or [])
    gen = _progress_bar()
    progress = next(gen)
    try:
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
    finally:
        gen.close()
    return _emit(result, args.format, ["principal", "action", "resource"])


def _add_paging(p: argparse.ArgumentParser, default_format: str = "table") -> None:
    p.add_argument("--limit", type=int, help="at most N entries (then --cursor continues)")
    p.add_argument("--cursor", help="continue after a previous page")
    p.add_argument("--format", choices=["table", "json", "csv"], default=default_format)


def register(sub: Any) -> None:
    p = sub.add_parser("who-can", help="every principal allowed an action on a resource")
    add_inputs(p)
    p.add_argument("--action", required=True)
    p.add_argument("--resource", required=True)
    _add_paging(p)
    p.set_defaults(func=cmd_who_can)

    p = sub.add_parser("what-can", help="every (action, resource) a principal is allowed")
    add_inputs(p)
    p.add_argument("--principal", required=True)
    p.add_argument("--action", help="only this action")
    _add_paging(p)
    p.set_defaults(func=cmd_what_can)

    p = sub.add_parser("matrix", help="every allowed (principal, action, resource)")
    add_inputs(p)
    p.add_argument("--action", action="append", help="only these actions (repeatable)")
    _add_paging(p)
    p.set_defaults(func=cmd_matrix)
