"""Publish a staged extraction through the per-part commit facade.

The caller (ExportRun.publish) has already run the schema-drift facade on the staged
schema, so `on_schema_drift: fail` publishes nothing. Each staged part goes through
`write_part_file` → `record_part` (commit.py) — the only way a part reaches the destination. Part names follow Rivet
(`{export}_{YYYYMMDD_HHMMSS_mmm}.{ext}`, `_part{N}` when rotated) and land under the
prefix's `data/` folder (`layout.data_key`, docs/adr/0007-readable-layout-and-retention.md; at
the root with `layout: rivet`);
if that key already exists at the destination (two runs in the same millisecond) a short
random suffix is added, so no run ever overwrites another run's part (pipeline/staging/part_names.py). A
destination that uploaded the parts while they were written (`Destination.begin_early_upload`)
had its stem chosen when the extract started (`StagedExtract.part_stem`): `write_part_file`
then completes the upload in flight — the same step, the same order.
"""

from __future__ import annotations

from rivet_core.destination import Destination
from rivet_core.format import file_extension
from rivet_core.manifest import data_key
from rivet_core.manifest.model import cursor_native_type
from rivet_core.pipeline.facade.commit import PartKind, record_part, write_part_file
from rivet_core.pipeline.staging.extract import StagedExtract
from rivet_core.pipeline.staging.part_names import free_stem, part_names, part_stem
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import ResolvedUnit


def _part_keys(dest: Destination, stem: str, ext: str, n: int, layout: str) -> list[str]:
    return [data_key(name, layout) for name in part_names(free_stem(dest, stem, ext, n, layout), ext, n)]


def publish_staged(plan: ResolvedUnit, summary: RunSummary, state: StateStore, dest: Destination,
                   staged: StagedExtract) -> None:
    """Write and record every staged part (see module docstring)."""
    if summary.schema_gate is None:
        raise RuntimeError("publish_staged called before the schema-drift gate ran")
    ext = file_extension(plan.export.format)
    if staged.part_stem is not None:  # chosen (and checked free) when the extract started
        keys = [data_key(name, plan.export.layout) for name in part_names(staged.part_stem, ext, len(staged.parts))]
    else:
        keys = _part_keys(dest, part_stem(plan.export.name), ext, len(staged.parts), plan.export.layout)
    for index, (part, key) in enumerate(zip(staged.parts, keys, strict=True)):
        record = write_part_file(dest, part, key)
        is_last = index == len(staged.parts) - 1
        record_part(summary, state, record, PartKind.file(index),
                    cursor_high=staged.cursor_high if is_last else None)
    if plan.cursor_column is not None:
        summary.cursor_column = plan.export.cursor_column
        summary.cursor_type = cursor_native_type(staged.schema, plan.export.cursor_column)
        summary.cursor_low = plan.cursor_low
        summary.cursor_high = staged.cursor_high
