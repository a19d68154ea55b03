"""Staging cleanup after crashes (issue 20 item 7; rivet_core/pipeline/staging/directories.py).

The reproduction: killed runs left `.rivet/staging/<run>/…partial` files forever (25 kills
of a 1.5 M-row export left 209 MB). Now:

- a run removes its own staging when it ends (success or failure);
- the next run of the export, holding its lock, removes staging left by that export's dead
  runs — a real SIGKILLed subprocess here (RIVET_TEST_PANIC_AT);
- a live concurrent run's staging (another lock key of the same export: a time partition,
  parked mid-read by RIVET_TEST_PAUSE_AT) and other exports' staging are never touched;
- `rivet doctor` reports the leftovers: count, bytes, path.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.csv as pacsv

from tests.hardening.support import REPO, PauseBarrier, cli, finish
from tests.helpers import manifest_ids, rivet, source_block, state_rows, write_config

ROWS = 20_000


def _setup(tmp: Path) -> Path:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, day TEXT NOT NULL, payload TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)",
                         [(i, f"2026-01-0{1 + i % 3} 12:00:00", f"payload-{i:08d}" * 4) for i in range(1, ROWS + 1)])
    return write_config(tmp, {**source_block(f"sqlite:///{db}"), "tuning": {"batch_size": 2000, "throttle_ms": 0}}, [
        {"name": "items", "table": "items", "mode": "full", "format": "csv",
         "destination": {"type": "local", "path": "out/items"}},
        {"name": "items_daily", "table": "items", "mode": "time_window", "time_column": "day", "days_window": 3650,
         "format": "csv", "destination": {"type": "local", "path": "out/items_daily"}},
    ])


def _staging(config: Path) -> Path:
    return config.parent / ".rivet" / "staging"


def _dirs(config: Path) -> dict[str, int]:
    """Each staging directory → bytes of the files inside it."""
    root = _staging(config)
    if not root.exists():
        return {}
    return {d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in root.iterdir()}


def _doctor_staging(config: Path) -> dict:
    result = cli("doctor", "-c", str(config), "--json")
    return next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "staging")


def test_a_killed_runs_staging_is_reported_by_doctor_and_removed_by_the_next_run(tmp_path):
    config = _setup(tmp_path)
    # The reproduction killed 25 runs and found 209 MB of staging. Each kill leaves its own
    # staging (SIGKILL: no finally, no cleanup), but each run first removes its predecessors':
    # after any number of kills, one dead run's staging is left, never an accumulation.
    seen: list[str] = []
    for _ in range(3):
        killed = rivet("run", "-c", str(config), "-e", "items", env={"RIVET_TEST_PANIC_AT": "during_source_read"})
        assert killed.returncode == -9, killed.stderr
        left = _dirs(config)
        assert len(left) == 1 and next(iter(left.values())) > 0, left
        seen.append(next(iter(left)))
    assert len(set(seen)) == 3  # a new run each time, the previous one's staging removed
    [dead] = left
    assert dead.startswith("items_")
    partials = list((_staging(config) / dead).rglob("*.partial"))
    assert partials, "the killed run left no partial file: the kill landed too early to test anything"

    # Another export's leftover (a pre-owner-file directory named like its runs) must survive.
    foreign = _staging(config) / "items_daily_20250101T000000.000"
    (foreign / "attempt0").mkdir(parents=True)
    (foreign / "attempt0" / ".staged_part0.csv.partial").write_bytes(b"x" * 1000)

    report = _doctor_staging(config)
    assert report["ok"]
    assert "2 leftover directories from dead runs" in report["detail"]
    assert f"{left[dead] + 1000} bytes" in report["detail"]
    assert str(_staging(config) / dead) in report["detail"] and "items_daily" in report["detail"]

    rerun = cli("run", "-c", str(config), "-e", "items")
    assert rerun.returncode == 0, rerun.stderr
    assert _dirs(config) == {"items_daily_20250101T000000.000": 1000}  # own and dead staging gone
    [(journal,)] = state_rows(config, "SELECT journal_json FROM run_journal WHERE export_name = 'items'")
    assert "staging_cleanup" in journal and dead in journal  # the rerun journaled what it removed
    assert manifest_ids(tmp_path / "out" / "items") == list(range(1, ROWS + 1))
    assert "no leftovers from dead runs" not in _doctor_staging(config)["detail"]  # the foreign one


def test_a_failed_run_removes_its_own_staging(tmp_path):
    config = _setup(tmp_path)
    failed = cli("run", "-c", str(config), "-e", "items", env={"RIVET_TEST_ERROR_AT": "after_source_read"})
    assert failed.returncode == 1, failed.stderr
    assert "injected fault at after_source_read" in failed.stderr
    assert _dirs(config) == {}
    assert "no leftovers from dead runs" in _doctor_staging(config)["detail"]


_PARTITION_RUN = """
import sys
from datetime import date
from rivet_core import api
config = api.load_config(sys.argv[1])
summary = api.run_export(config, "items_daily", window=api.DayWindow(date(2026, 1, 2), date(2026, 1, 3)))
print(summary.status, summary.total_rows, summary.destination_uri)
sys.exit(summary.exit_code)
"""


def test_a_live_concurrent_runs_staging_is_never_touched(tmp_path):
    config = _setup(tmp_path)
    # A dead run of items_daily (killed) leaves staging …
    killed = rivet("run", "-c", str(config), "-e", "items_daily", env={"RIVET_TEST_PANIC_AT": "during_source_read"})
    assert killed.returncode == -9, killed.stderr
    [first_dead] = _dirs(config)

    # … which the next run of the export removes when it starts: one time partition (lock key
    # items_daily@2026-01-02), parked mid-read with its staged part open.
    barrier = PauseBarrier(tmp_path / "pause", "during_source_read")
    live = subprocess.Popen([sys.executable, "-c", _PARTITION_RUN, str(config)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**__import__("os").environ, **barrier.env})
    try:
        barrier.wait(live)
        [live_dir] = _dirs(config)
        assert live_dir != first_dead  # swept by the partition run, holding its lock
        live_files = sorted(str(p) for p in (_staging(config) / live_dir).rglob("*"))
        assert any(p.endswith(".partial") for p in live_files), live_files

        # A second dead run, killed while the partition is live (lock key items_daily: not blocked).
        killed = rivet("run", "-c", str(config), "-e", "items_daily",
                       env={"RIVET_TEST_PANIC_AT": "during_source_read", "RIVET_TEST_PAUSE_AT": ""})
        assert killed.returncode == -9, killed.stderr
        [dead] = set(_dirs(config)) - {live_dir}

        report = _doctor_staging(config)
        assert "1 leftover directory from dead runs" in report["detail"], report
        assert "1 in use by running export(s)" in report["detail"]
        assert str(_staging(config) / dead) in report["detail"] and live_dir not in report["detail"]

        # A CLI run of the whole export sweeps while the partition still runs.
        sweeper = cli("run", "-c", str(config), "-e", "items_daily")
        assert sweeper.returncode == 0, sweeper.stderr
        assert set(_dirs(config)) == {live_dir}  # the dead run's staging is gone, the live one stays
        assert sorted(str(p) for p in (_staging(config) / live_dir).rglob("*")) == live_files  # untouched
    finally:
        barrier.release()
    rc, out, err = finish(live)
    assert rc == 0, err
    assert out.split()[:2] == ["success", str(sum(1 for i in range(1, ROWS + 1) if i % 3 == 1))]
    assert _dirs(config) == {}
    # The partition's data arrived whole (re-read with pyarrow): days 2026-01-02 are ids ≡ 1 (mod 3).
    part_dir = tmp_path / "out" / "items_daily" / "day=2026-01-02"
    manifest = json.loads((part_dir / "manifest.json").read_text())
    ids = sorted(i for p in manifest["parts"] for i in pacsv.read_csv(part_dir / p["path"]).column("id").to_pylist())
    assert ids == [i for i in range(1, ROWS + 1) if i % 3 == 1]


def test_a_killed_chunked_run_leaves_no_staging_after_its_resume(tmp_path):
    config = _setup(tmp_path)
    doc = __import__("yaml").safe_load(config.read_text())
    doc["exports"].append({"name": "chunks", "table": "items", "mode": "chunked", "chunk_column": "id",
                           "chunk_size": 5000, "chunk_checkpoint": True, "format": "csv",
                           "destination": {"type": "local", "path": "out/chunks"}})
    config.write_text(__import__("yaml").safe_dump(doc, sort_keys=False))
    killed = rivet("run", "-c", str(config), "-e", "chunks", env={"RIVET_TEST_PANIC_AT": "after_file_write"})
    assert killed.returncode == -9, killed.stderr
    [dead] = _dirs(config)
    assert dead.startswith("chunks_") and _dirs(config)[dead] > 0

    resumed = cli("run", "-c", str(config), "-e", "chunks", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert _dirs(config) == {}  # the dead run's staging and the resume's own are both gone
    assert manifest_ids(tmp_path / "out" / "chunks") == list(range(1, ROWS + 1))
