"""The public API audited end to end: hostile input and Cedarling/spec compatibility.

Each test replays one finding as an attacker or a new user would: through
``polang.Engine`` (and the ``polang`` CLI), against real loopback HTTPS providers with
certificates made here. The limits table of ``docs/security.md`` is checked against the
code (every constant and property it names exists with its documented default).
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import polang
from polang import Engine, TokenError, TokenInput
from polang.errors import MAX_MESSAGE_CHARS, PolangError, PolicyStoreError, RequestError
from tokens.oidc_server import OidcProvider, blocked, body, redirect
from tokens.test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, issuers_for, write_store

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "examples" / "stores" / "directory"
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
ROADMAP = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())
EXAMPLE_READ = 'Acme::Action::"read"'
#: what bound_message may add past MAX_MESSAGE_CHARS ("... (N more characters; ...)")
SUFFIX = 60


# ---------------------------------------------------------------- loopback providers


@pytest.fixture
def engine_for(
    tmp_path: Path, server_ssl_context: ssl.SSLContext, client_ssl_context: ssl.SSLContext
) -> Iterator[Callable[..., tuple[Engine, OidcProvider]]]:
    """An Engine over a directory store trusting two loopback providers; returns acme."""
    started: list[OidcProvider] = []
    engines: list[Engine] = []

    def make(
        routes: dict[str, Any] | None = None, acme_endpoint: str | None = None, **props: Any
    ) -> tuple[Engine, OidcProvider]:
        acme = OidcProvider(server_ssl_context, prefix="/realms/acme")
        acme.add_key("RS256")
        partner = OidcProvider(server_ssl_context, prefix="/partner")
        partner.add_key("EdDSA")
        for p in (acme, partner):
            p.start()
            started.append(p)
        issuers = issuers_for(acme, partner)
        if acme_endpoint is not None:
            issuers["acme"]["openid_configuration_endpoint"] = acme.url(acme_endpoint)
        for path, handler in (routes or {}).items():
            acme.routes[acme.url(path)[len(acme.base) :] if path.startswith("/") else path] = (
                handler
            )
        store = write_store(tmp_path / f"store{len(engines)}", SCHEMA, issuers)
        cfg = {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            **props,
        }
        engine = Engine(cfg, ssl_context=client_ssl_context)
        engines.append(engine)
        return engine, acme

    yield make
    for e in engines:
        e.close()
    for p in started:
        p.stop()


def dropped(engine: Engine, *tokens: str) -> list[tuple[str, str]]:
    """(kind, message) of each token; all must be dropped, in a TokenError."""
    with pytest.raises(TokenError) as e:
        engine.authorize_multi_issuer([TokenInput(ACCESS, t) for t in tokens], READ, doc())
    return [(r["reason"]["kind"], r["reason"]["message"]) for r in e.value.reasons]


def b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(payload: dict[str, Any], kid: str = "nope") -> str:
    head = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    return f"{head}.{b64(json.dumps(payload).encode())}.c2ln"


# ---------------------------------------------------------------- issue 11: tokens, fetches


@pytest.mark.parametrize("which", ["discovery", "jwks"])
def test_deep_provider_document_through_the_engine_is_a_drop(
    engine_for: Callable[..., tuple[Engine, OidcProvider]], which: str
) -> None:
    engine, acme = engine_for()
    path = acme.discovery_path if which == "discovery" else acme.jwks_path
    acme.routes[path] = body(b"[" * 100_000)
    [(kind, message)] = dropped(engine, acme.token())
    assert "deeper than the limit of 128 levels" in message, (kind, message)
    assert sys.getrecursionlimit() == 1000


def test_forged_iss_with_a_custom_discovery_path_cannot_multiply_fetches(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    """The endpoint does not end in /.well-known/openid-configuration (the issue's case)."""
    custom = "/realms/acme/custom/config"
    engine, acme = engine_for(acme_endpoint=custom)
    acme.routes[custom] = lambda h: acme.serve_discovery(h)
    tokens = [forged({"iss": f"https://evil{i}.example/{uuid.uuid4().hex}"}) for i in range(50)]
    tokens += [forged({"iss": acme.issuer, "exp": 2**40}, kid=uuid.uuid4().hex) for _ in range(50)]
    for t in tokens:
        dropped(engine, t)
    assert 1 <= acme.requests[custom] <= 1, acme.requests  # fetched once, then cooled down
    assert 1 <= acme.requests[acme.jwks_path] <= 2, acme.requests


def test_exp_outside_long_is_a_drop_through_the_engine(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    engine, acme = engine_for()
    [(kind, message)] = dropped(engine, acme.token(exp=10**20))
    assert "Long" in message, (kind, message)


def test_token_size_limit_is_configurable_and_names_itself(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    engine, acme = engine_for(ENGINE_TOKEN_MAX_SIZE=1000)
    [(kind, message)] = dropped(engine, acme.token(pad="x" * 2000))
    assert "ENGINE_TOKEN_MAX_SIZE (1000)" in message, (kind, message)
    [(kind, message)] = dropped(engine, acme.token()[:-4] + "\u00e9\u00e9\u00e9\u00e9")
    assert "ASCII" in message, (kind, message)


# ---------------------------------------------------------------- issue 11: requests, entities


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})
    yield e
    e.close()


def deep_list(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


def test_deep_context_in_access_matrix_names_the_limit(engine: Engine) -> None:
    with pytest.raises(RequestError, match="MAX_JSON_DEPTH"):
        engine.access_matrix({"zz": deep_list(5000)})


@pytest.mark.parametrize("query", ["who_can", "access_matrix"])
def test_parnets_in_query_entities_is_an_error(engine: Engine, query: str) -> None:
    bad = {k: v for k, v in ALICE.items() if k != "parents"} | {"parnets": ALICE["parents"]}
    with pytest.raises(RequestError, match='did you mean "parents"'):
        if query == "who_can":
            engine.who_can(EXAMPLE_READ, ROADMAP, entities=[bad])
        else:
            engine.access_matrix(entities=[bad])


def test_messages_quoting_request_input_stay_bounded(engine: Engine) -> None:
    huge = {"uid": {"type": "A::" * 50_000 + "B", "id": "x"}, "attrs": {}}
    with pytest.raises(PolangError) as e:
        engine.authorize_unsigned(EXAMPLE_READ, huge, {}, ALICE)
    assert len(str(e.value)) <= MAX_MESSAGE_CHARS + SUFFIX


# ---------------------------------------------------------------- issue 11: stores via Engine()

P = '@id("p") permit(principal, action, resource) when {{ {} }};'
STORE_ATTACKS = {
    "schema just t": ({"schema.polangschema": "t"}, "schema.polangschema:1:1"),
    "schema entitty": ({"schema.polangschema": "entitty A;"}, "did you mean `entity`"),
    "Set< x10000": (
        {"schema.polangschema": "entity A = {a: " + "Set<" * 10_000 + "Long" + ">" * 10_000 + "};"},
        "MAX_SCHEMA_TYPE_DEPTH",
    ),
    "2000 chained common types": (
        {
            "schema.polangschema": "".join(f"type T{i} = T{i + 1};\n" for i in range(2000))
            + "type T2000 = Long; entity A = {a: T0};"
        },
        "MAX_SCHEMA_TYPE_DEPTH",
    ),
    "has a.a.a x 10000": (
        {"policies/p.polang": P.format("context has " + ".".join(["a"] * 10_000))},
        "MAX_EXPRESSION_DEPTH",
    ),
    "5000-term + chain": (
        {"policies/p.polang": P.format("+".join(["1"] * 5000) + " == 1")},
        "MAX_EXPRESSION_DEPTH",
    ),
    "5000-digit literal": (
        {"policies/p.polang": P.format("9" * 5000 + " == 1")},
        "does not fit in 64 bits",
    ),
}


@pytest.mark.parametrize("name", list(STORE_ATTACKS))
def test_hostile_store_texts_are_refused_by_engine_naming_the_cause(
    tmp_path: Path, name: str
) -> None:
    files, expected = STORE_ATTACKS[name]
    root = tmp_path / "store"
    shutil.copytree(STORE, root)
    if any(f.startswith("policies/") for f in files):
        for f in (root / "policies").iterdir():
            f.unlink()
    for rel, text in files.items():
        (root / rel).write_text(text)
    limit = sys.getrecursionlimit()
    with pytest.raises(PolicyStoreError) as e:
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root)})
    assert expected in str(e.value)
    assert len(str(e.value)) <= MAX_MESSAGE_CHARS + SUFFIX
    assert sys.getrecursionlimit() == limit


