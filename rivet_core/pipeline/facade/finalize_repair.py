"""The end of a repair — a finalize path of its own kind (docs/adr/0001-write-ordering-facades.md).

`rivet repair --execute` (pipeline/chunked/reconcile.py) re-exports the windows `rivet reconcile` found wrong
as NEW parts through the per-part facade (write_part_file → record_part). Everything after
that is `finalize_repair`, in one fixed order, like the end of an export run (finalize.py)
and labelled as a repair (`summary.mode = "repair"`, `summary.repair_of` = the chunk run):

    status → invariant check → table commit (table_format exports) → manifest.json
    → manifest-<repair_id>.json → _SUCCESS
    → superseded parts to _quarantine/<repair_id>/ → checkpoint (tasks repaired)
    → validate (optional) → journal RunCompleted + run_status → metrics → report

How it differs from the finalize of an export run, and why:
- The manifest is the prefix's current one with the re-exported windows' old parts
  replaced by the new ones; every other field is kept (it still describes the chunk run's
  data). Its `status` stays `success`: each window holds either its old or its new parts,
  so the dataset stays whole even when some window could not be re-exported — the
  repair's own status (ledger, metrics, report) is then `failed`.
- The invariant check covers the rewrite as well as the run (`repair_problems`): every new
  part recorded through `record_part` and belonging to a repaired window, none colliding
  with a kept part, and every window that had a part replacing one the manifest lists
  (otherwise its rows would be listed twice).
  A violation raises in tests (RIVET_STRICT_INVARIANTS=1); in production the repair fails
  and the manifest is left as it was.
- The table commit (`table_format:` exports; rivet_core/tableformat/repair.py
  `commit_repair`) makes the table's files the rewritten manifest's parts in ONE commit,
  after the new parts are recorded and before the manifest, as in finalize.py; fault point
  `after_table_commit` follows it. Its failure fails the repair before the manifest (nothing
  quarantined or marked repaired; the table stays at its previous version). The commit is
  idempotent, so a repair that crashed after it converges on the re-run. The manifest's
  `table` block then names the new version/snapshot.
- The manifest step is fatal, as for a run: if it cannot be written the repair fails,
  nothing is quarantined or marked repaired, and the old parts stay listed.
- The checkpoint (`record_repaired_chunk`: the task's new rows and first file) follows the
  manifest, as a cursor does: a checkpoint that said "repaired" while the manifest still
  listed the old part would make the next `rivet reconcile` report a match for data no
  reader sees. Its failure is a warning — the next reconcile finds the window again and
  the next repair supersedes it once more (at-least-once).
- No cursor and no progression (a repair moves no boundary), no notification (an operator
  runs it by hand and reads its output and its report).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rivet_core.destination import Destination
from rivet_core.errors import DataIntegrityError, best_effort
from rivet_core.manifest import Manifest, quarantine_object
from rivet_core.manifest.artifacts import write_manifest_files
from rivet_core.manifest.column_checksums import CHECKSUM_RENDER, run_level
from rivet_core.pipeline.facade.finalize import _validate, record_outcome, resolve_status
from rivet_core.pipeline.faults import fault_point
from rivet_core.redact import redact_secrets
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import ResolvedUnit

log = logging.getLogger("rivet.finalize")


@dataclass(frozen=True)
class RepairedWindow:
    """One window the repair re-exported (its new parts are in the summary's manifest parts)."""

    chunk_index: int
    rows: int
    #: The new parts, in order (the first is what the checkpoint records).
    new_paths: tuple[str, ...]
    #: Parts of the current manifest this window's new parts replace.
    replaces: tuple[str, ...]
    #: The part the checkpoint recorded for the window before the repair (None: it had no rows).
    old_file: str | None = None


def repair_manifest(previous: Manifest, summary: RunSummary, superseded: set[str]) -> Manifest:
    """The prefix's manifest with the superseded parts replaced by the repair's new parts."""
    kept = [p for p in previous.parts if p.path not in superseded]
    if kept and previous.checksum_render != CHECKSUM_RENDER:
        # The kept parts' checksums are another render's numbers: none can be summed with the
        # new parts' (Form B is suppressed rather than mixed, as for an incomplete run).
        kept = [dataclasses.replace(p, column_checksums=None) for p in kept]
    parts = [dataclasses.replace(p, part_id=i + 1) for i, p in enumerate(kept + list(summary.manifest_parts))]
    checks, render, key = run_level(parts, previous.checksum_key_column)
    return dataclasses.replace(
        previous, run_id=summary.run_id, finished_at=datetime.now(UTC).isoformat(), parts=parts,
        part_count=len(parts), row_count=sum(p.rows for p in parts), column_checksums=checks,
        checksum_render=render, checksum_key_column=key)


def repair_problems(previous: Manifest, summary: RunSummary, windows: list[RepairedWindow]) -> list[str]:
    """What would make the rewritten manifest lie (module docstring)."""
    problems: list[str] = []
    listed = {p.path for p in previous.parts}
    recorded = {p.path for p in summary.manifest_parts}
    superseded = {path for w in windows for path in w.replaces}
    for w in windows:
        missing = [p for p in w.new_paths if p not in recorded]
        if missing:
            problems.append(f"window {w.chunk_index}: new part(s) {missing} were not recorded through record_part")
        if w.old_file is not None and not w.replaces:
            problems.append(f"window {w.chunk_index}: its part '{w.old_file}' is not listed by the manifest, "
                            "so its new parts would list its rows twice")
        stray = [p for p in w.replaces if p not in listed]
        if stray:
            problems.append(f"window {w.chunk_index}: replaces {stray}, which the manifest does not list")
    clash = sorted(recorded & (listed - superseded))
    if clash:
        problems.append(f"new part(s) {clash} collide with parts the manifest keeps")
    unclaimed = sorted(recorded - {path for w in windows for path in w.new_paths})
    if unclaimed:
        problems.append(f"part(s) {unclaimed} were recorded but belong to no repaired window (its old parts "
                        "would stay listed beside them)")
    return problems


def finalize_repair(
    plan: ResolvedUnit, summary: RunSummary, state: StateStore, dest: Destination, *,
    previous: Manifest, chunk_run_id: str, windows: list[RepairedWindow], error: BaseException | None,
    report_root: Path, validate: bool = False,
) -> RunSummary:
    """Run the repair's finalize sequence in its fixed order (module docstring). Never raises,
    except `InvariantViolation` in tests."""
    resolve_status(summary, error)
    summary.close()
    problems = repair_problems(previous, summary, windows)
    summary.check_post_run_invariants(problems)
    if problems:
        summary.status, summary.exit_code = "failed", DataIntegrityError.exit_code
        summary.error_message = redact_secrets("repair invariant violated, manifest not rewritten: "
                                               + "; ".join(problems))
    elif windows:
        rewritten = repair_manifest(previous, summary, {path for w in windows for path in w.replaces})
        rewritten = _commit_table(plan, summary, dest, rewritten)
        if rewritten is not None:
            _write_manifest(summary, dest, rewritten)
    if summary.manifest_written:
        _supersede(summary, state, dest, chunk_run_id, windows)
    if validate:
        _validate(plan, summary, dest)
    record_outcome(plan, summary, state, report_root)
    return summary


def _commit_table(plan: ResolvedUnit, summary: RunSummary, dest: Destination,
                  rewritten: Manifest) -> Manifest | None:
    """The repair's table commit (module docstring): the manifest to write, its `table`
    block naming the new version/snapshot (what a reader sees); None: the commit failed, so
    no manifest."""
    if plan.export.table_format is None:
        return rewritten
    from rivet_core.tableformat.repair import commit_repair

    try:
        commit = commit_repair(plan, summary, dest, list(rewritten.parts))
    except Exception as exc:  # error boundary: fails the repair before the manifest
        summary.status, summary.exit_code = "failed", getattr(exc, "exit_code", 1) or 1
        summary.error_message = redact_secrets(f"table commit failed: {exc}")
        log.error("export '%s': repair %s: %s — manifest not rewritten", summary.export_name, summary.run_id,
                  summary.error_message)
        return None
    summary.table_commit = commit.to_dict()
    summary.journal.record("TableCommitted", format=commit.format, version=commit.version,
                           operation=commit.operation, files=commit.files, rows=commit.rows)
    fault_point("after_table_commit")
    return dataclasses.replace(rewritten, table=summary.table_commit)


def _write_manifest(summary: RunSummary, dest: Destination, rewritten: Manifest) -> None:
    try:
        write_manifest_files(dest, rewritten)
        summary.manifest_written = True
    except Exception as exc:  # error boundary: fatal, as for a run — the old parts stay listed
        summary.status = "failed"
        summary.error_message = redact_secrets(f"manifest write failed: {exc}")
        summary.exit_code = getattr(exc, "exit_code", 1) or 1
        log.error("export '%s': repair %s: %s — nothing marked repaired", summary.export_name, summary.run_id,
                  summary.error_message)


def _supersede(summary: RunSummary, state: StateStore, dest: Destination, chunk_run_id: str,
               windows: list[RepairedWindow]) -> None:
    """After the manifest landed: the replaced parts aside (never deleted, M9), then the
    checkpoint says which attempt each repaired window now is."""
    for w in windows:
        for path in w.replaces:
            if not quarantine_object(dest, summary.run_id, path):
                summary.add_warning(f"superseded part '{path}' could not be quarantined")
    for w in windows:
        # A checkpoint not updated: the next reconcile finds the window again.
        with best_effort("repaired chunk checkpoint", warn=summary.add_warning,
                         message=f"checkpoint of repaired chunk {w.chunk_index} not updated: {{reason}}"):
            state.record_repaired_chunk(chunk_run_id, w.chunk_index, w.rows, w.new_paths[0] if w.new_paths else None)


__all__ = ["RepairedWindow", "finalize_repair", "repair_manifest", "repair_problems"]
