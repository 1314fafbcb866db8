"""The ``polang`` command line: authorize, validate, rules, conformance.

Commands run in-process through ``polang.cli.main`` (fast, output captured); one test
runs the installed console script to check the entry point and exit status for real.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from polang.cli import main

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "examples" / "stores" / "directory"
REQUESTS = REPO / "examples" / "requests"
READ = 'Acme::Action::"read"'
EDIT = 'Acme::Action::"edit"'

Capsys = pytest.CaptureFixture[str]


def run(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def authorize(capsys: Capsys, *extra: str, action: str = READ) -> tuple[int, str, str]:
    return run(
        capsys,
        "authorize",
        "--store",
        str(STORE),
        "--action",
        action,
        "--resource",
        str(REQUESTS / "roadmap.json"),
        *extra,
    )


def write_json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def secret_doc(tmp_path: Path) -> str:
    doc = json.loads((REQUESTS / "roadmap.json").read_text())
    doc["attrs"]["classification"] = "secret"
    return write_json(tmp_path / "secret.json", doc)


# ---------------------------------------------------------------- authorize


def test_authorize_allow_exits_0(capsys: Capsys) -> None:
    code, out, err = authorize(capsys, "--principal", str(REQUESTS / "alice.json"))
    assert code == 0, err
    assert out.splitlines()[0] == "ALLOW"
    assert "reason: org-members-read" in out


def test_authorize_default_deny_exits_1(capsys: Capsys) -> None:
    code, out, _ = authorize(capsys, "--principal", str(REQUESTS / "alice.json"), action=EDIT)
    assert code == 1
    assert out.splitlines()[0] == "DENY"
    assert "default deny" in out


def test_authorize_deny_by_a_forbid_and_context(capsys: Capsys, tmp_path: Path) -> None:
    secret = secret_doc(tmp_path)
    base = ["--resource", secret, "--principal", str(REQUESTS / "alice.json")]
    common = ["authorize", "--store", str(STORE), "--action", READ, *base]
    code, out, _ = run(capsys, *common)
    assert code == 1 and "reason: secret-needs-corp-network" in out
    # from the office network the forbid does not apply (and alice is no owner: deny, no reason)
    code, out, _ = run(capsys, *common, "--context", str(REQUESTS / "office-network.json"))
    assert code == 1 and "secret-needs-corp-network" not in out and "default deny" in out


def test_authorize_reports_policy_errors(capsys: Capsys) -> None:
    code, out, _ = authorize(capsys)  # no principal: owner-full-access reads it
    assert code == 1
    assert "error in owner-full-access" in out


def test_authorize_json(capsys: Capsys) -> None:
    code, out, _ = authorize(capsys, "--principal", str(REQUESTS / "alice.json"), "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"decision", "request_id", "response"}
    assert data["decision"] is True
    assert data["response"] == {
        "decision": "allow",
        "diagnostics": {"reason": ["org-members-read"], "errors": []},
    }
    code, out, _ = authorize(capsys, "--json", action=EDIT)
    assert code == 1
    data = json.loads(out)
    assert data["decision"] is False and data["response"]["decision"] == "deny"
    assert [e["policy_id"] for e in data["response"]["diagnostics"]["errors"]] == [
        "owner-full-access"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (["--resource", "/nonexistent/res.json"], "resource /nonexistent/res.json: cannot read"),
        (["--resource", "BADJSON"], "invalid JSON"),
        (["--resource", "NOATTRS"], "resource"),
        (["--context", "BADCONTEXT"], "network"),
        (["--action", 'Acme::Action:"read"'], "action"),
        (["--store", "/nonexistent/store"], "/nonexistent/store"),
        (["--token", "no-equals-sign"], "MAPPING=JWT"),
        (["--token", "Acme::Access_token=a.b.c"], "--principal and --token"),
        (["--config", "BADCONFIG"], "ENGINE_NOPE"),
    ],
    ids=[
        "missing-file",
        "bad-json",
        "bad-entity",
        "bad-context",
        "bad-action",
        "missing-store",
        "bad-token-flag",
        "principal-and-token",
        "bad-config",
    ],
)
def test_authorize_errors_exit_2(
    capsys: Capsys, tmp_path: Path, change: list[str], expected: str
) -> None:
    files = {
        "BADJSON": tmp_path / "bad.json",
        "NOATTRS": tmp_path / "noattrs.json",
        "BADCONTEXT": tmp_path / "ctx.json",
        "BADCONFIG": tmp_path / "config.json",
    }
    files["BADJSON"].write_text('{"uid": {"type": "Acme::Document",\n "id": }}')
    write_json(files["NOATTRS"], {"uid": {"type": "Acme::Document", "id": "x"}})
    write_json(files["BADCONTEXT"], {"network": 42})
    write_json(files["BADCONFIG"], {"ENGINE_NOPE": 1})
    args = {
        "--store": str(STORE),
        "--action": READ,
        "--resource": str(REQUESTS / "roadmap.json"),
        "--principal": str(REQUESTS / "alice.json"),
    }
    flag, value = change
    args[flag] = str(files[value]) if value in files else value
    argv = ["authorize"] + [x for kv in args.items() for x in kv]
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert out == ""
    assert err.startswith("error: ")
    assert expected in err, err
    if value == "BADJSON":
        assert f"{files['BADJSON']}:2:8" in err


# A store for multi-issuer requests with signature validation off (no network needed).
MI_SCHEMA = """namespace Shop {
    type Url = { "host": String, "path": String, "protocol": String };
    entity TrustedIssuer = { "issuer_entity_id": Url };
    entity Access_token = {
        "token_type"?: String, "jti"?: String, "iss"?: TrustedIssuer,
        "exp"?: Long, "validated_at"?: Long,
    } tags Set<String>;
    type TokensContext = { "total_token_count": Long, "shop_access_token"?: Access_token };
    entity Item = { "price": Long };
    action "buy" appliesTo {
        principal: [Item], resource: [Item], context: { "tokens"?: TokensContext },
    };
}
"""
MI_POLICY = """@id("buyers")
permit (principal, action == Shop::Action::"buy", resource)
when {
    context has tokens.shop_access_token &&
    context.tokens.shop_access_token.hasTag("scope") &&
    context.tokens.shop_access_token.getTag("scope").contains("buy")
};
"""


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _jwt(**claims: Any) -> str:
    body = {"iss": "https://idp.shop.test", "jti": "t1", "exp": int(time.time()) + 600, **claims}
    return f"{_b64({'alg': 'RS256', 'typ': 'JWT'})}.{_b64(body)}.c2ln"


def test_authorize_with_tokens(capsys: Capsys, tmp_path: Path) -> None:
    store = tmp_path / "shop"
    (store / "policies").mkdir(parents=True)
    (store / "trusted-issuers").mkdir()
    (store / "schema.polangschema").write_text(MI_SCHEMA)
    (store / "policies" / "p.polang").write_text(MI_POLICY)
    write_json(
        store / "metadata.json",
        {
            "polang_version": "4.0.0",
            "policy_store": {
                "id": "shop",
                "name": "Shop",
                "version": "1.0.0",
                "created_date": "2025-01-01T00:00:00Z",
                "updated_date": "2025-01-01T00:00:00Z",
            },
        },
    )
    write_json(
        store / "trusted-issuers" / "idp.json",
        {
            "idp": {
                "name": "Shop",
                "openid_configuration_endpoint": "https://idp.shop.test/.well-known/openid-configuration",
                "token_metadata": {"access_token": {"entity_type_name": "Shop::Access_token"}},
            }
        },
    )
    config = write_json(
        tmp_path / "config.json",
        {"ENGINE_JWT_SIG_VALIDATION": "disabled", "ENGINE_JWT_STATUS_VALIDATION": "disabled"},
    )
    resource = write_json(
        tmp_path / "item.json", {"uid": {"type": "Shop::Item", "id": "i"}, "attrs": {"price": 1}}
    )
    good = _jwt(scope=["buy"])
    expired = _jwt(jti="old", exp=1000)
    argv = ["authorize", "--store", str(store), "--action", 'Shop::Action::"buy"']
    argv += ["--resource", resource, "--config", config]
    code, out, err = run(
        capsys,
        *argv,
        "--token",
        f"Shop::Access_token={good}",
        "--token",
        f"Shop::Access_token={expired}",
    )
    assert code == 0, err
    assert "ALLOW" in out and "reason: buyers" in out
    assert "dropped token 1 (Shop::Access_token): expired" in out
    assert good not in out and expired not in out

    code, out, _ = run(capsys, *argv, "--token", f"Shop::Access_token={good}", "--json")
    assert code == 0 and json.loads(out)["dropped_tokens"] == []
    code, out, err = run(capsys, *argv, "--token", f"Shop::Access_token={expired}")
    assert code == 2 and "expired" in err and expired not in err


def test_console_script(tmp_path: Path) -> None:
    exe = shutil.which("polang", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the polang console script is not installed next to this interpreter")
    base = [exe, "authorize", "--store", str(STORE), "--resource", str(REQUESTS / "roadmap.json")]
    alice = ["--principal", str(REQUESTS / "alice.json")]
    allow = subprocess.run([*base, "--action", READ, *alice], capture_output=True, text=True)
    deny = subprocess.run([*base, "--action", EDIT, *alice], capture_output=True, text=True)
    assert (allow.returncode, deny.returncode) == (0, 1), (allow.stderr, deny.stderr)
    assert "ALLOW" in allow.stdout and "DENY" in deny.stdout


# ---------------------------------------------------------------- validate


def test_validate_a_good_store(capsys: Capsys) -> None:
    code, out, _ = run(capsys, "validate", str(STORE))
    assert code == 0 and out.strip() == "valid"


def _copy_store(tmp_path: Path, extra_policy: str) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(STORE, dest)
    (dest / "policies" / "extra.polang").write_text(extra_policy)
    return dest


BAD = """@id("bad-attr")
permit (principal is Acme::User, action == Acme::Action::"read", resource is Acme::Document)
when { principal.salary > 10 };
"""


def test_validate_a_bad_store(capsys: Capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "validate", str(_copy_store(tmp_path, BAD)))
    assert code == 1
    assert "salary" in out and "bad-attr" in out
    assert out.splitlines()[-1] == "1 finding(s)"


def test_validate_loose_files_with_a_schema(capsys: Capsys, tmp_path: Path) -> None:
    good = tmp_path / "good.polang"
    shutil.copy(STORE / "policies" / "documents.polang", good)
    bad = tmp_path / "bad.polang"
    bad.write_text(BAD)
    schema = str(STORE / "schema.polangschema")
    assert run(capsys, "validate", "--schema", schema, str(good))[:2] == (0, "valid\n")
    code, out, _ = run(capsys, "validate", "--schema", schema, str(good), str(bad))
    assert code == 1 and "salary" in out


def test_validate_errors_exit_2(capsys: Capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path / "missing"))
    assert code == 2 and "missing" in err
    broken = _copy_store(tmp_path, '@id("x") permit (principal, action, resource) when {')
    code, _, err = run(capsys, "validate", str(broken))
    assert code == 2 and "extra.polang" in err


# ---------------------------------------------------------------- rules


def test_rules_prints_the_lowered_program(capsys: Capsys) -> None:
    code, out, _ = run(
        capsys,
        "rules",
        str(STORE / "policies" / "guards.polang"),
        "--schema",
        str(STORE / "schema.polangschema"),
    )
    assert code == 0
    for line in (
        "% policy secret-needs-corp-network",
        'policy("secret-needs-corp-network").',
        'effect("secret-needs-corp-network", "forbid").',
        'policy("public-read-with-token").',
        'effect("public-read-with-token", "permit").',
    ):
        assert line in out.splitlines(), line
    assert 'get_attr(A1, "classification")' in out
    assert 'has_attr(A1, "network")' in out
    assert out.count("scope(") >= 2 and out.count("cond(") >= 2
    assert 'action(Acme::Action::"read")' in out


def test_rules_reports_a_parse_error(capsys: Capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.polang"
    bad.write_text("permit (principal, action, resource) when { 1 + };\n")
    code, _, err = run(capsys, "rules", str(bad))
    assert code == 2 and f"{bad}:1:" in err


# ---------------------------------------------------------------- conformance


def _pack(root: Path, requests: list[dict[str, Any]], should_validate: bool = True) -> Path:
    tests = root / "corpus-tests"
    tests.mkdir(parents=True)
    name = "0000feed"
    (tests / f"{name}.polangschema").write_text(
        'entity User; entity Doc = { "public": Bool };\n'
        'action "read" appliesTo { principal: [User], resource: [Doc] };\n'
    )
    (tests / f"{name}.polang").write_text(
        'permit (principal, action == Action::"read", resource) when { resource.public };\n'
        'forbid (principal == User::"mallory", action, resource);\n'
    )
    write_json(
        tests / f"{name}.entities.json",
        [
            {"uid": {"type": "User", "id": "alice"}, "attrs": {}, "parents": []},
            {"uid": {"type": "Doc", "id": "open"}, "attrs": {"public": True}, "parents": []},
            {"uid": {"type": "Doc", "id": "closed"}, "attrs": {"public": False}, "parents": []},
        ],
    )
    write_json(
        tests / f"{name}.json",
        {
            "policies": f"corpus-tests/{name}.polang",
            "entities": f"corpus-tests/{name}.entities.json",
            "schema": f"corpus-tests/{name}.polangschema",
            "shouldValidate": should_validate,
            "requests": requests,
        },
    )
    return root


def _req(principal: str, doc: str, decision: str, reason: list[str]) -> dict[str, Any]:
    return {
        "description": f"{principal} reads {doc}",
        "principal": {"type": "User", "id": principal},
        "action": {"type": "Action", "id": "read"},
        "resource": {"type": "Doc", "id": doc},
        "context": {},
        "validateRequest": True,
        "decision": decision,
        "reason": reason,
        "errors": [],
    }


def test_conformance_on_a_tiny_pack(capsys: Capsys, tmp_path: Path) -> None:
    pack = _pack(
        tmp_path / "pack",
        [
            _req("alice", "open", "allow", ["policy0"]),
            _req("alice", "closed", "deny", []),
            _req("mallory", "open", "deny", ["policy1"]),
        ],
    )
    code, out, _ = run(capsys, "conformance", str(pack))
    assert code == 0, out
    summary = json.loads(out.splitlines()[-1])
    assert summary == {
        "files": 1,
        "requests": 3,
        "decisions_ok": 3,
        "reasons_ok": 3,
        "errors_ok": 3,
        "validation_ok": 1,
        "failed_requests": 0,
    }
    code, out, _ = run(capsys, "conformance", str(pack), "--backend", "pydatalog")
    assert code == 0 and json.loads(out.splitlines()[-1])["decisions_ok"] == 3


def test_conformance_reports_failures(capsys: Capsys, tmp_path: Path) -> None:
    pack = _pack(
        tmp_path / "pack",
        [
            _req("alice", "open", "allow", ["policy0"]),
            _req("alice", "closed", "allow", ["policy0"]),  # wrong on purpose
        ],
        should_validate=False,  # wrong on purpose: the policies validate
    )
    code, out, _ = run(capsys, "conformance", str(pack))
    assert code == 1
    assert "alice reads closed" in out and "expected allow" in out
    assert "shouldValidate=False" in out
    summary = json.loads(out.splitlines()[-1])
    assert summary["failed_requests"] == 1 and summary["decisions_ok"] == 1
    assert summary["validation_ok"] == 0
    code, out, _ = run(capsys, "conformance", str(pack), "--no-validation")
    assert "shouldValidate" not in out and json.loads(out.splitlines()[-1])["validation_ok"] is None


def test_conformance_reads_a_packed_corpus(capsys: Capsys, tmp_path: Path) -> None:
    """``../shared/conformance`` holds the pack as a .tar.gz: the archive, or a directory
    with only the archive in it, is extracted for the run."""
    import tarfile

    pack = _pack(tmp_path / "pack", [_req("alice", "open", "allow", ["policy0"])])
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    archive = shelf / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack / "corpus-tests", arcname="corpus-tests")
    for where in (archive, shelf):
        code, out, _ = run(capsys, "conformance", str(where))
        assert code == 0, out
        assert json.loads(out.splitlines()[-1])["decisions_ok"] == 1
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tar archive")
    code, _, err = run(capsys, "conformance", str(broken))
    assert code == 2 and "broken.tar.gz" in err and "cannot extract" in err


def test_conformance_on_an_empty_or_missing_directory_is_an_error(
    capsys: Capsys, tmp_path: Path
) -> None:
    code, _, err = run(capsys, "conformance", str(tmp_path / "no-such-pack"))
    assert code == 2 and "no-such-pack" in err


def test_authorize_store_flag_overrides_the_config_file_store(
    capsys: Capsys, tmp_path: Path
) -> None:
    config = write_json(
        tmp_path / "deploy.json",
        {"ENGINE_POLICY_STORE_URI": "https://pdp.example.com/store.parc", "ENGINE_LOG_TYPE": "off"},
    )
    code, out, err = authorize(
        capsys, "--principal", str(REQUESTS / "alice.json"), "--config", config
    )
    assert code == 0, err
    assert out.splitlines()[0] == "ALLOW"


def test_explain_takes_single_entity_files(capsys: Capsys) -> None:
    repo = Path(__file__).resolve().parent.parent
    code, out, _ = run(
        capsys,
        "explain",
        "--store",
        str(repo / "examples/stores/directory"),
        "--entities",
        str(repo / "examples/requests/alice.json"),
        str(repo / "examples/requests/roadmap.json"),
        "--principal",
        'Acme::User::"alice"',
        "--action",
        'Acme::Action::"edit"',
        "--resource",
        'Acme::Document::"roadmap"',
    )
    assert code == 1  # deny, as `polang authorize`
    assert "DENY" in out
    assert "principal.clearance >= 3" in out
