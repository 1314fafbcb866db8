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

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

# ---------------------------------------------------------------------------- choices

T = TypeVar("T")


class Chooser(Protocol):
    """Where the generators get their choices: Hypothesis (shrinkable) or a seeded Random."""

    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, items: Sequence[T]) -> T: ...
    def coin(self) -> bool: ...
    def sublist(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]: ...
    def sequence(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]: ...
    def shuffle(self, items: Sequence[T]) -> list[T]: ...


class HypothesisChooser:
    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def choice(self, items: Sequence[T]) -> T:
        return self._draw(st.sampled_from(items))

    def coin(self) -> bool:
        return self._draw(st.booleans())

    def sublist(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]:
        """Distinct elements (by position) of ``items``."""
        idx = self._draw(
            st.lists(
                st.integers(0, len(items) - 1),
                min_size=min(min_size, len(items)),
                max_size=min(max_size, len(items)),
                unique=True,
            )
        )
        return [items[i] for i in idx]

    def sequence(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]:
        return self._draw(st.lists(st.sampled_from(items), min_size=min_size, max_size=max_size))

    def shuffle(self, items: Sequence[T]) -> list[T]:
        return list(self._draw(st.permutations(items)))


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)

    def choice(self, items: Sequence[T]) -> T:
        return self._rng.choice(items)

    def coin(self) -> bool:
        return self._rng.random() < 0.5

    def sublist(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]:
        hi = min(max_size, len(items))
        return self._rng.sample(list(items), self._rng.randint(min(min_size, hi), hi))

    def sequence(self, items: Sequence[T], min_size: int = 0, max_size: int = 3) -> list[T]:
        return [self._rng.choice(items) for _ in range(self._rng.randint(min_size, max_size))]

    def shuffle(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        self._rng.shuffle(out)
        return out


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
    ids: tuple[str, ...] = ("a", "b", 'q"é')
    namespace: str = ""
    enums: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def q(self, name: str) -> str:
        """The full name of a type declared in the schema (as policies and JSON spell it)."""
        return f"{self.namespace}::{name}" if self.namespace else name

    @property
    def action_type(self) -> str:
        return self.q(ACTION_TYPE)

    def ids_of(self, type_name: str) -> tuple[str, ...]:
        """Entity ids used for a type: an enumerated type's members plus one non-member."""
        for name, members in self.enums:
            if name == type_name:
                return members
        return self.ids

    @property
    def all_type_names(self) -> tuple[str, ...]:
        """Every entity type, enumerated ones included (they never have entities)."""
        return self.type_names + tuple(name for name, _ in self.enums)

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
        for name, members in self.enums:
            out.append(f"entity {name} enum [{', '.join(quote(m) for m in members)}];")
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
        if self.namespace:
            body = "\n".join("  " + line for line in out)
            return f"namespace {self.namespace} {{\n{body}\n}}\n"
        return "\n".join(out) + "\n"


TYPE_NAMES = ("User", "Group", "Doc", "Folder", "Team")
ATTR_NAMES = ("age", "name", "level", "owner", "info", "flag", "addr", "amount", "when", "dur")
FIELD_NAMES = ("x", "y", "z")
CTX_NAMES = ("n", "s", "ok", "ip", "at", "who", "meta")
ACTION_NAMES = ("read", "write", "delete")
GROUP_NAMES = ("all", "edit")


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\0": "\\0"}


def one_in(draw: Chooser, n: int) -> bool:
    """True about once in ``n`` draws (a middle value: Hypothesis favours the ends of a
    range, and shrinking towards 0 turns the rare case off)."""
    return bool(draw.integer(0, n - 1) == n // 2)


def quote(s: str) -> str:
    """A string literal of the language."""
    return '"' + "".join(_ESCAPES.get(c, c) for c in s) + '"'


def quote_unicode(s: str) -> str:
    """The same string literal with every character written as a ``\\u{...}`` escape."""
    return '"' + "".join(f"\\u{{{ord(c):x}}}" for c in s) + '"'


def draw_type(draw: Chooser, type_names: Sequence[str], depth: int) -> Ty:
    """A type: primitives, extensions, entities, and (above depth 0) sets and records."""
    k = draw.integer(0, 4 if depth > 0 else 2)
    if k == 0:
        return draw.choice((LONG, STRING, BOOL))
    if k == 1:
        return ExtT(draw.choice(EXT_NAMES))
    if k == 2:
        return EntT(draw.choice(type_names)) if type_names else LONG
    if k == 3:
        return SetT(draw_type(draw, type_names, depth - 1))
    return draw_record_type(draw, type_names, depth - 1, FIELD_NAMES)


def draw_record_type(
    draw: Chooser,
    type_names: Sequence[str],
    depth: int,
    names: Sequence[str],
    max_size: int = 3,
) -> RecT:
    chosen = draw.sublist(names, max_size=max_size)
    return RecT(tuple(Field(n, draw_type(draw, type_names, depth), draw.coin()) for n in chosen))


def draw_schema(draw: Chooser) -> SchemaSpec:
    """A small schema: 2-4 entity types (attributes of every kind, hierarchies, tags),
    1-3 actions with action groups, one context type."""
    names = draw.sublist(TYPE_NAMES, min_size=2, max_size=4)
    enums: tuple[tuple[str, tuple[str, ...]], ...] = ()
    value_types = list(names)
    if one_in(draw, 4):
        enums = (("Color", ("red", "green")),)
        value_types.append("Color")
    etypes: list[EntityTypeSpec] = []
    for n in names:
        attrs = draw_record_type(draw, value_types, 1, ATTR_NAMES, max_size=4)
        member_of = tuple(draw.sublist(names, max_size=2))
        tags = draw.choice((None, None, STRING, LONG, SetT(STRING)))
        etypes.append(EntityTypeSpec(n, attrs, member_of, tags))
    context = draw_record_type(draw, value_types, 1, CTX_NAMES)
    groups = tuple(draw.sublist(GROUP_NAMES, max_size=2))
    action_names = draw.sublist(ACTION_NAMES, min_size=1, max_size=3)
    actions = []
    for a in action_names:
        principals = tuple(draw.sublist(names, min_size=1, max_size=2))
        resources = tuple(draw.sublist(names, min_size=1, max_size=2))
        member_of = tuple(draw.sublist(groups, max_size=2)) if groups else ()
        actions.append(ActionSpec(a, principals, resources, member_of))
    namespace = draw.choice(("", "", "App", "Org::App"))
    return SchemaSpec(
        tuple(etypes), tuple(actions), groups, context, namespace=namespace, enums=enums
    )


@st.composite
def schemas(draw: st.DrawFn) -> SchemaSpec:
    """Schemas (see :func:`draw_schema`)."""
    return draw_schema(HypothesisChooser(draw))


# ---------------------------------------------------------------------------- values

STRINGS = ("", "a", "ab", "abc", "b", "ba", "A", "a*b", "x y", 'q"t', "back\\slash", "é", "a\nb")
TAG_KEYS = ("k1", "k2", "k3")
BIG_LONGS = (2**63 - 1, -(2**63), 2**62, -(2**62), 3037000500, 4294967296)
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


def draw_json_value(draw: Chooser, schema: SchemaSpec, t: Ty) -> Any:
    """A JSON value (entity/context form) of type ``t``: explicit escapes (``__extn``,
    ``__entity``) or, one time in three, the implicit forms that only a schema can read."""
    if t == LONG:
        return draw.integer(-4, 6) if draw.integer(0, 5) else draw.choice(BIG_LONGS)
    if t == STRING:
        return draw.choice(STRINGS)
    if t == BOOL:
        return draw.coin()
    if isinstance(t, ExtT):
        arg = draw.choice(EXT_OK[t.name])
        return arg if one_in(draw, 3) else {"__extn": {"fn": EXT_CTOR[t.name], "arg": arg}}
    if isinstance(t, EntT):
        uid = uid_json(schema.q(t.name), draw.choice(schema.ids_of(t.name)))
        return uid if one_in(draw, 3) else {"__entity": uid}
    if isinstance(t, SetT):
        return [draw_json_value(draw, schema, t.elem) for _ in range(draw.integer(0, 3))]
    assert isinstance(t, RecT)
    return draw_json_record(draw, schema, t)


def draw_json_record(draw: Chooser, schema: SchemaSpec, t: RecT) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in t.fields:
        if f.required or draw.coin():
            out[f.name] = draw_json_value(draw, schema, f.ty)
    return out


# ---------------------------------------------------------------------------- entities


def draw_entities(draw: Chooser, schema: SchemaSpec) -> list[dict[str, Any]]:
    """Entities conforming to the schema. Parents only point to entities created earlier,
    so the hierarchy is acyclic; some uids of the id pool are left out of the store, so
    references to them dangle."""
    uids = [(t, i) for t in schema.type_names for i in schema.ids]
    present = [u for u in uids if draw.integer(0, 4) > 0]
    order = draw.shuffle(present)
    out: list[dict[str, Any]] = []
    made: list[tuple[str, str]] = []
    for t, i in order:
        spec = schema.etype(t)
        assert spec is not None
        candidates = [u for u in made if u[0] in spec.member_of]
        parents = draw.sublist(candidates, max_size=2) if candidates else []
        ent: dict[str, Any] = {
            "uid": uid_json(schema.q(t), i),
            "attrs": draw_json_record(draw, schema, spec.attrs),
            "parents": [uid_json(schema.q(pt), pi) for pt, pi in parents],
        }
        if spec.tags is not None:
            keys = draw.sublist(TAG_KEYS, max_size=2)
            ent["tags"] = {k: draw_json_value(draw, schema, spec.tags) for k in keys}
        out.append(ent)
        made.append((t, i))
    return out


@st.composite
def entity_lists(draw: st.DrawFn, schema: SchemaSpec) -> list[dict[str, Any]]:
    """Entity JSON lists for ``schema`` (see :func:`draw_entities`)."""
    return draw_entities(HypothesisChooser(draw), schema)


# ---------------------------------------------------------------------------- requests


def draw_request(draw: Chooser, schema: SchemaSpec) -> dict[str, Any]:
    """One request valid for the schema (its principal need not exist in the store)."""
    a = draw.choice(schema.actions)
    p = uid_json(schema.q(draw.choice(a.principals)), draw.choice(schema.ids))
    r = uid_json(schema.q(draw.choice(a.resources)), draw.choice(schema.ids))
    return {
        "principal": p,
        "action": uid_json(schema.action_type, a.name),
        "resource": r,
        "context": draw_json_record(draw, schema, schema.context),
    }


@st.composite
def request_lists(
    draw: st.DrawFn, schema: SchemaSpec, min_size: int = 1, max_size: int = 6
) -> list[dict[str, Any]]:
    c = HypothesisChooser(draw)
    return [draw_request(c, schema) for _ in range(c.integer(min_size, max_size))]


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

    draw: Chooser
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
            roots.append(_Path(f"{self.schema.q(t)}::{quote(self.schema.ids[0])}", EntT(t)))
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
        return options[self.draw.integer(0, len(options) - 1)]()

    def choose_path(self, paths: Sequence[_Path]) -> _Path:
        """Mostly a path from the request (principal, resource, context), which exists;
        sometimes one from an entity literal, which may not."""
        local = [p for p in paths if p.text.startswith(("principal", "resource", "context"))]
        if local and not one_in(self.draw, 4):
            return self.draw.choice(local)
        return self.draw.choice(paths)

    def of_type(self, t: Ty) -> list[_Path]:
        return [p for p in self.paths if p.ty == t]

    def any_type(self) -> Ty:
        base: list[Ty] = [LONG, STRING, BOOL, SetT(LONG), SetT(STRING)]
        base += [EntT(n) for n in self.schema.type_names]
        base += [ExtT(n) for n in EXT_NAMES]
        base += list({p.ty for p in self.paths if isinstance(p.ty, SetT | RecT)})
        return self.draw.choice(base)

    # -- literals ---------------------------------------------------------------------

    def literal(self, t: Ty, depth: int) -> str:
        d = self.draw
        if t == LONG:
            return str(d.integer(-4, 6) if d.integer(0, 4) else d.choice(BIG_LONGS))
        if t == STRING:
            text = d.choice(STRINGS)
            return quote_unicode(text) if one_in(d, 10) else quote(text)
        if t == BOOL:
            return d.choice(["true", "false"])
        if isinstance(t, ExtT):
            arg = d.choice(EXT_OK[t.name] + EXT_BAD[t.name][:1])
            return f"{EXT_CTOR[t.name]}({quote(arg)})"
        if isinstance(t, EntT):
            ids = self.schema.ids_of(t.name)
            if ids is not self.schema.ids and one_in(d, 5):
                ids = ("purple",)  # not a member of the enumeration: a dangling reference
            return f"{self.schema.q(t.name)}::{quote(d.choice(ids))}"
        if isinstance(t, SetT):
            n = d.integer(0, 3)
            return "[" + ", ".join(self.expr(t.elem, depth - 1) for _ in range(n)) + "]"
        assert isinstance(t, RecT)
        parts = []
        for f in t.fields:
            if f.required or d.coin():
                key = f.name if d.coin() else quote(f.name)
                parts.append(f"{key}: {self.expr(f.ty, depth - 1)}")
        return "{" + ", ".join(parts) + "}"

    # -- expressions ------------------------------------------------------------------

    def expr(self, t: Ty, depth: int) -> str:
        """An expression meant to have type ``t`` (rarely, on purpose, another type)."""
        d = self.draw
        if depth > 0 and one_in(d, 150):
            t = self.any_type()  # a type mistake: evaluation errors (or ``==`` is false)
        leaves: list[Callable[[], str]] = [lambda: self.literal(t, depth)]
        paths = self.of_type(t)
        if paths:  # reading data is what policies mostly do
            read = lambda: self.path_text(self.choose_path(paths))  # noqa: E731
            leaves += [read, read]
        if depth <= 0:
            return self.pick(leaves)
        # Operators are weighted (by repetition) so that each one shows up often.
        ops: list[Callable[[], str]] = [lambda: self.if_then_else(t, depth)]
        if (isinstance(t, Prim) and t.name in ("Long", "String")) or (
            isinstance(t, SetT) and t.elem in (LONG, STRING)
        ):
            ops.append(lambda: self.get_tag(t, depth))
        if t == BOOL:
            ops.extend(self.bool_options(depth))
        elif t == LONG:
            ops.extend(self.long_options(depth))
        elif isinstance(t, ExtT):
            ops.extend(self.ext_options(t.name, depth))
        return self.pick(leaves + ops)

    def path_text(self, p: _Path) -> str:
        if p.base is not None and p.attr is not None and one_in(self.draw, 6):
            return f"{p.base}[{quote(p.attr)}]"
        return p.text

    def if_then_else(self, t: Ty, depth: int) -> str:
        c = self.expr(BOOL, depth - 1)
        return f"(if {c} then {self.expr(t, depth - 1)} else {self.expr(t, depth - 1)})"

    def get_tag(self, t: Ty, depth: int) -> str:
        ents = [p for p in self.paths if isinstance(p.ty, EntT)]
        e = self.path_text(self.choose_path(ents))
        return f"{e}.getTag({self.tag_key(depth)})"

    def tag_key(self, depth: int) -> str:
        if depth > 1 and one_in(self.draw, 4):
            return self.expr(STRING, depth - 1)
        return quote(self.draw.choice(TAG_KEYS))

    def entity_expr(self, depth: int) -> str:
        ents = [p for p in self.paths if isinstance(p.ty, EntT)]
        return self.pick(
            [
                lambda: self.path_text(self.choose_path(ents)),
                lambda: self.literal(EntT(self.draw.choice(self.schema.type_names)), 0),
            ]
        )

    def long_options(self, depth: int) -> list[Callable[[], str]]:
        e = self.expr

        def arith() -> str:
            op = self.draw.choice(["+", "-", "*"])
            return f"({e(LONG, depth - 1)} {op} {e(LONG, depth - 1)})"

        def dur_to() -> str:
            m = self.draw.choice(["toMilliseconds", "toSeconds", "toMinutes", "toHours", "toDays"])
            return f"{e(ExtT('duration'), depth - 1)}.{m}()"

        return [arith, arith, arith, arith, lambda: f"(-{e(LONG, depth - 1)})", dur_to]

    def ext_options(self, name: str, depth: int) -> list[Callable[[], str]]:
        e = self.expr
        ctor = EXT_CTOR[name]
        opts: list[Callable[[], str]] = [
            # a constructor over a computed string (from data): may be malformed
            lambda: f"{ctor}({e(STRING, depth - 1)})",
            lambda: f"{ctor}({quote(self.draw.choice(EXT_BAD[name]))})",
        ]
        dt, dur = ExtT("datetime"), ExtT("duration")
        if name == "datetime":
            offset = lambda: f"{e(dt, depth - 1)}.offset({e(dur, depth - 1)})"  # noqa: E731
            opts += [offset, offset, lambda: f"{e(dt, depth - 1)}.toDate()"]
        if name == "duration":
            since = lambda: f"{e(dt, depth - 1)}.durationSince({e(dt, depth - 1)})"  # noqa: E731
            opts += [since, since, lambda: f"{e(dt, depth - 1)}.toTime()"]
        return opts

    def bool_options(self, depth: int) -> list[Callable[[], str]]:
        d = self.draw
        e = self.expr
        sub = depth - 1

        def logic() -> str:
            op = d.choice(["&&", "||"])
            return f"({e(BOOL, sub)} {op} {e(BOOL, sub)})"

        def eq() -> str:
            t = self.any_type()
            # Sometimes across types (``1 == true`` is false, unlike Python's).
            t2 = d.choice([t, self.any_type(), BOOL if t == LONG else LONG])
            op = d.choice(["==", "!="])
            return f"({e(t, sub)} {op} {e(t2, sub)})"

        def order() -> str:
            ordered: list[Ty] = [LONG, LONG, LONG, ExtT("datetime"), ExtT("duration")]
            t = d.choice(ordered)
            op = d.choice(["<", "<=", ">", ">="])
            return f"({e(t, sub)} {op} {e(t, sub)})"

        def has() -> str:
            holders = [p for p in self.paths if isinstance(p.ty, EntT | RecT)]
            p = self.choose_path(holders)
            names = [f.name for f in self._fields(p.ty)] + ["nope"]
            first = d.choice(names)
            attr = first if d.integer(0, 3) else quote(first)
            f = next((x for x in self._fields(p.ty) if x.name == first), None)
            if f is not None and isinstance(f.ty, RecT) and f.ty.fields and d.coin():
                attr = f"{first}.{d.choice([x.name for x in f.ty.fields])}"
            if one_in(d, 10):  # on any value: a type error unless entity/record
                return f"({e(self.any_type(), sub)} has {attr})"
            return f"({self.path_text(p)} has {attr})"

        def guarded() -> str:
            opt = [p for p in self.paths if p.optional]
            if not opt:
                return has()
            p = self.choose_path(opt)
            return f"(({p.base} has {p.attr}) && ({p.text} == {e(p.ty, sub)}))"

        def like() -> str:
            elems = ["a", "b", "*", "\\*", " ", "\\u{2a}", "\\n", "é"]
            pat = "".join(d.sequence(elems, max_size=4))
            return f"({e(STRING, sub)} like {quote_pattern(pat)})"

        def is_() -> str:
            t = self.schema.q(d.choice(self.schema.all_type_names))
            if d.coin():
                return f"({self.entity_expr(sub)} is {t} in {self.in_rhs(sub)})"
            return f"({self.entity_expr(sub)} is {t})"

        def in_() -> str:
            return f"({self.entity_expr(sub)} in {self.in_rhs(sub)})"

        def action_test() -> str:
            names = [a.name for a in self.schema.actions] + list(self.schema.groups)
            a = d.choice(names)
            op = d.choice(["==", "in"])
            return f"(action {op} {self.schema.action_type}::{quote(a)})"

        def set_ops() -> str:
            elems: list[Ty] = [LONG, STRING, *[EntT(n) for n in self.schema.type_names]]
            elem = d.choice(elems)
            if elem == LONG and one_in(d, 3):  # Longs and Bools mixed: never equal
                s = f"[{e(LONG, sub)}, {e(BOOL, sub)}, {e(LONG, sub)}]"
                elem = d.choice([LONG, BOOL])
            else:
                s = e(SetT(elem), sub)
            m = d.choice(["contains", "containsAll", "containsAny", "isEmpty"])
            if m == "contains":
                return f"{s}.contains({e(elem, sub)})"
            if m == "isEmpty":
                return f"{s}.isEmpty()"
            return f"{s}.{m}({e(SetT(elem), sub)})"

        def has_tag() -> str:
            return f"{self.entity_expr(sub)}.hasTag({self.tag_key(depth)})"

        def ext_pred() -> str:
            kind = d.choice(["decimal", "ipaddr"])
            if kind == "decimal":
                m = d.choice(["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"])
                return f"{e(ExtT('decimal'), sub)}.{m}({e(ExtT('decimal'), sub)})"
            m = d.choice(["isIpv4", "isIpv6", "isLoopback", "isMulticast", "isInRange"])
            if m == "isInRange":
                return f"{e(ExtT('ipaddr'), sub)}.isInRange({e(ExtT('ipaddr'), sub)})"
            return f"{e(ExtT('ipaddr'), sub)}.{m}()"

        return [
            *[logic] * 3,
            lambda: f"(!{e(BOOL, sub)})",
            *[eq] * 2,
            *[order] * 3,
            *[has] * 2,
            *[guarded] * 2,
            like,
            is_,
            *[in_] * 2,
            action_test,
            *[set_ops] * 2,
            has_tag,
            *[ext_pred] * 2,
        ]

    def in_rhs(self, depth: int) -> str:
        ent_sets = [p for p in self.paths if isinstance(p.ty, SetT) and isinstance(p.ty.elem, EntT)]
        opts: list[Callable[[], str]] = [
            lambda: self.entity_expr(depth),
            lambda: (
                "["
                + ", ".join(self.entity_expr(depth) for _ in range(self.draw.integer(0, 2)))
                + "]"
            ),
        ]
        if ent_sets:
            opts.append(lambda: self.path_text(self.choose_path(ent_sets)))
        if one_in(self.draw, 16):  # not entities: a type error
            return self.expr(self.any_type(), depth)
        return self.pick(opts)


def quote_pattern(pat: str) -> str:
    """A ``like`` pattern literal: ``pat`` already uses ``*`` and ``\\*``; quote the rest."""
    return '"' + pat.replace('"', '\\"') + '"'


def _scope(draw: Chooser, schema: SchemaSpec, var: str, assumed: str, slot: bool) -> str:
    """A principal or resource scope of any form (or, with ``slot``, one with a slot)."""
    names = schema.type_names
    ids = schema.ids
    if slot:
        form = draw.choice(["eq", "in", "is_in"])
        s = f"?{var}"
    else:
        form = draw.choice(["any", "any", "any", "eq", "in", "in", "is", "is_in"])
        t = assumed if draw.integer(0, 3) else draw.choice(names)
        s = f"{schema.q(t)}::{quote(draw.choice(ids))}"
    if form == "any":
        return var
    if form == "eq":
        return f"{var} == {s}"
    if form == "in":
        return f"{var} in {s}"
    t = assumed if draw.integer(0, 3) else draw.choice(names)
    if form == "is":
        return f"{var} is {schema.q(t)}"
    return f"{var} is {schema.q(t)} in {s}"


def _action_scope(draw: Chooser, schema: SchemaSpec, action: str) -> str:
    names = [a.name for a in schema.actions] + list(schema.groups)
    form = draw.choice(["any", "any", "eq", "in", "in_list"])
    if form == "any":
        return "action"
    if form == "eq":
        a = action if draw.integer(0, 2) else draw.choice(names)
        return f"action == {schema.action_type}::{quote(a)}"
    if form == "in":
        return f"action in {schema.action_type}::{quote(draw.choice(names))}"
    chosen = draw.sublist(names, min_size=1, max_size=3)
    return "action in [" + ", ".join(f"{schema.action_type}::{quote(a)}" for a in chosen) + "]"


def draw_policy(draw: Chooser, schema: SchemaSpec, template: bool = False) -> str:
    """One policy (or template) as source text."""
    action = draw.choice(schema.actions)
    p_type = draw.choice(action.principals)
    r_type = draw.choice(action.resources)
    effect = draw.choice(["permit", "permit", "forbid"])
    p_slot = r_slot = False
    if template:
        p_slot = draw.coin()
        r_slot = not p_slot or draw.coin()
    scope = ", ".join(
        [
            _scope(draw, schema, "principal", p_type, p_slot),
            _action_scope(draw, schema, action.name),
            _scope(draw, schema, "resource", r_type, r_slot),
        ]
    )
    gen = _ExprGen(draw, schema, p_type, r_type)
    conds = []
    for _ in range(draw.choice((0, 1, 1, 1, 2, 2))):
        kind = draw.choice(["when", "when", "unless"])
        conds.append(f" {kind} {{ {gen.expr(BOOL, draw.integer(1, 4))} }}")
    annotation = '@id("x")\n' if one_in(draw, 10) else ""
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


def draw_policy_set(draw: Chooser, schema: SchemaSpec, max_policies: int = 5) -> PolicySetSpec:
    """Static policies, and sometimes one template with one or two links."""
    n = draw.integer(1, max_policies)
    texts = [draw_policy(draw, schema) for _ in range(n)]
    templates: list[str] = []
    links: list[Link] = []
    if one_in(draw, 4):
        at = draw.integer(0, len(texts))
        t_text = draw_policy(draw, schema, template=True)
        texts.insert(at, t_text)
        tid = f"policy{at}"
        templates.append(tid)
        for k in range(draw.integer(1, 2)):
            p = r = None
            if "?principal" in t_text:
                p = uid_json(
                    schema.q(draw.choice(schema.type_names)),
                    draw.choice(schema.ids),
                )
            if "?resource" in t_text:
                r = uid_json(
                    schema.q(draw.choice(schema.type_names)),
                    draw.choice(schema.ids),
                )
            links.append(Link(tid, f"link{k}", p, r))
    ids = tuple(f"policy{i}" for i in range(len(texts)))
    return PolicySetSpec("\n".join(texts) + "\n", ids, tuple(templates), tuple(links))


@st.composite
def policy_sets(draw: st.DrawFn, schema: SchemaSpec, max_policies: int = 5) -> PolicySetSpec:
    """Policy sets for ``schema`` (see :func:`draw_policy_set`)."""
    return draw_policy_set(HypothesisChooser(draw), schema, max_policies)


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


def draw_scenario(
    draw: Chooser, max_policies: int = 5, min_requests: int = 3, max_requests: int = 8
) -> Scenario:
    schema = draw_schema(draw)
    return Scenario(
        schema,
        draw_policy_set(draw, schema, max_policies),
        draw_entities(draw, schema),
        [draw_request(draw, schema) for _ in range(draw.integer(min_requests, max_requests))],
    )


@st.composite
def scenarios(
    draw: st.DrawFn, max_policies: int = 5, min_requests: int = 3, max_requests: int = 8
) -> Scenario:
    """Whole scenarios from Hypothesis (shrinkable)."""
    return draw_scenario(HypothesisChooser(draw), max_policies, min_requests, max_requests)


def random_scenario(seed: int, max_policies: int = 5, max_requests: int = 12) -> Scenario:
    """One scenario from a seeded ``random.Random``: uniform choices, reproducible by seed.

    Hypothesis favours small and repeated structures; a plain seeded sweep complements it
    with evenly spread operators (at the cost of shrinking)."""
    return draw_scenario(RandomChooser(random.Random(seed)), max_policies, 4, max_requests)
