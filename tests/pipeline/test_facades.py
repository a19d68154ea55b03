"""The write-ordering facades of ADR-0001 (ours), in-process on SQLite.

`record_part` (order, dedup, counters, warn-on-fail file_log), the invariant backstop
(strict in tests, WARN in production), `RunStore` (cursor before progression, no
progression when the cursor write fails), the finalize cursor step (a cursor failure
after the manifest does not fail the run) and `publish_staged` (never overwrites an
existing key). The oracle is the SQLite state DB read with the stdlib and the files at
the destination — not the summary's own counters.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rivet_core.config import load_config
from rivet_core.errors import InvariantViolation
from rivet_core.manifest import ManifestPart
from rivet_core.pipeline.facade import publish
from rivet_core.pipeline.facade.commit import PartKind, PartRecord, record_part
from rivet_core.pipeline.facade.run_store import Progression, RunStore
from rivet_core.pipeline.facade.schema_drift import record_gated_upstream
from rivet_core.pipeline.faults import InjectedFault
from rivet_core.pipeline.runner import run_unit
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.state.database import open_state_database
from tests.helpers import write_config


@pytest.fixture
def state(tmp_path: Path):  # noqa: ANN201
    store = StateStore.open(tmp_path / "rivet.yaml", state_url="")
    yield store
    store.close()


def db(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / ".rivet_state.db")


def summary() -> RunSummary:
    return RunSummary(run_id="items_20260101T000000.000", export_name="items", mode="full",
                      format="parquet", compression="zstd")


def part(path: str, rows: int = 10, size: int = 100) -> PartRecord:
    return PartRecord(path=path, rows=rows, size_bytes=size, content_fingerprint=f"xxh3:{path}",
                      content_md5="md5")


# ------------------------------------------------------------------------- record_part
def test_record_part_numbers_parts_in_commit_order_and_bumps_counters_once_per_path(tmp_path, state):
    s = summary()
    assert record_part(s, state, part("a.parquet", 10, 100), PartKind.file(0)) is False
    assert record_part(s, state, part("b.parquet", 5, 50), PartKind.file(1)) is False
    # the same path again (a re-recorded part): fields refreshed, counters untouched
    assert record_part(s, state, part("a.parquet", 12, 120), PartKind.file(0)) is True

    assert [(p.part_id, p.path, p.rows, p.size_bytes) for p in s.manifest_parts] == \
        [(1, "a.parquet", 12, 120), (2, "b.parquet", 5, 50)]
    assert (s.files_produced, s.files_committed) == (2, 2)  # the dedup bumped nothing
    assert [e["file_name"] for e in s.journal.events("FileWritten")] == ["a.parquet", "b.parquet", "a.parquet"]
    with db(tmp_path) as conn:
        # delete-then-insert per (run_id, file_name): one row per part, latest values
        assert conn.execute("SELECT file_name, row_count, bytes FROM file_log ORDER BY id").fetchall() == \
            [("b.parquet", 5, 50), ("a.parquet", 12, 120)]
        # the running metrics row is a projection of file_log, not of the summary
        assert conn.execute("SELECT status, total_rows, files_committed, bytes_written FROM export_metrics"
                            ).fetchall() == [("running", 17, 2, 170)]


def test_record_part_after_file_write_fault_fires_before_anything_is_recorded(tmp_path, state, monkeypatch):
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_file_write")
    s = summary()
    with pytest.raises(InjectedFault):
        record_part(s, state, part("a.parquet"), PartKind.file(0))
    assert s.manifest_parts == [] and s.files_committed == 0 and s.journal.entries == []
    with db(tmp_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM file_log").fetchone() == (0,)


def test_record_part_after_manifest_update_fault_fires_after_the_file_log_row(tmp_path, state, monkeypatch):
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_manifest_update")
    s = summary()
    with pytest.raises(InjectedFault):
        record_part(s, state, part("a.parquet"), PartKind.file(0))
    assert [p.path for p in s.manifest_parts] == ["a.parquet"]
    with db(tmp_path) as conn:
        assert conn.execute("SELECT file_name FROM file_log").fetchall() == [("a.parquet",)]


def test_a_file_log_write_failure_is_a_warning_and_the_part_stays_recorded(tmp_path, state):
    with db(tmp_path) as conn:
        conn.execute("DROP TABLE file_log")
    s = summary()
    record_part(s, state, part("a.parquet"), PartKind.file(0))
    assert [p.path for p in s.manifest_parts] == ["a.parquet"] and s.files_committed == 1
    assert len(s.warnings) == 1 and "file_log write failed for 'a.parquet' (part is durable)" in s.warnings[0]


# ------------------------------------------------------------------- invariant backstop
def _bypassed() -> RunSummary:
    """A runner that bumped counters without record_part and skipped the drift facade."""
    s = summary()
    s.status, s.state_backed, s.destination_kind = "success", True, "local"
    s.files_produced = s.files_committed = 1
    s.bytes_written, s.total_rows = 100, 10
    return s


def test_counters_bumped_without_record_part_raise_in_strict_mode(monkeypatch):
    monkeypatch.setenv("RIVET_STRICT_INVARIANTS", "1")
    with pytest.raises(InvariantViolation) as info:
        _bypassed().check_post_run_invariants()
    text = str(info.value)
    assert "files_committed=1 > manifest parts=0" in text
    assert "bytes_written=100 > sum of part sizes=0" in text
    assert "total_rows=10 differs from manifest rows=0" in text
    assert "committed parts but the schema-drift facade never ran" in text
    rows_without_files = summary()
    rows_without_files.status, rows_without_files.total_rows = "success", 10
    with pytest.raises(InvariantViolation, match="success with total_rows=10 but no committed file"):
        rows_without_files.check_post_run_invariants()


def test_counters_bumped_without_record_part_only_log_a_warning_in_production(monkeypatch, caplog):
    monkeypatch.delenv("RIVET_STRICT_INVARIANTS", raising=False)
    with caplog.at_level(logging.WARNING, logger="rivet.run"):
        _bypassed().check_post_run_invariants()  # does not raise
    [record] = [r for r in caplog.records if "run-integrity invariant violated" in r.getMessage()]
    assert record.levelno == logging.WARNING and "files_committed=1 > manifest parts=0" in record.getMessage()


def test_committed_parts_without_the_drift_facade_are_an_invariant_violation(state, monkeypatch):
    monkeypatch.setenv("RIVET_STRICT_INVARIANTS", "1")
    s = summary()
    s.state_backed, s.destination_kind = True, "local"
    record_part(s, state, part("a.parquet", 10, 100), PartKind.file(0))
    s.status = "success"
    with pytest.raises(InvariantViolation, match="schema-drift facade never ran"):
        s.check_post_run_invariants()
    s.schema_changed = False  # a verdict set by hand does not count: the facade leaves its own telltale
    with pytest.raises(InvariantViolation, match="schema-drift facade never ran"):
        s.check_post_run_invariants()
    record_gated_upstream(s, "in a test, by an earlier step")  # the facade's explicit record
    s.check_post_run_invariants()
    assert (s.schema_changed, s.schema_gate) == (False, "upstream: in a test, by an earlier step")


def test_a_summary_built_only_through_record_part_passes_the_backstop(state, monkeypatch):
    monkeypatch.setenv("RIVET_STRICT_INVARIANTS", "1")
    s = summary()
    s.state_backed, s.destination_kind = True, "local"
    record_gated_upstream(s, "in a test")
    for i in range(3):
        record_part(s, state, part(f"p{i}.parquet", 10 + i, 100 + i), PartKind.file(i))
    record_part(s, state, part("p0.parquet", 10, 100), PartKind.file(0))  # dedup
    s.status = "success"
    assert s.invariant_violations() == []
    s.manifest_parts.append(ManifestPart(part_id=9, path="ghost.parquet", rows=5, size_bytes=1,
                                         content_fingerprint="x", content_md5="y", status="committed"))
    assert any("differs from manifest rows" in p for p in s.invariant_violations())


# ----------------------------------------------------------------------------- RunStore
def _progression(tmp_path: Path) -> list[tuple]:
    with db(tmp_path) as conn:
        return conn.execute("SELECT last_committed_cursor FROM export_progression").fetchall()


def _cursor(tmp_path: Path) -> list[tuple]:
    with db(tmp_path) as conn:
        return conn.execute("SELECT last_cursor_value FROM export_state").fetchall()


@pytest.mark.parametrize("chain", ["cursor_first", "progression_first"])
def test_run_store_writes_the_cursor_before_the_progression_whatever_the_call_order(
        tmp_path, state, monkeypatch, chain):
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_cursor_commit")  # stop between the two
    store = RunStore(state, summary())
    if chain == "cursor_first":
        store = store.with_cursor("42").with_progression(Progression.incremental("42"))
    else:
        store = store.with_progression(Progression.incremental("42")).with_cursor("42")
    with pytest.raises(InjectedFault):
        store.commit()
    assert _cursor(tmp_path) == [("42",)]
    assert _progression(tmp_path) == []


def test_run_store_writes_both_when_nothing_fails(tmp_path, state):
    s = summary()
    RunStore(state, s).with_cursor("7").with_progression(Progression.incremental("7")).commit()
    assert _cursor(tmp_path) == [("7",)] and _progression(tmp_path) == [("7",)]
    assert s.cursor_committed is True


def test_run_store_skips_the_progression_when_the_cursor_write_fails(tmp_path, state):
    with db(tmp_path) as conn:
        conn.execute("DROP TABLE export_state")
    s = summary()
    with pytest.raises(Exception, match="export_state"):
        RunStore(state, s).with_cursor("42").with_progression(Progression.incremental("42")).commit()
    assert _progression(tmp_path) == []
    assert s.cursor_committed is False


def test_run_store_fails_the_cursor_write_on_a_read_only_state_db(tmp_path, state):
    path = tmp_path / ".rivet_state.db"
    read_only = StateStore(open_state_database(f"sqlite:///file:{path}?mode=ro&uri=true"))
    try:
        with pytest.raises(Exception, match="readonly"):
            RunStore(read_only, summary()).with_cursor("1").with_progression(
                Progression.incremental("1")).commit()
    finally:
        read_only.close()
    assert _cursor(tmp_path) == [] and _progression(tmp_path) == []


# ------------------------------------------------------------- run_unit (finalize tail)
def _sqlite_config(tmp_path: Path, rows: int = 6, **export: object) -> Path:
    src = tmp_path / "src.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, updated_at DATETIME)")
        conn.executemany("INSERT INTO items VALUES (?,?,?)",
                         [(i, f"n{i}", f"2026-01-01 00:{i:02d}:00") for i in range(1, rows + 1)])
    return write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{src}"}, [{
        "name": "items", "table": "items", "format": "parquet",
        "destination": {"type": "local", "path": "out"}, **export}])


class _CursorWriteFails(StateStore):
    def set_cursor(self, export_name: str, value: str) -> None:
        raise RuntimeError("disk I/O error")


def test_a_cursor_write_failure_after_the_manifest_is_a_warning_not_a_failed_run(tmp_path, monkeypatch):
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    config = load_config(_sqlite_config(tmp_path, mode="incremental", cursor_column="updated_at"))
    store = _CursorWriteFails.open(config.config_path)
    try:
        s = run_unit(config, config.exports[0], state=store, notifications=None)
    finally:
        store.close()
    assert (s.status, s.exit_code) == ("success", 0)
    assert (tmp_path / "out" / "manifest.json").exists() and (tmp_path / "out" / "_SUCCESS").exists()
    assert any("cursor not advanced" in w for w in s.warnings)
    assert _cursor(tmp_path) == [] and _progression(tmp_path) == []
    with db(tmp_path) as conn:
        assert conn.execute("SELECT status FROM export_metrics").fetchall() == [("success",)]


# ------------------------------------------------------------------------------ publish
def test_publish_never_overwrites_an_existing_key_it_picks_a_suffixed_name(tmp_path, monkeypatch):
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    stem = "items_20260101_000000_000"
    monkeypatch.setattr(publish, "part_stem", lambda name, now=None: stem)
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    squatter = out / "data" / f"{stem}.parquet"
    squatter.write_bytes(b"another run's part")
    config = load_config(_sqlite_config(tmp_path))

    s = run_unit(config, config.exports[0], notifications=None)

    assert s.status == "success", s.error_message
    assert squatter.read_bytes() == b"another run's part"
    [p] = s.manifest_parts
    assert p.path != f"data/{squatter.name}" and p.path.startswith(f"data/{stem}_") and p.path.endswith(".parquet")
    assert pq.read_table(out / p.path).column("id").to_pylist() == [1, 2, 3, 4, 5, 6]
    with db(tmp_path) as conn:
        assert conn.execute("SELECT file_name FROM file_log").fetchall() == [(p.path,)]
