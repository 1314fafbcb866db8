"""Batches (list views): ``authorize_unsigned_batch`` and ``authorize_multi_issuer_batch``.

A batch must answer exactly what the single calls answer, request by request (decision,
reasons in order, errors with their messages), while sharing what its requests share; a
request that fails is reported in its own slot with the error its single call raises.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import (
    AuthorizeResult,
    BatchItemError,
    Engine,
    PolangError,
    RequestError,
    TokenError,
    TokenInput,
    ValidationError,
)
from polang.language.values import EntityUID

from .test_engine import (
    AUDIT,
    BUY,
    NO_NETWORK,
    VIEW,
    item,
    role,
    shop_files,
    unverified_jwt,
    user,
    write_store,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(files: dict[str, str] | None = None, **props: Any) -> Engine:
        store = write_store(tmp_path / f"store{len(made)}", files or shop_files())
        engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK, **props})
        made.append(engine)
        return engine

    yield make
    for e in made:
        e.close()


@pytest.fixture
def shop(engines: Callable[..., Engine]) -> Engine:
    return engines(ENGINE_LOG_TYPE="memory")


def full(r: AuthorizeResult) -> dict[str, Any]:
    """Everything of a result but its request id."""
    d = r.to_dict()
    del d["request_id"]
    return d


def single(engine: Engine, request: dict[str, Any], principal: Any = None) -> Any:
    """The single call's result, or the exception it raises."""
    args = dict(request)
    if principal is not None:
        args["principal"] = principal
    try:
        return full(engine.authorize_unsigned(**args))
    except PolangError as e:
        return e


def same_as_single(got: Any, want: Any) -> None:
    if isinstance(want, PolangError):
        assert isinstance(got, BatchItemError), got
        assert type(got.error) is type(want) and str(got.error) == str(want)
    else:
        assert isinstance(got, AuthorizeResult), got
        assert full(got) == want


# ---------------------------------------------------------------- unsigned

ALICE = user("alice", level=7, parents=("staff",))

REQUESTS: list[dict[str, Any]] = [
    {"action": VIEW, "resource": item("cup", owner="alice", price=0)},
    {"action": VIEW, "resource": item("pen", owner="bob")},
    {"action": VIEW, "resource": item("ink", owner="alice")},
    {"action": BUY, "resource": item("pen", owner="bob"), "context": {"quantity": 99}},
    {"action": BUY, "resource": item("pen", owner="bob"), "context": {"quantity": 2}},
    {"action": AUDIT, "resource": item("ledger", owner="alice")},
    {"action": AUDIT, "resource": item("plan", owner="bob")},
    {"action": VIEW, "resource": 'Shop::User::"alice"'},  # not an Item for view: an error
    {"action": 'Shop::Action::"fly"', "resource": item("cup")},
    {"action": VIEW, "resource": 3},
    {"action": BUY, "resource": item("cup"), "context": {"quantity": "many"}},
]


@pytest.mark.parametrize(
    "principal", [ALICE, 'Shop::User::"alice"', role("auditor"), user("bob", level=5)]
)
def test_a_shared_principal_answers_as_single_calls(shop: Engine, principal: Any) -> None:
    batch = shop.authorize_unsigned_batch(REQUESTS, principal=principal)
    assert len(batch) == len(REQUESTS)
    for got, request in zip(batch, REQUESTS, strict=True):
        same_as_single(got, single(shop, request, principal))
    assert any(isinstance(r, AuthorizeResult) and r.decision for r in batch)
    assert any(isinstance(r, BatchItemError) for r in batch)


def test_requests_with_their_own_principals_answer_as_single_calls(shop: Engine) -> None:
    bob = user("bob", level=5)
    requests = [
        {**r, "principal": p}
        for r in REQUESTS
        for p in (ALICE, bob, None, 'Shop::Role::"auditor"', ALICE)  # ALICE twice: shared
    ]
    batch = shop.authorize_unsigned_batch(requests)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, single(shop, request))


