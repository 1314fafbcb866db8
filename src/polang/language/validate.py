"""Strict schema validation: policies, entities, requests and the multi-issuer schema.

A policy store is only as safe as its validation: a typo in an attribute name must be
caught when the store loads, not silently deny forever. :func:`validate_policies` is the
language's strict validator (see :mod:`polang.language.typecheck.checker`); the other
checks say whether data (entities, a request) conforms to the schema the policies were
validated against, which is what makes the validator's guarantees hold at run time.

Every problem is a :class:`ValidationFinding`; printing one gives
``file:line:col: [policy_id] message`` (or ``<where in the data>: message``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from polang._record import Record
from polang.errors import EvaluationError, ValidationError
from polang.inputs.fields import closest
from polang.language import ast, extensions
from polang.language import schema as sm
from polang.language.ast import Span
from polang.language.entities import Entity, EntityStore
from polang.language.typecheck.checker import (
    Issue,
    SchemaIndex,
    check_policy,
)
from polang.language.values import (
    EntityUID,
    RecordValue,
    SetValue,
    Value,
    is_action_type,
    quote_string,
    type_name,
)

_set = object.__setattr__

__all__ = [
    "ValidationFinding",
    "check_multi_issuer_schema",
    "check_policies",
    "parsed_context_is_valid",
    "validate_entities",
    "validate_policies",
    "validate_request",
]

Severity = Literal["error", "warning"]


class ValidationFinding(Record):
    """One problem found by validation.

    ``kind`` is a stable machine name (``attribute_not_found``, ``unsafe_optional_attribute``,
    ``invalid_action_application``...); ``message`` says what is wrong and how to fix it.
    Policy findings carry ``policy_id`` and the ``span`` of the offending expression;
    entity and request findings carry ``path`` (the entity uid or request part) instead.
    """

    __slots__ = ("kind", "message", "path", "policy_id", "severity", "span")
    policy_id: str | None
    span: Span | None
    kind: str
    message: str
    severity: Severity
    path: str | None

    def __init__(
        self,
        policy_id: str | None,
        span: Span | None,
        kind: str,
        message: str,
        severity: Severity = "error",
        path: str | None = None,
    ) -> None:
        _set(self, "policy_id", policy_id)
        _set(self, "span", span)
        _set(self, "kind", kind)
        _set(self, "message", message)
        _set(self, "severity", severity)
        _set(self, "path", path)

    @property
    def location(self) -> str:
        if self.span is not None and (self.span.line or self.span.filename):
            return str(self.span)
        if self.path is not None:
            return self.path
        return "<policies>" if self.policy_id is not None else "<data>"

    def __str__(self) -> str:
        tag = f"[{self.policy_id}] " if self.policy_id is not None else ""
        warn = "warning: " if self.severity == "warning" else ""
        return f"{self.location}: {tag}{warn}{self.message}"


# ---------------------------------------------------------------- policies


def _named(policies: list[ast.Policy] | Mapping[str, ast.Policy]) -> list[tuple[str, ast.Policy]]:
    if isinstance(policies, Mapping):
        return list(policies.items())
    return [(p.policy_id or f"policy{i}", p) for i, p in enumerate(policies)]


def _literal_check(kind: str, text: str) -> str | None:
    """Whether ``text`` is a valid literal of extension type ``kind`` (None) or why not."""
    construct = extensions.FUNCTIONS[extensions.CONSTRUCTOR_OF_TYPE[kind]]
    try:
        construct(text)
    except EvaluationError as exc:
        # the evaluator's message names the call; the finding names it already
        prefix = f"error while evaluating `{extensions.CONSTRUCTOR_OF_TYPE[kind]}`: "
        return exc.message.removeprefix(prefix)
    return None


def _index(schema: sm.Schema) -> SchemaIndex:
    """The checker's view of ``schema``, built once and kept with the (immutable) schema."""
    index: SchemaIndex = schema._cached("validate.SchemaIndex", lambda: SchemaIndex(schema))
    return index


