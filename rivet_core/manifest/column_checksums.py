"""Order-independent per-column checksums of a part's data ("Form B", docs/manifest.md).

New manifests record Rivet's own algorithm, `xxh3-64-sum-v2` (rivet_core/manifest/xxh3_sum.py:
per column the wrapping sum of `xxh3_64(key ‖ value)` over the non-null cells), so Rivet's
`validate` re-derives our numbers and ours re-derives Rivet's. `checksum_key_column`
(`checksum_key_column()` below) is the export's cursor / keyset key, as Rivet chooses it.
Two older renders stay readable, so every manifest already published still verifies:
Rivet's v1 (no `checksum_render`: the same cell hashes XOR-folded) and ours, `rivet-colsum-v1`.

`rivet-colsum-v1` (LEGACY_RENDER): for each column, every non-null value is mapped to a 64-bit
hash of its canonical form and the hashes are summed modulo 2**64; nulls are counted
separately (`nulls`, recorded by every render). A sum is commutative and associative, so the
checksum of a column does not depend on row order, on how the rows were cut into parts,
chunks or row groups, or on which worker wrote which part: the checksum of an export is the
wrapping sum of its parts' checksums (for every render but Rivet's XOR v1, whose fold is XOR).

Canonical forms of `rivet-colsum-v1` (values are read back from the written file with pyarrow,
so both sides see the same Arrow types):
- booleans, integers, dates, times, timestamps, durations: the integer value (int64 /
  uint64 bits), mixed with splitmix64 and salted with the column's Arrow type;
- floats: the IEEE-754 float64 bits (float32 widened), same mix;
- decimal128: the unscaled 128-bit integer, low word XOR mix(high word);
- strings, binaries, decimal256 (rendered as text) and every other type (rendered as
  JSON text of the Python value): the bytes, hashed with pandas' vectorized SipHash
  (`pandas.util.hash_array`, fixed key), then the same mix. The C extension `_colsum`
  (rivet_core/manifest/_colsum.c) computes the identical hash straight from the Arrow
  buffers, with no Python object per value and no pandas import; pandas is the fallback
  when the extension is not built.

Write time (`ColumnSumAccumulator`): the Parquet writer feeds every row group it encodes,
so a part's checksums exist when its footer is written and nothing is read back. Only
columns whose Arrow type a re-read returns unchanged are summed that way (`readback_types`:
the types `pq.ParquetFile(...).schema_arrow` reports for the writer's schema), and only
while the key column is one of them; any other column is summed from the written file, so
both sides always hash the same Arrow values.

CSV parts carry no column checksums (their re-read is text, not typed values): they are
verified by content hash and row count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import xxhash

from rivet_core.lazy_modules import np, pa, pc
from rivet_core.manifest import xxh3_sum

#: The render new manifests record: Rivet's (docs/manifest.md "Per-column checksums (Form B)").
CHECKSUM_RENDER = xxh3_sum.RENDER
#: Ours before Rivet's was adopted; `rivet validate` still re-derives it.
LEGACY_RENDER = "rivet-colsum-v1"
#: What `rivet validate` can re-derive (None = Rivet's v1, the XOR fold of the same hashes).
KNOWN_RENDERS = (None, CHECKSUM_RENDER, LEGACY_RENDER)
_MASK = (1 << 64) - 1
_HIGH_SALT = 0x5BD1E9955BD1E995


@dataclass(frozen=True)
class ColumnSum:
    """One column's checksum over some rows: wrapping sum of value hashes, null count."""

    checksum: int
    nulls: int


