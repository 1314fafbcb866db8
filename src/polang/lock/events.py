"""Server-sent events (the WHATWG ``text/event-stream`` format), read with bounds.

The Lock pushes events on one long-lived response. The parser keeps at most
:data:`MAX_EVENT_BYTES` of an event (its lines and data together); a longer one ends the
stream with :class:`EventStreamError` (the listener reconnects with backoff), so a server
that never sends a line break, or one endless event, costs bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from polang.errors import LockError

#: The most bytes one event may hold (its field lines together): a status list JWT fits
#: many times over.
MAX_EVENT_BYTES = 1024 * 1024
#: The most a server's ``retry:`` field may ask the listener to wait before reconnecting.
MAX_RETRY_SECONDS = 300.0
_MAX_ID_CHARS = 256


class EventStreamError(LockError):
    """The event stream broke its format or its bounds."""


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event: its name (``message`` when unnamed), data and id."""

    name: str
    data: str
    id: str | None


class EventParser:
    """Turns chunks of bytes into :class:`Event` s; ``last_id`` and ``retry`` carry over."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.last_id: str | None = None
        self.retry: float | None = None
        self._buffer = bytearray()
        self._size = 0  # bytes of the event being read, lines included
        self._name = ""
        self._data: list[str] = []
        self._first = True

    def restart(self) -> None:
        """A new connection: what was half read is dropped (``last_id`` and ``retry``
        carry over, as the format wants)."""
        self._buffer.clear()
        self._size = 0
        self._name = ""
        self._data = []
        self._first = True

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """The events ``chunk`` completes."""
        if self._first and chunk:
            self._first = False
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        self._buffer += chunk
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                if self._size + len(self._buffer) > self.max_event_bytes:
                    raise EventStreamError(
                        f"an event is longer than {self.max_event_bytes} bytes (MAX_EVENT_BYTES)"
                    )
                return
            end, after = cut
            line = bytes(self._buffer[:end])
            del self._buffer[:after]
            self._size += after
            if self._size > self.max_event_bytes:
                raise EventStreamError(
                    f"an event is longer than {self.max_event_bytes} bytes (MAX_EVENT_BYTES)"
                )
            event = self._line(line.decode("utf-8", "replace"))
            if event is not None:
                yield event

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value and len(value) <= _MAX_ID_CHARS:
                self.last_id = value
        elif field == "retry" and value.isascii() and value.isdigit() and len(value) < 12:
            self.retry = min(int(value) / 1000, MAX_RETRY_SECONDS)
        return None  # other fields are ignored, as the format says

    def _dispatch(self) -> Event | None:
        name, data = self._name, self._data
        self._name, self._data, self._size = "", [], 0
        if not data and not name:
            return None
        return Event(name or "message", "\n".join(data), self.last_id)


def _line_end(buf: bytearray) -> tuple[int, int] | None:
    """(end of the first line, start of the next) for CRLF, LF or CR; None if incomplete.

    A CR at the very end may be the first half of a CRLF: wait for the next byte.
    """
    lf = buf.find(b"\n")
    cr = buf.find(b"\r", 0, lf if lf >= 0 else len(buf))
    if cr >= 0:
        if cr + 1 == len(buf):
            return None
        return (cr, cr + 2) if buf[cr + 1 : cr + 2] == b"\n" else (cr, cr + 1)
    if lf >= 0:
        return lf, lf + 1
    return None


def parse_events(chunks: Iterable[bytes], parser: EventParser | None = None) -> Iterator[Event]:
    """Every event of a stream of chunks."""
    p = parser or EventParser()
    for chunk in chunks:
        yield from p.feed(chunk)
