"""The public engine API: store formats, result shape, request parts, logs, threads, refresh.

Most tests use a small "Shop" store written to a temp directory (so each test can change
one piece); the format tests use the example store in ``examples/stores/`` as shipped.
Multi-issuer requests here run with signature validation off (no network); the signed,
end-to-end path is in ``tests/tokens/test_engine_multi_issuer.py``.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from polang import (
    AuthorizeResult,
    BatchItemError,
    Config,
    Engine,
    PolangError,
    PolicyStoreSource,
    RequestError,
    TokenError,
    TokenInput,
    ValidationError,
    init_from_archive_bytes,
    load_policy_store_archive_bytes,
)
from polang.language.values import EntityUID

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "stores"
REQUESTS = REPO / "examples" / "requests"

# ---------------------------------------------------------------- the Shop store

SHOP_SCHEMA = """namespace Shop {
    type Url = { "host": String, "path": String, "protocol": String };
    entity TrustedIssuer = { "issuer_entity_id": Url };
    entity Access_token = {
        "token_type"?: String,
        "jti"?: String,
        "iss"?: TrustedIssuer,
        "exp"?: Long,
        "validated_at"?: Long,
    } tags Set<String>;
    type TokensContext = {
        "total_token_count": Long,
        "shop_access_token"?: Access_token,
    };
    entity Role;
    entity User in [Role] = { "name": String, "level": Long };
    entity Item = { "owner": User, "price": Long };
    action "view", "buy" appliesTo {
        principal: [User, Role],
        resource: [Item],
        context: { "quantity"?: Long, "tokens"?: TokensContext },
    };
    action "audit" appliesTo {
        principal: [User, Role],
        resource: [Item],
        context: { "tokens"?: TokensContext },
    };
}
"""

SHOP_POLICIES = """@id("free-items-public")
permit (principal, action == Shop::Action::"view", resource is Shop::Item)
when { resource.price == 0 };

@id("owner-views")
permit (principal, action == Shop::Action::"view", resource is Shop::Item)
when { resource.owner == principal };

@id("alice-buys")
permit (principal == Shop::User::"alice", action == Shop::Action::"buy", resource);

@id("auditors-audit")
permit (principal == Shop::Role::"auditor", action == Shop::Action::"audit", resource);

@id("staff-view-staff-items")
permit (principal in Shop::Role::"staff", action == Shop::Action::"view", resource is Shop::Item)
when { resource.owner in Shop::Role::"staff" };

@id("senior-owner-audit")
permit (principal, action == Shop::Action::"audit", resource is Shop::Item)
when { resource.owner.level >= 5 };

@id("no-bulk-buys")
forbid (principal, action == Shop::Action::"buy", resource)
when { context has quantity && context.quantity > 10 };

