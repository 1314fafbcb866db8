"""The playground in headless Chromium: type a policy, see the decision and why.

The page loads Pyodide and polang from ``polang playground``'s own server (the test checks
that no other origin is asked for anything), the test types a policy key by key and
waits for the decision and the explanation to follow, then a misspelt keyword and waits
for its problem, with line and column. The screenshots are kept in
``.cache/artifacts/`` (``playground.png``, ``playground-error.png``). Skips, naming
what is missing, without node, npm, Chromium, or the network on a first run.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.wasm.toolchain import (
    PLAYWRIGHT_VERSION,
    REPO,
    chromium,
    npm_package,
    pyodide_package,
)

from polang import playground

HERE = Path(__file__).parent
ARTIFACTS = REPO / ".cache" / "artifacts"


@pytest.fixture
def url() -> Iterator[str]:
    server = playground.serve("127.0.0.1", 0, pyodide_package())
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/"
    server.shutdown()
    server.server_close()


def test_typing_a_policy_shows_the_decision_and_why(url: str) -> None:
    browser = chromium()
    driver = npm_package("playwright-core", PLAYWRIGHT_VERSION, "index.mjs")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["node", str(HERE / "browser.mjs"), str(driver), browser, url, str(ARTIFACTS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("POLANG-RESULT ")]
    assert proc.returncode == 0 and lines, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1][len("POLANG-RESULT ") :])

    first = out["first"]  # the sample: alice's clearance 2 is below the plan's level 3
    assert first["decision"] == "DENY"
    assert 'permit "cleared-read"' in first["explanation"]
    assert "principal.clearance >= resource.level" in first["explanation"]
    assert any("clearance = 3" in r for r in first["repairs"])
    assert first["who_can"] == ['Docs::User::"bob"']

    after = out["after"]  # the typed policy decides
    assert after["decision"] == "ALLOW"
    assert after["reasons"].startswith("determined by alice-reads")
    assert 'permit "alice-reads"' in after["explanation"]
    assert after["problems"] == []
    assert 'Docs::User::"alice"' in after["who_can"]

    broken = out["broken"]
    assert broken["decision"] == "no decision"
    assert out["bad_editor"] is True
    (problem,) = broken["problems"]
    assert problem.startswith("policies:11:20: expected `action`, found identifier `acton`")

    assert out["origins"] == [url.rstrip("/")]  # Pyodide and polang from the server, no CDN
    assert (ARTIFACTS / "playground.png").stat().st_size > 10_000
    print(f"page ready in {out['ready_ms']:.0f} ms; decision after typing {out['typed_ms']:.0f} ms")
