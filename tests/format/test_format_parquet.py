"""Parquet writer: exact round-trips of every Arrow type the sources produce, codecs,
canonical logical types, reader-sized row groups, and the I1 finish/abort contract."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rivet_core.errors import RivetError
from rivet_core.format import WriterOptions, open_writer

BIG = "é" + "x" * (2**20) + "☃"  # a 1 MB value with multi-byte characters
D38 = decimal.Decimal("1234567890123456789012345678.1234567890")  # 38 digits, scale 10
D38_NEG = decimal.Decimal("-9999999999999999999999999999.9999999999")  # unary minus would round
D50 = decimal.Decimal("1234567890123456789012345678901234567890.0123456789")
D50_NEG = decimal.Decimal("-1234567890123456789012345678901234567890.0123456789")
U1 = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
U2 = uuid.UUID("ffffffff-0000-4000-8000-000000000001")


def _field(name: str, t: pa.DataType, native: str) -> pa.Field:
    return pa.field(name, t, metadata={b"rivet.native_type": native.encode()})


def all_types_table() -> pa.Table:
    """Four rows per type: typical, edge, NULL, and a last row that is NULL everywhere."""
    cols: dict[str, tuple[pa.DataType, list[object]]] = {
        "b": (pa.bool_(), [True, False, None, None]),
        "i8": (pa.int8(), [-128, 127, None, None]),
        "i16": (pa.int16(), [-32768, 32767, None, None]),
        "i32": (pa.int32(), [-(2**31), 2**31 - 1, None, None]),
        "i64": (pa.int64(), [-(2**63), 2**63 - 1, None, None]),
        "u64": (pa.uint64(), [0, 2**64 - 1, None, None]),
        "f32": (pa.float32(), [float("nan"), float("-inf"), -0.0, None]),
        "f64": (pa.float64(), [float("nan"), float("inf"), -0.0, None]),
        "f64b": (pa.float64(), [0.1, 1e308, 5e-324, None]),
        "dec": (pa.decimal128(38, 10), [D38, D38_NEG, decimal.Decimal("0.0000000001"), None]),
        "dec256": (pa.decimal256(50, 10), [D50, D50_NEG, decimal.Decimal(0), None]),
        "s": (pa.string(), ["héllo, \"wörld\"\n", "", BIG, None]),
        "bin": (pa.binary(), [b"\x00\xff\x10", b"", b"x" * 1000, None]),
        "d": (pa.date32(), [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2026, 1, 1), None]),
        "t": (pa.time64("us"), [dt.time(0, 0), dt.time(23, 59, 59, 999999), dt.time(12), None]),
        "ts": (pa.timestamp("us"), [dt.datetime(2026, 1, 1, 12), dt.datetime(1970, 1, 1, 0, 0, 0, 1),
                                    dt.datetime(1, 1, 1), None]),
        "tsz": (pa.timestamp("us", "UTC"), [dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC),
                                            dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
                                            dt.datetime(1970, 1, 1, tzinfo=dt.UTC), None]),
        "li": (pa.list_(pa.int32()), [[1, None, 3], [], None, None]),
        "ls": (pa.list_(pa.string()), [["a", None, ""], [None], None, None]),
    }
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for name, (t, values) in cols.items():
        arrays.append(pa.array(values, t))
        fields.append(_field(name, t, name))
    json_storage = pa.array(['{"a": 1}', "[]", '"x"', None], pa.string())
    arrays.append(pa.ExtensionArray.from_storage(pa.json_(), json_storage))
    fields.append(_field("j", pa.json_(), "jsonb"))
    uuid_storage = pa.array([U1.bytes, U2.bytes, None, None], pa.binary(16))
    arrays.append(pa.ExtensionArray.from_storage(pa.uuid(), uuid_storage))
    fields.append(_field("u", pa.uuid(), "uuid"))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def write(path: Path, table: pa.Table, options: WriterOptions, batch_rows: int = 1) -> None:
    w = open_writer(path, table.schema, options)
    for batch in table.to_batches(max_chunksize=batch_rows):
        w.write_batch(batch)
    w.finish()


def parquet_compliant(schema: pa.Schema) -> pa.Schema:
    """The schema as Parquet gives it back: list children are named `element` (the Parquet
    LIST spec) instead of Arrow's default `item`; everything else, metadata included, is kept."""
    fields = []
    for f in schema:
        if pa.types.is_list(f.type):
            f = f.with_type(pa.list_(f.type.value_field.with_name("element")))
        fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)


