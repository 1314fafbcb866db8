"""``polang explain``, ``polang who-can``, ``polang what-can`` and ``polang matrix``.

Inputs are a policy store (``--store``: a directory, a ``.parc`` archive or a legacy
JSON/YAML file) or loose files (``--policies``, ``--schema``, ``--entities``); entity
files given with a store are laid over its default entities (request entities win).

Exit status: ``explain`` 0 on allow and 1 on deny (like ``authorize``); the queries 0.
Errors of the ``PolangError`` family are reported by the common handler (status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from polang.errors import PolangError, RequestError


@dataclass
class Inputs:
    """What every command works on: an authorizer, entity facts and the schema."""

    authorizer: Any
    facts: Any
    schema: Any


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text("utf-8")
    except OSError as e:
        raise RequestError(f"{what} {path}: cannot read: {e.strerror}") from None


def _json_arg(value: str, what: str) -> Any:
    """JSON given inline or as ``@file``."""
    text, where = (_read(value[1:], what), value[1:]) if value.startswith("@") else (value, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"{where}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


def _uid(text: str, what: str) -> Any:
    from polang.language.parser import parse_entity_uid

    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise RequestError(
            f"--{what} {text!r}: expected an entity like 'User::\"alice\"': {e}"
        ) from None


def load_inputs(args: argparse.Namespace, backend: str = "compiled") -> Inputs:
    """The store or the loose files named on the command line."""
    from polang.datalog.authorizer import Authorizer
    from polang.datalog.facts import EntityFacts
    from polang.language.entities import Entity, parse_entities
    from polang.language.parser import parse_policies

    schema = None
    entities: list[Entity] = []
    if args.store:
        if args.policies or args.schema:
            raise RequestError("--store cannot be combined with --policies or --schema")
        from polang.config import Config
        from polang.store import PolicyStoreSource

        config = Config.from_file(args.config) if args.config else Config()
        store = PolicyStoreSource.from_location(args.store).load(config)
        schema = store.schema
        policies = store.all_policies()
        entities.extend(schema.action_entities())
        entities.extend(store.default_entities)
    else:
        if not args.policies:
            raise RequestError("give a policy store (--store) or policy files (--policies)")
        if args.schema:
            from polang.language.schema import parse_schema, parse_schema_json

            text = _read(args.schema, "schema")
            if args.schema.endswith(".json"):
                schema = parse_schema_json(text, args.schema)
            else:
                schema = parse_schema(text, args.schema)
        policies = {}
        for f in args.policies:
            for p in parse_policies(_read(f, "policies"), f):
                pid = p.policy_id or f"policy{len(policies)}"
                if pid in policies:
                    raise RequestError(f"{f}: duplicate policy id {pid!r}")
                policies[pid] = p
        if schema is not None:
            entities.extend(schema.action_entities())
    for f in args.entities or ():
        text = _read(f, "entities")
        if text.lstrip().startswith("{"):  # one entity object, as the request files hold
            text = f"[{text}]"
        entities.extend(parse_entities(text, schema, filename=f))
    return Inputs(Authorizer(policies, backend=backend), EntityFacts(entities), schema)


def _context(args: argparse.Namespace, inputs: Inputs, actions: list[Any]) -> Any:
    """The ``--context`` record (``None`` when not given), typed by the schema if it can."""
    from polang.language.entities import parse_context

    if args.context is None:
        return None
    data = _json_arg(args.context, "--context")
    if inputs.schema is None:
        return parse_context(data, None, None, path="--context")
    last: PolangError | None = None
    for a in actions or list(inputs.schema.actions):
        if inputs.schema.action(a) is None:
            continue
        try:
            return parse_context(data, inputs.schema, a, path="--context")
        except PolangError as e:
            last = e
    if last is not None:
        raise last
    return parse_context(data, None, None, path="--context")


# ---------------------------------------------------------------- explain


def cmd_explain(args: argparse.Namespace) -> int:
    from polang.datalog.explain import explain

    inputs = load_inputs(args, backend=args.backend)
    action = _uid(args.action, "action")
    principal = _uid(args.principal, "principal") if args.principal else None
    resource = _uid(args.resource, "resource")
    context = _context(args, inputs, [action])
    ex = explain(inputs.authorizer, principal, action, resource, context, inputs.facts)
    if args.json:
        print(json.dumps(ex.to_dict(), indent=2))
    else:
        from rich.console import Console

        Console(highlight=False).print(ex.rich(show_rules=args.rules, all_policies=args.all))
    return 0 if ex.allow else 1


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
    action = _uid(args.action, "action")
    resource = _uid(args.resource, "resource")
    context = _context(args, inputs, [action])
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
    principal = _uid(args.principal, "principal")
    action = _uid(args.action, "action") if args.action else None
    context = _context(args, inputs, [action] if action else [])
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
    actions = [_uid(a, "action") for a in args.action] if args.action else None
    context = _context(args, inputs, actions or [])
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


# ---------------------------------------------------------------- wiring


def _add_inputs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inputs")
    g.add_argument("--store", help="policy store: directory, .parc archive, .json/.yaml legacy")
    g.add_argument("--config", help="engine configuration file (store loading options)")
    g.add_argument("--policies", nargs="+", metavar="FILE", help=".polang files (without --store)")
    g.add_argument("--schema", help=".polangschema (or JSON schema .json) file")
    g.add_argument(
        "--entities",
        nargs="+",
        metavar="FILE",
        help="entity JSON files: arrays or single entities (laid over the store's defaults)",
    )
    g.add_argument(
        "--context",
        help="context as JSON or @file; queries without it treat the context as unknown",
    )


def _add_paging(p: argparse.ArgumentParser, default_format: str = "table") -> None:
    p.add_argument("--limit", type=int, help="at most N entries (then --cursor continues)")
    p.add_argument("--cursor", help="continue after a previous page")
    p.add_argument("--format", choices=["table", "json", "csv"], default=default_format)


def add_cli_commands(subparsers: Any) -> None:
    """Add ``explain``, ``who-can``, ``what-can`` and ``matrix`` to the ``polang`` CLI."""
    p = subparsers.add_parser(
        "explain", help="why a request is allowed or denied (the derivation of each verdict)"
    )
    _add_inputs(p)
    p.add_argument("--principal", help='e.g. User::"alice" (omit for no principal)')
    p.add_argument("--action", required=True, help='e.g. Action::"view"')
    p.add_argument("--resource", required=True, help='e.g. Doc::"d1"')
    p.add_argument("--backend", choices=["compiled", "pydatalog"], default="compiled")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--rules", action="store_true", help="show the Datalog rule behind each step")
    p.add_argument("--all", action="store_true", help="list every policy, not only relevant ones")
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser("who-can", help="every principal allowed an action on a resource")
    _add_inputs(p)
    p.add_argument("--action", required=True)
    p.add_argument("--resource", required=True)
    _add_paging(p)
    p.set_defaults(func=cmd_who_can)

    p = subparsers.add_parser("what-can", help="every (action, resource) a principal is allowed")
    _add_inputs(p)
    p.add_argument("--principal", required=True)
    p.add_argument("--action", help="only this action")
    _add_paging(p)
    p.set_defaults(func=cmd_what_can)

    p = subparsers.add_parser("matrix", help="every allowed (principal, action, resource)")
    _add_inputs(p)
    p.add_argument("--action", action="append", help="only these actions (repeatable)")
    _add_paging(p)
    p.set_defaults(func=cmd_matrix)


__all__ = ["add_cli_commands", "load_inputs"]
