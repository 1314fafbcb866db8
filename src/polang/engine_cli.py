"""CLI commands around the engine: ``polang authorize`` and ``polang validate``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from polang.errors import PolangError, RequestError


def _json_file(path: str, what: str) -> Any:
    try:
        text = Path(path).read_text("utf-8")
    except OSError as e:
        raise RequestError(f"{what} {path}: cannot read: {e.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"{what} {path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


def _store_config(store: str, config_file: str | None) -> Any:
    from polang.config import Config

    base = Config.from_file(config_file) if config_file else Config()
    key = "policy_store_uri" if "://" in store else "policy_store_local_fn"
    # --store replaces whatever store the configuration file names
    sources = {"policy_store_uri": None, "policy_store_local_fn": None, "policy_store_local": None}
    return base.replace(**{**sources, key: store})


def cmd_authorize(args: argparse.Namespace) -> int:
    from polang.engine import Engine
    from polang.tokens.model import TokenInput

    engine = Engine(_store_config(args.store, args.config))
    try:
        resource = _json_file(args.resource, "resource")
        context = _json_file(args.context, "context") if args.context else None
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
            principal = _json_file(args.principal, "principal") if args.principal else None
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


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a store (any source) or loose policy files against a schema."""
    from polang.language.parser import parse_policies
    from polang.language.schema import parse_schema, parse_schema_json
    from polang.language.validate import validate_policies

    findings: list[Any] = []
    if args.schema:
        text = Path(args.schema).read_text("utf-8")
        schema = (
            parse_schema_json(text, args.schema)
            if args.schema.endswith(".json")
            else parse_schema(text, args.schema)
        )
        policies: dict[str, Any] = {}
        for f in args.target:
            for i, p in enumerate(parse_policies(Path(f).read_text("utf-8"), f)):
                policies[p.policy_id or f"{f}#{i}"] = p
        findings = validate_policies(policies, schema)
    else:
        if len(args.target) != 1:
            raise PolangError("give one store, or policy files with --schema")
        from polang.store.source import PolicyStoreSource

        config = _store_config(args.target[0], None)
        store = PolicyStoreSource.from_config(config).load(config)
        findings = validate_policies({**store.all_policies(), **store.templates}, store.schema)
    for f in findings:
        print(f)
    print(f"{len(findings)} finding(s)" if findings else "valid")
    return 1 if findings else 0


def add_cli_commands(sub: Any) -> None:
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

    p = sub.add_parser("validate", help="strictly validate a store's policies, or policy files")
    p.add_argument("target", nargs="+", help="a store, or .polang files with --schema")
    p.add_argument("--schema", help="schema file (.polangschema or JSON) for loose policy files")
    p.set_defaults(func=cmd_validate)
