"""Hostile entity files read by DuckDB (``polang.sql.files``): held to the reader
rules of entity JSON (an ignored ``parnets`` answered a banned user as allowed), named
exactly (a name is never a glob pattern), only regular files, and DuckDB's own errors
as ``PolangError`` naming the file. Answers are compared with the in-process engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# what tests/sql/conftest.py does for that folder: the SQL engines are optional extras
pytest.importorskip("duckdb", reason="the DuckDB engine's tests need polang[duckdb] (duckdb)")
pytest.importorskip("sqlglot", reason="the SQL engines' tests need sqlglot")
pytest.importorskip("pyarrow", reason="the DuckDB engine's tests need pyarrow")

from polang.analysis.query import who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.errors import EntityError, PolangError
from polang.inputs.files import InputFileError
from polang.language.entities import parse_entities
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import EntityUID
from polang.sql.duck import connect
from polang.sql.files import DuckDBFileEngine

SCHEMA = parse_schema(
    """
entity Group in [Group];
entity Team enum ["red", "blue"];
entity User in [Group, Team] {
  name: String,
  clearance: Long,
  banned?: Bool,
  home?: { city: String, zip?: Long },
  manager?: User,
  ip?: ipaddr,
} tags String;
entity Doc { owner: User, level: Long, labels: Set<String> };
action all;
action read in [all] appliesTo { principal: [User], resource: [Doc] };
"""
)
AUTH = Authorizer(
    parse_policies(
        """
@id("clearance") permit(principal, action == Action::"read", resource)
  when { principal.clearance >= resource.level };
@id("banned-group") forbid(principal in Group::"banned", action, resource);
@id("banned-flag") forbid(principal, action, resource)
  when { principal has banned && principal.banned };
