"""A Dagster run's retention goes through the same gc policy as `rivet gc` (issue 33, finding 3):
rivet_core/pipeline/retention/gc.py `policy_for` and the planner's refusals. Real PostgreSQL, local disk,
an in-memory Dagster instance; the oracle reads the files itself (pathlib, pyarrow).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from rivet_dagster import build_definitions
from tests.dagster.support import export_block, orders_config, run_job, source_rows
from tests.helpers import rivet_in_process


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dagster_runs_retention_never_sweeps_another_configs_export_nested_under_its_data(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    outer, inner = tmp_path / "out", tmp_path / "out" / "data" / "eb"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config_a = orders_config(tmp_path / "a", orders_pg, [export_block(
        "orders_a", "full", {"type": "local", "path": str(outer)}, retention={"keep_runs": 1, "grace_hours": 0})])
    config_b = orders_config(tmp_path / "b", orders_pg, [export_block(
        "eb", "full", {"type": "local", "path": str(inner)})])
    defs = build_definitions(config_a)
    assert run_job(defs, "orders_a_job", instance).success
    published = rivet_in_process("run", "-c", str(config_b), "-e", "eb")
    assert published.exit_code == 0, published.output
    before = files(inner)

    for _ in range(2):  # the first would park B's files as orphans, the second delete them (grace 0)
        assert run_job(defs, "orders_a_job", instance).success
        assert files(inner) == before
    assert not (outer / "_quarantine").exists()

    validated = rivet_in_process("validate", "-c", str(config_b), "--depth", "full")
    assert validated.exit_code == 0 and "eb: PASSED" in validated.output, validated.output
    parts = [p["path"] for p in json.loads(before["manifest.json"])["parts"]]
    table = pa.concat_tables(pq.read_table(io.BytesIO(before[p])) for p in parts)
    assert dict(zip(table.column("id").to_pylist(), table.column("amount").to_pylist(), strict=True)) \
        == source_rows(orders_pg)
