"""From a raw store to a :class:`PolicyStore`: parse every part, check the store's rules.

The language modules parse; this module applies what only a *store* requires (ids on
every policy, unique ids, templates that really are templates, declared links, entity
limits, no duplicate entities or issuers) and wraps every error with its file and place.
Policy validation against the schema is the engine's job (``ENGINE_STRICT_SCHEMA_VALIDATION``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from polang._record import replace
from polang.config import Config
from polang.errors import PolangError, PolicyParseError, SchemaError
from polang.inputs.fields import Checker, jpath, listing, show
from polang.inputs.problems import Problems, StoreProblem, strip_position_prefix
from polang.inputs.strict import load_json
from polang.language.ast import Annotation, EntityLit, Policy, condition_nodes, link_template
from polang.language.entities import Entity, EntityStore, parse_entity, parse_legacy_entity
from polang.language.parser import parse_entity_uid, parse_policies
from polang.language.schema import Schema, has_name_shape, parse_schema, parse_schema_json
from polang.language.values import EntityUID
from polang.store.model import PolicyStore, TemplateLink
from polang.store.raw import PolicyPart, RawStore, TextPart

if TYPE_CHECKING:
    from polang.tokens.records import IssuerSettings

LINK_FIELDS = ("template_id", "link_id", "principal", "resource")


def _where(part: TextPart, line: int | None, column: int | None) -> str | None:
    pos = f"{line}:{column}" if line else None
    if part.location:
        return f"{part.location} (text {pos})" if pos else part.location
    return pos


def parse_store_schema(raw: RawStore, problems: Problems) -> Schema | None:
    part = raw.schema
    if part is None:
        return None
    try:
        if raw.schema_format == "polang-json":
            data = load_json(
                part.text, file=part.file, problems=problems, location=part.location or "$"
            )
            if data is None:
                return None
            return parse_schema_json(data, filename=part.parse_name)
        return parse_schema(part.text, filename=part.parse_name)
    except SchemaError as e:
        loc = _where(part, e.line, e.column)
        if e.path:
            loc = f"{loc} {e.path}" if loc else e.path
        problems.add("schema", part.file, strip_position_prefix(str(e), e.filename), loc)
    except PolangError as e:
        problems.add("schema", part.file, str(e), part.location)
    return None


class _Ids:
    """Every policy, template and link id with where it was declared (one id space)."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.where: dict[str, str] = {}

    def claim(self, pid: str, file: str, location: str | None, what: str) -> bool:
        here = f"{file}:{location}" if location and location[:1].isdigit() else file
        if location and not location[:1].isdigit():
            here = f"{file} {location}"
        prior = self.where.get(pid)
        if prior is not None:
            self.problems.add(
                "duplicate_id",
                file,
                f"{what} id {show(pid)} is already used (first in {prior}; duplicate in {here})",
                location,
            )
            return False
        self.where[pid] = here
        return True


def _with_id(policy: Policy, pid: str) -> Policy:
    """The policy with ``@id`` equal to ``pid`` (added, or replaced for a link)."""
    if policy.policy_id == pid:
        return policy
    rest = tuple(a for a in policy.annotations if a.key != "id")
    return replace(policy, annotations=(Annotation("id", pid), *rest))


