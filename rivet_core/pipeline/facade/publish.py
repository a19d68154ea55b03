"""Publish a staged extraction through the per-part commit facade.

The caller (ExportRun.publish) has already run the schema-drift facade on the staged
schema, so `on_schema_drift: fail` publishes nothing. Each staged part goes through
`write_part_file` → `record_part` (commit.py) — the only way a part reaches the destination. Part names follow Rivet
(`{export}_{YYYYMMDD_HHMMSS_mmm}.{ext}`, `_part{N}` when rotated) and land under the
prefix's `data/` folder (`artifacts.data_key`, docs/adr/0007-readable-layout-and-retention.md);
if that key already exists at the destination (two runs in the same millisecond) a short
random suffix is added, so no run ever overwrites another run's part.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from rivet_core.destination import Destination
from rivet_core.format import file_extension
from rivet_core.manifest import data_key
from rivet_core.pipeline.extract import StagedExtract
from rivet_core.pipeline.facade.commit import PartKind, record_part, write_part_file
from rivet_core.pipeline.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import UnitPlan


def part_stem(export_name: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{export_name}_{now.strftime('%Y%m%d_%H%M%S')}_{now.microsecond // 1000:03d}"


def _part_keys(dest: Destination, stem: str, ext: str, n: int) -> list[str]:
    def names(s: str) -> list[str]:
        return [data_key(f"{s}.{ext}")] if n == 1 else [data_key(f"{s}_part{i}.{ext}") for i in range(n)]

    keys = names(stem)
    if dest.supports_manifest and any(dest.head(k) is not None for k in keys):
        keys = names(f"{stem}_{secrets.token_hex(3)}")
    return keys


def publish_staged(plan: UnitPlan, summary: RunSummary, state: StateStore, dest: Destination,
                   staged: StagedExtract) -> None:
    """Write and record every staged part (see module docstring)."""
    if summary.schema_gate is None:
        raise RuntimeError("publish_staged called before the schema-drift gate ran")
    keys = _part_keys(dest, part_stem(plan.export.name), file_extension(plan.export.format),
                      len(staged.parts))
    for index, (part, key) in enumerate(zip(staged.parts, keys, strict=True)):
        record = write_part_file(dest, part, key)
        is_last = index == len(staged.parts) - 1
        record_part(summary, state, record, PartKind.file(index),
                    cursor_high=staged.cursor_high if is_last else None)
    if plan.cursor_column is not None:
        summary.cursor_column = plan.export.cursor_column
        summary.cursor_low = plan.cursor_low
        summary.cursor_high = staged.cursor_high