def _mix(u: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 finalizer of `u ^ salt` (uint64, wrapping) — a cheap, well-spread hash."""
    with np.errstate(over="ignore"):
        z = u ^ np.uint64(salt)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _wrapping_sum(h: np.ndarray) -> int:
    if h.size == 0:
        return 0
    with np.errstate(over="ignore"):
        return int(np.sum(h, dtype=np.uint64))  # numpy uint64 sums wrap modulo 2**64


def _bytes_hashes(values: list[Any] | np.ndarray) -> np.ndarray:
    import pandas as pd  # a dependency of rivet_core; imported late (rivet validate --depth light/sample needs none)

    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    return pd.util.hash_array(arr, categorize=False).astype(np.uint64, copy=False)


try:  # the C path of the byte hashes (optional build output, see module docstring)
    from rivet_core.manifest._colsum import binary_sum as _c_binary_sum
except ImportError:  # pragma: no cover - exercised where the extension is not built
    _c_binary_sum = None


def _binary_sum(arr: pa.Array, salt: int) -> int | None:
    """The wrapping sum of `_mix(bytes hash, salt)` over the non-null values of a binary or
    string array, computed by the C extension from the Arrow buffers; None when the
    extension is absent or the layout is not one it reads (the caller takes the pandas path)."""
    if _c_binary_sum is None:
        return None
    t = arr.type
    n = len(arr)
    if pa.types.is_fixed_size_binary(t):
        # Synthesize int64 offsets over the fixed-width values (same bytes, same hash).
        if n == 0:
            return 0
        validity, values = arr.buffers()[:2]
        width = t.byte_width
        offsets = np.arange(arr.offset + n + 1, dtype=np.int64) * width
        return int(_c_binary_sum(offsets, values if values is not None else b"",
                                 validity if arr.null_count else None, arr.offset, n, True, salt))
    if pa.types.is_string(t) or pa.types.is_binary(t):
        wide = False
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        wide = True
    else:
        return None
    if n == 0:
        return 0
    validity, offsets, values = arr.buffers()[:3]
    return int(_c_binary_sum(offsets, values if values is not None else b"",
                             validity if arr.null_count else None, arr.offset, n, wide, salt))


def _array_sum(arr: pa.Array) -> int:
    """The wrapping sum of the value hashes of `arr` (see `_value_hashes`)."""
    t = arr.type
    if isinstance(t, pa.DictionaryType):
        return _array_sum(arr.dictionary_decode())
    if isinstance(t, pa.BaseExtensionType):
        return _array_sum(arr.storage)
    fast = _binary_sum(arr, xxhash.xxh3_64_intdigest(str(t).encode()))
    if fast is not None:
        return fast
    return _wrapping_sum(_value_hashes(arr))


def _fixed_values(arr: pa.Array, dtype: np.dtype | type) -> np.ndarray:
    """The values of a fixed-width array without nulls, as numpy, straight from its data
    buffer (`to_numpy` would make pyarrow import pandas)."""
    n = len(arr)
    buf = arr.buffers()[1]
    if n == 0 or buf is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + n)[arr.offset:]


def _value_hashes(arr: pa.Array) -> np.ndarray:
    """64-bit hashes of the non-null values of `arr` (any order; see module docstring)."""
    t = arr.type
    salt = xxhash.xxh3_64_intdigest(str(t).encode())
    if isinstance(t, pa.DictionaryType):
        return _value_hashes(arr.dictionary_decode())
    if isinstance(t, pa.BaseExtensionType):
        return _value_hashes(arr.storage)
    valid = arr.drop_null()
    if pa.types.is_boolean(t):
        u = _fixed_values(valid.cast(pa.uint8()), np.uint8).astype(np.uint64)
    elif pa.types.is_floating(t):
        u = _fixed_values(valid.cast(pa.float64()), np.float64).view(np.uint64)
    elif pa.types.is_unsigned_integer(t):
        u = _fixed_values(valid, np.dtype(f"uint{t.bit_width}")).astype(np.uint64)
    elif pa.types.is_integer(t):
        u = _fixed_values(valid, np.dtype(f"int{t.bit_width}")).astype(np.int64).view(np.uint64)
    elif (pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)
          or pa.types.is_duration(t)):
        storage = pa.int32() if (pa.types.is_date32(t) or t in (pa.time32("s"), pa.time32("ms"))) else pa.int64()
        u = _fixed_values(valid.view(storage), np.dtype(f"int{storage.bit_width}")).astype(np.int64).view(np.uint64)
    elif (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        u = _bytes_hashes(valid.cast(pa.large_binary()).to_numpy(zero_copy_only=False))
    elif (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
          or pa.types.is_fixed_size_binary(t)):
        u = _bytes_hashes(valid.to_numpy(zero_copy_only=False))
    elif pa.types.is_decimal128(t):  # the 128-bit unscaled integer (little-endian words)
        n = len(valid)
        words = np.frombuffer(valid.buffers()[1], dtype="<u8", count=2 * (valid.offset + n))
        words = words[2 * valid.offset:].reshape(n, 2).astype(np.uint64)
        u = words[:, 0] ^ _mix(words[:, 1], _HIGH_SALT)
    elif pa.types.is_decimal(t):
        u = _bytes_hashes(pc.cast(valid, pa.string()).cast(pa.large_binary()).to_numpy(zero_copy_only=False))
    else:  # nested and rare types: JSON text of the Python value (slow path, exact)
        u = _bytes_hashes([json.dumps(v, sort_keys=True, default=str).encode() for v in valid.to_pylist()])
    return _mix(u, salt)


def _chunk_sum(chunk: pa.Array, key: pa.Array | None, render: str | None) -> int:
    if render == LEGACY_RENDER:
        return _array_sum(chunk)
    if render == CHECKSUM_RENDER:
        return xxh3_sum.array_sum(chunk, key)
    return xxh3_sum.array_xor(chunk, key)  # no render: Rivet's v1


def _fold(render: str | None, a: int, b: int) -> int:
    """How two partial checksums combine: XOR for Rivet's v1 (no render), else wrapping sum."""
    return a ^ b if render is None else (a + b) & _MASK


def column_sum(values: pa.Array | pa.ChunkedArray, key: pa.Array | pa.ChunkedArray | None = None,
               render: str | None = CHECKSUM_RENDER) -> ColumnSum:
    """One column's checksum under `render`, keyed row by row by `key` (same length; ignored
    by `rivet-colsum-v1`, which has no key)."""
    if isinstance(values, pa.ChunkedArray) or isinstance(key, pa.ChunkedArray):
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        key = key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key
    return ColumnSum(_chunk_sum(values, key, render), values.null_count)


def table_sums(table: pa.Table | pa.RecordBatch, key_column: str | None = None,
               render: str | None = CHECKSUM_RENDER) -> dict[str, ColumnSum]:
    """Per-column checksums of `table`, keyed by column name, in schema order; keyed by
    `key_column` when it is one of the columns."""
    names = table.schema.names
    key = table.column(names.index(key_column)) if key_column in names else None
    return {name: column_sum(table.column(i), key, render) for i, name in enumerate(names)}


def combine(parts: Iterable[Mapping[str, ColumnSum]], render: str | None = CHECKSUM_RENDER) -> dict[str, ColumnSum]:
    """The checksums of the union of the parts' rows (order-independent)."""
    out: dict[str, ColumnSum] = {}
    for sums in parts:
        for name, s in sums.items():
            prev = out.get(name, ColumnSum(0, 0))
            out[name] = ColumnSum(_fold(render, prev.checksum, s.checksum), prev.nulls + s.nulls)
    return out


#: Rows decoded at a time when a Parquet file is checksummed: string columns are hashed
#: through Python bytes objects (`_bytes_hashes`), ~60 bytes of overhead per value, so a
#: whole 100 k-row group of a wide table costs tens of MB at once; 16 k rows keep the
#: read-back of every part small (rivet_core/pipeline/facade/commit.py runs it at write time).
READ_BATCH_ROWS = 16_384


def parquet_sums(source: Any, columns: Sequence[str] | None = None, key_column: str | None = None,
                 render: str | None = CHECKSUM_RENDER) -> dict[str, ColumnSum]:
    """Checksums of a Parquet file (path or bytes buffer), `READ_BATCH_ROWS` rows at a time;
    of the named `columns` only when given; keyed by `key_column` when the file has it."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source if not isinstance(source, (bytes, bytearray, memoryview))
                        else pa.BufferReader(source), pre_buffer=False)
    names = list(columns) if columns is not None else pf.schema_arrow.names
    read = names + [key_column] if (columns is not None and key_column is not None and key_column not in names
                                    and key_column in pf.schema_arrow.names) else names
    batches = pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=None if columns is None else read)
    sums = combine((table_sums(batch, key_column, render) for batch in batches), render)
    return {name: sums.get(name, ColumnSum(0, 0)) for name in names}


def readback_types(schema: pa.Schema, **writer_kwargs: Any) -> list[pa.DataType]:
    """The Arrow type each column of `schema` has when a file written with `writer_kwargs`
    (pyarrow.parquet.ParquetWriter arguments) is read back by `parquet_sums`: the schema of
    an empty file written the same way, read with the same reader."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, schema, **writer_kwargs).close()  # no rows: `empty_table()` imports pandas
    return list(pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema_arrow.types)


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types that also render alike (the salt is the type's text: `list<item: …>` and
    `list<element: …>` compare equal in pyarrow but hash differently)."""
    return a.equals(b) and str(a) == str(b)


class ColumnSumAccumulator:
    """Running Form B checksums of the rows a writer encodes (see the module docstring).

    `covered` names the columns summed from the Arrow data as written: those whose written
    type equals their read-back type (all of them or none when `key_column` is one of the
    columns: a keyed sum needs the key as a re-read sees it). `finish(source)` completes the
    others from the written file (a path or bytes) and returns every column's checksum in
    schema order.
    """

    def __init__(self, schema: pa.Schema, readback: Sequence[pa.DataType], key_column: str | None = None) -> None:
        self.names = list(schema.names)
        self.key_column = key_column if key_column in self.names else None
        same = [i for i, (f, t) in enumerate(zip(schema, readback, strict=True)) if same_type(f.type, t)]
        if self.key_column is not None and self.names.index(self.key_column) not in same:
            same = []
        self._index = same
        self._key = None if self.key_column is None else self.names.index(self.key_column)
        self.covered = frozenset(self.names[i] for i in self._index)
        self._sums = {self.names[i]: ColumnSum(0, 0) for i in self._index}

    def add(self, table: pa.Table | pa.RecordBatch) -> None:
        """Add the rows of `table` (the writer's schema) to the running sums."""
        key = None if self._key is None else table.column(self._key)
        for i in self._index:
            name = self.names[i]
            s = column_sum(table.column(i), key)
            prev = self._sums[name]
            self._sums[name] = ColumnSum((prev.checksum + s.checksum) & _MASK, prev.nulls + s.nulls)

    def finish(self, source: Any) -> dict[str, ColumnSum]:
        """Every column's checksum; the columns not covered are read back from `source`."""
        rest = [n for n in self.names if n not in self.covered]
        extra = parquet_sums(source, rest, self.key_column) if rest else {}
        return {n: self._sums[n] if n in self.covered else extra[n] for n in self.names}


__all__ = ["CHECKSUM_RENDER", "KNOWN_RENDERS", "LEGACY_RENDER", "ColumnSum", "checksum_key_column", "ColumnSumAccumulator", "column_sum", "table_sums", "combine",
           "parquet_sums", "readback_types", "run_level", "same_type"]


def checksum_key_column(export: Any) -> str | None:
    """The column an export's checksums are keyed by, as Rivet keys them: the cursor of an
    incremental export (not the synthetic one of `coalesce` mode) and the key of a keyset
    (`chunk_by_key`) export; None (un-keyed) for full, range-chunked and time exports."""
    if export.mode == "incremental" and export.incremental_cursor_mode == "single_column":
        return export.cursor_column
    if export.mode == "chunked" and export.chunk_by_key:
        return export.chunk_by_key
    return None


def run_level(parts: Iterable[Any], key_column: str | None = None
              ) -> tuple[tuple[Any, ...] | None, str | None, str | None]:
    """The manifest's run-level `column_checksums`, `checksum_render` and `checksum_key_column`
    from its committed parts' own checksums (all computed with `key_column` as the writer's
    key): their wrapping sum when EVERY committed part carries them, else (None, None, None)
    — Form B is suppressed rather than partial (docs/rivet-compat.md "Resume decisions and
    rehydration"). The key is recorded only when it is one of the checksummed columns (a
    writer keys by it only then)."""
    from rivet_core.manifest.model import ColumnChecksum

    committed = [p for p in parts if getattr(p, "status", "committed") == "committed"]
    if not committed or any(p.column_checksums is None for p in committed):
        return None, None, None
    sums = combine({c.name: ColumnSum(int(c.checksum), c.nulls or 0) for c in p.column_checksums}
                   for p in committed)
    checks = tuple(ColumnChecksum(name=n, checksum=str(s.checksum), nulls=s.nulls) for n, s in sums.items())
    return checks, CHECKSUM_RENDER, key_column if key_column in sums else None
