"""OpenTelemetry spans and metrics for decisions, outbound fetches and the store.

An engine reports through one :class:`Telemetry`: a span per decision and the metrics of
docs/observability.md, through the application's OpenTelemetry providers. polang only
uses the API (``polang[otel]``); the application brings the SDK and its exporters.

``ENGINE_OTEL`` says when: ``auto`` (the default) reports once the application has set
an SDK provider, ``on`` from the start (through the API's global providers, which forward
to an SDK set later, or the providers given to the engine), ``off`` never. ``auto``
never imports OpenTelemetry: it looks, at most once per :data:`LOOK_INTERVAL` seconds,
whether ``opentelemetry.trace`` / ``opentelemetry.metrics`` are already imported (an SDK
imports them) and their global provider is an SDK's; until then a decision pays for one
clock read. The OpenTelemetry API forbids replacing a global provider once set, so what
was found is kept.

Attribute values come from callers (action and policy ids, types): each is cut to
:data:`MAX_ATTRIBUTE_CHARS` with the characters polang never prints raw escaped, lists
to :data:`MAX_ATTRIBUTE_ITEMS`. Metric attributes take closed sets of values only (a
decision, a drop reason kind, a fetch kind and outcome), so no input can multiply the
time series. Token contents are never reported.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from polang._version import __version__
from polang.errors import ConfigError
from polang.escapes import printable

__all__ = [
    "FETCH_KINDS",
    "LOOK_INTERVAL",
    "MAX_ATTRIBUTE_CHARS",
    "MAX_ATTRIBUTE_ITEMS",
    "SCOPE",
    "Telemetry",
    "new_telemetry",
]

SCOPE = "polang"
"""The instrumentation scope's name (tracer and meter)."""

#: Longest attribute value reported (characters, after escaping): a longer id is cut,
#: ending in ``...``.
MAX_ATTRIBUTE_CHARS = 256
#: Most ids one list attribute reports (determining and erroring policies, dropped-token
#: reasons); the ``*_count`` attribute beside it has the full number.
MAX_ATTRIBUTE_ITEMS = 32
#: Seconds between two looks for an SDK provider (``ENGINE_OTEL=auto``, none found yet).
LOOK_INTERVAL = 1.0

FETCH_KINDS = ("discovery", "jwks", "status_list", "store", "lock", "other")
"""What an outbound fetch was for (``polang.fetch.kind``)."""

#: Decision durations are microseconds, a first token validation seconds: buckets over both.
DECISION_BUCKETS = (
    1e-6,
    2.5e-6,
    5e-6,
    1e-5,
    2.5e-5,
    5e-5,
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    1e-2,
    0.1,
    1.0,
    10.0,
)
#: The HTTP semantic conventions' buckets for a request's duration.
FETCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

_ALLOW = {"polang.decision": "allow"}
_DENY = {"polang.decision": "deny"}


def _text(value: object) -> str:
    """An attribute value: bounded, and safe to show (no controls, bidi or separators)."""
    s = value if type(value) is str else str(value)
    if len(s) > MAX_ATTRIBUTE_CHARS:
        s = s[: MAX_ATTRIBUTE_CHARS - 3] + "..."
    s = printable(s)
    if len(s) > MAX_ATTRIBUTE_CHARS:  # escapes made it longer
        s = s[: MAX_ATTRIBUTE_CHARS - 3] + "..."
    return s


def _texts(values: Iterable[object]) -> list[str]:
    out: list[str] = []
    for v in values:
        if len(out) == MAX_ATTRIBUTE_ITEMS:
            break
        out.append(_text(v))
    return out


def _is_sdk(provider: object) -> bool:
    """A provider the application set: not the API's own proxy or no-op one."""
    return not type(provider).__module__.startswith(
        ("opentelemetry.trace", "opentelemetry.metrics")
    )


