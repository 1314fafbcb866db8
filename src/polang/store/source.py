"""Where a store comes from, detected as the spec's table says, and loading it.

| property and value                              | source                      |
|-------------------------------------------------|-----------------------------|
| ``ENGINE_POLICY_STORE_URI`` ending in ``.parc`` | archive fetched from the URL |
| ``ENGINE_POLICY_STORE_URI`` (anything else)     | legacy JSON fetched from the URL |
| ``ENGINE_POLICY_STORE_LOCAL_FN`` a directory    | directory store             |
| ``ENGINE_POLICY_STORE_LOCAL_FN`` ``*.parc``     | archive file                |
| ``ENGINE_POLICY_STORE_LOCAL_FN`` ``*.json``     | legacy JSON file            |
| ``ENGINE_POLICY_STORE_LOCAL_FN`` ``*.yaml/.yml``| legacy YAML file            |
| ``ENGINE_POLICY_STORE_LOCAL`` (inline text)     | legacy JSON or YAML text    |
| bytes (``archive_bytes``)                       | archive in memory           |
| ``ENGINE_LOCK`` with ``ENGINE_POLICY_STORE_ID`` | from the Lock: archive or legacy JSON |

A store from the Lock is an archive when its body starts as a ZIP file, else legacy JSON.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal
from urllib.parse import urlsplit

from polang._record import Record
from polang.config import STORE_SOURCE_KEYS, Config
from polang.errors import ConfigError
from polang.inputs.problems import Problems
from polang.inputs.strict import decode_text
from polang.store.archive import MAX_UNCOMPRESSED, ZIP_MAGIC, read_archive
from polang.store.build import build_store
from polang.store.layout import StoreFileError, read_directory, read_layout, read_named_file
from polang.store.model import PolicyStore
from polang.store.raw import RawStore

if TYPE_CHECKING:  # annotations only: ssl is imported by the HTTP client that uses it
    import ssl

    from polang.http import FetchObserver
    from polang.store.remote import Fetched, Validators

_set = object.__setattr__

SourceKind = Literal[
    "directory",
    "archive_file",
    "legacy_json_file",
    "legacy_yaml_file",
    "archive_url",
    "legacy_url",
    "inline",
    "archive_bytes",
    "lock_url",
]
REMOTE_KINDS = ("archive_url", "legacy_url", "lock_url")
_ACCEPT = {
    "archive_url": "application/zip, application/octet-stream",
    "legacy_url": "application/json",
    "lock_url": "application/zip, application/json",
}
"""What a URL source asks for (``Accept``)."""


class PolicyStoreSource(Record):
    """One store source. Build it with the constructors; :meth:`load` reads it."""

    __slots__ = ("_headers", "data", "kind", "location", "text")
    _unshown: ClassVar[tuple[str, ...]] = ("text", "data")
    kind: SourceKind
    location: str
    """Path, URL or a short label; empty for inline text and bytes."""
    text: str | None
    data: bytes | None
    _headers: Callable[[], Mapping[str, str]] | None

    def __init__(
        self,
        kind: SourceKind,
        location: str = "",
        text: str | None = None,
        data: bytes | None = None,
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "location", location)
        _set(self, "text", text)
        _set(self, "data", data)
        _set(self, "_headers", None)

    @classmethod
    def directory(cls, path: str | os.PathLike[str]) -> PolicyStoreSource:
        return cls("directory", os.fspath(path))

    @classmethod
    def archive_file(cls, path: str | os.PathLike[str]) -> PolicyStoreSource:
        return cls("archive_file", os.fspath(path))

    @classmethod
    def legacy_file(cls, path: str | os.PathLike[str]) -> PolicyStoreSource:
        """A legacy JSON or YAML file (by extension; anything but .yaml/.yml is JSON)."""
        p = os.fspath(path)
        yaml_ext = Path(p).suffix.lower() in (".yaml", ".yml")
        return cls("legacy_yaml_file" if yaml_ext else "legacy_json_file", p)

    @classmethod
    def url(cls, url: str) -> PolicyStoreSource:
        """A URL whose path ends in ``.parc`` is an archive; anything else legacy JSON."""
        path = urlsplit(url).path
        return cls("archive_url" if path.lower().endswith(".parc") else "legacy_url", url)

    @classmethod
    def lock(cls, url: str, headers: Callable[[], Mapping[str, str]]) -> PolicyStoreSource:
        """A store served by a Lock server: ``headers()`` gives each fetch its credentials
        (called per fetch, so a refreshed token is used); the body is an archive when it
        starts as a ZIP file, else legacy JSON."""
        source = cls("lock_url", url)
        _set(source, "_headers", headers)
        return source

    @classmethod
    def inline(cls, text: str) -> PolicyStoreSource:
        """Inline legacy store text (JSON, or YAML when it is not JSON)."""
        return cls("inline", "ENGINE_POLICY_STORE_LOCAL", text=text)

    @classmethod
    def archive_bytes(cls, data: bytes) -> PolicyStoreSource:
        """An archive the caller fetched itself (custom auth headers, WASM-style hosts)."""
        return cls("archive_bytes", "<archive bytes>", data=bytes(data))

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> PolicyStoreSource:
        """Detect a local path's format: a directory, ``.parc``, ``.json``, ``.yaml``/``.yml``.

        Raises ``PolicyStoreLoadError`` (kind ``source``) for a missing path or another
        extension.
        """
        p = Path(path)
        try:
            mode = p.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            Problems(str(p)).fail("source", str(p), "no such file or directory")
        except (OSError, ValueError) as e:  # a name too long, no permission, a NUL byte
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            Problems(str(p)).fail("source", str(p), f"cannot read the path: {reason}")
        if stat.S_ISDIR(mode):
            return cls.directory(p)
        suffix = p.suffix.lower()
        if suffix == ".parc":
            return cls.archive_file(p)
        if suffix in (".json", ".yaml", ".yml"):
            return cls.legacy_file(p)
        Problems(str(p)).fail(
            "source",
            str(p),
            f"cannot tell the store format from {p.name!r}: use a directory, a .parc "
            "archive, or a .json / .yaml / .yml legacy file",
        )

    @classmethod
    def from_location(cls, location: str | os.PathLike[str]) -> PolicyStoreSource:
        """A URL (``http://``, ``https://``) or a local path (tools take either)."""
        s = os.fspath(location)
        if urlsplit(s).scheme.lower() in ("http", "https"):
            return cls.url(s)
        return cls.from_path(s)

    @classmethod
    def from_config(cls, config: Config) -> PolicyStoreSource:
        """The source the configuration names; ``ConfigError`` when it names none."""
        if config.policy_store_uri:
            return cls.url(config.policy_store_uri)
        if config.policy_store_local_fn:
            return cls.from_path(config.policy_store_local_fn)
        if config.policy_store_local:
            return cls.inline(config.policy_store_local)
        raise ConfigError("no policy store configured: set one of " + ", ".join(STORE_SOURCE_KEYS))

    # ------------------------------------------------------------ use

    @property
    def is_remote(self) -> bool:
        """Whether the source is fetched over HTTP (background refresh applies)."""
        return self.kind in REMOTE_KINDS

    def describe(self) -> str:
        if self.kind == "inline":
            return "inline store (ENGINE_POLICY_STORE_LOCAL)"
        if self.kind == "archive_bytes":
            return "archive bytes"
        return f"{self.kind.replace('_', ' ')} {self.location}"

    def read_raw(
        self,
        config: Config | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        strict: bool = False,
    ) -> RawStore:
        """The raw parts (no language parsing yet); raises on any problem found so far."""
        raw, problems = self._read(config or Config(), ssl_context, strict=strict)
        problems.raise_if_any()
        assert raw is not None
        return raw

    def fetch_if_changed(
        self,
        config: Config,
        validators: Validators | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        observer: FetchObserver | None = None,
    ) -> Fetched:
        """A URL source's body, fetched conditionally on ``validators`` (the refresher's:
        a ``304`` is a :class:`~polang.store.remote.Fetched` without a body); raises
        ``PolicyStoreLoadError`` (kind ``fetch``). Only for URL sources. ``observer``
        is told of the fetch (the engine's telemetry)."""
        from polang.store.remote import Validators, fetch_if_changed  # httpx: URL sources

        return fetch_if_changed(
            self.location,
            config,
            validators or Validators(),
            accept=_ACCEPT[self.kind],
            ssl_context=ssl_context,
            headers=self._headers() if self._headers is not None else None,
            observer=observer,
        )

    def _read(
        self,
        config: Config,
        ssl_context: ssl.SSLContext | None = None,
        *,
        strict: bool = False,
        body: bytes | None = None,
    ) -> tuple[RawStore | None, Problems]:
        problems = Problems(self.describe(), strict=strict)
        raw: RawStore | None = None
        label = Path(self.location).name if self.kind.endswith("_file") else self.location
        kind: str = self.kind
        fetched: bytes | None = body  # a URL source's body, when the caller fetched it
        if fetched is None and kind in REMOTE_KINDS:
            fetched = self.fetch_if_changed(config, ssl_context=ssl_context).body
        if kind == "lock_url":
            fetched = fetched or b""
            kind = "archive_bytes" if fetched[:4] in ZIP_MAGIC else "lock_json"

        if kind == "directory":
            root = Path(self.location)
            if not root.is_dir():
                problems.fail("source", self.location, "not a directory")
            files, dirs = read_directory(root, problems=problems)
            raw = read_layout(
                files,
                dirs,
                fmt="directory",
                source=self.describe(),
                config=config,
                problems=problems,
            )
        elif kind in ("archive_file", "archive_url", "archive_bytes"):
            if kind == "archive_file":
                data = _read_file(self.location, problems)
            else:
                data = fetched if fetched is not None else self.data or b""
            got = read_archive(data, label=label, problems=problems)
            if got is None:
                problems.raise_if_any()
                problems.fail("archive", label, "the archive could not be read")
            raw = read_layout(
                got[0],
                got[1],
                fmt="archive",
                source=self.describe(),
                config=config,
                problems=problems,
            )
        else:
            fmt: Literal["json", "yaml"] = "json"
            if kind in ("legacy_json_file", "legacy_yaml_file"):
                text = decode_text(
                    _read_file(self.location, problems), file=label, problems=problems
                )
                fmt = "yaml" if kind == "legacy_yaml_file" else "json"
            elif kind == "lock_json":
                text = decode_text(fetched or b"", file=label, problems=problems)
            elif kind == "legacy_url":
                body = fetched or b""
                if body[:4] in ZIP_MAGIC:
                    problems.fail(
                        "source",
                        label,
                        "the server sent a ZIP archive, but this URL is read as a legacy "
                        "JSON store: archive URLs must end in .parc",
                    )
                text = decode_text(body, file=label, problems=problems)
            else:
                text = self.text or ""
                fmt = "json" if text.lstrip()[:1] in ("{", "[") else "yaml"
            if text is not None:
                from polang.store.legacy import read_legacy  # legacy stores only (start-up)

                raw = read_legacy(
                    text,
                    file=label,
                    fmt=fmt,
                    config=config,
                    problems=problems,
                    source=self.describe(),
                )
        return raw, problems

    def load(
        self,
        config: Config | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        strict: bool = False,
        body: bytes | None = None,
    ) -> PolicyStore:
        """Read, parse and check the whole store; ``PolicyStoreLoadError`` otherwise.

        ``body``: a URL source's body fetched already (:meth:`fetch_if_changed`, the
        refresher's conditional GET), read instead of fetching again.

        ``ssl_context`` replaces the default HTTPS trust for URL sources (private CAs).
        What does not reject the store (unknown fields, SHA-1 manifest checksums) is in the
        result's ``warnings`` (the engine writes them to the system log); ``strict`` makes
        unknown fields errors instead (``polang store validate --strict``).
        """
        config = config or Config()
        raw, problems = self._read(config, ssl_context, strict=strict, body=body)
        if raw is None:
            problems.raise_if_any()
            problems.fail("source", self.location, "the store could not be read")
        # reader problems and parse problems are reported together
        return build_store(raw, config, problems)


def _read_file(path: str, problems: Problems) -> bytes:
    """A store file named by the caller: a regular file of at most ``MAX_UNCOMPRESSED``
    bytes (a FIFO or a device at that path is refused, never waited on).

    The path itself may be a symbolic link (an operator's choice); it is resolved first.
    """
    try:
        return read_named_file(path, MAX_UNCOMPRESSED)
    except StoreFileError as e:
        problems.fail(e.kind, path, str(e))


def load_policy_store(config: Config) -> PolicyStore:
    """The store the configuration names (detection per the spec's table)."""
    return PolicyStoreSource.from_config(config).load(config)


def load_policy_store_archive_bytes(data: bytes, config: Config | None = None) -> PolicyStore:
    """A ``.parc`` archive from bytes the caller fetched (spec name, kept as is)."""
    return PolicyStoreSource.archive_bytes(data).load(config)
