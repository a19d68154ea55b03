"""`rivet reconcile` and `rivet repair` on a checkpointed chunked export (real PostgreSQL).

A repair ends through its own finalize path (rivet_core/pipeline/facade/finalize_repair.py), so
the oracle checks the trail a run leaves, read from the state DB and the disk, not from the
tool's output: the rewritten manifest and its per-run copy, the superseded part in
`_quarantine/`, the checkpoint, one terminal metrics row labelled `repair` (no `running`
row left behind), the run ledger, the journal and the run report. A repair whose manifest
write fails records nothing as repaired, and the next repair finishes the job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rivet_core.manifest.layout import run_token
from tests.helpers import db_exec, source_block, state_rows, write_config
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process


@pytest.fixture(autouse=True)
def _sqlite_state_beside_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trail assertions read .rivet_state.db beside the config."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)


def canonical_ids(prefix) -> list[int]:  # noqa: ANN001
    """Ids in the parts the canonical manifest.json lists (the repaired dataset)."""
    manifest = json.loads((prefix / "manifest.json").read_text())
    return sorted(i for p in manifest["parts"] for i in pq.read_table(prefix / p["path"]).column("id").to_pylist())


def _setup(tmp_path, pg_url):  # noqa: ANN001, ANN202
    db_exec(pg_url, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)",
            "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 400) g")
    return write_config(tmp_path, source_block(pg_url), [{
        "name": "t", "table": "t", "mode": "chunked", "chunk_column": "id", "chunk_size": 100,
        "chunk_checkpoint": True, "format": "parquet", "destination": {"type": "local", "path": "out"}}])


def test_reconcile_reports_a_mismatch_after_source_rows_are_deleted_and_repair_fixes_it(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    assert rivet("run", "-c", str(config)).returncode == 0
    clean = rivet("reconcile", "-c", str(config), "-e", "t", "--format", "json")
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["summary"]["mismatches"] == 0

    db_exec(pg_url, "DELETE FROM t WHERE id BETWEEN 210 AND 219")
    found = rivet("reconcile", "-c", str(config), "-e", "t", "--format", "json")
    assert found.returncode == 3, found.stderr
    report = json.loads(found.stdout)
    wrong = [p for p in report["partitions"] if p["status"] == "mismatch"]
    assert [(p["chunk_index"], p["source_count"], p["exported_count"]) for p in wrong] == [(2, 90, 100)]

    dry = rivet("repair", "-c", str(config), "-e", "t", "--format", "json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["executed"] is False
    assert canonical_ids(tmp_path / "out") == list(range(1, 401))  # a dry run changes nothing

    fixed = rivet("repair", "-c", str(config), "-e", "t", "--execute", "--format", "json")
    assert fixed.returncode == 0, fixed.stderr
    payload = json.loads(fixed.stdout)
    assert payload["summary"]["rows_written"] == 90
    assert_repair_trail(config, tmp_path / "out", payload, chunk_run=report["run_id"], rows=90, chunk=2)
    expected = [i for i in range(1, 401) if not 210 <= i <= 219]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    ids = canonical_ids(tmp_path / "out")
    assert sorted(ids) == expected and manifest["row_count"] == len(expected)
    # The superseded part was moved aside, never deleted.
    assert list((tmp_path / "out" / "_quarantine").rglob("*.parquet"))
    assert rivet("reconcile", "-c", str(config), "-e", "t").returncode == 0
    validate = rivet("validate", "-c", str(config), "--format", "json")
    assert validate.returncode == 0, validate.stdout
    assert json.loads(validate.stdout)["exports"][0]["verification"]["passed"] is True


def test_reconcile_refuses_a_non_chunked_export_with_a_hint(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "t", "table": "t", "mode": "full", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    result = rivet("reconcile", "-c", str(config), "-e", "t")
    assert result.returncode == 1
    assert "chunk_checkpoint: true" in result.stderr and "rivet validate" in result.stderr


def assert_repair_trail(config: Path, out: Path, payload: dict, *, chunk_run: str, rows: int, chunk: int) -> None:
    """A successful repair left the trail of a run, labelled as a repair (module docstring)."""
    repair = payload["repair"]
    repair_id = repair["run_id"]
    assert repair_id.startswith("t_repair_") and repair["status"] == "success" and repair["manifest_rewritten"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_id"] == repair_id and manifest["status"] == "success"
    assert (out / f"manifest-{run_token(repair_id)}.json").read_bytes() == (out / "manifest.json").read_bytes()
    assert (out / "_quarantine" / run_token(repair_id)).is_dir()  # the superseded part, moved aside
    # One terminal metrics row for the repair, labelled as one; the running projection is gone.
    assert state_rows(config, "SELECT mode, status, total_rows, files_committed FROM export_metrics "
                              "WHERE run_id = ?", (repair_id,)) == [("repair", "success", rows, 1)]
    assert state_rows(config, "SELECT count(*) FROM export_metrics WHERE status = 'running'") == [(0,)]
    assert state_rows(config, "SELECT status FROM run_status WHERE run_id = ?", (repair_id,)) == [("success",)]
    [(journal,)] = state_rows(config, "SELECT journal_json FROM run_journal WHERE run_id = ?", (repair_id,))
    events = [next(iter(e["event"])) for e in json.loads(journal)["entries"]]
    assert events[0] == "PlanResolved" and events[-1] == "RunCompleted" and "ChunkCompleted" in events
    # The checkpoint names the new attempt, written after the manifest listed it.
    [(task_rows, task_file)] = state_rows(config, "SELECT rows_written, file_name FROM chunk_task "
                                                  "WHERE run_id = ? AND chunk_index = ?", (chunk_run, chunk))
    assert task_rows == rows and task_file in {p["path"] for p in manifest["parts"]}
    report = json.loads((Path(repair["report"]).parent / "summary.json").read_text())
    assert (report["mode"], report["repair_of"], report["status"]) == ("repair", chunk_run, "success")
    assert report["schema_gate"] == "checked" and report["schema_changed"] is False


def test_a_repair_whose_manifest_write_fails_marks_nothing_repaired_and_the_next_repair_finishes(
        tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    out = tmp_path / "out"
    assert rivet("run", "-c", str(config)).returncode == 0
    db_exec(pg_url, "DELETE FROM t WHERE id BETWEEN 110 AND 114")
    chunk_run = json.loads(rivet("reconcile", "-c", str(config), "-e", "t", "--format", "json").stdout)["run_id"]
    [(old_rows, old_file)] = state_rows(config, "SELECT rows_written, file_name FROM chunk_task "
                                                "WHERE chunk_index = 1")

    # The destination refuses the marker: manifest.json and its copy land, `_SUCCESS` does not.
    (out / "_SUCCESS").unlink()
    (out / "_SUCCESS").mkdir()
    refused = rivet("repair", "-c", str(config), "-e", "t", "--execute", "--format", "json")
    assert refused.returncode != 0, refused.stdout
    repair = json.loads(refused.stdout)["repair"]
    assert repair["status"] == "failed" and "manifest write failed" in repair["error_message"]
    # Nothing recorded as repaired, nothing moved aside; the failure is on the record.
    assert state_rows(config, "SELECT rows_written, file_name FROM chunk_task WHERE chunk_index = 1") == \
        [(old_rows, old_file)]
    assert not (out / "_quarantine").exists()
    assert state_rows(config, "SELECT mode, status FROM export_metrics WHERE run_id = ?", (repair["run_id"],)) \
        == [("repair", "failed")]
    assert state_rows(config, "SELECT status FROM run_status WHERE run_id = ?", (repair["run_id"],)) == \
        [("failed",)]
    assert Path(repair["report"]).is_file()

    # The destination accepts the marker again: reconcile still finds the window (the checkpoint
    # was not moved), and the next repair supersedes whatever the manifest lists for it.
    (out / "_SUCCESS").rmdir()
    assert rivet("reconcile", "-c", str(config), "-e", "t").returncode == 3
    fixed = rivet("repair", "-c", str(config), "-e", "t", "--execute", "--format", "json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert_repair_trail(config, out, json.loads(fixed.stdout), chunk_run=chunk_run, rows=95, chunk=1)
    assert canonical_ids(out) == [i for i in range(1, 401) if not 110 <= i <= 114]
    assert rivet("reconcile", "-c", str(config), "-e", "t").returncode == 0
    validate = rivet("validate", "-c", str(config), "--format", "json")
    assert validate.returncode == 0, validate.stdout
