"""Engine probes of source pressure for the governor (rivet_core/pipeline/resources/governor.py).

Each probe is its own short-lived side connection, autocommit, with a 2 s statement timeout:
the export's connection holds a REPEATABLE READ snapshot (PostgreSQL) or a consistent-snapshot
transaction (MySQL) that a probe query must never join, extend or break. One probe per export
read, opened at the first sample and closed with the read; a sample is one or two catalog
queries, taken at most once a second (the governor's interval).

What is counted, and why it is scoped to the export's database, is told by each engine's
probe: rivet_core/source/postgres/pressure.py and rivet_core/source/mysql/pressure.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PressureSample:
    """One look at the source. None = the signal is not available on this engine/server.

    `active`: other sessions of the export's database running a statement right now (the
    export's own connection and the probe's excluded). `waiting`: those of them waiting on a
    lock or I/O (PostgreSQL). `threads_running`: MySQL/MariaDB `Threads_running`, server-wide
    (recorded; the decision uses the per-database `active`, see mysql/pressure.py).
    `recent`: other sessions of the export's database that ran a statement within the last
    second (running now or finished since) — what a snapshot of `active` misses under an
    OLTP load of millisecond statements, where few are running at any instant although the
    application is busy all the time (docs/benchmarks.md, governor section).
    `replica_lag_s`: replay lag when the source is a replica. `latency_ratio`: the governor's
    own seconds per row over the run's baseline (filled in by the loop)."""

    active: int | None = None
    waiting: int | None = None
    recent: int | None = None
    threads_running: int | None = None
    replica_lag_s: float | None = None
    latency_ratio: float | None = None


class PressureProbe(Protocol):
    """A side connection that reads the source's load."""

    def sample(self) -> PressureSample: ...

    def close(self) -> None: ...


PROBE_TIMEOUT_S = 2
"""A probe's statement timeout: a sample must never queue behind the load it measures."""
