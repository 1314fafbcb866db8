"""polang in WebAssembly: the same scenario under Pyodide (Node.js) and on CPython.

Builds polang's wheel, downloads the pure-Python dependency wheels (the versions this
CPython has, so both run the same code) and installs the ``pyodide`` npm package, all
into a cache folder kept between runs (``.cache/wasm`` in the checkout, or
``POLANG_WASM_CACHE``); then runs ``tests/wasm/scenario.py`` under ``node`` and here, and
compares every answer: a sample of the conformance corpus, the example store from archive
bytes (decisions, batch, explain with repairs, who can, what can, ``polang test``'s
runner), tokens of two loopback OpenID providers signed with RS256 and ES256 (verified by
WebCrypto there: Pyodide has no ``cryptography``), a status list, the store from a loopback
HTTPS URL (the runtime's fetch), and hostile inputs. Skips, naming what is missing, when
``node``, ``npm`` or the network (first run only) is not there. docs/wasm.md.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from tests.tokens.oidc_server import OidcProvider, body, redirect
from tests.tokens.test_engine_multi_issuer import (
    ACCESS,
    PARTNER,
    READ,
    SCHEMA,
    WRITE,
    doc,
    issuers_for,
    write_store,
)
from tests.wasm import scenario
from tests.wasm.toolchain import REPO, cache_dir, pyodide_package, run_or_skip

from polang import conformance
from polang.store.tools import pack_store

HERE = Path(__file__).parent
#: polang's dependencies that Pyodide needs (pure Python; pinned to this CPython's versions).
#: rich (and what it needs) renders explanations. Left out: cryptography (WebCrypto
#: instead), PyYAML and google-re2 (no WebAssembly wheels on PyPI), httpx and httpcore
#: (the runtime's fetch instead).
WASM_DEPENDENCIES = ("lark", "pyDatalog", "PyJWT", "networkx", "rich")
#: rich's own dependencies differ by its release (markdown-it-py and mdurl since 12.6,
#: commonmark before): the installed ones go too
RICH_DEPENDENCIES = ("markdown-it-py", "mdurl", "Pygments", "commonmark")
#: Wheels any Python can install (pure Python), for the Python Pyodide is.
PIP_DOWNLOAD = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--no-deps"]
PIP_DOWNLOAD += ["--platform", "any", "--python-version", "3.14", "--implementation", "py"]
CORPUS_SAMPLE = 40  # test files of the conformance corpus, spread over it


def installed(distribution: str) -> bool:
    try:
        version(distribution)
    except PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def pyodide_dir() -> Path:
    """The pyodide npm package, installed once into the cache."""
    return pyodide_package()


@pytest.fixture(scope="module")
def wheel_dir(pyodide_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """polang's wheel (built when the sources changed) and the dependency wheels."""
    lock = json.loads((pyodide_dir / "pyodide-lock.json").read_text())["packages"]
    pins = [f"{name}=={version(name)}" for name in WASM_DEPENDENCIES]
    pins += [f"{name}=={version(name)}" for name in RICH_DEPENDENCIES if installed(name)]
    pins += [f"{name}=={lock[name]['version']}" for name in ("micropip", "packaging")]
    deps = cache_dir() / ("wheels-" + hashlib.sha256(" ".join(pins).encode()).hexdigest()[:12])
    if not deps.is_dir():
        part = deps.with_suffix(".part")
        shutil.rmtree(part, ignore_errors=True)
        run_or_skip(
            [*PIP_DOWNLOAD, "-d", str(part), *pins],
            "pip download of the dependency wheels",
        )
        part.rename(deps)
    digest = hashlib.sha256()
    for f in sorted(
        [*REPO.glob("src/polang/**/*"), *REPO.glob("rules/*"), REPO / "pyproject.toml"]
    ):
        if f.is_file() and "__pycache__" not in f.parts:
            digest.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    built = cache_dir() / f"polang-{digest.hexdigest()[:12]}"
    if not built.is_dir():
        for old in cache_dir().glob("polang-*"):
            shutil.rmtree(old, ignore_errors=True)
        part = built.with_suffix(".part")
        shutil.rmtree(part, ignore_errors=True)
        run_or_skip(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(part)],
            "building polang's wheel",
        )
        part.rename(built)
    out = tmp_path_factory.mktemp("wheels")
    for w in [*deps.glob("*.whl"), *built.glob("*.whl")]:
        shutil.copy(w, out)
    return out


