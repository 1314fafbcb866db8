"""Print a schema model in the human-readable form (``.polangschema``).

Directory stores hold the schema in the human form only, so converting a legacy store
whose schema is in the JSON form needs this printer. Names are printed so that they
resolve back to the same declarations: qualified names are absolute, and a built-in is
written ``__cedar::T`` only when a declaration of the same base name could shadow it.
"""

from __future__ import annotations

from collections.abc import Iterable

from polang.language.schema import (
    ActionDef,
    Annotations,
    EntityRefType,
    EntityTypeDef,
    ExtensionType,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
)
from polang.language.values import EntityUID, quote_string

_INDENT = "    "


class SchemaPrintError(ValueError):
    """The model holds something the human form cannot say (open records)."""


def _split(name: str) -> tuple[str, str]:
    ns, _, base = name.rpartition("::")
    return ns, base


class _Printer:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        declared = [*schema.entity_types, *schema.common_types]
        self.shadowed = {_split(n)[1] for n in declared}

    def type(self, t: SchemaType, indent: str) -> str:
        if isinstance(t, PrimType | ExtensionType):
            return f"__cedar::{t.name}" if t.name in self.shadowed else t.name
        if isinstance(t, EntityRefType):
            return t.name
        if isinstance(t, SetType):
            return f"Set<{self.type(t.element, indent)}>"
        return self.record(t, indent)

    def record(self, r: RecordType, indent: str) -> str:
        if r.additional:
            raise SchemaPrintError(
                "a record type with additionalAttributes has no human-readable form"
            )
        if not r.attributes:
            return "{}"
        inner = indent + _INDENT
        lines = []
        for name, attr in r.attributes.items():
            ann = "".join(f"{inner}{a}\n" for a in _annotations(attr.annotations))
            opt = "" if attr.required else "?"
            lines.append(f"{ann}{inner}{quote_string(name)}{opt}: {self.type(attr.type, inner)}")
        return "{\n" + ",\n".join(lines) + ",\n" + indent + "}"

    def entity(self, et: EntityTypeDef, indent: str) -> str:
        head = "".join(f"{indent}{a}\n" for a in _annotations(et.annotations))
        _, base = _split(et.name)
        if et.enum is not None:
            values = ", ".join(quote_string(v) for v in et.enum)
            return f"{head}{indent}entity {base} enum [{values}];"
        out = f"{head}{indent}entity {base}"
        if et.member_of:
            out += " in [" + ", ".join(et.member_of) + "]"
        if et.shape.attributes or et.shape.additional:
            out += " = " + self.record(et.shape, indent)
        if et.tags is not None:
            out += " tags " + self.type(et.tags, indent)
        return out + ";"

    def action(self, ad: ActionDef, indent: str) -> str:
        head = "".join(f"{indent}{a}\n" for a in _annotations(ad.annotations))
        out = f"{head}{indent}action {quote_string(ad.uid.id)}"
        if ad.member_of:
            out += " in [" + ", ".join(_action_ref(p) for p in ad.member_of) + "]"
        if ad.applies_to:
            inner = indent + _INDENT
            parts = [
                f"{inner}principal: [{', '.join(ad.principal_types)}]",
                f"{inner}resource: [{', '.join(ad.resource_types)}]",
            ]
            if ad.context.attributes or ad.context.additional:
                parts.append(f"{inner}context: {self.record(ad.context, inner)}")
            out += " appliesTo {\n" + ",\n".join(parts) + ",\n" + indent + "}"
        return out + ";"

    def common(self, name: str, t: SchemaType, indent: str) -> str:
        ann = self.schema.common_type_annotations.get(name, ())
        head = "".join(f"{indent}{a}\n" for a in _annotations(ann))
        return f"{head}{indent}type {_split(name)[1]} = {self.type(t, indent)};"

    def namespace_body(self, ns: str, indent: str) -> list[str]:
        out: list[str] = []
        for name, t in self.schema.common_types.items():
            if _split(name)[0] == ns:
                out.append(self.common(name, t, indent))
        for name, et in self.schema.entity_types.items():
            if _split(name)[0] == ns:
                out.append(self.entity(et, indent))
        for uid, ad in self.schema.actions.items():
            if _split(uid.type)[0] == ns:
                out.append(self.action(ad, indent))
        return out

    def print(self) -> str:
        names = {_split(n)[0] for n in (*self.schema.entity_types, *self.schema.common_types)}
        names |= {_split(u.type)[0] for u in self.schema.actions}
        names |= set(self.schema.namespaces)
        # declaration order (the model keeps it), then anything not listed
        order = [n for n in self.schema.namespaces if n in names]
        order += sorted(names - set(order))
        blocks: list[str] = []
        for ns in order:
            if not ns:
                blocks.extend(self.namespace_body("", ""))
                continue
            ann = "".join(
                f"{a}\n" for a in _annotations(self.schema.namespace_annotations.get(ns, ()))
            )
            body = self.namespace_body(ns, _INDENT)
            blocks.append(f"{ann}namespace {ns} {{\n" + "\n".join(body) + "\n}")
        return "\n\n".join(blocks) + "\n"


def _annotations(annotations: Annotations) -> Iterable[str]:
    for key, value in annotations:
        yield f"@{key}" if value is None else f"@{key}({quote_string(value)})"


def _action_ref(uid: EntityUID) -> str:
    return f"{uid.type}::{quote_string(uid.id)}"


def schema_to_text(schema: Schema) -> str:
    """The human-readable form of ``schema``; ``parse_schema`` gives back an equal model."""
    return _Printer(schema).print()
