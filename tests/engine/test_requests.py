"""Principal and resource inputs: every API accepts the same forms.

``authorize_unsigned``, ``explain``, ``authorize_multi_issuer`` (its resource),
``who_can``, ``what_can`` and ``access_matrix`` (its ``entities``) read a principal or a
resource with one resolver (``polang.engine.requests.entity_or_reference``): an entity
given in full (the language's JSON, the mapped form, an ``Entity``) or a reference
(``'T::"id"'``, ``{"type", "id"}``, ``{"__entity": {...}}``, an ``EntityUID``). A
reference in a decision names an entity the store holds; in a query it may name one it
lacks (its data unknown).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, RequestError, TokenInput
from polang.engine.requests import entity_or_reference
from polang.language.entities import Entity
from polang.language.values import EntityUID

SCHEMA = """namespace App {
    type Url = { host: String, path: String, protocol: String };
    entity TrustedIssuer = { issuer_entity_id: Url };
    entity Access_token = { exp?: Long } tags Set<String>;
    type TokensContext = { total_token_count: Long, app_access_token?: Access_token };
    entity Team;
    entity User in [Team] = { name: String };
    entity Doc = { owner: User, public: Bool };
    action "view", "edit" appliesTo {
        principal: [User],
        resource: [Doc],
        context: { tokens?: TokensContext },
    };
}
"""

POLICIES = """@id("public-view")
permit (principal, action == App::Action::"view", resource is App::Doc)
when { resource.public };

@id("staff-view")
permit (principal in App::Team::"staff", action == App::Action::"view", resource is App::Doc);

@id("owner-edit")
permit (principal, action == App::Action::"edit", resource is App::Doc)
when { resource.owner == principal };