def test_the_principal_wins_over_a_resource_of_the_same_uid(
    engines: Callable[..., Engine],
) -> None:
    """The single call lays the principal over the resource; a batch must too."""
    files = shop_files()
    files["schema.polangschema"] = files["schema.polangschema"].replace(
        'action "audit"',
        'action "inspect" appliesTo { principal: [User], resource: [User] };\n    action "audit"',
    )
    files["policies/shop.polang"] += (
        '\n@id("inspect-seniors")\npermit (principal, action == Shop::Action::"inspect", resource)'
        " when { resource.level >= 5 };\n"
    )
    engine = engines(files)
    me = user("zed", level=9)
    as_resource = {"uid": me["uid"], "attrs": {"name": "Other", "level": 1}, "parents": []}
    other = user("amy", level=1)
    requests = [
        {"action": 'Shop::Action::"inspect"', "resource": as_resource},
        {"action": 'Shop::Action::"inspect"', "resource": other},
    ]
    batch = engine.authorize_unsigned_batch(requests, principal=me)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, single(engine, request, me))
    assert [r.decision for r in batch] == [True, False]


def test_item_errors_are_in_their_slots_and_the_rest_is_decided(shop: Engine) -> None:
    requests: list[Any] = [
        {"action": VIEW, "resource": item("cup", price=0)},
        {"action": VIEW},
        {"action": VIEW, "resource": item("cup"), "colour": "red"},
        "not a request",
        {"action": VIEW, "resource": item("cup"), "principal": ALICE},
        {"action": 7, "resource": item("cup")},
        {"action": VIEW, "resource": item("cup", price=0)},
    ]
    batch = shop.authorize_unsigned_batch(requests, principal=ALICE)
    assert isinstance(batch[0], AuthorizeResult) and batch[0].decision
    assert isinstance(batch[6], AuthorizeResult) and batch[6].decision
    errors = batch[1:6]
    assert all(isinstance(e, BatchItemError) for e in errors)
    messages = [e.message for e in errors if isinstance(e, BatchItemError)]
    assert messages[0].startswith("requests[1]: resource: missing")
    assert "unknown argument 'colour'" in messages[1]
    assert "expected a mapping" in messages[2] and "str" in messages[2]
    assert "principal: given for the whole batch" in messages[3]
    assert messages[4].startswith("requests[5]: action: expected a string")
    for e in errors:
        assert isinstance(e, BatchItemError)
        assert e.decision is False  # fail closed for code that reads only .decision
        assert e.kind == "RequestError"
        assert e.to_dict() == {
            "decision": False,
            "error": {"index": e.index, "kind": "RequestError", "message": str(e.error)},
        }
    assert [e.index for e in errors if isinstance(e, BatchItemError)] == [1, 2, 3, 4, 5]


def test_strict_validation_errors_match_single_calls(shop: Engine) -> None:
    requests = [
        {"action": AUDIT, "resource": item("cup"), "context": {"quantity": 1}},
        {"action": VIEW, "resource": role("staff")},
        {"action": 'Shop::Action::"fly"', "resource": item("cup")},
    ]
    for principal in (ALICE, None):
        batch = shop.authorize_unsigned_batch(requests, principal=principal)
        for got, request in zip(batch, requests, strict=True):
            want = single(shop, request, principal)
            assert isinstance(want, RequestError)
            same_as_single(got, want)


def test_batch_level_problems_raise(shop: Engine) -> None:
    with pytest.raises(RequestError, match="principal"):
        shop.authorize_unsigned_batch([{"action": VIEW, "resource": item("cup")}], principal=3)
    with pytest.raises(RequestError, match="requests: expected a list"):
        shop.authorize_unsigned_batch({"action": VIEW, "resource": item("cup")})  # type: ignore[arg-type]
    with pytest.raises(RequestError, match="requests: expected a list"):
        shop.authorize_unsigned_batch("requests")  # type: ignore[arg-type]
    assert shop.authorize_unsigned_batch([]) == []
    # any iterable of requests will do
    gen = ({"action": VIEW, "resource": item(f"i{k}", price=0)} for k in range(3))
    assert [r.decision for r in shop.authorize_unsigned_batch(gen)] == [True] * 3


