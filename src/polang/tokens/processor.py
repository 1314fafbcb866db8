"""From a request's JWTs to token entities and ``context.tokens``.

:class:`TokenProcessor` is the one entry point the engine uses. For each token it finds
the trusted issuer (by ``iss``) and the token metadata (by the request's ``mapping``),
verifies the signature, times, required claims and status, then builds the token
entity. Tokens that fail are dropped with a reason; the rest are returned with the
``context.tokens`` record. Thread-safe: every cache is behind a lock.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from polang.errors import RequestError, TokenError, bound_message
from polang.http import Fetcher
from polang.inputs.fields import closest, json_kind
from polang.language.entities import Entity
from polang.language.schema import STRING, RecordType, Schema, has_name_shape
from polang.language.values import LONG_MAX, LONG_MIN, EntityUID, RecordValue, Value
from polang.tokens.cache import TokenCache, cache_key
from polang.tokens.claim_paths import Miss, TooManyNestedTags, locate, nested_tags, resolve
from polang.tokens.claims import (
    ScopeLimitError,
    check_scopes,
    claim_attributes,
    first_text,
    roles_from,
    tag_value,
)
from polang.tokens.issuers import IssuerKeys, IssuerRegistry, issuer_from_endpoint, url_host
from polang.tokens.jwt_checks import (
    check_audience,
    check_required,
    check_times,
    decode_unverified,
    verify_signature,
)
from polang.tokens.model import (
    DroppedToken,
    ProcessedToken,
    ProcessedTokens,
    TokenDrop,
    TokenInput,
    TokenLogId,
)
from polang.tokens.records import IssuerSettings, TokenMetadata
from polang.tokens.settings import TokenSettings
from polang.tokens.status_list import StatusListChecker, StatusUnavailable

# The attributes every token entity may carry; claims never overwrite them. ``issuer``
# (the ``iss`` claim as text) is set only where the schema declares it, as Cedarling's
# published multi-issuer store does.
FIXED_ATTRIBUTES = frozenset({"token_type", "jti", "iss", "exp", "validated_at", "issuer"})
_FIXED_BUT_ISSUER = FIXED_ATTRIBUTES - {"issuer"}
#: The keys of a token given as a dict; any other key is refused (a misspelt ``payload``
#: would otherwise drop the token quietly).
TOKEN_INPUT_KEYS = ("mapping", "payload")
_TOKEN_KEY_SET = frozenset(TOKEN_INPUT_KEYS)
TOTAL_KEY = "total_token_count"
# Claims that become fixed attributes rather than tags (``iss`` only once verified).
_SKIP_UNVERIFIED = frozenset({"jti", "exp"})
_SKIP_VERIFIED = frozenset({"jti", "exp", "iss"})

# A mapping is an entity type name or, as Cedarling also accepts, a token name (a key of
# the issuer's ``token_metadata``, such as ``access_token``).
_UNSAFE = re.compile(r"[^a-z0-9_]")


def sanitize_key_part(text: str) -> str:
    """Lowercase, every character outside ``[a-z0-9_]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text.lower())


@lru_cache(maxsize=1024)  # a handful of (issuer, type) pairs, one per token
def context_key(issuer_part: str, entity_type_name: str) -> str:
    """The ``context.tokens`` field of a token: ``<issuer>_<type>``."""
    type_part = entity_type_name.rsplit("::", 1)[-1]
    return f"{sanitize_key_part(issuer_part)}_{sanitize_key_part(type_part)}"


def trusted_issuer_type(issuer: IssuerSettings) -> str:
    return f"{issuer.name}::TrustedIssuer"


