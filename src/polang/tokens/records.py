"""Trusted issuer records: the token layer's model of an issuer and the one parser behind
the store loader and ``from_dict``.

Issuer records decide whose tokens are believed, so a typo here is a security problem:
an unknown field is never silently ignored (a warning in the system log and in ``polang
store validate`` with a did-you-mean hint, an error when the store is loaded strictly and
for records given in code), endpoints must be HTTPS and every regex must compile when the
store loads rather than when the first token arrives. The store loader
(:mod:`polang.store.build`) builds these records when it checks a store and the engine
hands them to token handling as they are, so the engine uses exactly what the loader
checked; the ``from_dict`` constructors run the same parser on a record given in code.
Every error names the JSON path of the bad value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from polang.errors import PolicyStoreError
from polang.inputs.fields import Checker, jpath, json_kind, show
from polang.inputs.problems import Problems
from polang.language.schema import has_name_shape
from polang.tokens.claim_paths import misspelt_claim, path_problem
from polang.tokens.claim_regex import ClaimPattern, ClaimRegexError, compile_claim_regex

# Token names the spec gives defaults for; any other name needs ``entity_type_name``.
DEFAULT_ENTITY_TYPES: dict[str, str] = {
    "access_token": "Svc::Access_token",
    "id_token": "Svc::Id_token",
    "userinfo_token": "Svc::Userinfo_token",
    "tx_token": "Svc::Tx_token",
}


RegexValueType = Literal["String", "Number", "Boolean"]


@dataclass(frozen=True, slots=True)
class RegexGroup:
    """Where one named group of a ``regex`` claim mapping goes and how it is typed."""

    attr: str
    type: RegexValueType


@dataclass(frozen=True)
class ClaimMapping:
    """``claim_mapping.<claim>``: a claim turned into a value of schema type ``type``.

    ``regex``: ``pattern`` is the compiled ``regex_expression`` (RE2, matched in linear
    time: :mod:`polang.tokens.claim_regex`) and ``groups`` maps each named group to its
    attribute. ``json``: the claim (a JSON object or a string holding
    one) becomes a record of ``type``.
    """

    parser: Literal["regex", "json"]
    type: str
    regex_expression: str | None = None
    groups: Mapping[str, RegexGroup] = field(default_factory=dict)
    pattern: ClaimPattern | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: object, path: str) -> ClaimMapping:
        """Validate one JSON record with the store's rules; raises ``PolicyStoreError``."""
        return parse_record(lambda ck: check_claim_mapping(d, ck, path))


@dataclass(frozen=True)
class TokenMetadata:
    """One ``token_metadata`` entry: how tokens of one type are checked and mapped.

    ``role_mapping`` is a tuple of claim names; the empty tuple means disabled (``""``).
    ``expected_audience``: a token of this type must name one of these in its ``aud``
    (empty: the issuer's ``expected_audience``, and no check when that is empty too).
    ``role_mapping_explicit`` records whether the store set it (the userinfo fallback
    applies only when no token type sets it).
    """

    entity_type_name: str
    trusted: bool = True
    token_id: str = "jti"
    user_id: str = "sub"
    workload_id: str = "aud"
    role_mapping: tuple[str, ...] = ("role",)
    principal_mapping: tuple[str, ...] = ()
    required_claims: tuple[str, ...] = ()
    claim_mapping: Mapping[str, ClaimMapping] = field(default_factory=dict)
    role_mapping_explicit: bool = False
    expected_audience: tuple[str, ...] = ()

    @classmethod
    def from_dict(
        cls, d: object, path: str = "token_metadata", *, token_name: str | None = None
    ) -> TokenMetadata:
        """Validate one JSON record. ``token_name`` supplies the spec's default type name."""
        return parse_record(lambda ck: check_token_metadata(token_name, d, ck, path))


