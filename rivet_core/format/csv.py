"""CSV writer: the exact text rendering of docs/rivet-compat.md "CSV text".

Layout: a header row of column names (quoted like cells), `,` separator, LF line endings,
RFC-4180 quoting — a field is quoted iff it contains `,` `"` LF or CR, embedded quotes are
doubled. No compression ever.

NULL vs empty (our choice, the reference leaves it open): **NULL is an empty unquoted cell;
a non-NULL value whose text is empty (the empty string, empty JSON text, empty binary) is
written as `""` (a quoted empty field)**. RFC-4180 readers that keep the quoting
distinction (Python's `csv` with `QUOTE_NOTNULL`/`QUOTE_STRINGS`, DuckDB) can therefore tell
the two apart; readers that do not see both as empty.

Cell renderings:
- ints (signed/unsigned) and decimal128: plain exact text, decimals keep every digit of the
  scale (`1.5000000000`, never `1.5E+0` or `1E-10`);
- bool `true`/`false`;
- floats: Arrow's shortest round-trip text (`0.1`, `1`, `1e+20`) plus `NaN`, `inf`, `-inf`,
  `-0` — `float(cell)` gives back the exact value;
- uuid hyphenated lowercase; binary lowercase hex;
- date `YYYY-MM-DD`; time `HH:MM:SS.ffffff`; timestamp `YYYY-MM-DDTHH:MM:SS.ffffff`;
  tz-aware timestamps are the UTC instant with a trailing `Z`. Second/millisecond units are
  widened to 6 digits; nanosecond units keep 9 digits rather than lose precision;
- json: its text, quoted like any string.
Lists, decimal256, non-UUID fixed-size binary (and any other nested/unsupported type) are
rejected at writer creation with a `ConfigError` naming the column and suggesting Parquet —
before a single byte is written.

Rendering is column-wise with `pyarrow.compute` (no per-cell Python loop); a batch is
rendered and written in slices of `_SLICE_ROWS` rows so the temporary text is bounded.

I1: `finish()` is the finalize step — flush + fsync + close; after it the file is complete.
"""

from __future__ import annotations

import functools
from pathlib import Path

from rivet_core.errors import ConfigError
from rivet_core.format.base import FormatWriter, WriterOptions, conform_batch
from rivet_core.lazy_modules import np, pa, pc

_SLICE_ROWS = 16_384


@functools.cache
def _lstr() -> pa.DataType:
    """large_string, made on first use (`pa` is lazy: rivet_core/lazy_modules.py)."""
    return pa.large_string()


@functools.cache
def _text(value: str) -> pa.Scalar:
    """A large_string scalar, made on first use: building a scalar from a Python value makes
    pyarrow import pandas (~0.5 s, tens of MB), which a Parquet export never needs."""
    return pa.scalar(value, _lstr())
_NEEDS_QUOTE = r'[,"\r\n]'


@functools.cache
def _hex_table() -> np.ndarray:
    """byte value → its two lowercase hex digits (made on first use: `np` is lazy)."""
    hex_digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    return np.stack([hex_digits[np.arange(256) >> 4], hex_digits[np.arange(256) & 0xF]], axis=1)


# ---------------------------------------------------------------------------------------
# Type support (checked at writer creation)
# ---------------------------------------------------------------------------------------


