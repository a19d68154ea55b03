"""Retention and `rivet gc`: the rules of rivet_core/manifest/retention.py applied to an
export's prefix, with the export lock, the state store and the journal.

Two callers, one implementation (`gc_prefix`):

- the finalize sequence (finalize.py) after a successful publish — `manifest.json`,
  `manifest-<run>.json` and `_SUCCESS` landed, and validation passed when it ran:
  `apply_retention` with the export's `retention:` block. It runs inside the run, under the
  run's own export lock; a failure is a warning on the run, never a failed run (the data
  is published; gc only tidies).
- `rivet gc` (`run_gc`): on demand, with the config's block or rules given on the command
  line, under the export's exclusive lock — refused (exit 2) while a run of the export, or a
  worker of its orchestrated chunk run (a shared holder), holds it. `--dry-run` plans and prints, and writes nothing anywhere
  (no lock row, no journal, no destination change).

Both take their policy from `policy_for`, the one door to a `RetentionPolicy` (an orchestrator's
run reaches it through the finalize): it applies the refusals the config load applies to a
`retention:` block (`refuse_gc`: no table, no stdout) and the block's bounds to command-line
rules. At the prefix, the planner refuses (no step) when the manifests there do not describe
every file gc may touch — a table, another export's trail (manifest/retention.py, `refusal`).

Every step is journaled: `GcPlanned` (policy, kept and readable runs), one `GcStep` per move
or delete (with its error when it failed), `GcCompleted` — in the run's journal, or for
`rivet gc` in a journal of its own (run id `<export>_gc_<stamp>`, shown by `rivet journal`).

gc writes no manifest and no state besides that journal: it moves run copies and parts
aside and deletes what spent the grace period in quarantine. Files a later step still needs
are protected through the state store (`protector`).
"""

from __future__ import annotations

import logging
import math
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.config.limits import RETENTION_BOUNDS
from rivet_core.destination import Destination
from rivet_core.errors import ConfigError, best_effort
from rivet_core.manifest.retention import (
    GcOutcome,
    GcPlan,
    GcStep,
    RetentionPolicy,
    RunRef,
    execute_gc,
    new_stamp,
    plan_gc,
    read_snapshot,
)
from rivet_core.pipeline.retention.dataset_kind import adds_rows_each_run
from rivet_core.runrecord.journal import RunJournal

if TYPE_CHECKING:
    from collections.abc import Callable

    from rivet_core.runrecord.summary import RunSummary
    from rivet_core.state import StateStore
    from rivet_core.unit.resolve import ResolvedUnit

log = logging.getLogger("rivet.gc")


def protector(state: StateStore | None, export_name: str) -> Callable[[RunRef], bool]:
    """Runs whose parts a later step still needs, so gc leaves them alone:

    - a chunk run in progress — a `--resume` or the chunk finalize (pipeline/chunked/tasks.py) will
      list its parts (a failed checkpointed run leaves a `failed` run copy naming them);
    - a chunk run completed whose manifest did not publish (a `failed` copy) — the chunk
      planner (pipeline/chunked/tasks.py) carries its windows, parts in place, into the next chunk run.

    Spare on doubt: without a state store, or when it cannot answer, every run that did not
    succeed is protected."""
    def protect(run: RunRef) -> bool:
        if state is None:
            return run.status != "success"
        with best_effort("read the chunk run", logger=log,  # spare on doubt
                         message=f"export '{export_name}': state store unreadable ({{reason}}); run "
                                 f"{run.run_id} is spared") as attempt:
            chunk_run = state.get_chunk_run(run.run_id)
        if attempt.failed:
            return run.status != "success"
        if chunk_run is None:
            return False
        return chunk_run.status == "in_progress" or (chunk_run.status == "completed" and run.status != "success")
    return protect


@dataclass
class GcReport:
    """What gc did (or, dry, would do) at one prefix."""

    export_name: str
    uri: str
    dry_run: bool
    plan: GcPlan | None = None
    outcome: GcOutcome | None = None
    #: Why nothing was planned (no manifest yet), or why gc could not run there.
    note: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.outcome.failed) if self.outcome else 0

    @property
    def refused(self) -> bool:
        return self.plan is not None and self.plan.refused is not None

    def lines(self) -> list[str]:
        head = f"{self.export_name}: {self.uri}"
        if self.plan is None:
            return [f"{head} — {self.note}"]
        if self.plan.refused is not None:
            return [f"{head} — REFUSED: {self.plan.refused}"]
        out = [f"{head} — {self.plan.policy.describe()}",
               f"  {self.plan.headline()}{' (dry run: nothing changed)' if self.dry_run else ''}",
               f"  kept: {', '.join(self.plan.kept)}", f"  readable (in place): {', '.join(self.plan.live)}"]
        if self.plan.protected:
            out.append(f"  protected: {', '.join(self.plan.protected)}")
        failed = {id(s): e for s, e in (self.outcome.failed + self.outcome.skipped if self.outcome else [])}
        for step in self.plan.steps:
            mark = f"  FAILED: {failed[id(step)]}" if id(step) in failed else ""
            out.append(f"  {'would ' if self.dry_run else ''}{step.line()}{mark}")
        out += [f"  note: {n}" for n in self.plan.notes]
        out += [f"  warning: {w}" for w in self.warnings]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"export_name": self.export_name, "uri": self.uri, "dry_run": self.dry_run, "note": self.note,
                "plan": self.plan.to_dict() if self.plan else None,
                "outcome": self.outcome.to_dict() if self.outcome else None, "warnings": self.warnings}


