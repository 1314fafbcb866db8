"""``polang authorize``: decide one request against a store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from polang.cli._common import json_file, store_config
from polang.errors import RequestError


def cmd_authorize(args: argparse.Namespace) -> int:
    from polang.engine import Engine
    from polang.tokens.model import TokenInput

    engine = Engine(store_config(args.store, args.config))
    try:
        resource = json_file(args.resource, "resource")
        context = json_file(args.context, "context") if args.context else None
        if args.token:
            tokens = []
            for t in args.token:
                mapping, sep, jwt = t.partition("=")
                if not sep or not mapping or not jwt:
                    raise RequestError(f"--token {t[:20]}...: expected MAPPING=JWT")
                tokens.append(TokenInput(mapping, jwt))
            if args.principal:
                raise RequestError("--principal and --token cannot be combined")
            result = engine.authorize_multi_issuer(tokens, args.action, resource, context)
        else:
            principal = json_file(args.principal, "principal") if args.principal else None
            result = engine.authorize_unsigned(args.action, resource, context, principal)
    finally:
        engine.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from rich.console import Console

        console = Console()
        colour = "green" if result.decision else "red"
        console.print(f"[bold {colour}]{result.response.decision.upper()}[/]")
        diag = result.response.diagnostics
        if diag.reason:
            console.print("reason: " + ", ".join(diag.reason))
        elif not result.decision:
            console.print("reason: no permit policy applied (default deny)")
        for e in diag.errors:
            console.print(f"[yellow]error[/] in {e['policy_id']}: {e['error']}")
        for d in result.dropped_tokens or []:
            console.print(
                f"[yellow]dropped token[/] {d.index} ({d.mapping}): {d.kind}: {d.message}"
            )
    return 0 if result.decision else 1


def register(sub: Any) -> None:
    p = sub.add_parser("authorize", help="decide one request against a store")
    p.add_argument("--store", required=True, help="directory, .parc, legacy .json/.yaml or URL")
    p.add_argument("--action", required=True, help="e.g. 'Acme::Action::\"read\"'")
    p.add_argument("--resource", required=True, help="resource entity JSON file")
    p.add_argument("--principal", help="principal entity JSON file (unsigned requests)")
    p.add_argument("--context", help="context JSON file")
    p.add_argument(
        "--token", action="append", help="MAPPING=JWT (multi-issuer requests; repeatable)"
    )
    p.add_argument("--config", help="ENGINE_* properties as a JSON or YAML file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_authorize)
