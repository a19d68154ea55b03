"""The source governor: how long an export pauses between batches, decided by source pressure.

Why: a fixed pause between batches (the old `throttle_ms: 50` / `500` of the `balanced` /
`safe` profiles) costs the same whether the source is idle or saturated — 2.37× the wall of
`profile: fast` on an idle source (docs/benchmarks.md) and still not enough when the source
is on fire. The governor pauses only under pressure, between a floor and a ceiling per
profile (`rivet_core/config/tuning.py`).

Two halves, kept apart so the rule can be property-tested without a server:

- **The rule** (pure): `pressure_of(sample, limits)` turns one `PressureSample` into a
  pressure in [0, 1] — the worst of its signals (sessions running now, sessions busy within
  the last second, replica lag, the export's own fetch latency), each mapped linearly from its "idle"
  threshold (0) to its "busy" threshold (1) — and `delay_ms(pressure, limits)` maps pressure
  onto the floor plus pressure × the larger of (ceiling − floor) and `duty` × the batch's own
  read-and-write time. The ceiling alone is milliseconds; a batch of the default profile can
  take seconds, and a 500 ms pause after it leaves the source loaded ~90 % of the time
  (docs/benchmarks.md "Source governor"), so under full pressure the pause also scales with
  the batch: with `balanced`'s duty 1 the export then reads at most half the time, `safe`'s 3
  a quarter. Both are monotone: more active sessions, more replica lag, a slower fetch or a
  longer batch never shorten the pause; no pressure gives the floor (0 ms for `balanced`).
- **The loop** (`SourceGovernor`): after each batch it may sample the source through a
  `PressureProbe` (a side connection opened by the source session, `rivet_core/source/
  pressure.py`; never the export's snapshot transaction, so the snapshot is untouched) at
  most every `sample_interval_s` and every `sample_every_batches` batches, adds its own
  fetch-latency ratio, and sleeps the decided delay. The ratio is the time spent waiting for
  the source per row (EWMA) over the run's baseline seconds per row of the whole
  read-and-write cycle (the mean over the first batches, spanning their row-group encodes:
  `SourceGovernor.BASELINE_MIN_S`). Not wait over baseline wait: a read-ahead reader makes
  the wait ~0 while the source keeps up, and a ratio against ~0 is noise. Not cycle over
  baseline cycle: the batch that completes a row group carries its encode and would read as
  pressure every few dozen batches. So on a source that keeps up the ratio stays below 1 —
  when the writer catches up with the reader it waits for the source's next batch, which
  takes less than a whole cycle — and it reaches the idle threshold (3) only when each row
  waits three times what a whole healthy cycle took. Both times leave out what this
  process's threads spent queued for a CPU (Linux `/proc/self/task/*/schedstat`, `runqueue_wait_s`): on a machine
  whose cores are busy with other work, a starved reader thread would otherwise read as a
  slow source and pace an idle one. The first time it sees pressure it
  also lowers this process's CPU priority (nice + `cpu_nice`, `rivet_core/pipeline/
  cpu_priority.py`) until the read ends: pauses spare the source's server, but while a batch
  is read the export's encoder would otherwise take whole cores from a database it shares
  them with. Every sample and the decision taken are recorded
  (`GovernorStats`), so the run report, an orchestrator's metadata and the tests judge the
  governor by what it decided, never by the wall clock.

A probe that cannot be opened or fails (no privilege on pg_stat_activity, the server went
away) is dropped after its first error, recorded in the stats, and the governor continues on
the latency signal alone: pacing is advisory and must never fail an export.

`mode`: `adaptive` (the governor), `fixed` (an explicit `throttle_ms`: that pause after
every batch, exactly as configured, no probe), `off` (no pause: `profile: fast`, or an
explicit `throttle_ms: 0`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import best_effort
from rivet_core.pipeline.resources.cpu_priority import (
    hold_lowered_priority,
    release_lowered_priority,
)
from rivet_core.source.pressure import PressureProbe, PressureSample

log = logging.getLogger("rivet.governor")

GovernorMode = Literal["adaptive", "fixed", "off"]
_B = TypeVar("_B")

#: Decisions kept verbatim in the stats (the counters cover every one): enough to read a
#: run's story in its report without a 10 000-entry list for a long export.
MAX_RECORDED_DECISIONS = 200


@dataclass(frozen=True)
class GovernorLimits:
    """Floor and ceiling of the pause, and each signal's idle → busy range.

    The floor and ceiling per profile live in ONE table, `config.tuning.PROFILE_DEFAULTS`
    (`throttle_floor_ms`, `throttle_ceiling_ms`), read by `limits_for`; the defaults here are
    that table's `balanced` row, not a second copy of it."""

    floor_ms: int = ResolvedTuning.throttle_floor_ms
    ceiling_ms: int = ResolvedTuning.throttle_ceiling_ms
    #: Pause per second of the batch's own cycle under full pressure (see `delay_ms`).
    duty: float = ResolvedTuning.throttle_duty
    #: No single pause longer than this, however long the batch: the export's snapshot
    #: stays open while it sleeps.
    max_pause_ms: int = 60_000
    active_idle: int = 2
    active_busy: int = 16
    #: Sessions waiting on locks/IO count double: they are the ones an export makes worse.
    waiting_weight: float = 2.0
    #: Sessions that ran a statement within the last second (`PressureSample.recent`): an
    #: application busy with short statements. Starts higher than `active_idle`: a few
    #: clients polling now and then are not a load to yield to.
    recent_idle: int = 3
    recent_busy: int = 16
    #: Nice increment for this process's threads once pressure is seen (0: never).
    cpu_nice: int = 10
    lag_idle_s: float = 5.0
    lag_busy_s: float = 60.0
    latency_idle: float = 3.0
    latency_busy: float = 8.0

    def __post_init__(self) -> None:
        if not 0 <= self.floor_ms <= self.ceiling_ms:
            raise ValueError(f"governor floor {self.floor_ms} ms must be within [0, ceiling "
                             f"{self.ceiling_ms} ms]")
        if self.duty < 0:
            raise ValueError(f"governor duty {self.duty} must be ≥ 0")


