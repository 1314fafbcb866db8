"""Hypothesis strategies for whole authorization scenarios: schema, policies, entities, requests.

Everything is generated as *text and JSON* (human schema, policy source, entity JSON,
request dicts), so the same scenario can be handed to polang and to another engine
(``cedarpy``) through their ordinary front doors. The inputs are valid and
schema-consistent: the schema parses, every entity and request conforms to it, and every
policy parses. Policies are *not* required to type-check: conditions mostly follow the
schema's types, but they also read optional attributes without a guard, follow entity
references to entities that are not in the store, call ``getTag`` on absent tags, overflow
Long arithmetic, feed malformed strings to extension constructors and (rarely) mix types,
so evaluation errors occur often enough to compare the error lists too.

Entry points: :func:`scenarios` (all of it), and the pieces :func:`schemas`,
:func:`policy_sets`, :func:`entity_lists`, :func:`request_lists` for other tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# ---------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Prim:
    name: str  # "Long" | "String" | "Bool"


@dataclass(frozen=True)
class SetT:
    elem: Ty


@dataclass(frozen=True)
class Field:
    name: str
    ty: Ty
    required: bool


@dataclass(frozen=True)
class RecT:
    fields: tuple[Field, ...] = ()

    def get(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class EntT:
    name: str


@dataclass(frozen=True)
class ExtT:
    name: str  # "decimal" | "ipaddr" | "datetime" | "duration"


Ty = Prim | SetT | RecT | EntT | ExtT

LONG = Prim("Long")
STRING = Prim("String")
BOOL = Prim("Bool")
EXT_NAMES = ("decimal", "ipaddr", "datetime", "duration")
ACTION_TYPE = "Action"


def type_text(t: Ty) -> str:
    """The human schema syntax of a type."""
    if isinstance(t, Prim):
        return t.name
    if isinstance(t, SetT):
        return f"Set<{type_text(t.elem)}>"
    if isinstance(t, RecT):
        inner = ", ".join(
            f"{f.name}{'' if f.required else '?'}: {type_text(f.ty)}" for f in t.fields
        )
        return "{" + inner + "}"
    if isinstance(t, EntT):
        return t.name
    return t.name


# ---------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class EntityTypeSpec:
    name: str
    attrs: RecT
    member_of: tuple[str, ...]
    tags: Ty | None


@dataclass(frozen=True)
class ActionSpec:
    name: str
    principals: tuple[str, ...]
    resources: tuple[str, ...]
    member_of: tuple[str, ...]


@dataclass(frozen=True)
class SchemaSpec:
    entity_types: tuple[EntityTypeSpec, ...]
    actions: tuple[ActionSpec, ...]
    groups: tuple[str, ...]
    context: RecT
    ids: tuple[str, ...] = ("a", "b", "c")

    def etype(self, name: str) -> EntityTypeSpec | None:
        for e in self.entity_types:
            if e.name == name:
                return e
        return None

    @property
    def type_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entity_types)

    def action(self, name: str) -> ActionSpec:
        for a in self.actions:
            if a.name == name:
                return a
        raise LookupError(name)

    def text(self) -> str:
        """The schema in the human-readable form (both engines read it)."""
        out: list[str] = []
        for e in self.entity_types:
            head = f"entity {e.name}"
            if e.member_of:
                head += " in [" + ", ".join(e.member_of) + "]"
            head += " " + type_text(e.attrs)
            if e.tags is not None:
                head += f" tags {type_text(e.tags)}"
            out.append(head + ";")
        for g in self.groups:
            out.append(f"action {quote(g)};")
        ctx = type_text(self.context)
        for a in self.actions:
            line = f"action {quote(a.name)}"
            if a.member_of:
                line += " in [" + ", ".join(quote(g) for g in a.member_of) + "]"
            line += (
                " appliesTo { principal: ["
                + ", ".join(a.principals)
                + "], resource: ["
                + ", ".join(a.resources)
                + f"], context: {ctx} }};"
            )
            out.append(line)
        return "\n".join(out) + "\n"


TYPE_NAMES = ("User", "Group", "Doc", "Folder", "Team")
ATTR_NAMES = ("age", "name", "level", "owner", "info", "flag", "addr", "amount", "when", "dur")
FIELD_NAMES = ("x", "y", "z")
CTX_NAMES = ("n", "s", "ok", "ip", "at", "who", "meta")
ACTION_NAMES = ("read", "write", "delete")
GROUP_NAMES = ("all", "edit")


def quote(s: str) -> str:
    """A string literal of the language (only ``\\`` and ``"`` need escaping here)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def draw_type(draw: st.DrawFn, type_names: Sequence[str], depth: int) -> Ty:
    """A type: primitives, extensions, entities, and (above depth 0) sets and records."""
    k = draw(st.integers(0, 4 if depth > 0 else 2))
    if k == 0:
        return draw(st.sampled_from((LONG, STRING, BOOL)))
    if k == 1:
        return ExtT(draw(st.sampled_from(EXT_NAMES)))
    if k == 2:
        return EntT(draw(st.sampled_from(type_names))) if type_names else LONG
    if k == 3:
        return SetT(draw_type(draw, type_names, depth - 1))
    return draw_record_type(draw, type_names, depth - 1, FIELD_NAMES)


def draw_record_type(
    draw: st.DrawFn,
    type_names: Sequence[str],
    depth: int,
    names: Sequence[str],
    max_size: int = 3,
) -> RecT:
    chosen = draw(st.lists(st.sampled_from(names), max_size=max_size, unique=True))
    return RecT(
        tuple(Field(n, draw_type(draw, type_names, depth), draw(st.booleans())) for n in chosen)
    )


def draw_schema(draw: st.DrawFn) -> SchemaSpec:
    """A small schema: 2-4 entity types (attributes of every kind, hierarchies, tags),
    1-3 actions with action groups, one context type."""
    names = draw(st.lists(st.sampled_from(TYPE_NAMES), min_size=2, max_size=4, unique=True))
    etypes: list[EntityTypeSpec] = []
    for n in names:
        attrs = draw_record_type(draw, names, 1, ATTR_NAMES, max_size=4)
        member_of = tuple(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)))
        tags = draw(st.sampled_from((None, None, STRING, LONG, SetT(STRING))))
        etypes.append(EntityTypeSpec(n, attrs, member_of, tags))
    context = draw_record_type(draw, names, 1, CTX_NAMES)
    groups = tuple(draw(st.lists(st.sampled_from(GROUP_NAMES), max_size=2, unique=True)))
    action_names = draw(
        st.lists(st.sampled_from(ACTION_NAMES), min_size=1, max_size=3, unique=True)
    )
    some_types = st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)
    actions = []
    for a in action_names:
        principals = tuple(draw(some_types))
        resources = tuple(draw(some_types))
        member_of = (
            tuple(draw(st.lists(st.sampled_from(groups), max_size=2, unique=True)))
            if groups
            else ()
        )
        actions.append(ActionSpec(a, principals, resources, member_of))
    return SchemaSpec(tuple(etypes), tuple(actions), groups, context)


