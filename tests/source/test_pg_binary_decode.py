"""`_pgbinary.decode` (PostgreSQL binary COPY → Arrow buffers), without a server.

A small pure-Python encoder writes the binary COPY format (header, tuples, trailer; values
as PostgreSQL's send functions write them); the decoder's buffers are wrapped into Arrow
arrays exactly as `pg_binary._CopyOut._batch` does and compared with `pa.array` of the
expected values. Hypothesis generates rows of every column kind, splits of the stream at
arbitrary byte positions (decoded piecewise with the carry-over of `_CopyOut.batches`) and
numerics of every precision/scale; explicit tests cover the value and protocol errors.
The server-side path is tested in test_pg_binary.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.source.postgres import binary as pg_binary


def _decoder() -> ModuleType:
    try:
        from rivet_core.source.postgres import _pgbinary
    except ImportError as exc:
        pytest.fail(
            "the C extension rivet_core.source.postgres._pgbinary is not built, so PostgreSQL reads "
            "cannot use the binary COPY path (they fall back to ADBC). Install a C compiler and "
            "the Python headers (Debian: apt-get install gcc python3-dev), then run "
            f"`bash scripts/bootstrap.sh` (it rebuilds the editable install). Import error: {exc}",
            pytrace=False)
    return _pgbinary


def test_the_c_extension_is_built_and_used() -> None:
    assert pg_binary._pgbinary is _decoder()


# --- the encoder ---------------------------------------------------------------------------

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
TRAILER = struct.pack("!h", -1)
PG_EPOCH_DATE = dt.date(2000, 1, 1)
PG_EPOCH = dt.datetime(2000, 1, 1)
US = dt.timedelta(microseconds=1)

#: kind → the Arrow type `pg_binary` builds for it (numeric: decimal128(p, s), see `arrow_type`)
ARROW: dict[str, pa.DataType] = {
    "b": pa.bool_(), "h": pa.int16(), "i": pa.int32(), "l": pa.int64(), "f": pa.float32(),
    "d": pa.float64(), "D": pa.date32(), "T": pa.time64("us"), "S": pa.timestamp("us"),
    "s": pa.string(), "y": pa.binary(), "j": pa.json_(), "u": pa.uuid(),
}


def numeric_bytes(value: decimal.Decimal, *, pad_leading: int = 0, pad_trailing: int = 0) -> bytes:
    """PostgreSQL's numeric_send: ndigits, weight, sign, dscale, base-10000 digits (most
    significant first, no leading/trailing zero digits unless padded on purpose)."""
    if value.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if value.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xF000 if value < 0 else 0xD000, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    unscaled = int("".join(map(str, digits)) or "0")
    frac_groups = -(-dscale // 4)  # the fraction padded to whole base-10000 digits
    scaled = unscaled * 10 ** (exponent + 4 * frac_groups)
    groups: list[int] = []
    while scaled:
        scaled, group = divmod(scaled, 10000)
        groups.insert(0, group)
    if not groups:
        weight = 0
    else:
        weight = len(groups) - frac_groups - 1
        while groups[-1] == 0:
            groups.pop()
    groups = [0] * pad_leading + groups + [0] * pad_trailing
    weight += pad_leading
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight, 0x4000 if sign else 0,
                       dscale, *groups)


def encode_value(kind: str, value: Any) -> bytes:
    """One non-NULL value as PostgreSQL's binary send function writes it."""
    if kind == "b":
        return b"\x01" if value else b"\x00"
    fmt = {"h": "!h", "i": "!i", "l": "!q", "f": "!f", "d": "!d"}.get(kind)
    if fmt is not None:
        return struct.pack(fmt, value)
    if kind == "D":
        return struct.pack("!i", (value - PG_EPOCH_DATE).days)
    if kind == "T":
        return struct.pack("!q", (dt.datetime.combine(dt.date.min, value)
                                  - dt.datetime.combine(dt.date.min, dt.time())) // US)
    if kind == "S":
        return struct.pack("!q", (value - PG_EPOCH) // US)
    if kind in "sj":
        return (b"\x01" if kind == "j" else b"") + value.encode()
    if kind == "y":
        return bytes(value)
    if kind == "u":
        return value.bytes
    if kind == "n":
        return numeric_bytes(value)
    raise AssertionError(kind)


def field(payload: bytes | None) -> bytes:
    return struct.pack("!i", -1) if payload is None else struct.pack("!i", len(payload)) + payload


def tuple_bytes(payloads: list[bytes | None], count: int | None = None) -> bytes:
    return struct.pack("!h", len(payloads) if count is None else count) + b"".join(
        field(p) for p in payloads)


def encode_rows(kinds: str, rows: list[tuple[Any, ...]]) -> bytes:
    """The tuples alone (no header, no trailer)."""
    return b"".join(
        tuple_bytes([None if v is None else encode_value(k, v) for k, v in zip(kinds, row, strict=True)])
        for row in rows)


def stream(kinds: str, rows: list[tuple[Any, ...]]) -> bytes:
    return HEADER + encode_rows(kinds, rows) + TRAILER


# --- the decoder, wrapped like pg_binary._CopyOut ---------------------------------------------

def arrow_type(kind: str, precision: int = 0, scale: int = 0) -> pa.DataType:
    return pa.decimal128(precision, scale) if kind == "n" else ARROW[kind]


def decode(data: bytes, offset: int, kinds: str, precisions: list[int] | None = None,
           scales: list[int] | None = None, max_rows: int = 1 << 30
           ) -> tuple[list[Any], int, int, bool]:
    return _decoder().decode(data, offset, kinds.encode(), precisions or [0] * len(kinds),
                             scales or [0] * len(kinds), max_rows)


def to_arrays(columns: list[Any], rows: int, types: list[pa.DataType]) -> list[pa.Array]:
    """`_CopyOut._batch`'s wrapping of the buffers (without the value-size check)."""
    arrays = []
    for typ, (validity, nulls, values, data) in zip(types, columns, strict=True):
        storage = typ.storage_type if isinstance(typ, pa.BaseExtensionType) else typ
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
        if data is not None:
            buffers.append(pa.py_buffer(data))
        array = pa.Array.from_buffers(storage, rows, buffers, null_count=nulls)
        if isinstance(typ, pa.BaseExtensionType):
            array = pa.ExtensionArray.from_storage(typ, array)
        array.validate(full=True)
        assert array.null_count == nulls
        arrays.append(array)
    return arrays


def expected_array(values: list[Any], typ: pa.DataType) -> pa.Array:
    if typ == pa.uuid():
        storage = pa.array([None if v is None else v.bytes for v in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(typ, storage)
    if typ == pa.json_():
        return pa.ExtensionArray.from_storage(typ, pa.array(values, pa.string()))
    return pa.array(values, typ)


def assert_same(actual: pa.Array, expected: pa.Array) -> None:
    """Equal values and validity; floats bit for bit (NaN == NaN, -0.0 != 0.0)."""
    assert actual.type == expected.type
    if pa.types.is_floating(actual.type):
        bits = pa.int32() if actual.type == pa.float32() else pa.int64()
        actual, expected = actual.view(bits), expected.view(bits)
    assert actual.equals(expected), (actual.to_pylist()[:20], expected.to_pylist()[:20])


def check_decoded(kinds: str, rows: list[tuple[Any, ...]], columns: list[Any], count: int,
                  precisions: list[int] | None = None, scales: list[int] | None = None) -> None:
    precisions, scales = precisions or [0] * len(kinds), scales or [0] * len(kinds)
    types = [arrow_type(k, p, s) for k, p, s in zip(kinds, precisions, scales, strict=True)]
    assert count == len(rows)
    for index, (array, typ) in enumerate(zip(to_arrays(columns, count, types), types, strict=True)):
        assert_same(array, expected_array([row[index] for row in rows], typ))


# --- strategies ------------------------------------------------------------------------------

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "b": st.booleans(),
    "h": st.integers(-(2**15), 2**15 - 1),
    "i": st.integers(-(2**31), 2**31 - 1),
    "l": st.integers(-(2**63), 2**63 - 1),
    "f": st.floats(width=32),  # NaN and ±inf included
    "d": st.floats(),
    "D": st.dates(),  # 0001-01-01 .. 9999-12-31
    "T": st.times(),
    "S": st.datetimes(),
    "s": st.text(),  # unicode, empty
    "y": st.binary(),
    "j": st.text(),
    "u": st.uuids(),
}
KINDS = "".join(VALUES)
#: numeric(12, 2) values, for the streams that have a numeric column (decoded with 12, 2)
NUMERIC_12_2 = st.integers(-(10**12 - 1), 10**12 - 1).map(lambda u: decimal.Decimal(f"{u}E-2"))


@st.composite
def tables(draw: st.DrawFn, kinds: str | None = None, max_rows: int = 12
           ) -> tuple[str, list[tuple[Any, ...]]]:
    if kinds is None:
        kinds = "".join(draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6)))
    row = st.tuples(*(st.none() | {**VALUES, "n": NUMERIC_12_2}[k] for k in kinds))
    return kinds, draw(st.lists(row, max_size=max_rows))


def decode_in_pieces(data: bytes, kinds: str, cuts: list[int], precisions: list[int] | None = None,
                     scales: list[int] | None = None) -> tuple[list[tuple[list[Any], int]], bool]:
    """Feed `data` cut at `cuts` the way `_CopyOut.batches` feeds fetched chunks: the undecoded
    rest of the previous chunk + the next one; the header skipped once whole."""
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    buffer, offset, header, decoded = b"", 0, False, []
    for piece in pieces:
        buffer = buffer[offset:] + piece if offset < len(buffer) else piece
        offset = 0
        if not header:
            if len(buffer) < len(HEADER):
                continue
            assert buffer.startswith(HEADER)
            offset, header = len(HEADER), True
        columns, rows, offset, ended = decode(buffer, offset, kinds, precisions, scales)
        assert 0 <= offset <= len(buffer)
        if rows:
            decoded.append((columns, rows))
        if ended:
            assert offset == len(buffer)
            return decoded, True
    return decoded, False


def check_pieces(kinds: str, rows: list[tuple[Any, ...]], decoded: list[tuple[list[Any], int]]) -> None:
    """The pieces' rows, concatenated, are `rows`."""
    types = [arrow_type(k) for k in kinds]
    assert sum(count for _, count in decoded) == len(rows)
    for index, typ in enumerate(types):
        chunks = [to_arrays(columns, count, types)[index] for columns, count in decoded]
        actual = pa.chunked_array(chunks, typ).combine_chunks() if chunks else expected_array([], typ)
        assert_same(actual, expected_array([row[index] for row in rows], typ))


# --- round trips -------------------------------------------------------------------------------

@given(tables(kinds="lsbdDS", max_rows=30))
def test_rows_of_the_common_kinds_round_trip(table: tuple[str, list[tuple[Any, ...]]]) -> None:
    kinds, rows = table
    data = stream(kinds, rows)
    columns, count, end, ended = decode(data, len(HEADER), kinds)
    assert ended and end == len(data)
    check_decoded(kinds, rows, columns, count)


@given(tables())
def test_rows_of_any_kinds_round_trip(table: tuple[str, list[tuple[Any, ...]]]) -> None:
    kinds, rows = table
    data = stream(kinds, rows)
    columns, count, end, ended = decode(data, len(HEADER), kinds)
    assert ended and end == len(data)
    check_decoded(kinds, rows, columns, count)


def test_explicit_values_of_every_kind() -> None:
    kinds = KINDS
    rows = [
        (True, -(2**15), -(2**31), -(2**63), float("nan"), float("-inf"), dt.date(1, 1, 1),
         dt.time(0, 0), dt.datetime(1, 1, 1), "", b"", "null", uuid.UUID(int=0)),
        (False, 2**15 - 1, 2**31 - 1, 2**63 - 1, -0.0, float("inf"), dt.date(9999, 12, 31),
         dt.time(23, 59, 59, 999999), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
         "é 日本 🎉", b"\x00\xff", '{"a": [1, 2.50]}', uuid.UUID(int=2**128 - 1)),
        (None,) * len(kinds),
        (True, 0, 0, 0, 1.5, 1e-310, dt.date(1970, 1, 1), dt.time(12), dt.datetime(1970, 1, 1),
         "x" * 70000, bytes(range(256)), "[]", uuid.UUID("6f1c2a4e-8b3d-4c5e-9f00-112233445566")),
        (None, 1, None, 1, None, 1.0, None, dt.time(0, 0, 0, 1), None, "a", None, "{}", None),
    ]
    data = stream(kinds, rows)
    columns, count, _, ended = decode(data, len(HEADER), kinds)
    assert ended
    check_decoded(kinds, rows, columns, count)
    assert [c[1] for c in columns] == [2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]  # NULL counts
    # NULL-free columns come without a validity bitmap
    columns, count, _, _ = decode(stream(kinds, rows[:2]), len(HEADER), kinds)
    assert all(c[0] is None and c[1] == 0 for c in columns)
    check_decoded(kinds, rows[:2], columns, count)


def test_no_rows_gives_empty_columns() -> None:
    kinds = KINDS
    columns, count, end, ended = decode(HEADER + TRAILER, len(HEADER), kinds)
    assert (count, end, ended) == (0, len(HEADER) + 2, True)
    check_decoded(kinds, [], columns, count)


# --- a stream split anywhere -------------------------------------------------------------------

SPLIT_KINDS = "lsjnyuT"
SPLIT_ROWS = [
    (1, "é 日本", '{"a": 1}', decimal.Decimal("12345.67"), b"\x00\x01", uuid.UUID(int=7),
     dt.time(1, 2, 3)),
    (None, None, None, None, None, None, None),
    (-(2**63), "", "[]", decimal.Decimal("-0.01"), b"", uuid.UUID(int=0), dt.time(0)),
    (2**63 - 1, "x" * 300, '"s"', decimal.Decimal("0"), bytes(300), uuid.UUID(int=1),
     dt.time(23, 59, 59, 999999)),
]


def test_the_stream_split_at_every_byte_decodes_the_same_rows() -> None:
    precisions, scales = [0, 0, 0, 12, 0, 0, 0], [0, 0, 0, 2, 0, 0, 0]
    data = stream(SPLIT_KINDS, SPLIT_ROWS)
    whole, ended = decode_in_pieces(data, SPLIT_KINDS, [], precisions, scales)
    assert ended and [count for _, count in whole] == [len(SPLIT_ROWS)]
    types = [arrow_type(k, p, s) for k, p, s in zip(SPLIT_KINDS, precisions, scales, strict=True)]
    check_decoded(SPLIT_KINDS, SPLIT_ROWS, *whole[0], precisions, scales)
    expected = to_arrays(*whole[0], types)
    for cut in range(1, len(data)):
        decoded, ended = decode_in_pieces(data, SPLIT_KINDS, [cut], precisions, scales)
        assert ended, cut
        assert sum(count for _, count in decoded) == len(SPLIT_ROWS)
        for index, typ in enumerate(types):
            chunks = [to_arrays(columns, count, types)[index] for columns, count in decoded]
            assert_same(pa.chunked_array(chunks, typ).combine_chunks(), expected[index])
    # and one byte at a time: every tuple is decoded alone, exactly once
    decoded, ended = decode_in_pieces(data, SPLIT_KINDS, list(range(1, len(data))), precisions,
                                      scales)
    assert ended and [count for _, count in decoded] == [1] * len(SPLIT_ROWS)


@given(tables(max_rows=20), st.lists(st.floats(0, 1), max_size=12))
def test_the_stream_split_at_random_bytes_decodes_the_same_rows(
    table: tuple[str, list[tuple[Any, ...]]], fractions: list[float]
) -> None:
    kinds, rows = table
    data = stream(kinds, rows)
    cuts = sorted({int(f * len(data)) for f in fractions} - {0, len(data)})
    decoded, ended = decode_in_pieces(data, kinds, cuts)
    assert ended
    check_pieces(kinds, rows, decoded)


def test_a_truncated_tuple_is_left_for_the_next_call() -> None:
    kinds = "is"
    body = encode_rows(kinds, [(1, "abc"), (2, "defg")])
    first = len(encode_rows(kinds, [(1, "abc")]))
    for cut in range(len(body)):
        columns, rows, end, ended = decode(body[:cut], 0, kinds)
        assert not ended
        if cut < first:
            assert (rows, end) == (0, 0)
        else:
            assert (rows, end) == (1, first)
            check_decoded(kinds, [(1, "abc")], columns, rows)
    # an offset into the buffer is honoured, and returned unchanged when nothing is whole
    columns, rows, end, ended = decode(b"junk" + body[:first - 1], 4, kinds)
    assert (rows, end, ended) == (0, 4, False)
    columns, rows, end, ended = decode(b"junk" + body, 4, kinds)
    assert (rows, end, ended) == (2, 4 + len(body), False)


def test_the_trailer_ends_the_stream() -> None:
    kinds = "i"
    body = encode_rows(kinds, [(1,), (2,)])
    columns, rows, end, ended = decode(body + TRAILER + encode_rows(kinds, [(3,)]), 0, kinds)
    assert (rows, end, ended) == (2, len(body) + 2, True)  # nothing after the trailer is read
    check_decoded(kinds, [(1,), (2,)], columns, rows)
    assert decode(TRAILER, 0, kinds)[1:] == (0, 2, True)
    assert decode(TRAILER[:1], 0, kinds)[1:] == (0, 0, False)  # half a trailer: wait for more


def test_max_rows_bounds_one_call() -> None:
    kinds = "l"
    data = encode_rows(kinds, [(i,) for i in range(10)]) + TRAILER
    offset, seen = 0, []
    while True:
        columns, rows, offset, ended = decode(data, offset, kinds, max_rows=3)
        assert rows <= 3
        seen += to_arrays(columns, rows, [pa.int64()])[0].to_pylist()
        if ended:
            break
    assert seen == list(range(10))


# --- numeric -----------------------------------------------------------------------------------

EXACT = decimal.Context(prec=200)  # never rounds the values built here

@st.composite
def fitting_numerics(draw: st.DrawFn) -> tuple[decimal.Decimal, int, int, bool]:
    """(value, precision, scale, pad) with the value fitting numeric(precision, scale)."""
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    limit = 10**precision - 1
    unscaled = draw(st.integers(-limit, limit) | st.sampled_from([limit, -limit, 0, 1, -1]))
    value = decimal.Decimal(f"{unscaled}E-{scale}")
    if draw(st.booleans()):  # fewer digits than the scale (1.5 in a numeric(5,2)) or 1E+3
        value = value.normalize(EXACT)
    return value, precision, scale, draw(st.booleans())


@given(fitting_numerics())
def test_numerics_that_fit_decode_exactly(case: tuple[decimal.Decimal, int, int, bool]) -> None:
    value, precision, scale, pad = case
    payload = numeric_bytes(value, pad_leading=int(pad), pad_trailing=2 * int(pad))
    data = tuple_bytes([payload]) + tuple_bytes([None])
    columns, rows, _, _ = decode(data, 0, "n", [precision], [scale])
    [array] = to_arrays(columns, rows, [pa.decimal128(precision, scale)])
    assert array.to_pylist() == [value, None]
    assert array.to_pylist()[0].as_tuple().exponent == -scale  # at the column's scale


@st.composite
def unfitting_numerics(draw: st.DrawFn) -> tuple[decimal.Decimal, int, int]:
    """(value, precision, scale): too many integer digits, or a non-zero digit beyond the scale."""
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    if draw(st.booleans()):
        unscaled = draw(st.integers(10**precision, 10 ** (precision + draw(st.integers(0, 40)) + 1)))
        value = decimal.Decimal(f"{unscaled}E-{scale}")
    else:
        extra = draw(st.integers(1, 20))
        unscaled = draw(st.integers(0, 10 ** (precision + extra))) * 10 + draw(st.integers(1, 9))
        value = decimal.Decimal(f"{unscaled}E-{scale + extra}")
    if draw(st.booleans()):
        value = value.copy_negate()
    return value, precision, scale


@given(unfitting_numerics())
def test_numerics_that_do_not_fit_are_refused(case: tuple[decimal.Decimal, int, int]) -> None:
    value, precision, scale = case
    data = tuple_bytes([numeric_bytes(decimal.Decimal(1))]) + tuple_bytes([numeric_bytes(value)])
    with pytest.raises(ValueError) as caught:
        decode(data, 0, "n", [precision], [scale])
    assert caught.value.args == ("value", 0, 6), (value, precision, scale)


@pytest.mark.parametrize(("value", "code"), [
    (decimal.Decimal("NaN"), 3), (decimal.Decimal("Infinity"), 4), (decimal.Decimal("-Infinity"), 5),
])
def test_numeric_nan_and_infinities_are_refused(value: decimal.Decimal, code: int) -> None:
    data = tuple_bytes([b"\x00\x00\x00\x01", numeric_bytes(decimal.Decimal("1.5"))]) + tuple_bytes(
        [b"\x00\x00\x00\x02", numeric_bytes(value)])
    with pytest.raises(ValueError) as caught:
        decode(data, 0, "in", [0, 10], [0, 2])
    assert caught.value.args == ("value", 1, code)


@pytest.mark.parametrize(("value", "precision", "scale"), [
    ("99999999999999999999999999999999999999", 38, 0),
    ("-99999999999999999999999999999999999999", 38, 0),
    ("9999999999999999999999999999.9999999999", 38, 10),
    ("0.99999999999999999999999999999999999999", 38, 38),
    ("1E-38", 38, 38), ("9", 1, 0), ("-0.5", 1, 1), ("9999999999.99", 12, 2), ("0.01", 12, 2),
    ("99999", 5, 0), ("-99999.99999", 10, 5), ("10000", 5, 0), ("100000000", 9, 0),
    ("0", 1, 0), ("-0", 5, 2), ("0.0001", 4, 4),
])
def test_numeric_boundaries_decode_exactly(value: str, precision: int, scale: int) -> None:
    columns, rows, _, _ = decode(tuple_bytes([numeric_bytes(decimal.Decimal(value))]), 0, "n",
                                 [precision], [scale])
    [array] = to_arrays(columns, rows, [pa.decimal128(precision, scale)])
    expected = decimal.Decimal(value).quantize(decimal.Decimal(f"1E-{scale}"), context=EXACT)
    assert array.to_pylist() == [expected]
    assert array.to_pylist()[0].as_tuple().exponent == -scale  # at the column's scale


@pytest.mark.parametrize(("value", "precision", "scale"), [
    ("100000000000000000000000000000000000000", 38, 0),  # 10^38
    ("10000000000000000000000000000", 38, 10),  # 29 integer digits
    ("1", 38, 38), ("1E-39", 38, 38), ("10", 1, 0), ("1E+100", 38, 0), ("1E-100", 38, 10),
    ("0.001", 12, 2), ("100000", 5, 0), ("99999.999999", 10, 5), ("10000", 4, 0),
])
def test_numeric_just_past_the_boundaries_is_refused(value: str, precision: int, scale: int) -> None:
    with pytest.raises(ValueError) as caught:
        decode(tuple_bytes([numeric_bytes(decimal.Decimal(value))]), 0, "n", [precision], [scale])
    assert caught.value.args == ("value", 0, 6)


# --- value errors -------------------------------------------------------------------------------

INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN = 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)
DAY_US = 86_400_000_000


