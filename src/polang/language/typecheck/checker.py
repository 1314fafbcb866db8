"""The strict type checker: one policy, typed in every request environment of the schema.

A request environment is one (principal type, action, resource type) that the schema's
``appliesTo`` allows, with that action's context type. A policy is typed in each one; the
scope is part of the typed expression, so in environments the scope rules out (``principal
== User::"a"`` when the principal is a ``Group``) the condition types as ``false`` and the
body is never looked at. That is what makes "consistent with the scope" precise.

Typing follows the language's strict validator rule for rule: singleton booleans and
short-circuiting, capabilities (``has``/``hasTag`` tests that make later accesses safe,
flowing through ``&&``, ``||`` and ``if``), strict least upper bounds, literal checks of
extension constructors. Each rule keeps the language's order of evaluation of operands,
so the findings come out in source order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar

from polang._record import Record
from polang.inputs.fields import closest
from polang.language import ast, extensions
from polang.language import schema as sm
from polang.language.ast import NO_SPAN, Span
from polang.language.typecheck import types as T
from polang.language.typecheck.ir import BUILTIN_METHODS, Lowering, Node, walk
from polang.language.typecheck.types import (
    ANY_ENTITY,
    ANY_RECORD,
    ANY_SET,
    BOOL,
    DATETIME,
    DECIMAL,
    DURATION,
    FALSE,
    IPADDR,
    LONG,
    NEVER,
    STRING,
    TRUE,
    AttrType,
    EntityType,
    LubError,
    RecordType,
    SetType,
    Type,
)
from polang.language.values import EntityUID, is_action_type, quote_string

_set = object.__setattr__

# ---------------------------------------------------------------- findings (raw)


class Issue(Record):
    """A finding before it is tied to a policy id (the public form is in ``validate``)."""

    __slots__ = ("kind", "message", "severity", "span")
    kind: str
    message: str
    span: Span
    severity: str

    def __init__(
        self, kind: str, message: str, span: Span = NO_SPAN, severity: str = "error"
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "message", message)
        _set(self, "span", span)
        _set(self, "severity", severity)


# ---------------------------------------------------------------- the schema, indexed


class EntityInfo(Record):
    __slots__ = ("attrs", "descendants", "enum", "name", "open", "tags")
    _frozen: ClassVar[bool] = False
    name: str
    attrs: dict[str, AttrType]
    open: bool
    tags: Type | None
    enum: tuple[str, ...] | None
    descendants: frozenset[str]

    def __init__(
        self,
        name: str,
        attrs: dict[str, AttrType],
        open: bool,
        tags: Type | None,
        enum: tuple[str, ...] | None,
        descendants: frozenset[str],
    ) -> None:
        self.name = name
        self.attrs = attrs
        self.open = open
        self.tags = tags
        self.enum = enum
        self.descendants = descendants


class ActionInfo(Record):
    __slots__ = ("context", "descendants", "principals", "resources", "uid")
    _frozen: ClassVar[bool] = False
    uid: EntityUID
    descendants: frozenset[EntityUID]
    principals: tuple[str, ...]
    resources: tuple[str, ...]
    context: RecordType

    def __init__(
        self,
        uid: EntityUID,
        descendants: frozenset[EntityUID],
        principals: tuple[str, ...],
        resources: tuple[str, ...],
        context: RecordType,
    ) -> None:
        self.uid = uid
        self.descendants = descendants
        self.principals = principals
        self.resources = resources
        self.context = context


class Env(Record):
    """One request environment (with template slots linked to entity types, if any)."""

    __slots__ = ("action", "context", "principal", "principal_slot", "resource", "resource_slot")
    _frozen: ClassVar[bool] = False
    principal: str
    action: EntityUID
    resource: str
    context: RecordType
    principal_slot: str | None
    resource_slot: str | None

    def __init__(
        self,
        principal: str,
        action: EntityUID,
        resource: str,
        context: RecordType,
        principal_slot: str | None = None,
        resource_slot: str | None = None,
    ) -> None:
        self.principal = principal
        self.action = action
        self.resource = resource
        self.context = context
        self.principal_slot = principal_slot
        self.resource_slot = resource_slot


class SchemaIndex:
    """The schema in the shape the checker asks questions of (built once per schema)."""

    def __init__(self, schema: sm.Schema) -> None:
        self.schema = schema
        # the schema's closures, built once per schema (language/hierarchy.py)
        self.entities: dict[str, EntityInfo] = {}
        for name, et in schema.entity_types.items():
            self.entities[name] = EntityInfo(
                name=name,
                attrs={} if et.enum is not None else T.record_from_schema(et.shape).attrs,
                open=False if et.enum is not None else et.shape.additional,
                tags=None if (et.tags is None or et.enum is not None) else T.from_schema(et.tags),
                enum=et.enum,
                descendants=schema.descendant_types(name),
            )
        self.actions: dict[EntityUID, ActionInfo] = {}
        for auid, ad in schema.actions.items():
            self.actions[auid] = ActionInfo(
                uid=auid,
                descendants=schema.action_descendants(auid),
                principals=ad.principal_types if ad.applies_to else (),
                resources=ad.resource_types if ad.applies_to else (),
                context=T.record_from_schema(ad.context),
            )
        self.envs: list[Env] = [
            Env(p, a.uid, r, a.context)
            for a in self.actions.values()
            for p in a.principals
            for r in a.resources
        ]
        self.all_tag_types: list[Type] = [e.tags for e in self.entities.values() if e.tags]

    def is_known_entity_type(self, name: str) -> bool:
        return is_action_type(name) or name in self.entities

    def entity_types_in(self, name: str) -> set[str]:
        """Types whose entities can be ``in`` an entity of type ``name`` (itself included)."""
        info = self.entities.get(name)
        out = set(info.descendants) if info is not None else set()
        out.add(name)
        return out

    def actions_in_set(self, uids: Iterable[EntityUID]) -> set[EntityUID] | None:
        """Actions ``a`` with ``a in uids``; None when one of ``uids`` is not an action."""
        out: set[EntityUID] = set()
        for uid in uids:
            info = self.actions.get(uid)
            if info is None:
                return None
            out |= info.descendants
            out.add(uid)
        return out

    def euid_type(self, uid: EntityUID) -> Type | None:
        """The type of an entity literal, or None when the schema does not declare it."""
        if is_action_type(uid.type):
            return T.entity(uid.type) if uid in self.actions else None
        return T.entity(uid.type) if uid.type in self.entities else None


# ---------------------------------------------------------------- answers

EMPTY: frozenset[tuple[object, ...]] = frozenset()
Caps = frozenset[tuple[object, ...]]


class Answer:
    """The result of typing an expression: success or not, a type (even on failure, when
    the language can still tell, e.g. ``&&`` is boolean), and the capabilities that hold
    when the expression evaluates to true."""

    __slots__ = ("caps", "ok", "ty")

    def __init__(self, ok: bool, ty: Type | None, caps: Caps = EMPTY) -> None:
        self.ok = ok
        self.ty = ty
        self.caps = caps


def ok(ty: Type | None, caps: Caps = EMPTY) -> Answer:
    return Answer(True, ty, caps)


def fail(ty: Type | None) -> Answer:
    return Answer(False, ty)


OK_FALSE = Answer(True, FALSE)
FAIL_NONE = Answer(False, None)
FAIL_BOOL = Answer(False, BOOL)
FAIL_FALSE = Answer(False, FALSE)
ONLY_BOOL: tuple[Type, ...] = (BOOL,)


def then(a: Answer, f: Callable[[Type | None, Caps], Answer]) -> Answer:
    """Continue after ``a``; a failure of ``a`` makes the result a failure too."""
    if a.ok:
        return f(a.ty, a.caps)
    r = f(a.ty, EMPTY)
    return r if not r.ok else Answer(False, r.ty)


def sequence(answers: list[Answer], f: Callable[[list[Type | None]], Answer]) -> Answer:
    r = f([a.ty for a in answers])
    if r.ok and not all(a.ok for a in answers):
        return Answer(False, r.ty)
    return r


# ---------------------------------------------------------------- extension functions


class ExtFunction(Record):
    __slots__ = ("args", "literal_kind", "method", "name", "ret")
    name: str
    args: tuple[Type, ...]
    ret: Type
    literal_kind: str | None  # constructors: what the string literal must parse as
    method: bool  # called as `receiver.name(...)`; the receiver is the first argument

    def __init__(
        self,
        name: str,
        args: tuple[Type, ...],
        ret: Type,
        literal_kind: str | None = None,
        method: bool = False,
    ) -> None:
        _set(self, "name", name)
        _set(self, "args", args)
        _set(self, "ret", ret)
        _set(self, "literal_kind", literal_kind)
        _set(self, "method", method)

    def arity_message(self, given: int) -> str:
        """``given`` counts the receiver of a method, as ``args`` does."""
        want, got = len(self.args), given
        if self.method:
            want, got = want - 1, got - 1
            return f"`.{self.name}()` takes {_count(want)} besides its receiver, got {got}"
        return f"`{self.name}()` takes {_count(want)}, got {got}"


def _count(n: int) -> str:
    return f"{n} argument{'s' if n != 1 else ''}"


_TYPE_NAMES: dict[str, Type] = {
    "String": STRING,
    "Long": LONG,
    "Bool": BOOL,
    "decimal": DECIMAL,
    "ipaddr": IPADDR,
    "datetime": DATETIME,
    "duration": DURATION,
}


def _ext_functions() -> dict[str, ExtFunction]:
    """The checker's view of the extension registry (methods count the receiver)."""
    out: dict[str, ExtFunction] = {}
    for name, sig in extensions.SIGNATURES.items():
        out[name] = ExtFunction(
            name,
            tuple(_TYPE_NAMES[p] for p in sig.params),
            _TYPE_NAMES[sig.returns],
            extensions.EXTENSION_TYPE_OF_FUNCTION.get(name),
            sig.style == "method",
        )
    return out


