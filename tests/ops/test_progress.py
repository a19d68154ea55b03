"""Progress reporting: a live line on a terminal, periodic log lines otherwise, stdout kept
clean for `--json`, the rate/ETA math, and progress in a Dagster run's event log.

`RIVET_PROGRESS_INTERVAL=0` makes every batch render, so no test waits for a clock.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.reporting.progress import (
    LineSink,
    ProgressSnapshot,
    ProgressTracker,
    eta_seconds,
    percent,
    rate,
    resolve_mode,
)
from tests.helpers import REPO, rivet, write_config

ROWS, BATCH = 1000, 100
FAST = {"RIVET_PROGRESS_INTERVAL": "0", "COLUMNS": "200"}


def sqlite_config(tmp: Path, mode: str = "full", **extra: Any) -> Path:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"value {i}" * 3) for i in range(1, ROWS + 1)])
    export = {"name": "items", "table": "items", "mode": mode, "format": "parquet",
              "destination": {"type": "local", "path": "out"}, **extra}
    return write_config(tmp, {"type": "sqlite", "url": f"sqlite:///{db}", "tuning": {"batch_size": BATCH}},
                        [export])


def rows_of(lines: list[str]) -> list[int]:
    return [int(m.group(1).replace(",", "")) for ln in lines if (m := re.search(r"items: ([\d,]+) / ", ln))]


def run_in_pty(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """`rivet …` with stderr on a pseudo-terminal (stdout a pipe); returns (code, stdout, tty bytes)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", *args], cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env={**os.environ, **env})
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)  # a hung child fails the test, never hangs it
        if not ready:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    else:
        proc.kill()
    os.close(master)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=120), stdout, b"".join(chunks).decode(errors="replace")


# ----------------------------------------------------------------------------- terminal
def test_a_terminal_gets_carriage_return_updates_with_rows_and_a_final_total_then_a_cleared_line(
        tmp_path: Path) -> None:
    config = sqlite_config(tmp_path)
    code, stdout, tty = run_in_pty("run", "-c", str(config), env=FAST)
    assert code == 0, tty
    assert stdout == ""
    segments = tty.split("\r")
    updates = [s for s in segments if s.startswith("items: ") and "/ ~" in s]
    assert len(updates) >= ROWS // BATCH // 2, tty  # one per batch (interval 0), not one at the end
    counts = rows_of(updates)
    assert counts == sorted(counts) and counts[0] < ROWS and counts[-1] == ROWS
    assert all(s.endswith("\x1b[K") for s in updates)  # each update erases the rest of the line
    assert any("rows/s" in s and "ETA" in s and "(100%)" in s for s in updates)
    final = [s for s in segments if s.startswith("items: done, 1,000 rows")]
    assert len(final) == 1
    # … and the line is cleared before the summary block is printed.
    after_final = tty.split(final[0], 1)[1]
    assert after_final.startswith("\r\x1b[K") and "export items: SUCCESS" in after_final


def test_progress_none_on_a_terminal_prints_no_progress(tmp_path: Path) -> None:
    config = sqlite_config(tmp_path)
    code, _stdout, tty = run_in_pty("run", "-c", str(config), "--progress", "none", env=FAST)
    assert code == 0
    assert "items: done" not in tty and "rows/s" not in tty and "export items: SUCCESS" in tty


# ---------------------------------------------------------------------------- no terminal
def test_without_a_terminal_progress_is_periodic_log_lines(tmp_path: Path) -> None:
    config = sqlite_config(tmp_path)
    proc = rivet("run", "-c", str(config), env=FAST)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("INFO rivet.progress: items: ")]
    counts = rows_of(lines)
    assert len(counts) >= ROWS // BATCH and counts == sorted(counts) and counts[-1] == ROWS
    assert "INFO rivet.progress: items: 100 / ~1,000 rows (10%)" in proc.stderr
    assert any(ln.startswith("INFO rivet.progress: items: done, 1,000 rows") for ln in lines)
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr


def test_the_log_interval_throttles_lines(tmp_path: Path) -> None:
    config = sqlite_config(tmp_path)
    proc = rivet("run", "-c", str(config), env={"RIVET_PROGRESS_INTERVAL": "3600"})
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("INFO rivet.progress:")]
    # The first batch renders at once, then nothing until the hour is up — except the final total.
    assert len(lines) == 2 and "items: done, 1,000 rows" in lines[-1]


