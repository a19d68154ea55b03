"""Size-based part rotation (`max_file_size`; docs/rivet-compat.md "File names and run ids").

`PartRotator` writes batches into staged part files in a staging directory. With
`max_file_size` the part's writer gets it as its `size_budget`, and before each write the
rotator asks the writer how many rows still fit (`rows_that_fit`: measured bytes per row on
disk, the buffered rows and — Parquet — the footer counted); a batch is split at that row,
the full part is finished and the rest goes to the next part. The Parquet writer sizes its
row groups down to the budget (format/parquet.py), so a part never waits for a 128 MB row
group to learn it is full. A part can exceed the limit only by the estimation error of its
last rows (the stated tolerance: docs/operations.md "Part sizes"); a part always holds at
least one row.

Naming: while writing, parts are dot-prefixed `.{stem}_part{N}.{ext}.partial` so an
interrupted run never leaves a file that looks complete. `finish()` finalises the open writer
(I1) and renames the parts to `{stem}.{ext}` when there is exactly one, or
`{stem}_part{N}.{ext}` (N from 0, unpadded) when there are several. A result with 0 rows
produces no file at all (docs/rivet-compat.md "File names and run ids").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rivet_core.destination.checksums import Fingerprint
from rivet_core.errors import ConfigError, RivetError
from rivet_core.format.base import FormatWriter, PartUpload, WriterOptions, file_extension
from rivet_core.format.factory import open_writer
from rivet_core.lazy_modules import pa


@dataclass(frozen=True)
class StagedPart:
    """A finalised part file in the staging directory, ready to upload.

    `fingerprint` is what the writer measured while writing (None for parts staged by
    other means): the destination trusts it when it can publish the file without reading
    it, and checks against it when it reads the file anyway.
    """

    path: Path
    rows: int
    size_bytes: int
    fingerprint: Fingerprint | None = None
    #: The part's Form B column checksums (name → `ColumnSum`, computed while encoding;
    #: None for CSV or parts staged by other means: the commit then reads them back).
    column_sums: Mapping[str, Any] | None = None


#: The stated tolerance (docs/operations.md "Part sizes"): a finished part is at most this
#: fraction over `max_file_size`, unless it holds a single row that alone is larger.
#: Measured at 256 KiB .. 8 MiB limits: Parquet ≤ +1.0 %, CSV ≤ +1.8 %.
SIZE_TOLERANCE = 0.05


class PartRotator:
    """Writes batches into staged part files in `staging_dir`, rotating to a new part when the
    current part's bytes_written reaches max_file_size (None = never). Empty result (0 rows)
    → no file at all."""

    def __init__(
        self,
        staging_dir: Path,
        stem: str,
        schema: pa.Schema,
        options: WriterOptions,
        max_file_size: int | None,
        early_upload: Callable[[str, Path], PartUpload | None] | None = None,
    ) -> None:
        if max_file_size is not None and max_file_size <= 0:
            raise ConfigError(f"max_file_size must be > 0 bytes, got {max_file_size}")
        self.staging_dir = Path(staging_dir)
        self.stem = stem
        self.schema = schema
        self.options = options
        self.max_file_size = max_file_size
        self.ext = file_extension(options.format)
        self.rows_written = 0
        self._writer: FormatWriter | None = None
        self._done: list[StagedPart] = []  # finalised parts, staged names
        self._finished = False
        self._aborted = False
        #: `early_upload(final_name, staged_path)` starts uploading a part while it is written
        #: (`Destination.begin_early_upload`); see `_open`.
        self.early_upload = early_upload
        self._uploads: list[PartUpload] = []  # started for finished parts (aborted by abort())

    def _staged_path(self, index: int) -> Path:
        return self.staging_dir / f".{self.stem}_part{index}.{self.ext}.partial"

    @property
    def bytes_written(self) -> int:
        """Bytes flushed to staged parts so far (finished parts + the open one): progress
        reporting reads it once per batch, so it must stay O(parts), never stat a file."""
        return sum(p.size_bytes for p in self._done) + (self._writer.bytes_written if self._writer else 0)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append `batch` to the current part, opening one lazily; rotate if the part is full.

        Parts are opened lazily so neither a 0-row result nor a rotation right after the
        last batch leaves an empty file behind.
        """
        if self._finished or self._aborted:
            raise RivetError(f"part rotator for '{self.stem}' is already finished or aborted")
        if batch.num_rows == 0:
            return
        if self.max_file_size is None:
            if self._writer is None:
                self._writer = self._open()
            self._writer.write_batch(batch)
            self.rows_written += batch.num_rows
            return
        arrow_row_bytes = batch.nbytes / batch.num_rows
        offset = 0
        while offset < batch.num_rows:
            if self._writer is None:
                self._writer = self._open()
                self._writer.size_budget = self.max_file_size
            fit = self._writer.rows_that_fit(arrow_row_bytes)
            if fit == 0 and self._writer.rows_written:
                self._close_current()
                continue
            take = min(batch.num_rows - offset, max(fit, 1), self._writer.step_rows())
            self._writer.write_batch(batch.slice(offset, take) if take < batch.num_rows else batch)
            offset += take
            self.rows_written += take
            if self._writer.rows_that_fit(arrow_row_bytes) == 0:
                self._close_current()

    def _open(self) -> FormatWriter:
        """A writer for the next part, with its early upload when the part's final name is
        already certain: without `max_file_size` there is one part (`{stem}.{ext}`); with it,
        part N ≥ 1 is `{stem}_part{N}` — and opening part 1 settles part 0's name, so part 0
        (finished) starts uploading now, while part 1 is encoded."""
        index = len(self._done)
        writer = open_writer(self._staged_path(index), self.schema, self.options)
        if self.early_upload is None:
            return writer
        try:
            if self.max_file_size is None:
                writer.upload = self.early_upload(f"{self.stem}.{self.ext}", writer.path)
            elif index >= 1:
                writer.upload = self.early_upload(f"{self.stem}_part{index}.{self.ext}", writer.path)
                if index == 1:
                    first = self._done[0]
                    upload = self.early_upload(f"{self.stem}_part0.{self.ext}", first.path)
                    if upload is not None:
                        self._uploads.append(upload)
                        upload.seal(first.size_bytes)
        except BaseException:
            writer.abort()
            raise
        if writer.upload is not None:
            self._uploads.append(writer.upload)
        return writer

    def _close_current(self) -> None:
        """I1: finalise the open part and remember it."""
        writer = self._writer
        assert writer is not None
        writer.finish()
        self._writer = None
        self._done.append(StagedPart(path=writer.path, rows=writer.rows_written,
                                     size_bytes=writer.path.stat().st_size, fingerprint=writer.fingerprint,
                                     column_sums=getattr(writer, "column_sums", None)))

    def finish(self) -> list[StagedPart]:
        """Finalise the open part (I1) and give the parts their final names."""
        if self._aborted:
            raise RivetError(f"part rotator for '{self.stem}' was aborted")
        if self._finished:
            return list(self._done)
        if self._writer is not None:
            self._close_current()
        if len(self._done) == 1:
            names = [f"{self.stem}.{self.ext}"]
        else:
            names = [f"{self.stem}_part{i}.{self.ext}" for i in range(len(self._done))]
        renamed: list[StagedPart] = []
        for part, name in zip(self._done, names, strict=True):
            final = self.staging_dir / name
            os.replace(part.path, final)
            renamed.append(dataclasses.replace(part, path=final))
            self._done[len(renamed) - 1] = renamed[-1]
        self._fsync_dir()
        self._finished = True
        return list(self._done)

    def _fsync_dir(self) -> None:
        """Make the renames durable (best effort: some filesystems refuse directory fsync)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.staging_dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def abort(self) -> None:
        """Remove every staged file (open, finalised or renamed); safe to call repeatedly."""
        self._aborted = True
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        for upload in self._uploads:
            upload.abort()
        self._uploads = []
        for part in self._done:
            with contextlib.suppress(FileNotFoundError):
                part.path.unlink()
        self._done = []
