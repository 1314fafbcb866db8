"""The DuckDB engine over hostile entities held in process: strings with lone surrogates
(Python holds them, UTF-8 cannot: a ``UnicodeEncodeError`` escaped every query) answer as
in process, answers that Arrow cannot hold are refused by name, and DuckDB's own errors
are ``SqlError``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# what tests/sql/conftest.py does for that folder: the SQL engines are optional extras
pytest.importorskip("duckdb", reason="the DuckDB engine's tests need polang[duckdb] (duckdb)")
pytest.importorskip("sqlglot", reason="the SQL engines' tests need sqlglot")
pytest.importorskip("pyarrow", reason="the DuckDB engine's tests need pyarrow")

from polang.analysis.query import access_matrix, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.language.entities import parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID, RecordValue
from polang.sql.duck import DuckDBEngine
from polang.sql.spark import SparkEngine
from polang.sql.tables import SqlError
from polang.sql.types import from_sql_text, to_sql_text

S = "\ud800"  # a lone surrogate
LEAD = "\U0010f000"  # the first character of the code that writes surrogates in SQL
SCHEMA = parse_schema(
    """
entity Group in [Group];
entity User in [Group] { name: String, nick?: Set<String> } tags String;
entity Doc { title: String, owner: User };
action read appliesTo { principal: [User], resource: [Doc], context: { note?: String } };
"""
)
# raw surrogates in the text (a Python string; the escape \\u{d800} is refused)
AUTH = Authorizer(
    parse_policies(
        f"""
@id("like") permit(principal, action, resource) when {{ principal.name like "x*{S}*" }};
@id("eq") permit(principal, action, resource)
  when {{ resource.title == "t\udfff" && principal in Group::"g{S}" }};
@id("tag") permit(principal, action, resource)
  when {{ principal.hasTag("k{S}") && principal.getTag("k{S}") == "{LEAD}" }};
@id("set") permit(principal, action, resource)
  when {{ resource.owner == principal && principal has nick && principal.nick.contains("\ud801") }};
@id("context") permit(principal, action, resource)
  when {{ context has note && context.note like "*{S}" && principal.name == "q" }};
