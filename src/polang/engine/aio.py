"""``AsyncEngine``: the engine for asyncio, with the sync engine's answers.

Decisions take microseconds, so they run inline on the event loop. What can take seconds
is the network: an issuer's discovery document and keys (JWKS), a token's status list,
a store fetched from a URL. The async API never waits for it on the loop:

- a decision runs under :func:`polang._flight.deferred`: where it would fetch (or wait
  for another caller's fetch), it raises :class:`~polang._flight.FetchPending` instead;
  the fetch it started runs on one of the engine's fetch threads, through the same
  :class:`polang.http.Fetcher` as every sync fetch (one set of limits: size, deadline,
  redirects, https only), and the coroutine awaits its end without holding a thread, then
  decides again. Concurrent requests needing the same issuer or status list share that
  one fetch (single flight, with the sync callers too);
- loading a store (``create``), ``aclose`` and a decision still needing the network after
  :data:`MAX_DEFERRED_ROUNDS` fetches run on a worker thread;
- store refresh already runs on the engine's refresh thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from polang._flight import FetchPending, deferred
from polang.config import Config

from .facade import Engine
from .requests import EntityInput
from .results import AuthorizeResult, BatchResult

if TYPE_CHECKING:
    import ssl

    from polang.analysis.explain import Explanation
    from polang.analysis.plan import Plan
    from polang.language.values import EntityUID, RecordValue
    from polang.tokens.model import TokenInput

__all__ = ["ASYNC_FETCH_THREADS", "MAX_DEFERRED_ROUNDS", "AsyncEngine"]

#: Threads one ``AsyncEngine`` runs its fetches on. Fetches are single flight per issuer
#: and per status list, so this many issuers (or lists) can be fetched at once; more wait
#: their turn, each fetch bounded by ``ENGINE_HTTP_REQUEST_TIMEOUT``.
ASYNC_FETCH_THREADS = 8
#: Fetches one async decision waits for before it is decided on a worker thread instead
#: (each token may need its issuer's keys and a status list; a request that needs more
#: rounds than this is hostile or unlucky, and a worker thread bounds what it costs).
MAX_DEFERRED_ROUNDS = 8

T = TypeVar("T")


class AsyncEngine:
    """An :class:`Engine` for asyncio code: ``await`` its decisions.

    Build one with ``await AsyncEngine.create(config)`` (loads the store on a worker
    thread), or wrap an engine: ``AsyncEngine(engine)``. Answers, errors and logs are the
    wrapped engine's; ``.engine`` serves everything that never touches the network
    (queries, logs, the store).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(ASYNC_FETCH_THREADS, thread_name_prefix="polang-fetch")
        self.fetches_started = 0  # fetches this engine ran on its threads (tests, benchmarks)

    @classmethod
    async def create(
        cls,
        config: Config | Mapping[str, Any] | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        prefetch: bool = False,
    ) -> AsyncEngine:
        """Load the store on a worker thread (a store URL is fetched); with ``prefetch``,
        also fetch every trusted issuer's keys (see :meth:`ready`) before returning."""
        engine = await asyncio.to_thread(partial(Engine, config, ssl_context=ssl_context))
        out = cls(engine)
        if prefetch:
            await out.ready()
        return out

    # -- lifecycle ------------------------------------------------------------------------

    async def ready(self) -> dict[str, str | None]:
        """Discover every trusted issuer and fetch its keys, all at once, without blocking
        the loop: issuer id -> ``None`` when its keys are in hand, else why not (as
        ``Engine.prefetch``). Failures are reported, never raised."""
        snap = self.engine._snap
        if not snap.store.trusted_issuers:
            return {}
        issuers = snap.tokens.registry.issuers

        async def one(keys: Any) -> tuple[str, str | None]:
            for _ in range(MAX_DEFERRED_ROUNDS):
                try:
                    with deferred():
                        keys.prefetch()
                    break
                except FetchPending as pending:
                    await self._wait(pending)
            return keys.settings.issuer_id, keys.readiness()

        return dict(await asyncio.gather(*(one(k) for k in issuers)))

    async def aclose(self) -> None:
        """Close the engine (on a thread: it writes pending metrics and closes clients)."""
        await asyncio.to_thread(self.engine.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- decisions ------------------------------------------------------------------------

    async def authorize_unsigned(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        principal: EntityInput | None = None,
    ) -> AuthorizeResult:
        """``Engine.authorize_unsigned``, inline (it never fetches)."""
        return self.engine.authorize_unsigned(action, resource, context, principal)

    async def authorize_multi_issuer(
        self,
        tokens: Sequence[TokenInput | Mapping[str, Any]],
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
    ) -> AuthorizeResult:
        """``Engine.authorize_multi_issuer``; fetches keys and status lists off the loop."""
        return await self._decide(
            partial(self.engine.authorize_multi_issuer, tokens, action, resource, context)
        )

    async def authorize_unsigned_batch(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        principal: EntityInput | None = None,
    ) -> list[BatchResult]:
        """``Engine.authorize_unsigned_batch``, inline."""
        return self.engine.authorize_unsigned_batch(requests, principal=principal)

    async def authorize_multi_issuer_batch(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        tokens: Sequence[TokenInput | Mapping[str, Any]] | None = None,
    ) -> list[BatchResult]:
        """``Engine.authorize_multi_issuer_batch``; fetches off the loop."""
        items = list(requests)  # decided again after a fetch: an iterator would be spent
        return await self._decide(
            partial(self.engine.authorize_multi_issuer_batch, items, tokens=tokens)
        )

    async def explain(
        self,
        action: str | EntityUID,
        resource: EntityInput,
        context: Mapping[str, Any] | RecordValue | None = None,
        principal: EntityInput | None = None,
        *,
        tokens: Sequence[TokenInput | Mapping[str, Any]] | None = None,
    ) -> Explanation:
        """``Engine.explain``; with ``tokens``, fetches off the loop."""
        return await self._decide(
            partial(self.engine.explain, action, resource, context, principal, tokens=tokens)
        )

    async def plan(
        self,
        action: str | EntityUID,
        resource_type: str,
        principal: EntityInput | None = None,
        context: Mapping[str, Any] | RecordValue | None = None,
        *,
        entities: Iterable[Mapping[str, Any]] = (),
    ) -> Plan:
        """``Engine.plan``, inline (it never fetches)."""
        return self.engine.plan(action, resource_type, principal, context, entities=entities)

    async def plan_multi_issuer(
        self,
        tokens: Sequence[TokenInput | Mapping[str, Any]],
        action: str | EntityUID,
        resource_type: str,
        context: Mapping[str, Any] | RecordValue | None = None,
    ) -> Plan:
        """``Engine.plan_multi_issuer`` (a list endpoint's plan); fetches off the loop."""
        return await self._decide(
            partial(self.engine.plan_multi_issuer, tokens, action, resource_type, context)
        )

    # -- the network, off the loop -------------------------------------------------------

    async def _decide(self, call: Callable[[], T]) -> T:
        """``call()`` inline; each fetch it needs is awaited off the loop, then it is
        called again (fetched keys and lists are cached, so it gets further each time)."""
        for _ in range(MAX_DEFERRED_ROUNDS):
            try:
                with deferred():
                    return call()
            except FetchPending as pending:
                await self._wait(pending)
        return await asyncio.to_thread(call)

    async def _wait(self, pending: FetchPending) -> None:
        """Start the fetch ``pending`` carries (if it is ours) and await its end."""
        loop = asyncio.get_running_loop()
        if pending.run is not None:
            # submitted before any await, so it runs even if this coroutine is cancelled
            # (the flight must end, or every later request would wait for it)
            self.fetches_started += 1
            try:
                self._executor.submit(pending.run)
            except RuntimeError:  # the engine was closed: a thread of its own
                threading.Thread(target=pending.run, name="polang-fetch", daemon=True).start()
        done: asyncio.Future[None] = loop.create_future()

        def finish() -> None:
            if not done.done():
                done.set_result(None)

        def wake() -> None:  # on the fetching thread
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(finish)

        pending.flight.add_done_callback(wake)
        timeout = self.engine.config.http_request_timeout
        # discovery and keys: two fetches, each with its own deadline; past that the
        # request is decided again (and waits for a fetch still in flight once more)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, 2 * timeout + 5.0)
