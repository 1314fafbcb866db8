"""polang under Pyodide (CPython in WebAssembly): the async API, on the runtime's own I/O.

Pyodide has no threads and no sockets. Its I/O is the JavaScript runtime's, and it is
asynchronous: ``fetch`` for HTTP, ``crypto.subtle`` (WebCrypto) for signatures when the
``cryptography`` package is absent. :class:`WasmEngine` is :class:`~polang.engine.aio.AsyncEngine`
with that I/O:

- a decision runs as the async API runs it (:func:`polang._flight.deferred`); the fetch
  it needs is the same synchronous code as on CPython, run inline with a table of
  responses set (:func:`polang.http.held_responses`): a URL not in it raises
  :class:`~polang.http.FetchNeeded`, which is fetched here with :func:`fetch`, under the
  same limits as :class:`polang.http.Fetcher` (deadline, size after decoding, redirects
  never from https to http, retries), and the code runs again;
- a signature to verify with WebCrypto raises
  :class:`~polang.tokens.signatures.VerifyNeeded` the same way; it is verified here
  (:func:`webcrypto_verify`) and its answer kept (at most :data:`MAX_VERIFIED`);
- ``WasmEngine.create(config)`` loads a URL store (``ENGINE_POLICY_STORE_URI``) the same
  way; ``init_from_archive_bytes`` needs nothing of this.

Each step is bounded: :data:`MAX_WASM_ROUNDS` asynchronous steps per decision,
:data:`MAX_FETCHES_PER_RUN` fetches per piece of fetching code. This module imports
``js`` and ``pyodide`` only when it fetches or verifies, so it imports anywhere.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

from polang._flight import FetchPending, deferred
from polang.config import Config
from polang.engine.aio import AsyncEngine
from polang.engine.facade import Engine
from polang.errors import ConfigError
from polang.http import (
    REDIRECT_STATUSES,
    RETRY_STATUSES,
    FetchError,
    FetchLimits,
    FetchNeeded,
    Response,
    held_responses,
    retry_after_seconds,
    short_url,
)
from polang.runtime import WASM, Needed, refusing_needs, unavailable
from polang.tokens.signatures import VerifyNeeded, verified_results

__all__ = [
    "MAX_FETCHES_PER_RUN",
    "MAX_VERIFIED",
    "MAX_WASM_ROUNDS",
    "WasmEngine",
    "fetch",
    "webcrypto_verify",
]

#: Asynchronous steps (fetches, WebCrypto verifications) one decision waits for before
#: it is decided without them (what is still missing then fails, saying so). A token
#: needs up to four: its issuer's keys, its signature, its status list and the list's
#: signature; a request needing more than this many is hostile or unlucky.
MAX_WASM_ROUNDS = 32
#: Fetches one piece of fetching code (an issuer's discovery and keys, a status list, a
#: store) may need before it is run without the network (then it fails, saying so).
MAX_FETCHES_PER_RUN = 4
#: WebCrypto answers kept per engine (a signature verified once with a key stays
#: verified); the oldest go first.
MAX_VERIFIED = 4096
_BACKOFF_START = 0.1
_BACKOFF_MAX = 2.0

T = TypeVar("T")


def _fail(url: str, reason: str, status: int | None = None) -> FetchError:
    return FetchError(f"{short_url(url)}: {reason}", url=url, reason=reason, status=status)


def _scheme(url: str) -> str:
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


# ---------------------------------------------------------------- fetch


async def fetch(
    url: str,
    *,
    limits: FetchLimits,
    accept: str = "application/json",
    https_only: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """GET ``url`` with the runtime's ``fetch`` under :mod:`polang.http`'s policy.

    Redirects are followed here, one by one, where the runtime shows them (Node.js);
    a browser hides a redirect's target from the page (an ``opaqueredirect``), so there
    the browser follows them (at most its own 20) and the final URL is checked: an
    https fetch that ended on http, or an https-only fetch that left https, fails. The
    body is counted as it arrives, after the runtime decoded it (gzip, deflate, br).
    """
    if not WASM:
        raise _fail(url, "polang.wasm.fetch runs only under Pyodide (it uses the runtime's fetch)")
    scheme = _scheme(url)
    if https_only and scheme != "https":
        raise _fail(url, "only https:// URLs are fetched")
    if scheme not in ("http", "https"):
        raise _fail(url, "only http:// and https:// URLs are fetched")
    deadline = time.monotonic() + limits.timeout
    last = "no attempt made"
    retry_after: float | None = None
    for attempt in range(limits.max_retries + 1):
        if attempt:
            pause = min(_BACKOFF_START * 2 ** (attempt - 1), _BACKOFF_MAX)
            if retry_after is not None and retry_after > pause:
                pause = retry_after
            if pause >= deadline - time.monotonic():
                raise _fail(
                    url,
                    f"{last}, and the deadline of {limits.timeout:g} s "
                    f"(ENGINE_HTTP_REQUEST_TIMEOUT) leaves no time to retry "
                    f"(after {attempt} attempt{'s' if attempt > 1 else ''})",
                )
            await asyncio.sleep(pause)
        try:
            return await _attempt(url, limits, accept, https_only, dict(headers or {}), deadline)
        except _Retry as e:
            last, retry_after = e.reason, e.retry_after
    tries = f" (after {limits.max_retries + 1} attempts)" if limits.max_retries else ""
    raise _fail(url, f"{last}{tries}")


class _Retry(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


async def _attempt(
    url: str,
    limits: FetchLimits,
    accept: str,
    https_only: bool,
    headers: dict[str, str],
    deadline: float,
) -> Response:
    current = url
    follow = False  # the browser hides redirects: let it follow them, then check
    for _hop in range(limits.max_redirects + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(url, limits)
        resp, controller = await _start(current, accept, headers, follow, left, url, limits)
        try:
            status = int(resp.status)
            if resp.type == "opaqueredirect":
                follow = True
                continue  # asked again, the browser following (checked below)
            final = str(resp.url or current) if follow else current
            if follow:
                _check_followed(url, final, https_only)
            if status in REDIRECT_STATUSES:
                current = _redirect_target(
                    url, current, resp.headers.get("location"), status, https_only, bool(headers)
                )
                continue
            if status in RETRY_STATUSES:
                raise _Retry(
                    f"HTTP status {status}", retry_after_seconds(resp.headers.get("retry-after"))
                )
            if status != 200:
                raise _fail(url, f"fetching failed: HTTP status {status}", status)
            body = await _read(url, resp, limits, deadline)
            return Response(
                url=url,
                final_url=final,
                status=status,
                headers={str(k).lower(): str(v) for k, v in resp.headers.entries()},
                body=body,
            )
        finally:
            controller.abort()  # ends the body stream if it was not read (no-op after)
    raise _fail(url, f"more than {limits.max_redirects} redirects (MAX_REDIRECTS)")


async def _start(
    url: str,
    accept: str,
    headers: dict[str, str],
    follow: bool,
    left: float,
    original: str,
    limits: FetchLimits,
) -> tuple[Any, Any]:
    """The runtime's fetch of ``url``: (response, its AbortController)."""
    import js  # Pyodide's bridge to the JavaScript runtime: present only there
    from pyodide.ffi import JsException, to_js

    controller = js.AbortController.new()
    options = {
        "method": "GET",
        "headers": {**headers, "Accept": accept},
        "redirect": "follow" if follow else "manual",
        "credentials": "omit",  # no cookies, as on CPython
        "cache": "no-store",
        "signal": controller.signal,
    }
    try:
        resp = await asyncio.wait_for(
            js.fetch(url, to_js(options, dict_converter=js.Object.fromEntries)), left
        )
    except TimeoutError:
        controller.abort()
        raise _timed_out(original, limits) from None
    except JsException as e:  # a refused connection, DNS, TLS, CORS: the runtime says which
        raise _Retry(f"the request failed ({str(e)[:300]})") from None
    return resp, controller


