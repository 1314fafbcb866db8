"""Trusted issuers at run time: identity, discovery, and their signing keys (JWKS).

One :class:`IssuerKeys` per issuer holds what was learned over the network: the
discovery document's ``issuer`` and ``jwks_uri``, and the last good key set. Keys are
cached (Cache-Control ``max-age``, else ``ENGINE_JWKS_REFRESH_INTERVAL``); a token whose
``kid`` is unknown triggers at most one refetch per ``ENGINE_JWKS_MIN_REFRESH_INTERVAL``;
a failed refresh keeps the last good keys. Issuers listed in ``ENGINE_LOCAL_JWKS`` use
those keys and are never discovered.

Every key is checked when its JWKS is read (:func:`parse_jwks`): weak, absurd or unusable
keys (short or huge RSA moduli, bad exponents, curves that do not match, private or
published symmetric keys) are left out, each with its reason, so no token is ever
verified with them. A fetched JWKS keeps its other keys and the system log names the
refused one; a local one is a configuration error.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from polang._flight import FetchPending, Flight, deferring
from polang.errors import ConfigError
from polang.http import Fetcher, FetchError, cache_control_max_age, short_url
from polang.inputs.files import InputFileError, read_regular_file
from polang.jsonlimits import loads
from polang.tokens.records import IssuerSettings
from polang.tokens.settings import ALL_ALGORITHMS, WELL_KNOWN_SUFFIX, TokenSettings
from polang.tokens.signatures import check_key

if TYPE_CHECKING:
    import jwt

DEFAULT_JWKS_REFRESH = 3600
#: Most keys a JWKS may hold (providers publish a handful; each key is checked on load).
MAX_JWKS_KEYS = 100
#: Shortest RSA modulus (bits): RFC 7518 3.3 requires 2048 bits or more for RS*/PS*;
#: 512- and 1024-bit moduli have been factored or are within reach.
MIN_RSA_KEY_BITS = 2048
#: Longest RSA modulus (bits): OpenSSL's own ceiling (OPENSSL_RSA_MAX_MODULUS_BITS); every
#: verification costs more with the size, and real keys are 2048 to 4096 bits.
MAX_RSA_KEY_BITS = 16384
#: Longest RSA public exponent (bits): verification time grows with it, OpenSSL refuses
#: longer ones above 3072-bit moduli, and real keys use 65537 (17 bits).
MAX_RSA_EXPONENT_BITS = 64
#: Shortest symmetric (``oct``) key (bits): RFC 7518 3.2 wants at least the hash size
#: (256 for HS256; HS384 and HS512 need 384 and 512 bits).
MIN_HMAC_KEY_BITS = 256
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


_EC_CURVE_NAMES = tuple(_EC_CURVES.values())
_EDDSA_CURVES = ("Ed25519", "Ed448")


def _fits(alg: str, kty: str, crv: str | None, bits: int) -> bool:
    """Whether a key of this type, curve and size may verify ``alg`` (no HMAC with a public
    key, no EC key on another curve, no HS512 with a 256-bit secret)."""
    if alg in _RSA_ALGS:
        return kty == "RSA"
    if alg in _EC_CURVES:
        return kty == "EC" and crv == _EC_CURVES[alg]
    if alg == "EdDSA":
        return kty == "OKP" and crv in _EDDSA_CURVES
    if alg in _HMAC_ALGS:
        return kty == "oct" and bits >= int(alg[2:])
    return False


@dataclass
class JsonWebKey:
    """One usable public (or, for HS*, shared) key from a JWKS."""

    data: dict[str, Any]
    kid: str | None
    kty: str
    crv: str | None
    alg: str | None
    bits: int = 0  # RSA modulus or symmetric key size; 0 for EC and OKP keys
    _by_alg: dict[str, jwt.PyJWK] = field(default_factory=dict, repr=False)

    def fits(self, alg: str) -> bool:
        """Whether this key may verify ``alg``: the key type must match the algorithm."""
        if self.alg is not None and self.alg != alg:
            return False
        return _fits(alg, self.kty, self.crv, self.bits)

    def pyjwk(self, alg: str) -> jwt.PyJWK:
        key = self._by_alg.get(alg)
        if key is None:
            import jwt  # PyJWT and cryptography load with the first key, not at import

            key = jwt.PyJWK(self.data, algorithm=alg)
            self._by_alg[alg] = key
        return key


def _quoted(text: str) -> str:
    """A ``kid`` as quoted in messages (bounded: the JWKS is only as trusted as transport)."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


@dataclass(frozen=True, slots=True)
class RefusedKey:
    """A JWKS entry that is not used, and why (weak, absurd, or not a key at all)."""

    index: int
    kid: str | None
    reason: str

    def describe(self) -> str:
        name = "no kid" if self.kid is None else f"kid {_quoted(self.kid)}"
        return f"keys[{self.index}] ({name})"


