"""`table_format: iceberg` on the Azure and GCS test servers (Azurite, fake-gcs-server) —
docs/adr/0009-table-formats.md "Object stores".

Two oracles, neither the tool's counters: pyiceberg loading the table from the SQL catalog
and scanning it, and every data file of the current snapshot fetched with the cloud's own
SDK (tests/cloud_areas.py) and read with pyarrow — both compared with the source queried
directly. On GCS the scan uses pyiceberg's stock pyarrow IO (an OAuth token the emulator
ignores), so not a line of Rivet reads the table back; on Azure pyiceberg 0.12's stock IO
cannot open the `abfs://container@account…` location other engines expect, so the scan
uses Rivet's file IO and the SDK oracle carries the independence.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from rivet_core import api
from tests.cloud_areas import CloudArea
from tests.helpers import db_exec, rivet_quick, source_block, write_config


def _items(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), amount NUMERIC(12,2), "
                 "updated_at TIMESTAMPTZ NOT NULL)")


def _insert(url: str, ids: range, *, minute: int = 0) -> None:
    rows = ", ".join(f"({i}, 'n{i}', {i}.25, TIMESTAMPTZ '2026-03-01 00:00:00+00' + INTERVAL '{minute + i} minutes')"
                     for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, amount, updated_at) VALUES {rows}")


def _source(url: str) -> list[dict[str, Any]]:
    out = db_exec(url, "SELECT id, name, amount, updated_at FROM items ORDER BY id")
    return [dict(zip(("id", "name", "amount", "updated_at"), r, strict=True)) for r in out]


def _config(tmp_path: Path, url: str, cloud: CloudArea, **extra: Any) -> Path:
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet", "table_format": "iceberg",
              "iceberg": {"catalog_url": f"sqlite:///{tmp_path / 'catalog.db'}", "namespace": "lake"},
              "destination": cloud.destination(), **extra}
    return write_config(tmp_path, source_block(url), [export])


def _run(config: Path) -> api.RunSummary:
    summary = api.run_export(api.load_config(config), "items")
    assert summary.status == "success", summary.error_message
    return summary


def _io(cloud: CloudArea) -> dict[str, str]:
    """How the oracle's pyiceberg reaches the table's files."""
    if cloud.kind == "gcs":  # pyiceberg's own GCS IO; fake-gcs-server accepts any token
        return {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO", "gcs.service.host": cloud.endpoint,
                "gcs.oauth2.token": "test", "gcs.oauth2.token-expires-at": str(int((time.time() + 3600) * 1000))}
    return {"py-io-impl": "rivet_core.tableformat.iceberg_io.RivetFileIO", "rivet.azure_storage_account_name":
            cloud.account, "rivet.azure_storage_account_key": cloud.key, "rivet.azure_storage_endpoint":
            cloud.endpoint}


def _table(tmp_path: Path, cloud: CloudArea) -> Any:
    catalog = SqlCatalog("rivet", uri=f"sqlite:///{tmp_path / 'catalog.db'}", **_io(cloud))
    try:
        return catalog.load_table("lake.items")
    finally:
        catalog.engine.dispose()


def _scan(tmp_path: Path, cloud: CloudArea) -> list[dict[str, Any]]:
    return sorted(_table(tmp_path, cloud).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def _data_file_keys(tmp_path: Path, cloud: CloudArea) -> list[str]:
    """The current snapshot's data files as keys in the bucket/container."""
    keys = []
    for task in _table(tmp_path, cloud).scan().plan_files():
        path = task.file.file_path
        assert path.split("/", 3)[2].split("@")[0] == cloud.bucket, path  # in this export's bucket
        keys.append(path.split("/", 3)[3])
    return keys


def _sdk_rows(tmp_path: Path, cloud: CloudArea) -> list[dict[str, Any]]:
    """The table's rows read from its data files fetched with the cloud's SDK (no deletes:
    every operation here rewrites whole files, so the files' union is the table)."""
    tables = [pq.read_table(pa.BufferReader(cloud.read(k))) for k in _data_file_keys(tmp_path, cloud)]
    return sorted(pa.concat_tables(tables, promote_options="permissive").to_pylist(), key=lambda r: r["id"])