def _ramp(value: float | None, idle: float, busy: float) -> float:
    """0 at or below `idle`, 1 at or above `busy`, linear between; None → 0."""
    if value is None or value <= idle:
        return 0.0
    if value >= busy:
        return 1.0
    return (value - idle) / (busy - idle)


def pressure_of(sample: PressureSample, limits: GovernorLimits) -> float:
    """The sample's pressure in [0, 1]: the worst of its signals (monotone in each)."""
    load = None
    if sample.active is not None:
        load = sample.active + (limits.waiting_weight - 1.0) * (sample.waiting or 0)
    return max(
        _ramp(load, limits.active_idle, limits.active_busy),
        _ramp(sample.recent, limits.recent_idle, limits.recent_busy),
        _ramp(sample.replica_lag_s, limits.lag_idle_s, limits.lag_busy_s),
        _ramp(sample.latency_ratio, limits.latency_idle, limits.latency_busy),
    )


def delay_ms(pressure: float, limits: GovernorLimits, cycle_ms: float = 0.0) -> float:
    """Pause after a batch whose read and write took `cycle_ms`, for `pressure`: the floor at
    0; at 1 the floor plus the larger of (ceiling − floor) and `duty` × `cycle_ms`; linear
    between; never beyond `max_pause_ms` (nor below the floor)."""
    p = min(max(pressure, 0.0), 1.0)
    span = max(limits.ceiling_ms - limits.floor_ms, limits.duty * max(cycle_ms, 0.0))
    return max(float(limits.floor_ms), min(limits.floor_ms + span * p, float(max(limits.max_pause_ms, limits.ceiling_ms))))


