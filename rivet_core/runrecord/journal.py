"""RunJournal: the ordered event log of one run (docs/rivet-compat.md "Run report and journal").

Shape: `{run_id, export_name, entries: [{recorded_at, event: {Variant: {...}}}]}` with
serde-style external tagging, so a Rivet journal reader reads ours. Ordering contract:
`PlanResolved` is the first entry, runner events follow in commit order, and
`RunCompleted` is the terminal entry (recorded before the manifest write).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rivet_core.redact import redact_secrets

EVENT_VARIANTS = frozenset({
    "PlanResolved", "PlanWarning", "FileWritten", "ChunkStarted", "ChunkCompleted", "ChunkFailed",
    "RetryAttempted", "QualityIssue", "SchemaChanged", "Warning", "ParallelismAdjusted",
    "ValidationResult", "ReconciliationResult", "RunCompleted",
    # retention / `rivet gc` (rivet_core/pipeline/retention/gc.py): the plan, one entry per move or
    # delete, the outcome. In a run's journal they come after ValidationResult and before
    # RunCompleted; `rivet gc` stores a journal of its own (run id `<export>_gc_<stamp>`).
    "GcPlanned", "GcStep", "GcCompleted",
    # `table_format:` exports: the table commit the finalize facade made before the manifest.
    "TableCommitted",
    # `mode: cdc` (rivet_core/pipeline/cdc/run.py): the window drained for a table, its snapshot.
    "CdcDrained", "CdcSnapshot",
})
_REDACTED_FIELDS = frozenset({"reason", "error", "error_message", "message"})


@dataclass
class RunJournal:
    run_id: str
    export_name: str
    entries: list[dict[str, Any]] = field(default_factory=list)

    def record(self, variant: str, **fields: Any) -> None:
        """Append one event; free-text fields are redacted on the way in."""
        if variant not in EVENT_VARIANTS:
            raise ValueError(f"unknown journal event {variant!r}")
        clean = {k: (redact_secrets(v) if k in _REDACTED_FIELDS and v is not None else v)
                 for k, v in fields.items()}
        self.entries.append({"recorded_at": datetime.now(UTC).isoformat(), "event": {variant: clean}})

    def events(self, variant: str) -> list[dict[str, Any]]:
        return [e["event"][variant] for e in self.entries if variant in e["event"]]

    @property
    def started_at(self) -> str | None:
        return self.entries[0]["recorded_at"] if self.entries else None

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "export_name": self.export_name, "entries": list(self.entries)}
