"""One Dagster asset per export (docs/dagster-guide.md, docs/architecture.md): the asset body extracts to staged files.

The body never writes to the destination. It runs the core's `ExportRun` through its
first phases — extract (quality gate on the staged data) and the schema-drift gate —
emits the quality and drift verdicts as asset checks with their numbers, and hands the
staged parts to the IO manager, which publishes and finalizes. A failing gate fails the
step before anything is published; the run is still finalized (metrics, report,
notification) so the failure is on record.

No `from __future__ import annotations` here: Dagster resolves resource parameters from
real annotations.
"""

import dagster as dg

from rivet_core import api
from rivet_dagster.asset_options import retry_policy, shared_asset_kwargs
from rivet_dagster.io_manager import PendingPublish, failure_for, will_retry
from rivet_dagster.metadata import describe_export
from rivet_dagster.naming import ORCHESTRATOR, asset_key, safe_name, source_kind
from rivet_dagster.partitions import (
    backfill_policy,
    export_partitions,
    range_metadata,
    window_for_key,
)
from rivet_dagster.store_clients import with_store_clients
from rivet_dagster.termination import stops_on_terminate


def quality_check_names(export: api.ExportConfig) -> dict[tuple[str, str | None], str]:
    """(check, column) of each configured quality gate → its Dagster check name."""
    q = export.quality
    names: dict[tuple[str, str | None], str] = {}
    if q is None:
        return names
    if q.row_count_min is not None:
        names[("row_count_min", None)] = "quality_row_count_min"
    if q.row_count_max is not None:
        names[("row_count_max", None)] = "quality_row_count_max"
    for col in q.null_ratio_max or {}:
        names[("null_ratio_max", col)] = f"quality_null_ratio_{safe_name(col)}"
    for col in q.unique_columns or []:
        names[("unique_columns", col)] = f"quality_unique_{safe_name(col)}"
    return names


def _thresholds(export: api.ExportConfig, check: str, column: str | None) -> object:
    q = export.quality
    if check == "null_ratio_max":
        return q.null_ratio_max[column]
    if check == "unique_columns":
        return 0
    return getattr(q, check)


def quality_results(export: api.ExportConfig, issues: list, rows: int | None) -> list[dg.AssetCheckResult]:
    by_check = {(i.check, i.column): i for i in issues if i.severity == "FAIL"}
    results = []
    for (check, column), name in quality_check_names(export).items():
        issue = by_check.get((check, column))
        metadata: dict = {"threshold": _thresholds(export, check, column)}
        if column:
            metadata["column"] = column
        if issue is not None:
            metadata.update(observed=issue.observed, message=issue.message)
        elif check.startswith("row_count") and rows is not None:
            metadata["observed"] = rows
        results.append(dg.AssetCheckResult(
            check_name=name, passed=issue is None, severity=dg.AssetCheckSeverity.ERROR,
            metadata={k: v for k, v in metadata.items() if v is not None},
            description=issue.message if issue else None))
    return results


def drift_result(export: api.ExportConfig, summary: api.RunSummary) -> dg.AssetCheckResult:
    policy = export.on_schema_drift or "warn"
    changes = summary.schema_changes or {}
    return dg.AssetCheckResult(
        check_name="schema_drift", passed=not summary.schema_changed,
        severity=dg.AssetCheckSeverity.ERROR if policy == "fail" else dg.AssetCheckSeverity.WARN,
        metadata={"policy": policy, "added": ", ".join(changes.get("added", [])),
                  "removed": ", ".join(changes.get("removed", [])),
                  "retyped": ", ".join(f"{n}: {o} -> {t}" for n, o, t in changes.get("type_changed", []))})


def run_flag(context: dg.AssetExecutionContext, tag: str) -> bool:
    """A run tag that asks for `rivet run`'s option of the same name: `rivet/full_refresh`
    (ignore the cursor), `rivet/from_manifest` (adopt the destination manifest's cursor
    when the state store lost it), `rivet/reconcile` (the source COUNT(*) in the export's
    snapshot must equal the rows written) — set them on the launchpad or a RunRequest."""
    return context.run.tags.get(tag, "").strip().lower() in ("1", "true", "yes")