def _member(k: dict[str, Any], name: str) -> bytes | None:
    """A base64url member (``n``, ``e``, ``k``) decoded as PyJWT decodes it; None when absent
    or not a string (PyJWT's own load then says what is wrong)."""
    value = k.get(name)
    if not isinstance(value, str):
        return None
    from jwt.utils import base64url_decode

    try:
        return base64url_decode(value)
    except ValueError:  # binascii.Error: a bad length
        raise ValueError(f"{name!r} is not base64url") from None


def _uint(k: dict[str, Any], name: str) -> int | None:
    raw = _member(k, name)
    return None if raw is None else int.from_bytes(raw, "big")


def _refusal(entry: JsonWebKey, fetched: bool) -> str | None:
    """Why a key may not be used (its limit named), or None; sets ``entry.bits``.

    Checked on the JWK's members, before any key object is built, so a huge modulus
    costs no more than reading it.
    """
    k, kty, crv = entry.data, entry.kty, entry.crv
    if kty == "oct":
        if fetched:
            return (
                "a symmetric ('oct') key in a fetched JWKS: a published secret verifies "
                "anyone's tokens (HS* keys come only from ENGINE_LOCAL_JWKS)"
            )
        entry.bits = 8 * len(_member(k, "k") or b"")
        if entry.bits < MIN_HMAC_KEY_BITS:
            return (
                f"symmetric key of {entry.bits} bits, fewer than MIN_HMAC_KEY_BITS "
                f"({MIN_HMAC_KEY_BITS}; RFC 7518 3.2)"
            )
    elif "d" in k:
        return "it holds private key material ('d'); a JWKS lists public keys only"
    elif kty == "RSA":
        n, e = _uint(k, "n"), _uint(k, "e")
        if n is not None:
            entry.bits = n.bit_length()
            if entry.bits < MIN_RSA_KEY_BITS:
                return (
                    f"RSA key of {entry.bits} bits, fewer than MIN_RSA_KEY_BITS "
                    f"({MIN_RSA_KEY_BITS}; RFC 7518 3.3)"
                )
            if entry.bits > MAX_RSA_KEY_BITS:
                return (
                    f"RSA key of {entry.bits} bits, more than MAX_RSA_KEY_BITS ({MAX_RSA_KEY_BITS})"
                )
        if e is not None:
            if e.bit_length() > MAX_RSA_EXPONENT_BITS:
                return (
                    f"RSA public exponent of {e.bit_length()} bits, more than "
                    f"MAX_RSA_EXPONENT_BITS ({MAX_RSA_EXPONENT_BITS})"
                )
            if e < 3 or e % 2 == 0:
                return f"RSA public exponent {e} (it must be odd and at least 3)"
    elif kty == "EC" and crv not in _EC_CURVE_NAMES:
        return f"EC curve {crv!r} is not one polang verifies with ({', '.join(_EC_CURVE_NAMES)})"
    elif kty == "OKP" and crv not in _EDDSA_CURVES:
        return f"OKP curve {crv!r} is not a signature curve ({', '.join(_EDDSA_CURVES)})"
    alg = entry.alg
    if alg is not None and not _fits(alg, kty, crv, entry.bits):
        if kty == "oct":
            return f"its alg {alg!r} needs a key of at least {alg[2:]} bits (RFC 7518 3.2)"
        on = f" on {crv}" if crv else ""
        return f"its alg {alg!r} does not fit an {kty} key{on}"
    return None


def parse_jwks(
    doc: object, where: str, *, fetched: bool
) -> tuple[list[JsonWebKey], list[RefusedKey]]:
    """The usable signing keys of a JWKS, and the keys refused with their reasons.

    Encryption keys, unknown key types and keys for algorithms polang does not verify are
    skipped silently (they are meant for something else). Keys that would verify tokens
    but must not (see :func:`_refusal`) or cannot be loaded are refused. ``fetched``: the
    JWKS came over the network, where a symmetric key is never accepted. A JWKS that is
    not one (no ``keys`` array, more than ``MAX_JWKS_KEYS``) raises ``ValueError``.
    """
    raw = doc.get("keys") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a JWKS object with a 'keys' array")
    if len(raw) > MAX_JWKS_KEYS:
        raise ValueError(f"{where}: {len(raw)} keys, more than MAX_JWKS_KEYS ({MAX_JWKS_KEYS})")
    from jwt.exceptions import PyJWTError

    keys: list[JsonWebKey] = []
    refused: list[RefusedKey] = []
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
        if isinstance(alg, str) and alg not in ALL_ALGORITHMS:
            continue  # an encryption algorithm, or a signature one polang does not verify
        crv = k.get("crv")
        entry = JsonWebKey(
            data=dict(k),
            kid=kid if isinstance(kid, str) else None,
            kty=kty,
            crv=crv if isinstance(crv, str) else None,
            alg=alg if isinstance(alg, str) else None,
        )
        try:
            reason = _refusal(entry, fetched)
            if reason is None:  # load the key once, so a bad key fails here, not per token
                check_key(entry.data)
        except (PyJWTError, ValueError, TypeError, KeyError) as e:
            reason = f"not a valid {kty} key ({e})"
        if reason is not None:
            refused.append(RefusedKey(i, entry.kid, reason))
            continue
        keys.append(entry)
    return keys, refused


