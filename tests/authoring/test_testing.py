"""Policy test files, their runs, and coverage checked against an independent oracle."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import polang.authoring.testing as testing
from inputs.helpers import guarded
from polang.analysis.explain import explain
from polang.analysis.trace import scope_constraint_text
from polang.authoring.testing import (
    Coverage,
    PolicyTestError,
    find_test_files,
    load_test_file,
    run_tests,
)
from polang.datalog.authorizer import Authorizer
from polang.inputs import files
from polang.language.format import format_expr
from polang.language.parser import parse_policies

from .gen import ACTIONS, make_case, random_context

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TESTS = REPO / "examples" / "tests"
STORE = REPO / "examples" / "stores" / "directory"


# -------------------------------------------------------------------- the example store


def test_the_example_store_policy_tests_pass() -> None:
    run = run_tests([EXAMPLE_TESTS])
    assert run.ok, "\n\n".join(r.report() for r in run.failed)
    assert run.passed == len(run.results) >= 10
    (cov,) = run.coverage.values()
    assert cov.never_applied == []
    assert cov.percent == 100.0
    d = run.to_dict()
    assert d["failed"] == 0 and d["coverage"]["percent"] == 100.0
    json.dumps(d)  # JSON-ready


# -------------------------------------------------------------------- the format


def write(tmp: Path, name: str, data: Any) -> Path:
    p = tmp / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), "utf-8")
    return p


def base_file(**case: Any) -> dict[str, Any]:
    c = {
        "name": "c",
        "principal": 'Acme::User::"alice"',
        "action": 'Acme::Action::"read"',
        "resource": 'Acme::Document::"roadmap"',
        "decision": "allow",
    }
    c.update(case)
    return {
        "store": str(STORE),
        "entities": list(
            load_test_file(EXAMPLE_TESTS / "directory.polangtest.yaml").entities or ()
        ),
        "cases": [c],
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[1, 2]", "a test file is a mapping"),
        ({"store": "x", "cases": [], "x": 1}, "unknown field 'x'"),
        ({"store": "x", "cases": []}, "`cases` must be a non-empty list"),
        ({"cases": [{}]}, "`store` must be a non-empty string"),
        ({"store": "x", "cases": [{"action": "a", "resource": "r"}]}, "cases[0]: `decision`"),
        ({"store": "x", "cases": [{"decision": "allow", "resource": "r"}]}, "`action`"),
        (
            {"store": "x", "cases": [{"decision": "deny", "action": "a", "resource": 3}]},
            "`resource` must be an entity reference",
        ),
        (
            {
                "store": "x",
                "cases": [{"decision": "deny", "action": "a", "resource": "r", "reasons": "p"}],
            },
            "`reasons` must be a list of policy ids",
        ),
        (
            {
                "store": "x",
                "cases": [
                    {"decision": "deny", "action": "a", "resource": "r", "name": "n"},
                    {"decision": "deny", "action": "a", "resource": "r", "name": "n"},
                ],
            },
            "two cases are named 'n'",
        ),
        (
            {
                "store": "x",
                "cases": [
                    {
                        "decision": "deny",
                        "action": "a",
                        "resource": "r",
                        "principal": "p",
                        "tokens": [{"mapping": "m", "payload": "t"}],
                    }
                ],
            },
            "a principal or tokens, not both",
        ),
    ],
)
def test_malformed_files_name_the_place(tmp_path: Path, data: Any, message: str) -> None:
    p = write(tmp_path, "t.polangtest.json", data)
    with pytest.raises(PolicyTestError, match=None) as ei:
        load_test_file(p)
    assert message in str(ei.value)
    assert str(p) in str(ei.value)


def test_yaml_is_strict_and_sizes_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = write(tmp_path, "a.polangtest.yaml", "a: &x [1]\nb: *x\n")
    with pytest.raises(PolicyTestError, match="anchors"):
        load_test_file(p)
    p = write(tmp_path, "b.polangtest.yaml", "[" * 5000)
    with pytest.raises(PolicyTestError):
        load_test_file(p)
    p = write(tmp_path, "c.polangtest.json", "[" * 100000)
    with pytest.raises(PolicyTestError, match="MAX_JSON_DEPTH"):
        load_test_file(p)
    monkeypatch.setattr(testing, "MAX_TEST_FILE_BYTES", 10)
    p = write(tmp_path, "d.polangtest.json", {"store": "xxxxxxxxxxxx"})
    with pytest.raises(PolicyTestError, match="MAX_TEST_FILE_BYTES"):
        load_test_file(p)
    monkeypatch.setattr(testing, "MAX_TEST_FILE_BYTES", 10_000)
    monkeypatch.setattr(testing, "MAX_CASES_PER_FILE", 1)
    c = {"decision": "deny", "action": "a", "resource": "r"}
    p = write(tmp_path, "e.polangtest.json", {"store": "x", "cases": [c, {**c, "name": "2"}]})
    with pytest.raises(PolicyTestError, match="MAX_CASES_PER_FILE"):
        load_test_file(p)


def test_find_test_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    a = write(tmp_path / "sub", "a.polangtest.yml", "x")
    b = write(tmp_path, "b.polangtest.json", "x")
    write(tmp_path, "other.yaml", "x")
    explicit = write(tmp_path, "named.yaml", "x")
    assert find_test_files([tmp_path]) == [b, a]
    assert find_test_files([explicit, tmp_path]) == [explicit, b, a]
    with pytest.raises(PolicyTestError, match="no such file"):
        find_test_files([tmp_path / "missing"])
    with pytest.raises(PolicyTestError, match="no test files found"):
        (tmp_path / "empty").mkdir()
        run_tests([tmp_path / "empty"])


def test_failures_say_what_was_expected_and_explain_what_happened(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "f.polangtest.json",
        {
            **base_file(),
            "cases": [
                {**base_file()["cases"][0], "name": "wrong decision", "decision": "deny"},
                {**base_file()["cases"][0], "name": "wrong reasons", "reasons": ["x"]},
                {
                    **base_file()["cases"][0],
                    "name": "wrong errors",
                    "principal": None,
                    "decision": "deny",
                    "errors": [],
                },
                {**base_file()["cases"][0], "name": "rejected", "action": 'Acme::Action::"nope"'},
                {**base_file()["cases"][0], "name": "right"},
            ],
        },
    )
    run = run_tests([p])
    by = {r.case.name: r for r in run.results}
    assert by["right"].passed and not run.ok and run.passed == 1
    assert by["wrong decision"].failures == [
        'expected deny, got allow (allowed by permit "org-members-read")'
    ]
    assert "DENY" not in by["wrong decision"].report()
    assert "ALLOW" in by["wrong decision"].report()  # the explanation tree follows
    assert by["wrong reasons"].failures == ["expected reasons ['x'], got ['org-members-read']"]
    assert by["wrong errors"].failures == ["expected errors [], got ['owner-full-access']"]
    assert by["rejected"].failures[0].startswith("the request was rejected: ")
    d = run.to_dict()
    failed = [r for r in d["results"] if not r["passed"]]
    assert all("failures" in r for r in failed)
    assert "explanation" in failed[0]


def test_a_bad_store_is_a_test_error(tmp_path: Path) -> None:
    data = base_file()
    data["store"] = str(tmp_path / "nowhere")
    p = write(tmp_path, "s.polangtest.json", data)
    with pytest.raises(PolicyTestError, match="store"):
        run_tests([p])


# -------------------------------------------------------------------- coverage vs oracle


def _oracle(
    auth: Authorizer,
    principal: Any,
    action: Any,
    resource: Any,
    ctx: Any,
    facts: Any,
    probes: Authorizer,
    clauses: dict[str, list[tuple[str, str]]],
) -> dict[str, Any]:
    """Per policy: scope held, each clause's body value (true/false/error) as evaluated in
    order, computed from probe policies (one per scope, one per clause body) instead of
    explanations."""
    d = probes.is_authorized(principal, action, resource, ctx, facts)
    applying = set(d.reasons)
    erroring = {e.policy_id for e in d.errors}
    out: dict[str, Any] = {}
    for pid, cls in clauses.items():
        scope = f"scope::{pid}" in applying
        seen: list[str] = []
        verdict = "out_of_scope"
        if scope:
            verdict = "applies"
            for i, (kind, _text) in enumerate(cls):
                probe = f"body::{pid}::{i}"
                v = "true" if probe in applying else "error" if probe in erroring else "false"
                seen.append(v)
                if v == "error":
                    verdict = "error"
                    break
                if (v == "true") != (kind == "when"):
                    verdict = "not_satisfied"
                    break
        out[pid] = (verdict, seen)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_coverage_equals_an_independent_oracle(seed: int) -> None:
    case = make_case(seed)
    auth = case.authorizer
    probes_text = []
    clauses: dict[str, list[tuple[str, str]]] = {}
    for pid, pol in auth.policies.items():
        scope = ", ".join(
            scope_constraint_text(c, v)
            for c, v in (
                (pol.principal, "principal"),
                (pol.action, "action"),
                (pol.resource, "resource"),
            )
        )
        probes_text.append(f'@id("scope::{pid}") permit({scope});')
        clauses[pid] = []
        for i, c in enumerate(pol.conditions):
            body = format_expr(c.body)
            clauses[pid].append((c.kind, body))
            probes_text.append(
                f'@id("body::{pid}::{i}") permit(principal, action, resource) when {{ {body} }};'
            )
    probes = Authorizer({p.policy_id or "": p for p in parse_policies("\n".join(probes_text))})
    cov = Coverage("generated", SimpleNamespace(authorizer=auth))  # type: ignore[arg-type]
    expected: dict[str, dict[str, int]] = {
        pid: {"in_scope": 0, "applied": 0, "determining": 0, "errored": 0} for pid in clauses
    }
    expected_clauses: dict[tuple[str, int], list[int]] = {
        (pid, i): [0, 0, 0] for pid, cls in clauses.items() for i in range(len(cls))
    }
    rng = random.Random(seed)
    for _ in range(30):
        p, a, r = rng.choice(case.principals), rng.choice(ACTIONS), rng.choice(case.resources)
        ctx = random_context(rng)
        ex = explain(auth, p, a, r, ctx, case.facts)
        cov.add(ex)
        decision = auth.is_authorized(p, a, r, ctx, case.facts)
        for pid, (verdict, seen) in _oracle(
            auth, p, a, r, ctx, case.facts, probes, clauses
        ).items():
            e = expected[pid]
            e["in_scope"] += verdict != "out_of_scope"
            e["applied"] += verdict == "applies"
            e["errored"] += verdict == "error"
            e["determining"] += pid in decision.reasons
            for i, v in enumerate(seen):
                expected_clauses[(pid, i)][("true", "false", "error").index(v)] += 1
    for pid, pc in cov.policies.items():
        got = {k: getattr(pc, k) for k in ("in_scope", "applied", "determining", "errored")}
        assert got == expected[pid], pid
        for i, cc in enumerate(pc.clauses):
            assert [cc.true, cc.false, cc.error] == expected_clauses[(pid, i)], (pid, i)
            assert cc.line and cc.file == f"seed{seed}.polang"
    covered, total = cov.items
    assert total == sum(1 + 2 * len(c) for c in clauses.values())
    assert covered == sum(v["applied"] > 0 for v in expected.values()) + sum(
        (t > 0) + (f > 0) for t, f, _e in expected_clauses.values()
    )
    table = cov.table(width=200)
    for pid in cov.never_applied:
        assert pid in table


# -------------------------------------------------------------------- files that are not files

#: names a test run may be given, and what the error must say about each
NOT_FILES = {
    "dev-zero": "a device: not a regular file",
    "dev-urandom": "a device: not a regular file",
    "fifo": "a FIFO (named pipe): not a regular file",
    "directory": "a directory: not a regular file",
    "missing": "cannot read: No such file",
    "too-big": "more than 64 bytes (",
}


def _not_a_file(name: str, tmp: Path) -> Path:
    if name.startswith("dev-"):
        return Path("/dev/" + name[4:])
    path = tmp / f"{name}.json"
    if name == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading would wait forever
    elif name == "directory":
        path.mkdir()
    elif name == "too-big":
        path.write_text(" " * 64 + "[]")
    return path


@pytest.mark.parametrize("target", list(NOT_FILES))
def test_a_test_files_entities_that_are_not_a_file_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """``entities:`` naming /dev/zero was a MemoryError, a FIFO a hang: now the one bounded
    reader's refusal, naming the test file, the entities file and the reason."""
    bad = _not_a_file(target, tmp_path)
    p = write(tmp_path, "t.polangtest.json", {**base_file(), "entities": str(bad)})
    with monkeypatch.context() as m:
        m.setattr(files, "MAX_INPUT_FILE_BYTES", 64)
        with pytest.raises(PolicyTestError) as e:
            guarded(lambda: run_tests([p]), bad)
    assert str(e.value).startswith(f"{p}: entities {bad}: {NOT_FILES[target]}"), e.value
    if target == "too-big":
        assert "MAX_INPUT_FILE_BYTES" in str(e.value)
    ok = write(tmp_path, "people.json", base_file()["entities"])
    good = write(tmp_path, "u.polangtest.json", {**base_file(), "entities": ok.name})
    assert guarded(lambda: run_tests([good])).ok  # a normal file still works


