"""`mode: cdc` on MariaDB (the binlog), end to end through the real `rivet` CLI and a real server.

The PostgreSQL suite's substance (tests/pipeline/test_cdc_postgres.py) on the binlog reader
(rivet_core/source/mysql/changes.py). The oracle is the list of changes each test made with
its own SQL; the published side is read back with pyarrow from the parts every
`status: success` manifest lists, ordered by (`__pos`, `__seq`) — never the run's own
counters. Each test has its own database and its own `cdc.server_id` (a replica id is
server-wide).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rivet_core.pipeline.cdc.positions import parse_position
from tests.cdc_oracle import (
    Change,
    check_each_run_publishes_exactly_once,
    make_changes,
    published_changes,
)
from tests.cdc_oracle import files as _files
from tests.cdc_oracle import refusal as _refusal
from tests.cdc_oracle import run_ok as _run
from tests.helpers import (
    manifest_table,
    mysql_exec,
    rivet,
    rivet_quick,
    source_block,
    success_manifests,
    write_config,
)

pytestmark = pytest.mark.mysql

ITEMS = "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2), seen DATETIME(6))"


@pytest.fixture
def cdc_db(mysql_url: str) -> tuple[str, int]:
    """A fresh database with an `items` table, and a replica id of this test's own."""
    mysql_exec(mysql_url, ITEMS)
    return mysql_url, 60_000 + uuid.uuid4().int % 100_000


def _config(tmp_path: Path, url: str, server_id: int, **cdc: Any) -> Path:
    return write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "cdc", "format": "parquet",
        "cdc": {"server_id": server_id, **cdc}, "destination": {"type": "local", "path": "out"},
    }])


def _changes(url: str, start: int, count: int) -> list[Change]:
    """The shared change script on this engine (tests/cdc_oracle.py `make_changes`)."""
    return make_changes(lambda sql: mysql_exec(url, sql), start, count, "NOW(6)")


def test_each_run_publishes_the_binlog_changes_committed_since_the_last_one_exactly_once(tmp_path, cdc_db):
    url, server_id = cdc_db
    # the first run records where the binlog was: the stream starts there
    check_each_run_publishes_exactly_once(_config(tmp_path, url, server_id, rollover=4), tmp_path / "out",
                                          lambda start, count: _changes(url, start, count))


def test_the_manifest_carries_the_binlog_position_range_and_runs_are_contiguous(tmp_path, cdc_db):
    url, server_id = cdc_db
    config = _config(tmp_path, url, server_id)
    _run(config)
    _changes(url, 1, 3)
    _run(config)
    manifests = sorted(success_manifests(tmp_path / "out"), key=lambda m: m["sequence"])
    extraction = manifests[-1]["source"]["extraction"]
    assert manifests[-1]["mode"] == "cdc" and extraction["cursor_column"] == "__pos"
    assert extraction["cursor_low"] == manifests[-2]["source"]["extraction"]["cursor_high"]
    assert set(json.loads(extraction["cursor_high"])) >= {"file", "pos"}
    positions = [parse_position(p).sort_key for p in manifest_table(tmp_path / "out").column("__pos").to_pylist()]
    assert parse_position(extraction["cursor_low"]).sort_key < min(positions)
    assert max(positions) <= parse_position(extraction["cursor_high"]).sort_key


def test_a_part_is_never_cut_inside_a_binlog_transaction(tmp_path, cdc_db):
    url, server_id = cdc_db
    config = _config(tmp_path, url, server_id, rollover=2)
    _run(config)
    values = ", ".join(f"({i}, 'n{i}', 1, NOW(6))" for i in range(1, 8))
    mysql_exec(url, f"INSERT INTO items VALUES {values}")  # one transaction of 7 changes
    mysql_exec(url, "INSERT INTO items VALUES (50, 'x', 1, NOW(6))")
    _run(config)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    per_part = [pq.read_table(tmp_path / "out" / p["path"]).column("__pos").to_pylist() for p in manifest["parts"]]
    assert sorted(len(p) for p in per_part) == [1, 7]
    assert all(len(set(p)) == 1 for p in per_part)  # each part: one transaction here
    big = next(p for p in manifest["parts"] if pq.read_table(tmp_path / "out" / p["path"]).num_rows == 7)
    assert pq.read_table(tmp_path / "out" / big["path"]).column("__seq").to_pylist() == list(range(7))


