"""`max_file_size` honoured below the row-group size (issue 20 item 8), end to end on PostgreSQL.

The reproduction: `max_file_size: 1MB` gave 11.9 MB Parquet parts, because auto-sized row
groups (up to 1,048,576 rows) only flush when full. Now row groups are sized down to the
budget and every part stays within the stated tolerance (rotation.SIZE_TOLERANCE). The
oracle re-reads every part the manifest lists with pyarrow: sizes on disk, and every source
row exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from rivet_core.format.rotation import SIZE_TOLERANCE
from tests.hardening.support import cli
from tests.helpers import db_exec, source_block, write_config

ROWS = 250_000
CAP = 1024 * 1024  # `1MB` (binary units)


@pytest.fixture
def pg_orders(pg_url: str) -> str:
    db_exec(pg_url,
            "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, amount NUMERIC(12, 2), "
            "created_at TIMESTAMP NOT NULL)",
            f"INSERT INTO orders SELECT g, 'customer-' || (g % 9973), (g % 100000) / 100.0, "
            f"TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' FROM generate_series(1, {ROWS}) g")
    return pg_url


def _parts(out: Path) -> list[Path]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [out / p["path"] for p in manifest["parts"]]


@pytest.mark.parametrize(("shape", "cap"), [
    # 512KB: the table's ids, amounts and timestamps are written PLAIN (format/dictionary.py),
    # ~1.3 MB in all, which must still make at least three parts.
    ({"mode": "full", "format": "parquet"}, CAP // 2),
    ({"mode": "full", "format": "csv"}, CAP),
    ({"mode": "chunked", "chunk_column": "id", "chunk_size": 100_000, "format": "parquet"}, CAP),
], ids=["full-parquet", "full-csv", "chunked-parquet"])
def test_parts_stay_within_max_file_size_and_hold_every_row(tmp_path, pg_orders, shape, cap):
    config = write_config(tmp_path, source_block(pg_orders), [{
        "name": "orders", "table": "orders", "max_file_size": f"{cap // 1024}KB",
        "destination": {"type": "local", "path": "out"}, **shape}])
    result = cli("run", "-c", str(config), "--validate")
    assert result.returncode == 0, result.stderr
    parts = _parts(tmp_path / "out")
    sizes = [p.stat().st_size for p in parts]
    assert len(parts) >= 3, sizes
    assert max(sizes) <= cap * (1 + SIZE_TOLERANCE), sizes
    ids: list[int] = []
    for p in parts:
        if p.suffix == ".parquet":
            meta = pq.ParquetFile(p).metadata
            assert meta.num_row_groups >= 1
            ids += pq.read_table(p, columns=["id"]).column("id").to_pylist()
        else:
            ids += pacsv.read_csv(p).column("id").to_pylist()
    assert sorted(ids) == list(range(1, ROWS + 1))
    if shape["mode"] == "full":  # one stream: every part but the last is filled close to the cap
        assert min(sizes[:-1]) >= cap * 0.9, sizes
