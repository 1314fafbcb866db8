"""Running the queries: the shared driver, results, and writing answers to files.

:class:`SqlEngine` owns a :class:`~polang.sql.plan.Planner` over a loaded
population and turns each query into per-action SQL; a backend (DuckDB, Spark) executes
the text. The DuckDB backend runs the matrix in batches of resources (each a range of
``eid``), so removing duplicate grants (an aggregation with reasons, else a NumPy sort of
the batch's pairs) never holds more than one batch, and streams each batch's rows to the
output file as Arrow record batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Literal, Protocol, TypeGuard, TypeVar

from sqlglot import exp

from polang.analysis.query import AccessEntry, Residual
from polang.datalog.ir import Program
from polang.language.values import EntityUID, RecordValue, quote_string

from .lower import alias, col, join, num, table
from .plan import ActionQuery, Fallback, Planner, Population, decision_query, sql_comment
from .tables import SqlError

Format = Literal["parquet", "csv", "jsonl"]
FORMATS = ("parquet", "csv", "jsonl")
KEYS = (
    "principal_type",
    "principal_id",
    "action_type",
    "action_id",
    "resource_type",
    "resource_id",
)
"""The key columns of an answer written to a file (then ``decision``, and with reasons
``reasons`` and ``residuals``)."""

DEFAULT_BATCH_PAIRS = 25_000_000
"""A matrix batch covers at most this many (principal, resource) candidate pairs of one
action (the upper bound of the distinct rows its aggregation or sort holds)."""


class SqlFallback(SqlError):
    """The question cannot be answered in SQL as asked (e.g. a queried entity the tables
    do not hold); answer it in process instead."""


Columns = tuple[list[EntityUID], list[EntityUID], list[str], list[Any] | None, list[Any] | None]
"""A fetched batch decoded: principals, resources, decisions and, with reasons, the reason
and residual policy index lists per row."""


@dataclass(slots=True)
class Fetched:
    """A job's answer once the query has run: its row count, and its rows decoded only
    when read (``decode`` yields :data:`Columns` a batch at a time). The answer is held as
    the backend returned it (Arrow arrays of integers for DuckDB), so a query whose rows
    are counted, written or paged is not slowed by building every row as Python objects."""

    action: EntityUID
    rows: int
    decode: Callable[[], Iterator[Columns]]
    arrow: Callable[[], Iterator[Any]] | None = None
    """The rows as Arrow record batches of :func:`answer_schema` without reasons, decoded
    without a Python object per row (where the backend can)."""


def answer_schema(reasons: bool, *, csv: bool = False) -> Any:
    """The columns of an answer (a written file's, ``SqlResult.to_arrow``'s): the uids as
    strings, the decision and, with reasons, the reason and residual policy ids (lists,
    or space-separated text in CSV)."""
    import pyarrow as pa

    fields = [(n, pa.string()) for n in (*KEYS, "decision")]
    if reasons:
        lt = pa.string() if csv else pa.list_(pa.string())
        fields += [("reasons", lt), ("residuals", lt)]
    return pa.schema(fields)


@dataclass(slots=True)
class SqlStats:
    elapsed_s: float = 0.0
    batches: int = 0
    rows: int = 0
    queries: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "elapsed_s": round(self.elapsed_s, 6),
            "batches": self.batches,
            "rows": self.rows,
            "queries": self.queries,
        }


T = TypeVar("T")


def _named(ids: Sequence[T], indexes: list[int] | None) -> tuple[T, ...]:
    """Policy indexes as their ids (an entry's reasons) or residuals, each once, in the
    program's order, listed as the in-process answer lists them."""
    return tuple(ids[i] for i in sorted(set(indexes))) if indexes else ()


def undecided(policies: Sequence[Any]) -> list[Residual]:
    """A SQL answer's residual per policy (``policy_id`` and ``effect``: the conditions
    stay in the database), in the program's order."""
    return [Residual(p.policy_id, p.effect, None) for p in policies]


class SqlResult:
    """A query's answer. Its entries are built as they are read (``entries`` keeps them,
    ``iter_entries`` streams them), like the in-process ``QueryResult``; with ``output``
    the rows went to that file and there are none to read."""

    __slots__ = (
        "_built",
        "_fetched",
        "_policy_ids",
        "_reasons",
        "_residuals",
        "fallbacks",
        "kind",
        "output",
        "stats",
    )

    def __init__(
        self,
        kind: str,
        *,
        reasons: bool = False,
        policy_ids: list[str] | None = None,
        residuals: list[Residual] | None = None,
    ) -> None:
        self.kind = kind
        self.fallbacks: list[Fallback] = []
        self.stats = SqlStats()
        self.output: str | None = None
        self._fetched: list[Fetched] = []
        self._reasons = reasons
        self._policy_ids = policy_ids or []
        self._residuals = residuals or []
        self._built: list[AccessEntry] | None = None

    def __repr__(self) -> str:
        return (
            f"SqlResult(kind={self.kind!r}, rows={self.stats.rows}, complete={self.complete}, "
            f"output={self.output!r})"
        )

    @property
    def complete(self) -> bool:
        """No entry is conditional (every policy ran in SQL or as a UDF)."""
        return not any(f.how == "conditional" for f in self.fallbacks)

    @property
    def entries(self) -> list[AccessEntry]:
        """Every entry, in order (built on first read, then kept)."""
        if self._built is None:
            self._built = list(self.iter_entries())
        return self._built

    def iter_entries(self) -> Iterator[AccessEntry]:
        """The entries in order, a fetched batch at a time (none kept)."""
        if self._built is not None:
            yield from self._built
            return
        new = tuple.__new__
        none: tuple[Any, ...] = ()
        ids, residuals = self._policy_ids, self._residuals
        for f in self._fetched:
            a = f.action
            for ps, rs, ds, why, res in f.decode():
                if not self._reasons or why is None or res is None:
                    yield from [
                        new(AccessEntry, (p, a, r, d, none, none))
                        for p, r, d in zip(ps, rs, ds, strict=True)
                    ]
                    continue
                yield from [
                    new(
                        AccessEntry,
                        (
                            p,
                            a,
                            r,
                            d,
                            _named(ids, w),
                            _named(residuals, x),
                        ),
                    )
                    for p, r, d, w, x in zip(ps, rs, ds, why, res, strict=True)
                ]

    def __iter__(self) -> Iterator[AccessEntry]:
        return self.iter_entries()

    def to_arrow(self) -> Any:
        """The answer as a ``pyarrow.Table`` with a written answer's columns
        (:func:`answer_schema`), in the entries' order. On DuckDB without reasons it is
        decoded from the fetched integers with Arrow, no Python object per row: at scale
        far cheaper than ``entries``. Empty when the answer went to ``output``."""
        import pyarrow as pa

        schema = answer_schema(self._reasons)
        batches: list[Any] = []
        for f in self._fetched:
            if f.arrow is not None and not self._reasons:
                batches.extend(f.arrow())
                continue
            ids = self._policy_ids
            for ps, rs, ds, why, res in f.decode():
                cols: list[Any] = [
                    [p[0] for p in ps],
                    [p[1] for p in ps],
                    [f.action[0]] * len(ps),
                    [f.action[1]] * len(ps),
                    [r[0] for r in rs],
                    [r[1] for r in rs],
                    ds,
                ]
                if self._reasons:
                    for lists in (why, res):
                        cols.append([_named(ids, x) for x in lists or ()])
                batches.append(pa.record_batch(cols, schema=schema))
        return pa.Table.from_batches(batches, schema=schema)

    def triples(self) -> Iterator[tuple[EntityUID, EntityUID, EntityUID]]:
        for e in self.iter_entries():
            if e.decision == "allow":
                yield e.triple

    def __len__(self) -> int:
        return self.stats.rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "complete": self.complete,
            "rows": self.stats.rows,
            "output": self.output,
            "fallbacks": [f.to_dict() for f in self.fallbacks],
            "stats": self.stats.to_dict(),
        }


