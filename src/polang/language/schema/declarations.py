"""Declarations as written, before resolution: both forms are read into these, which keep
names as written and where they were written (line:col or JSON path)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from polang._record import Record
from polang.errors import SchemaError

from .model import Annotations, PrimType, _set

if TYPE_CHECKING:
    pass

# ================================================================ unresolved declarations
#
# Both forms are first read into these "raw" declarations, which keep names as written
# and where they were written (line:col or JSON path). One resolver then turns them into
# the model, so the two forms share every rule of name resolution and validation.


class _Loc(Record):
    __slots__ = ("column", "line", "path")
    line: int
    column: int
    path: str

    def __init__(self, line: int = 0, column: int = 0, path: str = "") -> None:
        _set(self, "line", line)
        _set(self, "column", column)
        _set(self, "path", path)


class _RName(Record):
    """A type written by name. ``kind`` limits what it may resolve to:
    ``any`` (common > entity > built-in), ``common`` (common > built-in),
    ``entity``, ``ext`` (an extension type)."""

    __slots__ = ("kind", "loc", "name")
    _frozen: ClassVar[bool] = False
    name: str
    kind: str
    loc: _Loc

    def __init__(self, name: str, kind: str, loc: _Loc) -> None:
        self.name = name
        self.kind = kind
        self.loc = loc


class _RSet(Record):
    __slots__ = ("element", "loc")
    _frozen: ClassVar[bool] = False
    element: _RType
    loc: _Loc

    def __init__(self, element: _RType, loc: _Loc) -> None:
        self.element = element
        self.loc = loc


class _RAttr(Record):
    __slots__ = ("annotations", "loc", "required", "type")
    _frozen: ClassVar[bool] = False
    type: _RType
    required: bool
    annotations: Annotations
    loc: _Loc

    def __init__(self, type: _RType, required: bool, annotations: Annotations, loc: _Loc) -> None:
        self.type = type
        self.required = required
        self.annotations = annotations
        self.loc = loc


class _RRecord(Record):
    __slots__ = ("additional", "attributes", "loc")
    _frozen: ClassVar[bool] = False
    attributes: dict[str, _RAttr]
    additional: bool
    loc: _Loc

    def __init__(self, attributes: dict[str, _RAttr], additional: bool, loc: _Loc) -> None:
        self.attributes = attributes
        self.additional = additional
        self.loc = loc


class _RPrim(Record):
    """A primitive named by a JSON keyword (``Long``, ``String``, ``Boolean``)."""

    __slots__ = ("loc", "type")
    _frozen: ClassVar[bool] = False
    type: PrimType
    loc: _Loc

    def __init__(self, type: PrimType, loc: _Loc) -> None:
        self.type = type
        self.loc = loc


_RType = _RName | _RSet | _RRecord | _RPrim


class _REntity(Record):
    __slots__ = ("annotations", "enum", "loc", "member_of", "name", "shape", "tags")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    member_of: list[tuple[str, _Loc]]
    shape: _RType | None
    tags: _RType | None
    enum: tuple[str, ...] | None
    annotations: Annotations

    def __init__(
        self,
        name: str,
        loc: _Loc,
        member_of: list[tuple[str, _Loc]],
        shape: _RType | None,
        tags: _RType | None,
        enum: tuple[str, ...] | None,
        annotations: Annotations,
    ) -> None:
        self.name = name
        self.loc = loc
        self.member_of = member_of
        self.shape = shape
        self.tags = tags
        self.enum = enum
        self.annotations = annotations


class _RRef(Record):
    """An action reference: ``id`` alone, or with the action type as written."""

    __slots__ = ("id", "loc", "type")
    _frozen: ClassVar[bool] = False
    id: str
    type: str | None
    loc: _Loc

    def __init__(self, id: str, type: str | None, loc: _Loc) -> None:
        self.id = id
        self.type = type
        self.loc = loc


class _RApplies(Record):
    __slots__ = ("context", "principals", "resources")
    _frozen: ClassVar[bool] = False
    principals: list[tuple[str, _Loc]]
    resources: list[tuple[str, _Loc]]
    context: _RType | None

    def __init__(
        self,
        principals: list[tuple[str, _Loc]],
        resources: list[tuple[str, _Loc]],
        context: _RType | None,
    ) -> None:
        self.principals = principals
        self.resources = resources
        self.context = context


class _RAction(Record):
    __slots__ = ("annotations", "applies", "loc", "member_of", "name")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    member_of: list[_RRef]
    applies: _RApplies | None
    annotations: Annotations

    def __init__(
        self,
        name: str,
        loc: _Loc,
        member_of: list[_RRef],
        applies: _RApplies | None,
        annotations: Annotations,
    ) -> None:
        self.name = name
        self.loc = loc
        self.member_of = member_of
        self.applies = applies
        self.annotations = annotations


class _RCommon(Record):
    __slots__ = ("annotations", "loc", "name", "type")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    type: _RType
    annotations: Annotations

    def __init__(self, name: str, loc: _Loc, type: _RType, annotations: Annotations) -> None:
        self.name = name
        self.loc = loc
        self.type = type
        self.annotations = annotations


class _RNamespace(Record):
    __slots__ = ("actions", "annotations", "commons", "entities", "loc", "name")
    _frozen: ClassVar[bool] = False
    name: str
    loc: _Loc
    annotations: Annotations
    entities: dict[str, _REntity]
    actions: dict[str, _RAction]
    commons: dict[str, _RCommon]

    def __init__(
        self,
        name: str,
        loc: _Loc,
        annotations: Annotations = (),
        entities: dict[str, _REntity] | None = None,
        actions: dict[str, _RAction] | None = None,
        commons: dict[str, _RCommon] | None = None,
    ) -> None:
        self.name = name
        self.loc = loc
        self.annotations = annotations
        self.entities = {} if entities is None else entities
        self.actions = {} if actions is None else actions
        self.commons = {} if commons is None else commons


class _Source:
    """Where the schema came from: turns a location into a located ``SchemaError``."""

    def __init__(self, filename: str | None) -> None:
        self.filename = filename

    def error(self, loc: _Loc, message: str) -> SchemaError:
        if loc.path:
            where = f"{self.filename}: {loc.path}" if self.filename else loc.path
            return SchemaError(f"{where}: {message}", filename=self.filename, path=loc.path)
        where = f"{self.filename or '<schema>'}:{loc.line}:{loc.column}"
        return SchemaError(
            f"{where}: {message}", filename=self.filename, line=loc.line, column=loc.column
        )
