"""The per-part commit facade (docs/adr/0001-write-ordering-facades.md): `write_part_file` then `record_part`.

These two functions are the ONLY place a part becomes durable and recorded. Every runner
and an orchestrator's publish step call them; none re-implements their steps.

- `write_part_file` (worker-safe, touches no shared run state): takes a *finished* staged
  part (I1 — `PartRotator.finish()` has written the footer), writes it to the destination
  (fatal on error; transit MD5 mismatch is fatal) and returns its identity
  (path, size, xxh3 fingerprint, MD5) — M3.
- `record_part` (parent-only, never raises for state errors), fixed order:
  1. fault point `after_file_write` (part durable, not recorded);
  2. upsert into `summary.manifest_parts` by path (M1; a re-recorded path is deduped and
     counters are not bumped);
  3. counters (files_produced, files_committed, bytes_written, total_rows);
  4. journal event (FileWritten / ChunkCompleted);
  5. `state.record_durable_part` — warn-on-fail (I2, I7);
  6. fault point `after_manifest_update`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from rivet_core.destination import Destination
from rivet_core.errors import best_effort
from rivet_core.format import StagedPart
from rivet_core.manifest import ManifestPart
from rivet_core.manifest.column_checksums import ColumnSum, parquet_sums
from rivet_core.manifest.model import ColumnChecksum
from rivet_core.pipeline.faults import fault_point
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore

log = logging.getLogger("rivet.commit")


@dataclass(frozen=True)
class PartRecord:
    """A part that is durable at the destination (returned by write_part_file)."""

    path: str
    rows: int
    size_bytes: int
    content_fingerprint: str
    content_md5: str
    #: Form B per-column checksums of the part (Parquet; None for CSV / unknown).
    column_checksums: tuple[ColumnChecksum, ...] | None = None


@dataclass(frozen=True)
class PartKind:
    """What the part is, for the journal: a single-run file, a chunk, or a keyset page."""

    kind: str  # "file" | "chunk" | "page"
    index: int

    @classmethod
    def file(cls, part_index: int) -> PartKind:
        return cls("file", part_index)

    @classmethod
    def chunk(cls, chunk_index: int) -> PartKind:
        return cls("chunk", chunk_index)


def write_part_file(dest: Destination, staged: StagedPart, key: str) -> PartRecord:
    """I1 is already kept (the staged part is finished); write it durably. Raises on error."""
    result = dest.write_file(staged.path, key, staged.fingerprint)
    if result.size != staged.size_bytes:
        raise RuntimeError(
            f"part '{key}': destination reports {result.size} bytes but {staged.size_bytes} were staged"
        )
    checks = (checksums_tuple(dict(staged.column_sums))
              if staged.column_sums is not None and key.endswith(".parquet")
              else part_column_checksums(key, staged.path))
    return PartRecord(path=key, rows=staged.rows, size_bytes=result.size,
                      content_fingerprint=result.xxh3, content_md5=result.md5_b64,
                      column_checksums=checks)


def part_column_checksums(key: str, source: object, key_column: str | None = None
                          ) -> tuple[ColumnChecksum, ...] | None:
    """Form B checksums of a Parquet part (docs/manifest.md), read back from the written file
    (a path or the part's bytes) with the same reader `rivet validate --depth full` uses; None
    for other formats. A part the Parquet writer staged carries them already
    (`StagedPart.column_sums`, summed while encoding); this read-back serves parts staged
    otherwise and a resume's parts already at the destination; `key_column` is the export's
    checksum key (column_checksums.checksum_key_column), as the writer used it."""
    if not key.endswith(".parquet"):
        return None
    return checksums_tuple(parquet_sums(source, key_column=key_column))


def checksums_tuple(sums: dict[str, ColumnSum]) -> tuple[ColumnChecksum, ...]:
    return tuple(ColumnChecksum(name=n, checksum=str(s.checksum), nulls=s.nulls) for n, s in sums.items())


def record_part(
    summary: RunSummary, state: StateStore | None, part: PartRecord, kind: PartKind,
    *, cursor_high: str | None = None,
) -> bool:
    """Record a durable part in the run (see module docstring). Returns True if deduped."""
    fault_point("after_file_write")
    index = next((i for i, p in enumerate(summary.manifest_parts) if p.path == part.path), None)
    deduped = index is not None
    if index is not None:  # ManifestPart is frozen: replace the entry, keep its part_id
        summary.manifest_parts[index] = dataclasses.replace(
            summary.manifest_parts[index], rows=part.rows, size_bytes=part.size_bytes,
            content_fingerprint=part.content_fingerprint, content_md5=part.content_md5,
            column_checksums=part.column_checksums)
    else:
        next_id = max((p.part_id for p in summary.manifest_parts), default=0) + 1
        summary.manifest_parts.append(ManifestPart(
            part_id=next_id, path=part.path, rows=part.rows, size_bytes=part.size_bytes,
            content_fingerprint=part.content_fingerprint, content_md5=part.content_md5,
            status="committed", column_checksums=part.column_checksums))
        summary.files_produced += 1
        summary.files_committed += 1
        summary.bytes_written += part.size_bytes
        summary.total_rows += part.rows
    if kind.kind == "file":
        summary.journal.record("FileWritten", file_name=part.path, rows=part.rows,
                               bytes=part.size_bytes, part_index=kind.index)
    else:
        summary.journal.record("ChunkCompleted", chunk_index=kind.index, rows=part.rows,
                               file_name=part.path)
    if state is not None:
        # I7: the part is durable; the file log is advisory.
        with best_effort("file_log write", warn=summary.add_warning,
                         message=f"file_log write failed for '{part.path}' (part is durable): {{reason}}"):
            state.record_durable_part(
                run_id=summary.run_id, export_name=summary.export_name, file_name=part.path,
                rows=part.rows, size_bytes=part.size_bytes, format=summary.format,
                compression=summary.compression, mode=summary.mode, cursor_high=cursor_high)
    fault_point("after_manifest_update")
    return deduped


def rehydrate_part(summary: RunSummary, part: PartRecord) -> None:
    """Put a part committed by an EARLIER attempt of this run back into the manifest parts.

    Used only by a chunked resume (and the chunk-task finalize, pipeline/chunked/tasks.py): the part is
    already durable and in file_log, so this appends it and bumps the counters without
    the fault points, the journal's FileWritten or a second file_log row.
    """
    if any(p.path == part.path for p in summary.manifest_parts):
        return
    next_id = max((p.part_id for p in summary.manifest_parts), default=0) + 1
    summary.manifest_parts.append(ManifestPart(
        part_id=next_id, path=part.path, rows=part.rows, size_bytes=part.size_bytes,
        content_fingerprint=part.content_fingerprint, content_md5=part.content_md5, status="committed",
        column_checksums=part.column_checksums))
    summary.files_produced += 1
    summary.files_committed += 1
    summary.bytes_written += part.size_bytes
    summary.total_rows += part.rows