@dataclass(slots=True)
class Job:
    """One query of an answer: an action's rows (``r``, ``p``, ``decision`` and with
    ``reasons`` the policy index lists) ordered by (r, p), as integer ``sql`` and as
    ``text_sql`` with the uids decoded in SQL."""

    action: EntityUID
    sql: str
    text_sql: str
    sorted_dups: bool = False
    """``sql`` is the allowed pairs ``(r, p)`` unordered and possibly repeated (several
    permits granting one pair): the runner orders them and drops the repeats."""


_FILTER = "__polang_filter__"


def _lift_with(q: exp.Select) -> tuple[exp.Select, exp.With | None]:
    """A query without its WITH clause, and the clause (to put on the outermost query:
    Spark reads a WITH at the top only)."""
    w = q.args.get("with_")
    if w is None:
        return q, None
    q.set("with_", None)  # the query is built for this call: no copy needed
    return q, w


class AnswerSink(Protocol):
    """Where an answer goes when it is given as ``output`` instead of a file: its record
    batches (:func:`answer_schema` columns, policy ids in the lists), in the answer's
    order, as the backend produces them (the command line writes its own files so)."""

    def write_batch(self, batch: Any) -> None: ...


Output = str | Path | AnswerSink
"""An answer's ``output``: a file (or a URL Spark writes), or an :class:`AnswerSink`."""


