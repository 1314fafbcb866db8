"""OpenTelemetry spans and metrics (``polang.telemetry``), read back through the SDK's
in-memory span exporter and metric reader.

Decisions on the example store and on real signed tokens from loopback OpenID providers,
fetches that succeed and fail, a URL store refreshed over HTTPS, hostile ids; each engine
gets its own providers (``tracer_provider=`` / ``meter_provider=``), so nothing here
touches the process's global OpenTelemetry state. What ``ENGINE_OTEL=auto`` does with the
global providers runs in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.store.storekit import store_files, zip_bytes
from tests.store.test_refresh_conditional import Versioned
from tests.tokens.oidc_server import OidcProvider
from tests.tokens.test_engine_multi_issuer import ACCESS, READ, SCHEMA, doc, write_store

from polang import AsyncEngine, Engine, TokenError, TokenInput
from polang.errors import ConfigError
from polang.escapes import UNSAFE_CHARS
from polang.http import Fetcher, FetchError, FetchLimits
from polang.language.values import EntityUID
from polang.telemetry import MAX_ATTRIBUTE_CHARS, MAX_ATTRIBUTE_ITEMS

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = str(REPO / "examples" / "stores" / "directory")
ALICE = json.loads((REPO / "examples" / "requests" / "alice.json").read_text())
ROADMAP = json.loads((REPO / "examples" / "requests" / "roadmap.json").read_text())
UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")


class Otel:
    """An SDK tracer and meter provider of one test, and what they received."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def engine(self, config: dict[str, Any], **kw: Any) -> Engine:
        return Engine(
            config,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            **kw,
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric name -> (attributes, value: a sum, a gauge's value, a histogram's
        (count, sum)) per data point."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data is not None else ():
            for sm in rm.scope_metrics:
                assert sm.scope.name == "polang"
                for m in sm.metrics:
                    for p in m.data.data_points:
                        value = (p.count, p.sum) if hasattr(p, "count") else p.value
                        out.setdefault(m.name, []).append((dict(p.attributes), value))
        return out

    def units(self) -> dict[str, str]:
        data = self.reader.get_metrics_data()
        return {
            m.name: m.unit
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.close()


def attribute_strings(span: ReadableSpan) -> list[str]:
    out: list[str] = []
    for value in (span.attributes or {}).values():
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, str))
    return out


# ---------------------------------------------------------------- decisions


def test_a_decision_is_one_span_and_its_metrics(otel: Otel) -> None:
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE})
    allow = engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    deny = engine.authorize_unsigned('Acme::Action::"edit"', ROADMAP, principal=ALICE)
    assert allow.decision is True and deny.decision is False
    first, second = otel.spans()
    assert first.name == "polang.authorize" and first.kind == trace.SpanKind.INTERNAL
    assert first.parent is None
    assert first.end_time is not None and first.start_time is not None
    assert first.end_time > first.start_time
    assert dict(first.attributes or {}) == {
        "polang.decision": "allow",
        "polang.action": 'Acme::Action::"read"',
        "polang.resource.type": "Acme::Document",
        "polang.principal.type": "Acme::User",
        "polang.request.id": allow.request_id,
        "polang.decision.policy_ids": ("org-members-read",),
        "polang.decision.policy_count": 1,
        "polang.store.id": engine.store.id,
        "polang.store.version": engine.store.version,
    }
    assert second.attributes is not None
    assert second.attributes["polang.decision"] == "deny"
    assert second.attributes["polang.request.id"] == deny.request_id
    assert second.attributes["polang.decision.policy_ids"] == tuple(
        deny.response.diagnostics.reason
    )
    m = otel.metrics()
    assert sorted((a["polang.decision"], v[0]) for a, v in m["polang.decision.duration"]) == [
        ("allow", 1),
        ("deny", 1),
    ]
    assert all(0 < v[1] < 10 for _, v in m["polang.decision.duration"])
    ((attrs, age),) = m["polang.store.age"]
    assert attrs == {"polang.store.id": engine.store.id} and 0 <= age < 600
    units = otel.units()
    assert units["polang.decision.duration"] == "s" and units["polang.store.age"] == "s"
    assert "polang.decisions" not in units  # the duration's count is the decisions
    engine.close()
    assert "polang.store.age" not in otel.metrics()  # a closed engine serves no store


