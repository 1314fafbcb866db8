"""The raw store: every format's parts as text and JSON, before the language parses them.

Readers (directory/archive layout, legacy file) produce a :class:`RawStore`; the builder
turns it into a :class:`~polang.store.model.PolicyStore`. Keeping the two steps apart lets
the conversion tool reuse what a reader found (texts, records) without re-deriving it
from parsed ASTs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from polang._record import Record
from polang.inputs.strict import MAX_YAML_DEPTH

if TYPE_CHECKING:
    from datetime import datetime


class TextPart(Record):
    """A piece of text to parse. ``parse_name`` is what parsers put in spans and messages."""

    __slots__ = ("file", "location", "parse_name", "text")
    _frozen: ClassVar[bool] = False
    file: str
    text: str
    location: str | None
    parse_name: str

    def __init__(
        self, file: str, text: str, location: str | None = None, parse_name: str = ""
    ) -> None:
        self.file = file
        self.text = text
        self.location = location
        self.parse_name = parse_name
        self.__post_init__()

    def __post_init__(self) -> None:
        if not self.parse_name:
            self.parse_name = f"{self.file} {self.location}" if self.location else self.file


class PolicyPart(TextPart):
    """Policy text. ``role``: a ``policies/`` file, a ``templates/`` file or a legacy record
    (``expected_id`` is then the record's key: exactly one policy or template)."""

    __slots__ = ("expected_id", "role")
    _frozen: ClassVar[bool] = False
    role: Literal["policies", "templates", "legacy"]
    expected_id: str | None

    def __init__(
        self,
        file: str,
        text: str,
        location: str | None = None,
        parse_name: str = "",
        role: Literal["policies", "templates", "legacy"] = "policies",
        expected_id: str | None = None,
    ) -> None:
        self.role = role
        self.expected_id = expected_id
        TextPart.__init__(self, file, text, location, parse_name)


class JsonPart(Record):
    """A JSON value found at ``location`` (a JSON path) of ``file``.

    For issuer parts, ``issuer_id`` set means ``data`` is one issuer record (a
    Cedarling-style ``trusted-issuers/*.json`` file) rather than a map of ids to records.
    """

    __slots__ = ("data", "file", "issuer_id", "location")
    _frozen: ClassVar[bool] = False
    file: str
    location: str
    data: Any
    issuer_id: str | None

    def __init__(self, file: str, location: str, data: Any, issuer_id: str | None = None) -> None:
        self.file = file
        self.location = location
        self.data = data
        self.issuer_id = issuer_id


class RawStore(Record):
    """What a reader found, before parsing."""

    __slots__ = (
        "created_date",
        "custom_issuers",
        "description",
        "digest",
        "entities",
        "format",
        "id",
        "issuer_records",
        "issuers",
        "links",
        "name",
        "polang_version",
        "policies",
        "schema",
        "schema_format",
        "source",
        "updated_date",
        "version",
    )
    _frozen: ClassVar[bool] = False
    format: Literal["directory", "archive", "legacy-json", "legacy-yaml"]
    source: str
    digest: str
    id: str | None
    name: str | None
    description: str | None
    version: str | None
    polang_version: str | None
    created_date: datetime | None
    updated_date: datetime | None
    schema: TextPart | None
    schema_format: Literal["polang", "polang-json"]
    policies: list[PolicyPart]
    links: list[JsonPart]
    entities: list[JsonPart]
    """One part per entity object; ``data`` is the decoded entity JSON."""
    issuers: list[JsonPart]
    """Issuer maps ``{"<issuer_id>": record}``, or single records (``issuer_id`` set)."""
    issuer_records: dict[str, Any]
    """Raw issuer records by id (conversion writes them back unchanged)."""
    custom_issuers: list[JsonPart]
    """Cedarling's ``custom-issuers/*.json`` (non-JWT issuers): checked, not used."""

    def __init__(
        self,
        format: Literal["directory", "archive", "legacy-json", "legacy-yaml"],
        source: str,
        digest: str,
        id: str | None = None,
        name: str | None = None,
        description: str | None = None,
        version: str | None = None,
        polang_version: str | None = None,
        created_date: datetime | None = None,
        updated_date: datetime | None = None,
        schema: TextPart | None = None,
        schema_format: Literal["polang", "polang-json"] = "polang",
        policies: list[PolicyPart] | None = None,
        links: list[JsonPart] | None = None,
        entities: list[JsonPart] | None = None,
        issuers: list[JsonPart] | None = None,
        issuer_records: dict[str, Any] | None = None,
        custom_issuers: list[JsonPart] | None = None,
    ) -> None:
        self.format = format
        self.source = source
        self.digest = digest
        self.id = id
        self.name = name
        self.description = description
        self.version = version
        self.polang_version = polang_version
        self.created_date = created_date
        self.updated_date = updated_date
        self.schema = schema
        self.schema_format = schema_format
        self.policies = [] if policies is None else policies
        self.links = [] if links is None else links
        self.entities = [] if entities is None else entities
        self.issuers = [] if issuers is None else issuers
        self.issuer_records = {} if issuer_records is None else issuer_records
        self.custom_issuers = [] if custom_issuers is None else custom_issuers


__all__ = ["MAX_YAML_DEPTH", "JsonPart", "PolicyPart", "RawStore", "TextPart"]
