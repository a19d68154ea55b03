"""The CDC run: one bounded drain of one change stream, published per captured table.

Order (the package docstring says why): lock every table's export → reader preflight
(nothing written yet) → `initial: snapshot` when a table has none (on MySQL the anchor is
written to `cdc.checkpoint` first: a binlog keeps no marker for its reader) → resume point =
the earliest last-published position over the tables (`_resume_point`: with the anchor while
a table has none) → `open` (the window's bound is the log's
end now) → drain into per-table staged parts → publish each table (parts → manifest →
`_SUCCESS` → cursor) → confirm the reader up to what every table published → checkpoint
file. A failure before the publish finalizes every table as failed and confirms nothing.

Fault points (rivet_core/pipeline/faults.py), Rivet's names where it has them:
`cdc_after_open`, `during_source_read`, `cdc_after_read`, `cdc_before_manifest` (a table's
parts are written, its manifest not), `cdc_after_flush_before_ack` (every table published,
the slot not confirmed), `cdc_after_ack`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.config.cdc import CdcConfig
from rivet_core.config.cdc_rules import captured_tables
from rivet_core.config.models import DestinationConfig
from rivet_core.errors import DataIntegrityError, best_effort
from rivet_core.lazy_modules import pa
from rivet_core.pipeline.cdc.layout import SNAPSHOT_FOLDER
from rivet_core.pipeline.cdc.positions import parse_position, published_position
from rivet_core.pipeline.cdc.stage import TableFanout, TableStager
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.single.job import ExportRun, RunOptions
from rivet_core.pipeline.staging.stream import stream_to_parts
from rivet_core.reporting.progress import NULL_FEED
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source.changes import ChangePosition, ChangeReader, ChangeTable, ChangeWindow
from rivet_core.state import StateStore

log = logging.getLogger("rivet.cdc")

#: Changes per batch asked of the reader (a part is `cdc.rollover` changes, cut between batches).
_READ_BATCH = 5_000


def under(dest: DestinationConfig, folder: str) -> DestinationConfig:
    """The same destination, one folder deeper (a table of `tables:`, or its snapshot)."""
    if dest.type == "local":
        return dest.model_copy(update={"path": f"{dest.local_path.rstrip('/')}/{folder}"})
    base = (dest.prefix or "").strip("/")
    return dest.model_copy(update={"prefix": f"{base}/{folder}" if base else folder})


def table_export(export: ExportConfig, table: str) -> ExportConfig:
    """The per-table export a stream publishes through: the export itself for `table:`; for
    `tables:`, `<export>.<table>` writing to `<prefix>/<table>/` (Rivet's layout)."""
    if export.tables is None:
        return export
    return export.model_copy(update={"name": f"{export.name}.{table}", "table": table, "tables": None,
                                     "destination": under(export.destination, table)})


def snapshot_export(export: ExportConfig) -> ExportConfig:
    """A full export of the table into `<table prefix>/snapshot/`, under its own name (its
    own state, lock and manifest)."""
    return export.model_copy(update={"name": f"{export.name}.snapshot", "mode": "full", "cdc": None,
                                     "destination": under(export.destination, SNAPSHOT_FOLDER)})


class CdcTableRun(ExportRun):
    """One captured table's publish: the batch run's phases and facades, fed by the stream
    instead of a query (the stream owns the reader)."""

    def publish_changes(self, staged: Any, after: ChangePosition | None, bound: ChangePosition) -> RunSummary:
        """Parts → manifest (`mode: cdc`, cursor range = (after, bound]) → `_SUCCESS` →
        cursor, through the same facades as `ExportRun.publish`."""
        from rivet_core.pipeline.facade.publish import publish_staged

        s = self.summary
        s.extraction_strategy, s.cursor_column, s.cursor_type = "cdc", "__pos", "cdc_position"
        s.cursor_low, s.cursor_high = (after.to_json() if after else None), bound.to_json()
        error: BaseException | None = None
        try:
            self.gate_schema(staged)
            if staged.rows == 0:
                self._empty_result()
            else:
                publish_staged(self.plan, s, self.state, self.dest, staged)
            fault_point("cdc_before_manifest")
        except Exception as exc:  # error boundary: reported through finalize
            error = exc
        return self._finalize(error)


def open_reader(config: RivetConfig, export: ExportConfig, cdc: CdcConfig, tables: Sequence[str],
                has_history: bool) -> ChangeReader:
    """The source engine's change reader (rivet_core/source/changes.py)."""
    from rivet_core.source.change_readers import ChangeReaderRequest, open_change_reader

    return open_change_reader(config.source.type, ChangeReaderRequest(
        url=config.source.resolve_url(config.config_dir), export_name=export.name, tables=tuple(tables),
        slot=cdc.resolved_slot, publication=cdc.resolved_publication, server_id=cdc.resolved_server_id,
        has_history=has_history, tuning=export.resolved_tuning(config.source)))


def read_checkpoint(path: Path) -> ChangePosition | None:
    """The position a checkpoint file holds (`_write_checkpoint`), None when there is none."""
    if not path.exists():
        return None
    try:
        return parse_position(path.read_text())
    except (ValueError, TypeError) as exc:
        raise DataIntegrityError(f"checkpoint {path}: {exc} — it was not written by a CDC export; delete it "
                                 "and re-snapshot (cdc.initial: snapshot)") from None


class CdcStream:
    """One run of a `mode: cdc` export (module docstring)."""

    def __init__(self, config: RivetConfig, export: ExportConfig, options: RunOptions | None,
                 state: StateStore | None, notifications: Any) -> None:
        self.config, self.export, self.options = config, export, options or RunOptions()
        self.cdc = export.cdc or CdcConfig()
        self.tables = captured_tables(export)
        self._own_state = state is None
        self.state = state or StateStore.open(config.config_path)
        self.notifications = notifications
        self.runs: list[CdcTableRun] = []
        self._anchor: ChangePosition | None = None  # created in this run (`_snapshot`)
        try:
            for table in self.tables:  # every table's lock before anything is read
                self.runs.append(CdcTableRun(config, table_export(export, table), self._table_options(),
                                             state=self.state, notifications=notifications))
        except BaseException:
            self._close_runs()
            raise

    def _table_options(self) -> RunOptions:
        o = self.options
        return RunOptions(validate=o.validate, orchestrator_run_id=o.orchestrator_run_id,
                          orchestrator=o.orchestrator, progress=None,
                          defer_transient_notice=o.defer_transient_notice)

    # ------------------------------------------------------------------ phases
    def run(self) -> RunSummary:
        """The whole run; returns the first failed table's summary, else the first table's."""
        try:
            published = [published_position(self.state, r.export.name, r.dest) for r in self.runs]
            has_history = any(p is not None for p in published) or any(self._snapshot_done(r) for r in self.runs)
            reader = open_reader(self.config, self.export, self.cdc, self.tables, has_history)
        except Exception as exc:  # error boundary: every table's run fails with it
            return self._fail_all(exc)
        with reader:
            try:
                reader.preflight()
                if self.cdc.initial == "snapshot":
                    self._snapshot(reader)
                window = reader.open(self._resume_point(published))
                fault_point("cdc_after_open")
                staged = self._drain(reader, window, published)
                fault_point("cdc_after_read")
            except Exception as exc:  # error boundary: nothing published, nothing confirmed
                return self._fail_all(exc)
            summaries = [run.publish_changes(staged[i], published[i], window.bound)
                         for i, run in enumerate(self.runs)]
            if all(s.status == "success" for s in summaries):
                self._confirm(reader, summaries)
        self._close_runs()
        return next((s for s in summaries if s.status == "failed"), summaries[0])

    def _resume_point(self, published: list[ChangePosition | None]) -> ChangePosition | None:
        """Where the window starts: the earliest table's published position once every table
        has one. Before that, on PostgreSQL, None: the reader starts at its slot, which holds
        everything no table has published. A binlog has no server-side marker, so on MySQL the
        start is the earliest of the tables' published positions and the anchor — the one
        `_snapshot` created in this run, else one an earlier run wrote to the checkpoint file
        before its snapshot (whose drain then did not publish): a table added to `tables:`
        must not make an already-published table skip from its position to the new anchor.
        None (no position at all) is the first run: the reader starts at the log's end."""
        starts = [p for p in published if p is not None]
        if len(starts) == len(published):
            return min(starts)
        if not self._keeps_anchor_in_checkpoint:
            return None
        anchor = self._anchor
        if anchor is None and self.cdc.checkpoint:
            anchor = read_checkpoint(self.config.config_dir / self.cdc.checkpoint)
        candidates = [*starts, *([anchor] if anchor is not None else [])]
        return min(candidates) if candidates else None

    @property
    def _keeps_anchor_in_checkpoint(self) -> bool:
        """The binlog has no consumer marker (MySQLChangeReader.confirm): the anchor lives in
        `cdc.checkpoint`, which the config rules require for `initial: snapshot` on MySQL."""
        from rivet_core.source.dialect import dialect_of

        return dialect_of(self.config.source.type).change_log == "binlog"

    def _drain(self, reader: ChangeReader, window: ChangeWindow,
               published: list[ChangePosition | None]) -> list[Any]:
        """Read the window into per-table staged parts (stage.py)."""
        from rivet_core.pipeline.staging.extract import StagedExtract

        tables = reader.tables()
        stagers: dict[str, TableStager] = {}
        for table, run, after in zip(tables, self.runs, published, strict=True):
            stagers[table.name] = TableStager(run.staging_dir / "cdc", _output_schema(table),
                                              run.plan.writer_options, self.cdc.rollover, after)
            run.summary.source_engine = self.config.source.type
            for key in () if table.key_columns else ("no primary key",):
                run.summary.add_warning(f"table {table.name} has {key}: updates and deletes carry the whole "
                                        "old row (REPLICA IDENTITY FULL), not a key to merge on")
        try:
            stream_to_parts(reader.read(min(self.cdc.rollover, _READ_BATCH)), TableFanout(stagers),  # type: ignore[arg-type]
                            NULL_FEED, shape=lambda batch: batch,
                            after_batch=lambda _batch: fault_point("during_source_read"))
            out = []
            for table, run in zip(tables, self.runs, strict=True):
                stager = stagers[table.name]
                parts = stager.finish()
                run.summary.journal.record("CdcDrained", table=table.name, rows=stager.rows, ops=dict(stager.ops),
                                           first_pos=stager.first_pos, last_pos=stager.last_pos,
                                           start=window.start.to_json() if window.start else None,
                                           bound=window.bound.to_json())
                out.append(StagedExtract(parts=parts, schema=stager.schema, rows=stager.rows,
                                         staging_dir=stager.staging_dir))
            return out
        except BaseException:
            for stager in stagers.values():
                stager.abort()
            raise

    def _confirm(self, reader: ChangeReader, summaries: list[RunSummary]) -> None:
        """Every table published: let the server forget up to the earliest table's published
        position (re-read from the state store, so a cursor that failed to commit holds the
        slot back), then write the checkpoint file. A failure here is a warning: the data is
        published, and the next run re-reads and skips it."""
        fault_point("cdc_after_flush_before_ack")
        with best_effort("slot confirm", warn=summaries[0].add_warning,
                         message="the change log was not confirmed ({reason}); the next run re-reads and skips "
                                 "what this run published"):
            positions = [published_position(self.state, r.export.name, r.dest) for r in self.runs]
            if all(p is not None for p in positions):
                done = min(p for p in positions if p is not None)
                reader.confirm(done)
                fault_point("cdc_after_ack")
                if self.cdc.checkpoint:
                    _write_checkpoint(self.config.config_dir / self.cdc.checkpoint, done)

    def _snapshot_dest_has_success(self, run: CdcTableRun) -> bool:
        from rivet_core.destination import open_destination
        from rivet_core.unit.resolve import resolve_unit

        plan = resolve_unit(self.config, snapshot_export(run.export), stored_cursor=None)
        dest = open_destination(plan.dest_spec, self.config.config_dir)
        return dest.head("_SUCCESS") is not None

    def _snapshot_done(self, run: CdcTableRun) -> bool:
        return self.cdc.initial == "snapshot" and self._snapshot_dest_has_success(run)

    def _snapshot(self, reader: ChangeReader) -> None:
        """`initial: snapshot` for each table without one: the anchor first (so a change
        committed during the snapshot is in the stream too — an overlap, never a gap), then a
        full export of the table into `<prefix>/snapshot/` with its own manifest and `_SUCCESS`."""
        pending = [run for run in self.runs if not self._snapshot_done(run)
                   and published_position(self.state, run.export.name, run.dest) is None]
        if not pending:
            return
        anchor = self._anchor = reader.create_anchor()
        if self._keeps_anchor_in_checkpoint and self.cdc.checkpoint:  # before the snapshot: a crash keeps it
            _write_checkpoint(self.config.config_dir / self.cdc.checkpoint, anchor)
        for run in pending:
            summary = ExportRun(self.config, snapshot_export(run.export), self._table_options(), state=self.state,
                                notifications=self.notifications).run()
            if summary.status != "success":
                raise DataIntegrityError(
                    f"export '{run.export.name}': the initial snapshot into {SNAPSHOT_FOLDER}/ failed "
                    f"({summary.error_message}) — re-run: the anchor {anchor.to_json()} stays, so nothing is lost")
            run.summary.journal.record("CdcSnapshot", anchor=anchor.to_json(), rows=summary.total_rows,
                                       run_id=summary.run_id)

    # ------------------------------------------------------------------ endings
    def _fail_all(self, exc: BaseException) -> RunSummary:
        summaries = [run.fail(exc) for run in self.runs if not run.finalized]
        self._close_runs()
        return summaries[0]

    def _close_runs(self) -> None:
        for run in self.runs:
            run.close()
        if self._own_state:
            self.state.close()
            self._own_state = False


def _output_schema(table: ChangeTable) -> pa.Schema:
    """`__op`, `__pos`, `__seq`, then the table's typed columns (rivet_core/source/changes.py)."""
    return pa.schema([pa.field("__op", pa.string()), pa.field("__pos", pa.string()),
                      pa.field("__seq", pa.int64()), *table.schema])


def _write_checkpoint(path: Path, position: ChangePosition) -> None:
    """Rivet's checkpoint file: the position's JSON, replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(position.fields, sort_keys=True))
    os.replace(tmp, path)


def run_cdc(config: RivetConfig, export: ExportConfig, options: RunOptions | None = None, *,
            state: StateStore | None = None, notifications: Any = "config") -> RunSummary:
    """Run one `mode: cdc` export (module docstring). Run errors are in the summary."""
    notes = config.notifications if notifications == "config" else notifications
    return CdcStream(config, export, options, state, notes).run()