def test_the_span_is_a_child_of_the_callers_span(otel: Otel) -> None:
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE})
    tracer = otel.tracer_provider.get_tracer("service")
    with tracer.start_as_current_span("GET /docs/roadmap") as outer:
        engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    inner = next(s for s in otel.spans() if s.name == "polang.authorize")
    assert inner.parent is not None
    assert inner.parent.span_id == outer.get_span_context().span_id
    assert inner.context is not None
    assert inner.context.trace_id == outer.get_span_context().trace_id
    engine.close()


def test_batches_and_the_async_api_report_each_decision(otel: Otel) -> None:
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE})
    answers = engine.authorize_unsigned_batch(
        [
            {"action": 'Acme::Action::"read"', "resource": ROADMAP},
            {"action": 'Acme::Action::"edit"', "resource": ROADMAP},
            {"action": 'Acme::Action::"read"', "resource": ROADMAP},
        ],
        principal=ALICE,
    )
    ids = {a.request_id for a in answers}  # type: ignore[union-attr]

    async def decide() -> str:
        result = await AsyncEngine(engine).authorize_unsigned(
            'Acme::Action::"read"', ROADMAP, principal=ALICE
        )
        return result.request_id

    ids.add(asyncio.run(decide()))
    spans = otel.spans()
    assert {s.attributes["polang.request.id"] for s in spans if s.attributes} == ids
    counts = {a["polang.decision"]: v[0] for a, v in otel.metrics()["polang.decision.duration"]}
    assert counts == {"allow": 3, "deny": 1}
    engine.close()


def test_off_reports_nothing_even_with_providers(otel: Otel) -> None:
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_OTEL": "off"})
    engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    assert otel.spans() == [] and otel.metrics() == {}
    engine.close()


def test_on_with_logs_on_reports_as_well(otel: Otel) -> None:
    """The logged path (memory log) reports the same span, with the logged request id."""
    engine = otel.engine(
        {"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_LOG_TYPE": "memory", "ENGINE_OTEL": "on"}
    )
    result = engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    (span,) = otel.spans()
    assert span.attributes is not None
    assert span.attributes["polang.request.id"] == result.request_id
    assert engine.get_logs_by_request_id(result.request_id)
    engine.close()


