"""chunk_run / chunk_task: the checkpoint of a chunked export (docs/rivet-compat.md "State store"; docs/invariants.md I5, I6).

A checkpointed chunked run is one `chunk_run` row plus one `chunk_task` row per window.
Workers — threads, processes, or an orchestrator's runs on other machines — share it only
through these operations, each ONE transaction:

- SQLite: every transaction starts with `BEGIN IMMEDIATE` (engine.py), i.e. it holds the
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

import sqlalchemy as sa

from rivet_core.errors import ConfigError
from rivet_core.state._base import StoreBase, utc_now_text
from rivet_core.state.schema import chunk_run, chunk_task

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


_RUN_COLUMNS = [chunk_run.c[name] for name in ChunkRunRow.__dataclass_fields__]
_TASK_COLUMNS = [chunk_task.c[name] for name in ChunkTaskRow.__dataclass_fields__]
_CLAIMABLE = sa.or_(
    chunk_task.c.status == "pending",
    sa.and_(chunk_task.c.status == "failed", chunk_task.c.attempts < chunk_run.c.max_chunk_attempts),
)


def _run_row(row: sa.RowMapping) -> ChunkRunRow:
    return ChunkRunRow(**{k: row[k] for k in ChunkRunRow.__dataclass_fields__})


def _task_row(row: sa.RowMapping) -> ChunkTaskRow:
    return ChunkTaskRow(**{k: row[k] for k in ChunkTaskRow.__dataclass_fields__})


def _task_values(run_id: str, tasks: Iterable[ChunkTaskSpec], now: str) -> list[dict]:
    values = []
    for chunk_index, start_key, end_key, window_key in tasks:
        values.append(dict(run_id=run_id, chunk_index=int(chunk_index), start_key=start_key, end_key=end_key,
                           window_key=window_key, status="pending", attempts=0, updated_at=now))
    return values


def _lock_run(conn: sa.Connection, run_id: str, *, exclusive: bool) -> ChunkRunRow | None:
    """Read the run row, locking it on PostgreSQL (share: many holders; exclusive: finalize).
    On SQLite the BEGIN IMMEDIATE transaction already excludes every other writer."""
    q = sa.select(*_RUN_COLUMNS).where(chunk_run.c.run_id == run_id)
    q = q.with_for_update(read=not exclusive)  # SQLite renders no locking clause
    row = conn.execute(q).mappings().first()
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
        the rest (rivet_core/pipeline/chunk_tasks.py)."""
        if max_chunk_attempts < 1:
            raise ValueError(f"max_chunk_attempts must be at least 1, got {max_chunk_attempts}")
        now = utc_now_text()
        try:
            with self.engine.begin() as conn:
                other = conn.execute(sa.select(chunk_run.c.run_id).where(
                    (chunk_run.c.export_name == export_name) & (chunk_run.c.status == "in_progress"))).scalar()
                if other is not None:
                    raise ChunkRunInProgress.for_run(export_name, other)
                conn.execute(chunk_run.insert().values(
                    run_id=run_id, export_name=export_name, plan_hash=plan_hash, status="in_progress",
                    max_chunk_attempts=int(max_chunk_attempts), strategy=strategy, chunk_column=chunk_column,
                    chunk_size=chunk_size, created_at=now, updated_at=now))
                values = _task_values(run_id, tasks, now)
                for value in values:  # every row the same keys: one executemany
                    carried = (completed or {}).get(value["chunk_index"])
                    value.update(rows_written=None, file_name=None)
                    if carried is not None:
                        value.update(status="completed", rows_written=int(carried[0]), file_name=carried[1])
                if values:
                    conn.execute(chunk_task.insert(), values)
        except sa.exc.IntegrityError:
            winner = self.find_in_progress_chunk_run(export_name)
            if winner is not None and winner.run_id != run_id:
                raise ChunkRunInProgress.for_run(export_name, winner.run_id) from None
            raise

    def find_in_progress_chunk_run(self, export_name: str) -> ChunkRunRow | None:
        return self._one_run(sa.select(*_RUN_COLUMNS).where(
            (chunk_run.c.export_name == export_name) & (chunk_run.c.status == "in_progress"))
            .order_by(chunk_run.c.created_at.desc(), chunk_run.c.run_id.desc()).limit(1))

    def get_latest_chunk_run(self, export_name: str) -> ChunkRunRow | None:
        return self._one_run(sa.select(*_RUN_COLUMNS).where(chunk_run.c.export_name == export_name)
                             .order_by(chunk_run.c.updated_at.desc(), chunk_run.c.created_at.desc(),
                                       chunk_run.c.run_id.desc()).limit(1))

    def get_chunk_run(self, run_id: str) -> ChunkRunRow | None:
        return self._one_run(sa.select(*_RUN_COLUMNS).where(chunk_run.c.run_id == run_id))

    def list_chunk_runs(self, export_name: str, last: int = 10) -> list[ChunkRunRow]:
        q = (sa.select(*_RUN_COLUMNS).where(chunk_run.c.export_name == export_name)
             .order_by(chunk_run.c.created_at.desc(), chunk_run.c.run_id.desc()).limit(last))
        with self.engine.begin() as conn:
            return [_run_row(r) for r in conn.execute(q).mappings()]

    def finalize_chunk_run_completed(self, run_id: str) -> bool:
        """Mark the run completed — only if every task is completed (I6). The count and the
        update are one transaction holding the run row exclusively, so no task can be reset,
        re-claimed or added in between. Raises ChunkRunIncomplete (a RuntimeError) naming how
        many tasks are not completed; finalizing an already completed run is a no-op.

        Returns True only for the call that made the transition: of two finalizers racing
        (two `<export>_manifest` runs), exactly one gets True and publishes; the other sees the
        run completed once it gets the row lock (or the write lock on SQLite) and gets False."""
        with self.engine.begin() as conn:
            run = _lock_run(conn, run_id, exclusive=True)
            if run is None:
                raise LookupError(f"cannot finalize chunk run {run_id}: no such run in the checkpoint")
            if run.status == "completed":
                return False
            if run.status != "in_progress":
                raise RuntimeError(f"cannot finalize chunk run {run_id} of export '{run.export_name}': "
                                   f"it is {run.status}, not in progress")
            counts = dict(conn.execute(
                sa.select(chunk_task.c.status, sa.func.count()).where(chunk_task.c.run_id == run_id)
                .group_by(chunk_task.c.status)).all())
            if any(n for status, n in counts.items() if status != "completed"):
                raise ChunkRunIncomplete(run, counts)
            n = conn.execute(chunk_run.update().where(
                (chunk_run.c.run_id == run_id) & (chunk_run.c.status == "in_progress"))
                .values(status="completed", updated_at=utc_now_text())).rowcount
            return n == 1

    def mark_chunk_run_interrupted(self, run_id: str) -> None:
        """in_progress → interrupted (frees the export for a fresh run; never resumable)."""
        with self.engine.begin() as conn:
            conn.execute(chunk_run.update().where(
                (chunk_run.c.run_id == run_id) & (chunk_run.c.status == "in_progress"))
                .values(status="interrupted", updated_at=utc_now_text()))

    def withdraw_chunk_run(self, run_id: str, reason: str) -> int:
        """A gate failed after windows were written (pipeline/chunk_withdraw.py): the run
        (in progress or just completed) → interrupted, so it is never resumed nor continued,
        and each completed task → failed with `reason` as its last_error and its attempt
        budget spent. One transaction; returns how many tasks were withdrawn."""
        now = utc_now_text()
        with self.engine.begin() as conn:
            conn.execute(chunk_run.update().where(
                (chunk_run.c.run_id == run_id) & chunk_run.c.status.in_(("in_progress", "completed")))
                .values(status="interrupted", updated_at=now))
            spent = sa.select(chunk_run.c.max_chunk_attempts).where(chunk_run.c.run_id == run_id).scalar_subquery()
            return conn.execute(chunk_task.update().where(
                (chunk_task.c.run_id == run_id) & (chunk_task.c.status == "completed"))
                .values(status="failed", last_error=reason[:2000], attempts=spent, updated_at=now)).rowcount

    def reset_chunk_checkpoint(self, export_name: str, *, stuck_only: bool = False,
                               failed_only: bool = False) -> int:
        """Delete chunk runs of the export and their tasks; returns how many runs were deleted.
        stuck_only: only in-progress runs. failed_only: only runs with at least one failed task.
        Both: in-progress runs with a failed task."""
        q = sa.select(chunk_run.c.run_id).where(chunk_run.c.export_name == export_name)
        if stuck_only:
            q = q.where(chunk_run.c.status == "in_progress")
        if failed_only:
            q = q.where(sa.exists().where(
                (chunk_task.c.run_id == chunk_run.c.run_id) & (chunk_task.c.status == "failed")))
        with self.engine.begin() as conn:
            run_ids = list(conn.execute(q).scalars())
            if not run_ids:
                return 0
            conn.execute(chunk_task.delete().where(chunk_task.c.run_id.in_(run_ids)))
            return conn.execute(chunk_run.delete().where(chunk_run.c.run_id.in_(run_ids))).rowcount

    # ----------------------------------------------------------------- tasks
    def add_chunk_tasks(self, run_id: str, tasks: Sequence[ChunkTaskSpec]) -> int:
        """Append windows to an in-progress run (planning saw the table grow; chunk_tasks.py).
        Existing chunk_index values, and windows whose window_key is already a task (a window
        is identified by its key; two planners may number a new window alike), are skipped;
        returns how many tasks were added."""
        now = utc_now_text()
        with self.engine.begin() as conn:
            run = _lock_run(conn, run_id, exclusive=True)  # serializes two planners of one run
            if run is None or run.status != "in_progress":
                state = "does not exist" if run is None else f"is {run.status}"
                raise RuntimeError(f"cannot add chunk tasks to run {run_id}: it {state} (must be in progress)")
            rows = conn.execute(sa.select(chunk_task.c.chunk_index, chunk_task.c.window_key)
                                .where(chunk_task.c.run_id == run_id)).all()
            existing = {int(r.chunk_index) for r in rows}
            keys = {r.window_key for r in rows}
            fresh: dict[int, ChunkTaskSpec] = {}
            for spec in tasks:
                if int(spec[0]) not in existing and spec[3] not in keys:
                    fresh.setdefault(int(spec[0]), spec)
                    keys.add(spec[3])
            if fresh:
                conn.execute(chunk_task.insert(), _task_values(run_id, fresh.values(), now))
                conn.execute(chunk_run.update().where(chunk_run.c.run_id == run_id).values(updated_at=now))
            return len(fresh)

    def claim_next_chunk_task(self, run_id: str, worker: str | None = None) -> ChunkTaskRow | None:
        """Atomically claim the lowest-index claimable task of an in-progress run: `pending`,
        or `failed` with attempts < max_chunk_attempts (I5: never a completed or running one).
        Sets running, attempts + 1, worker. None when nothing is claimable right now."""
        now = utc_now_text()
        with self.engine.begin() as conn:
            task_id = conn.execute(
                sa.select(chunk_task.c.id)
                .select_from(chunk_task.join(chunk_run, chunk_run.c.run_id == chunk_task.c.run_id))
                .where((chunk_task.c.run_id == run_id) & (chunk_run.c.status == "in_progress") & _CLAIMABLE)
                .order_by(chunk_task.c.chunk_index).limit(1)
                .with_for_update(of=chunk_task, skip_locked=True)
            ).scalar()
            if task_id is None:
                return None
            return self._mark_running(conn, task_id, worker, now)

    def claim_chunk_task(self, run_id: str, chunk_index: int, worker: str | None = None, *,
                         reclaim_from: str | None = None, fresh_budget: bool = False) -> ChunkTaskRow | None:
        """Claim one SPECIFIC task (a window batch, chunk_tasks.py): pending, failed with attempts left,
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
        with self.engine.begin() as conn:
            run = _lock_run(conn, run_id, exclusive=False)  # completed → running must not race finalize
            if run is None or run.status != "in_progress":
                return None
            task = conn.execute(
                sa.select(chunk_task.c.id, chunk_task.c.status, chunk_task.c.attempts, chunk_task.c.worker)
                .where((chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index)))
                .with_for_update(skip_locked=True)
            ).first()
            if task is None:
                return None
            if task.status == "running":
                if reclaim_from is None or task.worker != reclaim_from:
                    return None
                conn.execute(chunk_task.update().where(
                    (chunk_task.c.id == task.id) & (chunk_task.c.status == "running")
                    & (chunk_task.c.worker == reclaim_from)).values(status="pending", worker=None))
            elif task.status == "failed" and task.attempts >= run.max_chunk_attempts:
                if not fresh_budget:
                    return None
                conn.execute(chunk_task.update().where(chunk_task.c.id == task.id).values(attempts=0))
            if task.status == "completed":  # a deliberate re-run: a fresh attempt budget
                conn.execute(chunk_task.update().where(chunk_task.c.id == task.id).values(attempts=0))
            return self._mark_running(conn, task.id, worker, now)

    @staticmethod
    def _mark_running(conn: sa.Connection, task_id: int, worker: str | None, now: str) -> ChunkTaskRow | None:
        claimed = conn.execute(
            chunk_task.update()
            .where((chunk_task.c.id == task_id) & (chunk_task.c.status != "running"))
            .values(status="running", attempts=chunk_task.c.attempts + 1, worker=worker, updated_at=now,
                    worker_pid=os.getpid(), worker_host=socket.gethostname())
        ).rowcount
        if claimed != 1:  # defensive: the row lock / write lock makes this unreachable
            return None
        row = conn.execute(sa.select(*_TASK_COLUMNS).where(chunk_task.c.id == task_id)).mappings().one()
        return _task_row(row)

    def complete_chunk_task(self, run_id: str, chunk_index: int, rows_written: int, file_name: str | None,
                            *, worker: str | None = None) -> None:
        """running → completed with rows_written and file_name (the FIRST part of the attempt;
        None when the window produced no file), last_error NULL. Raises ChunkTaskNotRunning if
        the task is not running (or, when `worker` is given, is running for another worker):
        a stale worker must not overwrite a task that was reset or re-claimed."""
        self._finish_running(run_id, chunk_index, worker, "complete", dict(
            status="completed", rows_written=int(rows_written), file_name=file_name, last_error=None))

    def fail_chunk_task(self, run_id: str, chunk_index: int, error: str, retryable: bool,
                        *, worker: str | None = None) -> None:
        """running → failed, last_error = error (the caller has redacted it). Not retryable:
        attempts = max_chunk_attempts, so it is never claimed again until a resume resets it.
        Raises ChunkTaskNotRunning like complete_chunk_task (never turns a completed task failed)."""
        values: dict = dict(status="failed", last_error=error)
        if not retryable:
            values["attempts"] = (sa.select(chunk_run.c.max_chunk_attempts)
                                  .where(chunk_run.c.run_id == run_id).scalar_subquery())
        self._finish_running(run_id, chunk_index, worker, "fail", values)

    def _finish_running(self, run_id: str, chunk_index: int, worker: str | None, verb: str, values: dict) -> None:
        where = ((chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index))
                 & (chunk_task.c.status == "running"))
        if worker is not None:
            where &= chunk_task.c.worker == worker
        with self.engine.begin() as conn:
            n = conn.execute(chunk_task.update().where(where).values(updated_at=utc_now_text(), **values)).rowcount
            if n == 1:
                return
            current = conn.execute(sa.select(chunk_task.c.status, chunk_task.c.worker).where(
                (chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index)))).first()
        if current is None:
            raise ChunkTaskNotRunning(f"cannot {verb} chunk {chunk_index} of run {run_id}: no such task")
        owner = f" by worker {current.worker!r}" if current.status == "running" and current.worker else ""
        raise ChunkTaskNotRunning(
            f"cannot {verb} chunk {chunk_index} of run {run_id}: it is {current.status}{owner}, "
            f"not running for this worker — it was reset or claimed again; this result is discarded")

    def reset_stale_running_chunk_tasks(self, run_id: str) -> int:
        """running → pending (resume after a crash: nobody is working on them any more)."""
        return self._reset(run_id, chunk_task.c.status == "running", dict(status="pending", worker=None))

    def reset_failed_chunk_tasks_for_resume(self, run_id: str) -> int:
        """failed → pending with attempts 0 (an explicit --resume gives pinned chunks a fresh
        budget); completed and pending tasks are untouched."""
        return self._reset(run_id, chunk_task.c.status == "failed",
                           dict(status="pending", attempts=0, worker=None))

    def reset_chunk_task_for_re_export(self, run_id: str, chunk_index: int, reason: str) -> None:
        """completed → pending, attempts 0, file_name/rows_written NULL, last_error = reason
        (resume found its part missing or divergent: M8 rewrite/quarantine). A task that is not
        completed is left alone (it will be exported anyway); an unknown task raises LookupError,
        and a run that is not in progress RuntimeError (a finalized run stays fully completed, I6)."""
        now = utc_now_text()
        with self.engine.begin() as conn:
            run = _lock_run(conn, run_id, exclusive=False)
            if run is None or run.status != "in_progress":
                state = "does not exist" if run is None else f"is {run.status}"
                raise RuntimeError(f"cannot reset chunk {chunk_index} of run {run_id} for re-export: "
                                   f"the run {state} (must be in progress)")
            n = conn.execute(chunk_task.update().where(
                (chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index))
                & (chunk_task.c.status == "completed")
            ).values(status="pending", attempts=0, file_name=None, rows_written=None, last_error=reason,
                     worker=None, updated_at=now)).rowcount
            if n == 0 and conn.execute(sa.select(chunk_task.c.id).where(
                    (chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index)))).first() is None:
                raise LookupError(f"chunk {chunk_index} of run {run_id} does not exist")

    def _reset(self, run_id: str, which: sa.ColumnElement[bool], values: dict) -> int:
        with self.engine.begin() as conn:
            return conn.execute(chunk_task.update().where((chunk_task.c.run_id == run_id) & which)
                                .values(updated_at=utc_now_text(), **values)).rowcount

    # --------------------------------------------------------------- readers
    def count_chunk_tasks_not_completed(self, run_id: str) -> int:
        return self._count(run_id, chunk_task.c.status != "completed")

    def count_chunk_tasks(self, run_id: str) -> int:
        return self._count(run_id, sa.true())

    def list_chunk_tasks(self, run_id: str) -> list[ChunkTaskRow]:
        q = sa.select(*_TASK_COLUMNS).where(chunk_task.c.run_id == run_id).order_by(chunk_task.c.chunk_index)
        with self.engine.begin() as conn:
            return [_task_row(r) for r in conn.execute(q).mappings()]

    def get_chunk_task(self, run_id: str, chunk_index: int) -> ChunkTaskRow | None:
        q = sa.select(*_TASK_COLUMNS).where(
            (chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == int(chunk_index)))
        with self.engine.begin() as conn:
            row = conn.execute(q).mappings().first()
        return _task_row(row) if row else None

    def find_chunk_task_by_file_name(self, run_id: str, file_name: str) -> ChunkTaskRow | None:
        """The task whose recorded attempt (chunk_task.file_name) is this part (M8 rewrite)."""
        q = (sa.select(*_TASK_COLUMNS).where((chunk_task.c.run_id == run_id) & (chunk_task.c.file_name == file_name))
             .order_by(chunk_task.c.chunk_index).limit(1))
        with self.engine.begin() as conn:
            row = conn.execute(q).mappings().first()
        return _task_row(row) if row else None

    def completed_chunk_files(self, run_id: str) -> dict[int, str | None]:
        """chunk_index → recorded file_name of every completed task (rehydration keeps a
        file_log part only if its chunk is here and its attempt name equals this value)."""
        q = sa.select(chunk_task.c.chunk_index, chunk_task.c.file_name).where(
            (chunk_task.c.run_id == run_id) & (chunk_task.c.status == "completed"))
        with self.engine.begin() as conn:
            return {int(i): f for i, f in conn.execute(q).all()}

    def max_completed_chunk_index(self, run_id: str) -> int | None:
        """Highest completed chunk_index (what progression records as committed, docs/invariants.md PG2)."""
        q = sa.select(sa.func.max(chunk_task.c.chunk_index)).where(
            (chunk_task.c.run_id == run_id) & (chunk_task.c.status == "completed"))
        with self.engine.begin() as conn:
            value = conn.execute(q).scalar()
        return None if value is None else int(value)

    def _count(self, run_id: str, which: sa.ColumnElement[bool]) -> int:
        with self.engine.begin() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(chunk_task)
                                    .where((chunk_task.c.run_id == run_id) & which)).scalar())

    def _one_run(self, q: sa.Select) -> ChunkRunRow | None:
        with self.engine.begin() as conn:
            row = conn.execute(q).mappings().first()
        return _run_row(row) if row else None

    def record_repaired_chunk(self, run_id: str, chunk_index: int, rows_written: int,
                              file_name: str | None) -> None:
        """`rivet repair --execute`: a completed task was re-exported as new parts; record the
        new attempt (completed → completed). Raises if the task is not completed."""
        with self.engine.begin() as conn:
            n = conn.execute(chunk_task.update().where(
                (chunk_task.c.run_id == run_id) & (chunk_task.c.chunk_index == chunk_index)
                & (chunk_task.c.status == "completed")
            ).values(rows_written=rows_written, file_name=file_name, last_error=None,
                     updated_at=utc_now_text())).rowcount
        if n != 1:
            raise RuntimeError(f"chunk {chunk_index} of run {run_id} is not completed; repair re-exports "
                               "completed chunks only — resume the run first")
