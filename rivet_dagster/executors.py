"""The code location's executor, chosen by `RIVET_DAGSTER_EXECUTOR` (docs/distributed.md).

Dagster's default (`multiprocess`: one process per step on the machine of the run) serves one
machine. To run the chunk partitions of one export on many machines, point every process at
the same PostgreSQL-backed instance and Rivet state store, and pick `celery`: steps become
Celery tasks on the broker and run in `celery -A dagster_celery.app worker` processes. The
broker/backend come from `DAGSTER_CELERY_BROKER_URL` / `DAGSTER_CELERY_BACKEND_URL` (read when
a run starts), so the same code location works wherever it is loaded.

    RIVET_DAGSTER_EXECUTOR   unset/default | multiprocess | in_process | celery
"""

import os
from collections.abc import Mapping

import dagster as dg

from rivet_core import api

EXECUTORS = ("default", "multiprocess", "in_process", "celery")


def executor_from_env(env: Mapping[str, str] | None = None) -> dg.ExecutorDefinition | None:
    """The executor named by RIVET_DAGSTER_EXECUTOR, or None for Dagster's default."""
    name = (env if env is not None else os.environ).get("RIVET_DAGSTER_EXECUTOR", "").strip().lower()
    if name in ("", "default"):
        return None
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name in ("in_process", "in-process"):
        return dg.in_process_executor
    if name == "celery":
        try:
            from dagster_celery import celery_executor
        except ImportError as exc:  # pragma: no cover - dagster-celery is a pinned dependency
            raise api.ConfigError("RIVET_DAGSTER_EXECUTOR=celery needs dagster-celery installed "
                                  "(pinned with the Dagster family: dagster-celery==0.29.27)") from exc
        return celery_executor.configured(
            {"broker": {"env": "DAGSTER_CELERY_BROKER_URL"}, "backend": {"env": "DAGSTER_CELERY_BACKEND_URL"}},
            name="celery")
    raise api.ConfigError(f"RIVET_DAGSTER_EXECUTOR={name!r} is not an executor — use one of "
                          f"{', '.join(EXECUTORS)}")