# ---------------------------------------------------------------- issue 11: the CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polang", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_deep_and_misspelt_request_files_are_clear_errors(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"uid": {"type": "Acme::User", "id": "a"}, "attrs": {"x": ' + "[" * 50_000)
    parnets = tmp_path / "parnets.json"
    bad = {k: v for k, v in ALICE.items() if k != "parents"} | {"parnets": ALICE["parents"]}
    parnets.write_text(json.dumps(bad))
    resource = str(REPO / "examples" / "requests" / "roadmap.json")
    for principal, expected in ((deep, "128"), (parnets, "parnets")):
        r = run_cli(
            "authorize", "--store", str(STORE), "--action", EXAMPLE_READ,
            "--resource", resource, "--principal", str(principal),
        )  # fmt: skip
        out = r.stdout + r.stderr
        assert r.returncode not in (0, 1) or "deny" not in out.lower() or expected in out
        assert "Traceback" not in out, out[-2000:]
        assert expected in out, out[-2000:]
        assert r.returncode != 0


# ---------------------------------------------------------------- docs/security.md's limits

DOC_CONSTANTS = {
    "polang.errors.MAX_MESSAGE_CHARS": 4000,
    "polang.jsonlimits.MAX_JSON_DEPTH": 128,
    "polang.http.MAX_REDIRECTS": 5,
    "polang.tokens.issuers.MAX_JWKS_KEYS": 100,
    "polang.tokens.issuers.MIN_RSA_KEY_BITS": 2048,
    "polang.tokens.issuers.MAX_RSA_KEY_BITS": 16384,
    "polang.tokens.issuers.MAX_RSA_EXPONENT_BITS": 64,
    "polang.tokens.issuers.MIN_HMAC_KEY_BITS": 256,
    "polang.tokens.status_list.MAX_STATUS_LISTS": 1024,
    "polang.tokens.model.MAX_DROP_MESSAGE": 1000,
    "polang.tokens.claim_regex.MAX_MAPPED_CLAIM_CHARS": 4096,
    "polang.tokens.claims.MAX_SCOPES": 1000,
    "polang.tokens.claims.MAX_SCOPE_CHARS": 65_536,
    "polang.tokens.claim_paths.MAX_NESTED_CLAIM_TAGS": 1000,
    "polang.tokens.claim_paths.MAX_CLAIM_PATH_DEPTH": 8,
    "polang.tokens.claim_paths.MAX_CLAIM_PATH_CHARS": 256,
    "polang.store.archive.MAX_ENTRIES": 10_000,
    "polang.store.remote.MAX_VALIDATOR_CHARS": 1024,
    "polang.engine.data.MAX_DATA_KEY_CHARS": 256,
    "polang.engine.health.MAX_EVENT_REASON_CHARS": 1000,
    "polang.store.archive.MAX_UNCOMPRESSED": 100 * 1024 * 1024,
    "polang.store.raw.MAX_YAML_DEPTH": 128,
    "polang.store.errors.MAX_PROBLEMS": 200,
    "polang.store.errors.MAX_LISTED_PROBLEMS": 20,
    "polang.store.fields.MAX_QUOTED_CHARS": 80,
    "polang.language.parser.MAX_EXPRESSION_DEPTH": 100,
    "polang.language.parser.MAX_LITERAL_DIGITS": 19,
    "polang.language.schema.MAX_SCHEMA_TYPE_DEPTH": 32,
}