def validate_policies(
    policies: list[ast.Policy] | Mapping[str, ast.Policy],
    schema: sm.Schema,
    *,
    warnings: bool = False,
) -> list[ValidationFinding]:
    """Strictly validate policies and templates against ``schema``.

    Returns every error (empty means valid). Policy ids are the mapping's keys, else the
    ``@id`` annotation, else ``policy0``, ``policy1``... by position. With
    ``warnings=True`` the result also has ``impossible_policy`` warnings (policies whose
    condition is false for every request the schema allows), which do not make a policy
    set invalid.
    """
    index = _index(schema)
    out: list[ValidationFinding] = []
    for pid, policy in _named(policies):
        result = check_policy(index, policy, _literal_check)
        out.extend(_finding(pid, i) for i in result.issues)
        if warnings and result.impossible:
            out.append(
                ValidationFinding(
                    pid,
                    policy.span,
                    "impossible_policy",
                    "policy is impossible: its condition is false for every request the "
                    "schema allows",
                    severity="warning",
                )
            )
    return out


def _finding(pid: str, issue: Issue) -> ValidationFinding:
    return ValidationFinding(pid, issue.span, issue.kind, issue.message)


def check_policies(
    policies: list[ast.Policy] | Mapping[str, ast.Policy], schema: sm.Schema
) -> None:
    """Raise :class:`ValidationError` listing every finding when the policies are invalid."""
    findings = validate_policies(policies, schema)
    if findings:
        raise ValidationError(_summary("policy validation failed", findings), list(findings))


def _summary(head: str, findings: list[ValidationFinding]) -> str:
    n = len(findings)
    lines = [f"{head} with {n} error{'s' if n != 1 else ''}:"]
    lines.extend(f"  {f}" for f in findings)
    return "\n".join(lines)


# ---------------------------------------------------------------- values against schema types


def _conform(v: Value, t: sm.SchemaType) -> str | None:
    """None when ``v`` has schema type ``t``, else a description of the first mismatch."""
    if isinstance(t, sm.PrimType):
        want = {"Bool": bool, "Long": int, "String": str}[t.name]
        if type(v) is not want:
            return f"expected {t.name} but found {_describe(v)}"
        return None
    if isinstance(t, sm.EntityRefType):
        if type(v) is not EntityUID:
            return f"expected an entity of type {t.name} but found {_describe(v)}"
        if v.type != t.name:
            return f"expected an entity of type {t.name} but found {v}"
        return None
    if isinstance(t, sm.ExtensionType):
        if type_name(v) != t.name:
            return f"expected {t.name} but found {_describe(v)}"
        return None
    if isinstance(t, sm.SetType):
        if type(v) is not SetValue:
            return f"expected {t} but found {_describe(v)}"
        for x in v:
            why = _conform(x, t.element)
            if why is not None:
                return f"in a set element: {why}"
        return None
    if isinstance(t, sm.RecordType):
        if type(v) is not RecordValue:
            return f"expected a record but found {_describe(v)}"
        for name, attr in t.attributes.items():
            if attr.required and name not in v.fields:
                return f"the record lacks the required attribute `{name}`"
        for name, x in v.fields.items():
            decl = t.attributes.get(name)
            if decl is None:
                if not t.additional:
                    return f"the record has the attribute `{name}`, which its type does not declare"
                continue
            why = _conform(x, decl.type)
            if why is not None:
                return f"in attribute `{name}`: {why}"
        return None
    return f"unknown schema type {t!r}"


def _describe(v: Value) -> str:
    if type(v) is EntityUID:
        return f"entity {v}"
    return type_name(v)


def _uids_in(v: Value) -> Iterable[EntityUID]:
    if type(v) is EntityUID:
        yield v
    elif type(v) is SetValue:
        for x in v:
            yield from _uids_in(x)
    elif type(v) is RecordValue:
        for x in v.fields.values():
            yield from _uids_in(x)


def _uid_problem(index: SchemaIndex, uid: EntityUID) -> tuple[str, str] | None:
    """Enumerated-type ids and action uids must exist wherever an entity is referenced."""
    info = index.entities.get(uid.type)
    if info is not None and info.enum is not None and uid.id not in info.enum:
        allowed = ", ".join(quote_string(x) for x in info.enum)
        return (
            "invalid_enum_entity",
            f"`{uid}` is not a value of the enumerated entity type `{uid.type}` "
            f"(allowed ids: {allowed})",
        )
    if is_action_type(uid.type) and uid not in index.actions:
        return ("undeclared_action", f"the action `{uid}` is not declared in the schema")
    return None


# ---------------------------------------------------------------- entities


def validate_entities(store: EntityStore, schema: sm.Schema) -> list[ValidationFinding]:
    """Check every entity against its type in ``schema`` (all problems, not the first)."""
    index = _index(schema)
    out: list[ValidationFinding] = []
    for entity in store:
        out.extend(_check_entity(index, schema, entity))
    return out


