"""Meta columns: `_rivet_exported_at`, `_rivet_row_hash` and the canonical row bytes contract."""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from rivet_core.errors import ConfigError
from rivet_core.format import WriterOptions, open_writer
from rivet_core.format.meta_columns import (
    COL_EXPORTED_AT,
    COL_ROW_HASH,
    add_meta_columns,
    meta_schema,
    row_hashes,
)

AT = dt.datetime(2026, 1, 1, 12, 30, 0, 123456, tzinfo=dt.UTC)


def hashes(batch: pa.RecordBatch, row_hash: bool | list[str] = True) -> list[int]:
    return add_meta_columns(batch, exported_at=None, row_hash=row_hash).column(COL_ROW_HASH).to_pylist()


def cell(tag: bytes, payload: bytes) -> bytes:
    return bytes([len(tag)]) + tag + struct.pack("<I", len(payload)) + payload


def low64_signed(data: bytes) -> int:
    v = xxhash.xxh3_128_intdigest(data) & ((1 << 64) - 1)
    return v - (1 << 64) if v >= 1 << 63 else v


def test_the_row_hash_is_xxh3_128_low_bits_of_the_documented_canonical_bytes() -> None:
    batch = pa.record_batch({"id": pa.array([1, None], pa.int32()), "name": ["x", ""]})
    want0 = low64_signed(cell(b"int", struct.pack("<q", 1)) + cell(b"str", b"x"))
    want1 = low64_signed(b"\x00" + cell(b"str", b""))
    assert hashes(batch) == [want0, want1]


def test_the_row_hash_is_stable_across_runs_and_batch_splits() -> None:
    n = 1_000
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": pa.array([None if i % 7 == 0 else f"v{i}" for i in range(n)]),
        "f": pa.array([i / 3 for i in range(n)]),
    })
    whole = hashes(table.combine_chunks().to_batches()[0])
    again = hashes(table.combine_chunks().to_batches()[0])
    split = [h for b in table.to_batches(max_chunksize=37) for h in hashes(b)]
    sliced = hashes(table.to_batches()[0].slice(500, 100))
    assert whole == again == split
    assert sliced == whole[500:600]
    assert len(set(whole)) == n


def test_null_and_empty_string_hash_differently() -> None:
    batch = pa.record_batch({"s": pa.array([None, ""], pa.string())})
    a, b = hashes(batch)
    assert a != b


def test_adjacent_values_cannot_shift_into_each_other() -> None:
    batch = pa.record_batch({"a": ["ab", "a"], "b": ["c", "bc"]})
    a, b = hashes(batch)
    assert a != b


def test_values_of_different_types_hash_differently_but_widths_do_not_matter() -> None:
    as_int = hashes(pa.record_batch({"v": pa.array([1], pa.int64())}))
    as_str = hashes(pa.record_batch({"v": pa.array(["1"])}))
    as_int16 = hashes(pa.record_batch({"v": pa.array([1], pa.int16())}))
    assert as_int != as_str
    assert as_int == as_int16


def test_a_column_list_hashes_exactly_those_columns_in_that_order() -> None:
    batch = pa.record_batch({"a": [1, 2], "b": ["x", "y"], "c": [True, False]})
    other_c = pa.record_batch({"a": [1, 2], "b": ["x", "y"], "c": [False, None]})
    assert hashes(batch, ["a", "b"]) == hashes(other_c, ["a", "b"])
    assert hashes(batch, ["a", "b"]) != hashes(batch, ["b", "a"])
    assert hashes(batch, ["a", "b"]) != hashes(batch, True)