DOC_PROPERTIES = {
    "ENGINE_TOKEN_MAX_SIZE": 65_536,
    "ENGINE_HTTP_REQUEST_TIMEOUT": 10,
    "ENGINE_HTTP_MAX_RETRIES": 3,
    "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES": 10 * 1024 * 1024,
    "ENGINE_JWKS_MIN_REFRESH_INTERVAL": 30,
    "ENGINE_MAX_BASE64_SIZE": 1024 * 1024,
    "ENGINE_MAX_DEFAULT_ENTITIES": 1000,
    "ENGINE_LOG_MAX_ITEMS": 10_000,
    "ENGINE_DATA_STORE_MAX_ENTRIES": 10_000,
    "ENGINE_DATA_STORE_MAX_ENTRY_SIZE": 1024 * 1024,
    "ENGINE_DATA_STORE_MAX_TTL": 3600,
}


@pytest.mark.parametrize("dotted", list(DOC_CONSTANTS))
def test_security_md_constants_exist_with_their_documented_defaults(dotted: str) -> None:
    import importlib

    module, _, name = dotted.rpartition(".")
    assert getattr(importlib.import_module(module), name) == DOC_CONSTANTS[dotted]
    doc_text = (REPO / "docs" / "security.md").read_text()
    assert name in doc_text