@dataclass
class GovernorStats:
    """What the governor did in one run — the report's and the metadata's figures."""

    mode: GovernorMode
    floor_ms: int = 0
    ceiling_ms: int = 0
    duty: float = 0.0
    batches: int = 0
    #: Pauses taken (batches followed by a sleep) and their total, as decided (not measured).
    pauses: int = 0
    throttled_ms: float = 0.0
    samples: int = 0
    pressure_max: float = 0.0
    active_max: int | None = None
    recent_max: int | None = None
    lag_max_s: float | None = None
    latency_ratio_max: float | None = None
    probe_error: str | None = None
    #: The nice increment applied once pressure was seen (None: never lowered), and whether
    #: the former priority was restored when the read ended (None: nothing to restore).
    cpu_nice: int | None = None
    cpu_restored: bool | None = None
    #: One entry per sample: {"batch", "pressure", "delay_ms", and the signals}; capped.
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "floor_ms": self.floor_ms, "ceiling_ms": self.ceiling_ms, "duty": self.duty,
            "batches": self.batches, "pauses": self.pauses,
            "throttled_s": round(self.throttled_ms / 1000.0, 3), "samples": self.samples,
            "pressure_max": round(self.pressure_max, 3), "active_max": self.active_max,
            "recent_max": self.recent_max, "replica_lag_max_s": self.lag_max_s, "latency_ratio_max": self.latency_ratio_max,
            "probe_error": self.probe_error, "cpu_nice": self.cpu_nice, "cpu_restored": self.cpu_restored,
            "decisions": list(self.decisions),
        }


def _max(current: Any, value: Any) -> Any:
    if value is None:
        return current
    return value if current is None else max(current, value)


def mode_for(tuning: ResolvedTuning) -> GovernorMode:
    if tuning.governor:
        return "adaptive"
    return "fixed" if tuning.throttle_ms > 0 else "off"


def limits_for(tuning: ResolvedTuning) -> GovernorLimits:
    return GovernorLimits(floor_ms=tuning.throttle_floor_ms,
                          ceiling_ms=max(tuning.throttle_ceiling_ms, tuning.throttle_floor_ms),
                          duty=tuning.throttle_duty)


