"""run_journal and run_status: the per-run event log and the lifecycle ledger."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from rivet_core.orchestrator import accepts_legacy_run_id
from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import run_journal, run_status


class RunLedgerStore(StoreBase):
    def store_journal(self, run_id: str, export_name: str, journal: dict[str, Any]) -> None:
        payload, now = json.dumps(journal, default=str), utc_now_text()
        with self.engine.begin() as conn:
            conn.execute(run_journal.delete().where(run_journal.c.run_id == run_id))
            conn.execute(run_journal.insert().values(
                run_id=run_id, export_name=export_name, finished_at=now, journal_json=payload))

    def list_journals(self, export_name: str, last: int = 5, run_id: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(run_journal.c.journal_json).where(run_journal.c.export_name == export_name)
        if run_id:
            q = q.where(run_journal.c.run_id == run_id)
        q = q.order_by(run_journal.c.finished_at.desc()).limit(last)
        with self.engine.begin() as conn:
            return [json.loads(raw) for raw in conn.execute(q).scalars()]

    @accepts_legacy_run_id
    def begin_run(self, run_id: str, export_name: str, prefix: str | None,
                  orchestrator_run_id: str | None = None) -> None:
        now = utc_now_text()
        with self.engine.begin() as conn:
            conn.execute(run_status.delete().where(run_status.c.run_id == run_id))
            conn.execute(run_status.insert().values(
                run_id=run_id, export_name=export_name, prefix=prefix, status="running",
                started_at=now, finished_at=None, orchestrator_run_id=orchestrator_run_id))

    def finish_run(self, run_id: str, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(run_status.update().where(run_status.c.run_id == run_id)
                         .values(status=status, finished_at=utc_now_text()))

    def get_run_status(self, run_id: str) -> dict[str, Any] | None:
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(run_status).where(run_status.c.run_id == run_id)).mappings().first()
        return dict(row) if row else None

    @accepts_legacy_run_id
    def core_reported_failure(self, orchestrator_run_id: str) -> bool:
        """True when the engine itself finalized a failed run for this orchestrator run (and so
        already sent its notification)."""
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(run_status.c.run_id).where(
                (run_status.c.orchestrator_run_id == orchestrator_run_id) & (run_status.c.status == "failed"))).first()
        return row is not None