def _check_entity(index: SchemaIndex, schema: sm.Schema, e: Entity) -> list[ValidationFinding]:
    uid = e.uid
    where = str(uid)
    found: list[ValidationFinding] = []

    def add(kind: str, message: str) -> None:
        found.append(ValidationFinding(None, None, kind, f"entity {uid}: {message}", path=where))

    if is_action_type(uid.type):
        ad = schema.actions.get(uid)
        if ad is None:
            add("undeclared_action", "this action is not declared in the schema")
            return found
        allowed = schema.action_ancestors(uid)
        if e.attrs or e.tags:
            add("action_mismatch", "actions cannot have attributes or tags")
        extra = [p for p in e.parents if p not in allowed]
        missing = [p for p in ad.member_of if p not in e.parents]
        if extra or missing:
            add(
                "action_mismatch",
                "its parents differ from the schema's declaration of the action "
                f"(declared: {', '.join(map(str, ad.member_of)) or 'none'})",
            )
        return found

    et = schema.entity_types.get(uid.type)
    if et is None:
        hint = closest(uid.type, schema.entity_types)
        add(
            "unknown_entity_type",
            f"entity type `{uid.type}` is not declared in the schema"
            + (f"; did you mean `{hint}`?" if hint else ""),
        )
        return found
    problem = _uid_problem(index, uid)
    if problem is not None:
        add(*problem)

    shape = et.shape if et.enum is None else sm.RecordType()
    for name, attr in shape.attributes.items():
        if attr.required and name not in e.attrs:
            add("missing_attribute", f"the required attribute `{name}` ({attr.type}) is missing")
    for name, v in e.attrs.items():
        decl = shape.attributes.get(name)
        if decl is None:
            if not shape.additional:
                hint = closest(name, shape.attributes)
                add(
                    "unknown_attribute",
                    f"attribute `{name}` is not declared for type `{uid.type}`"
                    + (f"; did you mean `{hint}`?" if hint else ""),
                )
        else:
            why = _conform(v, decl.type)
            if why is not None:
                add("attribute_type", f"attribute `{name}` has the wrong type: {why}")
        for ref in _uids_in(v):
            p = _uid_problem(index, ref)
            if p is not None:
                add(p[0], f"in attribute `{name}`: {p[1]}")

    allowed_parents = schema.ancestor_types(uid.type)
    for parent in sorted(e.parents):
        p = _uid_problem(index, parent)
        if p is not None:
            add(p[0], f"parent {parent}: {p[1]}")
        if parent.type not in allowed_parents:
            allowed_types = ", ".join(f"`{t}`" for t in sorted(allowed_parents)) or "none"
            add(
                "invalid_parent",
                f"parent {parent} has type `{parent.type}`, which the schema does not allow "
                f"as an ancestor of `{uid.type}` (allowed: {allowed_types})",
            )

    if e.tags:
        tag_type = et.tags if et.enum is None else None
        if tag_type is None:
            first = next(iter(e.tags))
            add(
                "unexpected_tag",
                f"tag `{first}` is not allowed: the schema declares no tags for `{uid.type}`",
            )
        else:
            for name, v in e.tags.items():
                why = _conform(v, tag_type)
                if why is not None:
                    add("tag_type", f"tag `{name}` has the wrong type: {why}")
                for ref in _uids_in(v):
                    p = _uid_problem(index, ref)
                    if p is not None:
                        add(p[0], f"in tag `{name}`: {p[1]}")
    return found


# ---------------------------------------------------------------- requests


def _plain_request_types(schema: sm.Schema) -> dict[EntityUID, tuple[Any, Any, bool]]:
    """Per declared action with ``appliesTo``: the principal and resource types a request
    may have without any finding (declared, not enumerated, not action types), and
    whether its context type has a required attribute. Computed once per schema."""

    def build() -> dict[EntityUID, tuple[Any, Any, bool]]:
        plain = {
            name
            for name, et in schema.entity_types.items()
            if et.enum is None and not is_action_type(name)
        }
        return {
            uid: (
                frozenset(ad.principal_types) & plain,
                frozenset(ad.resource_types) & plain,
                any(a.required for a in ad.context.attributes.values()),
            )
            for uid, ad in schema.actions.items()
            if ad.applies_to
        }

    table: dict[EntityUID, tuple[Any, Any, bool]] = schema._cached("validate.plain_requests", build)
    return table


