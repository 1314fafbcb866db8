"""The loaded policy store: what every source format turns into.

Whatever the format (directory, ``.parc``, legacy JSON/YAML, URL, bytes), the engine
only ever sees a :class:`PolicyStore` whose every part has been parsed and checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from polang._record import Record
from polang.inputs.problems import StoreProblem
from polang.language.ast import Policy
from polang.language.entities import Entity, EntityStore
from polang.language.schema import Schema
from polang.language.values import EntityUID

_set = object.__setattr__

if TYPE_CHECKING:  # annotations only (start-up time: a store without issuers needs none)
    from datetime import datetime

    from polang.tokens.records import IssuerSettings


class TemplateLink(Record):
    """A declared link: ``link_id`` is the linked policy's id."""

    __slots__ = ("link_id", "principal", "resource", "template_id")
    link_id: str
    template_id: str
    principal: EntityUID | None
    resource: EntityUID | None

    def __init__(
        self,
        link_id: str,
        template_id: str,
        principal: EntityUID | None = None,
        resource: EntityUID | None = None,
    ) -> None:
        _set(self, "link_id", link_id)
        _set(self, "template_id", template_id)
        _set(self, "principal", principal)
        _set(self, "resource", resource)


StoreFormat = Literal["directory", "archive", "legacy-json", "legacy-yaml"]


class PolicyStore(Record):
    """A fully parsed and checked store.

    ``policies`` holds the static policies, ``templates`` the templates,
    ``linked_policies`` the policies obtained by linking templates (keyed by link id);
    the three id spaces are disjoint. Every policy's ``@id`` equals its key.
    ``trusted_issuers`` are already in the token layer's terms: the engine uses them as
    they are, so an issuer record is parsed once.
    ``default_entities`` are available to every evaluation; request entities win.
    """

    __slots__ = (
        "created_date",
        "default_entities",
        "description",
        "digest",
        "format",
        "id",
        "linked_policies",
        "links",
        "name",
        "polang_version",
        "policies",
        "policy_origins",
        "schema",
        "schema_format",
        "schema_text",
        "source",
        "templates",
        "trusted_issuers",
        "updated_date",
        "version",
        "warnings",
    )
    _unshown: ClassVar[tuple[str, ...]] = ("policy_origins",)
    id: str
    name: str
    schema: Schema
    schema_text: str
    schema_format: Literal["polang", "polang-json"]
    description: str | None
    version: str | None
    polang_version: str | None
    created_date: datetime | None
    updated_date: datetime | None
    policies: dict[str, Policy]
    templates: dict[str, Policy]
    links: dict[str, TemplateLink]
    linked_policies: dict[str, Policy]
    trusted_issuers: dict[str, IssuerSettings]
    default_entities: EntityStore
    policy_origins: dict[str, str]
    """Where each policy and template was declared (file, and JSON path in legacy files)."""
    format: StoreFormat
    source: str
    digest: str
    """SHA-256 of the store's raw content: equal digests mean identical input."""
    warnings: tuple[StoreProblem, ...]
    """What the loader accepted but flags (unknown fields, weak SHA-1 manifest checksums):
    the engine writes each to the system log at WARN; ``polang store validate`` prints them."""

    def __init__(
        self,
        id: str,
        name: str,
        schema: Schema,
        schema_text: str,
        schema_format: Literal["polang", "polang-json"],
        description: str | None = None,
        version: str | None = None,
        polang_version: str | None = None,
        created_date: datetime | None = None,
        updated_date: datetime | None = None,
        policies: dict[str, Policy] | None = None,
        templates: dict[str, Policy] | None = None,
        links: dict[str, TemplateLink] | None = None,
        linked_policies: dict[str, Policy] | None = None,
        trusted_issuers: dict[str, IssuerSettings] | None = None,
        default_entities: EntityStore | None = None,
        policy_origins: dict[str, str] | None = None,
        format: StoreFormat = "directory",
        source: str = "",
        digest: str = "",
        warnings: tuple[StoreProblem, ...] = (),
    ) -> None:
        _set(self, "id", id)
        _set(self, "name", name)
        _set(self, "schema", schema)
        _set(self, "schema_text", schema_text)
        _set(self, "schema_format", schema_format)
        _set(self, "description", description)
        _set(self, "version", version)
        _set(self, "polang_version", polang_version)
        _set(self, "created_date", created_date)
        _set(self, "updated_date", updated_date)
        _set(self, "policies", {} if policies is None else policies)
        _set(self, "templates", {} if templates is None else templates)
        _set(self, "links", {} if links is None else links)
        _set(self, "linked_policies", {} if linked_policies is None else linked_policies)
        _set(self, "trusted_issuers", {} if trusted_issuers is None else trusted_issuers)
        _set(
            self,
            "default_entities",
            EntityStore() if default_entities is None else default_entities,
        )
        _set(self, "policy_origins", {} if policy_origins is None else policy_origins)
        _set(self, "format", format)
        _set(self, "source", source)
        _set(self, "digest", digest)
        _set(self, "warnings", warnings)

    __eq__ = object.__eq__  # compared and hashed by identity
    __hash__ = object.__hash__

    def all_policies(self) -> dict[str, Policy]:
        """Static and linked policies: everything that takes part in a decision."""
        out = dict(self.policies)
        out.update(self.linked_policies)
        return out

    @property
    def default_entity_list(self) -> list[Entity]:
        return list(self.default_entities)

    def summary(self) -> dict[str, object]:
        """Counts and identity: what ``polang store validate`` prints."""
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "polang_version": self.polang_version,
            "format": self.format,
            "source": self.source,
            "policies": len(self.policies),
            "templates": len(self.templates),
            "template_links": len(self.links),
            "entities": len(self.default_entities),
            "trusted_issuers": len(self.trusted_issuers),
            "entity_types": len(self.schema.entity_types),
            "actions": len(self.schema.actions),
            "warnings": len(self.warnings),
        }
