"""The deprecated `<orchestrator>_run_id` keys (docs/manifest.md "Deprecated keys"): for one
release every JSON we write that carries `orchestrator_run_id` also carries the old key with
the same id, so an outside reader of the manifest, the run report or `rivet state locks
--json` that still looks for the old key keeps working. The manifest and the run report are
checked end to end in tests/dagster/test_materialize.py and tests/test_manifest.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from rivet_core.cli.shared import open_store
from rivet_core.orchestrator import with_legacy_run_id
from tests.helpers import rivet_quick, source_block, write_config


def test_the_old_key_joins_only_a_named_orchestrators_run_id() -> None:
    both = with_legacy_run_id({"orchestrator": "Dagster", "orchestrator_run_id": "r-1", "pid": 7})
    assert both == {"orchestrator": "Dagster", "orchestrator_run_id": "r-1", "pid": 7, "dagster_run_id": "r-1"}
    for fields in ({"orchestrator": None, "orchestrator_run_id": None},  # a CLI run
                   {"orchestrator": "Dagster", "orchestrator_run_id": None},
                   {"orchestrator": "Two Words", "orchestrator_run_id": "r-1"}):  # no `<name>_run_id` key
        assert with_legacy_run_id(dict(fields)) == fields


def test_state_locks_json_carries_the_old_key_beside_the_neutral_one(tmp_path: Path) -> None:
    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    config = write_config(tmp_path, source_block(f"sqlite:///{db}"),
                          [{"name": "items", "table": "items", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    store = open_store(str(config))
    handle = store.acquire_export_lock("items", run_id="rivet-1", orchestrator_run_id="dg-run-1",
                                       orchestrator="Dagster")
    try:
        shown = rivet_quick("state", "locks", "-c", str(config), "--json")
        assert shown.returncode == 0, shown.stderr
        [lock] = json.loads(shown.stdout)
        assert (lock["orchestrator"], lock["orchestrator_run_id"], lock["dagster_run_id"]) == (
            "Dagster", "dg-run-1", "dg-run-1")
    finally:
        handle.release()
