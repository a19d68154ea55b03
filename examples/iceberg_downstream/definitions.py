"""Downstream of an Iceberg export: two Dagster assets over the `orders` table rivet commits
(rivet.yaml), one querying it with DuckDB.

- `revenue_by_status` opens the table itself, as any Iceberg reader outside Dagster would:
  pyiceberg loads `shop.orders` from the SQL catalog and scans its current snapshot into
  Arrow, handed to DuckDB (DuckDB's own `iceberg_scan` needs its `iceberg` extension,
  downloaded on first use; pyiceberg needs nothing beyond the `iceberg` extra). It depends
  on the export without loading it.
- `largest_orders` takes the export as an input: rivet's IO manager reads the table's
  current snapshot through the same catalog (rivet_dagster/io_manager.py) and hands it over
  as a `pyarrow.Table`, ranked here with pyarrow alone.

Load it with `dagster dev -f definitions.py` (see rivet.yaml for the demo database).
"""

from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from rivet_dagster import build_definitions

HERE = Path(__file__).resolve().parent
#: rivet.yaml's iceberg.catalog_url (`sqlite:///data/catalog.db`, relative to rivet.yaml's folder).
CATALOG_URL = f"sqlite:///{HERE / 'data' / 'catalog.db'}"


@dg.asset(deps=[dg.AssetKey("orders")], group_name="analytics")
def revenue_by_status() -> dg.MaterializeResult:
    """Orders and revenue per status, straight from the Iceberg table's current snapshot."""
    catalog = SqlCatalog("rivet", uri=CATALOG_URL)
    try:
        table = catalog.load_table("shop.orders")
        snapshot = table.current_snapshot()
        con = duckdb.connect()
        con.register("orders", table.scan().to_arrow())
    finally:
        catalog.engine.dispose()
    rows = con.sql("SELECT status, count(*) AS orders, sum(amount) AS revenue "
                   "FROM orders GROUP BY status ORDER BY status").fetchall()
    return dg.MaterializeResult(metadata={
        "iceberg_snapshot_id": dg.MetadataValue.int(snapshot.snapshot_id if snapshot else 0),
        "by_status": dg.MetadataValue.json({s: {"orders": n, "revenue": str(r)} for s, n, r in rows}),
    })


@dg.asset(ins={"orders": dg.AssetIn(key="orders")}, group_name="analytics")
def largest_orders(orders: pa.Table) -> dg.MaterializeResult:
    """The five largest orders (ties: lowest id first), over the table the IO manager loaded
    — plain pyarrow, no query engine needed."""
    ranked = orders.select(["id", "amount"]).sort_by([("amount", "descending"), ("id", "ascending")])
    return dg.MaterializeResult(metadata={
        "orders": dg.MetadataValue.int(orders.num_rows),
        "largest": dg.MetadataValue.json([[r["id"], str(r["amount"])] for r in ranked.slice(0, 5).to_pylist()]),
    })


defs = dg.Definitions.merge(build_definitions(HERE / "rivet.yaml"),
                            dg.Definitions(assets=[revenue_by_status, largest_orders]))
