"""``polang explain``: why a request is allowed or denied.

Inputs are a policy store (``--store``) or loose files (``--policies``, ``--schema``,
``--entities``); entity files given with a store are laid over its default entities
(request entities win). Exit status 0 on allow and 1 on deny (like ``authorize``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from polang.cli._common import (
    ENTITY_HELP,
    add_command,
    add_inputs,
    context_arg,
    load_inputs,
    output_console,
    uid,
)

EXAMPLES = """examples:
  polang explain --store examples/stores/directory \\
      --entities examples/requests/alice.json examples/requests/roadmap.json \\
      --principal 'Acme::User::"alice"' --action 'Acme::Action::"edit"' \\
      --resource 'Acme::Document::"roadmap"'
  polang explain --store examples/stores/directory --principal examples/requests/alice.json \\
      --action 'Acme::Action::"read"' --resource examples/requests/roadmap.json --json

exit status: 0 allow, 1 deny, 2 bad input (one 'error:' line on stderr)
"""


def cmd_explain(args: argparse.Namespace) -> int:
    from polang.analysis.explain import explain  # polang --help stays fast

    inputs = load_inputs(args, backend=args.backend)
    action = uid(args.action, "action")
    context = context_arg(args, inputs, [action])
    inputs.check_request(inputs.principal, action, inputs.resource, context)
    ex = explain(
        inputs.authorizer,
        inputs.principal,
        action,
        inputs.resource,
        context,
        inputs.facts,
        schema=inputs.schema,
    )
    if args.json or args.format == "json":
        print(json.dumps(ex.to_dict(repairs=args.repairs), indent=2))
    else:
        output_console().print(
            ex.rich(show_rules=args.rules, all_policies=args.all, repairs=args.repairs)
        )
    return 0 if ex.allow else 1


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "explain",
        "why a request is allowed or denied (the derivation of each verdict)",
        EXAMPLES,
        description="Why a request is allowed or denied: the derivation of every relevant "
        "policy's verdict.",
    )
    add_inputs(p)
    p.add_argument(
        "--principal", metavar="ENTITY", help=ENTITY_HELP % "User" + " (omit for no principal)"
    )
    p.add_argument(
        "--action", required=True, metavar="UID", help="the action, e.g. 'Action::\"view\"'"
    )
    p.add_argument("--resource", required=True, metavar="ENTITY", help=ENTITY_HELP % "Doc")
    p.add_argument(
        "--backend",
        choices=["compiled", "pydatalog"],
        default="compiled",
        help="the backend that decides (default: compiled; pydatalog is the slow reference)",
    )
    p.add_argument(
        "--format",
        choices=("tree", "json"),
        default="tree",
        help="tree (default) or json: one JSON object on stdout (`repairs` a list with --repairs)",
    )
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--rules", action="store_true", help="show the Datalog rule behind each step")
    p.add_argument("--all", action="store_true", help="list every policy, not only relevant ones")
    p.add_argument(
        "--repairs",
        action="store_true",
        help="also list the smallest changes to the data that would flip the decision "
        "(each verified by deciding again; see docs/why-denied.md)",
    )
    p.set_defaults(func=cmd_explain)
