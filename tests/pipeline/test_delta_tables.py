"""`table_format: delta` (docs/adr/0009-table-formats.md) on local disk and the S3 server.

The oracle is Delta's own reader (deltalake's DeltaTable over the table root), compared
with the source queried directly — never the tool's counters; the manifest is checked to
name the table version the reader sees.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rivet_core import api
from rivet_core.config import load_config
from rivet_core.errors import ConfigError
from tests.helpers import db_exec, rivet, source_block, write_config


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(params=["local", "s3", "gcs"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return _where_for(request.param, request, tmp_path)


def _where_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The destination block and how deltalake reaches the table it holds. On GCS rivet
    commits through a copy of the log (rivet_core/tableformat/gcs_delta_log.py) and
    rewrites rows itself for MERGE and the predicate overwrite (delta_rewrite.py); the
    reader here is delta-rs straight at `gs://` (tests/cloud_areas.py `delta_options`)."""
    if kind == "local":
        return {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {},
                "s3": None}
    if kind == "gcs":
        gcs = request.getfixturevalue("gcs")
        return {"dest": gcs.destination(), "uri": f"gs://{gcs.bucket}/exports/items",
                "options": gcs.delta_options(), "s3": None, "gcs": gcs}
    s3 = request.getfixturevalue("s3")
    dest = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/items/", "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
               "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    return {"dest": dest, "uri": f"s3://{s3.bucket}/exports/items", "options": options, "s3": s3}


def _items(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), amount NUMERIC(12,2), "
                 "updated_at TIMESTAMPTZ NOT NULL)")


def _insert(url: str, ids: range, *, minute: int = 0, name: str = "n") -> None:
    rows = ", ".join(f"({i}, '{name}{i}', {i}.25, TIMESTAMPTZ '2026-03-01 00:00:00+00' + "
                     f"INTERVAL '{minute + i} minutes')" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, amount, updated_at) VALUES {rows}")


def _config(tmp_path: Path, url: str, where: dict[str, Any], **extra: Any) -> Path:
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet",
              "table_format": "delta", "destination": where["dest"], **extra}
    return write_config(tmp_path, source_block(url), [export])


def _run(config: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = rivet("run", "-c", str(config), "--json", *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["runs"][0]


def _table(where: dict[str, Any], version: int | None = None) -> DeltaTable:
    return DeltaTable(where["uri"], version=version, storage_options=where["options"])


def _rows(where: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(_table(where).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def _source(url: str) -> list[dict[str, Any]]:
    out = db_exec(url, "SELECT id, name, amount, updated_at FROM items ORDER BY id")
    return [dict(zip(("id", "name", "amount", "updated_at"), r, strict=True)) for r in out]


def _manifest(where: dict[str, Any], key: str = "manifest.json") -> dict[str, Any]:
    if where.get("gcs") is not None:
        return json.loads(where["gcs"].read(f"exports/items/{key}"))
    if where["s3"] is None:
        return json.loads((Path(where["uri"]) / key).read_text())
    s3 = where["s3"]
    return json.loads(s3.client().get_object(Bucket=s3.bucket, Key=f"exports/items/{key}")["Body"].read())


# ------------------------------------------------------------------------------ modes
def test_full_replaces_the_table_in_one_commit_and_the_manifest_names_its_version(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 201))
    config = _config(tmp_path, pg_url, where)
    _run(config)
    assert _rows(where) == _source(pg_url)
    assert _manifest(where)["table"]["version"] == 0
    db_exec(pg_url, "DELETE FROM items WHERE id > 150")
    _insert(pg_url, range(300, 320))
    _run(config)
    table = _table(where)
    assert table.version() == 1
    assert _rows(where) == _source(pg_url)  # the rows deleted at the source left the table
    manifest = _manifest(where)
    assert manifest["table"]["version"] == 1 and manifest["table"]["rows"] == 170
    # the table's files are exactly the manifest's parts (referenced, not copied)
    files = set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
    assert files == {p["path"] for p in manifest["parts"]}
    assert len(_table(where, version=0).to_pyarrow_table()) == 200  # time travel still reads v0


def test_incremental_appends_each_row_once_and_merge_on_upserts(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 101))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(101, 151), minute=1000)
    _run(config)
    assert _rows(where) == _source(pg_url)
    assert _table(where).version() == 1
    # merge_on: an updated row replaces its old version instead of being appended again
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at", merge_on=["id"])
    db_exec(pg_url, "UPDATE items SET name = 'changed', updated_at = updated_at + INTERVAL '1 day' "
                    "WHERE id IN (3, 120)")
    _insert(pg_url, range(151, 161), minute=5000)
    run = _run(config)
    assert run["rows"] == 12
    rows = _rows(where)
    assert rows == _source(pg_url)
    assert [r["id"] for r in rows] == list(range(1, 161))
    assert _manifest(where)["table"]["operation"] == "merge"


def test_a_time_partition_replaces_exactly_its_window(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 61), minute=0)  # 2026-03-01 00:01 … 01:00
    db_exec(pg_url, "INSERT INTO items SELECT id + 1000, name, amount, updated_at + INTERVAL '1 day' "
                    "FROM items")  # the same 60 rows on 2026-03-02
    config = _config(tmp_path, pg_url, where, mode="time_window", time_column="updated_at", days_window=3650)
    cfg = api.load_config(config)
    day1 = api.DayWindow(start=date(2026, 3, 1), end=date(2026, 3, 2))
    day2 = api.DayWindow(start=date(2026, 3, 2), end=date(2026, 3, 3))
    for day in (day1, day2):
        assert api.run_export(cfg, "items", window=day).status == "success"
    assert _rows(where) == _source(pg_url)
    db_exec(pg_url, "DELETE FROM items WHERE id BETWEEN 1 AND 10", "UPDATE items SET name = 'again' WHERE id = 20")
    assert api.run_export(cfg, "items", window=day1).status == "success"
    rows = _rows(where)
    assert rows == _source(pg_url)  # day 1 replaced, day 2 untouched
    assert sum(1 for r in rows if r["id"] > 1000) == 60


