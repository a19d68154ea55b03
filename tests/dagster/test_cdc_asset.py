"""A `mode: cdc` export as a Dagster asset (rivet_dagster/cdc.py), against real PostgreSQL:
each materialization is one bounded drain; its metadata counts the changes by op and gives
the position range and the slot's lag; its checks verify the manifest and the continuity
with the previous published run. The oracle is the SQL the test ran, re-read with pyarrow."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import psycopg

from rivet_core import api
from rivet_dagster import build_definitions
from tests.dagster.support import check_evaluations, materialization, meta
from tests.helpers import manifest_table, mysql_exec, pg_exec, source_block, write_config


def _materialize(defs: dg.Definitions, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    job = dg.define_asset_job("cdc_job", selection=dg.AssetSelection.assets("items_cdc"))
    merged = dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))
    result = merged.get_job_def("cdc_job").execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    return result


def test_each_materialization_drains_publishes_and_reports_changes_by_op_range_lag_and_continuity(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    slot = f"d_{uuid.uuid4().hex[:10]}"
    pg_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT)")
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "items_cdc", "table": "items", "mode": "cdc", "format": "parquet", "cdc": {"slot": slot},
        "destination": {"type": "local", "path": "out"}}])
    try:
        defs = build_definitions(config)
        dg.Definitions.validate_loadable(defs)
        _materialize(defs, instance)  # creates the slot
        pg_exec(pg_url, "INSERT INTO items VALUES (1, 'a'), (2, 'b')", "UPDATE items SET name = 'c' WHERE id = 1",
                "DELETE FROM items WHERE id = 2")
        result = _materialize(defs, instance)
        values = meta(materialization(result))
        assert (values["changes_insert"], values["changes_update"], values["changes_delete"]) == (2, 1, 1)
        assert values["position_high"].startswith('{"lsn":')
        assert values["lag_bytes"] >= 0
        checks = check_evaluations(result)
        assert checks["cdc_continuity"].passed and checks["manifest_verified"].passed
        published = sorted((r["__op"], r["id"]) for r in manifest_table(tmp_path / "out").to_pylist())
        assert published == [("delete", 2), ("insert", 1), ("insert", 2), ("update", 1)]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE database = current_database() AND NOT active")


def test_a_mysql_cdc_export_materializes_its_binlog_changes_with_their_range_and_continuity(
        mysql_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    mysql_exec(mysql_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
    config = write_config(tmp_path, source_block(mysql_url), [{
        "name": "items_cdc", "table": "items", "mode": "cdc", "format": "parquet",
        "cdc": {"server_id": 60_000 + uuid.uuid4().int % 100_000}, "destination": {"type": "local", "path": "out"}}])
    defs = build_definitions(config)
    dg.Definitions.validate_loadable(defs)
    _materialize(defs, instance)  # records where the binlog was
    mysql_exec(mysql_url, "INSERT INTO items VALUES (1, 'a'), (2, 'b')", "UPDATE items SET name = 'c' WHERE id = 1",
               "DELETE FROM items WHERE id = 2")
    result = _materialize(defs, instance)
    values = meta(materialization(result))
    assert (values["changes_insert"], values["changes_update"], values["changes_delete"]) == (2, 1, 1)
    assert set(json.loads(values["position_high"])) >= {"file", "pos"}
    assert values["lag_bytes"] >= 0
    checks = check_evaluations(result)
    assert checks["cdc_continuity"].passed and checks["manifest_verified"].passed
    published = sorted((r["__op"], r["id"]) for r in manifest_table(tmp_path / "out").to_pylist())
    assert published == [("delete", 2), ("insert", 1), ("insert", 2), ("update", 1)]
    mysql_exec(mysql_url, "INSERT INTO items VALUES (3, 'not yet published')")  # the binlog grows past the run
    cfg = api.load_config(config)
    assert api.cdc_binlog_lag(cfg, cfg.export("items_cdc")) > values["lag_bytes"]
