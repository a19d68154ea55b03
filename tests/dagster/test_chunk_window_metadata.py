"""A ranged chunk run's materializations: each window reports its own rows, bytes and parts.

The planner asks for several windows per run (a partition range). Dagster turns the run's
single output into one materialization per partition; the output's metadata lands on each
of them, so figures of the whole run there would tell every window it holds the batch's
rows (the demo showed rows=1000 on each of five 200-customer windows). The window's own
figures are partition-scoped metadata (rivet_dagster/metadata.py `window_metadata`).

Oracle: each window's parts, re-read with pyarrow, and the source's rows in the window's id
range — never the tool's counters.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import Target, create_orders, meta, source_rows
from tests.dagster.test_chunked import INITIAL_KEYS, INITIAL_ROWS, chunked_config, materialize, tick


def test_each_window_of_a_ranged_run_reports_its_own_rows_bytes_and_parts(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=INITIAL_ROWS)
    orders_550 = pg_url
    target = Target("local", tmp_path)
    config = chunked_config(target, orders_550)
    defs = build_definitions(config)
    tick(defs, instance)  # registers the six windows as partitions

    result = materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[2])  # one run, three windows
    assert result.success
    events = {e.materialization.partition: meta(e.materialization) for e in result.get_asset_materialization_events()}
    assert sorted(events) == INITIAL_KEYS[:3]

    source = source_rows(orders_550)
    view = target.view("orders_chunked")
    for index, window in enumerate(INITIAL_KEYS[:3]):
        m = events[window]
        files = [r.data for r in m["parts_table"].records]
        reread = [view.read_part(f["file"]) for f in files]
        ids = sorted(i for t in reread for i in t.column("id").to_pylist())
        expected = sorted(i for i in source if index * 100 <= i < index * 100 + 100)
        assert ids == expected  # this window's parts hold exactly its rows …
        assert m["dagster/partition_row_count"] == m["rows"] == len(expected) == 100  # … and say so
        assert m["parts"] == len(files) and m["bytes"] == sum(len(view.read(f["file"])) for f in files)
        assert m["chunk_run_id"] == events[INITIAL_KEYS[0]]["chunk_run_id"]  # one chunk run for the batch
