"""``polang authorize``: decide one request against a store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from polang.cli._common import (
    CONTEXT_HELP,
    ENTITY_HELP,
    add_command,
    entity_arg,
    json_arg,
    output_console,
    store_config,
    token_args,
)
from polang.errors import RequestError


def cmd_authorize(args: argparse.Namespace) -> int:
    from polang.engine import Engine  # polang --help stays fast

    engine = Engine(store_config(args.store, args.config))
    try:
        resource = entity_arg(args.resource, "resource")
        context = json_arg(args.context, "context") if args.context else None
        if args.token:
            tokens = token_args(args.token)
            if args.principal:
                raise RequestError("--principal and --token cannot be combined")
            result = engine.authorize_multi_issuer(tokens, args.action, resource, context)
        else:
            principal = entity_arg(args.principal, "principal") if args.principal else None
            result = engine.authorize_unsigned(args.action, resource, context, principal)
    finally:
        engine.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from rich.text import Text

        from polang.language.values import printable  # polang --help stays fast

        console = output_console()
        colour = "green" if result.decision else "red"
        console.print(result.response.decision.upper(), style=f"bold {colour}")
        diag = result.response.diagnostics
        if diag.reason:
            console.print("reason: " + printable(", ".join(diag.reason)))
        elif not result.decision:
            console.print("reason: no permit policy applied (default deny)")
        for e in diag.errors:
            line = printable(f" in {e['policy_id']}: {e['error']}")
            console.print(Text.assemble(("error", "yellow"), line))
        for d in result.dropped_tokens or []:
            line = printable(f" {d.index} ({d.mapping}): {d.kind}: {d.message}")
            console.print(Text.assemble(("dropped token", "yellow"), line))
    return 0 if result.decision else 1


EXAMPLES = """examples:
  polang authorize --store examples/stores/directory --action 'Acme::Action::"read"' \\
      --resource examples/requests/roadmap.json --principal examples/requests/alice.json
  polang authorize --store examples/stores/directory --action 'Acme::Action::"read"' \\
      --resource 'Acme::Document::"roadmap"' --principal 'Acme::User::"alice"' --json
  polang authorize --store ./store --config engine.yaml --action 'Shop::Action::"buy"' \\
      --resource item.json --token "Shop::Access_token=$JWT"

--principal and --resource take a JSON file holding the entity, or a reference
T::"id" to an entity of the store (a value with '::' that is no existing file).

exit status: 0 allow, 1 deny, 2 bad input (one 'error:' line on stderr)
"""


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "authorize",
        "decide one request against a store",
        EXAMPLES,
        description="Decide one request against a store: the decision, the policies that "
        "determined it, the policies that failed to evaluate and the tokens dropped.",
    )
    p.add_argument(
        "--store",
        required=True,
        help="the policy store: directory, .parc archive, legacy .json/.yaml file or URL",
    )
    p.add_argument(
        "--action", required=True, metavar="UID", help="the action, e.g. 'Acme::Action::\"read\"'"
    )
    p.add_argument("--resource", required=True, metavar="ENTITY", help=ENTITY_HELP % "Doc")
    p.add_argument(
        "--principal",
        metavar="ENTITY",
        help=ENTITY_HELP % "User" + " (unsigned requests; omit for no principal)",
    )
    p.add_argument("--context", metavar="JSON", help=CONTEXT_HELP)
    p.add_argument(
        "--token",
        action="append",
        metavar="MAPPING=JWT",
        help="a token for a multi-issuer request, e.g. 'Acme::Access_token=eyJ...' "
        "(repeatable; not with --principal)",
    )
    p.add_argument("--config", metavar="FILE", help="ENGINE_* properties as a JSON or YAML file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_authorize)
