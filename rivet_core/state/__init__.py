"""The state store: cursors, file log, metrics, schema baselines, journal, run ledger, and the
chunk checkpoint (chunk_run/chunk_task, I5/I6).

`StateStore.open(config_path)` picks the backend (SQLite beside the config, or PostgreSQL
from RIVET_STATE_URL), runs the versioned migrations, and exposes one method group per
table group (each in its own module). One code path serves both backends: the statements
are plain SQL over the DB-API drivers (`sqlite3`, psycopg), through state/database.py.
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.redact import redact_secrets
from rivet_core.state.baselines import SchemaBaselineStore
from rivet_core.state.chunks import (
    ChunkRunIncomplete,
    ChunkRunInProgress,
    ChunkRunRow,
    ChunkStore,
    ChunkTaskNotRunning,
    ChunkTaskRow,
)
from rivet_core.state.cursors import CursorRow, CursorStore
from rivet_core.state.database import StateDatabase, open_state_database
from rivet_core.state.files import FileLogStore, FileRow
from rivet_core.state.locks import (
    ExportLocked,
    ExportLockHandle,
    ExportLockLost,
    ExportLockStore,
    LockHolder,
)
from rivet_core.state.metrics import MetricsStore
from rivet_core.state.migrations import SCHEMA_VERSION, migrate
from rivet_core.state.progression import ProgressionStore
from rivet_core.state.runs import RunLedgerStore
from rivet_core.state.url import STATE_FILE_NAME, state_url_for

__all__ = ["StateStore", "CursorRow", "FileRow", "STATE_FILE_NAME", "SCHEMA_VERSION", "state_url_for",
           "ChunkRunRow", "ChunkTaskRow", "ChunkRunInProgress", "ChunkRunIncomplete", "ChunkTaskNotRunning",
           "ExportLocked", "ExportLockHandle", "ExportLockLost", "LockHolder"]


class StateStore(CursorStore, FileLogStore, MetricsStore, SchemaBaselineStore, RunLedgerStore,
                 ProgressionStore, ChunkStore, ExportLockStore):
    """All state operations over one database (state/database.py)."""

    def __init__(self, database: StateDatabase) -> None:
        self.database = database

    @classmethod
    def open(cls, config_path: Path | str | None, state_url: str | None = None) -> StateStore:
        """Open and migrate the store. An unreachable or unusable backend is ONE clean error
        naming the (redacted) store URL: `TransientError` (exit 2) when a retry may succeed
        (connection refused, server starting), else `ConfigError` (exit 1)."""
        url = state_url_for(config_path, state_url)
        store = cls(open_state_database(url))
        try:
            migrate(store.database)
        except Exception as exc:
            store.close()
            raise _open_error(store.url, exc) from exc
        return store

    @classmethod
    def open_existing(cls, config_path: Path | str | None, state_url: str | None = None) -> StateStore | None:
        """The store as it is, for a reader that must not change anything (`rivet validate`):
        no file created, no migration run; None when a SQLite store's file does not exist yet.
        A query against a store of an older schema raises — the caller treats that as "no
        answer"."""
        url = state_url_for(config_path, state_url)
        if url.startswith("sqlite"):
            path = url.removeprefix("sqlite:///").split("?", 1)[0]
            if not path or not Path(path).is_file():
                return None
        return cls(open_state_database(url))

    @property
    def url(self) -> str:
        """The backend URL with credentials redacted (safe to print)."""
        return redact_secrets(self.database.url)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.database.dialect

    def close(self) -> None:
        """Close the idle connections; the store stays usable (a later call connects again)."""
        self.database.close()


def _open_error(where: str, exc: Exception) -> Exception:
    from rivet_core.errors import ConfigError, TransientError
    from rivet_core.source.retry import classify_error

    hint = ("check RIVET_STATE_URL and that the server is reachable" if not where.startswith("sqlite")
            else "check that the config's directory is writable")
    if "database is locked" in str(exc):  # SQLite: another process held it past busy_timeout
        return TransientError(
            f"cannot open the state store {where}: database is locked — another process holds a "
            f"lock on it (a running rivet or a tool with an open transaction); retry when it has "
            f"finished (nothing was exported)")
    message = f"cannot open the state store {where}: {redact_secrets(str(exc).strip())} — {hint}"
    return TransientError(message) if classify_error(exc).transient else ConfigError(message)
