"""RunStore: the post-finalize cursor + progression facade (docs/adr/0001-write-ordering-facades.md; docs/invariants.md I3, PG2).

    RunStore(state, summary).with_cursor(v).with_progression(Progression.incremental(v)).commit()
    RunStore(state, summary).with_progression(Progression.chunked(chunk_run_id)).commit()

`commit()` writes the cursor first — an error is raised at once and the progression is
not attempted (a half-finalized run would log a misleading boundary) — then fires the
`after_cursor_commit` fault point, then writes the progression, warn-on-fail. The caller
invokes it only after `manifest.json` landed (the amendment in docs/invariants.md), so
neither the cursor nor the committed boundary runs ahead of the published data. Ordering
lives here, not at call sites: chained calls in any order produce the same write order.

This module is the only writer of the cursor (`export_state`) and of the progression
(`export_progression`); tests/pipeline/test_facade_only_writers.py enforces it. Besides the
builder, two writes that belong to no run also live here: `reset_export_state` (`rivet state
reset`) and `commit_verified_progression` (a clean `rivet reconcile`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rivet_core.errors import best_effort
from rivet_core.pipeline.faults import fault_point
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore

log = logging.getLogger("rivet.run_store")


@dataclass(frozen=True)
class Progression:
    """The committed boundary a run reached: an incremental cursor, or the highest completed
    chunk index of a checkpointed chunk run (PG2: walked from chunk_task at commit time)."""

    strategy: str  # "incremental" | "chunked"
    cursor: str | None = None
    chunk_run_id: str | None = None

    @classmethod
    def incremental(cls, cursor: str) -> Progression:
        return cls("incremental", cursor=cursor)

    @classmethod
    def chunked(cls, chunk_run_id: str) -> Progression:
        return cls("chunked", chunk_run_id=chunk_run_id)


class RunStore:
    def __init__(self, state: StateStore, summary: RunSummary) -> None:
        self._state = state
        self._summary = summary
        self._cursor: str | None = None
        self._progression: Progression | None = None

    def with_cursor(self, value: str | None) -> RunStore:
        self._cursor = value
        return self

    def with_progression(self, progression: Progression | None) -> RunStore:
        self._progression = progression
        return self

    def commit(self) -> None:
        """Cursor (fatal) → fault point → progression (warn). No-op when nothing was set."""
        if self._cursor is not None:
            self._state.set_cursor(self._summary.export_name, self._cursor)
            self._summary.cursor_committed = True
            fault_point("after_cursor_commit")
        if self._progression is None:
            return
        with best_effort("progression write", warn=self._summary.add_warning):  # PG2: advisory
            self._write_progression(self._progression)

    def _write_progression(self, progression: Progression) -> None:
        name, run_id = self._summary.export_name, self._summary.run_id
        if progression.strategy == "incremental" and progression.cursor is not None:
            self._state.record_committed_incremental(name, progression.cursor, run_id)
        elif progression.strategy == "chunked" and progression.chunk_run_id is not None:
            highest = self._state.max_completed_chunk_index(progression.chunk_run_id)
            if highest is not None:
                self._state.record_committed_chunked(name, highest, progression.chunk_run_id)


def commit_verified_progression(state: StateStore, export_name: str, chunk_index: int, run_id: str) -> None:
    """The advisory "verified" boundary after a clean reconcile (warn-on-fail: it is never read
    by execution)."""
    with best_effort("verified progression", logger=log, message="verified progression not written: {reason}"):
        state.record_verified_chunked(export_name, chunk_index, run_id)


def reset_export_state(state: StateStore, export_name: str) -> bool:
    """`rivet state reset`: delete the export's cursor and progression (its next run exports
    everything). True when a cursor was stored."""
    return state.reset_export(export_name)


__all__ = ["Progression", "RunStore", "commit_verified_progression", "reset_export_state"]
