"""chunk_run / chunk_task: the checkpoint of a chunked export (docs/rivet-compat.md "State store"; docs/invariants.md I5, I6).

A checkpointed chunked run is one `chunk_run` row plus one `chunk_task` row per window.
Workers — threads, processes, or an orchestrator's runs on other machines — share it only
through these operations, each ONE transaction:

- SQLite: every transaction starts with `BEGIN IMMEDIATE` (database.py), i.e. it holds the
  database write lock from its first statement, so a select-then-update is atomic across
  processes.
- PostgreSQL: a claim locks the chosen task row with `FOR UPDATE OF chunk_task SKIP LOCKED`
  (a concurrent claimer skips it and takes the next one instead of waiting; `OF chunk_task`
  matters — locking the joined chunk_run row too would make every other claimer skip every
  task). Operations that can turn a completed task back into a not-completed one, or add
  tasks (claim of a specific task, re-export reset, add_chunk_tasks) take a share lock on the
  run row, and finalize takes an exclusive one, so they cannot interleave with finalize.

Invariants (docs/invariants.md):
- I5 (chunk task acyclicity): pending → running → completed | failed. `claim_next_chunk_task`
  takes only `pending` tasks, or `failed` ones with attempts < max_chunk_attempts, of an
  in-progress run; a completed task is never claimed by it. A non-retryable failure pins
  attempts at the maximum. Only explicit operations step back: resume resets (stale running
  → pending, failed → pending with a fresh budget), the M8 re-export reset (completed →
  pending), and a deliberate re-run of one window task (`claim_chunk_task`).
- I6 (finalize after all complete): `finalize_chunk_run_completed` counts the tasks that are
  not completed and marks the run completed in the same transaction, and refuses otherwise.

One in-progress run per export is enforced by the partial unique index
`idx_chunk_run_one_inprogress`; `create_chunk_run` turns its violation (two processes racing
to start a run) into `ChunkRunInProgress`.

Resume rehydration (docs/rivet-compat.md "Resume decisions and rehydration") reads file_log (`list_files_for_run`) and keeps a part only when its
chunk is completed here and its attempt name equals `chunk_task.file_name`:
`completed_chunk_files` and `find_chunk_task_by_file_name` give it those facts.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rivet_core.errors import ConfigError
from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.database import Transaction, in_list
from rivet_core.state.schema import chunk_run, chunk_task, insert_sql

#: (chunk_index, start_key, end_key, window_key)
ChunkTaskSpec = tuple[int, "str | None", "str | None", str]


@dataclass(frozen=True)
class ChunkRunRow:
    run_id: str
    export_name: str
    plan_hash: str
    status: str
    max_chunk_attempts: int
    strategy: str | None
    chunk_column: str | None
    chunk_size: int | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class ChunkTaskRow:
    run_id: str
    chunk_index: int
    start_key: str | None
    end_key: str | None
    window_key: str
    status: str
    attempts: int
    last_error: str | None
    rows_written: int | None
    file_name: str | None
    updated_at: str
    #: Who claimed it last (a process/thread/orchestrator run label), for forensics.
    worker: str | None = None
    #: The OS process that claimed it last (pid on host): which machine ran the window.
    worker_pid: int | None = None
    worker_host: str | None = None


class ChunkRunInProgress(ConfigError):
    """Another checkpointed run of this export is still in progress (a fresh run is refused).

    Message-first like every RivetError; `for_run` builds the standard message. The store
    raises it with `config_path="…"` (it does not know the config file): callers that do may
    catch it and re-raise `for_run(e.export_name, e.run_id, config_path)`."""

    def __init__(self, message: str, *, export_name: str | None = None, run_id: str | None = None) -> None:
        super().__init__(message, code="chunk_run_in_progress")
        self.export_name = export_name
        self.run_id = run_id

    @classmethod
    def for_run(cls, export_name: str, run_id: str, config_path: str = "…") -> ChunkRunInProgress:
        return cls(
            f"export '{export_name}': a chunk run (run_id {run_id}) is still in progress — resume it "
            f"with `rivet run -c {config_path} -e {export_name} --resume`, or clear it with "
            f"`rivet state reset-chunks -c {config_path} -e {export_name}`",
            export_name=export_name, run_id=run_id,
        )


class ChunkTaskNotRunning(RuntimeError):
    """complete/fail of a task that is not `running` (e.g. a stale worker whose task was
    reset and re-claimed, or already completed): the caller must not overwrite it."""


class ChunkRunIncomplete(RuntimeError):
    """finalize_chunk_run_completed refused: some tasks are not completed (I6)."""

    def __init__(self, run: ChunkRunRow, counts: dict[str, int]) -> None:
        not_done = sum(n for status, n in counts.items() if status != "completed")
        total = sum(counts.values())
        detail = ", ".join(f"{counts[s]} {s}" for s in ("pending", "running", "failed") if counts.get(s))
        super().__init__(
            f"chunk checkpoint incomplete for export '{run.export_name}' (run_id {run.run_id}): "
            f"{not_done} of {total} chunk tasks not completed ({detail}) — the run is not finalized; "
            f"resume it with `rivet run -c … -e {run.export_name} --resume`, or clear it with "
            f"`rivet state reset-chunks -c … -e {run.export_name}`"
        )
        self.run_id = run.run_id
        self.not_completed = not_done


_RUN_COLUMNS = ", ".join(ChunkRunRow.__dataclass_fields__)
_TASK_COLUMNS = ", ".join(ChunkTaskRow.__dataclass_fields__)
_SELECT_RUNS = f"SELECT {_RUN_COLUMNS} FROM chunk_run"
_SELECT_TASKS = f"SELECT {_TASK_COLUMNS} FROM chunk_task"
#: A claimable task (I5): pending, or failed with attempts left (chunk_run joined for the budget).
_CLAIMABLE = ("(chunk_task.status = 'pending' OR (chunk_task.status = 'failed' "
              "AND chunk_task.attempts < chunk_run.max_chunk_attempts))")
_ONE_TASK = "run_id = :run_id AND chunk_index = :chunk_index"
#: The run's attempt budget, as a value an UPDATE of its tasks can set (all attempts spent).
_RUN_BUDGET = "(SELECT max_chunk_attempts FROM chunk_run WHERE chunk_run.run_id = :run_id)"


def _run_row(row: dict) -> ChunkRunRow:
    return ChunkRunRow(**row)


def _task_row(row: dict) -> ChunkTaskRow:
    return ChunkTaskRow(**row)


def _task_values(run_id: str, tasks: Iterable[ChunkTaskSpec], now: str) -> list[dict]:
    values = []
    for chunk_index, start_key, end_key, window_key in tasks:
        values.append(dict(run_id=run_id, chunk_index=int(chunk_index), start_key=start_key, end_key=end_key,
                           window_key=window_key, status="pending", attempts=0, updated_at=now))
    return values


def _insert_tasks(tx: Transaction, values: list[dict]) -> None:
    """One executemany: every row has the same keys."""
    tx.executemany(insert_sql(chunk_task, tuple(values[0])), values)


def _lock_run(tx: Transaction, run_id: str, *, exclusive: bool) -> ChunkRunRow | None:
    """Read the run row, locking it on PostgreSQL (share: many holders; exclusive: finalize).
    On SQLite the BEGIN IMMEDIATE transaction already excludes every other writer."""
    row = tx.execute(f"{_SELECT_RUNS} WHERE run_id = :run_id" + tx.locking("FOR UPDATE" if exclusive else "FOR SHARE"),
                     {"run_id": run_id}).first()
    return _run_row(row) if row else None


class ChunkStore(StoreBase):
    # ------------------------------------------------------------------ runs
    def create_chunk_run(
        self, run_id: str, export_name: str, plan_hash: str, max_chunk_attempts: int,
        strategy: str | None, chunk_column: str | None, chunk_size: int | None,
        tasks: Sequence[ChunkTaskSpec], *, completed: Mapping[int, tuple[int, str | None]] | None = None,
    ) -> None:
        """Create the run (status in_progress) and all its tasks (pending, attempts 0) in one
        transaction. Raises ChunkRunInProgress when the export already has an in-progress run —
        seen by the pre-check, or (two processes racing) by the partial unique index.

        `completed` (chunk_index → (rows_written, file_name)) inserts those tasks as already
        completed: an orchestrated chunk run continuing the previous, finalized one carries
        the windows that are completed (their parts stay where they are) and exports only
        the rest (rivet_core/pipeline/chunked/tasks.py)."""
        if max_chunk_attempts < 1:
            raise ValueError(f"max_chunk_attempts must be at least 1, got {max_chunk_attempts}")
        now = utc_now_text()
        try:
            with self.database.transaction() as tx:
                other = tx.execute("SELECT run_id FROM chunk_run WHERE export_name = :export_name "
                                   "AND status = 'in_progress'", {"export_name": export_name}).scalar()
                if other is not None:
                    raise ChunkRunInProgress.for_run(export_name, other)
                run = dict(run_id=run_id, export_name=export_name, plan_hash=plan_hash, status="in_progress",
                           max_chunk_attempts=int(max_chunk_attempts), strategy=strategy,
                           chunk_column=chunk_column, chunk_size=chunk_size, created_at=now, updated_at=now)
                tx.execute(insert_sql(chunk_run, tuple(run)), run)
                values = _task_values(run_id, tasks, now)
                for value in values:
                    carried = (completed or {}).get(value["chunk_index"])
                    value.update(rows_written=None, file_name=None)
                    if carried is not None:
                        value.update(status="completed", rows_written=int(carried[0]), file_name=carried[1])
                if values:
                    _insert_tasks(tx, values)
        except self.database.IntegrityError:
            # Our transaction rolled back, so a run in progress now is another opener's — also
            # when it has our run id (two openers in the same millisecond: `new_run_id`), which
            # the primary key, not the in-progress index, refused.
            winner = self.find_in_progress_chunk_run(export_name)
            if winner is not None:
                raise ChunkRunInProgress.for_run(export_name, winner.run_id) from None
            raise

    def find_in_progress_chunk_run(self, export_name: str) -> ChunkRunRow | None:
        return self._one_run(f"{_SELECT_RUNS} WHERE export_name = :export_name AND status = 'in_progress' "
                             "ORDER BY created_at DESC, run_id DESC LIMIT 1", {"export_name": export_name})

    def get_latest_chunk_run(self, export_name: str) -> ChunkRunRow | None:
        return self._one_run(f"{_SELECT_RUNS} WHERE export_name = :export_name "
                             "ORDER BY updated_at DESC, created_at DESC, run_id DESC LIMIT 1",
                             {"export_name": export_name})

    def get_chunk_run(self, run_id: str) -> ChunkRunRow | None:
        return self._one_run(f"{_SELECT_RUNS} WHERE run_id = :run_id", {"run_id": run_id})

    def list_chunk_runs(self, export_name: str, last: int = 10) -> list[ChunkRunRow]:
        with self.database.transaction() as tx:
            rows = tx.execute(f"{_SELECT_RUNS} WHERE export_name = :export_name "
                              "ORDER BY created_at DESC, run_id DESC LIMIT :last",
                              {"export_name": export_name, "last": last}).all()
        return [_run_row(r) for r in rows]

    def finalize_chunk_run_completed(self, run_id: str) -> bool:
        """Mark the run completed — only if every task is completed (I6). The count and the
        update are one transaction holding the run row exclusively, so no task can be reset,
        re-claimed or added in between. Raises ChunkRunIncomplete (a RuntimeError) naming how
        many tasks are not completed; finalizing an already completed run is a no-op.

        Returns True only for the call that made the transition: of two finalizers racing
        (two `<export>_manifest` runs), exactly one gets True and publishes; the other sees the
        run completed once it gets the row lock (or the write lock on SQLite) and gets False."""
        with self.database.transaction() as tx:
            run = _lock_run(tx, run_id, exclusive=True)
            if run is None:
                raise LookupError(f"cannot finalize chunk run {run_id}: no such run in the checkpoint")
            if run.status == "completed":
                return False
            if run.status != "in_progress":
                raise RuntimeError(f"cannot finalize chunk run {run_id} of export '{run.export_name}': "
                                   f"it is {run.status}, not in progress")
            counts = {r["status"]: int(r["n"]) for r in tx.execute(
                "SELECT status, count(*) AS n FROM chunk_task WHERE run_id = :run_id GROUP BY status",
                {"run_id": run_id}).all()}
            if any(n for status, n in counts.items() if status != "completed"):
                raise ChunkRunIncomplete(run, counts)
            n = tx.execute("UPDATE chunk_run SET status = 'completed', updated_at = :now "
                           "WHERE run_id = :run_id AND status = 'in_progress'",
                           {"run_id": run_id, "now": utc_now_text()}).rowcount
            return n == 1

    def mark_chunk_run_interrupted(self, run_id: str) -> None:
        """in_progress → interrupted (frees the export for a fresh run; never resumable)."""
        with self.database.transaction() as tx:
            tx.execute("UPDATE chunk_run SET status = 'interrupted', updated_at = :now "
                       "WHERE run_id = :run_id AND status = 'in_progress'", {"run_id": run_id, "now": utc_now_text()})

    def withdraw_chunk_run(self, run_id: str, reason: str) -> int:
        """A gate failed after windows were written (pipeline/chunked/withdraw.py): the run
        (in progress or just completed) → interrupted, so it is never resumed nor continued,
        and each completed task → failed with `reason` as its last_error and its attempt
        budget spent. One transaction; returns how many tasks were withdrawn."""
        params = {"run_id": run_id, "now": utc_now_text(), "reason": reason[:2000]}
        with self.database.transaction() as tx:
            tx.execute("UPDATE chunk_run SET status = 'interrupted', updated_at = :now "
                       "WHERE run_id = :run_id AND status IN ('in_progress', 'completed')", params)
            return tx.execute(f"UPDATE chunk_task SET status = 'failed', last_error = :reason, "
                              f"attempts = {_RUN_BUDGET}, updated_at = :now "
                              "WHERE run_id = :run_id AND status = 'completed'", params).rowcount

    def reset_chunk_checkpoint(self, export_name: str, *, stuck_only: bool = False,
                               failed_only: bool = False) -> int:
        """Delete chunk runs of the export and their tasks; returns how many runs were deleted.
        stuck_only: only in-progress runs. failed_only: only runs with at least one failed task.
        Both: in-progress runs with a failed task."""
        q = "SELECT run_id FROM chunk_run WHERE export_name = :export_name"
        if stuck_only:
            q += " AND status = 'in_progress'"
        if failed_only:
            q += (" AND EXISTS (SELECT 1 FROM chunk_task WHERE chunk_task.run_id = chunk_run.run_id "
                  "AND chunk_task.status = 'failed')")
        with self.database.transaction() as tx:
            run_ids = tx.execute(q, {"export_name": export_name}).scalars()
            if not run_ids:
                return 0
            ids, params = in_list("run_id", run_ids)
            tx.execute(f"DELETE FROM chunk_task WHERE run_id IN {ids}", params)
            return tx.execute(f"DELETE FROM chunk_run WHERE run_id IN {ids}", params).rowcount

    # ----------------------------------------------------------------- tasks
    def add_chunk_tasks(self, run_id: str, tasks: Sequence[ChunkTaskSpec]) -> int:
        """Append windows to an in-progress run (planning saw the table grow; pipeline/chunked/tasks.py).
        Existing chunk_index values, and windows whose window_key is already a task (a window
        is identified by its key; two planners may number a new window alike), are skipped;
        returns how many tasks were added."""
        now = utc_now_text()
        with self.database.transaction() as tx:
            run = _lock_run(tx, run_id, exclusive=True)  # serializes two planners of one run
            if run is None or run.status != "in_progress":
                state = "does not exist" if run is None else f"is {run.status}"
                raise RuntimeError(f"cannot add chunk tasks to run {run_id}: it {state} (must be in progress)")
            rows = tx.execute("SELECT chunk_index, window_key FROM chunk_task WHERE run_id = :run_id",
                              {"run_id": run_id}).all()
            existing = {int(r["chunk_index"]) for r in rows}
            keys = {r["window_key"] for r in rows}
            fresh: dict[int, ChunkTaskSpec] = {}
            for spec in tasks:
                if int(spec[0]) not in existing and spec[3] not in keys:
                    fresh.setdefault(int(spec[0]), spec)
                    keys.add(spec[3])
            if fresh:
                _insert_tasks(tx, _task_values(run_id, fresh.values(), now))
                tx.execute("UPDATE chunk_run SET updated_at = :now WHERE run_id = :run_id",
                           {"run_id": run_id, "now": now})
            return len(fresh)

    def claim_next_chunk_task(self, run_id: str, worker: str | None = None) -> ChunkTaskRow | None:
        """Atomically claim the lowest-index claimable task of an in-progress run: `pending`,
        or `failed` with attempts < max_chunk_attempts (I5: never a completed or running one).
        Sets running, attempts + 1, worker. None when nothing is claimable right now."""
        now = utc_now_text()
        with self.database.transaction() as tx:
            task_id = tx.execute(
                "SELECT chunk_task.id FROM chunk_task JOIN chunk_run ON chunk_run.run_id = chunk_task.run_id "
                f"WHERE chunk_task.run_id = :run_id AND chunk_run.status = 'in_progress' AND {_CLAIMABLE} "
                "ORDER BY chunk_task.chunk_index LIMIT 1" + tx.locking("FOR UPDATE OF chunk_task SKIP LOCKED"),
                {"run_id": run_id}).scalar()
            if task_id is None:
                return None
            return self._mark_running(tx, task_id, worker, now)

    def claim_chunk_task(self, run_id: str, chunk_index: int, worker: str | None = None, *,
                         reclaim_from: str | None = None, fresh_budget: bool = False) -> ChunkTaskRow | None:
        """Claim one SPECIFIC task (a window batch, pipeline/chunked/tasks.py): pending, failed with attempts left,
        or completed (a deliberate re-run of that window) → running, attempts + 1.
        None when the run is not in progress, the task does not exist, it is running elsewhere,
        or it is failed with its attempts used up (reset it on resume first). A re-claimed
        completed task keeps its previous file_name until it completes again, so the caller can
        supersede (quarantine) the previous attempt's parts.

        `reclaim_from`: also take a task that is `running` for exactly that worker — the caller
        knows that worker is gone (an orchestrator run that crashed or failed mid-commit). It is a
        compare-and-swap: a task claimed since by anyone else is not taken. The old worker's
        late complete/fail then raises ChunkTaskNotRunning (its result is discarded).
        `fresh_budget`: a failed task whose attempts are used up is claimable too, with its
        attempts reset first (a deliberate re-run is the orchestrated form of resume)."""
        now = utc_now_text()
        with self.database.transaction() as tx:
            run = _lock_run(tx, run_id, exclusive=False)  # completed → running must not race finalize
            if run is None or run.status != "in_progress":
                return None
            task = tx.execute(f"SELECT id, status, attempts, worker FROM chunk_task WHERE {_ONE_TASK}"
                              + tx.locking("FOR UPDATE SKIP LOCKED"),
                              {"run_id": run_id, "chunk_index": int(chunk_index)}).first()
            if task is None:
                return None
            one = {"id": task["id"]}
            if task["status"] == "running":
                if reclaim_from is None or task["worker"] != reclaim_from:
                    return None
                tx.execute("UPDATE chunk_task SET status = 'pending', worker = NULL "
                           "WHERE id = :id AND status = 'running' AND worker = :reclaim_from",
                           {**one, "reclaim_from": reclaim_from})
            elif task["status"] == "failed" and task["attempts"] >= run.max_chunk_attempts:
                if not fresh_budget:
                    return None
                tx.execute("UPDATE chunk_task SET attempts = 0 WHERE id = :id", one)
            if task["status"] == "completed":  # a deliberate re-run: a fresh attempt budget
                tx.execute("UPDATE chunk_task SET attempts = 0 WHERE id = :id", one)
            return self._mark_running(tx, task["id"], worker, now)

    @staticmethod
    def _mark_running(tx: Transaction, task_id: int, worker: str | None, now: str) -> ChunkTaskRow | None:
        claimed = tx.execute(
            "UPDATE chunk_task SET status = 'running', attempts = attempts + 1, worker = :worker, "
            "updated_at = :now, worker_pid = :pid, worker_host = :host WHERE id = :id AND status != 'running'",
            {"id": task_id, "worker": worker, "now": now, "pid": os.getpid(), "host": socket.gethostname()}
        ).rowcount
        if claimed != 1:  # defensive: the row lock / write lock makes this unreachable
            return None
        row = tx.execute(f"{_SELECT_TASKS} WHERE id = :id", {"id": task_id}).first()
        assert row is not None  # updated in this transaction
        return _task_row(row)

    def complete_chunk_task(self, run_id: str, chunk_index: int, rows_written: int, file_name: str | None,
                            *, worker: str | None = None) -> None:
        """running → completed with rows_written and file_name (the FIRST part of the attempt;
        None when the window produced no file), last_error NULL. Raises ChunkTaskNotRunning if
        the task is not running (or, when `worker` is given, is running for another worker):
        a stale worker must not overwrite a task that was reset or re-claimed."""
        self._finish_running(run_id, chunk_index, worker, "complete",
                             "status = 'completed', rows_written = :rows_written, file_name = :file_name, "
                             "last_error = NULL", {"rows_written": int(rows_written), "file_name": file_name})

    def fail_chunk_task(self, run_id: str, chunk_index: int, error: str, retryable: bool,
                        *, worker: str | None = None) -> None:
        """running → failed, last_error = error (the caller has redacted it). Not retryable:
        attempts = max_chunk_attempts, so it is never claimed again until a resume resets it.
        Raises ChunkTaskNotRunning like complete_chunk_task (never turns a completed task failed)."""
        assignments = "status = 'failed', last_error = :error"
        if not retryable:
            assignments += f", attempts = {_RUN_BUDGET}"
        self._finish_running(run_id, chunk_index, worker, "fail", assignments, {"error": error})

    def _finish_running(self, run_id: str, chunk_index: int, worker: str | None, verb: str,
                        assignments: str, values: dict) -> None:
        params = {**values, "run_id": run_id, "chunk_index": int(chunk_index), "worker": worker,
                  "now": utc_now_text()}
        where = f"{_ONE_TASK} AND status = 'running'" + (" AND worker = :worker" if worker is not None else "")
        with self.database.transaction() as tx:
            n = tx.execute(f"UPDATE chunk_task SET {assignments}, updated_at = :now WHERE {where}", params).rowcount
            if n == 1:
                return
            current = tx.execute(f"SELECT status, worker FROM chunk_task WHERE {_ONE_TASK}", params).first()
        if current is None:
            raise ChunkTaskNotRunning(f"cannot {verb} chunk {chunk_index} of run {run_id}: no such task")
        owner = f" by worker {current['worker']!r}" if current["status"] == "running" and current["worker"] else ""
        raise ChunkTaskNotRunning(
            f"cannot {verb} chunk {chunk_index} of run {run_id}: it is {current['status']}{owner}, "
            f"not running for this worker — it was reset or claimed again; this result is discarded")

    def reset_stale_running_chunk_tasks(self, run_id: str) -> int:
        """running → pending (resume after a crash: nobody is working on them any more)."""
        return self._reset(run_id, "status = 'running'", "status = 'pending', worker = NULL")

    def return_orphaned_chunk_task(self, run_id: str, chunk_index: int, worker: str, reason: str) -> bool:
        """running for `worker` → pending, attempts kept (I5: they still bound the window), the
        worker kept for forensics and last_error = reason. The caller knows `worker` ended
        without finishing the task (an orchestrator run that was killed or terminated). A
        compare-and-swap: False when the task was claimed or finished since."""
        params = {"run_id": run_id, "chunk_index": int(chunk_index), "worker": worker, "reason": reason,
                  "now": utc_now_text()}
        with self.database.transaction() as tx:
            return tx.execute("UPDATE chunk_task SET status = 'pending', last_error = :reason, updated_at = :now "
                              f"WHERE {_ONE_TASK} AND status = 'running' AND worker = :worker", params).rowcount == 1

    def reset_failed_chunk_tasks_for_resume(self, run_id: str) -> int:
        """failed → pending with attempts 0 (an explicit --resume gives pinned chunks a fresh
        budget); completed and pending tasks are untouched."""
        return self._reset(run_id, "status = 'failed'", "status = 'pending', attempts = 0, worker = NULL")

    def reset_chunk_task_for_re_export(self, run_id: str, chunk_index: int, reason: str) -> None:
        """completed → pending, attempts 0, file_name/rows_written NULL, last_error = reason
        (resume found its part missing or divergent: M8 rewrite/quarantine). A task that is not
        completed is left alone (it will be exported anyway); an unknown task raises LookupError,
        and a run that is not in progress RuntimeError (a finalized run stays fully completed, I6)."""
        params = {"run_id": run_id, "chunk_index": int(chunk_index), "reason": reason, "now": utc_now_text()}
        with self.database.transaction() as tx:
            run = _lock_run(tx, run_id, exclusive=False)
            if run is None or run.status != "in_progress":
                state = "does not exist" if run is None else f"is {run.status}"
                raise RuntimeError(f"cannot reset chunk {chunk_index} of run {run_id} for re-export: "
                                   f"the run {state} (must be in progress)")
            n = tx.execute("UPDATE chunk_task SET status = 'pending', attempts = 0, file_name = NULL, "
                           "rows_written = NULL, last_error = :reason, worker = NULL, updated_at = :now "
                           f"WHERE {_ONE_TASK} AND status = 'completed'", params).rowcount
            if n == 0 and tx.execute(f"SELECT id FROM chunk_task WHERE {_ONE_TASK}", params).first() is None:
                raise LookupError(f"chunk {chunk_index} of run {run_id} does not exist")

    def _reset(self, run_id: str, which: str, assignments: str) -> int:
        with self.database.transaction() as tx:
            return tx.execute(f"UPDATE chunk_task SET {assignments}, updated_at = :now "
                              f"WHERE run_id = :run_id AND {which}",
                              {"run_id": run_id, "now": utc_now_text()}).rowcount

    # --------------------------------------------------------------- readers
    def count_chunk_tasks_not_completed(self, run_id: str) -> int:
        return self._count(run_id, " AND status != 'completed'")

    def count_chunk_tasks(self, run_id: str) -> int:
        return self._count(run_id, "")

    def list_chunk_tasks(self, run_id: str) -> list[ChunkTaskRow]:
        with self.database.transaction() as tx:
            rows = tx.execute(f"{_SELECT_TASKS} WHERE run_id = :run_id ORDER BY chunk_index",
                              {"run_id": run_id}).all()
        return [_task_row(r) for r in rows]

    def get_chunk_task(self, run_id: str, chunk_index: int) -> ChunkTaskRow | None:
        with self.database.transaction() as tx:
            row = tx.execute(f"{_SELECT_TASKS} WHERE {_ONE_TASK}",
                             {"run_id": run_id, "chunk_index": int(chunk_index)}).first()
        return _task_row(row) if row else None

    def find_chunk_task_by_file_name(self, run_id: str, file_name: str) -> ChunkTaskRow | None:
        """The task whose recorded attempt (chunk_task.file_name) is this part (M8 rewrite)."""
        with self.database.transaction() as tx:
            row = tx.execute(f"{_SELECT_TASKS} WHERE run_id = :run_id AND file_name = :file_name "
                             "ORDER BY chunk_index LIMIT 1", {"run_id": run_id, "file_name": file_name}).first()
        return _task_row(row) if row else None

    def completed_chunk_files(self, run_id: str) -> dict[int, str | None]:
        """chunk_index → recorded file_name of every completed task (rehydration keeps a
        file_log part only if its chunk is here and its attempt name equals this value)."""
        with self.database.transaction() as tx:
            rows = tx.execute("SELECT chunk_index, file_name FROM chunk_task WHERE run_id = :run_id "
                              "AND status = 'completed'", {"run_id": run_id}).all()
        return {int(r["chunk_index"]): r["file_name"] for r in rows}

    def max_completed_chunk_index(self, run_id: str) -> int | None:
        """Highest completed chunk_index (what progression records as committed, docs/invariants.md PG2)."""
        with self.database.transaction() as tx:
            value = tx.execute("SELECT max(chunk_index) FROM chunk_task WHERE run_id = :run_id "
                               "AND status = 'completed'", {"run_id": run_id}).scalar()
        return None if value is None else int(value)

    def _count(self, run_id: str, which: str) -> int:
        with self.database.transaction() as tx:
            return int(tx.execute(f"SELECT count(*) FROM chunk_task WHERE run_id = :run_id{which}",
                                  {"run_id": run_id}).scalar())

    def _one_run(self, sql: str, params: dict) -> ChunkRunRow | None:
        with self.database.transaction() as tx:
            row = tx.execute(sql, params).first()
        return _run_row(row) if row else None

    def record_repaired_chunk(self, run_id: str, chunk_index: int, rows_written: int,
                              file_name: str | None) -> None:
        """`rivet repair --execute`: a completed task was re-exported as new parts; record the
        new attempt (completed → completed). Raises if the task is not completed."""
        with self.database.transaction() as tx:
            n = tx.execute("UPDATE chunk_task SET rows_written = :rows_written, file_name = :file_name, "
                           f"last_error = NULL, updated_at = :now WHERE {_ONE_TASK} AND status = 'completed'",
                           {"run_id": run_id, "chunk_index": chunk_index, "rows_written": rows_written,
                            "file_name": file_name, "now": utc_now_text()}).rowcount
        if n != 1:
            raise RuntimeError(f"chunk {chunk_index} of run {run_id} is not completed; repair re-exports "
                               "completed chunks only — resume the run first")
