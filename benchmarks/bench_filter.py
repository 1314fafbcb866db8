"""List endpoints: the first page of readable documents through a plan's SQL filter, beside
paging through ``authorize_unsigned_batch`` and ``what_can``.

Usage::

    python benchmarks/bench_filter.py [--rows N] [--peer-rows N] [--repeat R]
        [--no-postgres] [--no-sqlite] [--json]

The store is the benchmark store's shape (``workload.py``: groups, users, folders and
documents; role rules on folders, owner rules, attribute rules on labels and departments,
forbids with ``unless``) with the documents taken out: they are ``--rows`` rows (default
1,000,000) of a ``documents`` table in a folder hierarchy 6 deep (8 children a folder,
37,449 folders; the documents in the 32,768 leaves), with the obvious indexes (primary
keys, ``documents(folder_id, created)``, ``documents(owner_id, created)`` (a list
ordered by ``created`` is the endpoint), ``documents(created)``,
``folders(parent_id)``, the labels table on both columns). Three users:

- ``most``: in the group granted the root folder (reads every document but the archived);
- ``few``: in a team granted one folder 5 levels down, owner of a thousand documents;
- ``none``: may read no document (the plan is ``always_denied`` or a filter no row passes).

For each (user, database) it times, warm (``--repeat`` runs after one warm-up, median):

- ``plan``: ``Engine.plan`` (the principal a store reference);
- ``filter``: ``Engine.plan``, ``translate`` and the first page, ``SELECT ... WHERE
  <filter> ORDER BY created DESC LIMIT 20`` (the query alone is ``query``), twice: with
  ``in`` as a recursive walk down the folders (``walk``), and with the folder closure
  table the service keeps (``bench_folder_closure``, ``closure``);
- ``batch``: paging through the rows in the same order, ``--page`` (100) rows a query,
  each decided by ``authorize_unsigned_batch`` (the rows given in full), until 20 are
  allowed or the rows run out: over the first ``--peer-rows`` rows only (default 10,000),
  because a user who may read nothing reads them all;
- ``what_can``: the same ``--peer-rows`` rows given as entities to ``what_can``, the
  allowed ones ordered and cut to 20.

Every first page is checked: the filter's 20 rows must be the batch pager's 20 (over the
peer rows both see), and every row of the filter's page must be allowed by
``authorize_unsigned``. Times are wall-clock milliseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from polang.engine.facade import Engine
from polang.filtering import Mapping, translate

POSTGRES = "host=127.0.0.1 port=5432 user=postgres dbname=test"
FANOUT = 8
DEPTH = 6  # levels of folders: 1 + 8 + ... + 8**5 = 37,449
N_USERS = 1_000
ACTION = 'Action::"view"'
PAGE = 20
USERS = {"most": "u0", "few": "u1", "none": "u2"}

SCHEMA = """
entity Group in [Group];
entity User in [Group] { dept: String, level: Long, clearance: Long } tags String;
entity Folder in [Folder];
entity Document in [Folder] {
  owner: User, dept: String, classification: Long, archived: Bool, created: Long,
  labels: Set<String>
} tags String;
action read;
action view, comment in [Action::"read"] appliesTo {
  principal: [User], resource: [Document], context: { hour: Long }
};
"""


def folder_ids(depth: int = DEPTH) -> tuple[list[tuple[int, int | None]], list[int]]:
    """(id, parent) of every folder, breadth first from 1; and the leaves."""
    rows: list[tuple[int, int | None]] = [(1, None)]
    level = [1]
    next_id = 2
    for _ in range(depth - 1):
        below = []
        for f in level:
            for _ in range(FANOUT):
                rows.append((next_id, f))
                below.append(next_id)
                next_id += 1
        level = below
    return rows, level


def policies(team_folder: int, label_folder: int, hours_folder: int) -> str:
    """The benchmark store's forms (workload.py), for the one action viewed here."""
    return f"""
@id("readers-everything") permit(principal in Group::"readers", action in Action::"read",
  resource in Folder::"1");
@id("team-folder") permit(principal in Group::"team", action in Action::"read",
  resource in Folder::"{team_folder}");
@id("owner") permit(principal, action in [Action::"view", Action::"comment"],
  resource is Document) when {{ resource.owner == principal }};
@id("dept-clearance") permit(principal, action in Action::"read", resource is Document)
  when {{ principal.dept == "eng" && resource.dept == principal.dept &&
         principal.clearance >= resource.classification }};
@id("public-label") permit(principal in Group::"team", action == Action::"view",
  resource is Document in Folder::"{label_folder}") when {{ resource.labels.contains("public") }};
@id("project-tag") permit(principal, action in Action::"read", resource is Document)
  when {{ resource.hasTag("project") && principal.hasTag("project") &&
         principal.getTag("project") == resource.getTag("project") }};
@id("archived") forbid(principal, action == Action::"view", resource is Document)
  when {{ resource.archived }} unless {{ principal.level >= 9 }};
@id("office-hours") forbid(principal in Group::"contractors", action,
  resource in Folder::"{hours_folder}") unless {{ context.hour >= 8 && context.hour < 18 }};
"""