def trusted_issuer_entity(issuer: IssuerSettings, schema: Schema | None = None) -> Entity:
    """The ``<name>::TrustedIssuer`` entity: id = issuer id, ``issuer_entity_id`` = its URL,
    a ``{host, path, protocol}`` record, or the URL as text where the schema declares the
    attribute a String (as Cedarling's published stores do)."""
    endpoint = issuer.openid_configuration_endpoint
    base = issuer_from_endpoint(endpoint) or endpoint
    parts = urlsplit(base)
    host = (parts.hostname or "").lower()
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    path = parts.path or "/"
    url: Value = RecordValue({"host": host, "path": path, "protocol": parts.scheme.lower()})
    etype = trusted_issuer_type(issuer)
    if schema is not None:
        et = schema.entity_types.get(etype)
        declared = et.shape.attributes.get("issuer_entity_id") if et is not None else None
        if declared is not None and declared.type == STRING:
            url = f"{parts.scheme.lower()}://{host}{'' if path == '/' else path}"
    return Entity(uid=EntityUID(etype, issuer.issuer_id), attrs={"issuer_entity_id": url})


def _coerce_input(item: object, max_size: int) -> tuple[str, str]:
    mapping: object
    payload: object
    if isinstance(item, TokenInput):
        mapping, payload = item.mapping, item.payload
    elif isinstance(item, Mapping):  # its keys were checked by check_token_inputs
        mapping, payload = item.get("mapping"), item.get("payload")
    else:
        mapping = getattr(item, "mapping", None)
        payload = getattr(item, "payload", None)
    if not isinstance(mapping, str) or not has_name_shape(mapping):
        raise TokenDrop(
            "invalid_input",
            "'mapping' must be an entity type name like 'Namespace::Type' (or a token name "
            "of the issuer's token_metadata), got "
            + (repr(mapping) if len(repr(mapping)) <= 120 else repr(mapping)[:117] + "..."),
        )
    if not isinstance(payload, str):
        raise TokenDrop("invalid_input", "'payload' must be a JWT string")
    if len(payload) > max_size:  # before any decoding or hashing
        raise TokenDrop(
            "invalid_input",
            f"the token is {len(payload)} characters long, more than ENGINE_TOKEN_MAX_SIZE "
            f"({max_size})",
        )
    payload = payload.strip()
    if not payload:
        raise TokenDrop("invalid_input", "'payload' must be a JWT string")
    if not payload.isascii():
        raise TokenDrop("invalid_input", "the token is not ASCII (not a compact JWT)")
    return mapping, payload


def check_token_inputs(tokens: Sequence[object]) -> None:
    """Refuse a token dict with a key other than ``mapping`` and ``payload``, naming the
    key and the token's index: a misspelt key is the caller's mistake, and would otherwise
    drop the token quietly (a token's *values* are untrusted input: those are dropped with
    a reason, never raised)."""
    for index, item in enumerate(tokens):
        if type(item) is TokenInput or (type(item) is dict and item.keys() <= _TOKEN_KEY_SET):
            continue  # the usual cases, without the ABC checks below (every request)
        if isinstance(item, TokenInput) or not isinstance(item, Mapping):
            continue
        extra = [k for k in item if k not in TOKEN_INPUT_KEYS]
        if not extra:
            continue
        key = extra[0]
        if isinstance(key, str):
            shown = repr(key[:60]) + ("..." if len(key) > 60 else "")
        else:  # not repr(): a nested key could be arbitrarily deep
            shown = f"of type {type(key).__name__}"
        hint = ""
        near = closest(key.lower(), TOKEN_INPUT_KEYS) if isinstance(key, str) else None
        if near:
            hint = f"; did you mean {near!r}?"
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        raise RequestError(
            f"tokens[{index}]: unknown key {shown}{more}: a token is "
            f'{{"mapping": <entity type name>, "payload": <JWT>}}{hint}'
        )