def _plainly_valid(
    principal: EntityUID | None,
    action: EntityUID,
    resource: EntityUID | None,
    context: RecordValue | None,
    schema: sm.Schema,
) -> bool:
    """True only when :func:`validate_request` would find nothing: the common request,
    decided from precomputed tables (anything else takes the full check)."""
    plain = _plain_request_types(schema).get(action)
    if plain is None:
        return False
    principals, resources, required = plain
    if principal is not None and principal.type not in principals:
        return False
    if resource is not None and resource.type not in resources:
        return False
    if context is None:
        return True
    if not context.fields:
        return not required
    ad = schema.actions[action]
    return _plain_value(context, ad.context, schema)


def _plain_value(v: Value, t: sm.SchemaType, schema: sm.Schema) -> bool:
    """``v`` conforms to ``t`` (``_conform`` finds nothing) and every uid in it has a type
    that needs no enum or action check (so ``_uid_problem`` finds nothing either)."""
    tt = type(t)
    if tt is sm.PrimType:
        want = _PRIM_CLASSES[t.name]  # type: ignore[union-attr]
        return type(v) is want
    if tt is sm.EntityRefType:
        if type(v) is not EntityUID or v.type != t.name:  # type: ignore[union-attr]
            return False
        et = schema.entity_types.get(v.type)
        return et is not None and et.enum is None and not is_action_type(v.type)
    if tt is sm.ExtensionType:
        return type_name(v) == t.name  # type: ignore[union-attr]
    if tt is sm.SetType:
        if type(v) is not SetValue:
            return False
        element = t.element  # type: ignore[union-attr]
        return all(_plain_value(x, element, schema) for x in v)
    if tt is sm.RecordType:
        rt: sm.RecordType = t  # type: ignore[assignment]
        if type(v) is not RecordValue or rt.additional:
            return False
        attrs = rt.attributes
        fields = v.fields
        for name, x in fields.items():
            decl = attrs.get(name)
            if decl is None or not _plain_value(x, decl.type, schema):
                return False
        if len(fields) != len(attrs):
            for name, attr in attrs.items():
                if attr.required and name not in fields:
                    return False
        return True
    return False


_PRIM_CLASSES: dict[str, type] = {"Bool": bool, "Long": int, "String": str}


def parsed_context_is_valid(schema: sm.Schema, action: EntityUID) -> bool:
    """True when every context that ``parse_context(data, schema, action)`` accepts passes
    :func:`validate_request`'s context checks too, so a request whose context came from that
    parse need not be checked again: the parse conforms it to the context type and checks
    enumerated ids; what it leaves to validation is action uids and the untyped values of
    open records (``additional``), so a context type with either anywhere is not covered."""

    def build() -> frozenset[EntityUID]:
        def covered(t: sm.SchemaType) -> bool:
            if isinstance(t, sm.EntityRefType):
                return not is_action_type(t.name)
            if isinstance(t, sm.SetType):
                return covered(t.element)
            if isinstance(t, sm.RecordType):
                return not t.additional and all(covered(a.type) for a in t.attributes.values())
            return isinstance(t, sm.PrimType | sm.ExtensionType)

        return frozenset(uid for uid, ad in schema.actions.items() if covered(ad.context))

    table: frozenset[EntityUID] = schema._cached("validate.parsed_contexts", build)
    return action in table


def validate_request(
    principal: EntityUID | None,
    action: EntityUID,
    resource: EntityUID | None,
    context: RecordValue | None,
    schema: sm.Schema,
) -> list[ValidationFinding]:
    """Check a request against the schema: the action is declared, the principal and
    resource types are ones its ``appliesTo`` allows, and the context has its context type.
    ``None`` for principal, resource or context skips that part."""
    if _plainly_valid(principal, action, resource, context, schema):
        return []
    return _request_findings(principal, action, resource, context, schema)