def test_json_output_stays_one_document_on_stdout_while_progress_goes_to_stderr(tmp_path: Path) -> None:
    config = sqlite_config(tmp_path)
    proc = rivet("run", "-c", str(config), "--json", env=FAST)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["runs"][0]["rows"] == ROWS
    assert "rivet.progress" in proc.stderr and "rows/s" not in proc.stdout

    code, stdout, tty = run_in_pty("run", "-c", str(config), "--json", "--progress", "tty", env=FAST)
    assert code == 0
    assert json.loads(stdout)["runs"][0]["rows"] == ROWS
    assert "\ritems: " in tty and "rows/s" not in stdout


def test_a_chunked_run_reports_chunk_n_of_n(tmp_path: Path) -> None:
    config = sqlite_config(tmp_path, mode="chunked", chunk_column="id", chunk_size=250)
    proc = rivet("run", "-c", str(config), "--progress", "log", env=FAST)
    assert proc.returncode == 0, proc.stderr
    chunks = [(int(a), int(b)) for a, b in re.findall(r"chunk (\d+)/(\d+)", proc.stderr)]
    totals = {total for _, total in chunks}
    assert len(totals) == 1 and (n := totals.pop()) >= ROWS // 250  # the planner's window count
    assert [done for done, _ in chunks] == sorted(done for done, _ in chunks) and chunks[-1] == (n, n)
    assert "items: done, 1,000 rows" in proc.stderr


def test_auto_mode_picks_tty_only_for_a_terminal(tmp_path: Path) -> None:
    with open(tmp_path / "f", "w") as not_a_tty:
        assert resolve_mode("auto", not_a_tty) == "log"
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            assert resolve_mode("auto", tty) == "tty"
    finally:
        os.close(slave)
        os.close(master)
    assert resolve_mode("none") == "none"


# ---------------------------------------------------------------------------------- math
@given(rows=st.integers(0, 10**12), elapsed=st.floats(min_value=0, max_value=1e7, allow_nan=False),
       expected=st.one_of(st.none(), st.integers(-5, 10**12)))
def test_rate_is_finite_eta_never_negative_and_percent_capped(rows: int, elapsed: float,
                                                              expected: int | None) -> None:
    r = rate(rows, elapsed)
    assert r >= 0 and r == r and r != float("inf")
    eta = eta_seconds(rows, expected, r)
    assert eta is None or (eta >= 0 and eta != float("inf"))
    pct = percent(rows, expected)
    assert pct is None or 0 <= pct <= 100
    if expected is not None and 0 < expected <= rows:
        assert pct == 100 and eta == 0  # a low estimate: done, not 250 % with a negative ETA
    if not expected or expected <= 0:
        assert pct is None and eta is None
    snap = ProgressSnapshot("e", rows, 0, elapsed, expected_rows=expected)
    assert "-" not in snap.line().split("ETA", 1)[1]


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 10**6), st.floats(0, 5)), min_size=1, max_size=30))
def test_the_tracker_aggregates_feeds_and_renders_no_more_often_than_its_interval(
        steps: list[tuple[int, int, float]]) -> None:
    now = [0.0]
    rendered: list[ProgressSnapshot] = []

    class Capture(LineSink):
        def render(self, snap: ProgressSnapshot) -> None:
            rendered.append(snap)

    tracker = ProgressTracker("e", [Capture(lambda _m: None, interval=1.0)], expected_rows=1000,
                              clock=lambda: now[0])
    a, b, failed = tracker.feed(), tracker.feed(), tracker.feed()
    failed.update(999, 999)
    failed.abandon()  # a retried attempt's rows no longer count
    total = 0
    for rows, nbytes, dt in steps:
        now[0] += dt
        total += rows
        a.update(total, nbytes)
    times = [s.elapsed_s for s in rendered]
    assert all(t2 - t1 >= 1.0 for t1, t2 in zip(times, times[1:], strict=False))
    b.done(7, 70)
    a.done(total, 5)
    final = tracker.finish()
    assert (final.rows, final.bytes_written, final.finished) == (total + 7, 75, True)
    assert rendered[-1] == final and tracker.finish().rows == final.rows