@pytest.mark.parametrize("prop", list(DOC_PROPERTIES))
def test_security_md_properties_exist_with_their_documented_defaults(prop: str) -> None:
    from polang.config import Config

    cfg = Config.from_dict({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)})
    value = getattr(cfg, prop.removeprefix("ENGINE_").lower())
    assert value == DOC_PROPERTIES[prop]


def test_polang_public_names_used_here_exist() -> None:
    for name in ("Engine", "TokenInput", "TokenError"):
        assert hasattr(polang, name)


# ---------------------------------------------------------------- issue 11: more fetch paths


def test_engine_store_url_redirected_from_https_to_http_is_refused(
    server_ssl_context: ssl.SSLContext, client_ssl_context: ssl.SSLContext, tmp_path: Path
) -> None:
    archive = tmp_path / "s.parc"
    r = run_cli("store", "pack", str(STORE), "-o", str(archive))
    assert r.returncode == 0, r.stderr
    secure = OidcProvider(server_ssl_context).start()
    plain = OidcProvider(server_ssl_context, tls=False).start()
    try:
        plain.routes["/s.parc"] = body(archive.read_bytes())
        secure.routes["/s.parc"] = lambda h: redirect(plain.url("/s.parc"))(h)
        cfg = {"ENGINE_POLICY_STORE_URI": secure.url("/s.parc"), "ENGINE_HTTP_MAX_RETRIES": 0}
        with pytest.raises(PolicyStoreError, match="refused"):
            Engine(cfg, ssl_context=client_ssl_context)
        assert plain.requests["/s.parc"] == 0
    finally:
        secure.stop()
        plain.stop()


