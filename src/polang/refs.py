"""A request's principal or resource, in every form the API accepts: one reader for all.

``authorize_unsigned``, ``authorize_multi_issuer``, ``explain``, ``who_can``, ``what_can``
and ``access_matrix`` take an entity in the same forms, so a form that works in one call
works in every other. Two kinds come out:

- an **entity given in full**: the language's entity JSON ``{"uid", "attrs", "parents",
  "tags"}``, the mapped form ``{"cedar_entity_mapping": {"entity_type", "id"}, ...}``, or
  an :class:`~polang.language.entities.Entity`; it is laid over the store's entities for
  that call;
- a **reference**: a string ``'Ns::Type::"id"'``, ``{"type", "id"}``,
  ``{"__entity": {"type", "id"}}`` or an :class:`~polang.language.values.EntityUID`; it
  names an entity the store holds (what an unknown one means is up to the caller).

Detection is by keys, with no guessing: ``uid`` makes an entity, ``cedar_entity_mapping``
a mapped entity, ``__entity`` (alone) or exactly ``type`` and ``id`` a reference; any other
object is an error that lists the forms.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from polang.errors import EntityError, PolangError, RequestError
from polang.language.entities import (
    Entity,
    parse_entity,
    parse_entity_uid_json,
    parse_mapped_entity,
)
from polang.language.parser import parse_entity_uid
from polang.language.schema import Schema
from polang.language.values import EntityUID

__all__ = ["FORMS", "EntityInput", "entity_or_reference", "parse_reference_text"]

EntityInput = str | EntityUID | Mapping[str, Any] | Entity
"""What a principal or resource argument may be (see the module's docstring)."""

FORMS = (
    'an entity {"uid", "attrs", "parents"} or {"cedar_entity_mapping": {...}, ...}, '
    'or a reference \'Ns::Type::"id"\', {"type", "id"} or {"__entity": {"type", "id"}}'
)
"""The accepted forms, as error messages name them."""

_SHOWN = 80  # characters of a bad reference string quoted in an error


_CACHED_TEXT = 256  # longer reference texts are parsed each time (the cache stays small)


def parse_reference_text(text: str) -> EntityUID:
    """``'Ns::Type::"id"'`` as a uid (short texts parsed once each); ``RequestError``."""
    if len(text) <= _CACHED_TEXT:
        return _parse_cached(text)
    return _parse(text)


def _parse(text: str) -> EntityUID:
    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise RequestError(str(e)) from None


_parse_cached = lru_cache(maxsize=1024)(_parse)


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _keys(keys: list[str]) -> str:
    """A few keys of an object, for a message (never the whole of a hostile one)."""
    shown = ", ".join(_shown(k) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def entity_or_reference(
    value: Any, what: str, schema: Schema | None
) -> tuple[EntityUID, Entity | None]:
    """``(uid, entity)`` for an entity given in full, ``(uid, None)`` for a reference.

    ``what`` names the request part in errors (``resource``, ``principal``,
    ``entities[2]``); every failure is a ``RequestError`` that starts with it.
    """
    if type(value) is dict:  # the common case first (Mapping's isinstance is slow)
        obj: dict[str, Any] = value  # the parsers never modify it
    elif isinstance(value, EntityUID):
        return value, None
    elif isinstance(value, Entity):
        return value.uid, value
    elif isinstance(value, str):
        try:
            return parse_reference_text(value), None
        except RequestError:
            raise RequestError(
                f"{what}: {_shown(value)} is not an entity reference like 'Ns::Type::\"id\"'"
            ) from None
    elif isinstance(value, Mapping):
        obj = dict(value)
    else:
        raise RequestError(f"{what}: expected {FORMS}; got {type(value).__name__}")
    try:
        if "uid" in obj:
            ent = parse_entity(obj, schema, path=f"$.{what}")
            return ent.uid, ent
        if "cedar_entity_mapping" in obj:
            ent = parse_mapped_entity(obj, schema, path=f"$.{what}")
            return ent.uid, ent
        if "__entity" in obj or ("type" in obj and "id" in obj):
            keys = sorted(str(k) for k in obj)
            if len(keys) != (1 if "__entity" in obj else 2):
                raise RequestError(
                    f'{what}: a reference is exactly {{"type", "id"}} or '
                    f'{{"__entity": {{...}}}}, found the keys {_keys(keys)}; to give the '
                    'entity in full, write {"uid": {"type", "id"}, "attrs": {...}, '
                    '"parents": [...]}'
                )
            return parse_entity_uid_json(obj, path=f"$.{what}"), None
    except EntityError as e:
        raise RequestError(f"{what}: {e}") from None
    found = _keys(sorted(str(k) for k in obj)) or "none"
    raise RequestError(f"{what}: expected {FORMS}; got an object with the keys {found}")
