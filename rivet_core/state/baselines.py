"""export_schema: the schema-drift baseline, `[{"name":…, "type":…}]` per export."""

from __future__ import annotations

import json

from rivet_core.state._base import StoreBase, utc_now_text


class SchemaBaselineStore(StoreBase):
    def get_schema_baseline(self, export_name: str) -> list[dict[str, str]] | None:
        with self.database.transaction() as tx:
            raw = tx.execute("SELECT columns_json FROM export_schema WHERE export_name = :export_name",
                             {"export_name": export_name}).scalar()
        return json.loads(raw) if raw else None

    def put_schema_baseline(self, export_name: str, columns: list[dict[str, str]]) -> None:
        row = {"export_name": export_name, "columns_json": json.dumps(columns), "updated_at": utc_now_text()}
        with self.database.transaction() as tx:
            n = tx.execute("UPDATE export_schema SET columns_json = :columns_json, updated_at = :updated_at "
                           "WHERE export_name = :export_name", row).rowcount
            if not n:
                tx.execute("INSERT INTO export_schema (export_name, columns_json, updated_at) "
                           "VALUES (:export_name, :columns_json, :updated_at)", row)
