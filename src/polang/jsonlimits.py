"""JSON from outside, read with bounded nesting.

Python's ``json`` recurses once per nesting level, so a hostile body of ``[`` x 100,000
would otherwise end in ``RecursionError`` (or worse, under a raised recursion limit). Every
JSON text that polang did not write itself (tokens, discovery and JWKS bodies, status
lists, store files, entity and request JSON) goes through :func:`loads`, which measures the
nesting depth first, without recursion, and refuses anything deeper than the limit with an
error that names the limit.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from polang.errors import PolangError

#: Deepest nesting of arrays and objects accepted in any JSON polang reads (documented in
#: docs/security.md). Real stores, tokens and entities stay far below it; Python's own
#: recursion limit (1,000 frames) stays far above it.
MAX_JSON_DEPTH = 128

# A string, or an unclosed one running to the end of the text (invalid JSON, which
# json.loads then refuses; for nesting it is all text). Possessive, and it always matches
# at a quote, so no text is scanned twice: a quote followed by n escaped quotes costs n
# steps, not n**2 (bodies reach 10 MiB, stores 100 MiB).
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_OPEN = frozenset("[{")


def json_depth(text: str) -> int:
    """Deepest bracket nesting of ``text`` (strings skipped), computed without recursion."""
    if '"' in text:
        text = _STRING.sub('""', text)
    depth = best = 0
    for m in _BRACKETS.finditer(text):
        if m.group() in _OPEN:
            depth += 1
            if depth > best:
                best = depth
        else:
            depth -= 1
    return best


def too_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` nests deeper than ``max_depth`` (counted only when it could)."""
    return text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth


def check_depth(
    text: str,
    *,
    what: str,
    error: type[PolangError] = PolangError,
    max_depth: int = MAX_JSON_DEPTH,
) -> None:
    """Raise ``error`` when ``text`` nests deeper than ``max_depth``."""
    if too_deep(text, max_depth):
        raise error(
            f"{what}: JSON nests deeper than the limit of {max_depth} levels "
            "(MAX_JSON_DEPTH, docs/security.md)"
        )


class JSONLimitError(ValueError):
    """JSON text past a limit: nested deeper than ``MAX_JSON_DEPTH``, or an integer too
    long for Python to read (more than 4,300 digits)."""


def decode(
    text: str | bytes | bytearray,
    *,
    pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The one strict JSON decoding of untrusted text, under every reader polang has.

    Nesting is measured first, without recursion; ``NaN``/``Infinity`` and numbers too
    large for a float are refused; ``pairs_hook`` sees each object's pairs (to refuse or
    to mark repeated keys). Raises ``json.JSONDecodeError`` (with its line and column) for
    invalid JSON, ``UnicodeDecodeError`` for bytes that are not UTF-8, :class:`JSONLimitError`
    past a limit and ``ValueError`` for the rest (what ``pairs_hook`` raises): all
    ``ValueError``, which each reader reports its own way (:func:`loads`,
    ``polang.inputs.strict.load_json``, ``polang.language.schema.json_loads_checked``).
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    if too_deep(text, max_depth):
        raise JSONLimitError(
            f"JSON nests deeper than the limit of {max_depth} levels "
            "(MAX_JSON_DEPTH, docs/security.md)"
        )
    try:
        return json.loads(
            text,
            object_pairs_hook=pairs_hook,
            parse_constant=no_constant,
            parse_float=finite_float,
        )
    except json.JSONDecodeError:
        raise
    except RecursionError:  # not reachable below MAX_JSON_DEPTH; kept as a last guard
        raise JSONLimitError(
            f"JSON nests deeper than the limit of {max_depth} levels "
            "(MAX_JSON_DEPTH, docs/security.md)"
        ) from None
    except ValueError as e:
        if "integer string conversion" in str(e):  # Python's limit on an integer's digits
            raise JSONLimitError(value_error_text(e)) from None
        raise


def loads(
    text: str | bytes | bytearray,
    *,
    what: str,
    error: type[PolangError] = PolangError,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """:func:`decode` with every failure an ``error`` naming ``what`` (a file, a token
    index, a URL); invalid JSON is reported as ``what:line:col``, the project's way of
    saying where."""
    try:
        return decode(text, max_depth=max_depth)
    except UnicodeDecodeError as e:
        raise error(f"{what}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise error(f"{what}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except JSONLimitError as e:
        if str(e).startswith("JSON nests"):
            raise error(f"{what}: {e}") from None
        raise error(f"{what}: invalid JSON: {e}") from None
    except ValueError as e:
        raise error(f"{what}: invalid JSON: {value_error_text(e)}") from None


def no_constant(name: str) -> Any:
    """``json.loads``'s ``parse_constant``: ``NaN`` and ``Infinity`` are not JSON (RFC 8259
    section 6), and a NaN compares false with everything (an expiry that never comes)."""
    raise ValueError(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    """``json.loads``'s ``parse_float``: a number too large for a float (``1e999``) is an
    error, not infinity."""
    v = float(text)
    if not math.isfinite(v):
        shown = text if len(text) <= 24 else text[:20] + "..."
        raise ValueError(f"the number {shown} is out of range")
    return v


def value_error_text(e: BaseException) -> str:
    """What ``json.loads``'s non-syntax ``ValueError`` means, in a bounded message.

    Python's own text for a too-long integer advises ``sys.set_int_max_str_digits()``, a
    process-wide change no caller of a library should make: it is replaced.
    """
    if "integer string conversion" in str(e):
        return f"an integer has more than {sys.get_int_max_str_digits():,} digits"
    return str(e)[:200]


def depth_of(value: object, *, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of an already-decoded value (lists, tuples, dicts), without recursion.

    Stops counting at ``limit + 1``: callers only need to know whether a limit is passed.
    """
    best = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list | tuple | set | frozenset):
            children = v
        else:
            continue
        d += 1
        if d > best:
            best = d
            if best > limit:
                return best
        stack.extend((c, d) for c in children)
    return best