def assert_columns_identical(got: pa.Table, want: pa.Table) -> None:
    """Exact equality; floats compared bit-for-bit so NaN and -0.0 count."""
    want = want.cast(parquet_compliant(want.schema))
    assert got.schema.equals(want.schema, check_metadata=True), (got.schema, want.schema)
    for name in want.column_names:
        a, b = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if pa.types.is_floating(a.type):
            width = pa.int32() if a.type == pa.float32() else pa.int64()
            a, b = a.view(width), b.view(width)
        assert a.equals(b), f"column {name}: {a.to_pylist()[:3]} != {b.to_pylist()[:3]}"


def _same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y and math.copysign(1, x) == math.copysign(1, y)
    return x == y


CODECS = ["zstd", "snappy", "gzip", "lz4", "none"]


@pytest.mark.parametrize("codec", CODECS)
def test_every_source_type_round_trips_exactly_through_pyarrow_with_each_codec(
    tmp_path: Path, codec: str
) -> None:
    table = all_types_table()
    path = tmp_path / "all.parquet"
    write(path, table, WriterOptions(format="parquet", compression=codec))
    assert_columns_identical(pq.read_table(path), table)


@pytest.mark.parametrize("codec", CODECS)
def test_every_source_type_reads_back_identically_in_duckdb_with_each_codec(
    tmp_path: Path, codec: str
) -> None:
    table = all_types_table()
    path = tmp_path / "all.parquet"
    write(path, table, WriterOptions(format="parquet", compression=codec), batch_rows=3)
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    rel = con.sql(f"SELECT * FROM read_parquet('{path}')")
    rows = rel.fetchall()
    expected = table.to_pylist()
    assert len(rows) == len(expected)
    for name, col_idx in zip(table.column_names, range(len(table.column_names)), strict=True):
        for row, want_row in zip(rows, expected, strict=True):
            got, want = row[col_idx], want_row[name]
            if name == "dec256":
                # DuckDB has no decimal wider than 38 digits: it reads DOUBLE (pyarrow is exact).
                assert got is None if want is None else math.isclose(got, float(want))
            else:
                assert _same(got, want), f"{name}: {got!r} != {want!r}"
    types = dict(zip(rel.columns, [str(t) for t in rel.types], strict=True))
    assert types["u"] == "UUID"
    assert types["j"] == "JSON"
    assert types["dec"] == "DECIMAL(38,10)"
    assert types["u64"] == "UBIGINT"


def test_uuid_and_json_columns_carry_the_parquet_logical_types(tmp_path: Path) -> None:
    table = all_types_table()
    path = tmp_path / "lt.parquet"
    write(path, table, WriterOptions(format="parquet"))
    schema = pq.ParquetFile(path).schema
    by_name = {schema.column(i).name: schema.column(i) for i in range(len(schema))}
    assert by_name["u"].logical_type.type == "UUID"
    assert by_name["u"].physical_type == "FIXED_LEN_BYTE_ARRAY"
    assert by_name["j"].logical_type.type == "JSON"
    arrow = pq.read_schema(path)
    assert arrow.field("u").type == pa.uuid()
    assert arrow.field("j").type == pa.json_()
    assert arrow.field("u").metadata == {b"rivet.native_type": b"uuid"}


@pytest.mark.parametrize(
    ("codec", "level", "footer_name"),
    [("zstd", None, "ZSTD"), ("zstd", 19, "ZSTD"), ("snappy", None, "SNAPPY"),
     ("gzip", None, "GZIP"), ("gzip", 9, "GZIP"), ("lz4", None, "LZ4_RAW"),
     ("none", None, "UNCOMPRESSED")],
)
def test_each_codec_is_recorded_in_the_footer(
    tmp_path: Path, codec: str, level: int | None, footer_name: str
) -> None:
    table = pa.table({"a": list(range(5000)), "s": [f"v{i % 7}" for i in range(5000)]})
    path = tmp_path / "c.parquet"
    write(path, table, WriterOptions(format="parquet", compression=codec, compression_level=level),
          batch_rows=5000)
    rows = duckdb.sql(f"SELECT DISTINCT compression FROM parquet_metadata('{path}')").fetchall()
    assert rows == [(footer_name,)]