def _request_findings(
    principal: EntityUID | None,
    action: EntityUID,
    resource: EntityUID | None,
    context: RecordValue | None,
    schema: sm.Schema,
) -> list[ValidationFinding]:
    index = _index(schema)
    out: list[ValidationFinding] = []

    def add(kind: str, path: str, message: str) -> None:
        out.append(ValidationFinding(None, None, kind, message, path=path))

    for part, uid in (("principal", principal), ("resource", resource)):
        if uid is None:
            continue
        if uid.type not in schema.entity_types:
            hint = closest(uid.type, schema.entity_types)
            add(
                f"unknown_{part}_type",
                part,
                f"{part} {uid} has type `{uid.type}`, which the schema does not declare"
                + (f"; did you mean `{hint}`?" if hint else ""),
            )
            continue
        problem = _uid_problem(index, uid)
        if problem is not None:
            add(problem[0], part, f"{part} {problem[1]}")

    ad = schema.actions.get(action)
    if ad is None:
        hint = closest(action.id, [a.id for a in schema.actions if a.type == action.type])
        add(
            "undeclared_action",
            "action",
            f"the action {action} is not declared in the schema"
            + (f"; did you mean `{EntityUID(action.type, hint)}`?" if hint else ""),
        )
        return out

    allowed_p = ad.principal_types if ad.applies_to else ()
    allowed_r = ad.resource_types if ad.applies_to else ()
    if principal is not None and principal.type not in allowed_p:
        add(
            "principal_not_allowed",
            "principal",
            f"principal type `{principal.type}` is not valid for {action} "
            f"(allowed: {', '.join(f'`{t}`' for t in allowed_p) or 'none'})",
        )
    if resource is not None and resource.type not in allowed_r:
        add(
            "resource_not_allowed",
            "resource",
            f"resource type `{resource.type}` is not valid for {action} "
            f"(allowed: {', '.join(f'`{t}`' for t in allowed_r) or 'none'})",
        )
    if context is not None:
        for ref in _uids_in(context):
            p = _uid_problem(index, ref)
            if p is not None:
                add(p[0], "context", f"context: {p[1]}")
        why = _conform(context, ad.context)
        if why is not None:
            add(
                "context_type",
                "context",
                f"the context does not have the context type of {action} {ad.context}: {why}",
            )
    return out


# ---------------------------------------------------------------- multi-issuer schema

TOKEN_ATTRIBUTES: dict[str, str] = {
    "token_type": "String",
    "jti": "String",
    "iss": "TrustedIssuer",
    "exp": "Long",
    "validated_at": "Long",
    "issuer": "String",
}
"""The attributes the engine fills itself on a token entity (``iss`` refers to the
issuer's ``<issuer name>::TrustedIssuer``; ``issuer`` is the token's ``iss`` claim as text,
as Cedarling's published multi-issuer store declares it). A schema may declare any of
them, required or optional, or leave them out: the engine sets only those the token's
entity type declares."""

_URL_FIELDS = ("host", "path", "protocol")


def _namespace(name: str) -> str:
    return name.rsplit("::", 1)[0] if "::" in name else ""


def trusted_issuer_type_name(issuer_name: str) -> str:
    """The type of the ``TrustedIssuer`` entity the engine builds for an issuer (and of the
    ``iss`` attribute of its tokens): the issuer ``name`` is its namespace."""
    return f"{issuer_name}::TrustedIssuer" if issuer_name else "TrustedIssuer"


def _token_users(
    issuer_names: list[str], token_entity_types: Iterable[str] | Mapping[str, Iterable[str]]
) -> dict[str, list[str]]:
    """Token entity type -> the names of the issuers whose tokens become it."""
    if isinstance(token_entity_types, Mapping):
        return {t: list(dict.fromkeys(names)) for t, names in token_entity_types.items()}
    # Plain type names: each is taken as used by the issuer named like its namespace.
    return {t: [_namespace(t)] for t in dict.fromkeys(token_entity_types)}


