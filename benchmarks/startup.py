"""Start-up of `rivet run` (issue 16 item 3): how long after the process starts does the
source see rivet's first query, what the CPU does until then, and what the imports cost.

    python -m benchmarks --scenario startup [--repeat 5] [--baseline DIR]

Needs TEST_PG_DSN (or --pg-url). Exports a 1,000-row table (`startup_probe`, created in the
`rivet_bench_startup` database) to a local Parquet prefix: one warm-up run per variant (the
byte-code cache written, as an installed package has it), then `--repeat` rounds, each a
fresh `rivet run` process started through benchmarks/startup_phases.py. Per run:
  * *first connection*: `backend_start` of the earliest `application_name = 'rivet'`
    session in pg_stat_activity (polled every 5 ms while the run lasts) minus the moment the
    harness started the process (both the machine's wall clock): the server's view;
  * *first query*: wall time and the process's CPU time (user + system) when rivet sends its
    first statement on the source connection, how many modules were loaded by then, and
    whether pyarrow was among them;
    CPU time is the figure to compare on a shared machine, where a runnable process waits
    for a core and wall time grows with the load average;
  * *phases*: wall, CPU and modules imported between the marks of startup_phases.py (CLI
    imported, run path imported, config loaded, state store opened, source connected, …);
  * *wall* / *CPU*: the whole process;
  * *imports*: one extra run under `python -X importtime` — the import time of the ten most
    expensive top-level packages (self time of every module under each, lazy imports included).
`--baseline DIR` repeats everything with `PYTHONPATH=DIR` (another checkout) in the same
rounds, alternating. Prints a Markdown section; nothing is asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
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


PHASES = ROOT / "benchmarks" / "startup_phases.py"
#: The moments startup_phases.py marks, in run order (the phase breakdown's rows).
ORDER = ("python up", "cli imported", "run path imported", "config loaded", "state store opening",
         "state store opened", "export run starts", "source opening", "source connect", "source connected",
         "first query", "export run done", "exit")


def one_run(url: str, home: Path, pythonpath: str, pycache: Path, importtime: bool = False) -> dict[str, Any]:
    """One fresh `rivet run` process (through startup_phases.py, which marks the phases).
    `home` holds the config and so the state store, kept from run to run as a user's is (a
    new store would be migrated by every run); each run writes to its own output prefix."""
    out = Path(tempfile.mkdtemp(dir=home))
    config = home / "rivet.yaml"
    config.write_text(
        '{"source": {"type": "postgres", "url_env": "STARTUP_URL", "tuning": {"profile": "fast"}},'
        ' "exports": [{"name": "probe", "table": "startup_probe", "mode": "full", "format": "parquet",'
        f' "destination": {{"type": "local", "path": "{out / "data"}"}}}}]}}')
    argv = [str(ROOT / ".venv" / "bin" / "python"), *(["-X", "importtime"] if importtime else []),
            str(PHASES), "run", "-c", str(config), "-e", "probe"]
    marks_file = out / "phases.json"
    # Byte-code cached as an installed package has it: a session's PYTHONDONTWRITEBYTECODE=1
    # would make every run compile the ~130 rivet_core modules again (~1 s of CPU).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(STARTUP_URL=url, PYTHONPATH=pythonpath, PYTHONPYCACHEPREFIX=str(pycache),
               RIVET_STARTUP_PHASES=str(marks_file))
    with FirstConnection(url) as probe:
        t0 = time.time()
        env["RIVET_STARTUP_T0"] = repr(t0)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=home)
        wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"rivet run failed: {proc.stderr[-800:]}")
    marks = {m["mark"]: m for m in json.loads(marks_file.read_text())}
    rec: dict[str, Any] = {"wall": wall, "first": None if probe.first is None else probe.first - t0,
                           "marks": marks}
    if importtime:
        rec["imports"] = parse_importtime(proc.stderr)
    return rec


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{', '.join(f'{x:.2f}' for x in values)}]" if values else "–"


def phase_rows(recs: list[dict[str, Any]]) -> list[tuple[str, float, float, int]]:
    """(phase, median wall s, median CPU s, modules imported) from each mark to the next."""
    rows = []
    names = [n for n in ORDER if all(n in r["marks"] for r in recs)]
    for a, b in itertools.pairwise(names):
        wall = statistics.median(r["marks"][b]["wall"] - r["marks"][a]["wall"] for r in recs)
        cpu = statistics.median(r["marks"][b]["cpu"] - r["marks"][a]["cpu"] for r in recs)
        mods = int(statistics.median(r["marks"][b]["modules"] - r["marks"][a]["modules"] for r in recs))
        rows.append((f"{a} → {b}", wall, cpu, mods))
    return rows


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
    pycache = {name: work / f"pycache-{i}" for i, name in enumerate(variants)}
    homes = {name: work / f"home-{i}" for i, name in enumerate(variants)}
    for name, path in variants.items():  # warm-up: byte-code, state store, page cache
        homes[name].mkdir()
        one_run(url, homes[name], path, pycache[name])
    load = [os.getloadavg()]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for name, path in variants.items():
            runs[name].append(one_run(url, homes[name], path, pycache[name]))
    imports = {name: one_run(url, homes[name], path, pycache[name], importtime=True)["imports"]
               for name, path in variants.items()}
    load.append(os.getloadavg())
    print(f"`python -m benchmarks --scenario startup {' '.join(argv if argv is not None else sys.argv[1:])}`; "
          f"{args.repeat} runs each after one warm-up, median [all]; load average (1/5/15 min) "
          f"{' '.join(f'{x:.2f}' for x in load[0])} at start, {' '.join(f'{x:.2f}' for x in load[1])} at end.\n")
    print("| | first connection, server's clock (wall s) | first query (wall s) | first query (CPU s) "
          "| modules imported at first query | pyarrow loaded at first query | `rivet run` wall (s) "
          "| `rivet run` CPU (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, recs in runs.items():
        at_query = [r["marks"]["first query"] for r in recs if "first query" in r["marks"]]
        print(f"| {name} | {_med([r['first'] for r in recs if r['first'] is not None])} "
              f"| {_med([m['wall'] for m in at_query])} | {_med([m['cpu'] for m in at_query])} "
              f"| {int(statistics.median(m['modules'] for m in at_query))} "
              f"| {'yes' if any(m.get('arrow') for m in at_query) else 'no'} | {_med([r['wall'] for r in recs])} "
              f"| {_med([r['marks']['exit']['cpu'] for r in recs])} |")
    for name, recs in runs.items():
        print(f"\nPhases ({name}; median of the runs; CPU = user + system of the process):\n")
        print("| phase | wall s | CPU s | modules imported |")
        print("|---|---|---|---|")
        for phase, wall, cpu, mods in phase_rows(recs):
            print(f"| {phase} | {wall:.3f} | {cpu:.3f} | {mods} |")
    for name, tops in imports.items():
        ranked = sorted(tops.items(), key=lambda kv: -kv[1])[:10]
        print(f"\nImports ({name}, `-X importtime`, s of import time per package, all modules under it): "
              f"total {sum(tops.values()):.2f}; " + ", ".join(f"{k} {v:.2f}" for k, v in ranked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
