"""`mode: cdc` on PostgreSQL, end to end through the real `rivet` CLI and a real server.

The oracle is the list of changes each test made with its own SQL; the published side is
read back with pyarrow from the parts every `status: success` manifest lists, ordered by
(`__pos`, `__seq`) — never the run's own counters. Each test uses its own database and its
own slot (slot names are server-wide), dropped afterwards.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest

from tests.cdc_oracle import (
    Change,
    check_each_run_publishes_exactly_once,
    make_changes,
    position_order,
    published_changes,
)
from tests.cdc_oracle import files as _files
from tests.cdc_oracle import refusal as _refusal
from tests.cdc_oracle import run_ok as _run
from tests.helpers import (
    cursor_of,
    manifest_table,
    pg_exec,
    rivet,
    rivet_quick,
    source_block,
    success_manifests,
    write_config,
)


@pytest.fixture
def cdc_db(pg_url: str) -> Iterator[tuple[str, str]]:
    """A fresh database with an `items` table, and a slot name of this test's own."""
    slot = f"t_{uuid.uuid4().hex[:10]}"
    pg_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), "
                    "seen TIMESTAMPTZ)")
    yield pg_url, slot
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a slot keeps its database alive
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE database = current_database() AND NOT active")


def _config(tmp_path: Path, url: str, slot: str, **cdc: Any) -> Path:
    return write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "cdc", "format": "parquet",
        "cdc": {"slot": slot, **cdc}, "destination": {"type": "local", "path": "out"},
    }])


def _lsn_key(pos: str) -> int:
    return position_order(pos)[0]


def _changes(url: str, start: int, count: int) -> list[Change]:
    """The shared change script on this engine (tests/cdc_oracle.py `make_changes`)."""
    return make_changes(lambda sql: pg_exec(url, sql), start, count, "now()")


def test_each_run_publishes_the_changes_committed_since_the_last_one_exactly_once(tmp_path, cdc_db):
    url, slot = cdc_db
    # the first run creates the slot: the stream starts there
    check_each_run_publishes_exactly_once(_config(tmp_path, url, slot, rollover=4), tmp_path / "out",
                                          lambda start, count: _changes(url, start, count))