def test_request_ids_are_uuidv7_in_order_and_logged(shop: Engine) -> None:
    shop.pop_logs()
    requests = [{"action": VIEW, "resource": item(f"i{k}", price=k % 2)} for k in range(40)]
    requests.insert(5, {"action": VIEW, "resource": 3})
    batch = shop.authorize_unsigned_batch(requests, principal=ALICE)
    ids = [r.request_id for r in batch if isinstance(r, AuthorizeResult)]
    assert len(ids) == 40 and len(set(ids)) == 40 and ids == sorted(ids)
    for rid in ids:
        u = uuid.UUID(rid)
        assert u.version == 7 and u.variant == uuid.RFC_4122
    decisions = [e for e in shop.pop_logs() if e["log_kind"] == "Decision"]
    assert [e["request_id"] for e in decisions] == ids
    assert [e["decision"] for e in decisions] == [
        "ALLOW" if r.decision else "DENY" for r in batch if isinstance(r, AuthorizeResult)
    ]
    assert {e["principal"] for e in decisions} == {'Shop::User::"alice"'}
    later = shop.authorize_unsigned(VIEW, item("cup"), principal=ALICE)
    assert later.request_id > ids[-1]


def test_without_strict_validation(engines: Callable[..., Engine]) -> None:
    lax = engines(ENGINE_STRICT_SCHEMA_VALIDATION="disabled")
    requests = [{"action": VIEW, "resource": role("staff")}, *REQUESTS]
    batch = lax.authorize_unsigned_batch(requests, principal=ALICE)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, single(lax, request, ALICE))


# ---------------------------------------------------------------- multi-issuer


def multi_single(engine: Engine, request: dict[str, Any]) -> Any:
    try:
        return full(engine.authorize_multi_issuer(**request))
    except PolangError as e:
        return e


def test_multi_issuer_batch_over_shared_tokens(shop: Engine) -> None:
    good = [TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))]
    requests: list[dict[str, Any]] = [
        {"action": BUY, "resource": item("cup")},
        {"action": BUY, "resource": item("cup"), "context": {"quantity": 20}},
        {"action": VIEW, "resource": item("cup", price=0)},
        {"action": VIEW, "resource": item("pen")},
        {"action": BUY, "resource": item("cup"), "context": {"tokens": {}}},
        {"action": BUY, "resource": 5},
    ]
    batch = shop.authorize_multi_issuer_batch(requests, tokens=good)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, multi_single(shop, {**request, "tokens": good}))
    assert [r.decision for r in batch] == [True, False, True, False, False, False]
    assert isinstance(batch[4], BatchItemError) and "reserved" in batch[4].message
    first = batch[0]
    assert isinstance(first, AuthorizeResult) and first.dropped_tokens == []


def test_a_multi_issuer_list_views_shared_context_never_skips_a_request_that_fails(
    shop: Engine,
) -> None:
    """Requests of one action, context object, resource type and token set reuse the first
    one's context (with the tokens) and clean schema check; a resource of another type,
    a bad attribute or another context still gets its own checks, as its single call."""
    good = [TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))]
    ctx: dict[str, Any] = {"quantity": 1}
    requests: list[dict[str, Any]] = [
        {"action": BUY, "resource": item("cup"), "context": ctx},
        {"action": BUY, "resource": item("pen", price=0), "context": ctx},
        {"action": BUY, "resource": user("bob"), "context": ctx},  # not an Item for buy
        {"action": BUY, "resource": item("ink"), "context": ctx},
        {"action": BUY, "resource": item("jar", price="5"), "context": ctx},  # bad attribute
        {"action": BUY, "resource": item("mug"), "context": {"quantity": "x"}},  # bad context
        {"action": BUY, "resource": item("mug"), "context": {"quantity": 20}},
        {"action": VIEW, "resource": item("lid", price=0), "context": ctx},
        {"action": BUY, "resource": 'Shop::Item::"nope"', "context": ctx},  # not stored
        {"action": BUY, "resource": item("box"), "context": ctx},
    ]
    batch = shop.authorize_multi_issuer_batch(requests, tokens=good)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, multi_single(shop, {**request, "tokens": good}))
    assert [isinstance(r, BatchItemError) for r in batch] == [
        False,
        False,
        True,
        False,
        True,
        True,
        False,
        False,
        True,
        False,
    ]
    assert [r.decision for r in batch] == [True, True, False, True] + [False] * 3 + [
        True,
        False,
        True,
    ]


