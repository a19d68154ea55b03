import functools
from pathlib import Path

import dagster as dg

from rivet_dagster import enable_event_batching

# A ranged chunk run stores its window materializations in one event-log write
# (DAGSTER_EVENT_BATCH_SIZE; rivet_dagster/event_batching.py).
enable_event_batching()


@dg.definitions
@functools.cache
def defs() -> dg.Definitions:
    # Loads every component (defs/*/defs.yaml) and every module under defs/. Built once per
    # process: Dagster calls this function each time it reconstructs the repository (six times
    # in one `dg launch`), and each call loads every component again and snapshots the schema
    # of every installed component type — seconds each (docs/dagster-guide.md, "What a run
    # costs"). The rivet component gives its definitions the in-process executor itself.
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
