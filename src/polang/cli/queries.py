"""``polang who-can``, ``polang what-can`` and ``polang matrix``: offline questions over
a store's entities (see docs/queries.md). Exit status 0."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO, cast

from polang.cli._common import (
    ENTITY_HELP,
    add_inputs,
    context_arg,
    load_inputs,
    output_console,
    progress_bar,
    uid,
)

# ---------------------------------------------------------------- queries


def _residual_text(entry: Any) -> str:
    return "; ".join(
        f"{r.effect} {r.policy_id}: " + (" and ".join(r.conditions) or "(scope)")
        for r in entry.residuals
    )


def _print_table(result: Any, columns: list[str], out: TextIO | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    table.add_column("decision")
    table.add_column("policies", overflow="fold")
    for e in result.iter_entries():
        cells = [Text(str(getattr(e, c))) for c in columns]  # ids are data, not markup
        if e.decision == "allow":
            table.add_row(*cells, Text("allow", "green"), Text(", ".join(e.reasons)))
        else:
            table.add_row(*cells, Text("conditional", "yellow"), Text(_residual_text(e)))
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


def _note_missing(inputs: Any, uid: Any, what: str) -> None:
    """A query about an entity nobody supplied still runs (policies may not read it), but
    an empty answer must not look like a real one: say so on stderr."""
    if inputs.missing(uid):
        print(
            f"note: {what} {uid} is not in the store's entities or the --entities files "
            f"(give its data with --{what} FILE or --entities)",
            file=sys.stderr,
        )


def cmd_who_can(args: argparse.Namespace) -> int:
    from polang.datalog.query import who_can

    inputs = load_inputs(args)
    action = uid(args.action, "action")
    resource = inputs.resource
    context = context_arg(args, inputs, [action])
    inputs.check_request(None, action, resource, context)
    _note_missing(inputs, resource, "resource")
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
    _note_missing(inputs, principal, "principal")
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


def cmd_matrix(args: argparse.Namespace) -> int:
    from polang.datalog.query import access_matrix

    inputs = load_inputs(args)
    actions = [uid(a, "action") for a in args.action] if args.action else None
    context = context_arg(args, inputs, actions or [])
    for a in actions or ():
        inputs.check_request(None, a, None, context if len(actions or ()) == 1 else None)
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
    return _emit(result, args.format, ["principal", "action", "resource"])


def _add_paging(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument(
        "--limit", type=int, metavar="N", help="at most N entries (then --cursor continues)"
    )
    g.add_argument("--cursor", help="continue after a previous page (the cursor it printed)")
    g.add_argument(
        "--format",
        choices=["table", "json", "csv"],
        default="table",
        help="table (default; never cut when written to a file), json or csv",
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
  polang matrix --store examples/stores/directory --action 'Acme::Action::"read"' --limit 100
{_FOOT}"""


def register(sub: Any) -> None:
    def parser(name: str, help: str, epilog: str) -> argparse.ArgumentParser:
        return cast(
            argparse.ArgumentParser,
            sub.add_parser(
                name,
                help=help,
                description=help[0].upper() + help[1:] + " (see docs/queries.md).",
                epilog=epilog,
                formatter_class=argparse.RawDescriptionHelpFormatter,
            ),
        )

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