def _lacking_message(etype: str, lacking: list[str], unfit: Mapping[str, str]) -> str:
    """Why a token cannot become an entity of ``etype``: required attributes it lacks."""
    parts = []
    for name in lacking:
        if name in unfit:
            parts.append(f"`{name}` ({unfit[name]})")
        elif name == "iss":
            parts.append("`iss` (set only on tokens whose signature was verified)")
        elif name == "issuer":
            parts.append("`issuer` (the token has no string `iss` claim)")
        else:
            parts.append(f"`{name}` (the token has no usable claim for it)")
    return f"{etype}: the schema requires {', '.join(parts)}"


def _at_index(tok: ProcessedToken, index: int) -> ProcessedToken:
    """The cached token at this request's position: ``replace(tok, index=index)``, without
    its per-field work (the token is immutable, so the same index shares the object)."""
    if tok.index == index:
        return tok
    out: ProcessedToken = object.__new__(ProcessedToken)
    out.__dict__.update(tok.__dict__)
    out.__dict__["index"] = index
    return out


def _role_names(v: Any) -> bool:
    """Whether a role claim holds role names: a string, or an array with one."""
    if isinstance(v, str):
        return bool(v)
    return isinstance(v, list) and any(isinstance(r, str) and r for r in v)


def _mapping_of(item: object) -> str:
    m = item.get("mapping") if isinstance(item, Mapping) else getattr(item, "mapping", None)
    return m if isinstance(m, str) else ""


