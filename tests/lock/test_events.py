"""The event stream format, read with bounds (polang.lock.events)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polang.errors import PolangError
from polang.lock.events import MAX_RETRY_SECONDS, Event, EventParser, EventStreamError


def events(*chunks: bytes, parser: EventParser | None = None) -> list[Event]:
    p = parser or EventParser()
    return [e for c in chunks for e in p.feed(c)]


def test_fields_line_ends_and_comments() -> None:
    got = events(
        b"\xef\xbb\xbf: keep-alive\r\n",
        b"event: STATUS_LIST\r\ndata: a\r\ndata:b\r",
        b"\nid: 7\r\n\r\nevent: FORCE_REPORT\n\ndata: plain\rfoo: ignored\r\r\n",
    )
    assert got == [
        Event("STATUS_LIST", "a\nb", "7"),
        Event("FORCE_REPORT", "", "7"),
        Event("message", "plain", "7"),
    ]


def test_a_line_split_anywhere_reads_the_same() -> None:
    text = b"event: CONFIG_UPDATE\r\ndata: x\r\nid: 2\r\n\r\n"
    whole = events(text)
    for cut in range(1, len(text)):
        assert events(text[:cut], text[cut:]) == whole


def test_ids_and_retry_are_bounded() -> None:
    p = EventParser()
    events(b"id: a\x00b\nretry: 999999999999\ndata: x\n\n", parser=p)
    assert p.last_id is None and p.retry is None  # a NUL id, a retry of 12 digits: ignored
    events(b"id: " + b"x" * 300 + b"\nretry: 9999999\ndata: x\n\n", parser=p)
    assert p.last_id is None and p.retry == MAX_RETRY_SECONDS
    events(b"id: 5\nretry: 1500\n\n", parser=p)
    assert (p.last_id, p.retry) == ("5", 1.5)


def test_an_endless_line_or_event_is_cut() -> None:
    p = EventParser(max_event_bytes=1000)
    with pytest.raises(EventStreamError, match="MAX_EVENT_BYTES"):
        for _ in range(100):
            list(p.feed(b"x" * 100))  # no line break ever
    p = EventParser(max_event_bytes=1000)
    with pytest.raises(EventStreamError, match="MAX_EVENT_BYTES"):
        list(p.feed(b"data: x\n" * 200))  # many short lines, never a blank one
    p.restart()
    assert list(p.feed(b"data: ok\n\n")) == [Event("message", "ok", None)]


@given(st.lists(st.binary(max_size=300), max_size=30))
def test_any_bytes_end_in_events_or_a_polang_error(chunks: list[bytes]) -> None:
    p = EventParser(max_event_bytes=2000)
    try:
        for c in chunks:
            for e in p.feed(c):
                assert isinstance(e.data, str) and isinstance(e.name, str)
    except PolangError:
        pass