def _parse_policy_part(
    part: PolicyPart,
    ids: _Ids,
    problems: Problems,
    policies: dict[str, Policy],
    templates: dict[str, Policy],
    origins: dict[str, str],
) -> None:
    try:
        parsed = parse_policies(part.text, filename=part.parse_name)
    except PolicyParseError as e:
        problems.add(
            "policy_syntax",
            part.file,
            strip_position_prefix(str(e), e.filename),
            _where(part, e.line, e.column),
        )
        return
    except PolangError as e:
        problems.add("policy_syntax", part.file, str(e), part.location)
        return
    origin = f"{part.file} {part.location}" if part.location else part.file

    if part.role == "legacy":
        key = part.expected_id or ""
        if len(parsed) != 1:
            problems.add(
                "policy_syntax",
                part.file,
                f"a policy record must hold exactly one policy or template, found {len(parsed)}",
                part.location,
            )
            return
        policy = parsed[0]
        declared = policy.policy_id
        if declared is not None and declared != key:
            problems.add(
                "id_mismatch",
                part.file,
                f"@id({show(declared)}) differs from the record's key {show(key)}",
                part.location,
            )
            return
        if not ids.claim(key, part.file, part.location, "policy"):
            return
        target = templates if policy.is_template else policies
        target[key] = _with_id(policy, key)
        origins[key] = origin
        return

    for policy in parsed:
        loc = _where(part, policy.span.line, policy.span.column)
        kind = "template" if part.role == "templates" else "policy"
        pid = policy.policy_id
        if pid is None or not pid.strip():
            problems.add(
                "missing_id",
                part.file,
                f'every {kind} needs an @id("...") annotation'
                + (" with a non-empty value" if pid is not None else ""),
                loc,
            )
            continue
        if part.role == "policies" and policy.is_template:
            problems.add(
                "template",
                part.file,
                f"{show(pid)} uses template slots ({', '.join(policy.slots)}): "
                "templates belong in templates/",
                loc,
            )
            continue
        if part.role == "templates" and not policy.is_template:
            problems.add(
                "template",
                part.file,
                f"template {show(pid)} must use the slot ?principal and/or ?resource",
                loc,
            )
            continue
        if not ids.claim(pid, part.file, loc, kind):
            continue
        (templates if part.role == "templates" else policies)[pid] = policy
        origins[pid] = part.file


def _entity_ref(value: object, ck: Checker, path: str) -> EntityUID | None:
    if isinstance(value, str):
        try:
            return parse_entity_uid(value)
        except PolangError as e:
            ck.add("template_link", path, f"not an entity reference: {e}")
            return None
    if isinstance(value, Mapping) and set(value) == {"__entity"}:
        value = value["__entity"]
    if (
        isinstance(value, Mapping)
        and set(value) == {"type", "id"}
        and isinstance(value["type"], str)
        and isinstance(value["id"], str)
        and value["type"]
    ):
        return EntityUID(value["type"], value["id"])
    ck.add(
        "template_link",
        path,
        f'must be an entity reference ({{"type", "id"}} or \'Type::"id"\'), got {show(value)}',
    )
    return None


def _links(
    raw: RawStore,
    templates: dict[str, Policy],
    ids: _Ids,
    problems: Problems,
) -> tuple[dict[str, TemplateLink], dict[str, Policy]]:
    links: dict[str, TemplateLink] = {}
    linked: dict[str, Policy] = {}
    for part in raw.links:
        ck = Checker(problems, part.file)
        if not isinstance(part.data, list):
            ck.add(
                "template_link",
                "$",
                "templates/links.json must be an array of "
                '{"template_id", "link_id", "principal"?, "resource"?}',
            )
            continue
        for i, item in enumerate(part.data):
            p = jpath("$", i)
            before = len(problems)
            rec = ck.obj(item, p, "a link object")
            if rec is None:
                continue
            ck.known(rec, p, LINK_FIELDS)
            tid = ck.string(rec, "template_id", p, required=True)
            lid = ck.string(rec, "link_id", p, required=True)
            principal = (
                _entity_ref(rec["principal"], ck, jpath(p, "principal"))
                if "principal" in rec
                else None
            )
            resource = (
                _entity_ref(rec["resource"], ck, jpath(p, "resource"))
                if "resource" in rec
                else None
            )
            if len(problems) > before or tid is None or lid is None:
                continue
            template = templates.get(tid)
            if template is None:
                ck.add("template_link", jpath(p, "template_id"), f"no template with id {show(tid)}")
                continue
            slots = set(template.slots)
            given = {s for s, v in (("?principal", principal), ("?resource", resource)) if v}
            if slots != given:
                ck.add(
                    "template_link",
                    p,
                    f"template {show(tid)} has slots {sorted(slots)}; "
                    f"the link fills {sorted(given)}",
                )
                continue
            if not ids.claim(lid, part.file, p, "link"):
                continue
            try:
                policy = link_template(template, principal=principal, resource=resource)
            except ValueError as e:  # the slot check above makes this unreachable in practice
                ck.add("template_link", p, str(e))
                continue
            links[lid] = TemplateLink(lid, tid, principal, resource)
            linked[lid] = _with_id(policy, lid)
    return links, linked


