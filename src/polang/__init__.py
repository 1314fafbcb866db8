"""polang: an embeddable, Datalog-backed authorization engine."""

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

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "EntityError",
    "PolangError",
    "PolicyParseError",
    "PolicyStoreError",
    "RequestError",
    "SchemaError",
    "TokenError",
    "ValidationError",
    "__version__",
]
