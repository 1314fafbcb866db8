"""One bounded reader for every file that someone names: a store file, a configuration
file, local keys, a test file and the entities it names, and every input file of a
command (``--principal``, ``--resource``, ``--context``, ``--entities``, ``--policies``,
``--schema``).

A name can point at anything: ``/dev/zero`` or ``/dev/urandom`` (endless), a FIFO nobody
writes to (``open`` would wait forever), a directory, a huge file. Whatever it points at,
the reader ends in bytes (at most a limit of them) or in :class:`InputFileError`, which
names the file and the reason. What a name may point at:

- :func:`read_regular_file`: a regular file only (stores, configuration, keys, test
  files). Anything else is refused before it is opened (opening some devices acts) and
  checked again on the open handle (no race between the check and the open).
- :func:`read_input_file`: a regular file or a pipe (a command's input files: shell
  process substitution ``<(cmd)`` names a pipe, ``/dev/fd/63``; ``-`` is standard input).
  A pipe is read until its writer closes it, at most :data:`MAX_INPUT_PIPE_SECONDS` and
  :data:`MAX_INPUT_FILE_BYTES`; it is opened without blocking, so a named FIFO that no
  process writes to is never waited on: it ends at once, and a pipe that gave nothing
  is an error (an empty policy file would otherwise decide as "no policies").
"""

from __future__ import annotations

import errno
import os
import stat
import time

from polang.errors import PolangError

#: Largest input file of a command or a policy test file's ``entities:`` (the same bound
#: as a whole store, ``polang.store.archive.MAX_UNCOMPRESSED``).
MAX_INPUT_FILE_BYTES = 100 * 1024 * 1024

#: Longest a pipe (``-``, ``<(cmd)``, a named FIFO with a writer) is read: a writer that
#: neither writes nor closes cannot hold a command longer.
MAX_INPUT_PIPE_SECONDS = 60.0

#: The name that means standard input for :func:`read_input_file`.
STDIN = "-"

#: What a refused file is, when the reader's caller says nothing more specific.
NOT_REGULAR = "not a regular file"
#: Why :func:`read_input_file` refuses a device, a directory or a socket.
NOT_INPUT = "an input file must be a regular file or a pipe"
#: Why it refuses a pipe that ended without data (a FIFO nobody writes to is not waited on).
EMPTY_PIPE = "the pipe gave nothing to read (a FIFO is read only while a process writes to it)"

_CHUNK = 1 << 20

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class InputFileError(PolangError):
    """A named file was not read. ``path`` names it, ``kind`` says why in one word
    (``unreadable``, ``link``, ``not_regular``, ``too_large``, ``timeout``, ``empty``),
    ``reason`` in words; the message is ``[what ]path: reason``."""

    def __init__(self, path: str, kind: str, reason: str, *, what: str = "") -> None:
        self.path = path
        self.kind = kind
        self.reason = reason
        label = f"{what} {path}" if what else path
        super().__init__(f"{label}: {reason}")


