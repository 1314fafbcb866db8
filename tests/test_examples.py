"""The runnable examples run as a user would run them, and say what they should."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def run_example(script: Path, *args: str, cwd: Path) -> list[str]:
    """Run ``script`` from ``cwd`` (not the repo root: examples must find their own files)."""
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


def test_unsigned_example(tmp_path: Path) -> None:
    lines = run_example(EXAMPLES / "unsigned.py", cwd=tmp_path)
    assert lines[0] == "store acme-docs version 1.2.0"
    decisions = [line for line in lines if re.match(r"^(ALLOW|DENY) ", line)]
    assert decisions == [
        "ALLOW  alice reads the roadmap  [org-members-read]",
        "DENY   alice edits the roadmap (clearance 2)",
        "ALLOW  alice with clearance 3 edits it  [cleared-editors]",
        "ALLOW  alice deletes her own document  [owner-full-access]",
        "DENY   alice reads a secret document  [secret-needs-corp-network]",
        "DENY   ... from the corporate network",
        "ALLOW  alice's own secret document, corp network  [owner-full-access]",
        "DENY   no principal reads the roadmap",
    ]
    assert "       error in owner-full-access: the request has no principal" in lines
    rejected = [line for line in lines if line.startswith("rejected: ")]
    assert len(rejected) == 3
    assert "$.resource.attrs.public" in rejected[0] and "Bool" in rejected[0]
    assert "Acme::Org" in rejected[1]
    assert 'Acme::Action::"archive"' in rejected[2]


def test_multi_issuer_example(tmp_path: Path) -> None:
    store = tmp_path / "kept-store"
    lines = run_example(
        EXAMPLES / "multi_issuer" / "run.py", "--store-dir", str(store), cwd=tmp_path
    )
    providers = re.fullmatch(
        r"providers: (https://localhost:\d+/acme) \(RS256\), "
        r"(https://localhost:\d+/partner) \(ES256\)",
        lines[0],
    )
    assert providers, lines[0]
    assert lines[1] == f"store: {store}"
    decisions = [line for line in lines if re.match(r"^(ALLOW|DENY) ", line)]
    assert decisions == [
        "ALLOW  read with the docs:read scope  [read-with-scope]",
        "DENY   read with only the profile scope",
        "DENY   read a secret document without MFA  [secret-needs-mfa]",
        "ALLOW  read a secret document with MFA  [read-with-scope]",
        "ALLOW  partner reviewer comments  [partner-reviewers-comment]",
        "DENY   partner viewer comments",
        "ALLOW  three tokens, two of them bad: the good one decides  [partner-reviewers-comment]",
    ]
    dropped = [line.strip() for line in lines if line.strip().startswith("dropped token")]
    assert len(dropped) == 2
    assert dropped[0].startswith("dropped token 0 (Acme::Access_token): expired: ")
    assert dropped[1].startswith("dropped token 1 (Partner::Access_token): signature: ")
    assert lines[-1].startswith("rejected: no valid token left: token 0 (Acme::Access_token)")
    assert "not_yet_valid" in lines[-1]

    # the store it wrote: two issuers pointing at the providers, three token types
    issuers = json.loads((store / "trusted-issuers" / "issuers.json").read_text())
    assert issuers["acme"]["openid_configuration_endpoint"] == (
        f"{providers.group(1)}/.well-known/openid-configuration"
    )
    assert issuers["partner"]["openid_configuration_endpoint"].startswith(providers.group(2))
    types = sorted(
        tm["entity_type_name"] for i in issuers.values() for tm in i["token_metadata"].values()
    )
    assert types == ["Acme::Access_token", "Acme::Id_token", "Partner::Access_token"]
    policies = (store / "policies" / "documents.polang").read_text()
    assert ".hasTag(" in policies and ".getTag(" in policies


def readme_blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_readme_python_snippet_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python snippet, run as a user pastes it (from the repository root)."""
    (snippet,) = readme_blocks("python")
    monkeypatch.chdir(REPO)
    ns: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(snippet, "README.md", "exec"), ns)
    result: Any = ns["result"]
    engine: Any = ns["engine"]
    try:
        assert result.decision is True
        assert result.response.diagnostics.reason == ["org-members-read"]
        assert (
            "org-members-read"
            in engine.explain(ns["action"], ns["resource"], {}, ns["principal"]).render()
        )
        who: Any = ns["who"]  # answers what its comment says (it once answered nothing)
        assert [str(p) for p in who.principals] == ['Acme::User::"alice"']
        assert [e.reasons for e in who.entries] == [("org-members-read",)]
    finally:
        engine.close()


def test_readme_first_command_is_the_one_ci_checks() -> None:
    """CI runs the README's first command from a fresh install of the built wheel
    (.ci/run): it must stay an install followed by ``.venv/bin/polang``."""
    first = readme_blocks("sh")[0].strip()
    assert "\n" not in first
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install")
    assert " && .venv/bin/polang authorize " in first


def test_ci_runs_the_readme_test_command_as_written() -> None:
    """The README says its second command is what CI runs: .ci/run holds it verbatim."""
    command = readme_blocks("sh")[1].strip()
    assert command.endswith(".venv/bin/python -m pytest")
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8")


