"""Chunked exports whose windows cannot be partition keys: one asset, one checkpointed run.

A partition key must name the same rows forever. `chunk_count` and `chunk_dense` windows
are cut from the table's current extent (they move as it grows), and `keyset_incremental`
continues above a high-water key, so neither can be partitions. Such an export — or any
chunked export with `dagster.chunk_partitions: false` — becomes one unpartitioned asset
whose materialization runs the whole chunked run exactly as `rivet run` does
(`api.run_checkpointed`): windows checkpointed, `parallel:` honoured, the manifest written
once every window is committed (I6). A retried step, or a new run after a crash, continues
the chunk run in progress instead of starting over.

The core publishes window by window inside the run, so the body returns a
`MaterializeResult` (nothing for the IO manager to write); downstream assets still read the
export through the IO manager (`rivet/config` metadata).

No `from __future__ import annotations` here (Dagster inspects the body's annotations).
"""

import dagster as dg

from rivet_core import api
from rivet_dagster.chunk_words import dagster_chunk_problem
from rivet_dagster.io_manager import dataset_row_count, failure_for, will_retry
from rivet_dagster.metadata import materialization_metadata, standard_metadata
from rivet_dagster.naming import ORCHESTRATOR


def whole_run_reason(export: api.ExportConfig) -> str | None:
    """Why this chunked export runs as one asset instead of chunk partitions, or None."""
    if export.dagster is not None and not export.dagster.chunk_partitions:
        return "dagster.chunk_partitions: false"
    problem = dagster_chunk_problem(export)
    if problem is None:
        return None
    return ("chunk_count" if export.chunk_count is not None else
            "chunk_dense" if export.chunk_dense else "keyset_incremental")


def whole_run_body(config_path: str, export_name: str):  # noqa: ANN201 - a Dagster op body
    """The asset body: one checkpointed chunked run of the export, resumed when in progress."""

    def _run(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        progress = api.callback_tracker(cfg, exp, context.log.info)
        options = api.RunOptions(orchestrator_run_id=context.run.run_id, orchestrator=ORCHESTRATOR, internal_retries=False, progress=progress,
                                 validate=True, defer_transient_notice=will_retry(context, cfg, exp))
        summary = api.run_checkpointed(cfg, exp, options)
        progress.finish()
        if summary.status == "failed" or summary.exit_code != 0:
            raise failure_for(summary)
        context.log.info(f"chunked run {summary.run_id}: {summary.total_rows} rows → {summary.destination_uri}")
        meta = materialization_metadata(summary, None)
        meta.update(standard_metadata(cfg, exp, summary.destination_uri or "", None,
                                      dataset_rows=dataset_row_count(cfg, exp, summary)))
        return dg.MaterializeResult(metadata=meta)

    return _run