def test_cdc_columns_on_mysql_have_the_types_and_values_a_full_export_of_the_table_has(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "CREATE TABLE typed (id BIGINT PRIMARY KEY, small SMALLINT, big BIGINT UNSIGNED, "
                    "flag TINYINT(1), amount DECIMAL(12,3), ratio DOUBLE, day DATE, at DATETIME(6), "
                    "note TEXT, raw BLOB, doc JSON, color ENUM('red','green'), tags SET('a','b','c'))")
    row = ("(1, -7, 18446744073709551615, 1, 123456789.125, 0.5, '2024-02-29', '2024-02-29 23:59:59.123456', "
           "'héllo ✓', x'00ff10', '{\"k\": [1, \"x\"]}', 'green', 'a,c')")
    config = write_config(tmp_path, source_block(url), [
        {"name": "typed", "table": "typed", "mode": "cdc", "format": "parquet", "cdc": {"server_id": server_id},
         "destination": {"type": "local", "path": "cdc"}},
        {"name": "full", "table": "typed", "format": "parquet", "destination": {"type": "local", "path": "full"}}])
    _run(config)
    mysql_exec(url, f"INSERT INTO typed VALUES {row}")
    _run(config)
    cdc = manifest_table(tmp_path / "cdc").drop_columns(["__op", "__pos", "__seq"])
    full = manifest_table(tmp_path / "full")
    assert cdc.schema == full.schema
    assert cdc.to_pylist() == full.to_pylist()


def test_tables_multiplexes_two_mysql_tables_through_one_binlog_reader_each_to_its_own_prefix(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(20))")
    config = write_config(tmp_path, source_block(url), [{
        "name": "app", "tables": ["items", "users"], "mode": "cdc", "format": "parquet",
        "cdc": {"server_id": server_id}, "destination": {"type": "local", "path": "out"}}])
    _run(config)
    mysql_exec(url, "BEGIN", "INSERT INTO items VALUES (1, 'i1', 1, NOW(6))", "INSERT INTO users VALUES (7, 'u7')",
               "UPDATE items SET name = 'i1b' WHERE id = 1", "COMMIT", "DELETE FROM users WHERE id = 7")
    _run(config)
    assert published_changes(tmp_path / "out" / "items") == [("insert", 1, "i1"), ("update", 1, "i1b")]
    assert published_changes(tmp_path / "out" / "users") == [("insert", 7, "u7"), ("delete", 7, None)]
    assert [r["__seq"] for r in manifest_table(tmp_path / "out" / "items").to_pylist()] == [0, 2]


def test_initial_snapshot_on_mysql_plus_the_changes_after_it_rebuild_the_table(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "INSERT INTO items VALUES " + ", ".join(f"({i}, 'seed{i}', {i}, NOW(6))" for i in range(1, 21)))
    config = _config(tmp_path, url, server_id, initial="snapshot", checkpoint="items.ckpt")
    _run(config)
    snap = tmp_path / "out" / "snapshot"
    assert (snap / "_SUCCESS").exists()
    later = _changes(url, 30, 4)
    mysql_exec(url, "UPDATE items SET name = 's2' WHERE id = 2", "DELETE FROM items WHERE id = 3")
    later += [("update", 2, "s2"), ("delete", 3, None)]  # seeded rows changed too
    _run(config)
    _run(config)  # a second run does not snapshot again
    assert len(success_manifests(snap)) == 1
    assert published_changes(tmp_path / "out") == later
    mirror = {r["id"]: r["name"] for r in manifest_table(snap).to_pylist()}
    for op, key, name in published_changes(tmp_path / "out"):  # the documented replay
        if op == "delete":
            mirror.pop(key, None)
        else:
            mirror[key] = name
    assert sorted(mirror.items()) == sorted(mysql_exec(url, "SELECT id, name FROM items"))


def test_a_drain_that_crashed_after_the_snapshot_resumes_from_the_anchor_kept_in_the_checkpoint(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "INSERT INTO items VALUES (1, 'seed', 1, NOW(6))")
    config = _config(tmp_path, url, server_id, initial="snapshot", checkpoint="items.ckpt")
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": "cdc_after_open"})
    assert crashed.returncode != 0
    assert (tmp_path / "out" / "snapshot" / "_SUCCESS").exists()  # the snapshot published, the drain did not
    between = _changes(url, 10, 3)  # after the anchor, before the re-run: must not be lost
    _run(config)
    assert published_changes(tmp_path / "out") == between
    assert len(success_manifests(tmp_path / "out" / "snapshot")) == 1


def test_a_table_added_to_tables_later_is_snapshotted_without_the_published_table_skipping_changes(
        tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(20))", "INSERT INTO users VALUES (1, 'a')")

    def config(tables: list[str]) -> Path:
        return write_config(tmp_path, source_block(url), [{
            "name": "app", "tables": tables, "mode": "cdc", "format": "parquet",
            "cdc": {"server_id": server_id, "initial": "snapshot", "checkpoint": "app.ckpt"},
            "destination": {"type": "local", "path": "out"}}])

    _run(config(["items"]))
    first = _changes(url, 1, 3)
    _run(config(["items"]))
    between = _changes(url, 10, 3)  # after items' last publish, before users is added
    mysql_exec(url, "INSERT INTO users VALUES (2, 'b')")
    _run(config(["items", "users"]))
    assert published_changes(tmp_path / "out" / "items") == first + between
    assert sorted(r["id"] for r in manifest_table(tmp_path / "out" / "users" / "snapshot").to_pylist()) == [1, 2]