def run_options(context: dg.AssetExecutionContext, config: api.RivetConfig, export: api.ExportConfig,
                progress: api.ProgressTracker, window: api.TimeWindow | None = None) -> api.RunOptions:
    """The core's options for one export run inside a Dagster step (one asset, or one export
    of a config's multi-asset, rivet_dagster/multi_asset.py). `validate`: the finalize verifies
    the destination before the report and notification (so both carry the verdict); a
    transient failure Dagster will retry is not notified; the core's own retries are off."""
    return api.RunOptions(orchestrator_run_id=context.run.run_id, orchestrator=ORCHESTRATOR, window=window,
                          internal_retries=False, progress=progress, validate=True,
                          defer_transient_notice=will_retry(context, config, export),
                          full_refresh=run_flag(context, "rivet/full_refresh"),
                          from_manifest=run_flag(context, "rivet/from_manifest"),
                          reconcile=run_flag(context, "rivet/reconcile"))


def describe(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """The asset description (built in rivet_dagster/metadata.py with the other UI text)."""
    return describe_export(config, export)


def build_export_asset(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetsDefinition:
    """The asset of one export (see the module docstring)."""
    key = asset_key(config, export)
    partitions = export_partitions(config, export)
    check_specs = [dg.AssetCheckSpec(name, asset=key, description=f"quality gate {check}"
                                     + (f" on `{col}`" if col else ""))
                   for (check, col), name in quality_check_names(export).items()]
    check_specs.append(dg.AssetCheckSpec("schema_drift", asset=key,
                                         description=f"schema drift (on_schema_drift: {export.on_schema_drift or 'warn'})"))
    export_name = export.name
    config_path = str(config.config_path)

    @dg.asset(
        key=key, description=describe(config, export),
        kinds={source_kind(config), export.format, export.destination.type},
        partitions_def=partitions, check_specs=check_specs,
        backfill_policy=backfill_policy(export) if partitions else None,
        retry_policy=retry_policy(config, export), **shared_asset_kwargs(config, export),
    )
    @with_store_clients(export)
    @stops_on_terminate(export_name, "the export")
    def _export(context: dg.AssetExecutionContext):
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        # Time partitions: one, or a range (a backfill policy) read by ONE source query and
        # still published partition by partition (partitions.py, rivet_core TimeRangeRun).
        windows = [window_for_key(partitions, k) for k in context.partition_keys] if partitions else [None]
        # Progress lines (rows, size, rate, ETA) in the run's event log, like `rivet run` logs them.
        progress = api.callback_tracker(cfg, exp, context.log.info)
        options = run_options(context, config, export, progress, windows[0])
        run = api.ExportRun(cfg, exp, options) if len(windows) == 1 else api.TimeRangeRun(cfg, exp, windows, options)
        context.log.info(f"rivet run {run.summary.run_id} → {run.dest.uri}")
        try:
            staged = run.extract()
            progress.finish()
        except api.DataIntegrityError as exc:
            yield from quality_results(exp, run.summary.quality_issues, None)
            raise failure_for(run.fail(exc)) from None
        except Exception as exc:
            # transient (exit 2): a Failure that allows retries, so the RetryPolicy retries the step
            raise failure_for(run.fail(exc)) from None
        yield from quality_results(exp, staged.quality_issues, staged.rows)
        try:
            run.gate_schema(staged)
        except api.SchemaDriftError as exc:
            yield drift_result(exp, run.summary)
            raise failure_for(run.fail(exc)) from None
        yield drift_result(exp, run.summary)
        for key, values in range_metadata(run, staged, context.partition_keys if partitions else []).items():
            context.add_asset_metadata(values, partition_key=key)
        yield dg.Output(PendingPublish(run, staged))

    return _export
