"""End to end through the real Dagster CLI: `dagster asset materialize -m rivet_dagster.definitions`.

Each test materializes one demo asset in a subprocess, from the repository root, with
RIVET_CONFIG pointing at a temp copy of the demo (see e2e_demo.py) and a throwaway
DAGSTER_HOME. Then an independent oracle re-reads what landed — only the parts that
manifest.json lists, with pyarrow — and compares it with the SQLite source queried
directly, and checks the Dagster instance recorded the materialization.

`customers` runs on Dagster's default (multiprocess) executor, as a deployment does: each
step is a fresh process that re-imports the code location. `orders` and `events` run with
the in-process executor (`--config-json`), which saves ~10 s per run on a loaded 2-core
machine while exercising the same asset, checks and IO manager code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tests.dagster.e2e_demo import REPO, Demo, make_demo

IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})
RUN_ID = re.compile(r" - __ASSET_JOB - ([0-9a-f-]{36}) - ")


@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """A fresh demo copy for this module (e2e_demo.make_demo)."""
    return make_demo(tmp_path_factory.mktemp("demo"))


def materialize(demo: Demo, *args: str, timeout: float = 120) -> str:
    """`python -m dagster asset materialize -m rivet_dagster.definitions ARGS`; its log, or a failure."""
    cmd = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "rivet_dagster.definitions", *args]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=demo.env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        pytest.fail(f"{' '.join(cmd[1:])} did not finish in {timeout:.0f} s; last output:\n{out[-4000:]}",
                    pytrace=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{log[-6000:]}"
    assert "RUN_SUCCESS" in log, f"no RUN_SUCCESS in the log:\n{log[-6000:]}"
    return log


def dagster_run_id(log: str) -> str:
    ids = set(RUN_ID.findall(log))
    assert len(ids) == 1, f"expected one Dagster run in the log, found {sorted(ids)}"
    return ids.pop()


def published(prefix: Path) -> tuple[dict, pa.Table]:
    """The current manifest at `prefix` and every row of the parts it lists (re-read here)."""
    manifest_path = prefix / "manifest.json"
    assert manifest_path.is_file(), f"no manifest.json in {prefix}: {sorted(p.name for p in prefix.iterdir())}"
    assert (prefix / "_SUCCESS").is_file(), f"no _SUCCESS marker in {prefix}"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "success", manifest
    tables = []
    for part in manifest["parts"]:
        assert part["status"] == "committed", part
        path = prefix / part["path"]
        assert path.is_file(), f"manifest lists {part['path']}, which is not in {prefix}"
        assert path.stat().st_size == part["size_bytes"], part
        table = pacsv.read_csv(path) if manifest["format"] == "csv" else pq.read_table(path)
        assert table.num_rows == part["rows"], (part, table.num_rows)
        tables.append(table)
    table = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
    assert table.num_rows == manifest["row_count"], (table.num_rows, manifest["row_count"])
    return manifest, table


def recorded_materialization(demo: Demo, asset: str, run_id: str, partition: str | None = None) -> None:
    """The throwaway Dagster instance holds a materialization of `asset` from this run."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(demo.dagster_home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
        assert event is not None, f"the Dagster instance recorded no materialization of {asset}"
        assert event.run_id == run_id
        assert event.asset_materialization.partition == partition
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS, run


def test_materialize_customers_publishes_the_whole_table(demo_copy: Demo) -> None:
    log = materialize(demo_copy, "--select", "customers")
    run_id = dagster_run_id(log)
    assert "Asset check 'manifest_verified' on 'customers' passed" in log, log[-4000:]

    manifest, table = published(demo_copy.dir / "output" / "customers")
    source = demo_copy.query("SELECT id, name, email FROM customers ORDER BY id")
    assert len(source) == 200
    assert manifest["row_count"] == len(source)
    assert manifest["orchestrator_run_id"] == run_id
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "name", "email")), strict=True))
    assert got == source
    recorded_materialization(demo_copy, "customers", run_id)


def test_materialize_orders_publishes_every_order_with_exact_decimals(demo_copy: Demo) -> None:
    log = materialize(demo_copy, "--select", "orders", "--config-json", IN_PROCESS)
    run_id = dagster_run_id(log)
    assert "Asset check 'manifest_verified' on 'orders' passed" in log, log[-4000:]

    manifest, table = published(demo_copy.dir / "output" / "orders")
    source = demo_copy.query("SELECT id, amount FROM orders ORDER BY id")
    assert len(source) == 500
    assert manifest["row_count"] == len(source)
    assert manifest["orchestrator_run_id"] == run_id
    assert table.schema.field("amount").type == pa.decimal128(12, 2)
    got = sorted(zip(table.column("id").to_pylist(), table.column("amount").to_pylist(), strict=True))
    assert got == [(i, Decimal(str(a))) for i, a in source]
    recorded_materialization(demo_copy, "orders", run_id)


def test_materialize_yesterdays_events_partition(demo_copy: Demo) -> None:
    # The latest partition is the last complete day (time partitions have no end offset).
    today = datetime.now(UTC).date() - timedelta(days=1)
    log = materialize(demo_copy, "--select", "events", "--partition", today.isoformat(), "--config-json", IN_PROCESS)
    run_id = dagster_run_id(log)
    assert "Asset check 'manifest_verified' on 'events' passed" in log, log[-4000:]

    prefix = demo_copy.dir / "output" / "events" / f"created_at={today.isoformat()}"
    manifest, table = published(prefix)
    assert manifest["format"] == "csv"
    assert manifest["orchestrator_run_id"] == run_id
    source = [r[0] for r in demo_copy.query(
        "SELECT id FROM events WHERE created_at >= ? AND created_at < ? ORDER BY id",
        (today.isoformat(), (today + timedelta(days=1)).isoformat()))]
    assert manifest["row_count"] == len(source)
    assert sorted(table.column("id").to_pylist() if table.num_rows else []) == source
    # Only that partition was exported.
    days = sorted(p.name for p in (demo_copy.dir / "output" / "events").iterdir() if p.is_dir())
    assert days == [f"created_at={today.isoformat()}"]
    recorded_materialization(demo_copy, "events", run_id, partition=today.isoformat())
