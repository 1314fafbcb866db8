"""The loaded policy store: what every source format turns into.

Whatever the format (directory, ``.parc``, legacy JSON/YAML, URL, bytes), the engine
only ever sees a :class:`PolicyStore` whose every part has been parsed and checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from polang.language.ast import Policy
from polang.language.entities import Entity, EntityStore
from polang.language.schema import Schema
from polang.language.values import EntityUID

# ---------------------------------------------------------------- trusted issuers

#: Token names whose metadata may omit ``entity_type_name`` (the spec's shared ``Svc``
#: namespace); any other token name must give one.
DEFAULT_TOKEN_ENTITY_TYPES: dict[str, str] = {
    "access_token": "Svc::Access_token",
    "id_token": "Svc::Id_token",
    "userinfo_token": "Svc::Userinfo_token",
    "tx_token": "Svc::Tx_token",
}

RegexValueType = Literal["String", "Number", "Boolean"]


@dataclass(frozen=True)
class RegexGroupMapping:
    """Where one named group of a regex claim mapping goes: attribute ``attr`` of ``type``."""

    attr: str
    type: RegexValueType


@dataclass(frozen=True)
class ClaimMapping:
    """How a claim becomes a value of the schema type ``type``.

    ``regex``: ``pattern`` is the compiled ``regex_expression`` and ``groups`` maps each
    named group to its attribute. ``json``: the claim (a JSON object or a string holding
    one) becomes a record of ``type``.
    """

    parser: Literal["regex", "json"]
    type: str
    regex_expression: str | None = None
    pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    groups: dict[str, RegexGroupMapping] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenMetadata:
    """One ``token_metadata`` entry, defaults filled in (the spec's table)."""

    name: str
    entity_type_name: str
    trusted: bool = True
    token_id: str = "jti"
    user_id: str = "sub"
    workload_id: str = "aud"
    role_mapping: tuple[str, ...] = ("role",)
    role_mapping_explicit: bool = False
    """Whether the record gave ``role_mapping`` (the userinfo ``role`` fallback needs it)."""
    principal_mapping: tuple[str, ...] = ()
    required_claims: tuple[str, ...] = ()
    claim_mapping: dict[str, ClaimMapping] = field(default_factory=dict)


@dataclass(frozen=True)
class TrustedIssuerConfig:
    """A trusted issuer record; ``id`` is its key (the ``TrustedIssuer`` entity id)."""

    id: str
    name: str
    openid_configuration_endpoint: str
    description: str | None = None
    token_metadata: dict[str, TokenMetadata] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The record as written in the store (JSON data), for consumers with their own model."""

    def metadata_for_type(self, entity_type_name: str) -> TokenMetadata | None:
        """The metadata whose ``entity_type_name`` a request token's mapping names."""
        for tm in self.token_metadata.values():
            if tm.entity_type_name == entity_type_name:
                return tm
        return None


# ---------------------------------------------------------------- the store


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
    trusted_issuers: dict[str, TrustedIssuerConfig] = field(default_factory=dict)
    default_entities: EntityStore = field(default_factory=EntityStore)
    policy_origins: dict[str, str] = field(default_factory=dict, repr=False)
    """Where each policy and template was declared (file, and JSON path in legacy files)."""
    format: StoreFormat = "directory"
    source: str = ""
    digest: str = ""
    """SHA-256 of the store's raw content: equal digests mean identical input."""

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
        }
