"""polang: an embeddable, Datalog-backed authorization engine.

The public API: build an :class:`Engine` from a :class:`Config` (or a mapping of
``ENGINE_*`` properties) and call ``authorize_unsigned`` or ``authorize_multi_issuer``.

``import polang`` loads only the error classes: every other public name is imported on
first use (module ``__getattr__``), so a process pays for what it calls (start-up time;
``tests/test_imports.py`` keeps it so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polang._lazy import lazy_exports
from polang._version import __version__
from polang.errors import (
    ConfigError,
    DataError,
    EntityError,
    FilterRefused,
    LockError,
    MappingError,
    PolangError,
    PolicyParseError,
    PolicyStoreError,
    RequestError,
    SchemaError,
    TokenError,
    ValidationError,
)

if TYPE_CHECKING:
    from polang.config import Config
    from polang.engine import (
        AuthorizeResult,
        BatchItemError,
        BatchResult,
        Diagnostics,
        Engine,
        Response,
        init_from_archive_bytes,
    )
    from polang.engine.aio import AsyncEngine
    from polang.store.source import PolicyStoreSource, load_policy_store_archive_bytes
    from polang.tokens.model import DroppedToken, TokenInput

_LAZY: dict[str, str] = {
    "Config": "polang.config",
    "AsyncEngine": "polang.engine.aio",
    "AuthorizeResult": "polang.engine",
    "BatchItemError": "polang.engine",
    "BatchResult": "polang.engine",
    "Diagnostics": "polang.engine",
    "Engine": "polang.engine",
    "Response": "polang.engine",
    "init_from_archive_bytes": "polang.engine",
    "PolicyStoreSource": "polang.store.source",
    "load_policy_store_archive_bytes": "polang.store.source",
    "DroppedToken": "polang.tokens.model",
    "TokenInput": "polang.tokens.model",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


__all__ = [
    "AsyncEngine",
    "AuthorizeResult",
    "BatchItemError",
    "BatchResult",
    "Config",
    "ConfigError",
    "DataError",
    "Diagnostics",
    "DroppedToken",
    "Engine",
    "EntityError",
    "FilterRefused",
    "LockError",
    "MappingError",
    "PolangError",
    "PolicyParseError",
    "PolicyStoreError",
    "PolicyStoreSource",
    "RequestError",
    "Response",
    "SchemaError",
    "TokenError",
    "TokenInput",
    "ValidationError",
    "__version__",
    "init_from_archive_bytes",
    "load_policy_store_archive_bytes",
]