WEB_ANSWERS = [
    "200  GET  /health                    no token needed",
    '401  GET  /documents/plan            no token             Bearer realm="docs"',
    "200  GET  /documents/plan            docs:read scope      [read-with-scope]",
    "403  GET  /documents/plan            profile scope only   forbidden",
    "403  GET  /documents/vault           secret, no MFA       forbidden",
    "200  GET  /documents/vault           secret, with MFA     [read-with-scope]",
    "200  POST /documents/plan/comments   partner reviewer     [partner-reviewers-comment]",
    '401  GET  /documents/plan            expired token        Bearer realm="docs", '
    'error="invalid_token", error_description="no valid token (expired)"',
    "404  GET  /documents/nope            no such row          not_found",
    '401  GET  /documents/plan            not Bearer           Bearer realm="docs"',
    "200  GET  /documents                 docs:read scope      minutes, plan, handbook",
    "200  GET  /documents?limit=2         docs:read scope      minutes, plan",
    "200  GET  /documents                 secret, with MFA     "
    "vault, minutes, plan, audit, handbook",
    "200  GET  /documents                 profile scope only   (none)",
    '401  GET  /documents                 no token             Bearer realm="docs"',
    "all  GET  /documents/<id>            docs:read scope      "
    "plan 200, vault 403, handbook 200, audit 403, minutes 200",
    "all  GET  /documents/<id>            secret, with MFA     "
    "plan 200, vault 200, handbook 200, audit 200, minutes 200",
    "all  GET  /documents/<id>            profile scope only   "
    "plan 403, vault 403, handbook 403, audit 403, minutes 403",
]


def check_lists_against_rows(lines: list[str], rows: dict[str, dict[str, Any]]) -> None:
    """Each caller's list (``GET /documents``) is, row for row, the rows the single-document
    endpoint allows that caller, newest first (a page of ``limit`` is its beginning)."""
    newest = sorted(sorted(rows), key=lambda i: rows[i]["created"], reverse=True)  # then by id
    allowed: dict[str, set[str]] = {}
    lists: list[tuple[str, int | None, list[str]]] = []
    for line in lines:
        what, rest = line[37:57].strip(), line[58:]
        if line.startswith("all  GET  /documents/<id> "):
            answers = dict(pair.split(" ") for pair in rest.split(", "))
            assert sorted(answers) == sorted(rows)
            allowed[what] = {i for i, status in answers.items() if status == "200"}
        elif m := re.match(r"200  GET  /documents(?:\?limit=(\d+))? ", line):
            ids = [] if rest == "(none)" else rest.split(", ")
            lists.append((what, int(m.group(1)) if m.group(1) else None, ids))
    assert len(allowed) == 3 and len(lists) == 4
    assert len({frozenset(a) for a in allowed.values()}) == 3  # three callers, three rights
    for what, limit, ids in lists:
        assert ids == [i for i in newest if i in allowed[what]][:limit], what


@pytest.mark.parametrize(
    ("app", "server"),
    [("fastapi_app", "uvicorn"), ("flask_app", "werkzeug"), ("django_app", "wsgiref")],
)
def test_web_framework_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, app: str, server: str
) -> None:
    """Each framework example serves its app on loopback and answers real requests with
    multi-issuer tokens from the loopback providers: the same answers in all three. Its
    list endpoint lists, for three callers, exactly the rows its single-document endpoint
    lets each read."""
    lines = run_example(EXAMPLES / app / "app.py", cwd=tmp_path)
    assert re.fullmatch(rf"serving on http://127\.0\.0\.1:\d+ \({server}\)", lines[0]), lines[0]
    assert lines[1:] == WEB_ANSWERS
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from web_demo import ROWS  # the example's table, as it created it

    check_lists_against_rows(lines[1:], ROWS)


def test_web_list_page_size_takes_any_query_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The web examples' ``?limit=``: absent or not a number is the default page, a number
    is clamped to 1..MAX_PAGE, never a crash (``int`` of a huge or non-ASCII digit string)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from web_demo import MAX_PAGE, PAGE, page_size

    cases = {None: PAGE, "": PAGE, "7": 7, "0": 1, "1000": MAX_PAGE, "9" * 5000: MAX_PAGE}
    cases |= {"-1": PAGE, "²": PAGE, "١٢": PAGE, "2 ": PAGE, "1e3": PAGE, "0x10": PAGE}
    assert {raw: page_size(raw) for raw in cases} == cases


def test_lock_example(tmp_path: Path) -> None:
    """examples/lock/fleet.py: an engine whose store and audit live on a Lock server."""
    lines = run_example(EXAMPLES / "lock" / "fleet.py", cwd=tmp_path)
    assert lines[1] == "store acme-docs version 1.2.0, fetched by id"
    assert lines[2] == "registered as 'polang documents-api': client-1"
    assert lines[3:5] == ["ALLOW  alice reads the roadmap", "DENY   alice edits the roadmap"]
    assert "events handled: {'CONFIG_UPDATE': 1, 'FORCE_REPORT': 1}" in lines
    assert (
        'lock got a decision: DENY Acme::Action::"edit" on Acme::Document::"roadmap" by '
        'Acme::User::"alice"'
    ) in lines
    assert "lock got telemetry: 2 decisions counted" in lines
