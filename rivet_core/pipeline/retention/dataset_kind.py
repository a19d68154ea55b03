"""Whether an export's dataset grows run after run or is replaced by each run: the one rule
retention (pipeline/retention/gc.py), the bucket set (buckets/run.py) and a reader's dataset
(`rivet_core.api.dataset_manifests`) share."""

from __future__ import annotations

from rivet_core.config import ExportConfig


def adds_rows_each_run(export: ExportConfig) -> bool:
    """Does each run add rows to the dataset (incremental, cdc, keyset-incremental chunked) rather
    than replace it? Decides what is readable: the union of the kept runs, or the current run."""
    return export.mode in ("incremental", "cdc") or (export.mode == "chunked" and bool(export.keyset_incremental))


__all__ = ["adds_rows_each_run"]