def unsupported_reason(t: pa.DataType) -> str | None:
    """Why CSV cannot carry type `t`, or None when it can."""
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return None
        if t.extension_name == "arrow.json":
            return None
        return f"extension type {t.extension_name} has no CSV rendering"
    if pa.types.is_dictionary(t):
        return unsupported_reason(t.value_type)
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return "lists have no CSV rendering"
    if pa.types.is_decimal256(t):
        return "decimal256 (precision > 38) is not supported by the CSV writer"
    if pa.types.is_fixed_size_binary(t):
        return "fixed-size binary that is not a UUID has no CSV rendering"
    if (
        pa.types.is_null(t)
        or pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal128(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
    ):
        return None
    return f"type {t} has no CSV rendering"


def check_schema(schema: pa.Schema) -> None:
    """Raise ConfigError naming every column CSV cannot represent."""
    bad = [(f.name, reason) for f in schema if (reason := unsupported_reason(f.type))]
    if bad:
        listing = "; ".join(f"column '{name}' ({reason})" for name, reason in bad)
        raise ConfigError(
            f"format csv cannot represent {len(bad)} column(s): {listing}. "
            "Use `format: parquet` for this export, or cast the column(s) to text in the query."
        )


# ---------------------------------------------------------------------------------------
# Column renderers: each returns a large_string array, NULL where the input is NULL.
# ---------------------------------------------------------------------------------------


def render_decimal(arr: pa.Array) -> pa.Array:
    """Plain exact text of a decimal128 column: every digit, the full scale, no exponent.

    Arrow's own decimal→string cast switches to scientific notation for small values
    (`1E-10`), so we render the unscaled integer (a scale-0 view of the same bytes) and
    insert the decimal point with string kernels.
    """
    t = arr.type
    scale = t.scale
    unscaled = arr.view(pa.decimal128(38, 0)).cast(_lstr())
    if scale == 0:
        return unscaled
    if scale < 0:
        zeros = "0" * (-scale)
        padded = pc.binary_join_element_wise(unscaled, pa.scalar(zeros, _lstr()), _text(""))
        return pc.if_else(pc.equal(unscaled, "0"), unscaled, padded)
    negative = pc.starts_with(unscaled, "-")
    digits = pc.utf8_ltrim(unscaled, "-")
    digits = pc.utf8_lpad(digits, width=scale + 1, padding="0")
    int_part = pc.utf8_slice_codeunits(digits, start=0, stop=-scale)
    frac_part = pc.utf8_slice_codeunits(digits, start=-scale)
    sign = pc.if_else(negative, pa.scalar("-", _lstr()), _text(""))
    return pc.binary_join_element_wise(sign, int_part, pa.scalar(".", _lstr()), frac_part, _text(""))


def _with_nulls_of(source: pa.Array, rendered: pa.Array) -> pa.Array:
    """Re-apply `source`'s NULLs to a rendering that was built without a validity bitmap."""
    if source.null_count == 0:
        return rendered
    return pc.if_else(pc.is_valid(source), rendered, pa.scalar(None, _lstr()))


def render_hex(arr: pa.Array) -> pa.Array:
    """Lowercase hex of binary values, vectorised through a 256-entry lookup table."""
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    if data_buf is None or end == start:
        data = np.empty(0, dtype=np.uint8)
    else:
        data = np.frombuffer(data_buf, dtype=np.uint8)[start:end]
    hexed = _hex_table()[data].reshape(-1)
    new_offsets = (offsets - start) * 2
    out = pa.Array.from_buffers(
        _lstr(), n, [None, pa.py_buffer(new_offsets.tobytes()), pa.py_buffer(hexed.tobytes())]
    )
    return _with_nulls_of(arr, out)


def render_uuid(arr: pa.Array) -> pa.Array:
    """Hyphenated lowercase 8-4-4-4-12 text of 16-byte UUID values."""
    storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
    n = len(storage)
    buf = storage.buffers()[1]
    raw = np.frombuffer(buf, dtype=np.uint8)[storage.offset * 16 : (storage.offset + n) * 16]
    hexed = _hex_table()[raw].reshape(n, 32)
    dash = np.full((n, 1), ord("-"), dtype=np.uint8)
    text = np.concatenate(
        [hexed[:, 0:8], dash, hexed[:, 8:12], dash, hexed[:, 12:16], dash, hexed[:, 16:20], dash,
         hexed[:, 20:32]],
        axis=1,
    )
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int64)
    out = pa.Array.from_buffers(
        _lstr(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text.tobytes())]
    )
    return _with_nulls_of(storage, out)


def _render_timestamp(arr: pa.Array) -> pa.Array:
    t: pa.TimestampType = arr.type
    unit = "ns" if t.unit == "ns" else "us"
    naive = arr.view(pa.timestamp(t.unit)) if t.tz is not None else arr
    if t.unit != unit:
        naive = naive.cast(pa.timestamp(unit))
    text = pc.replace_substring(naive.cast(_lstr()), " ", "T", max_replacements=1)
    if t.tz is not None:
        text = pc.binary_join_element_wise(text, pa.scalar("Z", _lstr()), _text(""))
    return text


def _render_time(arr: pa.Array) -> pa.Array:
    t = arr.type
    if t.unit != "ns" and t != pa.time64("us"):
        arr = arr.cast(pa.time64("us"))
    return arr.cast(_lstr())


