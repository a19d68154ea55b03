"""export_schema: the schema-drift baseline, `[{"name":…, "type":…}]` per export."""

from __future__ import annotations

import json

import sqlalchemy as sa

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import export_schema


class SchemaBaselineStore(StoreBase):
    def get_schema_baseline(self, export_name: str) -> list[dict[str, str]] | None:
        with self.engine.begin() as conn:
            raw = conn.execute(sa.select(export_schema.c.columns_json).where(
                export_schema.c.export_name == export_name)).scalar()
        return json.loads(raw) if raw else None

    def put_schema_baseline(self, export_name: str, columns: list[dict[str, str]]) -> None:
        payload, now = json.dumps(columns), utc_now_text()
        with self.engine.begin() as conn:
            n = conn.execute(export_schema.update().where(export_schema.c.export_name == export_name)
                             .values(columns_json=payload, updated_at=now)).rowcount
            if not n:
                conn.execute(export_schema.insert().values(
                    export_name=export_name, columns_json=payload, updated_at=now))
