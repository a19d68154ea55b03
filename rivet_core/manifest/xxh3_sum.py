"""Rivet's Form B column checksum `xxh3-64-sum-v2`, bit for bit (docs/manifest.md
"Per-column checksums (Form B)").

Rivet records, per column, the wrapping (mod 2**64) sum over
the column's non-null cells of `xxh3_64(key_cell ‖ value_cell)` — `xxh3_64(value_cell)`
when the manifest names no `checksum_key_column` — as a decimal string. Its `validate`
re-reads the Parquet parts with arrow-rs and re-derives the sum; a manifest that says any
other `checksum_render` is re-derived with Rivet's older XOR fold, so to be verified by
Rivet our manifests must record exactly this render with exactly these numbers.

Canonical cell bytes, by the Arrow type the part holds (the type a re-read returns):
- int16 / int32 / int64 / uint64, float32 / float64, date32, timestamp[us] (any zone),
  time64[us], decimal128 (16 bytes), decimal256 (32 bytes): the little-endian value as Arrow
  stores it (floats by their IEEE bits, so -0.0 and 0.0 differ; decimals unscaled);
- bool: one byte, 0 or 1;
- string / binary (32-bit offsets), fixed_size_binary (UUID, BINARY(n)): the raw bytes; a
  JSON or UUID extension column by its storage;
- list<bool | int16 | int32 | int64 | float32 | float64 | string>: per element a tag byte
  (0 null, 1 bool, 2 int16, 3 int32, 4 int64, 5 float32, 6 float64, 7 string), the
  element's byte length as a little-endian u32, then its bytes.
Every other type (int8, the unsigned types below 64 bits, large_string, large_binary,
timestamp[ns|ms|s], time32, date64, dictionary, struct, map, ...) is not covered by Rivet:
the column sums to 0 on both sides. The key column itself is keyed too (`xxh3(k ‖ k)`); a
key column of an uncovered type contributes no key bytes (as arrow-rs hands Rivet an empty
slice), and a null key cell reads as zero bytes of its width (fixed) or no bytes.

The sum is order-free, so a run's checksum is the wrapping sum of its parts' and of their
batches' — and, unlike Rivet's v1 XOR, duplicated values do not cancel.

The C extension `_colsum.xxh3_sum` hashes straight from the Arrow buffers; without it
every cell goes through the `xxhash` package (same numbers, slower).
"""

from __future__ import annotations

import struct
from typing import Any

import xxhash

from rivet_core.lazy_modules import pa, pc

RENDER = "xxh3-64-sum-v2"
_MASK = (1 << 64) - 1

try:  # the C path (optional build output, see module docstring)
    from rivet_core.manifest._colsum import xxh3_sum as _c_xxh3_sum
except ImportError:  # pragma: no cover - exercised where the extension is not built
    _c_xxh3_sum = None

#: List element types Rivet covers, with their tag byte and little-endian struct format.
_LIST_TAGS: dict[str, tuple[int, str]] = {
    "bool": (1, "<?"), "int16": (2, "<h"), "int32": (3, "<i"), "int64": (4, "<q"),
    "float": (5, "<f"), "double": (6, "<d"), "string": (7, ""),
}


def _storage(arr: pa.Array) -> pa.Array:
    """An extension array's storage (what arrow-rs hands Rivet for a UUID or JSON column)."""
    return arr.storage if isinstance(arr.type, pa.BaseExtensionType) else arr


