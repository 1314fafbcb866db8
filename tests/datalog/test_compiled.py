"""The compiled backend: specialised closures agree with the plain rule interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang.datalog.compiled import CompiledBackend
from polang.datalog.facts import EntityFacts, Request
from polang.datalog.lower import lower_policies
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue


def _outcome(backend: CompiledBackend, request: Request, facts: EntityFacts) -> tuple:
    d = backend.decide(request, facts)
    return d.allow, tuple(d.reasons), tuple(pid for pid, _ in d.errors)


def test_specialised_and_generic_agree_on_corpus(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "corpus-tests").glob("*.json"))
    files = [f for f in files if not f.name.endswith(".entities.json")][::8]
    assert len(files) > 400
    compared = 0
    for f in files:
        spec = json.loads(f.read_text())
        schema = parse_schema((corpus_dir / spec["schema"]).read_text())
        policies = parse_policies((corpus_dir / spec["policies"]).read_text())
        program = lower_policies((f"policy{i}", p) for i, p in enumerate(policies))
        fast = CompiledBackend(program)
        closures = CompiledBackend(program, mode="closures")
        plain = CompiledBackend(program, mode="generic")
        facts = EntityFacts(parse_entities((corpus_dir / spec["entities"]).read_text(), schema))
        for req in spec["requests"]:
            action = parse_entity_uid_json(req["action"])
            request = Request(
                parse_entity_uid_json(req["principal"]),
                action,
                parse_entity_uid_json(req["resource"]),
                parse_context(req["context"], schema, action),
            )
            got = _outcome(fast, request, facts)
            assert got == _outcome(plain, request, facts), f.name
            assert got == _outcome(closures, request, facts), f.name
            assert got == (
                req["decision"] == "allow",
                tuple(sorted(req["reason"], key=lambda s: int(s[6:]))),
                tuple(sorted(req["errors"], key=lambda s: int(s[6:]))),
            ), f.name
            compared += 1
    assert compared > 3000


POLICIES = """
permit(principal, action, resource) when { principal.level > 3 && resource.open };
forbid(principal, action, resource) unless { context.ok };
permit(principal == U::"root", action, resource);
"""


@pytest.mark.parametrize("mode", CompiledBackend.MODES)
def test_three_valued_conditions(mode: str) -> None:
    from polang.language.entities import Entity

    program = lower_policies((f"policy{i}", p) for i, p in enumerate(parse_policies(POLICIES)))
    backend = CompiledBackend(program, mode=mode)
    u = EntityUID("U", "u")
    root = EntityUID("U", "root")
    doc = EntityUID("D", "d")
    act = EntityUID("Action", "a")
    facts = EntityFacts([Entity(u, {"level": 5}), Entity(root), Entity(doc, {"open": True})])
    # context.ok missing: the forbid errors (it does not apply), the permit applies.
    d = backend.decide(Request(u, act, doc, RecordValue()), facts)
    assert (d.allow, d.reasons, [p for p, _ in d.errors]) == (True, ["policy0"], ["policy1"])
    # context.ok false: the forbid applies (unless false) and overrides.
    d = backend.decide(Request(u, act, doc, RecordValue({"ok": False})), facts)
    assert (d.allow, d.reasons) == (False, ["policy1"])
    # root has no level: policy0 errors, policy2 applies.
    d = backend.decide(Request(root, act, doc, RecordValue({"ok": True})), facts)
    assert (d.allow, d.reasons, [p for p, _ in d.errors]) == (True, ["policy2"], ["policy0"])
    # a non-Bool condition is an error, never true.
    program = lower_policies(
        [("p", parse_policies("permit(principal,action,resource) when { 1 };")[0])]
    )
    d = CompiledBackend(program, mode=mode).decide(Request(u, act, doc, RecordValue()), facts)
    assert (d.allow, [p for p, _ in d.errors]) == (False, ["p"])
    assert "Bool" in d.errors[0][1].message
