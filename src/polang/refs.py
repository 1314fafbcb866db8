"""The request reader's documented path, kept working: it lives in
:mod:`polang.engine.requests` (reading a request's parts in every form)."""

from polang.engine.requests import FORMS, EntityInput, entity_or_reference, parse_reference_text

__all__ = ["FORMS", "EntityInput", "entity_or_reference", "parse_reference_text"]