def test_the_run_hands_its_estimate_to_the_progress_display_on_its_own_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18 item 5: the display opens no connection of its own — a whole-table run opens
    the source once, and the ETA line still carries the estimate (`~1,000 rows`)."""
    import rivet_core.source
    from rivet_core.api import RunOptions, callback_tracker, load_config
    from rivet_core.pipeline.runner import run_unit

    original = rivet_core.source.open_source
    opened: list[str] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(str(args[0]).split(":", 1)[0])
        return original(*args, **kwargs)

    for module in [m for name, m in sys.modules.items() if name.startswith("rivet_core")]:
        if getattr(module, "open_source", None) is original:
            monkeypatch.setattr(module, "open_source", counting)
    monkeypatch.setenv("RIVET_PROGRESS_INTERVAL", "0")
    config = load_config(sqlite_config(tmp_path))
    export = config.export("items")
    lines: list[str] = []
    tracker = callback_tracker(config, export, lines.append)
    assert opened == [] and tracker.expected_rows is None  # building the display reads nothing
    summary = run_unit(config, export, RunOptions(progress=tracker))
    assert summary.status == "success", summary.error_message
    assert opened == ["sqlite"], opened  # the extraction's session, and no other
    assert tracker.expected_rows == ROWS and any("100 / ~1,000 rows (10%)" in ln for ln in lines), lines
    sliced = callback_tracker(config, export, lines.append, estimate=False)
    sliced.set_expected_rows(ROWS)
    assert sliced.expected_rows is None  # a run of a slice keeps no whole-table ETA


def test_a_failing_log_callback_never_fails_the_run() -> None:
    def broken(_message: str) -> None:
        raise RuntimeError("log sink down")

    tracker = ProgressTracker("e", [LineSink(broken, interval=0)])
    feed = tracker.feed()
    feed.update(10, 10)
    feed.done(10, 10)
    assert tracker.finish().rows == 10


# ------------------------------------------------------------------------------- dagster
@pytest.mark.postgres
@pytest.mark.filterwarnings("ignore::dagster.BetaWarning", "ignore::dagster.PreviewWarning",
                            "ignore::DeprecationWarning")
def test_a_dagster_materialization_logs_progress_lines_in_the_run_event_log(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import dagster as dg

    from rivet_dagster import build_definitions
    from tests.dagster.support import ROWS as ORDERS
    from tests.dagster.support import create_orders, export_block, orders_config, run_job

    create_orders(pg_url)
    monkeypatch.setenv("RIVET_PROGRESS_INTERVAL", "0")
    config = orders_config(tmp_path, pg_url, [export_block(
        "orders_full", "full", {"type": "local", "path": str(tmp_path / "out")})],
    )
    text = config.read_text().replace("type: postgres", "type: postgres\n  tuning:\n    batch_size: 100")
    config.write_text(text)
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_job(build_definitions(config), "orders_full_job", instance)
        assert result.success
        messages = [e.user_message for e in instance.all_logs(result.run_id) if e.user_message]
    progress = [m for m in messages if m.startswith("orders_full: ")]
    counts = [int(m.group(1).replace(",", "")) for p in progress if (m := re.search(r": ([\d,]+) / ~", p))]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] == ORDERS, progress
    assert any(p.startswith(f"orders_full: done, {ORDERS:,} rows") for p in progress)


def test_a_log_record_on_the_terminal_erases_the_live_line_first() -> None:
    import io
    import logging

    from rivet_core.reporting.progress import TtySink

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        sink = TtySink(stream, interval=0)
        sink.attach_to_logging()
        tracker = ProgressTracker("e", [sink])
        tracker.feed().update(5, 0)
        logging.getLogger("rivet.test").warning("a warning mid-run")
        tracker.finish()
        logging.getLogger("rivet.test").warning("after the run")
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert "\x1b[K\r\x1b[Ka warning mid-run\n" in text  # progress line, erased, then the record
    assert text.endswith("e: done, 5 rows, 0 B in " + text.split("e: done, 5 rows, 0 B in ")[1].split("\r")[0]
                         + "\r\x1b[Kafter the run\n")  # cleared once at the end, not again per record
    assert handler.filters == []  # detached when the run finished