@dataclass(frozen=True)
class IssuerSettings:
    """One trusted issuer: ``issuer_id`` is its key in ``trusted_issuers``.

    ``expected_audience`` is the default of its token types' ``expected_audience``.
    """

    issuer_id: str
    name: str
    openid_configuration_endpoint: str
    token_metadata: Mapping[str, TokenMetadata] = field(default_factory=dict)
    description: str = ""
    expected_audience: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not has_name_shape(self.name):  # it names the TrustedIssuer namespace
            raise PolicyStoreError(
                f"trusted issuer {self.issuer_id!r}: name {self.name!r} must be a namespace "
                "(identifiers joined by '::'), because it names the issuer's TrustedIssuer type"
            )

    @classmethod
    def from_dict(cls, issuer_id: str, d: object, path: str | None = None) -> IssuerSettings:
        """Validate one trusted issuer record (``trusted_issuers.<issuer_id>``).

        The rules and messages are the store loader's (one parser for both); every problem
        is reported, each as ``<JSON path>: <message>``.
        """
        where = path or jpath("trusted_issuers", issuer_id)
        return parse_record(lambda ck: check_trusted_issuer(issuer_id, d, ck, where))

    def audience_for(self, meta: TokenMetadata) -> tuple[str, ...]:
        """The audiences a token of type ``meta`` must name one of (empty: no check)."""
        return meta.expected_audience or self.expected_audience

    def metadata_for(self, mapping: str) -> tuple[str, TokenMetadata] | None:
        """The token name and metadata whose ``entity_type_name`` is the request mapping,
        or, for a mapping without ``::``, whose token name it is (Cedarling accepts
        ``"access_token"`` as well as ``"Acme::Access_Token"``)."""
        for token_name, meta in self.token_metadata.items():
            if meta.entity_type_name == mapping:
                return token_name, meta
        named = self.token_metadata.get(mapping) if "::" not in mapping else None
        return (mapping, named) if named is not None else None


ISSUER_FIELDS = (
    "name",
    "description",
    "openid_configuration_endpoint",
    "token_metadata",
    "expected_audience",
    "id",  # Cedarling's single-record files: the issuer's id (see layout)
    "configuration_endpoint",  # Cedarling's alias of openid_configuration_endpoint
)
TOKEN_FIELDS = (
    "trusted",
    "entity_type_name",
    "token_id",
    "user_id",
    "workload_id",
    "role_mapping",
    "principal_mapping",
    "required_claims",
    "claim_mapping",
    "expected_audience",
)
REGEX_VALUE_TYPES: tuple[str, ...] = ("String", "Number", "Boolean")

T = TypeVar("T")


def parse_record(parse: Callable[[Checker], T | None]) -> T:
    """Run one parser outside a store: every problem, ``<path>: <message>`` a line.

    The ``from_dict`` constructors of the token layer go through here so that a record
    given in code meets exactly the rules (and messages) of a record in a store, loaded
    strictly: code has no system log to warn in, so an unknown field is an error.
    """
    problems = Problems("<record>", strict=True)
    out = parse(Checker(problems, ""))
    if problems or out is None:
        lines = [f"{p.location}: {p.message}" if p.location else p.message for p in problems.items]
        raise PolicyStoreError("\n".join(lines) or "invalid record")
    return out


def parse_trusted_issuer(
    issuer_id: str, record: object, *, file: str, path: str, problems: Problems
) -> IssuerSettings | None:
    """Check one issuer record; ``None`` (with problems added) when it is invalid."""
    return check_trusted_issuer(issuer_id, record, Checker(problems, file), path)