def test_small_batches_are_buffered_into_reader_sized_row_groups(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array(range(2500), pa.int64())})
    path = tmp_path / "rg.parquet"
    opts = WriterOptions(format="parquet", row_group_strategy="fixed_rows", row_group_rows=1000)
    w = open_writer(path, table.schema, opts)
    sizes_seen = []
    for batch in table.to_batches(max_chunksize=250):
        w.write_batch(batch)
        sizes_seen.append(w.bytes_written)
        assert w.bytes_written == path.stat().st_size
    w.finish()
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1000, 1000, 500]
    # Nothing is flushed until the first group is full; then the size jumps at group edges.
    assert sizes_seen[0] == sizes_seen[1] == sizes_seen[2] == 0
    assert sizes_seen[3] > 0 and sizes_seen[3] == sizes_seen[6]
    assert sizes_seen[7] > sizes_seen[6]
    assert w.rows_written == 2500
    assert pq.read_table(path).column("a").to_pylist() == list(range(2500))


def test_one_large_batch_is_split_into_row_groups_of_the_target_size(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array(range(3500), pa.int32())})
    path = tmp_path / "big.parquet"
    opts = WriterOptions(format="parquet", row_group_strategy="fixed_rows", row_group_rows=1000)
    write(path, table, opts, batch_rows=3500)
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1000, 1000, 1000, 500]


def test_batches_without_field_metadata_are_written_with_the_writer_schema(tmp_path: Path) -> None:
    schema = pa.schema([_field("a", pa.int64(), "int8")])
    path = tmp_path / "m.parquet"
    w = open_writer(path, schema, WriterOptions(format="parquet"))
    w.write_batch(pa.record_batch({"a": pa.array([1, 2], pa.int64())}))
    w.finish()
    assert pq.read_schema(path).field("a").metadata == {b"rivet.native_type": b"int8"}


def test_a_batch_with_different_column_types_is_rejected(tmp_path: Path) -> None:
    w = open_writer(tmp_path / "x.parquet", pa.schema([("a", pa.int64())]), WriterOptions(format="parquet"))
    with pytest.raises(RivetError, match="does not match the writer schema"):
        w.write_batch(pa.record_batch({"a": pa.array([1], pa.int32())}))
    w.abort()


def test_finish_produces_a_complete_file_that_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "done.parquet"
    table = pa.table({"a": [1, 2, 3]})
    w = open_writer(path, table.schema, WriterOptions(format="parquet"))
    w.write_batch(table.to_batches()[0])
    assert w.bytes_written == 0  # still buffered: the file has no row group yet
    w.finish()
    assert pq.read_table(path).equals(table)
    assert w.bytes_written == path.stat().st_size
    w.abort()  # abort after finish must not delete the finished file
    assert path.exists()


def test_an_aborted_writer_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "partial.parquet"
    table = pa.table({"a": list(range(5000))})
    w = open_writer(path, table.schema, WriterOptions(format="parquet", row_group_strategy="fixed_rows",
                                                      row_group_rows=1000))
    w.write_batch(table.to_batches()[0])
    assert path.stat().st_size > 0
    w.abort()
    assert not path.exists()
    w.abort()  # idempotent


def test_writing_after_finish_is_refused(tmp_path: Path) -> None:
    w = open_writer(tmp_path / "f.parquet", pa.schema([("a", pa.int64())]), WriterOptions(format="parquet"))
    w.finish()
    with pytest.raises(RivetError, match="already finished"):
        w.write_batch(pa.record_batch({"a": [1]}))


def test_a_zero_row_writer_still_finishes_into_a_valid_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    w = open_writer(path, pa.schema([("a", pa.int64())]), WriterOptions(format="parquet"))
    w.write_batch(pa.record_batch({"a": pa.array([], pa.int64())}))
    w.finish()
    assert pq.read_table(path).num_rows == 0
