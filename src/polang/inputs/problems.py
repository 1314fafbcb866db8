"""Problems in input records: every rule broken, collected, then raised as one error.

A store is loaded completely or not at all, so the loader does not stop at the first
problem: it gathers every problem it can find (a user fixing a store wants the full list)
and raises one :class:`PolicyStoreLoadError` at the end. Each problem names the file, the
place inside it (``line:col`` or a JSON path) and a stable ``kind`` that tests and tools
can rely on. The store's records are the first user; issuer records given in code, YAML
configuration files and policy test files are read with the same collector, so it sits
below all of them (``polang.store.errors`` re-exports it under its documented name).
"""

from __future__ import annotations

import re
from typing import ClassVar, NoReturn

from polang._record import Record
from polang.errors import PolicyStoreError, bound_message

_set = object.__setattr__

#: Most problems (and, separately, warnings) one load keeps: a hostile store can break a
#: rule thousands of times (9,000 unexpected files); past this they are only counted.
MAX_PROBLEMS = 200
#: Most problems quoted in a ``PolicyStoreLoadError``'s message (all kept ones are in
#: ``problems``); the message then says how many more there are.
MAX_LISTED_PROBLEMS = 20
#: Longest message or location of one problem.
MAX_PROBLEM_CHARS = 1000

#: Every problem kind, with what it means (documentation and a guard against typos).
KINDS: dict[str, str] = {
    "source": "the store cannot be located or read (missing path, unknown extension)",
    "fetch": "fetching the store over HTTP failed (status, timeout, connection, size)",
    "missing_file": "a required file or directory of the store is absent",
    "unexpected_file": "a file that has no place in the store layout",
    "unsafe_file": "a store entry that is not a regular file or folder (link, FIFO, device)",
    "encoding": "a file is not UTF-8 text",
    "json_syntax": "a file is not valid JSON",
    "yaml_syntax": "a file is not valid YAML",
    "missing_field": "a required field is absent",
    "unknown_field": "a field the format does not define",
    "invalid_field": "a field has the wrong type or form",
    "deprecated_field": "a field that was renamed (its new name is in the message)",
    "base64": "a Base64 string does not decode",
    "limit": "a configured or built-in limit was exceeded",
    "schema": "the schema does not parse",
    "policy_syntax": "a policy or template does not parse",
    "missing_id": "a policy or template has no @id annotation",
    "duplicate_id": "two policies, templates or links share an id",
    "id_mismatch": "an @id annotation differs from the id its record is stored under",
    "template": "a template rule is broken (no slot, template among policies)",
    "template_link": "a template link is malformed or does not fit its template",
    "entity": "an entity does not parse or conflicts with another",
    "issuer": "a trusted issuer record is invalid",
    "manifest": "manifest.json does not match the files (checksum, size, id, file list)",
    "archive": "the archive is not a ZIP or is unsafe (paths, links, size, entries)",
    "store_selection": "the legacy file holds no store with the requested id, or several",
    "trusted_issuer_ref": "a policy names a TrustedIssuer entity the engine never builds "
    "(such as Cedarling's issuer-URL id)",
    "claim_path": "a claim path in token metadata that no token could have (empty part, "
    "another path syntax, too long or deep), or a likely misspelling of a well-known claim",
}


MAX_NAME_CHARS = 200
"""Longest store or file name quoted in a message (the attributes keep it whole): a name of
thousands of characters would otherwise fill the bounded message before its reason."""


def short_name(name: str) -> str:
    """``name``, its middle left out past :data:`MAX_NAME_CHARS` (both ends stay: the root
    and the file name)."""
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[:120]}...({len(name) - 180} characters)...{name[-60:]}"


class StoreProblem(Record):
    """One broken rule: ``kind`` (see :data:`KINDS`), ``file``, ``location``, ``message``."""

    __slots__ = ("file", "kind", "location", "message")
    kind: str
    file: str
    message: str
    location: str | None

    def __init__(self, kind: str, file: str, message: str, location: str | None = None) -> None:
        _set(self, "kind", kind)
        _set(self, "file", file)
        _set(self, "message", message)
        _set(self, "location", location)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AssertionError(f"unknown store problem kind {self.kind!r}")

    def __str__(self) -> str:
        where = short_name(self.file) or "<store>"
        if self.location:
            sep = ":" if self.location[:1].isdigit() else " at "
            where = f"{where}{sep}{self.location}"
        return f"{where}: {self.message} [{self.kind}]"


