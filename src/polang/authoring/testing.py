"""Policy tests: files of requests with the decisions they must get, and coverage.

A test file (YAML or JSON, named ``*.polangtest.yaml``, ``*.polangtest.yml`` or
``*.polangtest.json``) names a policy store, optional entities laid over the store's
default entities, and cases::

    store: ../stores/directory        # relative to the test file
    entities:                         # optional: entity JSON objects, or a file name
      - {uid: {type: Acme::User, id: bob}, attrs: {...}, parents: [...]}
    cases:
      - name: alice reads the roadmap
        principal: Acme::User::"alice"          # a reference or an entity object
        action: Acme::Action::"read"
        resource: Acme::Document::"roadmap"
        context: {network: corp}                # optional
        decision: allow                         # allow | deny
        reasons: [org-members-read]             # optional: exactly these determining ids
        errors: []                              # optional: exactly these erroring ids

Each case is decided by :meth:`polang.Engine.explain` (so a failure can show what
actually happened), and **coverage** is read off the same explanations: which policies
determined a decision, which never applied, and which ``when``/``unless`` clauses never
evaluated to true or never to false (a clause after one that did not hold is not
evaluated, exactly as the language short-circuits).

The pytest plugin imports this module in every pytest session, wherever polang is
installed: what reading and running a case needs (the readers, the language, the store,
the engine) is imported by the function that needs it, so a session without policy
tests pays nothing for them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from polang._record import replace as replace_record
from polang.errors import PolangError

if TYPE_CHECKING:
    from polang.analysis.explain import Explanation
    from polang.engine import Engine

TEST_FILE_SUFFIXES = (".polangtest.yaml", ".polangtest.yml", ".polangtest.json")
"""What ``polang test DIR`` and the pytest plugin collect (a file named on the command
line is read whatever its name)."""

MAX_TEST_FILE_BYTES = 4 * 1024 * 1024
"""A test file larger than this is refused."""

MAX_CASES_PER_FILE = 10_000
"""Cases in one test file."""

MAX_TEST_FILES = 10_000
"""Test files found under the paths of one run."""

_CASE_KEYS = frozenset(
    {
        "name",
        "principal",
        "action",
        "resource",
        "context",
        "tokens",
        "decision",
        "reasons",
        "errors",
    }
)
_FILE_KEYS = frozenset({"name", "store", "entities", "config", "cases"})


class PolicyTestError(PolangError):
    """A test file cannot be read or is malformed (the message says where)."""


# ======================================================================== the format


@dataclass(frozen=True, slots=True)
class TestCase:
    """One request and the decision it must get."""

    __test__ = False  # not a pytest test class

    name: str
    file: str
    index: int
    action: str
    resource: Any
    principal: Any = None
    context: Any = None
    tokens: tuple[Any, ...] | None = None
    decision: Literal["allow", "deny"] = "deny"
    reasons: tuple[str, ...] | None = None
    errors: tuple[str, ...] | None = None

    @property
    def where(self) -> str:
        return f"{self.file}: cases[{self.index}]"


@dataclass(frozen=True, slots=True)
class TestFile:
    __test__ = False

    path: str
    store: str
    name: str
    cases: tuple[TestCase, ...]
    entities: tuple[Any, ...] | str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)


def is_test_file(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith(TEST_FILE_SUFFIXES)


def find_test_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every test file under ``paths`` (a file given directly is taken whatever its name)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in path.rglob("*") if f.is_file() and is_test_file(f.name))
            out.extend(found)
        elif path.exists():  # taken whatever it is: the reader says why it is refused
            out.append(path)
        else:
            raise PolicyTestError(f"{path}: no such file or directory")
        if len(out) > MAX_TEST_FILES:
            raise PolicyTestError(
                f"more than MAX_TEST_FILES ({MAX_TEST_FILES}) test files under the paths given"
            )
    return list(dict.fromkeys(out))


def _read_file(
    path: str | os.PathLike[str], where: str, limit: int | None = None, limit_name: str = ""
) -> bytes:
    """A file a test run names (a test file, a test file's ``entities:``): a regular file
    through the one bounded reader (a link followed; a FIFO, a device or a directory
    refused, never waited on or read without end), at most ``limit`` bytes
    (``MAX_INPUT_FILE_BYTES`` unless given)."""
    from polang.inputs import files  # pytest start-up: see the module's note

    if limit is None:
        limit, limit_name = files.MAX_INPUT_FILE_BYTES, "MAX_INPUT_FILE_BYTES"
    try:
        return files.read_regular_file(path, limit, limit_name)
    except files.InputFileError as e:
        raise PolicyTestError(f"{where}: {e.reason}") from None


def _read_data(path: Path) -> Any:
    from polang.inputs.problems import Problems  # pytest start-up: see the module's note
    from polang.inputs.strict import load_json, load_yaml

    raw = _read_file(path, str(path), MAX_TEST_FILE_BYTES, "MAX_TEST_FILE_BYTES")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise PolicyTestError(f"{path}: not UTF-8 text (byte {e.start})") from None
    problems = Problems(str(path))
    name = path.name.lower()
    if name.endswith(".json"):
        data = load_json(text, file=str(path), problems=problems)
    else:
        data = load_yaml(text, file=str(path), problems=problems)
    if problems.items:
        raise PolicyTestError(str(problems.items[0]))
    return data


def _str(v: Any, where: str, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise PolicyTestError(f"{where}: {what} must be a non-empty string")
    return v


def _ids(v: Any, where: str, what: str) -> tuple[str, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise PolicyTestError(f"{where}: {what} must be a list of policy ids")
    return tuple(v)


def _entity_arg(v: Any, where: str, what: str, *, optional: bool = False) -> Any:
    if v is None and optional:
        return None
    if isinstance(v, str | dict):
        return v
    raise PolicyTestError(
        f"{where}: {what} must be an entity reference like 'User::\"alice\"' or an entity object"
    )


def load_test_file(path: str | os.PathLike[str]) -> TestFile:
    """Read and check a test file (``PolicyTestError`` naming the place otherwise)."""
    p = Path(path)
    data = _read_data(p)
    where = str(p)
    if not isinstance(data, dict):
        raise PolicyTestError(f"{where}: a test file is a mapping with `store` and `cases`")
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise PolicyTestError(f"{where}: unknown field {unknown[0]!r}")
    store = _str(data.get("store"), where, "`store`")
    if "://" not in store and not os.path.isabs(store):
        store = os.path.normpath(os.path.join(p.parent, store))
    entities = data.get("entities")
    if entities is not None:
        if isinstance(entities, str):
            entities = os.path.normpath(os.path.join(p.parent, entities))
        elif isinstance(entities, list):
            entities = tuple(entities)
        else:
            raise PolicyTestError(f"{where}: `entities` must be a list of entities or a file")
    config = data.get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
        raise PolicyTestError(f"{where}: `config` must map ENGINE_* properties to values")
    cases_raw = data.get("cases")
    if not isinstance(cases_raw, list) or not cases_raw:
        raise PolicyTestError(f"{where}: `cases` must be a non-empty list")
    if len(cases_raw) > MAX_CASES_PER_FILE:
        raise PolicyTestError(
            f"{where}: {len(cases_raw)} cases exceed MAX_CASES_PER_FILE ({MAX_CASES_PER_FILE})"
        )
    cases = tuple(_case(c, where, i) for i, c in enumerate(cases_raw))
    names = [c.name for c in cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise PolicyTestError(f"{where}: two cases are named {dup!r}")
    name = data.get("name") or p.name
    return TestFile(where, store, str(name), cases, entities, dict(config))


def _case(c: Any, file: str, i: int) -> TestCase:
    where = f"{file}: cases[{i}]"
    if not isinstance(c, dict):
        raise PolicyTestError(f"{where}: a case is a mapping")
    unknown = sorted(set(c) - _CASE_KEYS)
    if unknown:
        raise PolicyTestError(f"{where}: unknown field {unknown[0]!r}")
    decision = c.get("decision")
    if decision not in ("allow", "deny"):
        raise PolicyTestError(f"{where}: `decision` must be allow or deny")
    context = c.get("context")
    if context is not None and not isinstance(context, dict):
        raise PolicyTestError(f"{where}: `context` must be a mapping")
    tokens = c.get("tokens")
    if tokens is not None:
        if not isinstance(tokens, list) or not all(isinstance(t, dict) for t in tokens):
            raise PolicyTestError(f"{where}: `tokens` must be a list of {{mapping, payload}}")
        if c.get("principal") is not None:
            raise PolicyTestError(f"{where}: give a principal or tokens, not both")
        tokens = tuple(tokens)
    name = c.get("name", f"case {i}")
    if not isinstance(name, str) or not name:
        raise PolicyTestError(f"{where}: `name` must be a non-empty string")
    return TestCase(
        name=name,
        file=file,
        index=i,
        action=_str(c.get("action"), where, "`action`"),
        resource=_entity_arg(c.get("resource"), where, "`resource`"),
        principal=_entity_arg(c.get("principal"), where, "`principal`", optional=True),
        context=context,
        tokens=tokens,
        decision=decision,
        reasons=_ids(c.get("reasons"), where, "`reasons`"),
        errors=_ids(c.get("errors"), where, "`errors`"),
    )


# ======================================================================== running


@dataclass(slots=True)
class CaseResult:
    """What a case got; ``failures`` says how it differs from what it expected."""

    case: TestCase
    decision: str | None = None
    reasons: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    explanation: Explanation | None = None

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.case.name,
            "file": self.case.file,
            "index": self.case.index,
            "passed": self.passed,
            "expected": self.case.decision,
            "decision": self.decision,
            "reasons": list(self.reasons),
            "errors": [{"policy_id": p, "message": m} for p, m in self.errors],
        }
        if self.failures:
            out["failures"] = list(self.failures)
            if self.explanation is not None:
                out["explanation"] = self.explanation.to_dict()
        return out

    def report(self, *, width: int = 100, color: bool = False) -> str:
        """A failure for people: what was expected, what happened and why."""
        from polang.language.values import printable  # pytest start-up: see the module's note

        lines = [printable(f"FAIL {self.case.name}  ({self.case.where})")]
        lines.extend("  " + printable(str(f)) for f in self.failures)
        if self.explanation is not None:
            text = self.explanation.render(width=width, color=color)
            lines.extend("  " + line for line in text.rstrip("\n").splitlines())
        return "\n".join(lines)


def _uid(text: str, where: str, what: str) -> Any:
    from polang.language.parser import parse_entity_uid  # pytest start-up: see the module's note

    try:
        return parse_entity_uid(text)
    except PolangError as e:
        raise PolicyTestError(
            f"{where}: `{what}` {text!r} is not an entity reference: {e}"
        ) from None


def _engine(tf: TestFile) -> Engine:
    from polang.config import Config  # pytest start-up: see the module's note
    from polang.engine import Engine
    from polang.language.entities import parse_entities
    from polang.store.source import PolicyStoreSource

    props = {"ENGINE_LOG_TYPE": "off", **tf.config}
    try:
        config = Config.from_dict(props)
        store = PolicyStoreSource.from_location(tf.store).load(config)
    except PolangError as e:
        raise PolicyTestError(f"{tf.path}: store {tf.store}: {e}") from None
    if tf.entities is not None:
        if isinstance(tf.entities, str):
            data: Any = _read_file(tf.entities, f"{tf.path}: entities {tf.entities}")
            fname = tf.entities
        else:
            data = list(tf.entities)
            fname = f"{tf.path}: entities"
        try:
            extra = parse_entities(data, store.schema, filename=fname)
        except PolangError as e:
            raise PolicyTestError(f"{tf.path}: {e}") from None
        store = replace_record(store, default_entities=store.default_entities.merged(extra))
    return Engine(config, store=store)


def run_case(engine: Engine, case: TestCase) -> CaseResult:
    """Decide one case and compare. A request the engine rejects is a failure (with the
    engine's message), not an exception."""
    result = CaseResult(case)
    principal = case.principal
    resource = case.resource
    try:
        if isinstance(principal, str):
            principal = _uid(principal, case.where, "principal")
        if isinstance(resource, str):
            resource = _uid(resource, case.where, "resource")
        tokens = None
        if case.tokens is not None:
            from polang.tokens.model import TokenInput  # pytest start-up: see the module's note

            tokens = [
                TokenInput(str(t.get("mapping", "")), str(t.get("payload", "")))
                for t in case.tokens
            ]
        ex = engine.explain(case.action, resource, case.context, principal, tokens=tokens)
    except PolicyTestError:
        raise
    except PolangError as e:
        result.failures.append(f"the request was rejected: {e}")
        return result
    result.explanation = ex
    result.decision = ex.decision
    result.reasons = list(ex.reasons)
    result.errors = [(p.policy_id, p.error.message if p.error else "") for p in ex.errors]
    if ex.decision != case.decision:
        result.failures.append(f"expected {case.decision}, got {ex.decision} ({ex.summary()})")
    if case.reasons is not None and sorted(set(case.reasons)) != sorted(set(ex.reasons)):
        result.failures.append(
            f"expected reasons {sorted(set(case.reasons))}, got {sorted(set(ex.reasons))}"
        )
    if case.errors is not None:
        got = sorted({p for p, _m in result.errors})
        if sorted(set(case.errors)) != got:
            result.failures.append(f"expected errors {sorted(set(case.errors))}, got {got}")
    return result


# ======================================================================== coverage


@dataclass(slots=True)
class ClauseCoverage:
    policy_id: str
    index: int
    kind: Literal["when", "unless"]
    text: str
    file: str | None
    line: int | None
    true: int = 0  # the clause's body evaluated to true
    false: int = 0
    error: int = 0

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "text": self.text,
            "file": self.file,
            "line": self.line,
            "true": self.true,
            "false": self.false,
            "error": self.error,
        }


@dataclass(slots=True)
class PolicyCoverage:
    policy_id: str
    effect: str
    file: str | None
    line: int | None
    in_scope: int = 0
    applied: int = 0
    determining: int = 0
    errored: int = 0
    clauses: list[ClauseCoverage] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy_id": self.policy_id,
            "effect": self.effect,
            "file": self.file,
            "line": self.line,
            "in_scope": self.in_scope,
            "applied": self.applied,
            "determining": self.determining,
            "errored": self.errored,
            "clauses": [c.to_dict() for c in self.clauses],
        }