def test_a_failing_sdk_never_fails_a_decision(otel: Otel) -> None:
    """A span processor that raises (a broken exporter wired synchronously) is counted;
    the decision is answered as without telemetry."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Broken(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            raise RuntimeError("exporter down")

    otel.tracer_provider.add_span_processor(Broken())
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE})
    result = engine.authorize_unsigned('Acme::Action::"read"', ROADMAP, principal=ALICE)
    assert result.decision is True
    assert engine._telemetry is not None and engine._telemetry.failures == 1
    engine.close()


# ---------------------------------------------------------------- hostile ids

HOSTILE = "\x1b[2J\u202eevil\n\u2028\x9b" + "x" * 100_000


def hostile_store(root: Path, policies: int) -> Path:
    """Policies whose ids are 100,000 characters of terminal escapes, bidi overrides and
    line breaks, and an action named the same way."""
    escaped = HOSTILE.replace("\x1b", "\\u{1b}").replace("\n", "\\n")
    escaped = escaped.replace("\u202e", "\\u{202e}").replace("\u2028", "\\u{2028}")
    escaped = escaped.replace("\x9b", "\\u{9b}")
    (root / "policies").mkdir(parents=True)
    (root / "metadata.json").write_text(
        json.dumps(
            {
                "polang_version": "4.4.0",
                "policy_store": {"id": HOSTILE[:300], "name": "h", "version": "1.0.0"},
            }
        )
    )
    (root / "schema.polangschema").write_text(
        f'entity User; entity Doc;\naction "{escaped}" appliesTo '
        "{ principal: [User], resource: [Doc] };\n"
    )
    text = "".join(
        f'@id("{i}{escaped}")\npermit (principal, action, resource);\n' for i in range(policies)
    )
    (root / "policies" / "p.polang").write_text(text)
    return root


def test_hostile_ids_are_bounded_and_escaped(otel: Otel, tmp_path: Path) -> None:
    n = MAX_ATTRIBUTE_ITEMS + 8
    engine = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(hostile_store(tmp_path, n))})
    action = EntityUID("Action", HOSTILE)
    result = engine.authorize_unsigned(
        action,
        {"uid": {"type": "Doc", "id": HOSTILE}, "attrs": {}},
        principal={"uid": {"type": "User", "id": HOSTILE}, "attrs": {}},
    )
    assert result.decision is True and len(result.response.diagnostics.reason) == n
    (span,) = otel.spans()
    assert span.attributes is not None
    values = attribute_strings(span)
    assert values and all(len(v) <= MAX_ATTRIBUTE_CHARS for v in values)
    assert not [v for v in values if UNSAFE.search(v)]
    assert span.attributes["polang.action"].startswith('Action::"\\u{1b}[2J\\u{202e}evil')
    assert len(span.attributes["polang.decision.policy_ids"]) == MAX_ATTRIBUTE_ITEMS
    assert span.attributes["polang.decision.policy_count"] == n
    # ids (the caller's or the store's) never become metric attributes
    for name, points in otel.metrics().items():
        for attrs, _ in points:
            assert all(len(str(v)) <= MAX_ATTRIBUTE_CHARS for v in attrs.values()), name
            assert not any(UNSAFE.search(str(v)) for v in attrs.values()), name
    ((attrs, (count, _)),) = otel.metrics()["polang.decision.duration"]
    assert attrs == {"polang.decision": "allow"} and count == 1
    engine.close()


# ---------------------------------------------------------------- tokens and fetches


@pytest.fixture
def provider(server_ssl_context: ssl.SSLContext) -> Iterator[OidcProvider]:
    p = OidcProvider(server_ssl_context, prefix="/realms/acme")
    p.add_key("RS256")
    p.start()
    yield p
    p.stop()


@pytest.fixture
def partner(server_ssl_context: ssl.SSLContext) -> Iterator[OidcProvider]:
    p = OidcProvider(server_ssl_context, prefix="/partner")
    p.add_key("EdDSA")
    p.start()
    yield p
    p.stop()


@pytest.fixture
def token_engine(
    otel: Otel,
    tmp_path: Path,
    provider: OidcProvider,
    partner: OidcProvider,
    client_ssl_context: ssl.SSLContext,
) -> Iterator[Engine]:
    from tests.tokens.test_engine_multi_issuer import issuers_for

    store = write_store(tmp_path / "docs", SCHEMA, issuers_for(provider, partner))
    engine = otel.engine(
        {
            "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
            "ENGINE_HTTP_MAX_RETRIES": 0,
            "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
        },
        ssl_context=client_ssl_context,
    )
    yield engine
    engine.close()


def test_dropped_tokens_and_fetches_are_counted_never_their_contents(
    otel: Otel, token_engine: Engine, provider: OidcProvider
) -> None:
    good = provider.token(scope=["docs:read"], sub="alice-secret-subject")
    expired = provider.token(exp=1, sub="bob-secret-subject")
    forged = provider.token(iss="https://evil.example/")
    result = token_engine.authorize_multi_issuer(
        [TokenInput(ACCESS, good), TokenInput(ACCESS, expired), TokenInput(ACCESS, forged)],
        READ,
        doc(),
    )
    kinds = sorted(d.kind for d in result.dropped_tokens or [])
    assert result.decision is True and len(kinds) == 2
    (span,) = otel.spans()
    assert span.attributes is not None
    assert sorted(span.attributes["polang.token.drop_reasons"]) == kinds
    assert span.attributes["polang.token.dropped_count"] == 2
    assert "polang.principal.type" not in span.attributes  # tokens: no principal
    m = otel.metrics()
    dropped = {a["polang.token.drop_reason"]: v for a, v in m["polang.dropped_tokens"]}
    assert sorted(dropped) == sorted(set(kinds)) and sum(dropped.values()) == 2
    fetches = {
        (a["polang.fetch.kind"], a["polang.fetch.outcome"]): v[0]
        for a, v in m["polang.fetch.duration"]
    }
    assert fetches == {("discovery", "ok"): 1, ("jwks", "ok"): 1}
    assert otel.units()["polang.fetch.duration"] == "s"
    # nothing of a token (its text, its claims) reaches a span or a metric
    everything = json.dumps([dict(s.attributes or {}) for s in otel.spans()]) + json.dumps(m)
    for secret in (good, expired, forged, "alice-secret-subject", "bob-secret-subject"):
        assert secret not in everything
    for part in good.split("."):
        assert part not in everything


def test_a_failing_fetch_reports_its_error_type(
    otel: Otel, token_engine: Engine, provider: OidcProvider
) -> None:
    provider.fail[provider.jwks_path] = 503
    with pytest.raises(TokenError):  # no valid token left: the keys could not be had
        token_engine.authorize_multi_issuer(
            [TokenInput(ACCESS, provider.token(scope=["docs:read"]))], READ, doc()
        )
    m = otel.metrics()
    fetches = {
        (a["polang.fetch.kind"], a["polang.fetch.outcome"], a.get("error.type")): v[0]
        for a, v in m["polang.fetch.duration"]
    }
    assert fetches[("jwks", "failed", "503")] == 1
    assert fetches[("discovery", "ok", None)] == 1


def test_an_observer_that_raises_never_breaks_a_fetch(
    provider: OidcProvider, client_ssl_context: ssl.SSLContext
) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def observer(kind: str, outcome: str, seconds: float, error: str | None) -> None:
        seen.append((kind, outcome, error))
        raise RuntimeError("a broken exporter")

    with Fetcher(FetchLimits(timeout=5, max_retries=0), client_ssl_context, observer=observer) as f:
        assert f.get(provider.discovery_url, kind="discovery").json()["issuer"] == provider.issuer
        provider.fail["/missing"] = 404
        with pytest.raises(FetchError):
            f.get(provider.url("/missing"), kind="jwks")
        with pytest.raises(FetchError):  # refused before any request: failed all the same
            f.get("http://127.0.0.1/", kind="status_list")
    assert seen == [
        ("discovery", "ok", None),
        ("jwks", "failed", "404"),
        ("status_list", "failed", "_OTHER"),
    ]


def test_store_refreshes_and_store_fetches(
    otel: Otel, server_ssl_context: ssl.SSLContext, client_ssl_context: ssl.SSLContext
) -> None:
    server = OidcProvider(server_ssl_context).start()
    try:
        route = Versioned(zip_bytes(store_files()))
        server.routes["/s.parc"] = route
        engine = otel.engine(
            {
                "ENGINE_POLICY_STORE_URI": server.url("/s.parc"),
                "ENGINE_HTTP_MAX_RETRIES": 0,
                "ENGINE_HTTP_REQUEST_TIMEOUT": 5,
            },
            ssl_context=client_ssl_context,
        )
        assert engine.refresh_store() == "not_modified"
        extra = '@id("extra") permit (principal, action == App::Action::"edit", resource);\n'
        route.body, route.etag = zip_bytes(store_files({"policies/extra.polang": extra})), '"v2"'
        assert engine.refresh_store() == "updated"
        route.status = 500
        assert engine.refresh_store() == "failed"
        m = otel.metrics()
        refreshes = {a["polang.store.refresh.outcome"]: v for a, v in m["polang.store.refreshes"]}
        assert refreshes == {"not_modified": 1, "updated": 1, "failed": 1}
        fetches = {
            (a["polang.fetch.kind"], a["polang.fetch.outcome"], a.get("error.type")): v[0]
            for a, v in m["polang.fetch.duration"]
        }
        assert fetches == {
            ("store", "ok", None): 2,  # the first load and the update
            ("store", "not_modified", None): 1,
            ("store", "failed", "500"): 1,
        }
        assert otel.units()["polang.store.refreshes"] == "{refresh}"
        ((attrs, age),) = m["polang.store.age"]
        assert attrs == {"polang.store.id": "app-store"} and age >= 0
        engine.close()
    finally:
        server.stop()


# ---------------------------------------------------------------- ENGINE_OTEL, the global providers


def run(code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; its last line of output is JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code, EXAMPLE], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


DECIDE = (
    "import json, sys\n"
    "from polang import Engine\n"
    "from polang import telemetry\n"
    "alice = json.load(open('examples/requests/alice.json'))\n"
    "doc = json.load(open('examples/requests/roadmap.json'))\n"
    "def decide(e):\n"
    "    return e.authorize_unsigned('Acme::Action::\"read\"', doc, principal=alice)\n"
)


def test_auto_reports_once_the_application_sets_an_sdk() -> None:
    """``auto`` (the default): with the API loaded and no SDK, nothing reports and no
    span is built; once the application sets its SDK providers, the next look binds them."""
    code = DECIDE + (
        "import opentelemetry.trace, opentelemetry.metrics\n"
        "telemetry.LOOK_INTERVAL = 0.0\n"
        "e = Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1]})\n"
        "before = (e._telemetry.tracing, e._telemetry.metering)\n"
        "decide(e)\n"
        "from opentelemetry import trace, metrics\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()\n"
        "tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(tp)\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "r = decide(e)\n"
        "spans = [dict(s.attributes) for s in exporter.get_finished_spans()]\n"
        "names = sorted(m.name for rm in reader.get_metrics_data().resource_metrics\n"
        "               for sm in rm.scope_metrics for m in sm.metrics)\n"
        "print(json.dumps({'before': before, 'ids': [s['polang.request.id'] for s in spans],\n"
        "                  'id': r.request_id, 'names': names}))\n"
    )
    out = run(code)
    assert out["before"] == [False, False]
    assert out["ids"] == [out["id"]]  # the decision before the SDK made no span
    assert "polang.decision.duration" in out["names"]


def test_without_the_api_auto_costs_nothing_and_on_is_refused() -> None:
    code = DECIDE + (
        "sys.modules['opentelemetry'] = None  # as if polang[otel] were not installed\n"
        "e = Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1]})\n"
        "ok = decide(e).decision\n"
        "from polang.errors import ConfigError\n"
        "try:\n"
        "    Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1], 'ENGINE_OTEL': 'on'})\n"
        "    refused = None\n"
        "except ConfigError as err:\n"
        "    refused = str(err)\n"
        "print(json.dumps({'telemetry': e._telemetry is None, 'ok': ok, 'refused': refused}))\n"
    )
    out = run(code)
    assert out["telemetry"] is True and out["ok"] is True
    assert "ENGINE_OTEL=on" in out["refused"] and "polang[otel]" in out["refused"]


def test_on_reports_through_the_global_providers_set_later() -> None:
    """``on``: the API's proxies from the start, forwarding to the SDK once it is set."""
    code = DECIDE + (
        "e = Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1], 'ENGINE_OTEL': 'on'})\n"
        "assert 'opentelemetry.trace' in sys.modules\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(tp)\n"
        "r = decide(e)\n"
        "print(json.dumps({'ids': [s.attributes['polang.request.id']\n"
        "                          for s in exporter.get_finished_spans()], 'id': r.request_id}))\n"
    )
    out = run(code)
    assert out["ids"] == [out["id"]]


def test_a_bad_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ENGINE_OTEL: invalid value 'yes'; allowed: one of"):
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_OTEL": "yes"})
    with pytest.raises(ConfigError, match="did you mean ENGINE_OTEL"):
        Engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE, "ENGINE_OTLE": "on"})


def test_store_age_of_engines_sharing_a_provider(otel: Otel, tmp_path: Path) -> None:
    """Two engines on one meter provider share its instruments; each reports its store."""
    other = tmp_path / "other"
    for rel, text in store_files().items():
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        (other / rel).write_text(text if isinstance(text, str) else text.decode())
    a = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": EXAMPLE})
    b = otel.engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(other)})
    ids = sorted(attrs["polang.store.id"] for attrs, _ in otel.metrics()["polang.store.age"])
    assert ids == sorted([a.store.id, b.store.id])
    b.close()
    ids = [attrs["polang.store.id"] for attrs, _ in otel.metrics()["polang.store.age"]]
    assert ids == [a.store.id]
    a.close()
