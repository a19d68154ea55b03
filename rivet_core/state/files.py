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

import sqlalchemy as sa

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import export_metrics, file_log


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
        with self.engine.begin() as conn:
            conn.execute(file_log.delete().where(
                (file_log.c.run_id == run_id) & (file_log.c.file_name == file_name)))
            conn.execute(file_log.insert().values(
                run_id=run_id, export_name=export_name, file_name=file_name, row_count=rows,
                bytes=size_bytes, format=format, compression=compression, created_at=now,
                cursor_high=cursor_high))
            self._project_running(conn, run_id, export_name, format, mode, now)

    @staticmethod
    def _project_running(conn: sa.Connection, run_id: str, export_name: str,
                         format: str | None, mode: str | None, now: str) -> None:
        running = (export_metrics.c.run_id == run_id) & (export_metrics.c.status == "running")
        row = dict(export_name=export_name, run_id=run_id, run_at=now, status="running",
                   duration_ms=0, retries=0, format=format, mode=mode)
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert  # PostgreSQL stores only

            conn.execute(pg_insert(export_metrics).values(**row).on_conflict_do_nothing(
                index_elements=[export_metrics.c.run_id], index_where=export_metrics.c.status == "running"))
        elif conn.execute(sa.select(export_metrics.c.id).where(running)).first() is None:
            conn.execute(export_metrics.insert().values(**row))  # SQLite: BEGIN IMMEDIATE serializes
        conn.execute(sa.select(export_metrics.c.id).where(running).with_for_update())  # one projector at a time
        agg = conn.execute(sa.select(
            sa.func.coalesce(sa.func.sum(file_log.c.row_count), 0),
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(file_log.c.bytes), 0),
        ).where(file_log.c.run_id == run_id)).one()
        conn.execute(export_metrics.update().where(
            (export_metrics.c.run_id == run_id) & (export_metrics.c.status == "running")
        ).values(total_rows=agg[0], files_produced=agg[1], files_committed=agg[1],
                 bytes_written=agg[2], run_at=now))

    def list_files(self, export_name: str | None = None, last: int = 50) -> list[FileRow]:
        q = sa.select(file_log).order_by(file_log.c.id.desc()).limit(last)
        if export_name:
            q = q.where(file_log.c.export_name == export_name)
        return self._rows(q)

    def list_files_for_export(self, export_name: str) -> list[FileRow]:
        """Every part ever recorded for the export, oldest first (a chunk-task finalize finds the
        parts of windows carried over from earlier runs, or repaired, by their attempt name)."""
        return self._rows(sa.select(file_log).where(file_log.c.export_name == export_name)
                          .order_by(file_log.c.id))

    def list_files_for_run(self, run_id: str) -> list[FileRow]:
        return self._rows(sa.select(file_log).where(file_log.c.run_id == run_id).order_by(file_log.c.id))

    def _rows(self, q: sa.Select) -> list[FileRow]:
        with self.engine.begin() as conn:
            return [
                FileRow(r["run_id"], r["export_name"], r["file_name"], int(r["row_count"]), int(r["bytes"]),
                        r["format"], r["compression"], r["created_at"], r["cursor_high"])
                for r in conn.execute(q).mappings()
            ]
