"""The filtering tests' world: a store of folders (6 deep), users and groups, documents
as rows of real databases, and the truth: ``authorize_unsigned`` with each row as the
resource entity."""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import create_engine, text  # noqa: E402

from polang.datalog.eval.residual import Residual  # noqa: E402
from polang.engine.facade import Engine  # noqa: E402
from polang.filtering import Mapping  # noqa: E402
from polang.language import ast  # noqa: E402
from polang.language.parser import parse_expression  # noqa: E402

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MARIADB_URL = "mysql+pymysql://root:@127.0.0.1:3306/test?charset=utf8mb4"
ACTION = 'Action::"read"'

FOLDERS = [  # (id, parent): a chain f0 <- f1 <- ... <- f5 (6 deep) and a side branch
    ("f0", None),
    ("f1", "f0"),
    ("f2", "f1"),
    ("f3", "f2"),
    ("f4", "f3"),
    ("f5", "f4"),
    ("g1", "f1"),
    ("g2", "g1"),
    ("lone", None),
]
USERS = [("alice", "eng", 3), ("bob", "Eng", 1), ("carol", None, None), ("dave", "ops", 5)]
GROUPS = ["red", "blue"]
WORDS = ["alpha", "Alpha", "beta", "a%b", "a_b", "x*y", "", "ALPHA ", "al", "🙂emoji", "b\\c"]

SCHEMA = """
entity Folder in [Folder];
entity Group;
entity User { dept?: String, level?: Long };
entity Doc in [Folder, Group] {
  title?: String, n?: Long, public?: Bool, owner?: User, amount?: decimal,
  created?: datetime, labels: Set<String>, level?: Long, kind?: String, flag?: Bool,
  readers: Set<User>, codes?: Set<Long>, names?: Set<String>
} tags String;
action read appliesTo { principal: [User], resource: [Doc] };
"""


@dataclass
class Doc:
    id: str
    title: str | None = None
    n: int | None = None
    public: bool | None = None
    owner: str | None = None
    folder: str | None = None
    amount: int | None = None  # decimal, in ten-thousandths
    created: int | None = None  # datetime, ms since the epoch
    labels: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    meta: Any = None  # a JSON document (level, info.kind, flag), or None
    readers: list[str] = field(default_factory=list)

    def meta_attrs(self) -> dict[str, Any]:
        """The JSON paths' attributes, read as the mapping reads them: a value of another
        JSON type is absent."""
        m = self.meta if isinstance(self.meta, dict) else {}
        out: dict[str, Any] = {}
        lv = m.get("level")
        if type(lv) is int and -(2**63) <= lv < 2**63:
            out["level"] = lv
        info = m.get("info")
        if isinstance(info, dict) and type(info.get("kind")) is str:
            out["kind"] = info["kind"]
        if type(m.get("flag")) is bool:
            out["flag"] = m["flag"]
        return out

    def entity(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "labels": list(self.labels),
            "readers": [{"__entity": {"type": "User", "id": r}} for r in self.readers],
        }
        for k in ("title", "n", "public"):
            v = getattr(self, k)
            if v is not None:
                attrs[k] = v
        if self.owner is not None:
            attrs["owner"] = {"__entity": {"type": "User", "id": self.owner}}
        if self.amount is not None:
            attrs["amount"] = {"__extn": {"fn": "decimal", "arg": _decimal_text(self.amount)}}
        if self.created is not None:
            attrs["created"] = {"__extn": {"fn": "datetime", "arg": _datetime_text(self.created)}}
        attrs.update(self.meta_attrs())
        parents = [{"type": "Folder", "id": self.folder}] if self.folder else []
        parents += [{"type": "Group", "id": g} for g in self.groups]
        return {
            "uid": {"type": "Doc", "id": self.id},
            "attrs": attrs,
            "parents": parents,
            "tags": dict(self.tags),
        }


def _decimal_text(scaled: int) -> str:
    sign = "-" if scaled < 0 else ""
    q, r = divmod(abs(scaled), 10_000)
    return f"{sign}{q}.{r:04d}"


def _datetime_text(ms: int) -> str:
    from datetime import UTC, datetime

    d = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


METAS: list[Any] = [
    None,
    {},
    {"level": 3},
    {"level": 3.5},
    {"level": 3.0},
    {"level": "3"},
    {"level": 2**63},
    {"level": -(2**63)},
    {"info": {"kind": "memo"}},
    {"info": {"kind": "Memo "}},
    {"info": {"kind": 5}},
    {"info": "memo"},
    {"flag": True},
    {"flag": "true"},
    {"level": -2, "flag": False, "info": {"kind": "memo"}},
    [1, 2],
]