@pytest.mark.parametrize("target", [t for t in NOT_FILES if t != "directory"])
def test_a_test_file_that_is_not_a_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """A path given to a run that is not a directory (searched) is read as a test file:
    /dev/zero and FIFOs are refused, not waited on or read without end."""
    monkeypatch.setattr(testing, "MAX_TEST_FILE_BYTES", 64)
    bad = _not_a_file(target, tmp_path)
    with pytest.raises(PolicyTestError) as e:
        guarded(lambda: run_tests([bad]), bad)
    if target == "missing":
        assert str(e.value) == f"{bad}: no such file or directory"
    else:
        assert str(e.value).startswith(f"{bad}: {NOT_FILES[target]}"), e.value
    if target == "too-big":
        assert "MAX_TEST_FILE_BYTES" in str(e.value)


@pytest.mark.parametrize("target", ["dev-zero", "fifo", "missing"])
def test_a_test_files_store_that_is_not_a_file_is_an_error(tmp_path: Path, target: str) -> None:
    """``store:`` goes through the store loader, which refuses the same names (a link named
    like a legacy store file is followed to what it points at)."""
    bad = _not_a_file(target, tmp_path)
    store = tmp_path / "store.json"
    if target == "dev-zero":
        store.symlink_to(bad)
    elif target == "fifo":
        os.rename(bad, store)
    p = write(tmp_path, "t.polangtest.json", {**base_file(), "store": str(store)})
    with pytest.raises(PolicyTestError, match=rf"^{p}: store {store}: policy store") as e:
        guarded(lambda: run_tests([p]), store)
    reason = {"dev-zero": "a device", "fifo": "fifo", "missing": "no such file"}[target]
    assert reason in str(e.value).lower()
