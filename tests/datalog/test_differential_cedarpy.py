"""polang against cedarpy (the Rust engine) on generated scenarios.

Each example is a random schema, policy set (with template links), entity store and a few
requests, all valid for the schema (see ``strategies.py``). Both engines read the same
text and JSON through their ordinary front doors; per request the decision, the set of
determining policies and the set of erroring policy ids must be equal.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.ast import Policy, link_template
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID

from .strategies import Scenario, random_scenario, scenarios

cedarpy = pytest.importorskip("cedarpy")

_ERROR_ID = re.compile(r"while evaluating policy `([^`]+)`")


def _uid(j: dict[str, str] | None) -> EntityUID | None:
    return None if j is None else EntityUID(j["type"], j["id"])


def cedar_outcomes(sc: Scenario) -> list[tuple[str, set[str], set[str]]]:
    """(decision, reasons, error ids) per request from cedarpy, all parsed once."""
    schema = cedarpy.Schema.from_str(sc.schema.text())
    ps = cedarpy.PolicySet.from_str(sc.policies.text)
    if sc.policies.links:
        ps = ps.with_linked_batch(
            [
                {
                    "template_id": link.template,
                    "new_id": link.new_id,
                    "values": {
                        k: v
                        for k, v in (("?principal", link.principal), ("?resource", link.resource))
                        if v is not None
                    },
                }
                for link in sc.policies.links
            ]
        )
    return cedar_decide(ps, schema, sc.entities, sc.requests)


def cedar_decide(
    ps: Any, schema: Any, entities: list[dict[str, Any]], requests: list[dict[str, Any]]
) -> list[tuple[str, set[str], set[str]]]:
    """(decision, reasons, error ids) per request from cedarpy's ``PolicySet`` ``ps``."""
    ents = cedarpy.Entities.from_json_str(json.dumps(entities), schema)
    out = []
    for r in cedarpy.is_authorized_batch(requests, ps, ents, schema):
        decision = r.decision.value.lower()
        assert decision in ("allow", "deny"), f"cedarpy rejected a request: {r._authz_resp}"
        errors = set()
        for e in r.diagnostics.errors:
            m = _ERROR_ID.search(e)
            assert m is not None, f"cedarpy error without a policy id: {e}"
            errors.add(m.group(1))
        out.append((decision, set(r.diagnostics.reasons), errors))
    return out


def polang_authorizer(sc: Scenario, backend: str = "compiled") -> Authorizer:
    parsed = parse_policies(sc.policies.text)
    assert len(parsed) == len(sc.policies.ids)
    by_id: dict[str, Policy] = {}
    templates: dict[str, Policy] = {}
    for pid, p in zip(sc.policies.ids, parsed, strict=True):
        (templates if pid in sc.policies.templates else by_id)[pid] = p
    for link in sc.policies.links:
        by_id[link.new_id] = link_template(
            templates[link.template], _uid(link.principal), _uid(link.resource)
        )
    return Authorizer(by_id, backend=backend)


def polang_outcomes(sc: Scenario, authorizer: Authorizer) -> list[tuple[str, set[str], set[str]]]:
    return polang_decide(authorizer, sc.schema.text(), sc.entities, sc.requests)


def polang_decide(
    authorizer: Authorizer,
    schema_text: str,
    entities: list[dict[str, Any]],
    requests: list[dict[str, Any]],
) -> list[tuple[str, set[str], set[str]]]:
    """(decision, reasons, error ids) per request, the entities and requests read as JSON."""
    schema = parse_schema(schema_text)
    facts = EntityFacts(parse_entities(json.dumps(entities), schema))
    out = []
    for req in requests:
        action = parse_entity_uid_json(req["action"])
        d = authorizer.is_authorized(
            parse_entity_uid_json(req["principal"]),
            action,
            parse_entity_uid_json(req["resource"]),
            parse_context(req["context"], schema, action),
            facts,
        )
        out.append((d.decision, set(d.reasons), {e.policy_id for e in d.errors}))
    return out


def compare(sc: Scenario, backend: str = "compiled") -> list[str]:
    """Human-readable differences between the two engines (empty when they agree)."""
    want = cedar_outcomes(sc)
    authorizer = polang_authorizer(sc, backend)
    got = polang_outcomes(sc, authorizer)
    diffs = []
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        if w != g:
            diffs.append(
                f"request {i} {json.dumps(sc.requests[i])}:\n"
                f"  cedarpy: {w[0]} reasons={sorted(w[1])} errors={sorted(w[2])}\n"
                f"  polang ({backend}): {g[0]} reasons={sorted(g[1])} errors={sorted(g[2])}"
            )
    return diffs


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_same_decisions_reasons_and_errors_as_cedarpy(sc: Scenario) -> None:
    diffs = compare(sc)
    assert not diffs, "polang and cedarpy disagree\n" + "\n".join(diffs) + "\n" + sc.describe()


SWEEP_SEEDS = range(500)


def test_seeded_sweep_agrees_with_cedarpy() -> None:
    """Evenly spread random scenarios (every operator often); any failure names its seed,
    and ``random_scenario(seed).describe()`` replays it."""
    failures = []
    for seed in SWEEP_SEEDS:
        sc = random_scenario(seed)
        diffs = compare(sc)
        if diffs:
            failures.append(f"seed {seed}:\n" + "\n".join(diffs) + "\n" + sc.describe())
    assert not failures, f"{len(failures)} seeds disagree\n" + "\n\n".join(failures[:3])


def test_pydatalog_backend_agrees_with_cedarpy_on_a_sweep() -> None:
    """The reference backend on the same generated scenarios (fewer: it is slower)."""
    failures = []
    for seed in range(100):
        sc = random_scenario(10_000 + seed)
        diffs = compare(sc, "pydatalog")
        if diffs:
            failures.append(f"seed {10_000 + seed}:\n" + "\n".join(diffs) + "\n" + sc.describe())
    assert not failures, f"{len(failures)} seeds disagree\n" + "\n\n".join(failures[:3])
