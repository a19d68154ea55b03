"""RunStore: the post-finalize cursor + progression facade (ADR-0018, I3, PG2).

    RunStore(state, summary).with_cursor(v).with_progression(Progression.incremental(v)).commit()

`commit()` writes the cursor first — an error is raised at once and the progression is
not attempted (a half-finalized run would log a misleading boundary) — then fires the
`after_cursor_commit` fault point, then writes the progression, warn-on-fail. The caller
invokes it only after `manifest.json` landed (amendment 2026-09-26 to ADR-0001), so the
cursor never runs ahead of the published data. Ordering lives here, not at call sites:
chained calls in any order produce the same write order.
"""

from __future__ import annotations

from dataclasses import dataclass

from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.summary import RunSummary
from rivet_core.redact import redact_secrets
from rivet_core.state import StateStore


@dataclass(frozen=True)
class Progression:
    strategy: str  # "incremental" (chunked arrives with the chunked runners)
    cursor: str | None = None
    chunk_index: int | None = None

    @classmethod
    def incremental(cls, cursor: str) -> Progression:
        return cls("incremental", cursor=cursor)


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
        if self._progression is not None and self._progression.strategy == "incremental" \
                and self._progression.cursor is not None:
            try:
                self._state.record_committed_incremental(
                    self._summary.export_name, self._progression.cursor, self._summary.run_id)
            except Exception as exc:  # noqa: BLE001 - PG2: progression is advisory
                self._summary.add_warning(f"progression write failed: {redact_secrets(exc)}")