def test_every_source_type_can_be_hashed() -> None:
    batch = pa.record_batch({
        "b": pa.array([True, None]),
        "u64": pa.array([2**64 - 1, 0], pa.uint64()),
        "f32": pa.array([float("nan"), -0.0], pa.float32()),
        "dec": pa.array([decimal.Decimal("1.5"), None], pa.decimal128(38, 10)),
        "dec256": pa.array([decimal.Decimal("1.5"), None], pa.decimal256(50, 10)),
        "bin": pa.array([b"\x00", b""]),
        "d": pa.array([dt.date(2026, 1, 1), None]),
        "t": pa.array([dt.time(1), None], pa.time64("us")),
        "ts": pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("us")),
        "tsz": pa.array([AT, None], pa.timestamp("us", "UTC")),
        "li": pa.array([[1, None], []], pa.list_(pa.int32())),
        "ls": pa.array([["a", None], None], pa.list_(pa.string())),
        "j": pa.ExtensionArray.from_storage(pa.json_(), pa.array(['{"a":1}', None])),
        "u": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([uuid.uuid4().bytes, None], pa.binary(16))),
    })
    h = hashes(batch)
    assert len(h) == 2 and h[0] != h[1]


def test_zero_and_negative_zero_and_nan_payloads_are_canonical() -> None:
    nan_a = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    h = hashes(pa.record_batch({"f": pa.array([0.0, -0.0, float("nan"), nan_a])}))
    assert h[0] != h[1]
    assert h[2] == h[3]


def test_lists_hash_by_elements_and_distinguish_null_elements() -> None:
    t = pa.list_(pa.string())
    h = hashes(pa.record_batch({"l": pa.array([["a", "b"], ["ab"], ["a", None], ["a", ""], None, []], t)}))
    assert len(set(h)) == 6
    sliced = pa.array([["z"], ["a", "b"], ["ab"]], t).slice(1)
    assert hashes(pa.record_batch({"l": sliced})) == h[:2]


def test_exported_at_is_one_utc_microsecond_value_for_the_whole_batch() -> None:
    batch = pa.record_batch({"a": [1, 2, 3]})
    out = add_meta_columns(batch, exported_at=AT, row_hash=False)
    assert out.schema.field(COL_EXPORTED_AT).type == pa.timestamp("us", "UTC")
    assert out.column(COL_EXPORTED_AT).to_pylist() == [AT] * 3
    naive = add_meta_columns(batch, exported_at=AT.replace(tzinfo=None), row_hash=False)
    assert naive.column(COL_EXPORTED_AT).equals(out.column(COL_EXPORTED_AT))


def test_meta_schema_matches_the_enriched_batch_and_keeps_field_metadata() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), metadata={b"rivet.native_type": b"int8"})])
    batch = pa.RecordBatch.from_arrays([pa.array([1])], schema=schema)
    out = add_meta_columns(batch, exported_at=AT, row_hash=True)
    assert out.schema.equals(meta_schema(schema, True, True), check_metadata=True)
    assert out.schema.names == ["a", COL_EXPORTED_AT, COL_ROW_HASH]
    assert meta_schema(schema, False, False).equals(schema, check_metadata=True)


def test_enriched_batches_write_to_parquet(tmp_path: Path) -> None:
    batch = pa.record_batch({"a": [1, 2]})
    schema = meta_schema(batch.schema, True, ["a"])
    w = open_writer(tmp_path / "m.parquet", schema, WriterOptions(format="parquet"))
    w.write_batch(add_meta_columns(batch, exported_at=AT, row_hash=["a"]))
    w.finish()
    assert pq.read_table(tmp_path / "m.parquet").column(COL_ROW_HASH).to_pylist() == row_hashes(batch, ["a"]).to_pylist()


@pytest.mark.parametrize(
    ("row_hash", "match"),
    [([], "must not be empty"), (["a", "a"], "duplicate"), (["nope"], "unknown column")],
)
def test_bad_row_hash_column_lists_are_config_errors(row_hash: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        add_meta_columns(pa.record_batch({"a": [1]}), exported_at=None, row_hash=row_hash)


def test_a_query_column_named_like_a_meta_column_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        meta_schema(pa.schema([(COL_ROW_HASH, pa.int64())]), False, True)


def test_an_unhashable_type_names_the_column() -> None:
    batch = pa.record_batch({"st": pa.array([{"x": 1}])})
    with pytest.raises(ConfigError, match="column 'st'"):
        add_meta_columns(batch, exported_at=None, row_hash=True)
