"""The per-window commit of a chunked export — one implementation for every runner.

`export_window` streams one window's query into staged parts and writes them with
`commit.write_part_file` (worker-safe: touches no shared run state); it is
`write_window(stage_window(…))`, split so an orchestrator's window batch can stage in one step
body and write in the IO manager (ADR-0003). `commit_window`
then runs the ordered tail, under the run's lock when workers run in parallel:

    record_part per part (I2, M1, I7; fault points after_file_write / after_manifest_update)
    → fault `after_chunk_file:N` → complete_chunk_task (checkpoint; fatal on error)
    → fault `after_chunk_complete:N`

so the sequential runner, the parallel runner and a window batch (pipeline/chunked/tasks.py) all commit a
window the same way. Part names carry the run's stamp and a random nonce
(`data/{export}_{runstamp}_chunk{i}_{nonce}.{ext}`, `_p{n}` for rotated siblings; at the root,
with Rivet's timestamp, under `layout: rivet`), so a
re-exported window never overwrites a part and a resume can tell this run's objects
from other runs' (`is_own_part`, which also knows the root-level names a run written
before the `data/` layout left: docs/adr/0007-readable-layout-and-retention.md).
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.chunks.fingerprint import WindowFingerprint
from rivet_core.chunks.row_groups import window_writer_options
from rivet_core.chunks.sql import DENSE_RN_COLUMN, window_query
from rivet_core.destination import Destination
from rivet_core.format import PartRotator, StagedPart, file_extension
from rivet_core.format.base import WriterOptions
from rivet_core.format.meta_columns import add_meta_columns
from rivet_core.lazy_modules import pa, pc
from rivet_core.manifest import data_key, part_name
from rivet_core.pipeline.facade.commit import PartKind, PartRecord, record_part, write_part_file
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.resources.window_sessions import WindowSessions
from rivet_core.pipeline.staging.run_reconcile import ReconcileMismatch, count_in_snapshot
from rivet_core.pipeline.staging.stream import stream_to_parts
from rivet_core.reporting.progress import ProgressTracker, feed_for
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source.base import SourceSession
from rivet_core.source.query import dialect_for
from rivet_core.source.read_ahead import ReadAhead, batch_budget
from rivet_core.state import StateStore
from rivet_core.unit.resolve import ResolvedUnit

_ROTATED = re.compile(r"_p\d+(?=\.[A-Za-z0-9]+$)")


_RUN_ID_STAMP = re.compile(r"^(\d{8})T(\d{6})\.(\d{3})")


def run_stamp(run_id: str, export_name: str, layout: str = "data") -> str:
    """The run-unique token in part names: run_id minus the export prefix, filename-safe —
    `20261207T201048437`, or with `layout: rivet` Rivet's timestamp `20261207_201048_437`
    (the same instant, so both name one run)."""
    tail = run_id[len(export_name) + 1:] if run_id.startswith(export_name + "_") else run_id
    if layout == "rivet":
        return re.sub(r"[^A-Za-z0-9_]", "", _RUN_ID_STAMP.sub(r"\1_\2_\3", tail))
    return re.sub(r"[^A-Za-z0-9]", "", tail)


def part_prefix(export_name: str, run_id: str, layout: str = "data") -> str:
    """Every part of this chunked run starts with this (resume tells own objects apart)."""
    return f"{export_name}_{run_stamp(run_id, export_name, layout)}_chunk"


def part_prefixes(export_name: str, run_id: str) -> tuple[str, str]:
    """This run's part prefix in each layout: a resume or repair finds its own parts whichever
    layout the config names now."""
    return part_prefix(export_name, run_id), part_prefix(export_name, run_id, "rivet")


def is_own_part(key: str, export_name: str, run_id: str) -> bool:
    """Is `key` a part this chunked run wrote, in either layout (`data/<name>`, or `<name>` at
    the root for a checkpoint started before the `data/` layout)? Never true for
    `_quarantine/…` keys."""
    name = part_name(key)
    return name is not None and name.startswith(part_prefixes(export_name, run_id))


def attempt_key(file_name: str) -> str:
    """A part name without its rotation suffix: the identity of one window attempt."""
    return _ROTATED.sub("", file_name)


@dataclass
class WindowResult:
    chunk_index: int
    rows: int
    records: list[PartRecord] = field(default_factory=list)
    #: Highest key seen in the window (keyset plans; feeds keyset_incremental's cursor).
    max_key: object | None = None
    key_type: pa.DataType | None = None
    #: `--reconcile`: the window's source COUNT(*) in the window's own snapshot (None: not taken).
    source_count: int | None = None
    #: Values the type contract wrote as NULL, per column (batching.NullTally).
    mapped_to_null: dict[str, int] = field(default_factory=dict)

    @property
    def first_file(self) -> str | None:
        return self.records[0].path if self.records else None


@dataclass
class WindowContext:
    """What every window of one run shares (read-only across workers)."""

    plan: ResolvedUnit
    chunk_plan: ChunkLayout
    schema: pa.Schema
    dest: Destination
    staging_dir: Path
    run_id: str
    exported_at: object | None = None
    row_hash: bool | list[str] = False
    #: Progress reporting: each window is one feed of the run's tracker (None = off).
    progress: ProgressTracker | None = None
    #: Source reads allowed at once (the export's `parallel`), when more workers than that
    #: drain the windows: a window holds a slot only while its rows are read, so the next
    #: window's query starts while this one's last row groups are encoded and published
    #: (None: no gate — the caller bounds the reads itself).
    read_slots: threading.BoundedSemaphore | None = None
    #: `--reconcile`: count each window's query in the window's snapshot; a window whose rows
    #: differ fails before its parts are written (pipeline/staging/run_reconcile.py).
    reconcile: bool = False
    #: What the source holds in a window (chunks/fingerprint.py), asked on the window's read
    #: session in the window's own snapshot before its rows are read, so it describes exactly
    #: the rows exported (an orchestrator's window batches with a `change_column` record it:
    #: pipeline/chunked/tasks.py); None: not asked.
    fingerprint: Callable[[SourceSession, ChunkWindow], WindowFingerprint] | None = None
    #: Source sessions kept between windows, lent to one window's read at a time (each window
    #: still reads in its own snapshot: pipeline/resources/window_sessions.py).
    sessions: WindowSessions = field(init=False)

    #: The windows' part encoding: the plan's, with row groups sized for a window
    #: (chunks/row_groups.py).
    writer_options: WriterOptions = field(init=False)

    def __post_init__(self) -> None:
        self.sessions = WindowSessions(self.plan.source_url, self.plan.tuning)
        self.writer_options = window_writer_options(self.plan.writer_options, self.chunk_plan,
                                                    user_sized=self.plan.export.parquet is not None)

    def source(self) -> contextlib.AbstractContextManager[SourceSession]:
        """The source session one window reads through, its read started."""
        return self.sessions.session()

    def close_sessions(self) -> None:
        """Close the sessions kept between windows (call once the windows are drained)."""
        self.sessions.close()

    def read_slot(self) -> contextlib.AbstractContextManager[object]:
        return self.read_slots if self.read_slots is not None else contextlib.nullcontext()

    @property
    def strip(self) -> tuple[str, ...]:
        return (DENSE_RN_COLUMN,) if self.chunk_plan.strategy == "dense" else ()


@dataclass
class StagedWindow:
    """One window streamed to finished staged parts (I1), not yet at the destination."""

    chunk_index: int
    stem: str
    parts: list[StagedPart]
    max_key: object | None = None
    key_type: pa.DataType | None = None
    source_count: int | None = None
    #: The window's source fingerprint in its read snapshot (`WindowContext.fingerprint`).
    fingerprint: WindowFingerprint | None = None
    mapped_to_null: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)


@dataclass
class _ReadFacts:
    """What a window's read learned in its snapshot besides the rows (set on the reader thread,
    read by the window's thread once the read has ended)."""

    source_count: int | None = None
    fingerprint: WindowFingerprint | None = None
    mapped_to_null: dict[str, int] = field(default_factory=dict)


