"""A context given as a ``RecordValue`` (or none) is checked against the schema in full;
a clean answer is kept per store snapshot by the context's value (and the action and the
principal and resource types, when the check treats every uid of them alike), so a
service that passes the same few contexts checks each once. Every finding is still
raised on every call, and equal keys mean the language's equality (``1`` is not
``true``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import polang.engine.requests as engine_mod
from polang import Engine, RequestError
from polang.language.values import RecordValue, SetValue

from .test_engine import BUY, NO_NETWORK, VIEW, item, shop_files, user, write_store


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Engine]:
    store = write_store(tmp_path / "shop", shop_files())
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK})
    yield engine
    engine.close()


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The contexts the engine ran the full schema check on, in order."""
    seen: list[Any] = []
    real: Callable[..., Any] = engine_mod.validate_request

    def counting(principal: Any, action: Any, resource: Any, context: Any, schema: Any) -> Any:
        seen.append(context)
        return real(principal, action, resource, context, schema)

    monkeypatch.setattr(engine_mod, "validate_request", counting)
    return seen


def test_a_clean_context_value_is_checked_once(shop: Engine, checks: list[Any]) -> None:
    first = shop.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": 2}), user("bob"))
    again = shop.authorize_unsigned(BUY, item("pen"), RecordValue({"quantity": 2}), user("eve"))
    assert len(checks) == 1  # an equal value, another object: kept
    assert first.decision == again.decision
    shop.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": 3}), user("bob"))
    shop.authorize_unsigned(VIEW, item("cup"), RecordValue({"quantity": 2}), user("bob"))
    assert len(checks) == 3  # another value, another action: checked
    for _ in range(3):
        shop.authorize_unsigned(VIEW, item("cup"), None, user("bob"))  # no context at all
    shop.authorize_unsigned(VIEW, item("cup"), None, None)  # no principal: another key
    assert len(checks) == 5


def test_findings_are_raised_on_every_call(shop: Engine, checks: list[Any]) -> None:
    shop.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": 1}), user("bob"))
    for bad in (
        RecordValue({"quantity": True}),  # == 1 in Python, not in the language
        RecordValue({"quantity": "1"}),
        RecordValue({"quantity": 1, "coupon": "x"}),
        RecordValue({"quantity": SetValue([1])}),
    ):
        for _ in range(2):
            with pytest.raises(RequestError, match="does not match the schema"):
                shop.authorize_unsigned(BUY, item("cup"), bad, user("bob"))
    assert len(checks) == 1 + 8


def test_a_role_principal_is_kept_by_its_type_too(shop: Engine, checks: list[Any]) -> None:
    role = {"uid": {"type": "Shop::Role", "id": "staff"}, "attrs": {}, "parents": []}
    ctx = RecordValue({"quantity": 1})
    shop.authorize_unsigned(BUY, item("cup"), ctx, user("bob"))
    shop.authorize_unsigned(BUY, item("cup"), ctx, role)
    shop.authorize_unsigned(BUY, item("cup"), ctx, role)
    assert len(checks) == 2


def test_the_kept_answers_are_bounded(
    shop: Engine, checks: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_mod, "CLEAN_CONTEXTS_MAX", 3)
    for q in range(10):
        shop.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": q}), user("bob"))
        assert len(shop._snap.clean_contexts) <= 3
    assert len(checks) == 10
    shop.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": 9}), user("bob"))
    assert len(checks) == 10  # the newest are kept


def test_without_strict_validation_nothing_is_checked_or_kept(
    tmp_path: Path, checks: list[Any]
) -> None:
    store = write_store(tmp_path / "loose", shop_files())
    props = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK}
    with Engine({**props, "ENGINE_STRICT_SCHEMA_VALIDATION": False}) as loose:
        loose.authorize_unsigned(BUY, item("cup"), RecordValue({"quantity": "x"}), user("bob"))
        assert checks == [] and loose._snap.clean_contexts == {}
