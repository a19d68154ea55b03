"""The code location: `defs` built from `RIVET_CONFIG` (default: the shipped demo config).

`dagster dev -w workspace.yaml` and `dagster asset materialize -m rivet_dagster.definitions`
load this module; `RIVET_DAGSTER_EXECUTOR` picks the executor (executors.py). With no
`RIVET_CONFIG`, the demo SQLite database is created on first load so the demo works with
no setup.
"""

from __future__ import annotations

import os
from pathlib import Path

from rivet_core import api
from rivet_dagster.event_batching import enable_event_batching
from rivet_dagster.executors import executor_from_env
from rivet_dagster.factory import build_definitions

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "examples" / "demo" / "rivet.yaml"


def config_path_from_env() -> Path:
    configured = os.environ.get("RIVET_CONFIG")
    if configured:
        return Path(configured)

    api.ensure_demo_database()
    return DEMO_CONFIG


# This module is the demo/project code location (a process of its own), so it may tune the
# process: cap glibc malloc arenas before export threads start (rivet_core/pipeline/resources/malloc_arenas.py).
# `build_definitions` itself never changes the process of a code location that embeds it.
api.limit_malloc_arenas()
# …and store a ranged chunk run's window materializations in one event-log write
# (rivet_dagster/event_batching.py).
enable_event_batching()
defs = build_definitions(config_path_from_env(), executor=executor_from_env(), notify_run_failures=True)