def random_docs(seed: int, count: int) -> list[Doc]:
    rnd = random.Random(seed)
    big = [0, 1, -1, 7, 2**62, 2**63 - 1, -(2**63), 2**63 - 3, -(2**63) + 2, 100]
    out = []
    for i in range(count):
        out.append(
            Doc(
                id=f"d{i}",
                title=rnd.choice([None, *WORDS]),
                n=rnd.choice([None, *big, rnd.randint(-50, 50)]),
                public=rnd.choice([None, True, False]),
                owner=rnd.choice([None, "alice", "bob", "carol", "dave", "ghost"]),
                folder=rnd.choice([None, *(f for f, _ in FOLDERS), "missing"]),
                amount=rnd.choice([None, 15_000, 15_001, -5, 0, 10_000 * 100]),
                created=rnd.choice([None, 0, 1_700_000_000_000, 1_800_000_000_000]),
                labels=rnd.sample(["x", "y", "Z", "z"], rnd.randint(0, 3)),
                tags={
                    k: rnd.choice(["v", "V", "w"])
                    for k in rnd.sample(["t", "u"], rnd.randint(0, 2))
                },
                groups=rnd.sample(GROUPS, rnd.randint(0, 2)),
                meta=rnd.choice(METAS),
                readers=rnd.sample(["alice", "bob", "carol", "ghost"], rnd.randint(0, 2)),
            )
        )
    return out


def folder_closure() -> list[tuple[str, str]]:
    """(folder, ancestor) for every folder and each ancestor; the roots list themselves."""
    parent = dict(FOLDERS)
    out = []
    for f, _ in FOLDERS:
        a = parent[f]
        if a is None:
            out.append((f, f))
        while a is not None:
            out.append((f, a))
            a = parent[a]
    return out


def mapping_dict(p: str, closure: bool = False) -> dict[str, Any]:
    m = _mapping_dict(p)
    if closure:
        m["types"]["Folder"]["closure"] = {
            "table": f"{p}folder_closure",
            "descendant": "d",
            "ancestor": "a",
        }
    return m


def _mapping_dict(p: str) -> dict[str, Any]:
    return {
        "types": {
            "Doc": {
                "table": f"{p}docs",
                "attributes": {
                    "title": {"column": "title", "type": "String"},
                    "n": {"column": "n", "type": "Long"},
                    "public": {"column": "public", "type": "Boolean"},
                    "owner": {"column": "owner_id", "type": "User"},
                    "amount": {"column": "amount", "type": "decimal"},
                    "created": {"column": "created", "type": "datetime"},
                    "level": {"json": {"column": "meta", "path": ["level"]}, "type": "Long"},
                    "kind": {
                        "json": {"column": "meta", "path": ["info", "kind"]},
                        "type": "String",
                    },
                    "flag": {"json": {"column": "meta", "path": ["flag"]}, "type": "Boolean"},
                    "readers": {
                        "set": {"table": f"{p}readers", "key": "doc_id", "value": "user_id"},
                        "type": "User",
                    },
                    "labels": {
                        "set": {"table": f"{p}labels", "key": "doc_id", "value": "label"},
                        "type": "String",
                    },
                },
                "parents": [
                    {"column": "folder_id", "type": "Folder"},
                    {
                        "table": f"{p}doc_groups",
                        "child": "doc_id",
                        "parent": "group_id",
                        "type": "Group",
                    },
                ],
                "tags": {
                    "table": f"{p}tags",
                    "key": "doc_id",
                    "name": "k",
                    "value": "v",
                    "type": "String",
                },
            },
            "Folder": {
                "table": f"{p}folders",
                "parents": [{"column": "parent_id", "type": "Folder"}],
            },
            "Group": {"table": f"{p}groups"},
            "User": {
                "table": f"{p}users",
                "attributes": {"dept": "dept", "level": {"column": "level", "type": "Long"}},
            },
        }
    }


