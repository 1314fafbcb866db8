"""The loaded policy store: what every source format turns into.

Whatever the format (directory, ``.parc``, legacy JSON/YAML, URL, bytes), the engine
only ever sees a :class:`PolicyStore` whose every part has been parsed and checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from polang.language.ast import Policy
from polang.language.entities import Entity, EntityStore
from polang.language.schema import Schema
from polang.language.values import EntityUID
from polang.store.errors import StoreProblem

if TYPE_CHECKING:  # annotations only (start-up time: a store without issuers needs none)
    from datetime import datetime

    from polang.tokens.settings import IssuerSettings


@dataclass(frozen=True)
class TemplateLink:
    """A declared link: ``link_id`` is the linked policy's id."""

    link_id: str
    template_id: str
    principal: EntityUID | None = None
    resource: EntityUID | None = None


StoreFormat = Literal["directory", "archive", "legacy-json", "legacy-yaml"]


@dataclass(frozen=True, eq=False)
class PolicyStore:
    """A fully parsed and checked store.

    ``policies`` holds the static policies, ``templates`` the templates,
    ``linked_policies`` the policies obtained by linking templates (keyed by link id);
    the three id spaces are disjoint. Every policy's ``@id`` equals its key.
    ``trusted_issuers`` are already in the token layer's terms: the engine uses them as
    they are, so an issuer record is parsed once.
    ``default_entities`` are available to every evaluation; request entities win.
    """

    id: str
    name: str
    schema: Schema
    schema_text: str
    schema_format: Literal["polang", "polang-json"]
    description: str | None = None
    version: str | None = None
    polang_version: str | None = None
    created_date: datetime | None = None
    updated_date: datetime | None = None
    policies: dict[str, Policy] = field(default_factory=dict)
    templates: dict[str, Policy] = field(default_factory=dict)
    links: dict[str, TemplateLink] = field(default_factory=dict)
    linked_policies: dict[str, Policy] = field(default_factory=dict)
    trusted_issuers: dict[str, IssuerSettings] = field(default_factory=dict)
    default_entities: EntityStore = field(default_factory=EntityStore)
    policy_origins: dict[str, str] = field(default_factory=dict, repr=False)
    """Where each policy and template was declared (file, and JSON path in legacy files)."""
    format: StoreFormat = "directory"
    source: str = ""
    digest: str = ""
    """SHA-256 of the store's raw content: equal digests mean identical input."""
    warnings: tuple[StoreProblem, ...] = ()
    """What the loader accepted but flags (unknown fields, weak SHA-1 manifest checksums):
    the engine writes each to the system log at WARN; ``polang store validate`` prints them."""

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