def gc_prefix(dest: Destination, export: ExportConfig, policy: RetentionPolicy, *, state: StateStore | None,
              now: datetime, sweep_orphans: bool, journal: RunJournal | None, dry_run: bool = False,
              stamp: str | None = None) -> GcReport:
    """Plan and (unless `dry_run`) carry out gc at one prefix; journal each step. The caller
    holds the export's lock. Raises only when the current manifest cannot be read."""
    refuse_gc(export)
    report = GcReport(export.name, dest.uri, dry_run)
    snapshot = read_snapshot(dest)
    if snapshot is None:
        report.note = "no manifest.json: nothing published here yet, nothing to keep or remove"
        return report
    if snapshot.current.export_name != export.name:
        report.note = (f"manifest.json was written by export '{snapshot.current.export_name}', not "
                       f"'{export.name}' — left alone")
        return report
    plan = plan_gc(snapshot, policy, now, uri=dest.uri, accumulates=adds_rows_each_run(export),
                   protect=protector(state, export.name), sweep_orphans=sweep_orphans,
                   stamp=stamp or new_stamp(now))
    report.plan = plan
    if dry_run:
        return report
    if journal is not None:
        journal.record("GcPlanned", uri=dest.uri, policy=policy.to_dict(), current_run=plan.current_run,
                       kept_runs=plan.kept, live_runs=plan.live, protected_runs=plan.protected,
                       steps=len(plan.steps), notes=plan.notes, stamp=plan.stamp, refused=plan.refused)
    if plan.refused is not None:  # journaled (what was found, the fix); nothing to carry out
        return report

    def on_step(step: GcStep, error: str | None) -> None:
        if journal is not None:
            journal.record("GcStep", action=step.action, key=step.key, moved_to=step.moved_to, reason=step.reason,
                           ok=error is None, error=error)

    report.outcome = execute_gc(dest, plan, on_step)
    if journal is not None:
        journal.record("GcCompleted", uri=dest.uri, done=len(report.outcome.done),
                       failed=len(report.outcome.failed), skipped=len(report.outcome.skipped))
    return report


def apply_retention(plan: ResolvedUnit, summary: RunSummary, state: StateStore, dest: Destination, *,
                    sweep_orphans: bool) -> None:
    """The finalize sequence's retention step (module docstring). Never raises."""
    block = plan.export.retention
    if block is None or not dest.supports_manifest:
        return
    if summary.status != "success" or not summary.manifest_written:
        return  # only after a publish whose _SUCCESS landed
    if summary.validated is False:
        summary.add_warning("retention skipped: validation failed, so the older runs stay as they are")
        return
    report = None  # gc never fails a published run
    with best_effort("retention", warn=summary.add_warning, message="retention skipped: {reason}"):
        policy = policy_for(plan.export)
        if policy is not None:
            report = gc_prefix(dest, plan.export, policy, state=state, now=datetime.now(UTC),
                               sweep_orphans=sweep_orphans, journal=summary.journal)
    if report is None:
        return
    if report.plan is not None and report.plan.refused is not None:
        summary.add_warning(f"retention refused for export '{plan.export.name}' at {dest.uri}: "
                            f"{report.plan.refused}")
    if report.outcome is not None and (report.outcome.failed or report.outcome.skipped):
        summary.add_warning(f"retention: {len(report.outcome.failed)} step(s) failed, "
                            f"{len(report.outcome.skipped)} skipped — see the journal; `rivet gc` retries them")


def refuse_gc(export: ExportConfig) -> None:
    """Raise `ConfigError` when gc must never run for `export`, whoever asks (the config's
    block, command-line rules, the finalize, the API): the same refusals the config load
    applies to a `retention:` block (config/validate.py), so rules given another way cannot
    slip past them."""
    if export.destination.type == "stdout":
        raise ConfigError(f"export '{export.name}' writes to stdout: there is no prefix to clean")
    if export.table_format is not None:
        raise ConfigError(
            f"export '{export.name}' is a {export.table_format} table (table_format: {export.table_format}): "
            "gc would move parts the table's snapshots still reference and break it — rivet gc and "
            "retention never clean a table; vacuum it with its own tools instead (docs/adr/0009-table-formats.md)")


def _bounded(export: ExportConfig, flag: str, value: float | None) -> None:
    """A command-line rule within the bounds a `retention:` block has (config/limits.py)."""
    if value is None:
        return
    low = 1 if flag == "keep_runs" else 0
    high = RETENTION_BOUNDS[flag][1]
    ok = math.isfinite(value) and low <= value <= high and not (flag == "keep_days" and value == 0)
    if not ok:
        floor = ">= 1" if flag == "keep_runs" else "> 0" if flag == "keep_days" else ">= 0"
        raise ConfigError(f"export '{export.name}': --{flag.replace('_', '-')} {value!r} is out of range — "
                          f"give a number {floor} and <= {high:g}")


