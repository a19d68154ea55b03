"""export_state: the incremental cursor (written only by RunStore, after the manifest: I3)."""

from __future__ import annotations

from dataclasses import dataclass

from rivet_core.state._base import StoreBase, utc_now_text


@dataclass(frozen=True)
class CursorRow:
    export_name: str
    last_cursor_value: str | None
    last_run_at: str | None


class CursorStore(StoreBase):
    def get_cursor(self, export_name: str) -> str | None:
        with self.database.transaction() as tx:
            return tx.execute("SELECT last_cursor_value FROM export_state WHERE export_name = :export_name",
                              {"export_name": export_name}).scalar()

    def set_cursor(self, export_name: str, value: str) -> None:
        """Upsert the cursor. No monotonicity check here: ordering is RunStore's job.
        When this store holds the export's run lock, the write is conditional on still holding
        it, checked in the same transaction (state/locks.py: a run whose lock was swept as
        stale raises ExportLockLost instead of racing the run that took it over)."""
        row = {"export_name": export_name, "last_cursor_value": value, "last_run_at": utc_now_text()}
        with self.database.transaction() as tx:
            guard = getattr(self, "_assert_lock_held", None)  # ExportLockStore, in the StateStore
            if guard is not None:
                guard(tx, export_name)
            updated = tx.execute("UPDATE export_state SET last_cursor_value = :last_cursor_value, "
                                 "last_run_at = :last_run_at WHERE export_name = :export_name", row).rowcount
            if not updated:
                tx.execute("INSERT INTO export_state (export_name, last_cursor_value, last_run_at) "
                           "VALUES (:export_name, :last_cursor_value, :last_run_at)", row)

    def reset_export(self, export_name: str) -> bool:
        """Delete the cursor and the progression row (`rivet state reset`)."""
        key = {"export_name": export_name}
        with self.database.transaction() as tx:
            n = tx.execute("DELETE FROM export_state WHERE export_name = :export_name", key).rowcount
            tx.execute("DELETE FROM export_progression WHERE export_name = :export_name", key)
        return bool(n)

    def list_cursors(self) -> list[CursorRow]:
        with self.database.transaction() as tx:
            rows = tx.execute("SELECT export_name, last_cursor_value, last_run_at FROM export_state "
                              "ORDER BY export_name").all()
        return [CursorRow(r["export_name"], r["last_cursor_value"], r["last_run_at"]) for r in rows]
