"""Start-up of `rivet run` (issue 16 item 3): how long after the process starts does the
source see rivet's first connection, and what do the imports cost.

    python -m benchmarks --scenario startup [--repeat 5] [--baseline DIR]

Needs TEST_PG_DSN (or --pg-url). Exports a 1,000-row table (`startup_probe`, created in the
`rivet_bench_startup` database) to a local Parquet prefix, `--repeat` times, each a fresh
`rivet run` process. Per run:
  * *first connection*: `backend_start` of the earliest `application_name = 'rivet'`
    session in pg_stat_activity (polled every 5 ms while the run lasts) minus the moment the
    harness started the process (both the machine's wall clock) — the session opens right
    before the first query, so this is the time to the first source query within a
    connection set-up;
  * *wall*: the whole process;
  * *imports*: one extra run under `python -X importtime` — the import time of the ten most
    expensive top-level packages (self time of every module under each, lazy imports included).
`--baseline DIR` repeats everything with `PYTHONPATH=DIR` (another checkout) in the same
rounds, alternating. Prints a Markdown section; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DB = "rivet_bench_startup"


def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


def prepare(admin: str) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{DB}"')
    url = _with_db(admin, DB)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS startup_probe AS SELECT g AS id, 'n' || g AS note, "
                     "now() AS at FROM generate_series(1, 1000) g")
    return url


class FirstConnection:
    """Polls pg_stat_activity for the earliest rivet session of the database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.first: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FirstConnection:
        self._conn = psycopg.connect(self.url, autocommit=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            row = self._conn.execute(
                "SELECT extract(epoch FROM min(backend_start)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'rivet'").fetchone()
            if row and row[0] is not None and self.first is None:
                self.first = float(row[0])
            self._stop.wait(0.005)


def one_run(url: str, work: Path, pythonpath: str, importtime: bool = False) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(dir=work))
    config = out / "rivet.yaml"
    config.write_text(
        '{"source": {"type": "postgres", "url_env": "STARTUP_URL", "tuning": {"profile": "fast"}},'
        ' "exports": [{"name": "probe", "table": "startup_probe", "mode": "full", "format": "parquet",'
        f' "destination": {{"type": "local", "path": "{out / "data"}"}}}}]}}')
    argv = [str(ROOT / ".venv" / "bin" / "python"), *(["-X", "importtime"] if importtime else []),
            str(ROOT / ".venv" / "bin" / "rivet"), "run", "-c", str(config), "-e", "probe"]
    env = dict(os.environ, STARTUP_URL=url, PYTHONPATH=pythonpath)
    with FirstConnection(url) as probe:
        t0 = time.time()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=out)
        wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"rivet run failed: {proc.stderr[-800:]}")
    rec: dict[str, Any] = {"wall": wall, "first": None if probe.first is None else probe.first - t0}
    if importtime:
        rec["imports"] = parse_importtime(proc.stderr)
    return rec


def parse_importtime(stderr: str) -> dict[str, float]:
    """Seconds spent importing each top-level package: the sum of the *self* time of every
    module under it, wherever it was imported from (so lazy imports count too)."""
    tops: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = (part.strip() for part in line[len("import time:"):].split("|"))
        if own.isdigit():
            top = name.split(".")[0]
            tops[top] = tops.get(top, 0.0) + int(own) / 1e6
    return tops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks --scenario startup")
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.pg_url:
        raise SystemExit("needs TEST_PG_DSN or --pg-url")
    url = prepare(args.pg_url)
    variants = {"this checkout": str(ROOT)}
    if args.baseline is not None:
        variants["baseline"] = str(args.baseline.resolve())
    work = Path(tempfile.mkdtemp(prefix="rivet-startup."))
    load = [os.getloadavg()[0]]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for name, path in variants.items():
            runs[name].append(one_run(url, work, path))
    imports = {name: one_run(url, work, path, importtime=True)["imports"] for name, path in variants.items()}
    load.append(os.getloadavg()[0])
    print(f"`python -m benchmarks --scenario startup {' '.join(argv or sys.argv[1:])}`; "
          f"{args.repeat} runs each, median [all]; load average {load[0]:.1f} at start, {load[1]:.1f} at end.\n")
    print("| | first connection after process start (s) | `rivet run` wall, 1,000 rows (s) |")
    print("|---|---|---|")
    for name, recs in runs.items():
        firsts = [r["first"] for r in recs if r["first"] is not None]
        walls = [r["wall"] for r in recs]
        print(f"| {name} | {statistics.median(firsts):.2f} [{', '.join(f'{x:.2f}' for x in firsts)}] | "
              f"{statistics.median(walls):.2f} [{', '.join(f'{x:.2f}' for x in walls)}] |")
    for name, tops in imports.items():
        ranked = sorted(tops.items(), key=lambda kv: -kv[1])[:10]
        print(f"\nImports ({name}, `-X importtime`, s of import time per package, all modules under it): total {sum(tops.values()):.2f}; "
              + ", ".join(f"{k} {v:.2f}" for k, v in ranked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