def is_sink(output: Output) -> TypeGuard[AnswerSink]:
    return not isinstance(output, str | PathLike)


class Runner(Protocol):
    """What a backend offers the driver."""

    dialect: str
    drops_sorted_dups: bool
    """The runner orders a job's integer pairs and drops repeated ones itself
    (``Job.sorted_dups``): no grouping and no ``ORDER BY`` in SQL."""

    def rows(self, job: Job, reasons: bool) -> Fetched:
        """Runs the job's query; its rows are decoded when read (see :class:`Fetched`)."""
        ...

    def write(self, jobs: Sequence[Job], target: Output, fmt: Format, reasons: bool) -> int:
        """Every job's rows to ``target``, a path or (where the backend writes there itself,
        as Spark does) a URL, kept as given: ``Path`` would make ``s3a://b/x`` ``s3a:/b/x``;
        or an :class:`AnswerSink` handed the batches (``fmt`` unused)."""
        ...

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """A small helper query (an entity's ancestors)."""
        ...


def _fallbacks_unique(fbs: list[Fallback]) -> list[Fallback]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for f in fbs:
        key = (f.policy_id, str(f.action), f.principal_type, f.resource_type)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


class SqlEngine:
    """The queries over one loaded population (see ``backends``)."""

    def __init__(
        self,
        runner: Runner,
        program: Program,
        population: Population,
        *,
        udf: bool = False,
        uid_of: Callable[[int], EntityUID],
        eid_of: Callable[[EntityUID], int | None],
        set_context: Callable[[RecordValue | None], None] | None = None,
        resource_eids: Callable[[list[str]], list[int]],
        batch_pairs: int = DEFAULT_BATCH_PAIRS,
        count_of: Callable[[list[str]], int],
    ) -> None:
        self.runner = runner
        self.program = program
        self.population = population
        self.planner = Planner(program, population, runner.dialect, udf=udf)
        self.policy_ids = [p.policy_id for p in self.planner.policies]
        self.residuals = undecided(self.planner.policies)
        self._uid_of = uid_of
        self._eid_of = eid_of
        self._set_context = set_context
        self._resource_eids = resource_eids
        self._count_of = count_of
        self.batch_pairs = batch_pairs
        self._aqs: dict[Any, ActionQuery] = {}
        self._tmpl: dict[Any, tuple[ActionQuery, tuple[str, str] | None]] = {}

    # -- SQL text ------------------------------------------------------------------------------

    def _decoded(self, dq: exp.Select, action: EntityUID, reasons: bool) -> exp.Select:
        """The decision rows with uids as strings, in (resource, principal) order."""
        sel = exp.select(
            alias(col("type", "pu"), "principal_type"),
            alias(col("id", "pu"), "principal_id"),
            alias(exp.Literal.string(action.type), "action_type"),
            alias(exp.Literal.string(action.id), "action_id"),
            alias(col("type", "ru"), "resource_type"),
            alias(col("id", "ru"), "resource_id"),
            alias(col("decision", "d"), "decision"),
        ).from_(alias(exp.Subquery(this=dq), "d"), copy=False)
        if reasons:
            sel = sel.select(col("reasons", "d"), col("residuals", "d"), append=True, copy=False)
        for side in ("p", "r"):
            u = f"{side}u"
            join(sel, table("polang_uid", u), exp.EQ(this=col("eid", u), expression=col(side, "d")))
        return sel.order_by(col("r", "d"), col("p", "d"))

    def action_sql(
        self,
        aq: ActionQuery,
        *,
        where: exp.Expression | None = None,
        reasons: bool = False,
        decoded: bool = True,
    ) -> str | None:
        """An action's rows as SQL: with uids as strings (``decoded``), else as ``eid``s."""
        dq = decision_query(aq, self.planner, where=where, reasons=reasons)
        if dq is None:
            return None
        dq, with_ = _lift_with(dq)
        if decoded:
            q = self._decoded(dq, aq.action, reasons)
        else:
            q = exp.select(exp.Star()).from_(alias(exp.Subquery(this=dq), "d"), copy=False)
            q = q.order_by(col("r", "d"), col("p", "d"), copy=False)
        if with_ is not None:
            q.set("with_", with_)
        return q.sql(dialect=self.runner.dialect)

    def _templates(self, aq: ActionQuery, reasons: bool) -> tuple[str, str] | None:
        """The action's two SQL texts with a marker where each batch's filter goes
        (built once per action query: printing SQL costs more than running it)."""
        key = (id(aq), reasons)
        got = self._tmpl.get(key)
        if got is not None and got[0] is aq:
            return got[1]
        dq = decision_query(
            aq,
            self.planner,
            where=exp.column(_FILTER),
            reasons=reasons,
            sorted_dups=self.runner.drops_sorted_dups,
        )
        if dq is None:
            texts = None
        else:
            d = self.runner.dialect
            dq, with_ = _lift_with(dq)
            ints = exp.select(exp.Star()).from_(alias(exp.Subquery(this=dq), "d"), copy=False)
            if not self._sorted_dups(aq, reasons):  # else the runner orders the pairs
                ints = ints.order_by(col("r", "d"), col("p", "d"), copy=False)
            decoded = self._decoded(dq, aq.action, reasons)
            if with_ is not None:
                ints.set("with_", with_)
                decoded.set("with_", with_.copy())
            texts = (ints.sql(dialect=d), decoded.sql(dialect=d))
        self._tmpl[key] = (aq, texts)
        return texts

    def _job(self, aq: ActionQuery, where: exp.Expression | None, reasons: bool) -> Job | None:
        texts = self._templates(aq, reasons)
        if texts is None:
            return None
        f = "TRUE" if where is None else where.sql(dialect=self.runner.dialect)
        dups = self._sorted_dups(aq, reasons)
        return Job(aq.action, texts[0].replace(_FILTER, f), texts[1].replace(_FILTER, f), dups)

    def _sorted_dups(self, aq: ActionQuery, reasons: bool) -> bool:
        """Whether the action's integer query leaves ordering and repeats to the runner
        (only allowed pairs: no reasons, no conditional policy)."""
        return self.runner.drops_sorted_dups and not reasons and not aq.has_maybe

    def _action_query(
        self,
        action: EntityUID,
        ctx: RecordValue | None,
        principal_types: list[str] | None = None,
        resource_types: list[str] | None = None,
        fixed: dict[str, tuple[EntityUID, frozenset[EntityUID]]] | None = None,
    ) -> ActionQuery:
        """The planner's branches for an action, kept for the next query with the same
        action, context, types and fixed entity."""
        key = (
            action,
            None if ctx is None else repr(ctx),
            tuple(principal_types) if principal_types is not None else None,
            tuple(resource_types) if resource_types is not None else None,
            None if not fixed else tuple((k, v[0], v[1]) for k, v in sorted(fixed.items())),
        )
        aq = self._aqs.get(key)
        if aq is None:
            aq = self.planner.action_query(
                action,
                ctx,
                principal_types=principal_types,
                resource_types=resource_types,
                fixed=fixed,
            )
            if len(self._aqs) >= 256:
                self._aqs.pop(next(iter(self._aqs)))
            self._aqs[key] = aq
        return aq

    # -- queries --------------------------------------------------------------------------------

    def _context(self, context: RecordValue | Mapping[str, Any] | None) -> RecordValue | None:
        if context is None or isinstance(context, RecordValue):
            ctx = context
        elif isinstance(context, Mapping):
            ctx = RecordValue(context)
        else:
            raise SqlError(
                f"context must be a record (a mapping) or None, not {type(context).__name__}"
            )
        if self._set_context is not None:
            self._set_context(ctx)
        return ctx

    def _run(
        self,
        kind: str,
        jobs: list[tuple[ActionQuery, list[exp.Expression | None]]],
        output: Output | None,
        fmt: Format,
        reasons: bool,
    ) -> SqlResult:
        t0 = time.perf_counter()
        res = SqlResult(kind, reasons=reasons, policy_ids=self.policy_ids, residuals=self.residuals)
        if output is not None and fmt not in FORMATS:
            raise SqlError(f"unknown output format {fmt!r}; known: {', '.join(FORMATS)}")
        todo: list[Job] = []
        for aq, wheres in jobs:
            res.fallbacks.extend(aq.fallbacks)
            for w in wheres:
                job = self._job(aq, w, reasons)
                if job is not None:
                    todo.append(job)
        res.fallbacks = _fallbacks_unique(res.fallbacks)
        res.stats.queries = len(todo)
        res.stats.batches = len(todo)
        if output is not None:
            res.stats.rows = self.runner.write(todo, output, fmt, reasons)
            res.output = None if is_sink(output) else str(output)
        else:
            for job in todo:
                got = self.runner.rows(job, reasons)
                res._fetched.append(got)
                res.stats.rows += got.rows
        res.stats.elapsed_s = time.perf_counter() - t0
        return res

    def access_matrix(
        self,
        context: RecordValue | Mapping[str, Any] | None = None,
        *,
        actions: Sequence[EntityUID] | None = None,
        output: Output | None = None,
        format: Format = "parquet",
        reasons: bool = False,
        batch_pairs: int | None = None,
    ) -> SqlResult:
        """Every allowed (and conditional) triple, by action, resource, principal."""
        ctx = self._context(context)
        budget = batch_pairs or self.batch_pairs
        jobs: list[tuple[ActionQuery, list[exp.Expression | None]]] = []
        for a in actions if actions is not None else self.population.actions:
            aq = self._action_query(a, ctx)
            if not aq.parts:
                jobs.append((aq, []))
                continue
            n_p = max(1, self._count_of(aq.principal_types))
            eids = self._resource_eids(aq.resource_types)
            per = max(1, budget // n_p)
            wheres: list[exp.Expression | None] = []
            if len(eids) <= per:
                wheres.append(None)
            else:
                for i in range(0, len(eids), per):
                    chunk = eids[i : i + per]
                    wheres.append(
                        exp.Between(this=col("r", "x"), low=num(chunk[0]), high=num(chunk[-1]))
                    )
            jobs.append((aq, wheres))
        return self._run("matrix", jobs, output, format, reasons)

    def _ancestors(self, uid: EntityUID) -> frozenset[EntityUID]:
        """A stored entity's strict ancestors, read from the closure table."""
        rows = self.runner.query(
            "SELECT u.type, u.id FROM polang_anc AS a JOIN polang_uid AS u ON u.eid = a.aeid "
            f"WHERE a.eid = {self._stored(uid, 'the entity')} AND a.aeid <> a.eid"
        )
        return frozenset(EntityUID(t, i) for t, i in rows)

    def _stored(self, uid: EntityUID, what: str) -> int:
        eid = self._eid_of(uid)
        if eid is None:
            raise SqlFallback(f"{what} {uid} is not a stored entity: answer this query in process")
        return eid

    def who_can(
        self,
        action: EntityUID,
        resource: EntityUID,
        context: RecordValue | Mapping[str, Any] | None = None,
        *,
        output: Output | None = None,
        format: Format = "parquet",
        reasons: bool = False,
    ) -> SqlResult:
        """Every principal allowed ``action`` on ``resource``, in order."""
        ctx = self._context(context)
        rid = self._stored(resource, "the resource")
        aq = self._action_query(action, ctx, resource_types=[resource.type])
        where = exp.EQ(this=col("r", "x"), expression=num(rid))
        return self._run("who_can", [(aq, [where])], output, format, reasons)

    def what_can(
        self,
        principal: EntityUID,
        action: EntityUID | None = None,
        context: RecordValue | Mapping[str, Any] | None = None,
        *,
        output: Output | None = None,
        format: Format = "parquet",
        reasons: bool = False,
    ) -> SqlResult:
        """Every (action, resource) ``principal`` is allowed, by action then resource."""
        ctx = self._context(context)
        pid = self._stored(principal, "the principal")
        schema = self.population.schema
        jobs: list[tuple[ActionQuery, list[exp.Expression | None]]] = []
        for a in [action] if action is not None else self.population.actions:
            if schema is not None:
                ad = schema.action(a)
                if ad is None or not ad.applies_to or principal.type not in ad.principal_types:
                    continue
            aq = self._action_query(a, ctx, principal_types=[principal.type])
            jobs.append((aq, [exp.EQ(this=col("p", "x"), expression=num(pid))]))
        return self._run("what_can", jobs, output, format, reasons)

    # -- printing ---------------------------------------------------------------------------------

    def sql_text(self, context: RecordValue | Mapping[str, Any] | None = None) -> str:
        """The matrix as SQL, one statement per action (what ``polang rules --sql`` prints)."""
        ctx = self._context(context)
        parts = []
        for a in self.population.actions:
            aq = self.planner.action_query(a, ctx)
            s = self.action_sql(aq)
            parts.append(
                sql_comment(f"action {a}: rows (r, p, decision) by resource and principal eid")
            )
            for f in aq.fallbacks:
                parts.append(
                    sql_comment(
                        f"{quote_string(f.policy_id)} ({f.principal_type}, {f.resource_type}): "
                        f"{f.how}: {f.reason}"
                    )
                )
            parts.append((s or "-- no policy applies") + ";" if s else "-- no policy applies")
        return "\n".join(parts) + "\n"