@id("pua") forbid(principal, action, resource) when {{ principal.name like "*\U0010f001*" }};
@id("pua-id") permit(principal == User::"w{LEAD}", action, resource == Doc::"d2");
"""
    )
)
ENTITIES: list[dict[str, Any]] = [
    {"uid": {"type": "Group", "id": "g" + S}, "attrs": {}},
    {
        "uid": {"type": "User", "id": "u" + S},
        "attrs": {"name": "x" + S + "y"},
        "parents": [{"type": "Group", "id": "g" + S}],
    },
    {"uid": {"type": "User", "id": "plain"}, "attrs": {"name": "xy"}},
    {  # the code's own characters, as data: never confused with a coded surrogate
        "uid": {"type": "User", "id": "pua" + LEAD},
        "attrs": {"name": "x" + LEAD + "\U0010f001\U0010f001"},
        "tags": {"k" + S: LEAD},
    },
    {"uid": {"type": "User", "id": "lead"}, "attrs": {"name": "x" + LEAD + "\U0010f001"}},
    {"uid": {"type": "User", "id": "w" + LEAD}, "attrs": {"name": "w"}},
    {"uid": {"type": "User", "id": "n"}, "attrs": {"name": "q", "nick": ["\ud801", "a"]}},
    {
        "uid": {"type": "Doc", "id": "d" + S},
        "attrs": {"title": "t\udfff", "owner": {"__entity": {"type": "User", "id": "n"}}},
    },
    {
        "uid": {"type": "Doc", "id": "d2"},
        "attrs": {"title": "t", "owner": {"__entity": {"type": "User", "id": "n"}}},
    },
]
FACTS = EntityFacts(parse_entities(ENTITIES, SCHEMA))
READ = EntityUID("Action", "read")
CONTEXTS = [RecordValue(), RecordValue({"note": "a" + S}), RecordValue({"note": "a"})]


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return [(e.triple, e.decision, tuple(sorted(e.reasons))) for e in result.iter_entries()]


def test_the_code_is_one_to_one() -> None:
    """Every string survives the trip, valid UTF-8 in between; the code's own characters
    are coded too, so no two strings meet."""
    chars = [S, "\udfff", "a", LEAD, "\U0010f001", "\U0010f040", "\U0010f041"]
    seen: dict[str, str] = {}
    for a in chars:
        for b in chars:
            for c in ("", *chars):
                s = a + b + c
                t = to_sql_text(s)
                t.encode("utf-8")
                assert from_sql_text(t) == s and seen.setdefault(t, s) == s
    assert to_sql_text("plain é") == "plain é"


@pytest.mark.parametrize("udf", [True, False])
def test_lone_surrogates_answer_as_in_process(udf: bool) -> None:
    """Ids, attribute strings, tags, sets, ``like`` patterns and context values with lone
    surrogates (and with the code's own characters) decide as in process."""
    eng = DuckDBEngine(AUTH.program, FACTS, SCHEMA, udf=udf)
    try:
        for ctx in CONTEXTS:
            got = eng.access_matrix(ctx, reasons=True)
            assert got.complete and got.fallbacks == []  # all of it in SQL, none as a UDF
            want = access_matrix(AUTH, FACTS, ctx, schema=SCHEMA)
            assert _rows(got) == _rows(want) and len(got) >= 4
            for doc in (EntityUID("Doc", "d" + S), EntityUID("Doc", "d2")):
                assert [e.principal for e in eng.who_can(READ, doc, ctx).entries] == who_can(
                    AUTH, FACTS, READ, doc, ctx, schema=SCHEMA
                ).principals
            for user in (EntityUID("User", "u" + S), EntityUID("User", "n")):
                assert _rows(eng.what_can(user, None, ctx, reasons=True)) == _rows(
                    what_can(AUTH, FACTS, user, None, ctx, schema=SCHEMA)
                )
    finally:
        eng.close()


def test_answers_arrow_cannot_hold_are_refused(tmp_path: Path) -> None:
    """Arrow (and so a Parquet, CSV or JSON-lines answer) holds UTF-8 only: an answer
    with such an id is refused naming the entity, never written with another id; one
    without is written as usual."""
    eng = DuckDBEngine(AUTH.program, FACTS, SCHEMA)
    try:
        held = eng.who_can(READ, EntityUID("Doc", "d" + S))
        assert held.entries  # read as entries: exact
        with pytest.raises(SqlError, match=r'::"[ud]\\u\{d800\}", whose text has a lone'):
            held.to_arrow()
        for fmt in ("parquet", "csv", "jsonl"):
            with pytest.raises(SqlError, match=r"lone surrogate"):
                eng.access_matrix(None, output=tmp_path / f"m.{fmt}", format=fmt)
        out = tmp_path / "w.csv"
        w = EntityUID("User", "w" + LEAD)
        n = eng.what_can(w, None, RecordValue(), output=out, format="csv").stats.rows
        assert n == 1 and f'"User","w{LEAD}","Action","read","Doc","d2"' in out.read_text()
    finally:
        eng.close()


def test_spark_refuses_ids_it_cannot_hold() -> None:
    """Spark answers with the ids it holds (UTF-8): refused before any session is used."""
    with pytest.raises(SqlError, match=r'entity Group::"g\\u\{d800\}": its id has a lone'):
        SparkEngine(AUTH.program, FACTS, SCHEMA, spark=object())


def test_duckdb_errors_are_sql_errors(tmp_path: Path) -> None:
    """DuckDB's own failures (a memory limit reached while loading) and a file that
    cannot be written are ``SqlError``, never DuckDB's or pyarrow's exceptions."""
    from benchmarks.workload import generate

    w = generate(n_entities=2000, n_policies=20, seed=5)
    schema = parse_schema(w.schema_text)
    auth = Authorizer(parse_policies(w.policies_text))
    facts = EntityFacts(parse_entities(w.entities_json, schema))
    with pytest.raises(SqlError, match="DuckDB could not load the entities: Out of Memory"):
        DuckDBEngine(auth.program, facts, schema, memory_limit="2MB", threads=1)
    eng = DuckDBEngine(auth.program, facts, schema)
    try:
        with pytest.raises(SqlError, match=r"cannot write the answer to .*missing"):
            eng.access_matrix(None, output=tmp_path / "missing" / "m.parquet")
    finally:
        eng.close()


@pytest.fixture(scope="module")
def spark() -> Any:
    """A local Spark session (the one ``test_spark.py`` makes, if it is running: never
    stopped here, so a session another module holds stays up)."""
    import shutil

    pytest.importorskip("pyspark", reason="the Spark engine's tests need polang[spark] (pyspark)")
    if shutil.which("java") is None:
        pytest.skip("the Spark engine's tests need Java 17 (no `java` on PATH)")
    from polang.sql.spark import spark_session

    session = spark_session(
        "local[1]",
        config={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def test_spark_answers_strings_with_lone_surrogates_as_in_process(spark: Any) -> None:
    """Spark is staged through DuckDB: attribute strings, tags and constants with lone
    surrogates (ids without) reach it written the same way, and decide as in process."""
    plain = [dict(e, uid={"type": e["uid"]["type"], "id": f"e{i}"}) for i, e in enumerate(ENTITIES)]
    for e in plain:  # references follow the renamed ids
        e.pop("parents", None)
        if "owner" in e["attrs"]:
            e["attrs"] = dict(e["attrs"], owner={"type": "User", "id": "e6"})
    facts = EntityFacts(parse_entities(plain, SCHEMA))
    eng = SparkEngine(AUTH.program, facts, SCHEMA, spark=spark)
    try:
        for ctx in CONTEXTS[:2]:
            got = eng.access_matrix(ctx, reasons=True)
            assert got.complete
            want = access_matrix(AUTH, facts, ctx, schema=SCHEMA)
            assert _rows(got) == _rows(want) and len(got) >= 4
    finally:
        eng.close()