def check_trusted_issuer(
    issuer_id: str, record: object, ck: Checker, path: str
) -> IssuerSettings | None:
    """:func:`parse_trusted_issuer` on a given :class:`Checker`."""
    before = len(ck.problems)
    if not issuer_id.strip():
        ck.add("issuer", path, "the issuer id must not be empty")
    rec = ck.obj(record, path, "an issuer object")
    if rec is None:
        return None
    ck.known(rec, path, ISSUER_FIELDS, renamed={"tokens_metadata": "token_metadata"})
    name = ck.string(rec, "name", path, required=True)
    if name is not None and not has_name_shape(name):
        ck.add(
            "issuer",
            jpath(path, "name"),
            f"issuer name {show(name)} must be a namespace name (identifiers joined by '::'): "
            "it names the issuer's TrustedIssuer namespace",
        )
    description = ck.string(rec, "description", path, non_empty=False)
    record_id = ck.string(rec, "id", path)
    if record_id is not None and record_id != issuer_id:
        ck.add(
            "issuer",
            jpath(path, "id"),
            f"id {show(record_id)} differs from the issuer id {show(issuer_id)} it is stored under",
        )
    endpoint_key = _endpoint_key(rec, ck, path)
    endpoint = ck.string(rec, endpoint_key, path)
    if endpoint_key not in rec or rec[endpoint_key] is None:
        ck.add(
            "missing_field",
            jpath(path, "openid_configuration_endpoint"),
            "required field 'openid_configuration_endpoint' is missing "
            "(or its alias 'configuration_endpoint')",
        )
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme.lower() != "https" or not parts.hostname:
            ck.add(
                "issuer",
                jpath(path, endpoint_key),
                f"must be an https:// URL with a host, got {show(endpoint)}",
            )
        elif parts.fragment or parts.username or parts.password:
            ck.add(
                "issuer",
                jpath(path, endpoint_key),
                "must not carry credentials or a fragment",
            )
        else:
            entra = entra_endpoint_problem(parts.hostname.lower(), parts.path)
            if entra is not None:
                ck.add("issuer", jpath(path, endpoint_key), entra)
    audience = check_audience(rec, path, ck)
    tokens: dict[str, TokenMetadata] = {}
    raw_tokens = rec.get("token_metadata")
    if raw_tokens is not None:
        tpath = jpath(path, "token_metadata")
        tm_obj = ck.obj(raw_tokens, tpath, "an object mapping token names to token metadata")
        if tm_obj is not None:
            seen_types: dict[str, str] = {}
            for token_name, tm in tm_obj.items():
                mpath = jpath(tpath, str(token_name))
                parsed = check_token_metadata(str(token_name), tm, ck, mpath)
                if parsed is None:
                    continue
                other = seen_types.get(parsed.entity_type_name)
                if other is not None:
                    ck.add(
                        "issuer",
                        jpath(mpath, "entity_type_name"),
                        f"{parsed.entity_type_name!r} is also the entity type of token "
                        f"{other!r}; a request token's mapping must select one entry",
                    )
                    continue
                seen_types[parsed.entity_type_name] = str(token_name)
                tokens[str(token_name)] = parsed
    if len(ck.problems) > before or name is None or endpoint is None:
        return None
    return IssuerSettings(
        issuer_id=issuer_id,
        name=name,
        openid_configuration_endpoint=endpoint,
        description=description or "",
        token_metadata=tokens,
        expected_audience=audience,
    )


#: Microsoft Entra ID's sign-in hosts (the global cloud, US Government, China).
ENTRA_HOSTS = frozenset(
    {"login.microsoftonline.com", "login.microsoftonline.us", "login.chinacloudapi.cn"}
)
#: Entra ID's tenant-independent endpoints; tokens always name their own tenant.
_ENTRA_MULTI_TENANT = {
    "common": "",
    "organizations": "",
    "consumers": " (personal Microsoft accounts sign in through the tenant "
    "9188040d-6c67-4c5b-b112-36a304b66dad)",
}
_TENANT_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"
)


