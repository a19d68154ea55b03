"""export_state: the incremental cursor (written only by RunStore, after the manifest: I3)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import export_progression, export_state


@dataclass(frozen=True)
class CursorRow:
    export_name: str
    last_cursor_value: str | None
    last_run_at: str | None


class CursorStore(StoreBase):
    def get_cursor(self, export_name: str) -> str | None:
        with self.engine.begin() as conn:
            return conn.execute(
                sa.select(export_state.c.last_cursor_value).where(export_state.c.export_name == export_name)
            ).scalar()

    def set_cursor(self, export_name: str, value: str) -> None:
        """Upsert the cursor. No monotonicity check here: ordering is RunStore's job.
        When this store holds the export's run lock, the write is conditional on still holding
        it, checked in the same transaction (state/locks.py: a run whose lock was swept as
        stale raises ExportLockLost instead of racing the run that took it over)."""
        now = utc_now_text()
        with self.engine.begin() as conn:
            guard = getattr(self, "_assert_lock_held", None)  # ExportLockStore, in the StateStore
            if guard is not None:
                guard(conn, export_name)
            updated = conn.execute(
                export_state.update()
                .where(export_state.c.export_name == export_name)
                .values(last_cursor_value=value, last_run_at=now)
            ).rowcount
            if not updated:
                conn.execute(export_state.insert().values(
                    export_name=export_name, last_cursor_value=value, last_run_at=now))

    def reset_export(self, export_name: str) -> bool:
        """Delete the cursor and the progression row (`rivet state reset`)."""
        with self.engine.begin() as conn:
            n = conn.execute(export_state.delete().where(export_state.c.export_name == export_name)).rowcount
            conn.execute(export_progression.delete().where(export_progression.c.export_name == export_name))
        return bool(n)

    def list_cursors(self) -> list[CursorRow]:
        with self.engine.begin() as conn:
            rows = conn.execute(sa.select(export_state).order_by(export_state.c.export_name)).mappings()
            return [CursorRow(r["export_name"], r["last_cursor_value"], r["last_run_at"]) for r in rows]
