"""Strict JSON and YAML: the one reader of each for the records polang reads from files.

Store files, legacy stores, YAML configuration files and policy test files are read here:
no duplicate keys, no NaN, nesting bounded without recursion, YAML limited to JSON's data
model. A problem is added to the caller's :class:`~polang.inputs.problems.Problems`
(the file, the place, a stable kind) and the reader returns ``None``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from polang.inputs.fields import show
from polang.inputs.problems import Problems
from polang.jsonlimits import (
    MAX_JSON_DEPTH,
    JSONLimitError,
    decode,
    value_error_text,
)
from polang.runtime import unavailable

#: Deepest nesting of arrays and objects in a store's YAML (the JSON limit, since a YAML
#: store is the same data; documented in docs/policy-store.md).
MAX_YAML_DEPTH = MAX_JSON_DEPTH


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"duplicate key {show(k)} in an object")
        out[k] = v
    return out


def load_json(text: str, *, file: str, problems: Problems, location: str | None = None) -> Any:
    """Strict JSON (no duplicate keys, no NaN, bounded nesting); ``None`` with a problem.

    The one JSON reader of the store loader: every store file, decoded Base64 entity and
    JSON-form schema comes through here. Nesting is measured first, without recursion
    (``polang.jsonlimits``), so a hostile ``[[[[...`` is a ``limit`` problem naming
    ``MAX_JSON_DEPTH``, never a ``RecursionError``. ``location`` prefixes the line:col
    when the JSON is embedded (decoded Base64).
    """
    try:
        return decode(text, pairs_hook=_pairs)
    except json.JSONDecodeError as e:
        where = f"{e.lineno}:{e.colno}"
        problems.add(
            "json_syntax",
            file,
            f"invalid JSON: {e.msg}" + (f" (at {where} of the decoded text)" if location else ""),
            location or where,
        )
    except JSONLimitError as e:
        if str(e).startswith("JSON nests"):
            problems.add("limit", file, str(e), location)
        else:  # an integer of more than 4,300 digits
            problems.add("json_syntax", file, f"invalid JSON: {e}", location)
    except ValueError as e:  # duplicate keys, NaN
        problems.add("json_syntax", file, f"invalid JSON: {value_error_text(e)}", location)
    return None


class _YamlRefused(Exception):
    """A YAML construct a store may not use (internal; ``kind`` is the problem kind)."""

    def __init__(self, kind: str, message: str, mark: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.mark = mark


_JSON_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
}


@functools.cache
def _yaml_parts() -> tuple[Any, Any, Any]:
    """The event parser class (libyaml's when installed), a resolver and a constructor.

    Built on first use: PyYAML is only imported for YAML stores (start-up time).
    """
    import yaml

    class Resolver(yaml.resolver.Resolver):
        pass

    # date-like scalars stay text (JSON has no timestamp type)
    Resolver.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    }
    parser = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
    return parser, Resolver(), yaml.constructor.SafeConstructor()


def _yaml_value(text: str) -> Any:
    """Build the value of a one-document YAML text from parser events, without recursion.

    YAML is read as JSON's data model, refusing what makes YAML dangerous or surprising:

    - no anchors or aliases (``&a`` / ``*a``): an alias repeats a whole subtree, so 800
      bytes of nested aliases expand to gigabytes ("billion laughs"); a store has no need
      for them, so they are refused outright rather than bounded;
    - nesting at most :data:`MAX_YAML_DEPTH`;
    - only JSON's types: strings, numbers, booleans, null, lists, mappings; date-like
      scalars stay text; ``!!binary``, ``!!set``, ``!!omap``, merge keys (``<<``) and
      application tags are refused;
    - mapping keys are scalars, kept as their text; a duplicate key is an error.

    The events come from libyaml when it is installed (PyYAML's pure-Python composer and
    constructor are recursive, slow and keep every node in memory), so time and memory
    stay a small multiple of the text's size.
    """
    import yaml

    parser_cls, resolver, constructor = _yaml_parts()
    parser = parser_cls(text)
    # each open collection: [container, pending key (mappings), start mark]
    stack: list[list[Any]] = []
    root: Any = None
    documents = 0

    def place(value: Any, mark: Any) -> None:
        nonlocal root
        if not stack:
            root = value
            return
        top = stack[-1]
        if isinstance(top[0], list):
            top[0].append(value)
        elif top[1] is _NO_KEY:
            raise _YamlRefused(
                "yaml_syntax", "a mapping key must be a plain value, not a list or a mapping", mark
            )
        else:
            top[0][top[1]] = value
            top[1] = _NO_KEY

    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                break
            mark = event.start_mark
            if isinstance(event, yaml.AliasEvent):
                raise _YamlRefused(
                    "yaml_syntax", "YAML aliases (*name) are not allowed in a policy store", mark
                )
            if getattr(event, "anchor", None) is not None:
                raise _YamlRefused(
                    "yaml_syntax", "YAML anchors (&name) are not allowed in a policy store", mark
                )
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _YamlRefused(
                        "yaml_syntax", "a store file holds one YAML document, found a second", mark
                    )
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                is_map = isinstance(event, yaml.MappingStartEvent)
                tag = event.tag
                allowed = "tag:yaml.org,2002:map" if is_map else "tag:yaml.org,2002:seq"
                if tag not in (None, "!", allowed):
                    raise _YamlRefused("yaml_syntax", _tag_refused(tag), mark)
                if stack and isinstance(stack[-1][0], dict) and stack[-1][1] is _NO_KEY:
                    raise _YamlRefused(
                        "yaml_syntax",
                        "a mapping key must be a plain value, not a list or a mapping",
                        mark,
                    )
                if len(stack) >= MAX_YAML_DEPTH:
                    raise _YamlRefused("limit", _YAML_TOO_DEEP, mark)
                stack.append([{} if is_map else [], _NO_KEY, mark])
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                done = stack.pop()
                place(done[0], done[2])
            elif isinstance(event, yaml.ScalarEvent):
                if stack and isinstance(stack[-1][0], dict) and stack[-1][1] is _NO_KEY:
                    key = event.value
                    if key in stack[-1][0]:
                        raise _YamlRefused("yaml_syntax", f"duplicate key {show(key)}", mark)
                    if event.implicit[0] and key == "<<":
                        raise _YamlRefused(
                            "yaml_syntax", "YAML merge keys (<<) are not allowed", mark
                        )
                    stack[-1][1] = key
                    continue
                place(_scalar(event, resolver, constructor), mark)
    finally:
        parser.dispose()
    return root


_NO_KEY: Any = object()
_YAML_TOO_DEEP = f"YAML nests deeper than the limit of {MAX_YAML_DEPTH} levels (MAX_YAML_DEPTH)"


def _tag_refused(tag: str) -> str:
    return (
        f"the YAML tag {show(tag)} is not allowed in a policy store (only JSON's types: "
        "strings, numbers, booleans, null, lists and mappings)"
    )


def _scalar(event: Any, resolver: Any, constructor: Any) -> Any:
    import yaml

    tag = event.tag
    if tag is None or tag == "!":
        tag = resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag not in _JSON_TAGS:
        raise _YamlRefused("yaml_syntax", _tag_refused(tag), event.start_mark)
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark)
    if tag == "tag:yaml.org,2002:str":
        return event.value
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return constructor.construct_yaml_bool(node)
    if tag == "tag:yaml.org,2002:int":
        return constructor.construct_yaml_int(node)
    return constructor.construct_yaml_float(node)


def load_yaml(text: str, *, file: str, problems: Problems) -> Any:
    """Strict YAML (see :func:`_yaml_value`); ``None`` with a problem on failure."""
    try:
        import yaml
    except ImportError:  # no PyYAML (Pyodide without its build): JSON is still read
        problems.add(
            "source",
            file,
            unavailable("reading YAML", "the PyYAML package cannot be imported", "use JSON"),
        )
        return None
    try:
        return _yaml_value(text)
    except _YamlRefused as e:
        mark = e.mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problems.add(e.kind, file, f"invalid YAML: {e}", where)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problem = str(getattr(e, "problem", None) or e)
        if "nesting depth" in problem:  # libyaml 0.2.6+ has its own cap (1,000), met first
            problems.add("limit", file, f"invalid YAML: {_YAML_TOO_DEEP}", where)
        else:
            problems.add("yaml_syntax", file, f"invalid YAML: {problem[:300]}", where)
    except (ValueError, TypeError, OverflowError) as e:  # int("1" * 5000) and the like
        problems.add("yaml_syntax", file, f"invalid YAML: {value_error_text(e)}")
    return None


def decode_text(data: bytes, *, file: str, problems: Problems) -> str | None:
    """UTF-8 (a leading BOM is tolerated); ``None`` with a problem otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problems.add("encoding", file, f"not UTF-8 text (byte {e.start}: {e.reason})")
        return None
