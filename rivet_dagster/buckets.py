"""`partition_by` exports in Dagster: ONE asset whose materialization runs every bucket.

A `partition_by` export's buckets (`<col>=2024-01-01/`, `<col>=2024-01/`, …) come from the
data — the column's MIN and MAX when the run starts — so they are not Dagster partitions
(a partition key must be known before the run and name the same rows forever). The asset
runs `api.run_partitioned` exactly as `rivet run` does: one sub-export per bucket, each
with its own manifest and `_SUCCESS`; its materialization lists the buckets (label,
prefix, rows, status, run id), and `manifest_verified` (checks.py) verifies every bucket
prefix that holds a manifest.

No `from __future__ import annotations` here (Dagster inspects the body's annotations).
"""

import dagster as dg

from rivet_core import api
from rivet_dagster.io_manager import failure_for, will_retry
from rivet_dagster.metadata import materialization_metadata, standard_metadata
from rivet_dagster.naming import ORCHESTRATOR

BUCKETS_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("partition", "string"), dg.TableColumn("prefix", "string"),
    dg.TableColumn("rows", "int"), dg.TableColumn("parts", "int"), dg.TableColumn("status", "string"),
    dg.TableColumn("run_id", "string"),
])
#: Rows of the bucket table shown in the UI (the counts cover every bucket).
MAX_BUCKET_ROWS = 500


def buckets_metadata(column: str, result: api.PartitionedResult) -> dict:
    """The materialization's list of buckets and their count."""
    records = [dg.TableRecord({"partition": b.label, "prefix": f"{b.segment(column)}/", "rows": int(s.total_rows),
                               "parts": int(s.files_committed), "status": s.status, "run_id": s.run_id})
               for b, s in result.buckets[:MAX_BUCKET_ROWS]]
    return {"partitions": dg.MetadataValue.table(records=records, schema=BUCKETS_SCHEMA),
            "partition_count": dg.MetadataValue.int(len(result.buckets)),
            "partition_by": dg.MetadataValue.text(column)}


def partitioned_body(config_path: str, export_name: str):  # noqa: ANN201 - a Dagster op body
    """The asset body: every bucket of the export, then the materialization listing them."""

    def _run(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        options = api.RunOptions(orchestrator_run_id=context.run.run_id, orchestrator=ORCHESTRATOR, internal_retries=False, validate=True,
                                 defer_transient_notice=will_retry(context, cfg, exp))
        result = api.run_partitioned(cfg, exp, options)
        summary = result.summary
        if summary.status == "failed" or summary.exit_code != 0:
            raise failure_for(summary) from None
        context.log.info(f"{len(result.buckets)} partition(s) of '{exp.partition_by}': {summary.total_rows} rows "
                         f"→ {summary.destination_uri}")
        meta = materialization_metadata(summary, None)
        meta.update(buckets_metadata(exp.partition_by or "", result))
        meta.update(standard_metadata(cfg, exp, summary.destination_uri or "", None,
                                      dataset_rows=api.partitioned_dataset_rows(cfg, exp)))
        return dg.MaterializeResult(metadata=meta)

    return _run