@id("token-buys")
permit (principal, action == Shop::Action::"buy", resource)
when {
    context has tokens.shop_access_token &&
    context.tokens.shop_access_token.hasTag("scope") &&
    context.tokens.shop_access_token.getTag("scope").contains("shop:buy")
};
"""

SHOP_ENTITIES = [
    {"uid": {"type": "Shop::Role", "id": "staff"}, "attrs": {}, "parents": []},
    {"uid": {"type": "Shop::Role", "id": "auditor"}, "attrs": {}, "parents": []},
    {
        "uid": {"type": "Shop::User", "id": "alice"},
        "attrs": {"name": "Alice", "level": 1},
        "parents": [{"type": "Shop::Role", "id": "staff"}],
    },
]

SHOP_ISSUER = "https://idp.shop.test"
SHOP_ISSUERS = {
    "shop_idp": {
        "name": "Shop",
        "description": "never contacted: signature validation is off in these tests",
        "openid_configuration_endpoint": f"{SHOP_ISSUER}/.well-known/openid-configuration",
        "token_metadata": {"access_token": {"entity_type_name": "Shop::Access_token"}},
    }
}

VIEW = 'Shop::Action::"view"'
BUY = 'Shop::Action::"buy"'
AUDIT = 'Shop::Action::"audit"'
NO_NETWORK = {"ENGINE_JWT_SIG_VALIDATION": "disabled", "ENGINE_JWT_STATUS_VALIDATION": "disabled"}


def shop_files(
    version: str = "1.0.0", policies: str = SHOP_POLICIES, schema: str = SHOP_SCHEMA
) -> dict[str, str]:
    metadata = {
        "polang_version": "4.0.0",
        "policy_store": {
            "id": "shop",
            "name": "Shop",
            "description": "engine tests",
            "version": version,
            "created_date": "2025-01-01T00:00:00Z",
            "updated_date": "2025-01-01T00:00:00Z",
        },
    }
    return {
        "metadata.json": json.dumps(metadata),
        "schema.polangschema": schema,
        "policies/shop.polang": policies,
        "entities/people.json": json.dumps(SHOP_ENTITIES),
        "trusted-issuers/shop.json": json.dumps(SHOP_ISSUERS),
    }


def write_store(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def parc_bytes(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
    return buf.getvalue()


@pytest.fixture
def shop_dir(tmp_path: Path) -> Path:
    return write_store(tmp_path / "shop", shop_files())


@pytest.fixture
def make_engine() -> Iterator[Callable[..., Engine]]:
    """Engines over a store directory (closed after the test)."""
    made: list[Engine] = []

    def make(store: Path, **props: Any) -> Engine:
        cfg = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), **NO_NETWORK, **props}
        engine = Engine(cfg)
        made.append(engine)
        return engine

    yield make
    for e in made:
        e.close()


@pytest.fixture
def shop(shop_dir: Path, make_engine: Callable[..., Engine]) -> Engine:
    return make_engine(shop_dir, ENGINE_LOG_TYPE="memory")


def user(uid: str, level: int = 1, parents: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "uid": {"type": "Shop::User", "id": uid},
        "attrs": {"name": uid.title(), "level": level},
        "parents": [{"type": "Shop::Role", "id": p} for p in parents],
    }


def role(uid: str) -> dict[str, Any]:
    return {"uid": {"type": "Shop::Role", "id": uid}, "attrs": {}, "parents": []}


def item(uid: str, owner: str = "alice", price: int = 5) -> dict[str, Any]:
    return {
        "uid": {"type": "Shop::Item", "id": uid},
        "attrs": {"owner": {"__entity": {"type": "Shop::User", "id": owner}}, "price": price},
        "parents": [],
    }


def outcome(r: AuthorizeResult) -> tuple[bool, list[str], list[str]]:
    """Decision, sorted reason ids and sorted erroring policy ids."""
    diag = r.response.diagnostics
    return r.decision, sorted(diag.reason), sorted(e["policy_id"] for e in diag.errors)


def b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def unverified_jwt(**claims: Any) -> str:
    """A JWT that only an engine with signature validation off accepts (bogus signature)."""
    body: dict[str, Any] = {
        "iss": SHOP_ISSUER,
        "sub": "buyer-1",
        "jti": "tok-1",
        "exp": int(time.time()) + 600,
    }
    body.update(claims)
    return f"{b64url({'alg': 'RS256', 'typ': 'JWT'})}.{b64url(body)}.c2lnbmF0dXJl"


# ---------------------------------------------------------------- store formats


def _example_requests() -> list[tuple[str, dict[str, Any], dict[str, Any] | None, Any]]:
    alice = json.loads((REQUESTS / "alice.json").read_text())
    roadmap = json.loads((REQUESTS / "roadmap.json").read_text())
    corp = json.loads((REQUESTS / "office-network.json").read_text())

    def with_attrs(entity: dict[str, Any], **attrs: Any) -> dict[str, Any]:
        e = json.loads(json.dumps(entity))
        e["attrs"].update(attrs)
        return e

    bob_ref = {"__entity": {"type": "Acme::User", "id": "bob"}}
    alice_ref = {"__entity": {"type": "Acme::User", "id": "alice"}}
    secret = with_attrs(roadmap, classification="secret", owner=alice_ref)
    globex = with_attrs(alice, org={"__entity": {"type": "Acme::Org", "id": "globex"}})
    globex["parents"] = []
    globex["uid"]["id"] = "gina"
    return [
        ('Acme::Action::"read"', roadmap, None, alice),
        ('Acme::Action::"edit"', roadmap, None, alice),
        ('Acme::Action::"edit"', roadmap, None, with_attrs(alice, clearance=3)),
        ('Acme::Action::"delete"', with_attrs(roadmap, owner=alice_ref), None, alice),
        ('Acme::Action::"delete"', with_attrs(roadmap, owner=bob_ref), None, alice),
        ('Acme::Action::"read"', secret, None, alice),
        ('Acme::Action::"read"', secret, corp, alice),
        ('Acme::Action::"read"', roadmap, None, globex),
        ('Acme::Action::"read"', with_attrs(roadmap, public=True), None, None),
    ]


# What the example store must answer (decision, reasons, erroring policies).
EXAMPLE_EXPECTED = [
    (True, ["org-members-read"], []),
    (False, [], []),
    (True, ["cleared-editors"], []),
    (True, ["owner-full-access"], []),
    (False, [], []),
    (False, ["secret-needs-corp-network"], []),
    (True, ["owner-full-access"], []),
    (False, [], []),
    (False, [], ["owner-full-access"]),  # no principal: `resource.owner == principal` errors
]


def _engines_for_every_format() -> dict[str, Callable[[], Engine]]:
    parc = (EXAMPLES / "store.parc").read_bytes()
    cfg = Config()
    return {
        "directory": lambda: Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(EXAMPLES / "directory")}),
        "parc": lambda: Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(EXAMPLES / "store.parc")}),
        "legacy-json": lambda: Engine(
            {"ENGINE_POLICY_STORE_LOCAL_FN": str(EXAMPLES / "legacy.json")}
        ),
        "legacy-yaml": lambda: Engine(
            {"ENGINE_POLICY_STORE_LOCAL_FN": str(EXAMPLES / "legacy.yaml")}
        ),
        "from_archive_bytes": lambda: Engine.from_archive_bytes(None, parc),
        "init_from_archive_bytes": lambda: init_from_archive_bytes({}, parc),
        "PolicyStoreSource.archive_bytes": lambda: Engine(
            cfg, store=PolicyStoreSource.archive_bytes(parc).load(cfg)
        ),
        "load_policy_store_archive_bytes": lambda: Engine(
            cfg, store=load_policy_store_archive_bytes(parc)
        ),
    }


@pytest.mark.parametrize("fmt", list(_engines_for_every_format()))
def test_every_store_format_decides_the_same(fmt: str) -> None:
    with _engines_for_every_format()[fmt]() as engine:
        assert engine.store.id == "acme-docs" and engine.store.version == "1.2.0"
        got = [outcome(engine.authorize_unsigned(a, r, c, p)) for a, r, c, p in _example_requests()]
    assert got == EXAMPLE_EXPECTED


def test_policy_code_is_generated_in_the_background_with_the_same_decisions() -> None:
    """The engine returns before its policies' code is compiled; decisions made with the
    closures and with the generated code are the same."""
    with _engines_for_every_format()["directory"]() as engine:
        backend = engine.authorizer.backend
        first = [
            outcome(engine.authorize_unsigned(a, r, c, p)) for a, r, c, p in _example_requests()
        ]
        assert backend.wait_generated(timeout=60)
        again = [
            outcome(engine.authorize_unsigned(a, r, c, p)) for a, r, c, p in _example_requests()
        ]
    assert first == again == EXAMPLE_EXPECTED
    assert all(cp.run.__doc__ for cp in backend.policies)


# ---------------------------------------------------------------- the result


def test_result_shape_and_to_dict(shop: Engine) -> None:
    r = shop.authorize_unsigned(VIEW, item("cup", price=0))
    assert isinstance(r, AuthorizeResult)
    assert r.decision is True
    assert r.response.decision == "allow"
    assert r.response.diagnostics.reason == ["free-items-public"]
    d = r.to_dict()
    assert set(d) == {"decision", "request_id", "response"}  # no dropped_tokens when unsigned
    assert d == json.loads(json.dumps(d))  # JSON-ready
    assert d["decision"] is True and d["request_id"] == r.request_id
    assert set(d["response"]) == {"decision", "diagnostics"}
    assert d["response"]["decision"] == "allow"
    assert set(d["response"]["diagnostics"]) == {"reason", "errors"}
    assert d["response"]["diagnostics"]["reason"] == ["free-items-public"]
    (err,) = d["response"]["diagnostics"]["errors"]  # owner-views reads the absent principal
    assert set(err) == {"policy_id", "error"} and err["policy_id"] == "owner-views"
    assert isinstance(err["error"], str) and err["error"]

    deny = shop.authorize_unsigned(BUY, item("cup"), {"quantity": 50}, user("alice"))
    dd = deny.to_dict()
    assert dd["decision"] is False and dd["response"]["decision"] == "deny"
    assert dd["response"]["diagnostics"] == {"reason": ["no-bulk-buys"], "errors": []}
    default_deny = shop.authorize_unsigned(BUY, item("cup"), None, user("bob"))
    assert default_deny.to_dict()["response"]["diagnostics"] == {"reason": [], "errors": []}


def test_request_ids_are_uuidv7_unique_and_ordered(shop: Engine) -> None:
    before = time.time()
    ids = [shop.authorize_unsigned(VIEW, item("cup", price=0)).request_id for _ in range(50)]
    after = time.time()
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    for rid in ids:
        u = uuid.UUID(rid)
        assert str(u) == rid  # lowercase, hyphenated
        assert u.version == 7 and u.variant == uuid.RFC_4122
        ms = u.int >> 80
        assert before * 1000 - 1 <= ms <= after * 1000 + 1


# ---------------------------------------------------------------- principals


def test_no_principal(shop: Engine) -> None:
    # unconstrained principal, condition not reading it: applies
    assert outcome(shop.authorize_unsigned(VIEW, item("cup", price=0))) == (
        True,
        ["free-items-public"],
        ["owner-views"],  # the condition reads `principal`: an error, not an exception
    )
    # `principal == X` scope: does not apply (and is not an error)
    assert outcome(shop.authorize_unsigned(BUY, item("cup"))) == (False, [], [])
    # a forbid with an unconstrained principal still applies
    assert outcome(shop.authorize_unsigned(BUY, item("cup"), {"quantity": 11})) == (
        False,
        ["no-bulk-buys"],
        [],
    )
    # `principal in X` scope: does not apply
    assert outcome(shop.authorize_unsigned(VIEW, item("cup", price=3))) == (
        False,
        [],
        ["owner-views"],
    )
    (err,) = shop.authorize_unsigned(VIEW, item("cup", price=3)).response.diagnostics.errors
    assert "principal" in err["error"]


def test_principal_scope_with_a_principal(shop: Engine) -> None:
    assert outcome(shop.authorize_unsigned(BUY, item("cup"), None, user("alice"))) == (
        True,
        ["alice-buys"],
        [],
    )
    assert outcome(shop.authorize_unsigned(BUY, item("cup"), {"quantity": 10}, user("bob"))) == (
        False,
        [],
        [],
    )


@pytest.mark.parametrize(
    "principal",
    [role("auditor"), EntityUID("Shop::Role", "auditor")],
    ids=["entity-json", "EntityUID"],
)
def test_principal_of_a_role_type(shop: Engine, principal: Any) -> None:
    assert outcome(shop.authorize_unsigned(AUDIT, item("ledger"), None, principal)) == (
        True,
        ["auditors-audit"],
        [],
    )
    assert shop.authorize_unsigned(AUDIT, item("ledger"), None, role("staff")).decision is False


def test_role_principal_in_a_role_hierarchy(shop: Engine) -> None:
    # a role is `in` itself: the staff role may view items of staff members
    r = shop.authorize_unsigned(VIEW, item("pen", owner="alice"), None, role("staff"))
    assert outcome(r) == (True, ["staff-view-staff-items"], [])


def test_mapped_entity_form(shop: Engine) -> None:
    mapped = {
        "cedar_entity_mapping": {"entity_type": "Shop::Item", "id": "pen"},
        "owner": {"__entity": {"type": "Shop::User", "id": "bob"}},
        "price": 2,
    }
    assert outcome(shop.authorize_unsigned(VIEW, mapped, None, user("bob"))) == (
        True,
        ["owner-views"],
        [],
    )


def test_request_entities_override_default_entities(shop: Engine) -> None:
    # The default alice (level 1, in staff) is used when the request does not carry her.
    pen = item("pen", owner="alice")
    assert outcome(shop.authorize_unsigned(AUDIT, pen)) == (False, [], [])
    assert outcome(shop.authorize_unsigned(VIEW, pen, None, user("bob", parents=("staff",)))) == (
        True,
        ["staff-view-staff-items"],
        [],
    )
    # A request alice replaces the default one: her attributes and her parents.
    senior = user("alice", level=7, parents=("staff",))
    assert outcome(shop.authorize_unsigned(AUDIT, pen, None, senior)) == (
        True,
        ["senior-owner-audit"],
        [],
    )
    outsider = user("alice", level=1, parents=())
    assert outcome(shop.authorize_unsigned(VIEW, pen, None, outsider)) == (
        True,
        ["owner-views"],  # no longer `in` staff
        [],
    )
    # ... for that request only: the default is untouched afterwards
    assert outcome(shop.authorize_unsigned(VIEW, pen, None, user("alice", parents=()))) == (
        True,
        ["owner-views"],
        [],
    )
    assert outcome(shop.authorize_unsigned(VIEW, pen, None, user("bob", parents=("staff",)))) == (
        True,
        ["staff-view-staff-items"],
        [],
    )


def test_a_bare_uid_refers_to_the_default_entity(shop: Engine) -> None:
    pen = item("pen", owner="alice")
    alice = EntityUID("Shop::User", "alice")  # a default entity: level 1, in staff
    assert outcome(shop.authorize_unsigned(VIEW, pen, None, alice)) == (
        True,
        ["owner-views", "staff-view-staff-items"],
        [],
    )
    assert outcome(shop.authorize_unsigned(AUDIT, pen, None, alice)) == (False, [], [])


# ---------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("args", "field", "detail"),
    [
        ((42, item("cup"), None, None), "action", "expected a string"),
        (('Shop::Action:"view"', item("cup"), None, None), "action", "not an entity reference"),
        ((VIEW, 7, None, None), "resource", "expected an entity"),
        ((VIEW, {"uid": {"type": "Shop::Item"}, "attrs": {}}, None, None), "resource", "id"),
        (
            (VIEW, {"uid": {"type": "Shop::Nope", "id": "x"}, "attrs": {}}, None, None),
            "resource",
            "Shop::Nope",
        ),
        (
            (VIEW, {"uid": {"type": "Shop::Item", "id": "x"}, "attrs": {"price": 1}}, None, None),
            "resource",
            "owner",
        ),
        (
            (VIEW, {**item("x"), "attrs": {**item("x")["attrs"], "price": "1"}}, None, None),
            "resource",
            "price",
        ),
        ((VIEW, item("cup"), ["quantity"], None), "context", "expected an object"),
        ((BUY, item("cup"), {"quantity": "many"}, None), "context", "quantity"),
        ((BUY, item("cup"), {"colour": "red"}, None), "context", "colour"),
        ((BUY, item("cup"), None, "alice"), "principal", "not an entity reference"),
        (
            (BUY, item("cup"), None, {"uid": {"type": "Shop::User", "id": "x"}, "attrs": {}}),
            "principal",
            "name",
        ),
    ],
    ids=[
        "action-not-a-string",
        "action-syntax",
        "resource-not-an-object",
        "resource-uid-without-id",
        "resource-undeclared-type",
        "resource-missing-attribute",
        "resource-attribute-type",
        "context-not-an-object",
        "context-attribute-type",
        "context-undeclared-attribute",
        "principal-not-a-reference",
        "principal-missing-attribute",
    ],
)
def test_bad_request_parts(shop: Engine, args: tuple[Any, ...], field: str, detail: str) -> None:
    with pytest.raises(RequestError) as exc:
        shop.authorize_unsigned(*args)
    msg = str(exc.value)
    assert msg.startswith(field) or f"$.{field}" in msg, msg
    assert detail in msg, msg
    assert isinstance(exc.value, PolangError)


@pytest.mark.parametrize("action", ['Shop::Action::"steal"', 'Shop::User::"alice"'])
def test_undeclared_action_is_a_request_error(shop: Engine, action: str) -> None:
    with pytest.raises(RequestError, match="action"):
        shop.authorize_unsigned(action, item("cup", price=0), None, user("alice"))


def test_undeclared_action_with_a_context_is_rejected(shop: Engine) -> None:
    with pytest.raises(RequestError, match=r'Shop::Action::"steal"'):
        shop.authorize_unsigned('Shop::Action::"steal"', item("cup"), {"quantity": 1})


# ---------------------------------------------------------------- strict validation


BAD_POLICY = """@id("colourful")
permit (principal, action == Shop::Action::"view", resource is Shop::Item)
when { resource.colour == "red" };
"""


def test_strict_validation_rejects_an_invalid_policy(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    store = write_store(tmp_path / "bad", shop_files(policies=SHOP_POLICIES + "\n" + BAD_POLICY))
    with pytest.raises(ValidationError) as exc:
        make_engine(store)
    assert "colourful" in str(exc.value) and "colour" in str(exc.value)
    assert exc.value.findings

    # strict validation off: the store loads; the policy errors at evaluation instead
    engine = make_engine(store, ENGINE_STRICT_SCHEMA_VALIDATION="disabled")
    r = engine.authorize_unsigned(VIEW, item("cup", price=0))
    assert outcome(r) == (True, ["free-items-public"], ["colourful", "owner-views"])


# ---------------------------------------------------------------- multi-issuer (no network)


def test_caller_context_may_not_carry_tokens(shop: Engine) -> None:
    tokens = [TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))]
    assert shop.authorize_multi_issuer(tokens, BUY, item("cup")).decision is True
    with pytest.raises(RequestError, match="tokens"):
        shop.authorize_multi_issuer(tokens, BUY, item("cup"), {"tokens": {}})
    with pytest.raises(RequestError, match="tokens"):
        shop.authorize_multi_issuer(
            tokens, BUY, item("cup"), {"quantity": 1, "tokens": {"total_token_count": 0}}
        )


def test_multi_issuer_result_shape(shop: Engine) -> None:
    tokens = [
        TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"])),
        TokenInput("Shop::Access_token", unverified_jwt(jti="old", exp=1000)),
    ]
    d = shop.authorize_multi_issuer(tokens, BUY, item("cup")).to_dict()
    assert set(d) == {"decision", "request_id", "response", "dropped_tokens"}
    assert d["response"] == {
        "decision": "allow",
        "diagnostics": {"reason": ["token-buys"], "errors": []},
    }
    (dropped,) = d["dropped_tokens"]
    assert dropped["mapping"] == "Shop::Access_token" and dropped["index"] == 1
    assert dropped["reason"]["kind"] == "expired" and dropped["reason"]["message"]
    assert json.loads(json.dumps(d)) == d


def test_multi_issuer_bad_inputs(shop: Engine) -> None:
    with pytest.raises(TokenError):
        shop.authorize_multi_issuer("not-a-list", BUY, item("cup"))
    with pytest.raises(TokenError) as exc:
        shop.authorize_multi_issuer([TokenInput("Shop::Access_token", "x.y")], BUY, item("cup"))
    assert exc.value.reasons
    with pytest.raises(RequestError, match="resource"):
        shop.authorize_multi_issuer(
            [TokenInput("Shop::Access_token", unverified_jwt())], BUY, {"uid": 1}
        )


# ---------------------------------------------------------------- batches


def test_batches_match_single_calls(shop: Engine) -> None:
    requests: list[dict[str, Any]] = [
        {"action": VIEW, "resource": item("cup", price=0)},
        {"action": BUY, "resource": item("cup"), "principal": user("alice")},
        {
            "action": BUY,
            "resource": item("cup"),
            "principal": user("alice"),
            "context": {"quantity": 99},
        },
        {"action": AUDIT, "resource": item("cup"), "principal": role("auditor")},
    ]
    batch = shop.authorize_unsigned_batch(requests)
    assert [outcome(r) for r in batch] == [outcome(shop.authorize_unsigned(**r)) for r in requests]
    assert [r.decision for r in batch] == [True, True, False, True]
    assert len({r.request_id for r in batch}) == len(batch)

    good = TokenInput("Shop::Access_token", unverified_jwt(scope=["shop:buy"]))
    plain = TokenInput("Shop::Access_token", unverified_jwt(jti="plain", scope=["shop:look"]))
    mi = shop.authorize_multi_issuer_batch(
        [
            {"tokens": [good], "action": BUY, "resource": item("cup")},
            {"tokens": [plain], "action": BUY, "resource": item("cup")},
            {"tokens": [good], "action": BUY, "resource": item("cup"), "context": {"quantity": 20}},
        ]
    )
    assert [outcome(r) for r in mi] == [
        (True, ["token-buys"], []),
        (False, [], []),
        (False, ["no-bulk-buys"], []),
    ]
    # a bad request is reported in its slot (tests/test_engine_batch.py has the details)
    (bad,) = shop.authorize_unsigned_batch([{"action": VIEW, "resource": 3}])
    assert isinstance(bad, BatchItemError) and isinstance(bad.error, RequestError)
    assert bad.decision is False


# ---------------------------------------------------------------- logs

DECISION_FIELDS = {
    "id",
    "timestamp",
    "log_kind",
    "application_id",
    "pdp_id",
    "request_id",
    "policystore_id",
    "policystore_version",
    "principal",
    "action",
    "resource",
    "decision",
    "diagnostics",
    "tokens",
    "dropped_tokens",
    "decision_time_micro_sec",
}


def test_decision_log_entries(shop_dir: Path, make_engine: Callable[..., Engine]) -> None:
    engine = make_engine(shop_dir, ENGINE_LOG_TYPE="memory", ENGINE_APPLICATION_NAME="shop-api")
    engine.pop_logs()
    a = engine.authorize_unsigned(BUY, item("cup"), None, user("alice"))
    b = engine.authorize_unsigned(VIEW, item("cup", price=3))
    entries = engine.get_logs_by_tag("Decision")
    assert [e["request_id"] for e in entries] == [a.request_id, b.request_id]
    for e in entries:
        assert set(e) >= DECISION_FIELDS, DECISION_FIELDS - set(e)
        assert e["log_kind"] == "Decision" and e["application_id"] == "shop-api"
        assert e["policystore_id"] == "shop" and e["policystore_version"] == "1.0.0"
        assert uuid.UUID(e["id"]).version == 7
        assert e["timestamp"].endswith("Z")
        assert isinstance(e["decision_time_micro_sec"], int) and e["decision_time_micro_sec"] >= 0
        assert e["tokens"] == {} and e["dropped_tokens"] == []
    ea, eb = entries
    assert ea["decision"] == "ALLOW" and eb["decision"] == "DENY"
    assert ea["principal"] == 'Shop::User::"alice"' and eb["principal"] is None
    assert ea["action"] == BUY and ea["resource"] == 'Shop::Item::"cup"'
    assert ea["diagnostics"] == {"reason": ["alice-buys"], "errors": []}
    assert eb["diagnostics"]["errors"][0]["policy_id"] == "owner-views"
    assert engine.get_logs_by_request_id(a.request_id) == [ea]
    assert engine.get_log_by_id(ea["id"]) == ea


def test_tokens_are_never_logged_whole(shop_dir: Path, make_engine: Callable[..., Engine]) -> None:
    engine = make_engine(shop_dir, ENGINE_LOG_TYPE="memory", ENGINE_LOG_LEVEL="TRACE")
    good = unverified_jwt(jti="tok-good", scope=["shop:buy"])
    expired = unverified_jwt(jti="tok-old", exp=1000)
    garbage = good[:-4] + "." + good.split(".")[1]  # four segments: not a JWT
    r = engine.authorize_multi_issuer(
        [
            TokenInput("Shop::Access_token", good),
            TokenInput("Shop::Access_token", expired),
            TokenInput("Shop::Access_token", garbage),
        ],
        BUY,
        item("cup"),
    )
    assert r.decision is True
    assert [d.kind for d in r.dropped_tokens or []] == ["expired", "invalid_input"]
    logs = engine.get_logs_by_request_id(r.request_id)
    (entry,) = logs
    assert entry["tokens"] == {"Shop::Access_token#0": {"jti": "tok-good"}}
    assert [d["index"] for d in entry["dropped_tokens"]] == [1, 2]
    everything = json.dumps(engine.pop_logs())
    for token in (good, expired, garbage):
        for segment in token.split("."):
            if len(segment) > 12:
                assert segment not in everything
    assert good not in json.dumps(r.to_dict())


def test_logs_off_by_default(shop_dir: Path, make_engine: Callable[..., Engine]) -> None:
    engine = make_engine(shop_dir)
    engine.authorize_unsigned(VIEW, item("cup", price=0))
    assert engine.pop_logs() == [] and engine.get_log_ids() == []


# ---------------------------------------------------------------- threads


def _mixed_request(i: int) -> tuple[dict[str, Any], tuple[bool, list[str], list[str]]]:
    """Request ``i`` of a deterministic mix, with the outcome the Shop store must give."""
    kind = i % 6
    if kind == 0:
        price = i % 3
        req = {"action": VIEW, "resource": item(f"i{i}", owner="zed", price=price)}
        ok = price == 0
        return req, (ok, ["free-items-public"] if ok else [], ["owner-views"])
    if kind == 1:
        q = i % 20
        req = {
            "action": BUY,
            "resource": item(f"i{i}"),
            "principal": user("alice"),
            "context": {"quantity": q},
        }
        return req, (q <= 10, ["alice-buys"] if q <= 10 else ["no-bulk-buys"], [])
    if kind == 2:
        req = {"action": AUDIT, "resource": item(f"i{i}"), "principal": role("auditor")}
        return req, (True, ["auditors-audit"], [])
    if kind == 3:
        level = i % 10
        req = {
            "action": AUDIT,
            "resource": item(f"i{i}", owner="alice"),
            "principal": user("alice", level=level, parents=("staff",)),
        }
        return req, (level >= 5, ["senior-owner-audit"] if level >= 5 else [], [])
    if kind == 4:
        req = {
            "action": VIEW,
            "resource": item(f"i{i}", owner="alice", price=9),
            "principal": user(f"u{i}", parents=("staff",)),
        }
        return req, (True, ["staff-view-staff-items"], [])
    req = {"action": BUY, "resource": item(f"i{i}"), "principal": user(f"u{i}")}
    return req, (False, [], [])


def test_one_engine_from_eight_threads(shop: Engine) -> None:
    per_thread = 120
    barrier = threading.Barrier(8)
    failures: list[str] = []
    counts: list[int] = []

    def worker(t: int) -> None:
        barrier.wait()
        done = 0
        for k in range(per_thread):
            i = t * 7 + k * 13
            req, want = _mixed_request(i)
            try:
                got = outcome(shop.authorize_unsigned(**req))
            except Exception as e:  # a crash in a thread is a failure, not a silent exit
                failures.append(f"thread {t} request {i}: {type(e).__name__}: {e}")
                continue
            if got != want:
                failures.append(f"thread {t} request {i}: got {got}, want {want}")
            done += 1
        counts.append(done)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not failures, failures[:10]
    assert counts == [per_thread] * 8
    decisions = [e["decision"] for e in shop.get_logs_by_tag("Decision")]
    assert len(decisions) == 8 * per_thread
    assert {"ALLOW", "DENY"} <= set(decisions)


# ---------------------------------------------------------------- URL store refresh


class _ParcServer:
    """``http.server`` on loopback serving whatever ``body`` is at ``/shop.parc``."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/shop.parc":
                    self.send_error(404)
                    return
                server.hits += 1
                data = server.body
                self.send_response(200)
                self.send_header("Content-Type", "application/zip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/shop.parc"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_url_store_refresh(tmp_path: Path) -> None:
    server = _ParcServer(parc_bytes(shop_files("1.0.0")))
    engine = Engine(
        {
            "ENGINE_POLICY_STORE_URI": server.url,
            "ENGINE_POLICY_STORE_REFRESH_INTERVAL": 0.05,
            "ENGINE_LOG_TYPE": "memory",
            **NO_NETWORK,
        }
    )
    try:
        free_cup = item("cup", price=0)
        assert engine.store.version == "1.0.0"
        assert engine.authorize_unsigned(VIEW, free_cup).decision is True

        # a good new version replaces the old one
        v2_policies = SHOP_POLICIES.replace("resource.price == 0", "resource.price == 1")
        server.body = parc_bytes(shop_files("2.0.0", policies=v2_policies))
        _wait_for(lambda: engine.store.version == "2.0.0", "version 2.0.0")
        assert engine.authorize_unsigned(VIEW, free_cup).decision is False
        assert engine.authorize_unsigned(VIEW, item("cup", price=1)).decision is True
        engine.pop_logs()

        # a broken one (a policy that does not parse) keeps the old store and logs why
        broken = SHOP_POLICIES + '\n@id("broken") permit (principal, action, resource) when {'
        server.body = parc_bytes(shop_files("3.0.0", policies=broken))
        _wait_for(lambda: bool(engine.get_logs_by_tag("ERROR")), "a refresh error log")
        hits = server.hits
        _wait_for(lambda: server.hits > hits + 1, "more refresh attempts")
        assert engine.store.version == "2.0.0"
        assert engine.authorize_unsigned(VIEW, item("cup", price=1)).decision is True
        entry = engine.get_logs_by_tag("ERROR")[0]
        assert entry["log_kind"] == "System" and entry["level"] == "ERROR"
        assert "refresh" in entry["msg"] and "2.0.0" in entry["msg"]

        # not a ZIP at all: same
        server.body = b"this is not an archive"
        engine.pop_logs()
        _wait_for(lambda: bool(engine.get_logs_by_tag("ERROR")), "a second refresh error log")
        assert engine.store.version == "2.0.0"

        # a store whose policy fails strict validation is refused too
        engine.pop_logs()
        server.body = parc_bytes(shop_files("4.0.0", policies=SHOP_POLICIES + BAD_POLICY))
        _wait_for(lambda: bool(engine.get_logs_by_tag("ERROR")), "a validation error log")
        assert engine.store.version == "2.0.0"
        assert any("colour" in e["msg"] for e in engine.get_logs_by_tag("ERROR"))
    finally:
        engine.close()
        server.close()
