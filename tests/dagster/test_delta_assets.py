"""A `table_format: delta` export under Dagster (docs/adr/0009-table-formats.md): its
materialization names the table (`dagster/table_name`, `dagster/uri` of the table root,
`table_version`), and a downstream asset receives the table's rows through `load_input` —
the current version, or for a daily partition only that partition's rows.

Oracles: deltalake's own reader over the table root for the version and the URI, the
PostgreSQL source queried directly for the rows (tests/dagster/support.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable

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


def _uri(target: Target, name: str) -> str:
    """The table root's URI as the materialization should name it."""
    if target.kind == "local":
        return (target.tmp / "out" / name).resolve().as_uri() + "/"
    return f"s3://{target.s3.bucket}/exports/{name}/"


def _table(target: Target, name: str) -> DeltaTable:
    """deltalake's own reader on the export's table."""
    if target.kind == "local":
        return DeltaTable(str(target.tmp / "out" / name))
    s3 = target.s3
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
               "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    return DeltaTable(f"s3://{s3.bucket}/exports/{name}", storage_options=options)


def _materialize(defs: dg.Definitions, assets: list[Any], instance: dg.DagsterInstance,
                 partition_key: str | None = None) -> dg.ExecuteInProcessResult:
    """`dagster.materialize` over the definitions' assets plus `assets`, selecting `assets`'
    keys only (their upstream is loaded through the IO manager, not run again)."""
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
    """What the downstream asset received, as metadata the test compares with the source."""
    rows = id_amounts(orders)  # also asserts no id arrived twice
    return dg.MaterializeResult(metadata={"rows": len(rows),
                                          "rows_digest": ";".join(f"{i}:{a}" for i, a in sorted(rows.items()))})


def _digest(rows: dict[int, Any]) -> str:
    return ";".join(f"{i}:{a}" for i, a in sorted(rows.items()))


def test_a_delta_export_names_its_table_and_version_and_a_downstream_asset_reads_the_table(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    """An incremental export merged on `id`: the second run's manifest lists only its own
    rows, and an updated row is in the table once — so only a reader of the table's current
    version (not of the manifests' parts) receives exactly the source's rows."""
    from tests.helpers import db_exec

    key = dg.AssetKey("orders_delta")
    defs = build_definitions(orders_config(target.tmp, orders_pg, [export_block(
        "orders_delta", "incremental", target.destination("orders_delta"), table_format="delta",
        merge_on=["id"])]))

    @dg.asset(ins={"orders": dg.AssetIn(key=key)})
    def downstream(orders: pa.Table) -> dg.MaterializeResult:
        return _describe(orders)

    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[downstream]))
    for version in (0, 1):
        if version == 1:  # two rows change at the source; the merge replaces their old versions
            db_exec(orders_pg, "UPDATE orders SET amount = amount + 1000, updated_at = timestamp '2030-01-01' "
                               "WHERE id IN (7, 400)")
        got = _received(_materialize(defs, [key], instance), "orders_delta")
        assert _table(target, "orders_delta").version() == version
        assert got["table_version"] == version and got["table_format"] == "delta"
        assert got["dagster/uri"] == _uri(target, "orders_delta")
        assert got["dagster/table_name"] == "orders_delta"
        read = _received(_materialize(defs, [downstream], instance), "downstream")
        expected = source_rows(orders_pg)
        assert read["rows"] == len(expected) == ROWS
        assert read["rows_digest"] == _digest(expected)


def test_a_downstream_partition_of_a_daily_delta_export_reads_only_its_day(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    local = Target("local", tmp_path)
    key = dg.AssetKey("orders_daily")
    defs = build_definitions(orders_config(tmp_path, orders_pg, [export_block(
        "orders_daily", "time_window", local.destination("orders_daily"), table_format="delta")]))
    daily = defs.resolve_assets_def(key).partitions_def

    @dg.asset(partitions_def=daily, ins={"orders": dg.AssetIn(key=key)})
    def same_day(orders: pa.Table) -> dg.MaterializeResult:
        return _describe(orders)

    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[same_day]))
    uri = _uri(local, "orders_daily")
    for version, day in enumerate(("2026-03-01", "2026-03-02", "2026-03-03")):
        got = _received(_materialize(defs, [key], instance, partition_key=day), "orders_daily")
        assert got["table_version"] == version  # one table, a commit per partition
        assert got["dagster/uri"] == uri  # the table's root, not the partition's folder
    table = _table(local, "orders_daily")
    assert table.version() == 2 and len(table.to_pyarrow_table()) == sum(
        len(source_rows(orders_pg, day_where(d))) for d in ("2026-03-01", "2026-03-02", "2026-03-03"))
    for day in ("2026-03-01", "2026-03-03"):
        read = _received(_materialize(defs, [same_day], instance, partition_key=day), "same_day")
        expected = source_rows(orders_pg, day_where(day))
        assert read["rows"] == len(expected) and read["rows_digest"] == _digest(expected), day