def policy_for(export: ExportConfig, *, keep_runs: int | None = None, keep_days: float | None = None,
               grace_hours: float | None = None) -> RetentionPolicy | None:
    """THE retention policy of `export`, for every gc entry point (the finalize's retention
    step, `rivet gc` with or without rules, `run_gc`, an orchestrator's runs through the finalize):
    the export's `retention:` block with command-line rules over it; None when neither says
    what to keep. Raises `ConfigError` for an export gc must never touch (`refuse_gc`) or a
    rule out of bounds."""
    refuse_gc(export)
    for flag, value in (("keep_runs", keep_runs), ("keep_days", keep_days), ("grace_hours", grace_hours)):
        _bounded(export, flag, value)
    block = export.retention
    runs = keep_runs if keep_runs is not None else (block.keep_runs if block and keep_days is None else None)
    days = keep_days if keep_days is not None else (block.keep_days if block and keep_runs is None else None)
    grace = grace_hours if grace_hours is not None else (float(block.grace_hours) if block else 24.0)
    if runs is None and days is None:
        return None
    return RetentionPolicy(keep_runs=runs, keep_days=days, grace_hours=grace)


def run_gc(config: RivetConfig, export: ExportConfig, policy: RetentionPolicy, *, dry_run: bool = False,
           now: datetime | None = None, state: StateStore | None = None) -> list[GcReport]:
    """`rivet gc` for one export: its prefix; each bucket's prefix of a `partition_by` export
    (`<col>=<label>/…`, under the manifest name `<export>__<label>` and the bucket run's lock);
    each time partition's prefix when the export was written as partitions (no
    `manifest.json` at its root). `now` is the clock (tests move it past the grace period).
    Raises `ExportLocked` when a run holds the export, `ConfigError` when gc must never run
    for it (`refuse_gc`)."""
    from rivet_core.state import StateStore

    refuse_gc(export)
    now = now or datetime.now(UTC)
    own_state = state is None
    store = state or StateStore.open(config.config_path)
    reports = []
    try:
        for dest, owner, label in _gc_targets(config, export):
            reports.append(_gc_locked(config, owner, policy, dest, store, now=now, dry_run=dry_run, label=label))
    finally:
        if own_state:
            store.close()
    return reports


def _gc_targets(config: RivetConfig, export: ExportConfig) -> list[tuple[Destination, ExportConfig, str | None]]:
    """(prefix, the export that publishes there, lock window label) for each prefix gc cleans."""
    from rivet_core.unit.resolve import export_destination, partition_prefixes

    if export.partition_by:  # each bucket is a sub-export of its own (pipeline/buckets/run.py)
        from rivet_core.pipeline.retention.bucket_layout import (
            bucket_prefixes,
            bucket_targets,
            root_export,
        )

        root = root_export(export)
        return [(export_destination(config, root, sub_prefix=prefix, create=False),
                 root.model_copy(update={"name": name, "partition_by": None}), None)
                for prefix, _label, name in bucket_targets(export, bucket_prefixes(config, export))
                ] or [(export_destination(config, root, create=False), root, None)]
    root_dest = export_destination(config, export, create=False)
    subs = [] if root_dest.head("manifest.json") is not None else partition_prefixes(config, export)
    # A partition's lock is `<export>@<key>` (state/locks.py); its sub-prefix `<time_column>=<key>/`.
    return [(export_destination(config, export, sub_prefix=s, create=False), export,
             s[len(f"{export.time_column}="):-1]) for s in subs] or [(root_dest, export, None)]


def _gc_locked(config: RivetConfig, export: ExportConfig, policy: RetentionPolicy, dest: Destination,
               state: StateStore, *, now: datetime, dry_run: bool, label: str | None) -> GcReport:
    stamp = new_stamp(now)
    sweep = export.mode != "chunked"
    if dry_run:
        return gc_prefix(dest, export, policy, state=state, now=now, sweep_orphans=sweep, journal=None,
                         dry_run=True, stamp=stamp)
    lock = state.acquire_export_lock(export.name, mode="exclusive", window_label=label,
                                     config_hint=shlex.quote(str(config.config_path)))
    journal = RunJournal(run_id=f"{export.name}_gc_{stamp}", export_name=export.name)
    try:
        report = gc_prefix(dest, export, policy, state=state, now=now, sweep_orphans=sweep, journal=journal,
                           stamp=stamp)
    finally:
        lock.release()
    if journal.entries:
        # The steps happened; say the journal is missing.
        with best_effort("gc journal", logger=log, message="journal not stored: {reason}") as attempt:
            state.store_journal(journal.run_id, export.name, journal.to_dict())
        if attempt.failed:
            report.warnings.append(f"journal not stored: {attempt.reason}")
    return report


__all__ = ["GcReport", "adds_rows_each_run", "apply_retention", "gc_prefix", "policy_for", "protector", "refuse_gc",
           "run_gc"]
