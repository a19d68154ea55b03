"""Cost of the Form B column checksums (docs/manifest.md "Per-column checksums").

    python -m benchmarks --scenario form-b [--rows 1000000] [--repeat 3]

Builds the bench `orders` shape in memory (11 columns: ints, text, decimal(12,2), float,
two µs timestamps, bool, JSON text, UUID; benchmarks/fixture_pg.sql) and times
`table_sums` over it in 64 k-row batches, as the Parquet writer feeds row groups: Rivet's
`xxh3-64-sum-v2` un-keyed and keyed by `id`, and our older `rivet-colsum-v1`. Prints the
best of `--repeat` rounds per variant (process CPU time and wall time); no server needed.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def orders(rows: int) -> pa.Table:
    """`rows` rows of the bench `orders` shape (deterministic)."""
    rng = np.random.default_rng(1)
    epoch = np.datetime64("2026-01-01T00:00:00", "us")
    return pa.table({
        "id": pa.array(np.arange(1, rows + 1, dtype=np.int64)),
        "customer_id": pa.array(rng.integers(0, 10**6, rows).astype(np.int32)),
        "status": pa.array(np.array(["new", "paid", "shipped", "cancelled"])[rng.integers(0, 4, rows)]),
        "amount": pa.array(rng.integers(0, 10**7, rows).astype(np.int32)).cast(pa.decimal128(12, 2)),
        "discount": pa.array(rng.random(rows)),
        "note": pa.array([f"note {i} with some text" for i in range(rows)]),
        "created_at": pa.array(epoch + rng.integers(0, 10**12, rows).astype("timedelta64[us]")),
        "updated_at": pa.array(epoch + rng.integers(0, 10**12, rows).astype("timedelta64[us]")),
        "is_paid": pa.array(rng.integers(0, 2, rows).astype(bool)),
        "payload": pa.array([f'{{"k": {i}}}' for i in range(rows)], pa.json_()),
        "ext_id": pa.ExtensionArray.from_storage(pa.uuid(), pa.array(
            [uuid.UUID(int=int(i)).bytes for i in rng.integers(0, 2**62, rows)], pa.binary(16))),
    })


def main(argv: Sequence[str]) -> int:
    from rivet_core.manifest.column_checksums import LEGACY_RENDER, table_sums

    args = argparse.ArgumentParser(prog="form-b")
    args.add_argument("--rows", type=int, default=1_000_000)
    args.add_argument("--repeat", type=int, default=3)
    opts = args.parse_args(list(argv))
    table = orders(opts.rows)
    batches = table.to_batches(max_chunksize=65_536)
    print(f"{opts.rows} rows x {table.num_columns} columns, {table.nbytes / 1e6:.0f} MB of Arrow")
    for label, kwargs in (("xxh3-64-sum-v2, un-keyed", {}), ("xxh3-64-sum-v2, keyed by id", {"key_column": "id"}),
                          ("rivet-colsum-v1", {"render": LEGACY_RENDER})):
        best_cpu = best_wall = float("inf")
        for _ in range(opts.repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            for batch in batches:
                table_sums(batch, **kwargs)
            best_cpu = min(best_cpu, time.process_time() - cpu)
            best_wall = min(best_wall, time.perf_counter() - wall)
        print(f"{label:32s} cpu {best_cpu * 1000:6.0f} ms  wall {best_wall * 1000:6.0f} ms")
    return 0