@st.composite
def schemas(draw: st.DrawFn) -> SchemaSpec:
    """Schemas (see :func:`draw_schema`)."""
    return draw_schema(draw)


# ---------------------------------------------------------------------------- values

STRINGS = ("", "a", "ab", "abc", "b", "ba", "A", "a*b", "x y", 'q"t', "back\\slash", "é")
TAG_KEYS = ("k1", "k2", "k3")
SMALL_LONGS = st.integers(-4, 6)
BIG_LONGS = st.sampled_from([2**63 - 1, -(2**63), 2**62, -(2**62), 3037000500, 4294967296])
DECIMALS_OK = ("0.0", "1.0", "1.5", "-2.25", "0.0001", "12.3400", "922337203685477.5807")
DECIMALS_BAD = ("1.23456", "abc", "1", "922337203685477.5808")
IPS_OK = (
    "10.0.0.1",
    "10.0.0.0/8",
    "127.0.0.1",
    "192.168.1.7/24",
    "224.0.0.1",
    "::1",
    "ff00::/8",
    "2001:db8::1",
)
IPS_BAD = ("1.2.3", "10.0.0.1/33", "::g")
DATETIMES_OK = (
    "1970-01-01",
    "2024-02-29",
    "2024-01-01T12:00:00Z",
    "2024-01-01T12:00:00.250Z",
    "2024-01-01T12:00:00+0130",
    "2023-12-31T23:59:59-0800",
)
DATETIMES_BAD = ("2024-13-01", "2023-02-29", "2024-01-01T25:00:00Z", "yesterday")
DURATIONS_OK = ("0ms", "1ms", "1h", "90m", "-2d3h", "1d2h3m4s5ms", "-1s")
DURATIONS_BAD = ("1x", "", "h1", "9223372036854775807d")
EXT_CTOR = {"decimal": "decimal", "ipaddr": "ip", "datetime": "datetime", "duration": "duration"}
EXT_OK = {
    "decimal": DECIMALS_OK,
    "ipaddr": IPS_OK,
    "datetime": DATETIMES_OK,
    "duration": DURATIONS_OK,
}
EXT_BAD = {
    "decimal": DECIMALS_BAD,
    "ipaddr": IPS_BAD,
    "datetime": DATETIMES_BAD,
    "duration": DURATIONS_BAD,
}


