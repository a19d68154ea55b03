"""Meta columns (docs/rivet-compat.md "Meta columns") and the canonical value bytes they hash.

Adds, after the data columns and in this order:
- `_rivet_exported_at` timestamp('us', 'UTC'): one value for the whole batch (the caller
  passes the sink's timestamp: per run in single mode, per chunk/page otherwise);
- `_rivet_row_hash` int64: the low 64 bits (as a signed int64) of xxh3-128 over the
  canonical row bytes defined below. `row_hash=True` hashes every data column in schema
  order; a list hashes exactly those columns in that order.

Canonical row bytes — contract `ROW_HASH_CONTRACT` ("rivet-py-rowhash-v1"):
  row  = cell(col_1) ‖ cell(col_2) ‖ … (selected columns, in order; column names excluded)
  cell = 0x00                                       if the value is NULL
       | u8(len(tag)) ‖ tag ‖ u32le(len(payload)) ‖ payload   otherwise
The tag is ASCII, never empty, so a NULL can never collide with a value, and the length
prefix makes the empty string (`\\x03str\\x00\\x00\\x00\\x00`) distinct from NULL (`\\x00`)
and prevents `("ab","c")` colliding with `("a","bc")`. Tags and payloads by type family
(widths are normalised so a column changing int32→int64 keeps its hashes):
  bool       `bool`       1 byte 0/1
  signed int `int`        int64 little-endian
  unsigned   `uint`       uint64 little-endian
  float      `float`      float64 little-endian (float32 widened exactly); every NaN is the
                          canonical quiet NaN; -0.0 stays distinct from 0.0
  decimal    `dec`        the plain exact text (`1.5000000000`, as in CSV)
  string     `str`        UTF-8 bytes;  json `json` its UTF-8 text
  binary     `bin`        raw bytes (binary, large_binary, fixed_size_binary)
  uuid       `uuid`       the 16 raw bytes
  date       `date`       int32 days since 1970-01-01 little-endian
  time       `time[u]`    int64 count of unit u since midnight
  timestamp  `ts[u]` (naive) / `tsz[u]` (tz-aware: the UTC instant)   int64 count of unit u
  duration   `dur[u]`     int64
  list       `list<T>`    u32le(element count) ‖ per element: 0x00 (NULL) or
                          0x01 ‖ u32le(len) ‖ element payload
Other types (struct, map, union) are rejected with a ConfigError naming the column.

The same per-value payloads feed the quality gate's uniqueness check
(`rivet_core.pipeline.quality`: xxh3-64 of the payload, NULLs skipped).
"""

from __future__ import annotations

import functools
import struct
import sys
from datetime import UTC, datetime

import xxhash

from rivet_core.errors import ConfigError
from rivet_core.format.csv import render_decimal
from rivet_core.lazy_modules import np, pa, pc

ROW_HASH_CONTRACT = "rivet-py-rowhash-v1"
COL_EXPORTED_AT = "_rivet_exported_at"
COL_ROW_HASH = "_rivet_row_hash"


@functools.cache
def exported_at_type() -> pa.DataType:
    """The `_exported_at` column's type (made on first use: `pa` is lazy,
    rivet_core/lazy_modules.py)."""
    return pa.timestamp("us", "UTC")


@functools.cache
def _lbin() -> pa.DataType:
    return pa.large_binary()


@functools.cache
def _bin(value: bytes) -> pa.Scalar:
    """A large_binary scalar, made on first use: building a scalar from a Python value makes
    pyarrow import pandas (~0.5 s, tens of MB), which an export without meta columns never needs."""
    return pa.scalar(value, _lbin())


_U64_MASK = (1 << 64) - 1

if sys.byteorder != "little":  # the payloads reinterpret Arrow buffers as little-endian
    raise ImportError("rivet_core.format.meta_columns requires a little-endian host")


# ---------------------------------------------------------------------------------------
# Canonical per-value payloads
# ---------------------------------------------------------------------------------------