@pytest.mark.parametrize(("kind", "payload", "code"), [
    ("D", struct.pack("!i", INT32_MAX), 1),  # date 'infinity'
    ("D", struct.pack("!i", INT32_MIN), 1),  # date '-infinity'
    ("D", struct.pack("!i", (dt.date(1, 1, 1) - PG_EPOCH_DATE).days - 1), 1),  # 0000-12-31 (1 BC)
    ("D", struct.pack("!i", (dt.date(9999, 12, 31) - PG_EPOCH_DATE).days + 1), 1),  # 10000-01-01
    ("S", struct.pack("!q", INT64_MAX), 1),  # timestamp 'infinity'
    ("S", struct.pack("!q", INT64_MIN), 1),  # timestamp '-infinity'
    ("S", struct.pack("!q", (dt.datetime(1, 1, 1) - PG_EPOCH) // US - 1), 1),
    ("S", struct.pack("!q", (dt.datetime(9999, 12, 31, 23, 59, 59, 999999) - PG_EPOCH) // US + 1), 1),
    ("T", struct.pack("!q", DAY_US), 2),  # time '24:00:00'
    ("T", struct.pack("!q", -1), 2),
])
def test_values_arrow_cannot_hold_are_refused(kind: str, payload: bytes, code: int) -> None:
    good = {"D": dt.date(2000, 1, 1), "S": dt.datetime(2000, 1, 1), "T": dt.time(0)}[kind]
    data = (tuple_bytes([encode_value("s", "a"), encode_value(kind, good)])
            + tuple_bytes([None, payload]))
    with pytest.raises(ValueError) as caught:
        decode(data, 0, "s" + kind)
    assert caught.value.args == ("value", 1, code)


# --- malformed data ------------------------------------------------------------------------------

def protocol_error(data: bytes, kinds: str, precisions: list[int] | None = None,
                   scales: list[int] | None = None) -> tuple[Any, ...]:
    with pytest.raises(ValueError) as caught:
        decode(data, 0, kinds, precisions, scales)
    assert caught.value.args[0] == "protocol", caught.value.args
    return caught.value.args


GOOD_ROW = tuple_bytes([struct.pack("!i", 1), b"\x01x"])  # (int4, jsonb)


def test_a_wrong_field_count_is_a_protocol_error() -> None:
    for count in (1, 3, 0, -2):
        payloads = [struct.pack("!i", 1), b"\x01x", b"", b""][:max(count, 0)]
        assert protocol_error(GOOD_ROW + tuple_bytes(payloads, count), "ij") == ("protocol", 0, 1)


@pytest.mark.parametrize(("kind", "length"), [
    ("b", 0), ("b", 2), ("h", 4), ("i", 2), ("i", 8), ("l", 4), ("f", 8), ("d", 4), ("D", 8),
    ("T", 4), ("S", 16), ("u", 15), ("u", 17),
])
def test_a_fixed_width_field_of_the_wrong_length_is_a_protocol_error(kind: str, length: int) -> None:
    data = GOOD_ROW + tuple_bytes([struct.pack("!i", 2), b"\x01y"]) + tuple_bytes(
        [struct.pack("!i", 3), b"\x01z", b"\x00" * length])
    assert protocol_error(data, "ij" + kind) == ("protocol", 0, 0)  # row 0: the count is wrong
    rows = GOOD_ROW[2:]  # the same tuples with the third column
    first = struct.pack("!h", 3) + rows + field(encode_value(kind, {
        "b": True, "h": 1, "i": 1, "l": 1, "f": 1.0, "d": 1.0, "D": dt.date(2000, 1, 1),
        "T": dt.time(0), "S": dt.datetime(2000, 1, 1), "u": uuid.UUID(int=1)}[kind]))
    bad = struct.pack("!h", 3) + rows + field(b"\x00" * length)
    assert protocol_error(first + bad, "ij" + kind) == ("protocol", 2, 1)


def test_jsonb_without_its_version_byte_is_a_protocol_error() -> None:
    for payload in (b'{"a": 1}', b"", b"\x02{}"):
        data = GOOD_ROW + tuple_bytes([struct.pack("!i", 2), payload])
        assert protocol_error(data, "ij") == ("protocol", 1, 1)


def test_a_negative_length_other_than_null_is_a_protocol_error() -> None:
    data = GOOD_ROW + struct.pack("!h", 2) + field(struct.pack("!i", 2)) + struct.pack("!i", -2)
    assert protocol_error(data, "ij") == ("protocol", 1, 1)


@pytest.mark.parametrize("payload", [
    struct.pack("!hhH", 1, 0, 0),  # shorter than the 8-byte head
    struct.pack("!hhHh", 2, 0, 0, 0) + struct.pack("!H", 1),  # fewer digits than ndigits
    struct.pack("!hhHhH", 1, 0, 0, 0, 10000),  # a base-10000 digit > 9999
    struct.pack("!hhHhH", 1, 0, 0x8000, 0, 1),  # an unknown sign
    struct.pack("!hhHh", -1, 0, 0, 0),  # negative ndigits
])
def test_a_malformed_numeric_is_a_protocol_error(payload: bytes) -> None:
    data = tuple_bytes([numeric_bytes(decimal.Decimal(1))]) + tuple_bytes([payload])
    assert protocol_error(data, "n", [10], [2]) == ("protocol", 0, 1)


def test_bad_arguments_are_refused() -> None:
    data = tuple_bytes([struct.pack("!i", 1)])
    for args in (
        (data, -1, b"i", [0], [0], 10), (data, len(data) + 1, b"i", [0], [0], 10),
        (data, 0, b"i", [0], [0], -1), (data, 0, b"", [], [], 10),
        (data, 0, b"x", [0], [0], 10), (data, 0, b"i", [0, 0], [0], 10),
        (data, 0, b"n", [0], [0], 10), (data, 0, b"n", [39], [0], 10),
        (data, 0, b"n", [10], [-1], 10),
    ):
        with pytest.raises(ValueError) as caught:
            _decoder().decode(*args)
        assert len(caught.value.args) == 1, args  # a plain message, not a value/protocol error


# --- the Python side: _CopyOut.batches over scripted fetches -------------------------------------

class ScriptedCopyOut(pg_binary._CopyOut):
    """`_CopyOut` with `_fetch` replaced by pieces of a prepared stream (no connection)."""

    def __init__(self, pieces: list[bytes], schema: pa.Schema, kinds: str) -> None:
        self._pieces = list(pieces)
        self._schema = schema
        self._max_value_mb = 1024
        self._kinds = kinds.encode()
        self._precisions = [f.type.precision if pa.types.is_decimal(f.type) else 0 for f in schema]
        self._scales = [f.type.scale if pa.types.is_decimal(f.type) else 0 for f in schema]
        self.state = "open"
        self.truncated = False

    def _fetch(self, max_bytes: int) -> bytes:
        piece = self._pieces.pop(0) if self._pieces else b""
        if not self._pieces:
            self.state = "ended"
        return piece


def _scripted(data: bytes, cuts: list[int]) -> Iterator[pa.RecordBatch]:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("n", pa.decimal128(12, 2))])
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return ScriptedCopyOut(pieces, schema, "lsn").batches(1 << 20)


def test_copy_out_batches_carry_partial_tuples_over_every_split() -> None:
    rows = [(i, "é" * i, decimal.Decimal(i).scaleb(-2)) for i in range(6)] + [(None, None, None)]
    data = stream("lsn", rows)
    for cut in range(1, len(data)):
        batches = list(_scripted(data, [cut]))
        table = pa.Table.from_batches(batches)
        assert table.to_pylist() == [dict(zip(("id", "s", "n"), r, strict=True)) for r in rows], cut


def test_copy_out_batches_stop_at_a_stream_without_its_trailer_and_flag_it() -> None:
    """libpq ends the COPY data the same way for a server error and a clean end: `batches`
    stops and flags the truncation; `finish` then raises the server's error or, when the
    server reported success, the truncation (tested against the server in test_pg_binary)."""
    data = stream("lsn", [(1, "a", decimal.Decimal("1.00"))])
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("n", pa.decimal128(12, 2))])
    out = ScriptedCopyOut([data[: len(HEADER) + 3], data[len(HEADER) + 3: -2]], schema, "lsn")
    batches = list(out.batches(1 << 20))
    assert pa.Table.from_batches(batches).to_pylist() == [{"id": 1, "s": "a", "n": decimal.Decimal("1.00")}]
    assert out.truncated is True
    whole = ScriptedCopyOut([data], schema, "lsn")
    assert len(list(whole.batches(1 << 20))) == 1 and whole.truncated is False


