"""Whole `rivet run`s to GCS and Azure (real emulators) compared with the source database.

Each mode — full, incremental, chunked (checkpointed, parallel windows), time_window — runs
against the real PostgreSQL into the fake-gcs-server and into Azurite. The oracle reads the
objects with the cloud's own SDK, re-reads every part a `status: success` manifest lists
with pyarrow and compares the rows with the same query on the source; `rivet validate
--depth full` must pass. A part deleted or rewritten behind rivet's back is then named by
`rivet validate` (exit 3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cloud_areas import CloudArea, success_ids, success_table
from tests.hardening.support import cli
from tests.helpers import db_exec, source_block, write_config

pytestmark = pytest.mark.postgres

ROWS = 2000
COLUMNS = "id, name, price, updated_at"


@pytest.fixture
def pg_items(pg_url: str) -> str:
    db_exec(pg_url,
            "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price NUMERIC(10,2), updated_at TIMESTAMP)",
            f"INSERT INTO items SELECT g, 'item ' || g, g * 1.25, "
            f"date_trunc('hour', now() AT TIME ZONE 'UTC') - g * INTERVAL '1 hour' + INTERVAL '30 minutes' "
            f"FROM generate_series(1, {ROWS}) g")
    return pg_url


def _config(tmp: Path, url: str, area: CloudArea, **export: Any) -> Path:
    return write_config(tmp, {**source_block(url), "tuning": {"batch_size": 400, "throttle_ms": 0}}, [{
        "name": "items", "table": "items", "format": "parquet", "max_file_size": "20KB",
        "destination": area.destination(), **export}])


def _source_rows(url: str, where: str = "TRUE") -> list[tuple[Any, ...]]:
    return sorted(db_exec(url, f"SELECT {COLUMNS} FROM items WHERE {where} ORDER BY id"))


def _exported_rows(area: CloudArea) -> list[tuple[Any, ...]]:
    table = success_table(area).select(["id", "name", "price", "updated_at"])
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _validate(config: Path, depth: str = "full") -> tuple[int, dict[str, Any]]:
    result = cli("validate", "-c", str(config), "--format", "json", "--depth", depth)
    return result.returncode, json.loads(result.stdout)["exports"][0]["verification"]


def _run(config: Path, *args: str) -> None:
    result = cli("run", "-c", str(config), *args)
    assert result.returncode == 0, result.stderr


def test_a_full_export_to_the_cloud_equals_the_source_and_validates_full(tmp_path, pg_items, cloud):
    config = _config(tmp_path, pg_items, cloud)
    _run(config)
    manifest = json.loads(cloud.read(cloud.prefix + "manifest.json"))
    assert len(manifest["parts"]) > 1 and manifest["destination"]["uri"].startswith(
        ("gs://" if cloud.kind == "gcs" else "az://") + cloud.bucket + "/")
    assert _exported_rows(cloud) == _source_rows(pg_items)
    assert "_SUCCESS" in cloud.keys()
    code, verdict = _validate(config)
    assert code == 0 and verdict["passed"], verdict


def test_incremental_runs_to_the_cloud_list_every_id_once(tmp_path, pg_items, cloud):
    config = _config(tmp_path, pg_items, cloud, mode="incremental", cursor_column="updated_at")
    _run(config)
    db_exec(pg_items, f"INSERT INTO items SELECT g, 'late ' || g, 1, now() AT TIME ZONE 'UTC' + INTERVAL '1 day' "
                      f"FROM generate_series({ROWS + 1}, {ROWS + 300}) g")
    _run(config, "--validate")
    assert success_ids(cloud) == list(range(1, ROWS + 301))
    assert len([k for k in cloud.keys() if k.startswith("manifest-")]) == 2


def test_a_checkpointed_parallel_chunked_export_to_the_cloud_equals_the_source(tmp_path, pg_items, cloud):
    config = _config(tmp_path, pg_items, cloud, mode="chunked", chunk_column="id", chunk_size=300,
                     parallel=2, chunk_checkpoint=True)
    _run(config, "--validate")
    assert _exported_rows(cloud) == _source_rows(pg_items)
    code, verdict = _validate(config)
    assert code == 0 and verdict["passed"], verdict


def test_a_time_window_export_to_the_cloud_equals_the_window_of_the_source(tmp_path, pg_items, cloud):
    config = _config(tmp_path, pg_items, cloud, mode="time_window", time_column="updated_at", days_window=3)
    _run(config)
    # days_window: from midnight UTC `days_window` days ago (rows sit at :30, off every boundary)
    expected = _source_rows(pg_items, "updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') - INTERVAL '3 days'")
    assert 70 < len(expected) < 100
    assert _exported_rows(cloud) == expected


def test_a_part_rewritten_or_deleted_at_the_cloud_is_named_by_validate(tmp_path, pg_items, cloud):
    config = _config(tmp_path, pg_items, cloud)
    _run(config)
    parts = [p["path"] for p in json.loads(cloud.read(cloud.prefix + "manifest.json"))["parts"]]
    rewritten, deleted = parts[0], parts[1]
    data = bytearray(cloud.read(cloud.prefix + rewritten))
    data[len(data) // 2] ^= 0xFF  # same size: only a checksum can tell
    cloud.put(cloud.prefix + rewritten, bytes(data))
    code, verdict = _validate(config, "full")
    assert code == 3 and verdict["parts_failed"] == 1, verdict
    [failure] = verdict["failures"]
    assert failure["kind"] == "part_checksum_mismatch" and failure["path"] == rewritten

    cloud.remove(cloud.prefix + deleted)
    result = cli("validate", "-c", str(config), "--depth", "light")
    assert result.returncode == 3 and deleted in result.stdout, result.stdout
    code, verdict = _validate(config, "light")
    assert {(f["kind"], f["path"]) for f in verdict["failures"]} >= {("part_missing", deleted)}, verdict
