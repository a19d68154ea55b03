"""Crash at each fault point of an incremental export, then re-run: nothing is lost.

Runs the real CLI in a subprocess with RIVET_TEST_PANIC_AT armed (the process kills
itself with SIGKILL), inspects the destination and the state store against reference
docs/rivet-compat.md "Fault points and the crash map", re-runs clean, and checks with an independent reader that every
source id is listed by a `status: success` manifest and that the cursor is right.
"""

from __future__ import annotations

import pytest

from tests.helpers import (
    cursor_of,
    data_files,
    db_exec,
    manifest_ids,
    rivet,
    rivet_quick,
    source_block,
    state_rows,
    write_config,
)

ROWS = 40


def _seed(url: str, first: int, last: int) -> None:
    values = ", ".join(
        f"({i}, 'item {i}', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i}' MINUTE)"
        if not url.startswith("postgres") else
        f"({i}, 'item {i}', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i} minutes')"
        for i in range(first, last + 1))
    db_exec(url, f"INSERT INTO items VALUES {values}")


@pytest.fixture(params=["postgres", "mysql"])
def source_url(request: pytest.FixtureRequest) -> str:
    url = request.getfixturevalue("pg_url" if request.param == "postgres" else "mysql_url")
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL)")
    _seed(url, 1, ROWS)
    return url


def _config(tmp_path, url):  # noqa: ANN001, ANN202
    return write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": "out"},
    }])


def _files_logged(config) -> int:  # noqa: ANN001
    return len(state_rows(config, "SELECT file_name FROM file_log"))


@pytest.mark.parametrize("point", ["after_source_read", "after_file_write", "after_manifest_update",
                                   "after_cursor_commit"])
def test_crash_at_each_fault_point_then_rerun_loses_nothing(tmp_path, source_url, point):
    config = _config(tmp_path, source_url)
    out = tmp_path / "out"
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0, crashed.stderr

    # The state the crash leaves behind (docs/rivet-compat.md "Fault points and the crash map").
    parts_after_crash = data_files(out)
    expected = {
        "after_source_read": dict(parts=0, logged=0, cursor=False, manifest=False),
        "after_file_write": dict(parts=1, logged=0, cursor=False, manifest=False),
        "after_manifest_update": dict(parts=1, logged=1, cursor=False, manifest=False),
        "after_cursor_commit": dict(parts=1, logged=1, cursor=True, manifest=True),
    }[point]
    assert len(parts_after_crash) == expected["parts"]
    assert _files_logged(config) == expected["logged"]
    assert (cursor_of(config, "items") is not None) == expected["cursor"]
    assert (out / "manifest.json").exists() == expected["manifest"]
    assert (out / "_SUCCESS").exists() == expected["manifest"]

    rerun = rivet_quick("run", "-c", str(config))  # the crashed run was the process
    assert rerun.returncode == 0, rerun.stderr
    # Each id exactly once across the success manifests: nothing lost, nothing listed twice.
    assert manifest_ids(out) == list(range(1, ROWS + 1))
    assert cursor_of(config, "items") == "2026-01-01T00:40:00.000000"
    if point == "after_cursor_commit":
        # The crash came after the cursor: the re-run exports nothing new.
        assert len(data_files(out)) == 1

    # New rows after recovery are picked up, and nothing before them is lost.
    _seed(source_url, ROWS + 1, ROWS + 3)
    again = rivet_quick("run", "-c", str(config), "--validate")
    assert again.returncode == 0, again.stderr
    assert manifest_ids(out) == list(range(1, ROWS + 4))
    assert cursor_of(config, "items") == "2026-01-01T00:43:00.000000"


def test_a_killed_run_left_running_in_the_run_ledger_is_marked_failed_by_the_next_run(tmp_path, pg_url):
    """`rivet run` SIGKILLed after its part landed never records an outcome: its run_status
    row says `running`. The next run of the export, holding the export lock, finds no live
    holder with that run id and marks the row `failed`; its own row ends `success`, and the
    published data holds each source id once."""
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL)")
    _seed(pg_url, 1, ROWS)
    config = _config(tmp_path, pg_url)
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": "after_file_write"})
    assert crashed.returncode == -9, crashed.stderr
    [(dead_id, status)] = state_rows(config, "SELECT run_id, status FROM run_status")
    assert status == "running"

    rerun = rivet_quick("run", "-c", str(config))
    assert rerun.returncode == 0, rerun.stderr
    ledger = dict(state_rows(config, "SELECT run_id, status FROM run_status"))
    assert ledger.pop(dead_id) == "failed" and list(ledger.values()) == ["success"]
    [(finished,)] = state_rows(config, "SELECT finished_at FROM run_status WHERE run_id = ?", [dead_id])
    assert finished is not None
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))