# --- arbitrary bytes never crash the decoder ------------------------------------------------------

@st.composite
def damaged_streams(draw: st.DrawFn) -> tuple[bytes, str]:
    """A valid stream of random rows with a few bytes overwritten, or cut short."""
    kinds, rows = draw(tables(kinds=draw(st.sampled_from(["lsn", "ybD", "jTu", "hifdS"])),
                              max_rows=8))
    data = bytearray(stream(kinds, rows)[len(HEADER):])
    for _ in range(draw(st.integers(0, 4))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data[:draw(st.integers(0, len(data)))]), kinds


@given(damaged_streams() | st.tuples(st.binary(max_size=200), st.sampled_from(KINDS + "n")))
def test_damaged_or_arbitrary_bytes_decode_or_raise_value_error(case: tuple[bytes, str]) -> None:
    data, kinds = case
    precisions = [12 if k == "n" else 0 for k in kinds]
    scales = [2 if k == "n" else 0 for k in kinds]
    try:
        columns, rows, end, _ = decode(data, 0, kinds, precisions, scales)
    except ValueError as exc:
        assert exc.args[0] in ("value", "protocol") and len(exc.args) == 3
        return
    assert 0 <= end <= len(data)
    # text is copied as sent (the server guarantees UTF-8): damaged text is checked as bytes
    to_arrays(columns, rows, [pa.binary() if k in "sj" else arrow_type(k, p, s) for k, p, s in
                              zip(kinds, precisions, scales, strict=True)])  # validated


def test_fetch_refuses_null_addresses() -> None:
    for args in ((0, 1, 1, 1), (1, 0, 1, 1), (1, 1, 0, 1), (1, 1, 1, 0)):
        with pytest.raises(ValueError, match="fetch"):
            _decoder().fetch(*args)