def load_local_jwks(path: str, issuer_ids: Sequence[str]) -> dict[str, list[JsonWebKey]]:
    """``ENGINE_LOCAL_JWKS``: ``{"<issuer_id>": [JWK, ...]}`` (a JWKS object is accepted too)."""
    try:  # a regular file (a FIFO would block), a link followed (mounted secrets)
        data = read_regular_file(path, _MAX_LOCAL_JWKS_BYTES, "the 10 MiB limit of local keys")
    except InputFileError as e:
        raise ConfigError(f"ENGINE_LOCAL_JWKS: {path!r}: {e.reason}") from None
    doc = loads(data, what=f"ENGINE_LOCAL_JWKS: {path!r}", error=ConfigError)
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
        where = f"{path}: {issuer_id}"
        try:
            out[issuer_id], refused = parse_jwks(keys, where, fetched=False)
        except ValueError as e:
            raise ConfigError(f"ENGINE_LOCAL_JWKS: {e}") from e
        if refused:  # the operator's own file: a key it lists must be usable
            listed = "; ".join(f"{r.describe()}: {r.reason}" for r in refused)
            raise ConfigError(f"ENGINE_LOCAL_JWKS: {where}: refused {listed}")
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
    Under :func:`polang._flight.deferred` (the async API) nothing here blocks: starting or
    waiting for a fetch raises :class:`~polang._flight.FetchPending` instead.
    """

    def __init__(
        self,
        settings: IssuerSettings,
        token_settings: TokenSettings,
        fetcher: Fetcher,
        clock: Callable[[], float],
        local_keys: list[JsonWebKey] | None = None,
        warn: Callable[[str], object] | None = None,
    ) -> None:
        """``warn(message)`` tells the system log about keys refused in a fetched JWKS."""
        self.settings = settings
        self._ts = token_settings
        self._fetcher = fetcher
        self._clock = clock
        self._lock = threading.Lock()
        self._inflight: Flight | None = None
        self.local = local_keys is not None
        self.expected_issuer = issuer_from_endpoint(settings.openid_configuration_endpoint)
        self.endpoint_host = url_host(settings.openid_configuration_endpoint)
        self.discovered_issuer: str | None = None
        self.jwks_uri: str | None = None
        self._keys: list[JsonWebKey] | None = local_keys
        self._refused: list[RefusedKey] = []  # of the JWKS in use, for drop reasons
        self._warn = warn
        self._expires_at = math.inf if self.local else -math.inf
        self._last_attempt = -math.inf
        self._last_kid_refetch = -math.inf
        self._last_error: KeyLookupError | None = None
        self._keys_at: float | None = None  # clock time the keys in hand were fetched
        self._last_failure: tuple[float, str] | None = None  # kept after a later success
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
            return _select(self._keys or [], kid, alg)  # refused local keys stop the load
        with self._lock:
            keys = self._keys
            known = keys is not None and (kid is None or self._has_kid(kid))
            fresh = keys is not None and self._clock() < self._expires_at
            # known keys are used as they are while they are fresh, and also while a
            # refresh runs (never waiting for it)
            settled = known and (fresh or self._inflight is not None)
        if not settled:
            self._sync(lambda now: self._wants_fetch(kid, now))
        with self._lock:
            keys = self._keys
            err = self._last_error
            refused = self._refused
        if keys is None:
            if err is None:
                raise KeyLookupError("signature", "no signing keys available")
            raise KeyLookupError(err.kind, err.message)
        found = _select(keys, kid, alg)
        if not found and refused:
            self._no_usable_key(refused, kid, alg)
        return found

    def _no_usable_key(self, refused: list[RefusedKey], kid: str | None, alg: str) -> None:
        """Raise the drop reason of a token whose key was refused when the JWKS was read."""
        issuer = f"issuer {self.settings.issuer_id!r}"
        if kid is None:
            listed = "; ".join(f"{r.describe()}: {r.reason}" for r in refused[:3])
            raise KeyLookupError(
                "signature",
                f"{issuer} has no usable key for algorithm {alg}; refused when its JWKS was "
                f"read: {listed}",
            )
        hit = next((r for r in refused if r.kid == kid), None)
        if hit is not None:
            raise KeyLookupError(
                "signature",
                f"{issuer} has no usable {alg} key with kid {_quoted(kid)}: it was refused "
                f"when the JWKS was read ({hit.reason})",
            )

    def _cooled(self, now: float) -> bool:
        return now - self._last_attempt >= self._ts.jwks_min_refresh_interval

    def _has_kid(self, kid: str) -> bool:
        """(Under the lock.) Whether the JWKS in hand lists ``kid``, usable or refused: a
        refused key is not fetched again for each of its tokens."""
        return any(k.kid == kid for k in self._keys or ()) or any(
            r.kid == kid for r in self._refused
        )

    def _wants_fetch(self, kid: str | None, now: float) -> bool:
        """(Under the lock.) Whether a fetch should start now for a token with ``kid``."""
        keys = self._keys
        if (keys is None or now >= self._expires_at) and self._cooled(now):
            return True
        if (
            keys is not None
            and kid is not None
            and not self._has_kid(kid)
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

    def health(self) -> dict[str, Any]:
        """Plain data for ``engine.health()``: the keys held, their age, the last failure."""
        with self._lock:
            keys = len(self._keys or ())
            keys_at = self._keys_at
            failure = self._last_failure
            failing = self._last_error is not None
        now = self._clock()
        return {
            "name": self.settings.name,
            "issuer": self.identifier,
            "local_keys": self.local,
            "contacted": self.discovery_count + self.fetch_count > 0,
            "keys": keys,
            "keys_age_seconds": None if keys_at is None else round(max(0.0, now - keys_at), 3),
            "failing": failing,
            "last_failure_seconds_ago": (
                None if failure is None else round(max(0.0, now - failure[0]), 3)
            ),
            "last_failure_reason": None if failure is None else failure[1],
        }

    @property
    def key_count(self) -> int:
        """Usable keys held now (0 before the first good fetch)."""
        with self._lock:
            return len(self._keys or ())

    def readiness(self) -> str | None:
        """``None`` when this issuer's keys are in hand, else why not (a start-up report)."""
        error = self.last_error
        if error is None and not self.local and self.key_count == 0:
            error = f"issuer {self.settings.issuer_id!r}: no signing keys fetched yet"
        return error

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
                inflight = self._inflight = Flight()
                owner = True
            else:
                owner = False
        if not owner:
            if deferring():
                raise FetchPending(inflight, None)
            # the fetch in flight ends by its own deadline; the margin covers parsing
            inflight.wait(self._ts.http_timeout + 5.0)
            return
        if deferring():
            raise FetchPending(inflight, lambda: self._fly(now, inflight))
        self._fly(now, inflight)

    def _fly(self, now: float, flight: Flight) -> None:
        """Run the fetch ``flight`` stands for, then let its waiters go."""
        try:
            self._refresh(now)
        finally:
            with self._lock:
                self._inflight = None
            flight.finish()

    def _discover(self) -> tuple[str, str]:
        """(issuer, jwks_uri) from the discovery document; raises :class:`KeyLookupError`."""
        endpoint = self.settings.openid_configuration_endpoint
        where = f"issuer {self.settings.issuer_id!r}: discovery {short_url(endpoint)}"
        with self._lock:
            self.discovery_count += 1
        try:
            doc = self._fetcher.get(endpoint, kind="discovery").json()
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
                result = self._fetcher.get(jwks_uri, kind="jwks")
                keys, refused = parse_jwks(result.json(), short_url(jwks_uri), fetched=True)
            except (FetchError, ValueError) as e:
                with self._lock:
                    self.jwks_uri = None  # rediscover next time: the keys may have moved
                raise KeyLookupError(
                    "signature", f"issuer {self.settings.issuer_id!r}: JWKS fetch failed: {e}"
                ) from e
        except KeyLookupError as e:
            with self._lock:
                self._last_error = e
                self._last_failure = (self._clock(), e.message)
            return
        max_age = cache_control_max_age(result.headers)
        ttl = self._ts.jwks_refresh_interval if max_age is None else max_age
        if ttl is None:
            ttl = DEFAULT_JWKS_REFRESH
        with self._lock:
            self._keys = keys
            before = {(r.kid, r.reason) for r in self._refused}
            self._refused = refused
            self._expires_at = now + ttl
            self._last_error = None
            self._keys_at = self._clock()
        if self._warn is not None:  # once per refused key, not once per refetch
            for r in refused:
                if (r.kid, r.reason) not in before:
                    self._warn(
                        f"issuer {self.settings.issuer_id!r}: JWKS {short_url(jwks_uri)}: "
                        f"refused {r.describe()}: {r.reason}; tokens signed with it are "
                        "dropped"
                    )


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
        warn: Callable[[str], object] | None = None,
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
            IssuerKeys(i, settings, fetcher, clock, local.get(i.issuer_id), warn) for i in items
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
