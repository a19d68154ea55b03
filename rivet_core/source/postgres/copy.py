"""What the PostgreSQL fast read paths share: the read-path switch, the per-column eligibility
walk, the client-side bound statement and the COPY run inside a savepoint.

The read paths (`binary`, `adbc`) take the session as a `PgReadSession`, the few members
they use, so that they never import the session module that imports them.

`RIVET_PG_READ_PATH=auto|binary|adbc|rows` (private; default auto) pins where the choice
starts: `auto`/`binary` try binary COPY decoded in C (`binary`), then ADBC (`adbc`, when the
C extension is not built), then the row path; `adbc` starts at ADBC; `rows` forces the row
path. `copy` (the COPY csv path, removed: docs/benchmarks.md "Read paths") is read as
`rows`, with a warning. An ineligible schema always falls through to the next path.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn, wrap_driver_error

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from rivet_core.source.postgres.types import PgTypeInfo

log = logging.getLogger("rivet.source")

READ_PATH_ENV = "RIVET_PG_READ_PATH"
_MODES = ("rows", "adbc", "binary", "auto")
#: Values of removed paths and what they are read as (a user may have pinned one).
_REMOVED = {"copy": "rows"}


class PgReadSession(Protocol):
    """The members of `PostgresSession` a read path uses."""

    tuning: ResolvedTuning

    @property
    def connection(self) -> psycopg.Connection[Any]: ...

    def driver_errors(self, doing: str) -> AbstractContextManager[None]: ...

    def transaction_settings(self) -> list[str]: ...

    def adbc_conninfo(self) -> str: ...


def adbc_installed() -> bool:
    """Whether the ADBC PostgreSQL wheels are installed (the path after `binary`)."""
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_postgresql  # noqa: F401
    except ImportError:
        return False
    return True


def read_path_mode() -> str:
    """`rows`, `adbc`, `binary` or `auto` (default) from RIVET_PG_READ_PATH."""
    raw = os.environ.get(READ_PATH_ENV, "auto").strip().lower() or "auto"
    if raw in _REMOVED:
        log.warning("%s=%s: the COPY csv read path was removed (docs/benchmarks.md \"Read "
                    "paths\"); reading through the %s path — set %s=rows|binary|adbc|auto",
                    READ_PATH_ENV, raw, _REMOVED[raw], READ_PATH_ENV)
        return _REMOVED[raw]
    if raw not in _MODES:
        log.warning("%s=%r is not one of rows|adbc|binary|auto; using auto", READ_PATH_ENV, raw)
        return "auto"
    return raw


Probed = list[tuple[SourceColumn, "PgTypeInfo"]]


def first_ineligible(
    schema: pa.Schema, probed: Probed,
    reason: Callable[[pa.Field, SourceColumn, PgTypeInfo], str | None],
) -> str | None:
    """Why the first column cannot take a fast path (`reason` per column), or None."""
    if len(probed) != len(schema):
        return "the live result has a different column count than the schema"
    for field, (live, info) in zip(schema, probed, strict=True):
        why = reason(field, live, info)
        if why is not None:
            return why
    return None


def render_sql(session: PgReadSession, sql: str, params: Sequence[Any]) -> str:
    """`sql` with `params` bound client-side as literals by psycopg (quoted, escaped in the
    connection's encoding) — COPY and the ADBC path cannot take bind parameters."""
    return psycopg.ClientCursor(session.connection).mogrify(sql, list(params) or None)


def copy_statement(session: PgReadSession, sql: str, params: Sequence[Any],
                   fmt: str = "csv") -> bytes:
    """`COPY (<sql with params bound client-side>) TO STDOUT (FORMAT <fmt>)`."""
    return f"COPY (\n{render_sql(session, sql, params)}\n) TO STDOUT (FORMAT {fmt})".encode()


@contextlib.contextmanager
def copy_in_savepoint(
    session: PgReadSession, sql: str, params: Sequence[Any], fmt: str
) -> Iterator[psycopg.Copy]:
    """The COPY of `sql` on the session's connection, inside a savepoint — the one sequence
    the binary COPY path (`binary`) uses.

    Leaving the block normally releases the savepoint; leaving it by an exception (a failed
    COPY, or a consumer that abandoned the stream and had the COPY cancelled) rolls back to
    it, so the session's snapshot transaction stays usable, like closing a row-path cursor.
    Driver errors are wrapped as "starting the query" / "reading rows".
    """
    conn = session.connection
    with session.driver_errors("starting the query"):
        statement = copy_statement(session, sql, params, fmt)
        conn.execute("SAVEPOINT _rivet_copy")
    cursor = conn.cursor()
    completed = False
    try:
        with session.driver_errors("reading rows"), cursor.copy(statement) as copy:
            yield copy
        completed = True
    finally:
        _end_savepoint(session, completed)
        cursor.close()


def _end_savepoint(session: PgReadSession, completed: bool) -> None:
    conn = session.connection
    try:
        if completed:
            conn.execute("RELEASE SAVEPOINT _rivet_copy")
        else:
            # A cancelled or failed COPY aborted the transaction; the snapshot survives
            # a rollback to the savepoint.
            conn.execute("ROLLBACK TO SAVEPOINT _rivet_copy")
            conn.execute("RELEASE SAVEPOINT _rivet_copy")
    except psycopg.Error as exc:
        if completed:
            raise wrap_driver_error(exc, "PG error while ending the COPY read") from exc
