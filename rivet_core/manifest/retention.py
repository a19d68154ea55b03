"""Retention: which runs an export keeps at its prefix, and the steps that remove the rest.

docs/adr/0007-readable-layout-and-retention.md decides the rules; this module is their one
implementation: a pure planner over what the destination holds (`plan_gc`), and the loop
that carries a plan out (`execute_gc`). The callers in rivet_core/pipeline/retention/gc.py (`rivet gc`
and the retention step of the finalize sequence) add the export lock, the state store and
the journal.

Vocabulary:

- a *run* is a manifest: `manifest.json` (the current run), a per-run copy
  `manifest-<run>.json` at the prefix root, or a copy gc parked under
  `_quarantine/gc/<stamp>/`;
- *kept* runs (the policy): the last `keep_runs` successful runs and those that finished
  within `keep_days` (a run counts as finished no earlier than the runs before it in the
  ledger, `_ledger_times`) — either rule keeps a run — and always the current run. For exports
  that add rows each run, `keep_runs` counts runs that delivered rows: an hourly poll that
  found nothing must not push the data out;
- *live* runs: those whose files make the readable dataset and stay where they are. An
  export that replaces its data each run (full, chunked, time_window): the current run
  only. An export that adds rows each run (incremental, keyset-incremental): the kept runs
  since the last run that started from nothing (a first run or a full refresh), as
  `rivet_core.api.dataset_manifests` reads them;
- *protected* runs: the caller says so (a chunk run whose parts a resume or a finalize
  still needs), and any run newer than the current manifest (one publishing while gc reads).

The steps, in this order:

1. **delete** — in each `_quarantine/gc/<stamp>/` folder parked longer than the grace
   period, every object no kept run lists (a kept run's parked files and its copy stay: a
   kept run of a full export is restorable, not readable). Copies go after the files.
2. **park the copies** — every root `manifest-<run>.json` of a run neither live nor protected
   moves to `_quarantine/gc/<stamp>/`; first, so no manifest at the root ever lists a file
   that has moved (the rule the finalize's supersede follows too: finalize.py).
3. **park the files** — every object a non-live run lists that no live or protected run
   lists moves to `_quarantine/gc/<stamp>/<key>` (the key kept, so moving it back restores
   it); with `sweep_orphans`, also files under `data/` no manifest lists at all (a run that
   died between writing a part and its manifest).

Never touched: what a live or protected run lists, `manifest.json`, `_SUCCESS`, objects
outside the data area, and the other `_quarantine/` folders (the moves of a resume, a
repair or a re-run of a window keep "never deleted", M9). Deletion is reached
only through step 1, so every deleted object spent at least one gc cycle and the grace
period in quarantine. Anything unreadable (a run copy that does not parse) stops the steps
it could affect: spare on doubt.

Refused (no step at all, `GcPlan.refused` says why and the fix), because the manifests at
the prefix do not describe every file there:

- a table (`manifest.json` names a `table` commit, or a `_delta_log/` or Iceberg `metadata/`
  sits at the prefix root): the table's snapshots reference parts no manifest lists as
  current, and the table's own vacuum removes them;
- another export's trail (`trail_folder`: a `manifest.json`, `_SUCCESS`, `manifest-*.json`,
  `_delta_log/` or Iceberg `metadata/`) under `data/` or among what gc parked — another
  config writing inside this export's data area; its files would look like orphans.

Runs are ordered by the manifest's `sequence` (the previous `manifest.json`'s + 1: the
finalize writes it, `rivet_core.manifest.layout.read_predecessor`), never by a wall clock: a
host whose clock is behind must not make a full refresh look older than the runs it
replaced. Manifests written before `sequence` existed sort before every sequenced one (they
are older: the first sequenced run read them as its predecessor), among themselves by
`finished_at`; one that finished after the ledger started cannot be placed and is protected
(`_unplaceable`). `keep_days` still reads clocks, through `_ledger_times`.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from rivet_core.destination.base import Destination
from rivet_core.errors import DestinationError
from rivet_core.manifest.layout import (
    DATA_PREFIX,
    MAX_MANIFEST_BYTES,
    QUARANTINE_PREFIX,
    is_sidecar,
    read_manifest,
)
from rivet_core.manifest.model import Manifest, ManifestError, parse_manifest

log = logging.getLogger("rivet.retention")

#: Where gc parks what it removes: `_quarantine/gc/<stamp>/<original key>`.
GC_PREFIX = f"{QUARANTINE_PREFIX}gc/"
_RUN_COPY = re.compile(r"^manifest-[^/]*\.json$")
_STAMP = re.compile(r"^(\d{8}T\d{6})Z(?:-[0-9a-f]+)?$")


# ------------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class RetentionPolicy:
    """`retention: {keep_runs, keep_days, grace_hours}` (rivet_core/config/models.py). Built
    only by `rivet_core.pipeline.retention.gc.policy_for`, the one policy every gc entry point uses."""

    keep_runs: int | None = None
    keep_days: float | None = None
    grace_hours: float = 24.0

    def __post_init__(self) -> None:
        if self.keep_runs is None and self.keep_days is None:
            raise ValueError("a retention policy needs keep_runs or keep_days")
        if self.keep_runs is not None and self.keep_runs < 1:
            raise ValueError("keep_runs must be >= 1")
        if (self.keep_days is not None and not self.keep_days > 0) or not self.grace_hours >= 0:
            raise ValueError("keep_days must be > 0 and grace_hours >= 0")
        if not all(math.isfinite(v) for v in (self.keep_days or 1.0, self.grace_hours)):
            raise ValueError("keep_days and grace_hours must be finite numbers")

    def describe(self) -> str:
        rules = ([f"the last {self.keep_runs} run(s)"] if self.keep_runs is not None else []) \
            + ([f"runs of the last {self.keep_days:g} day(s)"] if self.keep_days is not None else [])
        return f"keep {' or '.join(rules)}; delete after {self.grace_hours:g} h in quarantine"

    def to_dict(self) -> dict[str, Any]:
        return {"keep_runs": self.keep_runs, "keep_days": self.keep_days, "grace_hours": self.grace_hours}


@dataclass(frozen=True)
class RunRef:
    """What the policy needs to know about one run."""

    run_id: str
    status: str
    #: None when the manifest's `finished_at` does not parse (such a run is kept by `keep_days`).
    finished_at: datetime | None
    files: frozenset[str]
    #: The run started from nothing (no `cursor_low`): for exports that add rows each run,
    #: it replaced everything before it.
    baseline: bool
    #: The manifest's `sequence` (module docstring); None for a manifest written before it.
    sequence: int | None = None

    @classmethod
    def of(cls, manifest: Manifest) -> RunRef:
        extraction = manifest.source.extraction
        return cls(run_id=manifest.run_id, status=manifest.status, finished_at=_parse_time(manifest.finished_at),
                   files=frozenset(p.path for p in manifest.parts),
                   baseline=extraction is None or extraction.cursor_low is None, sequence=manifest.sequence)


def _parse_time(text: str | None) -> datetime | None:
    try:
        value = datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _order(run: RunRef) -> tuple[int, int | datetime, str]:
    """The ledger's order (module docstring): sequenced runs by `sequence`, after every run
    written before `sequence` existed; those by `finished_at` (unparseable: last)."""
    if run.sequence is not None:
        return (1, run.sequence, run.run_id)
    return (0, run.finished_at or datetime.max.replace(tzinfo=UTC), run.run_id)


def kept_runs(runs: Iterable[RunRef], policy: RetentionPolicy, now: datetime, *, current: str,
              accumulates: bool) -> set[str]:
    """The run ids the policy keeps (module docstring): always `current`; never a run that did
    not succeed."""
    successful = sorted((r for r in runs if r.status == "success"), key=_order)
    kept = {current}
    if policy.keep_runs is not None:
        counted = [r for r in successful if r.files] if accumulates else successful
        kept |= {r.run_id for r in counted[-policy.keep_runs:]}
    if policy.keep_days is not None:
        horizon = now - timedelta(days=policy.keep_days)
        finished = _ledger_times(successful)
        kept |= {r.run_id for r in successful if finished[r.run_id] is None or finished[r.run_id] >= horizon}
    return kept


def _ledger_times(runs: list[RunRef]) -> dict[str, datetime | None]:
    """When each run (in ledger order) finished at the earliest: no earlier than any run the
    ledger puts before it — a run whose host clock was behind is not older than its
    predecessor for `keep_days`. None: the time does not parse (such a run is kept)."""
    out: dict[str, datetime | None] = {}
    latest: datetime | None = None
    for run in runs:
        if run.finished_at is not None:
            latest = run.finished_at if latest is None else max(latest, run.finished_at)
        out[run.run_id] = latest if run.finished_at is not None else None
    return out


def live_runs(runs: Iterable[RunRef], kept: set[str], *, current: str, accumulates: bool) -> set[str]:
    """The run ids whose files stay where they are (module docstring)."""
    if not accumulates:
        return {current}
    successful = sorted((r for r in runs if r.status == "success"), key=_order)
    start = max((i for i, r in enumerate(successful) if r.baseline), default=0)
    return {r.run_id for r in successful[start:] if r.run_id in kept} | {current}


# ------------------------------------------------------------------------------- snapshot
@dataclass
class PrefixSnapshot:
    """What one listing of the prefix shows: the manifests and every key."""

    current: Manifest
    #: root `manifest-<run>.json` key → its manifest (any status).
    copies: dict[str, Manifest]
    #: `_quarantine/gc/<stamp>/manifest-<run>.json` key → its manifest.
    parked: dict[str, Manifest]
    keys: list[str]
    #: run copies (root or parked) that could not be read or parsed.
    unreadable: dict[str, str] = field(default_factory=dict)


def is_parked_copy(key: str) -> bool:
    """`_quarantine/gc/<stamp>/manifest-<run>.json`."""
    if not key.startswith(GC_PREFIX):
        return False
    rest = key[len(GC_PREFIX):].split("/")
    return len(rest) == 2 and bool(_RUN_COPY.match(rest[1]))


def read_snapshot(dest: Destination) -> PrefixSnapshot | None:
    """List the prefix once and read its manifests; None when there is no `manifest.json`
    (nothing published, or a legacy prefix: nothing to keep or remove). Raises
    `DestinationError` / `ManifestError` when the current manifest cannot be read."""
    found = read_manifest(dest)
    if found is None:
        return None
    listing = dest.list("")
    snapshot = PrefixSnapshot(current=found[0], copies={}, parked={}, keys=[o.key for o in listing])
    for obj in listing:
        root_copy = "/" not in obj.key and bool(_RUN_COPY.match(obj.key))
        if not (root_copy or is_parked_copy(obj.key)):
            continue
        try:
            if obj.size > MAX_MANIFEST_BYTES:
                raise ManifestError(f"{obj.size} bytes, over the {MAX_MANIFEST_BYTES}-byte manifest limit")
            manifest = parse_manifest(dest.read_bytes(obj.key, max_bytes=MAX_MANIFEST_BYTES))
        except (DestinationError, ManifestError) as exc:
            snapshot.unreadable[obj.key] = str(exc)[:300]
            continue
        (snapshot.copies if root_copy else snapshot.parked)[obj.key] = manifest
    return snapshot


# ------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class GcStep:
    """One move or delete, with the reason an operator reads in the journal."""

    action: str  # "delete" | "park_copy" | "park_file"
    key: str
    moved_to: str | None
    reason: str
    #: park_file: the runs whose root copies move in this plan and list the file — the file
    #: moves only after they did (step 2 before step 3).
    after_copies_of: tuple[str, ...] = ()
    #: park_copy: the run whose copy moves.
    run_id: str | None = None

    def line(self) -> str:
        verb = {"delete": "delete", "park_copy": "quarantine", "park_file": "quarantine"}[self.action]
        where = f" -> {self.moved_to}" if self.moved_to else ""
        return f"{verb} {self.key}{where} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "key": self.key, "moved_to": self.moved_to, "reason": self.reason}


@dataclass
class GcPlan:
    uri: str
    stamp: str
    policy: RetentionPolicy
    current_run: str
    kept: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    steps: list[GcStep] = field(default_factory=list)
    #: Why something was left alone (unreadable copies, unparseable stamps, untracked files).
    notes: list[str] = field(default_factory=list)
    #: Why gc does nothing at all at this prefix (`refusal`); the plan then has no step.
    refused: str | None = None

    def count(self, *actions: str) -> int:
        return sum(s.action in actions for s in self.steps)

    def headline(self) -> str:
        return (f"kept {len(self.kept)} run(s) ({len(self.live)} readable), "
                f"{self.count('park_copy', 'park_file')} object(s) to quarantine, "
                f"{self.count('delete')} to delete")

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "stamp": self.stamp, "policy": self.policy.to_dict(),
                "current_run": self.current_run, "kept_runs": self.kept, "live_runs": self.live,
                "protected_runs": self.protected, "steps": [s.to_dict() for s in self.steps],
                "notes": self.notes, "refused": self.refused}


def new_stamp(now: datetime) -> str:
    """The name of this gc's quarantine folder: its UTC time (the grace period counts from
    it) and a random suffix (two gc runs in one second do not share a folder)."""
    return f"{now.astimezone(UTC).strftime('%Y%m%dT%H%M%S')}Z-{secrets.token_hex(3)}"


def stamp_time(stamp: str) -> datetime | None:
    found = _STAMP.match(stamp)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)


def _is_data_area(key: str) -> bool:
    """A key a part can live at: under `data/`, or a root-level file of a prefix written
    before `data/` existed. Sidecars and quarantine are never data."""
    if is_sidecar(key):
        return False
    return key.startswith(DATA_PREFIX) or "/" not in key


def plan_gc(snapshot: PrefixSnapshot, policy: RetentionPolicy, now: datetime, *, uri: str, accumulates: bool,
            protect: Callable[[RunRef], bool] = lambda run: False, sweep_orphans: bool = False,
            stamp: str | None = None) -> GcPlan:
    """The steps that bring the prefix to the policy (module docstring). Pure: reads nothing."""
    stamp = stamp or new_stamp(now)
    current = RunRef.of(snapshot.current)
    runs: dict[str, RunRef] = {}
    for manifest in [*snapshot.parked.values(), *snapshot.copies.values()]:
        ref = RunRef.of(manifest)
        prior = runs.get(ref.run_id)
        runs[ref.run_id] = ref if prior is None else replace(ref, files=ref.files | prior.files)
    runs[current.run_id] = replace(current, files=current.files | (
        runs[current.run_id].files if current.run_id in runs else frozenset()))
    newer = {r.run_id for r in runs.values() if r.run_id != current.run_id and _is_newer(r, current)}
    doubt = _unplaceable(runs.values()) - {current.run_id}
    protected = newer | doubt | {r.run_id for r in runs.values() if r.run_id != current.run_id and protect(r)}
    kept = kept_runs(runs.values(), policy, now, current=current.run_id, accumulates=accumulates)
    live = live_runs(runs.values(), kept, current=current.run_id, accumulates=accumulates)
    plan = GcPlan(uri=uri, stamp=stamp, policy=policy, current_run=current.run_id,
                  kept=sorted(kept, key=lambda r: _order(runs[r])), live=sorted(live, key=lambda r: _order(runs[r])),
                  protected=sorted(protected))
    plan.refused = refusal(snapshot)
    if plan.refused is not None:
        return plan
    if doubt:
        plan.notes.append(f"spared {len(doubt)} run(s) without a ledger sequence that may be newer than a run "
                          f"with one (written by an older version after an upgrade?): {', '.join(sorted(doubt))}")
    folder = f"{GC_PREFIX}{stamp}/"
    keep_files = {f for r in live | protected for f in runs[r].files}
    kept_files = {f for r in kept | protected for f in runs[r].files}

    # 1. delete what spent the grace period in quarantine and no kept run lists
    _plan_deletes(plan, snapshot, now, kept | protected, kept_files)

    # 2 + 3. park the copies, then the files, of runs that are not live
    unreadable_roots = sorted(k for k in snapshot.unreadable if "/" not in k)
    if unreadable_roots:
        plan.notes.append("nothing quarantined: run copies that cannot be read may list files still in use — "
                          + "; ".join(f"{k}: {snapshot.unreadable[k]}" for k in unreadable_roots))
        return plan
    moving: set[str] = set()
    for key, manifest in sorted(snapshot.copies.items()):
        run = manifest.run_id
        if run in live or run in protected:
            continue
        moving.add(run)
        plan.steps.append(GcStep("park_copy", key, folder + key, _why(runs[run], kept, current.run_id),
                                 run_id=run))
    listed_by: dict[str, list[str]] = {}
    for run in runs.values():
        if run.run_id not in live:
            for f in run.files:
                listed_by.setdefault(f, []).append(run.run_id)
    all_listed = {f for r in runs.values() for f in r.files}
    untracked = 0
    for key in sorted(snapshot.keys):
        if not _is_data_area(key) or key in keep_files:
            continue
        if key in listed_by:
            owners = sorted(listed_by[key])
            plan.steps.append(GcStep("park_file", key, folder + key,
                                     f"listed only by run(s) not kept in place: {', '.join(owners)}",
                                     tuple(r for r in owners if r in moving)))
        elif sweep_orphans and key.startswith(DATA_PREFIX) and key not in all_listed:
            plan.steps.append(GcStep("park_file", key, folder + key,
                                     "no manifest lists it (left by a run that did not publish)"))
        else:
            untracked += 1
    if untracked:
        plan.notes.append(f"{untracked} object(s) no manifest lists were left in place"
                          + ("" if sweep_orphans else " (orphans are swept only by a run or `rivet gc` "
                                                      "holding the export's lock, never for chunked exports)"))
    return plan


def _unplaceable(runs: Iterable[RunRef]) -> set[str]:
    """Runs without a `sequence` that the ledger cannot place: one that finished (by its own
    clock, or at an unreadable time) after the first sequenced run started the ledger was
    written by a version without `sequence` after the upgrade. `_order` would put it first;
    spare on doubt: such runs are protected, never moved."""
    runs = list(runs)
    sequenced = [r.finished_at for r in runs if r.sequence is not None]
    if not sequenced:
        return set()
    start = min((t for t in sequenced if t is not None), default=None)
    return {r.run_id for r in runs if r.sequence is None
            and (start is None or r.finished_at is None or r.finished_at >= start)}


def _is_newer(run: RunRef, current: RunRef) -> bool:
    """Did `run` publish after `current` (one publishing while gc reads)? By sequence when
    both have one; a sequenced run is newer than an unsequenced current; otherwise by
    `finished_at`, as before `sequence` existed."""
    if run.sequence is not None or current.sequence is not None:
        return _order(run) > _order(current)
    return (current.finished_at is not None and run.finished_at is not None
            and run.finished_at > current.finished_at)


# ------------------------------------------------------------------------------- refusals
_TABLE_LOG = "_delta_log"
_ICEBERG_METADATA = "metadata"


def trail_folder(key: str) -> str | None:
    """The folder whose export trail `key` belongs to ('' for the prefix root), or None when
    `key` is no trail: a `manifest.json`, `_SUCCESS` or `manifest-*.json`, a file under a
    `_delta_log/`, or an Iceberg `metadata/*.metadata.json`."""
    segments = key.split("/")
    name, folders = segments[-1], segments[:-1]
    if name in ("manifest.json", "_SUCCESS") or _RUN_COPY.match(name):
        owner = folders
    elif _TABLE_LOG in folders:
        owner = folders[:folders.index(_TABLE_LOG)]
    elif _ICEBERG_METADATA in folders and name.endswith(".metadata.json"):
        owner = folders[:len(folders) - 1 - folders[::-1].index(_ICEBERG_METADATA)]
    else:
        return None
    return "/".join(owner) + "/" if owner else ""


def _original_key(key: str) -> str | None:
    """Where a key gc may act on came from: a parked key's original, a key under `data/`
    itself; None for what gc never moves in a sub-folder (other `_quarantine/` folders,
    sibling folders such as time partitions or another export beside `data/`)."""
    if key.startswith(GC_PREFIX):
        rest = key[len(GC_PREFIX):].split("/", 1)
        return rest[1] if len(rest) == 2 else None
    return key if key.startswith(DATA_PREFIX) else None


def foreign_trails(keys: Iterable[str]) -> dict[str, list[str]]:
    """Another export's trails among the keys gc may move or delete: trail folder (as found,
    parked ones under their `_quarantine/gc/<stamp>/`) → its trail keys. The export's own
    trail sits at the prefix root, and a parked run copy at its stamp folder's root."""
    found: dict[str, list[str]] = {}
    for key in keys:
        original = _original_key(key)
        if original is None or is_parked_copy(key):
            continue
        folder = trail_folder(original)
        if folder:  # not the root: another export's
            found.setdefault(key[:len(key) - len(original)] + folder, []).append(key)
    return found


