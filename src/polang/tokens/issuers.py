"""Trusted issuers at run time: identity, discovery, and their signing keys (JWKS).

One :class:`IssuerKeys` per issuer holds what was learned over the network: the
discovery document's ``issuer`` and ``jwks_uri``, and the last good key set. Keys are
cached (Cache-Control ``max-age``, else ``ENGINE_JWKS_REFRESH_INTERVAL``); a token whose
``kid`` is unknown triggers at most one refetch per ``ENGINE_JWKS_MIN_REFRESH_INTERVAL``;
a failed refresh keeps the last good keys. Issuers listed in ``ENGINE_LOCAL_JWKS`` use
those keys and are never discovered.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from polang import jsonlimits
from polang.errors import ConfigError
from polang.http import Fetcher, FetchError, cache_control_max_age, short_url
from polang.tokens.settings import WELL_KNOWN_SUFFIX, IssuerSettings, TokenSettings

if TYPE_CHECKING:
    import jwt

DEFAULT_JWKS_REFRESH = 3600
#: Most keys a JWKS may hold (providers publish a handful; each key is checked on load).
MAX_JWKS_KEYS = 100
_MAX_LOCAL_JWKS_BYTES = 10 * 1024 * 1024


@lru_cache(maxsize=1024)  # every token's iss, once per trusted issuer: cache the parse
def normalize_issuer(url: str) -> str:
    """The comparison form of an issuer: scheme and host lowercased, no trailing ``/``."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


def issuer_from_endpoint(endpoint: str) -> str | None:
    """The issuer an OpenID discovery URL belongs to (OIDC Discovery 4), when it says so."""
    parts = urlsplit(endpoint.strip())
    path = parts.path.rstrip("/")
    if not path.endswith(WELL_KNOWN_SUFFIX) or parts.query:
        return None
    base = path[: -len(WELL_KNOWN_SUFFIX)]
    return normalize_issuer(f"{parts.scheme}://{parts.netloc}{base}")


