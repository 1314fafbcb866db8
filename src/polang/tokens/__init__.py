"""Tokens: trusted issuers, JWT validation, status lists, token entities, context.tokens.

The engine builds one :class:`TokenProcessor` per policy store and calls
:meth:`TokenProcessor.process` for each ``authorize_multi_issuer`` request.
"""

from polang.tokens.model import (
    DROP_KINDS,
    DropKind,
    DroppedToken,
    ProcessedToken,
    ProcessedTokens,
    TokenInput,
    TokenLogId,
)
from polang.tokens.processor import (
    TokenProcessor,
    context_key,
    trusted_issuer_entity,
    trusted_issuer_type,
)
from polang.tokens.settings import (
    ALL_ALGORITHMS,
    ASYMMETRIC_ALGORITHMS,
    DEFAULT_ENTITY_TYPES,
    ClaimMapping,
    IssuerSettings,
    RegexGroup,
    TokenMetadata,
    TokenSettings,
)

__all__ = [
    "ALL_ALGORITHMS",
    "ASYMMETRIC_ALGORITHMS",
    "DEFAULT_ENTITY_TYPES",
    "DROP_KINDS",
    "ClaimMapping",
    "DropKind",
    "DroppedToken",
    "IssuerSettings",
    "ProcessedToken",
    "ProcessedTokens",
    "RegexGroup",
    "TokenInput",
    "TokenLogId",
    "TokenMetadata",
    "TokenProcessor",
    "TokenSettings",
    "context_key",
    "trusted_issuer_entity",
    "trusted_issuer_type",
]
