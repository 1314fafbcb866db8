"""``polang explain``."""

from __future__ import annotations

from .helpers import (
    REPO,
    Capsys,
    run,
)


def test_explain_takes_single_entity_files(capsys: Capsys) -> None:
    repo = REPO
    code, out, _ = run(
        capsys,
        "explain",
        "--store",
        str(repo / "examples/stores/directory"),
        "--entities",
        str(repo / "examples/requests/alice.json"),
        str(repo / "examples/requests/roadmap.json"),
        "--principal",
        'Acme::User::"alice"',
        "--action",
        'Acme::Action::"edit"',
        "--resource",
        'Acme::Document::"roadmap"',
    )
    assert code == 1  # deny, as `polang authorize`
    assert "DENY" in out
    assert "principal.clearance >= 3" in out