@lru_cache(maxsize=1024)
def url_host(url: str) -> str:
    try:
        return (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return ""


# ---------------------------------------------------------------- keys

_RSA_ALGS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_HMAC_ALGS = frozenset({"HS256", "HS384", "HS512"})


@dataclass
class JsonWebKey:
    """One usable public (or, for HS*, shared) key from a JWKS."""

    data: dict[str, Any]
    kid: str | None
    kty: str
    crv: str | None
    alg: str | None
    _by_alg: dict[str, jwt.PyJWK] = field(default_factory=dict, repr=False)

    def fits(self, alg: str) -> bool:
        """Whether this key may verify ``alg``: the key type must match the algorithm."""
        if self.alg is not None and self.alg != alg:
            return False
        if alg in _RSA_ALGS:
            return self.kty == "RSA"
        if alg in _EC_CURVES:
            return self.kty == "EC" and self.crv == _EC_CURVES[alg]
        if alg == "EdDSA":
            return self.kty == "OKP" and self.crv in ("Ed25519", "Ed448")
        if alg in _HMAC_ALGS:
            return self.kty == "oct"
        return False

    def pyjwk(self, alg: str) -> jwt.PyJWK:
        key = self._by_alg.get(alg)
        if key is None:
            import jwt  # PyJWT and cryptography load with the first key, not at import

            key = jwt.PyJWK(self.data, algorithm=alg)
            self._by_alg[alg] = key
        return key


def parse_jwks(doc: object, where: str) -> list[JsonWebKey]:
    """Usable signing keys of a JWKS; encryption keys and unknown key types are skipped."""
    raw = doc.get("keys") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a JWKS object with a 'keys' array")
    if len(raw) > MAX_JWKS_KEYS:
        raise ValueError(f"{where}: {len(raw)} keys, more than MAX_JWKS_KEYS ({MAX_JWKS_KEYS})")
    import jwt
    from jwt.exceptions import PyJWTError

    keys: list[JsonWebKey] = []
    for i, k in enumerate(raw):
        if not isinstance(k, dict):
            raise ValueError(f"{where}: keys[{i}] is not an object")
        kty = k.get("kty")
        if not isinstance(kty, str):
            raise ValueError(f"{where}: keys[{i}] has no 'kty'")
        use = k.get("use")
        if use is not None and use != "sig":
            continue
        ops = k.get("key_ops")
        if isinstance(ops, list) and "verify" not in ops:
            continue
        if kty not in ("RSA", "EC", "OKP", "oct"):
            continue
        kid = k.get("kid")
        alg = k.get("alg")
        crv = k.get("crv")
        entry = JsonWebKey(
            data=dict(k),
            kid=kid if isinstance(kid, str) else None,
            kty=kty,
            crv=crv if isinstance(crv, str) else None,
            alg=alg if isinstance(alg, str) else None,
        )
        try:  # check the key material once, so a bad key fails at load, not per token
            jwt.PyJWK(entry.data)
        except (PyJWTError, ValueError, TypeError, KeyError) as e:
            raise ValueError(f"{where}: keys[{i}] is not a valid {kty} key ({e})") from e
        keys.append(entry)
    return keys


def load_local_jwks(path: str, issuer_ids: Sequence[str]) -> dict[str, list[JsonWebKey]]:
    """``ENGINE_LOCAL_JWKS``: ``{"<issuer_id>": [JWK, ...]}`` (a JWKS object is accepted too)."""
    from polang.store.layout import StoreFileError, read_named_file

    try:  # a regular file (a FIFO would block), a link followed (mounted secrets)
        data = read_named_file(path, _MAX_LOCAL_JWKS_BYTES, "the 10 MiB limit of local keys")
    except StoreFileError as e:
        raise ConfigError(f"ENGINE_LOCAL_JWKS: {path!r}: {e}") from None
    doc = jsonlimits.loads(data, what=f"ENGINE_LOCAL_JWKS: {path!r}", error=ConfigError)
    if not isinstance(doc, dict):
        raise ConfigError(f"ENGINE_LOCAL_JWKS: {path!r}: expected an object of issuer ids")
    out: dict[str, list[JsonWebKey]] = {}
    for issuer_id, keys in doc.items():
        if issuer_id not in issuer_ids:
            known = ", ".join(sorted(issuer_ids)) or "none"
            raise ConfigError(
                f"ENGINE_LOCAL_JWKS: {path}: {issuer_id!r} is not a trusted issuer id "
                f"(known: {known})"
            )
        try:
            out[issuer_id] = parse_jwks(keys, f"{path}: {issuer_id}")
        except ValueError as e:
            raise ConfigError(f"ENGINE_LOCAL_JWKS: {e}") from e
    return out


class KeyLookupError(Exception):
    """No key could be had; ``kind`` is the drop reason it leads to."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class IssuerKeys:
    """The run-time state of one trusted issuer (thread-safe).

    No lock is held across the network: ``_lock`` guards the state only, and at most one
    fetch per issuer runs at a time (``_inflight``). A token whose ``kid`` is among the
    keys already held never waits for a fetch; one that needs the fetch (no keys yet, or a
    ``kid`` that may have just been rotated in) waits for the one in flight, which the
    fetch deadline bounds. Every fetch, failed or not, starts the
    ``ENGINE_JWKS_MIN_REFRESH_INTERVAL`` cooldown, so tokens cannot multiply requests.
    """

    def __init__(
        self,
        settings: IssuerSettings,
        token_settings: TokenSettings,
        fetcher: Fetcher,
        clock: Callable[[], float],
        local_keys: list[JsonWebKey] | None = None,
    ) -> None:
        self.settings = settings
        self._ts = token_settings
        self._fetcher = fetcher
        self._clock = clock
        self._lock = threading.Lock()
        self._inflight: threading.Event | None = None
        self.local = local_keys is not None
        self.expected_issuer = issuer_from_endpoint(settings.openid_configuration_endpoint)
        self.endpoint_host = url_host(settings.openid_configuration_endpoint)
        self.discovered_issuer: str | None = None
        self.jwks_uri: str | None = None
        self._keys: list[JsonWebKey] | None = local_keys
        self._expires_at = math.inf if self.local else -math.inf
        self._last_attempt = -math.inf
        self._last_kid_refetch = -math.inf
        self._last_error: KeyLookupError | None = None
        self.fetch_count = 0  # JWKS fetches
        self.discovery_count = 0  # discovery fetches

    # ------------------------------------------------------------ identity

    @property
    def identifier(self) -> str | None:
        """The normalized issuer identifier, when known without (or after) discovery."""
        return self.discovered_issuer or self.expected_issuer

    def matches(self, iss: str, *, discover: bool) -> bool:
        """Whether a token's ``iss`` names this issuer (trailing ``/`` and case of host ignored).

        An issuer whose identifier is not known before discovery (its endpoint is not a
        ``/.well-known/openid-configuration`` URL) is discovered only for an ``iss`` on the
        endpoint's host, which is where its identifier must be: an ``iss`` anywhere else
        never causes a fetch. Discovery is then subject to the fetch cooldown.
        """
        wanted = normalize_issuer(iss)
        ident = self.identifier
        if ident is not None:
            return ident == wanted
        if self.local:
            return url_host(iss) == self.endpoint_host
        if not discover or url_host(iss) != self.endpoint_host:
            return False
        self._sync(lambda now: self.identifier is None and self._cooled(now))
        return self.identifier == wanted

    # ------------------------------------------------------------ keys

    def keys_for(self, kid: str | None, alg: str) -> list[JsonWebKey]:
        """Candidate keys for a token header; refreshes by the caching rules above."""
        if self.local:
            return _select(self._keys or [], kid, alg)
        with self._lock:
            keys = self._keys
            known = keys is not None and (kid is None or any(k.kid == kid for k in keys))
            fresh = keys is not None and self._clock() < self._expires_at
            # known keys are used as they are while they are fresh, and also while a
            # refresh runs (never waiting for it)
            settled = known and (fresh or self._inflight is not None)
        if not settled:
            self._sync(lambda now: self._wants_fetch(kid, now))
        with self._lock:
            keys = self._keys
            err = self._last_error
        if keys is None:
            if err is None:
                raise KeyLookupError("signature", "no signing keys available")
            raise KeyLookupError(err.kind, err.message)
        return _select(keys, kid, alg)

    def _cooled(self, now: float) -> bool:
        return now - self._last_attempt >= self._ts.jwks_min_refresh_interval

    def _wants_fetch(self, kid: str | None, now: float) -> bool:
        """(Under the lock.) Whether a fetch should start now for a token with ``kid``."""
        keys = self._keys
        if (keys is None or now >= self._expires_at) and self._cooled(now):
            return True
        if (
            keys is not None
            and kid is not None
            and not any(k.kid == kid for k in keys)
            and now - self._last_kid_refetch >= self._ts.jwks_min_refresh_interval
        ):
            self._last_kid_refetch = now  # a rotation, or an attacker's made-up kid
            return True
        return False

    def prefetch(self) -> None:
        """Discover and fetch keys now (start-up warm-up); failures are kept, not raised."""
        if not self.local:
            self._sync(lambda now: self._keys is None)

    @property
    def last_error(self) -> str | None:
        return self._last_error.message if self._last_error else None

    def _sync(self, wanted: Callable[[float], bool]) -> None:
        """Start a fetch if ``wanted(now)`` says so (asked under the lock), or wait for the
        one in flight. The lock is never held while fetching."""
        with self._lock:
            inflight = self._inflight
            if inflight is None:
                now = self._clock()
                if not wanted(now):
                    return
                self._last_attempt = now
                inflight = self._inflight = threading.Event()
                owner = True
            else:
                owner = False
        if not owner:
            # the fetch in flight ends by its own deadline; the margin covers parsing
            inflight.wait(self._ts.http_timeout + 5.0)
            return
        try:
            self._refresh(now)
        finally:
            with self._lock:
                self._inflight = None
            inflight.set()

    def _discover(self) -> tuple[str, str]:
        """(issuer, jwks_uri) from the discovery document; raises :class:`KeyLookupError`."""
        endpoint = self.settings.openid_configuration_endpoint
        where = f"issuer {self.settings.issuer_id!r}: discovery {short_url(endpoint)}"
        with self._lock:
            self.discovery_count += 1
        try:
            doc = self._fetcher.get(endpoint).json()
        except FetchError as e:
            raise KeyLookupError(
                "signature", f"issuer {self.settings.issuer_id!r}: discovery failed: {e}"
            ) from e
        if not isinstance(doc, dict):
            raise KeyLookupError("signature", f"{where}: the document is not a JSON object")
        issuer = doc.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise KeyLookupError("untrusted_issuer", f"{where}: the document has no 'issuer'")
        got = normalize_issuer(issuer)
        if self.expected_issuer is not None:
            if got != self.expected_issuer:
                raise KeyLookupError(
                    "untrusted_issuer",
                    f"{where}: the document's issuer {short_url(issuer)!r} does not match the "
                    "endpoint it came from (OpenID Connect Discovery 4.3)",
                )
        elif url_host(issuer) != self.endpoint_host:
            raise KeyLookupError(
                "untrusted_issuer",
                f"{where}: the document's issuer {short_url(issuer)!r} is on another host "
                "than the endpoint",
            )
        jwks_uri = doc.get("jwks_uri")
        if not isinstance(jwks_uri, str) or urlsplit(jwks_uri).scheme.lower() != "https":
            raise KeyLookupError("signature", f"{where}: 'jwks_uri' is missing or not https")
        return got, jwks_uri

    def _refresh(self, now: float) -> None:
        """Fetch the JWKS (discovering first when needed), without the lock; on failure
        keep the last good keys and remember why."""
        with self._lock:
            jwks_uri = self.jwks_uri
        try:
            if jwks_uri is None:
                issuer, jwks_uri = self._discover()
                with self._lock:
                    self.discovered_issuer = issuer
                    self.jwks_uri = jwks_uri
            with self._lock:
                self.fetch_count += 1
            try:
                result = self._fetcher.get(jwks_uri)
                keys = parse_jwks(result.json(), short_url(jwks_uri))
            except (FetchError, ValueError) as e:
                with self._lock:
                    self.jwks_uri = None  # rediscover next time: the keys may have moved
                raise KeyLookupError(
                    "signature", f"issuer {self.settings.issuer_id!r}: JWKS fetch failed: {e}"
                ) from e
        except KeyLookupError as e:
            with self._lock:
                self._last_error = e
            return
        max_age = cache_control_max_age(result.headers)
        ttl = self._ts.jwks_refresh_interval if max_age is None else max_age
        if ttl is None:
            ttl = DEFAULT_JWKS_REFRESH
        with self._lock:
            self._keys = keys
            self._expires_at = now + ttl
            self._last_error = None


def _select(keys: list[JsonWebKey], kid: str | None, alg: str) -> list[JsonWebKey]:
    if kid is not None:
        return [k for k in keys if k.kid == kid and k.fits(alg)]
    return [k for k in keys if k.fits(alg)]


class IssuerRegistry:
    """All trusted issuers, looked up by a token's ``iss``."""

    def __init__(
        self,
        issuers: Sequence[IssuerSettings] | Mapping[str, IssuerSettings],
        settings: TokenSettings,
        fetcher: Fetcher,
        clock: Callable[[], float],
    ) -> None:
        items = list(issuers.values()) if isinstance(issuers, Mapping) else list(issuers)
        ids = [i.issuer_id for i in items]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ConfigError(f"trusted issuers: duplicate issuer id(s) {sorted(dup)}")
        local: dict[str, list[JsonWebKey]] = {}
        if settings.local_jwks_path:
            local = load_local_jwks(settings.local_jwks_path, ids)
        self.issuers: list[IssuerKeys] = [
            IssuerKeys(i, settings, fetcher, clock, local.get(i.issuer_id)) for i in items
        ]
        self.by_id = {k.settings.issuer_id: k for k in self.issuers}

    def find(self, iss: str, *, discover: bool = True) -> list[IssuerKeys]:
        """Issuers whose identifier is ``iss``; discovers issuers whose identity is unknown."""
        found = [k for k in self.issuers if k.matches(iss, discover=False)]
        if found or not discover:
            return found
        return [k for k in self.issuers if k.identifier is None and k.matches(iss, discover=True)]

    def by_mapping(self, mapping: str) -> list[IssuerKeys]:
        return [k for k in self.issuers if k.settings.metadata_for(mapping) is not None]