def runqueue_wait_s() -> float:
    """Seconds this process's threads have spent runnable but waiting for a CPU, summed over
    its threads (the second field of Linux's per-thread `schedstat`). 0.0 where the kernel
    does not expose it (not Linux, or schedstats compiled out): the latency signal then
    counts CPU starvation as waiting, as it did before this correction existed."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as fh:
                total += int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):  # the thread ended between listdir and open
            continue
    return total / 1e9


class SourceGovernor:
    """Paces one export's read (see module doc). Call `start` before the first batch,
    `after_batch` once per batch written, and `close` at the end (closes the probe)."""

    #: The run's baseline is the mean cycle per row of its first batches (after the first,
    #: which carries the query start-up): at least this many batches, and at least
    #: `BASELINE_MIN_S` of them, so that the window holds the row-group encodes a healthy
    #: cycle includes. (A median of five batches measured only the batches that buffer rows
    #: without encoding — ~0.5 ms against ~100 ms for one that encodes — and an idle source
    #: read as pressure whenever the writer caught up with the reader: docs/benchmarks.md
    #: "Source governor: the baseline spans the encodes".)
    BASELINE_BATCHES = 5
    BASELINE_MIN_S = 0.25

    def __init__(self, tuning: ResolvedTuning, open_probe: Callable[[], PressureProbe | None] | None = None,
                 *, sample_interval_s: float = 1.0, sample_every_batches: int = 1,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 runqueue: Callable[[], float] = runqueue_wait_s,
                 lower_priority: Callable[[int], bool] = hold_lowered_priority,
                 restore_priority: Callable[[], bool] = release_lowered_priority) -> None:
        self.mode = mode_for(tuning)
        self.limits = limits_for(tuning)
        self.fixed_ms = tuning.throttle_ms if self.mode == "fixed" else 0
        self.stats = GovernorStats(mode=self.mode, floor_ms=self.limits.floor_ms if self.mode == "adaptive" else 0,
                                   ceiling_ms=self.limits.ceiling_ms if self.mode == "adaptive" else 0,
                                   duty=self.limits.duty if self.mode == "adaptive" else 0.0)
        self._open_probe = open_probe if self.mode == "adaptive" else None
        self._probe: PressureProbe | None = None
        self._probe_opened = False
        self._interval = sample_interval_s
        self._every = max(1, sample_every_batches)
        self._sleep, self._clock = sleep, clock
        # Only the adaptive mode reads latency; the others never pay for the /proc reads.
        self._runqueue = runqueue if self.mode == "adaptive" else (lambda: 0.0)
        self._last_sample_at: float | None = None
        self._batches_since_sample = 0
        self._pressure = 0.0  # the last sample's; the pause is decided per batch from it
        self._base_rows = 0
        self._base_s = 0.0
        self._base_batches = 0
        self._baseline: float | None = None
        self._recent: float | None = None  # EWMA of the per-row wait for the source
        self._resume_at = clock()
        self._resume_queued = 0.0
        self._last_wait_s = 0.0
        self._lower_priority, self._restore_priority = lower_priority, restore_priority
        self._holds_priority = False

    def start(self) -> None:
        """The read starts now: the first batch's cycle is measured from here."""
        self._resume_at = self._clock()
        self._resume_queued = self._runqueue()

    # ------------------------------------------------------------------ the loop
    def timed(self, batches: Iterator[_B]) -> Iterator[_B]:
        """`batches`, timing each wait for the next one (the fetch latency the ratio reads).
        Closes `batches` when closed itself, so the source's cursor is released as promptly
        as iterating it directly would."""
        try:
            while True:
                t0, q0 = self._clock(), self._runqueue()
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                self._last_wait_s = _unqueued(self._clock() - t0, self._runqueue() - q0)
                yield batch
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def after_batch(self, rows: int) -> None:
        """Record one batch, maybe sample the source, then pause as decided."""
        self.stats.batches += 1
        if self.mode == "off":
            return
        if self.mode == "fixed":
            self._pause(self.fixed_ms)
            return
        now = self._clock()
        cycle_s = _unqueued(now - self._resume_at, self._runqueue() - self._resume_queued)
        self._observe_latency(rows, cycle_s, self._last_wait_s)
        self._batches_since_sample += 1
        due = self._last_sample_at is None or (now - self._last_sample_at >= self._interval
                                               and self._batches_since_sample >= self._every)
        if due:
            self._last_sample_at = now
            self._batches_since_sample = 0
            sample = self._sample()
            self._pressure = pressure_of(sample, self.limits)
            if self._pressure > 0:
                self._yield_cpu()
        delay = delay_ms(self._pressure, self.limits, cycle_s * 1000.0)
        if due:
            self._record(sample, self._pressure, cycle_s, delay)
        self._pause(delay)
        self._resume_at = self._clock()
        self._resume_queued = self._runqueue()

    def _yield_cpu(self) -> None:
        """Lower the process's CPU priority once, on the first pressure seen (module doc)."""
        if self.stats.cpu_nice is not None or self.limits.cpu_nice <= 0:  # tried once already
            return
        with best_effort("lower the export's CPU priority", logger=log):  # advisory, like the pauses
            self._holds_priority = self._lower_priority(self.limits.cpu_nice)
        self.stats.cpu_nice = self.limits.cpu_nice if self._holds_priority else 0

    def _pause(self, ms: float) -> None:
        if ms <= 0:
            return
        self.stats.pauses += 1
        self.stats.throttled_ms += ms
        self._sleep(ms / 1000.0)  # deliberate pacing of the source, not synchronisation

    def _observe_latency(self, rows: int, cycle_s: float, wait_s: float) -> None:
        if rows <= 0:
            return
        n = self.stats.batches
        if self._baseline is None:
            if n > 1:  # the first batch carries the query's start-up, not the steady state
                self._base_rows += rows
                self._base_s += cycle_s
                self._base_batches += 1
            if self._base_batches >= self.BASELINE_BATCHES and self._base_s >= self.BASELINE_MIN_S:
                self._baseline = max(self._base_s / self._base_rows, 1e-9)
            return
        per_row = wait_s / rows
        self._recent = per_row if self._recent is None else 0.7 * self._recent + 0.3 * per_row

    def latency_ratio(self) -> float | None:
        if self._baseline is None or self._recent is None:
            return None
        return round(self._recent / self._baseline, 3)

    def _sample(self) -> PressureSample:
        probe = self._ensure_probe()
        sample = PressureSample()
        if probe is not None:
            # Pacing is advisory: a failing probe is dropped (it logs why) and the export goes on.
            with best_effort("pressure probe sample", warn=self._drop_probe, message="{kind}: {reason}"):
                sample = probe.sample()
        return PressureSample(active=sample.active, waiting=sample.waiting, recent=sample.recent,
                              threads_running=sample.threads_running,
                              replica_lag_s=sample.replica_lag_s, latency_ratio=self.latency_ratio())

    def _record(self, sample: PressureSample, pressure: float, cycle_s: float, delay: float) -> None:
        """Count the sample and keep the decision taken on it (the stats' figures)."""
        st = self.stats
        st.samples += 1
        st.pressure_max = max(st.pressure_max, pressure)
        st.active_max = _max(st.active_max, sample.active)
        st.recent_max = _max(st.recent_max, sample.recent)
        st.lag_max_s = _max(st.lag_max_s, sample.replica_lag_s)
        st.latency_ratio_max = _max(st.latency_ratio_max, sample.latency_ratio)
        if len(st.decisions) < MAX_RECORDED_DECISIONS:
            st.decisions.append({
                "batch": st.batches, "pressure": round(pressure, 3), "cycle_ms": round(cycle_s * 1000.0, 1),
                "delay_ms": round(delay, 1),
                "active": sample.active, "waiting": sample.waiting, "recent": sample.recent,
                "threads_running": sample.threads_running, "replica_lag_s": sample.replica_lag_s,
                "latency_ratio": sample.latency_ratio,
            })

    # ------------------------------------------------------------------ the probe
    def _ensure_probe(self) -> PressureProbe | None:
        if not self._probe_opened and self._open_probe is not None:
            self._probe_opened = True
            with best_effort("open the pressure probe", warn=self._drop_probe, message="{kind}: {reason}"):
                self._probe = self._open_probe()
        return self._probe

    def _drop_probe(self, why: str) -> None:
        from rivet_core.redact import redact_secrets

        self.stats.probe_error = redact_secrets(why)[:300]
        log.warning("source governor: pressure probe unavailable (%s); pacing on fetch latency only",
                    self.stats.probe_error)
        probe, self._probe = self._probe, None
        if probe is not None:
            with best_effort("close the failed pressure probe", logger=log):  # nothing beyond this to release
                probe.close()

    def close(self) -> None:
        if self._holds_priority:
            self._holds_priority = False
            self.stats.cpu_restored = False
            with best_effort("restore the export's CPU priority", logger=log):
                self.stats.cpu_restored = self._restore_priority()
        probe, self._probe = self._probe, None
        if probe is not None:
            with best_effort("close the pressure probe", logger=log):  # the export is done; moot
                probe.close()


def _unqueued(elapsed_s: float, queued_s: float) -> float:
    """`elapsed_s` without the CPU-queue time of the same interval, never below zero (the
    queue time is summed over threads, so it can exceed the wall of the interval)."""
    return max(0.0, elapsed_s - max(0.0, queued_s))