def uid_json(type_name: str, id_: str) -> dict[str, str]:
    return {"type": type_name, "id": id_}


def draw_json_value(draw: st.DrawFn, schema: SchemaSpec, t: Ty) -> Any:
    """A JSON value (entity/context form) of type ``t``, with explicit escapes."""
    if t == LONG:
        return draw(SMALL_LONGS) if draw(st.integers(0, 5)) else draw(BIG_LONGS)
    if t == STRING:
        return draw(st.sampled_from(STRINGS))
    if t == BOOL:
        return draw(st.booleans())
    if isinstance(t, ExtT):
        return {"__extn": {"fn": EXT_CTOR[t.name], "arg": draw(st.sampled_from(EXT_OK[t.name]))}}
    if isinstance(t, EntT):
        return {"__entity": uid_json(t.name, draw(st.sampled_from(schema.ids)))}
    if isinstance(t, SetT):
        return [draw_json_value(draw, schema, t.elem) for _ in range(draw(st.integers(0, 3)))]
    assert isinstance(t, RecT)
    return draw_json_record(draw, schema, t)


def draw_json_record(draw: st.DrawFn, schema: SchemaSpec, t: RecT) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in t.fields:
        if f.required or draw(st.booleans()):
            out[f.name] = draw_json_value(draw, schema, f.ty)
    return out


# ---------------------------------------------------------------------------- entities


def draw_entities(draw: st.DrawFn, schema: SchemaSpec) -> list[dict[str, Any]]:
    """Entities conforming to the schema. Parents only point to entities created earlier,
    so the hierarchy is acyclic; some uids of the id pool are left out of the store, so
    references to them dangle."""
    uids = [(t, i) for t in schema.type_names for i in schema.ids]
    present = [u for u in uids if draw(st.integers(0, 4)) > 0]
    order = draw(st.permutations(present))
    out: list[dict[str, Any]] = []
    made: list[tuple[str, str]] = []
    for t, i in order:
        spec = schema.etype(t)
        assert spec is not None
        candidates = [u for u in made if u[0] in spec.member_of]
        parents = (
            draw(st.lists(st.sampled_from(candidates), max_size=2, unique=True))
            if candidates
            else []
        )
        ent: dict[str, Any] = {
            "uid": uid_json(t, i),
            "attrs": draw_json_record(draw, schema, spec.attrs),
            "parents": [uid_json(pt, pi) for pt, pi in parents],
        }
        if spec.tags is not None:
            keys = draw(st.lists(st.sampled_from(TAG_KEYS), max_size=2, unique=True))
            ent["tags"] = {k: draw_json_value(draw, schema, spec.tags) for k in keys}
        out.append(ent)
        made.append((t, i))
    return out


