"""The validated-token cache: a token seen again is not re-verified until it expires.

Keys are digests of (mapping, token), so the cache never holds a token itself. Entries
live until the token's ``exp`` or ``ENGINE_TOKEN_CACHE_MAX_TTL``, whichever comes first;
the least recently used entry goes when ``ENGINE_TOKEN_CACHE_CAPACITY`` is reached.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

T = TypeVar("T")


def cache_key(mapping: str, token: str) -> bytes:
    h = hashlib.sha256()
    h.update(mapping.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(token.encode("utf-8", "surrogatepass"))
    return h.digest()


class TokenCache(Generic[T]):
    """A thread-safe LRU map with per-entry expiry; capacity 0 turns it off."""

    def __init__(self, capacity: int, max_ttl: float) -> None:
        self.capacity = capacity
        self.max_ttl = max_ttl
        self._lock = threading.Lock()
        self._items: OrderedDict[bytes, tuple[float, T]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.capacity > 0 and self.max_ttl > 0

    def get(self, key: bytes, now: float) -> T | None:
        if not self.enabled:
            return None
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            expires_at, value = item
            if now >= expires_at:
                del self._items[key]
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: bytes, value: T, now: float, expires_at: float | None) -> None:
        if not self.enabled:
            return
        until = now + self.max_ttl
        if expires_at is not None:
            until = min(until, expires_at)
        if until <= now:
            return
        with self._lock:
            self._items[key] = (until, value)
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
