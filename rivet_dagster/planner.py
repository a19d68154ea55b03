"""The chunk planner's decisions as a pure function: `plan_tick(view, cursor) -> decision`.

The planner sensor (rivet_dagster/chunked.py, its module docstring says what it does) was a
closure that asked the instance, planned, decided and wrote its JSON cursor in one body. Here
is its decision alone, over plain data: a `TickView` (what one evaluation found — the core's
plan of the chunk run, the registered partitions, the runs of the chunk run in flight, the
windows asked for by runs that ended, the pool's limit) and the export's `ExportCursor` (what
earlier ticks remembered) → a `TickDecision` (partitions to add and withdraw, runs to request
as `PlannedRun`s, the new cursor, the skip reason). The sensor gathers the view from the
instance and turns the decision into Dagster requests; this module imports no Dagster
(`.importlinter`), so every branch is testable with plain values (tests/dagster/test_planner_pure.py).

**One source of truth for a window's status: the `chunk_task` table.** A window's status
lives in two places — its `chunk_task` row (pending, running, completed, failed; written by
the core's compare-and-swap claims and commits) and Dagster's materializations of its
partition. They disagree after a crash (a run materialized nothing but committed, or the
reverse), after `rivet state reset-chunks`, or on a window re-opened because the source
changed. The planner decides from the rows (`api.ChunkTaskPlan`, which the core builds from
them); Dagster's view is read only for what the rows cannot know: which partitions are
registered, whether a worker run is still alive, which runs ended before claiming, and the
fingerprint a materialization recorded. The rows win because they are what the manifest is
built from (I6: the finalize refuses unless every row is completed) and because they change
only by compare-and-swap, so two planners or a planner and a CLI never both believe they own
a window; a materialization is an event log entry that nothing reconciles.

The cursor is the JSON the sensor has always stored (`{"exports": {<export>: {"run",
"planned_at", "refresh", "requested", "backlog", "in_progress"}}}`), read tolerantly: a
cursor written by an earlier version still parses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from rivet_core import api
from rivet_dagster.partition_keys import partition_key_for

#: Windows per run in a backfill launched from the UI (`backfill_policy`): amortizes run
#: start-up (seconds per run); windows of one run are exported one by one. The planner sensor
#: sizes its own runs (`run_size`).
MAX_PARTITIONS_PER_RUN = 10
#: Runs the planner requests per tick at most (`dagster.max_runs_per_tick`); the rest wait.
MAX_RUNS_PER_TICK = 20
#: The planner plans against the source (its grouped fingerprint query) at most this often…
PLANNER_INTERVAL_SECONDS = 60
#: …but its sensor looks every PLANNER_POLL_SECONDS: a cheap look at the instance (no source
#: query, no config load). While a chunk run is being exported it plans again as soon as the
#: last of that run's Dagster runs has ended, so the next batch or the manifest is requested
#: seconds after the windows are done instead of up to a full interval later.
PLANNER_POLL_SECONDS = 5


@dataclass(frozen=True)
class ExportCursor:
    """One export's state in the planner's cursor: the chunk run it last planned (`run`,
    `in_progress`), when (`planned_at`, epoch s), the last `dagster.refresh` cron tick handled
    (`refresh`), the request stamps of windows already requested in this chunk run
    (`requested`, `request_stamp`) and the windows waiting for a later tick (`backlog`)."""

    run: str | None = None
    planned_at: float | None = None
    refresh: float | None = None
    requested: tuple[str, ...] = ()
    backlog: tuple[str, ...] = ()
    in_progress: bool = False

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ExportCursor:
        """From the stored JSON object; a field of the wrong type reads as unset."""
        def number(value: Any) -> float | None:
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None

        def strings(value: Any) -> tuple[str, ...]:
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        run = state.get("run")
        return cls(run=run if isinstance(run, str) else None, planned_at=number(state.get("planned_at")),
                   refresh=number(state.get("refresh")), requested=strings(state.get("requested")),
                   backlog=strings(state.get("backlog")), in_progress=state.get("in_progress") is True)

    def to_state(self) -> dict[str, Any]:
        """The stored JSON object (unset times left out, as before)."""
        state: dict[str, Any] = {"run": self.run, "requested": list(self.requested), "backlog": list(self.backlog),
                                 "in_progress": self.in_progress}
        if self.planned_at is not None:
            state["planned_at"] = self.planned_at
        if self.refresh is not None:
            state["refresh"] = self.refresh
        return state


def parse_cursor(text: str | None) -> dict[str, ExportCursor]:
    """The sensor's cursor → each export's state; anything unreadable → no state (plan afresh)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    exports = value.get("exports") if isinstance(value, dict) else None
    if not isinstance(exports, dict):
        return {}
    return {k: ExportCursor.from_state(v) for k, v in exports.items() if isinstance(v, dict)}


