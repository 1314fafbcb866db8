"""``polang plan``: which rows of a resource type a caller may act on (a list endpoint's
plan, docs/filtering.md), printed in policy syntax or as JSON. Exit status 0."""

from __future__ import annotations

import argparse
import json
from typing import Any

from polang.cli._common import (
    CONTEXT_HELP,
    ENTITY_HELP,
    add_command,
    echo,
    entity_arg,
    json_arg,
    json_file,
    store_config,
    token_args,
)
from polang.errors import RequestError


def _entities(files: list[str] | None) -> list[Any]:
    """``--entities`` files: arrays of entities or single entities."""
    out: list[Any] = []
    for f in files or ():
        data = json_file(f, "entities")
        items = [data] if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise RequestError(f"entities {f}: expected an entity object or an array of them")
        out.extend(items)  # each one read (and refused) by Engine.plan, as entities[i]
    return out


def cmd_plan(args: argparse.Namespace) -> int:
    from polang.engine import Engine  # polang --help stays fast

    if args.token and args.principal:
        raise RequestError("--principal and --token cannot be combined")
    if (args.dialect or args.superset) and not args.mapping:
        raise RequestError("--dialect and --superset need --mapping")
    engine = Engine(store_config(args.store, args.config))
    try:
        context = json_arg(args.context, "context") if args.context else None
        if args.token:
            if args.entities:
                raise RequestError("--entities and --token cannot be combined")
            plan = engine.plan_multi_issuer(
                token_args(args.token), args.action, args.resource_type, context
            )
        else:
            principal = entity_arg(args.principal, "principal") if args.principal else None
            plan = engine.plan(
                args.action,
                args.resource_type,
                principal,
                context,
                entities=_entities(args.entities),
            )
        found = _filter(args, plan, engine.schema) if args.mapping else None
    finally:
        engine.close()
    if args.json:
        out = plan.to_dict()
        if found is not None:
            out["filter"] = {
                "dialect": found.dialect,
                "exact": found.exact,
                "rechecks": list(found.rechecks),
                "where": found.sql(),
                "sql": found.select_sql(),
            }
        print(json.dumps(out, indent=2))
    else:
        echo(plan.text().rstrip("\n"))
        if found is not None:
            note = (
                ""
                if found.exact
                else " (a superset: check each row for " + ", ".join(found.rechecks) + ")"
            )
            echo(f"-- SQL for {found.dialect}{note}:")
            echo(found.select_sql() + ";")
    return 0


def _filter(args: argparse.Namespace, plan: Any, schema: Any) -> Any:
    """The plan translated through ``--mapping`` for ``--dialect`` (docs/filtering.md)."""
    from polang.filtering import check_against_schema, read_mapping, translate  # sqlglot

    mapping = read_mapping(args.mapping)
    check_against_schema(mapping, schema)
    return translate(plan, mapping, args.dialect or "postgres", superset=args.superset)


EXAMPLES = """examples:
  polang plan --store examples/stores/directory --action 'Acme::Action::"read"' \\
      --resource-type Acme::Document --principal examples/requests/alice.json --context '{}'
  polang plan --store examples/stores/directory --action 'Acme::Action::"edit"' \\
      --resource-type Acme::Document --principal 'Acme::User::"bob"' --json
  polang plan --store ./store --config engine.yaml --action 'Shop::Action::"buy"' \\
      --resource-type Shop::Item --token "Shop::Access_token=$JWT"
  polang plan --store examples/stores/directory --action 'Acme::Action::"read"' \\
      --resource-type Acme::Document --principal 'Acme::User::"alice"' \\
      --mapping examples/mappings/directory.yaml --dialect postgres

The plan is always_allowed, always_denied, or conditional: then each policy that may
apply is printed as a residual over `resource` alone (a row is allowed when a permit's
residual is true and no forbid's is). The request is read and checked as `polang
authorize` reads it. With --mapping (the service's tables, docs/filtering.md) the plan is
followed by the SQL that selects the allowed rows, for --dialect (postgres, mysql for
MySQL and MariaDB, sqlite, duckdb; default postgres); what the dialect cannot express is
an error naming the policy, or with --superset a wider filter and the policies each
fetched row must still be checked against.

exit status: 0 a plan printed, 2 bad input (one 'error:' line on stderr)
"""


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "plan",
        "which rows of a resource type a caller may act on (a list endpoint's plan)",
        EXAMPLES,
        description="The plan of one action on the rows of one resource type for one "
        "caller: always allowed, always denied, or the residual conditions over `resource` "
        "that a row must meet (docs/filtering.md).",
    )
    p.add_argument(
        "--store",
        required=True,
        help="the policy store: directory, .parc archive, legacy .json/.yaml file or URL",
    )
    p.add_argument(
        "--action", required=True, metavar="UID", help="the action, e.g. 'Acme::Action::\"read\"'"
    )
    p.add_argument(
        "--resource-type",
        required=True,
        metavar="TYPE",
        help="the rows' entity type, e.g. Acme::Document",
    )
    p.add_argument(
        "--principal",
        metavar="ENTITY",
        help=ENTITY_HELP % "User" + " (unsigned requests; omit for no principal)",
    )
    p.add_argument(
        "--token",
        action="append",
        metavar="MAPPING=JWT",
        help="a token of the caller, e.g. 'Acme::Access_token=eyJ...' "
        "(repeatable; not with --principal)",
    )
    p.add_argument("--context", metavar="JSON", help=CONTEXT_HELP)
    p.add_argument(
        "--entities",
        nargs="+",
        metavar="FILE",
        help="entity JSON files laid over the store's entities (arrays or single entities)",
    )
    p.add_argument("--config", metavar="FILE", help="ENGINE_* properties as a JSON or YAML file")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--mapping",
        metavar="FILE",
        help="the service's tables (YAML or JSON, docs/filtering.md): print the SQL too",
    )
    p.add_argument(
        "--dialect",
        choices=["postgres", "mysql", "mariadb", "sqlite", "duckdb"],
        help="the SQL dialect of --mapping's SQL (default postgres)",
    )
    p.add_argument(
        "--superset",
        action="store_true",
        help="what the dialect cannot express widens the filter instead of failing; the "
        "policies to check on each fetched row are printed",
    )
    p.set_defaults(func=cmd_plan)
