"""run_journal and run_status: the per-run event log and the lifecycle ledger."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rivet_core.orchestrator import accepts_legacy_run_id
from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import columns_sql, run_status


@dataclass(frozen=True)
class PublishedRuns:
    """What the run ledger says was published at a prefix (`RunLedgerStore.published_runs`)."""

    count: int
    last_run_id: str
    last_finished_at: str

    def evidence(self) -> str:
        """One line for a verdict: how many successes, the last one."""
        return (f"the state store records {self.count} successful run(s) here, the last "
                f"'{self.last_run_id}' finished {self.last_finished_at}")


def _like_escape(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


class RunLedgerStore(StoreBase):
    def store_journal(self, run_id: str, export_name: str, journal: dict[str, Any]) -> None:
        row = {"run_id": run_id, "export_name": export_name, "finished_at": utc_now_text(),
               "journal_json": json.dumps(journal, default=str)}
        with self.database.transaction() as tx:
            tx.execute("DELETE FROM run_journal WHERE run_id = :run_id", row)
            tx.execute("INSERT INTO run_journal (run_id, export_name, finished_at, journal_json) "
                       "VALUES (:run_id, :export_name, :finished_at, :journal_json)", row)

    def list_journals(self, export_name: str, last: int = 5, run_id: str | None = None) -> list[dict[str, Any]]:
        where = "export_name = :export_name" + (" AND run_id = :run_id" if run_id else "")
        with self.database.transaction() as tx:
            raws = tx.execute(f"SELECT journal_json FROM run_journal WHERE {where} "
                              "ORDER BY finished_at DESC LIMIT :last",
                              {"export_name": export_name, "run_id": run_id, "last": last}).scalars()
        return [json.loads(raw) for raw in raws]

    @accepts_legacy_run_id
    def begin_run(self, run_id: str, export_name: str, prefix: str | None,
                  orchestrator_run_id: str | None = None) -> None:
        row = {"run_id": run_id, "export_name": export_name, "prefix": prefix, "status": "running",
               "started_at": utc_now_text(), "finished_at": None, "orchestrator_run_id": orchestrator_run_id}
        with self.database.transaction() as tx:
            tx.execute("DELETE FROM run_status WHERE run_id = :run_id", {"run_id": run_id})
            tx.execute("INSERT INTO run_status (run_id, export_name, prefix, status, started_at, finished_at, "
                       "orchestrator_run_id) VALUES (:run_id, :export_name, :prefix, :status, :started_at, "
                       ":finished_at, :orchestrator_run_id)", row)

    def finish_run(self, run_id: str, status: str) -> None:
        with self.database.transaction() as tx:
            tx.execute("UPDATE run_status SET status = :status, finished_at = :finished_at WHERE run_id = :run_id",
                       {"run_id": run_id, "status": status, "finished_at": utc_now_text()})

    def fail_dead_runs(self, export_name: str, live: set[str], started_before: str) -> list[str]:
        """Mark `failed` the export's `running` rows of runs that are gone; returns their ids.

        A run killed outright (SIGKILL, OOM, a lost machine) never reaches `finish_run`, so its
        row would say `running` forever. The caller holds the export's exclusive lock and names
        the runs that are `live` (the run ids on live lock rows, its own included); a row of
        another run is then a dead run's. Rows started at or after `started_before` (when the
        caller read the lock rows) are left alone: a run that took its lock since may not have
        recorded its run id on it yet. A chunk run's row is left alone too: it stays `running`
        between the window batches of many processes (pipeline/chunked/tasks.py decides its fate)."""
        params = {"name": export_name, "before": started_before}
        with self.database.transaction() as tx:
            rows = tx.execute("SELECT run_id FROM run_status WHERE export_name = :name AND status = 'running' "
                              "AND started_at < :before AND run_id NOT IN "
                              "(SELECT run_id FROM chunk_run WHERE export_name = :name)", params).scalars()
            dead = sorted(str(r) for r in rows if str(r) not in live)
            for run_id in dead:
                tx.execute("UPDATE run_status SET status = 'failed', finished_at = :now "
                           "WHERE run_id = :run_id AND status = 'running'", {"run_id": run_id, "now": utc_now_text()})
        return dead

    def published_runs(self, export_name: str, prefix: str) -> PublishedRuns | None:
        """The successful runs the ledger records for `export_name` at `prefix` or below it
        (a time partition's or a bucket's prefix; a bucket's runs are named
        `<export>__<label>`), or None when it records none. `rivet validate` asks this when a
        prefix has no manifest: a prefix the ledger says was published cannot be a legacy one."""
        under = prefix.rstrip("/") + "/"
        with self.database.transaction() as tx:
            rows = tx.execute(
                "SELECT run_id, prefix, finished_at FROM run_status WHERE status = 'success' "
                "AND (export_name = :name OR export_name LIKE :buckets ESCAPE '!') "
                "AND (prefix = :prefix OR prefix LIKE :under ESCAPE '!')",
                {"name": export_name, "buckets": _like_escape(export_name + "__") + "%",
                 "prefix": prefix, "under": _like_escape(under) + "%"}).all()
        if not rows:
            return None
        last = max(rows, key=lambda r: str(r["finished_at"] or ""))
        return PublishedRuns(count=len(rows), last_run_id=str(last["run_id"]),
                             last_finished_at=str(last["finished_at"] or ""))

    def get_run_status(self, run_id: str) -> dict[str, Any] | None:
        with self.database.transaction() as tx:
            return tx.execute(f"SELECT {columns_sql(run_status)} FROM run_status WHERE run_id = :run_id",
                              {"run_id": run_id}).first()

    @accepts_legacy_run_id
    def core_reported_failure(self, orchestrator_run_id: str) -> bool:
        """True when the engine itself finalized a failed run for this orchestrator run (and so
        already sent its notification)."""
        with self.database.transaction() as tx:
            row = tx.execute("SELECT run_id FROM run_status WHERE orchestrator_run_id = :orchestrator_run_id "
                             "AND status = 'failed'", {"orchestrator_run_id": orchestrator_run_id}).first()
        return row is not None
