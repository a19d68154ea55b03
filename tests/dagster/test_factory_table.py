"""`build_definitions` as a table of per-mode builders (rivet_dagster/factory.py
`MODE_BUILDERS`): every kind of export is built by its own entry, and the code location is
what it was when one loop appended per mode (the listing below was taken from that loop).
Loading never connects to the source, so the config names an unreachable PostgreSQL server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from rivet_core import api
from rivet_dagster import build_definitions
from rivet_dagster.factory import (
    MODE_BUILDERS,
    DefinitionsOptions,
    definitions_from_options,
    export_kind,
)
from tests.dagster.test_definitions import PG


def one_of_each(tmp: Path, **dagster: Any) -> Path:
    """A config with one export of every kind the table knows, two of the shared ones."""
    local = {"type": "local", "path": "out"}
    chunked = {"mode": "chunked", "chunk_column": "id", "format": "parquet"}
    exports = [
        {"name": "full_a", "table": "public.orders", "mode": "full", "format": "parquet",
         "destination": {**local, "path": "out/full_a"}, "dagster": {"schedule": "0 3 * * *"}},
        {"name": "chunks_a", "table": "public.orders", **chunked, "chunk_size": 100,
         "destination": {**local, "path": "out/chunks_a"}},
        {"name": "daily", "table": "public.orders", "mode": "time_window", "time_column": "created_at",
         "days_window": 3, "format": "parquet", "destination": {**local, "path": "out/daily"},
         "dagster": {"start_date": "2026-03-01", "schedule": "10 0 * * *"}},
        {"name": "bucketed", "table": "public.orders", "mode": "full", "partition_by": "created_at",
         "partition_granularity": "month", "format": "parquet", "destination": {**local, "path": "out/bucketed/{partition}/"}},
        {"name": "counted", "table": "public.orders", **chunked, "chunk_count": 4,
         "destination": {**local, "path": "out/counted"}},
        {"name": "inc_b", "table": "public.orders", "mode": "incremental", "cursor_column": "updated_at",
         "format": "parquet", "destination": {**local, "path": "out/inc_b"}},
        {"name": "chunks_b", "table": "public.orders", **chunked, "chunk_size": 50,
         "destination": {**local, "path": "out/chunks_b"}},
        {"name": "changes", "table": "public.orders", "mode": "cdc", "format": "parquet",
         "destination": {**local, "path": "out/changes"}},
    ]
    path = tmp / "rivet.yaml"
    path.write_text(yaml.safe_dump({"source": PG, "exports": exports, "dagster": {"group": "exports", **dagster}},
                                   sort_keys=False))
    return path


def listing(defs: dg.Definitions) -> dict[str, list[str]]:
    """The definitions by name, in the order the code location holds them."""
    return {
        "assets": [k.to_user_string() for a in defs.assets or []
                   for k in (sorted(a.keys) if isinstance(a, dg.AssetsDefinition) else [a.key])],
        "checks": sorted(k.to_user_string() for k in defs.resolve_asset_graph().asset_check_keys),
        "jobs": [j.name for j in defs.jobs or []],
        "schedules": [s.name for s in defs.schedules or []],
        "sensors": [s.name for s in defs.sensors or []],
    }


CHECKS = [  # `manifest_verified` on every export's published asset, `schema_drift` where the body gates it
    "bucketed:manifest_verified", "changes:cdc_continuity", "changes:manifest_verified", "chunks_a:schema_drift", "chunks_a_manifest:manifest_verified",
    "chunks_a_manifest:reconcile", "chunks_b:schema_drift", "chunks_b_manifest:manifest_verified",
    "chunks_b_manifest:reconcile", "counted:manifest_verified", "daily:manifest_verified", "daily:schema_drift",
    "full_a:manifest_verified", "full_a:schema_drift", "inc_b:manifest_verified", "inc_b:schema_drift",
]


def test_each_kind_of_export_is_built_by_its_own_entry_of_the_table(tmp_path: Path) -> None:
    config = api.load_config(one_of_each(tmp_path))
    kinds = {e.name: export_kind(config, e, multi=True) for e in config.exports}
    assert kinds == {"full_a": "multi_asset", "chunks_a": "chunk_partitions", "daily": "asset",
                     "bucketed": "buckets", "counted": "whole_run", "inc_b": "multi_asset",
                     "chunks_b": "chunk_partitions", "changes": "cdc"}
    assert set(kinds.values()) == set(MODE_BUILDERS)  # the table has no entry no export reaches
    assert {e.name: export_kind(config, e, multi=False) for e in config.exports}["full_a"] == "asset"


@pytest.mark.parametrize("jobs", ["default", "per_export"])
def test_the_code_location_lists_what_the_per_mode_loop_built_in_the_same_order(tmp_path: Path, jobs: str) -> None:
    per_export = jobs == "per_export"
    defs = build_definitions(one_of_each(tmp_path, **({"jobs": "per_export"} if per_export else {})),
                             notify_run_failures=True)
    dg.Definitions.validate_loadable(defs)
    got = listing(defs)
    assert got["assets"] == ["chunks_a", "chunks_a_manifest", "daily", "bucketed", "counted", "chunks_b",
                             "chunks_b_manifest", "changes", "full_a", "inc_b", "postgres/shopdb/public/orders"]  # the multi-asset
    assert got["checks"] == CHECKS
    assert got["schedules"] == ["full_a_schedule", "daily_schedule"]
    assert got["sensors"] == ["rivet_chunk_planner", "rivet_run_failure_notifier"]
    assert got["jobs"] == ([] if not per_export else [
        "full_a_job", "daily_job", "bucketed_job", "counted_job", "inc_b_job", "changes_job",
        *[f"{e}_{k}" for e in ("chunks_a", "chunks_b") for k in ("job", "publish_job", "manifest_job",
                                                                 "reconcile_job")]])


def test_the_keyword_options_and_one_options_value_build_the_same_definitions(tmp_path: Path) -> None:
    path = one_of_each(tmp_path)
    by_keywords = build_definitions(path, key_prefix="replica", group_name="g", owners=["team:data"],
                                    tags={"tier": "1"}, source_assets=False)
    by_options = definitions_from_options(path, "default", DefinitionsOptions(
        key_prefix=("replica",), group_name="g", owners=("team:data",), tags={"tier": "1"}, source_assets=False))
    assert listing(by_keywords) == listing(by_options)
    assert listing(by_options)["sensors"] == ["replica__rivet_chunk_planner"]
    spec = next(s for s in by_options.resolve_assets_def(dg.AssetKey(["replica", "daily"])).specs)
    assert (spec.group_name, spec.owners, spec.tags.get("tier")) == ("g", ["team:data"], "1")
    with pytest.raises(AttributeError):
        DefinitionsOptions().group_name = "other"  # type: ignore[misc]  # frozen: one value, one build
