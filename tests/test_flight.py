"""Single flight: waiters of both kinds are woken once; deferral is per context."""

from __future__ import annotations

import asyncio
import threading

import pytest

from polang._flight import FetchPending, Flight, deferred, deferring
from polang.errors import PolangError


def test_callbacks_run_once_and_late_ones_at_once() -> None:
    flight, calls = Flight(), []
    flight.add_done_callback(lambda: calls.append("early"))
    assert not flight.done and not flight.wait(0.01)
    flight.finish()
    assert flight.done and flight.wait(0)
    flight.add_done_callback(lambda: calls.append("late"))
    assert calls == ["early", "late"]


def test_a_thread_waits_for_another_threads_fetch() -> None:
    flight = Flight()
    threading.Timer(0.05, flight.finish).start()
    assert flight.wait(5)


def test_deferral_is_per_task() -> None:
    async def inside() -> bool:
        await asyncio.sleep(0)
        return deferring()

    async def main() -> tuple[bool, bool]:
        with deferred():
            other = asyncio.create_task(asyncio.sleep(0, result=deferring()))
            task = asyncio.create_task(inside())
            mine = deferring()
        return mine, await task and await other

    mine, copied = asyncio.run(main())
    assert mine is True and copied is True  # a task copies its creator's context
    assert deferring() is False


def test_pending_is_not_a_polang_error() -> None:
    """No handler of request errors may swallow it on its way out of a decision."""
    assert not issubclass(FetchPending, PolangError)
    with pytest.raises(FetchPending):
        raise FetchPending(Flight(), None)
