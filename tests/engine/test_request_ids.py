"""Request ids written when read: with nothing logging the decision, a result keeps its
UUIDv7 as the bits drawn at decision time (millisecond, counter, random tail) and writes
the text on first read. Whatever the order ids are read in, they are unique and sort in
decision order, among themselves and with every other id of the process; a result read
in a forked child has the id its parent reads."""

from __future__ import annotations

import copy
import os
import pickle
import random
import threading
import uuid
from collections.abc import Callable

import pytest

from polang import AuthorizeResult, Engine, TokenInput
from polang.logs import uuid7

from .test_batch import engines  # noqa: F401  (the fixture: engines on shop stores)
from .test_engine import (
    BUY,
    VIEW,
    item,
    unverified_jwt,
    user,
)


@pytest.fixture
def quiet(engines: Callable[..., Engine]) -> Engine:  # noqa: F811
    return engines(ENGINE_LOG_TYPE="off")


def decide(engine: Engine, n: int = 1) -> AuthorizeResult:
    return engine.authorize_unsigned(VIEW, item(f"cup{n}", price=0), None, user("alice"))


def is_uuid7(text: str) -> bool:
    u = uuid.UUID(text)
    return str(u) == text and u.version == 7 and u.variant == uuid.RFC_4122


def test_an_unread_id_is_text_only_once_read(quiet: Engine) -> None:
    r = decide(quiet)
    assert type(r._request_id) is int  # drawn, not written yet
    text = r.request_id
    assert is_uuid7(text) and r.request_id is text  # written once, then kept
    assert type(r._request_id) is str


def test_ids_read_in_any_order_sort_in_decision_order(quiet: Engine) -> None:
    """Single calls, batches and the process's other ids (``uuid7()``) interleaved; the
    results' ids read backwards, shuffled, or never before a pickle or a copy."""
    made: list[AuthorizeResult | str] = []
    for k in range(120):
        if k % 7 == 3:
            made.append(uuid7())  # drawn as text at once: between the decisions around it
        elif k % 11 == 5:
            batch = quiet.authorize_unsigned_batch(
                [{"action": VIEW, "resource": item(f"b{k}{j}", price=0)} for j in range(4)],
                principal=user("alice"),
            )
            made.extend(r for r in batch if isinstance(r, AuthorizeResult))
        else:
            made.append(decide(quiet, k))
    results = [m for m in made if isinstance(m, AuthorizeResult)]
    assert all(type(r._request_id) is int for r in results)
    order = list(range(len(results)))
    random.Random(5).shuffle(order)
    for i in order[: len(order) // 3]:
        _ = results[i].request_id  # a third read shuffled
    for r in reversed(results[::2]):
        _ = r.to_dict()["request_id"]  # some through to_dict, backwards
    texts = [m if isinstance(m, str) else m.request_id for m in made]
    assert len(set(texts)) == len(texts)
    assert texts == sorted(texts)
    assert all(is_uuid7(t) for t in texts)


def test_multi_issuer_ids_are_written_when_read_in_decision_order(quiet: Engine) -> None:
    """The multi-issuer call and both batches keep the id's bits too (and their dropped
    tokens as before)."""
    tokens = [
        TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"])),
        TokenInput("Shop::Access_token", unverified_jwt(jti="old", exp=1000)),
    ]
    made: list[AuthorizeResult] = []
    for k in range(6):
        made.append(quiet.authorize_multi_issuer(tokens, BUY, item(f"m{k}")))
        batch = quiet.authorize_multi_issuer_batch(
            [{"action": BUY, "resource": item(f"n{k}{j}")} for j in range(3)], tokens=tokens
        )
        made.extend(r for r in batch if isinstance(r, AuthorizeResult))
        made.append(decide(quiet, k))
    assert len(made) == 30 and all(type(r._request_id) is int for r in made)
    assert all(r.dropped_tokens for r in made[:1])
    texts = [r.request_id for r in reversed(made)][::-1]
    assert texts == sorted(texts) and len(set(texts)) == 30
    assert all(is_uuid7(t) for t in texts)


def test_an_unread_id_pickles_copies_compares_and_shows_as_its_text(quiet: Engine) -> None:
    a, b = decide(quiet), decide(quiet)
    pickled = pickle.loads(pickle.dumps(a))  # a unread: pickling reads it
    assert pickled == a and pickled.request_id == a.request_id
    assert copy.deepcopy(b) == b
    c = decide(quiet)
    assert c.request_id in repr(c)
    d = decide(quiet)
    assert d == AuthorizeResult(d.decision, d.request_id, d.response)
    assert d != a  # same decision, another id


def test_logged_results_carry_the_logged_id(engines: Callable[..., Engine]) -> None:  # noqa: F811
    logged = engines(ENGINE_LOG_TYPE="memory")
    r = decide(logged)
    assert type(r._request_id) is int  # the memory log writes the text when read, too
    (entry,) = logged.get_logs_by_request_id(r.request_id)
    assert entry["decision"] == "ALLOW" and entry["request_id"] == r.request_id
    assert logged.get_log_by_id(entry["id"]) == entry
    assert entry["id"] in logged.get_log_ids()


def test_ids_from_threads_are_unique_and_ordered_per_thread(quiet: Engine) -> None:
    per_thread: list[list[AuthorizeResult]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        per_thread[i].extend(decide(quiet, n) for n in range(150))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_ids = []
    for results in per_thread:
        ids = [r.request_id for r in reversed(results)][::-1]  # read backwards
        assert ids == sorted(ids)
        all_ids.extend(ids)
    assert len(set(all_ids)) == 600


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_result_read_after_a_fork_has_one_id_and_new_ids_differ(quiet: Engine) -> None:
    """The id's bits are drawn at decision time: the child reads the id the parent reads.
    Decisions after the fork draw fresh random bits in the child."""
    r = decide(quiet)
    assert type(r._request_id) is int
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the old result's id and a new one's, then exit at once
        try:
            os.close(read)
            os.write(write, f"{r.request_id} {decide(quiet).request_id}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child_old, child_new = f.read().split()
    os.waitpid(pid, 0)
    parent_new = decide(quiet).request_id
    assert child_old == r.request_id
    assert child_new != parent_new
    assert r.request_id < child_new and r.request_id < parent_new
