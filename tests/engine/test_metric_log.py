"""The Metric log entries the engine writes are exactly those docs/logs.md lists, and are
written when it says (a decision after METRICS_INTERVAL, ``flush_metrics``, ``close``)."""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.tokens.oidc_server import OidcProvider
from tests.tokens.test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, write_store

from polang import Engine, TokenInput
from polang.engine import facade

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "stores" / "directory")
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
ROADMAP = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())


def documented() -> dict[str, set[str]]:
    """docs/logs.md's Metric entries table: group -> names."""
    text = (REPO / "docs" / "logs.md").read_text(encoding="utf-8")
    section = text.split("## Metric entries\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    group = ""
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]
        if len(cells) != 3 or not line.startswith("|") or re.fullmatch("-+", cells[0]):
            continue
        group = cells[0].strip("`") or group
        if group in ("counters", "gauges", "timings"):
            out.setdefault(group, set()).update(re.findall(r"`([a-z_]+)`", cells[1]))
    return out


def written(entries: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"counters": set(), "gauges": set(), "timings": set()}
    for e in entries:
        for group in out:
            out[group].update(e[group])
    return out


@pytest.fixture
def provider(server_ssl_context: ssl.SSLContext) -> Iterator[OidcProvider]:
    p = OidcProvider(server_ssl_context, prefix="/realms/acme")
    p.add_key("RS256")
    p.start()
    yield p
    p.stop()


def test_the_documented_metrics_are_the_ones_written(
    tmp_path: Path, provider: OidcProvider, client_ssl_context: ssl.SSLContext
) -> None:
    from tests.tokens.test_engine_multi_issuer import issuers_for

    entries = []
    plain = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_LOG_TYPE": "memory"})
    plain.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)  # allow
    plain.authorize_unsigned('Acme::Action::"delete"', ROADMAP)  # deny, a policy errors
    entries.append(plain.flush_metrics())
    plain.close()
    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(provider, provider))
    tokens = Engine(
        {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_LOG_TYPE": "memory"},
        ssl_context=client_ssl_context,
    )
    good, expired = provider.token(scope=["docs:read"]), provider.token(exp=1)
    tokens.authorize_multi_issuer(
        [TokenInput(ACCESS, good), TokenInput(ACCESS, expired)], READ, doc()
    )
    entries.append(tokens.flush_metrics())
    tokens.close()
    assert all(e is not None for e in entries)
    got = written([e for e in entries if e is not None])
    assert got == documented()
    assert entries[1] is not None and entries[1]["counters"]["dropped_tokens"] == 1
    assert entries[0] is not None and entries[0]["counters"]["policy_errors"] == 1


def test_an_entry_is_written_by_a_decision_after_the_interval_and_on_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = Engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_LOG_TYPE": "memory"})

    def metric_entries() -> list[dict[str, Any]]:
        return engine.get_logs_by_tag("Metric")

    engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    assert metric_entries() == []  # within the interval: none yet
    monkeypatch.setattr(facade, "METRICS_INTERVAL", 0.0)
    engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    (entry,) = metric_entries()
    assert entry["counters"]["authorize_calls"] == 2
    assert entry["timings"]["decision_time_micro_sec"]["count"] == 2
    monkeypatch.setattr(facade, "METRICS_INTERVAL", 3600.0)
    engine.authorize_unsigned('Acme::Action::"edit"', ROADMAP, principal=ALICE)
    memory = engine.logger.memory
    engine.close()
    assert memory is not None
    last = [e for e in memory.pop_logs() if e["log_kind"] == "Metric"][-1]
    assert last["counters"]["authorize_calls"] == 3  # cumulative
    assert last["timings"]["decision_time_micro_sec"]["count"] == 1  # since the last entry
