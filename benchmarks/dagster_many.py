"""Many small exports in one Dagster run vs `rivet run` (issue 34 item 2): the section
between the `dagster-many` markers of docs/benchmarks.md.

    python -m benchmarks --scenario dagster-many [--exports 50] [--rows 200] [--engines sqlite,pg] [--repeat 1]
                                                 [--parallel 1]

One config of `--exports` full Parquet exports (tables `t00`, `t01`, … of `--rows` rows each),
per source engine (SQLite: a database file of its own; PostgreSQL: the database
`rivet_bench_many` on TEST_PG_DSN / `--pg-url`, rebuilt every round). Each command runs in a
fresh process and the wall is the whole command, as a user waits for it:

- `rivet run -c rivet.yaml` — every export, one after the other;
- `dagster asset materialize -m rivet_dagster.definitions --select group:bench` — all of them
  in one run (DAGSTER_HOME a fresh copy of the project's dagster_home/dagster.yaml, migrated
  before the clock starts);
- `dg launch --assets group:bench` in a `dg` project whose definitions.py is the one
  `create-dagster project` writes (no executor of its own): what a new user gets.

`--parallel N` sets the config's `dagster.multi_asset_parallel: N` (the Dagster step runs up
to N exports at once; `rivet run` ignores it and runs them one after the other).

Every published export is re-read with pyarrow and its row count compared with the source's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq

from benchmarks.dagster_path import (
    BIN,
    DOC,
    REPO,
    _fmt,
    _load,
    _replace_section,
    _with_db,
    migrate_instance,
    timed,
)

DATABASE = "rivet_bench_many"
GROUP = "bench"

#: `create-dagster project`'s src/<project>/definitions.py (Dagster 1.13): no executor.
CREATE_DAGSTER_DEFINITIONS = '''\
from pathlib import Path

from dagster import definitions, load_from_defs_folder


@definitions
def defs():
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
'''

METHODS = ("rivet run", "dagster asset materialize", "dg launch")


def table_names(count: int) -> list[str]:
    return [f"t{i:02d}" for i in range(count)]


def _rows_sql(rows: int) -> str:
    return (f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) "
            "SELECT i, 'name ' || i, i * 1.5 FROM n")


def sqlite_source(folder: Path, count: int, rows: int) -> str:
    """A SQLite database of `count` tables of `rows` rows; returns its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "source.db"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        for name in table_names(count):
            conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, name TEXT, amount REAL)")
            conn.execute(f"INSERT INTO {name} {_rows_sql(rows)}")
    return f"sqlite:///{path}"