@id("suspended") forbid(principal, action, resource) when { principal.hasTag("suspended") };
"""
    )
)
READ = EntityUID("Action", "read")
DOC = EntityUID("Doc", "d1")

# one entity per line, as JSON text (so that a line can repeat a key)
BASE = [
    '{"uid": {"type": "Group", "id": "banned"}, "attrs": {}}',
    '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5, '
    '"home": {"city": "x"}}, "parents": [{"type": "Team", "id": "red"}]}',
    '{"uid": {"type": "User", "id": "mallory"}, "attrs": {"name": "m", "clearance": 9}, '
    '"parents": [{"type": "Group", "id": "banned"}]}',
    '{"uid": {"type": "User", "id": "eve"}, "attrs": {"name": "e", "clearance": 9, '
    '"banned": true}}',
    '{"uid": {"type": "User", "id": "trent"}, "attrs": {"name": "t", "clearance": 9}, '
    '"tags": {"suspended": "yes"}}',
    '{"uid": {"__entity": {"type": "Doc", "id": "d1"}}, "attrs": {"owner": {"__entity": '
    '{"type": "User", "id": "alice"}}, "level": 3, "labels": ["x"]}}',
]
ALLOWED = [EntityUID("User", "alice")]


def _jsonl(path: Path, lines: list[str], blank: bool = False) -> Path:
    path.write_text("".join(line + ("\n\n  \n" if blank else "\n") for line in lines))
    return path


def _in_process(lines: list[str]) -> list[EntityUID]:
    """who_can on the entities the in-process reader makes of the same text."""
    facts = EntityFacts(parse_entities("[" + ",".join(lines) + "]", SCHEMA))
    return list(who_can(AUTH, facts, READ, DOC, schema=SCHEMA).principals)


def _who_can(*paths: Path) -> list[EntityUID]:
    eng = DuckDBFileEngine(AUTH.program, list(paths), SCHEMA)
    try:
        res = eng.who_can(READ, DOC)
        assert res.complete
        return [e.principal for e in res.entries]
    finally:
        eng.close()


def test_a_good_file_answers_as_in_process(tmp_path: Path) -> None:
    """Both reference forms, blank lines, an optional record: read, and the same answer."""
    assert _in_process(BASE) == ALLOWED
    assert _who_can(_jsonl(tmp_path / "e.jsonl", BASE, blank=True)) == ALLOWED


def _replace(i: int, line: str) -> list[str]:
    return [line if k == i else x for k, x in enumerate(BASE)]


# (the line that replaces BASE[i], what the message must say): each a banned user the
# file would have let in (or an entity the in-process reader refuses)
REFUSED = {
    "misspelt parents": (
        2,
        '{"uid": {"type": "User", "id": "mallory"}, "attrs": {"name": "m", "clearance": 9}, '
        '"parnets": [{"type": "Group", "id": "banned"}]}',
        r'unknown key "parnets" .*did you mean "parents"\?',
    ),
    "capitalised Parents": (
        2,
        '{"uid": {"type": "User", "id": "mallory"}, "attrs": {"name": "m", "clearance": 9}, '
        '"Parents": [{"type": "Group", "id": "banned"}]}',
        r'unknown key "Parents" .*did you mean "parents"\?',
    ),
    "undeclared attribute": (
        3,
        '{"uid": {"type": "User", "id": "eve"}, "attrs": {"name": "e", "clearance": 9, '
        '"baned": true}}',
        r'entity User::"eve" has the attribute "baned", which the schema does not declare '
        r'for `User`; did you mean "banned"\?',
    ),
    "clearance twice": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 1, '
        '"clearance": 5}}',
        r'User::"alice" has the key "clearance" twice in "attrs"',
    ),
    "tags twice": (
        4,
        '{"uid": {"type": "User", "id": "trent"}, "attrs": {"name": "t", "clearance": 9}, '
        '"tags": {}, "tags": {"suspended": "yes"}}',
        r'has the key "tags" twice',
    ),
    "a tag twice": (
        4,
        '{"uid": {"type": "User", "id": "trent"}, "attrs": {"name": "t", "clearance": 9}, '
        '"tags": {"suspended": "yes", "suspended": "no"}}',
        r'has the key "suspended" twice in "tags"',
    ),
    "a uid key twice": (
        3,
        '{"uid": {"type": "User", "id": "x", "id": "eve"}, "attrs": {"name": "e", '
        '"clearance": 9, "banned": true}}',
        r'has a "uid" that is not',
    ),
    "a record field twice": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5, '
        '"home": {"city": "x", "city": "y"}}}',
        r"has a wrong value in `home`",
    ),
    "a numeric id": (
        3,
        '{"uid": {"type": "User", "id": 7}, "attrs": {"name": "e", "clearance": 9}}',
        r'has a "uid" that is not',
    ),
    "a float": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5.0}}',
        r"has a wrong value in `clearance` \(Long\)",
    ),
    "beyond Long": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", '
        '"clearance": 9223372036854775808}}',
        r"has a wrong value in `clearance`",
    ),
    "null": (
        3,
        '{"uid": {"type": "User", "id": "eve"}, "attrs": {"name": "e", "clearance": 9, '
        '"banned": null}}',
        r"has a wrong value in `banned` \(Bool\)",
    ),
    "missing attrs": (3, '{"uid": {"type": "User", "id": "eve"}}', r'has no "attrs"'),
    "missing required": (
        3,
        '{"uid": {"type": "User", "id": "eve"}, "attrs": {"name": "e"}}',
        r"lacks the required attribute `clearance`",
    ),
    "an undeclared record field": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5, '
        '"home": {"city": "x", "zip": 1, "street": "s"}}}',
        r"has a wrong value in `home`",
    ),
    "parents not an array": (
        2,
        '{"uid": {"type": "User", "id": "mallory"}, "attrs": {"name": "m", "clearance": 9}, '
        '"parents": {"type": "Group", "id": "banned"}}',
        r'has "parents" that is an object, not an array',
    ),
    "a parent of a type not allowed": (
        2,
        '{"uid": {"type": "User", "id": "mallory"}, "attrs": {"name": "m", "clearance": 9}, '
        '"parents": [{"type": "Doc", "id": "d1"}]}',
        r'has a parent of type "Doc", which `User` cannot have',
    ),
    "an id outside an enumeration": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5}, '
        '"parents": [{"type": "Team", "id": "green"}]}',
        r'has the parent id "green", not one of the entities of its enumerated type',
    ),
    "tags on a type without tags": (
        5,
        '{"uid": {"type": "Doc", "id": "d1"}, "attrs": {"owner": {"type": "User", "id": '
        '"alice"}, "level": 3, "labels": []}, "tags": {"t": "x"}}',
        r"has tags, which the entity type `Doc` does not allow",
    ),
    "a reference of the wrong type": (
        5,
        '{"uid": {"type": "Doc", "id": "d1"}, "attrs": {"owner": {"type": "Group", "id": '
        '"banned"}, "level": 3, "labels": []}}',
        r"has a wrong value in `owner`",
    ),
    "not an object": (3, '[{"uid": {"type": "User", "id": "eve"}}]', r"is not a JSON object"),
    "an undeclared type": (
        3,
        '{"uid": {"type": "Admin", "id": "eve"}, "attrs": {}}',
        r'has the type "Admin", which is not in the schema',
    ),
    "an action with other parents": (
        3,
        '{"uid": {"type": "Action", "id": "read"}, "attrs": {}, "parents": []}',
        r"is an action: its parents must be all its ancestors in the schema",
    ),
    "an extension value that is not one": (
        1,
        '{"uid": {"type": "User", "id": "alice"}, "attrs": {"name": "a", "clearance": 5, '
        '"ip": 10}}',
        r"has a wrong value in `ip`",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_files_are_held_to_the_entity_json_rules(tmp_path: Path, case: str) -> None:
    """Each line the in-process reader refuses is refused in a file too, naming the file,
    the line (blank lines counted) and the key."""
    i, line, message = REFUSED[case]
    lines = _replace(i, line)
    with pytest.raises(EntityError):
        parse_entities("[" + ",".join(lines) + "]", SCHEMA)
    path = _jsonl(tmp_path / "users.jsonl", lines, blank=True)
    with pytest.raises(PolangError, match=rf"users\.jsonl, line {3 * i + 1}: .*{message}"):
        DuckDBFileEngine(AUTH.program, [path], SCHEMA)


def test_accepted_lines_match_the_in_process_reader(tmp_path: Path) -> None:
    """Forms both readers accept: a uid as ``__entity``, a reference with the keys in
    either order, an extension value as a string, an action that agrees with the schema."""
    lines = [
        *BASE,
        '{"uid": {"id": "bob", "type": "User"}, "attrs": {"name": "b", "clearance": 4, '
        '"ip": "10.0.0.1", "manager": {"id": "alice", "type": "User"}}}',
        '{"uid": {"type": "Action", "id": "read"}, "attrs": {}, "parents": '
        '[{"type": "Action", "id": "all"}]}',
    ]
    want = _in_process(lines)
    assert want == [EntityUID("User", "alice"), EntityUID("User", "bob")]
    assert _who_can(_jsonl(tmp_path / "e.ndjson", lines)) == want


def test_a_cycle_is_refused(tmp_path: Path) -> None:
    lines = [
        '{"uid": {"type": "Group", "id": "a"}, "attrs": {}, "parents": [{"type": "Group", '
        '"id": "b"}]}',
        '{"uid": {"type": "Group", "id": "b"}, "attrs": {}, "parents": [{"type": "Group", '
        '"id": "a"}]}',
    ]
    with pytest.raises(EntityError):
        parse_entities("[" + ",".join(lines) + "]", SCHEMA)
    with pytest.raises(PolangError, match=r"e\.jsonl, line \d: entity Group::\"[ab]\" is its own"):
        DuckDBFileEngine(AUTH.program, [_jsonl(tmp_path / "e.jsonl", lines)], SCHEMA)


def _chain(links: int) -> list[str]:
    """Groups g0 .. g<links>, each the parent of the one before: ``links`` levels deep."""
    return [
        f'{{"uid": {{"type": "Group", "id": "g{i}"}}, "attrs": {{}}, "parents": '
        f'[{{"type": "Group", "id": "g{i + 1}"}}]}}'
        for i in range(links)
    ] + [f'{{"uid": {{"type": "Group", "id": "g{links}"}}, "attrs": {{}}}}']


def test_a_chain_deeper_than_the_limit_is_refused_before_its_closure(tmp_path: Path) -> None:
    """The files' closure is built in SQL: a chain deeper than MAX_HIERARCHY_DEPTH is
    refused as the in-process reader refuses it (its closure grows with the square of its
    depth), and one at the limit loads."""
    from polang.language.hierarchy import MAX_HIERARCHY_DEPTH

    deep = _chain(MAX_HIERARCHY_DEPTH + 1)
    with pytest.raises(PolangError, match="MAX_HIERARCHY_DEPTH"):
        parse_entities("[" + ",".join(deep) + "]", SCHEMA)
    with pytest.raises(PolangError, match=r"MAX_HIERARCHY_DEPTH.*Group::\"g0\" is 1,001 levels"):
        DuckDBFileEngine(AUTH.program, [_jsonl(tmp_path / "deep.jsonl", deep)], SCHEMA)
    ok = _chain(MAX_HIERARCHY_DEPTH)
    eng = DuckDBFileEngine(AUTH.program, [_jsonl(tmp_path / "ok.jsonl", ok)], SCHEMA)
    eng.close()


def test_a_uid_twice_names_both_places(tmp_path: Path) -> None:
    a = _jsonl(tmp_path / "a.jsonl", BASE)
    b = _jsonl(tmp_path / "b.jsonl", [BASE[3]])
    with pytest.raises(PolangError, match=r'b\.jsonl, line 1: entity User::"eve" appears more '):
        DuckDBFileEngine(AUTH.program, [a, b], SCHEMA)


# -------------------------------------------------------------------- Parquet


def _parquet(path: Path, lines: list[str]) -> Path:
    """A Parquet file with the columns DuckDB infers from the lines (structs)."""
    src = _jsonl(path.with_suffix(".src.jsonl"), lines)
    con = connect()
    try:
        con.execute(
            f"COPY (SELECT * FROM read_json('{src}', format = 'newline_delimited')) "
            f"TO '{path}' (FORMAT parquet)"
        )
    finally:
        con.close()
    return path


def test_parquet_files_answer_as_in_process(tmp_path: Path) -> None:
    """A struct column holds every type's fields: a null one is an absent attribute."""
    lines = [
        x.replace('{"__entity": {"type": "Doc", "id": "d1"}}', '{"type": "Doc", "id": "d1"}')
        for x in BASE
    ]
    assert _who_can(_parquet(tmp_path / "e.parquet", lines)) == _in_process(lines) == ALLOWED


