"""Context data (``push_data`` and friends): what every decision sees as ``context.data``.

A real engine over the Shop store with ``data`` declared in the context of ``view`` and
``buy`` (not ``audit``); hostile keys, values and ttls; the limits; expiry; threads.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from polang import DataError, Engine, RequestError, TokenInput
from polang.engine.data import MAX_DATA_KEY_CHARS, ContextData, DataLimits
from polang.jsonlimits import MAX_JSON_DEPTH
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue

from .test_engine import (
    AUDIT,
    BUY,
    NO_NETWORK,
    SHOP_POLICIES,
    SHOP_SCHEMA,
    VIEW,
    item,
    shop_files,
    unverified_jwt,
    write_store,
)
from .test_engine import user as shop_user

KEYS = [f"k{i}" for i in range(60)]
DATA_TYPE = (
    'type DataContext = { "plan"?: String, "blocked"?: Set<String>, '
    '"limits"?: { "max_price": Long }, ' + ", ".join(f'"{k}"?: String' for k in KEYS) + " };\n"
)
DATA_SCHEMA = SHOP_SCHEMA.replace(
    "namespace Shop {\n", "namespace Shop {\n    " + DATA_TYPE, 1
).replace(
    'context: { "quantity"?: Long, "tokens"?: TokensContext },',
    'context: { "quantity"?: Long, "tokens"?: TokensContext, "data"?: DataContext },',
    1,
)
DATA_POLICIES = (
    SHOP_POLICIES
    + """
@id("premium-view")
permit (principal, action == Shop::Action::"view", resource is Shop::Item)
when { context has data.plan && context.data.plan == "premium" };

@id("blocked-users")
forbid (principal is Shop::User, action in [Shop::Action::"view", Shop::Action::"buy"], resource)
when { context has data.blocked && context.data.blocked.contains(principal.name) };

