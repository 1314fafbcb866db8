"""The raw store: every format's parts as text and JSON, before the language parses them.

Readers (directory/archive layout, legacy file) produce a :class:`RawStore`; the builder
turns it into a :class:`~polang.store.model.PolicyStore`. Keeping the two steps apart lets
the conversion tool reuse what a reader found (texts, records) without re-deriving it
from parsed ASTs.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from polang.store.errors import Problems


@dataclass
class TextPart:
    """A piece of text to parse. ``parse_name`` is what parsers put in spans and messages."""

    file: str
    text: str
    location: str | None = None
    parse_name: str = ""

    def __post_init__(self) -> None:
        if not self.parse_name:
            self.parse_name = f"{self.file} {self.location}" if self.location else self.file


@dataclass
class PolicyPart(TextPart):
    """Policy text. ``role``: a ``policies/`` file, a ``templates/`` file or a legacy record
    (``expected_id`` is then the record's key: exactly one policy or template)."""

    role: Literal["policies", "templates", "legacy"] = "policies"
    expected_id: str | None = None


@dataclass
class JsonPart:
    """A JSON value found at ``location`` (a JSON path) of ``file``."""

    file: str
    location: str
    data: Any


@dataclass
class RawStore:
    """What a reader found, before parsing."""

    format: Literal["directory", "archive", "legacy-json", "legacy-yaml"]
    source: str
    digest: str
    id: str | None = None
    name: str | None = None
    description: str | None = None
    version: str | None = None
    polang_version: str | None = None
    created_date: datetime | None = None
    updated_date: datetime | None = None
    schema: TextPart | None = None
    schema_format: Literal["polang", "polang-json"] = "polang"
    policies: list[PolicyPart] = field(default_factory=list)
    links: list[JsonPart] = field(default_factory=list)
    entities: list[JsonPart] = field(default_factory=list)
    """One part per entity object; ``data`` is the decoded entity JSON."""
    issuers: list[JsonPart] = field(default_factory=list)
    """Issuer maps ``{"<issuer_id>": record}``."""
    issuer_records: dict[str, Any] = field(default_factory=dict)
    """Raw issuer records by id (conversion writes them back unchanged)."""


# ---------------------------------------------------------------- strict JSON / YAML


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"duplicate key {k!r} in an object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def load_json(text: str, *, file: str, problems: Problems, location: str | None = None) -> Any:
    """Strict JSON (no duplicate keys, no NaN); ``None`` with a problem on failure.

    ``location`` prefixes the line:col when the JSON is embedded (decoded Base64).
    """
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        where = f"{e.lineno}:{e.colno}"
        problems.add(
            "json_syntax",
            file,
            f"invalid JSON: {e.msg}" + (f" (at {where} of the decoded text)" if location else ""),
            location or where,
        )
    except ValueError as e:
        problems.add("json_syntax", file, f"invalid JSON: {e}", location)
    return None


@functools.cache
def _strict_loader() -> Any:
    """Safe YAML with every scalar a plain JSON type: no timestamps, no duplicate keys.

    Built on first use: PyYAML is only imported for YAML stores (start-up time).
    """
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    StrictLoader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def load_yaml(text: str, *, file: str, problems: Problems) -> Any:
    """Strict YAML (see :func:`_strict_loader`); ``None`` with a problem on failure."""
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        problems.add("yaml_syntax", file, f"invalid YAML: {problem}", where)
    return None


def decode_text(data: bytes, *, file: str, problems: Problems) -> str | None:
    """UTF-8 (a leading BOM is tolerated); ``None`` with a problem otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problems.add("encoding", file, f"not UTF-8 text (byte {e.start}: {e.reason})")
        return None
