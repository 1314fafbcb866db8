"""Policy stores: every source and format, checked in full before the engine sees them.

``load_policy_store(config)`` follows the spec's detection table; the other entry points
load a given source (``PolicyStoreSource``) or archive bytes. Any problem rejects the
whole store with a ``PolicyStoreLoadError`` (a ``PolicyStoreError``) listing every
problem with its file, place and kind.
"""

from polang.store.errors import KINDS, PolicyStoreLoadError, StoreProblem
from polang.store.model import PolicyStore, TemplateLink
from polang.store.refresh import StoreRefresher
from polang.store.source import (
    PolicyStoreSource,
    load_policy_store,
    load_policy_store_archive_bytes,
)
from polang.tokens.settings import ClaimMapping, IssuerSettings, TokenMetadata

__all__ = [
    "KINDS",
    "ClaimMapping",
    "IssuerSettings",
    "PolicyStore",
    "PolicyStoreLoadError",
    "PolicyStoreSource",
    "StoreProblem",
    "StoreRefresher",
    "TemplateLink",
    "TokenMetadata",
    "load_policy_store",
    "load_policy_store_archive_bytes",
]
