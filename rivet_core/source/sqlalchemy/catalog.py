"""SQLAlchemy's inspector over a native session's own connection: the catalog layer.

The native readers (PostgreSQL, MySQL/MariaDB) keep their driver connections for speed,
and their catalog questions used to be hand-written SQL per engine. Columns, NOT NULL and
the primary key are now SQLAlchemy's inspector's answers, asked on that very connection
(a SQLAlchemy engine whose only connection is the session's DB-API connection), so they
read the export's snapshot: nothing is connected twice, and the inspector never ends the
session's transaction (its commit and rollback are no-ops here — the session owns the
transaction).

SQLAlchemy is imported on the first catalog question, never by `rivet run`'s start-up
path (benchmarks/startup.py).
"""

from __future__ import annotations

import weakref
from typing import Any

#: The SQLAlchemy dialect that speaks to each native session's DB-API connection.
_DIALECTS = {"postgres": "postgresql+psycopg://", "mysql": "mysql+pymysql://"}

#: session → (its DB-API connection, the SQLAlchemy connection over it)
_BOUND: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


def inspector_of(session: Any) -> Any:
    """SQLAlchemy's inspector on the session's own DB-API connection (see module doc)."""
    from sqlalchemy import inspect

    dbapi_connection = session.connection
    bound = _BOUND.get(session)
    if bound is None or bound[0] is not dbapi_connection:
        bound = (dbapi_connection, _sqlalchemy_connection(session.dialect.name, dbapi_connection))
        _BOUND[session] = bound
    return inspect(bound[1])


def _sqlalchemy_connection(engine_name: str, dbapi_connection: Any) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    engine = create_engine(_DIALECTS[engine_name], creator=lambda: dbapi_connection,
                           poolclass=StaticPool, pool_reset_on_return=None)
    # The session owns the snapshot transaction: SQLAlchemy must neither commit nor roll
    # it back (an autobegun SQLAlchemy "transaction" ends with a rollback otherwise).
    engine.dialect.do_rollback = engine.dialect.do_commit = lambda _connection: None
    return engine.connect()


def columns_and_primary_key(session: Any, schema: str | None,
                            name: str) -> tuple[list[str], set[str], tuple[str, ...]]:
    """(column names in table order, NOT NULL columns, primary key columns in key order)
    of a table; empty when it does not exist (as the hand-written catalog answered)."""
    from sqlalchemy.exc import NoSuchTableError

    inspector = inspector_of(session)
    try:
        columns = inspector.get_columns(name, schema=schema)
        primary = inspector.get_pk_constraint(name, schema=schema)
    except NoSuchTableError:
        return [], set(), ()
    return ([str(c["name"]) for c in columns],
            {str(c["name"]) for c in columns if not c.get("nullable", True)},
            tuple(str(c) for c in primary.get("constrained_columns") or ()))
