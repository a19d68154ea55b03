"""Test helpers: configs, the real CLI in a subprocess, and an independent oracle.

The oracle never trusts the tool's counters: it lists the parts that `status: success`
manifests name (the canonical `manifest.json` and every `manifest-*.json` copy), re-reads
those files with pyarrow, and compares them with the source queried directly.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parent.parent


def write_config(tmp: Path, source: dict[str, Any], exports: list[dict[str, Any]],
                 **top: Any) -> Path:
    path = tmp / "rivet.yaml"
    path.write_text(yaml.safe_dump({"source": source, "exports": exports, **top}, sort_keys=False))
    return path


def source_block(url: str) -> dict[str, Any]:
    scheme = url.split(":", 1)[0]
    kind = "postgres" if scheme.startswith("postgres") else "mysql" if scheme.startswith("mysql") else "sqlite"
    return {"type": kind, "url": url}


def rivet(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real `rivet` CLI in a subprocess (crash tests need a separate process)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "rivet_core.cli", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd or REPO, timeout=timeout)


def rivet_in_process(*args: str) -> Any:
    """The `rivet` click entry point in-process: the same code as the binary without ~1.5 s
    of imports per call (for long catalogues of cases). Root logging is restored afterwards,
    since the CLI configures it. Returns click's Result."""
    import logging

    from click.testing import CliRunner

    from rivet_core.cli import main

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def rivet_quick(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`rivet_in_process` with `env` applied for the call only, shaped like `rivet`'s result.
    For commands that need no process of their own (no crash, no pause, no concurrency):
    the same command without the ~2 s of CPU a fresh interpreter spends on imports.

    Like a process of its own, the call leaves no secret registered with the process-wide
    redactor (rivet_core/redact.py): a password a command registered must not mask a later
    command's or test's leak."""
    from rivet_core import redact

    with redact._lock:
        registered = set(redact._registered)
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        result = rivet_in_process(*args)
    finally:
        with redact._lock:
            redact._registered.intersection_update(registered)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def state_db(config: Path) -> sqlite3.Connection:
    return sqlite3.connect(config.parent / ".rivet_state.db")


def state_rows(config: Path, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
    db = config.parent / ".rivet_state.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.OperationalError:
            return []


def cursor_of(config: Path, export: str) -> str | None:
    rows = state_rows(config, "SELECT last_cursor_value FROM export_state WHERE export_name=?", [export])
    return rows[0][0] if rows else None


def data_files(prefix: Path) -> list[Path]:
    return sorted(p for p in prefix.rglob("*") if p.is_file() and p.suffix in (".parquet", ".csv")
                  and "_quarantine" not in p.parts)


def success_manifests(prefix: Path) -> list[dict[str, Any]]:
    """Success manifests at a prefix, one per run (manifest.json repeats its run's copy)."""
    by_run: dict[str, dict[str, Any]] = {}
    for p in sorted(prefix.glob("manifest*.json")):
        m = json.loads(p.read_text())
        if m.get("status") == "success":
            by_run[m["run_id"]] = m
    return list(by_run.values())


def read_table(path: Path) -> pa.Table:
    if path.suffix == ".csv":
        return pacsv.read_csv(path)
    return pq.read_table(path)


def manifest_table(prefix: Path) -> pa.Table:
    """Every row of every part listed by a success manifest (each part once)."""
    paths: dict[str, Path] = {}
    for m in success_manifests(prefix):
        for part in m["parts"]:
            if part.get("status", "committed") == "committed":
                paths[part["path"]] = prefix / part["path"]
    tables = [read_table(p) for p in paths.values()]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def manifest_ids(prefix: Path, column: str = "id") -> list[int]:
    t = manifest_table(prefix)
    return sorted(t.column(column).to_pylist()) if t.num_columns else []


# ------------------------------------------------------------------ direct source access
def pg_exec(url: str, *sql: str) -> list[tuple]:
    import psycopg

    rows: list[tuple] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for stmt in sql:
            cur = conn.execute(stmt)
            if cur.description:
                rows = cur.fetchall()
    return rows


def mysql_connect(url: str, **options: Any) -> Any:
    """A PyMySQL connection (autocommit) to the database of a `mysql://` URL; `options` add
    to or override the connect arguments (charset, init_command, …).

    Plain TCP (`ssl_disabled`): the test server offers no TLS, and PyMySQL's default
    "preferred" mode would load the system CA store into a new SSLContext on every connect
    (about 40 ms of CPU each, on an idle machine) only to fall back to plaintext.
    The tool's own connections (rivet_core/source/mysql/session.py) are not affected."""
    import pymysql

    u = urllib.parse.urlsplit(url)
    return pymysql.connect(**{"host": u.hostname, "port": u.port or 3306,
                              "user": urllib.parse.unquote(u.username or ""),
                              "password": urllib.parse.unquote(u.password or ""),
                              "database": u.path.lstrip("/"), "autocommit": True, "ssl_disabled": True,
                              **options})


def mysql_exec(url: str, *sql: str) -> list[tuple]:
    conn = mysql_connect(url, init_command="SET time_zone = '+00:00'")
    rows: list[tuple] = []
    try:
        with conn.cursor() as cur:
            for stmt in sql:
                cur.execute(stmt)
                if cur.description:
                    rows = list(cur.fetchall())
    finally:
        conn.close()
    return rows


def db_exec(url: str, *sql: str) -> list[tuple]:
    return pg_exec(url, *sql) if url.startswith("postgres") else mysql_exec(url, *sql)
