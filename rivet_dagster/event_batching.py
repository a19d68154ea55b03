"""Store a ranged chunk run's window materializations in one event-log write.

A chunk run of N windows ends its step with N `ASSET_MATERIALIZATION` events, one per
partition: that is how Dagster tracks which partitions exist. Dagster stores them one at a
time — on dagster-postgres an INSERT, a NOTIFY and an asset-index update per event, about 0.2 s
each on a loaded machine (32 windows: 7.5 s, docs/benchmarks.md, the
Dagster path) — unless `DAGSTER_EVENT_BATCH_SIZE` is set: then the materializations of one
output (Dagster tags them with one batch id) reach the event log storage as one
`store_event_batch` call, a single INSERT, and Dagster falls back to one-by-one writes if the
batch fails (Dagster's `handle_new_event`). Other events are not affected.

The variable is read by the process that executes the step (the run worker), whenever it
stores an event, so the code location sets it when it loads: the run worker loads it before
any step runs, and a code server passes its environment to the run workers it starts.
`rivet_dagster/definitions.py` (the project's code location, a process of its own) calls
`enable_event_batching`; a deployment that embeds `build_definitions` in its own code
location calls it, or sets the variable itself (docs/dagster-guide.md).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: Dagster's switch: 0 or unset stores every event alone.
EVENT_BATCH_SIZE_ENV = "DAGSTER_EVENT_BATCH_SIZE"
#: Events per write at most: above any run's window count (`rivet_dagster/chunked.py`
#: `windows_per_run`: unset, every window of the export in `parallel` runs), so a ranged
#: run's materializations go in one write.
EVENT_BATCH_SIZE = 10_000


def enable_event_batching(environ: MutableMapping[str, str] | None = None) -> str:
    """Set DAGSTER_EVENT_BATCH_SIZE unless the deployment already chose a value (kept as it
    is: `0` turns batching off). Returns the value in effect."""
    env = os.environ if environ is None else environ
    return env.setdefault(EVENT_BATCH_SIZE_ENV, str(EVENT_BATCH_SIZE))