def _entities(
    raw: RawStore, schema: Schema | None, config: Config, problems: Problems
) -> EntityStore:
    store = EntityStore()
    limit = config.max_default_entities
    if limit and len(raw.entities) > limit:
        first = raw.entities[limit]
        problems.add(
            "limit",
            first.file,
            f"{len(raw.entities)} default entities exceed ENGINE_MAX_DEFAULT_ENTITIES ({limit})",
        )
        return store
    legacy_ok = raw.format in ("legacy-json", "legacy-yaml")
    seen: dict[EntityUID, str] = {}
    for part in raw.entities:
        data: Any = part.data
        entity: Entity
        try:
            if isinstance(data, Mapping) and "uid" not in data and "entity_type" in data:
                if not legacy_ok:
                    problems.add(
                        "entity",
                        part.file,
                        "entity files use the form {uid: {type, id}, attrs, parents}; "
                        "the legacy {entity_type, entity_id, ...} form is only read from "
                        "legacy stores",
                        part.location,
                    )
                    continue
                entity = parse_legacy_entity(data, schema, path=part.location)
            else:
                entity = parse_entity(data, schema, path=part.location)
        except PolangError as e:
            loc = getattr(e, "path", None) or part.location
            problems.add("entity", part.file, str(e), loc)
            continue
        where = f"{part.file} {part.location}"
        if entity.uid in seen:
            problems.add(
                "entity",
                part.file,
                f"entity {entity.uid} is defined twice (first in {seen[entity.uid]})",
                part.location,
            )
            continue
        seen[entity.uid] = where
        store.add(entity)
    cycle = _find_cycle(store)
    if cycle:
        file, _, loc = seen[cycle[0]].partition(" ")
        problems.add(
            "entity",
            file,
            "cycle in the entity hierarchy: " + " -> ".join(str(u) for u in cycle),
            loc or None,
        )
    return store


def _find_cycle(store: EntityStore) -> list[EntityUID] | None:
    """A parent chain that comes back to where it started (the language forbids it)."""
    state: dict[EntityUID, int] = {}  # 1 = on the current path, 2 = done
    for root in store:
        if root.uid in state:
            continue
        path: list[EntityUID] = [root.uid]
        stack = [iter(sorted(root.parents))]
        state[root.uid] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            parent = store.get(nxt)
            if parent is None or state.get(nxt) == 2:
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            state[nxt] = 1
            path.append(nxt)
            stack.append(iter(sorted(parent.parents)))
    return None


def _issuers(raw: RawStore, problems: Problems) -> dict[str, IssuerSettings]:
    out: dict[str, IssuerSettings] = {}
    if not raw.issuers:
        return out
    # the issuer checks and the token layer's model load with the first store that has
    # issuers (start-up time)
    from polang.tokens.records import check_trusted_issuer

    where: dict[str, str] = {}
    for part in raw.issuers:
        ck = Checker(problems, part.file)
        records: list[tuple[str, Any, str]]
        if part.issuer_id is not None:  # one record: its path is the file's own
            records = [(part.issuer_id, part.data, part.location)]
        else:
            data = ck.obj(part.data, part.location, "an object mapping issuer ids to issuers")
            if data is None:
                continue
            records = [(str(k), v, jpath(part.location, str(k))) for k, v in data.items()]
        for iid, record, path in records:
            if iid in where:
                problems.add(
                    "issuer",
                    part.file,
                    f"issuer id {show(iid)} is defined twice (first in {where[iid]})",
                    path,
                )
                continue
            where[iid] = part.file
            parsed = check_trusted_issuer(iid, record, ck, path)
            if parsed is not None:
                out[iid] = parsed
    return out