class PolicyStoreLoadError(PolicyStoreError):
    """The store was rejected; ``problems`` lists the problems found.

    At most :data:`MAX_PROBLEMS` are kept (``total`` counts them all) and the message
    quotes the first :data:`MAX_LISTED_PROBLEMS`.
    """

    def __init__(self, source: str, problems: list[StoreProblem], total: int | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        n = self.total = max(total or 0, len(self.problems))
        head = f"policy store {short_name(source)} rejected: {n} problem{'s' if n != 1 else ''}"
        shown = self.problems[:MAX_LISTED_PROBLEMS]
        more = n - len(shown)
        tail = f"\n  ... and {more} more problem{'s' if more != 1 else ''}" if more else ""
        super().__init__(head + "".join(f"\n  {p}" for p in shown) + tail)

    @property
    def kind(self) -> str:
        """The first problem's kind (convenient when there is only one)."""
        return self.problems[0].kind if self.problems else "source"

    @property
    def file(self) -> str:
        return self.problems[0].file if self.problems else ""

    @property
    def kinds(self) -> list[str]:
        return [p.kind for p in self.problems]


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_PROBLEM_CHARS:
        return text
    return bound_message(text, MAX_PROBLEM_CHARS)


class Problems(Record):
    """Collects problems while a store is read; :meth:`raise_if_any` rejects the store.

    ``warnings`` collects what does not reject the store (unknown fields, a weak manifest
    checksum); with ``strict`` the rules that warn by default are errors instead.
    """

    __slots__ = ("dropped", "dropped_warnings", "items", "source", "strict", "warnings")
    _frozen: ClassVar[bool] = False
    source: str
    items: list[StoreProblem]
    strict: bool
    warnings: list[StoreProblem]
    dropped: int
    dropped_warnings: int

    def __init__(
        self,
        source: str,
        items: list[StoreProblem] | None = None,
        strict: bool = False,
        warnings: list[StoreProblem] | None = None,
        dropped: int = 0,
        dropped_warnings: int = 0,
    ) -> None:
        self.source = source
        self.items = [] if items is None else items
        self.strict = strict
        self.warnings = [] if warnings is None else warnings
        self.dropped = dropped
        self.dropped_warnings = dropped_warnings

    def add(self, kind: str, file: str, message: str, location: str | None = None) -> None:
        if len(self.items) >= MAX_PROBLEMS:
            self.dropped += 1
            return
        self.items.append(
            StoreProblem(kind, _bounded(file) or "", _bounded(message) or "", _bounded(location))
        )

    def warn(self, kind: str, file: str, message: str, location: str | None = None) -> None:
        """A problem that does not reject the store (reported and logged)."""
        if len(self.warnings) >= MAX_PROBLEMS:
            self.dropped_warnings += 1
            return
        self.warnings.append(
            StoreProblem(kind, _bounded(file) or "", _bounded(message) or "", _bounded(location))
        )

    def fail(self, kind: str, file: str, message: str, location: str | None = None) -> NoReturn:
        """Add a problem and stop now (when nothing after it could be checked)."""
        self.add(kind, file, message, location)
        raise self.error()

    def error(self) -> PolicyStoreLoadError:
        return PolicyStoreLoadError(self.source, self.items, len(self))

    def raise_if_any(self) -> None:
        if self.items:
            raise self.error()

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        """Every problem added, kept or not (parsers compare counts to see new ones)."""
        return len(self.items) + self.dropped


def strip_position_prefix(message: str, filename: str | None) -> str:
    """Drop a leading ``file:line:col:`` that a wrapped error already put in its message."""
    if filename:
        pat = re.compile(re.escape(filename) + r"(:\d+)?(:\d+)?:\s*")
        m = pat.match(message)
        if m:
            return message[m.end() :]
    return message
