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
    return build_definitions(os.environ["RIVET_CONFIG"], executor=executor_from_env())


def chunk_job() -> dg.JobDefinition:
    return definitions().resolve_job_def(f"{EXPORT}_job")


def manifest_job() -> dg.JobDefinition:
    return definitions().resolve_job_def(f"{EXPORT}_manifest_job")
