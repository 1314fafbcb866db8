"""The one bounded file reader (``polang.inputs.files``) against real files: devices,
FIFOs made with ``os.mkfifo``, pipes, directories, links, missing and oversized files.
Every read that could hang runs under ``guarded`` (``inputs.helpers``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inputs.helpers import guarded, needs_dev_fd, pipe
from polang.errors import PolangError
from polang.inputs import files
from polang.inputs.files import InputFileError, read_input_file, read_regular_file

LIMIT = 1024


# ---------------------------------------------------------------- what every reader refuses


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("reader", ["regular", "input"])
def test_an_endless_device_is_refused_before_it_is_read(device: str, reader: str) -> None:
    read = _reader(reader)
    with pytest.raises(InputFileError, match=f"^{device}: a device: ") as e:
        guarded(lambda: read(device))
    assert e.value.kind == "not_regular" and e.value.path == device
    assert isinstance(e.value, PolangError)


@pytest.mark.parametrize("reader", ["regular", "input"])
def test_a_link_to_a_device_is_refused_too(tmp_path: Path, reader: str) -> None:
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputFileError, match=r"zero\.json: a device"):
        guarded(lambda: _reader(reader)(link))


@pytest.mark.parametrize("reader", ["regular", "input"])
def test_a_directory_a_missing_file_and_a_nul_byte(tmp_path: Path, reader: str) -> None:
    read = _reader(reader)
    with pytest.raises(InputFileError, match=r": a directory: ") as e:
        read(tmp_path)
    assert e.value.kind == "not_regular"
    with pytest.raises(InputFileError, match=r"missing\.json: cannot read: No such file") as e:
        read(tmp_path / "missing.json")
    assert e.value.kind == "unreadable"
    with pytest.raises(InputFileError, match="null byte"):
        read("a\x00b")


@pytest.mark.parametrize("reader", ["regular", "input"])
def test_a_file_over_the_limit_names_the_limit(tmp_path: Path, reader: str) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * (LIMIT + 1))
    with pytest.raises(InputFileError, match=rf"big\.json: more than {LIMIT} bytes \(LIM\)") as e:
        _reader(reader)(big)
    assert e.value.kind == "too_large"
    big.write_bytes(b"x" * LIMIT)  # the limit itself is allowed
    assert _reader(reader)(big) == b"x" * LIMIT


@pytest.mark.parametrize("reader", ["regular", "input"])
def test_a_regular_file_and_a_link_to_one_are_read(tmp_path: Path, reader: str) -> None:
    f = tmp_path / "a.json"
    f.write_bytes(b'{"a": 1}')
    link = tmp_path / "mounted.json"
    link.symlink_to(f)  # mounted secrets and configurations are links
    assert _reader(reader)(f) == _reader(reader)(link) == b'{"a": 1}'


def test_without_following_links_a_link_is_refused_and_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root:x:0:0")
    link = tmp_path / "link.polang"
    link.symlink_to(secret)
    with pytest.raises(InputFileError, match="a symbolic link: stores hold files") as e:
        read_regular_file(link, LIMIT, "LIM", follow_links=False, refusal="stores hold files")
    assert e.value.kind == "link" and "root:" not in str(e.value)


def test_the_message_names_what_the_file_is_for(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"^--context /dev/zero: a device: an input file"):
        read_input_file("/dev/zero", what="--context")


# ---------------------------------------------------------------- FIFOs and pipes


def test_a_fifo_is_refused_by_the_regular_reader_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # no writer: a blocking open would wait forever
    with pytest.raises(InputFileError, match=r"config\.json: a FIFO \(named pipe\): not a regul"):
        guarded(lambda: read_regular_file(fifo, LIMIT, "LIM"), fifo)


def test_a_fifo_nobody_writes_to_is_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "context.json"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match=r"context\.json: the pipe gave nothing") as e:
        guarded(lambda: read_input_file(fifo), fifo)
    assert e.value.kind == "empty"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_fifo_with_a_writer_is_read_to_its_end(tmp_path: Path) -> None:
    fifo = tmp_path / "entities.json"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that is there first (Linux opens it at once)
    os.write(writer, b"[1, 2]")
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(v=read_input_file(fifo)), daemon=True)
    t.start()
    try:
        _wait_until_opened_twice(fifo)  # the reader holds it: the writer may leave now
    finally:
        os.close(writer)
    t.join(20)
    assert not t.is_alive() and box == {"v": b"[1, 2]"}


def test_a_fifo_whose_writer_never_closes_ends_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "MAX_INPUT_PIPE_SECONDS", 0.2)
    fifo = tmp_path / "slow.json"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)
    try:
        os.write(writer, b"{")
        with pytest.raises(InputFileError, match=r"not closed within 0\.2 s \(MAX_INPUT_PIPE_SEC"):
            guarded(lambda: read_input_file(fifo), fifo)
    finally:
        os.close(writer)


@needs_dev_fd
def test_a_pipe_is_read_with_the_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with pipe(b'{"mfa": true}') as name:  # what --context <(cmd) names
        assert guarded(lambda: read_input_file(name)) == b'{"mfa": true}'
    monkeypatch.setattr(files, "MAX_INPUT_FILE_BYTES", 8)
    with pipe(b"x" * 100) as name, pytest.raises(InputFileError, match="MAX_INPUT_FILE_BYTES"):
        guarded(lambda: read_input_file(name))
    with pipe(close=False) as name:  # a writer that never writes: the deadline ends it
        monkeypatch.setattr(files, "MAX_INPUT_PIPE_SECONDS", 0.1)
        with pytest.raises(InputFileError, match="MAX_INPUT_PIPE_SECONDS"):
            guarded(lambda: read_input_file(name))


@needs_dev_fd
def test_the_regular_reader_refuses_a_pipe() -> None:
    with pipe(b"{}") as name, pytest.raises(InputFileError, match="FIFO"):
        guarded(lambda: read_regular_file(name, LIMIT, "LIM"))


# ---------------------------------------------------------------- standard input


STDIN_PROBE = (
    "import sys\n"
    "from polang.inputs.files import InputFileError, read_input_file\n"
    "try:\n"
    "    for _ in range(int(sys.argv[1])):\n"
    "        sys.stdout.write(read_input_file('-', what='--context').decode())\n"
    "except InputFileError as e:\n"
    "    sys.stdout.write(f'error: {e}')\n"
)


def _stdin(stdin: Any, times: int = 1, data: bytes | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", STDIN_PROBE, str(times)],
        stdin=stdin,
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def test_dash_is_standard_input_a_pipe_or_a_file(tmp_path: Path) -> None:
    assert _stdin(None, data=b'{"a": 1}') == '{"a": 1}'
    f = tmp_path / "ctx.json"
    f.write_text('{"b": 2}')
    with f.open("rb") as fh:
        assert _stdin(fh) == '{"b": 2}'


def test_standard_input_is_read_once() -> None:
    out = _stdin(None, times=2, data=b"{}")
    assert out == "{}error: --context standard input (-): nothing to read (standard input is " \
        "read once: give - to one option only)"  # fmt: skip


def test_standard_input_from_a_device_or_a_terminal_is_refused() -> None:
    with open("/dev/zero", "rb") as zero:
        assert _stdin(zero) == "error: --context standard input (-): a device: pipe or " \
            "redirect the input into it"  # fmt: skip
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    try:
        assert "standard input (-): a terminal: pipe or redirect" in _stdin(follower)
    finally:
        os.close(leader)
        os.close(follower)


# ---------------------------------------------------------------- helpers


def _reader(kind: str) -> Callable[[Any], bytes]:
    if kind == "regular":
        return lambda p: read_regular_file(p, LIMIT, "LIM")
    return lambda p: read_input_file(p, limit=LIMIT, limit_name="LIM")


def _wait_until_opened_twice(fifo: Path, seconds: float = 20) -> None:
    """Until two descriptors of this process name ``fifo`` (the writer's and the reader's)."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                n += os.readlink(f"/proc/self/fd/{fd}") == str(fifo)
        if n >= 2:
            return
        time.sleep(0.01)
    pytest.fail("the reader never opened the FIFO")
