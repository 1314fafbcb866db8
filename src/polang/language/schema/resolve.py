"""The one resolver: declarations as written -> the model, names resolved by the
language's rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polang.language.hierarchy import check_hierarchy, too_deep_message
from polang.language.values import EntityUID

from .declarations import (
    _Loc,
    _RAction,
    _RCommon,
    _REntity,
    _RName,
    _RNamespace,
    _RPrim,
    _RRecord,
    _RRef,
    _RSet,
    _RType,
    _Source,
)
from .model import (
    MAX_SCHEMA_TYPE_DEPTH,
    ActionDef,
    Attribute,
    EntityRefType,
    EntityTypeDef,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    too_deep_type_message,
)
from .names import _EXTENSIONS, _PRIMITIVES, CEDAR_NAMESPACE, _action_type, _qualify

if TYPE_CHECKING:
    pass

# ================================================================ resolution


class _Resolver:
    """Resolves raw declarations into the model and checks the schema's consistency."""

    def __init__(self, src: _Source, namespaces: list[_RNamespace]) -> None:
        self.src = src
        self.namespaces = namespaces
        self.entities: dict[str, tuple[str, _REntity]] = {}
        self.commons: dict[str, tuple[str, _RCommon]] = {}
        self.actions: dict[EntityUID, tuple[str, _RAction]] = {}
        self.common_done: dict[str, tuple[SchemaType, int]] = {}
        self.common_stack: list[str] = []

    def run(self) -> Schema:
        for ns in self.namespaces:
            for e in ns.entities.values():
                self.entities[_qualify(ns.name, e.name)] = (ns.name, e)
            for c in ns.commons.values():
                self.commons[_qualify(ns.name, c.name)] = (ns.name, c)
            for a in ns.actions.values():
                self.actions[EntityUID(_action_type(ns.name), a.name)] = (ns.name, a)
        self._check_shadowing()

        # a definition is not a reference: its type starts at the first level
        common_types = {fq: self._common(fq, c.loc, 0)[0] for fq, (_, c) in self.commons.items()}
        entity_types = {fq: self._entity_type(ns, fq, e) for fq, (ns, e) in self.entities.items()}
        actions = {uid: self._action(ns, uid, a) for uid, (ns, a) in self.actions.items()}
        self._check_hierarchies(entity_types, actions)
        return Schema(
            entity_types=entity_types,
            actions=actions,
            common_types=common_types,
            namespaces=tuple(ns.name for ns in self.namespaces),
            namespace_annotations={ns.name: ns.annotations for ns in self.namespaces},
            common_type_annotations={fq: c.annotations for fq, (_, c) in self.commons.items()},
        )

    def _check_shadowing(self) -> None:
        """A namespaced declaration may not shadow one of the empty namespace."""
        for ns in self.namespaces:
            if not ns.name:
                continue
            decls: list[tuple[str, _Loc]] = [(e.name, e.loc) for e in ns.entities.values()]
            decls += [(c.name, c.loc) for c in ns.commons.values()]
            for name, loc in decls:
                if name in self.entities and self.entities[name][0] == "":
                    what = "entity type"
                elif name in self.commons and self.commons[name][0] == "":
                    what = "common type"
                else:
                    continue
                raise self.src.error(
                    loc,
                    f"the definition of `{ns.name}::{name}` shadows the {what} `{name}` "
                    "of the empty namespace",
                )
            for a in ns.actions.values():
                if EntityUID("Action", a.name) in self.actions:
                    uid = EntityUID(_action_type(ns.name), a.name)
                    raise self.src.error(
                        a.loc,
                        f"the definition of `{uid}` shadows the action "
                        f"`{EntityUID('Action', a.name)}` of the empty namespace",
                    )

    # ------------------------------------------------------------ types

    def _type(self, ns: str, t: _RType) -> SchemaType:
        return self._typed(ns, t, 1)[0]

    def _typed(self, ns: str, t: _RType, depth: int) -> tuple[SchemaType, int]:
        """``t`` resolved, with its height: the levels of its longest path (leaf included),
        a common type reference counting as one. ``depth`` is the level ``t`` is at."""
        if depth > MAX_SCHEMA_TYPE_DEPTH:
            raise self.src.error(t.loc, too_deep_type_message())
        if isinstance(t, _RPrim):
            return t.type, 1
        if isinstance(t, _RSet):
            element, h = self._typed(ns, t.element, depth + 1)
            return SetType(element), h + 1
        if isinstance(t, _RRecord):
            attrs: dict[str, Attribute] = {}
            height = 0
            for k, a in t.attributes.items():
                at, h = self._typed(ns, a.type, depth + 1)
                height = max(height, h)
                attrs[k] = Attribute(at, a.required, a.annotations)
            return RecordType(attrs, t.additional), height + 1
        return self._name(ns, t, depth)

    def _name(self, ns: str, r: _RName, depth: int = 1) -> tuple[SchemaType, int]:
        name = r.name
        prefix = CEDAR_NAMESPACE + "::"
        if name.startswith(prefix):
            builtin = _builtin(name[len(prefix) :], r.kind)
            if builtin is not None:
                return builtin, 1
            raise self.src.error(r.loc, _undefined(r))
        candidates = [name] if "::" in name or not ns else [_qualify(ns, name), name]
        for c in candidates:
            if r.kind in ("any", "common") and c in self.commons:
                return self._common(c, r.loc, depth)
            if r.kind in ("any", "entity") and c in self.entities:
                return EntityRefType(c), 1
        if "::" not in name:
            builtin = _builtin(name, r.kind)
            if builtin is not None:
                return builtin, 1
        raise self.src.error(r.loc, _undefined(r))

    def _common(self, fq: str, loc: _Loc, depth: int = 1) -> tuple[SchemaType, int]:
        done = self.common_done.get(fq)
        if done is not None:
            resolved, height = done
            if depth + height > MAX_SCHEMA_TYPE_DEPTH:  # as deep as resolving it again
                raise self.src.error(loc, too_deep_type_message())
            return resolved, height + 1
        if fq in self.common_stack:
            cycle = [*self.common_stack[self.common_stack.index(fq) :], fq]
            raise self.src.error(
                loc, "cycle in common type definitions: " + " -> ".join(f"`{n}`" for n in cycle)
            )
        self.common_stack.append(fq)
        ns, decl = self.commons[fq]
        resolved, height = self._typed(ns, decl.type, depth + 1)
        self.common_stack.pop()
        self.common_done[fq] = (resolved, height)
        return resolved, height + 1

    def _entity_ref(self, ns: str, name: str, loc: _Loc) -> str:
        t = self._name(ns, _RName(name, "entity", loc))[0]
        assert isinstance(t, EntityRefType)
        return t.name

    # ------------------------------------------------------------ declarations

    def _entity_type(self, ns: str, fq: str, e: _REntity) -> EntityTypeDef:
        member_of = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in e.member_of))
        shape = RecordType()
        if e.shape is not None:
            resolved = self._type(ns, e.shape)
            if not isinstance(resolved, RecordType):
                raise self.src.error(
                    e.shape.loc,
                    f"the shape of entity type `{fq}` must be a record type, not `{resolved}`",
                )
            shape = resolved
        tags = self._type(ns, e.tags) if e.tags is not None else None
        return EntityTypeDef(fq, member_of, shape, tags, e.enum, e.annotations)

    def _action(self, ns: str, uid: EntityUID, a: _RAction) -> ActionDef:
        parents = tuple(_unique(self._action_ref(ns, r) for r in a.member_of))
        if a.applies is None:
            return ActionDef(uid, parents, applies_to=False, annotations=a.annotations)
        principals = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in a.applies.principals))
        resources = tuple(_unique(self._entity_ref(ns, n, loc) for n, loc in a.applies.resources))
        context = RecordType()
        if a.applies.context is not None:
            resolved = self._type(ns, a.applies.context)
            if not isinstance(resolved, RecordType):
                raise self.src.error(
                    a.applies.context.loc,
                    f"the context of action `{uid}` must be a record type, not `{resolved}`",
                )
            context = resolved
        if not principals or not resources:
            # An action that applies to no principal (or no resource) applies to nothing.
            return ActionDef(uid, parents, applies_to=False, annotations=a.annotations)
        return ActionDef(uid, parents, principals, resources, context, True, a.annotations)

    def _action_ref(self, ns: str, r: _RRef) -> EntityUID:
        if r.type is None or "::" not in r.type:
            base = r.type or "Action"
            candidates = [EntityUID(_qualify(ns, base), r.id)]
            if ns:
                candidates.append(EntityUID(base, r.id))
        else:
            candidates = [EntityUID(r.type, r.id)]
        for c in candidates:
            if c in self.actions:
                return c
        raise self.src.error(r.loc, f"undefined action `{candidates[0]}`")

    def _check_hierarchies(
        self, entity_types: dict[str, EntityTypeDef], actions: dict[EntityUID, ActionDef]
    ) -> None:
        """Action groups may not form a cycle (entity types may: ``entity G in [G]``), and
        neither hierarchy may be deeper than ``MAX_HIERARCHY_DEPTH``: their closures are
        built in full (``Schema.ancestor_types``, the action entities' ancestors)."""

        def type_parents(name: str) -> tuple[str, ...]:
            et = entity_types.get(name)
            return () if et is None else et.member_of

        problem = check_hierarchy(entity_types, type_parents, cycles=False)
        if problem is not None:
            raise self.src.error(
                self.entities[problem.chain[0]][1].loc,
                too_deep_message("entity type hierarchy", problem.chain, lambda n: f"`{n}`"),
            )

        def action_parents(uid: EntityUID) -> tuple[EntityUID, ...]:
            ad = actions.get(uid)
            return () if ad is None else ad.member_of

        found = check_hierarchy(actions, action_parents, cycles=True)
        if found is None:
            return
        if found.kind == "cycle":
            raise self.src.error(
                self.actions[found.chain[-1]][1].loc,
                "cycle in the action hierarchy: " + " -> ".join(str(u) for u in found.chain),
            )
        raise self.src.error(
            self.actions[found.chain[0]][1].loc,
            too_deep_message("action hierarchy", found.chain, lambda u: f"`{u}`"),
        )


def _builtin(name: str, kind: str) -> SchemaType | None:
    if kind == "entity":
        return None
    if kind != "ext" and name in _PRIMITIVES:
        return _PRIMITIVES[name]
    return _EXTENSIONS.get(name)


def _undefined(r: _RName) -> str:
    if r.kind == "entity":
        return f"undefined entity type `{r.name}`"
    if r.kind == "common":
        return f"undefined common type `{r.name}`"
    if r.kind == "ext":
        return f"unknown extension type `{r.name}`"
    return f"undefined type `{r.name}`"


def _unique(items: Any) -> list[Any]:
    """``items`` without repeats, in order (linear: a type may list thousands of parents)."""
    return list(dict.fromkeys(items))
