"""`CheckpointRuns`: an export's chunk runs in the state store (`chunk_run` + `chunk_task`,
state/chunks.py) as the chunk-task steps see them — the one in progress found, or opened
continuing the last finalized one (chunked/tasks.py's module docstring says when).

A service the chunk-task runs hold (the planning call, a window batch, the finalize): each
asks it for the in-progress run under the plan it just made, and a plan that is not the
run's (a changed query, column or chunk shape) is refused here with the command that
clears the checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.pipeline.chunked.planning import KeysetBoundaries
from rivet_core.runrecord.summary import new_run_id
from rivet_core.state import ChunkRunInProgress, ChunkRunRow, ChunkTaskRow, StateStore

log = logging.getLogger("rivet.chunk_tasks")

#: Strategies whose window keys never change as the table grows: new windows are appended.
GRID_STRATEGIES = ("range", "days")


def task_spec(window: ChunkWindow) -> tuple[int, str | None, str | None, str]:
    """A window as the state store registers a task: (index, start, end, key)."""
    return (window.index, window.lo, window.hi, window.key)


class CheckpointRuns:
    """The chunk runs of one export in `state` (module docstring). `refuse_changed` raises
    `plan_changed(facts)` — the caller's refusal, worded for its orchestrator's users."""

    def __init__(self, state: StateStore, export_name: str, config_path: Path, *, max_attempts: int,
                 plan_changed: Callable[[Mapping[str, Any]], Exception]) -> None:
        self.state, self.export_name, self.config_path = state, export_name, config_path
        self.max_attempts = max_attempts
        self.plan_changed = plan_changed

    def keyset_boundaries(self) -> KeysetBoundaries | None:
        """(plan hash, boundaries) of the in-progress chunk run, else the latest one, when that
        is a keyset run whose windows are contiguous; None otherwise (chunked/planning.py)."""
        state, name = self.state, self.export_name
        run = state.find_in_progress_chunk_run(name) or state.get_latest_chunk_run(name)
        if run is None or run.strategy != "keyset":
            return None
        tasks = sorted(state.list_chunk_tasks(run.run_id), key=lambda t: t.chunk_index)
        if not tasks or tasks[0].start_key is not None or tasks[-1].end_key is not None:
            return None
        if any(a.end_key is None or a.end_key != b.start_key for a, b in zip(tasks, tasks[1:], strict=False)):
            return None
        return run.plan_hash, [t.end_key for t in tasks[:-1] if t.end_key is not None]

    def refuse_changed(self, found: ChunkRunRow, chunk_plan: ChunkLayout) -> None:
        """Refuse a plan that is not the plan of the run in progress."""
        if found.plan_hash != chunk_plan.plan_hash:
            raise self.plan_changed({"export": self.export_name, "plan_hash": chunk_plan.plan_hash,
                                     "run_id": found.run_id, "run_plan_hash": found.plan_hash,
                                     "config": str(self.config_path)})

    def new_windows(self, chunk_plan: ChunkLayout, tasks: Sequence[ChunkTaskRow]) -> list[ChunkWindow]:
        """Planned windows that are not tasks yet (grid strategies only), renumbered after the
        highest existing chunk_index so indices stay unique when the table's minimum moved."""
        if not tasks:
            return list(chunk_plan.windows)
        if chunk_plan.strategy not in GRID_STRATEGIES:
            return []
        known = {t.window_key for t in tasks}
        fresh = sorted((w for w in chunk_plan.windows if w.key not in known), key=lambda w: w.key)
        top = max(t.chunk_index for t in tasks)
        return [ChunkWindow(top + 1 + i, w.lo, w.hi, w.key) for i, w in enumerate(fresh)]

    def continued(self, chunk_plan: ChunkLayout) -> ChunkRunRow | None:
        """The finalized chunk run a new one continues: the export's latest, if it completed
        with the same plan hash (else the new run starts with every window pending)."""
        previous = self.state.get_latest_chunk_run(self.export_name)
        if previous is not None and previous.status == "completed" and previous.plan_hash == chunk_plan.plan_hash:
            return previous
        return None

    def open(self, chunk_plan: ChunkLayout, *, extra: Sequence[ChunkWindow] = (),
             carry_completed: bool = True) -> tuple[ChunkRunRow, bool]:
        """Open the in-progress chunk run, continuing `continued` with `extra` windows
        appended; returns (run, fresh). A concurrent opener's run wins the race.
        `carry_completed=False` (a refresh) keeps the previous run's windows — the same keys
        and bounds — but every one of them pending."""
        state, name = self.state, self.export_name
        previous = self.continued(chunk_plan)
        carry = previous is not None and carry_completed
        if previous is not None:
            old = state.list_chunk_tasks(previous.run_id)
            specs = [(t.chunk_index, t.start_key, t.end_key, t.window_key) for t in old]
            specs += [task_spec(w) for w in extra]
            completed = {t.chunk_index: (t.rows_written or 0, t.file_name) for t in old
                         if t.status == "completed" and carry_completed}
        else:
            specs, completed = [task_spec(w) for w in chunk_plan.windows], {}
        run_id = new_run_id(name)
        try:
            state.create_chunk_run(run_id, name, chunk_plan.plan_hash, self.max_attempts, chunk_plan.strategy,
                                   chunk_plan.column, chunk_plan.size, specs, completed=completed)
        except ChunkRunInProgress:
            found = state.find_in_progress_chunk_run(name)
            if found is None:
                raise
            self.refuse_changed(found, chunk_plan)
            return found, False
        log.info("export '%s': chunk run %s opened (%d window(s), %d carried from %s)", name, run_id, len(specs),
                 len(completed), previous.run_id if previous is not None else "-")
        found = state.get_chunk_run(run_id)
        assert found is not None
        return found, not carry

    def in_progress(self, chunk_plan: ChunkLayout) -> ChunkRunRow:
        """The in-progress chunk run, opened (continuing the last one) when there is none."""
        found = self.state.find_in_progress_chunk_run(self.export_name)
        if found is not None:
            self.refuse_changed(found, chunk_plan)
            return found
        found, _ = self.open(chunk_plan)
        return found