def refusal(snapshot: PrefixSnapshot) -> str | None:
    """Why gc must not act at this prefix at all (module docstring, "Refused"), with the fix;
    None when it may."""
    table = snapshot.current.table
    root_table = sorted({k.split("/", 1)[0] + "/" for k in snapshot.keys if "/" in k and trail_folder(k) == ""})
    if table is not None or root_table:
        what = (f"a {table.get('format', 'table')} table (manifest.json names its commit)" if table is not None
                else f"a table ({', '.join(root_table)} at the prefix root)")
        return (f"the prefix holds {what}: its snapshots reference parts that no manifest lists as current, "
                "so gc would break the table — nothing was moved; remove the table's files with the table's "
                "own vacuum (docs/adr/0009-table-formats.md), not with rivet gc")
    trails = foreign_trails(snapshot.keys)
    if not trails:
        return None
    shown = "; ".join(f"{folder} ({', '.join(sorted(keys)[:3])}{', …' if len(keys) > 3 else ''})"
                      for folder, keys in sorted(trails.items())[:5])
    return (f"another export's trail sits inside this export's prefix: {shown} — its files would look "
            "like orphans, so nothing was moved or deleted; give one of the two exports a destination "
            "outside the other's prefix (and move that export's files there), then run gc again")


def _why(run: RunRef, kept: set[str], current: str) -> str:
    if run.status != "success":
        return f"run {run.run_id} did not succeed ({run.status})"
    if run.run_id in kept:
        return f"run {run.run_id} is kept but superseded by {current}: parked, restorable"
    return f"run {run.run_id} is not kept by the policy"