def entra_endpoint_problem(host: str, path: str) -> str | None:
    """Why an Entra ID discovery endpoint can never match a token, or ``None``.

    Entra ID's v2.0 tokens name their tenant by id in ``iss``
    (``https://login.microsoftonline.com/<tenant id>/v2.0``), and the tenant's discovery
    document says the same; polang matches a token's ``iss`` to the endpoint's issuer
    exactly. So a multi-tenant endpoint (``common``...), a tenant given by domain name or
    the v1.0 endpoint (whose issuer is ``https://sts.windows.net/<tenant id>/``) would
    drop every token: the store is refused instead, saying what to write.
    """
    if host not in ENTRA_HOSTS:
        return None
    segments = [s for s in path.split("/") if s]
    tenant = segments[0] if segments else ""
    v2 = f"https://{host}/<tenant id>/v2.0/.well-known/openid-configuration"
    if tenant.lower() in _ENTRA_MULTI_TENANT:
        return (
            f"Entra ID's {tenant!r} endpoint serves many tenants, but each token names its "
            f"own tenant in 'iss'{_ENTRA_MULTI_TENANT[tenant.lower()]}: list every tenant "
            f"you accept as its own trusted issuer, {v2}"
        )
    if not _TENANT_ID.match(tenant):
        return (
            f"Entra ID tenant {show(tenant)} is not a tenant id: tokens name their tenant "
            f"by its id (a GUID such as 72f988bf-86f1-41af-91ab-2d7cd011db47) in 'iss', "
            f"never by domain; write {v2}"
        )
    if segments[1:2] != ["v2.0"]:
        return (
            "this is Entra ID's v1.0 endpoint, whose issuer is https://sts.windows.net/"
            f"<tenant id>/ and never matches it; use the v2.0 endpoint {v2} (and v2.0 "
            "access tokens: accessTokenAcceptedVersion 2 in the app's manifest)"
        )
    return None


def _endpoint_key(rec: Mapping[str, Any], ck: Checker, path: str) -> str:
    """Which key holds the endpoint: ``openid_configuration_endpoint``, or Cedarling's
    ``configuration_endpoint`` (the RFC's name); both may be given only when equal."""
    main, alias = "openid_configuration_endpoint", "configuration_endpoint"
    if rec.get(alias) is None:
        return main
    if rec.get(main) is None:
        return alias
    if rec[main] != rec[alias]:
        ck.add(
            "issuer",
            jpath(path, alias),
            f"{alias!r} is an alias of {main!r}; both are given and they differ",
        )
    return main


def check_token_metadata(
    token_name: str | None, value: object, ck: Checker, path: str
) -> TokenMetadata | None:
    """One ``token_metadata`` entry; ``token_name`` (when known) supplies the default type."""
    before = len(ck.problems)
    if token_name is not None and not token_name.strip():
        ck.add("issuer", path, "token names must not be empty")
    rec = ck.obj(value, path, "a token metadata object")
    if rec is None:
        return None
    ck.known(rec, path, TOKEN_FIELDS)
    trusted = ck.boolean(rec, "trusted", path)
    etn = ck.string(rec, "entity_type_name", path)
    if rec.get("entity_type_name") is None:
        etn = DEFAULT_ENTITY_TYPES.get(token_name or "")
        if etn is None:
            who = f"token {show(token_name)}" if token_name is not None else "this token"
            ck.add(
                "missing_field",
                jpath(path, "entity_type_name"),
                f"{who} needs 'entity_type_name' (only "
                + ", ".join(DEFAULT_ENTITY_TYPES)
                + " have a default)",
            )
    elif etn is not None and not has_name_shape(etn, qualified=True):
        ck.add(
            "issuer",
            jpath(path, "entity_type_name"),
            f"must have the form <Namespace>::<Type>, got {show(etn)}",
        )
    token_id = ck.string(rec, "token_id", path)
    user_id = ck.string(rec, "user_id", path)
    workload_id = ck.string(rec, "workload_id", path)
    for key, claim in (("token_id", token_id), ("user_id", user_id), ("workload_id", workload_id)):
        if claim is not None:
            check_claim_path(claim, ck, jpath(path, key))

    role_mapping: tuple[str, ...] = ("role",)
    role_set = rec.get("role_mapping") is not None
    if role_set:
        rm = rec["role_mapping"]
        if isinstance(rm, str):
            role_mapping = (rm,) if rm else ()
            if rm:
                check_claim_path(rm, ck, jpath(path, "role_mapping"))
        elif isinstance(rm, list):
            role_mapping = ck.string_list(rec, "role_mapping", path) or ()
            for i, claim in enumerate(rm):
                if isinstance(claim, str) and claim:
                    check_claim_path(claim, ck, jpath(jpath(path, "role_mapping"), i))
        else:
            ck.add(
                "invalid_field",
                jpath(path, "role_mapping"),
                f'must be a claim name, "" (off) or an array of claim names, got {show(rm)}',
            )
    principal_mapping = ck.string_list(rec, "principal_mapping", path) or ()
    for i, t in enumerate(principal_mapping):
        if not has_name_shape(t, qualified=True):
            ck.add(
                "issuer",
                jpath(jpath(path, "principal_mapping"), i),
                f"must be an entity type name <Namespace>::<Type>, got {show(t)}",
            )
    required_claims = ck.string_list(rec, "required_claims", path) or ()
    for i, claim in enumerate(required_claims):
        check_claim_path(claim, ck, jpath(jpath(path, "required_claims"), i))

    audience = check_audience(rec, path, ck)
    claim_mapping: dict[str, ClaimMapping] = {}
    if rec.get("claim_mapping") is not None:
        cpath = jpath(path, "claim_mapping")
        cm = ck.obj(rec["claim_mapping"], cpath, "an object mapping claim names to mappings")
        if cm is not None:
            for claim, mapping in cm.items():
                check_claim_path(str(claim), ck, jpath(cpath, str(claim)), key=True)
                parsed = check_claim_mapping(mapping, ck, jpath(cpath, str(claim)))
                if parsed is not None:
                    claim_mapping[str(claim)] = parsed

    if len(ck.problems) > before or etn is None:
        return None
    return TokenMetadata(
        entity_type_name=etn,
        trusted=True if trusted is None else trusted,
        token_id=token_id or "jti",
        user_id=user_id or "sub",
        workload_id=workload_id or "aud",
        role_mapping=role_mapping,
        role_mapping_explicit=role_set,
        principal_mapping=principal_mapping,
        required_claims=required_claims,
        claim_mapping=claim_mapping,
        expected_audience=audience,
    )


