"""Source layer: streaming reads from PostgreSQL, MySQL/MariaDB, SQLite and any database
a SQLAlchemy dialect reaches (`source/sqlalchemy/`) into Arrow.

Public API (others code against these names): `open_source` returns a `SourceSession`
(context manager: one connection, one consistent snapshot) whose `describe` gives the
exact Arrow schema of a query (docs/rivet-compat.md "Type mapping") and whose `stream` yields bounded record
batches of exactly that schema. Pure helpers: the SQL builders of the read modes
(`query`), cursor rendering (`cursor`), the retry classifier (`retry`) and batch sizing
(`batching`).
"""

from __future__ import annotations

from rivet_core.config.source_url import SQLALCHEMY_PREFIX, sqlalchemy_backend
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_url
from rivet_core.source.base import LOGICAL_TYPE_KEY, NATIVE_TYPE_KEY, SourceSession
from rivet_core.source.batching import batch_rows, estimate_row_bytes
from rivet_core.source.cursor import last_cursor_in_batch, render_cursor_value
from rivet_core.source.query import (
    Dialect,
    build_incremental_query,
    build_time_range_query,
    build_time_window_query,
    dialect_for,
)
from rivet_core.source.retry import RetryDecision, backoff_ms, classify_error, retry_transient

__all__ = [
    "Dialect", "LOGICAL_TYPE_KEY", "NATIVE_TYPE_KEY", "RetryDecision", "SourceSession",
    "backoff_ms", "batch_rows", "build_incremental_query", "build_time_range_query",
    "build_time_window_query", "classify_error", "retry_transient", "dialect_for", "engine_of",
    "estimate_row_bytes", "last_cursor_in_batch", "open_source", "render_cursor_value",
]

_SCHEME_ENGINES = {
    "postgresql": "postgres", "postgres": "postgres",
    "mysql": "mysql", "mariadb": "mysql",
    "sqlite": "sqlite",
}


def engine_of(url: str) -> str:
    """Engine name ("postgres" | "mysql" | "sqlite") from a URL scheme (`+driver` ignored);
    `sqlalchemy:<backend>` for a `type: sqlalchemy` source's marked URL."""
    if url.startswith(SQLALCHEMY_PREFIX):
        return SQLALCHEMY_PREFIX + sqlalchemy_backend(url)
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    try:
        return _SCHEME_ENGINES[scheme]
    except KeyError:
        raise ConfigError(
            f"cannot tell the source engine from URL {redact_url(url)!r} — use postgresql://, "
            f"mysql:// or sqlite:////path.db"
        ) from None


def open_source(url: str, tuning: ResolvedTuning, *, engine: str | None = None) -> SourceSession:
    """A not-yet-connected session for `url`; enter it (`with`) to connect and start the read.
    `engine` "sqlalchemy" (a `source.type`) means the URL's own `sqlalchemy:<dialect>`."""
    engine = engine_of(url) if engine in (None, "sqlalchemy") else engine
    if engine == "postgres":
        from rivet_core.source.postgres.session import PostgresSession

        return PostgresSession(url, tuning)
    if engine == "mysql":
        from rivet_core.source.mysql.session import MySQLSession

        return MySQLSession(url, tuning)
    if engine == "sqlite":
        from rivet_core.source.sqlite.session import SQLiteSession

        return SQLiteSession(url, tuning)
    if engine.startswith(SQLALCHEMY_PREFIX):
        from rivet_core.source.sqlalchemy.session import SQLAlchemySession

        return SQLAlchemySession(url, tuning)
    raise ConfigError(f"unknown source engine '{engine}' — expected postgres, mysql or sqlite")
