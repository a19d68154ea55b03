"""How long a code location with many rivet exports takes to load (issue 14).

    python -m benchmarks.dagster_load [--exports 200] [--repeat 3]

Writes a rivet.yaml with N exports (a quarter each full, incremental, daily time window and
chunked — the chunked ones are two assets, a planner sensor and two jobs each) against an
unreachable PostgreSQL (loading never connects), then times, in fresh interpreters:
`import dagster` alone, and `import rivet_dagster` + `build_definitions` + Dagster's own
`validate_loadable` (what a code server does when it loads). Prints the median of each and
the difference: the cost rivet adds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def write_config(folder: Path, exports: int) -> Path:
    blocks = []
    for i in range(exports):
        mode = ("full", "incremental", "time_window", "chunked")[i % 4]
        block = {"name": f"table_{i:03d}", "table": f"public.table_{i:03d}", "mode": mode, "format": "parquet",
                 "destination": {"type": "local", "path": f"out/table_{i:03d}"}}
        if mode == "incremental":
            block["cursor_column"] = "updated_at"
        if mode == "time_window":
            block.update(time_column="created_at", days_window=3, dagster={"start_date": "2026-01-01"})
        if mode == "chunked":
            block.update(chunk_column="id", chunk_size=100_000)
        blocks.append(block)
    path = folder / "rivet.yaml"
    path.write_text(yaml.safe_dump({"source": {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"},
                                    "exports": blocks}, sort_keys=False))
    return path


def timed(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp), args.exports)
        bare = [timed("import dagster") for _ in range(args.repeat)]
        load = [timed("import dagster as dg; from rivet_dagster import build_definitions; "
                      f"dg.Definitions.validate_loadable(build_definitions({str(config)!r}))")
                for _ in range(args.repeat)]
    b, l_ = statistics.median(bare), statistics.median(load)
    print(f"exports: {args.exports}  import dagster: {b:.2f} s  load code location: {l_:.2f} s  "
          f"rivet adds: {l_ - b:.2f} s ({(l_ - b) / args.exports * 1000:.1f} ms per export)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
