"""What a decision answers: ``AuthorizeResult`` (the shape of ``spec/decisions.md``), its
``Response`` and ``Diagnostics``, and a batch slot's ``BatchItemError``.

The classes are frozen records; :func:`new_result` fills their slots directly because
their ``__init__`` is a Python call more per decision on the per-request path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polang._record import Record
from polang.errors import PolangError
from polang.logs import uuid7_text

if TYPE_CHECKING:
    from polang.tokens.model import DroppedToken

__all__ = [
    "AuthorizeResult",
    "BatchItemError",
    "BatchResult",
    "Diagnostics",
    "Response",
    "new_result",
    "slot_setter",
]

_set = object.__setattr__


class Diagnostics(Record):
    """Why a decision came out as it did: the policies that determined it and the
    policies that errored."""

    __slots__ = ("errors", "reason")
    reason: list[str]
    errors: list[dict[str, str]]

    def __init__(
        self, reason: list[str] | None = None, errors: list[dict[str, str]] | None = None
    ) -> None:
        _set(self, "reason", [] if reason is None else reason)
        _set(self, "errors", [] if errors is None else errors)


class Response(Record):
    __slots__ = ("decision", "diagnostics")
    decision: str  # "allow" | "deny"
    diagnostics: Diagnostics

    def __init__(self, decision: str, diagnostics: Diagnostics) -> None:
        _set(self, "decision", decision)
        _set(self, "diagnostics", diagnostics)


class AuthorizeResult(Record):
    """The answer to one request (the shape of ``spec/decisions.md``).

    ``request_id`` is a UUIDv7 drawn when the request was decided (its order among all ids
    of the process is the decision's); when nothing logs the decision, its text is written
    on first read (``_request_id`` holds the id's bits until then, see
    ``logs.UUIDv7Generator.reserve``): a caller that never reads it does not pay for it.
    """

    __slots__ = ("_request_id", "decision", "dropped_tokens", "response")
    _computed = ("request_id",)
    _request_id: str | int
    decision: bool
    request_id: str
    response: Response
    dropped_tokens: list[DroppedToken] | None

    def __init__(
        self,
        decision: bool,
        request_id: str,
        response: Response,
        dropped_tokens: list[DroppedToken] | None = None,
    ) -> None:
        _set(self, "decision", decision)
        _set(self, "_request_id", request_id)
        _set(self, "response", response)
        _set(self, "dropped_tokens", dropped_tokens)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decision": self.decision,
            "request_id": self.request_id,
            "response": {
                "decision": self.response.decision,
                "diagnostics": {
                    "reason": list(self.response.diagnostics.reason),
                    "errors": [dict(e) for e in self.response.diagnostics.errors],
                },
            },
        }
        if self.dropped_tokens is not None:
            out["dropped_tokens"] = [d.to_dict() for d in self.dropped_tokens]
        return out


def _read_request_id(result: AuthorizeResult) -> str:
    """``AuthorizeResult.request_id``: the id's text, written (once) on first read."""
    rid = result._request_id
    if type(rid) is str:
        return rid
    text = uuid7_text(rid)  # type: ignore[arg-type]
    _set(result, "_request_id", text)  # two threads reading at once write the same text
    return text


setattr(AuthorizeResult, "request_id", property(_read_request_id))  # noqa: B010 (mypy)

_new = object.__new__


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of ``cls``'s slot ``name`` (its descriptor's ``__set__``): fills a frozen
    record made with ``object.__new__`` without its ``__init__``."""
    setter: Callable[[Any, Any], None] = getattr(cls, name).__set__
    return setter


_set_reason = slot_setter(Diagnostics, "reason")
_set_errors = slot_setter(Diagnostics, "errors")
_set_verdict = slot_setter(Response, "decision")
_set_diagnostics = slot_setter(Response, "diagnostics")
_set_allow = slot_setter(AuthorizeResult, "decision")
_set_request_id = slot_setter(AuthorizeResult, "_request_id")
_set_response = slot_setter(AuthorizeResult, "response")
_set_dropped = slot_setter(AuthorizeResult, "dropped_tokens")


def new_result(
    allow: bool,
    request_id: str | int,
    reasons: list[str],
    errors: list[dict[str, str]],
    dropped: list[DroppedToken] | None,
) -> AuthorizeResult:
    """``AuthorizeResult(allow, request_id, Response(..., Diagnostics(reasons, errors)),
    dropped)`` with the slots filled directly: the frozen classes' ``__init__`` costs about
    a microsecond more per decision (equal objects; a test compares them). An ``int``
    ``request_id`` is an id reserved by ``logs.reserve_uuid7``, written as text when read."""
    diag = _new(Diagnostics)
    _set_reason(diag, reasons)
    _set_errors(diag, errors)
    resp = _new(Response)
    _set_verdict(resp, "allow" if allow else "deny")
    _set_diagnostics(resp, diag)
    out = _new(AuthorizeResult)
    _set_allow(out, allow)
    _set_request_id(out, request_id)
    _set_response(out, resp)
    _set_dropped(out, dropped)
    return out


class BatchItemError(Record):
    """A batch item that could not be decided (its request was malformed or did not fit
    the schema): the ``error`` the single call would have raised, in the item's slot.

    ``decision`` is ``False``, so code that reads only ``result.decision`` denies.
    """

    __slots__ = ("decision", "error", "index")
    index: int
    error: PolangError
    decision: bool

    def __init__(self, index: int, error: PolangError, decision: bool = False) -> None:
        _set(self, "index", index)
        _set(self, "error", error)
        _set(self, "decision", decision)

    @property
    def kind(self) -> str:
        """The error's class name (``RequestError``, ``ValidationError``, ...)."""
        return type(self.error).__name__

    @property
    def message(self) -> str:
        """``requests[<index>]: <the error's message>``."""
        return f"requests[{self.index}]: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": False,
            "error": {"index": self.index, "kind": self.kind, "message": str(self.error)},
        }


BatchResult = AuthorizeResult | BatchItemError
"""One slot of a batch's answer."""
