"""GCS and Azure destinations through Dagster (real emulators): an export asset materializes
to each cloud, its `manifest_verified` check passes, and the parts re-read with pyarrow equal
the source rows; `load_input`-free, the same core path as the CLI (tests/destination/
test_cloud_runs.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.cloud_areas import CloudArea, success_table
from tests.dagster.support import (
    check_evaluations,
    export_block,
    id_amounts,
    materialization,
    orders_config,
    run_job,
    source_rows,
)


def test_a_full_export_asset_materializes_to_the_cloud_and_its_check_passes(
        orders_pg: str, tmp_path: Path, cloud: CloudArea, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(orders_config(tmp_path, orders_pg, [
        export_block("orders_cloud", "full", cloud.destination())]))
    result = run_job(defs, "orders_cloud_job", instance)
    assert result.success
    assert check_evaluations(result)["manifest_verified"].passed
    scheme = "gs" if cloud.kind == "gcs" else "az"
    uri = materialization(result).metadata["dagster/uri"]
    assert str(getattr(uri, "value", uri)) == f"{scheme}://{cloud.bucket}/{cloud.prefix}"
    assert id_amounts(success_table(cloud)) == source_rows(orders_pg)
