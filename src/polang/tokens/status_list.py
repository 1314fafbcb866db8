"""Token status lists (draft-ietf-oauth-status-list), checked fail-closed.

A token carrying ``status.status_list.{idx, uri}`` is looked up in the list at ``uri``:
a JWT with ``typ`` ``statuslist+jwt``, signed by the token's own issuer, whose ``sub`` is
``uri`` and whose ``status_list.{bits, lst}`` holds the statuses (``lst`` is the
ZLIB-compressed byte array, base64url; entry ``i`` occupies bits ``i*bits ..`` counted
from the least significant bit of each byte). Only status 0 (VALID) passes. Lists are
cached until their ``ttl`` or ``exp``, never longer than
``ENGINE_JWT_STATUS_LIST_REFRESH_INTERVAL_MAX``.
"""

from __future__ import annotations

import base64
import binascii
import math
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from polang._flight import FetchPending, Flight, deferring
from polang.http import Fetcher, FetchError, short_url
from polang.language.values import LONG_MAX, LONG_MIN
from polang.tokens.issuers import IssuerKeys, normalize_issuer
from polang.tokens.jwt_checks import decode_unverified, verify_signature
from polang.tokens.model import TokenDrop
from polang.tokens.settings import TokenSettings

STATUS_NAMES = {0: "VALID", 1: "INVALID", 2: "SUSPENDED"}
#: Most status lists cached at once (the oldest entry goes first).
MAX_STATUS_LISTS = 1024
_TYP = frozenset({"statuslist+jwt", "application/statuslist+jwt"})


def _is_time(v: object) -> bool:
    """A number of seconds within the Long range, as a token's time claims must be
    (``jwt_checks``): larger ints would not even convert to floats, and a NaN would compare
    false with every clock reading (a list that never expires)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return LONG_MIN <= v <= LONG_MAX  # false for NaN and the infinities too


_MAX_STATUSES = 1 << 27  # bound on the decompressed list (128 MiB of 1-byte entries)


class StatusUnavailable(Exception):
    """The list could not be fetched or is invalid; the token fails closed."""


@dataclass(frozen=True, slots=True)
class StatusList:
    bits: int
    data: bytes

    def status(self, idx: int) -> int:
        pos = idx * self.bits
        byte = pos >> 3
        if byte >= len(self.data):
            raise StatusUnavailable(
                f"index {idx} is outside the list ({len(self.data) * 8 // self.bits} entries)"
            )
        return (self.data[byte] >> (pos & 7)) & ((1 << self.bits) - 1)


def decode_status_list(obj: object, max_bytes: int = _MAX_STATUSES) -> StatusList:
    """The ``status_list`` claim of a status list token."""
    if not isinstance(obj, dict):
        raise StatusUnavailable("'status_list' is not an object")
    bits = obj.get("bits")
    if isinstance(bits, bool) or bits not in (1, 2, 4, 8):
        raise StatusUnavailable(f"'bits' must be 1, 2, 4 or 8, got {bits!r}")
    lst = obj.get("lst")
    if not isinstance(lst, str) or not lst:
        raise StatusUnavailable("'lst' is missing or not a string")
    if any(c in lst for c in "+/="):
        raise StatusUnavailable("'lst' is not base64url (no padding)")
    try:
        compressed = base64.urlsafe_b64decode(lst + "=" * (-len(lst) % 4))
    except (binascii.Error, ValueError) as e:
        raise StatusUnavailable(f"'lst' is not base64url ({e})") from e
    d = zlib.decompressobj()
    try:
        data = d.decompress(compressed, max_bytes + 1)
    except zlib.error as e:
        raise StatusUnavailable(f"'lst' is not ZLIB data ({e})") from e
    if len(data) > max_bytes or d.unconsumed_tail:
        raise StatusUnavailable("'lst' decompresses to more than the allowed size")
    if not d.eof:
        raise StatusUnavailable("'lst' is truncated ZLIB data")
    return StatusList(bits=bits, data=data)


def status_reference(payload: dict[str, Any]) -> tuple[int, str] | None:
    """``(idx, uri)`` of a token's status claim; None when it has none."""
    if "status" not in payload:
        return None
    status = payload["status"]
    if not isinstance(status, dict):
        raise StatusUnavailable("the 'status' claim is not an object")
    ref = status.get("status_list")
    if ref is None:
        raise StatusUnavailable(
            "the 'status' claim has no 'status_list' (the only status mechanism supported)"
        )
    if not isinstance(ref, dict):
        raise StatusUnavailable("'status.status_list' is not an object")
    idx = ref.get("idx")
    uri = ref.get("uri")
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
        raise StatusUnavailable("'status.status_list.idx' is not a non-negative integer")
    if not isinstance(uri, str) or not uri:
        raise StatusUnavailable("'status.status_list.uri' is not a string")
    return idx, uri


