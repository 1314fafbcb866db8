"""Every input file a command names goes through the one bounded reader
(``polang.cli._common.read_text`` -> ``polang.inputs``): ``/dev/zero``, ``/dev/urandom``,
a FIFO (``os.mkfifo``), a directory, a missing file and a file over
``MAX_INPUT_FILE_BYTES`` end in status 2 with one ``error:`` line naming the file and the
reason (never the deny status 1, never a ``MemoryError`` or a hang); a normal file, a
pipe (``<(cmd)``) and ``-`` (standard input) still work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inputs.helpers import guarded, needs_dev_fd, pipe
from polang.inputs import files

from .helpers import READ, REPO, REQUESTS, STORE, Capsys, run

SLOT = "<FILE>"
S = str(STORE)
ALICE = str(REQUESTS / "alice.json")
DOC = str(REQUESTS / "roadmap.json")
CTX = str(REQUESTS / "office-network.json")
POLICIES = str(STORE / "policies" / "documents.polang")
SCHEMA = str(STORE / "schema.polangschema")
ALICE_REF = 'Acme::User::"alice"'
QUERY = ["--store", S, "--action", READ]
AUTHORIZE = ["authorize", *QUERY]
LOOSE = ["--action", READ, "--principal", ALICE, "--resource", DOC]

#: every option (and positional) that names an input file: the command line with the
#: file in SLOT, and a normal file for it
OPTIONS: dict[str, tuple[list[str], str]] = {
    "authorize --principal": ([*AUTHORIZE, "--resource", DOC, "--principal", SLOT], ALICE),
    "authorize --resource": ([*AUTHORIZE, "--principal", ALICE, "--resource", SLOT], DOC),
    "authorize --context FILE": ([*AUTHORIZE, "--resource", DOC, "--context", SLOT], CTX),
    "authorize --context @FILE": ([*AUTHORIZE, "--resource", DOC, "--context", "@" + SLOT], CTX),
    "explain --entities": (
        ["explain", *QUERY, "--principal", ALICE_REF, "--resource", DOC, "--entities", SLOT],
        ALICE,
    ),
    "explain --policies": (["explain", "--policies", SLOT, "--schema", SCHEMA, *LOOSE], POLICIES),
    "explain --schema": (["explain", "--policies", POLICIES, "--schema", SLOT, *LOOSE], SCHEMA),
    "who-can --entities": (
        ["who-can", *QUERY, "--resource", DOC, "--context", "{}", "--entities", SLOT],
        ALICE,
    ),
    "what-can --principal": (
        ["what-can", "--store", S, "--context", "{}", "--principal", SLOT],
        ALICE,
    ),
    "matrix --context": (["matrix", *QUERY, "--context", SLOT], CTX),
    "diff --entities": (["diff", "--store", S, "--context", "{}", "--entities", SLOT], ALICE),
    "diff --context": (["diff", "--store", S, "--entities", ALICE, "--context", SLOT], CTX),
    "validate FILE": (["validate", "--schema", SCHEMA, SLOT], POLICIES),
    "validate --schema": (["validate", "--schema", SLOT, POLICIES], SCHEMA),
    "rules FILE": (["rules", SLOT], POLICIES),
    "rules --schema": (["rules", POLICIES, "--schema", SLOT], SCHEMA),
}

#: hostile targets and what the error line must say about each
TARGETS = {
    "dev-zero": "a device",
    "dev-urandom": "a device",
    "fifo": "the pipe gave nothing to read",
    "directory": "a directory",
    "missing": "no such file",
    "too-big": "MAX_INPUT_FILE_BYTES",
}
BIG_LIMIT = 64 * 1024  # far above every example file


def _target(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    if name.startswith("dev-"):
        return "/dev/" + name[4:]
    path = tmp_path / f"{name}.json"
    if name == "fifo":
        os.mkfifo(path)  # no writer
    elif name == "directory":
        path.mkdir()
    elif name == "too-big":
        monkeypatch.setattr(files, "MAX_INPUT_FILE_BYTES", BIG_LIMIT)
        path.write_bytes(b" " * BIG_LIMIT + b"{}")
    return str(path)


def _run(capsys: Capsys, argv: list[str], value: str, *fifos: Path) -> tuple[int, str, str]:
    args = [a.replace(SLOT, value) for a in argv]
    result: tuple[int, str, str] = guarded(lambda: run(capsys, *args), *fifos)
    return result


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("option", list(OPTIONS))
def test_an_input_file_that_is_not_a_file_is_an_error_not_a_deny(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, target: str
) -> None:
    argv, _ = OPTIONS[option]
    value = _target(target, tmp_path, monkeypatch)
    fifos = [Path(value)] if target == "fifo" else []
    code, out, err = _run(capsys, argv, value, *fifos)
    assert code == 2, (code, out, err)
    assert out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert value in err and TARGETS[target].lower() in err.lower(), err
    assert "Traceback" not in err and "MemoryError" not in err


@pytest.mark.parametrize("option", list(OPTIONS))
def test_a_normal_file_still_works(capsys: Capsys, tmp_path: Path, option: str) -> None:
    argv, normal = OPTIONS[option]
    copy = tmp_path / Path(normal).name  # a copy: no option reads the repository's file only
    shutil.copyfile(normal, copy)
    code, _, err = _run(capsys, argv, str(copy))
    assert code in (0, 1) and err == "", err


@needs_dev_fd
def test_a_pipe_is_an_input_file(capsys: Capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--principal <(cmd)`` names ``/dev/fd/N``, a pipe: read until its writer closes it,
    within MAX_INPUT_PIPE_SECONDS (a writer that never closes is an error, not a hang)."""
    argv, _ = OPTIONS["authorize --principal"]
    with pipe(Path(ALICE).read_bytes()) as name:
        code, out, err = _run(capsys, argv, name)
    assert (code, out.splitlines()[0]) == (0, "ALLOW"), err
    monkeypatch.setattr(files, "MAX_INPUT_PIPE_SECONDS", 0.2)
    with pipe(b"{", close=False) as name:
        code, out, err = _run(capsys, argv, name)
    assert code == 2 and out == "", err
    assert f"principal {name}: the pipe was not closed within 0.2 s (MAX_INPUT_PIPE_SECONDS)" in err


