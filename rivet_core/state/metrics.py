"""export_metrics: exactly one terminal row per run, written after the verdict (I4)."""

from __future__ import annotations

from typing import Any

from rivet_core.state._base import StoreBase
from rivet_core.state.schema import (
    EXPORT_METRICS_BOOLEANS,
    EXPORT_METRICS_DEFAULTS,
    columns_sql,
    export_metrics,
    insert_sql,
)

METRIC_COLUMNS = tuple(c for c in export_metrics.column_names if c != "id")


class MetricsStore(StoreBase):
    def record_metric(self, row: dict[str, Any]) -> None:
        """Replace the run's `running` projection with its terminal row, atomically. Columns
        the row leaves out get EXPORT_METRICS_DEFAULTS (counters 0) or NULL."""
        values = {**EXPORT_METRICS_DEFAULTS, **{k: v for k, v in row.items() if k in METRIC_COLUMNS}}
        with self.database.transaction() as tx:
            tx.execute("DELETE FROM export_metrics WHERE run_id = :run_id AND status = 'running'",
                       {"run_id": values["run_id"]})
            tx.execute(insert_sql(export_metrics, tuple(values)), values)

    def list_metrics(self, export_name: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        where = "WHERE export_name = :export_name " if export_name else ""
        with self.database.transaction() as tx:
            rows = tx.execute(f"SELECT {columns_sql(export_metrics)} FROM export_metrics {where}"
                              "ORDER BY id DESC LIMIT :last", {"export_name": export_name, "last": last}).all()
        for r in rows:  # SQLite stores booleans as 0/1
            r.update({k: bool(r[k]) for k in EXPORT_METRICS_BOOLEANS if r[k] is not None})
        return rows