@dataclass
class _Entry:
    status_list: StatusList | None
    error: str | None
    expires_at: float


class StatusListChecker:
    """Fetches, verifies and caches status lists (thread-safe)."""

    def __init__(
        self, settings: TokenSettings, fetcher: Fetcher, clock: Callable[[], float]
    ) -> None:
        self._settings = settings
        self._fetcher = fetcher
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._flights: dict[tuple[str, str], Flight] = {}  # lists being fetched
        self._unverified_failure: dict[str, float] = {}  # issuer id -> last failed fetch
        self.fetch_count = 0

    def check(self, payload: dict[str, Any], issuer: IssuerKeys | None, verify: bool) -> None:
        """Raise :class:`TokenDrop` unless the token's status is VALID (or it has none)."""
        try:
            ref = status_reference(payload)
            if ref is None:
                return
            idx, uri = ref
            status = self._list(uri, issuer, verify).status(idx)
        except StatusUnavailable as e:
            raise TokenDrop("status_unavailable", f"token status cannot be checked: {e}") from e
        if status != 0:
            name = STATUS_NAMES.get(status, f"application-specific {status:#04x}")
            raise TokenDrop("revoked", f"the token's status is {name} (status list {uri})")

    def _list(self, uri: str, issuer: IssuerKeys | None, verify: bool) -> StatusList:
        """The list at ``uri``: cached, or fetched by one caller while the others wait (a
        token needing an expired list must not be judged by it). Under
        :func:`polang._flight.deferred` starting or waiting for the fetch raises
        :class:`~polang._flight.FetchPending` instead."""
        issuer_id = issuer.settings.issuer_id if issuer else ""
        key = (issuer_id, uri)
        entry: _Entry | None = None
        for _ in range(2):  # a waiter whose fetch left an expired entry fetches once itself
            with self._lock:
                now = self._clock()
                entry = self._entries.get(key)
                if entry is not None and now < entry.expires_at:
                    break
                flight = self._flights.get(key)
                owner = flight is None
                if flight is None:
                    flight = self._flights[key] = Flight()
            if owner:
                new = entry is None

                def fly(now: float = now, new: bool = new, flight: Flight = flight) -> _Entry:
                    try:
                        return self._refetch(uri, issuer, issuer_id, verify, now, new)
                    finally:
                        with self._lock:
                            self._flights.pop(key, None)
                        flight.finish()

                if deferring():
                    raise FetchPending(flight, fly)
                entry = fly()
                break
            if deferring():
                raise FetchPending(flight, None)
            # the fetch in flight ends by its own deadline; the margin covers parsing
            flight.wait(self._settings.http_timeout + 5.0)
        else:  # waited twice: what the last fetch left, fresh or not
            with self._lock:
                entry = self._entries.get(key)
        if entry is None:
            raise StatusUnavailable(f"status list {short_url(uri)} was not fetched in time")
        if entry.status_list is None:
            raise StatusUnavailable(entry.error or "status list unavailable")
        return entry.status_list

    def push(self, text: str, issuer: IssuerKeys | None, verify: bool) -> str:
        """Take a status list sent to the engine (a Lock server's event) at once: checked
        as a fetched list is (``typ``, the issuer's signature, ``sub``, ``iss``, times), then
        cached under its URI (``sub``) in place of the fetched one. Returns the URI; raises
        :class:`StatusUnavailable` (the cache is left as it was) or ``TokenDrop``."""
        decoded = decode_unverified(text)
        uri = decoded.payload.get("sub")
        if not isinstance(uri, str) or not uri:
            raise StatusUnavailable("the list has no 'sub' (the URI it is the list of)")
        now = self._clock()
        status_list, expires_at = self._validate(text, uri, issuer, verify, now)
        cap = float(self._settings.status_list_refresh_max)
        key = (issuer.settings.issuer_id if issuer else "", uri)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = _Entry(status_list, None, min(expires_at, now + cap))
            while len(self._entries) > MAX_STATUS_LISTS:
                old = next(iter(self._entries))
                del self._entries[old]
        return uri

    def _refetch(
        self,
        uri: str,
        issuer: IssuerKeys | None,
        issuer_id: str,
        verify: bool,
        now: float,
        new: bool,
    ) -> _Entry:
        key = (issuer_id, uri)
        cooldown = float(self._settings.jwks_min_refresh_interval)
        if not verify and new:
            # an unverified token names any URI it likes: after a failed fetch, no other
            # new list of this issuer is fetched during the cooldown
            with self._lock:
                failed = self._unverified_failure.get(issuer_id)
            if failed is not None and now - failed < cooldown:
                return _Entry(
                    None,
                    f"status list {short_url(uri)} not fetched: another status list of this "
                    f"issuer failed {now - failed:g} s ago, and unverified tokens get one "
                    "failed status list fetch per ENGINE_JWKS_MIN_REFRESH_INTERVAL",
                    now,
                )
        entry = self._fetch(uri, issuer, verify, now)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = entry  # newest last: the oldest go first
            while len(self._entries) > MAX_STATUS_LISTS:
                old = next(iter(self._entries))
                del self._entries[old]
            if entry.status_list is None and not verify:
                self._unverified_failure[issuer_id] = now
        return entry

    def _fetch(self, uri: str, issuer: IssuerKeys | None, verify: bool, now: float) -> _Entry:
        cap = float(self._settings.status_list_refresh_max)
        retry_after = now + min(float(self._settings.jwks_min_refresh_interval), cap)
        with self._lock:
            self.fetch_count += 1
        try:
            result = self._fetcher.get(uri, accept="application/statuslist+jwt", kind="status_list")
            text = result.body.decode("ascii").strip()
        except (FetchError, UnicodeDecodeError) as e:
            return _Entry(None, f"status list {short_url(uri)} unreachable: {e}", retry_after)
        try:
            status_list, expires_at = self._validate(text, uri, issuer, verify, now)
        except (StatusUnavailable, TokenDrop) as e:
            return _Entry(None, f"status list {short_url(uri)} is invalid: {e}", retry_after)
        return _Entry(status_list, None, min(expires_at, now + cap))

    def _validate(
        self, text: str, uri: str, issuer: IssuerKeys | None, verify: bool, now: float
    ) -> tuple[StatusList, float]:
        decoded = decode_unverified(text)
        typ = decoded.header.get("typ")
        if not isinstance(typ, str) or typ.lower() not in _TYP:
            raise StatusUnavailable(f"header 'typ' must be 'statuslist+jwt', got {typ!r}")
        if verify:
            if issuer is None:
                raise StatusUnavailable("no issuer to verify the list's signature with")
            verify_signature(decoded, issuer, self._settings.algorithms)
        claims = decoded.payload
        if claims.get("sub") != uri:
            raise StatusUnavailable(f"'sub' {claims.get('sub')!r} is not the list's URI")
        iss = claims.get("iss")
        ident = issuer.identifier if issuer is not None else None
        if (
            iss is not None
            and ident is not None
            and (not isinstance(iss, str) or normalize_issuer(iss) != ident)
        ):
            raise StatusUnavailable(f"'iss' {iss!r} is not the token's issuer")
        iat = claims.get("iat")
        if isinstance(iat, bool) or not isinstance(iat, (int, float)):
            raise StatusUnavailable("'iat' is missing or not a NumericDate")
        skew = self._settings.clock_skew
        expires_at = math.inf
        exp = claims.get("exp")
        if exp is not None:
            if not _is_time(exp):
                raise StatusUnavailable("'exp' is not a NumericDate")
            if now >= exp + skew:
                raise StatusUnavailable(f"the list expired at {int(exp)}")
            expires_at = float(exp)
        ttl = claims.get("ttl")
        if ttl is not None:
            if not _is_time(ttl) or ttl < 0:
                raise StatusUnavailable("'ttl' is not a non-negative number")
            expires_at = min(expires_at, now + ttl)
        return decode_status_list(claims.get("status_list")), expires_at
