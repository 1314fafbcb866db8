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
from typing import Any, Literal, cast

from polang.errors import PolicyStoreError
from polang.jsonlimits import MAX_JSON_DEPTH, check_depth
from polang.store.errors import Problems
from polang.store.fields import show


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

#: Deepest nesting of arrays and objects in a store's YAML (the JSON limit, since a YAML
#: store is the same data; documented in docs/policy-store.md).
MAX_YAML_DEPTH = MAX_JSON_DEPTH


class _DuplicateKey(ValueError):
    pass


class _TooDeep(PolicyStoreError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"duplicate key {show(k)} in an object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _value_error(e: Exception) -> str:
    text = str(e)
    if "integer string conversion" in text:  # Python's int() guard (sys.int_info)
        return "a number has more than 4,300 digits"
    return text[:300]


def load_json(text: str, *, file: str, problems: Problems, location: str | None = None) -> Any:
    """Strict JSON (no duplicate keys, no NaN, bounded nesting); ``None`` with a problem.

    The one JSON reader of the store loader: every store file, decoded Base64 entity and
    JSON-form schema comes through here. Nesting is measured first, without recursion
    (``polang.jsonlimits``), so a hostile ``[[[[...`` is a ``limit`` problem naming
    ``MAX_JSON_DEPTH``, never a ``RecursionError``. ``location`` prefixes the line:col
    when the JSON is embedded (decoded Base64).
    """
    try:
        check_depth(text, what=file, error=_TooDeep)
    except _TooDeep:
        problems.add(
            "limit",
            file,
            f"JSON nests deeper than the limit of {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)",
            location,
        )
        return None
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
    except RecursionError:  # not reachable below MAX_JSON_DEPTH; kept as a last guard
        problems.add(
            "limit",
            file,
            f"JSON nests deeper than the limit of {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)",
            location,
        )
    except ValueError as e:  # duplicate keys, NaN, an integer of more than 4,300 digits
        problems.add("json_syntax", file, f"invalid JSON: {_value_error(e)}", location)
    return None


@functools.cache
def _strict_loader() -> Any:
    """Safe YAML limited to JSON's data model, refusing what makes YAML dangerous.

    - no anchors or aliases (``&a`` / ``*a``): an alias repeats a whole subtree, so 800
      bytes of nested aliases expand to gigabytes ("billion laughs"); a store has no need
      for them, so they are refused outright rather than bounded;
    - nesting at most :data:`MAX_YAML_DEPTH` (PyYAML composes nodes recursively);
    - only JSON's types: strings, numbers, booleans, null, lists, mappings; no timestamps
      (date-like scalars stay text), no ``!!binary``/``!!set``/``!!omap``/``!!pairs``;
    - mapping keys are scalars, kept as their text; duplicate keys are errors.

    Built on first use: PyYAML is only imported for YAML stores (start-up time).
    """
    import yaml
    from yaml.composer import ComposerError
    from yaml.constructor import ConstructorError

    class YamlLimit(ComposerError):
        """A YAML limit was hit (reported as a ``limit`` problem)."""

    class StrictLoader(yaml.SafeLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event: Any = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise ComposerError(
                    None,
                    None,
                    "YAML aliases (*name) are not allowed in a policy store",
                    cast(Any, event).start_mark,
                )
            if getattr(event, "anchor", None) is not None:
                raise ComposerError(
                    None,
                    None,
                    "YAML anchors (&name) are not allowed in a policy store",
                    event.start_mark,
                )
            self._depth += 1
            try:
                if self._depth > MAX_YAML_DEPTH:
                    raise YamlLimit(
                        None,
                        None,
                        f"YAML nests deeper than the limit of {MAX_YAML_DEPTH} levels "
                        "(MAX_YAML_DEPTH)",
                        event.start_mark,
                    )
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    StrictLoader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    json_tags = {
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:seq",
        "tag:yaml.org,2002:map",
    }
    StrictLoader.yaml_constructors = {
        tag: fn for tag, fn in yaml.SafeLoader.yaml_constructors.items() if tag in json_tags
    }

    def construct_undefined(loader: StrictLoader, node: yaml.Node) -> Any:
        raise ConstructorError(
            None,
            None,
            f"the YAML tag {show(node.tag)} is not allowed in a policy store (only JSON's "
            "types: strings, numbers, booleans, null, lists and mappings)",
            node.start_mark,
        )

    StrictLoader.add_constructor(None, construct_undefined)

    def construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConstructorError(
                    None,
                    None,
                    "a mapping key must be a plain value, not a list or a mapping",
                    key_node.start_mark,
                )
            key = key_node.value
            if key in out:
                raise ConstructorError(
                    None, None, f"duplicate key {show(key)}", key_node.start_mark
                )
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    StrictLoader.YamlLimit = YamlLimit  # type: ignore[attr-defined]
    return StrictLoader


def load_yaml(text: str, *, file: str, problems: Problems) -> Any:
    """Strict YAML (see :func:`_strict_loader`); ``None`` with a problem on failure."""
    import yaml

    loader = _strict_loader()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        kind = "limit" if isinstance(e, loader.YamlLimit) else "yaml_syntax"
        problems.add(kind, file, f"invalid YAML: {str(problem)[:300]}", where)
    except RecursionError:  # not reachable below MAX_YAML_DEPTH; kept as a last guard
        problems.add("limit", file, f"YAML nests deeper than the limit of {MAX_YAML_DEPTH} levels")
    except (ValueError, TypeError, OverflowError) as e:  # int("1" * 5000) and the like
        problems.add("yaml_syntax", file, f"invalid YAML: {_value_error(e)}")
    return None


def decode_text(data: bytes, *, file: str, problems: Problems) -> str | None:
    """UTF-8 (a leading BOM is tolerated); ``None`` with a problem otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problems.add("encoding", file, f"not UTF-8 text (byte {e.start}: {e.reason})")
        return None
