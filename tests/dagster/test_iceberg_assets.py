"""A `table_format: iceberg` export under Dagster (docs/adr/0009-table-formats.md): its
materialization names the table as its catalog does (`dagster/table_name`
`<catalog>.<namespace>.<table>`, `dagster/uri` of the table's location, `table_snapshot_id`),
and a downstream asset receives the table's rows through `load_input` (`api.read_table`) —
the current snapshot, or for a daily partition only that partition's rows.

Oracles: pyiceberg loading the table from the SQLite catalog for the snapshot, the
PostgreSQL source queried directly for the rows (tests/dagster/support.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from rivet_dagster import build_definitions
from tests.dagster.support import (
    ROWS,
    Target,
    day_where,
    export_block,
    id_amounts,
    meta,
    orders_config,
    source_rows,
)
from tests.helpers import db_exec


def _iceberg(tmp: Path, name: str) -> dict[str, Any]:
    return {"table_format": "iceberg",
            "iceberg": {"catalog_url": f"sqlite:///{tmp / 'catalog.db'}", "namespace": "lake", "table": name}}


def _table(tmp: Path, name: str) -> Any:
    catalog = SqlCatalog("rivet", uri=f"sqlite:///{tmp / 'catalog.db'}")
    try:
        return catalog.load_table(f"lake.{name}")
    finally:
        catalog.engine.dispose()


def _materialize(defs: dg.Definitions, assets: list[Any], instance: dg.DagsterInstance,
                 partition_key: str | None = None) -> dg.ExecuteInProcessResult:
    selected = [k for a in assets for k in (a.keys if isinstance(a, dg.AssetsDefinition) else [a])]
    result = dg.materialize([*defs.assets], instance=instance, resources=defs.resources,  # type: ignore[list-item]
                            selection=selected, partition_key=partition_key, raise_on_error=False)
    assert result.success, [str(getattr(e.event_specific_data, "error", None) or e.message)
                            for e in result.all_events if e.is_failure]
    return result


def _received(result: dg.ExecuteInProcessResult, name: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == name]
    return meta(event.materialization)


def _describe(orders: pa.Table) -> dg.MaterializeResult:
    rows = id_amounts(orders)  # also asserts no id arrived twice
    return dg.MaterializeResult(metadata={"rows": len(rows), "rows_digest": _digest(rows)})


def _digest(rows: dict[int, Any]) -> str:
    return ";".join(f"{i}:{a}" for i, a in sorted(rows.items()))


def test_an_iceberg_export_names_its_table_and_snapshot_and_a_downstream_asset_reads_the_table(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """Merged on `id`: the second run's manifest lists only its own rows and an updated row
    is in the table once — only a reader of the table (not of the parts) gets the source."""
    local = Target("local", tmp_path)
    key = dg.AssetKey("orders_ice")
    defs = build_definitions(orders_config(tmp_path, orders_pg, [export_block(
        "orders_ice", "incremental", local.destination("orders_ice"), merge_on=["id"],
        **_iceberg(tmp_path, "orders"))]))

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def downstream(orders: pa.Table) -> dg.MaterializeResult:
        return _describe(orders)

    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[downstream]))
    for run in (0, 1):
        if run == 1:  # two rows change at the source; the merge replaces their old versions
            db_exec(orders_pg, "UPDATE orders SET amount = amount + 1000, updated_at = timestamp '2030-01-01' "
                               "WHERE id IN (7, 400)")
        got = _received(_materialize(defs, [key], instance), "orders_ice")
        table = _table(tmp_path, "orders")
        assert got["table_snapshot_id"] == str(table.current_snapshot().snapshot_id)
        assert got["table_format"] == "iceberg"
        assert got["dagster/table_name"] == "rivet.lake.orders"
        assert got["dagster/uri"] == (tmp_path / "out" / "orders_ice").resolve().as_uri() + "/"
        read = _received(_materialize(defs, [downstream], instance), "downstream")
        expected = source_rows(orders_pg)
        assert read["rows"] == len(expected) == ROWS
        assert read["rows_digest"] == _digest(expected)


def test_a_downstream_partition_of_a_daily_iceberg_export_reads_only_its_day(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    local = Target("local", tmp_path)
    key = dg.AssetKey("orders_daily")
    defs = build_definitions(orders_config(tmp_path, orders_pg, [export_block(
        "orders_daily", "time_window", local.destination("orders_daily"), **_iceberg(tmp_path, "daily"))]))
    daily = defs.resolve_assets_def(key).partitions_def

    @dg.asset(partitions_def=daily, ins={"orders": dg.AssetIn(key=key)})
    def same_day(orders: pa.Table) -> dg.MaterializeResult:
        return _describe(orders)

    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[same_day]))
    days = ("2026-03-01", "2026-03-02", "2026-03-03")
    for day in days:
        _materialize(defs, [key], instance, partition_key=day)
    _materialize(defs, [key], instance, partition_key="2026-03-02")  # a partition run again replaces its day
    assert len(_table(tmp_path, "daily").scan().to_arrow()) == sum(
        len(source_rows(orders_pg, day_where(d))) for d in days)
    for day in ("2026-03-01", "2026-03-02"):
        read = _received(_materialize(defs, [same_day], instance, partition_key=day), "same_day")
        expected = source_rows(orders_pg, day_where(day))
        assert read["rows"] == len(expected) and read["rows_digest"] == _digest(expected), day
