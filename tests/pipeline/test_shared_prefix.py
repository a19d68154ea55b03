"""Several exports on one destination prefix, as Rivet's configs have them (issue 35 item 1).

docs/adr/0011-shared-destination-prefixes.md: the config loads, and each export keeps its
whole trail in a sub-folder named after it. On the real PostgreSQL and S3 servers: both
exports run; each `rivet validate --depth full` PASSES against its own parts; a corrupted
part of one fails that one only; retention gc of one never touches the other's files; the
data re-read with pyarrow equals the source.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.helpers import db_exec, rivet_in_process, source_block, write_config


def _seed(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, amount NUMERIC(12,2))",
            "CREATE TABLE orders (id INT PRIMARY KEY, item_id INT, qty INT)",
            "INSERT INTO items SELECT g, 'n' || g, g * 1.25 FROM generate_series(1, 40) AS g",
            "INSERT INTO orders SELECT g, g % 40 + 1, g % 7 FROM generate_series(1, 60) AS g")


class Place:
    """The shared prefix, on a local folder or an S3 bucket: its destination block and its objects."""

    def __init__(self, kind: str, tmp: Path, s3: Any = None) -> None:
        self.kind, self.tmp, self.s3 = kind, tmp, s3
        if kind == "local":
            self.dest: dict[str, Any] = {"type": "local", "path": "out"}
        else:
            self.dest = {"type": "s3", "bucket": s3.bucket, "endpoint": s3.endpoint, "region": "us-east-1",
                         "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK", "prefix": "shared/"}

    def objects(self, sub: str) -> dict[str, bytes]:
        """Every object under `<shared prefix>/<sub>` → its bytes."""
        if self.kind == "local":
            root = self.tmp / "out" / sub
            return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        client, out, prefix = self.s3.client(), {}, f"shared/{sub}"
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket, Prefix=prefix):
            for obj in page.get("Contents", []) or []:
                out[obj["Key"][len(prefix):]] = client.get_object(Bucket=self.s3.bucket, Key=obj["Key"])["Body"].read()
        return out

    def corrupt(self, key: str) -> None:
        """Flip one byte in the middle of `key` (relative to the shared prefix)."""
        if self.kind == "local":
            path = self.tmp / "out" / key
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
            return
        client = self.s3.client()
        data = bytearray(client.get_object(Bucket=self.s3.bucket, Key=f"shared/{key}")["Body"].read())
        data[len(data) // 2] ^= 0xFF
        client.put_object(Bucket=self.s3.bucket, Key=f"shared/{key}", Body=bytes(data))


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    return Place(request.param, tmp_path, request.getfixturevalue("s3") if request.param == "s3" else None)


def _rows(objects: dict[str, bytes], tmp: Path, name: str) -> list[dict[str, Any]]:
    """The export's parts re-read with pyarrow (its own `data/` folder only)."""
    rows: list[dict[str, Any]] = []
    for key, body in sorted(objects.items()):
        if key.startswith("data/") and key.endswith(".parquet"):
            path = tmp / f"{name}-{len(rows)}-{key.replace('/', '_')}"
            path.write_bytes(body)
            rows.extend(pq.read_table(path).to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def _validate(config: Path, export: str) -> Any:
    return rivet_in_process("validate", "-c", str(config), "-e", export, "--depth", "full")


@pytest.mark.postgres
def test_two_exports_on_one_prefix_each_keep_and_validate_their_own_trail(
        place: Place, tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    exports = [{"name": name, "table": name, "format": "parquet", "destination": dict(place.dest),
                "retention": {"keep_runs": 1, "grace_hours": 0}} for name in ("items", "orders")]
    config = write_config(tmp_path, source_block(pg_url), exports)
    for export in ("items", "orders"):  # `run -e one_export` works on a shared prefix too
        ran = rivet_in_process("run", "-c", str(config), "-e", export)
        assert ran.exit_code == 0, ran.output
    items, orders = place.objects("items/"), place.objects("orders/")
    for own in (items, orders):
        assert {"manifest.json", "_SUCCESS"} <= set(own) and any(k.startswith("data/") for k in own)
    assert not {k for k in place.objects("") if "/" not in k}  # nothing of either at the shared root

    # each trail holds exactly its source table (pyarrow re-read)
    assert _rows(items, tmp_path, "items") == [
        {"id": i, "name": f"n{i}", "amount": Decimal(i) * Decimal("1.25")} for i in range(1, 41)]
    assert _rows(orders, tmp_path, "orders") == [
        {"id": i, "item_id": i % 40 + 1, "qty": i % 7} for i in range(1, 61)]
    for export in ("items", "orders"):
        verdict = _validate(config, export)
        assert verdict.exit_code == 0 and f"{export}: PASSED" in verdict.output, verdict.output

    # a corrupted part of one fails that one only
    [items_part] = [k for k in items if k.startswith("data/")]
    place.corrupt(f"items/{items_part}")
    assert _validate(config, "items").exit_code != 0
    assert _validate(config, "orders").exit_code == 0

    # retention of one (a second run, then gc with grace 0) never touches the other's files
    orders_before = place.objects("orders/")
    db_exec(pg_url, "INSERT INTO items VALUES (41, 'n41', 51.25)")
    assert rivet_in_process("run", "-c", str(config), "-e", "items").exit_code == 0
    gc = rivet_in_process("gc", "-c", str(config), "items", "--keep-runs", "1", "--grace-hours", "0")
    assert gc.exit_code == 0, gc.output
    assert place.objects("orders/") == orders_before
    assert _validate(config, "orders").exit_code == 0
    verdict = _validate(config, "items")
    assert verdict.exit_code == 0 and "items: PASSED" in verdict.output, verdict.output
    assert [r["id"] for r in _rows(place.objects("items/"), tmp_path, "items2")] == list(range(1, 42))
