"""WriterOptions validation, file extensions and the Parquet row-group sizing rule."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rivet_core.errors import ConfigError
from rivet_core.format import WriterOptions, file_extension, open_writer
from rivet_core.format.base import estimate_row_bytes, row_group_rows


def test_extensions_follow_the_format_name() -> None:
    assert file_extension("parquet") == "parquet"
    assert file_extension("csv") == "csv"
    with pytest.raises(ConfigError, match="unknown format 'json'"):
        file_extension("json")


def test_codec_defaults_are_zstd_3_and_gzip_6() -> None:
    assert WriterOptions(format="parquet").effective_compression_level == 3
    assert WriterOptions(format="parquet", compression="gzip").effective_compression_level == 6
    assert WriterOptions(format="parquet", compression="snappy").effective_compression_level is None
    assert WriterOptions(format="parquet", compression="zstd", compression_level=9).effective_compression_level == 9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"compression": "brotli"}, "unknown compression"),
        ({"compression": "zstd", "compression_level": 23}, "out of range"),
        ({"compression": "gzip", "compression_level": 10}, "out of range"),
        ({"compression": "snappy", "compression_level": 1}, "not supported"),
        ({"row_group_strategy": "huge"}, "row_group_strategy"),
        ({"target_row_group_mb": 0}, "target_row_group_mb"),
        ({"max_row_group_mb": 0}, "max_row_group_mb"),
    ],
)
def test_invalid_parquet_options_are_config_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        WriterOptions(format="parquet", **kwargs)


def test_an_unknown_format_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown format"):
        WriterOptions(format="orc")


def test_row_width_estimate_follows_the_reference_table() -> None:
    schema = pa.schema([
        ("b", pa.bool_()), ("i16", pa.int16()), ("i32", pa.int32()), ("d", pa.date32()),
        ("i64", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("t", pa.time64("us")),
        ("dec", pa.decimal128(38, 10)), ("s", pa.string()), ("bin", pa.binary()),
        ("l", pa.list_(pa.int32())), ("u", pa.uuid()),
    ])
    widths = [1, 2, 4, 4, 8, 8, 8, 16, 256, 256, 64, 64]
    assert estimate_row_bytes(schema) == sum(widths) + len(widths)


def test_memory_strategies_derive_rows_from_target_mb_and_clamp() -> None:
    one_string = pa.schema([("s", pa.string())])  # 257 bytes/row
    assert row_group_rows(one_string, WriterOptions(format="parquet")) == 128 * 2**20 // 257
    assert row_group_rows(one_string, WriterOptions(format="parquet", row_group_strategy="fixed_memory",
                                                    target_row_group_mb=1)) == 2**20 // 257
    # the cap applies, but never below 1,000 rows
    assert row_group_rows(one_string, WriterOptions(format="parquet", max_row_group_mb=1)) == 2**20 // 257
    wide = pa.schema([(f"c{i}", pa.string()) for i in range(100)])  # 25,700 bytes/row
    assert row_group_rows(wide, WriterOptions(format="parquet", target_row_group_mb=1)) == 1_000
    assert row_group_rows(wide, WriterOptions(format="parquet", max_row_group_mb=1)) == 1_000
    tiny = pa.schema([("b", pa.bool_())])  # 2 bytes/row
    assert row_group_rows(tiny, WriterOptions(format="parquet", target_row_group_mb=1024)) == 10_000_000


def test_fixed_rows_uses_the_given_count_with_zero_clamped_to_one() -> None:
    schema = pa.schema([("a", pa.int64())])
    assert row_group_rows(schema, WriterOptions(format="parquet", row_group_strategy="fixed_rows",
                                                row_group_rows=5_000)) == 5_000
    assert row_group_rows(schema, WriterOptions(format="parquet", row_group_strategy="fixed_rows",
                                                row_group_rows=0)) == 1
    assert row_group_rows(schema, WriterOptions(format="parquet", row_group_strategy="fixed_rows")) == 1_048_576


def test_open_writer_dispatches_on_format(tmp_path) -> None:
    schema = pa.schema([("a", pa.int64())])
    for fmt in ("parquet", "csv"):
        w = open_writer(tmp_path / f"x.{fmt}", schema, WriterOptions(format=fmt))
        assert w.path == tmp_path / f"x.{fmt}"
        assert w.rows_written == 0
        w.abort()
    assert list(tmp_path.iterdir()) == []


def test_without_a_parquet_block_groups_are_capped_at_rivets_library_default(tmp_path) -> None:
    """docs/rivet-compat.md "Parquet": `parquet:` omitted → 1,048,576 rows per group (still within the
    128 MB estimate for wide rows)."""
    from rivet_core.config import load_config
    from rivet_core.unit.resolve import writer_options
    from tests.helpers import write_config

    narrow = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("v", pa.float64()), ("t", pa.timestamp("us"))])
    wide = pa.schema([(f"s{i}", pa.string()) for i in range(4)])
    exports = [{"name": "plain", "table": "t", "mode": "full", "format": "parquet",
                "destination": {"type": "local", "path": "out"}},
               {"name": "tuned", "table": "t", "mode": "full", "format": "parquet",
                "parquet": {"row_group_strategy": "auto"}, "destination": {"type": "local", "path": "out2"}}]
    config = load_config(write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{tmp_path / 's.db'}"},
                                      exports), {})
    plain, tuned = (writer_options(e) for e in config.exports)
    assert row_group_rows(narrow, plain) == 1_048_576
    assert row_group_rows(narrow, tuned) == 128 * 2**20 // estimate_row_bytes(narrow)  # 4,194,304
    assert row_group_rows(wide, plain) == row_group_rows(wide, tuned) == 128 * 2**20 // (4 * 257)
