"""`manifest_verified`: passes after a materialization; run on its own after the destination
was damaged, it fails with ERROR and its metadata names the damaged part.

The check is unpartitioned (partitioned checks are Preview in Dagster 1.13), so on a daily
export a checks-only run verifies the partition named by its `dagster/partition` tag, or
every partition prefix holding a manifest when the run has no partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    check_evaluations,
    check_only_job,
    export_block,
    orders_config,
    run_job,
    with_jobs,
)


def values(evaluation: Any) -> dict[str, Any]:
    return {k: v.value for k, v in evaluation.metadata.items()}


def table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the failure table (header checked: file, problem, expected, found)."""
    lines = markdown.splitlines()
    assert lines[0] == "| file | problem | expected | found |", markdown
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]


def setup(target: Target, url: str, name: str, mode: str) -> tuple[dg.Definitions, dg.AssetKey]:
    defs = build_definitions(orders_config(target.tmp, url, [export_block(name, mode, target.destination(name))]))
    key = dg.AssetKey(name)
    return with_jobs(defs, check_only_job("verify_only", key)), key


def verify_alone(defs: dg.Definitions, instance: dg.DagsterInstance, **kw: Any) -> tuple[Any, Any]:
    """Run only `manifest_verified` (no materialization); return (result, evaluation)."""
    result = run_job(defs, "verify_only", instance, **kw)
    assert not result.get_asset_materialization_events(), "a checks-only run re-materialized the asset"
    evaluations = check_evaluations(result)
    assert set(evaluations) == {"manifest_verified"}
    return result, evaluations["manifest_verified"]


def test_manifest_verified_passes_after_a_materialization_and_fails_with_error_naming_a_deleted_part(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    defs, key = setup(target, orders_pg, "orders_full", "full")
    result = run_job(defs, "orders_full_job", instance)
    assert result.success
    check = check_evaluations(result)["manifest_verified"]
    view = target.view("orders_full")
    parts = [p["path"] for p in view.current_manifest()["parts"]]
    assert check.passed and values(check)["failures"] == 0
    assert values(check)["parts_verified"] == len(parts)
    assert values(check)["verdict"] == "PASSED" and values(check)["failure_table"] == "No failures."
    for name in ("prefixes_checked", "parts_verified", "failures", "untracked_objects"):
        assert isinstance(check.metadata[name], dg.IntMetadataValue), name
    assert isinstance(check.metadata["failure_table"], dg.MarkdownMetadataValue)

    result, check = verify_alone(defs, instance)
    assert result.success and check.passed

    view.delete(parts[0])
    result, check = verify_alone(defs, instance)
    assert not result.success  # blocking + ERROR fails the run
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    meta = values(check)
    assert meta["failures"] == 1 and meta["verdict"] == "FAILED (1 failure)"
    assert table_rows(meta["failure_table"]) == [[f"`{parts[0]}`", "part_missing", "present", "missing"]]
    record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(key, "manifest_verified"))
    assert record.status.value == "FAILED"


def test_manifest_verified_reports_a_resized_part_with_its_expected_and_actual_size(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs, _ = setup(local, orders_pg, "orders_full", "full")
    assert run_job(defs, "orders_full_job", instance).success
    view = local.view("orders_full")
    part = view.current_manifest()["parts"][0]
    (view.root / part["path"]).write_bytes(b"truncated")

    result, check = verify_alone(defs, instance)
    assert not result.success and not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    meta = values(check)
    assert meta["verdict"] == "FAILED (1 failure)"
    assert table_rows(meta["failure_table"]) == [
        [f"`{part['path']}`", "part_size_mismatch", str(part["size_bytes"]), str(len(b"truncated"))]]
    assert part["path"] in check.description and "part_size_mismatch" in check.description


def test_manifest_verified_on_a_daily_export_checks_the_tagged_partition_or_every_partition(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs, _ = setup(local, orders_pg, "orders_daily", "time_window")
    for day in ("2026-03-01", "2026-03-02"):
        result = run_job(defs, "orders_daily_job", instance, partition_key=day)
        assert result.success and check_evaluations(result)["manifest_verified"].passed
    view = local.view("orders_daily")
    damaged = view.current_manifest("created_at=2026-03-02/")["parts"][0]["path"]
    view.delete(f"created_at=2026-03-02/{damaged}")

    result, check = verify_alone(defs, instance, tags={"dagster/partition": "2026-03-02"})
    assert not result.success and not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert damaged in values(check)["failure_table"] and "created_at=2026-03-02/" in values(check)["failure_table"]
    assert values(check)["prefixes_checked"] == 1

    result, check = verify_alone(defs, instance, tags={"dagster/partition": "2026-03-01"})
    assert result.success and check.passed

    result, check = verify_alone(defs, instance)  # no partition: every partition prefix
    assert not result.success and not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert values(check)["prefixes_checked"] == 2 and values(check)["failures"] == 1
    assert damaged in values(check)["failure_table"]


def test_manifest_verified_names_a_part_corrupted_in_place_on_s3_in_its_failure_table(
        orders_pg: str, s3: Any, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """Same size, different bytes: the size check cannot see it; the MD5 the manifest
    recorded against the object's ETag can (local listings carry no MD5, so S3 only)."""
    target = Target("s3", tmp_path, s3)
    defs, _ = setup(target, orders_pg, "orders_full", "full")
    assert run_job(defs, "orders_full_job", instance).success
    view = target.view("orders_full")
    part = view.current_manifest()["parts"][0]
    data = bytearray(view.read(part["path"]))
    data[len(data) // 2] ^= 0xFF
    view.client.put_object(Bucket=s3.bucket, Key=view.prefix + part["path"], Body=bytes(data))

    result, check = verify_alone(defs, instance)
    assert not result.success and not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    meta = values(check)
    assert meta["verdict"] == "FAILED (1 failure)" and meta["failures"] == 1
    [row] = table_rows(meta["failure_table"])
    assert row[:2] == [f"`{part['path']}`", "part_checksum_mismatch"]
    assert row[2] == part["content_md5"] and row[3] not in ("", row[2])
