"""Claims to language values: schema-typed attributes, ``Set<String>`` tags, claim mappings.

Every claim becomes a tag holding a set of strings; ``scope`` (and ``scp`` when it is a
string) is a space-delimited list, so its tag holds each scope. A claim the schema declares
as an attribute of the token's entity type is also an attribute, converted to the declared
type; a claim with a ``claim_mapping`` is parsed first (``regex`` or ``json``). Mapped and
declared names may be claim paths (:mod:`polang.tokens.claim_paths`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from polang.errors import PolangError
from polang.inputs.fields import json_kind
from polang.jsonlimits import loads
from polang.language.schema import (
    EntityRefType,
    ExtensionType,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
)
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, RecordValue, SetValue, Value
from polang.tokens.claim_paths import resolve
from polang.tokens.claim_regex import MAX_MAPPED_CLAIM_CHARS
from polang.tokens.records import ClaimMapping


class ClaimError(Exception):
    """A claim cannot become the value the schema or mapping asks for."""


# ---------------------------------------------------------------- scopes

#: Claims that are space-delimited lists of scopes when they are strings: OAuth's
#: ``scope`` (RFC 8693 section 4.2, RFC 9068 section 2.2.3) and ``scp`` (Entra ID sends a
#: string, Okta an array).
SCOPE_CLAIMS = frozenset({"scope", "scp"})
_SCOPE_ORDER = ("scope", "scp")  # the order limits are checked in (messages stay the same)
#: Most scopes one ``scope``/``scp`` claim may hold (string or array); more drops the token.
MAX_SCOPES = 1000
#: Longest ``scope``/``scp`` string read (characters); a longer one drops the token.
MAX_SCOPE_CHARS = 64 * 1024


class ScopeLimitError(Exception):
    """A ``scope``/``scp`` claim over :data:`MAX_SCOPES` or :data:`MAX_SCOPE_CHARS`."""


def split_scopes(v: str) -> list[str]:
    """A scope string as its scopes: split at spaces (RFC 6749 section 3.3's delimiter),
    empty pieces left out. Bounded: raises :class:`ScopeLimitError` past the limits."""
    if len(v) > MAX_SCOPE_CHARS:
        raise ScopeLimitError(
            f"is {len(v):,} characters long, more than a scope string is read "
            f"({MAX_SCOPE_CHARS:,}: MAX_SCOPE_CHARS)"
        )
    scopes = [s for s in v.split(" ") if s]
    if len(scopes) > MAX_SCOPES:
        raise ScopeLimitError(
            f"holds {len(scopes):,} scopes, more than MAX_SCOPES ({MAX_SCOPES:,})"
        )
    return scopes


def check_scopes(claims: Mapping[str, Any]) -> None:
    """Every ``scope``/``scp`` claim within the limits (raises :class:`ScopeLimitError`
    naming the claim): a token's scopes are never cut, since a ``forbid`` may test one."""
    for name in _SCOPE_ORDER:
        v = claims.get(name)
        try:
            if isinstance(v, str):
                split_scopes(v)
            elif isinstance(v, list) and len(v) > MAX_SCOPES:
                raise ScopeLimitError(
                    f"holds {len(v):,} scopes, more than MAX_SCOPES ({MAX_SCOPES:,})"
                )
        except ScopeLimitError as e:
            raise ScopeLimitError(f"claim {name!r} {e}") from None


def _scoped(name: str, raw: Any) -> Any:
    """``raw`` with a scope string split into its scopes (other claims as they are)."""
    if name in SCOPE_CLAIMS and type(raw) is str:
        return split_scopes(raw)
    return raw


# ---------------------------------------------------------------- tags


def _scalar_text(v: Any) -> str:
    if type(v) is str or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 2**63:
            return str(int(v))
        return json.dumps(v)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def tag_value(v: Any) -> SetValue | None:
    """A claim as a tag: arrays give their elements, numbers their decimal text,
    objects their JSON text; ``null`` gives no tag."""
    # A set of strings: the strings are their own keys (SetValue keys only wrap Bools).
    if v is None:
        return None
    if type(v) is str:
        return SetValue.from_keys(frozenset((v,)))
    if isinstance(v, list):
        return SetValue.from_keys(frozenset([_scalar_text(e) for e in v if e is not None]))
    return SetValue.from_keys(frozenset((_scalar_text(v),)))


# ---------------------------------------------------------------- typed conversion


def _long(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise ClaimError(f"{where}: expected a Long, got a boolean")
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ClaimError(f"{where}: {v} is not a whole number (the language has no floats)")
        v = int(v)
    if isinstance(v, str):
        text = v.strip()
        if not text.lstrip("-").isdigit():
            raise ClaimError(f"{where}: expected a Long, got the string {v!r}")
        v = int(text)
    if not isinstance(v, int):
        raise ClaimError(f"{where}: expected a Long, got {type(v).__name__}")
    if v < LONG_MIN or v > LONG_MAX:
        raise ClaimError(f"{where}: {v} is outside the 64-bit range")
    return v


def to_value(v: Any, t: SchemaType | None, where: str) -> Value:
    """JSON data as a value of type ``t`` (or of its own shape when ``t`` is None)."""
    if t is None:
        return _untyped(v, where)
    if isinstance(t, PrimType):
        if isinstance(v, list) and len(v) == 1:
            v = v[0]  # a one-element array where a single value is declared
        if t.name == "Long":
            return _long(v, where)
        if t.name == "Bool":
            if isinstance(v, bool):
                return v
            if v in ("true", "false"):
                return v == "true"
            raise ClaimError(f"{where}: expected a Bool, got {v!r}")
        if isinstance(v, (dict, list)) or v is None:
            raise ClaimError(f"{where}: expected a String, got {json_kind(v)}")
        return _scalar_text(v)
    if isinstance(t, SetType):
        items = v if isinstance(v, list) else [v]
        return SetValue(to_value(e, t.element, f"{where}[{i}]") for i, e in enumerate(items))
    if isinstance(t, RecordType):
        if isinstance(v, RecordValue):
            v = {k: x for k, x in v.fields.items()}
        if not isinstance(v, dict):
            raise ClaimError(f"{where}: expected a record, got {json_kind(v)}")
        fields: dict[str, Value] = {}
        for name, attr in t.attributes.items():
            if name in v and v[name] is not None:
                fields[name] = to_value(v[name], attr.type, f"{where}.{name}")
            elif attr.required:
                raise ClaimError(f"{where}: record field {name!r} is missing")
        if t.additional:
            for name, x in v.items():
                if name not in t.attributes and x is not None:
                    fields[name] = _untyped(x, f"{where}.{name}")
        return RecordValue(fields)
    if isinstance(t, EntityRefType):
        if isinstance(v, list) and len(v) == 1:
            v = v[0]
        if isinstance(v, str):
            return EntityUID(t.name, v)
        if isinstance(v, dict):
            ref = v.get("__entity", v)
            if isinstance(ref, dict) and isinstance(ref.get("id"), str):
                return EntityUID(str(ref.get("type", t.name)), ref["id"])
        raise ClaimError(f"{where}: expected an entity id for {t.name}, got {json_kind(v)}")
    if isinstance(t, ExtensionType):
        raise ClaimError(
            f"{where}: claims cannot yet be converted to the extension type {t.name}; "
            "declare the attribute as String"
        )
    raise ClaimError(f"{where}: unsupported schema type {t}")


def _untyped(v: Any, where: str) -> Value:
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, RecordValue | SetValue | EntityUID):
        return v
    if isinstance(v, int):
        return _long(v, where)
    if isinstance(v, float):
        return _long(v, where)
    if isinstance(v, list):
        return SetValue(_untyped(e, f"{where}[{i}]") for i, e in enumerate(v) if e is not None)
    if isinstance(v, dict):
        return RecordValue({k: _untyped(x, f"{where}.{k}") for k, x in v.items() if x is not None})
    raise ClaimError(f"{where}: cannot represent {json_kind(v)}")


# ---------------------------------------------------------------- claim mappings


def _regex_one(text: Any, m: ClaimMapping, where: str) -> dict[str, Any] | None:
    """One string through a ``regex`` mapping: RE2 (linear time) on bounded text."""
    if not isinstance(text, str):
        raise ClaimError(f"{where}: the regex mapping needs a string, got {json_kind(text)}")
    if len(text) > MAX_MAPPED_CLAIM_CHARS:
        raise ClaimError(
            f"{where}: {len(text):,} characters, more than a regex claim mapping reads "
            f"({MAX_MAPPED_CLAIM_CHARS:,}: MAX_MAPPED_CLAIM_CHARS)"
        )
    assert m.pattern is not None
    found = m.pattern.search(text)
    if found is None:
        return None
    out: dict[str, Any] = {}
    for group, spec in m.groups.items():
        raw = found.group(group) or ""
        if spec.type == "String":
            out[spec.attr] = raw
        elif spec.type == "Boolean":
            out[spec.attr] = raw != ""
        else:
            try:
                number = float(raw)
            except ValueError:
                number = 0.0
            if not math.isfinite(number):
                number = 0.0
            out[spec.attr] = number
    return out


class _RefusedJson(PolangError):
    pass


def _json_one(v: Any, where: str) -> dict[str, Any]:
    if isinstance(v, str):
        try:
            v = loads(v, what=f"{where}: the json mapping needs a JSON object", error=_RefusedJson)
        except _RefusedJson as e:
            raise ClaimError(str(e)) from None
    if not isinstance(v, dict):
        raise ClaimError(f"{where}: the json mapping needs a JSON object, got {json_kind(v)}")
    return v


def apply_mapping(v: Any, m: ClaimMapping, where: str) -> Any:
    """The claim after its mapping, as JSON-like data; None when a regex does not match."""
    if m.parser == "json":
        if isinstance(v, list):
            return [_json_one(e, f"{where}[{i}]") for i, e in enumerate(v)]
        return _json_one(v, where)
    if isinstance(v, list):
        out = []
        for i, e in enumerate(v):
            r = _regex_one(e, m, f"{where}[{i}]")
            if r is not None:
                out.append(r)
        return out
    return _regex_one(v, m, where)


def mapping_target(m: ClaimMapping, schema: Schema | None) -> SchemaType | None:
    """The schema type a mapping names (``type``), when the schema defines it."""
    if schema is None:
        return None
    t = schema.common_types.get(m.type)
    if t is None:
        et = schema.entity_types.get(m.type)
        if et is not None:
            return et.shape
    return t


def claim_attributes(
    claims: Mapping[str, Any],
    shape: RecordType | None,
    mappings: Mapping[str, ClaimMapping],
    schema: Schema | None,
    reserved: frozenset[str],
    *,
    unfit: dict[str, str] | None = None,
) -> tuple[dict[str, Value], dict[str, Value]]:
    """(attributes, tags) of a token entity from its claims.

    Every claim is a tag; a claim the schema declares as an attribute, or one with a
    claim mapping, is an attribute as well (the spec lists the same claims, ``scope``,
    ``aud``..., both as tags and as optional attributes). A mapping key or declared
    attribute that is a claim path (``realm_access.roles``) reads the nested value, and
    the attribute is named by the path. A claim that does not fit raises
    :class:`ClaimError`, or, when ``unfit`` is given, is left out of the attributes
    (kept as a tag) and recorded there with the reason.
    """
    attrs: dict[str, Value] = {}
    tags: dict[str, Value] = {}
    declared = shape.attributes if shape is not None else {}
    for name, raw in claims.items():
        if name in reserved:
            continue
        if name in SCOPE_CLAIMS and type(raw) is str:
            tag = tag_value(split_scopes(raw))
        else:
            tag = tag_value(raw)
        if tag is not None:
            tags[name] = tag
        mapping = mappings.get(name) if mappings else None
        attr = declared.get(name)
        if mapping is None and attr is None:
            continue
        _attribute(attrs, name, raw, mapping, attr, schema, unfit)
    if mappings:
        for path, mapping in mappings.items():
            if "." in path and path not in claims:
                raw = resolve(claims, path)
                if raw is not None:
                    _attribute(attrs, path, raw, mapping, declared.get(path), schema, unfit)
    if declared:
        for path, attr in declared.items():
            if "." in path and path not in claims and path not in attrs:
                if mappings and path in mappings:
                    continue
                raw = resolve(claims, path)
                if raw is not None:
                    _attribute(attrs, path, raw, None, attr, schema, unfit)
    return attrs, tags


def _attribute(
    attrs: dict[str, Value],
    name: str,
    raw: Any,
    mapping: ClaimMapping | None,
    attr: Any,
    schema: Schema | None,
    unfit: dict[str, str] | None,
) -> None:
    """Set ``attrs[name]`` from one claim (mapped, then converted to the declared type)."""
    where = f"claim {name!r}"
    try:
        if mapping is not None:
            mapped = apply_mapping(raw, mapping, where)
            if mapped is not None and mapped != []:
                if attr is not None:
                    target: SchemaType | None = attr.type
                else:
                    target = mapping_target(mapping, schema)
                    if target is not None and isinstance(mapped, list):
                        target = SetType(target)
                attrs[name] = to_value(mapped, target, where)
        elif attr is not None and raw is not None:
            if isinstance(attr.type, SetType):
                raw = _scoped(name, raw)  # a Set<String> scope: each scope
            attrs[name] = to_value(raw, attr.type, where)
    except ClaimError as e:
        if unfit is None:
            raise
        unfit[name] = str(e)


def roles_from(claims: Mapping[str, Any], role_claims: tuple[str, ...]) -> list[str]:
    """Role names: each named claim (a claim path) may be a string or an array of strings."""
    out: list[str] = []
    for c in role_claims:
        v = resolve(claims, c)
        items = v if isinstance(v, list) else [v]
        for r in items:
            if isinstance(r, str) and r and r not in out:
                out.append(r)
    return out


def first_text(v: Any) -> str | None:
    """An id-like claim as text (``aud`` arrays give their first element)."""
    if isinstance(v, list):
        v = v[0] if v else None
    if v is None or isinstance(v, (dict, list)):
        return None
    return _scalar_text(v)