def dump_cursor(states: dict[str, ExportCursor]) -> str:
    return json.dumps({"exports": {name: state.to_state() for name, state in states.items()}})


@dataclass(frozen=True)
class RunCounts:
    """Runs of one chunk run (tag `rivet/chunk_run`): queued or running, and ended since the
    last plan."""

    in_flight: int
    ended_since_plan: int


def needs_run_counts(cursor: ExportCursor, now: float) -> bool:
    """Whether `deferral` needs `RunCounts` (a chunk run in progress, planned within the
    interval): the sensor asks the instance only then."""
    return (cursor.planned_at is not None and 0 <= now - cursor.planned_at < PLANNER_INTERVAL_SECONDS
            and cursor.in_progress and bool(cursor.run))


def deferral(cursor: ExportCursor, now: float, counts: RunCounts | None) -> str | None:
    """Why this evaluation need not plan against the source (a skip reason), or None to plan.

    Plans when there was no plan yet, when PLANNER_INTERVAL_SECONDS passed since the last, or —
    while a chunk run is in progress — when a Dagster run of it ended since the last plan and
    none is queued or running: its windows are committed, so the next batch, the reconcile or
    the manifest can be requested now. A failed run ends once: it triggers one plan, not a plan
    per poll. `counts`: required when `needs_run_counts`."""
    planned = cursor.planned_at
    if planned is None or now - planned >= PLANNER_INTERVAL_SECONDS or now < planned:
        return None
    later = f"next plan against the source in {PLANNER_INTERVAL_SECONDS - (now - planned):.0f} s"
    if not needs_run_counts(cursor, now) or counts is None:
        return later
    if counts.in_flight:
        return f"chunk run {cursor.run}: {counts.in_flight} run(s) queued or running; {later}"
    return None if counts.ended_since_plan else later


@dataclass(frozen=True)
class TickView:
    """What one export's plan reads, gathered by the sensor before deciding.

    `plan`: the core's plan of the chunk run (`api.plan_chunk_tasks`: the `chunk_task` rows,
    the windows it took over from dead runs — `orphaned` —, refills, drift). `registered`:
    window key → the partition key registered for it, in registration order. `in_flight`:
    runs of the chunk run queued or running. `asked`: window key → how many ended runs of the
    chunk run asked for it (tag `rivet/windows`; only needed when no run is in flight and
    windows are unclaimed). `pool_limit`: the instance's limit of the export's pool (None:
    none, or `fixed_per_run` is set). `reconcile_recheck`: the storage id of the manifest's
    latest materialization when the `reconcile` check's newest verdict is red (else None)."""

    now: float
    plan: api.ChunkTaskPlan
    registered: dict[str, str]
    base_tags: dict[str, str]
    in_flight: int = 0
    asked: dict[str, int] = field(default_factory=dict)
    pool_limit: int | None = None
    #: `dagster.max_partitions_per_run` when the export sets it, else None (sized by `parallel`).
    fixed_per_run: int | None = None
    parallel: int = 1
    runs_per_tick: int = MAX_RUNS_PER_TICK
    #: The latest `dagster.refresh` cron tick at `now` (None: no refresh configured).
    refresh_tick: float | None = None
    reconcile_recheck: int | None = None


