"""The JSON form (``polang-json``) -> declarations, each error naming its JSON path."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from polang.errors import SchemaError
from polang.inputs.fields import json_kind
from polang.jsonlimits import MAX_JSON_DEPTH, depth_of
from polang.language.lalr import IDENT_RE

from .declarations import (
    _Loc,
    _RAction,
    _RApplies,
    _RAttr,
    _RCommon,
    _REntity,
    _RName,
    _RNamespace,
    _RPrim,
    _RRecord,
    _RRef,
    _RSet,
    _RType,
    _Source,
)
from .jsontext import duplicate_key, json_loads_checked, non_string_key
from .model import BOOL, LONG, STRING, Annotations, Schema
from .names import (
    _EXTENSIONS,
    _PRIMITIVES,
    CEDAR_NAMESPACE,
    RESERVED_WORDS,
    SCHEMA_KEYWORDS,
    json_path,
    name_error,
)
from .resolve import _Resolver

if TYPE_CHECKING:
    pass

# ================================================================ JSON form

_TYPE_KEYS = {
    "Set": {"element"},
    "Record": {"attributes", "additionalAttributes"},
    "Entity": {"name"},
    "Extension": {"name"},
    "EntityOrCommon": {"name"},
}
_JSON_PRIMITIVES = {"Long": LONG, "String": STRING, "Boolean": BOOL}


class _JsonReader:
    """Reads the JSON form into raw declarations, checking its structure."""

    def __init__(self, src: _Source) -> None:
        self.src = src

    def _err(self, path: str, message: str) -> SchemaError:
        return self.src.error(_Loc(path=path), message)

    def _object(self, v: object, path: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self._err(path, f"expected an object, found {json_kind(v)}")
        bad = non_string_key(v)
        if bad is not None:
            raise self._err(path, f"an object's keys are strings, found {json_kind(bad)}")
        dup = duplicate_key(v)
        if dup is not None:
            raise self._err(json_path(path, dup), f"duplicate key `{dup}`")
        if allowed is not None:
            for k in v:
                if k not in allowed:
                    raise self._err(
                        json_path(path, k),
                        f"unknown field `{k}`; expected one of "
                        + ", ".join(f"`{a}`" for a in sorted(allowed)),
                    )
        return v

    def _string(self, v: object, path: str) -> str:
        if not isinstance(v, str):
            raise self._err(path, f"expected a string, found {json_kind(v)}")
        return v

    def _list(self, v: object, path: str) -> list[Any]:
        if not isinstance(v, list):
            raise self._err(path, f"expected an array, found {json_kind(v)}")
        return v

    def _require(self, obj: dict[str, Any], key: str, path: str) -> Any:
        if key not in obj:
            raise self._err(path, f"missing field `{key}`")
        return obj[key]

    def _type_name(self, v: object, path: str) -> str:
        name = self._string(v, path)
        problem = name_error(name)
        if problem is not None and not _is_cedar_builtin(name):
            raise self._err(path, problem)
        return name

    def _ident(self, name: str, path: str, what: str) -> str:
        if not IDENT_RE.match(name):
            raise self._err(path, f"`{name}` is not a valid name for {what}")
        if name in RESERVED_WORDS:
            raise self._err(path, f"`{name}` is a reserved word and cannot name {what}")
        if name == CEDAR_NAMESPACE:
            raise self._err(path, f"`{CEDAR_NAMESPACE}` is reserved and cannot name {what}")
        return name

    def _annotations(self, v: object, path: str) -> Annotations:
        obj = self._object(v, path)
        out = []
        for k, value in obj.items():
            p = json_path(path, k)
            if not IDENT_RE.match(k):
                raise self._err(p, f"`{k}` is not a valid annotation name")
            if value is not None and not isinstance(value, str):
                raise self._err(
                    p, f"an annotation value must be a string, found {json_kind(value)}"
                )
            out.append((k, value))
        return tuple(out)

    # ------------------------------------------------------------ schema

    def read(self, data: object) -> list[_RNamespace]:
        top = self._object(data, "$")
        out = []
        for ns_name, body in top.items():
            path = json_path("$", ns_name)
            if ns_name:
                problem = name_error(ns_name)
                if problem is not None:
                    raise self._err(path, problem)
            obj = self._object(body, path, {"entityTypes", "actions", "commonTypes", "annotations"})
            ns = _RNamespace(ns_name, _Loc(path=path))
            if "annotations" in obj:
                if not ns_name:
                    raise self._err(
                        json_path(path, "annotations"),
                        "the empty namespace cannot have annotations",
                    )
                ns.annotations = self._annotations(
                    obj["annotations"], json_path(path, "annotations")
                )
            p = json_path(path, "commonTypes")
            for name, t in self._object(obj.get("commonTypes", {}), p).items():
                self._common(ns, name, t, json_path(p, name))
            p = json_path(path, "entityTypes")
            entity_types = self._require(obj, "entityTypes", path)
            for name, t in self._object(entity_types, p).items():
                self._entity(ns, name, t, json_path(p, name))
            p = json_path(path, "actions")
            actions = self._require(obj, "actions", path)
            for name, a in self._object(actions, p).items():
                self._action(ns, name, a, json_path(p, name))
            out.append(ns)
        return out

    def _common(self, ns: _RNamespace, name: str, t: object, path: str) -> None:
        self._ident(name, path, "a common type")
        if name in SCHEMA_KEYWORDS:
            raise self._err(path, f"`{name}` is a reserved type name and cannot name a common type")
        obj = self._object(t, path)
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        rtype = self._type(obj, path, extra={"annotations"})
        ns.commons[name] = _RCommon(name, _Loc(path=path), rtype, annotations)

    def _entity(self, ns: _RNamespace, name: str, t: object, path: str) -> None:
        self._ident(name, path, "an entity type")
        if name == "Action":
            raise self._err(path, "`Action` cannot be declared as an entity type")
        obj = self._object(t, path, {"memberOfTypes", "shape", "tags", "enum", "annotations"})
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        enum: tuple[str, ...] | None = None
        if "enum" in obj:
            for k in ("memberOfTypes", "shape", "tags"):
                if k in obj:
                    raise self._err(
                        json_path(path, k), f"an enumerated entity type cannot have `{k}`"
                    )
            p = json_path(path, "enum")
            items = self._list(obj["enum"], p)
            if not items:
                raise self._err(p, "an enumerated entity type needs at least one id")
            enum = tuple(self._string(x, json_path(p, i)) for i, x in enumerate(items))
        member_of: list[tuple[str, _Loc]] = []
        p = json_path(path, "memberOfTypes")
        for i, x in enumerate(self._list(obj.get("memberOfTypes", []), p)):
            q = json_path(p, i)
            member_of.append((self._type_name(x, q), _Loc(path=q)))
        shape = None
        if "shape" in obj:
            shape = self._type(obj["shape"], json_path(path, "shape"))
        tags = None
        if "tags" in obj:
            tags = self._type(obj["tags"], json_path(path, "tags"))
        ns.entities[name] = _REntity(
            name, _Loc(path=path), member_of, shape, tags, enum, annotations
        )

    def _action(self, ns: _RNamespace, name: str, a: object, path: str) -> None:
        obj = self._object(a, path, {"memberOf", "appliesTo", "annotations"})
        annotations = self._annotations(obj.get("annotations", {}), json_path(path, "annotations"))
        member_of = []
        p = json_path(path, "memberOf")
        for i, ref in enumerate(self._list(obj.get("memberOf", []), p)):
            q = json_path(p, i)
            r = self._object(ref, q, {"id", "type"})
            rid = self._string(self._require(r, "id", q), json_path(q, "id"))
            rtype = None
            if "type" in r:
                rtype = self._type_name(r["type"], json_path(q, "type"))
            member_of.append(_RRef(rid, rtype, _Loc(path=q)))
        applies = None
        if "appliesTo" in obj:
            p = json_path(path, "appliesTo")
            ap = self._object(obj["appliesTo"], p, {"principalTypes", "resourceTypes", "context"})
            lists = []
            for key in ("principalTypes", "resourceTypes"):
                q = json_path(p, key)
                items = self._list(self._require(ap, key, p), q)
                lists.append(
                    [
                        (self._type_name(x, json_path(q, i)), _Loc(path=json_path(q, i)))
                        for i, x in enumerate(items)
                    ]
                )
            context = None
            if "context" in ap:
                context = self._type(ap["context"], json_path(p, "context"))
            applies = _RApplies(lists[0], lists[1], context)
        ns.actions[name] = _RAction(name, _Loc(path=path), member_of, applies, annotations)

    # ------------------------------------------------------------ types

    def _type(
        self, v: object, path: str, *, extra: frozenset[str] | set[str] = frozenset()
    ) -> _RType:
        obj = self._object(v, path)
        loc = _Loc(path=path)
        kind = self._string(self._require(obj, "type", path), json_path(path, "type"))
        allowed = {"type"} | _TYPE_KEYS.get(kind, set()) | set(extra)
        for k in obj:
            if k not in allowed:
                raise self._err(json_path(path, k), f"unexpected field `{k}` for type `{kind}`")
        if kind in _JSON_PRIMITIVES:
            return _RPrim(_JSON_PRIMITIVES[kind], loc)
        if kind == "Set":
            return _RSet(
                self._type(self._require(obj, "element", path), json_path(path, "element")), loc
            )
        if kind == "Record":
            p = json_path(path, "attributes")
            attrs: dict[str, _RAttr] = {}
            for name, a in self._object(self._require(obj, "attributes", path), p).items():
                q = json_path(p, name)
                aobj = self._object(a, q)
                required = aobj.get("required", True)
                if not isinstance(required, bool):
                    raise self._err(
                        json_path(q, "required"),
                        f"`required` must be a boolean, found {json_kind(required)}",
                    )
                attrs[name] = _RAttr(
                    self._type(aobj, q, extra={"required", "annotations"}),
                    required,
                    self._annotations(aobj.get("annotations", {}), json_path(q, "annotations")),
                    _Loc(path=q),
                )
            additional = obj.get("additionalAttributes", False)
            if not isinstance(additional, bool):
                raise self._err(
                    json_path(path, "additionalAttributes"),
                    f"`additionalAttributes` must be a boolean, found {json_kind(additional)}",
                )
            return _RRecord(attrs, additional, loc)
        if kind in ("Entity", "Extension", "EntityOrCommon"):
            p = json_path(path, "name")
            name = self._type_name(self._require(obj, "name", path), p)
            what = {"Entity": "entity", "Extension": "ext", "EntityOrCommon": "any"}[kind]
            return _RName(name, what, _Loc(path=p))
        # Any other word names a common type (or, failing that, a built-in type).
        name_problem = name_error(kind)
        if name_problem is not None and not _is_cedar_builtin(kind):
            raise self._err(json_path(path, "type"), name_problem)
        return _RName(kind, "common", _Loc(path=json_path(path, "type")))


def _is_cedar_builtin(name: str) -> bool:
    head, _, tail = name.partition("::")
    return head == CEDAR_NAMESPACE and (tail in _PRIMITIVES or tail in _EXTENSIONS)


def parse_schema_json(data: str | bytes | dict[str, Any], filename: str | None = None) -> Schema:
    """Parse the JSON form (``polang-json``) into the resolved model.

    Raises ``SchemaError`` naming the JSON path (``$.NS.entityTypes.User...``) of the
    offending element, or the line and column when the text is not JSON at all.
    """
    src = _Source(filename)
    if isinstance(data, str | bytes):
        try:
            data = json_loads_checked(data)
        except json.JSONDecodeError as e:
            raise src.error(_Loc(e.lineno, e.colno), f"invalid JSON: {e.msg}") from None
        except ValueError as e:  # not UTF-8, or past a limit
            raise src.error(_Loc(path="$"), f"invalid JSON text: {e}") from None
    elif depth_of(data) > MAX_JSON_DEPTH:
        raise src.error(
            _Loc(path="$"),
            f"the schema nests deeper than the limit of {MAX_JSON_DEPTH} levels "
            "(MAX_JSON_DEPTH, docs/security.md)",
        )
    return _Resolver(src, _JsonReader(src).read(data)).run()
