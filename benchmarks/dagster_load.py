"""How long a code location with many rivet exports takes to load, and how big its snapshot
is (issues 14 and 34).

    python -m benchmarks.dagster_load [--exports 50 200 1000 2000] [--repeat 3] [--no-baseline]

For each N, writes a rivet.yaml with N exports (a quarter each full, incremental, daily time
window and chunked) against an unreachable PostgreSQL (loading never connects), then times,
in fresh interpreters: `import dagster` alone; `import rivet_dagster` + `build_definitions` +
resolving the repository (`Definitions.validate_loadable`, what a code server does when it
loads) + its full repository snapshot (`RepositorySnap.from_def`, every job's snapshot
included — what the code server serializes for the webserver and daemon); and the same for
N plain Dagster `@asset`s (the baseline: what Dagster itself costs per asset). Prints a table
of the medians over bare `import dagster`, the snapshot's serialized bytes, and bytes per
export. The interpreters start in the temporary folder, so `PYTHONPATH=/path/to/checkout`
measures that checkout's code (e.g. the main branch's, for a before/after table).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

#: Builds, resolves and snapshots one `Definitions`; prints the snapshot's serialized size.
_SNAPSHOT = """
import dagster as dg
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value
{build}
dg.Definitions.validate_loadable(defs)
print(len(serialize_value(RepositorySnap.from_def(defs.get_repository_def()))))
"""
_RIVET = "from rivet_dagster import build_definitions\ndefs = build_definitions({config!r})"
_PLAIN = """
def _asset(i):
    @dg.asset(name=f"table_{{i:04d}}", group_name="plain")
    def _a():
        return None
    return _a
defs = dg.Definitions(assets=[_asset(i) for i in range({exports})])
"""


def write_config(folder: Path, exports: int) -> Path:
    blocks = []
    for i in range(exports):
        mode = ("full", "incremental", "time_window", "chunked")[i % 4]
        block = {"name": f"table_{i:04d}", "table": f"public.table_{i:04d}", "mode": mode, "format": "parquet",
                 "destination": {"type": "local", "path": f"out/table_{i:04d}"}}
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


def timed(code: str, cwd: Path) -> tuple[float, str]:
    """Wall seconds of a fresh interpreter running `code` in `cwd`, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True, capture_output=True, text=True,
                          cwd=cwd)
    return time.perf_counter() - start, done.stdout.strip()


def measure(code: str, repeat: int, bare: float, cwd: Path) -> tuple[float, int]:
    """(median seconds over bare `import dagster`, snapshot bytes) of `code`."""
    runs = [timed(code, cwd) for _ in range(repeat)]
    return statistics.median(t for t, _ in runs) - bare, int(runs[0][1].splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=int, nargs="+", default=[50, 200, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-baseline", action="store_true", help="skip the plain-Dagster rows")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bare = statistics.median(timed("import dagster", Path(tmp))[0] for _ in range(args.repeat))
        for n in args.exports:
            config = write_config(Path(tmp), n)
            kinds = [("rivet", _RIVET.format(config=str(config)))]
            kinds += [] if args.no_baseline else [("plain @asset", _PLAIN.format(exports=n))]
            for kind, build in kinds:
                seconds, size = measure(_SNAPSHOT.format(build=build), args.repeat, bare, Path(tmp))
                rows.append({"kind": kind, "exports": n, "seconds": round(seconds, 2), "snapshot_bytes": size})
                print(f"{kind}: {n} exports, {seconds:.2f} s, {size:,} bytes", file=sys.stderr, flush=True)
    print(f"import dagster alone: {bare:.2f} s (median of {args.repeat}); seconds below are over it\n")
    print(f"| {'definitions':<12} | {'exports':>7} | {'seconds':>7} | {'snapshot bytes':>14} | {'bytes/export':>12} |")
    print(f"|{'-' * 14}|{'-' * 8}:|{'-' * 8}:|{'-' * 15}:|{'-' * 13}:|")
    for r in rows:
        print(f"| {r['kind']:<12} | {r['exports']:>7} | {r['seconds']:>7.2f} | {r['snapshot_bytes']:>14,} | "
              f"{r['snapshot_bytes'] // r['exports']:>12,} |")
    if args.json:
        args.json.write_text(json.dumps({"import_dagster": round(bare, 2), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
