"""The project's own assets, downstream of the rivet exports (the graph reads
shop database table → rivet export → these)."""

import dagster as dg
import pyarrow as pa


@dg.asset(ins={"orders": dg.AssetIn(key=["shop", "orders"])}, group_name="analytics")
def revenue_by_customer(orders: pa.Table) -> dg.MaterializeResult:
    """Revenue per customer over every order exported so far (the whole dataset, not only
    the last run's rows)."""
    totals = orders.group_by("customer_id").aggregate([("amount", "sum")])
    return dg.MaterializeResult(metadata={"customers": totals.num_rows, "orders": orders.num_rows})
