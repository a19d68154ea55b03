"""What a chunked run asks the source before any window is read: the windows, the schema they
share, and what each window holds now.

Two services a chunked run holds (chunked/run.py), each with the unit it asks about:

- `WindowPlanner` lays the windows out in one source snapshot (`rivet_core.chunks.layout`) and
  describes their output schema with a scan-free probe. A keyset checkpoint's windows never
  change once registered (the open last window absorbs appended keys), so a chunk-task step
  hands in the checkpoint's boundaries and they are reused rather than sampled again: the
  sampling is an ordered scan of the whole key that every planning call, window batch and
  finalize would otherwise repeat. The plan is still resolved against the source (the key
  usable, the plan hash); when its hash is not the checkpoint's, the boundaries are sampled
  as usual.
- `SourceFingerprints` counts what each window holds at the source now (COUNT, and
  MAX(change_column) with a `change_column`) with one grouped query for all of them
  (rivet_core/chunks/fingerprint.py): the planning call's staleness check, `rivet reconcile`
  of a chunk-task export, and a window batch's record of what it read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.chunks.fingerprint import (
    EMPTY,
    WindowFingerprint,
    fingerprint_queries,
    read_fingerprints,
)
from rivet_core.chunks.layout import lay_out_windows
from rivet_core.chunks.probes import column_type, fetch_rows
from rivet_core.chunks.sql import DENSE_RN_COLUMN, probe_window, window_query
from rivet_core.config import ExportConfig
from rivet_core.errors import ConfigError
from rivet_core.format.meta_columns import meta_schema
from rivet_core.lazy_modules import pa
from rivet_core.pipeline.staging.row_estimate import estimate_for_progress
from rivet_core.redact import redact_secrets
from rivet_core.reporting.progress import ProgressTracker
from rivet_core.source import open_source
from rivet_core.source.query import dialect_for
from rivet_core.unit.resolve import ResolvedUnit

#: A keyset checkpoint's windows: (its plan hash, the boundaries between its windows).
KeysetBoundaries = tuple[str, list[str]]


class WindowPlanner:
    """Plans the windows of one export unit (`unit`: its source, query and engine) and the
    schema they are written with (module docstring)."""

    def __init__(self, unit: ResolvedUnit, export: ExportConfig) -> None:
        self.unit, self.export = unit, export

    def plan(self, *, keyset_after: str | None, allow_downgrade: bool,
             stored_keyset: KeysetBoundaries | None = None,
             progress: ProgressTracker | None = None) -> tuple[ChunkLayout, pa.Schema] | None:
        """(windows, output schema) in one source snapshot, or None when a small table without
        an explicit chunk shape is better exported in one piece (`allow_downgrade`). The row
        estimate behind the progress ETA is asked on the same session."""
        unit = self.unit
        with open_source(unit.source_url, unit.tuning) as src:
            chunk_plan = self._reuse_keyset(src, stored_keyset) if stored_keyset is not None else None
            if chunk_plan is None:
                chunk_plan = lay_out_windows(src, self.export, base_sql=unit.base_query, table_parts=unit.table_hint,
                                             keyset_after=keyset_after, allow_downgrade=allow_downgrade)
            if chunk_plan is None:
                return None
            sql, params = window_query(dialect_for(unit.engine), unit.base_query, chunk_plan, probe_window(chunk_plan))
            source_schema = src.describe(sql, params, unit.overrides, unit.table_hint)
            estimate_for_progress(src, self.export, progress)
        return chunk_plan, self.output_schema(source_schema)

    def _reuse_keyset(self, src: Any, stored: KeysetBoundaries) -> ChunkLayout | None:
        """The checkpoint's keyset windows, when the config still plans them (same hash)."""
        plan_hash, boundaries = stored
        unit = self.unit
        chunk_plan = lay_out_windows(src, self.export, base_sql=unit.base_query, table_parts=unit.table_hint,
                                     allow_downgrade=False, keyset_boundaries=boundaries)
        if chunk_plan is None or chunk_plan.strategy != "keyset" or chunk_plan.plan_hash != plan_hash:
            return None
        return chunk_plan

    def output_schema(self, source_schema: pa.Schema) -> pa.Schema:
        """The windows' schema: the source's, without the dense-rank helper column, plus the
        export's meta columns."""
        meta = self.export.meta_columns
        schema = pa.schema([f for f in source_schema if f.name != DENSE_RN_COLUMN], metadata=source_schema.metadata)
        return meta_schema(schema, bool(meta and meta.exported_at), (meta.row_hash if meta else False) or False)


class SourceFingerprints:
    """What each window of one export unit holds at the source now (module docstring)."""

    def __init__(self, unit: ResolvedUnit, export: ExportConfig) -> None:
        self.unit, self.export = unit, export

    def of(self, chunk_plan: ChunkLayout, windows: Sequence[ChunkWindow]) -> dict[str, WindowFingerprint]:
        """Every window's fingerprint on a session of its own (an empty window has rows 0);
        with a `change_column`, checked first — also before the first window exists."""
        change = self.export.change_column
        if not windows and not change:
            return {}
        with open_source(self.unit.source_url, self.unit.tuning) as src:
            if change:
                self.check_change_column(src, change)
            return self.on(src, chunk_plan, windows)

    def on(self, src: Any, chunk_plan: ChunkLayout, windows: Sequence[ChunkWindow]) -> dict[str, WindowFingerprint]:
        """`of` on an open session, in its snapshot (no change-column check)."""
        change = self.export.change_column
        found: dict[str, WindowFingerprint] = {}
        for query in fingerprint_queries(dialect_for(self.unit.engine), self.unit.base_query, chunk_plan.strategy,
                                         chunk_plan.column, chunk_plan.size, windows, change):
            found.update(read_fingerprints(fetch_rows(src, query.sql, query.params), query, change))
        return {w.key: found.get(w.key, EMPTY) for w in windows}

    def check_change_column(self, src: Any, change: str) -> None:
        """`change_column` must be a column of the export's query whose MAX() the database
        computes and that orders like time or a version number (scan-free: describe only)."""
        unit, name = self.unit, self.export.name
        try:
            arrow_type, native = column_type(src, unit.base_query, change, unit.table_hint)
        except ConfigError as exc:
            raise ConfigError(f"export '{name}': change_column '{change}': {exc}") from exc
        orderable = arrow_type is not None and (
            pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)
            or pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type)
            or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))
        problem = None if orderable else f"(type {native})"
        if problem is None:  # the database has the last word (e.g. no MAX() for json); no row is read
            q = src.quote_ident(change)
            try:
                src.scalar(f"SELECT MAX(_rivet_c.{q}) FROM ({unit.base_query}) AS _rivet_c WHERE 1 = 0")
            except Exception as exc:  # error boundary: any refusal means MAX() is not usable (ConfigError below)
                problem = f"(type {native}: {redact_secrets(exc)})"
        if problem is not None:
            raise ConfigError(
                f"export '{name}': change_column '{change}' {problem} cannot be compared with "
                "MAX() — name a column that moves on every insert and update: a timestamp such as "
                "updated_at, or an increasing row version number")