@id("token-view")
permit (principal, action == App::Action::"view", resource is App::Doc)
when {
    context has tokens.app_access_token &&
    context.tokens.app_access_token.hasTag("scope") &&
    context.tokens.app_access_token.getTag("scope").contains("docs:view")
};
"""

ENTITIES: list[dict[str, Any]] = [
    {"uid": {"type": "App::Team", "id": "staff"}, "attrs": {}, "parents": []},
    {
        "uid": {"type": "App::User", "id": "alice"},
        "attrs": {"name": "Alice"},
        "parents": [{"type": "App::Team", "id": "staff"}],
    },
    {"uid": {"type": "App::User", "id": "bob"}, "attrs": {"name": "Bob"}, "parents": []},
    {
        "uid": {"type": "App::Doc", "id": "d1"},
        "attrs": {"owner": {"__entity": {"type": "App::User", "id": "bob"}}, "public": False},
        "parents": [],
    },
]

ISSUER = "https://idp.app.test"
ISSUERS = {
    "app_idp": {
        "name": "App",
        "openid_configuration_endpoint": f"{ISSUER}/.well-known/openid-configuration",
        "token_metadata": {"access_token": {"entity_type_name": "App::Access_token"}},
    }
}

VIEW = 'App::Action::"view"'
EDIT = 'App::Action::"edit"'

D1 = EntityUID("App::Doc", "d1")
BOB = EntityUID("App::User", "bob")
ALICE = EntityUID("App::User", "alice")


def references(uid: EntityUID) -> dict[str, Any]:
    """Every reference form of ``uid``."""
    return {
        "string": f'{uid.type}::"{uid.id}"',
        "type-id": {"type": uid.type, "id": uid.id},
        "__entity": {"__entity": {"type": uid.type, "id": uid.id}},
        "EntityUID": uid,
    }


def full_forms(entity_json: dict[str, Any]) -> dict[str, Any]:
    """Every full form of one entity (given as the language's JSON)."""
    from polang.language.entities import parse_entity

    uid = entity_json["uid"]
    mapped: dict[str, Any] = {"cedar_entity_mapping": {"entity_type": uid["type"], "id": uid["id"]}}
    mapped.update(entity_json["attrs"])
    if entity_json["parents"]:
        return {"json": entity_json, "Entity": parse_entity(entity_json)}
    return {"json": entity_json, "mapped": mapped, "Entity": parse_entity(entity_json)}


def default(uid: EntityUID) -> dict[str, Any]:
    (found,) = [e for e in ENTITIES if e["uid"] == {"type": uid.type, "id": uid.id}]
    return json.loads(json.dumps(found))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root: Path = tmp_path_factory.mktemp("inputs")
    files = {
        "metadata.json": json.dumps(
            {
                "polang_version": "4.0.0",
                "policy_store": {
                    "id": "inputs",
                    "name": "Inputs",
                    "version": "1.0.0",
                    "created_date": "2025-01-01T00:00:00Z",
                    "updated_date": "2025-01-01T00:00:00Z",
                },
            }
        ),
        "schema.polangschema": SCHEMA,
        "policies/app.polang": POLICIES,
        "entities/all.json": json.dumps(ENTITIES),
        "trusted-issuers/app.json": json.dumps(ISSUERS),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    e = Engine(
        {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(root),
            "ENGINE_JWT_SIG_VALIDATION": "disabled",
            "ENGINE_JWT_STATUS_VALIDATION": "disabled",
        }
    )
    yield e
    e.close()


def unverified_jwt(**claims: Any) -> str:
    def b64(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    body = {"iss": ISSUER, "jti": "t1", "exp": int(time.time()) + 600, **claims}
    return f"{b64({'alg': 'RS256', 'typ': 'JWT'})}.{b64(body)}.c2ln"


# ---------------------------------------------------------------- the resolver


@pytest.mark.parametrize("form", list(references(D1)))
def test_every_reference_form_is_a_reference(form: str) -> None:
    assert entity_or_reference(references(D1)[form], "resource", None) == (D1, None)


@pytest.mark.parametrize("form", ["json", "mapped", "Entity"])
def test_every_full_form_is_an_entity(engine: Engine, form: str) -> None:
    uid, ent = entity_or_reference(full_forms(default(D1))[form], "resource", engine.schema)
    assert uid == D1 and isinstance(ent, Entity)
    assert ent.attrs == {"owner": BOB, "public": False}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (7, "got int"),
        (None, "got NoneType"),
        ("d1", "is not an entity reference like"),
        ("x" * 100_000, "is not an entity reference like"),
        ({"type": "App::Doc", "id": "d1", "attrs": {}}, "a reference is exactly"),
        ({"__entity": {"type": "App::Doc", "id": "d1"}, "id": "d1"}, "a reference is exactly"),
        ({"name": "d1"}, "got an object with the keys 'name'"),
        ({}, "got an object with the keys none"),
        ({"type": "App::Doc", "id": 7}, "an entity id must be a string"),
        ({"type": "not a type", "id": "x"}, "invalid entity type"),
        ({"__entity": "App::Doc::d1"}, "must be a JSON object"),
    ],
)
def test_bad_inputs_are_request_errors_that_name_the_part(value: Any, says: str) -> None:
    with pytest.raises(RequestError) as exc:
        entity_or_reference(value, "resource", None)
    msg = str(exc.value)
    assert msg.startswith("resource") or "$.resource" in msg, msg
    assert says in msg, msg
    assert len(msg) < 1_000


# ---------------------------------------------------------------- decisions


@pytest.mark.parametrize("form", list(references(D1)))
def test_a_reference_resource_is_the_default_entity(engine: Engine, form: str) -> None:
    # bob owns d1 (in the store): edit is allowed through the stored owner attribute
    for prin in (*references(BOB).values(), *full_forms(default(BOB)).values()):
        r = engine.authorize_unsigned(EDIT, references(D1)[form], {}, prin)
        assert (r.decision, r.response.diagnostics.reason) == (True, ["owner-edit"]), prin
    ex = engine.explain(EDIT, references(D1)[form], {}, references(BOB)[form])
    assert ex.allow and ex.reasons == ["owner-edit"]


@pytest.mark.parametrize("form", list(references(ALICE)))
def test_a_reference_principal_keeps_its_stored_parents(engine: Engine, form: str) -> None:
    # alice is in Team::"staff" in the store: a reference keeps that
    r = engine.authorize_unsigned(VIEW, default(D1), {}, references(ALICE)[form])
    assert r.response.diagnostics.reason == ["staff-view"]


def test_a_full_entity_wins_over_the_stored_one(engine: Engine) -> None:
    alice_outside = {**default(ALICE), "parents": []}
    assert engine.authorize_unsigned(VIEW, 'App::Doc::"d1"', {}, alice_outside).decision is False
    d1_public = {**default(D1), "attrs": {**default(D1)["attrs"], "public": True}}
    r = engine.authorize_unsigned(VIEW, d1_public, {}, alice_outside)
    assert r.response.diagnostics.reason == ["public-view"]


@pytest.mark.parametrize("form", list(references(EntityUID("App::Doc", "nope"))))
def test_a_reference_to_an_entity_the_store_lacks_is_an_error(engine: Engine, form: str) -> None:
    ref = references(EntityUID("App::Doc", "nope"))[form]
    with pytest.raises(RequestError, match=r'^resource: App::Doc::"nope" is a reference, but'):
        engine.authorize_unsigned(VIEW, ref, {}, 'App::User::"alice"')
    with pytest.raises(RequestError, match=r'^principal: App::User::"nope" is a reference'):
        engine.authorize_unsigned(VIEW, D1, {}, references(EntityUID("App::User", "nope"))[form])
    with pytest.raises(RequestError, match="is a reference"):
        engine.explain(VIEW, ref, {}, ALICE)
    with pytest.raises(RequestError, match="is a reference"):
        engine.authorize_multi_issuer(
            [TokenInput("App::Access_token", unverified_jwt(scope="docs:view"))], VIEW, ref
        )


@pytest.mark.parametrize("form", [*references(D1), "json", "mapped", "Entity"])
def test_the_multi_issuer_resource_takes_every_form(engine: Engine, form: str) -> None:
    value = {**references(D1), **full_forms(default(D1))}[form]
    tok = [TokenInput("App::Access_token", unverified_jwt(scope=["docs:view"]))]
    r = engine.authorize_multi_issuer(tok, VIEW, value)
    assert (r.decision, r.response.diagnostics.reason) == (True, ["token-view"])
    ex = engine.explain(VIEW, value, tokens=tok)
    assert ex.allow


# ---------------------------------------------------------------- queries


def _allowed(result: Any) -> set[tuple[str, str, str]]:
    return {
        (e["principal"]["id"], e["action"]["id"], e["resource"]["id"])
        for e in result.to_dict()["entries"]
        if e["decision"] == "allow"
    }


@pytest.mark.parametrize("form", [*references(D1), "json", "mapped", "Entity"])
def test_who_can_takes_every_form(engine: Engine, form: str) -> None:
    value = {**references(D1), **full_forms(default(D1))}[form]
    got = _allowed(engine.who_can(EDIT, value, {}))
    assert got == {("bob", "edit", "d1")}


@pytest.mark.parametrize("form", [*references(BOB), "json", "mapped", "Entity"])
def test_what_can_takes_every_form(engine: Engine, form: str) -> None:
    value = {**references(BOB), **full_forms(default(BOB))}[form]
    got = _allowed(engine.what_can(value, None, {}))
    assert got == {("bob", "edit", "d1")}


def test_who_can_and_what_can_take_entities(engine: Engine) -> None:
    carol = {"uid": {"type": "App::User", "id": "carol"}, "attrs": {"name": "C"}, "parents": []}
    d2 = {
        "cedar_entity_mapping": {"entity_type": "App::Doc", "id": "d2"},
        "owner": {"__entity": {"type": "App::User", "id": "carol"}},
        "public": False,
    }
    # carol and d2 exist only in `entities`: references to them resolve there
    assert _allowed(engine.who_can(EDIT, 'App::Doc::"d2"', {}, entities=[carol, d2])) == {
        ("carol", "edit", "d2")
    }
    assert _allowed(
        engine.what_can({"type": "App::User", "id": "carol"}, EDIT, {}, entities=[carol, d2])
    ) == {("carol", "edit", "d2")}
    # the same queries without them: d2 is unknown (no entry is sure), carol has nothing
    assert _allowed(engine.who_can(EDIT, 'App::Doc::"d2"', {})) == set()
    assert _allowed(engine.what_can('App::User::"carol"', EDIT, {})) == set()
    # entities= lay over the store as in access_matrix: a stored entity given again wins
    bob_staff = {**default(BOB), "parents": [{"type": "App::Team", "id": "staff"}]}
    got = _allowed(engine.who_can(VIEW, D1, {}, entities=[bob_staff]))
    assert got == {("alice", "view", "d1"), ("bob", "view", "d1")}
    matrix = _allowed(engine.access_matrix({}, entities=[carol, d2, bob_staff]))
    assert ("carol", "edit", "d2") in matrix and ("bob", "view", "d1") in matrix


@pytest.mark.parametrize("query", ["who_can", "what_can", "access_matrix"])
def test_entities_must_be_given_in_full(engine: Engine, query: str) -> None:
    call = {
        "who_can": lambda ents: engine.who_can(VIEW, D1, {}, entities=ents),
        "what_can": lambda ents: engine.what_can(ALICE, VIEW, {}, entities=ents),
        "access_matrix": lambda ents: engine.access_matrix({}, entities=ents),
    }[query]
    with pytest.raises(RequestError, match=r"^entities\[0\]: a reference adds no entity"):
        call(['App::User::"bob"'])
    with pytest.raises(RequestError, match=r"^entities\[1\]"):
        call([default(BOB), {"uid": {"type": "App::User", "id": "x"}, "attrs": {}}])
    with pytest.raises(RequestError, match="expected a list of entities"):
        call(default(BOB))


def test_queries_accept_a_reference_to_an_entity_the_store_lacks(engine: Engine) -> None:
    """A query may ask about an entity created later: its data is unknown, not an error."""
    result = engine.who_can(VIEW, {"type": "App::Doc", "id": "later"}).to_dict()
    assert result["kind"] == "who_can"
    assert {e["principal"]["id"] for e in result["entries"]} >= {"alice"}  # staff-view
