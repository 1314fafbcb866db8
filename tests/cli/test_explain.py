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


def test_explain_checks_the_request_as_authorize_does(capsys: Capsys) -> None:
    """An undeclared action or principal type is exit 2 with authorize's own message,
    not a confident DENY."""
    alice = str(REPO / "examples/requests/alice.json")
    roadmap = str(REPO / "examples/requests/roadmap.json")
    store = str(REPO / "examples/stores/directory")
    for action, principal in (
        ('Acme::Action::"reed"', alice),
        ('Acme::Action::"read"', 'Acme::Org::"acme"'),  # a store entity; not a principal type
    ):
        common = ["--store", store, "--action", action, "--resource", roadmap]
        expected = run(capsys, "authorize", *common, "--principal", principal)
        assert expected[:2] == (2, "") and "does not match the schema" in expected[2]
        got = run(capsys, "explain", *common, "--principal", principal)
        assert got == expected


def test_explain_takes_entity_files_and_references_alike(capsys: Capsys) -> None:
    files = [
        str(REPO / "examples/requests/alice.json"),
        str(REPO / "examples/requests/roadmap.json"),
    ]
    common = [
        "--store",
        str(REPO / "examples/stores/directory"),
        "--action",
        'Acme::Action::"read"',
    ]
    by_file = run(capsys, "explain", *common, "--principal", files[0], "--resource", files[1])
    by_ref = run(
        capsys,
        "explain",
        *common,
        "--entities",
        *files,
        "--principal",
        'Acme::User::"alice"',
        "--resource",
        'Acme::Document::"roadmap"',
    )
    assert by_file == by_ref
    assert by_file[0] == 0 and by_file[1].startswith("ALLOW")
