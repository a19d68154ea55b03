"""A chunked run's committed progression goes through RunStore, after the manifest; a resumed
run records its drift gate as run upstream (issue 15 item 6, docs/adr/0001-write-ordering-facades.md).

Real PostgreSQL and MariaDB sources; the oracle is the state DB read with the stdlib and the
files at the destination.

1. In process, a state store that notes what the destination holds when the committed
   progression is written: `manifest.json` and `_SUCCESS` are already there, and it is
   written once, with the highest completed chunk index of the chunk run.
2. The real CLI: a checkpointed run whose manifest write fails (a directory stands where
   `manifest.json` goes) leaves no committed progression; the next run records its own.
3. The real CLI: a resumed run's drift verdict is the facade's "gated upstream" record (the
   report says so), and the strict invariant backstop the suite runs with accepts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rivet_core.config import load_config
from rivet_core.pipeline.runner import run_unit
from rivet_core.state import StateStore
from tests.helpers import state_rows
from tests.pipeline.test_chunked_cli import (  # noqa: F401 - module fixtures
    _sqlite_state_beside_the_config,
    config_for,
    mysql_items,
    pg_items,
    run,
)

LAST_WINDOW = 6  # ids 1..300 in windows of 50 on the grid: 0..6


@pytest.fixture(params=[pytest.param("pg", marks=pytest.mark.postgres),
                        pytest.param("mysql", marks=pytest.mark.mysql)])
def items_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("pg_items" if request.param == "pg" else "mysql_items")


def progression(config: Path) -> list[tuple]:
    return state_rows(config, "SELECT last_committed_strategy, last_committed_chunk_index, last_committed_run_id "
                              "FROM export_progression")


class _NotesTheDestination(StateStore):
    """Notes, at each committed-progression write, whether the manifest and marker had landed."""

    out: Path
    seen: list[tuple[int, bool, bool]]

    def record_committed_chunked(self, export_name: str, chunk_index: int, run_id: str) -> None:
        self.seen.append((chunk_index, (self.out / "manifest.json").is_file(), (self.out / "_SUCCESS").is_file()))
        super().record_committed_chunked(export_name, chunk_index, run_id)


@pytest.mark.parametrize("parallel", [1, 3])
def test_the_committed_progression_is_written_after_the_manifest_and_the_marker(tmp_path, items_url, parallel):
    config = load_config(config_for(tmp_path, items_url, chunk_checkpoint=True, parallel=parallel))
    store = _NotesTheDestination.open(config.config_path)
    store.out, store.seen = tmp_path / "out", []
    try:
        summary = run_unit(config, config.exports[0], state=store, notifications=None)
    finally:
        store.close()
    assert summary.status == "success", summary.error_message
    assert store.seen == [(LAST_WINDOW, True, True)]
    assert progression(config.config_path) == [("chunked", LAST_WINDOW, summary.run_id)]
    assert summary.completed_chunk_run == summary.run_id
    assert (summary.schema_gate, summary.schema_changed) == ("checked", False)


def test_a_failing_manifest_write_leaves_no_committed_progression(tmp_path, items_url):
    config = config_for(tmp_path, items_url, chunk_checkpoint=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").mkdir()  # the destination refuses the manifest
    refused = run(config)
    assert refused.returncode != 0 and "manifest write failed" in refused.stderr, refused.stderr
    assert progression(config) == []
    assert state_rows(config, "SELECT status FROM export_metrics") == [("failed",)]

    (out / "manifest.json").rmdir()
    again = run(config)
    assert again.returncode == 0, again.stderr
    [(run_id,)] = state_rows(config, "SELECT run_id FROM export_metrics WHERE status = 'success'")
    assert json.loads((out / "manifest.json").read_text())["run_id"] == run_id
    assert progression(config) == [("chunked", LAST_WINDOW, run_id)]


def test_a_resumed_run_records_its_drift_gate_as_run_upstream(tmp_path, items_url):
    config = config_for(tmp_path, items_url, chunk_checkpoint=True)
    failed = run(config, RIVET_TEST_ERROR_AT="chunk_export:2")
    assert failed.returncode != 0 and "1 task(s) not completed" in failed.stderr, failed.stderr
    [(first_run,)] = state_rows(config, "SELECT run_id FROM export_metrics")
    first = json.loads((tmp_path / ".rivet" / "runs" / first_run / "summary.json").read_text())
    assert first["schema_gate"] == "checked"  # the gate ran when the run started

    resumed = run(config, "--resume")  # RIVET_STRICT_INVARIANTS=1: a missing gate would fail it
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads((tmp_path / ".rivet" / "runs" / first_run / "summary.json").read_text())
    assert report["status"] == "success"
    assert report["schema_gate"] == "upstream: when the resumed chunk run started"
    assert report["schema_changed"] is False
    assert "gated upstream" in (tmp_path / ".rivet" / "runs" / first_run / "summary.md").read_text()
    assert progression(config) == [("chunked", LAST_WINDOW, first_run)]
