"""``polang explain``: why a request is allowed or denied.

Inputs are a policy store (``--store``) or loose files (``--policies``, ``--schema``,
``--entities``); entity files given with a store are laid over its default entities
(request entities win). Exit status 0 on allow and 1 on deny (like ``authorize``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from polang.cli._common import add_inputs, context_arg, load_inputs, uid


def cmd_explain(args: argparse.Namespace) -> int:
    from polang.datalog.explain import explain

    inputs = load_inputs(args, backend=args.backend)
    action = uid(args.action, "action")
    principal = uid(args.principal, "principal") if args.principal else None
    resource = uid(args.resource, "resource")
    context = context_arg(args, inputs, [action])
    ex = explain(inputs.authorizer, principal, action, resource, context, inputs.facts)
    if args.json:
        print(json.dumps(ex.to_dict(), indent=2))
    else:
        from rich.console import Console

        Console(highlight=False).print(ex.rich(show_rules=args.rules, all_policies=args.all))
    return 0 if ex.allow else 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain", help="why a request is allowed or denied (the derivation of each verdict)"
    )
    add_inputs(p)
    p.add_argument("--principal", help='e.g. User::"alice" (omit for no principal)')
    p.add_argument("--action", required=True, help='e.g. Action::"view"')
    p.add_argument("--resource", required=True, help='e.g. Doc::"d1"')
    p.add_argument("--backend", choices=["compiled", "pydatalog"], default="compiled")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--rules", action="store_true", help="show the Datalog rule behind each step")
    p.add_argument("--all", action="store_true", help="list every policy, not only relevant ones")
    p.set_defaults(func=cmd_explain)
