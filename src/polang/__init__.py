"""polang: an embeddable, Datalog-backed authorization engine.

The public API: build an :class:`Engine` from a :class:`Config` (or a mapping of
``ENGINE_*`` properties) and call ``authorize_unsigned`` or ``authorize_multi_issuer``.
"""

from polang.config import Config
from polang.engine import AuthorizeResult, Diagnostics, Engine, Response, init_from_archive_bytes
from polang.errors import (
    ConfigError,
    EntityError,
    PolangError,
    PolicyParseError,
    PolicyStoreError,
    RequestError,
    SchemaError,
    TokenError,
    ValidationError,
)
from polang.store.source import PolicyStoreSource, load_policy_store_archive_bytes
from polang.tokens.model import DroppedToken, TokenInput

__version__ = "0.1.0"

__all__ = [
    "AuthorizeResult",
    "Config",
    "ConfigError",
    "Diagnostics",
    "DroppedToken",
    "Engine",
    "EntityError",
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