def test_parquet_unknown_columns_and_attributes_are_refused(tmp_path: Path) -> None:
    lines = [x.replace('"parents"', '"Parents"') for x in BASE]
    with pytest.raises(PolangError, match=r'unknown column "Parents" .*did you mean "parents"\?'):
        DuckDBFileEngine(AUTH.program, [_parquet(tmp_path / "p.parquet", lines)], SCHEMA)
    eve = BASE[3].replace('"banned"', '"baned"')
    with pytest.raises(
        PolangError,
        match=r'a\.parquet, row 4: entity User::"eve" has the '
        r'attribute "baned".*did you mean "banned"\?',
    ):
        DuckDBFileEngine(AUTH.program, [_parquet(tmp_path / "a.parquet", _replace(3, eve))], SCHEMA)
    con = connect()
    try:  # a uid whose id is a number
        bad = tmp_path / "n.parquet"
        con.execute(
            "COPY (SELECT {'type': 'User', 'id': 7} AS uid, {'name': 'n', 'clearance': 1} "
            f"AS attrs) TO '{bad}' (FORMAT parquet)"
        )
    finally:
        con.close()
    with pytest.raises(PolangError, match=r'n\.parquet, row 1: the entity has a "uid" that is not'):
        DuckDBFileEngine(AUTH.program, [bad], SCHEMA)