def _plan_deletes(plan: GcPlan, snapshot: PrefixSnapshot, now: datetime, kept: set[str],
                  kept_files: set[str]) -> None:
    grace = timedelta(hours=plan.policy.grace_hours)
    folders: dict[str, list[str]] = {}
    for key in snapshot.keys:
        if key.startswith(GC_PREFIX) and "/" in key[len(GC_PREFIX):]:
            folders.setdefault(key[len(GC_PREFIX):].split("/", 1)[0], []).append(key)
    for stamp, keys in sorted(folders.items()):
        parked_at = stamp_time(stamp)
        if parked_at is None:
            plan.notes.append(f"{GC_PREFIX}{stamp}/ is not a gc folder name; left alone")
            continue
        if now - parked_at < grace:
            continue
        prefix = f"{GC_PREFIX}{stamp}/"
        bad = [k for k in keys if k in snapshot.unreadable]
        if bad:
            plan.notes.append(f"{prefix} kept: its run copies cannot be read ({', '.join(bad)})")
            continue
        spared_copies = {k for k in keys if k in snapshot.parked and snapshot.parked[k].run_id in kept}
        files, copies = [], []
        for key in sorted(keys):
            if key in spared_copies or key[len(prefix):] in kept_files:
                continue
            (copies if is_parked_copy(key) else files).append(key)
        reason = f"parked {parked_at.isoformat()}, past the {plan.policy.grace_hours:g} h grace period, no kept run lists it"
        plan.steps += [GcStep("delete", k, None, reason) for k in files + copies]


