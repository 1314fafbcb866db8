"""``.parc`` archives: a ZIP with the store at its root, read in memory, never unpacked.

An archive may come from anywhere (a URL, a caller's bytes), so it is treated as hostile:
paths that could escape a folder, links, encrypted entries, duplicate names, too many
entries or too much data are refused before any entry is trusted.
"""

from __future__ import annotations

import io
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from polang.errors import PolicyStoreError
from polang.inputs.fields import show
from polang.inputs.problems import Problems

MAX_ENTRIES = 10_000
MAX_UNCOMPRESSED = 100 * 1024 * 1024
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

_DRIVE = re.compile(r"^[A-Za-z]:")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def unsafe_name_reason(name: str) -> str | None:
    """Why an entry name is unsafe, or ``None`` when it is a plain relative path."""
    if not name:
        return "an empty entry name"
    if "\\" in name:
        return "a backslash in the entry name"
    if name.startswith("/") or _DRIVE.match(name):
        return "an absolute path"
    if "\x00" in name:
        return "a NUL character in the entry name"
    parts = name.rstrip("/").split("/")
    if any(p == ".." for p in parts):
        return "a '..' path segment"
    if any(p in ("", ".") for p in parts):
        return "an empty or '.' path segment"
    return None


def read_archive(
    data: bytes, *, label: str, problems: Problems
) -> tuple[dict[str, bytes], set[str]] | None:
    """The archive's files (path -> bytes) and directories; ``None`` when it is refused.

    Every unsafe entry is reported (not only the first); nothing is read from an archive
    that has any.
    """
    import zipfile  # on first use (start-up time: a directory store needs none)

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as e:
        hint = ""
        if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
            hint = " (the content looks like JSON: is this a legacy store?)"
        problems.add("archive", label, f"not a ZIP archive: {e}{hint}")
        return None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            problems.add(
                "archive", label, f"too many entries: {len(infos)} (at most {MAX_ENTRIES})"
            )
            return None
        total = sum(i.file_size for i in infos)
        if total > MAX_UNCOMPRESSED:
            problems.add(
                "archive",
                label,
                f"too much data: {total} bytes uncompressed (at most {MAX_UNCOMPRESSED})",
            )
            return None
        before = len(problems)
        seen: set[str] = set()
        for info in infos:
            name = info.filename
            reason = unsafe_name_reason(name)
            if reason:
                problems.add("archive", label, f"unsafe entry {show(name)}: {reason}")
                continue
            mode = info.external_attr >> 16
            if info.create_system == 3 and stat.S_ISLNK(mode):
                problems.add("archive", label, f"unsafe entry {show(name)}: a symbolic link")
                continue
            if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                problems.add(
                    "archive",
                    label,
                    f"unsafe entry {show(name)}: not a regular file or folder (a FIFO or device)",
                )
                continue
            if info.flag_bits & 0x1:
                problems.add("archive", label, f"entry {show(name)} is encrypted")
                continue
            key = name.rstrip("/")
            if key in seen:
                problems.add("archive", label, f"entry {show(name)} appears more than once")
                continue
            seen.add(key)
        if len(problems) > before:
            return None
        files: dict[str, bytes] = {}
        dirs: set[str] = set()
        budget = MAX_UNCOMPRESSED
        for info in infos:
            name = info.filename
            if info.is_dir():
                dirs.add(name.rstrip("/"))
                continue
            try:
                with zf.open(info) as fh:
                    # never trust the declared size: read at most what is left of the budget
                    content = fh.read(budget + 1)
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as e:
                problems.add("archive", label, f"entry {show(name)} cannot be read: {e}")
                return None
            if len(content) > budget:
                problems.add(
                    "archive",
                    label,
                    f"too much data: more than {MAX_UNCOMPRESSED} bytes uncompressed",
                )
                return None
            if len(content) != info.file_size:  # zipfile checks this too; never rely on it
                problems.add(
                    "archive",
                    label,
                    f"entry {show(name)} holds {len(content)} bytes, its header says "
                    f"{info.file_size}",
                )
                return None
            budget -= len(content)
            files[name] = content
            parts = name.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
        return files, dirs


def write_archive(files: Mapping[str, bytes], out_path: str | Path) -> None:
    """Write a reproducible archive: sorted entries, fixed timestamps, deflated.

    Names ending in ``/`` are written as directory entries.
    """
    import zipfile  # on first use (start-up time: a directory store needs none)

    out = Path(out_path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            reason = unsafe_name_reason(name)
            if reason:
                raise PolicyStoreError(
                    f"refusing to write unsafe entry name {show(name)}: {reason}"
                )
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.create_system = 3
            if name.endswith("/"):  # a directory entry (keeps an empty required folder)
                info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
                zf.writestr(info, b"")
                continue
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            zf.writestr(info, files[name])
    out.write_bytes(buf.getvalue())
