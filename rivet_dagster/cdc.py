"""A `mode: cdc` export as a Dagster asset: one materialization = one bounded drain.

The body runs the export's CDC run (rivet_core/pipeline/cdc/, through `rivet_core.api`):
it publishes the changes committed since the last published run up to the log's end as of
its start, then confirms the slot. The materialization carries what a CDC consumer asks
first: the changes by op, the position range (`cursor_low` → `cursor_high`, the manifest's)
and the lag after the run (the slot's; on MySQL/MariaDB, the binlog bytes after the
published position). Two checks, evaluated by the body on what it published:
`manifest_verified` (the prefix against its manifest, blocking) and `cdc_continuity` — this
run starts exactly where the previous published run ended, no gap, no overlap (a gap would
be changes never published; nothing else in the asset graph can see it).
"""

from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.asset_options import shared_asset_kwargs
from rivet_dagster.io_manager import failure_for
from rivet_dagster.metadata import materialization_metadata, standard_metadata
from rivet_dagster.naming import asset_key, source_kind

ORCHESTRATOR = "dagster"
CONTINUITY = "cdc_continuity"
VERIFIED = "manifest_verified"


def _ops(summary: api.RunSummary) -> dict[str, int]:
    ops: dict[str, int] = {}
    for event in summary.journal.events("CdcDrained"):
        for op, count in (event.get("ops") or {}).items():
            ops[op] = ops.get(op, 0) + int(count)
    return ops


def continuity(config: api.RivetConfig, export: api.ExportConfig) -> tuple[bool, str]:
    """Does the latest published run start where the one before it ended?"""
    runs = api.dataset_manifests(config, export)
    if len(runs) < 2:
        return True, "first published run of the stream"
    before, latest = runs[-2].source.extraction, runs[-1].source.extraction
    low = latest.cursor_low if latest else None
    high = before.cursor_high if before else None
    if low == high:
        return True, f"starts at {low}, where run {runs[-2].run_id} ended"
    return False, f"starts at {low}, but the previous run {runs[-2].run_id} ended at {high}"


def _lag(config: api.RivetConfig, export: api.ExportConfig) -> int | None:
    if config.source.type == "mysql":  # no slot: the binlog after the published position
        return api.cdc_binlog_lag(config, export)
    slot = (export.cdc.slot if export.cdc is not None else None) or "rivet_slot"
    for row in api.cdc_slots(config):
        if row["slot"] == slot:
            return row["lag_bytes"]
    return None


def cdc_body(config_path: str, export_name: str):  # noqa: ANN201 - a Dagster op body
    """The asset body (module docstring)."""

    def _run(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        options = api.RunOptions(orchestrator_run_id=context.run.run_id, orchestrator=ORCHESTRATOR,
                                 internal_retries=False)
        summary = api.run_checkpointed(cfg, exp, options)
        if summary.status == "failed" or summary.exit_code != 0:
            raise failure_for(summary) from None
        meta: dict[str, Any] = materialization_metadata(summary, None)
        meta.update(standard_metadata(cfg, exp, summary.destination_uri or "", None))
        for op, count in sorted(_ops(summary).items()):
            meta[f"changes_{op}"] = dg.MetadataValue.int(count)
        meta["position_low"] = str(summary.cursor_low)
        meta["position_high"] = str(summary.cursor_high)
        lag = _lag(cfg, exp)
        if lag is not None:
            meta["lag_bytes"] = dg.MetadataValue.int(lag)
        verdict = api.verify_export(cfg, exp.name, depth="sample")[1] if exp.tables is None else None
        ok, detail = continuity(cfg, exp) if exp.tables is None else (True, "per-table streams")
        checks = [dg.AssetCheckResult(check_name=CONTINUITY, passed=ok, metadata={"detail": detail})]
        if verdict is not None:
            checks.append(dg.AssetCheckResult(check_name=VERIFIED, passed=bool(verdict.passed),
                                              metadata={"summary": verdict.summary()}))
        return dg.MaterializeResult(metadata=meta, check_results=checks)

    return _run


def build_cdc_asset(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetsDefinition:
    """The export's asset with its two checks (module docstring)."""
    key = asset_key(config, export)
    specs = [dg.AssetCheckSpec(CONTINUITY, asset=key, description="this run starts where the previous ended")]
    if export.tables is None:
        specs.append(dg.AssetCheckSpec(VERIFIED, asset=key, blocking=True,
                                       description="the prefix matches its manifest"))
    kwargs = shared_asset_kwargs(config, export, role="run")
    kwargs.pop("io_manager_key", None)  # the body publishes; nothing goes through the IO manager
    return dg.asset(
        key=key, description=f"CDC export `{export.name}`: one bounded drain of the change log per "
                             "materialization (docs/modes.md `cdc`)",
        kinds={source_kind(config), export.format, export.destination.type}, check_specs=specs, **kwargs,
    )(cdc_body(str(config.config_path), export.name))
