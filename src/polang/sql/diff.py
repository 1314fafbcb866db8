"""The diff of two stores' access on DuckDB or Spark: ``polang diff --engine duckdb|spark``.

The in-process diff (:mod:`polang.analysis.diff`) recomputes only what a change reaches;
its answer is a list of Python objects. At warehouse scale the answer itself is the
problem (a schema change or a broad policy edit moves millions of triples), so here both
sides' access matrices are computed by the SQL engine (with their policies, streamed to
Parquet in a temporary directory), then one SQL query per action joins the two on the
six key columns and keeps the triples whose decision moved (``deny``, ``conditional``,
``allow``), with the policies of each side. The rows go to the ``output`` file (Parquet,
CSV or JSON lines) or come back as :class:`~polang.analysis.diff.DiffEntry` objects; the
matrices never pass through Python.

The model is the in-process one (docs/diff.md): the same gained/lost rule, the policies
that decide each side in the program's order (for a denied side with a known context,
the forbids that apply: decided in process for up to ``DECIDE_LIMIT`` triples, else a
second matrix of the forbids alone, on the actions that need it), the same summary.
When only policies changed, only the actions their scopes reach are computed. What SQL
cannot decide is reported as SQL reports it elsewhere (a UDF on DuckDB over in-process
entities, else conditional, with ``fallbacks``); a conditional entry names its
policies, not their conditions.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from polang._record import replace
from polang.analysis.diff import (
    DiffEntry,
    DiffResult,
    DiffStats,
    Side,
    changed_entities,
    diff_context,
    policy_texts,
    schema_json,
    sides,
)
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import Request
from polang.language import ast
from polang.language.entities import Entity
from polang.language.values import EntityUID, RecordValue, is_action_type

from . import ENGINES, sql_engine
from . import spark as spark_engine  # its session_from_env looked up when called
from .engine import FORMATS, KEYS, Format
from .tables import SqlError

COLUMNS = ("change", *KEYS, "before", "after", "policies", "previous_policies", "residuals")
"""The columns of a diff written to a file (``policies``, ``previous_policies`` and
``residuals`` are lists of policy ids; space-separated in CSV)."""

DECIDE_LIMIT = 10_000
"""A side denies a changed triple: its policies (the forbids that apply) are decided in
process, request by request, for at most this many triples; above, the forbids' own
matrix is computed in SQL (on the actions that need it) and joined."""

_ORDER = "action_type, action_id, resource_type, resource_id, principal_type, principal_id"
_RANK = "CASE {d} WHEN 'allow' THEN 2 WHEN 'conditional' THEN 1 ELSE 0 END"


# ======================================================================== result


@dataclass(slots=True)
class SqlDiffResult(DiffResult):
    """A diff computed in SQL: ``gained``/``lost`` as in process, or empty when the rows
    were written to ``output`` (``rows`` counts them; ``summary()`` was computed in SQL)."""

    engine: str = "duckdb"
    output: str | None = None
    rows: int = 0
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    counts: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return self.rows > 0

    @property
    def complete(self) -> bool:
        """No policy was left conditional (every one ran in SQL or as a UDF)."""
        return not any(f["how"] == "conditional" for f in self.fallbacks)

    def summary(self) -> dict[str, Any]:
        return self.counts if self.counts is not None else DiffResult.summary(self)

    def to_dict(self) -> dict[str, Any]:
        out = DiffResult.to_dict(self)
        out.update(
            engine=self.engine,
            output=self.output,
            rows=self.rows,
            complete=self.complete,
            fallbacks=list(self.fallbacks),
        )
        return out


# ======================================================================== SQL fragments


class _Dialect:
    """The few list functions the diff needs, spelled for DuckDB or Spark."""

    def __init__(self, name: str) -> None:
        self.duck = name == "duckdb"

    def empty(self) -> str:
        return "[]::VARCHAR[]" if self.duck else "CAST(array() AS array<string>)"

    def ordered(self, lst: str, names: str) -> str:
        """``lst``'s policy ids once each, in the program's order (``names``: the side's
        ids in order, a column), as the in-process answer lists them."""
        src = f"coalesce({lst}, {self.empty()})"
        if self.duck:
            return (
                f"list_transform(list_sort(list_transform(list_distinct({src}), "
                f"lambda x: array_position({names}, x))), lambda i: {names}[i])"
            )
        return (
            f"transform(array_sort(transform(array_distinct({src}), "
            f"x -> array_position({names}, x))), i -> element_at({names}, CAST(i AS INT)))"
        )

    def concat(self, a: str, b: str) -> str:
        return f"list_concat({a}, {b})" if self.duck else f"concat({a}, {b})"

    def without(self, lst: str, drop: str) -> str:
        """``lst`` without the ids in ``drop`` (order kept)."""
        d = f"coalesce({drop}, {self.empty()})"
        if self.duck:
            return f"list_filter({lst}, lambda x: NOT list_contains({d}, x))"
        return f"filter({lst}, x -> NOT array_contains({d}, x))"

    def joined(self, lst: str) -> str:
        return f"array_to_string({lst}, ' ')" if self.duck else f"array_join({lst}, ' ')"

    def explode(self, lst: str) -> str:
        return f"unnest({lst})" if self.duck else f"explode({lst})"

    def distinct(self, lst: str) -> str:
        return f"list_distinct({lst})" if self.duck else f"array_distinct({lst})"


def _changes_sql(d: _Dialect, old: str, new: str) -> str:
    """The triples whose decision differs between the matrices ``old`` and ``new`` (views
    or subqueries), with each side's policies; a denied side's are NULL here (filled from
    the forbids' matrices, or empty)."""
    on = " AND ".join(f"o.{k} = n.{k}" for k in KEYS)
    keys = ", ".join(f"coalesce(o.{k}, n.{k}) AS {k}" for k in KEYS)
    before, after = "coalesce(o.decision, 'deny')", "coalesce(n.decision, 'deny')"
    joined = (
        f"SELECT {keys}, {before} AS before, {after} AS after, o.reasons AS o_reasons, "
        f"o.residuals AS o_residuals, n.reasons AS n_reasons, n.residuals AS n_residuals "
        f"FROM {old} AS o FULL OUTER JOIN {new} AS n ON {on} WHERE {before} <> {after}"
    )

    def side(decision: str, reasons: str, residuals: str, names: str) -> str:
        sure, maybe = d.ordered(reasons, names), d.ordered(residuals, names)
        return (
            f"CASE {decision} WHEN 'allow' THEN {sure} "
            f"WHEN 'conditional' THEN {d.concat(sure, d.without(maybe, reasons))} END"
        )

    def undecided(decision: str, residuals: str, names: str) -> str:
        return (
            f"CASE {decision} WHEN 'conditional' THEN {d.ordered(residuals, names)} "
            f"ELSE {d.empty()} END"
        )

    rank_b, rank_a = _RANK.format(d="j.before"), _RANK.format(d="j.after")
    cols = ", ".join(f"j.{k}" for k in KEYS)
    return (
        f"SELECT CASE WHEN {rank_a} > {rank_b} THEN 'gained' ELSE 'lost' END AS change, "
        f"{cols}, j.before, j.after, "
        f"{side('j.after', 'j.n_reasons', 'j.n_residuals', 'pn.new_names')} AS policies, "
        f"{side('j.before', 'j.o_reasons', 'j.o_residuals', 'pn.old_names')} "
        "AS previous_policies, "
        f"{undecided('j.after', 'j.n_residuals', 'pn.new_names')} AS n_undecided, "
        f"{undecided('j.before', 'j.o_residuals', 'pn.old_names')} AS o_undecided "
        f"FROM ({joined}) AS j CROSS JOIN pn"
    )


def _final_sql(d: _Dialect, forbids: set[str]) -> str:
    """The changes with a denied side's policies: the forbids that apply there (``fo``,
    ``fn``: the forbids' matrices, when computed), else none."""
    pol = {"new": "c.policies", "old": "c.previous_policies"}
    joins = []
    for s, alias_, names in (("new", "fn", "pn.new_names"), ("old", "fo", "pn.old_names")):
        if s in forbids:
            on = " AND ".join(f"{alias_}.{k} = c.{k}" for k in KEYS)
            joins.append(f"LEFT JOIN {alias_} ON {on}")
            pol[s] = f"coalesce({pol[s]}, {d.ordered(f'{alias_}.reasons', names)})"
        pol[s] = f"coalesce({pol[s]}, {d.empty()})"
    cols = ", ".join(f"c.{k}" for k in KEYS)
    return (
        f"SELECT c.change, {cols}, c.before, c.after, {pol['new']} AS policies, "
        f"{pol['old']} AS previous_policies, c.n_undecided, c.o_undecided "
        f"FROM changes AS c CROSS JOIN pn {' '.join(joins)}"
    )


def _output_sql(d: _Dialect, fmt: str) -> str:
    """The rows as written: ``residuals`` the new side's undecided policies, then the
    old side's; lists space-separated in CSV."""
    residuals = d.concat("n_undecided", "o_undecided")
    cols = []
    for c in COLUMNS:
        v = residuals if c == "residuals" else c
        if fmt == "csv" and c in ("policies", "previous_policies", "residuals"):
            v = d.joined(v)
        cols.append(v if v == c else f"{v} AS {c}")
    return f"SELECT {', '.join(cols)} FROM diff ORDER BY {_ORDER}"


# ======================================================================== what to compute


def _forbids_as_permits(authorizer: Any) -> Any | None:
    """The side's forbids alone, each as a permit: their matrix (with reasons) lists the
    forbids that apply to each triple, which is what a denied side reports."""
    forbids = {
        pid: replace(p, effect="permit")
        for pid, p in authorizer.policies.items()
        if p.effect == "forbid"
    }
    return Authorizer(forbids) if forbids else None


def _reached_actions(
    policies: Iterable[ast.Policy], actions: Sequence[EntityUID], ancestors: Any
) -> list[EntityUID]:
    """The actions whose matrix a change to these policies can move: those the policies'
    action scopes admit (through action groups)."""
    out = []
    for a in actions:
        up = {a, *ancestors(a)}
        for p in policies:
            c = p.action
            if c.kind == "any" or (
                c.entities[0] == a if c.kind == "eq" else not up.isdisjoint(c.entities)
            ):
                out.append(a)
                break
    return out


def _check_output(output: str | Path | None, fmt: str, engine: str) -> Path | None:
    if fmt not in FORMATS:
        raise SqlError(f"unknown output format {fmt!r}; known: {', '.join(FORMATS)}")
    if output is None:
        return None
    path = Path(output)
    if not path.parent.is_dir():
        raise SqlError(f"output {str(output)!r}: the directory {str(path.parent)!r} does not exist")
    if engine == "duckdb" and path.is_dir():  # Spark writes a directory, DuckDB a file
        raise SqlError(f"output {str(output)!r} is a directory: give a file name")
    return path


# ======================================================================== the diff


Files = Sequence[str | Path]


def sql_diff(
    old: Any,
    new: Any | None = None,
    *,
    entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    old_entities: Iterable[Entity | Mapping[str, Any]] | None = None,
    context: RecordValue | Mapping[str, Any] | None = None,
    engine: str = "duckdb",
    output: str | Path | None = None,
    format: Format = "parquet",
    spark: Any = None,
    workdir: str | Path | None = None,
    decide_limit: int = DECIDE_LIMIT,
    old_files: Files | None = None,
    new_files: Files | None = None,
    **options: Any,
) -> SqlDiffResult:
    """The change in the access matrix from ``old`` to ``new``, on DuckDB or Spark.

    ``old``, ``new``, ``entities``, ``old_entities`` and ``context`` mean what they mean
    for :func:`polang.authoring.diff.diff` (engines or :class:`Side` objects; entity
    objects laid over a side, :func:`~polang.analysis.diff.sides`; ``context=None``
    unknown). ``output``: write the rows there
    (``format`` parquet, csv or jsonl; Spark writes a directory of part files) instead of
    returning entries. ``workdir``: where the two matrices are staged (a temporary
    directory by default; it needs room for both). ``options`` go to
    :func:`~polang.sql.sql_engine` (``threads``, ``memory_limit``,
    ``batch_pairs``, ``udf``, ``staging``); ``threads`` and ``memory_limit`` also bound
    the DuckDB join. ``decide_limit``: see :data:`DECIDE_LIMIT`.

    ``old_files`` / ``new_files``: that side's entities read by DuckDB from Parquet or
    JSON-lines files (``sql_engine(files=)``, typed by the side's schema) instead of its
    store's; they never become Python objects, so a side read from files is never
    compared entity by entity and its denied triples' forbids come from SQL. As with
    ``entities``, two stores and nothing given for the old side: it reads ``new_files``.
    """
    t0 = time.perf_counter()
    if engine not in ENGINES:
        raise SqlError(f"unknown SQL engine {engine!r}; known: {', '.join(ENGINES)}")
    path = _check_output(output, format, engine)
    if new is not None and old_files is None and old_entities is None:
        old_files = new_files  # the same data under two policy sets (as for entities)
    for side, given, read in (("new", entities, new_files), ("old", old_entities, old_files)):
        if given is not None and read:
            raise SqlError(
                f"{'old_' if side == 'old' else ''}entities= lays entities over the store's; "
                f"with {side}_files give them in the files"
            )
    files = {"old": list(old_files or ()), "new": list(new_files or ())}
    if files["old"] and old_entities is None:
        old_entities = ()  # that side's data comes from the files alone
    o, n = sides(old, new, entities, old_entities)
    ctx = diff_context(context)
    stats = DiffStats()
    texts_o, texts_n = policy_texts(o.authorizer), policy_texts(n.authorizer)
    changed_p = sorted(
        pid for pid in texts_o.keys() | texts_n.keys() if texts_o.get(pid) != texts_n.get(pid)
    )
    if files["old"] or files["new"]:  # not loaded: the same files are the same entities
        changed_e = set() if files["old"] == files["new"] else {EntityUID("", "(files)")}
    else:
        changed_e = changed_entities(o.facts, n.facts)
    same_schema = schema_json(o.schema) == schema_json(n.schema)
    stats.changed_policies = changed_p
    stats.changed_entities = 0 if files["old"] or files["new"] else len(changed_e)
    result = SqlDiffResult([], [], stats, o.label, n.label, engine=engine)
    run = _Run(engine, spark, options, workdir, files)
    try:
        if same_schema and not changed_p and not changed_e:
            stats.mode = "unchanged"
            stats.reason = "same policies and entities"
            actions: list[EntityUID] | None = []
        else:
            actions = None
            stats.mode = "full"
            stats.reason = f"{engine}: both access matrices in SQL"
            if same_schema and not changed_e:  # only policies: their action scopes
                pols = [
                    p
                    for pid in changed_p
                    for p in (o.authorizer.policies.get(pid), n.authorizer.policies.get(pid))
                    if p is not None
                ]
                all_actions = run.actions(o)
                anc = o.schema.action_ancestors if o.schema is not None else o.facts.ancestors_of
                actions = _reached_actions(pols, all_actions, anc)
                stats.reason += (
                    f", on the {len(actions)} of {len(all_actions)} actions the changed "
                    "policies' scopes reach"
                )
        run.diff(o, n, ctx, actions, result, path, format, decide_limit)
    finally:
        run.close()
    stats.elapsed_s = time.perf_counter() - t0
    return result


class _Run:
    """One diff's engines, staging directory and join connection."""

    def __init__(
        self,
        engine: str,
        spark: Any,
        options: dict[str, Any],
        workdir: str | Path | None,
        files: dict[str, list[str | Path]],
    ) -> None:
        self.engine = engine
        self.files = files
        self._kept: list[Any] = []
        self.options = options
        self.dialect = _Dialect(engine)
        self.tmp = tempfile.TemporaryDirectory(
            prefix="polang-diff-", dir=None if workdir is None else str(workdir)
        )
        self.dir = Path(self.tmp.name)
        if engine == "spark":
            # as the matrix engines: SPARK_REMOTE, POLANG_SPARK_MASTER, else local[2]
            session = spark if spark is not None else spark_engine.session_from_env()
            try:  # its own temporary views, beside the caller's and another diff's
                self.spark = session.newSession()
            except NotImplementedError:  # an older Spark Connect: the session itself
                self.spark = session
            self.con: Any = None
        else:
            self.spark = None
            self.con = _duck_connect(self.dir, options)

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
        for df in self._kept:
            df.unpersist()
        self.tmp.cleanup()

    def _sql_engine(self, authorizer: Any, side: Side, files: list[str | Path]) -> Any:
        kw = dict(self.options)
        if self.engine == "spark":
            kw["spark"] = self.spark
        if files:
            kw.pop("udf", None)  # no in-process entities for a UDF to read
            return sql_engine(authorizer, None, side.schema, engine=self.engine, files=files, **kw)
        facts = cast(Any, side.facts)  # an EntityFacts: the UDF reads it
        return sql_engine(authorizer, facts, side.schema, engine=self.engine, **kw)

    def actions(self, side: Side) -> list[EntityUID]:
        """Every action of a side's matrix: the schema's, else the stored action
        entities and those the policies name."""
        if side.schema is not None:
            return sorted(side.schema.actions)
        found = {e.uid for e in side.facts.entities if is_action_type(e.uid.type)}
        for p in side.authorizer.policies.values():
            found.update(p.action.entities)
        return sorted(found)

    # -- the matrices ----------------------------------------------------------------------

    def matrix(
        self,
        name: str,
        authorizer: Any,
        side: Side,
        ctx: RecordValue | None,
        actions: list[EntityUID] | None,
        files: list[str | Path],
    ) -> list[Any]:
        """A side's matrix (with reasons) staged as Parquet and registered as the view
        ``name``; its fallbacks."""
        target = self.dir / name
        eng = self._sql_engine(authorizer, side, files)
        try:
            res = eng.access_matrix(
                ctx, actions=actions, output=target, format="parquet", reasons=True
            )
            fallbacks = list(res.fallbacks)
        finally:
            close = getattr(eng, "close", None)
            if close is not None:
                close()
        self._register(name, target)
        return fallbacks

    def _register(self, name: str, target: Path | None) -> None:
        """The staged rows (reasons and residuals as policy ids) as the view ``name``; no
        rows at all when ``target`` is None."""
        if target is None:
            text = "VARCHAR" if self.con is not None else "STRING"
            keys = ", ".join(f"CAST(NULL AS {text}) AS {c}" for c in KEYS)
            select = (
                f"SELECT {keys}, CAST(NULL AS {text}) AS decision, {self.dialect.empty()} AS "
                f"reasons, {self.dialect.empty()} AS residuals WHERE 1 = 0"
            )
        elif self.con is not None:
            select = f"SELECT * FROM read_parquet({_lit(target)})"
        else:
            self.spark.read.parquet(str(target)).createOrReplaceTempView(name)
            return
        if self.con is not None:
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
        else:
            self.spark.sql(select).createOrReplaceTempView(name)

    def _names(self, o: Side, n: Side) -> None:
        old_names, new_names = list(o.authorizer.policies), list(n.authorizer.policies)
        if self.con is not None:
            self.con.execute(
                "CREATE OR REPLACE TABLE pn AS SELECT ?::VARCHAR[] AS old_names, "
                "?::VARCHAR[] AS new_names",
                [old_names, new_names],
            )
        else:
            self.spark.createDataFrame(
                [(old_names, new_names)], "old_names array<string>, new_names array<string>"
            ).createOrReplaceTempView("pn")

    def _sql(self, text: str) -> list[tuple[Any, ...]]:
        if self.con is not None:
            return [tuple(r) for r in self.con.execute(text).fetchall()]
        return [tuple(r) for r in self.spark.sql(text).collect()]

    # -- the diff --------------------------------------------------------------------------

    def diff(
        self,
        o: Side,
        n: Side,
        ctx: RecordValue | None,
        actions: list[EntityUID] | None,
        result: SqlDiffResult,
        path: Path | None,
        fmt: str,
        decide_limit: int,
    ) -> None:
        d = self.dialect
        self._names(o, n)
        if actions == []:
            for v in ("om", "nm"):
                self._register(v, None)
        else:
            fb_o = self.matrix("om", o.authorizer, o, ctx, actions, self.files["old"])
            fb_n = self.matrix("nm", n.authorizer, n, ctx, actions, self.files["new"])
            seen = set()
            for label, fbs in (("old", fb_o), ("new", fb_n)):
                for f in fbs:
                    row = {"side": label, **f.to_dict()}
                    key = tuple(row.values())
                    if key not in seen:
                        seen.add(key)
                        result.fallbacks.append(row)
        self._changes(actions)
        forbids: set[str] = set()
        if ctx is not None:
            for name, side, view, col in (("new", n, "fn", "after"), ("old", o, "fo", "before")):
                if self._denied(name, side, view, col, ctx, decide_limit):
                    forbids.add(name)
        self._table("diff", _final_sql(d, forbids))
        result.counts = self._summary()
        result.rows = result.counts["gained"] + result.counts["lost"]
        if path is not None:
            self._write(path, fmt)
            result.output = str(path)
        else:
            self._entries(o, n, result)

    def _denied(
        self, name: str, side: Side, view: str, col: str, ctx: RecordValue, limit: int
    ) -> bool:
        """The policies of the changed triples denied on one side (the forbids that apply,
        as the in-process decision names them) as the view ``view``: decided in process
        when at most ``limit`` triples need it, else the forbids' own matrix in SQL (on
        the actions that need it). False when no triple is denied there."""
        (count,) = self._sql(f"SELECT count(*) FROM changes WHERE {col} = 'deny'")
        if not count[0]:
            return False
        files = self.files[name]
        if count[0] > limit or files:
            alone = _forbids_as_permits(side.authorizer)
            if alone is None:
                return False
            acts = self._sql(
                f"SELECT DISTINCT action_type, action_id FROM changes WHERE {col} = 'deny'"
            )
            self.matrix(view, alone, side, ctx, sorted(EntityUID(t, i) for t, i in acts), files)
            return True
        keys = ", ".join(KEYS)
        rows = []
        facts, decide = side.facts, side.authorizer.decide
        for pt, pi, at, ai, rt, ri in self._sql(f"SELECT {keys} FROM changes WHERE {col} = 'deny'"):
            p, r = EntityUID(pt, pi), EntityUID(rt, ri)
            if facts.get(p) is None or facts.get(r) is None:
                continue  # not in this side's store: no such triple, no policy
            reasons = decide(Request(p, EntityUID(at, ai), r, ctx), facts).reasons
            if reasons:
                rows.append((pt, pi, at, ai, rt, ri, list(reasons)))
        self._rows(view, rows)
        return True

    def _rows(self, view: str, rows: list[tuple[Any, ...]]) -> None:
        """A small table of (keys, reasons) rows made in Python."""
        import pyarrow as pa

        names = [*KEYS, "reasons"]
        types = [pa.string()] * len(KEYS) + [pa.list_(pa.string())]
        table = pa.table(
            [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)], names=names
        )
        if self.con is not None:
            self.con.register(f"{view}_arrow", table)
            self.con.execute(f"CREATE OR REPLACE TABLE {view} AS SELECT * FROM {view}_arrow")
            self.con.unregister(f"{view}_arrow")
        else:
            schema = ", ".join(f"{k} string" for k in KEYS) + ", reasons array<string>"
            self.spark.createDataFrame([tuple(r) for r in rows], schema).createOrReplaceTempView(
                view
            )

    def _table(self, name: str, select: str) -> None:
        if self.con is not None:
            self.con.execute(f"CREATE OR REPLACE TABLE {name} AS {select}")
        else:  # kept by Spark (memory, then disk) for the queries that follow
            df = self.spark.sql(select).persist()
            self._kept.append(df)
            df.createOrReplaceTempView(name)

    def _changes(self, actions: list[EntityUID] | None) -> None:
        """The changed triples, one action at a time on DuckDB (the join's hash table
        holds one action's rows of the two matrices, not all of them)."""
        d = self.dialect
        if self.con is None:
            self._table("changes", _changes_sql(d, "om", "nm"))
            return
        acts = self._sql(
            "SELECT DISTINCT action_type, action_id FROM (SELECT action_type, action_id FROM om "
            "UNION ALL SELECT action_type, action_id FROM nm) ORDER BY 1, 2"
        )
        first = True
        for t, i in acts:
            cond = f"action_type = {_lit(t)} AND action_id = {_lit(i)}"
            sel = _changes_sql(
                d, f"(SELECT * FROM om WHERE {cond})", f"(SELECT * FROM nm WHERE {cond})"
            )
            if first:
                self.con.execute(f"CREATE OR REPLACE TABLE changes AS {sel}")
                first = False
            else:
                self.con.execute(f"INSERT INTO changes {sel}")
        if first:
            self.con.execute(f"CREATE OR REPLACE TABLE changes AS {_changes_sql(d, 'om', 'nm')}")

    def _summary(self) -> dict[str, Any]:
        """``DiffResult.summary()``, computed over the rows in SQL (two aggregations)."""
        d = self.dialect
        total = {"gained": 0, "lost": 0}
        conditional = 0
        by: dict[str, dict[str, dict[str, int]]] = {
            "by_action": {},
            "by_principal_type": {},
            "by_resource_type": {},
        }

        def add(group: str, key: str, change: str, c: int) -> None:
            counts = by[group].setdefault(key, {"gained": 0, "lost": 0})
            counts[change] += c

        for at, ai, pt, rt, change, c, cond in self._sql(
            "SELECT action_type, action_id, principal_type, resource_type, change, count(*), "
            "sum(CASE WHEN before = 'conditional' OR after = 'conditional' THEN 1 ELSE 0 END) "
            "FROM diff GROUP BY action_type, action_id, principal_type, resource_type, change"
        ):
            c = int(c)
            total[change] += c
            conditional += int(cond)
            add("by_action", str(EntityUID(at, ai)), change, c)
            add("by_principal_type", pt, change, c)
            add("by_resource_type", rt, change, c)
        pols = d.distinct(d.concat("policies", "previous_policies"))
        by_policy: dict[str, dict[str, int]] = {}
        for pid, change, c in self._sql(
            f"SELECT pid, change, count(*) FROM (SELECT change, {d.explode(pols)} AS pid "
            "FROM diff) AS x GROUP BY pid, change"
        ):
            by_policy.setdefault(pid, {"gained": 0, "lost": 0})[change] = int(c)
        return {
            "gained": total["gained"],
            "lost": total["lost"],
            "conditional": conditional,
            "by_policy": dict(sorted(by_policy.items())),
            **{k: dict(sorted(v.items())) for k, v in by.items()},
        }

    def _write(self, path: Path, fmt: str) -> None:
        select = _output_sql(self.dialect, fmt)
        if self.con is not None:
            opts = {
                "parquet": "FORMAT parquet",
                "csv": "FORMAT csv, HEADER true",
                "jsonl": "FORMAT json",
            }[fmt]
            self.con.execute(f"COPY ({select}) TO {_lit(path)} ({opts})")
            return
        w = self.spark.sql(select).write.mode("overwrite")
        if fmt == "parquet":
            w.parquet(str(path))
        elif fmt == "csv":
            w.option("header", "true").csv(str(path))
        else:
            w.json(str(path))

    def _entries(self, o: Side, n: Side, result: SqlDiffResult) -> None:
        effect_o = {pid: p.effect for pid, p in o.authorizer.policies.items()}
        effect_n = {pid: p.effect for pid, p in n.authorizer.policies.items()}
        cols = ", ".join(c for c in COLUMNS if c != "residuals")
        for row in self._sql(
            f"SELECT {cols}, n_undecided, o_undecided FROM diff ORDER BY {_ORDER}"
        ):
            change, pt, pi, at, ai, rt, ri, before, after, now, prev, n_und, o_und = row
            # as in process: the new side's undecided policies, then the old side's
            residuals = tuple(
                [{"policy_id": pid, "effect": effect_n.get(pid, "")} for pid in n_und or ()]
                + [{"policy_id": pid, "effect": effect_o.get(pid, "")} for pid in o_und or ()]
            )
            entry = DiffEntry(
                EntityUID(pt, pi),
                EntityUID(at, ai),
                EntityUID(rt, ri),
                change,
                before,
                after,
                tuple(now),
                tuple(prev),
                residuals,
            )
            (result.gained if change == "gained" else result.lost).append(entry)


def _lit(v: Any) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def _duck_connect(tmp: Path, options: Mapping[str, Any]) -> Any:
    try:
        import duckdb
    except ImportError:
        raise SqlError("the DuckDB engine needs duckdb: pip install 'polang[duckdb]'") from None
    config: dict[str, Any] = {"temp_directory": str(tmp / "spill")}
    if options.get("threads"):
        config["threads"] = int(options["threads"])
    if options.get("memory_limit"):
        config["memory_limit"] = str(options["memory_limit"])
    return duckdb.connect(":memory:", config=config)


__all__ = ["COLUMNS", "SqlDiffResult", "sql_diff"]
