"""`table_format: iceberg` (docs/adr/0009-table-formats.md) on local disk and the S3 server.

The oracle is Iceberg's own reader — pyiceberg loading the table from the SQL catalog and
scanning it — compared with the source queried directly, never the tool's counters; the
manifest is checked to name the snapshot the reader sees. Local tables use a SQLite
catalog, the S3 ones the PostgreSQL server as catalog, so both catalog backends run.
DuckDB's iceberg extension is not installable offline, so it is not used here.

Runs are in-process (`api.run_export`) except where a separate process is the point (a
crash, a concurrent run, the CLI's exit codes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from rivet_core import api
from rivet_core.config import load_config
from rivet_core.errors import ConfigError
from rivet_core.state.locks import ExportLocked
from tests.helpers import REPO, db_exec, rivet, rivet_in_process, source_block, write_config


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path, pg_url: str) -> dict[str, Any]:
    """The destination block, the catalog, and how pyiceberg reaches the table."""
    if request.param == "local":
        return _local(tmp_path)
    s3 = request.getfixturevalue("s3")
    request.getfixturevalue("monkeypatch").setenv("RIVET_TEST_ICEBERG_CATALOG", pg_url)
    dest = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/items/", "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    io = {"s3.endpoint": s3.endpoint, "s3.access-key-id": s3.access_key, "s3.secret-access-key": s3.secret_key,
          "s3.region": "us-east-1"}
    return {"dest": dest, "catalog": pg_url, "io": io, "s3": s3, "root": None,
            "iceberg": {"catalog_url_env": "RIVET_TEST_ICEBERG_CATALOG", "namespace": "lake"}}


def _local(tmp_path: Path) -> dict[str, Any]:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    return {"dest": {"type": "local", "path": str(tmp_path / "out")}, "catalog": catalog, "io": {}, "s3": None,
            "root": tmp_path / "out", "iceberg": {"catalog_url": catalog, "namespace": "lake"}}


def _items(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), amount NUMERIC(12,2), "
                 "updated_at TIMESTAMPTZ NOT NULL)")


def _insert(url: str, ids: range, *, minute: int = 0, name: str = "n") -> None:
    rows = ", ".join(f"({i}, '{name}{i}', {i}.25, TIMESTAMPTZ '2026-03-01 00:00:00+00' + "
                     f"INTERVAL '{minute + i} minutes')" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, amount, updated_at) VALUES {rows}")


def _config(tmp_path: Path, url: str, where: dict[str, Any], **extra: Any) -> Path:
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet",
              "table_format": "iceberg", "iceberg": where["iceberg"], "destination": where["dest"], **extra}
    return write_config(tmp_path, source_block(url), [export])


def _run(config: Path, **kwargs: Any) -> api.RunSummary:
    summary = api.run_export(api.load_config(config), "items", **kwargs)
    assert summary.status == "success", summary.error_message
    return summary


def _table(where: dict[str, Any]) -> Any:
    catalog = SqlCatalog("rivet", uri=where["catalog"].replace("postgresql://", "postgresql+psycopg://"),
                         **where["io"])
    try:
        return catalog.load_table("lake.items")
    finally:
        catalog.engine.dispose()


def _rows(where: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(_table(where).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def _source(url: str) -> list[dict[str, Any]]:
    out = db_exec(url, "SELECT id, name, amount, updated_at FROM items ORDER BY id")
    return [dict(zip(("id", "name", "amount", "updated_at"), r, strict=True)) for r in out]


def _manifest(where: dict[str, Any], key: str = "manifest.json") -> dict[str, Any]:
    if where["s3"] is None:
        return json.loads((where["root"] / key).read_text())
    s3 = where["s3"]
    return json.loads(s3.client().get_object(Bucket=s3.bucket, Key=f"exports/items/{key}")["Body"].read())


def _files(table: Any) -> set[str]:
    return {task.file.file_path for task in table.scan().plan_files()}


# ------------------------------------------------------------------------------ modes
def test_full_replaces_the_table_in_one_commit_and_the_manifest_names_its_snapshot(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 201))
    config = _config(tmp_path, pg_url, where)
    _run(config)
    first = _table(where).current_snapshot().snapshot_id
    assert _rows(where) == _source(pg_url)
    assert _manifest(where)["table"]["snapshot_id"] == first
    db_exec(pg_url, "DELETE FROM items WHERE id > 150")
    _insert(pg_url, range(300, 320))
    _run(config)
    table = _table(where)
    assert _rows(where) == _source(pg_url)  # the rows deleted at the source left the table
    manifest = _manifest(where)
    block = manifest["table"]
    assert block["format"] == "iceberg" and block["name"] == "lake.items"
    assert block["snapshot_id"] == table.current_snapshot().snapshot_id and block["rows"] == 170
    # the table's files are exactly the manifest's parts (referenced where they were written)
    assert {f.rsplit("/", 2)[-2] + "/" + f.rsplit("/", 1)[-1] for f in _files(table)} == \
        {p["path"] for p in manifest["parts"]}
    assert len(table.scan(snapshot_id=first).to_arrow()) == 200  # time travel still reads the first run


def test_incremental_appends_each_row_once_and_merge_on_upserts(tmp_path, pg_url, where):
    _items(pg_url)
    _insert(pg_url, range(1, 101))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(101, 151), minute=1000)
    _run(config)
    assert _rows(where) == _source(pg_url)
    assert _manifest(where)["table"]["operation"] == "append"
    # merge_on: an updated row replaces its old version instead of being appended again
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at", merge_on=["id"])
    db_exec(pg_url, "UPDATE items SET name = 'changed', updated_at = updated_at + INTERVAL '1 day' "
                    "WHERE id IN (3, 120)")
    _insert(pg_url, range(151, 161), minute=5000)
    assert _run(config).total_rows == 12
    rows = _rows(where)
    assert rows == _source(pg_url)
    assert [r["id"] for r in rows] == list(range(1, 161))
    assert _manifest(where)["table"]["operation"] == "merge"
    # the rows the merge replaced were cut out of their files by copy-on-write: those files'
    # other rows went to iceberg-data/, so data/ holds only parts
    files = _files(_table(where))
    assert any("/iceberg-data/" in f for f in files)
    assert all("/iceberg-data/" in f or "/data/" in f for f in files)
    assert api.verify_export(api.load_config(config), "items")[1].passed


def test_a_time_partition_and_a_days_window_replace_exactly_their_rows(tmp_path, pg_url, where):
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
    for day in ("2026-03-01", "2026-03-02"):  # each partition's manifest against the one table
        _, verdict = api.verify_export(cfg, "items", sub_prefix=f"updated_at={day}/")
        assert verdict.passed, (day, verdict.to_dict())
    # days_window: rows at or after the cutoff (3650 days back: all of them) are replaced
    db_exec(pg_url, "UPDATE items SET name = 'window' WHERE id > 1050")
    _run(config)
    assert _rows(where) == _source(pg_url)
    assert _manifest(where)["table"]["operation"] == "replace_where"


def test_a_chunked_run_commits_once_after_every_window(tmp_path, pg_url):
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 301))
    config = _config(tmp_path, pg_url, where, mode="chunked", chunk_column="id", chunk_size=50)
    summary = _run(config)
    assert summary.files_committed >= 6
    table = _table(where)
    assert len(table.snapshots()) == 1  # one commit for six windows (docs/invariants.md I6)
    assert _rows(where) == _source(pg_url)


# ------------------------------------------------------------------------------ gates
def test_types_round_trip_and_unholdable_ones_are_refused_before_anything_is_written(tmp_path, pg_url):
    where = _local(tmp_path)
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, amount NUMERIC(30,9), at TIMESTAMPTZ, "
                    "doc JSONB, tags TEXT[], u UUID, t TIME, s SMALLINT)",
            "INSERT INTO items VALUES (1, 12345678901234567890.123456789, '2026-03-01 10:00:00.123456+02', "
            "'{\"a\": [1, 2]}', ARRAY['x', 'y'], 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10:11:12.5', 7)")
    config = _config(tmp_path, pg_url, where)
    refused = api.run_export(api.load_config(config), "items")
    assert refused.status == "failed"
    assert "column 'doc'" in refused.error_message and "`text`" in refused.error_message
    assert not where["root"].exists() or not any(where["root"].rglob("*.parquet"))
    _run(_config(tmp_path, pg_url, where, columns={"doc": "text"}))
    [row] = _table(where).scan().to_arrow().to_pylist()
    [src] = db_exec(pg_url, "SELECT amount, at, doc::text, tags, u, t, s FROM items")
    assert row["amount"] == src[0] and row["at"] == src[1]
    assert json.loads(row["doc"]) == json.loads(src[2])
    assert row["tags"] == src[3] and row["u"] == src[4]  # a uuid stays an Iceberg uuid
    assert row["t"] == src[5] and row["s"] == src[6]


def test_a_new_column_evolves_the_table_and_fail_stops_before_any_commit(tmp_path, pg_url):
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 21))
    _run(_config(tmp_path, pg_url, where))
    db_exec(pg_url, "ALTER TABLE items ADD COLUMN note TEXT", "UPDATE items SET note = 'n' || id")
    failing = api.run_export(api.load_config(_config(tmp_path, pg_url, where, on_schema_drift="fail")), "items")
    assert failing.status == "failed"
    assert len(_table(where).snapshots()) == 1 and "note" not in _table(where).schema().column_names
    _run(_config(tmp_path, pg_url, where, on_schema_drift="warn"))
    assert [r["note"] for r in _rows(where)] == [f"n{i}" for i in range(1, 21)]


def test_a_catalog_row_whose_metadata_is_gone_fails_the_run_before_its_manifest(tmp_path, pg_url):
    import shutil

    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 11))
    config = _config(tmp_path, pg_url, where)
    _run(config)
    manifest = (where["root"] / "manifest.json").read_bytes()
    shutil.rmtree(where["root"] / "metadata")  # someone removed the table's files, not its catalog row
    failed = api.run_export(api.load_config(config), "items")
    assert failed.status == "failed" and "drop the table from the catalog" in failed.error_message
    assert (where["root"] / "manifest.json").read_bytes() == manifest  # nothing published


def test_an_unreachable_catalog_fails_the_run_naming_it_without_its_password(tmp_path, pg_url):
    where = _local(tmp_path)
    where["iceberg"] = {"catalog_url": "postgresql://cat:hunter2secret@127.0.0.1:1/catalog", "namespace": "lake"}
    _items(pg_url)
    _insert(pg_url, range(1, 6))
    failed = api.run_export(api.load_config(_config(tmp_path, pg_url, where)), "items")
    assert failed.status == "failed" and "cannot open the Iceberg catalog 'rivet'" in failed.error_message
    assert "hunter2secret" not in failed.error_message
    assert not (where["root"] / "manifest.json").exists()  # no commit, no manifest


def test_config_refuses_what_an_iceberg_table_cannot_do(tmp_path, pg_url):
    local = {"type": "local", "path": "out"}
    bad = write_config(tmp_path, source_block(pg_url), [
        {"name": "a", "table": "a", "format": "csv", "table_format": "iceberg",
         "iceberg": {"catalog_url": "sqlite:///c.db", "namespace": "lake"}, "destination": local},
        {"name": "b", "table": "b", "format": "parquet", "table_format": "iceberg",
         "iceberg": {"catalog_url": "sqlite:///c.db", "catalog_url_env": "X", "namespace": "lake"},
         "destination": local},
        {"name": "c", "table": "c", "format": "parquet", "table_format": "iceberg",
         "iceberg": {"catalog_url": "postgresql://u:hunter2secret@db/cat"}, "destination": local},
        {"name": "d", "table": "d", "format": "parquet",
         "iceberg": {"catalog_url": "sqlite:///c.db", "namespace": "lake"}, "destination": local},
        {"name": "e", "table": "e", "format": "parquet", "table_format": "iceberg", "destination": local},
    ])
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    text = str(info.value)
    assert "table_format: iceberg needs format: parquet" in text
    assert "set exactly one of catalog_url or catalog_url_env" in text
    assert "iceberg.namespace is required" in text
    assert "an iceberg: block needs table_format: iceberg" in text
    assert "table_format: iceberg needs an iceberg: block" in text
    assert "hunter2secret" not in text
    # the plan (rivet plan --json) shows the catalog URL without its password
    good = write_config(tmp_path, source_block(pg_url), [
        {"name": "c", "table": "c", "format": "parquet", "table_format": "iceberg",
         "iceberg": {"catalog_url": "postgresql://u:hunter2secret@db/cat", "namespace": "lake"},
         "destination": local}])
    from rivet_core.ops.plan import redacted_config

    shown = json.dumps(redacted_config(load_config(good)))
    assert "hunter2secret" not in shown and "catalog_url" in shown


# ------------------------------------------------------------------------------ crashes
def _validate(config: Path) -> Any:
    """`rivet validate` in-process (the same click command as the binary)."""
    return rivet_in_process("validate", "-c", str(config))


def test_a_crash_at_each_point_leaves_the_table_whole_and_the_rerun_appends_each_row_once(tmp_path, pg_url):
    """The crash matrix on one table: each crash is a real SIGKILL of a `rivet run`
    (rivet_core/pipeline/faults.py), each re-run in-process; rows arrive between them."""
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 51))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    high = 50
    for point in ("after_file_write", "after_table_commit", "after_cursor_commit"):
        before = len(_table(where).snapshots())
        _insert(pg_url, range(high + 1, high + 21), minute=1000 * (high // 10))
        crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
        assert crashed.returncode != 0, point
        ids = [r["id"] for r in _rows(where)]
        if point == "after_file_write":  # nothing committed: the previous snapshot, whole
            assert len(_table(where).snapshots()) == before and ids == list(range(1, high + 1)), point
        else:  # the commit landed, complete: a reader never sees part of a run
            assert ids == list(range(1, high + 21)), point
        _insert(pg_url, range(high + 21, high + 31), minute=1000 * (high // 10) + 500)
        high += 30
        _run(config)
        assert [r["id"] for r in _rows(where)] == list(range(1, high + 1)), point  # every id exactly once
        assert _rows(where) == _source(pg_url), point
        verdict = _validate(config)
        assert verdict.exit_code == 0, (point, verdict.output)


def test_a_failed_run_never_commits(tmp_path, pg_url, monkeypatch):
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 21))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(21, 41), minute=1000)
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_manifest_update")  # read at each call: in-process too
    assert api.run_export(api.load_config(config), "items").status == "failed"
    assert len(_table(where).snapshots()) == 1 and len(_rows(where)) == 20


def test_a_concurrent_run_is_refused_and_the_table_stays_whole(tmp_path, pg_url):
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 41))
    config = _config(tmp_path, pg_url, where, mode="incremental", cursor_column="updated_at")
    _run(config)
    _insert(pg_url, range(41, 61), minute=1000)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "RIVET_TEST_PAUSE_AT": "after_table_commit", "RIVET_TEST_PAUSE_DIR": str(barrier)}
    first = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        reached = barrier / "after_table_commit.reached"
        deadline = time.monotonic() + 120
        while not reached.exists():  # a file barrier (rivet_core/pipeline/faults.py), bounded
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never reached its table commit"
            time.sleep(0.05)
        with pytest.raises(ExportLocked) as refused:  # the export lock: nothing is done
            api.run_export(api.load_config(config), "items")
        assert refused.value.exit_code == 2
        assert len(_table(where).snapshots()) == 2
    finally:
        (barrier / "after_table_commit.release").touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert len(_table(where).snapshots()) == 2
    assert _rows(where) == _source(pg_url)


def test_validate_fails_when_the_table_was_rolled_back_behind_the_manifest(tmp_path, pg_url):
    where = _local(tmp_path)
    _items(pg_url)
    _insert(pg_url, range(1, 31))
    config = _config(tmp_path, pg_url, where)
    _run(config)
    _run(config)
    assert _validate(config).exit_code == 0
    table = _table(where)
    first = table.snapshots()[0].snapshot_id
    table.manage_snapshots().rollback_to_snapshot(first).commit()  # another writer moves the table back
    verdict = _validate(config)
    assert verdict.exit_code == 3, verdict.output
    assert "older than the manifest's" in verdict.output