# -------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["users[1].jsonl", "users?.jsonl", "users*.jsonl"])
def test_a_name_is_never_a_glob_pattern(tmp_path: Path, name: str) -> None:
    """Planted neighbours that the name matches as a pattern are never read: an admin
    there would have been allowed."""
    admin = '{"uid": {"type": "User", "id": "admin"}, "attrs": {"name": "x", "clearance": 99}}'
    for planted in ("users1.jsonl", "usersX.jsonl", "users-more.jsonl"):
        _jsonl(tmp_path / planted, [admin])
    path = _jsonl(tmp_path / name, BASE)
    assert _who_can(path) == ALLOWED


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A FIFO (DuckDB would wait on it forever), a directory, devices and links to
    devices are refused by name before DuckDB opens anything; a link to a regular file
    is followed."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "null.jsonl").symlink_to("/dev/null")
    (tmp_path / "zero.parquet").symlink_to("/dev/zero")
    cases = {
        "fifo.jsonl": "a FIFO",
        "dir.jsonl": "a directory",
        "null.jsonl": "a device",
        "zero.parquet": "a device",
        "missing.jsonl": "cannot read",
    }
    for name, what in cases.items():
        with pytest.raises(InputFileError, match=rf"entity file .*{name}: {what}"):
            DuckDBFileEngine(AUTH.program, [tmp_path / name], SCHEMA)
    (tmp_path / "link.jsonl").symlink_to(_jsonl(tmp_path / "e.jsonl", BASE))
    assert _who_can(tmp_path / "link.jsonl") == ALLOWED


