"""RunSummary: everything one export run knows about itself, and the invariant backstop.

The summary is the single in-memory record a run accumulates — counters, committed
manifest parts, cursor range, schema verdict, journal — and what the finalize sequence
turns into the manifest, metrics row, report and notification. `check_post_run_invariants`
is the structural guard of docs/adr/0001-write-ordering-facades.md: a runner that bypassed `record_part` or the
schema-drift facade leaves telltales here, and the check makes that fail loudly in tests
(`RIVET_STRICT_INVARIANTS=1`) and log a WARN line in production.
"""

from __future__ import annotations

import logging
import os
import resource
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rivet_core.errors import InvariantViolation
from rivet_core.orchestrator import legacy_run_id_attribute
from rivet_core.runrecord.journal import RunJournal

log = logging.getLogger("rivet.run")


def new_run_id(export_name: str, now: datetime | None = None) -> str:
    """`{export}_{YYYYMMDDTHHMMSS.mmm}` in UTC (docs/rivet-compat.md "File names and run ids")."""
    now = now or datetime.now(UTC)
    return f"{export_name}_{now.strftime('%Y%m%dT%H%M%S')}.{now.microsecond // 1000:03d}"


def peak_rss_mb() -> int:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


@dataclass
class RunSummary:
    run_id: str
    export_name: str
    mode: str
    format: str
    compression: str
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    status: str = "running"
    total_rows: int = 0
    files_produced: int = 0
    files_committed: int = 0
    bytes_written: int = 0
    #: Parts recorded by `record_part`, in commit order (manifest M1).
    manifest_parts: list[Any] = field(default_factory=list)
    cursor_column: str | None = None
    #: The cursor column's source type (manifest `extraction.cursor_type`).
    cursor_type: str | None = None
    cursor_low: str | None = None
    cursor_high: str | None = None
    schema_fingerprint: str | None = None
    #: The drift verdict, written only by the schema-drift facade (schema_drift.py):
    #: None = not judged; True/False = drift found or not.
    schema_changed: bool | None = None
    schema_changes: dict[str, Any] | None = None
    #: How the drift facade judged this run: "checked" (the gate ran here) or
    #: "upstream: <where>" (an earlier step of the same run ran it: the start of a resumed
    #: run, each window batch of a chunk run). None = the facade never ran — the telltale the
    #: invariant backstop reads; a verdict set by hand leaves it None.
    schema_gate: str | None = None
    retries: int = 0
    validated: bool | None = None
    manifest_verification: dict[str, Any] | None = None
    quality_passed: bool | None = None
    quality_issues: list[Any] = field(default_factory=list)
    error_message: str | None = None
    error_class: str | None = None
    exit_code: int = 0
    skip_reason: str | None = None
    state_backed: bool = False
    manifest_written: bool = False
    #: `table_format:` exports: the table commit the finalize facade made before the
    #: manifest (TableCommit.to_dict(); rivet_core/tableformat/commit.py). None: none made.
    table_commit: dict[str, Any] | None = None
    cursor_committed: bool = False
    destination_kind: str | None = None
    destination_uri: str | None = None
    source_engine: str | None = None
    tuning_profile: str | None = None
    batch_size: int | None = None
    #: What the source governor did (governor.GovernorStats.as_dict: mode, throttled_s,
    #: samples, pressure_max, decisions); None = the read had no governor (chunked windows).
    governor: dict[str, Any] | None = None
    finished_at: datetime | None = None
    duration_ms: int = 0
    peak_rss_mb: int = 0
    report_path: str | None = None
    orchestrator_run_id: str | None = None
    orchestrator: str | None = None
    partition_key: str | None = None
    #: The manifest's `source.extraction.strategy` when the plan's own label does not tell it
    #: (a chunked run that pages a keyset writes `keyset`); None = derived from the plan.
    extraction_strategy: str | None = None
    #: `--reconcile`: the source COUNT(*) taken in the export's own snapshot (None = not run)
    #: and whether it matched the rows written.
    source_row_count: int | None = None
    reconciled: bool | None = None
    #: Chunked `--reconcile`: rows of the windows this process counted (each in its own
    #: snapshot); the run-wide verdict stands only when they are all the rows committed.
    reconcile_counted_rows: int = 0
    #: The checkpointed chunk run this run completed (I6 held): RunStore records its committed
    #: progression after the manifest landed (finalize.py). None = not a checkpointed chunk run.
    completed_chunk_run: str | None = None
    #: A repair (`rivet repair --execute`, finalize_repair.py): the chunk run whose windows
    #: it re-exported. None = an export run.
    repair_of: str | None = None
    warnings: list[str] = field(default_factory=list)
    journal: RunJournal = field(init=False)


    def __getattr__(self, name: str) -> Any:
        """`summary.<name>_run_id` (before `orchestrator_run_id`) still reads, deprecated."""
        return legacy_run_id_attribute(self, name)

    def __post_init__(self) -> None:
        self.journal = RunJournal(self.run_id, self.export_name)

    def add_warning(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("export '%s': %s", self.export_name, message)

    def warn_mapped_to_null(self, tally: dict[str, int], where: str = "") -> None:
        """One warning per column whose source values the type contract wrote as NULL (a MySQL
        zero date '0000-00-00' has no date to hold; docs/rivet-compat.md "Type mapping"): the
        rows are exported, and the run says so instead of losing the fact silently. `where`:
        e.g. " (window 3)"."""
        for column, count in sorted(tally.items()):
            self.add_warning(
                f"column '{column}'{where}: {count} value(s) with no valid value of the column's type (e.g. a "
                "MySQL zero date '0000-00-00') were written as NULL — to keep them, cast the column to text in "
                "the export's query, or fix them at the source")

    def close(self) -> None:
        """Stamp the end time, duration and peak RSS."""
        self.finished_at = datetime.now(UTC)
        self.duration_ms = int((self.finished_at - self.started_at).total_seconds() * 1000)
        self.peak_rss_mb = peak_rss_mb()

    def committed_rows(self) -> int:
        return sum(p.rows for p in self.manifest_parts if getattr(p, "status", "committed") == "committed")

    def invariant_violations(self) -> list[str]:
        """The run-integrity checks of docs/adr/0001-write-ordering-facades.md (backstop)."""
        problems: list[str] = []
        n_parts = len(self.manifest_parts)
        if self.files_committed > n_parts:
            problems.append(f"files_committed={self.files_committed} > manifest parts={n_parts}")
        if self.files_produced > n_parts:
            problems.append(f"files_produced={self.files_produced} > manifest parts={n_parts}")
        part_bytes = sum(p.size_bytes for p in self.manifest_parts)
        if self.bytes_written > part_bytes:
            problems.append(f"bytes_written={self.bytes_written} > sum of part sizes={part_bytes}")
        if self.status == "success" and self.total_rows > 0 and self.files_committed == 0 \
                and self.destination_kind != "stdout":
            problems.append(f"success with total_rows={self.total_rows} but no committed file")
        if self.status == "success" and self.total_rows != self.committed_rows() \
                and self.destination_kind != "stdout":
            problems.append(f"total_rows={self.total_rows} differs from manifest rows={self.committed_rows()}")
        if self.state_backed and self.status == "success" and self.files_committed > 0 \
                and self.schema_gate is None:
            problems.append("committed parts but the schema-drift facade never ran (neither checked here "
                            "nor recorded as gated upstream)")
        return problems

    def check_post_run_invariants(self, extra: list[str] | None = None) -> None:
        """Raise in tests (RIVET_STRICT_INVARIANTS=1); log a WARN line in production. `extra`:
        problems a finalize path of its own kind found (finalize_repair.py)."""
        problems = self.invariant_violations() + list(extra or ())
        if not problems:
            return
        text = f"run-integrity invariant violated for run {self.run_id}: " + "; ".join(problems)
        if os.environ.get("RIVET_STRICT_INVARIANTS") == "1":
            raise InvariantViolation(text)
        log.warning(text)