def _corpus_sample(root: Path) -> dict[str, str]:
    files = list(conformance.test_files(root))
    step = max(1, len(files) // CORPUS_SAMPLE)
    out: dict[str, str] = {}
    for f in files[::step][:CORPUS_SAMPLE]:
        spec = json.loads(f.read_text("utf-8"))
        out[str(f.relative_to(root))] = f.read_text("utf-8")
        for key in ("schema", "policies", "entities"):
            out[spec[key]] = (root / spec[key]).read_text("utf-8")
    return out


@pytest.fixture
def job(
    tmp_path: Path,
    corpus_dir: Path,
    server_ssl_context: ssl.SSLContext,
) -> Any:
    acme = OidcProvider(server_ssl_context, prefix="/realms/acme")
    acme.add_key("RS256")
    acme.add_key("ES256")
    partner = OidcProvider(server_ssl_context, prefix="/partner")
    partner.add_key("ES256")
    acme.start()
    partner.start()
    try:
        store = write_store(tmp_path / "docs", SCHEMA, issuers_for(acme, partner))
        pack_store(store, tmp_path / "docs.parc")
        docs = (tmp_path / "docs.parc").read_bytes()
        acme.routes["/stores/docs.parc"] = body(docs)
        acme.routes["/moved.parc"] = redirect(acme.url("/stores/docs.parc"))
        acme.routes["/down.parc"] = redirect("http://127.0.0.1:9/docs.parc")
        fetch_policy = [
            ("redirect", acme.url("/moved.parc"), {}, ""),
            ("downgrade", acme.url("/down.parc"), {}, "refused (a downgrade from https)"),
            (
                "too big",
                acme.url("/stores/docs.parc"),
                {"ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES": 512},
                "ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (512)",
            ),
            ("missing", acme.url("/nothing.parc"), {}, "HTTP status 404"),
        ]
        read_scope = {"scope": ["docs:read"]}
        status = {"status_list": {"idx": 0, "uri": acme.set_status_list("l1", [0, 1])}}
        revoked = {"status_list": {"idx": 1, "uri": acme.status_uri("l1")}}
        rs = acme.token(**read_scope)
        tampered = rs[:-4] + ("AAAA" if not rs.endswith("AAAA") else "BBBB")
        cases = [
            ("rs256", [(ACCESS, rs)], READ),
            ("es256", [(ACCESS, acme.token(acme.keys[1], **read_scope))], READ),
            (
                "two-issuers",
                [(ACCESS, acme.token(**read_scope)), (PARTNER, partner.token(role=["editor"]))],
                WRITE,
            ),
            ("status-valid", [(ACCESS, acme.token(status=status, **read_scope))], READ),
            ("status-revoked", [(ACCESS, acme.token(status=revoked, **read_scope))], READ),
            ("tampered", [(ACCESS, tampered)], READ),
            ("expired", [(ACCESS, acme.token(exp=1, **read_scope))], READ),
        ]
        deep: Any = "x"
        for _ in range(300):  # deeper than polang reads, shallow enough for json.dumps
            deep = [deep]
        hostile = [
            ("garbage archive", "archive", base64.b64encode(os.urandom(512)).decode()),
            ("zip header only", "archive", base64.b64encode(b"PK\x03\x04" + b"\0" * 60).decode()),
            ("not a jwt", "tokens", [(ACCESS, "not.a.jwt.at.all")]),
            ("alg none", "tokens", [(ACCESS, _unsigned(acme.claims(**read_scope)))]),
            ("oversized token", "tokens", [(ACCESS, "a" * 300_000)]),
            ("unknown token type", "tokens", [("Nope::Token", rs)]),
            ("deep resource", "request", {"action": READ, "resource": {"uid": deep}}),
            ("misspelt action", "request", {"action": 'Acme::Acton::"read"', "resource": {}}),
        ]
        tests = yaml.safe_load((REPO / "examples/tests/directory.polangtest.yaml").read_text())
        yield {
            "workdir": str(tmp_path / "work"),
            "corpus": _corpus_sample(corpus_dir),
            # without its trusted issuer, whose claim_mapping regex needs google-re2
            "example_archive": base64.b64encode(_example_without_issuers(tmp_path)).decode(),
            "regex_archive": base64.b64encode(
                (REPO / "examples/stores/store.parc").read_bytes()
            ).decode(),
            "alice": json.loads((REPO / "examples/requests/alice.json").read_text()),
            "roadmap": json.loads((REPO / "examples/requests/roadmap.json").read_text()),
            "example_tests": tests,
            "docs_archive": base64.b64encode(docs).decode(),
            "store_url": acme.url("/stores/docs.parc"),
            "token_cases": [
                {"name": n, "tokens": t, "action": a, "resource": doc()} for n, t, a in cases
            ],
            "hostile": hostile,
            "fetch_policy": fetch_policy,
        }
    finally:
        acme.stop()
        partner.stop()


def _example_without_issuers(tmp_path: Path) -> bytes:
    root = tmp_path / "example"
    shutil.copytree(REPO / "examples/stores/directory", root)
    shutil.rmtree(root / "trusted-issuers")
    pack_store(root, tmp_path / "example.parc")
    return (tmp_path / "example.parc").read_bytes()


def _unsigned(claims: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def test_pyodide_decides_as_cpython_does(
    job: dict[str, Any],
    pyodide_dir: Path,
    wheel_dir: Path,
    tls_ca: trustme.CA,
    client_ssl_context: ssl.SSLContext,
    ca_pem_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps({**job, "workdir": "/work"}))
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": str(ca_pem_file)}
    proc = subprocess.run(
        ["node", str(HERE / "runner.mjs"), str(pyodide_dir), str(wheel_dir), str(job_file)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("POLANG-RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"node failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    wasm = json.loads(lines[-1][len("POLANG-RESULT ") :])

    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem_file))
    cpython = asyncio.run(scenario.run({**job, "ssl": client_ssl_context}))

    got = wasm["result"]
    for key in cpython:
        if key not in ("timings", "environment"):
            assert got[key] == cpython[key], key
    # what the scenario shows: every decision real, not vacuous
    assert cpython["corpus"]["requests"] > 100
    assert cpython["corpus"]["decisions_ok"] == cpython["corpus"]["requests"]
    tokens = {name: (decision, dropped) for name, decision, _, dropped in cpython["tokens"]}
    assert tokens["rs256"] == (True, [])
    assert tokens["es256"] == (True, [])
    assert tokens["two-issuers"] == (True, [])
    assert tokens["status-valid"] == (True, [])
    messages = {name: message for name, _, message, _ in cpython["tokens"]}
    assert tokens["status-revoked"] == ("TokenError", [])
    assert "revoked: the token's status is INVALID" in messages["status-revoked"]
    assert tokens["tampered"] == ("TokenError", [])
    assert "signature: the signature does not verify" in messages["tampered"]
    assert tokens["expired"] == ("TokenError", [])
    assert "expired" in messages["expired"]
    assert cpython["url_store"][1] is True and cpython["url_store_decision"] is True
    assert all(outcome != "accepted" for _, outcome in cpython["hostile"][:2])
    assert [outcome for _, outcome in cpython["fetch_policy"]] == [
        "loaded docs",
        "PolicyStoreLoadError, says 'refused (a downgrade from https)': True",
        "PolicyStoreLoadError, says 'ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES (512)': True",
        "PolicyStoreLoadError, says 'HTTP status 404': True",
    ]

    env_info = got["environment"]
    assert env_info["wasm"] is True
    assert env_info["imports_after_import_polang"] == []
    only = env_info["wasm_only"]
    assert only["verifier"] == "webcrypto"  # Pyodide from npm has no cryptography
    assert not set(only["imports"]) & {"cryptography", "yaml", "httpx", "re2"}
    assert "WebAssembly (Pyodide)" in only["sync_url_store"]
    assert "a regex claim mapping is not available in WebAssembly" in only["regex_store"]
    assert "ConfigError" in only["refresh"] and "no threads" in only["refresh"]
    assert only["sync_tokens"].startswith("TokenError: no valid token left")
    assert "a synchronous fetch is not available in WebAssembly (Pyodide)" in only["sync_tokens"]
    timings = {"pyodide": got["timings"], "cpython": cpython["timings"], "node": wasm["node"]}
    (cache_dir() / "timings.json").write_text(json.dumps(timings, indent=2))
    print(json.dumps(timings, indent=2))
