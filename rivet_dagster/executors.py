"""The code location's executor, chosen by `RIVET_DAGSTER_EXECUTOR` (docs/distributed.md).

`build_definitions` and the `dg` component put it on their definitions by default
(`executor="default"`), so rivet's jobs — and `dg launch`/`dagster asset materialize` of its
assets — run in-process also in a project whose definitions.py is the one `create-dagster`
writes (no executor of its own: Dagster's default is then multiprocess, a second
interpreter per step). `executor=None` (component: `executor: none`) leaves the executor
to the project, e.g. when its definitions.py sets one: Dagster refuses to merge two
definitions that each have an executor.

Unset, it is Dagster's own default executor with the other default mode: steps run in the
run's process (`in_process`) unless a run's config asks for `execution: config:
multiprocess:` — the same run config keys as Dagster's `multi_or_in_process_executor`. A
rivet run has one step (an export, a range of chunk windows exported one by one, a
manifest) plus its checks, so a subprocess per step would only add a second interpreter
start — imports and a code location load, seconds on a busy machine — to every run
(docs/benchmarks.md, the Dagster path). `multiprocess` picks Dagster's multiprocess
executor for every run. To run the chunk partitions of one export on many machines, point every process at
the same PostgreSQL-backed instance and Rivet state store, and pick `celery`: steps become
Celery tasks on the broker and run in `celery -A dagster_celery.app worker` processes. The
broker/backend come from `DAGSTER_CELERY_BROKER_URL` / `DAGSTER_CELERY_BACKEND_URL` (read when
a run starts), so the same code location works wherever it is loaded.

    RIVET_DAGSTER_EXECUTOR   unset/default (in_process first) | in_process | multiprocess | celery
"""

import functools
import os
from collections.abc import Mapping

import dagster as dg

from rivet_core import api
from rivet_dagster.dagster_compat import IN_PROC_CONFIG, MULTI_PROC_CONFIG

EXECUTORS = ("default", "multiprocess", "in_process", "celery")

#: Dagster's default executor (same name, config keys and behaviour) defaulting to
#: `in_process` instead of `multiprocess`.
IN_PROCESS_FIRST = dg.ExecutorDefinition(
    name=dg.multi_or_in_process_executor.name,
    config_schema=dg.Field(dg.Selector({"multiprocess": MULTI_PROC_CONFIG, "in_process": IN_PROC_CONFIG}),
                           default_value={"in_process": {}}),
    requirements=dg.multi_or_in_process_executor.get_requirements,
    executor_creation_fn=dg.multi_or_in_process_executor.executor_creation_fn,
    description="Dagster's multi_or_in_process_executor, in_process unless the run config says multiprocess.")


def resolve_executor(choice: dg.ExecutorDefinition | str | None) -> dg.ExecutorDefinition | None:
    """`build_definitions(executor=…)`: an executor as given; `"default"`: the one
    RIVET_DAGSTER_EXECUTOR names (unset: IN_PROCESS_FIRST); `"none"`/None: none (the project's
    own, else Dagster's default); another name: that executor, as RIVET_DAGSTER_EXECUTOR spells it."""
    if choice is None or isinstance(choice, dg.ExecutorDefinition):
        return choice
    name = choice.strip().lower()
    if name == "none":
        return None
    return executor_from_env() if name == "default" else executor_from_env({"RIVET_DAGSTER_EXECUTOR": name})


def executor_from_env(env: Mapping[str, str] | None = None) -> dg.ExecutorDefinition:
    """The executor named by RIVET_DAGSTER_EXECUTOR; unset or `default`: IN_PROCESS_FIRST."""
    name = (env if env is not None else os.environ).get("RIVET_DAGSTER_EXECUTOR", "").strip().lower()
    if name in ("", "default"):
        return IN_PROCESS_FIRST
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name in ("in_process", "in-process"):
        return dg.in_process_executor
    if name == "celery":
        return _celery()
    raise api.ConfigError(f"RIVET_DAGSTER_EXECUTOR={name!r} is not an executor — use one of "
                          f"{', '.join(EXECUTORS)}")


@functools.cache
def _celery() -> dg.ExecutorDefinition:
    """One object per process: definitions merged from several configs carry the same executor
    (Dagster's merge refuses two different ones)."""
    try:
        from dagster_celery import celery_executor
    except ImportError as exc:  # pragma: no cover - dagster-celery is a pinned dependency
        raise api.ConfigError("RIVET_DAGSTER_EXECUTOR=celery needs dagster-celery installed "
                              "(pinned with the Dagster family: dagster-celery==0.29.27)") from exc
    return celery_executor.configured(
        {"broker": {"env": "DAGSTER_CELERY_BROKER_URL"}, "backend": {"env": "DAGSTER_CELERY_BACKEND_URL"}},
        name="celery")
