"""Policy stores: every source and format, checked in full before the engine sees them.

``load_policy_store(config)`` follows the spec's detection table; the other entry points
load a given source (``PolicyStoreSource``) or archive bytes. Any problem rejects the
whole store with a ``PolicyStoreLoadError`` (a ``PolicyStoreError``) listing every
problem with its file, place and kind.

The names below are imported on first use (module ``__getattr__``): importing the
package loads none of its modules (start-up time; ``tests/test_imports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polang._lazy import lazy_exports

if TYPE_CHECKING:
    from polang.inputs.problems import (
        KINDS,
        PolicyStoreLoadError,
        StoreProblem,
    )
    from polang.store.model import (
        PolicyStore,
        TemplateLink,
    )
    from polang.store.refresh import StoreRefresher
    from polang.store.source import (
        PolicyStoreSource,
        load_policy_store,
        load_policy_store_archive_bytes,
    )
    from polang.tokens.records import (
        ClaimMapping,
        IssuerSettings,
        TokenMetadata,
    )

_LAZY: dict[str, str] = {
    "KINDS": "polang.inputs.problems",
    "PolicyStoreLoadError": "polang.inputs.problems",
    "StoreProblem": "polang.inputs.problems",
    "PolicyStore": "polang.store.model",
    "TemplateLink": "polang.store.model",
    "StoreRefresher": "polang.store.refresh",
    "PolicyStoreSource": "polang.store.source",
    "load_policy_store": "polang.store.source",
    "load_policy_store_archive_bytes": "polang.store.source",
    "ClaimMapping": "polang.tokens.records",
    "IssuerSettings": "polang.tokens.records",
    "TokenMetadata": "polang.tokens.records",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


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