@dataclass(frozen=True)
class PlannedRun:
    """A run the planner asks for, as plain data. `kind`: `chunks`, `publish`, `manifest` or
    `reconcile` (chunked.py RUN_KINDS); `windows`: the window keys it exports, consecutive
    (one partition, or a range); the sensor names them by their partition keys."""

    kind: str
    run_key: str
    tags: dict[str, str]
    windows: tuple[str, ...] = ()


@dataclass(frozen=True)
class TickDecision:
    """What one export's tick decided: partitions to add (window keys, in window order) and
    to withdraw (window keys the plan no longer has), with how many registered ones it keeps
    (`carried`), the runs to request, the new cursor, and — when it asks for nothing — why."""

    cursor: ExportCursor
    runs: list[PlannedRun] = field(default_factory=list)
    add: list[str] = field(default_factory=list)
    withdraw: list[str] = field(default_factory=list)
    carried: int = 0
    skip_reason: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def asks(self) -> bool:
        return bool(self.runs or self.add or self.withdraw)


def run_size(fixed: int | None, parallel: int, windows: int, pool_limit: int | None) -> int:
    """How many consecutive windows go in one run, of `windows` registered (chunked.py
    `windows_per_run` says why)."""
    if fixed is not None:
        return fixed
    runs = max(1, int(parallel or 1))
    if pool_limit is not None and pool_limit > 0:
        runs = min(runs, pool_limit)
    return max(1, -(-windows // runs))


def window_batches(order: list[str], wanted: set[str], size: int) -> list[list[str]]:
    """The wanted windows as ranged runs: cut `order` (the partitions' insertion order, which
    a Dagster partition range follows) into fixed cells of `size` keys, and each cell into its
    maximal runs of consecutive wanted keys. Fixed cells keep a batch the same from tick to
    tick (so its run key deduplicates) while windows around it come and go; a range never
    spans an unwanted window, which it would export again."""
    batches: list[list[str]] = []
    for start in range(0, len(order), size):
        run: list[str] = []
        for key in order[start:start + size]:
            if key in wanted:
                run.append(key)
            elif run:
                batches.append(run)
                run = []
        if run:
            batches.append(run)
    return batches


def fold_manifest(tick: api.ChunkTaskPlan, batches: list[list[str]], outstanding: set[str],
                  in_flight: int) -> bool:
    """Whether the one batch of this tick is the chunk run's last, so its run can publish too.

    True when this tick requests exactly one batch, that batch is every window still wanted
    (nothing waits in the backlog or for another batch), no other run of the chunk run is
    queued or running (`in_flight`: its windows would not be committed yet), and the windows
    not completed are exactly the batch's pending ones (a refilled window is still completed
    until it is exported again, `api.ChunkTaskPlan.refill`). A wrong True costs no data: the
    manifest step refuses unless every window is completed (I6), and the planner then requests
    the manifest on its own."""
    if len(batches) != 1 or set(batches[0]) != outstanding or in_flight:
        return False
    return tick.not_completed == sum(k not in tick.refill for k in batches[0])


def stranded(tick: api.ChunkTaskPlan, wanted: set[str], in_flight: int, asked: dict[str, int]) -> dict[str, int]:
    """Windows never claimed that no run will export any more → how many ended runs of the
    chunk run asked for them.

    The planner requests a window once (its cursor remembers the request); a run cancelled
    while QUEUED, or a backfill cancelled before its steps started, ends without claiming
    it, so it stays `pending` with no worker and nothing else asks for it. Only when no run
    of the chunk run is queued or running (one may still claim it) and the window is not
    wanted this tick anyway; not after the chunk run's max attempts of such runs (each
    requeue that ends unclaimed again counts: a loop of runs failing before their claim stops)."""
    if tick.run_id is None or in_flight:
        return {}
    candidates = [k for k in tick.unclaimed if k not in wanted]
    return {k: asked[k] for k in candidates if 0 < asked.get(k, 0) < max(tick.max_attempts, 1)}


def run_key(tick: api.ChunkTaskPlan, key: str, refresh_tick: float | None) -> str:
    """`<chunk run>:<key>` for a new window; a changed window adds the attempt it replaces and
    what the source holds now (`<chunk run>/<attempt>:<key>:<fingerprint>`: requested once per
    change); a refreshed one the refresh tick; a window taken over from an ended run the
    attempts it used (`<chunk run>:<key>:takeover-<n>`: never deduplicated against the run that
    died, nor the next take-over against this one). Window keys, not partition keys: the same
    whichever form a partition is registered in."""
    if key in tick.orphaned:
        return f"{tick.run_id}:{key}:takeover-{tick.orphaned[key]}"
    if key in tick.requeued:
        return f"{tick.run_id}:{key}:requeue-{tick.requeued[key]}"
    if key in tick.refill:
        return f"{tick.run_id}/{tick.marks.get(key, '')}:{key}:{tick.refill[key]}"
    if key in tick.refreshed:
        return f"{tick.run_id}:{key}:refresh-{int(refresh_tick or 0)}"
    return f"{tick.run_id}:{key}"


def request_stamp(tick: api.ChunkTaskPlan, key: str, refresh_tick: float | None) -> str:
    """A short digest of a window's request in its current state (its per-window run key):
    what the planner's cursor remembers, 12 characters a window."""
    return hashlib.sha256(run_key(tick, key, refresh_tick).encode()).hexdigest()[:12]


def batch_run(tick: api.ChunkTaskPlan, batch: list[str], refresh_tick: float | None, tags: dict[str, str], *,
              publish: bool = False) -> PlannedRun:
    """One run for `batch`: a single window, or a range (one source session and one run
    start-up for several windows). `publish`: the run also materializes the manifest (kind
    `publish`); its run key says so (`+manifest`), so it never collides with a plain request
    of the same windows."""
    suffix = "+manifest" if publish else ""
    kind = "publish" if publish else "chunks"
    if len(batch) == 1:
        return PlannedRun(kind, run_key(tick, batch[0], refresh_tick) + suffix, tags, (batch[0],))
    digest = hashlib.sha256("\n".join(run_key(tick, k, refresh_tick) for k in batch).encode()).hexdigest()[:16]
    return PlannedRun(kind, f"{tick.run_id}:{batch[0]}..{batch[-1]}:{digest}{suffix}", tags, tuple(batch))


def plan_tick(view: TickView, cursor: ExportCursor) -> TickDecision:
    """One export's tick: partitions, runs and the new cursor from what the view holds (the
    module docstring; chunked.py's says what each request is for)."""
    tick = view.plan
    cursor = replace(cursor, planned_at=view.now,
                     refresh=view.refresh_tick if view.refresh_tick is not None else cursor.refresh)
    registered = list(view.registered)
    current = set(tick.keys)
    known = set(registered)
    new_keys = [k for k in tick.keys if k not in known]  # tick.keys is ascending: insertion order
    stale = [k for k in registered if k not in current]
    decision = TickDecision(cursor=cursor, add=new_keys, withdraw=stale, carried=len(registered) - len(stale),
                            warnings=list(tick.warnings))
    if tick.run_id is None:  # published and true to the source: a red `reconcile` verdict is outdated
        runs = ([PlannedRun("reconcile", f"reconcile:recheck:{view.reconcile_recheck}", dict(view.base_tags))]
                if view.reconcile_recheck is not None else [])
        done = replace(decision, runs=runs, cursor=replace(cursor, in_progress=False, backlog=()))
        return done if done.asks else replace(done, skip_reason=(
            f"nothing changed: {len(tick.keys)} window(s) published and true to the source"))
    return _plan_chunk_run(view, decision, new_keys, registered)


def _plan_chunk_run(view: TickView, decision: TickDecision, new_keys: list[str], registered: list[str]) -> TickDecision:
    """`plan_tick` while a chunk run is in progress: its windows' runs, the reconcile when
    published windows drifted, the manifest once every window is done."""
    tick, cursor = view.plan, decision.cursor
    tags = {**view.base_tags, "rivet/chunk_run": tick.run_id or ""}
    current = set(tick.keys)
    # Windows wanted now, plus those an earlier tick of this chunk run left waiting — less
    # those already requested in the state they are in now (a refilled window stays wanted
    # until it runs: requesting it again in another batch would export it twice, so the cursor
    # remembers each window's request, not Dagster's run keys).
    same_run = cursor.run == tick.run_id
    waiting = list(cursor.backlog) if same_run else []
    done = set(cursor.requested) if same_run else set()
    requeued = stranded(tick, set(tick.to_export) | set(new_keys) | set(waiting), view.in_flight, view.asked)
    warnings = list(decision.warnings)
    if requeued:
        warnings.append(f"export '{tick.export_name}': window(s) {', '.join(requeued)} of chunk run {tick.run_id} "
                        "were requested in runs that ended before claiming them (cancelled while queued?); "
                        "requesting them again")
    tick = replace(tick, requeued=requeued)
    stamps = {k: request_stamp(tick, k, cursor.refresh) for k in current | set(new_keys)}
    outstanding = set(tick.to_export) | set(new_keys) | (set(waiting) & current)
    wanted = {k for k in outstanding if stamps[k] not in done}
    order = [k for k in registered if k in current] + new_keys  # the partitions' order after this tick
    per_run = run_size(view.fixed_per_run, view.parallel, len(order), view.pool_limit)
    batches = window_batches(order, wanted, per_run)
    in_flight = view.in_flight if batches or tick.complete else 0
    fold = fold_manifest(tick, batches, outstanding, in_flight)  # the last batch carries the manifest
    runs: list[PlannedRun] = []
    if tick.drifted:  # the published data misses (or holds extra) rows: turn `reconcile` red now
        # Requested before the windows' runs: Dagster records a check's execution when its run
        # is created, and the newest one is the verdict the UI shows — so the run that
        # publishes the refilled windows (its `reconcile` evaluated after them) comes last.
        drift = ",".join(f"{k}={tick.refill[k]}" for k in tick.drifted)
        runs.append(PlannedRun("reconcile", f"{tick.run_id}:reconcile:{hashlib.sha256(drift.encode()).hexdigest()[:16]}",
                               tags))
    for batch in batches[:view.runs_per_tick]:
        runs.append(batch_run(tick, batch, cursor.refresh, tags, publish=fold))
        done.update(stamps[k] for k in batch)
    backlog = [k for batch in batches[view.runs_per_tick:] for k in batch]
    notes = ([f"chunk run {tick.run_id}: {len(backlog)} window(s) wait for the next tick "
              f"(dagster.max_runs_per_tick: {view.runs_per_tick})"] if backlog else [])
    # The manifest waits for every window still wanted, requested in an earlier tick or not,
    # and for the runs of the chunk run still going (a folded run finalizes it itself; should
    # it fail, the plan after it ends requests the manifest on its own).
    if tick.complete and not runs and not outstanding and not in_flight:
        runs.append(PlannedRun("manifest", f"{tick.run_id}:manifest:{tick.stamp}", tags))
    cursor = replace(cursor, requested=tuple(sorted(done & set(stamps.values()))), run=tick.run_id,
                     in_progress=True, backlog=tuple(backlog))
    decided = replace(decision, cursor=cursor, runs=runs, notes=notes, warnings=warnings)
    if decided.asks:
        return decided
    exhausted = [partition_key_for(k, view.registered) for k in tick.exhausted[:10]]
    return replace(decided, skip_reason=(
        f"chunk run {tick.run_id}: every window is done; the manifest waits for {in_flight} run(s) "
        "of it still queued or running (one of them may publish it)" if tick.complete and in_flight
        else f"chunk run {tick.run_id}: {tick.not_completed} window(s) still to materialize" + (
            f"; {len(tick.exhausted)} of them used every attempt and wait for someone to fix the cause "
            f"and materialize them again: {', '.join(exhausted)}" if tick.exhausted else "")))