def test_a_time_window_run_replaces_exactly_its_window_and_nothing_else(tmp_path, pg_url, where):
    """`days_window` is a predicate overwrite (`time_column >= cutoff`): rows before the
    cutoff — written by an earlier, wider run — stay as they were even where the source has
    since changed or deleted them; rows in the window are the source's, each once."""
    _items(pg_url)
    old = "date_trunc('day', now()) - INTERVAL '10 days'"  # before the 3-day window
    new = "now() - INTERVAL '1 hour'"  # inside it
    db_exec(pg_url, "INSERT INTO items SELECT g, 'n' || g, g + 0.25, "
                    f"CASE WHEN g <= 40 THEN {old} + g * INTERVAL '1 minute' ELSE {new} - g * INTERVAL '1 second' END "
                    "FROM generate_series(1, 80) g")
    _run(_config(tmp_path, pg_url, where, mode="time_window", time_column="updated_at", days_window=30))
    first = {r["id"]: r for r in _rows(where)}
    assert sorted(first) == list(range(1, 81))
    db_exec(pg_url, "DELETE FROM items WHERE id IN (5, 60)",
            "UPDATE items SET name = 'changed' WHERE id IN (6, 50)",
            f"INSERT INTO items VALUES (100, 'new', 1.5, {new})")
    run = _run(_config(tmp_path, pg_url, where, mode="time_window", time_column="updated_at", days_window=3))
    assert run["rows"] == 40  # ids 41..80 minus 60, plus 100
    rows = {r["id"]: r for r in _rows(where)}
    assert len(_table(where).to_pyarrow_table()) == len(rows)  # no row twice
    source = {r["id"]: r for r in _source(pg_url)}
    assert {i: rows[i] for i in rows if i <= 40} == {i: first[i] for i in range(1, 41)}  # untouched, 5 and 6 too
    assert {i: rows[i] for i in rows if i > 40} == {i: source[i] for i in source if i > 40}
    assert rows[50]["name"] == "changed" and 60 not in rows and rows[100]["name"] == "new"
    assert rows[6]["name"] == "n6" and 5 in rows
    assert _table(where).version() == 1 and _manifest(where)["table"]["operation"] == "replace_where"


def test_a_chunked_run_commits_once_after_every_window(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 301))
    config = _config(tmp_path, pg_url, where, mode="chunked", chunk_column="id", chunk_size=50)
    run = _run(config)
    assert run["files"] >= 6
    table = _table(where)
    assert table.version() == 0  # one commit for six windows (docs/invariants.md I6)
    assert _rows(where) == _source(pg_url)