@st.composite
def entity_lists(draw: st.DrawFn, schema: SchemaSpec) -> list[dict[str, Any]]:
    """Entity JSON lists for ``schema`` (see :func:`draw_entities`)."""
    return draw_entities(draw, schema)


# ---------------------------------------------------------------------------- requests


def draw_request(draw: st.DrawFn, schema: SchemaSpec) -> dict[str, Any]:
    """One request valid for the schema (its principal need not exist in the store)."""
    a = draw(st.sampled_from(schema.actions))
    p = uid_json(draw(st.sampled_from(a.principals)), draw(st.sampled_from(schema.ids)))
    r = uid_json(draw(st.sampled_from(a.resources)), draw(st.sampled_from(schema.ids)))
    return {
        "principal": p,
        "action": uid_json(ACTION_TYPE, a.name),
        "resource": r,
        "context": draw_json_record(draw, schema, schema.context),
    }


@st.composite
def request_lists(
    draw: st.DrawFn, schema: SchemaSpec, min_size: int = 1, max_size: int = 6
) -> list[dict[str, Any]]:
    return [draw_request(draw, schema) for _ in range(draw(st.integers(min_size, max_size)))]


# ---------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class _Path:
    """An attribute access chain: its text, its type, and (for ``has``) base and last name."""

    text: str
    ty: Ty
    base: str | None = None
    attr: str | None = None
    optional: bool = False


