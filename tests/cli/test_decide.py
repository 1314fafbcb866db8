"""``polang authorize``: in-process through ``main``; one test runs the installed console
script to check the entry point and exit status for real."""

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

from .helpers import (
    EDIT,
    READ,
    REQUESTS,
    STORE,
    Capsys,
    authorize,
    run,
    secret_doc,
    write_json,
)

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
        (
            ["--resource", "/nonexistent/res.json"],
            "--resource '/nonexistent/res.json': no such file",
        ),
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
