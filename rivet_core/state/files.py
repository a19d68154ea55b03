"""file_log: the ledger of committed parts, and the `running` metrics projection from it.

`record_durable_part` is idempotent per (run_id, file_name): delete-then-insert, then the
run's `running` export_metrics row is (re)projected from file_log — insert-if-absent, then
update — so parallel writers of one run never create two running rows. Callers treat any
error as a warning (I7): the part is already durable at the destination.

Concurrency (many window batches of one chunk run write under the same run_id):
on SQLite the transaction holds the write lock from BEGIN IMMEDIATE. On PostgreSQL (READ
COMMITTED) two first writers would both see no running row and both insert it — the partial
unique index then failed the second transaction, losing its file_log row — and two
projections computed side by side each miss the other's part. So the running row is inserted
with ON CONFLICT DO NOTHING, then locked (FOR UPDATE) before the aggregate is read: the
projections of one run are serialized and each sees every committed part.
"""

from __future__ import annotations

from dataclasses import dataclass

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.database import Transaction
from rivet_core.state.schema import (
    EXPORT_METRICS_DEFAULTS,
    columns_sql,
    export_metrics,
    file_log,
    insert_sql,
)

_RUNNING = "run_id = :run_id AND status = 'running'"


@dataclass(frozen=True)
class FileRow:
    run_id: str
    export_name: str
    file_name: str
    row_count: int
    bytes: int
    format: str | None
    compression: str | None
    created_at: str
    cursor_high: str | None


class FileLogStore(StoreBase):
    def record_durable_part(
        self, *, run_id: str, export_name: str, file_name: str, rows: int, size_bytes: int,
        format: str | None, compression: str | None, mode: str | None = None,
        cursor_high: str | None = None,
    ) -> None:
        now = utc_now_text()
        part = dict(run_id=run_id, export_name=export_name, file_name=file_name, row_count=rows,
                    bytes=size_bytes, format=format, compression=compression, created_at=now,
                    cursor_high=cursor_high)
        with self.database.transaction() as tx:
            tx.execute("DELETE FROM file_log WHERE run_id = :run_id AND file_name = :file_name", part)
            tx.execute(insert_sql(file_log, tuple(part)), part)
            self._project_running(tx, run_id, export_name, format, mode, now)

    @staticmethod
    def _project_running(tx: Transaction, run_id: str, export_name: str,
                         format: str | None, mode: str | None, now: str) -> None:
        row = {**EXPORT_METRICS_DEFAULTS, "export_name": export_name, "run_id": run_id, "run_at": now,
               "status": "running", "format": format, "mode": mode}
        insert = insert_sql(export_metrics, tuple(row))
        if tx.postgresql:
            tx.execute(f"{insert} ON CONFLICT (run_id) WHERE status = 'running' DO NOTHING", row)
        elif tx.execute(f"SELECT id FROM export_metrics WHERE {_RUNNING}", row).first() is None:
            tx.execute(insert, row)  # SQLite: BEGIN IMMEDIATE serializes
        # one projector at a time
        tx.execute(f"SELECT id FROM export_metrics WHERE {_RUNNING}" + tx.locking("FOR UPDATE"), row)
        agg = tx.execute("SELECT coalesce(sum(row_count), 0) AS total_rows, count(*) AS files, "
                         "coalesce(sum(bytes), 0) AS bytes_written FROM file_log WHERE run_id = :run_id",
                         {"run_id": run_id}).first()
        assert agg is not None  # an aggregate always has its row
        tx.execute("UPDATE export_metrics SET total_rows = :total_rows, files_produced = :files, "
                   f"files_committed = :files, bytes_written = :bytes_written, run_at = :run_at WHERE {_RUNNING}",
                   {**agg, "run_at": now, "run_id": run_id})

    def list_files(self, export_name: str | None = None, last: int = 50) -> list[FileRow]:
        where = "WHERE export_name = :export_name " if export_name else ""
        return self._rows(f"{where}ORDER BY id DESC LIMIT :last", {"export_name": export_name, "last": last})

    def list_files_for_export(self, export_name: str) -> list[FileRow]:
        """Every part ever recorded for the export, oldest first (a chunk-task finalize finds the
        parts of windows carried over from earlier runs, or repaired, by their attempt name)."""
        return self._rows("WHERE export_name = :export_name ORDER BY id", {"export_name": export_name})

    def list_files_for_run(self, run_id: str) -> list[FileRow]:
        return self._rows("WHERE run_id = :run_id ORDER BY id", {"run_id": run_id})

    def _rows(self, where_and_order: str, params: dict[str, object]) -> list[FileRow]:
        with self.database.transaction() as tx:
            rows = tx.execute(f"SELECT {columns_sql(file_log)} FROM file_log {where_and_order}", params).all()
        return [FileRow(r["run_id"], r["export_name"], r["file_name"], int(r["row_count"]), int(r["bytes"]),
                        r["format"], r["compression"], r["created_at"], r["cursor_high"]) for r in rows]
