"""export_progression: advisory committed/verified boundaries (never read by execution)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import sqlalchemy as sa

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import export_progression


def cursor_advances(new: str, old: str | None) -> bool:
    """True when `new` is strictly after `old`: numeric if both parse, else byte-wise text."""
    if old is None:
        return True
    try:
        return Decimal(new) > Decimal(old)
    except (InvalidOperation, ValueError):
        return new.encode() > old.encode()


def _locked_row(conn: sa.Connection, export_name: str) -> sa.RowMapping | None:
    """The export's progression row, locked for this transaction. On PostgreSQL the row is
    created first (ON CONFLICT DO NOTHING) so two first writers do not both insert it, and
    FOR UPDATE makes the read-compare-write atomic (no lost update); SQLite's BEGIN IMMEDIATE
    already serializes the whole transaction."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert  # PostgreSQL stores only

        conn.execute(pg_insert(export_progression).values(export_name=export_name).on_conflict_do_nothing(
            index_elements=[export_progression.c.export_name]))
    return conn.execute(sa.select(export_progression).where(
        export_progression.c.export_name == export_name).with_for_update()).mappings().first()


class ProgressionStore(StoreBase):
    def record_committed_incremental(self, export_name: str, cursor: str, run_id: str) -> None:
        now = utc_now_text()
        with self.engine.begin() as conn:
            row = _locked_row(conn, export_name)
            if row is not None and not cursor_advances(cursor, row["last_committed_cursor"]):
                return
            values = dict(last_committed_strategy="incremental", last_committed_cursor=cursor,
                          last_committed_chunk_index=None, last_committed_run_id=run_id,
                          last_committed_at=now)
            if row is None:
                conn.execute(export_progression.insert().values(export_name=export_name, **values))
            else:
                conn.execute(export_progression.update().where(
                    export_progression.c.export_name == export_name).values(**values))

    def record_committed_chunked(self, export_name: str, chunk_index: int, run_id: str) -> None:
        """Committed boundary of a chunked run: the highest completed chunk_index. No-op unless
        it is strictly above the stored committed chunk index. Strategy `chunked`, cursor NULL."""
        self._advance_chunked("committed", export_name, chunk_index, run_id)

    def record_verified_chunked(self, export_name: str, chunk_index: int, run_id: str) -> None:
        """Verified boundary (a clean `rivet reconcile`): highest verified chunk_index."""
        self._advance_chunked("verified", export_name, chunk_index, run_id)

    def _advance_chunked(self, which: str, export_name: str, chunk_index: int, run_id: str) -> None:
        col = f"last_{which}_chunk_index"
        with self.engine.begin() as conn:
            row = _locked_row(conn, export_name)
            stored = row[col] if row is not None else None
            if stored is not None and int(chunk_index) <= int(stored):
                return
            values = {f"last_{which}_strategy": "chunked", f"last_{which}_cursor": None, col: int(chunk_index),
                      f"last_{which}_run_id": run_id, f"last_{which}_at": utc_now_text()}
            if row is None:
                conn.execute(export_progression.insert().values(export_name=export_name, **values))
            else:
                conn.execute(export_progression.update().where(
                    export_progression.c.export_name == export_name).values(**values))

    def get_progression(self, export_name: str) -> dict[str, Any] | None:
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(export_progression).where(
                export_progression.c.export_name == export_name)).mappings().first()
        return dict(row) if row else None
