"""Downstream of a Delta export: two Dagster assets that query the `orders` table rivet
commits (rivet.yaml) with DuckDB.

- `revenue_by_status` opens the table itself, as any Delta reader outside Dagster would:
  `deltalake.DeltaTable(...).to_pyarrow_dataset()` handed to DuckDB (DuckDB's own
  `delta_scan` needs its `delta` extension, downloaded on first use; the dataset needs
  nothing beyond the `delta` extra). It depends on the export without loading it.
- `top_customers` takes the export as an input: rivet's IO manager reads the table's
  current version (rivet_dagster/io_manager.py) and hands it over as a `pyarrow.Table`.

Load it with `dagster dev -f definitions.py` (see rivet.yaml for the demo database).
"""

from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
from deltalake import DeltaTable

from rivet_dagster import build_definitions

HERE = Path(__file__).resolve().parent
#: The export's destination in rivet.yaml: the table's root.
TABLE = HERE / "data" / "lake" / "orders"


@dg.asset(deps=[dg.AssetKey("orders")], group_name="analytics")
def revenue_by_status() -> dg.MaterializeResult:
    """Orders and revenue per status, straight from the Delta table's current version."""
    table = DeltaTable(str(TABLE))
    con = duckdb.connect()
    con.register("orders", table.to_pyarrow_dataset())
    rows = con.sql("SELECT status, count(*) AS orders, sum(amount) AS revenue "
                   "FROM orders GROUP BY status ORDER BY status").fetchall()
    return dg.MaterializeResult(metadata={
        "delta_version": dg.MetadataValue.int(table.version()),
        "by_status": dg.MetadataValue.json({s: {"orders": n, "revenue": str(r)} for s, n, r in rows}),
    })


@dg.asset(ins={"orders": dg.AssetIn(key="orders")}, group_name="analytics")
def top_customers(orders: pa.Table) -> dg.MaterializeResult:
    """The five customers with the most revenue, over the table the IO manager loaded."""
    con = duckdb.connect()
    con.register("orders", orders)
    rows = con.sql("SELECT customer_id, sum(amount) AS revenue FROM orders "
                   "GROUP BY customer_id ORDER BY revenue DESC, customer_id LIMIT 5").fetchall()
    return dg.MaterializeResult(metadata={
        "orders": dg.MetadataValue.int(orders.num_rows),
        "top": dg.MetadataValue.json([[c, str(r)] for c, r in rows]),
    })


defs = dg.Definitions.merge(build_definitions(HERE / "rivet.yaml"),
                            dg.Definitions(assets=[revenue_by_status, top_customers]))
