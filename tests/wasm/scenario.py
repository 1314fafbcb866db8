"""What tests/wasm/test_pyodide.py runs twice: under Pyodide (node) and on CPython.

``await run(job)`` returns JSON-ready results; the test compares the two runs (every key
but ``timings`` and ``environment``). Under Pyodide the engine is
:class:`polang.wasm.WasmEngine` (the runtime's fetch, WebCrypto), on CPython
:class:`polang.engine.aio.AsyncEngine` (httpx, cryptography): the same answers are
expected from both. This file is plain Python without pytest, as Pyodide runs it.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

THIRD_PARTY = ("yaml", "cryptography", "httpx", "httpcore", "jwt", "lark", "rich", "re2")
THIRD_PARTY += ("networkx", "pyDatalog", "duckdb", "pyspark", "sqlglot")


def _loaded() -> list[str]:
    return sorted({m.split(".")[0] for m in sys.modules} & set(THIRD_PARTY))


def _untimed(answer: dict[str, Any]) -> dict[str, Any]:
    answer.get("stats", {}).pop("elapsed_s", None)
    return answer


async def run(job: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    import polang
    from polang import init_from_archive_bytes

    imported = _loaded()  # in a fresh interpreter (Pyodide's): nothing third-party
    assert polang.__name__ == "polang"
    from polang.engine.aio import AsyncEngine
    from polang.errors import PolangError
    from polang.runtime import WASM
    from polang.tokens.model import TokenInput

    timings["import_ms"] = (time.perf_counter() - t0) * 1000
    engine_class: Any = AsyncEngine
    if WASM:
        from polang.wasm import WasmEngine

        engine_class = WasmEngine
    work = Path(job["workdir"])
    work.mkdir(parents=True, exist_ok=True)

    # -- a sample of the conformance corpus, through `polang conformance`'s runner ----------
    if job.get("corpus"):
        from polang.conformance import run_corpus

        root = work / "corpus"
        for rel, text in job["corpus"].items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        t = time.perf_counter()
        summary = run_corpus(root)
        timings["corpus_ms"] = (time.perf_counter() - t) * 1000
        out["corpus"] = {**summary.to_dict(), "failures": [str(f) for f in summary.failures]}

    # -- the example store from archive bytes: first and warm decisions ---------------------
    example = base64.b64decode(job["example_archive"])
    alice, roadmap = job["alice"], job["roadmap"]
    t = time.perf_counter()
    engine = init_from_archive_bytes({"ENGINE_LOG_TYPE": "off"}, example)
    timings["first_build_ms"] = (time.perf_counter() - t) * 1000
    read, edit = 'Acme::Action::"read"', 'Acme::Action::"edit"'
    t = time.perf_counter()
    first = engine.authorize_unsigned(read, roadmap, principal=alice)
    timings["first_decision_ms"] = (time.perf_counter() - t) * 1000
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        engine.authorize_unsigned(read, roadmap, principal=alice)
    timings["warm_decision_us"] = (time.perf_counter() - t) / n * 1e6
    denied = engine.authorize_unsigned(edit, roadmap, principal=alice)
    out["unsigned"] = [
        [first.decision, first.response.diagnostics.reason],
        [denied.decision, denied.response.diagnostics.reason],
    ]
    batch = engine.authorize_unsigned_batch(
        [{"action": read, "resource": roadmap}, {"action": edit, "resource": roadmap}],
        principal=alice,
    )
    out["batch"] = [b.to_dict().get("decision") for b in batch]
    explanation = engine.explain(edit, roadmap, {}, alice)
    out["explain"] = explanation.render()
    out["repairs"] = explanation.repairs.to_dict()
    out["who_can"] = _untimed(engine.who_can(read, roadmap).to_dict())
    out["what_can"] = _untimed(engine.what_can(alice, read).to_dict())

    # -- `polang test`'s runner on the example tests (JSON: YAML needs PyYAML) --------------
    from polang.authoring.testing import run_tests

    (work / "example.parc").write_bytes(example)
    tests = dict(job["example_tests"], store=str(work / "example.parc"))
    (work / "example.polangtest.json").write_text(json.dumps(tests), encoding="utf-8")
    report = run_tests([str(work / "example.polangtest.json")])
    out["policy_tests"] = {
        "cases": len(report.results),
        "passed": report.passed,
        "coverage": report.percent,
    }

    # -- tokens of two issuers (RS256 and ES256) through the async engine -------------------
    docs = base64.b64decode(job["docs_archive"])
    config = {"ENGINE_LOG_TYPE": "off", "ENGINE_HTTP_MAX_RETRIES": 0}
    t = time.perf_counter()
    signed = engine_class(init_from_archive_bytes(config, docs))
    out["ready"] = await signed.ready()
    timings["keys_fetched_ms"] = (time.perf_counter() - t) * 1000
    out["tokens"] = []
    for case in job["token_cases"]:
        tokens = [TokenInput(m, p) for m, p in case["tokens"]]
        t = time.perf_counter()
        try:
            got = await signed.authorize_multi_issuer(tokens, case["action"], case["resource"])
        except PolangError as e:  # no valid token left: the reasons are in the message
            said = re.sub(r"\(now \d+\)", "(now ...)", str(e))  # the clocks differ
            out["tokens"].append([case["name"], type(e).__name__, said, []])
            continue
        finally:
            timings[f"token_case_{case['name']}_ms"] = (time.perf_counter() - t) * 1000
        out["tokens"].append(
            [
                case["name"],
                got.decision,
                got.response.diagnostics.reason,
                [[d.index, d.kind] for d in got.dropped_tokens or []],
            ]
        )

    # -- the same store from a loopback URL -----------------------------------------------
    t = time.perf_counter()
    if WASM:
        remote = await engine_class.create({**config, "ENGINE_POLICY_STORE_URI": job["store_url"]})
    else:
        remote = await engine_class.create(
            {**config, "ENGINE_POLICY_STORE_URI": job["store_url"]}, ssl_context=job["ssl"]
        )
    timings["url_store_ms"] = (time.perf_counter() - t) * 1000
    out["url_store"] = [
        remote.engine.store.id,
        remote.engine.store.digest == signed.engine.store.digest,
    ]
    case = job["token_cases"][0]
    got = await remote.authorize_multi_issuer(
        [TokenInput(m, p) for m, p in case["tokens"]], case["action"], case["resource"]
    )
    out["url_store_decision"] = got.decision

    # -- the fetch policy, the same through the runtime's fetch: redirects, size -----------
    policy: list[list[Any]] = []
    for name, url, extra, expect in job["fetch_policy"]:
        props = {**config, **extra, "ENGINE_POLICY_STORE_URI": url}
        try:
            if WASM:
                got_engine = await engine_class.create(props)
            else:
                got_engine = await engine_class.create(props, ssl_context=job["ssl"])
            outcome = f"loaded {got_engine.engine.store.id}"
        except PolangError as e:
            outcome = f"{type(e).__name__}, says {expect!r}: {expect in str(e)}"
        policy.append([name, outcome])
    out["fetch_policy"] = policy

    # -- hostile inputs: each ends in a PolangError or a dropped token ---------------------
    hostile: list[list[Any]] = []
    for name, kind, arg in job["hostile"]:
        try:
            if kind == "archive":
                init_from_archive_bytes({}, base64.b64decode(arg))
                outcome = "accepted"
            elif kind == "tokens":
                got = await signed.authorize_multi_issuer(
                    [TokenInput(m, p) for m, p in arg], case["action"], case["resource"]
                )
                outcome = f"decision {got.decision}, dropped " + ",".join(
                    d.kind for d in got.dropped_tokens or []
                )
            elif kind == "request":
                engine.authorize_unsigned(arg["action"], arg["resource"], principal=alice)
                outcome = "accepted"
            else:
                raise AssertionError(kind)
        except PolangError as e:
            outcome = type(e).__name__
        hostile.append([name, outcome])
    out["hostile"] = hostile
    out["timings"] = timings
    out["environment"] = {
        "wasm": WASM,
        "python": sys.version.split()[0],
        "imports_after_import_polang": imported,
    }
    if WASM:
        out["environment"]["wasm_only"] = await _wasm_only(job, config, docs, case)
    return out


async def _wasm_only(
    job: dict[str, Any], config: dict[str, Any], docs: bytes, case: dict[str, Any]
) -> dict[str, Any]:
    """What only Pyodide lacks: each must say so, naming the environment."""
    from polang import Engine, init_from_archive_bytes
    from polang.errors import PolangError
    from polang.tokens.model import TokenInput
    from polang.tokens.signatures import verifier
    from polang.wasm import WasmEngine

    said: dict[str, Any] = {"verifier": verifier(), "imports": _loaded()}

    def refused(call: Any) -> str:
        try:
            call()
        except PolangError as e:
            return f"{type(e).__name__}: {e}"
        return "accepted"

    regex = base64.b64decode(job["regex_archive"])
    said["regex_store"] = refused(lambda: init_from_archive_bytes({}, regex))
    url = {**config, "ENGINE_POLICY_STORE_URI": job["store_url"]}
    said["sync_url_store"] = refused(lambda: Engine(url))
    try:
        await WasmEngine.create({**url, "ENGINE_POLICY_STORE_REFRESH_INTERVAL": 30})
        said["refresh"] = "accepted"
    except PolangError as e:
        said["refresh"] = f"{type(e).__name__}: {e}"
    sync = init_from_archive_bytes(config, docs)  # the sync API: no fetch, no WebCrypto
    tokens = [TokenInput(m, p) for m, p in case["tokens"]]
    said["sync_tokens"] = refused(
        lambda: sync.authorize_multi_issuer(tokens, case["action"], case["resource"])
    )
    return said