@id("cheap-enough")
permit (principal, action == Shop::Action::"buy", resource is Shop::Item)
when { context has data.limits && resource.price <= context.data.limits.max_price };
"""
)
BOB = shop_user("bob")
ITEM = item("lamp", owner="carol", price=5)


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    made: list[Engine] = []

    def make(schema: str = DATA_SCHEMA, **props: Any) -> Engine:
        policies = DATA_POLICIES if schema is DATA_SCHEMA else SHOP_POLICIES
        root = write_store(tmp_path / f"s{len(made)}", shop_files(schema=schema, policies=policies))
        e = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root), **NO_NETWORK, **props})
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def view(e: Engine, context: Any = None) -> bool:
    return e.authorize_unsigned(VIEW, ITEM, context, principal=BOB).decision


def test_pushed_data_reaches_every_decision_until_removed(engine: Callable[..., Engine]) -> None:
    e = engine()
    assert view(e) is False
    e.push_data("plan", "premium")
    assert view(e) is True
    assert view(e, {"quantity": 1}) is True  # the caller's context and the data, merged
    assert view(e, RecordValue({"quantity": 1})) is True  # a context given as a value too
    e.push_data("plan", "basic")  # replaced
    assert view(e) is False
    e.push_data("plan", "premium")
    e.push_data("blocked", ["Bob", "Eve"])
    assert view(e) is False  # the forbid reads the set
    assert e.remove_data("blocked") is True
    assert e.remove_data("blocked") is False
    assert view(e) is True
    e.clear_data()
    assert view(e) is False
    assert e.list_data() == []


def test_every_kind_of_decision_sees_it(engine: Callable[..., Engine]) -> None:
    e = engine()
    e.push_data("limits", {"max_price": 10})
    e.push_data("plan", "premium")
    # multi-issuer (unsigned tokens: signature validation is off here)
    token = unverified_jwt()
    r = e.authorize_multi_issuer([TokenInput("Shop::Access_token", token)], BUY, ITEM)
    assert r.decision and r.response.diagnostics.reason == ["cheap-enough"]
    # batches, both kinds
    out = e.authorize_unsigned_batch(
        [{"action": VIEW, "resource": ITEM}, {"action": BUY, "resource": item("gold", price=50)}],
        principal=BOB,
    )
    assert [x.decision for x in out] == [True, False]  # type: ignore[union-attr]
    out = e.authorize_multi_issuer_batch(
        [{"action": BUY, "resource": ITEM}], tokens=[TokenInput("Shop::Access_token", token)]
    )
    assert out[0].decision  # type: ignore[union-attr]
    # an explanation replays the decision with the same context
    assert e.explain(VIEW, ITEM, None, BOB).decision == "allow"
    # an action whose context declares no `data` decides as before (nothing added)
    r = e.authorize_unsigned(AUDIT, item("lamp", owner="alice"), None, principal=BOB)
    assert r.decision is False and not r.response.diagnostics.errors


def test_reads_give_copies_and_entries_are_json_ready(engine: Callable[..., Engine]) -> None:
    e = engine()
    e.push_data("blocked", ("Eve",), ttl=timedelta(minutes=5))
    got = e.get_data("blocked")
    assert got == ["Eve"]
    got.append("Bob")  # the caller's copy: the engine's entry is untouched
    assert e.get_data("blocked") == ["Eve"] and view(e) is False
    assert e.get_data("plan") is None
    entry = e.get_data_entry("blocked")
    assert entry is not None and entry.expires_at is not None
    assert 299 < entry.expires_at - entry.created_at <= 300
    listed = [x.to_dict() for x in e.list_data()]
    assert json.loads(json.dumps(listed)) == listed
    assert listed[0]["key"] == "blocked" and listed[0]["size"] == len('["Eve"]')
    assert listed[0]["expires_at"].endswith("Z")


def test_a_caller_cannot_give_data_beside_pushed_data(engine: Callable[..., Engine]) -> None:
    e = engine()
    assert view(e, {"data": {"plan": "premium"}}) is True  # nothing pushed: as given
    e.push_data("plan", "basic")
    with pytest.raises(RequestError, match="filled from the data pushed with push_data"):
        view(e, {"data": {"plan": "premium"}})
    with pytest.raises(RequestError, match="filled from the data pushed with push_data"):
        view(e, RecordValue({"data": RecordValue({"plan": "premium"})}))


def test_a_schema_without_data_is_refused_at_push(engine: Callable[..., Engine]) -> None:
    e = engine(schema=SHOP_SCHEMA)
    with pytest.raises(DataError, match="no action's context in the schema declares `data`"):
        e.push_data("plan", "premium")
    assert e.list_data() == []


def test_undeclared_keys_and_mistyped_values_are_refused_at_push(
    engine: Callable[..., Engine],
) -> None:
    e = engine()
    with pytest.raises(DataError, match="did you mean 'plan'"):
        e.push_data("plam", "premium")
    with pytest.raises(DataError, match=r"\$\.context\.data\.plan.*String"):
        e.push_data("plan", 3)
    with pytest.raises(DataError, match=r"max_price"):
        e.push_data("limits", {"max_price": "ten"})
    with pytest.raises(DataError, match=r"max_pryce"):
        e.push_data("limits", {"max_pryce": 10})
    assert e.list_data() == []


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (3, "expected a string, got int"),
        (b"plan", "expected a string, got bytes"),
        (None, "expected a string, got NoneType"),
        ("", "the key is empty"),
        ("p" * (MAX_DATA_KEY_CHARS + 1), "MAX_DATA_KEY_CHARS"),
        ("plan\x1b[2J", "control, bidi or lone surrogate"),
        ("plan\u202e", "control, bidi or lone surrogate"),
        ("plan\ud800", "control, bidi or lone surrogate"),
    ],
)
def test_hostile_keys(engine: Callable[..., Engine], key: Any, message: str) -> None:
    e = engine()
    for call in (
        lambda: e.push_data(key, "x"),
        lambda: e.get_data(key),
        lambda: e.remove_data(key),
        lambda: e.get_data_entry(key),
    ):
        with pytest.raises(DataError, match=message):
            call()


class Opaque:
    pass


def nested(depth: int) -> Any:
    v: Any = "x"
    for _ in range(depth):
        v = [v]
    return v


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (nested(MAX_JSON_DEPTH + 50), "MAX_JSON_DEPTH"),
        ({"Eve"}, "a set is no JSON value"),
        (Opaque(), "a Opaque is no JSON value"),
        ([math.nan], "nan"),
        ([math.inf], "inf"),
        ({1: "x"}, "object key is int"),
        (["\ud800"], "not JSON-ready"),
        (None, "use remove_data"),
        (b"Eve", "a bytes is no JSON value"),
    ],
)
def test_hostile_values(engine: Callable[..., Engine], value: Any, message: str) -> None:
    e = engine()
    with pytest.raises(DataError, match=message):
        e.push_data("blocked", value)
    assert e.list_data() == []


def test_a_deep_value_is_refused_without_recursion(engine: Callable[..., Engine]) -> None:
    e = engine()
    with pytest.raises(DataError, match="MAX_JSON_DEPTH"):
        e.push_data("blocked", nested(100_000))  # json.dumps alone would raise RecursionError


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        (-1, "more than 0 seconds"),
        (0, "more than 0 seconds"),
        (math.nan, "more than 0 seconds"),
        (math.inf, "more than 0 seconds"),
        ("60", "got str"),
        (True, "got bool"),
        (7200, "ENGINE_DATA_STORE_MAX_TTL"),
        (timedelta(hours=2), "ENGINE_DATA_STORE_MAX_TTL"),
    ],
)
def test_hostile_ttls(engine: Callable[..., Engine], ttl: Any, message: str) -> None:
    e = engine()
    with pytest.raises(DataError, match=message):
        e.push_data("plan", "premium", ttl=ttl)


def test_the_size_and_entry_limits(engine: Callable[..., Engine]) -> None:
    e = engine(ENGINE_DATA_STORE_MAX_ENTRIES=2, ENGINE_DATA_STORE_MAX_ENTRY_SIZE=100)
    with pytest.raises(DataError, match=r"ENGINE_DATA_STORE_MAX_ENTRY_SIZE \(100\)"):
        e.push_data("plan", "p" * 200)
    e.push_data("plan", "é" * 49)  # 98 bytes of UTF-8 with its quotes: fits
    with pytest.raises(DataError, match="ENGINE_DATA_STORE_MAX_ENTRY_SIZE"):
        e.push_data("plan", "é" * 50)  # 102 bytes: counted in bytes, not characters
    e.push_data("k1", "a")
    with pytest.raises(DataError, match=r"ENGINE_DATA_STORE_MAX_ENTRIES \(2\)"):
        e.push_data("k2", "b")
    e.push_data("k1", "c")  # replacing an entry at the limit is fine
    assert e.get_data("k1") == "c"


def test_entries_expire(engine: Callable[..., Engine]) -> None:
    e = engine(ENGINE_DATA_STORE_DEFAULT_TTL="0.05")
    e.push_data("plan", "premium")  # the default ttl
    e.push_data("k1", "stays", ttl=60)
    assert view(e) is True
    time.sleep(0.1)
    e.push_data("k2", "new")  # a write that finds expired entries purges them first
    assert view(e) is False
    assert e.get_data("plan") is None
    assert [x.key for x in e.list_data()] == ["k1", "k2"]
    assert e.health()["data"]["entries"] == 2


def test_a_required_data_record_is_filled_by_pushed_data(engine: Callable[..., Engine]) -> None:
    schema = DATA_SCHEMA.replace('"data"?: DataContext', '"data": { "plan": String }')
    e = engine(schema=schema)
    with pytest.raises(RequestError, match="data"):
        view(e)  # nothing pushed: the required attribute is missing, as before
    e.push_data("plan", "basic")
    assert view(e) is False  # decided, with context.data filled
    e.clear_data()
    with pytest.raises(RequestError, match="data"):
        view(e)


def test_a_new_schema_that_refuses_an_entry_is_reported_not_ignored() -> None:
    old = parse_schema(DATA_SCHEMA)
    new = parse_schema(DATA_SCHEMA.replace('"plan"?: String', '"plan"?: Long'))
    data = ContextData(DataLimits())
    data.push("plan", "premium", None, old)
    view_uid = EntityUID("Shop::Action", "view")
    record, _rest = data.record_for(old, view_uid) or (None, None)
    assert record is not None and record.fields["plan"] == "premium"
    with pytest.raises(RequestError, match="'plan' pushed with push_data does not fit"):
        data.record_for(new, view_uid)
    assert data.unfit(new) and "'plan'" in data.unfit(new)[0]
    assert data.record_for(new, EntityUID("Shop::Action", "audit")) is None


def test_threads_push_remove_and_decide_at_once(engine: Callable[..., Engine]) -> None:
    e = engine(ENGINE_DATA_STORE_MAX_ENTRIES=40)
    errors: list[BaseException] = []
    decisions: list[bool] = []
    accepted: list[str] = []
    refused: list[str] = []
    stop = threading.Event()
    start = threading.Barrier(9)

    def writer(n: int) -> None:
        rnd = random.Random(n)
        start.wait()
        for i in range(300):
            try:
                if i % 3 == 0:
                    e.push_data("plan", rnd.choice(["premium", "basic"]))
                elif i % 3 == 1:
                    e.push_data("blocked", rnd.sample(["Bob", "Eve", "Ann"], k=rnd.randint(0, 3)))
                else:
                    e.remove_data(rnd.choice(["blocked", "plan"]))
            except DataError as x:  # the fillers may have reached the limit: refused whole
                if "ENGINE_DATA_STORE_MAX_ENTRIES" not in str(x):
                    errors.append(x)
            except BaseException as x:
                errors.append(x)

    def filler(n: int) -> None:
        start.wait()
        for k in KEYS[n::4]:
            try:
                e.push_data(k, "v")
                accepted.append(k)
            except DataError as x:
                assert "ENGINE_DATA_STORE_MAX_ENTRIES" in str(x)
                refused.append(k)

    def decider() -> None:
        start.wait()
        while not stop.is_set():
            try:
                decisions.append(view(e))
            except BaseException as x:
                errors.append(x)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    threads += [threading.Thread(target=filler, args=(n,)) for n in range(4)]
    deciders = [threading.Thread(target=decider) for _ in range(3)]
    for t in threads + deciders:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    for t in deciders:
        t.join(60)
    assert errors == []
    assert decisions and set(decisions) <= {True, False}
    # the limit held under contention: never more than 40 entries, every key accounted for
    keys = {x.key for x in e.list_data()}
    assert len(keys) <= 40 and len(accepted) + len(refused) == len(KEYS)
    assert set(accepted) <= keys
    # the last state decides: the data a decision sees is the data the table holds
    plan, blocked = e.get_data("plan"), e.get_data("blocked") or []
    assert view(e) is (plan == "premium" and "Bob" not in blocked)