class TokenProcessor:
    """Validates tokens against the trusted issuers and builds token entities.

    ``clock`` returns the current time in seconds (tests pass a fake one).
    """

    def __init__(
        self,
        issuers: Sequence[IssuerSettings] | Mapping[str, IssuerSettings] = (),
        settings: TokenSettings | None = None,
        schema: Schema | None = None,
        *,
        clock: Callable[[], float] = time.time,
        log: Callable[[str, str], object] | None = None,
        fetcher: Fetcher | None = None,
    ) -> None:
        """``log(level, message)`` receives what the system log should hear about tokens
        (a claim left out of a token entity's attributes, a key refused in a fetched JWKS);
        the engine passes its logger."""
        self.settings = settings or TokenSettings()
        self.schema = schema
        self._clock = clock
        self._log = log
        # ``fetcher``: a client the caller owns and shares (e.g. across store refreshes)
        self._owns_http = fetcher is None
        self.http = fetcher or Fetcher(
            self.settings.fetch_limits(),
            self.settings.ssl_context,
            observer=self.settings.fetch_observer,
        )
        self.registry = IssuerRegistry(issuers, self.settings, self.http, clock, self._warn)
        self.status = StatusListChecker(self.settings, self.http, clock)
        self.cache: TokenCache[ProcessedToken] = TokenCache(
            self.settings.token_cache_capacity, self.settings.token_cache_max_ttl
        )
        # (issuer id, token name, field, path) already reported as matching nothing: the
        # system log hears of each once per loaded store, not once per token
        self._unmatched_warned: set[tuple[str, str, str, str]] = set()

    # ------------------------------------------------------------ public

    @property
    def issuers(self) -> list[IssuerSettings]:
        return [k.settings for k in self.registry.issuers]

    def trusted_issuer_entities(self) -> list[Entity]:
        """One ``TrustedIssuer`` entity per issuer, for the engine's entity store."""
        return [trusted_issuer_entity(i, self.schema) for i in self.issuers]

    def prefetch(self) -> dict[str, str | None]:
        """Discover every issuer and fetch its keys now; returns issuer id -> error or None."""
        out: dict[str, str | None] = {}
        for k in self.registry.issuers:
            k.prefetch()
            out[k.settings.issuer_id] = k.readiness()
        return out

    def push_status_list(self, text: str) -> str:
        """A status list JWT pushed to the engine (a Lock server's ``STATUS_LIST`` event):
        its ``iss`` must be a trusted issuer, whose keys verify it; it then replaces that
        list in the cache at once. Returns the list's URI; a ``TokenError`` says why not."""
        try:
            iss = decode_unverified(text).payload.get("iss")
            if not isinstance(iss, str) or not iss:
                raise StatusUnavailable("the list has no 'iss'")
            verify = self.settings.sig_validation
            found = self.registry.find(iss, discover=verify)
            if not found:
                raise StatusUnavailable(f"{iss[:200]!r} is not a trusted issuer")
            return self.status.push(text, found[0], verify)
        except (StatusUnavailable, TokenDrop) as e:
            raise TokenError(f"pushed status list refused: {e}") from None

    def close(self) -> None:
        """Let go of the HTTP client (fetches in flight finish first); a shared one stays."""
        if self._owns_http:
            self.http.close()

    def process(self, tokens: Iterable[TokenInput | Mapping[str, Any] | object]) -> ProcessedTokens:
        """Validate every token; keep the good ones, drop the rest with a reason."""
        items = tokens if isinstance(tokens, list | tuple) else list(tokens)
        check_token_inputs(items)
        out = ProcessedTokens()
        keys: dict[str, int] = {}
        uids: dict[EntityUID, int] = {}
        for index, item in enumerate(items):
            try:
                tok = self._one(item, index)
            except TokenDrop as e:
                out.dropped.append(DroppedToken(_mapping_of(item), index, e.kind, e.message))
                continue
            clash = keys.get(tok.context_key)
            if tok.context_key == TOTAL_KEY:
                msg = f"context.tokens key {TOTAL_KEY!r} is reserved for the token count"
                out.dropped.append(DroppedToken(tok.mapping, index, "duplicate_token", msg))
                continue
            if clash is not None:
                msg = (
                    f"context.tokens.{tok.context_key} is already taken by token {clash}; "
                    "the first token is kept"
                )
                out.dropped.append(DroppedToken(tok.mapping, index, "duplicate_token", msg))
                continue
            same = uids.get(tok.uid)
            if same is not None:
                msg = f"entity {tok.uid} is already built from token {same}"
                out.dropped.append(DroppedToken(tok.mapping, index, "duplicate_token", msg))
                continue
            keys[tok.context_key] = index
            uids[tok.uid] = index
            out.tokens.append(tok)
            claim = self.settings.decision_log_jwt_id
            out.log_ids.append(
                TokenLogId(tok.mapping, index, claim, first_text(tok.claims.get(claim)))
            )
        fields: dict[str, Value] = {t.context_key: t.uid for t in out.tokens}
        fields[TOTAL_KEY] = len(out.tokens)
        out.context_tokens = RecordValue(fields)
        return out

    # ------------------------------------------------------------ one token

    def _one(self, item: object, index: int) -> ProcessedToken:
        mapping, payload = _coerce_input(item, self.settings.token_max_size)
        now = self._clock()
        key = cache_key(mapping, payload)
        cached = self.cache.get(key, now)
        if cached is not None:
            return _at_index(cached, index)
        decoded = decode_unverified(payload)
        claims = decoded.payload
        if str(decoded.header.get("alg", "")).lower() == "none":
            raise TokenDrop("signature", "unsigned tokens (alg 'none') are never accepted")
        issuer, issuer_part, token_name, meta = self._resolve(mapping, claims)
        verify = self.settings.sig_validation
        if verify:
            assert issuer is not None
            verify_signature(decoded, issuer, self.settings.algorithms)
        skew = self.settings.clock_skew
        check_times(claims, now, skew)
        check_required(claims, meta.required_claims)
        if issuer is not None:
            check_audience(claims, issuer.settings.audience_for(meta))
        if self.settings.status_validation:
            self.status.check(claims, issuer, verify)
        tok = self._build(mapping, index, claims, issuer, issuer_part, token_name, meta, now)
        exp = claims.get("exp")
        expires_at = float(exp) + skew if isinstance(exp, (int, float)) else None
        self.cache.put(key, tok, now, expires_at)
        return tok

    def _resolve(
        self, mapping: str, claims: dict[str, Any]
    ) -> tuple[IssuerKeys | None, str, str, TokenMetadata]:
        """(issuer, its ``context.tokens`` name, token name, metadata) for a token."""
        iss = claims.get("iss")
        if iss is not None and (not isinstance(iss, str) or not iss):
            raise TokenDrop("invalid_input", "claim 'iss' is not a non-empty string")
        verify = self.settings.sig_validation
        candidates = self.registry.find(iss, discover=verify) if iss else []
        issuer_part: str | None = None
        if not candidates and not self.settings.sig_validation:
            # Unverified tokens: the mapping may name the issuer; the key uses iss's host.
            candidates = self.registry.by_mapping(mapping)
            if iss:
                issuer_part = url_host(iss) or None
        if not candidates:
            if not iss:
                raise TokenDrop("untrusted_issuer", "the token has no 'iss' claim")
            raise TokenDrop("untrusted_issuer", f"{iss!r} is not a trusted issuer")
        for cand in candidates:
            found = cand.settings.metadata_for(mapping)
            if found is None:
                continue
            token_name, meta = found
            if not meta.trusted:
                raise TokenDrop(
                    "untrusted_issuer",
                    f"token type {token_name!r} of issuer {cand.settings.issuer_id!r} is "
                    "disabled (trusted: false)",
                )
            return cand, issuer_part or cand.settings.name, token_name, meta
        ids = ", ".join(repr(c.settings.issuer_id) for c in candidates)
        raise TokenDrop(
            "untrusted_issuer",
            f"issuer {ids} has no token_metadata entry with entity_type_name {mapping!r}"
            + ("" if "::" in mapping else " nor a token of that name"),
        )

    def _build(
        self,
        mapping: str,
        index: int,
        claims: dict[str, Any],
        issuer: IssuerKeys | None,
        issuer_part: str,
        token_name: str,
        meta: TokenMetadata,
        now: float,
    ) -> ProcessedToken:
        try:
            check_scopes(claims)
        except ScopeLimitError as e:
            raise TokenDrop("invalid_input", str(e)) from None
        raw_id = resolve(claims, meta.token_id)
        if raw_id is None:
            raise TokenDrop(
                "missing_claim",
                f"claim {meta.token_id!r} (token_id, the token entity's id) is missing",
            )
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == "":
            raise TokenDrop(
                "entity_build_failed",
                f"claim {meta.token_id!r} (token_id) must be a non-empty string or an integer",
            )
        etype = meta.entity_type_name
        verified = self.settings.sig_validation and issuer is not None
        validated_at = math.floor(now)
        shape = None
        if self.schema is not None:
            etdef = self.schema.entity_types.get(etype)
            shape = etdef.shape if etdef is not None else None
        attrs = self._fixed_attributes(etype, claims, issuer if verified else None, now, shape)
        skip = _SKIP_VERIFIED if verified else _SKIP_UNVERIFIED
        rest = {k: v for k, v in claims.items() if k not in skip}
        fixed = FIXED_ATTRIBUTES if "issuer" in attrs else _FIXED_BUT_ISSUER
        fixed_clash = {k: rest.pop(k) for k in fixed & rest.keys()}
        unfit: dict[str, str] = {}
        extra, tags = claim_attributes(
            rest, shape, meta.claim_mapping, self.schema, frozenset(), unfit=unfit
        )
        attrs.update(extra)
        for k, v in fixed_clash.items():  # a claim named like a fixed attribute stays a tag
            _, t = claim_attributes({k: v}, None, {}, None, frozenset())
            tags.update(t)
        try:  # the keys of object claims, by path: getTag("realm_access.roles")
            nested = nested_tags(claims, skip)
        except TooManyNestedTags as e:
            raise TokenDrop("invalid_input", str(e)) from None
        for path, value in nested.items():
            tag = tag_value(value)
            if tag is not None:
                tags[path] = tag
        self._report_unmatched(claims, meta, issuer, token_name, mapping, index)
        if shape is not None:
            lacking = [n for n, a in shape.attributes.items() if a.required and n not in attrs]
            if lacking:
                raise TokenDrop("entity_build_failed", _lacking_message(etype, lacking, unfit))
        for why in unfit.values():
            self._warn(
                f"token {index} ({mapping}): {etype}: {why}; the claim is left out of the "
                "entity's attributes and kept as a tag"
            )
        entity = Entity(uid=EntityUID(etype, str(raw_id)), attrs=attrs, tags=tags)
        return ProcessedToken.build(
            mapping=mapping,
            index=index,
            issuer_id=issuer.settings.issuer_id if issuer else None,
            issuer_name=issuer_part,
            token_name=token_name,
            metadata=meta,
            claims=claims,
            verified=verified,
            validated_at=validated_at,
            entity=entity,
            context_key=context_key(issuer_part, etype),
            roles=tuple(roles_from(claims, meta.role_mapping)),
            user_id=first_text(resolve(claims, meta.user_id)),
            workload_id=first_text(resolve(claims, meta.workload_id)),
        )

    @staticmethod
    def _fixed_attributes(
        etype: str,
        claims: Mapping[str, Any],
        verified_issuer: IssuerKeys | None,
        now: float,
        shape: RecordType | None,
    ) -> dict[str, Value]:
        """``token_type``, ``jti``, ``iss``, ``exp``, ``validated_at``: those the token has,
        and with a schema only those the entity type declares (a schema may leave any out;
        ``iss`` is set only for a verified token: its issuer's TrustedIssuer entity)."""
        out: dict[str, Value] = {"token_type": etype, "validated_at": math.floor(now)}
        jti = claims.get("jti")
        if isinstance(jti, str) or (isinstance(jti, int) and not isinstance(jti, bool)):
            out["jti"] = str(jti)
        if verified_issuer is not None:
            s = verified_issuer.settings
            out["iss"] = EntityUID(trusted_issuer_type(s), s.issuer_id)
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and math.isfinite(exp):
            exp = math.floor(exp)
            if LONG_MIN <= exp <= LONG_MAX:
                out["exp"] = exp
        if shape is not None:
            declared = shape.attributes
            iss = claims.get("iss")
            if "issuer" in declared and isinstance(iss, str):
                out["issuer"] = iss  # the claim as text, verified or not (like every tag)
            for name in FIXED_ATTRIBUTES - declared.keys():
                out.pop(name, None)
        return out

    def _report_unmatched(
        self,
        claims: Mapping[str, Any],
        meta: TokenMetadata,
        issuer: IssuerKeys | None,
        token_name: str,
        mapping: str,
        index: int,
    ) -> None:
        """Warn when a ``role_mapping`` path the store sets, or a ``claim_mapping`` key,
        finds nothing usable in a token: once per path and loaded store (a provider that
        never sends the claim would otherwise fill the log, one line per token)."""
        issuer_id = issuer.settings.issuer_id if issuer is not None else ""
        paths = (
            [("role_mapping", p) for p in meta.role_mapping] if meta.role_mapping_explicit else []
        )
        paths += [("claim_mapping", p) for p in meta.claim_mapping]
        for field_name, path in paths:
            key = (issuer_id, token_name, field_name, path)
            if key in self._unmatched_warned:
                continue
            found = locate(claims, path)
            if isinstance(found, Miss):
                why = found.describe()
            elif field_name == "role_mapping" and not _role_names(found):
                why = f"it is {json_kind(found)}, not a role name or an array of them"
            else:
                continue
            self._unmatched_warned.add(key)
            self._warn(
                f"issuer {issuer_id!r}, token {token_name!r}: {field_name} path {path!r} "
                f"matched nothing in token {index} ({mapping}): {why}; said once per path "
                "until the store is reloaded"
            )

    def _warn(self, message: str) -> None:
        if self._log is not None:
            self._log("WARN", bound_message(message))