def check_claim_path(claim: str, ck: Checker, path: str, *, key: bool = False) -> None:
    """A claim path a token metadata field names (``realm_access.roles``): refused when no
    token could ever have it (empty parts, another path syntax, past the limits of
    :mod:`polang.tokens.claim_paths`); a likely misspelling of a well-known claim warns
    (an error when the store is loaded strictly). ``key``: the path is a mapping's key."""
    what = "claim path (the key)" if key else "claim path"
    problem = path_problem(claim)
    if problem is not None:
        ck.add("claim_path", path, f"{what} {show(claim)} {problem}")
        return
    close = misspelt_claim(claim)
    if close is None:
        return
    message = (
        f"{what} {show(claim)}: {show(claim.split('.', 1)[0])} is not a claim identity "
        f"providers send, but close to {close!r}; did you mean {close!r}?"
    )
    if ck.problems.strict:
        ck.add("claim_path", path, message)
    else:
        ck.problems.warn("claim_path", ck.file, message, path)


def check_audience(rec: Mapping[str, Any], path: str, ck: Checker) -> tuple[str, ...]:
    """``expected_audience``: one audience or a non-empty array of them (any one must be
    in the token's ``aud``); absent or null: no audience check."""
    value = rec.get("expected_audience")
    if value is None:
        return ()
    p = jpath(path, "expected_audience")
    if isinstance(value, str):
        if value.strip():
            return (value,)
        ck.add("invalid_field", p, "must not be empty (leave the field out for no check)")
        return ()
    if isinstance(value, list):
        if not value:
            ck.add(
                "invalid_field", p, "must not be an empty array (leave the field out for no check)"
            )
            return ()
        bad = [i for i, v in enumerate(value) if not isinstance(v, str) or not v.strip()]
        for i in bad[:5]:
            v = value[i]
            ck.add(
                "invalid_field",
                jpath(p, i),
                "must not be empty"
                if isinstance(v, str)
                else f"must be a string (an audience), got {json_kind(v)}",
            )
        return () if bad else tuple(value)
    ck.add(
        "invalid_field",
        p,
        f"must be an audience (a non-empty string) or an array of them, got {json_kind(value)}",
    )
    return ()


