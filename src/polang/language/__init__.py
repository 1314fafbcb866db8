"""polang the language, independent of tokens and stores.

``parse_policies``/``parse_schema``/``parse_schema_json``/``parse_entities`` turn text into
the typed model; ``validate_policies`` is the strict validator.
"""

from polang.language.entities import parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema, parse_schema_json
from polang.language.validate import validate_policies

__all__ = [
    "parse_entities",
    "parse_policies",
    "parse_schema",
    "parse_schema_json",
    "validate_policies",
]