pytestmark = pytest.mark.timeout(300)  # a FIFO handed to DuckDB hung the loader


# -------------------------------------------------------------------- DuckDB's errors


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BAD_FILES: dict[str, Any] = {
    "truncated.jsonl": (BASE[0] + "\n" + BASE[1][:40]).encode(),
    "binary.jsonl": bytes(range(256)) * 8,
    "utf16.jsonl": ("\n".join(BASE) + "\n").encode("utf-16"),
    "latin1.jsonl": '{"uid": {"type": "User", "id": "é"}, "attrs": {}}\n'.encode("latin-1"),
    "surrogate.jsonl": b'{"uid": {"type": "User", "id": "\\ud800"}, "attrs": {}}\n',
    "garbage.parquet": b"PAR1" + bytes(range(200)),
    "text.parquet": ("\n".join(BASE) + "\n").encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_duckdb_errors_name_the_file(tmp_path: Path, name: str) -> None:
    """What DuckDB cannot read is a ``SqlError`` naming the file, never DuckDB's own
    exception (a traceback on the command line)."""
    path = _bytes(tmp_path / name, BAD_FILES[name])
    with pytest.raises(PolangError, match=rf"entity file .*{name}: not readable as"):
        DuckDBFileEngine(AUTH.program, [path], SCHEMA)


def test_the_cli_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``polang who-can --engine duckdb --entities F.jsonl``: one error line naming the
    file, no traceback."""
    from polang.cli import main

    store = Path(__file__).resolve().parents[2] / "examples" / "stores" / "directory"
    bad = _bytes(tmp_path / "trunc.jsonl", b'{"uid": {"type": "Acme::User", "id": "u"}, "att')
    code = main(
        [
            "who-can",
            "--store",
            str(store),
            "--engine",
            "duckdb",
            "--entities",
            str(bad),
            "--action",
            'Acme::Action::"read"',
            "--resource",
            'Acme::Document::"roadmap"',
        ]
    )
    err = capsys.readouterr().err
    assert code != 0 and "trunc.jsonl: not readable as JSON lines" in err, err
    assert "Traceback" not in err and "duckdb" not in err.lower().split(":")[0]
