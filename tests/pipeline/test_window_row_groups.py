"""A chunked export's row groups are sized for its windows (rivet_core/chunks/row_groups.py):
about four per window when the export has no `parquet:` block, the block's own sizing when it
has one. Read back with pyarrow (group counts, and the rows against the source), against a
real PostgreSQL table whose catalog estimate the planner reads (ANALYZE)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.chunks.row_groups import (
    MIN_WINDOW_GROUP_ROWS,
    expected_window_rows,
    window_writer_options,
)
from rivet_core.format.base import WriterOptions
from tests.helpers import db_exec, rivet, source_block, write_config

ROWS, WINDOWS = 200_000, 4


def _export(tmp_path: Path, url: str, **extra: Any) -> list[Path]:
    config = write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_count": WINDOWS,
        "format": "parquet", "destination": {"type": "local", "path": "out"}, **extra}])
    done = rivet("run", "-c", str(config))
    assert done.returncode == 0, done.stderr
    parts = sorted((tmp_path / "out").rglob("*.parquet"))
    assert len(parts) == WINDOWS
    return parts


@pytest.fixture
def items(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items AS SELECT g AS id, md5(g::text) AS name FROM generate_series(1, "
                    f"{ROWS}) g", "ALTER TABLE items ADD PRIMARY KEY (id)", "ANALYZE items")
    return pg_url


def test_without_a_parquet_block_each_window_is_written_in_about_four_groups(tmp_path, items):
    parts = _export(tmp_path, items)
    groups = [pq.ParquetFile(p).metadata.num_row_groups for p in parts]
    assert all(4 <= g <= 5 for g in groups), groups  # 50 k rows a window, groups of ≤ 12.5 k
    ids = sorted(i for p in parts for i in pq.read_table(p).column("id").to_pylist())
    assert ids == list(range(1, ROWS + 1))


def test_a_parquet_block_sizes_the_groups_itself(tmp_path, items):
    parts = _export(tmp_path, items, parquet={"row_group_strategy": "fixed_rows", "row_group_rows": 1_000_000})
    assert [pq.ParquetFile(p).metadata.num_row_groups for p in parts] == [1] * WINDOWS


def _layout(strategy: str, size: int, windows: int, estimate: int | None) -> ChunkLayout:
    keys = tuple(ChunkWindow(index=i, lo=str(i), hi=str(i), key=f"k{i}") for i in range(windows))
    return ChunkLayout(export_name="e", strategy=strategy, column="id", size=size, windows=keys, plan_hash="",
                       row_estimate=estimate)


@given(strategy=st.sampled_from(["range", "count", "dense", "keyset", "days"]),
       size=st.integers(1, 10**7), windows=st.integers(1, 500),
       estimate=st.one_of(st.none(), st.integers(0, 10**9)),
       cap=st.one_of(st.none(), st.integers(1, 2 * 10**6)), user_sized=st.booleans())
def test_the_cap_never_raises_a_cap_and_never_goes_below_the_floor(strategy, size, windows, estimate, cap, user_sized):
    options = WriterOptions(format="parquet", row_group_row_cap=cap)
    layout = _layout(strategy, size, windows, estimate)
    sized = window_writer_options(options, layout, user_sized=user_sized)
    rows = expected_window_rows(layout)
    if user_sized or rows is None:
        assert sized == options
        return
    assert sized.row_group_row_cap is not None
    assert sized.row_group_row_cap <= (cap if cap is not None else sized.row_group_row_cap)
    assert sized.row_group_row_cap >= min(MIN_WINDOW_GROUP_ROWS, cap if cap is not None else MIN_WINDOW_GROUP_ROWS)
    assert window_writer_options(WriterOptions(format="csv"), layout, user_sized=False) == WriterOptions(format="csv")