def test_on_azure_the_table_is_created_merged_and_verified(tmp_path, pg_url, azure):
    """An Azure destination (Azurite): delta-rs commits through the account's endpoint with
    the destination's key, and the MERGE reads the parts back over pyarrow's Azure
    filesystem (rivet_core/tableformat/azure_store.py)."""
    uri = f"az://{azure.bucket}/exports/items"
    options = {"azure_storage_account_name": azure.account, "azure_storage_account_key": azure.key,
               "azure_storage_endpoint": azure.endpoint, "allow_http": "true"}
    where = {"dest": azure.destination(), "uri": uri, "options": options, "s3": None}
    _items(pg_url)
    _insert(pg_url, range(1, 41))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at", merge_on=["id"])
    _run(config)
    assert _table(where).version() == 0 and _rows(where) == _source(pg_url)
    db_exec(pg_url, "UPDATE items SET name = 'changed', updated_at = updated_at + INTERVAL '1 day' WHERE id = 3")
    _insert(pg_url, range(41, 46), minute=5000)
    assert _run(config)["rows"] == 6
    assert _table(where).version() == 1 and _rows(where) == _source(pg_url)  # id 3 once, changed
    manifest = json.loads(azure.read("exports/items/manifest.json"))
    assert manifest["table"] | {"files": 0, "rows": 0} == {"format": "delta", "uri": uri, "version": 1,
                                                         "operation": "merge", "files": 0, "rows": 0}
    verdict = rivet("validate", "-c", str(config))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


# ------------------------------------------------------------------------------ gates
def test_types_round_trip_and_unholdable_ones_are_refused_before_anything_is_written(tmp_path, pg_url):
    where = {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {}, "s3": None}
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, amount NUMERIC(30,9), at TIMESTAMPTZ, "
                    "doc JSONB, tags TEXT[], u UUID)",
            "INSERT INTO items VALUES (1, 12345678901234567890.123456789, '2026-03-01 10:00:00.123456+02', "
            "'{\"a\": [1, 2]}', ARRAY['x', 'y'], 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')")
    config = _config(tmp_path, pg_url, where)
    refused = rivet("run", "-c", str(config))
    assert refused.returncode != 0
    assert "column 'u'" in refused.stderr and "`text`" in refused.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))
    config = _config(tmp_path, pg_url, where, columns={"u": "text"})
    _run(config)
    [row] = _table(where).to_pyarrow_table().to_pylist()
    [src] = db_exec(pg_url, "SELECT amount, at, doc::text, tags, u::text FROM items")
    assert row["amount"] == src[0] and row["at"] == src[1]
    assert json.loads(row["doc"]) == json.loads(src[2])
    assert row["tags"] == src[3] and row["u"] == src[4]


def test_a_new_column_evolves_the_table_and_fail_stops_before_any_commit(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 21))
    _run(_config(tmp_path, pg_url, where))
    db_exec(pg_url, "ALTER TABLE items ADD COLUMN note TEXT", "UPDATE items SET note = 'n' || id")
    failing = rivet("run", "-c", str(_config(tmp_path, pg_url, where, on_schema_drift="fail")))
    assert failing.returncode != 0
    assert _table(where).version() == 0 and "note" not in _table(where).schema().to_arrow().names
    _run(_config(tmp_path, pg_url, where, on_schema_drift="warn"))
    rows = _rows(where)
    assert [r["note"] for r in rows] == [f"n{i}" for i in range(1, 21)]
    assert rows == [dict(zip(("id", "name", "amount", "updated_at", "note"), r, strict=True))
                    for r in db_exec(pg_url, "SELECT id, name, amount, updated_at, note FROM items ORDER BY id")]
    assert "note" not in _table(where, version=0).schema().to_arrow().names  # v0 still reads as it was


def test_config_refuses_what_a_table_cannot_do(tmp_path, pg_url):
    bad = write_config(tmp_path, source_block(pg_url), [
        {"name": "a", "table": "a", "format": "csv", "table_format": "delta",
         "destination": {"type": "local", "path": "out"}},
        {"name": "b", "table": "b", "format": "parquet", "merge_on": ["id"],
         "destination": {"type": "local", "path": "out"}},
        {"name": "c", "table": "c", "format": "parquet", "table_format": "delta", "merge_on": ["id"],
         "destination": {"type": "local", "path": "out"}},
        {"name": "d", "table": "d", "format": "parquet", "table_format": "delta",
         "destination": {"type": "stdout"}},
    ])
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    text = str(info.value)
    assert "needs format: parquet" in text
    assert "merge_on needs a table" in text
    assert "merge_on applies to mode: incremental" in text
    assert "table_format: delta writes to local, s3, azure or gcs destinations, not stdout" in text


