"""polang the language, independent of tokens and stores.

``parse_policies``/``parse_schema``/``parse_schema_json``/``parse_entities`` turn text into
the typed model; ``validate_policies`` is the strict validator.
"""

from polang.language.entities import parse_entities
from polang.language.format import format_expr, format_policies, format_policy
from polang.language.parser import parse_entity_uid, parse_expression, parse_policies, parse_policy
from polang.language.schema import parse_schema, parse_schema_json
from polang.language.validate import validate_policies

__all__ = [
    "format_expr",
    "format_policies",
    "format_policy",
    "parse_entities",
    "parse_entity_uid",
    "parse_expression",
    "parse_policies",
    "parse_policy",
    "parse_schema",
    "parse_schema_json",
    "validate_policies",
]
