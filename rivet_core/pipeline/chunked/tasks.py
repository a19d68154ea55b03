"""The chunk-task protocol: a chunked export's windows as tasks an orchestrator plans,
runs in batches and finalizes (ADR-0005 in docs/adr/ says how one orchestrator maps it).
This module knows no orchestrator: it speaks of windows, tasks, batches, the chunk run and
its finalize; the orchestrator words its users' messages through a `Wording`.

An orchestrated chunked export is a sequence of checkpointed chunk runs (`chunk_run` +
`chunk_task`, state/chunks.py). Checkpointing is implied (`checkpointed_export` sets
`chunk_checkpoint: true`), and planning never downgrades to a full export.

- **The chunk run in progress** is opened by whoever needs it first (the planning call, a
  window batch, the finalize). If the export's previous chunk run was finalized with
  the same plan hash, the new one *continues* it: every window completed there is carried
  as completed (its parts stay where they are, found again through file_log by attempt
  name), so a finalized dataset grows by the new windows only. Otherwise (first run, a
  changed plan, a reset) every window starts pending.
- **Planning** (`plan_chunk_tasks`, called periodically by the orchestrator): plans the
  windows against the source; new grid windows (range, days) are added to the in-progress
  run (`add_chunk_tasks`); keyset plans keep their windows (the open last window absorbs
  appended rows; their boundaries come from the checkpoint, never sampled again). Every
  completed window is fingerprinted by one grouped query (COUNT, and MAX(change_column)
  with a `change_column`; rivet_core/chunks/fingerprint.py) and *refilled* — re-opened in a
  run that continues the published one — when its count differs from the rows it exported
  (rows inserted, deleted, new keys inside a keyset window) or its fingerprint differs
  from the one the caller recorded at its export (updates). `refresh=True` resets every
  window to pending instead. Windows whose worker the caller says is gone (`is_gone`: an
  orchestrator run that was killed or terminated) are taken over: a `running` one back to
  pending (I5), each listed in `orphaned` to be run again while its attempts last. A
  finalized run with nothing new or changed opens nothing.
  The result (`ChunkTaskPlan`) says which windows to run and whether the finalize is due.
- **A window batch** (`ChunkWindowRun`, one or more window keys): claims exactly those
  tasks (`claim_chunk_task`: a completed window is re-claimed on purpose, a failed one gets
  a fresh budget, and a task left `running` by a worker the caller knows is gone is taken
  over by compare-and-swap), stages each window (`stage_window`, `extract`) and publishes
  it (`write_window` + `commit_window`, the same per-window commit as every runner;
  `publish`). No manifest per batch. A failed window fails its task (`fail_chunk_task`,
  retryable for transient errors); an error inside the commit leaves the task `running`
  for the next run of that window to take over.
- **Finalize** (`ChunkFinalizeRun`): refuses, publishing
  nothing, while a window is not completed (I6; it says how many and which); checks every
  completed window's parts against the destination (a missing or resized part resets its
  task and the window must be run again); then `finalize_chunk_run_completed`,
  rebuilds the manifest parts from file_log (`match_completed_parts`, the rehydration of
  resume), moves this run's unlisted objects (crashed or superseded attempts) to
  `_quarantine/<run_id>/`, and runs the ordinary finalize sequence with
  `supersede_previous`: after the new manifest landed, parts the previous manifest listed
  and this one does not (a re-run window's old attempt) are quarantined. Nothing
  is deleted.

Each planning call (planning, a batch, the finalize) checks that the config still plans the
plan hash of the in-progress run; a changed query, column or chunk shape is refused with the
command that clears the checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import xxhash

from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.chunks.fingerprint import EMPTY, WindowFingerprint
from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.errors import ConfigError, DataIntegrityError, RivetError, best_effort
from rivet_core.manifest import quarantine_object, read_manifest, schema_fingerprint
from rivet_core.manifest.column_checksums import checksum_key_column
from rivet_core.pipeline.chunked.checkpoint import CheckpointRuns, task_spec
from rivet_core.pipeline.chunked.planning import SourceFingerprints
from rivet_core.pipeline.chunked.resume import match_completed_parts, rehydrate_window
from rivet_core.pipeline.chunked.run import ChunkedRun
from rivet_core.pipeline.facade.chunk_commit import (
    StagedWindow,
    WindowResult,
    commit_window,
    is_own_part,
    stage_window,
    write_window,
)
from rivet_core.pipeline.facade.commit import PartRecord
from rivet_core.pipeline.facade.schema_drift import record_gated_upstream
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.single.job import RunOptions
from rivet_core.redact import redact_secrets
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source import classify_error
from rivet_core.state import (
    ChunkRunIncomplete,
    ChunkRunRow,
    ChunkTaskNotRunning,
    ChunkTaskRow,
)

log = logging.getLogger("rivet.chunk_tasks")

#: How an orchestrator words the core's refusals and notices for its users:
#: (kind, facts) → its text, or None for the neutral text below. Kinds: the `kind` of each
#: `ChunkTaskRefusal` class, the problems of `chunk_task_problem` (`not_chunked`,
#: `moving_windows`, `keyset_incremental`) and the notice `finalize_due_again`.
Wording = Callable[[str, Mapping[str, Any]], "str | None"]


def _worded(words: Wording | None, kind: str, facts: Mapping[str, Any], neutral: str) -> str:
    found = words(kind, facts) if words is not None else None
    return found if found is not None else neutral


def checkpointed_export(export: ExportConfig) -> ExportConfig:
    """The export as an orchestrator runs it: checkpointing implied (its tasks ARE the checkpoint)."""
    if export.chunk_checkpoint:
        return export
    return export.model_copy(update={"chunk_checkpoint": True})


def chunk_task_problem(export: ExportConfig, words: Wording | None = None) -> str | None:
    """Why a chunked export cannot be run as window tasks, or None. Decided from the config
    alone (no source probe), so an orchestrator refuses it when it loads the config."""
    name = export.name
    if export.mode != "chunked":
        facts: dict[str, Any] = {"export": name, "mode": export.mode}
        return _worded(words, "not_chunked", facts, f"export '{name}' is mode '{export.mode}', not chunked")
    if export.chunk_count is not None or export.chunk_dense:
        knob = "chunk_count" if export.chunk_count is not None else "chunk_dense"
        return _worded(words, "moving_windows", {"export": name, "knob": knob}, (
            f"export '{name}': {knob} windows depend on the table's current extent and change as it grows, "
            "so they cannot be long-lived window tasks (a window key must name the same rows forever) — use "
            "chunk_column + chunk_size (grid-aligned), chunk_by_days or chunk_by_key, or run this export with "
            "the CLI"))
    if export.keyset_incremental:
        return _worded(words, "keyset_incremental", {"export": name}, (
            f"export '{name}': keyset_incremental is a CLI mode; as window tasks a keyset export already "
            "grows through its open last window, which planning runs again — remove keyset_incremental"))
    return None


class ChunkTaskRefusal:
    """Mixin of the protocol's refusals: a `kind` and the `facts` an orchestrator needs to
    word the message for its users (`Wording`); the neutral text is the default."""

    kind: ClassVar[str] = ""
    facts: dict[str, Any]


class ChunkWindowsMissing(ChunkTaskRefusal, DataIntegrityError):
    """The chunk run cannot be finalized: windows are not completed (I6)."""

    kind = "windows_missing"

    def __init__(self, export_name: str, run_id: str, missing: list[ChunkTaskRow], total: int,
                 reasons: dict[str, str] | None = None, *, words: Wording | None = None) -> None:
        keys = [t.window_key for t in missing]
        shown = ", ".join(keys[:10]) + (f", … ({len(keys) - 10} more)" if len(keys) > 10 else "")
        detail = "; ".join(f"{k}: {r}" for k, r in list((reasons or {}).items())[:5])
        self.facts = {"export": export_name, "run_id": run_id, "missing": len(missing), "total": total,
                      "shown": shown, "detail": detail}
        super().__init__(_worded(words, self.kind, self.facts, (
            f"export '{export_name}': {len(missing)} of {total} chunk window(s) not completed "
            f"(chunk run {run_id}) — nothing was published; run window(s) {shown}, then the finalize again"
            + (f" ({detail})" if detail else ""))))
        self.missing_keys = keys
        self.total = total


class ChunkTaskBusy(ChunkTaskRefusal, RivetError):
    """The window is being exported by another live worker (or cannot be claimed)."""

    kind = "busy"
    exit_code = 1

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': window {facts['window']} is {facts['status']}{facts['owner']} and cannot "
            f"be claimed by {facts['worker']} (chunk run {facts['run_id']}) — wait for that worker, or stop it "
            "and run the window again")))


class ChunkPlanChanged(ChunkTaskRefusal, ConfigError):
    """The config no longer plans the in-progress chunk run's windows."""

    kind = "plan_changed"

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': the config now plans {facts['plan_hash']} but the chunk run "
            f"{facts['run_id']} in progress was planned as {facts['run_plan_hash']} (the query, chunk column or "
            "chunk shape changed), so its window keys no longer name the same rows. Restore the old settings, "
            f"or clear the checkpoint with `rivet state reset-chunks -c {facts['config']} -e {facts['export']}` "
            "(the next planning call starts a fresh chunk run)")))


