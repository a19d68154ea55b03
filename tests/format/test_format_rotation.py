"""Part rotation: size-capped parts, naming, 0-row and single-part results, abort."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rivet_core.errors import ConfigError, RivetError
from rivet_core.format import PartRotator, StagedPart, WriterOptions
from rivet_core.format.rotation import SIZE_TOLERANCE

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
PARQUET_SMALL_GROUPS = WriterOptions(format="parquet", row_group_strategy="fixed_rows", row_group_rows=100)
CSV = WriterOptions(format="csv")


def batches(total: int, size: int) -> list[pa.RecordBatch]:
    out = []
    for start in range(0, total, size):
        ids = list(range(start, min(start + size, total)))
        out.append(pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"name-{i:06d}" for i in ids])],
                                   schema=SCHEMA))
    return out


def run(tmp_path: Path, options: WriterOptions, max_size: int | None, total: int, size: int) -> list[StagedPart]:
    rot = PartRotator(tmp_path, "orders_20260101_120000_000", SCHEMA, options, max_size)
    for b in batches(total, size):
        rot.write_batch(b)
    assert rot.rows_written == total
    return rot.finish()


def test_parquet_parts_rotate_at_the_size_cap_and_are_each_complete(tmp_path: Path) -> None:
    parts = run(tmp_path, PARQUET_SMALL_GROUPS, max_size=2_000, total=1_000, size=100)
    assert len(parts) > 2
    assert [p.path.name for p in parts] == [
        f"orders_20260101_120000_000_part{i}.parquet" for i in range(len(parts))
    ]
    assert sum(p.rows for p in parts) == 1_000
    ids: list[int] = []
    for p in parts:
        table = pq.read_table(p.path)  # each part is a complete Parquet file
        assert table.num_rows == p.rows
        assert p.size_bytes == p.path.stat().st_size
        ids += table.column("id").to_pylist()
    assert ids == list(range(1_000))
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(p.path.name for p in parts)


def test_csv_parts_rotate_and_each_has_a_header(tmp_path: Path) -> None:
    parts = run(tmp_path, CSV, max_size=1_000, total=500, size=40)
    assert len(parts) > 2
    assert [p.path.name for p in parts] == [
        f"orders_20260101_120000_000_part{i}.csv" for i in range(len(parts))
    ]
    total = 0
    for p in parts:
        with open(p.path, newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["id", "name"]
        total += len(rows) - 1
        assert len(rows) - 1 == p.rows
    assert total == 500


def test_a_single_part_gets_the_unsuffixed_name(tmp_path: Path) -> None:
    parts = run(tmp_path, PARQUET_SMALL_GROUPS, max_size=None, total=1_000, size=100)
    assert [p.path.name for p in parts] == ["orders_20260101_120000_000.parquet"]
    assert parts[0].rows == 1_000
    assert pq.read_table(parts[0].path).num_rows == 1_000


def test_a_part_filled_exactly_by_the_last_batch_leaves_no_empty_trailing_part(tmp_path: Path) -> None:
    parts = run(tmp_path, CSV, max_size=1, total=3, size=1)  # every batch fills a part
    assert [p.rows for p in parts] == [1, 1, 1]
    assert len(list(tmp_path.iterdir())) == 3


def test_zero_rows_produce_no_file(tmp_path: Path) -> None:
    rot = PartRotator(tmp_path, "empty", SCHEMA, PARQUET_SMALL_GROUPS, 1_000)
    rot.write_batch(pa.record_batch([pa.array([], pa.int64()), pa.array([], pa.string())], schema=SCHEMA))
    assert rot.finish() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_cap_is_honoured_below_the_row_group_size(tmp_path: Path, fmt: str) -> None:
    # Issue 20 item 8: `1MB` used to give 11.9 MB Parquet parts, because auto-sized row
    # groups (128 MB, capped at 1,048,576 rows) only flush when full. Row groups are now
    # sized down to the budget; every part but the last is close to the cap and none is
    # over it by more than the stated tolerance. Re-read with pyarrow: every row, in order.
    # Parquet: 128 KiB, so the sequential ids and names (PLAIN-encoded, format/dictionary.py,
    # which zstd shrinks to ~0.43 MB) still make several parts.
    cap = (128 if fmt == "parquet" else 256) * 1024
    parts = run(tmp_path, WriterOptions(format=fmt), max_size=cap, total=300_000, size=65_536)
    sizes = [p.path.stat().st_size for p in parts]
    assert len(parts) >= 3
    assert max(sizes) <= cap * (1 + SIZE_TOLERANCE), sizes
    assert min(sizes[:-1]) >= cap * 0.9, sizes  # sized to the cap, not far below it
    ids: list[int] = []
    for p in parts:
        if fmt == "parquet":
            meta = pq.ParquetFile(p.path).metadata
            assert meta.num_row_groups > 1  # groups sized down to a fraction of the part
            table = pq.read_table(p.path)
        else:
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(p.path)
        assert table.num_rows == p.rows and p.size_bytes == p.path.stat().st_size
        ids += table.column("id").to_pylist()
    assert ids == list(range(300_000))


def test_a_cap_below_one_row_gives_one_row_per_part(tmp_path: Path) -> None:
    parts = run(tmp_path, WriterOptions(format="parquet"), max_size=100, total=50, size=10)
    assert [p.rows for p in parts] == [1] * 50  # a part always holds at least one row
    assert [pq.read_table(p.path).column("id")[0].as_py() for p in parts] == list(range(50))


def test_staged_files_are_dot_prefixed_until_finish(tmp_path: Path) -> None:
    rot = PartRotator(tmp_path, "x", SCHEMA, CSV, 200)
    for b in batches(100, 10):
        rot.write_batch(b)
    assert all(p.name.startswith(".") and p.name.endswith(".partial") for p in tmp_path.iterdir())
    parts = rot.finish()
    assert all(not p.path.name.startswith(".") for p in parts)


def test_abort_removes_finished_and_open_parts(tmp_path: Path) -> None:
    rot = PartRotator(tmp_path, "x", SCHEMA, PARQUET_SMALL_GROUPS, 2_000)
    for b in batches(1_050, 100):
        rot.write_batch(b)
    assert len(list(tmp_path.iterdir())) > 1
    rot.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RivetError):
        rot.write_batch(batches(1, 1)[0])


def test_abort_after_finish_removes_the_renamed_parts(tmp_path: Path) -> None:
    rot = PartRotator(tmp_path, "x", SCHEMA, CSV, 500)
    for b in batches(200, 20):
        rot.write_batch(b)
    rot.finish()
    rot.abort()
    assert list(tmp_path.iterdir()) == []


def test_a_non_positive_cap_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_file_size"):
        PartRotator(tmp_path, "x", SCHEMA, CSV, 0)
