"""Tokens: trusted issuers, JWT validation, status lists, token entities, context.tokens.

The engine builds one :class:`TokenProcessor` per policy store and calls
:meth:`TokenProcessor.process` for each ``authorize_multi_issuer`` request.

The names below are imported on first use (module ``__getattr__``): importing the
package loads none of its modules (start-up time; ``tests/test_imports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polang._lazy import lazy_exports

if TYPE_CHECKING:
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
    from polang.tokens.records import (
        DEFAULT_ENTITY_TYPES,
        ClaimMapping,
        IssuerSettings,
        RegexGroup,
        TokenMetadata,
    )
    from polang.tokens.settings import (
        ALL_ALGORITHMS,
        ASYMMETRIC_ALGORITHMS,
        TokenSettings,
    )

_LAZY: dict[str, str] = {
    "DROP_KINDS": "polang.tokens.model",
    "DropKind": "polang.tokens.model",
    "DroppedToken": "polang.tokens.model",
    "ProcessedToken": "polang.tokens.model",
    "ProcessedTokens": "polang.tokens.model",
    "TokenInput": "polang.tokens.model",
    "TokenLogId": "polang.tokens.model",
    "TokenProcessor": "polang.tokens.processor",
    "context_key": "polang.tokens.processor",
    "trusted_issuer_entity": "polang.tokens.processor",
    "trusted_issuer_type": "polang.tokens.processor",
    "ALL_ALGORITHMS": "polang.tokens.settings",
    "ASYMMETRIC_ALGORITHMS": "polang.tokens.settings",
    "DEFAULT_ENTITY_TYPES": "polang.tokens.records",
    "ClaimMapping": "polang.tokens.records",
    "IssuerSettings": "polang.tokens.records",
    "RegexGroup": "polang.tokens.records",
    "TokenMetadata": "polang.tokens.records",
    "TokenSettings": "polang.tokens.settings",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


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