class UnknownWindows(ChunkTaskRefusal, ConfigError):
    """A batch names windows the in-progress chunk run does not have."""

    kind = "unknown_windows"

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': window(s) {facts['keys']} are not windows of chunk run "
            f"{facts['run_id']} (registered by an older plan?) — plan the chunk tasks again to register the "
            "current windows")))


class WindowPartsLost(ChunkTaskRefusal, DataIntegrityError):
    """A completed window's parts vanished while the finalize was building the manifest."""

    kind = "window_parts_lost"

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': window {facts['window']} lost its part(s) at the destination while "
            "the manifest was being built — run that window again")))


class FinalizedElsewhere(ChunkTaskRefusal, DataIntegrityError):
    """Another finalize (or a reset) took the chunk run meanwhile; this one published nothing."""

    kind = "finalized_elsewhere"

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': chunk run {facts['run_id']} is {facts['status']} — another finalize "
            "finalized it (or a reset removed it) meanwhile; this run published nothing")))


class NoChunkRun(ChunkTaskRefusal, ConfigError):
    """Nothing to reconcile: the export has no chunk run yet."""

    kind = "no_chunk_run"

    def __init__(self, facts: dict[str, Any], *, words: Wording | None = None) -> None:
        self.facts = facts
        super().__init__(_worded(words, self.kind, facts, (
            f"export '{facts['export']}': no chunk run recorded — plan the chunk tasks and run the windows "
            "first")))