@dataclass
class _ExprGen:
    """Typed expression text over one schema, from the point of view of one action.

    ``principal``/``resource`` are assumed to have the given types (requests for other
    actions or scopes may disagree: then attribute reads error, as in real stores).
    """

    draw: st.DrawFn
    schema: SchemaSpec
    principal: str
    resource: str
    paths: list[_Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        roots = [
            _Path("principal", EntT(self.principal)),
            _Path("resource", EntT(self.resource)),
            _Path("context", self.schema.context),
        ]
        for t in self.schema.type_names:
            roots.append(_Path(f"{t}::{quote(self.schema.ids[0])}", EntT(t)))
        frontier = roots
        self.paths = list(roots)
        for _ in range(2):
            nxt: list[_Path] = []
            for p in frontier:
                for f in self._fields(p.ty):
                    name = f.name
                    access = f"{p.text}.{name}"
                    nxt.append(_Path(access, f.ty, p.text, name, not f.required))
            self.paths.extend(nxt)
            frontier = nxt

    def _fields(self, t: Ty) -> tuple[Field, ...]:
        if isinstance(t, RecT):
            return t.fields
        if isinstance(t, EntT):
            spec = self.schema.etype(t.name)
            return spec.attrs.fields if spec else ()
        return ()

    # -- helpers --------------------------------------------------------------------

    def pick(self, options: Sequence[Callable[[], str]]) -> str:
        return options[self.draw(st.integers(0, len(options) - 1))]()

    def of_type(self, t: Ty) -> list[_Path]:
        return [p for p in self.paths if p.ty == t]

    def any_type(self) -> Ty:
        base: list[Ty] = [LONG, STRING, BOOL, SetT(LONG), SetT(STRING)]
        base += [EntT(n) for n in self.schema.type_names]
        base += [ExtT(n) for n in EXT_NAMES]
        base += list({p.ty for p in self.paths if isinstance(p.ty, SetT | RecT)})
        return self.draw(st.sampled_from(base))

    # -- literals ---------------------------------------------------------------------

    def literal(self, t: Ty, depth: int) -> str:
        d = self.draw
        if t == LONG:
            return str(d(SMALL_LONGS) if d(st.integers(0, 4)) else d(BIG_LONGS))
        if t == STRING:
            return quote(d(st.sampled_from(STRINGS)))
        if t == BOOL:
            return d(st.sampled_from(["true", "false"]))
        if isinstance(t, ExtT):
            arg = d(st.sampled_from(EXT_OK[t.name] + EXT_BAD[t.name][:1]))
            return f"{EXT_CTOR[t.name]}({quote(arg)})"
        if isinstance(t, EntT):
            return f"{t.name}::{quote(d(st.sampled_from(self.schema.ids)))}"
        if isinstance(t, SetT):
            n = d(st.integers(0, 3))
            return "[" + ", ".join(self.expr(t.elem, depth - 1) for _ in range(n)) + "]"
        assert isinstance(t, RecT)
        parts = []
        for f in t.fields:
            if f.required or d(st.booleans()):
                key = f.name if d(st.booleans()) else quote(f.name)
                parts.append(f"{key}: {self.expr(f.ty, depth - 1)}")
        return "{" + ", ".join(parts) + "}"

    # -- expressions ------------------------------------------------------------------

    def expr(self, t: Ty, depth: int) -> str:
        """An expression meant to have type ``t`` (rarely, on purpose, another type)."""
        d = self.draw
        if depth > 0 and d(st.integers(0, 40)) == 0:
            t = self.any_type()  # a type mistake: evaluation errors (or ``==`` is false)
        opts: list[Callable[[], str]] = [lambda: self.literal(t, depth)]
        paths = self.of_type(t)
        if paths:
            opts.append(lambda: self.path_text(d(st.sampled_from(paths))))
        if depth > 0:
            opts.append(lambda: self.if_then_else(t, depth))
            if (isinstance(t, Prim) and t.name in ("Long", "String")) or (
                isinstance(t, SetT) and t.elem in (LONG, STRING)
            ):
                opts.append(lambda: self.get_tag(t, depth))
            if t == BOOL:
                opts.extend(self.bool_options(depth))
            elif t == LONG:
                opts.extend(self.long_options(depth))
            elif isinstance(t, ExtT):
                opts.extend(self.ext_options(t.name, depth))
        return self.pick(opts)

    def path_text(self, p: _Path) -> str:
        if p.base is not None and p.attr is not None and self.draw(st.integers(0, 5)) == 0:
            return f"{p.base}[{quote(p.attr)}]"
        return p.text

    def if_then_else(self, t: Ty, depth: int) -> str:
        c = self.expr(BOOL, depth - 1)
        return f"(if {c} then {self.expr(t, depth - 1)} else {self.expr(t, depth - 1)})"

    def get_tag(self, t: Ty, depth: int) -> str:
        ents = [p for p in self.paths if isinstance(p.ty, EntT)]
        e = self.path_text(self.draw(st.sampled_from(ents)))
        return f"{e}.getTag({self.tag_key(depth)})"

    def tag_key(self, depth: int) -> str:
        if depth > 1 and self.draw(st.integers(0, 3)) == 0:
            return self.expr(STRING, depth - 1)
        return quote(self.draw(st.sampled_from(TAG_KEYS)))

    def entity_expr(self, depth: int) -> str:
        ents = [p for p in self.paths if isinstance(p.ty, EntT)]
        return self.pick(
            [
                lambda: self.path_text(self.draw(st.sampled_from(ents))),
                lambda: self.literal(EntT(self.draw(st.sampled_from(self.schema.type_names))), 0),
            ]
        )

    def long_options(self, depth: int) -> list[Callable[[], str]]:
        e = self.expr

        def arith() -> str:
            op = self.draw(st.sampled_from(["+", "-", "*"]))
            return f"({e(LONG, depth - 1)} {op} {e(LONG, depth - 1)})"

        def dur_to() -> str:
            m = self.draw(
                st.sampled_from(["toMilliseconds", "toSeconds", "toMinutes", "toHours", "toDays"])
            )
            return f"{e(ExtT('duration'), depth - 1)}.{m}()"

        return [arith, lambda: f"(-{e(LONG, depth - 1)})", dur_to]

    def ext_options(self, name: str, depth: int) -> list[Callable[[], str]]:
        e = self.expr
        ctor = EXT_CTOR[name]
        opts: list[Callable[[], str]] = [
            # a constructor over a computed string (from data): may be malformed
            lambda: f"{ctor}({e(STRING, depth - 1)})",
            lambda: f"{ctor}({quote(self.draw(st.sampled_from(EXT_BAD[name])))})",
        ]
        if name == "datetime":
            opts.append(
                lambda: f"{e(ExtT('datetime'), depth - 1)}.offset({e(ExtT('duration'), depth - 1)})"
            )
            opts.append(lambda: f"{e(ExtT('datetime'), depth - 1)}.toDate()")
        if name == "duration":
            opts.append(lambda: f"{e(ExtT('datetime'), depth - 1)}.toTime()")
            dt = ExtT("datetime")
            opts.append(lambda: f"{e(dt, depth - 1)}.durationSince({e(dt, depth - 1)})")
        return opts

    def bool_options(self, depth: int) -> list[Callable[[], str]]:
        d = self.draw
        e = self.expr
        sub = depth - 1

        def logic() -> str:
            op = d(st.sampled_from(["&&", "||"]))
            return f"({e(BOOL, sub)} {op} {e(BOOL, sub)})"

        def eq() -> str:
            t = self.any_type()
            op = d(st.sampled_from(["==", "!="]))
            return f"({e(t, sub)} {op} {e(t, sub)})"

        def order() -> str:
            ordered: list[Ty] = [LONG, LONG, LONG, ExtT("datetime"), ExtT("duration")]
            t = d(st.sampled_from(ordered))
            op = d(st.sampled_from(["<", "<=", ">", ">="]))
            return f"({e(t, sub)} {op} {e(t, sub)})"

        def has() -> str:
            holders = [p for p in self.paths if isinstance(p.ty, EntT | RecT)]
            p = d(st.sampled_from(holders))
            names = [f.name for f in self._fields(p.ty)] + ["nope"]
            first = d(st.sampled_from(names))
            attr = first if d(st.integers(0, 3)) else quote(first)
            f = next((x for x in self._fields(p.ty) if x.name == first), None)
            if f is not None and isinstance(f.ty, RecT) and f.ty.fields and d(st.booleans()):
                attr = f"{first}.{d(st.sampled_from([x.name for x in f.ty.fields]))}"
            return f"({self.path_text(p)} has {attr})"

        def guarded() -> str:
            opt = [p for p in self.paths if p.optional]
            if not opt:
                return has()
            p = d(st.sampled_from(opt))
            return f"(({p.base} has {p.attr}) && ({p.text} == {e(p.ty, sub)}))"

        def like() -> str:
            pat = "".join(d(st.lists(st.sampled_from(["a", "b", "*", "\\*", " "]), max_size=4)))
            return f"({e(STRING, sub)} like {quote_pattern(pat)})"

        def is_() -> str:
            t = d(st.sampled_from(self.schema.type_names))
            if d(st.booleans()):
                return f"({self.entity_expr(sub)} is {t} in {self.in_rhs(sub)})"
            return f"({self.entity_expr(sub)} is {t})"

        def in_() -> str:
            return f"({self.entity_expr(sub)} in {self.in_rhs(sub)})"

        def action_test() -> str:
            names = [a.name for a in self.schema.actions] + list(self.schema.groups)
            a = d(st.sampled_from(names))
            op = d(st.sampled_from(["==", "in"]))
            return f"(action {op} {ACTION_TYPE}::{quote(a)})"

        def set_ops() -> str:
            elems: list[Ty] = [LONG, STRING, *[EntT(n) for n in self.schema.type_names]]
            elem = d(st.sampled_from(elems))
            s = e(SetT(elem), sub)
            m = d(st.sampled_from(["contains", "containsAll", "containsAny", "isEmpty"]))
            if m == "contains":
                return f"{s}.contains({e(elem, sub)})"
            if m == "isEmpty":
                return f"{s}.isEmpty()"
            return f"{s}.{m}({e(SetT(elem), sub)})"

        def has_tag() -> str:
            return f"{self.entity_expr(sub)}.hasTag({self.tag_key(depth)})"

        def ext_pred() -> str:
            kind = d(st.sampled_from(["decimal", "ipaddr"]))
            if kind == "decimal":
                m = d(
                    st.sampled_from(
                        ["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"]
                    )
                )
                return f"{e(ExtT('decimal'), sub)}.{m}({e(ExtT('decimal'), sub)})"
            m = d(st.sampled_from(["isIpv4", "isIpv6", "isLoopback", "isMulticast", "isInRange"]))
            if m == "isInRange":
                return f"{e(ExtT('ipaddr'), sub)}.isInRange({e(ExtT('ipaddr'), sub)})"
            return f"{e(ExtT('ipaddr'), sub)}.{m}()"

        return [
            logic,
            lambda: f"(!{e(BOOL, sub)})",
            eq,
            order,
            has,
            guarded,
            like,
            is_,
            in_,
            action_test,
            set_ops,
            has_tag,
            ext_pred,
        ]

    def in_rhs(self, depth: int) -> str:
        ent_sets = [p for p in self.paths if isinstance(p.ty, SetT) and isinstance(p.ty.elem, EntT)]
        opts: list[Callable[[], str]] = [
            lambda: self.entity_expr(depth),
            lambda: (
                "["
                + ", ".join(self.entity_expr(depth) for _ in range(self.draw(st.integers(0, 2))))
                + "]"
            ),
        ]
        if ent_sets:
            opts.append(lambda: self.path_text(self.draw(st.sampled_from(ent_sets))))
        return self.pick(opts)


def quote_pattern(pat: str) -> str:
    """A ``like`` pattern literal: ``pat`` already uses ``*`` and ``\\*``; quote the rest."""
    return '"' + pat.replace('"', '\\"') + '"'


def _scope(draw: st.DrawFn, schema: SchemaSpec, var: str, assumed: str, slot: bool) -> str:
    """A principal or resource scope of any form (or, with ``slot``, one with a slot)."""
    names = schema.type_names
    ids = schema.ids
    if slot:
        form = draw(st.sampled_from(["eq", "in", "is_in"]))
        s = f"?{var}"
    else:
        form = draw(st.sampled_from(["any", "any", "eq", "in", "in", "is", "is_in"]))
        t = assumed if draw(st.integers(0, 3)) else draw(st.sampled_from(names))
        s = f"{t}::{quote(draw(st.sampled_from(ids)))}"
    if form == "any":
        return var
    if form == "eq":
        return f"{var} == {s}"
    if form == "in":
        return f"{var} in {s}"
    t = assumed if draw(st.integers(0, 3)) else draw(st.sampled_from(names))
    if form == "is":
        return f"{var} is {t}"
    return f"{var} is {t} in {s}"


def _action_scope(draw: st.DrawFn, schema: SchemaSpec, action: str) -> str:
    names = [a.name for a in schema.actions] + list(schema.groups)
    form = draw(st.sampled_from(["any", "any", "eq", "in", "in_list"]))
    if form == "any":
        return "action"
    if form == "eq":
        a = action if draw(st.integers(0, 2)) else draw(st.sampled_from(names))
        return f"action == {ACTION_TYPE}::{quote(a)}"
    if form == "in":
        return f"action in {ACTION_TYPE}::{quote(draw(st.sampled_from(names)))}"
    chosen = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    return "action in [" + ", ".join(f"{ACTION_TYPE}::{quote(a)}" for a in chosen) + "]"


def draw_policy(draw: st.DrawFn, schema: SchemaSpec, template: bool = False) -> str:
    """One policy (or template) as source text."""
    action = draw(st.sampled_from(schema.actions))
    p_type = draw(st.sampled_from(action.principals))
    r_type = draw(st.sampled_from(action.resources))
    effect = draw(st.sampled_from(["permit", "forbid"]))
    p_slot = r_slot = False
    if template:
        p_slot = draw(st.booleans())
        r_slot = not p_slot or draw(st.booleans())
    scope = ", ".join(
        [
            _scope(draw, schema, "principal", p_type, p_slot),
            _action_scope(draw, schema, action.name),
            _scope(draw, schema, "resource", r_type, r_slot),
        ]
    )
    gen = _ExprGen(draw, schema, p_type, r_type)
    conds = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["when", "unless"]))
        conds.append(f" {kind} {{ {gen.expr(BOOL, draw(st.integers(1, 3)))} }}")
    annotation = '@id("x")\n' if draw(st.integers(0, 9)) == 0 else ""
    return f"{annotation}{effect}({scope}){''.join(conds)};"


