"""The Parquet writer's memory budget (rivet_core/format/parquet.py): under the `auto`
strategy it never keeps more Arrow bytes buffered than `WriterOptions.buffer_budget_bytes`,
however large the table, and the file it writes still holds exactly the rows it was given
(re-read with pyarrow)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rivet_core.format.base import DEFAULT_BUFFER_BUDGET_BYTES, WriterOptions
from rivet_core.format.parquet import ParquetFileWriter

MIB = 2**20


def _batches(count: int, rows: int, text_bytes: int) -> list[pa.RecordBatch]:
    """Wide-ish rows; every fifth batch has rows four times as long (denser than the rest)."""
    out = []
    for b in range(count):
        width = text_bytes * (4 if b % 5 == 4 else 1)
        ids = pa.array(range(b * rows, (b + 1) * rows), pa.int64())
        notes = pa.array([f"{i:08d}".ljust(width, "x") for i in range(b * rows, (b + 1) * rows)])
        out.append(pa.record_batch([ids, notes], names=["id", "note"]))
    return out


def test_a_table_larger_than_the_budget_is_written_within_the_budget(tmp_path: Path) -> None:
    budget = 1 * MIB
    batches = _batches(count=60, rows=2_000, text_bytes=100)  # ~24 MiB of Arrow data
    total = sum(b.nbytes for b in batches)
    assert total > 10 * budget
    writer = ParquetFileWriter(tmp_path / "t.parquet", batches[0].schema,
                               WriterOptions(format="parquet", buffer_budget_bytes=budget))
    for batch in batches:
        writer.write_batch(batch)
        assert writer.max_buffered_bytes <= budget
    writer.finish()
    assert 0 < writer.max_buffered_bytes <= budget
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata
    assert meta.num_row_groups >= total // budget
    back = pq.read_table(tmp_path / "t.parquet")
    assert back.equals(pa.Table.from_batches(batches))


def test_the_auto_strategy_has_a_budget_by_default_and_explicit_strategies_do_not(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
    auto = ParquetFileWriter(tmp_path / "a.parquet", schema, WriterOptions(format="parquet"))
    fixed = ParquetFileWriter(tmp_path / "f.parquet", schema,
                              WriterOptions(format="parquet", row_group_strategy="fixed_rows", row_group_rows=50_000))
    assert auto.buffer_budget == DEFAULT_BUFFER_BUDGET_BYTES
    assert fixed.buffer_budget is None
    for batch in _batches(count=10, rows=5_000, text_bytes=200):
        fixed.write_batch(batch)
    fixed.finish()
    auto.abort()
    # the user's explicit group size is kept, even above the default budget
    assert pq.ParquetFile(tmp_path / "f.parquet").metadata.row_group(0).num_rows == 50_000