EXT_FUNCTIONS: dict[str, ExtFunction] = _ext_functions()

# types that `<`, `<=`, `>`, `>=` accept (both operands of the same type)
COMPARABLE: tuple[Type, ...] = (LONG, DATETIME, DURATION)


def _set_method_hint(t: Type) -> str | None:
    """What the author probably meant when a set method is called on a non-set."""
    if type(t) is EntityType:
        return "in"
    if type(t) is RecordType:
        return "has"
    return "like" if t == STRING else None


LiteralChecker = Callable[[str, str], str | None]
"""``(kind, text) -> None`` when ``text`` parses as a ``kind`` value, else the reason."""

_LUB_CONTEXT = {
    "set": "elements of a set",
    "if": "both branches of an `if`",
    "eq": "both operands of `==`",
    "contains": "the set's elements and the argument of `contains`",
    "containsAnyAll": "the elements of both sets of `containsAll`/`containsAny`",
    "getTag": "the tag types of the entity types `getTag` may apply to",
}

_HELP = {
    "like": "try using `like` to examine the contents of a string",
    "contains": "try using `contains`, `containsAny` or `containsAll` to examine a set",
    "single_contains": "try using `contains` to test if a single element is in a set",
    "has": "try using `has` to test for an attribute",
    "is": "try using `is` to test for an entity type",
    "in": "try using `in` for entity hierarchy membership",
    "empty_string": 'try using `== ""` to test if a string is empty',
    "type_test": "run-time type tests exist only for entities (`is`)",
    "concat": "the language has no string concatenation",
    "set_ops": "the language has no set union, intersection or difference",
}


_GENERIC_NAMES = {"any entity": "an entity", "{...}": "a record", "Set": "a set"}


def _describe_expected(expected: Iterable[Type]) -> str:
    names = []
    for t in expected:
        if isinstance(t, SetType) and t.element == ANY_ENTITY:
            names.append("a set of entities")
        else:
            names.append(_GENERIC_NAMES.get(t.display(), t.display()))
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _attr_path(attrs: list[str]) -> str:
    out = ""
    for i, a in enumerate(reversed(attrs)):
        if a.isidentifier() and a.isascii():
            out += ("." if i else "") + a
        else:
            out += f"[{quote_string(a)}]"
    return out


