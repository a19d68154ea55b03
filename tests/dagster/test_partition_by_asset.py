"""A `partition_by` export in Dagster is ONE asset (its date buckets come from the data, so
they are not Dagster partitions); the materialization lists the buckets and
`manifest_verified` checks every bucket prefix. Against real PostgreSQL; the oracle re-reads
each bucket's manifest parts and compares with the source."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import (
    check_evaluations,
    check_only_job,
    create_orders,
    export_block,
    id_amounts,
    materialization,
    meta,
    orders_config,
    run_job,
    source_rows,
    with_jobs,
)
from tests.helpers import manifest_table

EXPORT = "orders_by_day"


def test_a_partition_by_export_is_one_asset_listing_its_buckets(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=300)  # created_at every 10 minutes from 2026-03-01: three days
    block = export_block(EXPORT, "full", {"type": "local", "path": f"out/{EXPORT}/{{partition}}"},
                         partition_by="created_at")
    defs = build_definitions(orders_config(tmp_path, pg_url, [block]))
    dg.Definitions.validate_loadable(defs)
    key = dg.AssetKey(EXPORT)
    assert next(s for s in defs.resolve_assets_def(key).specs if s.key == key).partitions_def is None

    result = run_job(defs, f"{EXPORT}_job", instance)
    assert result.success
    assert check_evaluations(result)["manifest_verified"].passed
    values = meta(materialization(result))
    labels = ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert values["partition_count"] == 3 and values["partition_by"] == "created_at"
    assert [r.data["partition"] for r in values["partitions"].records] == labels
    assert [r.data["prefix"] for r in values["partitions"].records] == [f"created_at={x}/" for x in labels]
    assert values["dagster/row_count"] == 300
    root = tmp_path / "out" / EXPORT
    rows: dict = {}
    for label, record in zip(labels, values["partitions"].records, strict=True):
        got = id_amounts(manifest_table(root / f"created_at={label}"))
        assert record.data["rows"] == len(got) and not rows.keys() & got.keys()
        rows.update(got)
    assert rows == source_rows(pg_url)


def test_manifest_verified_fails_naming_a_bucket_folder_that_was_deleted(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """The check compares the bucket folders with the recorded bucket set, as `rivet
    validate` does: a deleted bucket folder fails it, naming the bucket."""
    create_orders(pg_url, rows=300)
    block = export_block(EXPORT, "full", {"type": "local", "path": f"out/{EXPORT}/{{partition}}"},
                         partition_by="created_at")
    key = dg.AssetKey(EXPORT)
    defs = with_jobs(build_definitions(orders_config(tmp_path, pg_url, [block])), check_only_job("verify_only", key))
    assert run_job(defs, f"{EXPORT}_job", instance).success
    shutil.rmtree(tmp_path / "out" / EXPORT / "created_at=2026-03-02")
    result = run_job(defs, "verify_only", instance)
    evaluation = check_evaluations(result)["manifest_verified"]
    assert not evaluation.passed
    assert evaluation.metadata["failures"].value == 1
    assert "bucket_missing `created_at=2026-03-02/`" in evaluation.description
