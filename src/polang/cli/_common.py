"""What several commands share: reading files, the store configuration, entity references
and the inputs of ``explain`` and the queries.

Heavy modules (the engine, the language, the store) are imported inside the functions so
that building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from polang.errors import EntityError, PolangError, RequestError


def echo(text: str, file: TextIO | None = None) -> None:
    """Print a line that may quote input (file names, ids, messages): control characters,
    line separators and bidi controls in it are escaped (``printable_lines``: its own line
    breaks, as under a parse error's excerpt, are kept). Every plain ``print`` of the
    command line that is not JSON goes through here."""
    from polang.language.values import printable_lines  # polang --help stays fast

    print(printable_lines(text), file=file if file is not None else sys.stdout)


def read_text(path: str, what: str) -> str:
    """An input file a command names, through the one bounded reader (``polang.inputs``):
    a regular file or a pipe (``<(cmd)``, ``-`` for standard input) of at most
    ``MAX_INPUT_FILE_BYTES``; ``/dev/zero``, a FIFO nobody writes to, a directory end in
    an ``InputFileError`` naming the file (status 2, never the deny status)."""
    from polang.inputs.files import read_input_file  # polang --help stays fast

    data = read_input_file(path, what=what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"{what} {path}: not UTF-8 text (byte {e.start})") from None
    if "\r" in text:  # newlines as a text-mode open() reads them (positions unchanged)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def add_command(
    sub: Any, name: str, help: str, epilog: str, *, description: str | None = None
) -> argparse.ArgumentParser:
    """A command's parser as every command has it: ``help`` (capitalised, a full stop) as
    the description unless one is given, and the epilog's examples kept as written."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description or help[0].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def parse_json(text: str, where: str) -> Any:
    """Untrusted JSON: depth bounded first (``polang.jsonlimits``), errors as ``where:line:col``."""
    from polang.jsonlimits import loads  # polang --help stays fast

    return loads(text, what=where, error=RequestError)


def json_file(path: str, what: str) -> Any:
    return parse_json(read_text(path, what), f"{what} {path}")


def json_arg(value: str, what: str) -> Any:
    """A JSON value given inline (``{...}``), as ``@file``, or as the path of a file."""
    if value.startswith("@"):
        return json_file(value[1:], what)
    if value.lstrip()[:1] in ("{", "["):
        return parse_json(value, what)
    return json_file(value, what)


def is_reference(value: str) -> bool:
    """``T::"id"`` rather than a file: a value with ``::`` that names no existing file."""
    return "::" in value and not os.path.exists(value)


def uid(text: str, what: str) -> Any:
    from polang.language.parser import parse_entity_uid  # polang --help stays fast

    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise RequestError(
            f"--{what} {text!r}: expected an entity like 'User::\"alice\"': {e}"
        ) from None


def entity_arg(value: str, what: str) -> Any:
    """``--principal`` / ``--resource``: an ``EntityUID`` for a reference ``T::"id"``,
    else the JSON entity the file at that path holds."""
    if is_reference(value):
        return uid(value, what)
    if value != "-" and not os.path.exists(value):
        raise RequestError(
            f"--{what} {value!r}: no such file, and not an entity reference like 'User::\"alice\"'"
        )
    return json_file(value, what)


def token_args(values: list[str]) -> list[Any]:
    """``--token MAPPING=JWT`` values as the engine's ``TokenInput`` list."""
    from polang.tokens.model import TokenInput  # polang --help stays fast

    tokens = []
    for t in values:
        mapping, sep, jwt = t.partition("=")
        if not sep or not mapping or not jwt:
            raise RequestError(f"--token {t[:20]}...: expected MAPPING=JWT")
        tokens.append(TokenInput(mapping, jwt))
    return tokens


def entity_or_uid(value: str, what: str, schema: Any) -> tuple[Any, list[Any]]:
    """``entity_arg`` for commands that work on facts: the uid, and the entity (if the
    value was a file) to lay over the store's entities."""
    # polang --help stays fast
    from polang.language.entities import EntityUID, parse_entity, parse_mapped_entity

    data = entity_arg(value, what)
    if isinstance(data, EntityUID):
        return data, []
    if not isinstance(data, dict):
        raise RequestError(f"{what} {value}: expected an entity object")
    try:
        if "cedar_entity_mapping" in data:
            ent = parse_mapped_entity(data, schema, path="$")
        else:
            ent = parse_entity(data, schema, path="$")
    except EntityError as e:
        raise RequestError(f"{what} {value}: {e}") from None
    return ent.uid, [ent]


def engine_config(config_file: str | None) -> Any:
    """``ENGINE_*`` properties: the ``--config`` file, with the environment's ``ENGINE_*``
    variables over it (as ``polang store`` and the library's ``Config.from_env`` read them)."""
    from polang.config import Config  # polang --help stays fast

    return Config.from_env(base=Config.from_file(config_file) if config_file else None)


def store_config(store: str, config_file: str | None) -> Any:
    base = engine_config(config_file)
    key = "policy_store_uri" if "://" in store else "policy_store_local_fn"
    # --store replaces whatever store the configuration file names
    sources = {"policy_store_uri": None, "policy_store_local_fn": None, "policy_store_local": None}
    return base.replace(**{**sources, key: store})


class Inputs:
    """What ``explain`` and the queries work on: an authorizer, entity facts, the schema,
    whether requests are checked against it, and the ``--principal`` / ``--resource``
    uids (``None`` when not given). A plain class: ``dataclasses`` would cost the parser's
    start-up an import of ``inspect``."""

    def __init__(
        self,
        authorizer: Any,
        facts: Any,
        schema: Any,
        strict: bool = True,
        principal: Any = None,
        resource: Any = None,
    ) -> None:
        self.authorizer = authorizer
        self.facts = facts
        self.schema = schema
        self.strict = strict
        self.principal = principal
        self.resource = resource

    def check_request(
        self,
        principal: Any,
        action: Any,
        resource: Any,
        context: Any = None,
        *,
        kinds: set[str] | None = None,
    ) -> None:
        """The engine's own request check (``validate_request``): an undeclared action, or
        a principal or resource type the action does not apply to, is an error (status 2)
        as in ``authorize``, not a confident deny. ``None`` parts are not checked."""
        if self.schema is None or not self.strict:
            return
        from polang.language.validate import validate_request  # polang --help stays fast

        findings = validate_request(principal, action, resource, context, self.schema)
        if kinds is not None:
            findings = [f for f in findings if f.kind in kinds]
        if findings:
            raise RequestError(
                "the request does not match the schema: " + "; ".join(str(f) for f in findings)
            )

    def missing(self, uid: Any) -> bool:
        """Whether no entity with this uid is known (the store's or the files')."""
        return uid is not None and self.facts.get(uid) is None


def load_inputs(args: argparse.Namespace, backend: str = "compiled") -> Inputs:
    """The store or the loose files named on the command line, with the ``--entities``
    files and the ``--principal`` / ``--resource`` entity files laid over it."""
    from polang.datalog.authorizer import Authorizer  # polang --help stays fast
    from polang.datalog.facts import EntityFacts
    from polang.language.entities import Entity, parse_entities
    from polang.language.parser import parse_policies

    schema = None
    strict = True
    store = None
    entities: list[Entity] = []
    if args.store:
        if args.policies or args.schema:
            raise RequestError("--store cannot be combined with --policies or --schema")
        from polang.store import PolicyStoreSource  # polang --help stays fast

        config = engine_config(args.config)
        strict = config.strict_schema_validation
        store = PolicyStoreSource.from_location(args.store).load(config)
        schema = store.schema
    else:
        if not args.policies:
            raise RequestError("give a policy store (--store) or policy files (--policies)")
        if args.schema:
            # polang --help stays fast
            from polang.language.schema import parse_schema, parse_schema_json

            text = read_text(args.schema, "schema")
            if args.schema.endswith(".json"):
                schema = parse_schema_json(text, args.schema)
            else:
                schema = parse_schema(text, args.schema)
        policies: dict[str, Any] = {}
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
    uids: dict[str, Any] = {}
    for part in ("principal", "resource"):
        value = getattr(args, part, None)
        if value:
            uids[part], given = entity_or_uid(value, part, schema)
            entities.extend(given)
    if store is not None:  # the store as the engine reads it, the files laid over it
        from polang.engine.snapshot import store_authorizer, store_facts  # polang --help stays fast

        authorizer = store_authorizer(store, backend)
        facts = store_facts(store, extra=entities)
    else:
        authorizer = Authorizer(policies, backend=backend)
        facts = EntityFacts(entities)
    return Inputs(
        authorizer,
        facts,
        schema,
        strict,
        uids.get("principal"),
        uids.get("resource"),
    )


def context_arg(args: argparse.Namespace, inputs: Inputs, actions: list[Any]) -> Any:
    """The ``--context`` record (``None`` when not given), typed by the schema if it can."""
    from polang.language.entities import parse_context  # polang --help stays fast

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


ENTITY_HELP = "a reference like '%s::\"id\"', or a JSON file holding the entity (- for stdin)"
CONTEXT_HELP = "the context: a JSON file (- for stdin), @FILE, or inline JSON ('{\"mfa\": true}')"


def add_inputs(p: argparse.ArgumentParser) -> None:
    """The input options of ``explain`` and the queries."""
    g = p.add_argument_group("inputs")
    g.add_argument(
        "--store",
        metavar="STORE",
        help="policy store: directory, .parc archive, legacy .json/.yaml file",
    )
    g.add_argument(
        "--config", metavar="FILE", help="ENGINE_* properties (JSON or YAML) for loading the store"
    )
    g.add_argument("--policies", nargs="+", metavar="FILE", help=".polang files (without --store)")
    g.add_argument(
        "--schema", metavar="FILE", help=".polangschema (or JSON schema .json) for --policies"
    )
    g.add_argument(
        "--entities",
        nargs="+",
        metavar="FILE",
        help="entity JSON files: arrays or single entities (laid over the store's defaults)",
    )
    g.add_argument(
        "--context",
        metavar="JSON",
        help=CONTEXT_HELP + "; queries without it treat the context as unknown",
    )


#: Width given to rich when the answer goes to a file or a pipe: rich would otherwise
#: assume 80 columns and wrap or cut cells; nothing written to a file is ever cut.
UNBOUNDED_WIDTH = 1_000_000


def output_console(file: TextIO | None = None) -> Any:
    """A rich console for the answer (stdout by default): on a terminal it fits the
    terminal; written to a file or a pipe it is plain text and never wrapped or cut.

    Markup and emoji codes are off: what is printed quotes ids and values, and an id
    ``[/]`` or ``:smile:`` is text (styles are given as ``style=``, never inside a string).
    Callers' text goes through ``printable`` (docs/security.md, "What polang prints")."""
    from rich.console import Console

    out = file if file is not None else sys.stdout
    if out.isatty():
        return Console(file=out, highlight=False, markup=False, emoji=False)
    return Console(
        file=out,
        highlight=False,
        markup=False,
        emoji=False,
        width=UNBOUNDED_WIDTH,
        soft_wrap=True,
    )


@contextmanager
def progress_bar(label: str, unit: str) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback drawing a bar on stderr with the count and
    the rate, when stderr is a terminal; ``None`` otherwise (nothing is drawn)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            # the average since the start: the count over the elapsed time
            elapsed = task.elapsed
            if not elapsed or not task.completed:
                return Text("")
            return Text(f"{task.completed / elapsed:,.0f}/s", style="dim")

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        RateColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    task = bar.add_task(label, total=None)

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    bar.start()
    try:
        yield progress
    finally:
        bar.stop()
