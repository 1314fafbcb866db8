"""The schema model: one set of classes for both schema forms.

Parsers (human-readable ``.polangschema``: :mod:`.text`; JSON ``polang-json``: :mod:`.json_form`)
read declarations as written (:mod:`.declarations`), and one resolver (:mod:`.resolve`) turns
them into the model (:mod:`.model`), resolving every common type and every relative name, so
consumers (validator, entity parser, stores) only ever see fully-qualified entity type names
and concrete types. :mod:`.to_json` writes the model back as JSON.

Name resolution follows the language: inside namespace ``NS`` an unqualified name ``T``
is the common type ``NS::T``, else the entity type ``NS::T``, else the common type or
entity type ``T`` of the empty namespace, else a built-in (``Long``, ``ipaddr``...);
``__cedar::T`` is always the built-in, and a qualified name is always taken as written.
A namespaced declaration may not shadow one of the empty namespace, so the order
between the two namespaces never changes a result.
"""

from .json_form import parse_schema_json
from .jsontext import duplicate_key, json_loads_checked, non_string_key
from .model import (
    BOOL,
    LONG,
    MAX_SCHEMA_TYPE_DEPTH,
    STRING,
    ActionDef,
    Annotations,
    Attribute,
    EntityRefType,
    EntityTypeDef,
    ExtensionType,
    ExtName,
    PrimName,
    PrimType,
    RecordType,
    Schema,
    SchemaType,
    SetType,
    too_deep_type_message,
    type_to_json,
)
from .names import (
    CEDAR_NAMESPACE,
    EXTENSION_CONSTRUCTORS,
    EXTENSION_TYPES,
    RESERVED_WORDS,
    SCHEMA_KEYWORDS,
    has_name_shape,
    json_path,
    name_error,
)
from .text import parse_schema, unescape_string

__all__ = [
    "BOOL",
    "CEDAR_NAMESPACE",
    "EXTENSION_CONSTRUCTORS",
    "EXTENSION_TYPES",
    "LONG",
    "MAX_SCHEMA_TYPE_DEPTH",
    "RESERVED_WORDS",
    "SCHEMA_KEYWORDS",
    "STRING",
    "ActionDef",
    "Annotations",
    "Attribute",
    "EntityRefType",
    "EntityTypeDef",
    "ExtName",
    "ExtensionType",
    "PrimName",
    "PrimType",
    "RecordType",
    "Schema",
    "SchemaType",
    "SetType",
    "duplicate_key",
    "has_name_shape",
    "json_loads_checked",
    "json_path",
    "name_error",
    "non_string_key",
    "parse_schema",
    "parse_schema_json",
    "too_deep_type_message",
    "type_to_json",
    "unescape_string",
]
