"""Child processes of the soak test (test_soak.py): the writer and the exporter.

`python -m tests.hardening.soak_driver write URL SECONDS RATE` — ONE writer connection in
autocommit mode: each statement inserts a new row or updates an existing one, stamping
`updated_at = clock_timestamp()`. A single sequential writer commits rows in `updated_at`
order, so any snapshot sees a prefix of the cursor order — the condition under which a
timestamp cursor is exact (with concurrent writers a late commit can hide below the cursor;
that is a property of timestamp cursors, not something this test is about). Bounded in
time and in count; stops by itself.

`python -m tests.hardening.soak_driver export CONFIG DONE_FILE MAX_RUNS` — ONE long-lived
process running the incremental export again and again through the engine API (as a
Dagster code server does), until DONE_FILE exists, then one last run. After each run it
prints a JSON line: status, rows, the run's own peak resident memory (VmHWM, reset before
each run through /proc/self/clear_refs) and the resident memory left after a GC, so the test
can see memory growth across runs that a fresh process per run would hide.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
from pathlib import Path


def write(url: str, seconds: float, rate: float) -> None:
    import psycopg

    deadline = time.monotonic() + seconds
    interval = 1.0 / rate
    rnd = random.Random(1234)
    ops = 0
    with psycopg.connect(url, autocommit=True) as conn:
        next_id = 1 + int(conn.execute("SELECT coalesce(max(id), 0) FROM soak").fetchone()[0])
        for _ in range(int(seconds * rate) + 1):  # bounded in count ...
            if time.monotonic() > deadline:  # ... and in time
                break
            ops += 1
            if rnd.random() < 0.5 or next_id < 10:
                conn.execute("INSERT INTO soak VALUES (%s, 0, clock_timestamp())", [next_id])
                next_id += 1
            else:
                conn.execute("UPDATE soak SET val = val + 1, updated_at = clock_timestamp() WHERE id = %s",
                             [rnd.randrange(1, next_id)])
            time.sleep(interval)  # pacing the write rate (the load itself), not synchronisation
    print(json.dumps({"ops": ops, "rows": next_id - 1}), flush=True)


def _reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) so the next reading is one run's peak (Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def export(config_path: str, done_file: str, max_runs: int) -> None:
    import psutil

    from rivet_core.config import load_config
    from rivet_core.pipeline.runner import run_unit

    proc = psutil.Process()
    done = Path(done_file)
    last = False
    for i in range(max_runs):
        last = done.exists()  # read BEFORE the run: a run that starts after the writer is
        if not _reset_peak():  # done sees everything it wrote
            sys.exit("soak exporter: cannot reset the peak RSS (/proc/self/clear_refs)")
        config = load_config(config_path)
        summary = run_unit(config, config.exports[0])
        del config
        gc.collect()
        print(json.dumps({"i": i, "status": summary.status, "rows": summary.total_rows,
                          "exit_code": summary.exit_code, "error": summary.error_message,
                          "rss_mb": proc.memory_info().rss / 2**20, "peak_mb": _peak_mb()}), flush=True)
        if last:
            return
    sys.exit("soak exporter: max_runs reached before the writer finished")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    else:
        export(sys.argv[2], sys.argv[3], int(sys.argv[4]))