def test_a_known_key_never_waits_behind_a_forged_kid_through_the_engine(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    engine, acme = engine_for(ENGINE_HTTP_REQUEST_TIMEOUT=20, ENGINE_JWKS_MIN_REFRESH_INTERVAL=0)
    good = engine.authorize_multi_issuer([TokenInput(ACCESS, acme.token())], READ, doc())
    assert good.dropped_tokens == []  # keys known now
    release, entered = threading.Event(), threading.Event()
    acme.routes[acme.jwks_path] = blocked(release, acme.serve, entered)
    stranger = acme.add_key("RS256", kid="made-up", slot=2, publish=False)
    attacker = threading.Thread(target=lambda: dropped(engine, acme.token(key=stranger)))
    try:
        attacker.start()
        assert entered.wait(10)  # the forged kid's refetch hangs on the JWKS
        done = threading.Event()
        out: list[Any] = []

        def legit() -> None:
            out.append(
                engine.authorize_multi_issuer([TokenInput(ACCESS, acme.token())], READ, doc())
            )
            done.set()

        threading.Thread(target=legit, daemon=True).start()
        assert done.wait(10), "a token with known keys waited behind the refetch"
        assert out[0].dropped_tokens == []
    finally:
        release.set()
        attacker.join(30)


# ---------------------------------------------------------------- issue 12: Cedarling, end to end

CEDARLING_SCHEMA = """namespace Jans {
    type Url = {"host": String, "path": String, "protocol": String};
    entity TrustedIssuer = {"issuer_entity_id": Url};
    entity Access_token = {"aud"?: String, "exp"?: Long, "jti"?: String, "country"?: String}
        tags Set<String>;
    entity Application = {"name": String};
    action "Use" appliesTo {
        principal: [Application],
        resource: [Application],
        context: { tokens: { total_token_count: Long, jans_access_token?: Access_token } }
    };
    action "Read" appliesTo { principal: [Application], resource: [Application], context: {} };
}
"""

CEDARLING_POLICY = """@id("scoped-use")
permit (principal, action == Jans::Action::"Use", resource is Jans::Application)
when {
    context.tokens has jans_access_token &&
    context.tokens.jans_access_token.hasTag("scope") &&
    context.tokens.jans_access_token.getTag("scope").contains("use")
};
"""


def test_a_cedarling_form_store_decides_real_tokens_through_the_engine(
    tmp_path: Path, server_ssl_context: ssl.SSLContext, client_ssl_context: ssl.SSLContext
) -> None:
    """One issuer record per file (``configuration_endpoint``, ``id``, old ``access_tokens``
    field), metadata without timestamps, a sha1 manifest that lists itself, tokens required
    in the context, no ``iss`` in the token type, a claim that does not fit its attribute."""
    from scenarios.test_cedarling_stores import METADATA, with_manifest
    from store.storekit import write_tree

    idp = OidcProvider(server_ssl_context, prefix="/jans")
    idp.add_key("RS256")
    idp.start()
    try:
        record = {
            "id": "jans-idp",
            "name": "Jans",
            "description": "",
            "configuration_endpoint": idp.discovery_url,
            "access_tokens": {"trusted": True},
            "token_metadata": {"access_token": {"entity_type_name": "Jans::Access_token"}},
        }
        files: dict[str, str | bytes] = {
            "metadata.json": json.dumps(METADATA),
            "schema.polangschema": CEDARLING_SCHEMA,
            "policies/use.polang": CEDARLING_POLICY,
            "trusted-issuers/jans.json": json.dumps(record),
        }
        assert "updated_date" not in files["metadata.json"]
        root = write_tree(tmp_path / "store", with_manifest(files))
        assert "manifest.json" in json.loads((root / "manifest.json").read_text())["files"]
        engine = Engine(
            {"ENGINE_POLICY_STORE_LOCAL_FN": str(root), "ENGINE_HTTP_MAX_RETRIES": 0},
            ssl_context=client_ssl_context,
        )
        try:
            app = {"uid": {"type": "Jans::Application", "id": "a"}, "attrs": {"name": "A"}}
            use = 'Jans::Action::"Use"'
            token = idp.token(scope=["use"], country=["US", "CA"])
            r = engine.authorize_multi_issuer([TokenInput("Jans::Access_token", token)], use, app)
            assert (r.decision, r.dropped_tokens) == (True, []), r
            r = engine.authorize_multi_issuer(
                [TokenInput("Jans::Access_token", idp.token(scope=["other"]))], use, app
            )
            assert r.decision is False
            # an action used only unsigned, with context {}, does not break the above
            assert engine.authorize_unsigned('Jans::Action::"Read"', app, {}, app).decision is False
        finally:
            engine.close()
    finally:
        idp.stop()


def test_cli_store_validate_warns_on_unknown_fields_and_strict_refuses(tmp_path: Path) -> None:
    from scenarios.test_cedarling_stores import cedarling_files
    from store.storekit import write_tree

    root = write_tree(tmp_path / "store", cedarling_files())
    lax = run_cli("store", "validate", str(root))
    assert lax.returncode == 0, lax.stdout + lax.stderr
    assert "access_tokens" in lax.stdout + lax.stderr
    strict = run_cli("store", "validate", "--strict", str(root))
    assert strict.returncode != 0
    assert "access_tokens" in strict.stdout + strict.stderr
    assert "Traceback" not in strict.stdout + strict.stderr


def test_a_5000_digit_integer_in_an_unsigned_token_is_a_plain_drop(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    """Python's own message advised sys.set_int_max_str_digits(), a process-wide change."""
    engine, acme = engine_for()
    payload = b64(('{"iss": "' + acme.issuer + '", "exp": ' + "9" * 5000 + "}").encode())
    head = b64(b'{"alg": "RS256", "typ": "JWT"}')
    [(kind, message)] = dropped(engine, f"{head}.{payload}.c2ln")
    assert kind == "invalid_input" and "more than 4,300 digits" in message, message
    assert "set_int_max_str_digits" not in message


# ---------------------------------------------------------------- found by the audit, in engine.py
# who_can / what_can / access_matrix ``entities=`` make the two checks an entity file gets:
# one uid given twice with other data (else the list's order would decide who is allowed)
# and a cycle in the hierarchy (through the given entities and the store's).


def test_a_uid_given_twice_with_other_data_in_query_entities_is_an_error(
    engine: Engine,
) -> None:
    without_team = {**ALICE, "parents": []}
    with pytest.raises(RequestError, match="already defined"):
        engine.who_can(EXAMPLE_READ, ROADMAP, entities=[ALICE, without_team])
    # the same entity twice is a repeat, not a conflict
    engine.who_can(EXAMPLE_READ, ROADMAP, entities=[ALICE, dict(ALICE)])


def test_a_cycle_in_query_entities_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORE, root)
    schema = root / "schema.polangschema"
    schema.write_text(
        schema.read_text().replace("entity Team in [Org]", "entity Team in [Org, Team]")
    )
    cyclic = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root)})

    def team(i: str, parent: str) -> dict[str, Any]:
        return {
            "uid": {"type": "Acme::Team", "id": i},
            "attrs": {"name": i},
            "parents": [{"type": "Acme::Team", "id": parent}],
        }

    with pytest.raises(RequestError, match="cycle in the entity hierarchy"):
        cyclic.access_matrix(entities=[team("x", "y"), team("y", "x")])
    with pytest.raises(RequestError, match="cycle in the entity hierarchy"):
        cyclic.access_matrix(entities=[team("x", "x")])
    cyclic.access_matrix(entities=[team("x", "y"), team("y", "z")])  # a chain is fine


