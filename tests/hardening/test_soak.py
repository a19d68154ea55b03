"""Soak: an incremental export (PostgreSQL) runs again and again while another process
inserts and updates rows at a steady rate; at the end every row is at the destination with
its latest committed value, and memory does not grow across runs.

Duration: RIVET_SOAK_SECONDS (default 60 s of writes; CI), longer on demand. The writer
(soak_driver.write) and the exporter (soak_driver.export, one long-lived process running
the engine like a Dagster code server) are separate processes; both stop by themselves.

Oracle (independent of the tool's counters): the union of every part listed by a success
manifest, re-read with pyarrow, grouped by id; the version with the greatest cursor
(`updated_at`) must equal the source row, every source id must be there, and no version
(id, updated_at) may have been exported twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, manifest_table, pg_exec, source_block, write_config

SOAK_SECONDS = float(os.environ.get("RIVET_SOAK_SECONDS", "60"))
WRITE_RATE = 40.0  # statements per second


def _child(*args: str, stdout: Path) -> subprocess.Popen[bytes]:
    with open(stdout, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tests.hardening.soak_driver", *args], cwd=REPO,
                                stdout=out, stderr=subprocess.PIPE)


def test_incremental_soak_under_concurrent_writes_loses_nothing_and_memory_stays_flat(tmp_path, pg_url):
    pg_exec(pg_url, "CREATE TABLE soak (id INT PRIMARY KEY, val INT NOT NULL, updated_at TIMESTAMP NOT NULL)",
            "INSERT INTO soak SELECT g, 0, clock_timestamp() FROM generate_series(1, 2000) g")
    config = write_config(tmp_path, {**source_block(pg_url), "tuning": {"throttle_ms": 0, "max_retries": 0}}, [{
        "name": "soak", "table": "soak", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "skip_empty": True, "destination": {"type": "local", "path": "out"}}])
    done = tmp_path / "writer.done"
    writer = _child("write", pg_url, str(SOAK_SECONDS), str(WRITE_RATE), stdout=tmp_path / "writer.out")
    exporter = _child("export", str(config), str(done), "100000", stdout=tmp_path / "exporter.out")
    try:
        _, werr = writer.communicate(timeout=SOAK_SECONDS + 60)
        assert writer.returncode == 0, werr.decode()[-2000:]
        done.write_text("done")
        _, eerr = exporter.communicate(timeout=300)
        assert exporter.returncode == 0, eerr.decode()[-3000:]
    finally:
        for child in (writer, exporter):
            if child.poll() is None:
                child.kill()
                child.wait()
    wrote = json.loads((tmp_path / "writer.out").read_text())
    runs = [json.loads(line) for line in (tmp_path / "exporter.out").read_text().splitlines()]

    assert wrote["ops"] >= SOAK_SECONDS * WRITE_RATE * 0.3  # the load really happened
    assert len(runs) >= 8, runs  # enough runs for a warm-up window and a tail that do not overlap
    assert [r for r in runs if r["status"] not in ("success", "skipped")] == []
    assert sum(1 for r in runs if r["rows"] > 0) >= 3  # several runs each picked up new writes

    # Every source row, at its latest committed value, reachable by cursor order.
    table = manifest_table(tmp_path / "out")
    versions = list(zip(table.column("id").to_pylist(), table.column("updated_at").to_pylist(),
                        table.column("val").to_pylist(), strict=True))
    assert len(versions) == len({(i, ts) for i, ts, _ in versions})  # no version exported twice
    latest: dict[int, tuple[object, int]] = {}
    for i, ts, val in versions:
        if i not in latest or ts > latest[i][0]:
            latest[i] = (ts, val)
    source = {i: (ts, val) for i, val, ts in pg_exec(pg_url, "SELECT id, val, updated_at FROM soak")}
    assert len(source) == wrote["rows"]
    assert latest == source

    # Memory: after warm-up, the last runs are not meaningfully above the early ones — neither
    # what a run leaves resident nor the peak it reaches (the first run, a full load, is excluded).
    for key in ("rss_mb", "peak_mb"):
        values = [round(r[key], 1) for r in runs[1:-1]]  # without the initial load and the last run
        warm, tail = max(values[:3]), max(values[-3:])
        assert tail <= warm * 1.25 + 25, f"{key} grew across runs: {values}"