def type_tag(t: pa.DataType, column: str) -> str:
    """The family tag of the contract table above; ConfigError for unsupported types."""
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return "uuid"
        if t.extension_name == "arrow.json":
            return "json"
        return type_tag(t.storage_type, column)
    if pa.types.is_dictionary(t):
        return type_tag(t.value_type, column)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_signed_integer(t):
        return "int"
    if pa.types.is_unsigned_integer(t):
        return "uint"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "dec"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bin"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_time(t):
        return f"time[{t.unit}]"
    if pa.types.is_timestamp(t):
        return f"{'tsz' if t.tz else 'ts'}[{t.unit}]"
    if pa.types.is_duration(t):
        return f"dur[{t.unit}]"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"list<{type_tag(t.value_type, column)}>"
    raise ConfigError(
        f"column '{column}' of type {t} cannot be hashed (row_hash / unique check); "
        "exclude it by listing the columns to hash: `meta_columns.row_hash: [col, …]`"
    )


def _reinterpret(arr: pa.Array, width: int) -> pa.Array:
    """Fixed-width values' raw little-endian bytes as a large_binary array (zero-copy view,
    then one cast)."""
    fsb = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), len(arr), [arr.buffers()[0], arr.buffers()[1]], offset=arr.offset
    )
    return fsb.cast(_lbin())