def _timed_out(url: str, limits: FetchLimits) -> FetchError:
    return _fail(
        url,
        f"timed out after {limits.timeout:g} s (ENGINE_HTTP_REQUEST_TIMEOUT, the deadline of "
        "the whole fetch)",
    )


def _redirect_target(
    url: str,
    current: str,
    location: str | None,
    status: int,
    https_only: bool,
    with_headers: bool,
) -> str:
    if not location:
        raise _fail(url, f"HTTP status {status} without a Location header", status)
    target = urljoin(current, str(location).strip())
    scheme = _scheme(target)
    if scheme not in ("http", "https"):
        raise _fail(url, f"redirect to {short_url(target)} refused: not http(s)")
    if scheme != "https" and (https_only or _scheme(current) == "https"):
        why = "only https is fetched here" if https_only else "a downgrade from https"
        raise _fail(
            url, f"redirect from {short_url(current)} to {short_url(target)} refused ({why})"
        )
    if with_headers and urlsplit(target).netloc.lower() != urlsplit(current).netloc.lower():
        raise _fail(
            url,
            f"redirect to {short_url(target)} refused: credentials never leave the server "
            "they were meant for",
        )
    return target


def _check_followed(url: str, final: str, https_only: bool) -> None:
    """A redirect the browser followed: the same rules, on where it ended."""
    scheme = _scheme(final)
    if scheme != "https" and (https_only or _scheme(url) == "https"):
        why = "only https is fetched here" if https_only else "a downgrade from https"
        raise _fail(url, f"redirected to {short_url(final)}, refused ({why})")


