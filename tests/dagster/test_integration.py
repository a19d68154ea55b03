"""rivet as a Dagster integration (issue 14 items 2, 6, 7): definitions that embed in any code
location, Dagster's standard metadata and lineage, declarative automation.

Against real PostgreSQL; the destination is re-read through the manifest, never the tool's
counters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from rivet_dagster import build_definitions
from tests.dagster.support import (
    ROWS,
    Target,
    export_block,
    id_amounts,
    materialization,
    orders_config,
    run_job,
    source_rows,
)
from tests.helpers import db_exec

SOURCE = dg.AssetKey(["postgres", "shopdb", "public", "orders"])
UNREACHABLE = "postgresql://rivet@127.0.0.1:1/shopdb"  # loading never connects


def spec_of(defs: dg.Definitions, key: dg.AssetKey) -> dg.AssetSpec:
    return next(s for s in defs.resolve_assets_def(key).specs if s.key == key)


# ------------------------------------------------------------------------------ embedding
def test_two_configs_and_the_users_own_assets_merge_into_one_code_location(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = orders_config(tmp_path / "a", UNREACHABLE, [
        export_block("orders", "full", {"type": "local", "path": "out/orders"})])
    # The same export name in the second config: a key prefix keeps assets and sensor names apart.
    second = orders_config(tmp_path / "b", UNREACHABLE, [
        export_block("orders", "incremental", {"type": "local", "path": "out/orders"}, cursor_column="updated_at"),
        export_block("orders_chunked", "chunked", {"type": "local", "path": "out/chunks"},
                     chunk_column="id", chunk_size=100)])

    @dg.asset(deps=[dg.AssetKey(["replica", "orders"])])
    def revenue() -> None: ...

    defs = dg.Definitions.merge(build_definitions(first), build_definitions(second, key_prefix="replica"),
                                dg.Definitions(assets=[revenue]))
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"orders", "replica/orders", "replica/orders_chunked", "replica/orders_chunked_manifest",
            "revenue", "postgres/shopdb/public/orders"} <= keys
    assert {j.name for j in defs.resolve_all_job_defs()} == {"__ASSET_JOB"}  # no job per export (issue 34)
    assert defs.resolve_sensor_def("replica__rivet_chunk_planner") is not None
    # both configs' exports hang off the one source table asset
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("orders")).parent_keys == {SOURCE}
    assert graph.get(dg.AssetKey(["replica", "orders"])).parent_keys == {SOURCE}
    assert graph.get(dg.AssetKey("revenue")).parent_keys == {dg.AssetKey(["replica", "orders"])}


def test_two_export_names_that_sanitize_alike_are_refused_naming_both(tmp_path: Path) -> None:
    from rivet_core import api

    path = orders_config(tmp_path, UNREACHABLE, [
        export_block("a b", "full", {"type": "local", "path": "out/ab1"}),
        export_block("a_b", "full", {"type": "local", "path": "out/ab2"})])
    with pytest.raises(api.ConfigError, match="exports 'a b' and 'a_b' get the same Dagster asset key"):
        build_definitions(path)


def test_an_export_name_with_a_space_loads_with_every_derived_name_sanitized(tmp_path: Path) -> None:
    path = orders_config(tmp_path, UNREACHABLE, [
        export_block("big orders", "full", {"type": "local", "path": "out/big"},
                     quality={"null_ratio_max": {"note": 0.9}}),
        export_block("chunky orders", "chunked", {"type": "local", "path": "out/chunky"},
                     chunk_column="id", chunk_size=100)])
    defs = build_definitions(path)
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"big_orders", "chunky_orders", "chunky_orders_manifest"} <= keys
    assert defs.resolve_sensor_def("rivet_chunk_planner") is not None
    per_export = orders_config(tmp_path, UNREACHABLE, yaml.safe_load(path.read_text())["exports"],
                               dagster={"jobs": "per_export"})
    assert {"big_orders_job", "chunky_orders_job", "chunky_orders_manifest_job", "chunky_orders_publish_job"} <= {
        j.name for j in build_definitions(per_export).resolve_all_job_defs()}


def test_importing_and_building_changes_nothing_in_the_process_or_on_disk(tmp_path: Path) -> None:
    """A library imported into a user's code server: no demo database, no malloc tuning."""
    path = orders_config(tmp_path, UNREACHABLE, [export_block("orders", "full", {"type": "local", "path": "out"})])
    before = sorted(p.name for p in tmp_path.iterdir())
    code = ("import rivet_dagster, rivet_core.pipeline.resources.malloc_arenas as m; "
            f"rivet_dagster.build_definitions({str(path)!r}); "
            "import rivet_core.ops.demo as d; print(m._applied, d.DEFAULT_PATH.exists())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, check=True)
    applied, demo_db = out.stdout.split()
    assert applied == "False", "build_definitions changed the process's malloc settings"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in (".cache",)) == before