def _polang(*argv: str, stdin: bytes | None = None, shell: bool = False) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "polang", *argv]
    if shell:  # real process substitution: bash names the pipes /dev/fd/N
        cmd = ["bash", "-c", argv[0]]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120, cwd=REPO)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_process_substitution_and_standard_input_work_for_real() -> None:
    py = f"{sys.executable} -m polang"
    code, out, err = _polang(
        f"{py} authorize --store {S} --action '{READ}' --resource <(cat {DOC}) "
        f"--principal <(cat {ALICE}) --context <(cat {CTX})",
        shell=True,
    )
    assert (code, out.splitlines()[:1]) == (0, ["ALLOW"]), err
    code, out, err = _polang(*AUTHORIZE, "--resource", DOC, "--principal", "-",
                             stdin=Path(ALICE).read_bytes())  # fmt: skip
    assert (code, out.splitlines()[:1]) == (0, ["ALLOW"]), err


def test_standard_input_is_read_once_and_never_a_device() -> None:
    code, out, err = _polang(*AUTHORIZE, "--resource", "-", "--principal", "-",
                             stdin=Path(DOC).read_bytes())  # fmt: skip
    assert (code, out) == (2, ""), err
    assert "error: principal standard input (-): nothing to read (standard input is read " \
        "once: give - to one option only)" in err  # fmt: skip
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            [sys.executable, "-m", "polang", *AUTHORIZE, "--resource", DOC, "--principal", "-"],
            stdin=zero,
            capture_output=True,
            timeout=120,
        )
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert b"principal standard input (-): a device" in proc.stderr