def check_multi_issuer_schema(
    schema: sm.Schema,
    issuer_names: Iterable[str],
    token_entity_types: Iterable[str] | Mapping[str, Iterable[str]],
    *,
    actions: Iterable[EntityUID] | None = None,
) -> list[str]:
    """Every piece the multi-issuer token structure needs that ``schema`` lacks.

    ``token_entity_types`` maps each token entity type to the names of the issuers whose
    (trusted) token metadata produce it; a plain list of type names means each type is
    produced by the issuer named like its namespace.

    Token entity types need ``tags Set<String>``; the attributes the engine fills
    (:data:`TOKEN_ATTRIBUTES`), when declared, must have their types (claim attributes may
    be required, as Cedarling's stores declare them: a token lacking the claim is dropped
    when its entity is built):
    ``iss`` must refer to ``<issuer name>::TrustedIssuer`` for every issuer producing the
    type (the entity the engine builds), so a type shared by issuers of different names
    leaves ``iss`` out. Each issuer's namespace needs a ``TrustedIssuer`` type with
    ``issuer_entity_id`` (a record of String ``host``, ``path``, ``protocol``, or a String:
    the issuer URL). The context
    of each action (only ``actions``' when given: the actions of multi-issuer requests)
    needs a ``tokens`` record, required or optional, with a required Long
    ``total_token_count``. An empty list means the schema fits.
    """
    names = list(dict.fromkeys(issuer_names))
    missing: list[str] = []
    for name in names:
        ti_name = trusted_issuer_type_name(name)
        ti = schema.entity_types.get(ti_name)
        if ti is None:
            missing.append(f"issuer `{name}`: entity type `{ti_name}` is not declared")
            continue
        attr = ti.shape.attributes.get("issuer_entity_id")
        if attr is None:
            missing.append(f"entity type `{ti_name}` lacks the attribute `issuer_entity_id`")
            continue
        if attr.type == sm.STRING:
            continue  # Cedarling's stores declare it so: the engine gives the issuer URL
        if not isinstance(attr.type, sm.RecordType):
            missing.append(
                f"`{ti_name}.issuer_entity_id` must be a URL record "
                f"{{host: String, path: String, protocol: String}} or a String, not {attr.type}"
            )
            continue
        for field in _URL_FIELDS:
            fa = attr.type.attributes.get(field)
            if fa is None or fa.type != sm.STRING:
                missing.append(f"`{ti_name}.issuer_entity_id` lacks the String field `{field}`")

    for tname, users in _token_users(names, token_entity_types).items():
        et = schema.entity_types.get(tname)
        if et is None:
            missing.append(f"token entity type `{tname}` is not declared")
            continue
        if et.tags != sm.SetType(sm.STRING):
            missing.append(f"token entity type `{tname}` must declare `tags Set<String>`")
        attrs = et.shape.attributes
        for aname, want in TOKEN_ATTRIBUTES.items():
            a = attrs.get(aname)
            if a is None:
                continue  # not declared: the engine does not set it
            if want == "TrustedIssuer":
                missing.extend(_iss_problems(tname, a.type, users))
            elif not (isinstance(a.type, sm.PrimType) and a.type.name == want):
                missing.append(f"`{tname}.{aname}` must be {want}, not {a.type}")

    wanted = set(actions) if actions is not None else None
    for uid, ad in schema.actions.items():
        if not ad.applies_to or (wanted is not None and uid not in wanted):
            continue
        missing.extend(tokens_context_problems(uid, ad))
    return missing


def _iss_problems(tname: str, declared: sm.SchemaType, users: list[str]) -> list[str]:
    """``iss`` holds ``<issuer name>::TrustedIssuer::"<issuer id>"``: its declared type must
    be that entity type for every issuer whose tokens become ``tname``."""
    out: list[str] = []
    ref = declared.name if isinstance(declared, sm.EntityRefType) else None
    expected = list(dict.fromkeys(trusted_issuer_type_name(u) for u in users))
    for user in users:
        want = trusted_issuer_type_name(user)
        if ref == want:
            continue
        hint = (
            f"declare `iss?: {want}`"
            if len(expected) == 1
            else f"leave `iss` out: issuers {', '.join(f'`{u}`' for u in users)} share "
            f"`{tname}`, and each builds `iss` in its own namespace"
        )
        out.append(
            f"`{tname}.iss` is declared as `{declared}`, but issuer `{user}` builds `iss` "
            f"as `{want}` (the issuer's own TrustedIssuer); {hint}"
        )
    return out


def tokens_context_problems(uid: EntityUID, ad: sm.ActionDef) -> list[str]:
    """What the context of one action lacks to carry ``context.tokens``."""
    tokens = ad.context.attributes.get("tokens")
    if tokens is None:
        return [f"the context of {uid} lacks the field `tokens` (`tokens?: TokensContext`)"]
    if not isinstance(tokens.type, sm.RecordType):
        return [f"the field `tokens` in the context of {uid} must be a record"]
    total = tokens.type.attributes.get("total_token_count")
    if total is None or not total.required or total.type != sm.LONG:
        return [
            f"the `tokens` record in the context of {uid} lacks the required Long field "
            "`total_token_count`"
        ]
    return []
