"""Gates before publish for Dagster chunk partitions (issue 15 item 5), against real PostgreSQL.

The total quality gate of a chunked export (`row_count_min` over every window) is judged by
`<export>_manifest`, after the partitions wrote their windows. When it fails, the windows this
chunk run wrote are moved to `_quarantine/<run_id>/` (nothing deleted), no manifest / `_SUCCESS`
is written, the chunk run is `interrupted` and its tasks `failed` with the gate's reason; windows
carried from the last good delivery stay where its manifest lists them. The oracle lists the
destination and re-reads parts with pyarrow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    export_block,
    id_amounts,
    orders_config,
    run_job,
    source_rows,
)
from tests.dagster.test_chunked import (  # noqa: F401 - fixture
    EXPORT,
    INITIAL_KEYS,
    INITIAL_ROWS,
    MANIFEST_JOB,
    assert_destination_equals_source,
    checkpoint,
    failure_of,
    key,
    materialize,
    orders_550,
    tick,
)
from tests.helpers import db_exec


def gated_config(target: Target, url: str, quality: dict[str, Any]) -> Path:
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), chunk_column="id", chunk_size=100,
                         quality=quality)
    return orders_config(target.tmp, url, [block])


def quarantined_ids(target: Target, run_id: str) -> list[int]:
    """Every id in the parts moved to `_quarantine/<run_id>/`, re-read with pyarrow."""
    view = target.view(EXPORT)
    tables = [pq.read_table(pa.BufferReader(view.read(k))) for k in sorted(view.keys())
              if k.startswith(f"_quarantine/{run_id}/") and k.endswith(".parquet")]
    return sorted(pa.concat_tables(tables).column("id").to_pylist()) if tables else []


def test_a_failing_total_quality_gate_in_the_manifest_asset_withdraws_the_windows_and_a_new_run_starts_clean(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target = Target("local", tmp_path)
    config = gated_config(target, orders_550, {"row_count_min": INITIAL_ROWS + 1})
    defs = build_definitions(config)
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    view = target.view(EXPORT)
    assert len(view.data_keys()) == 6

    refused = run_job(defs, MANIFEST_JOB, instance)
    assert not refused.success
    description, _ = failure_of(refused)
    assert f"row_count {INITIAL_ROWS} below minimum {INITIAL_ROWS + 1}" in description
    keys = view.keys()
    assert "manifest.json" not in keys and "_SUCCESS" not in keys
    assert not [k for k in keys if k.startswith("manifest")]
    assert view.data_keys() == []  # nothing left at the prefix …
    run, tasks = checkpoint(config)
    assert quarantined_ids(target, run.run_id) == list(range(INITIAL_ROWS))  # … and nothing lost
    assert run.status == "interrupted"
    assert {t.status for t in tasks.values()} == {"failed"}
    assert all("below minimum" in (t.last_error or "") for t in tasks.values())

    # The gate relaxed: the planner opens a fresh run (every window pending), the windows are
    # materialized again and the manifest lists every row once.
    defs = build_definitions(gated_config(target, orders_550, {"row_count_min": INITIAL_ROWS}))
    tick(defs, instance)
    fresh, tasks = checkpoint(config)
    assert fresh.run_id != run.run_id and fresh.status == "in_progress"
    assert {t.status for t in tasks.values()} == {"pending"}
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    assert_destination_equals_source(target, orders_550)


def test_a_failing_gate_keeps_the_windows_carried_from_the_last_good_delivery(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target = Target("local", tmp_path)
    config = gated_config(target, orders_550, {"row_count_max": INITIAL_ROWS})
    defs = build_definitions(config)
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    view = target.view(EXPORT)
    good = view.current_manifest()
    good_marker = view.read("_SUCCESS")

    # The table grows past the gate: the new run carries the 5 full windows, refills the last one
    # and adds one; the gate fails on the total.
    db_exec(orders_550, """INSERT INTO orders SELECT g, 'new', g + 0.25, NULL,
                               timestamp '2026-04-01' + g * interval '1 minute',
                               timestamp '2026-04-01' + g * interval '1 minute'
                           FROM generate_series(550, 649) g""")
    tick(defs, instance)
    assert materialize(defs, instance, key(500), key(600)).success
    refused = run_job(defs, MANIFEST_JOB, instance)
    assert not refused.success
    assert "exceeds maximum" in failure_of(refused)[0]

    # The last good delivery is whole: its manifest, marker and every part it lists.
    assert view.current_manifest() == good and view.read("_SUCCESS") == good_marker
    assert id_amounts(view.parts_table([good])) == source_rows(orders_550, f"id < {INITIAL_ROWS}")
    # The withdrawn run's own windows (the refill of 500 and 600) are quarantined, nothing else.
    run, _ = checkpoint(config)
    assert run.status == "interrupted"
    assert quarantined_ids(target, run.run_id) == list(range(500, 650))
    assert sorted(view.data_keys()) == sorted(p["path"] for p in good["parts"])