def test_multi_issuer_batch_with_tokens_per_request(shop: Engine) -> None:
    good = [TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))]
    plain = [TokenInput("Shop::Access_token", unverified_jwt(jti="p", scope=["shop:look"]))]
    broken = [TokenInput("Shop::Access_token", "not-a-jwt")]
    mixed = [*good, TokenInput("Shop::Access_token", "not.a.jwt")]
    requests: list[dict[str, Any]] = [
        {"tokens": good, "action": BUY, "resource": item("cup")},
        {"tokens": plain, "action": BUY, "resource": item("cup")},
        {"tokens": broken, "action": BUY, "resource": item("cup")},
        {"tokens": good, "action": BUY, "resource": item("pen"), "context": {"quantity": 20}},
        {"tokens": mixed, "action": BUY, "resource": item("cup")},
        {"tokens": "x", "action": BUY, "resource": item("cup")},
        {"tokens": broken, "action": VIEW, "resource": item("cup", price=0)},
        {"action": BUY, "resource": item("cup")},
    ]
    batch = shop.authorize_multi_issuer_batch(requests)
    for got, request in zip(batch, requests[:-1], strict=False):
        same_as_single(got, multi_single(shop, request))
    assert isinstance(batch[2], BatchItemError) and batch[2].kind == "TokenError"
    assert isinstance(batch[5], BatchItemError) and batch[5].kind == "TokenError"
    assert isinstance(batch[7], BatchItemError) and "tokens: missing" in batch[7].message
    fourth = batch[4]
    assert isinstance(fourth, AuthorizeResult) and fourth.dropped_tokens
    with pytest.raises(TokenError):
        shop.authorize_multi_issuer_batch(requests[:1], tokens=broken)
    clash = shop.authorize_multi_issuer_batch(requests[:1], tokens=good)
    assert isinstance(clash[0], BatchItemError) and "whole batch" in clash[0].message


def test_multi_issuer_batch_schema_problems_per_action(engines: Callable[..., Engine]) -> None:
    schema = shop_files()["schema.polangschema"].replace(
        'action "audit" appliesTo {\n        principal: [User, Role],\n        resource: [Item],\n'
        '        context: { "tokens"?: TokensContext },\n    };',
        'action "audit" appliesTo { principal: [User, Role], resource: [Item] };',
    )
    assert schema != shop_files()["schema.polangschema"]
    engine = engines({**shop_files(), "schema.polangschema": schema})
    good = [TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))]
    requests = [
        {"action": AUDIT, "resource": item("cup")},
        {"action": BUY, "resource": item("cup")},
    ]
    batch = engine.authorize_multi_issuer_batch(requests, tokens=good)
    assert isinstance(batch[0], BatchItemError) and isinstance(batch[0].error, ValidationError)
    same_as_single(batch[0], multi_single(engine, {**requests[0], "tokens": good}))
    assert isinstance(batch[1], AuthorizeResult) and batch[1].decision


# ---------------------------------------------------------------- a generated store


def _workload_store(tmp_path: Path) -> tuple[Path, Any]:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.workload import generate
    except ImportError:  # pragma: no cover - benchmarks/ not in this tree
        pytest.skip("benchmarks/ is not in this tree")
    finally:
        sys.path.remove(str(ROOT))
    w = generate(n_entities=400, n_policies=40, n_requests=160, seed=11)
    metadata = {
        "polang_version": "4.0.0",
        "policy_store": {"id": "docs", "name": "Docs", "version": "1.0.0"},
    }
    files = {
        "metadata.json": json.dumps(metadata),
        "schema.polangschema": w.schema_text,
        "policies/all.polang": "\n\n".join(
            p if p.lstrip().startswith("@id(") else f'@id("policy{i}")\n{p}'
            for i, p in enumerate(w.policies)
        )
        # errors whose messages name the entity: each request keeps its own
        + '\n@id("overflow")\npermit (principal, action in Action::"read", resource is Document)'
        + " when { resource.size * 4611686018427387904 > principal.level };\n",
        "entities/all.json": w.entities_json,
    }
    return write_store(tmp_path / "docs", files), w


