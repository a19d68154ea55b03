"""Time partitions (window units): one day per prefix, replaced on re-materialization."""

from __future__ import annotations

import sqlite3
from datetime import date

import pyarrow.parquet as pq
import pytest

from rivet_core import api
from rivet_core.manifest import verify_at_destination
from tests.helpers import write_config


def _setup(tmp_path):  # noqa: ANN001, ANN202
    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, at TIMESTAMP NOT NULL)")
        conn.executemany("INSERT INTO ev VALUES (?, ?)", [
            (1, "2026-03-01 00:00:00"), (2, "2026-03-01 23:59:59.999999"), (3, "2026-03-02 00:00:00"),
            (4, "2026-02-28 23:59:59")])
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"}, [{
        "name": "ev", "table": "ev", "mode": "time_window", "time_column": "at", "days_window": 1,
        "format": "parquet", "destination": {"type": "local", "path": "out"},
        "dagster": {"start_date": "2026-01-01"}}])
    return db, api.load_config(config)


DAY = api.DayWindow(start=date(2026, 3, 1), end=date(2026, 3, 2))


def test_a_partition_exports_exactly_its_half_open_day_to_its_own_prefix(tmp_path):
    _, config = _setup(tmp_path)
    summary = api.run_export(config, "ev", window=DAY)
    assert summary.status == "success", summary.error_message
    prefix = tmp_path / "out" / "at=2026-03-01"
    parts = sorted((prefix / "data").glob("*.parquet"))
    assert [r["id"] for r in pq.read_table(parts[0]).to_pylist()] == [1, 2]
    assert (prefix / "manifest.json").exists() and (prefix / "_SUCCESS").exists()


def test_rematerializing_a_partition_replaces_its_parts_and_quarantines_the_old_ones(tmp_path):
    db, config = _setup(tmp_path)
    first = api.run_export(config, "ev", window=DAY)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO ev VALUES (5, '2026-03-01 12:00:00')")
    second = api.run_export(config, "ev", window=DAY)
    assert second.status == "success", second.error_message
    prefix = tmp_path / "out" / "at=2026-03-01"
    old_part = first.manifest_parts[0].path
    assert not (prefix / old_part).exists()
    assert (prefix / "_quarantine" / second.run_id / old_part).exists()  # moved, never deleted
    live = [p for p in (prefix / "data").glob("*.parquet")]
    assert len(live) == 1
    assert sorted(r["id"] for r in pq.read_table(live[0]).to_pylist()) == [1, 2, 5]
    dest, verdict = api.verify_export(config, "ev", sub_prefix="at=2026-03-01/")
    assert verdict.passed and not [f for f in verdict.failures if f.kind == "untracked_object"]
    assert verify_at_destination(dest).passed


def test_rivet_validate_checks_every_daily_partition_prefix_and_names_a_broken_one(tmp_path):
    import json

    from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process

    _, config = _setup(tmp_path)
    for day in (DAY, api.DayWindow(start=date(2026, 3, 2), end=date(2026, 3, 3))):
        assert api.run_export(config, "ev", window=day).status == "success"
    clean = rivet("validate", "-c", str(config.config_path), "--format", "json")
    assert clean.returncode == 0, clean.stderr
    labels = [e["export_name"] for e in json.loads(clean.stdout)["exports"]]
    assert labels == ["ev [at=2026-03-01]", "ev [at=2026-03-02]"]
    next((tmp_path / "out" / "at=2026-03-02" / "data").glob("*.parquet")).unlink()
    broken = rivet("validate", "-c", str(config.config_path), "--format", "json")
    assert broken.returncode == 3
    verdicts = {e["export_name"]: e["verification"] for e in json.loads(broken.stdout)["exports"]}
    assert verdicts["ev [at=2026-03-01]"]["passed"] is True
    assert [f["kind"] for f in verdicts["ev [at=2026-03-02]"]["failures"]] == ["part_missing"]


def test_a_range_of_partitions_with_a_misspelled_time_column_stops_before_reading(tmp_path):
    """Several partitions in one run (TimeRangeRun, a Dagster backfill) describe their own
    query: the same check as a single run, before any row is read or part written."""
    _, config = _setup(tmp_path)
    export = config.export("ev").model_copy(update={"time_column": "att"})
    windows = [DAY, api.DayWindow(start=date(2026, 3, 2), end=date(2026, 3, 3))]
    run = api.TimeRangeRun(config, export, windows)
    with pytest.raises(api.ConfigError, match=r"time_column 'att' is not a column of the export's query "
                                              r"\(did you mean 'at'\?\)"):
        run.extract()
    assert not list((tmp_path / "out").rglob("*.parquet"))
