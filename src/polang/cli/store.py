"""``polang store ...``: validate, pack and convert policy stores from the shell.

Exit status: 0 valid / written, 1 the store has problems (every one is printed), 2 bad
usage or configuration (the CLI's common handler).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from polang.cli._common import add_command, echo

if TYPE_CHECKING:
    from polang.config import Config


def _config(args: argparse.Namespace) -> Config:
    from polang.config import Config  # polang --help stays fast

    base = Config.from_file(args.config) if getattr(args, "config", None) else None
    cfg = Config.from_env(base=base)
    if getattr(args, "store_id", None):
        cfg = cfg.replace(policy_store_id=args.store_id)
    if getattr(args, "no_checksum", False):
        cfg = cfg.replace(policy_store_validate_checksum=False)
    return cfg


def _store_config(args: argparse.Namespace) -> Config:
    # the store named on the command line replaces any source named by the environment
    cfg = _config(args)
    return cfg.replace(policy_store_local_fn=None, policy_store_uri=None, policy_store_local=None)


def cmd_validate(args: argparse.Namespace) -> int:
    from polang.store.tools import validate_store  # polang --help stays fast

    strict = True if getattr(args, "strict", False) else False if args.no_strict else None
    report = validate_store(args.source, _store_config(args), strict=strict)
    if args.json:
        print(json.dumps(report, indent=2, default=str))  # ASCII JSON: nothing raw but ASCII
        return 0 if report["valid"] else 1
    if report["problems"]:
        echo(f"{report['source']}: {len(report['problems'])} problem(s)")
        for p in report["problems"]:
            where = p["file"] or "<store>"
            if p["location"]:
                where += (":" if str(p["location"])[:1].isdigit() else " at ") + p["location"]
            echo(f"  {where}: {p['message']} [{p['kind']}]")
        return 1
    summary: dict[str, Any] = report["summary"]
    if report["validation_errors"]:
        echo(f"{report['source']}: {len(report['validation_errors'])} validation error(s)")
        for v in report["validation_errors"]:
            echo(f"  {v}")
        return 1
    echo(
        f"{report['source']}: valid store {summary['id']!r}"
        + (f" version {summary['version']}" if summary.get("version") else "")
    )
    for key in ("policies", "templates", "template_links", "entities", "trusted_issuers"):
        echo(f"  {key.replace('_', ' ')}: {summary[key]}")
    for w in report.get("warnings", ()):  # accepted, but flagged (--strict makes them errors)
        where = w["file"] or "<store>"
        if w["location"]:
            where += (":" if str(w["location"])[:1].isdigit() else " at ") + w["location"]
        echo(f"  warning: {where}: {w['message']} [{w['kind']}]")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from polang.store.tools import pack_store  # polang --help stays fast

    summary = pack_store(args.directory, args.output, _store_config(args))
    echo(f"wrote {summary['archive']} ({summary['files']} files, store {summary['id']!r})")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from polang.store.tools import convert_legacy  # polang --help stays fast

    summary = convert_legacy(args.legacy, args.output, _store_config(args))
    echo(
        f"wrote {summary['directory']}: {summary['policies']} policies, "
        f"{summary['templates']} templates, {summary['entities']} entities, "
        f"{summary['trusted_issuers']} trusted issuers"
    )
    if "note" in summary:
        echo(f"note: {summary['note']}", file=sys.stderr)
    return 0


STORE_EXAMPLES = """examples:
  polang store validate examples/stores/legacy.yaml
  polang store pack examples/stores/directory -o acme.parc
  polang store convert examples/stores/legacy.json -o ./acme-store

exit status: 0 valid / written, 1 the store has problems (each printed), 2 bad input
"""


def register(subparsers: Any) -> None:
    """Register ``polang store validate|pack|convert`` on the main parser's subparsers."""
    store = add_command(
        subparsers,
        "store",
        "validate, pack and convert policy stores",
        STORE_EXAMPLES,
        description="Tools for policy stores (docs/policy-store.md#tools).",
    )
    sub = store.add_subparsers(dest="store_command", required=True, metavar="STORE_COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", metavar="FILE", help="a JSON/YAML file of ENGINE_* settings")
        p.add_argument(
            "--no-checksum",
            action="store_true",
            help="skip manifest checksums (ENGINE_POLICY_STORE_VALIDATE_CHECKSUM=disabled)",
        )

    def parser(name: str, help: str) -> argparse.ArgumentParser:
        return add_command(sub, name, help, STORE_EXAMPLES)

    p = parser("validate", "load a store and print a summary or every problem")
    p.add_argument("source", help="directory, .parc, .json, .yaml/.yml or http(s) URL")
    p.add_argument("--store-id", metavar="ID", help="the store of a multi-store legacy file")
    p.add_argument("--no-strict", action="store_true", help="skip strict schema validation")
    p.add_argument(
        "--strict",
        action="store_true",
        help="unknown fields in store records are errors, not warnings (and schema "
        "validation runs)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    common(p)
    p.set_defaults(func=cmd_validate)

    p = parser("pack", "write a directory store as a .parc archive")
    p.add_argument("directory", help="the directory store")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the .parc file to write")
    common(p)
    p.set_defaults(func=cmd_pack)

    p = parser("convert", "convert a legacy JSON/YAML store to a directory store")
    p.add_argument("legacy", help="the legacy .json / .yaml file")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the directory to create")
    p.add_argument("--store-id", metavar="ID", help="the store of a multi-store legacy file")
    common(p)
    p.set_defaults(func=cmd_convert)