def test_a_generated_store_with_hierarchies_answers_as_single_calls(tmp_path: Path) -> None:
    """Principals in nested groups, resources in nested folders, action groups, forbids and
    policies that error: list views per principal, entities in full, equal to single calls."""
    store, w = _workload_store(tmp_path)
    by_uid = {(e["uid"]["type"], e["uid"]["id"]): e for e in w.entities}
    with Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK}) as engine:
        engine.authorizer.backend.wait_generated(30)  # type: ignore[attr-defined]
        lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in w.requests:
            p = (r["principal"]["type"], r["principal"]["id"])
            res = by_uid[(r["resource"]["type"], r["resource"]["id"])]
            action = str(EntityUID(r["action"]["type"], r["action"]["id"]))
            lists.setdefault(p, []).append(
                {"action": action, "resource": res, "context": r["context"]}
            )
        decided = errors = 0
        for p, requests in lists.items():
            principal = by_uid[p]
            batch = engine.authorize_unsigned_batch(requests, principal=principal)
            own = engine.authorize_unsigned_batch([{**r, "principal": principal} for r in requests])
            for got, again, request in zip(batch, own, requests, strict=True):
                want = single(engine, request, principal)
                same_as_single(got, want)
                same_as_single(again, want)
                decided += 1
                errors += bool(isinstance(got, AuthorizeResult) and got.response.diagnostics.errors)
        assert decided == len(w.requests)
        assert errors > 0  # the comparison covered policies that error


def test_resources_that_move_in_the_hierarchy_answer_as_single_calls(tmp_path: Path) -> None:
    """A list view's resources laid one at a time over the principal: stored documents as
    stored, moved to another folder, new ones with and without a folder, and one with the
    principal's own uid (each decided over the facts its single call builds)."""
    store, w = _workload_store(tmp_path)
    docs = [e for e in w.entities if e["uid"]["type"] == "Document"][:30]
    folders = [e["uid"] for e in w.entities if e["uid"]["type"] == "Folder"]
    users = [e for e in w.entities if e["uid"]["type"] == "User"]
    resources: list[dict[str, Any]] = []
    for k, d in enumerate(docs):
        resources.append(d)
        resources.append({**d, "parents": [folders[(k * 7) % len(folders)]]})  # moved
        new = {**d, "uid": {"type": "Document", "id": f"new-{k}"}}
        resources.append({**new, "parents": [] if k % 2 else [folders[k % len(folders)]]})
    with Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK}) as engine:
        engine.authorizer.backend.wait_generated(30)  # type: ignore[attr-defined]
        for principal in users[:6]:
            requests = [
                {"action": 'Action::"view"', "resource": r, "context": w.requests[0]["context"]}
                for r in [*resources, principal]
            ]
            batch = engine.authorize_unsigned_batch(requests, principal=principal)
            for got, request in zip(batch, requests, strict=True):
                same_as_single(got, single(engine, request, principal))
        assert any(isinstance(r, AuthorizeResult) and r.decision for r in batch)


def test_results_built_by_slots_equal_the_dataclass_constructors() -> None:
    """The engine fills the result classes' slots directly (speed): the same objects."""
    import dataclasses

    from polang.engine.results import Diagnostics, Response, new_result

    errors = [{"policy_id": "q", "error": "boom"}]
    made = new_result(False, "rid", ["p"], errors, None)
    want = AuthorizeResult(False, "rid", Response("deny", Diagnostics(["p"], errors)), None)
    assert made == want and repr(made) == repr(want) and made.to_dict() == want.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.decision = True  # type: ignore[misc]
    assert new_result(True, "r", [], [], []).response.decision == "allow"