async def _read(url: str, resp: Any, limits: FetchLimits, deadline: float) -> bytes:
    """The body, counted as it arrives: at most ``ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES``."""
    from pyodide.ffi import JsException  # only under Pyodide

    cap = limits.max_response_size
    declared = str(resp.headers.get("content-length") or "").strip()
    encoded = str(resp.headers.get("content-encoding") or "").strip().lower()
    plain = encoded in ("", "identity")
    if plain and declared.isdigit() and len(declared) < 20 and int(declared) > cap:
        raise _fail(
            url,
            f"the response is {declared} bytes, more than "
            f"ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})",
        )
    if resp.body is None:
        return b""
    reader = resp.body.getReader()
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _timed_out(url, limits)
            try:
                chunk = await asyncio.wait_for(reader.read(), left)
            except TimeoutError:
                raise _timed_out(url, limits) from None
            except JsException as e:
                raise _Retry(f"the connection broke while reading ({str(e)[:300]})") from None
            if chunk.done:
                break
            data = chunk.value.to_bytes()
            size += len(data)
            if size > cap:
                raise _fail(
                    url, f"the response is larger than ENGINE_HTTP_MAX_RESPONSE_SIZE_BYTES ({cap})"
                )
            chunks.append(data)
    finally:
        reader.releaseLock()
    return b"".join(chunks)


# ---------------------------------------------------------------- WebCrypto

_HASHES = {"256": "SHA-256", "384": "SHA-384", "512": "SHA-512"}


