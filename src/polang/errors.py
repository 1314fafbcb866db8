"""The exception family: every failure a caller can see is a ``PolangError``.

Messages always say *what* was wrong and *where* (file:line:col, JSON path, token index),
because an authorization library is debugged from its error messages.
"""

from __future__ import annotations


class PolangError(Exception):
    """Base of every exception polang raises on bad input or configuration.

    The message is bounded (:data:`MAX_MESSAGE_CHARS`): it may quote hostile input.
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and len(args[0]) > MAX_MESSAGE_CHARS:
            args = (bound_message(args[0]), *args[1:])
        super().__init__(*args)


class ConfigError(PolangError):
    """An ``ENGINE_*`` property is unknown or has a value outside what is allowed."""


class PolicyStoreError(PolangError):
    """A policy store cannot be loaded; the whole store is rejected."""


class PolicyParseError(PolangError):
    """Policy text is not valid polang.

    Carries the position so tools can point at it; the message already includes
    ``file:line:col`` and a caret excerpt.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.filename = filename
        self.line = line
        self.column = column


class SchemaError(PolangError):
    """A schema (human or JSON form) is malformed or inconsistent."""

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.filename = filename
        self.line = line
        self.column = column
        self.path = path


class ValidationError(PolangError):
    """Policies, entities or a request do not conform to the schema.

    ``findings`` lists every problem found (not only the first).
    """

    def __init__(self, message: str, findings: list[object] | None = None) -> None:
        super().__init__(message)
        self.findings = list(findings or [])


class EntityError(PolangError):
    """Entity JSON is malformed; the message names the entity uid and JSON path."""

    def __init__(self, message: str, *, uid: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.uid = uid
        self.path = path


class TokenError(PolangError):
    """No usable token was left for a multi-issuer request, or a token input is malformed."""

    def __init__(self, message: str, reasons: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.reasons = list(reasons or [])


class LockError(PolangError):
    """The Lock server could not be used: its configuration document, the software
    statement, registration, the access token or the store it serves (docs/lock.md)."""


class RequestError(PolangError):
    """An authorization request is malformed (bad action, resource, context...)."""


class DataError(RequestError):
    """Context data given to ``push_data`` (and the other data calls) is malformed, too
    big, or does not fit what the schema declares for ``context.data``."""


class MappingError(PolangError):
    """A mapping from entity types to a service's tables (``polang.filtering``) is
    malformed, too big, or does not fit the store's schema; the message names each
    problem with its JSON path."""


class FilterRefused(PolangError):
    """A plan's residual uses a construct a filter target cannot express exactly; the
    message names the policy and the construct (``policy_id`` and ``construct`` too)."""

    def __init__(self, message: str, *, policy_id: str = "", construct: str = "") -> None:
        super().__init__(message)
        self.policy_id = policy_id
        self.construct = construct


class EvaluationError(Exception):
    """An error *inside* a policy's evaluation (missing attribute, overflow, type error).

    Not a ``PolangError``: it never escapes to callers. The policy does not apply and the
    error is reported in ``diagnostics.errors``, as the language requires.
    """

    __slots__ = ("kind", "message")

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


#: Longest message any ``PolangError`` carries (documented in docs/security.md). Messages can
#: quote input (a file list, a value, an expanded alias); past this they are cut, with the
#: number of characters left out, so a hostile store or token cannot make a huge error.
MAX_MESSAGE_CHARS = 4000


def bound_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` cut to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters; MAX_MESSAGE_CHARS)"
