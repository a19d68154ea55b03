"""The writer contract shared by every output format, and the options a writer is built from.

Owns `WriterOptions` (the batch-relevant format knobs of docs/config-reference.md `exports[]`, already parsed by the
config package), `file_extension`, the `FormatWriter` base class and the Parquet row-group
sizing rule.

Contract I1 (finalize before write, docs/invariants.md): a writer's `finish()` IS the finalize step —
after it returns the file on disk is complete (Parquet footer written, CSV fully flushed) and
fsynced, so the caller may hand it to the destination. `abort()` closes and deletes a partial
file so nothing incomplete can ever be uploaded.

Every writer also fingerprints its file while writing it (`AppendHasher`: size, xxh3, MD5
on a background thread, fed as bytes are flushed), so `finish()` leaves
`writer.fingerprint` set and publishing needs no second read of the file. Files are always
created fresh (a new inode, mode 0644): a staged part may be hard-linked into a local
destination, so no writer may ever truncate and rewrite an existing file in place.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from rivet_core.destination.checksums import AppendHasher, Fingerprint
from rivet_core.errors import ConfigError, RivetError
from rivet_core.lazy_modules import pa

FORMATS: tuple[str, ...] = ("parquet", "csv")
COMPRESSIONS: tuple[str, ...] = ("zstd", "snappy", "gzip", "lz4", "none")
ROW_GROUP_STRATEGIES: tuple[str, ...] = ("auto", "fixed_rows", "fixed_memory")

#: Default levels when `compression_level` is not given (docs/rivet-compat.md "Parquet").
DEFAULT_LEVELS: dict[str, int] = {"zstd": 3, "gzip": 6}
#: Inclusive level ranges for codecs that accept a level.
LEVEL_RANGES: dict[str, tuple[int, int]] = {"zstd": (1, 22), "gzip": (0, 9)}

#: Row-group clamp for the memory-derived strategies (docs/rivet-compat.md "Parquet").
MIN_ROW_GROUP_ROWS = 1_000
MAX_ROW_GROUP_ROWS = 10_000_000
#: Rows per group when `fixed_rows` names no count (the Parquet library default).
DEFAULT_ROW_GROUP_ROWS = 1_048_576
#: The Parquet writer's memory budget under the `auto` strategy: Arrow bytes it may keep
#: buffered between batches (row groups are cut so the buffer never holds more). Why 16 MiB:
#: the buffered row group was the largest single item of an export's memory (a 128 MB
#: *estimate* held 35 MiB of real Arrow data for the bench `orders` table, plus the encoder's
#: copy of it); 16 MiB groups (~70 k wide rows, ~4 MB of zstd output each) encode as fast per
#: row (docs/benchmarks.md, "Memory").
DEFAULT_BUFFER_BUDGET_BYTES = 16 * 2**20


@dataclass(frozen=True)
class WriterOptions:
    """How a part file is encoded. Validated again here (the config layer already did) so a
    programming error cannot produce a silently mis-encoded file.

    For `format="csv"` the compression is normalised to `"none"` (CSV has no compressor —
    the config layer rejects an explicit codec), so `options.compression` is always the
    effective codec and can be recorded verbatim in the manifest.
    """

    format: str
    compression: str = "zstd"
    compression_level: int | None = None
    row_group_strategy: str = "auto"
    row_group_rows: int | None = None
    target_row_group_mb: int = 128
    max_row_group_mb: int | None = None
    #: Rows per group never exceed this. An export without a `parquet:` block gets Rivet's
    #: library default (1,048,576 rows, docs/rivet-compat.md "Parquet") as the cap, still bounded by the
    #: 128 MB estimate: narrow rows get Rivet's groups instead of 4 M-row ones (~120 MB of
    #: Arrow buffered before encode), wide rows keep groups that fit the memory target.
    row_group_row_cap: int | None = None
    #: Arrow bytes a Parquet writer keeps buffered at most (`auto` strategy only: the other
    #: strategies are the user's explicit choice of group size). None = no budget.
    buffer_budget_bytes: int | None = DEFAULT_BUFFER_BUDGET_BYTES
    #: The column the Form B checksums are keyed by (manifest `checksum_key_column`,
    #: rivet_core/manifest/column_checksums.py); None: un-keyed.
    checksum_key_column: str | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format '{self.format}': expected one of {', '.join(FORMATS)}")
        if self.format == "csv":
            object.__setattr__(self, "compression", "none")
            object.__setattr__(self, "compression_level", None)
            return
        if self.compression not in COMPRESSIONS:
            raise ConfigError(
                f"unknown compression '{self.compression}': expected one of {', '.join(COMPRESSIONS)}"
            )
        if self.compression_level is not None:
            bounds = LEVEL_RANGES.get(self.compression)
            if bounds is None:
                raise ConfigError(
                    f"compression_level is not supported for compression '{self.compression}' "
                    "(only zstd 1..22 and gzip 0..9 take a level)"
                )
            lo, hi = bounds
            if not lo <= self.compression_level <= hi:
                raise ConfigError(
                    f"compression_level {self.compression_level} is out of range for "
                    f"{self.compression} ({lo}..{hi})"
                )
        if self.row_group_strategy not in ROW_GROUP_STRATEGIES:
            raise ConfigError(
                f"unknown parquet.row_group_strategy '{self.row_group_strategy}': expected one of "
                f"{', '.join(ROW_GROUP_STRATEGIES)}"
            )
        if self.target_row_group_mb <= 0:
            raise ConfigError("parquet.target_row_group_mb must be > 0")
        if self.max_row_group_mb is not None and self.max_row_group_mb <= 0:
            raise ConfigError("parquet.max_row_group_mb must be > 0")
        if self.row_group_row_cap is not None and self.row_group_row_cap <= 0:
            raise ConfigError("the row-group row cap must be > 0")

    @property
    def effective_compression_level(self) -> int | None:
        """The level actually used: explicit, else the codec default (zstd 3, gzip 6)."""
        if self.compression_level is not None:
            return self.compression_level
        return DEFAULT_LEVELS.get(self.compression)


def file_extension(fmt: str) -> str:
    """`parquet` → `parquet`, `csv` → `csv` (docs/rivet-compat.md "File names and run ids"); anything else is a config error."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format '{fmt}': expected one of {', '.join(FORMATS)}")
    return fmt


