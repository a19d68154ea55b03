"""The source governor's two targets (issue 16 item 1): the section between the `governor`
markers of docs/benchmarks.md.

    python -m benchmarks --scenario governor_oltp --rows 1000000 --clients 8 [--repeat 2]

Needs TEST_PG_DSN (or --pg-url). In its own database (`rivet_bench_governor`, dropped at the
end unless --keep) it loads the `orders` fixture (benchmarks/fixture_pg.sql) and an OLTP
table `accounts` (100 k rows, primary key). Per round:
  * idle source: `rivet run` of a full Parquet export of `orders` with the default profile
    (`balanced`: the governor) and with `profile: fast` — wall of each, fresh processes;
  * OLTP load: `--clients` threads on their own connections, each looping an indexed point
    SELECT and an indexed point UPDATE of a random account (autocommit); their p95 latency
    measured for `--window` s without an export, then while the export runs with `fast` and
    with the default profile. "Added" p95 = p95 during the export − p95 of the window before.
The default run's governor decisions (samples, max pressure, seconds throttled) come from its
run report. Targets (reported, not asserted): default on idle ≤ 1.1× fast; OLTP p95 added by
the default profile ≤ half of what `fast` adds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.harness import ensure_fixture

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOC = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- governor:begin -->", "<!-- governor:end -->"
DATABASE = "rivet_bench_governor"
ACCOUNTS = 100_000


def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _accounts(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS accounts")
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, note text)")
        conn.execute("INSERT INTO accounts SELECT g, g, md5(g::text) FROM generate_series(1, %s) g", (ACCOUNTS,))
        conn.execute("ANALYZE accounts")


class Oltp:
    """`clients` threads of point reads + writes; `window()` returns the latencies (s) of the
    operations that finished inside it."""

    def __init__(self, url: str, clients: int) -> None:
        self._url, self._stop = url, threading.Event()
        self._lat: list[tuple[float, float]] = []  # (finished at, latency)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def _client(self, seed: int) -> None:
        rng = random.Random(seed)
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.is_set():
                key = rng.randint(1, ACCOUNTS)
                t0 = time.perf_counter()
                conn.execute("SELECT balance FROM accounts WHERE id = %s", (key,)).fetchone()
                conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (key,))
                t1 = time.perf_counter()
                with self._lock:
                    self._lat.append((t1, t1 - t0))

    def __enter__(self) -> Oltp:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def between(self, start: float, end: float) -> list[float]:
        with self._lock:
            return [lat for at, lat in self._lat if start <= at <= end]


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else float("nan")


def run_export(work: Path, url: str, profile: str | None) -> dict[str, Any]:
    out = work / f"run-{profile or 'default'}-{time.monotonic_ns()}"
    out.mkdir(parents=True)
    tuning = {"profile": profile} if profile else {}
    config = {"source": {"type": "postgres", "url_env": "BENCH_SOURCE_URL", "tuning": tuning},
              "exports": [{"name": "bench", "table": "orders", "format": "parquet", "mode": "full",
                           "destination": {"type": "local", "path": str(out / "data")}}]}
    (out / "rivet.yaml").write_text(json.dumps(config))
    env = {**os.environ, "BENCH_SOURCE_URL": url}
    load = _load()
    t0 = time.perf_counter()
    done = subprocess.run([str(REPO / ".venv" / "bin" / "rivet"), "run", "-c", str(out / "rivet.yaml"), "-e", "bench"],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"rivet run failed ({done.returncode}): {done.stderr[-800:]}")
    report = json.loads(next(out.rglob("summary.json")).read_text())
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "start": t0, "end": t0 + wall, "load": load, "governor": report.get("governor"),
            "peak_rss_mb": report.get("peak_rss_mb")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks --scenario governor_oltp", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--window", type=float, default=8.0, help="seconds of OLTP before each export")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database")
    ap.add_argument("--output", type=Path, default=DOC)
    args = ap.parse_args(argv)
    if not args.pg_url:
        raise SystemExit("set TEST_PG_DSN or --pg-url")
    url = ensure_fixture("pg", args.pg_url, args.rows, 1_000, database=DATABASE)
    _accounts(url)
    work = Path(tempfile.mkdtemp(prefix="rivet-bench-governor."))
    idle: dict[str, list[dict[str, Any]]] = {"fast": [], "default": []}
    oltp: dict[str, list[dict[str, Any]]] = {"fast": [], "default": []}
    try:
        for rep in range(args.repeat):
            for name in (["fast", "default"] if rep % 2 == 0 else ["default", "fast"]):
                idle[name].append(run_export(work, url, "fast" if name == "fast" else None))
                print(f"[governor] idle {name}: {idle[name][-1]['wall']:.2f} s (load {idle[name][-1]['load']})",
                      flush=True)
            with Oltp(url, args.clients) as load:
                for name in (["fast", "default"] if rep % 2 == 0 else ["default", "fast"]):
                    t0 = time.perf_counter()
                    time.sleep(args.window)
                    base = p95(load.between(t0, time.perf_counter()))
                    run = run_export(work, url, "fast" if name == "fast" else None)
                    during = p95(load.between(run["start"], run["end"]))
                    oltp[name].append({**run, "p95_base_ms": base * 1000, "p95_during_ms": during * 1000,
                                       "added_ms": (during - base) * 1000})
                    print(f"[governor] oltp {name}: wall {run['wall']:.2f} s, p95 {base * 1000:.2f} → "
                          f"{during * 1000:.2f} ms (load {run['load']}) governor {run['governor']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            with psycopg.connect(args.pg_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    write_section(args, idle, oltp)
    return 0


def _med(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def write_section(args: argparse.Namespace, idle: dict[str, list[dict[str, Any]]],
                  oltp: dict[str, list[dict[str, Any]]]) -> None:
    def cell(runs: list[dict[str, Any]], key: str, fmt: str = "{:.2f}") -> str:
        return f"{fmt.format(_med(runs, key))} [" + ", ".join(fmt.format(r[key]) for r in runs) + "]"

    def gov(runs: list[dict[str, Any]]) -> str:
        g = [r["governor"] or {} for r in runs]
        return "; ".join(f"{x.get('samples', 0)} samples, max pressure {x.get('pressure_max', 0)}, "
                         f"throttled {x.get('throttled_s', 0)} s" for x in g)

    ratio = _med(idle["default"], "wall") / _med(idle["fast"], "wall")
    fast_added, default_added = _med(oltp["fast"], "added_ms"), _med(oltp["default"], "added_ms")
    loads = "; ".join(r["load"] for rs in (*idle.values(), *oltp.values()) for r in rs)
    body = [
        BEGIN,
        f"## Source governor: default profile vs `fast` (PostgreSQL `orders`, {args.rows:,} rows)",
        "",
        f"Generated by `python -m benchmarks --scenario governor_oltp --rows {args.rows} --clients {args.clients} "
        f"--window {args.window:g} --repeat {args.repeat}` (benchmarks/governor_oltp.py) on "
        f"{time.strftime('%Y-%m-%d')}; median shown, all runs in brackets. Load average (1/5/15 min) at each "
        f"export's start: {loads} — 2 cores shared with other work, so compare within this table only.",
        "",
        "| | `fast` | default (`balanced`, governor) |",
        "|---|---|---|",
        f"| idle source: `rivet run` wall (s) | {cell(idle['fast'], 'wall')} | {cell(idle['default'], 'wall')} |",
        f"| idle source: governor | – | {gov(idle['default'])} |",
        f"| OLTP ({args.clients} clients, point SELECT + UPDATE): p95 before the export (ms) | "
        f"{cell(oltp['fast'], 'p95_base_ms')} | {cell(oltp['default'], 'p95_base_ms')} |",
        f"| OLTP p95 during the export (ms) | {cell(oltp['fast'], 'p95_during_ms')} | "
        f"{cell(oltp['default'], 'p95_during_ms')} |",
        f"| OLTP p95 added by the export (ms) | {cell(oltp['fast'], 'added_ms')} | {cell(oltp['default'], 'added_ms')} |",
        f"| export wall under OLTP (s) | {cell(oltp['fast'], 'wall')} | {cell(oltp['default'], 'wall')} |",
        f"| under OLTP: governor | – | {gov(oltp['default'])} |",
        "",
        f"- default on an idle source = {ratio:.2f}× the wall of `fast` (target ≤ 1.1×): "
        f"{'met' if ratio <= 1.1 else 'missed'}",
        f"- OLTP p95 added: default {default_added:.2f} ms vs fast {fast_added:.2f} ms (target ≤ half): "
        f"{'met' if default_added <= fast_added / 2 else 'missed'}",
        END,
    ]
    text = args.output.read_text() if args.output.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(body) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(body) + "\n"
    args.output.write_text(text)
    print(f"[governor] wrote {args.output}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