MAPPING = {
    "types": {
        "Document": {
            "table": "bench_documents",
            "id_type": "Long",
            "attributes": {
                "owner": {"column": "owner_id", "type": "User"},
                "dept": "dept",
                "classification": {"column": "classification", "type": "Long"},
                "archived": {"column": "archived", "type": "Boolean"},
                "created": {"column": "created", "type": "Long"},
                "labels": {
                    "set": {"table": "bench_labels", "key": "doc_id", "value": "label"},
                    "type": "String",
                },
            },
            "parents": [{"column": "folder_id", "type": "Folder"}],
            "tags": {
                "table": "bench_tags",
                "key": "doc_id",
                "name": "name",
                "value": "value",
                "type": "String",
            },
        },
        "Folder": {
            "table": "bench_folders",
            "id_type": "Long",
            "parents": [{"column": "parent_id", "type": "Folder"}],
        },
        "User": {"table": "bench_users", "attributes": {"dept": "dept"}},
        "Group": {"table": "bench_groups"},
    }
}

DEPTS = ["eng", "ops", "sales", "legal"]
PROJECTS = ["apollo", "gemini", "mercury"]


class World:
    """The documents (as column tuples) and the store around them."""

    def __init__(self, rows: int, seed: int = 7, depth: int = DEPTH) -> None:
        rng = random.Random(seed)
        self.folders, leaves = folder_ids(depth)
        parent = dict(self.folders)
        above_leaves = sorted({parent[f] for f in leaves if parent[f] is not None})
        self.team_folder = above_leaves[len(above_leaves) // 3] if above_leaves else 1
        # two levels above the leaves (64 leaf folders at depth 6), away from the team's
        grand = sorted({parent[f] for f in above_leaves if parent[f] is not None})
        self.label_folder = grand[len(grand) // 5] if grand else 1
        self.hours_folder = self.folders[min(5, len(self.folders) - 1)][0]
        self.docs: list[tuple[Any, ...]] = []
        self.labels: list[tuple[int, str]] = []
        self.tags: list[tuple[int, str, str]] = []
        for i in range(1, rows + 1):
            owner = f"u{rng.choice([1, *range(3, N_USERS)])}"  # u0 and u2 own nothing
            self.docs.append(
                (
                    i,
                    leaves[rng.randrange(len(leaves))],
                    owner,
                    rng.choice(DEPTS),
                    rng.randint(0, 5),
                    rng.random() < 0.05,
                    1_700_000_000_000 + rng.randrange(10**10),
                )
            )
            for lab in rng.sample(["public", "draft", "confidential"], rng.randint(0, 1)):
                self.labels.append((i, lab))
            if rng.random() < 0.1:
                self.tags.append((i, "project", rng.choice(PROJECTS)))
        self.label_set: dict[int, list[str]] = {}
        for d, lab in self.labels:
            self.label_set.setdefault(d, []).append(lab)
        self.tag_map = {d: {n: v} for d, n, v in self.tags}
        parent = dict(self.folders)
        self.closure: list[tuple[int, int]] = []
        for f, _ in self.folders:
            a = parent[f]
            while a is not None:
                self.closure.append((f, a))
                a = parent[a]

    def store(self, root: Path) -> Path:
        (root / "policies").mkdir(parents=True)
        (root / "entities").mkdir()
        (root / "metadata.json").write_text(
            json.dumps(
                {
                    "polang_version": "4.0.0",
                    "policy_store": {"id": "bench-filter", "name": "bench", "version": "1.0.0"},
                }
            )
        )
        (root / "schema.polangschema").write_text(SCHEMA)
        (root / "policies" / "p.polang").write_text(
            policies(self.team_folder, self.label_folder, self.hours_folder)
        )
        ents: list[dict[str, Any]] = [
            {"uid": {"type": "Group", "id": g}, "attrs": {}, "parents": []}
            for g in ("readers", "team", "contractors")
        ]
        groups = {"u0": ["readers"], "u1": ["team"], "u2": []}
        for i in range(N_USERS):
            u = f"u{i}"
            ents.append(
                {
                    "uid": {"type": "User", "id": u},
                    "attrs": {
                        "dept": "sales" if i < 3 else DEPTS[i % 4],
                        "level": 5,
                        "clearance": 2,
                    },
                    "parents": [{"type": "Group", "id": g} for g in groups.get(u, ["contractors"])],
                    "tags": {},
                }
            )
        ents += [
            {
                "uid": {"type": "Folder", "id": str(f)},
                "attrs": {},
                "parents": [] if p is None else [{"type": "Folder", "id": str(p)}],
            }
            for f, p in self.folders
        ]
        (root / "entities" / "e.json").write_text(json.dumps(ents))
        return root

    def entity(self, row: tuple[Any, ...]) -> dict[str, Any]:
        i, folder, owner, dept, cls, archived, created = row[:7]
        return {
            "uid": {"type": "Document", "id": str(i)},
            "attrs": {
                "owner": {"__entity": {"type": "User", "id": owner}},
                "dept": dept,
                "classification": cls,
                "archived": bool(archived),
                "created": created,
                "labels": self.label_set.get(i, []),
            },
            "parents": [{"type": "Folder", "id": str(folder)}],
            "tags": self.tag_map.get(i, {}),
        }


# ============================================================================ databases


class Db:
    """One database: ``run(sql)`` returns rows."""

    name = ""
    dialect = ""

    def run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Sqlite(Db):
    name = dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        self.c = sqlite3.connect(path)

    def run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.c.execute(sql, args).fetchall()

    def load(self, w: World) -> None:
        c = self.c
        for ddl in DDL:
            c.execute(ddl.replace("BOOLEAN", "INTEGER"))
        c.executemany("INSERT INTO bench_folders VALUES (?, ?)", w.folders)
        c.executemany("INSERT INTO bench_documents VALUES (?, ?, ?, ?, ?, ?, ?)", w.docs)
        c.executemany("INSERT INTO bench_labels VALUES (?, ?)", w.labels)
        c.executemany("INSERT INTO bench_tags VALUES (?, ?, ?)", w.tags)
        c.executemany("INSERT INTO bench_folder_closure VALUES (?, ?)", w.closure)
        for idx in INDEXES:
            c.execute(idx)
        c.commit()
        c.execute("ANALYZE")


class Postgres(Db):
    name = "postgresql"
    dialect = "postgres"

    def __init__(self) -> None:
        import psycopg

        self.c = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3)

    def run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.c.execute(sql.replace("%", "%%") if not args else sql, args).fetchall()

    def load(self, w: World) -> None:
        c = self.c
        for t in TABLES:
            c.execute(f"DROP TABLE IF EXISTS {t}")
        for ddl in DDL:
            c.execute(ddl)
        for table, rows in (
            ("bench_folders", w.folders),
            ("bench_documents", w.docs),
            ("bench_labels", w.labels),
            ("bench_tags", w.tags),
            ("bench_folder_closure", w.closure),
        ):
            with c.cursor().copy(f"COPY {table} FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
        for idx in INDEXES:
            c.execute(idx)
        c.execute("ANALYZE")

    def close(self) -> None:
        for t in TABLES:
            self.c.execute(f"DROP TABLE IF EXISTS {t}")
        self.c.close()


TABLES = ("bench_documents", "bench_folders", "bench_labels", "bench_tags", "bench_folder_closure")
DDL = [
    "CREATE TABLE bench_folders (id BIGINT PRIMARY KEY, parent_id BIGINT)",
    "CREATE TABLE bench_documents (id BIGINT PRIMARY KEY, folder_id BIGINT, owner_id TEXT, "
    "dept TEXT, classification BIGINT, archived BOOLEAN, created BIGINT)",
    "CREATE TABLE bench_labels (doc_id BIGINT, label TEXT)",
    "CREATE TABLE bench_tags (doc_id BIGINT, name TEXT, value TEXT)",
    "CREATE TABLE bench_folder_closure (folder_id BIGINT, ancestor_id BIGINT)",
]
INDEXES = [
    "CREATE INDEX bench_folders_parent ON bench_folders (parent_id)",
    "CREATE INDEX bench_documents_folder ON bench_documents (folder_id, created)",
    "CREATE INDEX bench_documents_owner ON bench_documents (owner_id, created)",
    "CREATE INDEX bench_documents_created ON bench_documents (created)",
    "CREATE INDEX bench_labels_doc ON bench_labels (doc_id, label)",
    "CREATE INDEX bench_labels_label ON bench_labels (label, doc_id)",
    "CREATE INDEX bench_tags_doc ON bench_tags (doc_id, name)",
    "CREATE INDEX bench_closure_ancestor ON bench_folder_closure (ancestor_id, folder_id)",
]
COLUMNS = "id, folder_id, owner_id, dept, classification, archived, created"


# ============================================================================ the runs


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


CLOSURE = {"table": "bench_folder_closure", "descendant": "folder_id", "ancestor": "ancestor_id"}


def mappings() -> dict[str, Mapping]:
    """The two ways to ``in``: the recursive walk, and the service's closure table."""
    closed = json.loads(json.dumps(MAPPING))
    closed["types"]["Folder"]["closure"] = CLOSURE
    return {"walk": Mapping.from_dict(MAPPING), "closure": Mapping.from_dict(closed)}


def first_page_filter(engine: Engine, db: Db, mapping: Mapping, user: str) -> list[int]:
    """Plan, translate and fetch the first page."""
    plan = engine.plan(ACTION, "Document", principal=f'User::"{user}"', context={"hour": 10})
    return [r[0] for r in db.run(page_query(translate(plan, mapping, db.dialect)))]


def page_query(f: Any) -> str:
    return (
        f"SELECT {COLUMNS} FROM bench_documents WHERE {f.sql()} ORDER BY created DESC LIMIT {PAGE}"
    )


def pages(db: Db, peer_rows: int, page: int) -> Iterator[list[tuple[Any, ...]]]:
    """The first ``peer_rows`` rows in the page's order, ``page`` rows a query (keyset)."""
    last: Any = None
    seen = 0
    while seen < peer_rows:
        n = min(page, peer_rows - seen)
        ph = "?" if db.dialect == "sqlite" else "%s"
        where = "" if last is None else f"WHERE created < {ph} "
        rows = db.run(
            f"SELECT {COLUMNS} FROM bench_documents {where}ORDER BY created DESC LIMIT {n}",
            () if last is None else (last,),
        )
        if not rows:
            return
        seen += len(rows)
        last = rows[-1][6]
        yield rows


def first_page_batch(
    engine: Engine, db: Db, w: World, user: str, peer_rows: int, page: int
) -> list[int]:
    out: list[int] = []
    for rows in pages(db, peer_rows, page):
        reqs = [{"action": ACTION, "resource": w.entity(r), "context": {"hour": 10}} for r in rows]
        results = engine.authorize_unsigned_batch(reqs, principal=f'User::"{user}"')
        for r, res in zip(rows, results, strict=True):
            if getattr(res, "decision", False):
                out.append(r[0])
                if len(out) == PAGE:
                    return out
    return out


def first_page_what_can(
    engine: Engine, db: Db, w: World, user: str, peer_rows: int, page: int
) -> list[int]:
    rows = [r for chunk in pages(db, peer_rows, page * 10) for r in chunk]
    created = {str(r[0]): r[6] for r in rows}
    res = engine.what_can(
        f'User::"{user}"', ACTION, {"hour": 10}, entities=[w.entity(r) for r in rows]
    )
    ids = [a.resource.id for a in res if a.resource.type == "Document" and a.resource.id in created]
    ids.sort(key=lambda i: -created[i])
    return [int(i) for i in ids[:PAGE]]


def run(
    rows: int,
    peer_rows: int,
    repeat: int,
    page: int,
    use_pg: bool,
    use_sqlite: bool,
    depth: int = DEPTH,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    w = World(rows, depth=depth)
    maps = mappings()
    out: dict[str, Any] = {"rows": rows, "peer_rows": min(peer_rows, rows), "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(
            {
                "ENGINE_POLICY_STORE_LOCAL_FN": str(w.store(Path(tmp) / "store")),
                "ENGINE_MAX_DEFAULT_ENTITIES": 100_000,  # the folders and users
            }
        )
        out["generate_s"] = round(time.perf_counter() - t0, 1)
        dbs: list[Db] = []
        if use_sqlite:
            dbs.append(Sqlite(Path(tmp) / "bench.sqlite"))
        if use_pg:
            try:
                dbs.append(Postgres())
            except Exception as e:  # no server: said, and the run goes on without it
                print(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {e}", file=sys.stderr)
        for db in dbs:
            t = time.perf_counter()
            db.load(w)  # type: ignore[attr-defined]
            out[f"load_{db.name}_s"] = round(time.perf_counter() - t, 1)
            for label, user in USERS.items():
                plan_ms, plan = median_ms(
                    lambda u=user: engine.plan(  # type: ignore[misc]
                        ACTION, "Document", principal=f'User::"{u}"', context={"hour": 10}
                    ),
                    repeat * 5,
                )
                timed: dict[str, float] = {}
                got: list[int] = []
                for how, mapping in maps.items():
                    sql = page_query(translate(plan, mapping, db.dialect))
                    timed[f"query_{how}_ms"], _ = median_ms(lambda s=sql, d=db: d.run(s), repeat)  # type: ignore[misc]
                    timed[f"filter_{how}_ms"], page_ids = median_ms(
                        lambda u=user, m=mapping, d=db: first_page_filter(engine, d, m, u),  # type: ignore[misc]
                        repeat,
                    )
                    assert not got or page_ids == got, (label, how)
                    got = page_ids
                batch_ms, batch = median_ms(
                    lambda u=user, d=db: first_page_batch(engine, d, w, u, peer_rows, page),  # type: ignore[misc]
                    max(1, repeat // 3),
                )
                what_ms, what = median_ms(
                    lambda u=user, d=db: first_page_what_can(engine, d, w, u, peer_rows, page),  # type: ignore[misc]
                    1,
                )
                peers_cover = len(batch) == PAGE or peer_rows >= rows
                by_id = {r[0]: r for r in w.docs[: len(w.docs)]}
                for i in got:
                    res = engine.authorize_unsigned(
                        ACTION, w.entity(by_id[i]), {"hour": 10}, f'User::"{user}"'
                    )
                    assert res.decision, (label, i)
                if peers_cover:
                    assert got == batch == what, (label, got, batch, what)
                out["results"].append(
                    {
                        "db": db.name,
                        "user": label,
                        "plan": plan.kind,
                        "allowed_on_page": len(got),
                        "plan_ms": round(plan_ms, 3),
                        **{k: round(v, 2) for k, v in timed.items()},
                        "batch_ms": round(batch_ms, 1),
                        "what_can_ms": round(what_ms, 1),
                        "peers_checked_same_page": peers_cover,
                    }
                )
            db.close()
        engine.close()
    return out


# ============================================================================ the corpus


def _sql_type(values: list[Any]) -> str | None:
    """The mapping type of one attribute's values across a file's entities (None: no one
    column type holds them all, such as records or mixed types)."""
    from polang.language.extensions import DateTime, Decimal, Duration, IPAddr
    from polang.language.values import EntityUID, SetValue

    kinds = set()
    for v in values:
        t = type(v)
        if t is bool:
            kinds.add("Boolean")
        elif t is int:
            kinds.add("Long")
        elif t is str:
            kinds.add("String")
        elif t is EntityUID:
            kinds.add(("entity", v.type))
        elif t is Decimal:
            kinds.add("decimal")
        elif t is DateTime:
            kinds.add("datetime")
        elif t is Duration:
            kinds.add("duration")
        elif t is IPAddr:
            kinds.add("ipaddr")
        elif t is SetValue:
            inner = _sql_type(list(v))
            if inner is not None and inner.startswith("set:"):
                return None  # sets of sets have no column form
            kinds.add(("set", inner) if inner is not None or not len(v) else None)
        else:
            return None
    kinds.discard(("set", None))  # empty sets fit any set type
    if len(kinds) != 1 or None in kinds:
        return None
    k = kinds.pop()
    if isinstance(k, tuple) and k[0] == "entity":
        return f"entity:{k[1]}"
    if isinstance(k, tuple):
        return f"set:{k[1]}" if k[1] is not None else None
    return str(k)


def _cell(v: Any) -> Any:
    from polang.language.extensions import DateTime, Decimal, Duration
    from polang.language.values import EntityUID

    t = type(v)
    if t is EntityUID:
        return v.id
    if t is Decimal:
        return v.scaled
    if t in (DateTime, Duration):
        return v.ms
    if t is bool:
        return int(v)
    return v if t in (int, str) else str(v)


def corpus_tables(entities: list[Any], db: sqlite3.Connection) -> Mapping:
    """One SQLite table per entity type of a corpus file's entities, a mapping over them
    (attributes whose values fit one column type; parents in association tables; tags in
    a tags table when they are of one type), and the rows."""
    from polang.language.values import SetValue

    by_type: dict[str, list[Any]] = {}
    for e in entities:
        by_type.setdefault(e.uid.type, []).append(e)
    for e in entities:  # types named only as references and parents: empty tables
        for v in [*e.attrs.values(), *e.parents]:
            for u in v if isinstance(v, SetValue) else [v]:
                if hasattr(u, "type") and hasattr(u, "id"):
                    by_type.setdefault(u.type, [])
    types: dict[str, Any] = {}
    for n, (t, ents) in enumerate(sorted(by_type.items())):
        table = f"t{n}"
        attrs: dict[str, Any] = {}
        cols: list[tuple[str, str]] = []  # (attribute, column)
        sets: list[tuple[str, str]] = []
        names = sorted({a for e in ents for a in e.attrs})
        for i, a in enumerate(names):
            ty = _sql_type([e.attrs[a] for e in ents if a in e.attrs])
            if ty is None:
                continue
            if ty.startswith("set:"):
                elem = ty[4:]
                elem = elem[7:] if elem.startswith("entity:") else elem
                st = f"{table}_s{i}"
                attrs[a] = {"set": {"table": st, "key": "k", "value": "v"}, "type": elem}
                sets.append((a, st))
                db.execute(f"CREATE TABLE {st} (k TEXT, v)")
                continue
            col = f"a{i}"
            attrs[a] = {"column": col, "type": ty[7:] if ty.startswith("entity:") else ty}
            cols.append((a, col))
        ptypes = sorted({p.type for e in ents for p in e.parents})
        parents = [
            {"table": f"{table}_p", "child": "c", "parent": "p", "type": pt} for pt in ptypes
        ]
        # one association table per parent type would be more usual; one per type with
        # the parent type checked keeps ids of several parent types apart
        for j in range(len(ptypes)):
            parents[j]["table"] = f"{table}_p{j}"
            db.execute(f"CREATE TABLE {table}_p{j} (c TEXT, p TEXT)")
        tag_types = {_sql_type([v]) for e in ents for v in e.tags.values()}
        tags = None
        if len(tag_types) == 1 and next(iter(tag_types)) in ("String", "Long", "Boolean"):
            tags = {
                "table": f"{table}_t",
                "key": "k",
                "name": "n",
                "value": "v",
                "type": next(iter(tag_types)),
            }
            db.execute(f"CREATE TABLE {table}_t (k TEXT, n TEXT, v)")
        db.execute(f"CREATE TABLE {table} (id TEXT" + "".join(f", {c}" for _, c in cols) + ")")
        for e in ents:
            db.execute(
                f"INSERT INTO {table} VALUES (?" + ", ?" * len(cols) + ")",
                (e.uid.id, *(_cell(e.attrs[a]) if a in e.attrs else None for a, _ in cols)),
            )
            for a, st in sets:
                v = e.attrs.get(a)
                if isinstance(v, SetValue):
                    db.executemany(
                        f"INSERT INTO {st} VALUES (?, ?)", [(e.uid.id, _cell(x)) for x in v]
                    )
            for j, pt in enumerate(ptypes):
                db.executemany(
                    f"INSERT INTO {table}_p{j} VALUES (?, ?)",
                    [(e.uid.id, p.id) for p in e.parents if p.type == pt],
                )
            if tags is not None:
                db.executemany(
                    f"INSERT INTO {table}_t VALUES (?, ?, ?)",
                    [(e.uid.id, k, _cell(v)) for k, v in e.tags.items()],
                )
        types[t] = {"table": table, "attributes": attrs, "parents": parents}
        if tags is not None:
            types[t]["tags"] = tags
    return Mapping.from_dict({"types": types})


def corpus_run(root: Path, step: int = 1) -> dict[str, Any]:
    """Every plan of every ``step``-th corpus file translated and run on SQLite over the
    file's entities as tables: counts of plans exact in SQL, as superset + check, and
    refused (by construct); every row compared with ``plan.allows``."""
    from collections import Counter

    from benchmarks.bench_plan import corpus_keys
    from polang.analysis.plan import plan as make_plan
    from polang.errors import FilterRefused, MappingError, PolangError

    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    mismatches: list[str] = []
    rows = files = 0
    for name, authorizer, facts, keys, _extra in corpus_keys(root, step):
        files += 1
        ents = list(facts.entities)
        db = sqlite3.connect(":memory:")
        try:
            mapping = corpus_tables(ents, db)
        except (MappingError, sqlite3.Error) as e:
            counts["no tables"] += 1
            reasons[f"tables: {str(e)[:60]}"] += 1
            continue
        seen = set()
        for principal, action, rtype, ctx in keys:
            key = (principal, action, rtype, repr(ctx))
            if key in seen:
                continue
            seen.add(key)
            try:
                p = make_plan(authorizer, action, rtype, facts, principal=principal, context=ctx)
            except PolangError:
                continue
            if p.kind != "conditional":
                counts[p.kind] += 1
                continue
            if rtype not in mapping.types:
                counts["refused"] += 1
                reasons["resource type has no rows"] += 1
                continue
            try:
                f = translate(p, mapping, "sqlite")
                counts["exact"] += 1
            except (FilterRefused, MappingError) as e:
                construct = getattr(e, "construct", "") or "mapping"
                if "not in the mapping" in str(e) or "no tags in the mapping" in str(e):
                    # values of no one column type (records, mixed types, sets of sets)
                    construct = "an attribute or tag with no column (not mapped)"
                reasons[construct] += 1
                try:
                    f = translate(p, mapping, "sqlite", superset=True)
                    counts["superset"] += 1
                except (FilterRefused, MappingError):
                    counts["refused"] += 1
                    continue
            got = {r[0] for r in db.execute(f.select_sql(["id"]))}
            for e in ents:
                if e.uid.type != rtype:
                    continue
                rows += 1
                allowed = p.allows(e)
                if f.exact and (e.uid.id in got) != allowed:
                    mismatches.append(f"{name}: {principal} {action} {e.uid}\n{p.text()}{f.sql()}")
                if not f.exact and allowed and e.uid.id not in got:
                    mismatches.append(f"{name}: superset lost {e.uid}")
        db.close()
    return {
        "files": files,
        "plans": dict(sorted(counts.items())),
        "not_exact_by_construct": dict(reasons.most_common()),
        "rows": rows,
        "mismatches": mismatches,
    }


def table(res: dict[str, Any]) -> str:
    lines = [
        f"{res['rows']:,} documents; peers over the first {res['peer_rows']:,} rows "
        "(ms, median warm)",
        f"{'db':<11}{'user':<6}{'page':>5}{'plan':>7}"
        f"{'filter walk':>12}{'(query)':>9}{'filter closure':>15}{'(query)':>9}"
        f"{'batch':>9}{'what_can':>10}",
    ]
    for r in res["results"]:
        lines.append(
            f"{r['db']:<11}{r['user']:<6}{r['allowed_on_page']:>5}{r['plan_ms']:>7.3f}"
            f"{r['filter_walk_ms']:>12.2f}{r['query_walk_ms']:>9.2f}"
            f"{r['filter_closure_ms']:>15.2f}{r['query_closure_ms']:>9.2f}"
            f"{r['batch_ms']:>9.1f}{r['what_can_ms']:>10.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--peer-rows", type=int, default=10_000)
    ap.add_argument("--page", type=int, default=100, help="rows a batch pager reads a query")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--depth", type=int, default=DEPTH, help="levels of folders (6)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--corpus",
        nargs="?",
        const="",
        metavar="PATH",
        help="instead: every plan of the conformance corpus as SQL on SQLite (the corpus "
        "directory or archive; default ../shared/conformance)",
    )
    ap.add_argument("--step", type=int, default=1, help="--corpus: every STEP-th file")
    a = ap.parse_args(argv)
    if a.corpus is not None:
        from benchmarks.bench_plan import _corpus_dir

        with tempfile.TemporaryDirectory() as tmp:
            res = corpus_run(_corpus_dir(a.corpus or None, Path(tmp)), a.step)
        mism = res.pop("mismatches")
        print(json.dumps(res, indent=2))
        for m in mism[:20]:
            print(m)
        print(f"mismatches: {len(mism)}")
        return 1 if mism else 0
    res = run(a.rows, a.peer_rows, a.repeat, a.page, not a.no_postgres, not a.no_sqlite, a.depth)
    print(table(res))
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
