"""`layout: rivet` — Rivet's flat part names at the prefix root (issue 35 item 4;
docs/rivet-compat.md "File names and run ids").

On the real PostgreSQL and S3 servers: the parts land at the prefix root under Rivet's names
(`<export>_<YYYYMMDD_HHMMSS_mmm>.parquet`, chunked `…_chunk<i>_<nonce>.parquet`), no `data/`
folder; pyarrow re-reads them equal to the source; `rivet validate --depth full` PASSES; a
tampered part FAILS without anything being moved; retention parks the superseded run's part
out of the root. A table format keeps its own layout, so the pair is refused at load.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.helpers import db_exec, rivet_in_process, source_block, write_config

_FULL = re.compile(r"^items_\d{8}_\d{6}_\d{3}\.parquet$")
_CHUNK = re.compile(r"^items_\d{8}_\d{6}_\d{3}_chunk(\d+)_[0-9a-f]{16}\.parquet$")


class Prefix:
    """The export's prefix on a local folder or an S3 bucket: its destination block and objects."""

    def __init__(self, kind: str, tmp: Path, s3: Any = None) -> None:
        self.kind, self.tmp, self.s3 = kind, tmp, s3
        if kind == "local":
            self.dest: dict[str, Any] = {"type": "local", "path": "out"}
        else:
            self.dest = {"type": "s3", "bucket": s3.bucket, "endpoint": s3.endpoint, "region": "us-east-1",
                         "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK", "prefix": "out/"}

    def objects(self) -> dict[str, bytes]:
        """Every object under the prefix → its bytes."""
        if self.kind == "local":
            root = self.tmp / "out"
            return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        client, out = self.s3.client(), {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket, Prefix="out/"):
            for obj in page.get("Contents", []) or []:
                out[obj["Key"][len("out/"):]] = client.get_object(Bucket=self.s3.bucket, Key=obj["Key"])["Body"].read()
        return out

    def corrupt(self, key: str) -> None:
        """Flip one byte in the middle of `key`."""
        data = bytearray(self.objects()[key])
        data[len(data) // 2] ^= 0xFF
        if self.kind == "local":
            (self.tmp / "out" / key).write_bytes(bytes(data))
        else:
            self.s3.client().put_object(Bucket=self.s3.bucket, Key=f"out/{key}", Body=bytes(data))


@pytest.fixture(params=["local", "s3"])
def prefix(request: pytest.FixtureRequest, tmp_path: Path) -> Prefix:
    return Prefix(request.param, tmp_path, request.getfixturevalue("s3") if request.param == "s3" else None)


def _root_parts(objects: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in objects.items() if "/" not in k and k.endswith(".parquet")}


def _rows(parts: dict[str, bytes]) -> list[dict[str, Any]]:
    """The parts re-read with pyarrow, sorted by id."""
    rows = [r for body in parts.values() for r in pq.read_table(io.BytesIO(body)).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


def _source(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(1, n + 1)]


def _validate(config: Path) -> Any:
    return rivet_in_process("validate", "-c", str(config), "-e", "items", "--depth", "full")


@pytest.fixture
def items(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
            "INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, 40) AS g")
    return pg_url


@pytest.mark.postgres
def test_a_layout_rivet_export_writes_rivets_flat_names_validates_and_keeps_them_under_retention(
        prefix: Prefix, tmp_path: Path, items: str) -> None:
    export = {"name": "items", "table": "items", "format": "parquet", "layout": "rivet",
              "destination": prefix.dest, "retention": {"keep_runs": 1, "grace_hours": 0}}
    config = write_config(tmp_path, source_block(items), [export])
    ran = rivet_in_process("run", "-c", str(config))
    assert ran.exit_code == 0, ran.output

    first = prefix.objects()
    [name] = _root_parts(first)
    assert _FULL.match(name), sorted(first)
    assert not any(k.startswith("data/") for k in first)
    assert {"manifest.json", "_SUCCESS"} <= set(first)
    assert _rows(_root_parts(first)) == _source(40)
    verdict = _validate(config)
    assert verdict.exit_code == 0 and "items: PASSED" in verdict.output, verdict.output

    # a second run supersedes the first: retention parks the old part out of the root
    db_exec(items, "INSERT INTO items VALUES (41, 'n41')")
    assert rivet_in_process("run", "-c", str(config)).exit_code == 0
    second = prefix.objects()
    [current] = _root_parts(second)
    assert current != name and _FULL.match(current)
    assert any(k.startswith("_quarantine/gc/") and k.endswith("/" + name) for k in second), sorted(second)
    assert _rows(_root_parts(second)) == _source(41)
    verdict = _validate(config)
    assert verdict.exit_code == 0 and "items: PASSED" in verdict.output, verdict.output

    # a tampered part fails validation; nothing published is moved
    prefix.corrupt(current)
    tampered = prefix.objects()
    verdict = _validate(config)
    assert verdict.exit_code != 0 and "FAILED" in verdict.output, verdict.output
    assert prefix.objects() == tampered


@pytest.mark.postgres
def test_a_chunked_layout_rivet_export_writes_one_flat_chunk_part_per_window_and_validates(
        prefix: Prefix, tmp_path: Path, items: str) -> None:
    export = {"name": "items", "table": "items", "format": "parquet", "layout": "rivet", "mode": "chunked",
              "chunk_column": "id", "chunk_size": 10, "chunk_checkpoint": True, "destination": prefix.dest}
    config = write_config(tmp_path, source_block(items), [export])
    ran = rivet_in_process("run", "-c", str(config))
    assert ran.exit_code == 0, ran.output

    objects = prefix.objects()
    parts = _root_parts(objects)
    chunks = sorted(int(m.group(1)) for m in map(_CHUNK.match, parts) if m)
    assert len(chunks) == len(parts) and chunks == list(range(len(parts))), sorted(objects)
    assert not any(k.startswith("data/") for k in objects)
    assert _rows(parts) == _source(40)
    verdict = _validate(config)
    assert verdict.exit_code == 0 and "items: PASSED" in verdict.output, verdict.output


def test_layout_rivet_with_a_table_format_is_refused_naming_the_export_and_the_fix(tmp_path: Path) -> None:
    export = {"name": "items", "table": "items", "format": "parquet", "layout": "rivet", "table_format": "delta",
              "destination": {"type": "local", "path": "out"}}
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"}, [export])
    refused = rivet_in_process("check", "-c", str(config))
    assert refused.exit_code != 0
    assert "items" in refused.output
    assert "layout: rivet is not compatible with table_format: delta" in refused.output
    assert "remove layout: rivet" in refused.output
    assert not (tmp_path / "out").exists()