# ---------------------------------------------------------------- issue 11: store files, Engine()


@pytest.mark.timeout(30)
def test_billion_laughs_in_role_mapping_is_refused_by_engine(tmp_path: Path) -> None:
    text = (REPO / "examples" / "stores" / "legacy.yaml").read_text()
    bomb = "            role_mapping: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    bomb += "".join(
        f"            x{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
        for i in range(1, 9)
    )
    text = text.replace(
        "            role_mapping:\n            - role\n            - groups\n", bomb
    )
    assert "&a8" in text
    path = tmp_path / "store.yaml"
    path.write_text(text)
    with pytest.raises(PolicyStoreError, match="anchors") as e:
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(path)})
    assert len(str(e.value)) <= MAX_MESSAGE_CHARS + SUFFIX


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_fifo_and_outward_symlink_are_refused_by_engine(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORE, root)
    target = root / "policies" / "x.polang"
    if kind == "fifo":
        import os

        os.mkfifo(target)
    else:
        target.symlink_to("/etc/passwd")
    with pytest.raises(PolicyStoreError, match=r"x\.polang") as e:
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(root)})
    assert "root:" not in str(e.value)


def test_cli_a_huge_integer_in_a_request_file_names_no_interpreter_setting(
    tmp_path: Path,
) -> None:
    """Python's message for a too-long integer advises sys.set_int_max_str_digits() (a
    process-wide change): the CLI's request files say what is wrong in its place."""
    context = tmp_path / "big.json"
    context.write_text('{"zz": ' + "9" * 6000 + "}")
    r = run_cli(
        "authorize", "--store", str(STORE), "--action", EXAMPLE_READ,
        "--resource", str(REPO / "examples" / "requests" / "roadmap.json"),
        "--principal", str(REPO / "examples" / "requests" / "alice.json"),
        "--context", str(context),
    )  # fmt: skip
    assert r.returncode == 2 and "4,300 digits" in r.stderr
    assert "set_int_max_str_digits" not in r.stderr


# ---------------------------------------------------------------- docs/security.md: limits named


def test_security_md_jwks_key_count_and_body_size_name_themselves(
    engine_for: Callable[..., tuple[Engine, OidcProvider]],
) -> None:
    engine, acme = engine_for()
    key = acme.keys[0].jwk
    many = json.dumps({"keys": [dict(key, kid=f"k{i}") for i in range(150)]}).encode()
    acme.routes[acme.jwks_path] = body(many)
    [(_, message)] = dropped(engine, acme.token())
    assert "150 keys, more than MAX_JWKS_KEYS (100)" in message, message
    small, acme2 = engine_for(ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES=64)
    [(_, message)] = dropped(small, acme2.token())
    assert "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES" in message, message