class Coverage:
    """What the cases of one store exercised, read off their explanations.

    Items: every policy (covered when it applied in some case) and every clause twice
    (its body evaluated to true in some case; to false in some case). ``percent`` is the
    covered share of the items.
    """

    def __init__(self, store: str, engine: Engine) -> None:
        from polang.language.format import format_expr  # pytest start-up: see the module's note

        self.store = store
        self.cases = 0
        self.policies: dict[str, PolicyCoverage] = {}
        auth = engine.authorizer
        for pid, info in auth.program.policies.items():
            span = info.span
            pc = PolicyCoverage(
                pid,
                info.effect,
                span.filename if span is not None else None,
                span.line if span is not None and span.line else None,
            )
            pol = auth.policies.get(pid)
            for i, c in enumerate(pol.conditions if pol is not None else ()):
                pc.clauses.append(
                    ClauseCoverage(
                        pid,
                        i + 1,
                        c.kind,
                        f"{c.kind} {{ {format_expr(c.body)} }}",
                        c.span.filename,
                        c.span.line or None,
                    )
                )
            self.policies[pid] = pc

    def add(self, ex: Explanation) -> None:
        """Count one case's explanation."""
        self.cases += 1
        reasons = set(ex.reasons)
        for pe in ex.policies:
            pc = self.policies.get(pe.policy_id)
            if pc is None:
                continue
            if pe.verdict != "out_of_scope":
                pc.in_scope += 1
            if pe.verdict == "applies":
                pc.applied += 1
            if pe.verdict == "error":
                pc.errored += 1
            if pe.policy_id in reasons:
                pc.determining += 1
            for cr in pe.conditions:
                idx = cr.clause.index - 1
                if not 0 <= idx < len(pc.clauses):
                    continue
                cc = pc.clauses[idx]
                if cr.holds is None:
                    cc.error += 1
                elif cr.holds == (cr.clause.kind == "when"):
                    cc.true += 1  # a `when` that held, or an `unless` that did not
                else:
                    cc.false += 1

    def merge(self, other: Coverage) -> None:
        self.cases += other.cases
        for pid, pc in other.policies.items():
            mine = self.policies.get(pid)
            if mine is None:
                self.policies[pid] = pc
                continue
            mine.in_scope += pc.in_scope
            mine.applied += pc.applied
            mine.determining += pc.determining
            mine.errored += pc.errored
            for a, b in zip(mine.clauses, pc.clauses, strict=False):
                a.true += b.true
                a.false += b.false
                a.error += b.error

    # -- reading -----------------------------------------------------------------------

    @property
    def items(self) -> tuple[int, int]:
        """(covered, total)."""
        covered = total = 0
        for pc in self.policies.values():
            total += 1 + 2 * len(pc.clauses)
            covered += (pc.applied > 0) + sum((c.true > 0) + (c.false > 0) for c in pc.clauses)
        return covered, total

    @property
    def percent(self) -> float:
        covered, total = self.items
        return 100.0 if total == 0 else round(100.0 * covered / total, 1)

    @property
    def never_applied(self) -> list[str]:
        return [p.policy_id for p in self.policies.values() if p.applied == 0]

    @property
    def determining(self) -> list[str]:
        return [p.policy_id for p in self.policies.values() if p.determining > 0]

    def uncovered_clauses(self) -> list[tuple[ClauseCoverage, str]]:
        """Each clause with what it never did: ``never true``, ``never false`` or
        ``never evaluated``."""
        out = []
        for pc in self.policies.values():
            for c in pc.clauses:
                if c.true == 0 and c.false == 0:
                    out.append((c, "never evaluated" if c.error == 0 else "only errored"))
                elif c.true == 0:
                    out.append((c, "never true"))
                elif c.false == 0:
                    out.append((c, "never false"))
        return out

    def to_dict(self) -> dict[str, Any]:
        covered, total = self.items
        return {
            "store": self.store,
            "cases": self.cases,
            "percent": self.percent,
            "covered": covered,
            "items": total,
            "determining": self.determining,
            "never_applied": self.never_applied,
            "uncovered_clauses": [
                {
                    "policy_id": c.policy_id,
                    "index": c.index,
                    "what": what,
                    "file": c.file,
                    "line": c.line,
                    "text": c.text,
                }
                for c, what in self.uncovered_clauses()
            ],
            "policies": [p.to_dict() for p in self.policies.values()],
        }

    def table(self, *, width: int = 120) -> str:
        """The coverage as a plain-text table (one row per policy, then the gaps)."""
        import io

        from rich.console import Console
        from rich.table import Table

        from polang.language.values import printable  # pytest start-up: see the module's note

        t = Table(
            title=printable(f"coverage of {self.store}: {self.percent}% ({self.cases} cases)")
        )
        for col in ("policy", "effect", "where"):
            t.add_column(col, overflow="fold")
        for col in ("in scope", "applied", "determining", "errored"):
            t.add_column(col, justify="right")
        t.add_column("clauses true/false", overflow="fold")
        for p in self.policies.values():
            clauses = " ".join(f"{c.true}/{c.false}" for c in p.clauses) or "-"
            t.add_row(
                printable(p.policy_id),
                p.effect,
                printable(p.where),
                str(p.in_scope),
                str(p.applied),
                str(p.determining),
                str(p.errored),
                clauses,
            )
        buf = io.StringIO()
        # ids and file names are text: no markup, no emoji codes, no control characters
        console = Console(
            file=buf, width=width, no_color=True, highlight=False, markup=False, emoji=False
        )
        console.print(t)
        never = self.never_applied
        if never:
            console.print(printable("never applied: " + ", ".join(never)))
        for c, what in self.uncovered_clauses():
            console.print(
                printable(
                    f"{c.where or c.policy_id}: {c.policy_id} clause {c.index} {what}: {c.text}"
                )
            )
        return buf.getvalue()