def _import_api(name: str) -> Any:
    """(``ENGINE_OTEL=on``) The API module ``name``; imported here, as the setting asks."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ConfigError(
            f"ENGINE_OTEL=on: the OpenTelemetry API cannot be imported ({e}); install "
            "polang[otel] (opentelemetry-api) or set ENGINE_OTEL to auto or off"
        ) from None


class _Instruments:
    """The instruments of one meter provider, shared by every engine reporting to it
    (an instrument is created once per provider; the store-age gauge reads each engine)."""

    def __init__(self, meter: Any) -> None:
        self.engines: weakref.WeakSet[Telemetry] = weakref.WeakSet()
        # its count per polang.decision is the decisions by result (as the HTTP
        # conventions' request duration counts requests): no second instrument to pay for
        self.decision_duration = meter.create_histogram(
            "polang.decision.duration",
            unit="s",
            description="Duration of authorization decisions, by result.",
            explicit_bucket_boundaries_advisory=DECISION_BUCKETS,
        )
        self.dropped_tokens = meter.create_counter(
            "polang.dropped_tokens",
            unit="{token}",
            description="Tokens left out of decisions, by reason.",
        )
        self.fetch_duration = meter.create_histogram(
            "polang.fetch.duration",
            unit="s",
            description="Duration of outbound fetches (discovery, JWKS, status lists, stores).",
            explicit_bucket_boundaries_advisory=FETCH_BUCKETS,
        )
        self.store_refreshes = meter.create_counter(
            "polang.store.refreshes",
            unit="{refresh}",
            description="Refreshes of a store read from a URL, by outcome.",
        )
        meter.create_observable_gauge(
            "polang.store.age",
            callbacks=[self._store_ages],
            unit="s",
            description="Seconds since the store being served was loaded.",
        )

    def _store_ages(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation  # loaded: the meter is the API's

        out = []
        for tel in list(self.engines):
            try:
                age = tel.store_age()
            except Exception:  # an engine being torn down: no point for it
                continue
            if age is not None:
                out.append(Observation(age[1], {"polang.store.id": _text(age[0])}))
        return out


_INSTRUMENTS: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()
_INSTRUMENTS_LOCK = threading.Lock()


def _instruments_for(provider: Any) -> _Instruments:
    with _INSTRUMENTS_LOCK:
        found = _INSTRUMENTS.get(provider)
        if found is None:
            found = _INSTRUMENTS[provider] = _Instruments(provider.get_meter(SCOPE, __version__))
        return found


class Telemetry:
    """One engine's spans and metrics (thread-safe: OpenTelemetry's instruments are)."""

    def __init__(
        self,
        mode: str,
        store_age: Callable[[], tuple[str, float] | None],
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        """``store_age()``: the served store's id and seconds since it was loaded."""
        self.mode = mode
        self.store_age = store_age
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer: Any = None
        self._metrics: _Instruments | None = None
        self._next_look = 0.0
        self._closed = False
        self.failures = 0
        """Reports the SDK or an exporter failed (raised): they never fail a decision."""
        if mode == "on" or tracer_provider is not None or meter_provider is not None:
            self._bind(force=mode == "on")

    # -- binding ----------------------------------------------------------------------

    @property
    def tracing(self) -> bool:
        """Whether decisions make spans now."""
        return self._tracer is not None

    @property
    def metering(self) -> bool:
        """Whether metrics are recorded now."""
        return self._metrics is not None

    def _bind(self, force: bool = False) -> None:
        """Take the tracer and instruments: from the providers given, else the global ones
        (``force``: the API's own, which forward to an SDK set later; else an SDK's only)."""
        if self._tracer is None:
            provider = self._tracer_provider
            if provider is None:
                api = sys.modules.get("opentelemetry.trace")
                if api is None and force:
                    api = _import_api("opentelemetry.trace")
                if api is not None:
                    found = api.get_tracer_provider()
                    provider = found if force or _is_sdk(found) else None
            if provider is not None:
                self._tracer = provider.get_tracer(SCOPE, __version__)
        if self._metrics is None:
            provider = self._meter_provider
            if provider is None:
                api = sys.modules.get("opentelemetry.metrics")
                if api is None and force:
                    api = _import_api("opentelemetry.metrics")
                if api is not None:
                    found = api.get_meter_provider()
                    provider = found if force or _is_sdk(found) else None
            if provider is not None:
                self._metrics = _instruments_for(provider)
                if not self._closed:
                    self._metrics.engines.add(self)

    def _look(self) -> bool:
        """(``auto``) Bind what an SDK now provides, at most once per LOOK_INTERVAL;
        whether anything reports."""
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + LOOK_INTERVAL
            self._bind()
        return self._tracer is not None or self._metrics is not None

    # -- reports ----------------------------------------------------------------------

    def active(self) -> bool:
        """Whether anything reports now (``auto``: looks for an SDK now and then)."""
        if self._tracer is not None or self._metrics is not None:
            return True
        # the per-decision case: nothing bound and no look due (no call to _look)
        return time.monotonic() >= self._next_look and self._look()

    def decided(
        self,
        elapsed: float,
        result: Any,
        action: object,
        resource_type: str,
        principal_type: str | None,
        dropped_reasons: Sequence[str] = (),
        store: tuple[str, str | None] | None = None,
    ) -> None:
        """One decision that took ``elapsed`` seconds, answered ``result`` (an
        ``AuthorizeResult``: its request id's text is written only for a recorded span):
        its span and metrics. The caller checked :meth:`active`. What the SDK or an
        exporter raises is counted in :attr:`failures`, never the decision's."""
        try:
            self._decided(
                elapsed, result, action, resource_type, principal_type, dropped_reasons, store
            )
        except Exception:
            self.failures += 1

    def _decided(
        self,
        elapsed: float,
        result: Any,
        action: object,
        resource_type: str,
        principal_type: str | None,
        dropped_reasons: Sequence[str],
        store: tuple[str, str | None] | None,
    ) -> None:
        allow: bool = result.decision
        m = self._metrics
        if m is not None:
            attrs = _ALLOW if allow else _DENY
            m.decision_duration.record(elapsed, attrs)
            for kind in dropped_reasons:
                m.dropped_tokens.add(1, {"polang.token.drop_reason": _text(kind)})
        tracer = self._tracer
        if tracer is None:
            return
        end = time.time_ns()
        span = tracer.start_span(
            "polang.authorize",
            start_time=end - int(elapsed * 1e9),
            attributes={
                "polang.decision": "allow" if allow else "deny",
                "polang.action": _text(action),
                "polang.resource.type": _text(resource_type),
            },
        )
        if span.is_recording():
            reasons: Sequence[str] = result.response.diagnostics.reason
            errors: Sequence[dict[str, str]] = result.response.diagnostics.errors
            attrs2: dict[str, Any] = {
                "polang.request.id": result.request_id,
                "polang.decision.policy_ids": _texts(reasons),
                "polang.decision.policy_count": len(reasons),
            }
            if principal_type is not None:
                attrs2["polang.principal.type"] = _text(principal_type)
            if errors:
                attrs2["polang.decision.errored_policy_ids"] = _texts(
                    e.get("policy_id", "") for e in errors
                )
                attrs2["polang.decision.errored_policy_count"] = len(errors)
            if dropped_reasons:
                attrs2["polang.token.drop_reasons"] = _texts(dropped_reasons)
                attrs2["polang.token.dropped_count"] = len(dropped_reasons)
            if store is not None:
                attrs2["polang.store.id"] = _text(store[0])
                if store[1] is not None:
                    attrs2["polang.store.version"] = _text(store[1])
            span.set_attributes(attrs2)
        span.end(end_time=end)

    def fetched(self, kind: str, outcome: str, seconds: float, error_type: str | None) -> None:
        """One outbound fetch (``polang.http.Fetcher``'s observer): ``outcome`` is ``ok``,
        ``not_modified`` or ``failed`` (then ``error_type`` says how, in a closed set)."""
        if self._metrics is None and not self._look():
            return
        m = self._metrics
        if m is None:
            return
        attrs = {
            "polang.fetch.kind": kind if kind in FETCH_KINDS else "other",
            "polang.fetch.outcome": outcome,
        }
        if error_type is not None:
            attrs["error.type"] = _text(error_type)
        m.fetch_duration.record(seconds, attrs)

    def refreshed(self, outcome: str | None) -> None:
        """One refresh of a URL store ended: ``updated``, ``not_modified``, ``unchanged``
        or ``failed``."""
        if outcome is None or (self._metrics is None and not self._look()):
            return
        m = self._metrics
        if m is not None:
            try:
                m.store_refreshes.add(1, {"polang.store.refresh.outcome": _text(outcome)})
            except Exception:
                self.failures += 1

    def close(self) -> None:
        """The engine closed: its store's age is no longer reported."""
        self._closed = True
        if self._metrics is not None:
            self._metrics.engines.discard(self)


def new_telemetry(
    mode: str,
    store_age: Callable[[], tuple[str, float] | None],
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> Telemetry | None:
    """The engine's telemetry, or ``None`` when nothing can ever report (``off``, or
    ``auto`` without the OpenTelemetry API installed and no providers given): then a
    decision pays nothing. ``on`` without the API is a ``ConfigError``."""
    if mode == "off":
        return None
    given = tracer_provider is not None or meter_provider is not None
    if not given and sys.modules.get("opentelemetry") is None:
        import importlib.util  # the API installed? (no import of it; start-up time)

        try:
            installed = importlib.util.find_spec("opentelemetry.trace") is not None
        except (ImportError, ValueError):
            installed = False
        if not installed:
            if mode == "on":
                raise ConfigError(
                    "ENGINE_OTEL=on: the OpenTelemetry API is not installed; install "
                    "polang[otel] (opentelemetry-api) or set ENGINE_OTEL to auto or off"
                )
            return None
    return Telemetry(mode, store_age, tracer_provider, meter_provider)
