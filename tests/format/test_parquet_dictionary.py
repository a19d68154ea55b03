"""Parquet dictionaries only where values repeat (rivet_core/format/dictionary.py).

Each test writes a part through the real writer and reads the file back with pyarrow: the
footer says which column chunks carry a dictionary page, and the values read back must equal
what was written, whatever the choice.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from rivet_core.format import WriterOptions, open_writer
from rivet_core.format.dictionary import NEARLY_UNIQUE, SAMPLE_ROWS, dictionary_columns, sample

ROWS = 50_000


def _write(path: Path, table: pa.Table, **options: object) -> pq.ParquetFile:
    writer = open_writer(path, table.schema, WriterOptions(format="parquet", **options))
    for batch in table.to_batches(max_chunksize=10_000):
        writer.write_batch(batch)
    writer.finish()
    return pq.ParquetFile(path)


def _with_dictionary(meta: pq.FileMetaData) -> dict[str, bool]:
    """Column → whether every row group's chunk of it has a dictionary page."""
    names = [meta.row_group(0).column(i).path_in_schema for i in range(meta.num_columns)]
    return {name: all(meta.row_group(g).column(i).dictionary_page_offset is not None
                      for g in range(meta.num_row_groups)) for i, name in enumerate(names)}


def _orders(rows: int = ROWS) -> pa.Table:
    ids = list(range(rows))
    return pa.table({
        "id": pa.array(ids, pa.int64()),                                   # unique
        "status": pa.array([("new", "paid", "shipped")[i % 3] for i in ids]),  # 3 values
        "customer": pa.array([i % 997 for i in ids], pa.int32()),          # ~0.02 per row
        "note": pa.array([f"note {i * 7919 % rows}" for i in ids]),        # unique text
        "maybe": pa.array([None if i % 2 else i for i in ids], pa.int64()),  # unique when set
        "empty": pa.array([None] * rows, pa.string()),                     # all NULL
        "ext_id": pa.array([uuid.UUID(int=i).bytes for i in ids], pa.uuid()),
    })


def test_unique_columns_are_written_plain_and_repeating_ones_keep_their_dictionary(tmp_path: Path) -> None:
    table = _orders()
    part = _write(tmp_path / "orders.parquet", table)
    assert part.metadata.num_row_groups >= 1
    assert _with_dictionary(part.metadata) == {
        "id": False, "status": True, "customer": True, "note": False, "maybe": False, "empty": True,
        "ext_id": False}
    assert part.read().equals(table)


def test_the_choice_makes_the_file_smaller_than_a_dictionary_for_every_column(tmp_path: Path) -> None:
    table = _orders()
    chosen = (tmp_path / "chosen.parquet")
    _write(chosen, table)
    everything = tmp_path / "all.parquet"
    pq.write_table(table, everything, compression="zstd", compression_level=3, use_dictionary=True,
                   row_group_size=table.num_rows)
    assert chosen.stat().st_size < everything.stat().st_size
    assert pq.read_table(chosen).equals(pq.read_table(everything))


def test_a_nested_column_or_a_dotted_name_keeps_every_dictionary(tmp_path: Path) -> None:
    ids = list(range(5_000))
    nested = pa.table({"id": pa.array(ids, pa.int64()), "tags": pa.array([[i, i + 1] for i in ids])})
    assert dictionary_columns(nested) is True
    part = _write(tmp_path / "nested.parquet", nested)
    assert all(_with_dictionary(part.metadata).values())
    assert part.read().equals(nested)
    dotted = pa.table({"a.b": pa.array(ids, pa.int64()), "c": pa.array(ids, pa.int64())})
    assert dictionary_columns(dotted) is True


def test_every_column_repeating_keeps_the_writers_default(tmp_path: Path) -> None:
    table = pa.table({"k": pa.array([i % 5 for i in range(20_000)], pa.int64())})
    assert dictionary_columns(table) is True
    part = _write(tmp_path / "k.parquet", table)
    assert _with_dictionary(part.metadata) == {"k": True}


def test_a_part_without_rows_is_a_valid_empty_file(tmp_path: Path) -> None:
    schema = _orders(0).schema
    path = tmp_path / "empty.parquet"
    writer = open_writer(path, schema, WriterOptions(format="parquet"))
    writer.finish()
    back = pq.read_table(path)
    assert back.num_rows == 0 and back.schema.equals(schema, check_metadata=False)


def test_the_sample_is_spread_over_the_group_not_its_first_rows() -> None:
    rows = 100_000
    # Sorted by the column: the first 4,096 rows hold one value, the group 20.
    table = pa.table({"sorted": pa.array([i // 5_000 for i in range(rows)], pa.int64())})
    taken = sample(table)
    assert taken.num_rows == SAMPLE_ROWS
    seen = set(taken.column(0).to_pylist())
    assert len(seen) >= 8 and max(seen) >= 17, seen  # one run from each eighth of the group


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(min_value=1, max_value=6_000), distinct=st.integers(min_value=1, max_value=6_000),
       null_every=st.integers(min_value=0, max_value=5), text=st.booleans())
def test_property_whatever_the_cardinality_the_values_read_back_unchanged(
        tmp_path_factory: object, rows: int, distinct: int, null_every: int, text: bool) -> None:
    values = [None if null_every and i % (null_every + 1) == 0 else (i * 31) % distinct for i in range(rows)]
    column = pa.array([None if v is None else f"v{v}" for v in values]) if text else pa.array(values, pa.int64())
    table = pa.table({"c": column, "id": pa.array(range(rows), pa.int64())})
    path = tmp_path_factory.mktemp("prop") / "p.parquet"  # type: ignore[attr-defined]
    part = _write(path, table)
    assert part.read().equals(table)
    non_null = [v for v in values if v is not None]
    share = len(set(non_null)) / len(non_null) if non_null else 0.0
    if rows <= SAMPLE_ROWS and non_null:  # the whole group is the sample: the rule is exact
        assert _with_dictionary(part.metadata)["c"] == (share < NEARLY_UNIQUE or not _plain_any(table))


def _plain_any(table: pa.Table) -> bool:
    """Whether the choice applies at all: some column is nearly unique (else every column
    keeps the writer's default, a dictionary)."""
    return dictionary_columns(table) is not True
