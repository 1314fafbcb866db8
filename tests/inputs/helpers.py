"""What the input-file tests share: a guard against hangs and real pipes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest


def guarded(fn: Callable[[], Any], *fifos: Path, seconds: float = 20) -> Any:
    """``fn()`` on a thread; a call still running after ``seconds`` fails the test (a
    hang). Returns the result or re-raises what ``fn`` raised."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised on the test's thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        for f in fifos:  # release a reader stuck in open() or read()
            with suppress(OSError):
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"the read did not end within {seconds} s (a hang)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@contextmanager
def pipe(data: bytes = b"", *, close: bool = True) -> Iterator[str]:
    """An anonymous pipe named as the shell names ``<(cmd)``: ``/dev/fd/N``. The writer
    wrote ``data`` and, with ``close``, closed its end."""
    r, w = os.pipe()
    try:
        if data:
            os.write(w, data)
        if close:
            os.close(w)
        yield f"/dev/fd/{r}"
    finally:
        os.close(r)
        if not close:
            os.close(w)


needs_dev_fd = pytest.mark.skipif(not os.path.exists("/dev/fd/0"), reason="no /dev/fd")