def test_the_manifest_says_mode_cdc_with_the_position_range_and_the_cursor_is_the_bound(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
    _run(config)
    _changes(url, 1, 3)
    _run(config)
    manifests = sorted(success_manifests(tmp_path / "out"), key=lambda m: m["sequence"])
    last = manifests[-1]
    assert last["mode"] == "cdc"
    extraction = last["source"]["extraction"]
    assert extraction["strategy"] == "cdc" and extraction["cursor_column"] == "__pos"
    # continuity: this run starts where the previous one ended
    assert extraction["cursor_low"] == manifests[-2]["source"]["extraction"]["cursor_high"]
    assert cursor_of(config, "items") == extraction["cursor_high"]
    positions = [_lsn_key(p) for p in manifest_table(tmp_path / "out").column("__pos").to_pylist()]
    assert max(positions) <= _lsn_key(extraction["cursor_high"])
    assert min(positions) > _lsn_key(extraction["cursor_low"])


def test_the_slot_is_advanced_to_the_published_position_only_after_the_publish(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
    _run(config)
    _changes(url, 1, 3)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": "cdc_after_flush_before_ack"})
    assert crashed.returncode != 0
    published = json.loads((tmp_path / "out" / "manifest.json").read_text())["source"]["extraction"]["cursor_high"]
    [(confirmed,)] = pg_exec(url, f"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{slot}'")
    assert _lsn_key(json.dumps({"lsn": confirmed})) < _lsn_key(published)  # published, not yet confirmed
    _run(config)
    [(confirmed,)] = pg_exec(url, f"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{slot}'")
    latest = json.loads((tmp_path / "out" / "manifest.json").read_text())["source"]["extraction"]["cursor_high"]
    assert json.dumps({"lsn": confirmed}, separators=(",", ":")) == latest


def test_a_lost_state_store_resumes_after_the_manifests_position_without_republishing(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
    _run(config)
    first = _changes(url, 1, 4)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": "cdc_after_flush_before_ack"})
    assert crashed.returncode != 0  # published, slot not confirmed: the slot still hands these back
    for lost in tmp_path.glob(".rivet_state.db*"):  # the store and its journal files
        lost.unlink()
    second = _changes(url, 50, 2)
    _run(config)
    assert published_changes(tmp_path / "out") == first + second


def test_a_part_is_never_cut_inside_a_transaction(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot, rollover=2)
    _run(config)
    values = ", ".join(f"({i}, 'n{i}', 1, now())" for i in range(1, 8))
    pg_exec(url, f"INSERT INTO items VALUES {values}")  # one transaction of 7 changes
    pg_exec(url, "INSERT INTO items VALUES (50, 'x', 1, now())")
    _run(config)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    per_part = [pq.read_table(tmp_path / "out" / p["path"]).column("__pos").to_pylist() for p in manifest["parts"]]
    assert sorted(len(p) for p in per_part) == [1, 7]
    assert all(len(set(p)) == 1 for p in per_part)  # each part: one transaction here
    seqs = pq.read_table(tmp_path / "out" / manifest["parts"][0]["path"]).column("__seq").to_pylist()
    assert seqs == list(range(len(seqs)))


def test_tables_multiplexes_two_tables_through_one_slot_each_to_its_own_prefix(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "CREATE TABLE users (id INT PRIMARY KEY, name TEXT)")
    config = write_config(tmp_path, source_block(url), [{
        "name": "app", "tables": ["items", "users"], "mode": "cdc", "format": "parquet",
        "cdc": {"slot": slot}, "destination": {"type": "local", "path": "out"}}])
    _run(config)
    pg_exec(url, "BEGIN; INSERT INTO items VALUES (1, 'i1', 1, now()); INSERT INTO users VALUES (7, 'u7'); "
                 "UPDATE items SET name = 'i1b' WHERE id = 1; COMMIT",
            "DELETE FROM users WHERE id = 7")
    _run(config)
    assert published_changes(tmp_path / "out" / "items") == [("insert", 1, "i1"), ("update", 1, "i1b")]
    assert published_changes(tmp_path / "out" / "users") == [("insert", 7, "u7"), ("delete", 7, None)]
    assert [r["__seq"] for r in manifest_table(tmp_path / "out" / "items").to_pylist()] == [0, 2]
    assert pg_exec(url, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()") == [(1,)]


def test_an_update_that_leaves_a_large_value_unchanged_publishes_it_under_replica_identity_full(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "ALTER TABLE items REPLICA IDENTITY FULL", "ALTER TABLE items ALTER COLUMN name SET STORAGE EXTERNAL")
    config = _config(tmp_path, url, slot)
    _run(config)
    big = "x" * 20_000  # stored out of line (TOAST): an update not touching it does not log it
    pg_exec(url, f"INSERT INTO items VALUES (1, '{big}', 1, now())", "UPDATE items SET amount = 2 WHERE id = 1")
    _run(config)
    assert published_changes(tmp_path / "out") == [("insert", 1, big), ("update", 1, big)]


def test_cdc_columns_have_the_types_a_full_export_of_the_table_has(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "CREATE TABLE typed (id BIGINT PRIMARY KEY, b BOOL, i2 SMALLINT, f FLOAT8, "
                 "n NUMERIC(12,3), d DATE, ts TIMESTAMP, tz TIMESTAMPTZ, j JSONB, u UUID, by BYTEA, "
                 "iv INTERVAL, t VARCHAR(20))")
    row = ("(1, true, 7, 1.5, 12.345, '2024-02-29', '2024-01-02 03:04:05.123456', "
           "'2024-01-02 03:04:05+02', '{\"a\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
           "'\\x00ff', '1 day 02:03:04', 'héllo')")
    config = write_config(tmp_path, source_block(url), [
        {"name": "typed", "table": "typed", "mode": "cdc", "format": "parquet", "cdc": {"slot": slot},
         "destination": {"type": "local", "path": "cdc"}},
        {"name": "full", "table": "typed", "format": "parquet", "destination": {"type": "local", "path": "full"}}])
    _run(config)
    pg_exec(url, f"INSERT INTO typed VALUES {row}")
    _run(config)
    cdc = manifest_table(tmp_path / "cdc")
    full = manifest_table(tmp_path / "full")
    assert cdc.schema.names[:3] == ["__op", "__pos", "__seq"]
    assert cdc.drop_columns(["__op", "__pos", "__seq"]).schema == full.schema
    assert cdc.drop_columns(["__op", "__pos", "__seq"]).to_pylist() == full.to_pylist()


def test_initial_snapshot_writes_the_snapshot_with_its_own_manifest_then_streams_from_before_it(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "INSERT INTO items SELECT g, 'seed' || g, g, now() FROM generate_series(1, 20) g")
    config = _config(tmp_path, url, slot, initial="snapshot")
    _run(config)
    snap = tmp_path / "out" / "snapshot"
    assert (snap / "_SUCCESS").exists()
    assert sorted(manifest_table(snap).column("id").to_pylist()) == list(range(1, 21))
    later = _changes(url, 30, 4)
    _run(config)
    _run(config)  # a second run does not snapshot again
    assert len(success_manifests(snap)) == 1
    assert published_changes(tmp_path / "out") == later


CRASH_POINTS = ["cdc_after_open", "during_source_read", "cdc_after_read", "after_file_write",
                "cdc_before_manifest", "after_manifest_update", "cdc_after_flush_before_ack", "cdc_after_ack"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_run_killed_at_each_fault_point_then_rerun_publishes_every_change_exactly_once(tmp_path, cdc_db, point):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot, rollover=3)
    _run(config)
    expected = _changes(url, 1, 9)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0, crashed.stderr
    more = _changes(url, 200, 3)
    _run(config)
    _run(config)
    assert published_changes(tmp_path / "out") == expected + more


def test_a_table_without_a_primary_key_is_refused_before_anything_is_written(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "CREATE TABLE loose (a INT, b TEXT)")
    config = write_config(tmp_path, source_block(url), [{
        "name": "loose", "table": "loose", "mode": "cdc", "format": "parquet", "cdc": {"slot": slot},
        "destination": {"type": "local", "path": "out"}}])
    message = _refusal(config)
    assert "has no primary key and REPLICA IDENTITY DEFAULT" in message
    assert "REPLICA IDENTITY FULL" in message
    assert _files(tmp_path / "out") == []
    assert not pg_exec(url, f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}'")


def test_a_slot_in_use_by_another_consumer_is_refused(tmp_path, cdc_db):
    url, slot = cdc_db
    with psycopg.connect(url, autocommit=True) as other:  # a temporary slot is held by its session
        other.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', true)", (slot,))
        message = _refusal(_config(tmp_path, url, slot))
    assert f"slot '{slot}' is in use by another consumer" in message
    assert _files(tmp_path / "out") == []


def test_a_role_without_the_replication_attribute_is_refused_naming_the_grant(tmp_path, cdc_db):
    url, slot = cdc_db
    role = f"r_{uuid.uuid4().hex[:8]}"
    pg_exec(url, f"CREATE ROLE {role} LOGIN NOREPLICATION", f"GRANT SELECT ON items TO {role}")
    try:
        low = url.replace("postgres@", f"{role}@", 1)
        message = _refusal(_config(tmp_path, low, slot))
        assert f"role '{role}' has no REPLICATION attribute" in message
        assert f"ALTER ROLE {role} WITH REPLICATION" in message
    finally:
        pg_exec(url, f"DROP OWNED BY {role}", f"DROP ROLE {role}")


def test_a_vanished_slot_after_a_publish_is_a_loud_error_never_a_silent_restart(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
    _run(config)
    _changes(url, 1, 2)
    _run(config)
    before = sorted(p.name for p in (tmp_path / "out").rglob("*"))
    pg_exec(url, f"SELECT pg_drop_replication_slot('{slot}')")
    _changes(url, 10, 2)
    message = _refusal(config)
    assert "the replication slot is gone, but this export already published" in message
    assert "re-snapshot" in message
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == before  # nothing moved or deleted
    assert not pg_exec(url, f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}'")


def test_the_rivet_cdc_command_publishes_with_rivets_flags_and_resumes_on_the_next_call(tmp_path, cdc_db):
    url, slot = cdc_db
    out, ckpt = tmp_path / "cdc-out", tmp_path / "items.ckpt"
    args = ("cdc", "--source-env", "CDC_URL", "--table", "items", "--output", str(out), "--format", "parquet",
            "--slot", slot, "--checkpoint", str(ckpt), "--rollover", "5")
    first = rivet_quick(*args, env={"CDC_URL": url})
    assert first.returncode == 0, first.stdout + first.stderr
    expected = _changes(url, 1, 6)
    second = rivet_quick(*args, env={"CDC_URL": url})
    assert second.returncode == 0, second.stdout + second.stderr
    assert published_changes(out) == expected
    manifest = json.loads((out / "manifest.json").read_text())
    assert json.loads(ckpt.read_text()) == json.loads(manifest["source"]["extraction"]["cursor_high"])
    assert not any("postgres@" in p.read_text() for p in (tmp_path / "cdc-out.rivet-cdc").glob("*.yaml"))


def test_the_rivet_cdc_command_refuses_rivets_streaming_flags_naming_the_alternative(tmp_path, cdc_db):
    url, _slot = cdc_db
    result = rivet_quick("cdc", "--source-env", "CDC_URL", "--table", "items", "--output", str(tmp_path / "o"),
                         "--stream", env={"CDC_URL": url})
    assert result.returncode == 1
    assert "--stream (run forever) is not supported" in result.stderr
    no_output = rivet_quick("cdc", "--source-env", "CDC_URL", "--table", "items", env={"CDC_URL": url})
    assert "pass --output DIR" in no_output.stderr


def _validate(config: Path) -> tuple[int, dict[str, Any]]:
    result = rivet_quick("validate", "-c", str(config), "--depth", "full", "--format", "json")
    return result.returncode, json.loads(result.stdout)


def test_validate_at_depth_full_passes_every_run_and_the_snapshot_of_a_cdc_prefix(tmp_path, cdc_db):
    url, slot = cdc_db
    pg_exec(url, "INSERT INTO items VALUES (1, 'seed', 1, now())")
    config = _config(tmp_path, url, slot, initial="snapshot", rollover=2)
    _run(config)
    _changes(url, 10, 4)
    _run(config)
    _changes(url, 20, 3)
    _run(config)
    code, report = _validate(config)
    assert code == 0, report
    assert [e["export_name"] for e in report["exports"]] == ["items", "items [snapshot]"]
    kinds = [f["kind"] for e in report["exports"] for f in e["verification"]["failures"]]
    assert kinds == []  # the snapshot folder is its own dataset, not untracked objects


def test_validate_reports_a_cdc_position_violation_when_a_part_is_out_of_log_order(tmp_path, cdc_db):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
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


def test_doctor_shows_each_slots_retained_wal_and_lag_and_fails_one_over_the_limit(tmp_path, cdc_db, monkeypatch):
    url, slot = cdc_db
    config = _config(tmp_path, url, slot)
    _run(config)
    _changes(url, 1, 3)
    result = rivet_quick("doctor", "-c", str(config), "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    mine = checks[f"cdc slot {slot}"]
    assert mine["ok"] and "export 'items': retains" in mine["detail"] and "lag" in mine["detail"]
    assert checks["cdc wal_level"]["ok"]
    monkeypatch.setattr("rivet_core.ops.cdc_doctor.RETAINED_WAL_LIMIT", 0)  # every retaining slot is over it
    over = rivet_quick("doctor", "-c", str(config), "--json")
    failed = {c["name"]: c for c in json.loads(over.stdout)["checks"]}[f"cdc slot {slot}"]
    assert not failed["ok"] and f"pg_drop_replication_slot('{slot}')" in failed["fix"]
    assert over.returncode == 1
