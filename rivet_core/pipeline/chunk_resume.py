"""Resuming a checkpointed chunked run: refusals, resets and the resume decisions (M8).

`prepare_resume(run, chunk_plan)`:
1. refuses, with the command to run instead, when there is no in-progress chunk run for
   the export, when its plan hash differs from the current plan (the query, column or
   chunk shape changed), or when the prefix already holds `_SUCCESS` and `--force` was not
   given (a resume would rewrite a verified dataset);
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
from typing import TYPE_CHECKING

from rivet_core.chunks import ChunkPlan
from rivet_core.errors import ConfigError
from rivet_core.manifest import SUCCESS_KEY, quarantine_object
from rivet_core.pipeline.chunk_commit import attempt_key, part_prefix
from rivet_core.pipeline.commit import PartRecord, rehydrate_part

if TYPE_CHECKING:
    from rivet_core.pipeline.chunked import ChunkedRun

log = logging.getLogger("rivet.resume")


def _refuse_or_find(run: ChunkedRun, chunk_plan: ChunkPlan) -> str:
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
    if not run.options.force and run.dest.head(SUCCESS_KEY) is not None:
        raise ConfigError(
            f"export '{export.name}': the destination {run.dest.uri} already holds _SUCCESS; resuming would "
            "rewrite a verified dataset — pass --force to resume anyway")
    return found.run_id


def prepare_resume(run: ChunkedRun, chunk_plan: ChunkPlan) -> None:
    """Everything a resume does before draining (module docstring)."""
    run_id = _refuse_or_find(run, chunk_plan)
    run.adopt_run_id(run_id)
    state, dest, summary = run.state, run.dest, run.summary
    state.reset_stale_running_chunk_tasks(run_id)
    state.reset_failed_chunk_tasks_for_resume(run_id)
    logged = state.list_files_for_run(run_id)
    listing = {o.key: o for o in dest.list("")}
    kept: set[str] = set()
    stats = {"kept": 0, "rewrite": 0, "quarantined": 0}
    for task in state.list_chunk_tasks(run_id):
        if task.status != "completed":
            continue
        if not task.file_name:  # an empty window: nothing to rehydrate
            continue
        attempt = attempt_key(task.file_name)
        parts = [f for f in logged if attempt_key(f.file_name) == attempt]
        broken = [f for f in parts if f.file_name not in listing or listing[f.file_name].size != f.bytes]
        if not parts or broken:
            for f in broken:
                if f.file_name in listing and quarantine_object(dest, run_id, f.file_name):
                    stats["quarantined"] += 1
            state.reset_chunk_task_for_re_export(run_id, task.chunk_index,
                                                 "resume: part missing or resized at the destination")
            stats["rewrite"] += 1
            continue
        for f in parts:
            rehydrate_part(summary, PartRecord(path=f.file_name, rows=f.row_count, size_bytes=f.bytes,
                                               content_fingerprint="",
                                               content_md5=listing[f.file_name].md5_b64 or ""))
            kept.add(f.file_name)
            stats["kept"] += 1
    own = part_prefix(run.export.name, run_id)
    for key in listing:
        if key.startswith(own) and key not in kept and quarantine_object(dest, run_id, key):
            stats["quarantined"] += 1
    summary.journal.record("Warning", context="resume",
                           message=f"resumed run {run_id}: {stats['kept']} part(s) kept, "
                                   f"{stats['rewrite']} window(s) to re-export, {stats['quarantined']} "
                                   "object(s) quarantined")
    log.info("export '%s': resuming %s (%s)", run.export.name, run_id, stats)