def _read_window(ctx: WindowContext, window: ChunkWindow, sql: str, params: list[object],
                 facts: _ReadFacts) -> Iterator[pa.RecordBatch]:
    """One window's read, run on the window's reader thread: a read slot and a session for
    exactly as long as the source sends rows; in the same snapshot, the window's fingerprint
    before the rows (when asked) and, with `--reconcile`, its COUNT(*) after them."""
    plan = ctx.plan
    with ctx.read_slot(), ctx.source() as src:
        if ctx.fingerprint is not None:
            facts.fingerprint = ctx.fingerprint(src, window)
        source_schema = src.describe(sql, params, plan.overrides, plan.table_hint)
        from rivet_core.source import batch_rows

        yield from src.stream(sql, params, source_schema, batch_rows(source_schema, plan.tuning))
        # The session may serve the next window too (pipeline/resources/window_sessions.py): take this read's tally.
        facts.mapped_to_null, src.mapped_to_null = dict(src.mapped_to_null), {}
        if ctx.reconcile:
            facts.source_count = count_in_snapshot(src, sql, params)


def stage_window(ctx: WindowContext, window: ChunkWindow) -> StagedWindow:
    """Stream one window's query into finished staged parts (no destination write).

    The read runs on a thread of its own (`_read_window` through a `ReadAhead` within the
    process's read-ahead budget), so the window's read slot and source session are given
    back as soon as the source has sent the last row — not once this thread has encoded
    them: the next window's query then starts while this window's last row groups are
    encoded; the encoder does not idle at a window start waiting for the next window's first
    row group (docs/benchmarks.md "Figures once carried by the pipeline's docstrings").
    """
    plan = ctx.plan
    sql, params = window_query(dialect_for(plan.engine), plan.base_query, ctx.chunk_plan, window)
    nonce = secrets.token_hex(8)
    stem = f"{part_prefix(plan.export.name, ctx.run_id, plan.export.layout)}{window.index}_{nonce}"
    staging = ctx.staging_dir / stem
    staging.mkdir(parents=True, exist_ok=True)
    rotator = PartRotator(staging, stem, ctx.schema, ctx.writer_options, plan.max_file_size)
    feed = feed_for(ctx.progress)
    facts = _ReadFacts()
    max_key = None
    track = ctx.chunk_plan.strategy == "keyset" and plan.export.keyset_incremental

    def shape(batch: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal max_key
        if track and batch.num_rows:
            keys = batch.column(ctx.chunk_plan.column)
            if isinstance(keys.type, pa.BaseExtensionType):  # uuid: no min_max kernel;
                keys = keys.storage  # its 16 bytes order as the databases order uuids
            value = pc.max(keys).as_py()
            if value is not None and (max_key is None or value > max_key):
                max_key = value
        if ctx.strip:
            batch = batch.select([i for i, f in enumerate(batch.schema) if f.name not in ctx.strip])
        return add_meta_columns(batch, exported_at=ctx.exported_at, row_hash=ctx.row_hash)

    try:
        with ReadAhead(_read_window(ctx, window, sql, list(params), facts), **batch_budget(),
                       name=f"rivet-window-{window.index}-read") as batches:
            stream_to_parts(batches, rotator, feed, shape=shape)
        source_count = facts.source_count
        staged = rotator.finish()  # I1
        if source_count is not None and source_count != sum(p.rows for p in staged):
            raise ReconcileMismatch(
                f"export '{plan.export.name}': reconcile mismatch in window {window.index} — the source holds "
                f"{source_count} row(s) for it in the window's snapshot, {sum(p.rows for p in staged)} were read; "
                "the window was not published")
    except BaseException:
        rotator.abort()
        feed.abandon()
        raise
    feed.done(sum(p.rows for p in staged), sum(p.size_bytes for p in staged))
    return StagedWindow(chunk_index=window.index, stem=stem, parts=list(staged), max_key=max_key,
                        key_type=ctx.schema.field(ctx.chunk_plan.column).type if max_key is not None else None,
                        source_count=source_count, fingerprint=facts.fingerprint,
                        mapped_to_null=facts.mapped_to_null)


def write_window(ctx: WindowContext, staged: StagedWindow) -> WindowResult:
    """Write a staged window's parts durably (`write_part_file`; never overwrites: the stem
    carries a nonce)."""
    ext = file_extension(ctx.plan.export.format)
    result = WindowResult(chunk_index=staged.chunk_index, rows=staged.rows, max_key=staged.max_key,
                          key_type=staged.key_type, source_count=staged.source_count,
                          mapped_to_null=staged.mapped_to_null)
    for n, part in enumerate(staged.parts):
        name = f"{staged.stem}.{ext}" if len(staged.parts) == 1 else f"{staged.stem}_p{n}.{ext}"
        key = data_key(name, ctx.plan.export.layout)
        result.records.append(write_part_file(ctx.dest, part, key))
    return result


def export_window(ctx: WindowContext, window: ChunkWindow) -> WindowResult:
    """Stream one window to staged parts and write them durably (I1 then dest.write)."""
    return write_window(ctx, stage_window(ctx, window))


def commit_window(summary: RunSummary, state: StateStore, result: WindowResult, *,
                  checkpoint_run_id: str | None, lock: threading.Lock | None = None,
                  worker: str | None = None) -> None:
    """The ordered tail of one window (module docstring). Checkpoint errors are fatal."""
    with lock or _NO_LOCK:
        if result.source_count is not None:  # --reconcile: the run's sum, over the windows it counted
            summary.source_row_count = (summary.source_row_count or 0) + result.source_count
            summary.reconcile_counted_rows += result.rows
        summary.warn_mapped_to_null(result.mapped_to_null, where=f" (window {result.chunk_index})")
        if not result.records:
            summary.journal.record("ChunkCompleted", chunk_index=result.chunk_index, rows=0, file_name=None)
        for record in result.records:
            record_part(summary, state, record, PartKind.chunk(result.chunk_index))
        fault_point(f"after_chunk_file:{result.chunk_index}")
        if checkpoint_run_id is not None:
            state.complete_chunk_task(checkpoint_run_id, result.chunk_index, result.rows, result.first_file,
                                      worker=worker)
        fault_point(f"after_chunk_complete:{result.chunk_index}")


class _NullLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NullLock()
