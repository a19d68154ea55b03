"""Resuming a checkpointed chunked run: refusals, resets and the resume decisions (M8).

`ExportRun.run` ran `--resume`'s gate first (pipeline/single/resume_gate.py: the warning and
the `_SUCCESS` refusal, for every export run with `--resume`). Then `checkpoint_to_resume(run, chunk_plan)` and, once
the run adopted that run_id, `prepare_resume(run, run_id)`:
1. refuses, with the command to run instead, when there is no in-progress chunk run for
   the export (also with `--force`: it only overrides the `_SUCCESS` gate), or when its
   plan hash differs from the current plan (the query, column or chunk shape changed);
2. adopts the interrupted run's run_id, returns stale `running` tasks to pending and gives
   failed tasks a fresh attempt budget (I5);
3. rebuilds the manifest parts from file_log for every completed task (only the attempt
   that completed it), checking each part at the destination: present at the recorded
   size → kept; missing → the task is reset and its window re-exported; a different size
   → the object is moved to `_quarantine/<run_id>/` and the task reset;
4. moves this run's other objects (parts of attempts that crashed before completing) to
   quarantine, so the manifest lists each window exactly once. Nothing is ever deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rivet_core.chunks import ChunkLayout
from rivet_core.destination.checksums import Fingerprinter
from rivet_core.errors import ConfigError, DestinationError, best_effort
from rivet_core.manifest import quarantine_object
from rivet_core.manifest.column_checksums import checksum_key_column
from rivet_core.pipeline.facade.chunk_commit import attempt_key, is_own_part
from rivet_core.pipeline.facade.commit import PartRecord, part_column_checksums, rehydrate_part
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import ChunkTaskRow, FileRow

if TYPE_CHECKING:
    from rivet_core.destination import Destination, ObjectInfo
    from rivet_core.pipeline.single.job import ExportRun

log = logging.getLogger("rivet.resume")


def checkpoint_to_resume(run: ExportRun, chunk_plan: ChunkLayout) -> str:
    """The run_id of the in-progress chunk run that `run` may resume (step 1 of the module
    docstring), or a ConfigError naming the command to run instead."""
    export, cfg = run.export, run.config.config_path
    found = run.state.find_in_progress_chunk_run(export.name)
    if found is None:
        raise ConfigError(
            f"export '{export.name}': --resume but no in-progress chunk checkpoint (the last chunk run "
            f"finished, or none was started) — run `rivet run -c {cfg} -e {export.name}` without --resume")
    if found.plan_hash != chunk_plan.plan_hash:
        raise ConfigError(
            f"export '{export.name}': plan fingerprint mismatch — the checkpoint of run {found.run_id} was "
            f"planned as {found.plan_hash}, the current config plans {chunk_plan.plan_hash} (the query, "
            "chunk column or chunk shape changed), so it cannot resume. Restore the old settings, or "
            f"clear the checkpoint with `rivet state reset-chunks -c {cfg} -e {export.name}` and run again")
    return found.run_id


@dataclass
class CompletedWindowParts:
    """A completed task's attempt as file_log recorded it, checked against the destination."""

    task: ChunkTaskRow
    #: file_log rows of the attempt named by `task.file_name` (rotation siblings included).
    parts: list[FileRow]
    #: the subset missing at the destination, or present at another size.
    broken: list[FileRow]

    @property
    def intact(self) -> bool:
        return bool(self.parts) and not self.broken


def match_completed_parts(tasks: Iterable[ChunkTaskRow], logged: Iterable[FileRow],
                          listing: Mapping[str, ObjectInfo]) -> list[CompletedWindowParts]:
    """Rehydration (docs/rivet-compat.md "Resume decisions and rehydration"): for each completed task that produced a file, the parts of exactly the
    attempt that completed it (`attempt_key` equal to the task's file_name), and which of them
    the destination listing does not hold at the recorded size. Empty windows are skipped.
    Shared by resume (below) and the chunk-task finalize (pipeline/chunked/tasks.py)."""
    by_attempt: dict[str, dict[str, FileRow]] = {}
    for f in logged:
        by_attempt.setdefault(attempt_key(f.file_name), {})[f.file_name] = f
    found = []
    for task in tasks:
        if task.status != "completed" or not task.file_name:
            continue
        parts = list(by_attempt.get(attempt_key(task.file_name), {}).values())
        broken = [f for f in parts if f.file_name not in listing or listing[f.file_name].size != f.bytes]
        found.append(CompletedWindowParts(task, parts, broken))
    return found