# ======================================================================== a run


@dataclass(slots=True)
class TestRun:
    """The results of every case of every file, and the coverage per store."""

    __test__ = False

    results: list[CaseResult]
    coverage: dict[str, Coverage]
    files: list[str]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def percent(self) -> float:
        """Coverage over all stores (items covered / items)."""
        covered = total = 0
        for c in self.coverage.values():
            a, b = c.items
            covered += a
            total += b
        return 100.0 if total == 0 else round(100.0 * covered / total, 1)

    def to_dict(self, *, coverage: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "files": list(self.files),
            "cases": len(self.results),
            "passed": self.passed,
            "failed": len(self.failed),
            "results": [r.to_dict() for r in self.results],
        }
        if coverage:
            out["coverage"] = {
                "percent": self.percent,
                "stores": [c.to_dict() for c in self.coverage.values()],
            }
        return out


class EngineCache:
    """One engine per (store, entities, config) of the files read (stores load once)."""

    def __init__(self) -> None:
        self._engines: dict[str, Engine] = {}

    def get(self, tf: TestFile) -> Engine:
        key = json.dumps([tf.store, tf.entities, sorted(tf.config.items())], default=str)
        eng = self._engines.get(key)
        if eng is None:
            eng = _engine(tf)
            self._engines[key] = eng
        return eng

    def close(self) -> None:
        for e in self._engines.values():
            e.close()
        self._engines.clear()


