"""`finalize_repair`, the end of `rivet repair --execute`, in process on SQLite.

The oracle is the destination on disk and the state DB read with the stdlib:
- a coherent repair rewrites the manifest (new part in, replaced part out and moved to
  `_quarantine/<repair>/`) and leaves one terminal metrics row labelled `repair`, a
  ledger row, a journal ending in RunCompleted and a report; a checkpoint that cannot be
  updated afterwards is a warning, not a failed repair;
- a repair whose rewrite would list rows twice (a recorded part no repaired window owns, a
  window whose old part the manifest does not list) raises in tests and, in production,
  fails with exit 3 and leaves `manifest.json` byte for byte — still with its trail;
- `repair_problems` names each incoherence.
(End to end against PostgreSQL: tests/pipeline/test_reconcile_repair.py.)
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rivet_core.config import load_config
from rivet_core.destination import open_destination
from rivet_core.errors import InvariantViolation
from rivet_core.manifest import read_manifest
from rivet_core.pipeline.facade.commit import PartKind, PartRecord, record_part
from rivet_core.pipeline.facade.finalize_repair import (
    RepairedWindow,
    finalize_repair,
    repair_problems,
)
from rivet_core.pipeline.facade.schema_drift import record_gated_upstream
from rivet_core.pipeline.runner import run_unit
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import resolve_unit
from tests.helpers import write_config

REPAIR_ID = "items_repair_20260101T000000"


@pytest.fixture
def delivered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A real full export on SQLite: (config, plan, destination, state, its manifest)."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    src = tmp_path / "src.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"n{i}") for i in range(1, 7)])
    config = load_config(write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{src}"}, [{
        "name": "items", "table": "items", "format": "parquet", "destination": {"type": "local", "path": "out"}}]))
    assert run_unit(config, config.exports[0], notifications=None).status == "success"
    plan = resolve_unit(config, config.exports[0], stored_cursor=None)
    dest = open_destination(plan.dest_spec, config.config_dir)
    state = StateStore.open(config.config_path)
    found = read_manifest(dest)
    assert found is not None
    yield config, plan, dest, state, found[0]
    state.close()


def repair_summary(dest) -> RunSummary:  # noqa: ANN001
    s = RunSummary(run_id=REPAIR_ID, export_name="items", mode="repair", format="parquet", compression="zstd")
    s.destination_kind, s.destination_uri, s.state_backed, s.repair_of = dest.kind, dest.uri, True, "items_chunkrun"
    record_gated_upstream(s, "in a test")
    return s


def new_part(tmp_path: Path, name: str = "data/items_repaired.parquet", rows: int = 6) -> PartRecord:
    target = tmp_path / "out" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"not read by finalize")
    return PartRecord(path=name, rows=rows, size_bytes=target.stat().st_size, content_fingerprint="xxh3:0",
                      content_md5="md5")


def rows(config, sql: str) -> list[tuple]:  # noqa: ANN001
    with sqlite3.connect(config.config_dir / ".rivet_state.db") as conn:
        return conn.execute(sql).fetchall()


def test_a_coherent_repair_rewrites_the_manifest_and_leaves_the_trail_of_a_run(tmp_path, delivered):
    config, plan, dest, state, previous = delivered
    [old] = [p.path for p in previous.parts]
    s = repair_summary(dest)
    record_part(s, state, new_part(tmp_path), PartKind.chunk(0))
    window = RepairedWindow(0, 6, new_paths=("data/items_repaired.parquet",), replaces=(old,), old_file=old)
    finalize_repair(plan, s, state, dest, previous=previous, chunk_run_id="items_chunkrun", windows=[window],
                    error=None, report_root=config.config_dir)

    assert (s.status, s.exit_code, s.manifest_written) == ("success", 0, True)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["run_id"] == REPAIR_ID and [p["path"] for p in manifest["parts"]] == ["data/items_repaired.parquet"]
    assert manifest["row_count"] == 6 and (tmp_path / "out" / "_SUCCESS").is_file()
    assert not (tmp_path / "out" / old).exists()
    assert [p.name for p in (tmp_path / "out" / "_quarantine").rglob("*.parquet")] == [Path(old).name]
    # No chunk run "items_chunkrun" exists: the checkpoint update after the manifest is a warning.
    assert any("checkpoint of repaired chunk 0 not updated" in w for w in s.warnings)
    assert rows(config, f"SELECT mode, status, total_rows FROM export_metrics WHERE run_id = '{REPAIR_ID}'") == \
        [("repair", "success", 6)]
    assert rows(config, f"SELECT status FROM run_status WHERE run_id = '{REPAIR_ID}'") == []  # opened by the caller
    [(journal,)] = rows(config, f"SELECT journal_json FROM run_journal WHERE run_id = '{REPAIR_ID}'")
    assert next(iter(json.loads(journal)["entries"][-1]["event"])) == "RunCompleted"
    report = json.loads((Path(s.report_path).parent / "summary.json").read_text())
    assert (report["mode"], report["repair_of"]) == ("repair", "items_chunkrun")


@pytest.mark.parametrize("strict", [True, False])
def test_a_repair_that_would_list_rows_twice_rewrites_nothing(tmp_path, delivered, monkeypatch, strict):
    config, plan, dest, state, previous = delivered
    before = (tmp_path / "out" / "manifest.json").read_bytes()
    s = repair_summary(dest)
    record_part(s, state, new_part(tmp_path), PartKind.chunk(0))  # recorded, but no window owns it
    if strict:
        monkeypatch.setenv("RIVET_STRICT_INVARIANTS", "1")
        with pytest.raises(InvariantViolation, match="belong to no repaired window"):
            finalize_repair(plan, s, state, dest, previous=previous, chunk_run_id="items_chunkrun", windows=[],
                            error=None, report_root=config.config_dir)
    else:
        monkeypatch.delenv("RIVET_STRICT_INVARIANTS", raising=False)
        finalize_repair(plan, s, state, dest, previous=previous, chunk_run_id="items_chunkrun", windows=[],
                        error=None, report_root=config.config_dir)
        assert (s.status, s.exit_code, s.manifest_written) == ("failed", 3, False)
        assert "repair invariant violated, manifest not rewritten" in s.error_message
        assert rows(config, f"SELECT mode, status FROM export_metrics WHERE run_id = '{REPAIR_ID}'") == \
            [("repair", "failed")]
        assert Path(s.report_path).is_file()
    assert (tmp_path / "out" / "manifest.json").read_bytes() == before
    assert not (tmp_path / "out" / "_quarantine").exists()


def test_repair_problems_names_each_incoherence(tmp_path, delivered):
    _config, _plan, dest, state, previous = delivered
    [old] = [p.path for p in previous.parts]
    s = repair_summary(dest)
    record_part(s, state, new_part(tmp_path, "data/a.parquet"), PartKind.chunk(0))
    record_part(s, state, new_part(tmp_path, old), PartKind.chunk(2))  # same key as a kept part
    windows = [
        RepairedWindow(0, 6, new_paths=("data/a.parquet", "data/never-recorded.parquet"), replaces=(),
                       old_file="data/gone.parquet"),
        RepairedWindow(1, 0, new_paths=(), replaces=("data/not-listed.parquet",)),
    ]
    problems = repair_problems(previous, s, windows)
    assert any("never-recorded.parquet" in p and "not recorded through record_part" in p for p in problems)
    assert any("window 0" in p and "would list its rows twice" in p for p in problems)
    assert any("window 1" in p and "not-listed.parquet" in p for p in problems)
    assert any("collide with parts the manifest keeps" in p and old in p for p in problems)
    assert any("belong to no repaired window" in p and old in p for p in problems)
    assert repair_problems(previous, repair_summary(dest), []) == []
