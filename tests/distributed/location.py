"""The code location the distributed tests execute (what `rivet_dagster.definitions` is in a
deployment): the definitions of $RIVET_CONFIG with the executor named by
$RIVET_DAGSTER_EXECUTOR. The job factories are module-level functions so `dg.reconstructable`
can point step subprocesses and Celery workers at them; each call rebuilds the definitions
from the environment (the deployment's module caches them once per process instead).
"""

from __future__ import annotations

import os

import dagster as dg

from rivet_dagster.executors import executor_from_env
from rivet_dagster.factory import build_definitions

EXPORT = "orders_chunked"


def definitions() -> dg.Definitions:
    """The config's definitions, plus the export's two jobs the runs reconstruct by name (a
    config has no job per export by default: docs/dagster-guide.md "Jobs")."""
    return dg.Definitions.merge(
        build_definitions(os.environ["RIVET_CONFIG"], executor=executor_from_env()),
        dg.Definitions(jobs=[dg.define_asset_job(f"{EXPORT}_job", selection=dg.AssetSelection.assets(EXPORT)),
                             dg.define_asset_job(f"{EXPORT}_manifest_job",
                                                 selection=dg.AssetSelection.assets(f"{EXPORT}_manifest"))]))


def chunk_job() -> dg.JobDefinition:
    return definitions().resolve_job_def(f"{EXPORT}_job")


def manifest_job() -> dg.JobDefinition:
    return definitions().resolve_job_def(f"{EXPORT}_manifest_job")
