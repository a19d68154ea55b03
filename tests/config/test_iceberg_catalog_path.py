"""A relative SQLite Iceberg catalog (`iceberg.catalog_url: sqlite:///rel/catalog.db`) hangs
off the config file's folder, as a relative local destination path does — not off the
current directory (rivet_core/config/models.py `IcebergConfig.resolve_catalog_url`,
docs/config-reference.md). Serverless: a SQLite source, a local destination.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from rivet_core import api
from tests.helpers import write_config


def _config(root: Path, iceberg: dict[str, str]) -> Path:
    root.mkdir()
    with sqlite3.connect(root / "src.db") as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"n{i}") for i in range(1, 31)])
    return write_config(root, {"type": "sqlite", "url": "sqlite:///src.db"}, [{
        "name": "items", "table": "items", "mode": "full", "format": "parquet", "table_format": "iceberg",
        "iceberg": {"namespace": "lake", **iceberg}, "destination": {"type": "local", "path": "out"}}])


@pytest.mark.parametrize("how", ["catalog_url", "catalog_url_env"])
def test_a_relative_sqlite_catalog_is_beside_the_config_whatever_the_cwd(tmp_path, monkeypatch, how):
    monkeypatch.setenv("RIVET_TEST_REL_CATALOG", "sqlite:///meta/catalog.db")
    iceberg = ({"catalog_url": "sqlite:///meta/catalog.db"} if how == "catalog_url"
               else {"catalog_url_env": "RIVET_TEST_REL_CATALOG"})
    config = _config(tmp_path / "project", iceberg)
    (tmp_path / "elsewhere" / "meta").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere")  # the cwd must not matter
    (tmp_path / "project" / "meta").mkdir()
    cfg = api.load_config(config)
    url = cfg.exports[0].iceberg.resolve_catalog_url()
    assert url == f"sqlite:///{tmp_path / 'project' / 'meta' / 'catalog.db'}"
    summary = api.run_export(cfg, "items")
    assert summary.status == "success", summary.error_message
    assert not (tmp_path / "elsewhere" / "meta" / "catalog.db").exists()
    catalog = SqlCatalog("rivet", uri=url)
    try:
        rows = catalog.load_table("lake.items").scan().to_arrow()
    finally:
        catalog.engine.dispose()
    assert sorted(rows.column("id").to_pylist()) == list(range(1, 31))


def test_absolute_and_memory_catalog_urls_are_kept(tmp_path):
    config = _config(tmp_path / "p", {"catalog_url": f"sqlite:///{tmp_path}/abs.db"})
    block = api.load_config(config).exports[0].iceberg
    assert block.resolve_catalog_url() == f"sqlite:///{tmp_path}/abs.db"
    block.catalog_url = "sqlite:///:memory:"
    assert block.resolve_catalog_url() == "sqlite:///:memory:"
