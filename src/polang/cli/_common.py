"""What several commands share: reading files, the store configuration, entity references
and the inputs of ``explain`` and the queries.

Heavy modules (the engine, the language, the store) are imported inside the functions so
that building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polang.errors import PolangError, RequestError


def read_text(path: str, what: str) -> str:
    try:
        return Path(path).read_text("utf-8")
    except OSError as e:
        raise RequestError(f"{what} {path}: cannot read: {e.strerror}") from None


def json_file(path: str, what: str) -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"{what} {path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


def json_arg(value: str, what: str) -> Any:
    """JSON given inline or as ``@file``."""
    if value.startswith("@"):
        text, where = read_text(value[1:], what), value[1:]
    else:
        text, where = value, what
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"{where}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


def uid(text: str, what: str) -> Any:
    from polang.language.parser import parse_entity_uid

    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise RequestError(
            f"--{what} {text!r}: expected an entity like 'User::\"alice\"': {e}"
        ) from None


def store_config(store: str, config_file: str | None) -> Any:
    from polang.config import Config

    base = Config.from_file(config_file) if config_file else Config()
    key = "policy_store_uri" if "://" in store else "policy_store_local_fn"
    # --store replaces whatever store the configuration file names
    sources = {"policy_store_uri": None, "policy_store_local_fn": None, "policy_store_local": None}
    return base.replace(**{**sources, key: store})


@dataclass
class Inputs:
    """What ``explain`` and the queries work on: an authorizer, entity facts and the schema."""

    authorizer: Any
    facts: Any
    schema: Any


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

            text = read_text(args.schema, "schema")
            if args.schema.endswith(".json"):
                schema = parse_schema_json(text, args.schema)
            else:
                schema = parse_schema(text, args.schema)
        policies = {}
        for f in args.policies:
            for p in parse_policies(read_text(f, "policies"), f):
                pid = p.policy_id or f"policy{len(policies)}"
                if pid in policies:
                    raise RequestError(f"{f}: duplicate policy id {pid!r}")
                policies[pid] = p
        if schema is not None:
            entities.extend(schema.action_entities())
    for f in args.entities or ():
        text = read_text(f, "entities")
        if text.lstrip().startswith("{"):  # one entity object, as the request files hold
            text = f"[{text}]"
        entities.extend(parse_entities(text, schema, filename=f))
    return Inputs(Authorizer(policies, backend=backend), EntityFacts(entities), schema)


def context_arg(args: argparse.Namespace, inputs: Inputs, actions: list[Any]) -> Any:
    """The ``--context`` record (``None`` when not given), typed by the schema if it can."""
    from polang.language.entities import parse_context

    if args.context is None:
        return None
    data = json_arg(args.context, "--context")
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


def add_inputs(p: argparse.ArgumentParser) -> None:
    """The input options of ``explain`` and the queries."""
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