# ------------------------------------------------------------------------------ metadata
def test_the_definition_carries_uri_table_name_code_reference_and_a_code_version(tmp_path: Path) -> None:
    exports = [export_block("orders_full", "full", {"type": "local", "path": "out/full"}),
               export_block("orders_csv", "full", {"type": "local", "path": "out/csv"}, format="csv")]
    path = orders_config(tmp_path, UNREACHABLE, exports)
    defs = build_definitions(path)
    meta = spec_of(defs, dg.AssetKey("orders_csv")).metadata
    assert meta["dagster/uri"] == (tmp_path / "out" / "csv").resolve().as_uri() + "/"
    assert meta["dagster/table_name"] == "orders_csv"
    ref = meta["dagster/code_references"].code_references[0]
    lines = path.read_text().splitlines()
    assert ref.file_path == str(path) and "orders_csv" in lines[ref.line_number - 1] + lines[ref.line_number]
    version = spec_of(defs, dg.AssetKey("orders_csv")).code_version
    assert version and version != spec_of(defs, dg.AssetKey("orders_full")).code_version

    config = yaml.safe_load(path.read_text())
    config["exports"][1]["description"] = "only words changed"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert spec_of(build_definitions(path), dg.AssetKey("orders_csv")).code_version == version
    config["exports"][1]["format"] = "parquet"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert spec_of(build_definitions(path), dg.AssetKey("orders_csv")).code_version != version


def test_materializations_carry_the_standard_keys_and_row_count_is_the_datasets_size(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(orders_config(local.tmp, orders_pg, [
        export_block("orders_inc", "incremental", local.destination("orders_inc"), cursor_column="updated_at"),
        export_block("orders_daily", "time_window", local.destination("orders_daily"), time_column="created_at")]))
    first = materialization(run_job(defs, "orders_inc_job", instance))
    columns = [r[0] for r in db_exec(orders_pg, "SELECT column_name FROM information_schema.columns "
                                                "WHERE table_name = 'orders' ORDER BY ordinal_position")]
    lineage = first.metadata["dagster/column_lineage"].value
    assert sorted(lineage.deps_by_column) == sorted(columns)
    source = defs.resolve_asset_graph().get(dg.AssetKey("orders_inc")).parent_keys
    assert len(source) == 1 and next(iter(source)).path[0] == "postgres"
    assert all([d.asset_key for d in deps] == list(source) and deps[0].column_name == col
               for col, deps in lineage.deps_by_column.items())
    assert [c.name for c in first.metadata["dagster/column_schema"].value.columns] == columns
    assert first.metadata["dagster/uri"].value.startswith("file://")
    assert first.metadata["dagster/table_name"].value == "orders_inc"
    assert first.metadata["dagster/row_count"].value == ROWS == len(source_rows(orders_pg))

    second = materialization(run_job(defs, "orders_inc_job", instance))  # nothing new
    assert second.metadata["rows"].value == 0
    assert second.metadata["dagster/row_count"].value == ROWS, "the dataset did not shrink"
    view = local.view("orders_inc")
    assert len(id_amounts(view.parts_table(view.success_manifests()))) == ROWS

    day = materialization(run_job(defs, "orders_daily_job", instance, partition_key="2026-03-02"))
    assert "dagster/row_count" not in day.metadata
    assert day.metadata["dagster/partition_row_count"].value == 144  # one day of 10-minute rows


# ------------------------------------------------------------------------------ automation
def test_automation_conditions_and_freshness_are_on_the_asset_and_evaluate(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    path = orders_config(tmp_path, UNREACHABLE, [
        export_block("nightly", "full", {"type": "local", "path": "out/n"},
                     dagster={"automation_condition": {"on_cron": "0 3 * * *"}, "timezone": "Europe/Berlin"}),
        export_block("missing_only", "full", {"type": "local", "path": "out/m"},
                     dagster={"automation_condition": "on_missing",
                              "freshness": {"fail_after_minutes": 1440, "warn_after_minutes": 720}}),
        export_block("plain", "full", {"type": "local", "path": "out/p"})])
    defs = build_definitions(path)
    nightly, missing, plain = (spec_of(defs, dg.AssetKey(k)) for k in ("nightly", "missing_only", "plain"))
    assert "0 3 * * *" in str(nightly.automation_condition) or "cron" in nightly.automation_condition.get_label().lower()
    assert plain.automation_condition is None
    assert missing.freshness_policy is not None
    assert missing.freshness_policy.fail_window.to_timedelta().total_seconds() == 1440 * 60

    # The source table asset is never materialized (it is external): the conditions must not
    # wait for it, or nothing would ever run.
    from datetime import datetime
    from zoneinfo import ZoneInfo

    before_tick = datetime(2026, 3, 10, 2, 59, tzinfo=ZoneInfo("Europe/Berlin"))
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, evaluation_time=before_tick)
    assert result.get_num_requested(dg.AssetKey("nightly")) == 0  # waits for its cron tick
    assert result.get_num_requested(dg.AssetKey("plain")) == 0  # no condition
    after_tick = datetime(2026, 3, 10, 3, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor,
                                               evaluation_time=after_tick)
    assert result.get_num_requested(dg.AssetKey("nightly")) == 1  # 03:00 Berlin passed
    assert result.get_num_requested(dg.AssetKey("plain")) == 0
    assert missing.automation_condition.get_label() == "on_missing"


def test_schedule_and_automation_condition_together_are_refused(tmp_path: Path) -> None:
    from rivet_core import api

    path = orders_config(tmp_path, UNREACHABLE, [export_block(
        "both", "full", {"type": "local", "path": "out"},
        dagster={"schedule": "0 1 * * *", "automation_condition": "eager"})])
    with pytest.raises(api.ConfigError, match="schedule and automation_condition both set"):
        build_definitions(path)


def test_a_relative_config_path_resolves_against_the_file_that_names_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    orders_config(project, UNREACHABLE, [export_block("orders", "full", {"type": "local", "path": "out"})])
    (project / "defs_module.py").write_text(
        "from rivet_dagster import build_definitions\ndefs = build_definitions('rivet.yaml')\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('m', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(m.defs.resolve_assets_def('orders').specs.__iter__().__next__().metadata['rivet/config'])")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(project / "defs_module.py")],
                         cwd=elsewhere, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str(project / "rivet.yaml")

    from rivet_core import api

    with pytest.raises(api.ConfigError, match="not found .*relative to the file that names it"):
        build_definitions("missing.yaml", relative_to=elsewhere)