def estimate_row_bytes(schema: pa.Schema) -> int:
    """Row-width estimate of docs/rivet-compat.md "Tuning and batch sizing": a rough per-type byte count plus 1 per column.

    Deliberately the same table the fetch-size derivation uses, so row groups and fetch
    windows scale the same way for a given schema.
    """
    total = 0
    for field in schema:
        total += _type_width(field.type) + 1
    return max(total, 1)


def _type_width(t: pa.DataType) -> int:
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_boolean(t) or t in (pa.int8(), pa.uint8()):
        return 1
    if t in (pa.int16(), pa.uint16()):
        return 2
    if t in (pa.int32(), pa.uint32(), pa.float32()) or pa.types.is_date32(t):
        return 4
    if (
        t in (pa.int64(), pa.uint64(), pa.float64())
        or pa.types.is_timestamp(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
        or pa.types.is_date64(t)
    ):
        return 8
    if pa.types.is_decimal(t):
        return 16
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return 256
    return 64


def row_group_rows(schema: pa.Schema, options: WriterOptions) -> int:
    """Rows per Parquet row group (docs/rivet-compat.md "Parquet").

    `fixed_rows` → `row_group_rows` (0 clamped to 1; unset → 1,048,576). `auto`/`fixed_memory` →
    target_mb·2^20 / est_row_bytes clamped to [1,000, 10,000,000], then capped by
    `max_row_group_mb` (never below 1,000 rows) and by `row_group_row_cap` (no `parquet:`
    block: 1,048,576).
    """
    if options.row_group_strategy == "fixed_rows":
        if options.row_group_rows is None:
            return DEFAULT_ROW_GROUP_ROWS
        return max(1, options.row_group_rows)
    est = estimate_row_bytes(schema)
    rows = options.target_row_group_mb * 2**20 // est
    rows = min(max(rows, MIN_ROW_GROUP_ROWS), MAX_ROW_GROUP_ROWS)
    if options.max_row_group_mb is not None:
        cap = max(options.max_row_group_mb * 2**20 // est, MIN_ROW_GROUP_ROWS)
        rows = min(rows, cap)
    if options.row_group_row_cap is not None:
        rows = min(rows, options.row_group_row_cap)
    return int(rows)


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Re-label `batch` with the writer's schema (field metadata included).

    Sources may hand batches whose schema lacks the `rivet.*` field metadata; the column
    types must match exactly, otherwise the writer would produce a file whose columns
    disagree with its own schema.
    """
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    if batch.num_columns != len(schema) or any(
        col.type != field.type for col, field in zip(batch.columns, schema, strict=True)
    ):
        raise RivetError(
            f"batch schema does not match the writer schema: got {batch.schema.to_string(show_schema_metadata=False)!r}, "
            f"expected {schema.to_string(show_schema_metadata=False)!r}",
            code="RIVET_WRITER_SCHEMA_MISMATCH",
        )
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


class PartUpload(Protocol):
    """What a writer tells an early upload of its file (rivet_core/destination/s3_multipart.py)."""

    def advance(self, flushed: int) -> None: ...
    def seal(self, size: int) -> None: ...
    def abort(self) -> None: ...


class FormatWriter(ABC):
    """One output file being written. Not thread-safe; one writer per part.

    Subclasses own the on-disk file handle; `finish()` and `abort()` are terminal and
    idempotent-safe (a second call is a no-op), so error paths can call `abort()`
    unconditionally.
    """

    path: Path
    rows_written: int
    #: Bytes before the first row (a CSV header): not part of the per-row size estimate.
    header_bytes: int = 0
    #: Text formats can be several times their Arrow size (a timestamp: 8 bytes → 27
    #: characters), so before a writer has measured its own rows it assumes this factor.
    UNMEASURED_ROW_FACTOR: float = 4.0

    def __init__(self, path: Path, schema: pa.Schema, options: WriterOptions) -> None:
        self.path = Path(path)
        self.schema = schema
        self.options = options
        self.rows_written = 0
        #: The part's size limit (`max_file_size`; set by PartRotator, None = unbounded):
        #: the rotator asks `rows_that_fit` before each write and closes the part at 0.
        self.size_budget: int | None = None
        self.fingerprint: Fingerprint | None = None  # set by finish()
        self._closed = False
        self._file: BinaryIO | None = None
        self._hasher: AppendHasher | None = None
        #: An early upload of this file (`Destination.begin_early_upload`), told the same
        #: final byte counts as the hasher, sealed by `finish()`, aborted by `abort()`.
        self.upload: PartUpload | None = None

    def _create_file(self) -> BinaryIO:
        """Create `path` as a NEW file (never reuse an existing inode, see module doc) and
        start fingerprinting it."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        handle = os.fdopen(fd, "wb")
        try:
            self._hasher = AppendHasher(self.path)
        except BaseException:
            handle.close()
            raise
        return handle

    def _flushed(self, size: int) -> None:
        """The first `size` bytes are on disk and final: let the hasher (and an early
        upload) catch up."""
        if self._hasher is not None:
            self._hasher.advance(size)
        if self.upload is not None:
            self.upload.advance(size)

    @abstractmethod
    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one batch (its schema must match the writer's)."""

    @property
    @abstractmethod
    def bytes_written(self) -> int:
        """Bytes flushed to the file so far — what part rotation compares to max_file_size."""

    @abstractmethod
    def finish(self) -> None:
        """I1: write the footer / final flush and fsync; afterwards the file is complete."""

    def rows_that_fit(self, arrow_row_bytes: float) -> int:
        """How many more rows this part can take and stay within `size_budget` (0 = full;
        unbounded without a budget). `arrow_row_bytes` is the in-memory size per row of the
        incoming batch, the only estimate before the writer has measured its own output.
        This default suits writers that write through (CSV): bytes on disk per row so far."""
        if self.size_budget is None:
            return 2**62
        if self.rows_written:
            per_row = max((self.bytes_written - self.header_bytes) / self.rows_written, 1e-3)
        else:
            per_row = max(arrow_row_bytes * self.UNMEASURED_ROW_FACTOR, 1.0)
        return max(0, int((self.size_budget - self.bytes_written) // per_row))

    def step_rows(self) -> int:
        """The most rows the rotator should hand over before asking `rows_that_fit` again
        (a buffering writer refines its estimate only when it flushes)."""
        return 2**62

    def abort(self) -> None:
        """Close the file without finalising it and delete it; safe to call at any time."""
        if self._closed:
            return
        self._closed = True
        self._abort_encoder()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        if self._hasher is not None:
            self._hasher.abort()
        if self.upload is not None:
            self.upload.abort()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _abort_encoder(self) -> None:  # noqa: B027 - optional hook, default: nothing to release
        """Release format-specific encoder state before the file is closed (hook)."""

    def _check_open(self) -> None:
        if self._closed:
            raise RivetError(f"writer for '{self.path}' is already finished or aborted")

    def _sync_and_close(self) -> int:
        """Flush Python's buffer, fsync so the bytes survive a crash, close, finish the
        fingerprint; return the size."""
        assert self._file is not None and self._hasher is not None
        self._file.flush()
        size = self._file.tell()
        self._hasher.advance(size)  # hash the tail while fsync waits for the disk
        if self.upload is not None:
            self.upload.seal(size)  # and send it
        os.fsync(self._file.fileno())
        self._file.close()
        self.fingerprint = self._hasher.finish(size)
        return size