class World:
    """A store and a database holding the same data."""

    def __init__(self, url: str, store_dir: Path, docs: list[Doc]) -> None:
        self.url = url
        self.docs = docs
        self.prefix = f"pf{secrets.token_hex(4)}_"
        self.mapping = Mapping.from_dict(mapping_dict(self.prefix))
        self.db = create_engine(url, future=True)
        self.dialect = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}[
            self.db.dialect.name
        ]
        self.store_dir = store_dir
        self._create()

    def table(self, name: str) -> str:
        return self.db.dialect.identifier_preparer.quote(self.prefix + name)

    def _create(self) -> None:
        s, i = "VARCHAR(200)", "VARCHAR(64)"
        b = "BOOLEAN"
        j = {"postgresql": "JSONB", "mysql": "JSON"}.get(self.db.dialect.name, "TEXT")
        ddl = [
            f"CREATE TABLE {self.table('users')} (id {i} PRIMARY KEY, dept {s}, level BIGINT)",
            f"CREATE TABLE {self.table('folders')} (id {i} PRIMARY KEY, parent_id {i})",
            f"CREATE TABLE {self.table('groups')} (id {i} PRIMARY KEY)",
            f"CREATE TABLE {self.table('folder_closure')} (d {i}, a {i})",
            f"CREATE TABLE {self.table('docs')} (id {i} PRIMARY KEY, title {s}, n BIGINT, "
            f"public {b}, owner_id {i}, folder_id {i}, amount BIGINT, created BIGINT, meta {j})",
            f"CREATE TABLE {self.table('labels')} (doc_id {i}, label {s})",
            f"CREATE TABLE {self.table('readers')} (doc_id {i}, user_id {i})",
            f"CREATE TABLE {self.table('tags')} (doc_id {i}, k {s}, v {s})",
            f"CREATE TABLE {self.table('doc_groups')} (doc_id {i}, group_id {i})",
        ]
        with self.db.begin() as c:
            for d in ddl:
                c.execute(text(d))
            c.execute(
                text(f"INSERT INTO {self.table('users')} VALUES (:a, :b, :c)"),
                [{"a": a, "b": b_, "c": c_} for a, b_, c_ in USERS],
            )
            c.execute(
                text(f"INSERT INTO {self.table('folders')} VALUES (:a, :b)"),
                [{"a": a, "b": b_} for a, b_ in FOLDERS],
            )
            c.execute(
                text(f"INSERT INTO {self.table('groups')} VALUES (:a)"), [{"a": g} for g in GROUPS]
            )
            c.execute(
                text(f"INSERT INTO {self.table('folder_closure')} VALUES (:d, :a)"),
                [{"d": d, "a": a} for d, a in folder_closure()],
            )
            self.insert(c, self.docs)

    def insert(self, c: Any, docs: list[Doc]) -> None:
        if not docs:
            return
        c.execute(
            text(
                f"INSERT INTO {self.table('docs')} VALUES "
                "(:id, :title, :n, :public, :owner, :folder, :amount, :created, :meta)"
            ),
            [
                {
                    **{
                        k: getattr(d, k)
                        for k in (
                            "id",
                            "title",
                            "n",
                            "public",
                            "owner",
                            "folder",
                            "amount",
                            "created",
                        )
                    },
                    "meta": None
                    if d.meta is None
                    else d.meta
                    if isinstance(d.meta, str)
                    else json.dumps(d.meta),
                }
                for d in docs
            ],
        )
        rows = [{"d": d.id, "l": lab} for d in docs for lab in d.labels]
        if rows:
            c.execute(text(f"INSERT INTO {self.table('labels')} VALUES (:d, :l)"), rows)
        rows = [{"d": d.id, "u": r} for d in docs for r in d.readers]
        if rows:
            c.execute(text(f"INSERT INTO {self.table('readers')} VALUES (:d, :u)"), rows)
        rows = [{"d": d.id, "k": k, "v": v} for d in docs for k, v in d.tags.items()]
        if rows:
            c.execute(text(f"INSERT INTO {self.table('tags')} VALUES (:d, :k, :v)"), rows)
        rows = [{"d": d.id, "g": g} for d in docs for g in d.groups]
        if rows:
            c.execute(text(f"INSERT INTO {self.table('doc_groups')} VALUES (:d, :g)"), rows)

    def drop(self) -> None:
        with self.db.begin() as c:
            for t in (
                "docs",
                "labels",
                "readers",
                "tags",
                "doc_groups",
                "users",
                "folders",
                "groups",
                "folder_closure",
            ):
                c.execute(text(f"DROP TABLE IF EXISTS {self.table(t)}"))
        self.db.dispose()

    # ---------------------------------------------------------------- truth and filter

    def engine(self, policies: list[tuple[str, str, str]]) -> Engine:
        """A store of ``(id, effect, condition)`` policies over the world's entities."""
        text_ = "\n".join(
            f'@id("{pid}") {eff}(principal, action, resource) '
            + ("unless" if eff == "forbid" and cond.startswith("unless:") else "when")
            + " { "
            + cond.removeprefix("unless:")
            + " };"
            for pid, eff, cond in policies
        )
        return self.engine_text(text_)

    def engine_text(
        self, text_: str, templates: str = "", links: list[dict[str, Any]] | None = None
    ) -> Engine:
        """A store of policies (and templates with their links) in policy syntax."""
        d = self.store_dir / secrets.token_hex(4)
        (d / "policies").mkdir(parents=True)
        (d / "entities").mkdir()
        (d / "metadata.json").write_text(
            json.dumps(
                {
                    "polang_version": "4.0.0",
                    "policy_store": {"id": "f", "name": "f", "version": "1.0.0"},
                }
            )
        )
        (d / "schema.polangschema").write_text(SCHEMA)
        (d / "policies" / "p.polang").write_text(text_)
        if templates:
            (d / "templates").mkdir()
            (d / "templates" / "t.polang").write_text(templates)
            (d / "templates" / "links.json").write_text(json.dumps(links or []))
        entities = [
            {
                "uid": {"type": "Folder", "id": f},
                "attrs": {},
                "parents": [{"type": "Folder", "id": p}] if p else [],
            }
            for f, p in FOLDERS
        ]
        entities += [
            {
                "uid": {"type": "User", "id": u},
                "attrs": {k: v for k, v in (("dept", dept), ("level", lvl)) if v is not None},
                "parents": [],
            }
            for u, dept, lvl in USERS
        ]
        entities += [
            {"uid": {"type": "Group", "id": g}, "attrs": {}, "parents": []} for g in GROUPS
        ]
        (d / "entities" / "e.json").write_text(json.dumps(entities))
        return Engine(
            {"ENGINE_POLICY_STORE_LOCAL_FN": str(d), "ENGINE_STRICT_SCHEMA_VALIDATION": "disabled"}
        )

    def truth(self, policies: list[tuple[str, str, str]], principal: str | None = None) -> set[str]:
        eng = self.engine(policies)
        try:
            return self.allowed(eng, principal)
        finally:
            eng.close()

    def allowed(self, eng: Engine, principal: str | None = None) -> set[str]:
        """The truth: the documents ``authorize_unsigned`` allows, each row as the resource."""
        p = None if principal is None else f'User::"{principal}"'
        return {
            d.id
            for d in self.docs
            if eng.authorize_unsigned(ACTION, d.entity(), principal=p).decision
        }

    def run_sql(self, sql_where: str) -> set[str]:
        with self.db.connect() as c:
            q = f"SELECT id FROM {self.table('docs')} WHERE {sql_where}"
            return {
                r[0]
                for r in c.execute(text(q.replace("%", "%%") if self.dialect != "sqlite" else q))
            }