def _webcrypto_params(alg: str, jwk: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(importKey's algorithm, verify's algorithm) for a JWS ``alg`` (RFC 7518 3)."""
    family, bits = alg[:2], alg[2:]
    if alg == "EdDSA":
        name = jwk.get("crv", "")
        return {"name": name}, {"name": name}
    hash_name = _HASHES.get(bits)
    if hash_name is None:
        raise ValueError(f"algorithm {alg!r}")
    if family == "RS":
        return {"name": "RSASSA-PKCS1-v1_5", "hash": hash_name}, {"name": "RSASSA-PKCS1-v1_5"}
    if family == "PS":
        salt = int(bits) // 8  # RFC 7518 3.5: the salt is as long as the hash
        return {"name": "RSA-PSS", "hash": hash_name}, {"name": "RSA-PSS", "saltLength": salt}
    if family == "ES":
        return (
            {"name": "ECDSA", "namedCurve": jwk.get("crv", "")},
            {"name": "ECDSA", "hash": hash_name},
        )
    if family == "HS":
        return {"name": "HMAC", "hash": hash_name}, {"name": "HMAC"}
    raise ValueError(f"algorithm {alg!r}")


async def webcrypto_verify(need: VerifyNeeded) -> bool:
    """Whether WebCrypto verifies the signature ``need`` describes. A key or algorithm
    the runtime does not support (Ed448 in most browsers) does not verify."""
    import js  # only under Pyodide
    from pyodide.ffi import JsException, to_js

    try:
        imported, verifying = _webcrypto_params(need.alg, need.jwk)
        convert = js.Object.fromEntries
        key = await js.crypto.subtle.importKey(
            "jwk",
            to_js(need.jwk, dict_converter=convert),
            to_js(imported, dict_converter=convert),
            False,
            to_js(["verify"]),
        )
        ok = await js.crypto.subtle.verify(
            to_js(verifying, dict_converter=convert),
            key,
            to_js(need.signature),
            to_js(need.signed),
        )
    except (JsException, ValueError):
        return False
    return bool(ok)


# ---------------------------------------------------------------- the engine


class WasmEngine(AsyncEngine):
    """:class:`~polang.engine.aio.AsyncEngine` for Pyodide: fetches through the runtime's
    ``fetch``, signatures through WebCrypto when ``cryptography`` is absent, everything
    inline on the one thread there is.

    ``await WasmEngine.create(config)`` loads the store the configuration names (a URL
    is fetched); ``WasmEngine(Engine.from_archive_bytes(config, data))`` wraps an engine
    built from bytes the host fetched itself. ``.engine`` serves everything that never
    touches the network (``authorize_unsigned``, ``explain``, ``who_can``...).
    """

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._verified: OrderedDict[bytes, bool] = OrderedDict()
        # One decision that needs the network at a time: the fetching code ends its flight
        # each time it stops for a fetch, so a second decision would find no fetch in
        # flight and the cooldown running, and drop its token instead of waiting.
        self._serial = asyncio.Lock()
        self.steps = 0  # asynchronous steps taken (fetches and verifications; tests)

    @classmethod
    async def create(  # type: ignore[override]
        cls, config: Config | Mapping[str, Any] | None = None, *, prefetch: bool = False
    ) -> WasmEngine:
        """The engine for ``config``; a store URL is fetched with the runtime's fetch."""
        cfg = config if isinstance(config, Config) else Config.from_dict(config or {})
        if cfg.policy_store_refresh_interval > 0:
            raise ConfigError(
                unavailable(
                    "ENGINE_POLICY_STORE_REFRESH_INTERVAL (refreshing a store in the background)",
                    "no threads",
                    "set it to 0 and build a new engine with WasmEngine.create when a newer "
                    "store is wanted",
                )
            )
        held: dict[tuple[str, str], Response | FetchError] = {}
        engine: Engine | None = None
        for _ in range(MAX_FETCHES_PER_RUN):
            try:
                with held_responses(held):
                    engine = Engine(cfg)
                break
            except FetchNeeded as need:
                await _fetch_into(held, need)
        if engine is None:
            limit = (
                f"the store needed more than MAX_FETCHES_PER_RUN ({MAX_FETCHES_PER_RUN}) fetches"
            )
            with held_responses(held), refusing_needs(limit):
                engine = Engine(cfg)  # fails, naming the limit
        out = cls(engine)
        if prefetch:
            await out.ready()
        return out

    async def aclose(self) -> None:
        """Close the engine (inline: nothing there waits for the network)."""
        self.engine.close()
        self._executor.shutdown(wait=False)

    @contextmanager
    def _tables(self, held: dict[tuple[str, str], Response | FetchError]) -> Iterator[None]:
        with held_responses(held), verified_results(self._verified):
            yield

    async def _decide(self, call: Callable[[], T]) -> T:
        held: dict[tuple[str, str], Response | FetchError] = {}
        try:  # most decisions need nothing: they never wait for the lock
            with deferred(), self._tables(held):
                return call()
        except (FetchPending, Needed) as step:
            first: FetchPending | Needed = step  # its fetch is registered: it must run
        async with self._serial:
            await self._step(held, first)
            for _ in range(MAX_WASM_ROUNDS - 1):
                try:
                    with deferred(), self._tables(held):
                        return call()
                except (FetchPending, Needed) as step:
                    await self._step(held, step)
            limit = f"this decision took MAX_WASM_ROUNDS ({MAX_WASM_ROUNDS}) asynchronous steps"
            with self._tables(held), refusing_needs(limit):
                return call()  # what is still missing fails, naming the limit

    async def _step(
        self, held: dict[tuple[str, str], Response | FetchError], step: FetchPending | Needed
    ) -> None:
        if isinstance(step, FetchPending):
            await self._wait(step)
        else:
            await self._fulfil(held, step)

    async def _wait(self, pending: FetchPending) -> None:
        """Run the fetching code ``pending`` carries, inline. (A flight without it is one
        that fetching code here ended when it stopped for a fetch: decided again.)"""
        if pending.run is not None:
            self.fetches_started += 1
            await self._run(pending.run)

    async def _run(self, run: Callable[[], object]) -> None:
        """``run()`` (an issuer's discovery and keys, a status list), its fetches done
        here; each time it stops for one, it is run again with the answer held."""
        held: dict[tuple[str, str], Response | FetchError] = {}
        for _ in range(MAX_FETCHES_PER_RUN):
            try:
                with deferred(), self._tables(held):
                    run()
                return
            except FetchPending as pending:  # a status list's issuer keys, first
                await self._wait(pending)
            except Needed as need:
                await self._fulfil(held, need)
        limit = f"it needed more than MAX_FETCHES_PER_RUN ({MAX_FETCHES_PER_RUN}) fetches"
        with self._tables(held), refusing_needs(limit):
            run()  # its fetch fails, naming the limit, and its flight ends

    async def _fulfil(
        self, held: dict[tuple[str, str], Response | FetchError], need: Needed
    ) -> None:
        self.steps += 1
        if isinstance(need, FetchNeeded):
            await _fetch_into(held, need)
        elif isinstance(need, VerifyNeeded):
            self._verified[need.digest] = await webcrypto_verify(need)
            while len(self._verified) > MAX_VERIFIED:
                self._verified.popitem(last=False)
        else:  # pragma: no cover - every Needed is one of the two
            raise TypeError(f"unknown asynchronous step {need!r}")


async def _fetch_into(
    held: dict[tuple[str, str], Response | FetchError], need: FetchNeeded
) -> None:
    try:
        got: Response | FetchError = await fetch(
            need.url,
            limits=need.limits,
            accept=need.accept,
            https_only=need.https_only,
            headers=need.headers,
        )
    except FetchError as e:
        got = e
    held[(need.url, need.accept)] = got
