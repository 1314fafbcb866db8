"""The spec's detection table, row by row, through ``load_policy_store(config)``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from polang.config import Config
from polang.errors import ConfigError
from polang.store import (
    PolicyStoreLoadError,
    PolicyStoreSource,
    load_policy_store,
    load_policy_store_archive_bytes,
)

from .storekit import Route, StoreServer, legacy_doc, store_files, zip_bytes

MakeStore = Callable[..., Path]


def test_uri_ending_in_parc_is_an_archive_fetched_from_the_url(server: StoreServer) -> None:
    server.routes["/stores/app.parc"] = Route(zip_bytes(store_files()))
    config = Config(policy_store_uri=server.url("/stores/app.parc"))
    assert PolicyStoreSource.from_config(config).kind == "archive_url"
    store = load_policy_store(config)
    assert store.format == "archive"
    assert store.id == "app-store"
    assert set(store.policies) == {"owner-view"}


def test_uri_with_a_query_is_detected_by_its_path(server: StoreServer) -> None:
    server.routes["/app.parc?v=2"] = Route(zip_bytes(store_files()))
    src = PolicyStoreSource.url(server.url("/app.parc?v=2"))
    assert src.kind == "archive_url"
    assert src.load().id == "app-store"


def test_any_other_uri_is_legacy_json_fetched_from_the_url(server: StoreServer) -> None:
    server.routes["/policy-store/app"] = Route(
        json.dumps(legacy_doc()).encode(), content_type="application/json"
    )
    config = Config(policy_store_uri=server.url("/policy-store/app"))
    assert PolicyStoreSource.from_config(config).kind == "legacy_url"
    store = load_policy_store(config)
    assert store.format == "legacy-json"
    assert store.id == "app-store"
    assert set(store.templates) == {"share"}


def test_local_fn_directory(make_store: MakeStore) -> None:
    root = make_store()
    config = Config(policy_store_local_fn=str(root))
    assert PolicyStoreSource.from_config(config).kind == "directory"
    store = load_policy_store(config)
    assert store.format == "directory"
    assert len(store.default_entities) == 2


def test_local_fn_directory_wins_over_its_name(tmp_path: Path, make_store: MakeStore) -> None:
    root = make_store(name="looks-like.parc")
    assert PolicyStoreSource.from_path(root).kind == "directory"
    assert load_policy_store(Config(policy_store_local_fn=str(root))).id == "app-store"


def test_local_fn_parc(tmp_path: Path) -> None:
    path = tmp_path / "app.parc"
    path.write_bytes(zip_bytes(store_files()))
    config = Config(policy_store_local_fn=str(path))
    assert PolicyStoreSource.from_config(config).kind == "archive_file"
    assert load_policy_store(config).format == "archive"


def test_local_fn_json(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_text(json.dumps(legacy_doc()))
    config = Config(policy_store_local_fn=str(path))
    assert PolicyStoreSource.from_config(config).kind == "legacy_json_file"
    assert load_policy_store(config).format == "legacy-json"


@pytest.mark.parametrize("ext", [".yaml", ".yml", ".YAML"])
def test_local_fn_yaml_and_yml(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"store{ext}"
    path.write_text(yaml.safe_dump(legacy_doc()))
    config = Config(policy_store_local_fn=str(path))
    assert PolicyStoreSource.from_config(config).kind == "legacy_yaml_file"
    store = load_policy_store(config)
    assert store.format == "legacy-yaml"
    assert store.id == "app-store"


def test_inline_json_and_yaml() -> None:
    as_json = json.dumps(legacy_doc())
    store = load_policy_store(Config(policy_store_local=as_json))
    assert store.format == "legacy-json"
    as_yaml = yaml.safe_dump(legacy_doc())
    store = load_policy_store(Config(policy_store_local=as_yaml))
    assert store.format == "legacy-yaml"
    assert store.id == "app-store"


def test_archive_bytes() -> None:
    data = zip_bytes(store_files())
    assert PolicyStoreSource.archive_bytes(data).kind == "archive_bytes"
    store = load_policy_store_archive_bytes(data)
    assert store.id == "app-store"
    store = load_policy_store_archive_bytes(data, Config(policy_store_validate_checksum=False))
    assert store.format == "archive"


def test_no_source_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no policy store configured"):
        load_policy_store(Config())


def test_unknown_extension_and_missing_path(tmp_path: Path) -> None:
    odd = tmp_path / "store.toml"
    odd.write_text("x")
    with pytest.raises(PolicyStoreLoadError) as e:
        load_policy_store(Config(policy_store_local_fn=str(odd)))
    assert e.value.kind == "source"
    assert "store.toml" in str(e.value)
    assert ".parc" in str(e.value)
    with pytest.raises(PolicyStoreLoadError) as e:
        load_policy_store(Config(policy_store_local_fn=str(tmp_path / "nope.parc")))
    assert e.value.kind == "source"
    assert "no such file" in str(e.value)


def test_from_location_takes_paths_and_urls(make_store: MakeStore) -> None:
    assert PolicyStoreSource.from_location("https://x.example/s.parc").kind == "archive_url"
    assert PolicyStoreSource.from_location("http://x.example/store").kind == "legacy_url"
    assert PolicyStoreSource.from_location(make_store()).kind == "directory"
    assert PolicyStoreSource.from_location("https://x.example/s.PARC").is_remote


def test_a_zip_served_on_a_legacy_url_says_so(server: StoreServer) -> None:
    server.routes["/store"] = Route(zip_bytes(store_files()))
    with pytest.raises(PolicyStoreLoadError, match=r"must end in \.parc") as e:
        PolicyStoreSource.url(server.url("/store")).load()
    assert e.value.kind == "source"
