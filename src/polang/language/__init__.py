"""polang the language, independent of tokens and stores.

``parse_policies``/``parse_schema``/``parse_schema_json``/``parse_entities`` turn text into
the typed model; ``validate_policies`` is the strict validator.

The names below are imported on first use (module ``__getattr__``): importing the
package loads none of its modules (start-up time; ``tests/test_imports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polang._lazy import lazy_exports

if TYPE_CHECKING:
    from polang.language.entities import parse_entities
    from polang.language.format import (
        format_expr,
        format_policies,
        format_policy,
    )
    from polang.language.parser import (
        parse_entity_uid,
        parse_expression,
        parse_policies,
        parse_policy,
    )
    from polang.language.schema import (
        parse_schema,
        parse_schema_json,
    )
    from polang.language.validate import validate_policies

_LAZY: dict[str, str] = {
    "parse_entities": "polang.language.entities",
    "format_expr": "polang.language.format",
    "format_policies": "polang.language.format",
    "format_policy": "polang.language.format",
    "parse_entity_uid": "polang.language.parser",
    "parse_expression": "polang.language.parser",
    "parse_policies": "polang.language.parser",
    "parse_policy": "polang.language.parser",
    "parse_schema": "polang.language.schema",
    "parse_schema_json": "polang.language.schema",
    "validate_policies": "polang.language.validate",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


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
