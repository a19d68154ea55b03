"""Incremental exports to stdout keep their cursor (issue 15 item 4).

The rows are streamed, so there is no manifest: the cursor moves once every part was written
to stdout and the run succeeded, and the run's report stands in for the manifest. Checked
on PostgreSQL and MariaDB by re-reading what the CLI printed with pyarrow and by the cursor
in the state store; a run whose stdout reader went away moves nothing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pyarrow.csv as pacsv
import pytest

from tests.helpers import REPO, cursor_of, db_exec, source_block, state_rows, write_config


def _ts(url: str, minutes: int) -> str:
    if url.startswith("postgres"):
        return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{minutes} minutes'"
    return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {minutes} MINUTE"


def _insert(url: str, ids: range) -> None:
    rows = ", ".join(f"({i}, 'n{i}', {_ts(url, i)})" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, updated_at) VALUES {rows}")


@pytest.fixture(params=["postgres", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    u = request.getfixturevalue("pg_url" if request.param == "postgres" else "mysql_url")
    db_exec(u, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL)")
    return u


def _ids(stdout: bytes) -> list[int]:
    if not stdout:
        return []
    return sorted(pacsv.read_csv(io.BytesIO(stdout)).column("id").to_pylist())


def _run(config) -> bytes:  # noqa: ANN001
    result = subprocess.run([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)],
                            capture_output=True, cwd=REPO, env=dict(os.environ), timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_an_incremental_stdout_export_prints_each_row_once(tmp_path, url):
    _insert(url, range(1, 11))
    config = write_config(tmp_path, source_block(url), [
        {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
         "format": "csv", "destination": {"type": "stdout"}}])
    assert _ids(_run(config)) == list(range(1, 11))
    first = cursor_of(config, "items")
    assert first is not None and first.startswith("2026-01-01")
    assert _ids(_run(config)) == []  # nothing new: nothing printed again
    assert cursor_of(config, "items") == first
    _insert(url, range(11, 14))
    assert _ids(_run(config)) == [11, 12, 13]
    assert cursor_of(config, "items") != first
    # The report stands in for the manifest: it records the range each run printed.
    reports = sorted((tmp_path / ".rivet" / "runs").glob("*/summary.json"))
    cursors = [json.loads(p.read_text())["cursor"] for p in reports]
    assert [c["committed"] for c in cursors if c["high"]] == [True, True]
    assert state_rows(config, "SELECT COUNT(*) FROM export_metrics WHERE status='success'") == [(3,)]


def test_a_stdout_reader_that_went_away_moves_no_cursor(tmp_path, url):
    _insert(url, range(1, 2001))
    config = write_config(tmp_path, source_block(url), [
        {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
         "format": "csv", "destination": {"type": "stdout"}}])
    proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()  # the consumer is gone before the first byte: a broken pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, err.decode()
    assert cursor_of(config, "items") is None
    assert state_rows(config, "SELECT status FROM export_metrics WHERE status != 'running'") == [("failed",)]
