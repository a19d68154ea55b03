"""One subsettable multi-asset per config for its unpartitioned exports: many exports, one step.

Materializing 50 small exports as 50 assets is 50 steps — each with its own step start,
IO manager call, check step and event-log bookkeeping, and with a multiprocess executor an
interpreter each. Like dagster-dlt and dagster-sling (one `@multi_asset` per pipeline or
replication), the `full` and `incremental` exports of a config (not `partition_by`, not
chunked, not time-partitioned: those keep their own assets) are one
`@dg.multi_asset(can_subset=True)`: one asset per export as before — same key, group,
kinds, description, metadata, code version, automation, lineage to the source table — and
one step that runs the exports Dagster selected (`context.selected_asset_keys`), one after
the other as `rivet run` does, through the core's `ExportRun` phases — or, with the top-level
`dagster.multi_asset_parallel: N`, up to N at once in threads of the step (each with its own
source connection), their events yielded by the step's thread as each export finishes.

Per export the step yields what the export's own asset and checks yield: an `Output` with
the materialization's metadata, then the quality checks and `schema_drift` (about the data
just materialized: Dagster links each check result to the asset's latest materialization),
and the blocking `manifest_verified` result (the same `verify_prefixes` as checks.py); an
export that fails yields its verdicts and no `Output`. Selected on its own (no export of its
asset selected), `manifest_verified` only verifies the destination, as the standalone check
does.

What a step of many small exports costs is mostly Dagster's event log: every event and every
`context.log` line is one write (one SQLite transaction on the default instance). So an
export writes progress lines only once it has run longer than the progress interval
(`LateLines`; `RIVET_PROGRESS_INTERVAL`, 10 s by default) — a quick one writes none, its run
id, destination, rows and bytes are in its materialization's metadata — and its check results
follow its `Output`, so Dagster looks the target materialization up once per export, not
twice (docs/benchmarks.md, "Many exports in one Dagster run").

Why the step publishes (ADR-0003 amended): an exception in the IO manager's
`handle_output` ends the step at once, so one export whose publish fails would stop the
exports after it. Here the step calls the same `ExportRun.publish` the IO manager calls —
the one facade of the commit and finalize sequence — and only then yields a
`MaterializeResult` without a value: Dagster then does not call the IO manager's
`handle_output` (one event-log write less per export), and `load_input` reads the export for
a downstream asset as for any other. An export that fails is finalized as failed by the
core, yields no materialization (its downstream assets do not run), and the others go on; the
step then fails naming every failed export. It is retried (the largest `max_retries` of the
exports) only when every failure was transient, and a retry skips the exports already
materialized in this run. A terminate stops the step without a retry (termination.py); with
`multi_asset_parallel` the exports not started are cancelled and the running ones stop before
their publish (finalized as failed: nothing of them lands).

`dagster: {multi_asset: false}` at the top of rivet.yaml keeps one asset per export.

No `from __future__ import annotations` here: Dagster reads the body's context annotation.
"""

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.asset_options import retry_policy, shared_asset_kwargs
from rivet_dagster.assets import (
    describe,
    drift_result,
    quality_check_names,
    quality_results,
    run_options,
)
from rivet_dagster.checks import verify_prefixes
from rivet_dagster.config_block import defaults_block
from rivet_dagster.io_manager import (
    IO_MANAGER_KEY,
    PendingPublish,
    is_transient,
    published_metadata,
)
from rivet_dagster.naming import asset_key, derived_name, source_kind
from rivet_dagster.store_clients import required_keys, store_clients
from rivet_dagster.termination import INTERRUPTS, stops_on_terminate, terminated

MANIFEST_CHECK = "manifest_verified"


def multi_asset_enabled(config: api.RivetConfig) -> bool:
    """The top-level `dagster.multi_asset` (default on)."""
    block = defaults_block(config)
    return block is None or block.multi_asset is not False


def multi_asset_parallel(config: api.RivetConfig) -> int:
    """How many exports of the step run at once: the top-level `dagster.multi_asset_parallel`
    (default 1, one after the other)."""
    block = defaults_block(config)
    return (block.multi_asset_parallel if block is not None else None) or 1


def in_multi_asset(export: api.ExportConfig) -> bool:
    """Unpartitioned exports share the config's step; partitioned and chunked ones do not."""
    return export.mode in ("full", "incremental") and not export.partition_by


