"""What goes into and comes out of token processing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from polang.errors import TokenError, bound_message
from polang.language.entities import Entity
from polang.language.values import EntityUID, RecordValue
from polang.tokens.records import TokenMetadata

DropKind = Literal[
    "invalid_input",
    "untrusted_issuer",
    "signature",
    "expired",
    "not_yet_valid",
    "missing_claim",
    "audience",
    "revoked",
    "status_unavailable",
    "duplicate_token",
    "entity_build_failed",
]
DROP_KINDS: tuple[str, ...] = get_args(DropKind)
#: Longest drop reason kept (a reason may quote a hostile document or claim).
MAX_DROP_MESSAGE = 1000


@dataclass(frozen=True, slots=True)
class TokenInput:
    """One token of a multi-issuer request: ``mapping`` is the entity type it becomes."""

    mapping: str
    payload: str


@dataclass(frozen=True, slots=True)
class DroppedToken:
    """A token left out of the decision, with the reason (never the token itself)."""

    mapping: str
    index: int
    kind: DropKind
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "index": self.index,
            "reason": {"kind": self.kind, "message": self.message},
        }


class TokenDrop(Exception):
    """Raised inside the pipeline; becomes a :class:`DroppedToken`."""

    def __init__(self, kind: DropKind, message: str) -> None:
        message = bound_message(message, MAX_DROP_MESSAGE)
        super().__init__(message)
        self.kind: DropKind = kind
        self.message = message


@dataclass(frozen=True)
class ProcessedToken:
    """A validated token turned into an entity (shared across requests by the cache).

    ``entity`` must not be mutated: the validated-token cache hands the same object to
    later requests.
    """

    mapping: str
    index: int
    issuer_id: str | None
    issuer_name: str
    token_name: str | None
    metadata: TokenMetadata | None
    claims: Mapping[str, Any]
    verified: bool
    validated_at: int
    entity: Entity
    context_key: str
    roles: tuple[str, ...] = ()
    user_id: str | None = None
    workload_id: str | None = None

    @property
    def uid(self) -> EntityUID:
        return self.entity.uid

    @classmethod
    def build(cls, **fields: Any) -> ProcessedToken:
        """``ProcessedToken(**fields)`` with every field given, without the frozen
        ``__init__``'s ``object.__setattr__`` per field (three tokens per request)."""
        if fields.keys() != _PROCESSED_TOKEN_FIELDS:
            raise TypeError(f"ProcessedToken.build needs exactly {sorted(_PROCESSED_TOKEN_FIELDS)}")
        tok = object.__new__(cls)
        tok.__dict__.update(fields)
        return tok


_PROCESSED_TOKEN_FIELDS = frozenset(f.name for f in fields(ProcessedToken))


@dataclass(frozen=True, slots=True)
class TokenLogId:
    """What a decision log may show of a token: one identifying claim, never the token."""

    mapping: str
    index: int
    claim: str
    value: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": self.mapping, self.claim: self.value}


@dataclass
class ProcessedTokens:
    """The outcome of one request's tokens."""

    tokens: list[ProcessedToken] = field(default_factory=list)
    dropped: list[DroppedToken] = field(default_factory=list)
    context_tokens: RecordValue = field(
        default_factory=lambda: RecordValue({"total_token_count": 0})
    )
    log_ids: list[TokenLogId] = field(default_factory=list)

    @property
    def entities(self) -> list[Entity]:
        """Token entities, in request order."""
        return [t.entity for t in self.tokens]

    @property
    def roles(self) -> list[str]:
        """Every role found by the role mappings, first occurrence first."""
        seen: dict[str, None] = {}
        for t in self.tokens:
            for r in t.roles:
                seen.setdefault(r, None)
        return list(seen)

    def require_any(self) -> None:
        """Raise :class:`TokenError` listing every reason when no token is left."""
        if self.tokens:
            return
        reasons = [d.to_dict() for d in self.dropped]
        if not reasons:
            raise TokenError("no token was given", reasons)
        detail = "; ".join(
            f"token {d.index} ({d.mapping}): {d.kind}: {d.message}" for d in self.dropped
        )
        raise TokenError(f"no valid token left: {detail}", reasons)