# ------------------------------------------------------------------------------- execution
@dataclass
class GcOutcome:
    done: list[GcStep] = field(default_factory=list)
    failed: list[tuple[GcStep, str]] = field(default_factory=list)
    skipped: list[tuple[GcStep, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"done": len(self.done), "failed": [{**s.to_dict(), "error": e} for s, e in self.failed],
                "skipped": [{**s.to_dict(), "why": w} for s, w in self.skipped]}


def execute_gc(dest: Destination, plan: GcPlan,
               on_step: Callable[[GcStep, str | None], None] = lambda step, error: None) -> GcOutcome:
    """Carry out `plan` in its order. A failed step is reported (`on_step(step, error)`) and the
    rest go on — except a file whose run copy could not be parked, which stays (a root copy
    must never list a file that moved). Never raises for a destination error."""
    outcome = GcOutcome()
    stuck: set[str] = set()
    for step in plan.steps:
        if step.action == "park_file" and stuck.intersection(step.after_copies_of):
            why = "its run copy could not be quarantined"
            outcome.skipped.append((step, why))
            on_step(step, f"skipped: {why}")
            continue
        try:
            if step.action == "delete":
                dest.delete(step.key)
            else:
                assert step.moved_to is not None
                dest.move(step.key, step.moved_to)
        except DestinationError as exc:
            error = str(exc)[:500]
            outcome.failed.append((step, error))
            if step.run_id is not None:
                stuck.add(step.run_id)
            log.warning("gc at %s: %s failed: %s", plan.uri, step.line(), error)
            on_step(step, error)
            continue
        outcome.done.append(step)
        on_step(step, None)
    return outcome


__all__ = [
    "GC_PREFIX", "GcOutcome", "GcPlan", "GcStep", "PrefixSnapshot", "RetentionPolicy", "RunRef",
    "execute_gc", "foreign_trails", "is_parked_copy", "kept_runs", "live_runs", "new_stamp", "plan_gc",
    "read_snapshot", "refusal", "stamp_time", "trail_folder",
]