def rehydrate_window(summary: RunSummary, window: CompletedWindowParts,
                     listing: Mapping[str, ObjectInfo], dest: Destination | None = None,
                     known: Mapping[str, PartRecord] | None = None, key_column: str | None = None) -> list[str]:
    """Put an intact window's parts back into the run's manifest parts; returns their keys.

    With `dest`, each part is read back once to record its fingerprints (content xxh3, MD5,
    Form B column checksums) — file_log keeps only size and rows, and every part of every
    manifest carries its fingerprints, whichever process wrote it. A part that cannot be
    read keeps the listing's MD5 only (size-only verification) and the run warns.
    `known`: part key → the record its `write_part_file` returned in this process (the
    fingerprints taken while the part was written, as a `rivet run` records them); a part
    found there with the same rows and size is not read back. `key_column`: the export's
    Form B checksum key (column_checksums.checksum_key_column)."""
    for f in window.parts:
        seen = known.get(f.file_name) if known is not None else None
        if seen is not None and seen.rows == f.row_count and seen.size_bytes == f.bytes and seen.content_fingerprint:
            rehydrate_part(summary, seen)
            continue
        record = PartRecord(path=f.file_name, rows=f.row_count, size_bytes=f.bytes, content_fingerprint="",
                            content_md5=listing[f.file_name].md5_b64 or "")
        if dest is not None:
            record = _fingerprinted(summary, dest, record, key_column)
        rehydrate_part(summary, record)
    return [f.file_name for f in window.parts]


def _fingerprinted(summary: RunSummary, dest: Destination, record: PartRecord,
                   key_column: str | None = None) -> PartRecord:
    # The part is durable; its fingerprints are best effort.
    with best_effort("part fingerprints", warn=summary.add_warning,
                     message=f"part '{record.path}': fingerprints not recorded ({{kind}}: {{reason}}) — "
                             "verification of this part is size-only"):
        data = dest.read_bytes(record.path)
        fp = Fingerprinter()
        fp.update(data)
        if fp.size != record.size_bytes:
            raise DestinationError(f"read {fp.size} bytes, file_log says {record.size_bytes}")
        return PartRecord(path=record.path, rows=record.rows, size_bytes=record.size_bytes,
                          content_fingerprint=fp.xxh3, content_md5=fp.md5_b64,
                          column_checksums=part_column_checksums(record.path, data, key_column))
    return record


def prepare_resume(run: ExportRun, run_id: str) -> None:
    """Everything a resume does before draining, after `run` adopted `run_id` (module docstring)."""
    state, dest, summary = run.state, run.dest, run.summary
    state.reset_stale_running_chunk_tasks(run_id)
    state.reset_failed_chunk_tasks_for_resume(run_id)
    logged = state.list_files_for_run(run_id)
    listing = {o.key: o for o in dest.list("")}
    kept: set[str] = set()
    stats = {"kept": 0, "rewrite": 0, "quarantined": 0}
    for window in match_completed_parts(state.list_chunk_tasks(run_id), logged, listing):
        if not window.intact:
            for f in window.broken:
                if f.file_name in listing and quarantine_object(dest, run_id, f.file_name):
                    stats["quarantined"] += 1
            state.reset_chunk_task_for_re_export(run_id, window.task.chunk_index,
                                                 "resume: part missing or resized at the destination")
            stats["rewrite"] += 1
            continue
        kept.update(rehydrate_window(summary, window, listing, dest, key_column=checksum_key_column(run.export)))
        stats["kept"] += len(window.parts)
    for key in listing:
        if is_own_part(key, run.export.name, run_id) and key not in kept and quarantine_object(dest, run_id, key):
            stats["quarantined"] += 1
    summary.journal.record("Warning", context="resume",
                           message=f"resumed run {run_id}: {stats['kept']} part(s) kept, "
                                   f"{stats['rewrite']} window(s) to re-export, {stats['quarantined']} "
                                   "object(s) quarantined")
    log.info("export '%s': resuming %s (%s)", run.export.name, run_id, stats)
