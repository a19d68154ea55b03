"""Batch sizing (docs/rivet-compat.md "Tuning and batch sizing") and the exact-or-loud column conversion rules."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError
from rivet_core.source import batch_rows, estimate_row_bytes
from rivet_core.source.batching import make_converter


def test_row_width_estimate_follows_the_reference_table() -> None:
    schema = pa.schema([
        ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()),
        ("f32", pa.float32()), ("d", pa.date32()), ("i64", pa.int64()), ("f64", pa.float64()),
        ("ts", pa.timestamp("us", "UTC")), ("t", pa.time64("us")), ("dec", pa.decimal128(12, 2)),
        ("s", pa.string()), ("bin", pa.binary()), ("j", pa.json_(pa.string())),
        ("u", pa.uuid()), ("l", pa.list_(pa.int32())),
    ])
    widths = [1, 1, 2, 4, 4, 4, 8, 8, 8, 8, 16, 256, 256, 256, 64, 64]
    assert estimate_row_bytes(schema) == sum(widths) + len(widths)


def test_batch_rows_uses_the_memory_target_clamped_or_the_static_size() -> None:
    narrow = pa.schema([("id", pa.int64())])  # 9 bytes/row
    assert batch_rows(narrow, ResolvedTuning(batch_size_memory_mb=32)) == 150_000
    wide = pa.schema([(f"s{i}", pa.string()) for i in range(100)])  # 25,700 bytes/row
    assert batch_rows(wide, ResolvedTuning(batch_size_memory_mb=32)) == 1_305
    assert batch_rows(wide, ResolvedTuning(batch_size_memory_mb=1)) == 1_000
    assert batch_rows(wide, ResolvedTuning(batch_size=2_000, batch_size_memory_mb=None)) == 2_000


def test_integers_never_silently_truncate_fractional_values() -> None:
    convert = make_converter(pa.int64(), "qty", direct=False)
    assert convert([1, 2.0, None, decimal.Decimal("3")]).to_pylist() == [1, 2, None, 3]
    with pytest.raises(SourceError, match="column 'qty': value 2.5"):
        convert([1, 2.5])


def test_decimals_are_exact_and_overflow_is_loud() -> None:
    convert = make_converter(pa.decimal128(5, 2), "price", direct=False)
    assert convert([12.34, "1.5", 7]).to_pylist() == [
        decimal.Decimal("12.34"), decimal.Decimal("1.50"), decimal.Decimal("7.00")]
    with pytest.raises(SourceError, match="more than 5 significant digits"):
        convert([decimal.Decimal("12345.6")])


@given(st.decimals(min_value=-10**20, max_value=10**20, places=6, allow_nan=False))
def test_decimal_values_within_the_type_round_trip_unchanged(value: decimal.Decimal) -> None:
    convert = make_converter(pa.decimal128(38, 6), "d", direct=True)
    assert convert([value]).to_pylist() == [value]


def test_timestamps_convert_instants_to_utc_and_keep_naive_wall_clock() -> None:
    aware = dt.datetime(2024, 1, 1, 7, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    to_utc = make_converter(pa.timestamp("us", "UTC"), "at", direct=False)
    assert to_utc([aware, "2024-01-01 05:00:00"]).to_pylist() == [
        dt.datetime(2024, 1, 1, 5, tzinfo=dt.UTC)] * 2
    naive = make_converter(pa.timestamp("us"), "at", direct=False)
    assert naive(["0000-00-00 00:00:00", "2024-01-01T05:00:00.5"]).to_pylist() == [
        None, dt.datetime(2024, 1, 1, 5, 0, 0, 500000)]


def test_floats_keep_nan_and_infinities() -> None:
    values = make_converter(pa.float64(), "f", direct=True)(
        [float("nan"), float("inf"), float("-inf"), -0.0]).to_pylist()
    assert values[0] != values[0] and values[1:3] == [float("inf"), float("-inf")]
    assert str(values[3]) == "-0.0"