def test_compiled_decide_many_equals_decide_per_request() -> None:
    """The compiled backend's public ``decide_many`` (the batch loop) gives, per request,
    what ``decide`` gives: decision, reasons in order, erroring policies and their
    messages, including requests that share a combined outcome (the memo)."""
    from polang.datalog.authorizer import Authorizer
    from polang.datalog.compiled import CompiledBackend
    from polang.datalog.facts import EntityFacts, Request
    from polang.language.entities import Entity
    from polang.language.parser import parse_policies
    from polang.language.values import RecordValue

    policies = parse_policies(
        'permit (principal, action == Action::"view", resource) when { resource.n > 1 };'
        'permit (principal, action == Action::"view", resource)'
        "when { resource.owner == principal };"
        "forbid (principal, action, resource) when { resource.n == 13 };"
        "permit (principal, action, resource) when { resource.missing == 1 };"
        "permit (principal, action, resource) when { resource.n + 9223372036854775807 > 0 };"
    )
    auth = Authorizer(policies)
    backend = auth.backend
    assert isinstance(backend, CompiledBackend)
    alice, view = EntityUID("User", "alice"), EntityUID("Action", "view")
    entities = [Entity(alice, {}, set(), {})]
    requests, facts = [], []
    for i, n in enumerate([0, 1, 2, 13, 2, 0, -5, 13]):
        doc = EntityUID("Doc", f"d{i}")
        owner = alice if i % 3 == 0 else EntityUID("User", "bob")
        entities.append(Entity(doc, {"n": n, "owner": owner}, set(), {}))
        requests.append(Request(alice, view, doc, RecordValue()))
    fx = EntityFacts(entities)
    facts = [fx] * len(requests)
    many = backend.decide_many(requests, facts)
    one = [backend.decide(r, f) for r, f in zip(requests, facts, strict=True)]
    assert len({m.allow for m in many}) == 2  # both decisions occur
    assert any(m.errors for m in many)  # and errors
    for m, o in zip(many, one, strict=True):
        assert (m.allow, m.reasons) == (o.allow, o.reasons)
        assert [(p, e.message, e.kind) for p, e in m.errors] == [
            (p, e.message, e.kind) for p, e in o.errors
        ]
    assert auth.decide_batch(requests, facts) == [
        auth.decide(r, f) for r, f in zip(requests, facts, strict=True)
    ]


def test_a_list_views_shared_checks_never_skip_a_request_that_fails(
    engines: Callable[..., Engine],
) -> None:
    """Requests of one action, context object and types reuse the first one's parsed
    context and clean schema check; a resource of an enumerated type (checked by id), of
    another type or with another context still gets its own check, as its single call."""
    schema = """
    entity U;
    entity Kind enum ["a", "b"];
    entity Doc = { n: Long };
    action view appliesTo { principal: U, resource: [Doc, Kind], context: { n?: Long } };
    """
    policies = '@id("big")\npermit (principal, action, resource is Doc) when { resource.n > 1 };'
    files = {k: v for k, v in shop_files().items() if not k.startswith(("entities", "trusted"))}
    files["schema.polangschema"] = schema
    files["policies/shop.polang"] = policies
    engine = engines(files)
    ctx: dict[str, Any] = {}

    def doc(i: str, n: Any = 2) -> dict[str, Any]:
        return {"uid": {"type": "Doc", "id": i}, "attrs": {"n": n}}

    view = 'Action::"view"'
    requests: list[dict[str, Any]] = [
        {"action": view, "resource": doc("d1"), "context": ctx},
        {"action": view, "resource": doc("d2", 1), "context": ctx},
        {"action": view, "resource": 'Kind::"a"', "context": ctx},
        {"action": view, "resource": 'Kind::"zz"', "context": ctx},  # not an entity of Kind
        {"action": view, "resource": doc("d3"), "context": ctx},
        {
            "action": view,
            "resource": {"uid": {"type": "U", "id": "x"}, "attrs": {}},
            "context": ctx,
        },
        {"action": view, "resource": doc("d4"), "context": {"n": "x"}},  # a bad context
        {"action": view, "resource": doc("d5", "2"), "context": ctx},  # a bad attribute
        {"action": view, "resource": doc("d6"), "context": ctx},
    ]
    principal = {"uid": {"type": "U", "id": "u"}, "attrs": {}}
    batch = engine.authorize_unsigned_batch(requests, principal=principal)
    for got, request in zip(batch, requests, strict=True):
        same_as_single(got, single(engine, request, principal))
    assert [isinstance(r, BatchItemError) for r in batch] == [
        False,
        False,
        True,
        True,
        False,
        True,
        True,
        True,
        False,
    ]