@dataclass(frozen=True)
class Link:
    """A template link: ``template`` is the template's positional id."""

    template: str
    new_id: str
    principal: dict[str, str] | None
    resource: dict[str, str] | None


@dataclass(frozen=True)
class PolicySetSpec:
    """Policy source (positional ids ``policy0..``) plus template links."""

    text: str
    ids: tuple[str, ...]
    templates: tuple[str, ...]
    links: tuple[Link, ...]


def draw_policy_set(draw: st.DrawFn, schema: SchemaSpec, max_policies: int = 5) -> PolicySetSpec:
    """Static policies, and sometimes one template with one or two links."""
    n = draw(st.integers(1, max_policies))
    texts = [draw_policy(draw, schema) for _ in range(n)]
    templates: list[str] = []
    links: list[Link] = []
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(texts)))
        t_text = draw_policy(draw, schema, template=True)
        texts.insert(at, t_text)
        tid = f"policy{at}"
        templates.append(tid)
        for k in range(draw(st.integers(1, 2))):
            p = r = None
            if "?principal" in t_text:
                p = uid_json(
                    draw(st.sampled_from(schema.type_names)), draw(st.sampled_from(schema.ids))
                )
            if "?resource" in t_text:
                r = uid_json(
                    draw(st.sampled_from(schema.type_names)), draw(st.sampled_from(schema.ids))
                )
            links.append(Link(tid, f"link{k}", p, r))
    ids = tuple(f"policy{i}" for i in range(len(texts)))
    return PolicySetSpec("\n".join(texts) + "\n", ids, tuple(templates), tuple(links))


@st.composite
def policy_sets(draw: st.DrawFn, schema: SchemaSpec, max_policies: int = 5) -> PolicySetSpec:
    """Policy sets for ``schema`` (see :func:`draw_policy_set`)."""
    return draw_policy_set(draw, schema, max_policies)


# ---------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    schema: SchemaSpec
    policies: PolicySetSpec
    entities: list[dict[str, Any]]
    requests: list[dict[str, Any]]

    def describe(self) -> str:
        """Everything needed to replay the case by hand."""
        import json

        return (
            f"--- schema\n{self.schema.text()}--- policies\n{self.policies.text}"
            f"--- links\n{self.policies.links}\n--- entities\n{json.dumps(self.entities)}\n"
            f"--- requests\n{json.dumps(self.requests)}\n"
        )


@st.composite
def scenarios(
    draw: st.DrawFn, max_policies: int = 5, min_requests: int = 3, max_requests: int = 8
) -> Scenario:
    schema = draw_schema(draw)
    return Scenario(
        schema,
        draw_policy_set(draw, schema, max_policies),
        draw_entities(draw, schema),
        [draw_request(draw, schema) for _ in range(draw(st.integers(min_requests, max_requests)))],
    )
