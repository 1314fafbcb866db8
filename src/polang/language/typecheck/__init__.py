"""The strict type checker behind :mod:`polang.language.validate` (types, core form, rules)."""
