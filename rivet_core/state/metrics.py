"""export_metrics: exactly one terminal row per run, written after the verdict (I4)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from rivet_core.state._base import StoreBase
from rivet_core.state.schema import export_metrics

METRIC_COLUMNS = tuple(c.name for c in export_metrics.columns if c.name != "id")


class MetricsStore(StoreBase):
    def record_metric(self, row: dict[str, Any]) -> None:
        """Replace the run's `running` projection with its terminal row, atomically."""
        values = {k: v for k, v in row.items() if k in METRIC_COLUMNS}
        with self.engine.begin() as conn:
            conn.execute(export_metrics.delete().where(
                (export_metrics.c.run_id == values["run_id"]) & (export_metrics.c.status == "running")))
            conn.execute(export_metrics.insert().values(**values))

    def list_metrics(self, export_name: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        q = sa.select(export_metrics).order_by(export_metrics.c.id.desc()).limit(last)
        if export_name:
            q = q.where(export_metrics.c.export_name == export_name)
        with self.engine.begin() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]