def test_full_then_incremental_runs_commit_an_iceberg_table_on_the_cloud_and_validate_checks_it(
        tmp_path, pg_url, cloud):
    _items(pg_url)
    _insert(pg_url, range(1, 61))
    full = _config(tmp_path, pg_url, cloud)
    _run(full)
    table = _table(tmp_path, cloud)
    location = table.location()
    expected_root = (f"abfs://{cloud.bucket}@{cloud.account}.dfs.core.windows.net/exports/items"
                     if cloud.kind == "azure" else f"gs://{cloud.bucket}/exports/items")
    assert location == expected_root
    assert _scan(tmp_path, cloud) == _source(pg_url) == _sdk_rows(tmp_path, cloud)
    manifest = json.loads(cloud.read("exports/items/manifest.json"))
    assert manifest["table"]["snapshot_id"] == table.current_snapshot().snapshot_id
    assert manifest["table"]["uri"] == expected_root
    assert any(k.startswith("metadata/") for k in cloud.keys())  # the table's metadata beside the manifest

    # incremental with merge_on: new rows appended, an updated row replaced, each id once
    incremental = _config(tmp_path, pg_url, cloud, mode="incremental", cursor_column="updated_at", merge_on=["id"])
    _run(incremental)
    db_exec(pg_url, "UPDATE items SET name = 'changed', updated_at = updated_at + INTERVAL '1 day' WHERE id = 7")
    _insert(pg_url, range(61, 81), minute=5000)
    assert _run(incremental).total_rows == 21
    rows = _scan(tmp_path, cloud)
    assert rows == _source(pg_url) == _sdk_rows(tmp_path, cloud)
    assert [r["id"] for r in rows] == list(range(1, 81)) and rows[6]["name"] == "changed"
    assert json.loads(cloud.read("exports/items/manifest.json"))["table"]["operation"] == "merge"
    cfg = api.load_config(incremental)
    export = next(e for e in cfg.exports if e.name == "items")
    read = api.read_table(api.export_destination(cfg, export), "", export)  # the integration's reader
    assert read is not None and sorted(read[0].column("id").to_pylist()) == list(range(1, 81))

    verdict = rivet_quick("validate", "-c", str(incremental))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    # a data file the current snapshot references disappears: validate must fail
    cloud.remove("exports/items/" + next(k for k in _data_file_keys(tmp_path, cloud)
                                         if k.startswith("exports/items/data/"))[len("exports/items/"):])
    verdict = rivet_quick("validate", "-c", str(incremental))
    assert verdict.returncode == 3, verdict.stdout + verdict.stderr
    assert "is missing" in verdict.stdout + verdict.stderr



def test_daily_partitions_of_one_cloud_table_each_replace_their_day_and_each_validates(tmp_path, pg_url, cloud):
    """A time partition writes under `<prefix>updated_at=<day>/` and commits to the one table
    at the prefix; validating a partition matches the manifest's table URI (abfs/gs) to the
    partition's destination (tableformat/location.py sub_prefix_of)."""
    from datetime import date

    _items(pg_url)
    _insert(pg_url, range(1, 11))
    db_exec(pg_url, "INSERT INTO items SELECT id + 100, name, amount, updated_at + INTERVAL '1 day' FROM items")
    config = _config(tmp_path, pg_url, cloud, mode="time_window", time_column="updated_at", days_window=3650)
    cfg = api.load_config(config)
    days = [api.DayWindow(start=date(2026, 3, d), end=date(2026, 3, d + 1)) for d in (1, 2)]
    for day in days:
        assert api.run_export(cfg, "items", window=day).status == "success"
    db_exec(pg_url, "DELETE FROM items WHERE id <= 3")
    assert api.run_export(cfg, "items", window=days[0]).status == "success"  # day 1 again, day 2 untouched
    assert _scan(tmp_path, cloud) == _source(pg_url) == _sdk_rows(tmp_path, cloud)
    for day in ("2026-03-01", "2026-03-02"):
        _, verdict = api.verify_export(cfg, "items", sub_prefix=f"updated_at={day}/")
        assert verdict.passed, (day, verdict.to_dict())

def test_an_azure_iceberg_export_without_account_name_is_refused_at_load(tmp_path):
    """The table's location names the account (abfss://<container>@<account>…), so a
    destination reached by endpoint alone is refused before anything runs."""
    from rivet_core.config import load_config
    from rivet_core.errors import ConfigError

    config = write_config(tmp_path, {"type": "sqlite", "url": "sqlite:///x.db"}, [
        {"name": "items", "table": "items", "format": "parquet", "table_format": "iceberg",
         "iceberg": {"catalog_url": "sqlite:///c.db", "namespace": "lake"},
         "destination": {"type": "azure", "bucket": "c", "prefix": "p/", "endpoint": "http://127.0.0.1:1/acct",
                         "allow_anonymous": True}}])
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert "table_format: iceberg on azure needs destination.account_name" in str(info.value)