def residuals(policies: list[tuple[str, str, str]]) -> list[Residual]:
    out = []
    for pid, eff, cond in policies:
        if cond.startswith("unless:"):
            e: ast.Expr = ast.Unary("!", parse_expression(cond.removeprefix("unless:")))
        else:
            e = parse_expression(cond)
        out.append(Residual(pid, eff, e))
    return out


def reachable(url: str) -> str | None:
    """None when the server answers, else why not (the skip message)."""
    try:
        eng = create_engine(url, connect_args={"connect_timeout": 3})
        with eng.connect() as c:
            c.execute(text("SELECT 1"))
        eng.dispose()
        return None
    except Exception as e:  # the server is simply not there
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"


def world_params() -> Iterator[Any]:
    yield pytest.param("sqlite", id="sqlite")
    yield pytest.param("postgres", id="postgres")
    yield pytest.param("mariadb", id="mariadb")


def make_world(kind: str, tmp: Path, docs: list[Doc]) -> World:
    if kind == "sqlite":
        return World(f"sqlite:///{tmp / 'db.sqlite'}", tmp, docs)
    url = POSTGRES_URL if kind == "postgres" else MARIADB_URL
    why = reachable(url)
    if why is not None:
        server = (
            "PostgreSQL at 127.0.0.1:5432 (user postgres, db test)"
            if kind == "postgres"
            else "MariaDB at 127.0.0.1:3306 (user root, db test)"
        )
        pytest.skip(f"{server} is not reachable: {why}")
    return World(url, tmp, docs)