@dataclass
class ExportFailure:
    """One export of the step that failed: its message (redacted) and whether a retry may help."""

    export_name: str
    message: str
    transient: bool

    def line(self) -> str:
        """The message, naming the export once (the core's own messages often start with it)."""
        named = f"export '{self.export_name}'"
        return self.message if self.message.startswith(named) else f"{named}: {self.message}"


def check_specs(config: api.RivetConfig, export: api.ExportConfig) -> list[dg.AssetCheckSpec]:
    """The export's checks: its quality gates, `schema_drift` and the blocking `manifest_verified`."""
    key = asset_key(config, export)
    specs = [dg.AssetCheckSpec(name, asset=key, description=f"quality gate {check}" + (f" on `{col}`" if col else ""))
             for (check, col), name in quality_check_names(export).items()]
    specs.append(dg.AssetCheckSpec("schema_drift", asset=key,
                                   description=f"schema drift (on_schema_drift: {export.on_schema_drift or 'warn'})"))
    specs.append(dg.AssetCheckSpec(MANIFEST_CHECK, asset=key, blocking=True,
                                   description="Verify the destination against manifest.json and _SUCCESS "
                                               "(same verdicts as `rivet validate`)."))
    return specs


def asset_spec(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetSpec:
    """The export's asset, declared as its own `@dg.asset` declares it (asset_options.py)."""
    kwargs = shared_asset_kwargs(config, export)
    return dg.AssetSpec(
        key=asset_key(config, export), description=describe(config, export), skippable=True,
        kinds={source_kind(config), export.format, export.destination.type}, deps=kwargs["deps"],
        group_name=kwargs["group_name"], metadata=kwargs["metadata"], code_version=kwargs["code_version"],
        automation_condition=kwargs.get("automation_condition"), freshness_policy=kwargs.get("freshness_policy"),
    ).with_io_manager_key(IO_MANAGER_KEY)


def build_multi_assets(config: api.RivetConfig, exports: Sequence[api.ExportConfig]) -> list[dg.AssetsDefinition]:
    """One multi-asset per Dagster pool of the exports (a pool is an op's, so exports with
    different `dagster.pool` cannot share a step)."""
    by_pool: dict[str, list[api.ExportConfig]] = {}
    for export in exports:
        by_pool.setdefault(shared_asset_kwargs(config, export)["pool"], []).append(export)
    return [_multi_asset(config, pool, members) for pool, members in by_pool.items()]


def _multi_asset(config: api.RivetConfig, pool: str, exports: list[api.ExportConfig]) -> dg.AssetsDefinition:
    config_path = str(config.config_path)
    by_key = {asset_key(config, e): e.name for e in exports}
    # the exports as built: their resource keys include the ones `build_definitions` gave them
    built = {e.name: e for e in exports}
    # The largest retry budget of the exports: a retry re-runs only the exports that failed.
    policy = max((retry_policy(config, e) for e in exports), key=lambda p: p.max_retries)
    resources: set[str] = set().union(*(required_keys(e) for e in exports))
    label = f"{config.config_path.name}: {', '.join(by_key.values())}"
    workers = multi_asset_parallel(config)

    @dg.multi_asset(
        name=derived_name(config, exports[0], f"and_{len(exports) - 1}_more" if len(exports) > 1 else "export_step"),
        specs=[asset_spec(config, e) for e in exports],
        check_specs=[spec for e in exports for spec in check_specs(config, e)],
        can_subset=True, pool=pool, retry_policy=policy, required_resource_keys=resources,
        description=f"rivet exports of {config_path}: the selected ones run in this one step",
    )
    @stops_on_terminate(label, "the step")
    def _exports(context: dg.AssetExecutionContext) -> Iterator[Any]:
        cfg = api.load_config(config_path)
        done = _materialized_in_this_run(context, by_key) if context.retry_number else set()
        todo = [(key, built[name]) for key, name in by_key.items()
                if key in context.selected_asset_keys and key not in done]
        run_them = _one_after_another if workers == 1 or len(todo) < 2 else _side_by_side(workers)
        failures = yield from run_them(context, cfg, todo)
        for key, name in by_key.items():
            if key not in context.selected_asset_keys and key not in done and \
                    dg.AssetCheckKey(key, MANIFEST_CHECK) in context.selected_asset_check_keys:
                with store_clients(context, built[name]):  # the check alone: verify what is there
                    yield verify_prefixes(cfg, cfg.export(name), [""])._replace(
                        asset_key=key, check_name=MANIFEST_CHECK)
        if failures:
            raise step_failure(failures, len(context.selected_asset_keys))

    return _exports


#: The selected exports of a step as (asset key, the export as built) pairs.
Selected = list[tuple[dg.AssetKey, api.ExportConfig]]


def _one_after_another(context: dg.AssetExecutionContext, cfg: api.RivetConfig,
                       todo: Selected) -> Iterator[Any]:
    """Run the exports in order, each export's events yielded as it produces them; returns
    the failures. A terminate names the export it stopped."""
    failures: list[ExportFailure] = []
    for key, export in todo:
        try:
            with store_clients(context, export):
                failure = yield from _selected_checks(context, _run_export(context, cfg, cfg.export(export.name), key))
        except INTERRUPTS:  # a terminate names the export it stopped; never retried
            raise terminated(export.name, "the export") from None
        if failure is not None:
            failures.append(_logged(context, failure))
    return failures


def _side_by_side(workers: int) -> Callable[..., Iterator[Any]]:
    """`_one_after_another` with up to `workers` exports at once (`dagster.multi_asset_parallel`).

    Each export runs in a thread of the step (its own source connection and state store
    connection, as separate `rivet run` processes would have); the step's own thread yields
    each export's events once it has finished, in the order they finish — Dagster records
    events from the step's thread only. A terminate (raised in the step's thread) cancels
    the exports not started, and the ones running stop before their publish (finalized as
    failed by the core: nothing of them lands); the ones that published stay published,
    as with one after the other."""

    def run(context: dg.AssetExecutionContext, cfg: api.RivetConfig, todo: Selected) -> Iterator[Any]:
        stop = threading.Event()
        failures: list[ExportFailure] = []
        pool = ThreadPoolExecutor(workers, thread_name_prefix="rivet-export")
        running: dict[Future[tuple[list[Any], ExportFailure | None]], str] = {}
        try:
            for key, export in todo:
                running[pool.submit(_collected, context, cfg, export, key, stop)] = export.name
            for future in as_completed(running):
                events, failure = future.result()
                del running[future]
                yield from events
                if failure is not None:
                    failures.append(_logged(context, failure))
        except INTERRUPTS:  # never retried; names the first export the terminate stopped
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            stopped = []
            for future, name in running.items():  # those that published meanwhile are materialized
                if future.cancelled() or future.exception() is not None or future.result()[1] is not None:
                    stopped.append(name)
                else:
                    yield from future.result()[0]
            raise terminated(stopped[0] if stopped else todo[-1][1].name, "the export") from None
        finally:  # also when Dagster closes the step early: no export publishes after it
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        return failures

    return run


def _collected(context: dg.AssetExecutionContext, cfg: api.RivetConfig, export: api.ExportConfig,
               key: dg.AssetKey, stop: threading.Event) -> tuple[list[Any], ExportFailure | None]:
    """One export run in a thread of the step: its events (yielded by the step's thread) and
    its failure, or None."""
    events: list[Any] = []
    with store_clients(context, export):
        produced = _selected_checks(context, _run_export(context, cfg, cfg.export(export.name), key, stop))
        while True:
            try:
                events.append(next(produced))
            except StopIteration as finished:
                return events, finished.value


def _terminating(context: dg.AssetExecutionContext) -> bool:
    """Whether the run was asked to stop (a terminate marks it CANCELING before it interrupts
    the run worker). Asked by an export of a side-by-side step before it publishes: the
    interrupt reaches only the step's thread, and may land in Dagster's own code between two
    events, where the step cannot see it."""
    run = context.instance.get_run_by_id(context.run_id)
    return run is not None and run.status in (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED)


def _logged(context: dg.AssetExecutionContext, failure: ExportFailure) -> ExportFailure:
    context.log.error(f"failed, the step goes on with the next export — {failure.line()}")
    return failure


def step_failure(failures: list[ExportFailure], selected: int) -> dg.Failure:
    """The step's failure once every selected export ran: names each failed export; retried
    only when each failure was transient (a retry helps none of the others)."""
    names = ", ".join(f"'{f.export_name}'" for f in failures)
    return dg.Failure(
        description=(f"{len(failures)} of {selected} export(s) failed: {names} — the others were published. "
                     + " | ".join(f.line() for f in failures)),
        metadata={"failed_exports": [f.export_name for f in failures]},
        allow_retries=all(f.transient for f in failures))


def _selected_checks(context: dg.AssetExecutionContext, events: Iterator[Any]) -> Iterator[Any]:
    """`events` without the check results of checks the run did not select (an export
    materialized without its checks); returns what `events` returns."""
    selected = context.selected_asset_check_keys
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            return stop.value
        if not isinstance(event, dg.AssetCheckResult) or \
                dg.AssetCheckKey(event.asset_key, event.check_name) in selected:
            yield event


def _materialized_in_this_run(context: dg.AssetExecutionContext, by_key: dict[dg.AssetKey, str]) -> set[dg.AssetKey]:
    """The exports an earlier attempt of this step already materialized (a retry skips them)."""
    done = set()
    for key in by_key:
        event = context.instance.get_latest_materialization_event(key)
        if event is not None and event.run_id == context.run.run_id:
            done.add(key)
    return done


def _run_export(context: dg.AssetExecutionContext, cfg: api.RivetConfig, export: api.ExportConfig,
                key: dg.AssetKey, stop: threading.Event | None = None) -> Iterator[Any]:
    """One export of the step: its checks, its `Output` and `manifest_verified`; returns (as the
    generator's value) its failure, or None. The phases are the export asset's (assets.py)
    with the publish of the IO manager (io_manager.py), in that order."""
    lines = LateLines(context.log.info)
    progress = api.callback_tracker(cfg, export, lines)
    lines.after = max(sink.interval for sink in progress.sinks)
    run = api.ExportRun(cfg, export, run_options(context, cfg, export, progress))
    try:
        staged = run.extract()
        progress.finish()
    except api.DataIntegrityError as exc:
        yield from _for(key, quality_results(export, run.summary.quality_issues, None))
        return _failed(run.fail(exc))
    except Exception as exc:  # error boundary: the export's failure (run.fail), named when the step fails
        return _failed(run.fail(exc))
    quality = _for(key, quality_results(export, staged.quality_issues, staged.rows))
    try:
        run.gate_schema(staged)
    except api.SchemaDriftError as exc:
        yield from [*quality, drift_result(export, run.summary)._replace(asset_key=key)]
        return _failed(run.fail(exc))
    # Yielded after the Output when it publishes: the verdicts are about the data just
    # materialized, and Dagster looks a check result's target materialization up once per
    # asset (then cached) — before the Output it would look the previous one up as well.
    verdicts = [*quality, drift_result(export, run.summary)._replace(asset_key=key)]
    if stop is not None and (stop.is_set() or _terminating(context)):  # terminated while this export read
        yield from verdicts
        return _failed(run.fail(StepStopped(f"export '{export.name}': the run was terminated before this "
                                            "export published; nothing of it was written")))
    pending = PendingPublish(run, staged)
    try:
        summary = run.publish(staged)
    except Exception as exc:  # error boundary: the export's failure (the core finalized what it could), named when the step fails
        yield from verdicts
        return ExportFailure(export.name, api.redact_secrets(str(exc)), is_transient(exc))
    if summary.status == "failed" or summary.exit_code != 0:  # exit 3: the verdict failed
        yield from verdicts
        return _failed(summary)
    # No value: Dagster then skips the IO manager's `handle_output` (and its HANDLED_OUTPUT
    # event) — the step published already; `load_input` reads the export as any other.
    yield dg.MaterializeResult(asset_key=key, metadata=published_metadata(pending, summary, partition=False))
    yield from verdicts
    yield verify_prefixes(cfg, export, [""])._replace(asset_key=key, check_name=MANIFEST_CHECK)
    return None


class StepStopped(RuntimeError):
    """An export of a terminated step that had not published yet: finalized as failed."""


class LateLines:
    """The progress lines of one export of the step, written to the run's log only once the
    export has run `after` seconds (the tracker's interval): a long export reports as its own
    asset does, a quick one writes none. Each line is an event-log write (about as costly as
    the export of a small table, docs/benchmarks.md), and the `Output`'s metadata already
    carries the run id, destination, rows and bytes of every export."""

    def __init__(self, emit: Callable[[str], Any]) -> None:
        self.emit = emit
        self.after = 0.0
        self.started = time.monotonic()

    def __call__(self, line: str) -> None:
        if time.monotonic() - self.started >= self.after:
            self.emit(line)


def _for(key: dg.AssetKey, results: list[dg.AssetCheckResult]) -> list[dg.AssetCheckResult]:
    return [r._replace(asset_key=key) for r in results]


def _failed(summary: api.RunSummary) -> ExportFailure:
    return ExportFailure(summary.export_name, summary.error_message or summary.status, summary.exit_code == 2)
