"""A directory store shaped like Cedarling's published CI (GitHub Actions OIDC) demo.

That demo's store differs again from the multi-issuer-basic one:

- one issuer record per ``trusted-issuers/*.json`` file, with ``configuration_endpoint``
  and the issuer id taken from the file name;
- ``token_metadata`` keyed by the entity type name (``"CI::Workflow"``) rather than a
  token name;
- the token entity type declares its claims **required** (``repository: String``,
  ``ref: String``, ...), with ``iss: TrustedIssuer`` required too, and the actions'
  context has a required ``tokens: TokensContext`` beside a required ``current_time``;
- policies compare ``iss`` with ``CI::TrustedIssuer::"<issuer URL>"``: Cedarling names
  TrustedIssuer entities by issuer URL, polang (the spec) by issuer id, so such a policy
  is reported when the store loads.

Written here in that shape (nothing copied); the issuer is a loopback OpenID provider
and every token is signed by it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polang import Engine, TokenInput
from polang.store import PolicyStoreLoadError, PolicyStoreSource
from polang.store.tools import validate_store
from tokens.oidc_server import OidcProvider

SCHEMA = """namespace CI {
    type Url = {"host": String, "path": String, "protocol": String};
    entity TrustedIssuer = {"issuer_entity_id": Url};
    entity Workflow {
        iss:          TrustedIssuer,
        sub:          String,
        repository:   String,
        ref:          String,
        workflow:     String,
        environment?: String,
    } tags Set<String>;
    entity Workspace;
    type TokensContext = {
        ci_workflow?: Workflow,
        total_token_count: Long,
    };
    action Plan, Apply, Destroy appliesTo {
        principal: [Workflow],
        resource:  [Workspace],
        context: { current_time: Long, tokens: TokensContext }
    };
}
"""

PLAN = """@id("ci-plan")
permit (principal, action == CI::Action::"Plan", resource)
when {
    context.tokens has ci_workflow &&
    context.tokens.ci_workflow.iss == CI::TrustedIssuer::"{issuer_id}" &&
    context.tokens.ci_workflow.repository == "octo/app"
};
"""

APPLY = """@id("ci-apply-prod")
permit (principal, action == CI::Action::"Apply", resource == CI::Workspace::"production")
when {
    context.tokens has ci_workflow &&
    context.tokens.ci_workflow.iss == CI::TrustedIssuer::"{issuer_id}" &&
    context.tokens.ci_workflow.repository == "octo/app" &&
    context.tokens.ci_workflow.ref == "refs/heads/main" &&
    context.tokens.ci_workflow has environment &&
    context.tokens.ci_workflow.environment == "production"
};
"""


def write_store(root: Path, provider: OidcProvider, issuer_ref: str = "github-actions") -> Path:
    issuer = {
        "name": "CI",
        "description": "CI OIDC issuer; the name is the namespace",
        "configuration_endpoint": provider.discovery_url,
        "token_metadata": {
            "CI::Workflow": {
                "trusted": True,
                "entity_type_name": "CI::Workflow",
                "token_id": "jti",
                "required_claims": [],
            }
        },
    }
    files = {
        "metadata.json": json.dumps(
            {
                "polang_version": "4.0.0",
                "policy_store": {
                    "id": "ci0001",
                    "name": "CI",
                    "description": "",
                    "version": "1.0.0",
                },
            }
        ),
        "schema.polangschema": SCHEMA,
        "policies/plan.polang": PLAN.replace("{issuer_id}", issuer_ref),
        "policies/apply.polang": APPLY.replace("{issuer_id}", issuer_ref),
        "trusted-issuers/github-actions.json": json.dumps(issuer),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def gha(make_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_provider("", keys=("RS256",))


@pytest.fixture
def make_engine(client_ssl_context: ssl.SSLContext) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(store: Path, **props: Any) -> Engine:
        cfg = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_HTTP_MAX_RETRIES": 0, **props}
        e = Engine(cfg, ssl_context=client_ssl_context)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def workflow(provider: OidcProvider, **claims: Any) -> TokenInput:
    base = {
        "sub": "repo:octo/app:ref:refs/heads/main",
        "repository": "octo/app",
        "ref": "refs/heads/main",
        "workflow": ".github/workflows/deploy.yml",
    }
    base.update(claims)
    return TokenInput("CI::Workflow", provider.token(**base))


def ws(name: str) -> dict[str, Any]:
    return {"cedar_entity_mapping": {"entity_type": "CI::Workspace", "id": name}}


CTX = {"current_time": 1_776_826_458}


def test_the_ci_store_decides_with_required_claim_attributes(
    tmp_path: Path, gha: OidcProvider, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(write_store(tmp_path / "ci", gha))
    assert engine.store.warnings == ()
    plan = engine.authorize_multi_issuer([workflow(gha)], 'CI::Action::"Plan"', ws("dev"), CTX)
    assert (plan.decision, plan.response.diagnostics.reason) == (True, ["ci-plan"])
    apply = 'CI::Action::"Apply"'
    prod = engine.authorize_multi_issuer(
        [workflow(gha, environment="production")], apply, ws("production"), CTX
    )
    assert (prod.decision, prod.dropped_tokens) == (True, [])
    # no environment approval: the optional claim is absent and the policy's `has` guards it
    assert (
        engine.authorize_multi_issuer([workflow(gha)], apply, ws("production"), CTX).decision
        is False
    )
    other = workflow(gha, repository="evil/app", environment="production")
    assert engine.authorize_multi_issuer([other], apply, ws("production"), CTX).decision is False
    assert (
        engine.authorize_multi_issuer(
            [workflow(gha, environment="production")], 'CI::Action::"Destroy"', ws("dev"), CTX
        ).decision
        is False
    )


def test_a_token_lacking_a_required_claim_is_dropped_naming_it(
    tmp_path: Path, gha: OidcProvider, make_engine: Callable[..., Engine]
) -> None:
    """As in Cedarling, a claim attribute may be declared required; a token without it
    cannot be an entity of that type and is dropped (the decision uses the others)."""
    engine = make_engine(write_store(tmp_path / "ci", gha))
    r = engine.authorize_multi_issuer(
        [workflow(gha, workflow=None), workflow(gha, jti="second")],
        'CI::Action::"Plan"',
        ws("dev"),
        CTX,
    )
    assert r.decision is True
    [d] = r.dropped_tokens
    assert (d.index, d.kind) == (0, "entity_build_failed")
    assert "CI::Workflow: the schema requires `workflow`" in d.message
    # a claim of the wrong type for a required attribute names the claim too
    r = engine.authorize_multi_issuer(
        [workflow(gha, ref=["a", "b"]), workflow(gha, jti="ok")], 'CI::Action::"Plan"', ws("d"), CTX
    )
    [d] = r.dropped_tokens
    assert d.kind == "entity_build_failed" and "`ref`" in d.message


def test_a_policy_naming_the_issuer_by_url_is_reported(
    tmp_path: Path, gha: OidcProvider, make_engine: Callable[..., Engine]
) -> None:
    """Cedarling's id for the TrustedIssuer entity is the issuer URL; polang's is the issuer
    id (the spec). The store loads with a warning saying what to write; strict loading
    refuses it."""
    root = write_store(
        tmp_path / "ci", gha, issuer_ref=gha.issuer.upper().replace("HTTPS", "https") + "/"
    )
    engine = make_engine(root)
    kinds = {w.kind for w in engine.store.warnings}
    assert kinds == {"trusted_issuer_ref"}
    [first, second] = sorted(engine.store.warnings, key=lambda w: w.file)
    assert first.file.endswith("apply.polang") and second.file.endswith("plan.polang")
    assert 'write CI::TrustedIssuer::"github-actions"' in second.message
    assert "never true" in second.message
    # and indeed the policy does not match
    r = engine.authorize_multi_issuer([workflow(gha)], 'CI::Action::"Plan"', ws("dev"), CTX)
    assert r.decision is False
    with pytest.raises(PolicyStoreLoadError) as err:
        PolicyStoreSource.directory(root).load(strict=True)
    assert err.value.kinds == ["trusted_issuer_ref", "trusted_issuer_ref"]
    report = validate_store(root)
    assert report["valid"] is True
    assert [w["kind"] for w in report["warnings"]] == ["trusted_issuer_ref"] * 2
    assert validate_store(root, strict=True)["valid"] is False


def test_a_misspelt_issuer_id_is_reported_without_a_url_hint(
    tmp_path: Path, gha: OidcProvider, make_engine: Callable[..., Engine]
) -> None:
    engine = make_engine(write_store(tmp_path / "ci", gha, issuer_ref="github-action"))
    messages = [w.message for w in engine.store.warnings]
    assert len(messages) == 2
    assert all(
        'CI::TrustedIssuer::"github-action"' in m and "'github-actions'" in m for m in messages
    )
    assert not any("Cedarling" in m for m in messages)


def test_trusted_issuer_references_are_found_everywhere_and_bounded(
    tmp_path: Path, gha: OidcProvider
) -> None:
    """Scope, nested conditions, templates; a huge id is quoted cut; each (policy, id)
    pair is reported once; warnings stop at MAX_PROBLEMS."""
    root = write_store(tmp_path / "ci", gha)
    huge = "https://" + "h" * 100_000
    (root / "policies" / "more.polang").write_text(
        '@id("scope")\npermit (principal == CI::TrustedIssuer::"x", action, resource);\n'
        '@id("deep")\nforbid (principal, action, resource) when { '
        + "(" * 50
        + f'context.tokens.ci_workflow.iss == CI::TrustedIssuer::"{huge}"'
        + ")" * 50
        + ' || [CI::TrustedIssuer::"y", CI::TrustedIssuer::"y"].isEmpty() };\n',
        encoding="utf-8",
    )
    (root / "templates").mkdir()
    (root / "templates" / "t.polang").write_text(
        '@id("tpl")\npermit (principal == ?principal, action, resource) when '
        '{ CI::TrustedIssuer::"t" == CI::TrustedIssuer::"github-actions" };\n',
        encoding="utf-8",
    )
    store = PolicyStoreSource.directory(root).load()
    refs = [w for w in store.warnings if w.kind == "trusted_issuer_ref"]
    by_policy = {w.location: w.message for w in refs}
    assert {"scope", "deep", "tpl"} <= by_policy.keys()
    assert by_policy["deep"].count("TrustedIssuer") >= 1 and len(by_policy["deep"]) <= 1000
    assert "(100008 characters)" in by_policy["deep"] or "..." in by_policy["deep"]
    assert len([w for w in refs if w.location == "deep"]) == 2  # the huge one and "y", once
    (root / "policies" / "many.polang").write_text(
        "".join(
            f'@id("many{i}")\npermit (principal, action, resource == CI::TrustedIssuer::"z{i}");\n'
            for i in range(250)
        ),
        encoding="utf-8",
    )
    store = PolicyStoreSource.directory(root).load()
    assert len(store.warnings) == 201
    assert "more warnings (MAX_PROBLEMS)" in store.warnings[-1].message
