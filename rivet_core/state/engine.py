"""Open the state database: SQLite file beside the config, or PostgreSQL by URL.

docs/rivet-compat.md "Config load order": default `.rivet_state.db` in the directory of the config file;
`RIVET_STATE_URL` starting with `postgres` switches to PostgreSQL (the scale-out path).
SQLite connections use WAL and a 10 s busy timeout, and every transaction starts with
`BEGIN IMMEDIATE` so that read-modify-write sequences (migrations, claims, projections)
are atomic across processes — pysqlite's own deferred BEGIN is switched off for that.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

import sqlalchemy as sa

from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet.state")

STATE_FILE_NAME = ".rivet_state.db"


def state_url_for(config_path: Path | str | None, env_url: str | None = None) -> str:
    """The SQLAlchemy URL of the state store for a config file."""
    env_url = env_url if env_url is not None else os.environ.get("RIVET_STATE_URL")
    if env_url and env_url.startswith("postgres"):
        url = env_url
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://"):]
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
        return url
    if config_path is None or str(config_path) == "":
        raise ConfigError(
            "cannot locate the state store: no config path given (the state file lives "
            "beside the config as .rivet_state.db) — pass -c PATH or set RIVET_STATE_URL"
        )
    db = Path(config_path).resolve().parent / STATE_FILE_NAME
    return f"sqlite:///{db}"


def _ensure_wal(cur: sqlite3.Cursor) -> None:
    """Switch the file to WAL once (the mode is persistent). Switching needs an exclusive
    lock and SQLite may answer "database is locked" without waiting for the busy timeout
    while another process creates or migrates the store, so retry for up to ~10 s."""
    mode = str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    deadline = time.monotonic() + 10.0
    while mode != "wal":
        try:
            mode = str(cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            if mode != "wal":
                log.warning("state store: WAL journal mode unavailable (got %s)", mode)
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # another process holds the file's lock: back off and retry


def create_state_engine(url: str) -> sa.Engine:
    """Create the engine with the per-dialect connection settings described above."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 10}, poolclass=sa.pool.NullPool)

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):  # noqa: ANN001 - DBAPI types
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            try:
                cur.execute("PRAGMA busy_timeout=10000")
                _ensure_wal(cur)
            finally:
                cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn):  # noqa: ANN001
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    try:
        return sa.create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=4)
    except Exception as exc:  # noqa: BLE001 - surface as a clean config error
        raise ConfigError(f"cannot open state store {redact_secrets(url)}: {redact_secrets(exc)}") from exc
