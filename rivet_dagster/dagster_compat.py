"""Every Dagster private (`dagster._…`) rivet_dagster uses, in one place.

Dagster's public API (`import dagster as dg`) is all the integration needs except the few
names below. A Dagster release may move or change a private name without notice; keeping
them here means one module to read when Dagster is upgraded, and
tests/dagster/test_dagster_compat.py imports each one and checks the behaviour rivet relies
on for the pinned version (requirements.lock), failing with the Dagster version and the
symbol's name when one moved. The rest of rivet_dagster imports them from here, never from
`dagster._…`.

Each name says what rivet uses it for and the public alternative, where there is one.
"""

from __future__ import annotations

import dagster as dg

# "__ASSET_JOB", the implicit asset job every code location with assets has: schedules
# target it by asset selection instead of a job per export (automation.py). Public
# alternative: `Definitions.resolve_implicit_global_asset_job_def().name`, which needs the
# finished definitions — a schedule is built before them.
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME

# The config of the two modes of Dagster's default executor (`multi_or_in_process_executor`):
# executors.py `IN_PROCESS_FIRST` declares the same executor with `in_process` as the
# default mode, so a run config written for Dagster's default executor works unchanged.
# Public alternative: none (the executor's own `config_schema` exposes them only through
# Dagster's config-type internals).
from dagster._core.definitions.executor_definition import IN_PROC_CONFIG, MULTI_PROC_CONFIG

# The status of an asset check execution record (`PLANNED`, `SUCCEEDED`, `FAILED`): the chunk
# planner re-runs a `reconcile` check whose newest execution FAILED (chunked.py
# `stale_reconcile_request`). Public alternative: none (the records come from
# `instance.event_log_storage.get_latest_asset_check_execution_by_key`).
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

# Dagster's own cron helpers, so `dagster.refresh` and `dagster.schedule` are read exactly as
# Dagster's schedules read a cron string: `is_valid_cron_string` checks a config value,
# `get_latest_completed_cron_tick` gives the planner's last refresh tick in a time zone
# (chunked.py `refresh_due`). Public alternative: none.
from dagster._utils.schedules import get_latest_completed_cron_tick, is_valid_cron_string

#: What Dagster raises in a step when its run is terminated (SIGINT to the run worker):
#: termination.py turns it into a step failure that is not retried. Public in the pinned
#: Dagster (`dg.DagsterExecutionInterruptedError`, the class `dagster._core.errors` defines);
#: here because the behaviour rivet relies on (raised in the step, not retried by rivet) is
#: what the compatibility test checks.
DagsterExecutionInterruptedError = dg.DagsterExecutionInterruptedError

#: The Dagster release these names were checked against (requirements.lock pins it): bumping
#: the pin fails the compatibility test until this module has been re-checked.
CHECKED_WITH_DAGSTER = "1.13.27"

#: Where each private name above lives in the pinned Dagster: the compatibility test imports
#: each from its module and names the Dagster version and the symbol when one moved.
PRIVATE_HOMES: dict[str, str] = {
    "IN_PROC_CONFIG": "dagster._core.definitions.executor_definition",
    "MULTI_PROC_CONFIG": "dagster._core.definitions.executor_definition",
    "IMPLICIT_ASSET_JOB_NAME": "dagster._core.definitions.assets.job.asset_job",
    "AssetCheckExecutionRecordStatus": "dagster._core.storage.asset_check_execution_record",
    "get_latest_completed_cron_tick": "dagster._utils.schedules",
    "is_valid_cron_string": "dagster._utils.schedules",
}

__all__ = [
    "CHECKED_WITH_DAGSTER",
    "PRIVATE_HOMES",
    "IMPLICIT_ASSET_JOB_NAME",
    "IN_PROC_CONFIG",
    "MULTI_PROC_CONFIG",
    "AssetCheckExecutionRecordStatus",
    "DagsterExecutionInterruptedError",
    "get_latest_completed_cron_tick",
    "is_valid_cron_string",
]