def check_claim_mapping(value: object, ck: Checker, path: str) -> ClaimMapping | None:
    """One ``claim_mapping.<claim>`` entry: the regex compiles (RE2, linear-time matching:
    see :mod:`polang.tokens.claim_regex`), every group is mapped."""
    before = len(ck.problems)
    rec = ck.obj(value, path, "a claim mapping object")
    if rec is None:
        return None
    parser = ck.string(rec, "parser", path, required=True)
    type_name = ck.string(rec, "type", path, required=True)
    if type_name is not None and not has_name_shape(type_name, qualified=True):
        ck.add(
            "issuer",
            jpath(path, "type"),
            f"must be a schema type name <Namespace>::<Type>, got {show(type_name)}",
        )
    if parser is None:
        return None
    if parser == "json":
        ck.known(rec, path, ("parser", "type"))
        if len(ck.problems) > before or type_name is None:
            return None
        return ClaimMapping(parser="json", type=type_name)
    if parser != "regex":
        ck.add("issuer", jpath(path, "parser"), f"must be 'regex' or 'json', got {show(parser)}")
        return None
    expr = ck.string(rec, "regex_expression", path, required=True)
    if expr is None:
        return None
    try:
        pattern = compile_claim_regex(expr)
    except ClaimRegexError as e:
        hint = ""
        if "(?x)" in expr and "#" in expr:
            hint = " (under (?x) a literal '#' must be written '\\#')"
        ck.add("issuer", jpath(path, "regex_expression"), f"{e}{hint}")
        return None
    group_names = set(pattern.groupindex)
    groups: dict[str, RegexGroup] = {}
    for key, spec in rec.items():
        if key in ("parser", "type", "regex_expression"):
            continue
        gpath = jpath(path, str(key))
        if key not in group_names:
            hint = ""
            if re.search(r"\(\?[a-z]*x", expr) and re.search(r"(?<!\\)#", expr):
                hint = "; under (?x) an unescaped '#' starts a comment: write '\\#'"
            ck.add(
                "issuer",
                gpath,
                f"{show(key)} is not a named group of regex_expression (groups: "
                + (", ".join(sorted(group_names)) or "none")
                + ")"
                + hint,
            )
            continue
        g = ck.obj(spec, gpath, "an object {attr, type}")
        if g is None:
            continue
        ck.known(g, gpath, ("attr", "type"))
        attr = ck.string(g, "attr", gpath, required=True)
        vtype: Any = g.get("type")
        if vtype not in REGEX_VALUE_TYPES:
            ck.add(
                "issuer",
                jpath(gpath, "type"),
                f"must be one of {', '.join(REGEX_VALUE_TYPES)}, got "
                + (show(vtype) if vtype is not None else json_kind(vtype)),
            )
            continue
        if attr is not None:
            groups[str(key)] = RegexGroup(attr=attr, type=cast(RegexValueType, vtype))
    for g_name in sorted(group_names - set(rec)):
        ck.add(
            "issuer",
            jpath(path, g_name),
            f'named group {g_name!r} has no mapping (add "{g_name}": {{"attr", "type"}})',
        )
    if len(ck.problems) > before or type_name is None:
        return None
    return ClaimMapping(
        parser="regex",
        type=type_name,
        regex_expression=expr,
        pattern=pattern,
        groups=groups,
    )


def parse_issuer_map(
    data: object, *, file: str, path: str, problems: Problems
) -> dict[str, IssuerSettings]:
    """``{"<issuer_id>": record, ...}`` (an issuer file or a legacy ``trusted_issuers``)."""
    ck = Checker(problems, file)
    obj: Mapping[str, Any] | None = ck.obj(data, path, "an object mapping issuer ids to issuers")
    out: dict[str, IssuerSettings] = {}
    if obj is None:
        return out
    for issuer_id, record in obj.items():
        parsed = check_trusted_issuer(str(issuer_id), record, ck, jpath(path, str(issuer_id)))
        if parsed is not None:
            out[str(issuer_id)] = parsed
    return out