def _render_float(arr: pa.Array) -> pa.Array:
    if arr.type == pa.float16():
        arr = arr.cast(pa.float32())
    text = arr.cast(_lstr())
    return pc.if_else(pc.is_nan(arr), pa.scalar("NaN", _lstr()), text)


def quote_strings(text: pa.Array) -> pa.Array:
    """RFC-4180 quoting of a text column; the empty string becomes `""` (see module doc)."""
    needs = pc.or_(pc.match_substring_regex(text, _NEEDS_QUOTE), pc.equal(pc.binary_length(text), 0))
    if not pc.any(needs).as_py():
        return text
    escaped = pc.replace_substring(text, '"', '""')
    quoted = pc.binary_join_element_wise(_text('"'), escaped, _text('"'), _text(""))
    return pc.if_else(needs, quoted, text)


def _quote_empty(text: pa.Array) -> pa.Array:
    """A non-NULL value rendered as empty text (empty binary) is written `""`."""
    empty = pc.equal(pc.binary_length(text), 0)
    return pc.if_else(empty, pa.scalar('""', _lstr()), text)


def render_cells(arr: pa.Array) -> pa.Array:
    """The final cell text of one column (quoted where needed), NULL where the value is NULL."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return render_uuid(arr)
        return quote_strings(arr.storage.cast(_lstr()))  # arrow.json: its text
    if pa.types.is_dictionary(t):
        return render_cells(arr.cast(t.value_type))
    if pa.types.is_null(t):
        return pa.nulls(len(arr), _lstr())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return quote_strings(arr.cast(_lstr()))
    if pa.types.is_boolean(t):
        return pc.if_else(arr, pa.scalar("true", _lstr()), pa.scalar("false", _lstr()))
    if pa.types.is_integer(t):
        return arr.cast(_lstr())
    if pa.types.is_floating(t):
        return _render_float(arr)
    if pa.types.is_decimal128(t):
        return render_decimal(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _quote_empty(render_hex(arr))
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return render_uuid(arr)
    if pa.types.is_date64(t):
        return arr.cast(pa.date32()).cast(_lstr())
    if pa.types.is_date32(t):
        return arr.cast(_lstr())
    if pa.types.is_time(t):
        return _render_time(arr)
    if pa.types.is_timestamp(t):
        return _render_timestamp(arr)
    raise ConfigError(f"CSV has no rendering for type {t}; use `format: parquet`")


def _quote_header(name: str) -> str:
    if name == "" or any(ch in name for ch in ',"\r\n'):
        return '"' + name.replace('"', '""') + '"'
    return name


def render_lines(batch: pa.RecordBatch) -> bytes | memoryview:
    """The CSV text (UTF-8 bytes, LF-terminated lines) of every row of `batch`."""
    n = batch.num_rows
    if n == 0:
        return b""
    if batch.num_columns == 0:
        return b"\n" * n
    cells = [render_cells(col).fill_null(_text("")) for col in batch.columns]
    cells[-1] = pc.binary_join_element_wise(cells[-1], _text(""), _text("\n"))  # last cell + "\n"
    lines = cells[0] if len(cells) == 1 else pc.binary_join_element_wise(*cells, _text(","))
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    start, end = int(offsets[lines.offset]), int(offsets[lines.offset + n])
    return memoryview(lines.buffers()[2])[start:end]


class CsvWriter(FormatWriter):
    """Streams rendered batches to one CSV file; the header is written at creation."""

    def __init__(self, path: Path, schema: pa.Schema, options: WriterOptions) -> None:
        check_schema(schema)  # fail before any file exists
        super().__init__(path, schema, options)
        self._file = self._create_file()  # closed in finish()/abort()
        header = ",".join(_quote_header(f.name) for f in schema) + "\n"
        self._file.write(header.encode("utf-8"))
        self._file.flush()
        self._bytes = self.header_bytes = self._file.tell()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._check_open()
        batch = conform_batch(batch, self.schema)
        assert self._file is not None
        for start in range(0, batch.num_rows, _SLICE_ROWS):
            self._file.write(render_lines(batch.slice(start, _SLICE_ROWS)))
        self._file.flush()
        self._bytes = self._file.tell()
        self._flushed(self._bytes)
        self.rows_written += batch.num_rows

    @property
    def bytes_written(self) -> int:
        return self._bytes

    def finish(self) -> None:
        """I1: flush, fsync, close — the CSV is complete on disk when this returns."""
        self._check_open()
        self._bytes = self._sync_and_close()
        self._closed = True
