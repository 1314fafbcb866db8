"""What a decision does besides deciding, with the decision logs off and on: the causes of
the throughput collapse of issue 28 (threads handing the interpreter to each other once
per decision) may not come back. A decision takes no lock that can make it wait (a
thread that waited for one owned it before it held the interpreter again, so the next
caller waited in turn), reads no randomness from the OS per request, and never waits for
a reader of the memory log or of the metrics. Speed itself is measured in
``benchmarks/bench_threads.py`` and ``benchmarks/bench_logs.py``, never here."""

from __future__ import annotations

import _thread
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polang import Engine

from .test_batch import engines  # noqa: F401  (the fixture: engines on shop stores)
from .test_engine import VIEW, item, user

DECISIONS = 2000


@pytest.fixture
def polang_logger_at_info() -> Iterator[None]:
    """The ``polang`` logger at INFO with a handler that keeps nothing, restored after."""
    logger = logging.getLogger("polang")
    level, propagate = logger.level, logger.propagate
    handler = logging.NullHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def calls_while(run: Callable[[], object]) -> dict[str, int]:
    """How often ``run`` acquired a ``threading.Lock`` and read ``os.urandom``."""
    counts = {"lock": 0, "urandom": 0}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        owner = getattr(arg, "__self__", None)
        if type(owner) is _thread.LockType and arg.__name__ == "acquire":
            counts["lock"] += 1
        elif getattr(arg, "__name__", "") == "urandom":
            counts["urandom"] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return counts


def decide_many(engine: Engine, n: int = DECISIONS) -> None:
    for k in range(n):
        engine.authorize_unsigned(VIEW, item(f"cup{k % 7}", price=0), None, user("alice"))


@pytest.mark.parametrize("log_type", ["off", "memory", "python"])
def test_a_decision_takes_no_lock_and_reads_no_os_randomness(
    engines: Callable[..., Engine],  # noqa: F811
    polang_logger_at_info: None,
    log_type: str,
) -> None:
    # a small memory log, so that it is full and evicting while measured
    engine = engines(ENGINE_LOG_TYPE=log_type, ENGINE_LOG_MAX_ITEMS=50, ENGINE_LOG_LEVEL="INFO")
    decide_many(engine, 200)  # warm: plans cached, the memory log full
    counts = calls_while(lambda: decide_many(engine))
    # amortised work only: a memory log trimmed every 64 entries past its size, metrics
    # folded every 1,024 samples (both with a lock that is never waited for), random id
    # tails drawn 1,024 at a time
    assert counts["lock"] <= DECISIONS // 50, counts
    assert counts["urandom"] <= DECISIONS // 500, counts
    if log_type == "memory":
        assert len(engine.get_log_ids()) == 50


def test_decisions_never_wait_for_a_reader_of_the_log_or_the_metrics(
    engines: Callable[..., Engine],  # noqa: F811
) -> None:
    engine = engines(ENGINE_LOG_TYPE="memory", ENGINE_LOG_MAX_ITEMS=100)
    memory = engine.logger.memory
    assert memory is not None
    decide_many(engine, 10)
    engine.pop_logs()
    done = threading.Event()

    def work() -> None:
        decide_many(engine, 3000)  # past the memory log's size and the metrics' fold
        done.set()

    # a reader holds both (as a slow pop_logs or flush_metrics would) the whole time
    with memory._lock, engine.logger.metrics._lock:
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        finished = done.wait(timeout=60)
    worker.join(timeout=60)
    assert finished, "a decision waited for the log's reader"
    ids = engine.get_log_ids()
    assert len(ids) == 100 and len(set(ids)) == 100  # the newest, trimmed on reading
    counters, _, timings = engine.logger.metrics.snapshot()
    assert counters["authorize_calls"] == 3010
    assert timings["decision_time_micro_sec"]["count"] == 3010


def test_decisions_from_threads_lose_no_entry_and_no_count(
    engines: Callable[..., Engine],  # noqa: F811
) -> None:
    engine = engines(ENGINE_LOG_TYPE="memory", ENGINE_LOG_MAX_ITEMS=0)
    results: list[list[str]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        for k in range(400):
            r = engine.authorize_unsigned(VIEW, item(f"cup{k}", price=0), None, user("alice"))
            results[i].append(r.request_id)
            if k % 100 == 0:
                engine.get_logs_by_tag("Decision")  # readers alongside the writers

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = engine.pop_logs()
    assert sorted(e["request_id"] for e in entries) == sorted(x for r in results for x in r)
    assert len({e["id"] for e in entries}) == 1600
    counters, _, _ = engine.logger.metrics.snapshot()
    assert counters["authorize_calls"] == 1600 == counters["allow"] + counters.get("deny", 0)
