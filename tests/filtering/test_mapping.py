"""Hostile mappings: too deep, too big, mistyped, misspelt, injected names; the schema
check; names quoted, never pasted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polang.errors import MappingError
from polang.filtering import Mapping, check_against_schema, read_mapping, translate
from polang.filtering.mapping import (
    MAX_IDENTIFIER_CHARS,
    MAX_JSON_PATH_KEYS,
    MAX_MAPPING_ATTRIBUTES,
    MAX_MAPPING_BYTES,
    MAX_MAPPING_TYPES,
)
from polang.language.schema import parse_schema

from .kit import SCHEMA, mapping_dict, residuals

GOOD = mapping_dict("")


def refused(data: object, *needles: str) -> str:
    with pytest.raises(MappingError) as e:
        Mapping.from_dict(data)
    for n in needles:
        assert n in str(e.value), str(e.value)
    return str(e.value)


def test_the_test_mapping_is_good() -> None:
    m = Mapping.from_dict(GOOD)
    assert m.type_map("Doc").attributes["owner"].type == "User"
    with pytest.raises(MappingError, match="did you mean 'Doc'"):
        m.type_map("Dco")


def test_misspelt_keys_get_did_you_mean_with_json_paths() -> None:
    refused({"typse": {}}, "$.typse", "did you mean 'types'")
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["tabel"] = bad["types"]["Doc"].pop("table")
    refused(bad, "$.types.Doc.tabel", "did you mean 'table'", "required field 'table'")
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["attributes"]["n"] = {"colum": "n", "type": "Long"}
    refused(bad, "$.types.Doc.attributes.n.colum", "did you mean 'column'")
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["attributes"]["n"]["type"] = "Lnog"
    refused(bad, "$.types.Doc.attributes.n.type", "did you mean 'Long'")
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["parents"][0]["type"] = "Foldr"
    refused(bad, "$.types.Doc.parents[0].type", "did you mean 'Folder'")
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["id_type"] = "Strin"
    refused(bad, "$.types.Doc.id_type", "did you mean 'String'")


def test_mistyped_values() -> None:
    refused([], "$", "must be an object")
    refused({"types": []}, "$.types", "must be an object")
    refused({"types": {"Doc": {"table": 5}}}, "$.types.Doc.table", "must be a string")
    refused({"types": {"Doc": {"table": "d", "attributes": []}}}, "$.types.Doc.attributes")
    refused({"types": {"Doc": {"table": "d", "parents": {}}}}, "$.types.Doc.parents", "array")
    refused(
        {
            "types": {
                "Doc": {
                    "table": "d",
                    "attributes": {"a": {"column": "a", "json": {}, "type": "Long"}},
                }
            }
        },
        "exactly one of",
    )
    refused(
        {
            "types": {
                "Doc": {"table": "d", "parents": [{"type": "Doc", "column": "p", "table": "x"}]}
            }
        },
        "exactly one of 'column' and 'table'",
    )
    refused({"types": {"Doc": {"table": ""}}}, "$.types.Doc.table")
    refused({"types": {"Doc": {"table": "a\x00b"}}}, "without NUL")


def test_too_big_and_too_deep() -> None:
    refused(
        {"types": {f"T{i}": {"table": "t"} for i in range(MAX_MAPPING_TYPES + 1)}},
        "MAX_MAPPING_TYPES",
    )
    attrs = {f"a{i}": "c" for i in range(MAX_MAPPING_ATTRIBUTES + 1)}
    refused({"types": {"Doc": {"table": "d", "attributes": attrs}}}, "MAX_MAPPING_ATTRIBUTES")
    refused({"types": {"Doc": {"table": "x" * (MAX_IDENTIFIER_CHARS + 1)}}}, "MAX_IDENTIFIER_CHARS")
    path = ["k"] * (MAX_JSON_PATH_KEYS + 1)
    refused(
        {
            "types": {
                "Doc": {
                    "table": "d",
                    "attributes": {"a": {"json": {"column": "j", "path": path}, "type": "Long"}},
                }
            }
        },
        "MAX_JSON_PATH_KEYS",
    )


def test_mapping_files(tmp_path: Path) -> None:
    f = tmp_path / "m.json"
    f.write_text(json.dumps(GOOD))
    assert read_mapping(str(f)).types.keys() == Mapping.from_dict(GOOD).types.keys()
    y = tmp_path / "m.yaml"
    y.write_text("types:\n  Doc:\n    table: docs\n    attributes: {title: title}\n")
    assert read_mapping(str(y)).type_map("Doc").attributes["title"].column == "title"
    deep = tmp_path / "deep.yaml"
    deep.write_text("types: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(MappingError, match=r"MAX_YAML_DEPTH|nests deeper"):
        read_mapping(str(deep))
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_MAPPING_BYTES + 1))
    with pytest.raises(MappingError, match="MAX_MAPPING_BYTES"):
        read_mapping(str(big))
    dup = tmp_path / "dup.json"
    dup.write_text('{"types": {}, "types": {}}')
    with pytest.raises(MappingError, match="duplicate"):
        read_mapping(str(dup))
    with pytest.raises(MappingError):
        read_mapping(str(tmp_path / "absent.yaml"))


def test_checked_against_the_schema() -> None:
    schema = parse_schema(SCHEMA)
    check_against_schema(Mapping.from_dict(GOOD), schema)
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["attributes"]["titel"] = bad["types"]["Doc"]["attributes"].pop("title")
    with pytest.raises(MappingError, match="did you mean 'title'"):
        check_against_schema(Mapping.from_dict(bad), schema)
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Doc"]["attributes"]["n"]["type"] = "String"
    with pytest.raises(MappingError, match=r"the schema gives Doc\.n the type Long"):
        check_against_schema(Mapping.from_dict(bad), schema)
    bad = json.loads(json.dumps(GOOD))
    bad["types"]["Dokument"] = bad["types"].pop("Doc")
    with pytest.raises(MappingError, match="not in the schema"):
        check_against_schema(Mapping.from_dict(bad), schema)


def test_injected_names_are_quoted_identifiers(tmp_path: Path) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    table = 'd"o`c; DROP TABLE victims; --'
    column = "ti'tle\" OR 1=1 --"
    m = Mapping.from_dict({"types": {"Doc": {"table": table, "attributes": {"title": column}}}})
    db = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    q = db.dialect.identifier_preparer.quote
    with db.begin() as c:
        c.execute(sqlalchemy.text("CREATE TABLE victims (x INT)"))
        c.execute(sqlalchemy.text(f"CREATE TABLE {q(table)} (id TEXT, {q(column)} TEXT)"))
        c.execute(sqlalchemy.text(f"INSERT INTO {q(table)} VALUES ('a', 'x'), ('b', 'y')"))
    f = translate(
        residuals([("p", "permit", 'resource.title == "x"')]), m, "sqlite", resource_type="Doc"
    )
    with db.connect() as c:
        assert [r[0] for r in c.execute(sqlalchemy.text(f.select_sql(["id"])))] == ["a"]
        assert c.execute(sqlalchemy.text("SELECT count(*) FROM victims")).scalar() == 0
    db.dispose()


def test_hostile_residuals_are_refused_not_crashed() -> None:
    from polang.datalog.eval.residual import Residual
    from polang.errors import FilterRefused
    from polang.filtering.translate import MAX_FILTER_DEPTH, MAX_IN_ENTITIES
    from polang.language import ast
    from polang.language.values import EntityUID

    m = Mapping.from_dict(GOOD)
    deep: ast.Expr = ast.Lit(True)
    for _ in range(MAX_FILTER_DEPTH + 5):
        deep = ast.Unary("!", deep)
    with pytest.raises(FilterRefused, match="MAX_FILTER_DEPTH") as e:
        translate([Residual("deep", "permit", deep)], m, "sqlite", resource_type="Doc")
    assert e.value.policy_id == "deep"
    many = ast.SetLit(
        tuple(ast.EntityLit(EntityUID("Folder", f"f{i}")) for i in range(MAX_IN_ENTITIES + 1))
    )
    with pytest.raises(FilterRefused, match="MAX_IN_ENTITIES"):
        translate(
            [Residual("many", "permit", ast.Binary("in", ast.Var("resource"), many))],
            m,
            "sqlite",
            resource_type="Doc",
        )
    for bad in ("principal", "context"):
        with pytest.raises(FilterRefused, match="no variable but `resource`"):
            translate(
                [Residual("v", "permit", ast.Binary("==", ast.Var(bad), ast.Lit(1)))],  # type: ignore[arg-type]
                m,
                "sqlite",
                resource_type="Doc",
            )
    with pytest.raises(FilterRefused, match="unknown dialect"):
        translate([], m, "oracle", resource_type="Doc")
    with pytest.raises(MappingError, match="did you mean 'Doc'"):
        translate([], m, "sqlite", resource_type="Dok")


def test_mistyped_python_objects() -> None:
    from polang.filtering import AttributeMap, Table, TypeMap

    with pytest.raises(MappingError, match="must be an AttributeMap"):
        Mapping({"Doc": TypeMap("Doc", Table("d"), attributes={"a": "col"})})  # type: ignore[dict-item]
    with pytest.raises(MappingError, match="must be a ParentMap"):
        Mapping({"Doc": TypeMap("Doc", Table("d"), parents=("Folder",))})  # type: ignore[arg-type]
    with pytest.raises(MappingError, match="must be a TypeMap"):
        Mapping({"Doc": "docs"})  # type: ignore[dict-item]
    with pytest.raises(MappingError, match="unknown type 'Lng'"):
        Mapping(
            {
                "Doc": TypeMap(
                    "Doc", Table("d"), attributes={"a": AttributeMap("column", "Lng", "a")}
                )
            }
        )