def test_a_lost_state_store_is_refused_and_a_run_tag_adopts_the_manifests_cursor(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    """`rivet run --from-manifest` / `--full-refresh` as run tags (issue 20 item 13 in Dagster)."""
    config = orders_config(local.tmp, orders_pg, [export_block(
        "orders_inc", "incremental", local.destination("orders_inc"), cursor_column="updated_at")])
    defs = build_definitions(config)
    assert run_job(defs, "orders_inc_job", instance).success
    for f in local.tmp.glob(".rivet_state.db*"):
        f.unlink()  # the state store is lost; the destination still records cursor_high

    refused = run_job(defs, "orders_inc_job", instance)
    assert not refused.success
    adopted = run_job(defs, "orders_inc_job", instance, tags={"rivet/from_manifest": "true"})
    assert adopted.success
    assert materialization(adopted).metadata["rows"].value == 0  # nothing re-exported
    view = local.view("orders_inc")
    assert len(id_amounts(view.parts_table(view.success_manifests()))) == ROWS  # no duplicate rows


def test_the_definition_shows_the_columns_the_last_run_recorded(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    config = orders_config(local.tmp, orders_pg, [export_block("orders_full", "full", local.destination("orders_full"))])
    key = dg.AssetKey("orders_full")
    assert "dagster/column_schema" not in spec_of(build_definitions(config), key).metadata  # never ran
    assert run_job(build_definitions(config), "orders_full_job", instance).success
    value = spec_of(build_definitions(config), key).metadata["dagster/column_schema"]
    columns = getattr(value, "schema", value).columns
    source = [r[0] for r in db_exec(orders_pg, "SELECT column_name FROM information_schema.columns "
                                               "WHERE table_name = 'orders' ORDER BY ordinal_position")]
    assert [c.name for c in columns] == source


def test_the_reconcile_run_tag_counts_the_source_in_the_exports_snapshot(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(orders_config(local.tmp, orders_pg, [
        export_block("orders_full", "full", local.destination("orders_full"))]))
    assert run_job(defs, "orders_full_job", instance, tags={"rivet/reconcile": "true"}).success
    manifest = local.view("orders_full").current_manifest()
    assert manifest["source"]["extraction"]["source_row_count"] == ROWS == manifest["row_count"]
    plain = run_job(defs, "orders_full_job", instance)
    assert plain.success
    assert "source_row_count" not in local.view("orders_full").current_manifest()["source"]["extraction"]