CRASH_POINTS = ["cdc_after_open", "during_source_read", "cdc_after_read", "after_file_write",
                "cdc_before_manifest", "after_manifest_update", "cdc_after_flush_before_ack", "cdc_after_ack"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_mysql_run_killed_at_each_fault_point_then_rerun_publishes_every_change_exactly_once(
        tmp_path, cdc_db, point):
    url, server_id = cdc_db
    config = _config(tmp_path, url, server_id, rollover=3, checkpoint="items.ckpt")
    _run(config)
    expected = _changes(url, 1, 9)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0, crashed.stderr
    more = _changes(url, 200, 3)
    _run(config)
    _run(config)
    assert published_changes(tmp_path / "out") == expected + more


def test_a_statement_binlog_is_refused_naming_binlog_format_before_anything_is_written(tmp_path, cdc_db):
    url, server_id = cdc_db
    config = _config(tmp_path, url, server_id)
    mysql_exec(url, "SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        message = _refusal(config)
    finally:
        mysql_exec(url, "SET GLOBAL binlog_format = 'ROW'")
    assert "binlog_format is STATEMENT, not ROW" in message and "set binlog_format = ROW" in message
    assert _files(tmp_path / "out") == []


def test_a_user_without_replication_grants_is_refused_naming_the_grant(tmp_path, cdc_db):
    url, server_id = cdc_db
    user = f"r{uuid.uuid4().hex[:8]}"
    database = url.rsplit("/", 1)[1]
    mysql_exec(url, f"CREATE USER '{user}'@'%'", f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'")
    try:
        low = url.replace("root@", f"{user}@", 1)
        message = _refusal(_config(tmp_path, low, server_id))
    finally:
        mysql_exec(url, f"DROP USER '{user}'@'%'")
    assert "lacks REPLICATION SLAVE" in message and "GRANT REPLICATION SLAVE ON *.* TO" in message
    assert _files(tmp_path / "out") == []


def test_a_mysql_table_without_a_primary_key_is_refused_saying_what_the_output_could_promise(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "CREATE TABLE loose (a INT, b TEXT)")
    config = write_config(tmp_path, source_block(url), [{
        "name": "loose", "table": "loose", "mode": "cdc", "format": "parquet", "cdc": {"server_id": server_id},
        "destination": {"type": "local", "path": "out"}}])
    message = _refusal(config)
    assert "has no primary key" in message and "add a PRIMARY KEY" in message
    assert _files(tmp_path / "out") == []


def _validate(config: Path) -> tuple[int, dict[str, Any]]:
    result = rivet_quick("validate", "-c", str(config), "--depth", "full", "--format", "json")
    return result.returncode, json.loads(result.stdout)


def test_validate_at_depth_full_passes_a_mysql_cdc_prefix_and_its_snapshot(tmp_path, cdc_db):
    url, server_id = cdc_db
    mysql_exec(url, "INSERT INTO items VALUES (1, 'seed', 1, NOW(6))")
    config = _config(tmp_path, url, server_id, initial="snapshot", checkpoint="items.ckpt", rollover=2)
    _run(config)
    _changes(url, 10, 4)
    _run(config)
    _changes(url, 20, 3)
    _run(config)
    code, report = _validate(config)
    assert code == 0, report
    assert [e["export_name"] for e in report["exports"]] == ["items", "items [snapshot]"]
    assert [f["kind"] for e in report["exports"] for f in e["verification"]["failures"]] == []


def test_validate_reports_a_cdc_position_violation_when_a_mysql_part_is_out_of_binlog_order(tmp_path, cdc_db):
    url, server_id = cdc_db
    config = _config(tmp_path, url, server_id)
    _run(config)
    _changes(url, 1, 4)
    _run(config)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    part = tmp_path / "out" / manifest["parts"][0]["path"]
    table = pq.read_table(part)
    pq.write_table(table.take(list(range(table.num_rows))[::-1]), part)  # same rows, reversed order
    code, report = _validate(config)
    assert code == 3
    details = [f.get("detail", "") for f in report["exports"][0]["verification"]["failures"]
               if f["kind"] == "cdc_position_violation"]
    assert any("CdcPositionViolation" in d and "went backwards" in d for d in details), report


def test_the_rivet_cdc_command_on_a_mysql_source_publishes_and_resumes_on_the_next_call(tmp_path, cdc_db):
    url, server_id = cdc_db
    out, ckpt = tmp_path / "cdc-out", tmp_path / "items.ckpt"
    args = ("cdc", "--source-env", "CDC_URL", "--table", "items", "--output", str(out), "--format", "parquet",
            "--server-id", str(server_id), "--checkpoint", str(ckpt), "--rollover", "5")
    first = rivet_quick(*args, env={"CDC_URL": url})
    assert first.returncode == 0, first.stdout + first.stderr
    expected = _changes(url, 1, 6)
    second = rivet_quick(*args, env={"CDC_URL": url})
    assert second.returncode == 0, second.stdout + second.stderr
    assert published_changes(out) == expected
    manifest = json.loads((out / "manifest.json").read_text())
    assert json.loads(ckpt.read_text()) == json.loads(manifest["source"]["extraction"]["cursor_high"])
