"""Hostile input leaves the process as it found it (docs/security.md, "The promise").

Each attack below goes through the public API and must end in a ``PolangError`` or a
dropped token; afterwards the interpreter's recursion limit, the root logger and the
default SSL context factory are what they were before.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from polang import Engine
from polang.errors import PolangError
from polang.tokens import TokenInput

REPO = Path(__file__).resolve().parents[1]
STORE = REPO / "examples" / "stores" / "directory"
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
ROADMAP = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())
READ = 'Acme::Action::"read"'


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def deep_json(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})


def deep_token(engine: Engine) -> None:
    header = b64(b'{"alg":"RS256","typ":"JWT"}')
    payload = b64(deep_json(120_000).encode())
    result = engine.authorize_multi_issuer(
        [TokenInput("Acme::Access_token", f"{header}.{payload}.c2ln")], READ, ROADMAP
    )
    assert not result.decision


def deep_context(engine: Engine) -> None:
    context: object = 1
    for _ in range(100_000):
        context = [context]
    engine.authorize_unsigned(READ, ROADMAP, {"zz": context}, ALICE)


def deep_entity_attrs(engine: Engine) -> None:
    attrs: object = 1
    for _ in range(5_000):
        attrs = {"a": attrs}
    alice = dict(ALICE, attrs=attrs)
    engine.authorize_unsigned(READ, ROADMAP, {}, alice)


def misspelt_entity_key(engine: Engine) -> None:
    alice = {k if k != "parents" else "parnets": v for k, v in ALICE.items()}
    engine.authorize_unsigned(READ, ROADMAP, {}, alice)


def deep_policy(tmp: Path) -> None:
    store = tmp / "store"
    (store / "policies").mkdir(parents=True)
    (store / "metadata.json").write_text(
        json.dumps({"polang_version": "4.0", "policy_store": {"id": "deep", "name": "deep"}})
    )
    (store / "schema.polangschema").write_text((STORE / "schema.polangschema").read_text())
    chain = " + ".join(["1"] * 5_000)
    (store / "policies" / "p.polang").write_text(
        f'@id("p") permit (principal, action, resource) when {{ {chain} > 0 }};'
    )
    Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store)})


def deep_legacy_store(tmp: Path) -> None:
    path = tmp / "store.json"
    path.write_text("[" * 50_000 + "]" * 50_000)
    Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(path)})


ENGINE_ATTACKS: list[Callable[[Engine], None]] = [
    deep_token,
    deep_context,
    deep_entity_attrs,
    misspelt_entity_key,
]
STORE_ATTACKS: list[Callable[[Path], None]] = [deep_policy, deep_legacy_store]


def snapshot() -> tuple[object, ...]:
    root = logging.getLogger()
    return (
        sys.getrecursionlimit(),
        tuple(root.handlers),
        root.level,
        ssl._create_default_https_context,
    )


@pytest.mark.parametrize("attack", ENGINE_ATTACKS, ids=lambda f: f.__name__)
def test_request_attacks_end_in_the_family_and_change_nothing(
    engine: Engine, attack: Callable[[Engine], None]
) -> None:
    before = snapshot()
    try:
        attack(engine)
    except PolangError as e:
        assert len(str(e)) <= 4_100
    assert snapshot() == before
    # and the engine still decides
    assert engine.authorize_unsigned(READ, ROADMAP, {}, ALICE).decision is not None


@pytest.mark.parametrize("attack", STORE_ATTACKS, ids=lambda f: f.__name__)
def test_store_attacks_are_refused_and_change_nothing(
    tmp_path: Path, attack: Callable[[Path], None]
) -> None:
    before = snapshot()
    with pytest.raises(PolangError) as e:
        attack(tmp_path)
    assert len(str(e.value)) <= 4_100
    assert snapshot() == before
