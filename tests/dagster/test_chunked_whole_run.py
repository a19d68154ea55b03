"""Chunked exports whose windows cannot be partition keys load and run as one asset (issue 14
item 3), against real PostgreSQL.

`chunk_count` / `chunk_dense` windows move as the table grows and `keyset_incremental`
continues above a high-water key, so such an export (or any chunked export with
`dagster.chunk_partitions: false`) is one unpartitioned asset whose materialization runs the
whole checkpointed chunked run. The oracle re-reads the parts the manifest lists and
compares id → amount with the source (each id exactly once); a run that failed at a window
is continued by the next materialization (the checkpoint's completed windows are kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_core.config import load_config
from rivet_core.state import StateStore
from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    check_evaluations,
    create_orders,
    export_block,
    id_amounts,
    orders_config,
    run_job,
    source_rows,
)

EXPORT = "orders_counted"


def config_for(target: Target, url: str, **knobs: Any) -> Path:
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), **knobs)
    return orders_config(target.tmp, url, [block])


@pytest.mark.parametrize("knobs", [
    {"chunk_column": "id", "chunk_count": 4},
    {"chunk_column": "id", "chunk_dense": True, "chunk_size": 150},
    {"chunk_column": "id", "chunk_size": 100, "dagster": {"chunk_partitions": False}},
], ids=["chunk_count", "chunk_dense", "chunk_partitions_false"])
def test_a_chunked_export_without_stable_windows_is_one_asset_that_runs_the_whole_chunked_run(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, knobs: dict[str, Any]) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    defs = build_definitions(config_for(target, pg_url, **knobs))
    dg.Definitions.validate_loadable(defs)
    key = dg.AssetKey(EXPORT)
    spec = next(s for s in defs.resolve_assets_def(key).specs if s.key == key)
    assert spec.partitions_def is None
    assert not defs.sensors, "no planner: the whole run is one materialization"

    result = run_job(defs, f"{EXPORT}_job", instance)
    assert result.success
    assert check_evaluations(result)["manifest_verified"].passed
    view = target.view(EXPORT)
    manifest = view.current_manifest()
    assert manifest is not None and manifest["status"] == "success" and len(manifest["parts"]) > 1
    assert id_amounts(view.parts_table([manifest])) == source_rows(pg_url)


def test_a_failed_whole_chunked_run_is_continued_by_the_next_materialization(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = config_for(target, pg_url, chunk_column="id", chunk_count=5)
    defs = build_definitions(config)

    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "chunk_export:3")
    failed = run_job(defs, f"{EXPORT}_job", instance)
    assert not failed.success
    assert target.view(EXPORT).current_manifest() is None, "nothing is published before every window"
    store = StateStore.open(load_config(config).config_path)
    try:
        run = store.find_in_progress_chunk_run(EXPORT)
        assert run is not None
        done_before = {t.chunk_index for t in store.list_chunk_tasks(run.run_id) if t.status == "completed"}
    finally:
        store.close()
    assert done_before and 3 not in done_before

    monkeypatch.delenv("RIVET_TEST_ERROR_AT")
    resumed = run_job(defs, f"{EXPORT}_job", instance)
    assert resumed.success
    view = target.view(EXPORT)
    manifest = view.current_manifest()
    assert manifest is not None and manifest["run_id"] == run.run_id, "the same chunk run, continued"
    assert id_amounts(view.parts_table([manifest])) == source_rows(pg_url)  # each id exactly once
