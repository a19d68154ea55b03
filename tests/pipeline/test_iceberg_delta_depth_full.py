"""`rivet validate --depth full` on Iceberg and Delta exports (docs/adr/0009-table-formats.md
"Verification"): the table check plus the re-read of every part, as for plain exports.

The tamper is one that only a re-read can see: a part's bytes are changed in place so the
file keeps its size and row count and stays a readable Parquet file, but holds another
value. The table's metadata (sizes, row counts) and the listing still agree with the
manifest, so `--depth sample` passes; `--depth full` recomputes the part's content hash and
fails. The parts are written uncompressed (`compression: none`) so the value is a plain
byte string in the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.helpers import db_exec, rivet_quick, source_block, write_config


def _export(tmp_path: Path, fmt: str) -> dict[str, Any]:
    export: dict[str, Any] = {"name": "items", "table": "items", "mode": "full", "format": "parquet",
                              "compression": "none", "table_format": fmt,
                              "destination": {"type": "local", "path": str(tmp_path / "out")}}
    if fmt == "iceberg":
        export["iceberg"] = {"catalog_url": f"sqlite:///{tmp_path / 'catalog.db'}", "namespace": "lake"}
    return export


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_depth_full_catches_a_same_size_same_rows_part_with_other_values(tmp_path, pg_url, fmt):
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
            "INSERT INTO items SELECT i, 'name-' || i FROM generate_series(1, 50) i")
    config = write_config(tmp_path, source_block(pg_url), [_export(tmp_path, fmt)])
    ran = rivet_quick("run", "-c", str(config))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for depth in ("sample", "full"):
        verdict = rivet_quick("validate", "-c", str(config), "--depth", depth)
        assert verdict.returncode == 0, (depth, verdict.stdout + verdict.stderr)

    [part] = sorted((tmp_path / "out" / "data").rglob("*.parquet"))
    data = part.read_bytes()
    assert data.count(b"name-17") == 1  # the value, once, in the uncompressed dictionary page
    part.write_bytes(data.replace(b"name-17", b"NAME-17"))
    tampered = pq.read_table(part)  # still a readable part, same rows, another value
    assert tampered.num_rows == 50 and "NAME-17" in tampered.column("name").to_pylist()
    assert part.stat().st_size == len(data)

    quick = rivet_quick("validate", "-c", str(config), "--depth", "sample")
    assert quick.returncode == 0, quick.stdout + quick.stderr  # sizes and counts cannot see it
    full = rivet_quick("validate", "-c", str(config), "--depth", "full")
    assert full.returncode == 3, full.stdout + full.stderr
    assert "part_content_mismatch" in full.stdout + full.stderr