def pg_source(admin_url: str, count: int, rows: int) -> str:
    """The database `rivet_bench_many` (re-created) with `count` tables of `rows` rows."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    url = _with_db(admin_url, DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        for name in table_names(count):
            conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text, amount double precision)")
            conn.execute(f"INSERT INTO {name} SELECT i, 'name ' || i, i * 1.5 FROM generate_series(1, {rows}) i")
    return url


def write_config(folder: Path, engine: str, count: int, out: Path, parallel: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exports = [{"name": name, "table": name if engine == "sqlite" else f"public.{name}", "mode": "full",
                "format": "parquet", "destination": {"type": "local", "path": str(out / name)}}
               for name in table_names(count)]
    config = {"source": {"type": "sqlite" if engine == "sqlite" else "postgres", "url_env": "BENCH_MANY_URL"},
              "dagster": {"group": GROUP, **({"multi_asset_parallel": parallel} if parallel > 1 else {})},
              "exports": exports}
    path = folder / "rivet.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


def dg_project(folder: Path, config: Path) -> Path:
    """A `dg` project as `create-dagster project` lays it out, its component reading `config`."""
    pkg = folder / "src" / "bench_many"
    (pkg / "defs" / "tables").mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "bench_many"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        'dependencies = ["rivet-dagster[dg]"]\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "bench_many"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "defs" / "__init__.py").write_text("")
    (pkg / "definitions.py").write_text(CREATE_DAGSTER_DEFINITIONS)
    (pkg / "defs" / "tables" / "defs.yaml").write_text(
        f"type: rivet_dagster.RivetExportsComponent\nattributes:\n  config: {json.dumps(str(config))}\n")
    return folder


def check_outputs(out: Path, count: int, rows: int) -> str:
    """'ok' when every export's published Parquet holds the source's row count."""
    wrong = []
    for name in table_names(count):
        files = sorted(p for p in (out / name).rglob("*.parquet") if "_quarantine" not in p.parts)
        got = sum(pq.read_metadata(f).num_rows for f in files)
        if got != rows:
            wrong.append(f"{name}: {got}")
    return "ok" if not wrong else "✗ " + ", ".join(wrong[:5])


def run_round(args: argparse.Namespace, engine: str, rep: int) -> list[dict[str, Any]]:
    records = []
    for method in args.methods:
        work = args.work / f"{engine}-{method.split()[0]}-r{rep}"
        shutil.rmtree(work, ignore_errors=True)
        url = (sqlite_source(work / "src", args.exports, args.rows) if engine == "sqlite"
               else pg_source(args.pg_url, args.exports, args.rows))
        out = work / "out"
        config = write_config(work / "cfg", engine, args.exports, out, args.parallel)
        home = work / "dagster_home"
        home.mkdir(parents=True)
        shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
        env = {**os.environ, "BENCH_MANY_URL": url, "DAGSTER_HOME": str(home), "RIVET_CONFIG": str(config),
               "PYTHONPATH": str(REPO), "DAGSTER_DISABLE_TELEMETRY": "1"}
        env.pop("RIVET_DAGSTER_EXECUTOR", None)
        cwd = work
        if method == "rivet run":
            argv = [str(BIN / "rivet"), "run", "-c", str(config)]
        elif method == "dagster asset materialize":
            argv = [str(BIN / "dagster"), "asset", "materialize", "-m", "rivet_dagster.definitions",
                    "--select", f"group:{GROUP}"]
        else:
            cwd = dg_project(work / "dg", config)
            env["PYTHONPATH"] = f"{REPO}{os.pathsep}{cwd / 'src'}"
            argv = [str(BIN / "dg"), "launch", "--assets", f"group:{GROUP}"]
        if method != "rivet run":
            migrate_instance(env)
        load = _load()
        wall, rc = timed(argv, env, cwd, work / "run.log")
        check = check_outputs(out, args.exports, args.rows) if rc == 0 else "(failed)"
        rec = {"engine": engine, "method": method, "rep": rep, "wall": round(wall, 2), "rc": rc, "load": load,
               "check": check}
        if rc != 0:
            rec["error"] = (work / "run.log").read_text(errors="replace")[-800:]
        print(f"[dagster-many] {engine} r{rep} {method:26s} wall {wall:6.2f} s rc={rc} check={check} "
              f"(load {load})", flush=True)
        records.append(rec)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return records


def report(args: argparse.Namespace, records: list[dict[str, Any]], command: str) -> None:
    body = [f"## Many exports in one Dagster run: {args.exports} small full exports of one config vs `rivet run` "
            f"({args.rows} rows each)", "",
            f"Dagster's step runs {args.parallel} export(s) at once (`dagster.multi_asset_parallel: "
            f"{args.parallel}`); `rivet run` runs them one after the other.", "",
            f"Generated by `{command}` (benchmarks/dagster_many.py) on {dt.date.today().isoformat()}; "
            f"{args.repeat} round(s), median shown, all runs in brackets; each a fresh process, wall = the whole "
            "command. Load average (1/5/15 min) at each start: "
            f"{'; '.join(r['load'] for r in records)}.", "",
            "| source | command | wall s | × `rivet run` | check |", "|---|---|---|---|---|"]
    for engine in args.engines:
        rows = [r for r in records if r["engine"] == engine]
        base = statistics.median(r["wall"] for r in rows if r["method"] == "rivet run")
        for method in args.methods:
            walls = [r["wall"] for r in rows if r["method"] == method]
            checks = ", ".join(sorted({r["check"] for r in rows if r["method"] == method}))
            body.append(f"| {engine} | `{method}` | {_fmt(walls)} | {statistics.median(walls) / base:.2f} | "
                        f"{checks} |")
    body += ["", "`rivet run -c rivet.yaml` runs the exports one after the other; `dagster asset materialize -m "
             "rivet_dagster.definitions --select group:bench` and `dg launch --assets group:bench` (a dg project "
             "with the definitions.py `create-dagster project` writes, no executor of its own) materialize all of "
             "them in one run; *check* = every export's published Parquet re-read with pyarrow, its row count "
             "equal to the source table's.", ""]
    _replace_section(args.output, "<!-- dagster-many:begin -->", "<!-- dagster-many:end -->", body)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[3:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks --scenario dagster-many", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""), help="admin URL (default TEST_PG_DSN)")
    ap.add_argument("--exports", type=int, default=50)
    ap.add_argument("--rows", type=int, default=200, help="rows per table")
    ap.add_argument("--engines", default="sqlite,pg")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--parallel", type=int, default=1,
                    help="dagster.multi_asset_parallel of the config: exports of the Dagster step at once")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"a subset of: {', '.join(METHODS)}")
    ap.add_argument("--output", type=Path, default=DOC)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folders (logs, instances, outputs)")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if "rivet run" not in args.methods or set(args.methods) - set(METHODS):
        raise SystemExit(f"--methods: `rivet run` (the baseline) and any of {', '.join(METHODS[1:])}")
    if "pg" in args.engines and not args.pg_url:
        raise SystemExit("needs TEST_PG_DSN or --pg-url (bash scripts/services.sh start DIR pg)")
    args.work = args.work or Path(tempfile.mkdtemp(prefix="rivet-bench-many."))
    records = [rec for rep in range(args.repeat) for engine in args.engines for rec in run_round(args, engine, rep)]
    from rivet_core.redact import redact_secrets

    report(args, records, redact_secrets(" ".join(["python -m benchmarks --scenario dagster-many", *argv])))
    print(f"[dagster-many] wrote {args.output}", flush=True)
    return 1 if any(r["rc"] != 0 or r["check"] != "ok" for r in records) else 0