def describe_mode(mode: int) -> str:
    """What a file that is not regular is, in words (for refusals)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return NOT_REGULAR


def read_regular_file(
    path: str | os.PathLike[str],
    limit: int,
    limit_name: str,
    *,
    follow_links: bool = True,
    refusal: str = NOT_REGULAR,
    what: str = "",
) -> bytes:
    """The bytes of a regular file, at most ``limit`` (called ``limit_name`` when hit).

    With ``follow_links`` (a file an operator names: mounted secrets and configurations
    are links) a link is followed; without it (a file inside a store) a link is refused.
    A FIFO, a device, a socket or a directory is refused with ``refusal`` as the reason.
    """
    name = _name(path)
    fd, st = _open_regular(path, name, follow_links, refusal, what)
    try:
        if st.st_size > limit:
            raise _too_big(name, limit, limit_name, what)
        return _read(fd, name, limit, limit_name, what, seconds=None)
    finally:
        os.close(fd)


def open_regular_file(
    path: str | os.PathLike[str], *, refusal: str = NOT_REGULAR, what: str = ""
) -> int:
    """A descriptor of a regular file (a link is followed) for a reader that is not
    Python (DuckDB reads the entity files through it): checked before the open and again
    on the open handle, as :func:`read_regular_file` checks; the caller closes it."""
    fd, _ = _open_regular(path, _name(path), True, refusal, what)
    return fd


def _open_regular(
    path: str | os.PathLike[str], name: str, follow: bool, refusal: str, what: str
) -> tuple[int, os.stat_result]:
    """Opened and checked on the handle (no race between the check and the open)."""
    fd = _open(path, name, follow, refusal, what, pipes=False)
    try:
        st = _fstat(fd, name, what)
        if not stat.S_ISREG(st.st_mode):
            raise _refused(name, st.st_mode, refusal, what)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_input_file(
    path: str | os.PathLike[str],
    *,
    what: str = "",
    limit: int | None = None,
    limit_name: str = "MAX_INPUT_FILE_BYTES",
    seconds: float | None = None,
) -> bytes:
    """A command's input file: a regular file or a pipe, ``-`` for standard input.

    At most ``limit`` bytes (default :data:`MAX_INPUT_FILE_BYTES`); a pipe for at most
    ``seconds`` (default :data:`MAX_INPUT_PIPE_SECONDS`). A link is followed (``<(cmd)``
    names ``/dev/fd/N``). A device (``/dev/zero``, a terminal), a directory or a socket
    is refused, and so is a pipe that gives nothing; standard input is read once (given
    to two options, the second finds it empty and says so).
    """
    limit = MAX_INPUT_FILE_BYTES if limit is None else limit
    seconds = MAX_INPUT_PIPE_SECONDS if seconds is None else seconds
    if os.fspath(path) == STDIN:
        return _read_stdin(limit, limit_name, seconds, what)
    name = _name(path)
    fd = _open(path, name, True, NOT_INPUT, what, pipes=True)
    try:
        st = _fstat(fd, name, what)
        if stat.S_ISREG(st.st_mode):
            if st.st_size > limit:
                raise _too_big(name, limit, limit_name, what)
            return _read(fd, name, limit, limit_name, what, seconds=None)
        if stat.S_ISFIFO(st.st_mode):
            data = _read(fd, name, limit, limit_name, what, seconds=seconds)
            if not data:  # no writer (not waited for), or a writer that wrote nothing
                raise InputFileError(name, "empty", EMPTY_PIPE, what=what)
            return data
        raise _refused(name, st.st_mode, NOT_INPUT, what)
    finally:
        os.close(fd)


def _read_stdin(limit: int, limit_name: str, seconds: float, what: str) -> bytes:
    """Standard input (descriptor 0, left open): a regular file or a pipe."""
    name = "standard input (-)"
    fd = 0
    st = _fstat(fd, name, what)
    if stat.S_ISREG(st.st_mode):
        data = _read(fd, name, limit, limit_name, what, seconds=None)
    elif stat.S_ISFIFO(st.st_mode):
        data = _read(fd, name, limit, limit_name, what, seconds=seconds)
    else:
        kind = "a terminal" if os.isatty(fd) else describe_mode(st.st_mode)
        raise InputFileError(
            name, "not_regular", f"{kind}: pipe or redirect the input into it", what=what
        )
    if not data:
        raise InputFileError(
            name,
            "empty",
            "nothing to read (standard input is read once: give - to one option only)",
            what=what,
        )
    return data


def _name(path: str | os.PathLike[str]) -> str:
    try:
        return os.fsdecode(path)
    except (TypeError, ValueError):
        return repr(path)


def _open(
    path: str | os.PathLike[str], name: str, follow: bool, refusal: str, what: str, pipes: bool
) -> int:
    """Open for reading without blocking; a file of a refused kind is not opened at all."""
    try:
        mode = os.stat(path, follow_symlinks=follow).st_mode
        if not (stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode))):
            raise _refused(name, mode, refusal, what)
        return os.open(path, _OPEN_FLAGS | (0 if follow else _NOFOLLOW))
    except ValueError as e:  # a NUL byte in the name
        raise InputFileError(name, "unreadable", f"cannot read: {e}", what=what) from None
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:  # replaced by a link since the stat
            raise InputFileError(name, "link", f"a symbolic link: {refusal}", what=what) from None
        raise _unreadable(name, e, what) from None


def _fstat(fd: int, name: str, what: str) -> os.stat_result:
    try:
        return os.fstat(fd)
    except OSError as e:
        raise _unreadable(name, e, what) from None


def _read(
    fd: int, name: str, limit: int, limit_name: str, what: str, *, seconds: float | None
) -> bytes:
    """At most ``limit`` bytes up to the end (a file that grows past it while it is read is
    refused too); with ``seconds`` (a pipe), waiting for data only that long in all."""
    deadline = None if seconds is None else time.monotonic() + seconds
    blocking = deadline is not None and os.get_blocking(fd)
    chunks: list[bytes] = []
    got = 0
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise _timeout(name, seconds, what)
            if blocking and not _wait(fd, deadline):  # standard input: never block in read
                raise _timeout(name, seconds, what)
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            except BlockingIOError:
                if deadline is None or not _wait(fd, deadline):
                    raise _timeout(name, seconds, what) from None
                continue
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:
                raise _too_big(name, limit, limit_name, what)
    except OSError as e:
        raise _unreadable(name, e, what) from None


def _wait(fd: int, deadline: float | None) -> bool:
    """Whether ``fd`` has data (or its end) before ``deadline``."""
    import select  # pipes only: a store or a configuration never waits

    left = 0.0 if deadline is None else deadline - time.monotonic()
    if left <= 0:
        return False
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)  # hang-up and errors are always reported
        return bool(poller.poll(max(1, int(left * 1000))))
    ready, _, _ = select.select([fd], [], [], left)
    return bool(ready)


def _refused(name: str, mode: int, refusal: str, what: str) -> InputFileError:
    kind = "link" if stat.S_ISLNK(mode) else "not_regular"
    return InputFileError(name, kind, f"{describe_mode(mode)}: {refusal}", what=what)


def _too_big(name: str, limit: int, limit_name: str, what: str) -> InputFileError:
    return InputFileError(name, "too_large", f"more than {limit} bytes ({limit_name})", what=what)


def _timeout(name: str, seconds: float | None, what: str) -> InputFileError:
    return InputFileError(
        name,
        "timeout",
        f"the pipe was not closed within {seconds or 0:g} s (MAX_INPUT_PIPE_SECONDS)",
        what=what,
    )


def _unreadable(name: str, e: OSError, what: str) -> InputFileError:
    return InputFileError(name, "unreadable", f"cannot read: {e.strerror or e}", what=what)


__all__ = [
    "EMPTY_PIPE",
    "MAX_INPUT_FILE_BYTES",
    "MAX_INPUT_PIPE_SECONDS",
    "NOT_INPUT",
    "NOT_REGULAR",
    "STDIN",
    "InputFileError",
    "describe_mode",
    "open_regular_file",
    "read_input_file",
    "read_regular_file",
]