@dataclass
class ChunkTaskPlan:
    """What one planning call found and did (the orchestrator turns it into runs of windows
    and, when `complete`, a run of the finalize)."""

    export_name: str
    #: The in-progress chunk run after this call, or None (a finalized run, nothing new).
    run_id: str | None
    #: Every window key of that run (else of the last finalized run), in window order.
    keys: list[str]
    #: True when this call opened a chunk run where every window is pending (nothing carried).
    fresh: bool = False
    #: Windows this call added to the checkpoint (new windows), in window order.
    added: list[str] = field(default_factory=list)
    #: Completed windows that changed at the source since they were exported → a token of
    #: what they hold now (the count without a change_column, else the fingerprint text).
    refill: dict[str, str] = field(default_factory=dict)
    #: Per refilled window: a short mark of its completed attempt (run keys stay unique when
    #: a window flips back to a fingerprint it had before).
    marks: dict[str, str] = field(default_factory=dict)
    #: Completed windows whose source COUNT differs from the rows they exported (a subset of
    #: `refill`): the published data misses or holds extra rows there.
    drifted: list[str] = field(default_factory=list)
    #: Windows reset for re-export by a refresh (`refresh=True`), in window order.
    refreshed: list[str] = field(default_factory=list)
    not_completed: int = 0
    #: Fingerprint of (window, attempt) of every completed window: names one finalize's input.
    stamp: str = ""
    warnings: list[str] = field(default_factory=list)
    #: (previous chunk run id, why) when a completed chunk run never published and its windows
    #: were carried into this one: the finalize is due again (also a line of `warnings`).
    finalize_due_again: tuple[str, str] | None = None
    #: Windows whose worker ended without finishing them (`is_gone`), taken over by this call
    #: → the attempts they used (a `running` one was returned to pending): to export again.
    orphaned: dict[str, int] = field(default_factory=dict)
    #: Windows left by an ended worker that used every attempt (`max_chunk_attempts`): not
    #: taken over; someone must fix the cause and run them again (also a line of `warnings`).
    exhausted: list[str] = field(default_factory=list)
    #: Pending windows nobody ever claimed (no worker), in window order: normally waiting for
    #: a requested run; the orchestrator knows whether that run still may come.
    unclaimed: list[str] = field(default_factory=list)
    #: The chunk run's `max_chunk_attempts` (0 without a run in progress).
    max_attempts: int = 0
    #: Set by the orchestrator: unclaimed windows it requests again because every run it
    #: requested them in ended before claiming them (cancelled while queued) → how many
    #: such runs ended (its run keys stay unique).
    requeued: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every window of the in-progress run is completed: the finalize can run."""
        return self.run_id is not None and self.not_completed == 0

    @property
    def to_export(self) -> list[str]:
        """Windows this tick asks to (re-)export, in window order."""
        wanted = (set(self.keys if self.fresh else self.added) | set(self.refill) | set(self.refreshed)
                  | set(self.orphaned) | set(self.requeued))
        return [k for k in self.keys if k in wanted]


def _window(task: ChunkTaskRow) -> ChunkWindow:
    return ChunkWindow(task.chunk_index, task.start_key, task.end_key, task.window_key)


def _stamp(tasks: Sequence[ChunkTaskRow]) -> str:
    hasher = xxhash.xxh3_64()
    for t in sorted(tasks, key=lambda t: t.window_key):
        if t.status == "completed":
            hasher.update(f"{t.window_key}\0{t.file_name or ''}\0{t.rows_written}\n".encode())
    return hasher.hexdigest()


def task_step_args(export: ExportConfig, words: Wording | None, run_label: str | None,
                   orchestrator: str | None) -> tuple[ExportConfig, RunOptions]:
    """The export and options every chunk-task step runs with: checkpointing implied, never
    a CLI-only shape (`chunk_task_problem`, refused here), internal retries and the run
    ledger left to the orchestrator. `run_label` names the orchestrator's run (recorded with
    the run; a batch's worker), `orchestrator` its display name in a lock refusal
    (rivet_core/orchestrator.py)."""
    problem = chunk_task_problem(export, words)
    if problem:
        raise ConfigError(problem)
    return checkpointed_export(export), RunOptions(orchestrator_run_id=run_label, orchestrator=orchestrator,
                                                   internal_retries=False, ledger=False)


def checkpoint_runs_of(run: ChunkedRun, words: Wording | None) -> CheckpointRuns:
    """The step's view of its export's chunk runs, refusing a changed plan in `words`."""
    return CheckpointRuns(run.state, run.export.name, run.config.config_path, max_attempts=run.max_attempts(),
                          plan_changed=lambda facts: ChunkPlanChanged(dict(facts), words=words))


def plan_task_windows(run: ChunkPlanningRun | ChunkWindowRun | ChunkFinalizeRun) -> ChunkLayout:
    """A step's windows: never downgraded to a full export, a keyset checkpoint's windows
    reused (chunked/planning.py)."""
    chunk_plan = run.plan_windows(allow_downgrade=False, stored_keyset=run.checkpoint_runs.keyset_boundaries())
    assert chunk_plan is not None  # allow_downgrade=False always plans
    return chunk_plan


class ChunkPlanningRun(ChunkedRun):
    """The run a planning call (`plan_chunk_tasks`) and `reconcile_chunks` work under: the
    export's lock, its plan and the services they ask (`checkpoint_runs`, `source_prints`).

    Many workers export windows of one export at once by design, so every chunk-task step
    holds the export lock `shared`: they never exclude each other, but a CLI run of the same
    export (exclusive) and they refuse each other (state/locks.py)."""

    lock_mode = "shared"

    def __init__(self, config: RivetConfig, export: ExportConfig, *, state=None,  # noqa: ANN001
                 words: Wording | None = None) -> None:
        super().__init__(config, *task_step_args(export, words, None, None), state=state, notifications=None)
        self.words = words
        self.checkpoint_runs = checkpoint_runs_of(self, words)
        self.source_prints = SourceFingerprints(self.plan, self.export)


# ------------------------------------------------------------------------------- planner
def plan_chunk_tasks(config: RivetConfig, export: ExportConfig, *, state=None,  # noqa: ANN001
                     recorded: Mapping[str, str] | None = None, refresh: bool = False,
                     words: Wording | None = None, is_gone: Callable[[str], bool] | None = None) -> ChunkTaskPlan:
    """One planning call (module docstring): keeps the checkpoint in step with the
    source and says which windows to (re-)export and whether the run can be finalized.

    Staleness: every completed window is fingerprinted with one grouped query
    (`SourceFingerprints.of`, chunked/planning.py). A window is *changed* — re-opened in a chunk run that
    continues the published one, and listed in `refill` — when its source COUNT differs from
    the rows it exported, or (with `change_column`) when its fingerprint differs from
    `recorded[key]`, the fingerprint the caller recorded when the window was last exported
    (a window without a record counts as changed). `refresh=True` re-exports every window:
    they are reset to pending (the finalize waits for all of them) with their keys and
    bounds kept.

    Orphans: `is_gone(worker)` says whether the worker that last claimed a window (the
    orchestrator's run) has ended. A window not completed whose worker is gone is taken over
    (`_take_over`): returned to pending when it was left `running` (I5), and listed in
    `orphaned` so the orchestrator requests it again — while its attempts are below the
    run's `max_chunk_attempts`; past that it is listed in `exhausted` with a warning. Without
    this a killed worker's windows stay `running` and nothing ever exports them again."""
    run = ChunkPlanningRun(config, export, state=state, words=words)
    try:
        chunk_plan = plan_task_windows(run)
        checkpoint_runs, store, name = run.checkpoint_runs, run.state, run.export.name
        current = store.find_in_progress_chunk_run(name)
        resumed = current is not None  # its tasks (`before`) may hold windows of ended workers
        previous = None
        if current is not None:
            checkpoint_runs.refuse_changed(current, chunk_plan)
            before = store.list_chunk_tasks(current.run_id)
        else:
            previous = checkpoint_runs.continued(chunk_plan)
            before = store.list_chunk_tasks(previous.run_id) if previous is not None else []
        carry = previous is not None
        extra = checkpoint_runs.new_windows(chunk_plan, before)
        completed = [t for t in before if t.status == "completed"]
        refill, marks, drifted = ({}, {}, []) if refresh else _changed(run, chunk_plan, completed, recorded)
        refresh_keys = sorted(t.window_key for t in completed) if refresh else []
        fresh = False
        due_again: tuple[str, str] | None = None
        warnings = list(chunk_plan.warnings)
        if current is None:
            unpublished = _unpublished(run, previous) if carry and not extra and not refill and not refresh_keys \
                else None
            if carry and not extra and not refill and not refresh_keys and unpublished is None:
                # finalized and published, nothing new: open nothing
                return ChunkTaskPlan(name, None, sorted(t.window_key for t in before), stamp=_stamp(before),
                                     warnings=warnings)
            if unpublished is not None:
                # Completed (I6) but never published: a new run carrying every window completed
                # is a run the orchestrator can finalize again under a new run id.
                due_again = (previous.run_id, unpublished)
                warnings.append(_worded(words, "finalize_due_again",
                                        {"export": name, "run_id": previous.run_id, "why": unpublished},
                                        f"export '{name}': chunk run {previous.run_id} completed every window but "
                                        f"{unpublished}; its windows are carried into a new chunk run and the "
                                        "finalize is due again"))
            current, fresh = checkpoint_runs.open(chunk_plan, extra=extra if carry else (),
                                                carry_completed=not refresh_keys)
        else:
            if extra:
                store.add_chunk_tasks(current.run_id, [task_spec(w) for w in extra])
            for t in completed if refresh_keys else ():
                store.reset_chunk_task_for_re_export(current.run_id, t.chunk_index, "refresh: re-export every window")
        orphaned, exhausted = _take_over(store, current, before, is_gone) if is_gone is not None and resumed \
            else ({}, [])
        if exhausted:
            warnings.append(_worded(words, "orphans_exhausted", {
                "export": name, "run_id": current.run_id, "keys": ", ".join(exhausted),
                "attempts": current.max_chunk_attempts}, (
                f"export '{name}': window(s) {', '.join(exhausted)} of chunk run {current.run_id} were left "
                f"unfinished by ended runs and used their {current.max_chunk_attempts} attempt(s); they are not "
                "taken over again — see `rivet state chunks` for their last error, fix the cause, then run "
                "them again (a deliberate re-run gets a fresh budget)")))
        tasks = store.list_chunk_tasks(current.run_id)
        keys = sorted(t.window_key for t in tasks)
        present = set(keys)
        added = [] if fresh else sorted(w.key for w in extra if w.key in present)
        return ChunkTaskPlan(
            name, current.run_id, keys, fresh=fresh, added=added, refill=refill, marks=marks, drifted=drifted,
            refreshed=[] if fresh else [k for k in refresh_keys if k in present],
            not_completed=sum(t.status != "completed" for t in tasks), stamp=_stamp(tasks),
            warnings=warnings, finalize_due_again=due_again, orphaned=orphaned, exhausted=exhausted,
            unclaimed=[t.window_key for t in sorted(tasks, key=lambda t: t.window_key)
                       if t.status == "pending" and not t.worker],
            max_attempts=current.max_chunk_attempts)
    finally:
        run.close()


def _take_over(store, run: ChunkRunRow, tasks: Sequence[ChunkTaskRow],  # noqa: ANN001
               is_gone: Callable[[str], bool]) -> tuple[dict[str, int], list[str]]:
    """(orphaned: key → attempts used, exhausted keys) among `tasks`: the windows not completed
    whose last worker is gone. A `running` one is returned to pending first (compare-and-swap:
    a window claimed since is left alone). A window already pending or failed with attempts
    left needs no write: the next batch claims it. The worker stays on the task, so a tick
    that dies before its request still finds the orphan on the next call."""
    gone: dict[str, bool] = {}  # one look per worker: a ranged run leaves several windows
    orphaned: dict[str, int] = {}
    exhausted: list[str] = []
    for t in sorted(tasks, key=lambda t: t.window_key):
        if t.status == "completed" or not t.worker:
            continue
        if t.worker not in gone:
            gone[t.worker] = is_gone(t.worker)
        if not gone[t.worker]:
            continue
        if t.attempts >= run.max_chunk_attempts:
            exhausted.append(t.window_key)
            continue
        if t.status == "running" and not store.return_orphaned_chunk_task(
                run.run_id, t.chunk_index, t.worker, f"left running by {t.worker}, which ended; taken over"):
            continue
        log.warning("export '%s': window %s was left %s by %s, which ended; taking it over (attempt %d of %d)",
                    run.export_name, t.window_key, t.status, t.worker, t.attempts + 1, run.max_chunk_attempts)
        orphaned[t.window_key] = t.attempts
    return orphaned, exhausted


def _unpublished(run: ChunkPlanningRun, previous: ChunkRunRow) -> str | None:
    """Why the completed chunk run `previous` never published its manifest, or None when it
    did — or when its finalize may still be running.

    `finalize_chunk_run_completed` (I6) marks the chunk run completed *before* the finalize
    sequence; a manifest run that fails after that point (the manifest write refused, a
    validation verdict) leaves a completed run with nothing published. Without this check the
    planning would see "finalized, nothing new" forever. The run ledger (`run_status`, keyed by
    the chunk run id, written by the finalize) decides: `success` is published; `failed` or
    `interrupted` is not. No outcome (no row, or `running`) is in doubt: while another run of
    the export holds a live export lock the finalize may be in flight, so planning waits;
    with none, the finalize died and is due again."""
    # An unreadable ledger: never re-publish on a guess.
    with best_effort("read the run ledger", logger=log,
                     message=f"export '{run.export.name}': run ledger unreadable ({{reason}}); "
                             "the finalize is not due again") as attempt:
        ledger = run.state.get_run_status(previous.run_id)
    if attempt.failed:
        return None
    status = ledger["status"] if ledger else None
    if status == "success":
        return None
    if status in ("failed", "interrupted"):
        return f"its finalize {status} (nothing was published)"
    own = run.export_lock.token if run.export_lock is not None else None
    if any(h.token != own and h.stale_reason() is None for h in run.state.list_export_locks(run.export.name)):
        return None
    return "its finalize never finished (no outcome in the run ledger, no live run of the export)"


def _changed(run: ChunkPlanningRun, chunk_plan: ChunkLayout, completed: Sequence[ChunkTaskRow],
             recorded: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(refill: key → token, marks: key → attempt mark, drifted keys) of the completed
    windows that changed at the source (see `plan_chunk_tasks`)."""
    prints = run.source_prints.of(chunk_plan, [_window(t) for t in completed])
    versioned = bool(run.export.change_column) and recorded is not None
    refill: dict[str, str] = {}
    marks: dict[str, str] = {}
    drifted: list[str] = []
    for t in sorted(completed, key=lambda t: t.window_key):
        now = prints.get(t.window_key, EMPTY)
        counted = now.rows != (t.rows_written or 0)
        if counted:
            drifted.append(t.window_key)
        if counted or (versioned and (recorded or {}).get(t.window_key) != now.text):
            refill[t.window_key] = now.text
            marks[t.window_key] = xxhash.xxh3_64_hexdigest(f"{t.file_name or ''}\0{t.rows_written}".encode())[:8]
    return refill, marks, drifted


# ------------------------------------------------------------------------------- a window batch
@dataclass
class _Claimed:
    task: ChunkTaskRow
    window: ChunkWindow
    staged: StagedWindow | None = None
    result: WindowResult | None = None
    #: committed (task completed), or left running by an error inside the commit: not released.
    settled: bool = False


class ChunkWindowRun(ChunkedRun):
    """One batch of window tasks: exports exactly its window(s) into the in-progress chunk run.

        run = ChunkWindowRun(config, export, ["id_…"], run_label=…)
        run.claim(is_gone=…)   # plan, schema gate, claim the tasks
        run.extract()          # stage each window (no destination write)
        run.publish()          # write_window + commit_window per window

    A failure in any phase fails the claimed tasks that are not committed (the failing window
    as classified — transient → retryable —, the others retryable) and removes the staging
    files, except an error inside `commit_window`, which leaves that task `running` as a
    crash would. `is_gone(worker)` says whether the worker holding a `running` task is dead
    (the orchestrator knows whether that worker's run is still going); only then is it taken
    over. A retry under the same `run_label` (the worker) takes its own `running` task back.
    It holds the export lock `shared`, as every chunk-task step (`ChunkPlanningRun`).
    """

    lock_mode = "shared"

    def __init__(self, config: RivetConfig, export: ExportConfig, window_keys: Sequence[str], *,
                 run_label: str, state=None, words: Wording | None = None,  # noqa: ANN001
                 orchestrator: str | None = None) -> None:
        super().__init__(config, *task_step_args(export, words, run_label, orchestrator), state=state,
                         notifications=None)
        self.words = words
        self.checkpoint_runs = checkpoint_runs_of(self, words)
        self.source_prints = SourceFingerprints(self.plan, self.export)
        self.chunk_run: ChunkRunRow | None = None
        self.window_keys = list(window_keys)
        self.worker = run_label
        self.claimed: list[_Claimed] = []
        self.ctx = None
        #: window key → what the source held in it when it was read (`extract`): the
        #: fingerprint to record with the window's export, in the window's own read snapshot,
        #: so it describes exactly the rows exported — a change committed after it is seen by
        #: the next planning call. Its COUNT is the rows the window read (the fingerprint
        #: query counts a row in exactly the window whose query reads it: chunks/fingerprint.py);
        #: with a `change_column` the query runs on the window's read session for MAX(),
        #: rather than one grouped query before the reads scanning every window's rows again.
        self.fingerprints: dict[str, WindowFingerprint] = {}

    @property
    def run_id(self) -> str:
        assert self.chunk_run is not None
        return self.chunk_run.run_id

    def claim(self, *, is_gone: Callable[[str], bool] | None = None) -> list[ChunkTaskRow]:
        fault_point("before_chunk_claim")  # a run started, its windows not yet claimed (tests park it here)
        try:
            chunk_plan = plan_task_windows(self)
            self._gate_probe_schema()  # the schema-drift facade, before anything is claimed
            run = self.chunk_run = self.checkpoint_runs.in_progress(chunk_plan)
            self.use_run_id(run.run_id)
            tasks = {t.window_key: t for t in self.state.list_chunk_tasks(run.run_id)}
            unknown = [k for k in self.window_keys if k not in tasks]
            if unknown:
                raise UnknownWindows({"export": self.export.name, "keys": ", ".join(unknown), "run_id": run.run_id},
                                     words=self.words)
            for key in self.window_keys:
                self.claimed.append(self._claim_one(tasks[key], is_gone))
            if self.export.change_column:  # refused before any window is read (describe only)
                self.source_prints.of(chunk_plan, [])
            self.ctx = self.window_context(run.run_id, read_slots=1)  # one query at a time (extract)
            if self.export.change_column:  # MAX(change_column) as the database renders it
                self.ctx.fingerprint = lambda src, window: self.source_prints.on(src, chunk_plan, [window])[window.key]
        except BaseException as exc:
            self.release(exc)
            raise
        return [c.task for c in self.claimed]

    def _claim_one(self, task: ChunkTaskRow, is_gone: Callable[[str], bool] | None) -> _Claimed:
        state, run_id = self.state, self.run_id
        claimed = state.claim_chunk_task(run_id, task.chunk_index, self.worker, fresh_budget=True)
        if claimed is None:
            now = state.get_chunk_task(run_id, task.chunk_index) or task
            gone = now.status == "running" and now.worker is not None and (
                now.worker == self.worker or (is_gone is not None and is_gone(now.worker)))
            if gone:
                log.warning("export '%s': window %s was left running by %s; taking it over",
                            self.export.name, task.window_key, now.worker)
                claimed = state.claim_chunk_task(run_id, task.chunk_index, self.worker, reclaim_from=now.worker,
                                                 fresh_budget=True)
            if claimed is None:
                owner = f" by {now.worker}" if now.status == "running" and now.worker else ""
                raise ChunkTaskBusy({"export": self.export.name, "window": task.window_key, "status": now.status,
                                     "owner": owner, "worker": self.worker, "run_id": run_id}, words=self.words)
        self.summary.journal.record("ChunkStarted", chunk_index=claimed.chunk_index, start_key=claimed.start_key,
                                    end_key=claimed.end_key)
        return _Claimed(task=claimed, window=_window(claimed))

    def extract(self) -> list[StagedWindow]:
        """Stage every claimed window; the fault point `chunk_export:N` fires first.

        Two windows are staged at a time through the context's one read slot, as `rivet run`
        drains a sequential chunked export (chunked/run.py `_run_workers`): the source still runs
        one query at a time, and the next window's query streams while the previous window's
        last row groups are encoded. The first window to fail (in claim order) is the one
        reported; no window starts after a failure, and the others are released with it."""
        assert self.ctx is not None, "claim() first"
        ctx = self.ctx
        failed: list[tuple[int, _Claimed | None, BaseException]] = []
        order = {id(c): n for n, c in enumerate(self.claimed)}

        def stage(c: _Claimed) -> None:
            if failed:
                return
            try:
                fault_point(f"chunk_export:{c.window.index}")
                c.staged = stage_window(ctx, c.window)
            except BaseException as exc:  # error boundary: reported on the calling thread, below
                failed.append((order[id(c)], c, exc))

        try:
            with ThreadPoolExecutor(max_workers=min(2, max(len(self.claimed), 1)),
                                    thread_name_prefix="rivet-window") as pool:
                try:
                    for _ in pool.map(stage, self.claimed):
                        pass
                except BaseException as exc:  # error boundary: interrupted while waiting; no window starts any more
                    failed.append((-1, None, exc))
        finally:
            ctx.close_sessions()  # the windows are read: no source session is kept
        if failed:
            _, failing, error = min(failed, key=lambda f: f[0])
            self.release(error, failing=failing)
            raise error
        self.fingerprints = {c.window.key: c.staged.fingerprint or WindowFingerprint(c.staged.rows)
                             for c in self.claimed if c.staged is not None}
        return [c.staged for c in self.claimed if c.staged is not None]

    def publish(self) -> list[WindowResult]:
        """Write and commit each staged window: `write_window`, then
        `commit_window` (record_part per part → file_log, fault points, complete_chunk_task)."""
        assert self.ctx is not None, "claim() first"
        for c in self.claimed:
            assert c.staged is not None, "extract() first"
            try:
                c.result = write_window(self.ctx, c.staged)
            except BaseException as exc:
                self.release(exc, failing=c)
                raise
            c.settled = True  # from here on an error leaves the task running (like a crash)
            try:
                commit_window(self.summary, self.state, c.result, checkpoint_run_id=self.run_id, worker=self.worker)
            except BaseException as exc:
                self.release(exc)
                raise
            log.info("export '%s': window %s committed (%d rows)", self.export.name, c.window.key, c.result.rows)
        self.cleanup()
        return [c.result for c in self.claimed if c.result is not None]

    def release(self, error: BaseException, *, failing: _Claimed | None = None) -> None:
        """Fail every claimed task that is not settled, then remove the staging files."""
        message = redact_secrets(error)
        transient = isinstance(error, Exception) and classify_error(error).transient
        for c in self.claimed:
            if c.settled:
                continue
            c.settled = True
            note = message if c is failing else f"not exported: {message}"
            # The step fails anyway; an unmarked task is taken over later. ChunkTaskNotRunning:
            # taken over meanwhile — that worker owns it now.
            with best_effort("mark the window failed", logger=log,
                             message=f"export '{self.export.name}': could not mark window {c.window.key} "
                                     "failed: {reason}"), contextlib.suppress(ChunkTaskNotRunning):
                self.state.fail_chunk_task(self.run_id, c.window.index, note,
                                           retryable=transient or c is not failing, worker=self.worker)
                self.summary.journal.record("ChunkFailed", chunk_index=c.window.index, error=note,
                                            attempt=c.task.attempts)
        self.cleanup()

    def cleanup(self) -> None:
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        self.close()


# ------------------------------------------------------------------------------- finalize
class ChunkFinalizeRun(ChunkedRun):
    """The finalize step: publish the in-progress chunk run (module docstring).

        run = ChunkFinalizeRun(config, export, run_label=…)
        run.prepare()     # I6 pre-check (raises ChunkWindowsMissing; nothing published)
        run.publish()     # I6 (atomic) → parts from file_log → finalize sequence

    It holds the export lock `shared`, as every chunk-task step (`ChunkPlanningRun`).
    """

    supersedes_previous = True
    lock_mode = "shared"

    def __init__(self, config: RivetConfig, export: ExportConfig, *, run_label: str | None = None,
                 state=None, notifications="config", words: Wording | None = None,  # noqa: ANN001
                 orchestrator: str | None = None) -> None:
        super().__init__(config, *task_step_args(export, words, run_label, orchestrator), state=state,
                         notifications=notifications)
        self.words = words
        self.checkpoint_runs = checkpoint_runs_of(self, words)
        self.chunk_run: ChunkRunRow | None = None
        self.windows_total = 0

    def prepare(self) -> ChunkRunRow:
        """Find (or continue) the chunk run and refuse while a window is not completed or a
        completed window's parts are not at the destination (that window is reset)."""
        try:
            chunk_plan = plan_task_windows(self)
            run = self.chunk_run = self.checkpoint_runs.in_progress(chunk_plan)
            tasks = self.state.list_chunk_tasks(run.run_id)
            listing = {o.key: o for o in self.dest.list("")}
            reasons: dict[str, str] = {}
            for window in match_completed_parts(tasks, self.state.list_files_for_export(self.export.name), listing):
                if window.intact:
                    continue
                for f in window.broken:
                    if f.file_name in listing:
                        quarantine_object(self.dest, run.run_id, f.file_name)
                self.state.reset_chunk_task_for_re_export(run.run_id, window.task.chunk_index,
                                                          "finalize: part missing or resized at the destination")
                reasons[window.task.window_key] = "its part is missing or resized at the destination"
            if reasons:
                tasks = self.state.list_chunk_tasks(run.run_id)
            missing = [t for t in tasks if t.status != "completed"]
            if missing:
                raise ChunkWindowsMissing(self.export.name, run.run_id, missing, len(tasks), reasons, words=self.words)
        except BaseException:
            self.abandon()
            raise
        self.windows_total = len(tasks)
        self.use_run_id(run.run_id)
        return run

    def publish(self, known: Mapping[str, PartRecord] | None = None) -> RunSummary:
        """I6 (atomic), then the run is ours: ledger, parts from file_log, sweep, finalize
        sequence. Refusals before I6 raise and publish nothing (no ledger, no metrics).
        `known`: part key → the record a window batch of this process wrote
        (`ChunkWindowRun.publish`'s results): those parts are not read back for their
        fingerprints (`rehydrate_window`)."""
        assert self.chunk_run is not None, "prepare() first"
        run_id, state, dest, summary = self.chunk_run.run_id, self.state, self.dest, self.summary
        try:
            fault_point("before_chunk_finalize")  # two finalizers racing meet here in tests
            found = state.get_chunk_run(run_id)
            if found is None or found.status != "in_progress":
                raise self._finalized_elsewhere(run_id, "gone" if found is None else found.status)
            try:
                # I6, atomic with the count. Of two finalizers racing past the check above, only
                # the one that makes the transition publishes: one manifest, one ledger row.
                if not state.finalize_chunk_run_completed(run_id):
                    raise self._finalized_elsewhere(run_id, "completed")
            except ChunkRunIncomplete:
                tasks = state.list_chunk_tasks(run_id)
                raise ChunkWindowsMissing(self.export.name, run_id, [t for t in tasks if t.status != "completed"],
                                          len(tasks), words=self.words) from None
        except BaseException:
            self.abandon()
            raise
        self.open_ledger()
        try:
            tasks = state.list_chunk_tasks(run_id)
            listing = {o.key: o for o in dest.list("")}
            kept: set[str] = set()
            for window in match_completed_parts(tasks, state.list_files_for_export(self.export.name), listing):
                if not window.intact:
                    raise WindowPartsLost({"export": self.export.name, "window": window.task.window_key},
                                          words=self.words)
                kept.update(rehydrate_window(summary, window, listing, dest, known,
                                             checksum_key_column(self.export)))
            for key in listing:
                if is_own_part(key, self.export.name, run_id) and key not in kept \
                        and not quarantine_object(dest, run_id, key):
                    summary.add_warning(f"unlisted object '{key}' could not be quarantined")
            summary.schema_fingerprint = schema_fingerprint(self.output_schema)
            record_gated_upstream(summary, "in each window batch, before its window was claimed")
            summary.journal.record("Warning", context="chunk_finalize",
                                   message=f"chunk run {run_id}: {len(tasks)} window(s), {len(kept)} part(s)")
            self._gate_total_quality(keep=self._published_parts)
            # The committed progression follows the manifest (RunStore, in the finalize sequence).
            summary.completed_chunk_run = run_id
        except Exception as exc:  # error boundary: reported through finalize
            return self._finalize(exc)
        return self._finalize(None)

    def _published_parts(self) -> set[str]:
        """Parts a failing gate must leave in place: those of windows carried from earlier chunk
        runs (their names carry another run's stamp) and whatever the prefix's current manifest
        lists — the last good delivery stays whole (ADR-0002)."""
        keep = {p.path for p in self.summary.manifest_parts
                if not is_own_part(p.path, self.export.name, self.summary.run_id)}
        found = None  # unreadable: the carried parts are kept anyway
        with best_effort("read the current manifest", warn=self.summary.add_warning,
                         message="current manifest unreadable: {reason}"):
            found = read_manifest(self.dest)
        return keep | ({p.path for p in found[0].parts} if found else set())

    def _finalized_elsewhere(self, run_id: str, status: str) -> FinalizedElsewhere:
        return FinalizedElsewhere({"export": self.export.name, "run_id": run_id, "status": status},
                                  words=self.words)

    def abandon(self) -> None:
        """Give up before the finalize sequence: nothing was published or recorded."""
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        self.close()


# ------------------------------------------------------------------------------- reconcile
def reconcile_chunks(config: RivetConfig, export: ExportConfig, *, state=None,  # noqa: ANN001, ANN201
                     words: Wording | None = None):
    """`rivet reconcile` (reconcile.py) for an orchestrated chunked export, checkpointing
    implied; returns (report, chunk_index → window key) so results name window keys.

    The same verdicts per window of the latest chunk run (source COUNT vs rows written:
    match / mismatch / unknown), with the source side counted by the planner's one grouped
    fingerprint query instead of one COUNT per window, and keyset windows taken from the
    checkpoint (no boundary scan). A clean report advances the "verified" progression."""
    from rivet_core.pipeline.chunked.reconcile import (
        ChunkCheck,
        ReconcileReport,
        record_verified_progression,
    )

    run = ChunkPlanningRun(config, export, state=state, words=words)
    try:
        store, name = run.state, run.export.name
        run_row = store.get_latest_chunk_run(name)
        if run_row is None:
            raise NoChunkRun({"export": name}, words=words)
        tasks = store.list_chunk_tasks(run_row.run_id)
        chunk_plan = plan_task_windows(run)
        if chunk_plan.plan_hash != run_row.plan_hash:
            raise ConfigError(f"export '{name}': the config plans {chunk_plan.plan_hash} but run {run_row.run_id} "
                              f"was planned as {run_row.plan_hash} — reconcile the run with the config it ran with")
        report = ReconcileReport(name, run_row.run_id, chunk_plan.strategy)
        error = None
        try:
            prints = run.source_prints.of(chunk_plan, [_window(t) for t in tasks])
        except Exception as exc:  # error boundary: uncountable windows are "unknown"
            prints, error = {}, redact_secrets(exc)
        for t in tasks:
            identifier = f"chunk {t.chunk_index} [{t.start_key}..{t.end_key}]"
            exported = t.rows_written if t.status == "completed" else None
            source = None if error is not None else prints.get(t.window_key, EMPTY).rows
            if source is None:
                status, note = "unknown", error
            elif exported is None:
                status, note = "unknown", f"task is {t.status}"
            elif exported == source:
                status, note = "match", None
            else:
                status, note = "mismatch", f"source={source}, exported={exported}, diff={source - exported}"
            report.checks.append(ChunkCheck(t.chunk_index, identifier, t.start_key, t.end_key, source, exported,
                                            status, note))
        record_verified_progression(store, report)
        return report, {t.chunk_index: t.window_key for t in tasks}
    finally:
        run.close()


__all__ = ["ChunkFinalizeRun", "ChunkPlanChanged", "ChunkPlanningRun", "ChunkTaskBusy", "ChunkTaskPlan",
           "ChunkTaskRefusal", "ChunkWindowRun", "ChunkWindowsMissing", "FinalizedElsewhere", "NoChunkRun",
           "UnknownWindows", "WindowPartsLost", "Wording", "checkpointed_export", "chunk_task_problem",
           "plan_chunk_tasks", "reconcile_chunks"]
