"""export_progression: advisory committed/verified boundaries (never read by execution)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.database import Transaction
from rivet_core.state.schema import columns_sql, export_progression, insert_sql, set_sql

_SELECT = f"SELECT {columns_sql(export_progression)} FROM export_progression WHERE export_name = :export_name"


def cursor_advances(new: str, old: str | None) -> bool:
    """True when `new` is strictly after `old`: numeric if both parse, else byte-wise text."""
    if old is None:
        return True
    try:
        return Decimal(new) > Decimal(old)
    except (InvalidOperation, ValueError):
        return new.encode() > old.encode()


def _locked_row(tx: Transaction, export_name: str) -> dict[str, Any] | None:
    """The export's progression row, locked for this transaction. On PostgreSQL the row is
    created first (ON CONFLICT DO NOTHING) so two first writers do not both insert it, and
    FOR UPDATE makes the read-compare-write atomic (no lost update); SQLite's BEGIN IMMEDIATE
    already serializes the whole transaction."""
    key = {"export_name": export_name}
    if tx.postgresql:
        tx.execute("INSERT INTO export_progression (export_name) VALUES (:export_name) "
                   "ON CONFLICT (export_name) DO NOTHING", key)
    return tx.execute(_SELECT + tx.locking("FOR UPDATE"), key).first()


def _write(tx: Transaction, export_name: str, exists: bool, values: dict[str, Any]) -> None:
    if exists:
        tx.execute(f"UPDATE export_progression SET {set_sql(values)} WHERE export_name = :export_name",
                   {**values, "export_name": export_name})
    else:
        row = {"export_name": export_name, **values}
        tx.execute(insert_sql(export_progression, tuple(row)), row)


class ProgressionStore(StoreBase):
    def record_committed_incremental(self, export_name: str, cursor: str, run_id: str) -> None:
        now = utc_now_text()
        with self.database.transaction() as tx:
            row = _locked_row(tx, export_name)
            if row is not None and not cursor_advances(cursor, row["last_committed_cursor"]):
                return
            _write(tx, export_name, row is not None, dict(
                last_committed_strategy="incremental", last_committed_cursor=cursor,
                last_committed_chunk_index=None, last_committed_run_id=run_id, last_committed_at=now))

    def record_committed_chunked(self, export_name: str, chunk_index: int, run_id: str) -> None:
        """Committed boundary of a chunked run: the highest completed chunk_index. No-op unless
        it is strictly above the stored committed chunk index. Strategy `chunked`, cursor NULL."""
        self._advance_chunked("committed", export_name, chunk_index, run_id)

    def record_verified_chunked(self, export_name: str, chunk_index: int, run_id: str) -> None:
        """Verified boundary (a clean `rivet reconcile`): highest verified chunk_index."""
        self._advance_chunked("verified", export_name, chunk_index, run_id)

    def _advance_chunked(self, which: str, export_name: str, chunk_index: int, run_id: str) -> None:
        col = f"last_{which}_chunk_index"
        with self.database.transaction() as tx:
            row = _locked_row(tx, export_name)
            stored = row[col] if row is not None else None
            if stored is not None and int(chunk_index) <= int(stored):
                return
            _write(tx, export_name, row is not None, {
                f"last_{which}_strategy": "chunked", f"last_{which}_cursor": None, col: int(chunk_index),
                f"last_{which}_run_id": run_id, f"last_{which}_at": utc_now_text()})

    def get_progression(self, export_name: str) -> dict[str, Any] | None:
        with self.database.transaction() as tx:
            return tx.execute(_SELECT, {"export_name": export_name}).first()