def iter_cases(
    paths: Iterable[str | os.PathLike[str]],
) -> Iterator[tuple[TestFile, TestCase]]:
    """Every case under ``paths`` with its file (for ``pytest.mark.parametrize``)."""
    for f in find_test_files(paths):
        tf = load_test_file(f)
        for case in tf.cases:
            yield tf, case


def run_tests(paths: Sequence[str | os.PathLike[str]] | str) -> TestRun:
    """Run every test file under ``paths``; never raises for a failing case (see
    ``TestRun.failed``), only for files that cannot be read (``PolicyTestError``)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    files = find_test_files(paths)
    if not files:
        raise PolicyTestError(
            "no test files found (names end in " + ", ".join(TEST_FILE_SUFFIXES) + ")"
        )
    cache = EngineCache()
    results: list[CaseResult] = []
    coverage: dict[str, Coverage] = {}
    try:
        for f in files:
            tf = load_test_file(f)
            engine = cache.get(tf)
            cov = coverage.get(tf.store)
            if cov is None:
                cov = coverage[tf.store] = Coverage(tf.store, engine)
            for case in tf.cases:
                r = run_case(engine, case)
                if r.explanation is not None:
                    cov.add(r.explanation)
                results.append(r)
    finally:
        cache.close()
    return TestRun(results, coverage, [str(f) for f in files])


def assert_case(engine: Engine, case: TestCase) -> CaseResult:
    """Run one case; ``AssertionError`` with the failure report when it fails."""
    r = run_case(engine, case)
    if not r.passed:
        raise AssertionError(r.report())
    return r


__all__ = [
    "MAX_CASES_PER_FILE",
    "MAX_TEST_FILES",
    "MAX_TEST_FILE_BYTES",
    "TEST_FILE_SUFFIXES",
    "CaseResult",
    "ClauseCoverage",
    "Coverage",
    "EngineCache",
    "PolicyCoverage",
    "PolicyTestError",
    "TestCase",
    "TestFile",
    "TestRun",
    "assert_case",
    "find_test_files",
    "is_test_file",
    "iter_cases",
    "load_test_file",
    "run_case",
    "run_tests",
]