CUSTOM_ISSUER_FIELDS = ("id", "tokens_mappings")
CUSTOM_TOKEN_FIELDS = ("required", "required_claims")


def _custom_issuers(raw: RawStore, problems: Problems) -> None:
    """Cedarling's ``custom-issuers/*.json`` (issuers of non-JWT tokens, read by a token
    processor the application registers). polang has no such processors: the files are
    checked as Cedarling checks them, then reported (a warning, an error under strict
    loading), and tokens mapped to their types are dropped like any untrusted token."""
    seen: dict[str, str] = {}
    for part in raw.custom_issuers:
        ck = Checker(problems, part.file)
        rec = ck.obj(part.data, "$", "an object with `tokens_mappings`")
        if rec is None:
            continue
        # Cedarling refuses unknown fields here: so does polang
        ck.known(rec, "$", CUSTOM_ISSUER_FIELDS, refuse=True)
        iid = ck.string(rec, "id", "$") or part.file.rsplit("/", 1)[-1][: -len(".json")]
        if iid in seen:
            ck.add(
                "issuer",
                "$",
                f"custom issuer id {show(iid)} is defined twice (first in {seen[iid]})",
            )
        seen.setdefault(iid, part.file)
        if "tokens_mappings" not in rec:
            ck.add(
                "missing_field", "$.tokens_mappings", "required field 'tokens_mappings' is missing"
            )
            continue
        tm = ck.obj(
            rec["tokens_mappings"],
            "$.tokens_mappings",
            "an object mapping entity type names to token settings",
        )
        if tm is None:
            continue
        if not tm:
            ck.add("invalid_field", "$.tokens_mappings", "declares no tokens")
            continue
        for tname, tok in tm.items():
            tp = jpath("$.tokens_mappings", str(tname))
            if not has_name_shape(tname, qualified=True):
                ck.add(
                    "invalid_field",
                    tp,
                    f"{show(tname)} is not an entity type name (Namespace::Type)",
                )
            t = ck.obj(tok, tp)
            if t is None:
                continue
            ck.known(t, tp, CUSTOM_TOKEN_FIELDS, refuse=True)
            ck.boolean(t, "required", tp)
            ck.string_list(t, "required_claims", tp)
        names = listing([str(k) for k in tm], 5)
        message = (
            f"custom issuer {show(iid)}: custom (non-JWT) token issuers are not supported; "
            f"tokens mapped to {names} are dropped (untrusted_issuer)"
        )
        if problems.strict:
            ck.add("issuer", "$", message)
        else:
            problems.warn("issuer", part.file, message, "$")


def _entity_literals(policy: Policy) -> Iterator[EntityUID]:
    """Every ``Type::"id"`` written in a policy's scope and conditions (iteratively: the
    parser bounds the nesting, this walk does not rely on it)."""
    for c in (policy.principal, policy.resource):
        if isinstance(c.entity, EntityUID):
            yield c.entity
    yield from policy.action.entities
    for e in condition_nodes(policy):
        if isinstance(e, EntityLit):
            yield e.uid


