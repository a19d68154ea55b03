"""Downstream assets receive an export through the IO manager's `load_input`, as a
`pandas.DataFrame` or a `pyarrow.Table` by the input's annotation, read from the parts the
current manifest lists (one partition's prefix for a partition of a daily export)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa

from rivet_dagster import build_definitions
from tests.dagster.support import (
    ROWS,
    Target,
    day_where,
    export_block,
    orders_config,
    run_job,
    source_rows,
)


def received(result: Any) -> dict[str, dict[str, Any]]:
    """asset name → metadata its body reported about the value it received."""
    return {e.asset_key.to_user_string(): {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}


def describe(value: Any) -> dg.MaterializeResult:
    ids = value["id"].tolist() if isinstance(value, pd.DataFrame) else value.column("id").to_pylist()
    return dg.MaterializeResult(metadata={"type": type(value).__name__, "rows": len(value),
                                          "ids": ",".join(map(str, sorted(ids)))})


def test_a_downstream_asset_receives_a_full_export_as_a_dataframe_and_as_an_arrow_table(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    key = dg.AssetKey("orders_full")
    defs = build_definitions(orders_config(target.tmp, orders_pg,
                                           [export_block("orders_full", "full", target.destination("orders_full"))]))

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def as_pandas(orders: pd.DataFrame) -> dg.MaterializeResult:
        return describe(orders)

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def as_arrow(orders: pa.Table) -> dg.MaterializeResult:
        return describe(orders)

    job = dg.define_asset_job("downstream", selection=dg.AssetSelection.assets(as_pandas, as_arrow))
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[as_pandas, as_arrow], jobs=[job]))
    assert run_job(defs, "orders_full_job", instance).success
    result = run_job(defs, "downstream", instance)
    assert result.success

    got = received(result)
    expected_ids = ",".join(map(str, sorted(source_rows(orders_pg))))
    assert got["as_pandas"]["type"] == "DataFrame" and got["as_arrow"]["type"] == "Table"
    for name in ("as_pandas", "as_arrow"):
        assert got[name]["rows"] == ROWS
        assert got[name]["ids"] == expected_ids


def test_a_downstream_asset_receives_one_partition_of_a_daily_export(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    key = dg.AssetKey("orders_daily")
    defs = build_definitions(orders_config(local.tmp, orders_pg, [
        export_block("orders_daily", "time_window", local.destination("orders_daily"))]))
    daily = defs.resolve_assets_def(key).partitions_def

    @dg.asset(partitions_def=daily, ins={"orders": dg.AssetIn(key=key)})
    def same_day(orders: pd.DataFrame) -> dg.MaterializeResult:
        return describe(orders)

    @dg.asset(ins={"orders": dg.AssetIn(
        key=key, partition_mapping=dg.SpecificPartitionsPartitionMapping(["2026-03-02"]))})
    def march_second(orders: pa.Table) -> dg.MaterializeResult:
        return describe(orders)

    jobs = [dg.define_asset_job("same_day_job", selection=dg.AssetSelection.assets(same_day)),
            dg.define_asset_job("march_second_job", selection=dg.AssetSelection.assets(march_second))]
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[same_day, march_second], jobs=jobs))
    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        assert run_job(defs, "orders_daily_job", instance, partition_key=day).success

    for day in ("2026-03-01", "2026-03-03"):
        result = run_job(defs, "same_day_job", instance, partition_key=day)
        assert result.success
        got = received(result)["same_day"]
        expected = source_rows(orders_pg, day_where(day))
        assert (got["type"], got["rows"]) == ("DataFrame", len(expected)), day
        assert got["ids"] == ",".join(map(str, sorted(expected))), day

    result = run_job(defs, "march_second_job", instance)
    assert result.success
    got = received(result)["march_second"]
    expected = source_rows(orders_pg, day_where("2026-03-02"))
    assert (got["type"], got["rows"]) == ("Table", len(expected))
    assert got["ids"] == ",".join(map(str, sorted(expected)))


def test_an_unpartitioned_downstream_of_a_daily_export_receives_every_materialized_day(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    key = dg.AssetKey("orders_daily")
    defs = build_definitions(orders_config(local.tmp, orders_pg, [
        export_block("orders_daily", "time_window", local.destination("orders_daily"))]))

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def all_days(orders: pa.Table) -> dg.MaterializeResult:
        return describe(orders)

    job = dg.define_asset_job("all_days_job", selection=dg.AssetSelection.assets(all_days))
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[all_days], jobs=[job]))
    days = ("2026-03-01", "2026-03-04")
    for day in days:
        assert run_job(defs, "orders_daily_job", instance, partition_key=day).success

    result = run_job(defs, "all_days_job", instance)
    assert result.success
    got = received(result)["all_days"]
    expected = sorted(i for day in days for i in source_rows(orders_pg, day_where(day)))
    assert got["rows"] == len(expected) and got["ids"] == ",".join(map(str, expected))


def test_an_incremental_export_is_read_whole_and_a_run_that_found_nothing_new_does_not_empty_it(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    """Each incremental run's manifest lists only its own rows; a downstream asset gets every
    row of every run since the first (issue 14 item 9), or only the latest run's rows when its
    input asks with `rivet/latest_run_only`."""
    from tests.helpers import db_exec

    key = dg.AssetKey("orders_inc")
    defs = build_definitions(orders_config(local.tmp, orders_pg, [export_block(
        "orders_inc", "incremental", local.destination("orders_inc"), cursor_column="updated_at")]))

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def everything(orders: pa.Table) -> dg.MaterializeResult:
        return describe(orders)

    @dg.asset(ins={"orders": dg.AssetIn(key=key, metadata={"rivet/latest_run_only": True})})
    def latest_only(orders: pa.Table) -> dg.MaterializeResult:
        return describe(orders)

    job = dg.define_asset_job("downstream", selection=dg.AssetSelection.assets(everything, latest_only))
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[everything, latest_only], jobs=[job]))

    assert run_job(defs, "orders_inc_job", instance).success  # the first run: every row
    assert run_job(defs, "orders_inc_job", instance).success  # nothing new: an empty run
    got = received(run_job(defs, "downstream", instance))
    assert got["everything"]["rows"] == ROWS
    assert got["everything"]["ids"] == ",".join(map(str, sorted(source_rows(orders_pg))))
    assert got["latest_only"]["rows"] == 0

    db_exec(orders_pg, f"""INSERT INTO orders SELECT g, 'late', 1.00, NULL, timestamp '2030-01-01',
                           timestamp '2030-01-01' + g * interval '1 second'
                           FROM generate_series({ROWS}, {ROWS + 9}) g""")
    assert run_job(defs, "orders_inc_job", instance).success
    got = received(run_job(defs, "downstream", instance))
    assert got["everything"]["rows"] == ROWS + 10
    assert got["everything"]["ids"] == ",".join(map(str, sorted(source_rows(orders_pg))))
    assert got["latest_only"]["ids"] == ",".join(str(i) for i in range(ROWS, ROWS + 10))