def _fixed_width(t: pa.DataType) -> int | None:
    """Bytes per cell of a covered fixed-width type; None for any other type."""
    if t in (pa.int16(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64(), pa.date32(),
             pa.time64("us")):
        return t.bit_width // 8
    if pa.types.is_timestamp(t) and t.unit == "us":
        return 8
    if pa.types.is_decimal128(t):
        return 16
    if pa.types.is_decimal256(t):
        return 32
    if pa.types.is_fixed_size_binary(t):
        return t.byte_width
    return None


def _list_covered(t: pa.DataType) -> bool:
    return pa.types.is_list(t) and str(t.value_type) in _LIST_TAGS


def is_covered(t: pa.DataType) -> bool:
    """Whether Rivet's checksum hashes a column of Arrow type `t` (else the column sums to 0)."""
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    return (_fixed_width(t) is not None or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_binary(t) or _list_covered(t))


def _encode_list_cell(cell: list[Any] | None, elem: pa.DataType) -> bytes:
    """Rivet's `encode_list_cell`: tag byte, u32 length, value bytes for each element; an
    element of an uncovered type reads as null (tag 0)."""
    out = bytearray()
    tag, fmt = _LIST_TAGS.get(str(elem), (0, ""))
    for v in cell or ():
        if v is None or tag == 0:
            out += b"\x00" + struct.pack("<I", 0)
            continue
        body = v.encode() if tag == 7 else struct.pack(fmt, v)
        out += bytes([tag]) + struct.pack("<I", len(body)) + body
    return bytes(out)


def _spec(arr: pa.Array, *, as_key: bool) -> tuple[Any, ...] | None:
    """The cell spec `_colsum.xxh3_sum` reads for `arr`, or None when the column is not
    covered (a value column then sums to 0; a key column adds no bytes)."""
    arr = _storage(arr)
    t = arr.type
    n = len(arr)
    validity = arr.buffers()[0] if arr.null_count else None
    width = _fixed_width(t)
    if width is not None:
        return (False, None, arr.buffers()[1], validity, arr.offset, n, width)
    if pa.types.is_boolean(t):
        as_bytes = pc.cast(arr, pa.uint8())
        return (False, None, as_bytes.buffers()[1], as_bytes.buffers()[0] if as_bytes.null_count else None,
                as_bytes.offset, n, 1)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        _, offsets, data = arr.buffers()[:3]
        return (True, offsets, data, validity, arr.offset, n, 0)
    if pa.types.is_list(t) and (as_key or _list_covered(t)):
        encoded = pa.array([None if cell is None else _encode_list_cell(cell, t.value_type)
                            for cell in arr.to_pylist()], type=pa.binary())
        return _spec(encoded, as_key=as_key)
    return None


def _cells(spec: tuple[Any, ...]) -> list[bytes | None]:
    """The cells of a spec as bytes (None = null): the pure-Python twin of the C reader."""
    variable, offsets, data, validity, offset, n, width = spec
    raw = b"" if data is None else data.to_pybytes()
    bits = None if validity is None else validity.to_pybytes()
    offs = None if offsets is None else struct.unpack_from(f"<{offset + n + 1}i", offsets.to_pybytes())
    out: list[bytes | None] = []
    for i in range(offset, offset + n):
        if bits is not None and not (bits[i >> 3] >> (i & 7)) & 1:
            out.append(None)
        elif variable:
            out.append(raw[offs[i]:offs[i + 1]])
        else:
            out.append(raw[i * width:(i + 1) * width])
    return out


def _py_sum(value: tuple[Any, ...], key: tuple[Any, ...] | None, xor: bool = False) -> int:
    """`_colsum.xxh3_sum` one cell at a time through the `xxhash` package."""
    values = _cells(value)
    keys: list[bytes | None] = [b""] * len(values) if key is None else _cells(key)
    null_key = b"" if key is None or key[0] else bytes(key[6])
    total = 0
    for k, v in zip(keys, values, strict=True):
        if v is not None:
            h = xxhash.xxh3_64_intdigest((null_key if k is None else k) + v)
            total = total ^ h if xor else total + h
    return total & _MASK


def array_sum(values: pa.Array, key: pa.Array | None = None, *, xor: bool = False) -> int:
    """The `xxh3-64-sum-v2` checksum of one column's cells, keyed cell by cell by `key`
    (the same rows of the key column) when given; with `xor`, the same hashes XOR-folded
    (Rivet's v1, which a manifest without `checksum_render` was written with)."""
    spec = _spec(values, as_key=False)
    if spec is None or len(values) == 0:
        return 0
    key_spec = None if key is None else _spec(key, as_key=True)
    if _c_xxh3_sum is not None and (key_spec is None or key_spec[6] <= 64):
        return int(_c_xxh3_sum(spec, key_spec, xor))
    return _py_sum(spec, key_spec, xor)


def array_xor(values: pa.Array, key: pa.Array | None = None) -> int:
    """Rivet's v1 checksum of one column (see `array_sum`)."""
    return array_sum(values, key, xor=True)


__all__ = ["RENDER", "array_sum", "array_xor", "is_covered"]