def canonical_payloads(arr: pa.Array, column: str) -> pa.Array:
    """Per-value payload bytes (large_binary), NULL where `arr` is NULL. See module doc."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    type_tag(t, column)  # rejects unsupported types with a named error
    if isinstance(t, pa.BaseExtensionType):
        return canonical_payloads(arr.storage, column)
    if pa.types.is_dictionary(t):
        return canonical_payloads(arr.cast(t.value_type), column)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), _lbin())
    if pa.types.is_boolean(t):
        return _reinterpret(arr.cast(pa.uint8()), 1)
    if pa.types.is_signed_integer(t):
        return _reinterpret(arr.cast(pa.int64()), 8)
    if pa.types.is_unsigned_integer(t):
        return _reinterpret(arr.cast(pa.uint64()), 8)
    if pa.types.is_floating(t):
        wide = arr.cast(pa.float64())
        wide = pc.if_else(pc.is_nan(wide), pa.scalar(float("nan")), wide)
        return _reinterpret(wide, 8)
    if pa.types.is_decimal128(t):
        return render_decimal(arr).cast(_lbin())
    if pa.types.is_decimal256(t):
        return pa.array([None if v is None else _plain_decimal(v) for v in arr.to_pylist()], _lbin())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(_lbin())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(_lbin())
    if pa.types.is_date64(t):
        arr = arr.cast(pa.date32())
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return _reinterpret(arr, 4)
    if pa.types.is_time32(t):
        return _reinterpret(arr.view(pa.int32()).cast(pa.int64()), 8)
    if pa.types.is_time64(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return _reinterpret(arr.view(pa.int64()), 8)
    return _list_payloads(arr, column)


def _plain_decimal(value: object) -> bytes:
    """Exact plain text of a Python Decimal (decimal256 fallback; rare, per-value)."""
    return format(value, "f").encode("ascii")


def _list_payloads(arr: pa.Array, column: str) -> pa.Array:
    """Lists: element count + per-element NULL marker / length-prefixed payload.

    Element payloads are computed vectorised; only the per-row join loops in Python (lists
    are rare and small in extraction workloads)."""
    if pa.types.is_fixed_size_list(arr.type):
        arr = arr.cast(pa.list_(arr.type.value_field))
    offsets = arr.offsets.to_numpy()
    base = int(offsets[0])
    values = arr.values.slice(base, int(offsets[-1]) - base)
    payloads = canonical_payloads(values, column)
    lengths = pc.binary_length(payloads).cast(pa.uint32())
    cells = pc.binary_join_element_wise(
        pa.scalar(b"\x01", _lbin()), _reinterpret(lengths, 4), payloads, _bin(b"")
    ).fill_null(_bin(b"\x00"))
    cell_list = cells.to_pylist()
    valid = arr.is_valid().to_pylist()
    out: list[bytes | None] = []
    for i, ok in enumerate(valid):
        if not ok:
            out.append(None)
            continue
        lo, hi = int(offsets[i]) - base, int(offsets[i + 1]) - base
        out.append(struct.pack("<I", hi - lo) + b"".join(cell_list[lo:hi]))
    return pa.array(out, _lbin())


def canonical_cells(arr: pa.Array, column: str) -> pa.Array:
    """Per-value cell bytes (tag + length + payload, or 0x00 for NULL), never NULL."""
    tag = type_tag(arr.type, column).encode("ascii")
    payloads = canonical_payloads(arr, column)
    lengths = pc.binary_length(payloads).cast(pa.uint32())
    header = pa.scalar(bytes([len(tag)]) + tag, _lbin())
    cells = pc.binary_join_element_wise(header, _reinterpret(lengths, 4), payloads, _bin(b""))
    return cells.fill_null(_bin(b"\x00"))


# ---------------------------------------------------------------------------------------
# Meta columns
# ---------------------------------------------------------------------------------------


def _hash_columns(schema: pa.Schema, row_hash: bool | list[str]) -> list[str]:
    """The columns `_rivet_row_hash` covers, validated against `schema`."""
    if row_hash is True:
        return [f.name for f in schema if f.name not in (COL_EXPORTED_AT, COL_ROW_HASH)]
    if row_hash is False:
        return []
    cols = list(row_hash)
    if not cols:
        raise ConfigError("meta_columns.row_hash: the column list must not be empty")
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise ConfigError(f"meta_columns.row_hash: duplicate column(s) {', '.join(dupes)}")
    names = set(schema.names)
    unknown = [c for c in cols if c not in names]
    if unknown:
        raise ConfigError(
            f"meta_columns.row_hash references unknown column(s) {', '.join(unknown)}; "
            f"available: {', '.join(schema.names)}"
        )
    return cols


def meta_schema(schema: pa.Schema, exported_at: bool, row_hash: bool | list[str]) -> pa.Schema:
    """`schema` plus the requested meta columns (exported_at first, then row_hash)."""
    for name in (COL_EXPORTED_AT, COL_ROW_HASH):
        if name in schema.names:
            raise ConfigError(
                f"the query already produces a column named '{name}', which is reserved for "
                "meta_columns; rename it in the query"
            )
    hashed = _hash_columns(schema, row_hash)
    for name in hashed:
        type_tag(schema.field(name).type, name)
    fields = list(schema)
    if exported_at:
        fields.append(pa.field(COL_EXPORTED_AT, exported_at_type(), nullable=False))
    if row_hash is not False:
        fields.append(pa.field(COL_ROW_HASH, pa.int64(), nullable=False))
    return pa.schema(fields, metadata=schema.metadata)


def row_hashes(batch: pa.RecordBatch, columns: list[str]) -> pa.Array:
    """`_rivet_row_hash` values: low 64 bits of xxh3-128 of each row's canonical bytes."""
    n = batch.num_rows
    if n == 0:
        return pa.array([], pa.int64())
    cells = [canonical_cells(batch.column(name), name) for name in columns]
    if not cells:
        rows = pa.array([b""] * n, _lbin())
    elif len(cells) == 1:
        rows = cells[0]
    else:
        rows = pc.binary_join_element_wise(*cells, _bin(b""))
    digest = xxhash.xxh3_128_intdigest
    # to_pylist materialises the row bytes in C (faster than slicing buffers per row).
    low = np.fromiter(
        (digest(v) & _U64_MASK for v in rows.to_pylist()), dtype=np.uint64, count=n
    )
    return pa.array(low.view(np.int64), pa.int64())


def add_meta_columns(
    batch: pa.RecordBatch, *, exported_at: datetime | None, row_hash: bool | list[str]
) -> pa.RecordBatch:
    """Append `_rivet_exported_at` (when `exported_at` is given) and `_rivet_row_hash` (when
    `row_hash` is True or a column list). A naive `exported_at` is taken as UTC.

    The hash depends only on each row's values, so it is stable across runs and across
    however the rows were split into batches.
    """
    schema = meta_schema(batch.schema, exported_at is not None, row_hash)
    arrays = list(batch.columns)
    if exported_at is not None:
        if exported_at.tzinfo is None:
            exported_at = exported_at.replace(tzinfo=UTC)
        ts = pa.scalar(exported_at.astimezone(UTC), exported_at_type())
        arrays.append(pa.array(np.full(batch.num_rows, ts.value, dtype=np.int64), exported_at_type()))
    if row_hash is not False:
        arrays.append(row_hashes(batch, _hash_columns(batch.schema, row_hash)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