# ---------------------------------------------------------------- one environment


class EnvChecker:
    """Types expressions in one request environment, collecting issues."""

    def __init__(
        self, index: SchemaIndex, env: Env, issues: list[Issue], literal_check: LiteralChecker
    ) -> None:
        self.index = index
        self.env = env
        self.issues = issues
        self.literal_check = literal_check

    # ------------------------------------------------------------ helpers

    def err(self, kind: str, span: Span, message: str) -> None:
        self.issues.append(Issue(kind, message, span))

    def expect(
        self, caps: Caps, e: Node, expected: tuple[Type, ...], help_key: str | None = None
    ) -> Answer:
        """Type ``e`` and require it to be (permissively) a subtype of one of ``expected``."""
        return self._expect_answer(self.tc(caps, e), e, expected, help_key)

    def lub_or_error(self, node: Node, tys: list[Type | None], context: str) -> Type | None:
        if any(t is None for t in tys):
            return None
        try:
            return T.lub_all([t for t in tys if t is not None])
        except LubError as exc:
            self.incompatible(node, [t for t in tys if t is not None], context, exc.hint)
            return None

    def incompatible(self, node: Node, tys: list[Type], context: str, hint: str) -> None:
        names: list[str] = []
        for t in tys:
            if t.display() not in names:
                names.append(t.display())
        listed = " and ".join(names) if len(names) <= 2 else ", ".join(names)
        self.err(
            "incompatible_types",
            node.span,
            f"the types {listed} are not compatible: {_LUB_CONTEXT[context]} must have "
            f"compatible types ({hint})",
        )

    def strict_equality(
        self, node: Node, ty: Type, lt: Type | None, rt: Type | None, context: str
    ) -> Answer:
        if ty in (TRUE, FALSE):
            return ok(ty)
        if lt is not None and rt is not None:
            try:
                T.lub(lt, rt)
            except LubError as exc:
                self.incompatible(node, [lt, rt], context, exc.hint)
                return fail(ty)
        return ok(ty)

    def action_as_literal(self, e: Node) -> EntityUID | None:
        if e.kind == "euid":
            uid: EntityUID = e.data
            return uid
        if e.kind == "var" and e.data == "action":
            return self.env.action
        return None

    def as_literal(self, e: Node) -> tuple[str, object] | None:
        """A literal's value (with its kind, so ``true`` and ``1`` stay apart)."""
        if e.kind == "lit":
            return (type(e.data).__name__, e.data)
        uid = self.action_as_literal(e)
        return ("uid", uid) if uid is not None else None

    # ------------------------------------------------------------ attributes and entities

    def entity_attrs(self, names: frozenset[str]) -> dict[str, AttrType]:
        infos = [self.index.entities.get(n) for n in sorted(names)]
        attr_maps = [i.attrs if i is not None else {} for i in infos]
        out = dict(attr_maps[0])
        for other in attr_maps[1:]:  # only reachable outside strict mode
            out = T._attrs_lub(out, other, strict=False)
        return out

    def lookup_attr(self, t: Type, attr: str) -> AttrType | None:
        if type(t) is RecordType:
            return t.attrs.get(attr)
        if type(t) is EntityType and t.names is not None:
            return self.entity_attrs(t.names).get(attr)
        return None

    def known_attrs(self, t: Type) -> list[str]:
        if type(t) is RecordType:
            return list(t.attrs)
        if type(t) is EntityType and t.names is not None:
            return list(self.entity_attrs(t.names))
        return []

    def open_entity(self, t: EntityType) -> bool:
        if t.names is None:
            return True
        for n in t.names:
            if is_action_type(n):
                continue
            info = self.index.entities.get(n)
            if info is None or info.open:
                return True
        return False

    def may_have_attr(self, t: Type, attr: str) -> bool:
        if type(t) is T.NeverType:
            return True
        if type(t) is EntityType:
            if self.open_entity(t):
                return True
            assert t.names is not None
            return any(
                (info := self.index.entities.get(n)) is not None and attr in info.attrs
                for n in t.names
            )
        if type(t) is RecordType:
            return t.open or attr in t.attrs
        return False

    def tag_types(self, t: EntityType) -> list[Type]:
        if t.names is None:
            tys = self.index.all_tag_types
        else:
            tys = [
                info.tags
                for n in sorted(t.names)
                if (info := self.index.entities.get(n)) is not None and info.tags is not None
            ]
        out: list[Type] = []
        for x in tys:
            if x not in out:
                out.append(x)
        return out

    def access_description(self, e: Node, t: Type | None, attr: str) -> tuple[str, str]:
        """How to name ``e.attr`` for the author, and the ``has`` test that makes it safe."""
        attrs = [attr]
        cur: Node = e
        cur_t = t
        while True:
            if type(cur_t) is EntityType and cur_t.names is not None:
                where = (
                    f" on entity type `{cur_t.single}`"
                    if cur_t.single
                    else " on entity types " + ", ".join(f"`{n}`" for n in sorted(cur_t.names))
                )
                break
            if cur.kind == "var" and cur.data == "context":
                where = f" in the context of {self.env.action}"
                break
            if cur.kind == "get":
                attrs.append(cur.data)
                cur = cur.args[0]
                cur_t = None
                continue
            where = ""
            break
        path = _attr_path(attrs)
        base = _render(e) or "e"
        last = attr if (attr.isidentifier() and attr.isascii()) else quote_string(attr)
        return f"`{path}`{where}", f"{base} has {last}"

    # ------------------------------------------------------------ the rules

    def tc(self, caps: Caps, e: Node) -> Answer:
        k = e.kind
        env = self.env
        if k == "var":
            v = e.data
            if v == "principal":
                return ok(T.entity(env.principal))
            if v == "resource":
                return ok(T.entity(env.resource))
            if v == "context":
                return ok(env.context)
            at = self.index.euid_type(env.action)
            return ok(at) if at is not None else fail(None)
        if k == "lit":
            v = e.data
            if v is True or v is False:
                return ok(T.singleton(v))
            return ok(LONG if type(v) is int else STRING)
        if k == "euid":
            et = self.index.euid_type(e.data)
            # unknown types and actions are reported once per policy, not here
            return ok(et) if et is not None else fail(None)
        if k == "slot":
            linked = env.principal_slot if e.data == "?principal" else env.resource_slot
            return ok(T.entity(linked) if linked is not None else ANY_ENTITY)
        if k == "if":
            return self.tc_if(caps, e)
        if k == "and":
            return self.tc_and(caps, e)
        if k == "or":
            return self.tc_or(caps, e)
        if k == "not":
            return then(self.expect(caps, e.args[0], ONLY_BOOL), _negate)
        if k == "neg":
            return then(self.expect(caps, e.args[0], (LONG,)), lambda t, c: ok(LONG))
        if k == "isEmpty":
            a = self.tc(caps, e.args[0])
            help_key = "empty_string" if a.ty == STRING else None
            return then(self._expect_answer(a, e.args[0], (ANY_SET,), help_key), _bool)
        if k == "get":
            return self.tc_get(caps, e)
        if k == "has":
            return self.tc_has(caps, e)
        if k == "like":
            a = self.tc(caps, e.args[0])
            help_key = "is" if type(a.ty) is EntityType else None
            return then(self._expect_answer(a, e.args[0], (STRING,), help_key), _bool)
        if k == "is":
            return self.tc_is(caps, e)
        if k == "set":
            return self.tc_set(caps, e)
        if k == "record":
            return self.tc_record(caps, e)
        if k == "eq":
            return self.tc_eq(caps, e)
        if k == "lt" or k == "le":
            return self.tc_compare(caps, e)
        if k == "add" or k == "sub" or k == "mul":
            return self.tc_arith(caps, e)
        if k == "in":
            return self.tc_in(caps, e)
        if k == "contains":
            return self.tc_contains(caps, e)
        if k == "containsAll" or k == "containsAny":
            return self.tc_contains_all_any(caps, e)
        if k == "hasTag":
            return self.tc_has_tag(caps, e)
        if k == "getTag":
            return self.tc_get_tag(caps, e)
        if k == "call":
            return self.tc_call(caps, e)
        raise AssertionError(f"unknown node kind {k}")

    def _expect_answer(
        self, a: Answer, e: Node, expected: tuple[Type, ...], help_key: str | None
    ) -> Answer:
        """:meth:`expect` for an answer already computed (to pick a help text from it)."""
        t = a.ty
        if t is None:
            return FAIL_NONE
        for x in expected:
            if T.is_subtype(t, x, strict=False):
                return a
        msg = f"expected {_describe_expected(expected)} but found {t.display()}"
        if help_key:
            msg += f"; {_HELP[help_key]}"
        self.err("unexpected_type", e.span, msg)
        return FAIL_NONE

    def expect_help(
        self,
        caps: Caps,
        e: Node,
        expected: tuple[Type, ...],
        helper: Callable[[Type], str | None],
    ) -> Answer:
        a = self.tc(caps, e)
        help_key = helper(a.ty) if a.ty is not None else None
        return self._expect_answer(a, e, expected, help_key)

    def tc_if(self, caps: Caps, e: Node) -> Answer:
        cond, then_e, else_e = e.args

        def after_test(tt: Type | None, ct: Caps) -> Answer:
            if tt == TRUE:
                return then(self.tc(caps | ct, then_e), lambda t, c: ok(t, c | ct))
            if tt == FALSE:
                return then(self.tc(caps, else_e), lambda t, c: ok(t, c))
            a_then = self.tc(caps | ct, then_e)
            if a_then.ok:
                a_then = ok(a_then.ty, a_then.caps | ct)
            a_else = self.tc(caps, else_e)

            def both(t1: Type | None, c1: Caps) -> Answer:
                def inner(t2: Type | None, c2: Caps) -> Answer:
                    joined = self.lub_or_error(e, [t1, t2], "if")
                    if joined is None:
                        return fail(None)
                    return ok(joined, c2 & c1)

                return then(a_else, inner)

            return then(a_then, both)

        return then(self.expect(caps, cond, ONLY_BOOL), after_test)

    def _chain(self, caps: Caps, e: Node, step: Callable[[Caps, Answer, Node], Answer]) -> Answer:
        # `a && b && c` is `(a && b) && c` (likewise `||`): walk the left spine
        # iteratively, so long chains do not recurse once per operand
        rights: list[Node] = []
        node = e
        while node.kind == e.kind:
            rights.append(node.args[1])
            node = node.args[0]
        la = self.expect(caps, node, ONLY_BOOL)
        for right in reversed(rights):
            la = step(caps, la, right)
        return la

    def tc_and(self, caps: Caps, e: Node) -> Answer:
        return self._chain(caps, e, self._and_step)

    def _and_step(self, caps: Caps, la: Answer, right: Node) -> Answer:
        tl = la.ty
        if tl == FALSE:
            return OK_FALSE if la.ok else FAIL_FALSE  # short-circuit: the right is never run
        cl = la.caps if la.ok else EMPTY
        ra = self.expect(caps | cl if cl else caps, right, ONLY_BOOL)
        tr = ra.ty
        cr = ra.caps if ra.ok else EMPTY
        if tl is not None and tr == FALSE:
            r = OK_FALSE
        elif tl is not None and tr == TRUE:
            r = ok(tl, cl | cr)
        elif tl == TRUE and tr is not None:
            r = ok(tr, cr)
        elif tl is not None and tr is not None:
            r = ok(BOOL, cl | cr)
        else:
            return FAIL_BOOL
        return r if (la.ok and ra.ok) else Answer(False, r.ty)

    def tc_or(self, caps: Caps, e: Node) -> Answer:
        return self._chain(caps, e, self._or_step)

    def _or_step(self, caps: Caps, la: Answer, right: Node) -> Answer:
        tl = la.ty
        if tl == TRUE:
            return la
        cl = la.caps if la.ok else EMPTY
        # the right operand runs only when the left was false: no capabilities from it
        ra = self.expect(caps, right, ONLY_BOOL)
        tr = ra.ty
        cr = ra.caps if ra.ok else EMPTY
        if tl is not None and tr == TRUE:
            r = ok(TRUE, cr)
        elif tl is not None and tr == FALSE:
            r = ok(tl, cl)
        elif tl == FALSE and tr is not None:
            r = ok(tr, cr)
        elif tl is not None and tr is not None:
            r = ok(BOOL, cl & cr)
        else:
            return FAIL_BOOL
        return r if (la.ok and ra.ok) else Answer(False, r.ty)

    def tc_get(self, caps: Caps, e: Node) -> Answer:
        target = e.args[0]
        attr: str = e.data

        def after(t: Type | None, _c: Caps) -> Answer:
            if t is None:
                return fail(None)
            at = self.lookup_attr(t, attr)
            if at is not None:
                if at.required or ("a", target.key, attr) in caps:
                    return ok(at.type)
                what, guard = self.access_description(target, t, attr)
                self.err(
                    "unsafe_optional_attribute",
                    e.span,
                    f"attribute {what} is optional and may be absent: test for it first, "
                    f"as in `{guard} && ...`",
                )
                return fail(at.type)
            what, _ = self.access_description(target, t, attr)
            msg = f"attribute {what} not found"
            hint = closest(attr, self.known_attrs(t))
            may = self.may_have_attr(t, attr)
            if hint is not None:
                msg += f"; did you mean `{hint}`?"
            if may:
                msg += " (the type may have attributes the validator cannot see)"
            self.err("attribute_not_found", e.span, msg)
            return fail(None)

        return then(self.expect(caps, target, (ANY_ENTITY, ANY_RECORD)), after)

    def tc_has(self, caps: Caps, e: Node) -> Answer:
        target = e.args[0]
        attr: str = e.data

        def helper(t: Type) -> str | None:
            if type(t) is SetType:
                return "contains"
            return "like" if t == STRING else None

        def after(t: Type | None, _c: Caps) -> Answer:
            if t is None:
                return fail(BOOL)
            at = self.lookup_attr(t, attr)
            cap = ("a", target.key, attr)
            if at is not None:
                known = cap in caps or (at.required and type(t) is RecordType)
                return ok(TRUE if known else BOOL, frozenset((cap,)))
            return ok(BOOL if self.may_have_attr(t, attr) else FALSE)

        return then(self.expect_help(caps, target, (ANY_ENTITY, ANY_RECORD), helper), after)

    def tc_is(self, caps: Caps, e: Node) -> Answer:
        ety: str = e.data

        def after(t: Type | None, _c: Caps) -> Answer:
            if type(t) is EntityType:
                if t.names is None:
                    return ok(BOOL)
                if ety not in t.names:
                    return ok(FALSE)
                return ok(TRUE if t.single == ety else BOOL)
            return fail(BOOL)

        return then(self.expect(caps, e.args[0], (ANY_ENTITY,), "type_test"), after)

    def tc_set(self, caps: Caps, e: Node) -> Answer:
        answers = [self.tc(caps, x) for x in e.args]

        def after(tys: list[Type | None]) -> Answer:
            elem = self.lub_or_error(e, tys, "set")
            if not e.args:
                self.err(
                    "empty_set",
                    e.span,
                    "empty set literals are not allowed: the type of their elements is unknown",
                )
                return fail(None)
            if elem is None:
                return fail(None)
            return ok(SetType(elem))

        return sequence(answers, after)

    def tc_record(self, caps: Caps, e: Node) -> Answer:
        answers = [self.tc(caps, x) for x in e.args]
        keys: tuple[str, ...] = e.data

        def after(tys: list[Type | None]) -> Answer:
            if any(t is None for t in tys):
                return fail(None)
            return ok(
                RecordType(
                    {k: AttrType(t) for k, t in zip(keys, tys, strict=True) if t is not None}
                )
            )

        return sequence(answers, after)

    def tc_eq(self, caps: Caps, e: Node) -> Answer:
        left, right = e.args
        la = self.tc(caps, left)
        ra = self.tc(caps, right)

        def after(lt: Type | None, rt: Type | None) -> Answer:
            if lt is not None and rt is not None and T.are_disjoint(lt, rt):
                ty: Type = FALSE
            else:
                ll, rl = self.as_literal(left), self.as_literal(right)
                ty = T.singleton(ll == rl) if ll is not None and rl is not None else BOOL
            return self.strict_equality(e, ty, lt, rt, "eq")

        return then(la, lambda lt, _: then(ra, lambda rt, _: after(lt, rt)))

    def tc_compare(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args

        def expected_msg(node: Node, expected: tuple[Type, ...], actual: Type) -> None:
            self.err(
                "unexpected_type",
                node.span,
                f"expected {_describe_expected(expected)} but found {actual.display()}; "
                "`<`, `<=`, `>` and `>=` compare two values of the same type, one of Long, "
                "datetime or duration",
            )

        def after(t1: Type | None, t2: Type | None) -> Answer:
            if t1 is None or t2 is None:
                return fail(BOOL)
            if t1 == NEVER and t2 == NEVER:
                return fail(BOOL)
            if t1 == NEVER or t2 == NEVER:
                other, node = (t2, a2) if t1 == NEVER else (t1, a1)
                if other in COMPARABLE:
                    return ok(BOOL)
                expected_msg(node, COMPARABLE, other)
                return fail(BOOL)
            if t1 == t2 and t1 in COMPARABLE:
                return ok(BOOL)
            if t1 == LONG:
                expected_msg(a2, (LONG,), t2)
            elif t2 == LONG:
                expected_msg(a1, (LONG,), t1)
            elif t1 in COMPARABLE:
                expected_msg(a2, (t1,), t2)
            elif t2 in COMPARABLE:
                expected_msg(a1, (t2,), t1)
            else:
                expected_msg(a1, COMPARABLE, t1)
                expected_msg(a2, COMPARABLE, t2)
            return fail(BOOL)

        return then(
            self.tc(caps, a1),
            lambda t1, _: then(self.tc(caps, a2), lambda t2, _: after(t1, t2)),
        )

    def tc_arith(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args
        is_add = e.kind == "add"

        def helper(t: Type) -> str | None:
            if is_add and t == STRING:
                return "concat"
            return "set_ops" if type(t) is SetType else None

        # both operands typed in order, directly (fewer frames per level of a nested sum)
        left = self.expect_help(caps, a1, (LONG,), helper)
        right = self.expect_help(caps, a2, (LONG,), helper)
        return ok(LONG) if left.ok and right.ok else Answer(False, LONG)

    def tc_in(self, caps: Caps, e: Node) -> Answer:
        lhs, rhs = e.args

        def rhs_helper(t: Type) -> str | None:
            if type(t) is SetType:
                return "contains"
            return "like" if t == STRING else None

        la = self.expect_help(caps, lhs, (ANY_ENTITY,), lambda _t: "contains")
        ra = self.expect_help(caps, rhs, (SetType(ANY_ENTITY), ANY_ENTITY), rhs_helper)

        def after(lt: Type | None, rt: Type | None) -> Answer:
            if not la.ok or not ra.ok:
                return fail(BOOL)
            lhs_uid = self.action_as_literal(lhs)
            rhs_uids = self._uids_of(rhs)
            if lhs_uid is not None and rhs_uids is not None and is_action_type(lhs_uid.type):
                rhs_actions = [u for u in rhs_uids if is_action_type(u.type)]
                if not rhs_actions:
                    return ok(FALSE)
                within = self.index.actions_in_set(rhs_actions)
                if within is None:
                    return fail(BOOL)
                return ok(T.singleton(lhs_uid in within))
            lhs_names = lt.names if type(lt) is EntityType else None
            rhs_names: frozenset[str] | None = None
            if type(rt) is EntityType:
                rhs_names = rt.names
            elif type(rt) is SetType and type(rt.element) is EntityType:
                rhs_names = rt.element.names
            if (
                lhs_names is not None
                and rhs_names is not None
                and not self._any_descendant(lhs_names, rhs_names)
            ):
                return ok(FALSE)
            return ok(BOOL)

        return then(la, lambda lt, _: then(ra, lambda rt, _: after(lt, rt)))

    def _uids_of(self, e: Node) -> list[EntityUID] | None:
        one = self.action_as_literal(e)
        if one is not None:
            return [one]
        if e.kind == "set":
            out = []
            for x in e.args:
                u = self.action_as_literal(x)
                if u is None:
                    return None
                out.append(u)
            return out
        return None

    def _any_descendant(self, lhs: frozenset[str], rhs: frozenset[str]) -> bool:
        for r in rhs:
            within = self.index.entity_types_in(r)
            for lt in lhs:
                if lt in within or self._action_in_type(lt, r):
                    return True
        return False

    def _action_in_type(self, lhs: str, rhs: str) -> bool:
        if lhs == rhs:
            return True
        return any(
            a.uid.type == rhs and any(d.type == lhs for d in a.descendants)
            for a in self.index.actions.values()
        )

    def tc_contains(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args

        def after(t1: Type | None, t2: Type | None) -> Answer:
            elem = t1.element if type(t1) is SetType else None
            return self.strict_equality(e, BOOL, elem, t2, "contains")

        recv = self.expect_help(caps, a1, (ANY_SET,), _set_method_hint)
        arg = self.tc(caps, a2)
        return then(recv, lambda t1, _: then(arg, lambda t2, _: after(t1, t2)))

    def tc_contains_all_any(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args

        return then(
            self.expect_help(caps, a1, (ANY_SET,), _set_method_hint),
            lambda t1, _: then(
                self.expect_help(caps, a2, (ANY_SET,), lambda _t: "single_contains"),
                lambda t2, _: self.strict_equality(e, BOOL, t1, t2, "containsAnyAll"),
            ),
        )

    def tc_has_tag(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args

        def after(t1: Type | None) -> Answer:
            if type(t1) is not EntityType:
                return fail(None)
            cap = ("t", a1.key, a2.key)
            if not self.tag_types(t1):
                ty: Type = FALSE  # no entity of these types can have tags at all
            else:
                ty = TRUE if cap in caps else BOOL
            return ok(ty, frozenset((cap,)))

        return then(
            self.expect(caps, a1, (ANY_ENTITY,)),
            lambda t1, _: then(self.expect(caps, a2, (STRING,)), lambda _t2, _c: after(t1)),
        )

    def tc_get_tag(self, caps: Caps, e: Node) -> Answer:
        a1, a2 = e.args

        def after(t1: Type | None) -> Answer:
            if type(t1) is not EntityType:
                return fail(None)
            if ("t", a1.key, a2.key) in caps:
                tys = self.tag_types(t1)
                if not tys:
                    who = f"type `{t1.single}`" if t1.single else "this type"
                    self.err(
                        "no_tags_allowed",
                        e.span,
                        f"`.getTag()` is not allowed on entities of {who}: the schema declares "
                        "no `tags` for it",
                    )
                    return fail(None)
                try:
                    return ok(T.lub_all(tys))
                except LubError as exc:
                    self.incompatible(e, tys, "getTag", exc.hint)
                    return fail(None)
            tag = _render(a2) or "tag"
            on = f" on entity type `{t1.single}`" if t1.single else ""
            self.err(
                "unsafe_tag_access",
                e.span,
                f"unable to guarantee that tag {tag} exists{on}: test for it first, as in "
                f"`{_render(a1) or 'e'}.hasTag({tag}) && ...`",
            )
            return fail(None)

        return then(
            self.expect(caps, a1, (ANY_ENTITY,)),
            lambda t1, _: then(self.expect(caps, a2, (STRING,)), lambda _t2, _c: after(t1)),
        )

    def tc_call(self, caps: Caps, e: Node) -> Answer:
        name: str = e.data
        args = e.args
        f = EXT_FUNCTIONS.get(name)
        if f is None:
            if name in BUILTIN_METHODS:
                want = BUILTIN_METHODS[name]
                self.err(
                    "wrong_argument_count",
                    e.span,
                    f"`.{name}()` takes {_count(want)} besides its receiver, got {len(args) - 1}",
                )
            else:
                hint = closest(name, EXT_FUNCTIONS)
                self.err(
                    "undefined_function",
                    e.span,
                    f"unknown extension function `{name}`"
                    + (f"; did you mean `{hint}`?" if hint else ""),
                )
            for a in args:
                self.tc(caps, a)
            return fail(None)
        failed = False
        if len(args) != len(f.args):
            self.err("wrong_argument_count", e.span, f.arity_message(len(args)))
            failed = True
        if f.literal_kind is not None:
            if len(args) == 1 and args[0].kind == "lit" and type(args[0].data) is str:
                reason = self.literal_check(f.literal_kind, args[0].data)
                if reason is not None:
                    self.err(
                        "extension_argument",
                        e.span,
                        f"{name}({quote_string(args[0].data)}) is not a valid {f.literal_kind} "
                        f"value: {reason}",
                    )
                    failed = True
            if not all(a.kind in ("lit", "euid") for a in args):
                self.err(
                    "non_literal_extension_argument",
                    e.span,
                    f"the argument of the extension constructor `{name}` must be a string "
                    "literal (strict validation checks it before any request is made)",
                )
                failed = True
        if failed:
            for a in args:
                self.tc(caps, a)
            return fail(f.ret)
        answers = [self.expect(caps, a, (t,)) for a, t in zip(args, f.args, strict=True)]
        return sequence(answers, lambda _tys: ok(f.ret))


def _negate(t: Type | None, _c: Caps) -> Answer:
    if t is None:
        return fail(BOOL)
    return ok(FALSE if t == TRUE else TRUE if t == FALSE else BOOL)


def _bool(_t: Type | None, _c: Caps) -> Answer:
    return ok(BOOL)


def _render(e: Node) -> str | None:
    """Policy text for simple expressions (variables, attribute chains, literals)."""
    if e.kind == "var":
        return str(e.data)
    if e.kind == "lit":
        v = e.data
        if v is True or v is False:
            return "true" if v else "false"
        return quote_string(v) if type(v) is str else str(v)
    if e.kind == "euid":
        return str(e.data)
    if e.kind == "get":
        base = _render(e.args[0])
        if base is None:
            return None
        a: str = e.data
        return f"{base}.{a}" if a.isidentifier() and a.isascii() else f"{base}[{quote_string(a)}]"
    return None


# ---------------------------------------------------------------- one policy


class PolicyResult(Record):
    __slots__ = ("impossible", "issues")
    _frozen: ClassVar[bool] = False
    issues: list[Issue]
    impossible: bool

    def __init__(self, issues: list[Issue], impossible: bool) -> None:
        self.issues = issues
        self.impossible = impossible


def link_envs(index: SchemaIndex, policy: ast.Policy, env: Env) -> Iterator[Env]:
    """The environments of a template: each slot takes every entity type it could hold."""

    def options(slot: str, var_type: str, c: ast.ScopeConstraint) -> list[str | None]:
        if slot not in policy.slots:
            return [None]
        if c.kind == "eq":
            return [var_type]
        if c.kind in ("in", "is_in"):
            out: list[str | None] = [
                n for n, info in index.entities.items() if var_type in info.descendants
            ]
            return [*out, var_type]
        return list(index.entities)

    for ps in options("?principal", env.principal, policy.principal):
        for rs in options("?resource", env.resource, policy.resource):
            yield Env(env.principal, env.action, env.resource, env.context, ps, rs)


def check_policy(
    index: SchemaIndex, policy: ast.Policy, literal_check: LiteralChecker
) -> PolicyResult:
    """Every check of the strict validator on one policy or template.

    The checker recurses over the expression, a few frames per level; the parser bounds
    the nesting (``MAX_EXPRESSION_DEPTH``) so that it fits in Python's default recursion
    limit. A tree built some other way and nested deeper is reported, never a crash (and
    the interpreter's recursion limit is never changed).
    """
    try:
        return _check_policy(index, policy, literal_check)
    except RecursionError:
        span = policy.span if policy.span is not None else NO_SPAN
        msg = "the policy is too deeply nested to validate (MAX_EXPRESSION_DEPTH)"
        return PolicyResult([Issue("too_deep", msg, span)], False)


def _check_policy(
    index: SchemaIndex, policy: ast.Policy, literal_check: LiteralChecker
) -> PolicyResult:
    issues: list[Issue] = []
    cond = Lowering().condition(policy)
    # cond is `principal_part && (action_part && (resource_part && body))`
    p_part, rest = cond.args
    a_part, rest = rest.args
    r_part, body = rest.args
    issues.extend(_check_names(index, policy, body))
    app = _check_application(index, policy)
    if app is not None:
        issues.append(app)

    seen: set[Issue] = set()

    def report(found: list[Issue]) -> None:
        for i in found:
            if i not in seen:
                seen.add(i)
                issues.append(i)

    # Each scope part is typed by one component of the environment alone (and never uses
    # capabilities), so its answer is computed once per principal type, action or
    # resource type. When a part is `false`, `&&` never looks further: the environment
    # is impossible and the body is not typed there, exactly as the full expression gives.
    memo: dict[tuple[int, object], tuple[Answer, list[Issue]]] = {}

    def part(node: Node, key: object, env: Env) -> Answer:
        k = (node.key, key)
        got = memo.get(k)
        if got is None:
            found: list[Issue] = []
            ans = EnvChecker(index, env, found, literal_check).expect(EMPTY, node, ONLY_BOOL)
            got = memo[k] = (ans, found)
        report(got[1])
        return got[0]

    all_false = True
    for base in index.envs:
        for env in link_envs(index, policy, base) if policy.slots else (base,):
            if part(p_part, (env.principal, env.principal_slot), env).ty == FALSE:
                continue
            if part(a_part, env.action, env).ty == FALSE:
                continue
            if part(r_part, (env.resource, env.resource_slot), env).ty == FALSE:
                continue
            env_issues: list[Issue] = []
            ans = EnvChecker(index, env, env_issues, literal_check).expect(EMPTY, cond, ONLY_BOOL)
            if ans.ty != FALSE:
                all_false = False
            report(env_issues)
    return PolicyResult(issues, all_false)


def _scope_names(c: ast.ScopeConstraint) -> list[str]:
    out = []
    if c.entity_type is not None:
        out.append(c.entity_type)
    if isinstance(c.entity, EntityUID):
        out.append(c.entity.type)
    return out


def _check_names(index: SchemaIndex, policy: ast.Policy, body: Node) -> list[Issue]:
    """Unknown entity types and actions, and ids outside an enumerated type."""
    type_refs: list[tuple[str, Span]] = []
    uid_refs: list[tuple[EntityUID, Span]] = []
    for c in (policy.principal, policy.resource):
        for n in _scope_names(c):
            type_refs.append((n, c.span))
        if isinstance(c.entity, EntityUID):
            uid_refs.append((c.entity, c.span))
    for uid in policy.action.entities:
        type_refs.append((uid.type, policy.action.span))
        uid_refs.append((uid, policy.action.span))
    for node in walk(body):
        if node.kind == "euid":
            type_refs.append((node.data.type, node.span))
            uid_refs.append((node.data, node.span))
        elif node.kind == "is":
            type_refs.append((node.data, node.span))

    issues: list[Issue] = []
    for name, span in type_refs:
        if not index.is_known_entity_type(name):
            hint = closest(name, index.entities)
            issues.append(
                Issue(
                    "unrecognized_entity_type",
                    f"unknown entity type `{name}`"
                    + (f"; did you mean `{hint}`?" if hint else ": the schema does not declare it"),
                    span,
                )
            )
    for uid, span in uid_refs:
        if is_action_type(uid.type):
            if uid not in index.actions:
                issues.append(
                    Issue("unrecognized_action", _unknown_action_message(index, uid), span)
                )
            continue
        info = index.entities.get(uid.type)
        if info is not None and info.enum is not None and uid.id not in info.enum:
            allowed = ", ".join(quote_string(x) for x in info.enum)
            issues.append(
                Issue(
                    "invalid_enum_entity",
                    f"`{uid}` is not a value of the enumerated entity type `{uid.type}` "
                    f"(allowed ids: {allowed})",
                    span,
                )
            )
    return issues


def _unknown_action_message(index: SchemaIndex, uid: EntityUID) -> str:
    msg = f"unknown action `{uid}`"
    for a in index.actions:
        if f"Action::{uid.id}" in a.id or f'Action::"{uid.id}"' in a.id:
            return msg + f"; did you mean `{a}` (the id should not repeat the type)?"
    hint = closest(uid.id, [a.id for a in index.actions if a.type == uid.type])
    if hint is not None:
        return msg + f"; did you mean `{EntityUID(uid.type, hint)}`?"
    return msg + " (the schema does not declare it)"


def _scope_types(index: SchemaIndex, c: ast.ScopeConstraint) -> set[str]:
    """The entity types a principal/resource scope constraint admits."""
    if c.kind == "any":
        return set(index.entities)
    if c.kind in ("eq", "in") and isinstance(c.entity, ast.Slot):
        return set(index.entities)
    if c.kind == "eq" and isinstance(c.entity, EntityUID):
        return {c.entity.type}
    if c.kind == "in" and isinstance(c.entity, EntityUID):
        return index.entity_types_in(c.entity.type)
    if c.entity_type is None:
        return set()
    if c.kind == "is" or (c.kind == "is_in" and isinstance(c.entity, ast.Slot)):
        return {c.entity_type} if index.is_known_entity_type(c.entity_type) else set()
    if c.kind == "is_in" and isinstance(c.entity, EntityUID):
        within = index.entity_types_in(c.entity.type)
        return {c.entity_type} & within
    return set()


def _scope_actions(index: SchemaIndex, c: ast.ActionConstraint) -> list[ActionInfo]:
    if c.kind == "any":
        return list(index.actions.values())
    if c.kind == "eq":
        info = index.actions.get(c.entities[0])
        return [info] if info is not None else []
    within = index.actions_in_set(c.entities)
    return [index.actions[u] for u in within] if within is not None else []


def _check_application(index: SchemaIndex, policy: ast.Policy) -> Issue | None:
    """Is there one action whose ``appliesTo`` meets the scope's principal and resource?"""
    actions = _scope_actions(index, policy.action)
    principals = _scope_types(index, policy.principal)
    resources = _scope_types(index, policy.resource)
    for a in actions:
        if principals.intersection(a.principals) and resources.intersection(a.resources):
            return None
    fixes = []
    for c, side in ((policy.principal, "principal"), (policy.resource, "resource")):
        if _in_would_fix(index, c, actions, side):
            fixes.append(side)
    msg = (
        "no action in the schema applies to the principal and resource types this policy's "
        "scope allows, so the policy can never apply"
    )
    if fixes:
        msg += "; try replacing `==` with `in` in the " + " and the ".join(
            f"{s} clause" for s in fixes
        )
    return Issue("invalid_action_application", msg, policy.span)


def _in_would_fix(
    index: SchemaIndex, c: ast.ScopeConstraint, actions: list[ActionInfo], side: str
) -> bool:
    if c.kind != "eq" or not isinstance(c.entity, EntityUID):
        return False
    ety = c.entity.type
    allowed = [a.principals if side == "principal" else a.resources for a in actions]
    if any(ety in types for types in allowed):
        return False
    info = index.entities.get(ety)
    if info is None:
        return False
    return any(t in info.descendants for types in allowed for t in types)