# ------------------------------------------------------------------------------ crashes
CRASH_POINTS = ["after_file_write", "after_manifest_update", "after_table_commit", "after_cursor_commit"]


@pytest.mark.parametrize(("point", "store"), [(point, "local") for point in CRASH_POINTS]
                         + [("after_table_commit", "gcs")])  # GCS: the orphan commit went through the log copy
def test_a_crash_at_each_point_leaves_the_table_whole_and_the_rerun_appends_each_row_once(
        tmp_path, pg_url, point, store, request):
    where = _where_for(store, request, tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 51))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(51, 81), minute=1000)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0
    ids = [r["id"] for r in _rows(where)]
    if point in ("after_file_write", "after_manifest_update"):
        assert _table(where).version() == 0 and ids == list(range(1, 51))  # the previous version
    else:  # the commit landed, complete: a reader never sees part of a run
        assert _table(where).version() == 1 and ids == list(range(1, 81))
    _insert(pg_url, range(81, 91), minute=3000)
    _run(config)
    assert [r["id"] for r in _rows(where)] == list(range(1, 91))  # every id exactly once
    assert _rows(where) == _source(pg_url)
    verdict = rivet("validate", "-c", str(config))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


def test_a_failed_run_never_commits(tmp_path, pg_url):
    where = {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {}, "s3": None}
    _items(pg_url)
    _insert(pg_url, range(1, 21))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(21, 41), minute=1000)
    failed = rivet("run", "-c", str(config), env={"RIVET_TEST_ERROR_AT": "after_manifest_update"})
    assert failed.returncode != 0
    assert _table(where).version() == 0 and len(_rows(where)) == 20


def test_two_concurrent_runs_of_one_export_never_corrupt_the_table(tmp_path, pg_url):
    import subprocess
    import sys

    from tests.helpers import REPO

    where = {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {}, "s3": None}
    _items(pg_url)
    _insert(pg_url, range(1, 41))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(41, 61), minute=1000)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    import os
    env = {**os.environ, "RIVET_TEST_PAUSE_AT": "after_table_commit", "RIVET_TEST_PAUSE_DIR": str(barrier)}
    first = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        reached = barrier / "after_table_commit.reached"
        deadline = __import__("time").monotonic() + 120
        while not reached.exists():  # a file barrier (rivet_core/pipeline/faults.py), bounded
            assert first.poll() is None, first.communicate()
            assert __import__("time").monotonic() < deadline, "the first run never reached its table commit"
            __import__("time").sleep(0.05)
        second = rivet("run", "-c", str(config))
        assert second.returncode == 2, second.stderr  # the export lock refuses it, writing nothing
        assert _table(where).version() == 1
    finally:
        (barrier / "after_table_commit.release").touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert _table(where).version() == 1
    assert _rows(where) == _source(pg_url)


def test_a_vacuum_in_place_of_retention_deletes_superseded_parts_and_validate_still_passes(tmp_path, pg_url):
    """`retention:` is refused with a Delta table; the message sends users to delta-rs's
    VACUUM, whose two commits (START, END) are not another writer's changes."""
    where = {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {}, "s3": None}
    _items(pg_url)
    _insert(pg_url, range(1, 31))
    refused = rivet("run", "-c", str(_config(tmp_path, pg_url, where, retention={"keep_runs": 1})))
    assert refused.returncode != 0 and ".vacuum(retention_hours=" in refused.stderr
    config = _config(tmp_path, pg_url, where)
    _run(config)
    first_parts = {p["path"] for p in _manifest(where)["parts"]}
    _run(config)
    deleted = _table(where).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert set(deleted) == first_parts  # the first run's parts: no longer referenced
    assert not any((Path(where["uri"]) / p).exists() for p in first_parts)
    assert _rows(where) == _source(pg_url)
    verdict = rivet("validate", "-c", str(config))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


def test_validate_fails_when_the_table_no_longer_matches_the_manifest(tmp_path, pg_url):
    where = {"dest": {"type": "local", "path": "out"}, "uri": str(tmp_path / "out"), "options": {}, "s3": None}
    _items(pg_url)
    _insert(pg_url, range(1, 31))
    config = _config(tmp_path, pg_url, where)
    _run(config)
    _run(config)
    assert rivet("validate", "-c", str(config)).returncode == 0
    _table(where).restore(0)  # another writer moves the table behind the manifest's back
    verdict = rivet("validate", "-c", str(config))
    assert verdict.returncode == 3, verdict.stdout + verdict.stderr
    assert "table" in verdict.stdout + verdict.stderr