def _trusted_issuer_refs(
    policies: Mapping[str, Policy],
    origins: Mapping[str, str],
    issuers: Mapping[str, IssuerSettings],
    entities: EntityStore,
    problems: Problems,
) -> None:
    """A policy naming ``<issuer name>::TrustedIssuer::"<id>"`` that the engine never builds.

    The engine names each issuer's ``TrustedIssuer`` entity by the issuer id (the spec);
    Cedarling names it by the issuer URL, so a policy written for Cedarling that compares
    ``iss`` with ``X::TrustedIssuer::"https://..."`` would never match here (a ``forbid``
    would never apply). A warning (an error under strict loading) names the id to write.
    """
    if not issuers:
        return
    by_type: dict[str, list[IssuerSettings]] = {}
    for i in issuers.values():
        by_type.setdefault(f"{i.name}::TrustedIssuer", []).append(i)
    reported: set[tuple[str, EntityUID]] = set()
    for pid, policy in policies.items():
        for uid in _entity_literals(policy):
            named = by_type.get(uid.type)
            if named is None or any(i.issuer_id == uid.id for i in named) or uid in entities:
                continue
            if (pid, uid) in reported:
                continue
            reported.add((pid, uid))
            ids = ", ".join(show(i.issuer_id) for i in named)
            message = (
                f"policy {show(pid)} refers to {show(str(uid))}, but the engine names "
                f"{uid.type} entities by issuer id ({ids}), so it never exists and a "
                "condition comparing `iss` with it is never true"
            )
            url = _issuer_url_of(uid.id, named)
            if url is not None:
                message += (
                    f"; Cedarling names them by issuer URL: write "
                    f'{uid.type}::"{url.issuer_id}" for {show(uid.id)}'
                )
            file = origins.get(pid, "")
            if problems.strict:
                problems.add("trusted_issuer_ref", file, message, pid)
            else:
                problems.warn("trusted_issuer_ref", file, message, pid)


def _issuer_url_of(text: str, issuers: list[IssuerSettings]) -> IssuerSettings | None:
    """The issuer whose URL ``text`` is (scheme and host case and a trailing ``/`` aside)."""
    if "://" not in text:
        return None
    from polang.tokens.issuers import issuer_from_endpoint, normalize_issuer  # tokens: start-up

    try:
        want = normalize_issuer(text)
    except ValueError:
        return None
    for i in issuers:
        endpoint = i.openid_configuration_endpoint
        if (issuer_from_endpoint(endpoint) or normalize_issuer(endpoint)) == want:
            return i
    return None


def build_store(raw: RawStore, config: Config, problems: Problems) -> PolicyStore:
    """Parse and check everything; raises ``PolicyStoreLoadError`` listing every problem."""
    schema = parse_store_schema(raw, problems)
    ids = _Ids(problems)
    policies: dict[str, Policy] = {}
    templates: dict[str, Policy] = {}
    origins: dict[str, str] = {}
    for part in raw.policies:
        _parse_policy_part(part, ids, problems, policies, templates, origins)
    links, linked = _links(raw, templates, ids, problems)
    entities = _entities(raw, schema, config, problems) if schema is not None else EntityStore()
    issuers = _issuers(raw, problems)
    _custom_issuers(raw, problems)
    _trusted_issuer_refs({**policies, **templates}, origins, issuers, entities, problems)
    problems.raise_if_any()
    if schema is None or raw.schema is None or raw.id is None:  # a reader always reports why
        problems.fail("missing_file", "", "the store has no schema or no id")
    return PolicyStore(
        id=raw.id,
        name=raw.name or raw.id,
        description=raw.description,
        version=raw.version,
        polang_version=raw.polang_version,
        created_date=raw.created_date,
        updated_date=raw.updated_date,
        schema=schema,
        schema_text=raw.schema.text,
        schema_format=raw.schema_format,
        policies=policies,
        templates=templates,
        links=links,
        linked_policies=linked,
        trusted_issuers=issuers,
        default_entities=entities,
        policy_origins=origins,
        format=raw.format,
        source=raw.source,
        digest=raw.digest,
        warnings=_warnings(problems),
    )


def _warnings(problems: Problems) -> tuple[StoreProblem, ...]:
    out = list(problems.warnings)
    if problems.dropped_warnings:
        out.append(
            StoreProblem(
                out[-1].kind,
                "",
                f"... and {problems.dropped_warnings} more warnings (MAX_PROBLEMS)",
            )
        )
    return tuple(out)
