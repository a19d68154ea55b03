"""The state store's SQL layer: one transaction helper per backend over its DB-API driver.

Why not a toolkit: every `rivet run` takes the export lock in the state store before its
first source query (pipeline/single/job.py), so whatever library the store loads is on the
start-up path; the stdlib `sqlite3` and psycopg 3 (the PostgreSQL source's driver, already a
dependency) are all the store needs. Statements are written once, for both backends, with
`:name` parameters; `Transaction.execute` turns them into psycopg's `%(name)s` style on
PostgreSQL (the one place the parameter style is handled). The few clauses only PostgreSQL
has (row locks) come from `Transaction.locking`.

Transactions (every store operation is one `with database.transaction() as tx:`):
- SQLite: a connection per transaction (the store is a file shared by processes; nothing
  to pool), WAL journal, a 10 s busy timeout, and `BEGIN IMMEDIATE` — the transaction holds
  the database's write lock from its first statement, so read-modify-write sequences
  (migrations, claims, projections) are atomic across processes. sqlite3's own deferred
  BEGIN is switched off (`isolation_level=None`) for that.
- PostgreSQL: a small pool of autocommit connections on which the transaction is an
  explicit `BEGIN` … `COMMIT`. The `BEGIN` on a pooled connection doubles as its liveness
  check: if the server closed it while it idled, it is dropped and a fresh one is opened.

Rows come back as dicts keyed by column name, on both backends.
"""

from __future__ import annotations

import abc
import functools
import logging
import re
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

log = logging.getLogger("rivet.state")

Params = Mapping[str, Any]

#: sqlite3's and psycopg's connect/transaction waits: the SQLite busy timeout (s), and how long
#: a PostgreSQL transaction waits for a free pooled connection (s) when all are in use.
SQLITE_BUSY_TIMEOUT_S = 10.0
POOL_WAIT_S = 30.0
#: Idle PostgreSQL connections kept, and the most open at once (the pool size and overflow of
#: the SQLAlchemy pool the store used before: 2 + 4).
POOL_IDLE = 2
POOL_MAX = 6


class Result:
    """The outcome of one statement: its rows (fetched at once, as dicts) and its rowcount."""

    __slots__ = ("rowcount", "_rows")

    def __init__(self, rows: list[dict[str, Any]], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    def all(self) -> list[dict[str, Any]]:
        return self._rows

    def first(self) -> dict[str, Any] | None:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        """The first column of the first row; None when there is no row."""
        return next(iter(self._rows[0].values())) if self._rows else None

    def scalars(self) -> list[Any]:
        """The first column of every row."""
        return [next(iter(row.values())) for row in self._rows]


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """`(:name_0, :name_1, …)` and its parameters, for `column IN …` (values must not be empty)."""
    if not values:
        raise ValueError(f"in_list({name!r}): no values")
    params = {f"{name}_{i}": value for i, value in enumerate(values)}
    return "(" + ", ".join(f":{key}" for key in params) + ")", params


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """`:name` → `%(name)s`, a literal `%` doubled; `::type` casts are left alone. Statements
    must not hold `:word` inside string literals (none does: state values are parameters)."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


class Transaction:
    """One open transaction on one connection; see the module docstring."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self._conn, self.dialect = conn, dialect

    @property
    def postgresql(self) -> bool:
        return self.dialect == "postgresql"

    def execute(self, sql: str, params: Params | None = None) -> Result:
        if self.postgresql and params is not None:
            sql = _pyformat(sql)
        cur = self._conn.execute(sql, params) if params is not None else self._conn.execute(sql)
        try:
            rows = cur.fetchall() if cur.description else []
            return Result(rows, cur.rowcount)
        finally:
            cur.close()

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        if self.postgresql:
            with self._conn.cursor() as cur:
                cur.executemany(_pyformat(sql), list(rows))
        else:
            self._conn.executemany(sql, rows)

    def locking(self, clause: str) -> str:
        """` FOR UPDATE …` / ` FOR SHARE` on PostgreSQL; nothing on SQLite, where the
        transaction already holds the database's write lock (BEGIN IMMEDIATE)."""
        return f" {clause}" if self.postgresql else ""


class StateDatabase(abc.ABC):
    """A state store's backend: `transaction()` gives one Transaction; `close()` lets go of
    any idle connection (the database stays usable: a later transaction connects again)."""

    dialect: str
    #: The driver's error base class and its integrity-violation class.
    Error: type[Exception]
    IntegrityError: type[Exception]

    def __init__(self, url: str) -> None:
        self.url = url  # as given: redact before showing it (StateStore.url)

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[Transaction]:
        """One transaction: committed when the block ends, rolled back when it raises."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the idle connections (a later transaction opens new ones)."""


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


def _ensure_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL once (the mode is persistent). Switching needs an exclusive
    lock and SQLite may answer "database is locked" without waiting for the busy timeout
    while another process creates or migrates the store, so retry for up to ~10 s."""
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while mode != "wal":
        try:
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            if mode != "wal":
                log.warning("state store: WAL journal mode unavailable (got %s)", mode)
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # another process holds the file's lock: back off and retry


class SqliteDatabase(StateDatabase):
    """The SQLite file store (module docstring). `sqlite:///PATH`; `?uri=true` passes the rest
    (`sqlite:///file:PATH?mode=ro&uri=true`) to SQLite as a URI filename."""

    dialect = "sqlite"
    Error = sqlite3.Error
    IntegrityError = sqlite3.IntegrityError

    def __init__(self, url: str) -> None:
        super().__init__(url)
        target, _, query = url[len("sqlite:///"):].partition("?")
        options = urllib.parse.parse_qsl(query)
        self._uri = ("uri", "true") in options
        rest = urllib.parse.urlencode([kv for kv in options if kv[0] != "uri"])
        self._target = f"{target}?{rest}" if self._uri and rest else target

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._target, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None,
                               uri=self._uri)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            _ensure_wal(conn)
            conn.row_factory = _dict_row
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield Transaction(conn, self.dialect)
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back already (e.g. disk full)
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def close(self) -> None:
        """Nothing is kept open between transactions."""


class PostgresDatabase(StateDatabase):
    """The PostgreSQL store: `postgresql://…` or `postgresql+psycopg://…` (module docstring)."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        import psycopg  # PostgreSQL stores only: a SQLite store never loads it

        super().__init__(url)
        self._psycopg = psycopg
        self.Error, self.IntegrityError = psycopg.Error, psycopg.IntegrityError
        self._conninfo = "postgresql://" + url.split("://", 1)[1]
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(POOL_MAX)
        self._generation = 0

    def _connect(self) -> Any:
        from psycopg.rows import dict_row

        return self._psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row)

    def _begin(self) -> tuple[Any, int]:
        """A connection inside `BEGIN`, and the pool generation it belongs to."""
        with self._lock:
            pooled, generation = (self._idle.pop() if self._idle else None), self._generation
        if pooled is not None:
            try:
                pooled.execute("BEGIN")
                return pooled, generation
            except self._psycopg.OperationalError:  # closed by the server while idle
                pooled.close()
        conn = self._connect()
        try:
            conn.execute("BEGIN")
        except BaseException:
            conn.close()
            raise
        return conn, generation

    def _give_back(self, conn: Any, generation: int) -> None:
        healthy = not conn.closed and conn.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE
        with self._lock:
            if healthy and generation == self._generation and len(self._idle) < POOL_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        if not self._slots.acquire(timeout=POOL_WAIT_S):
            raise TimeoutError(f"state store: no PostgreSQL connection free after {POOL_WAIT_S:.0f} s "
                               f"({POOL_MAX} in use)")
        try:
            conn, generation = self._begin()
            try:
                try:
                    yield Transaction(conn, self.dialect)
                except BaseException:
                    self._roll_back(conn)
                    raise
                conn.execute("COMMIT")
            finally:
                self._give_back(conn, generation)
        finally:
            self._slots.release()

    def _roll_back(self, conn: Any) -> None:
        """End a failed transaction; a connection that cannot is closed (never pooled again)
        rather than masking the error that failed the transaction."""
        if conn.closed:
            return
        try:
            conn.execute("ROLLBACK")
        except self._psycopg.Error:
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1  # connections in use are closed when they come back
        for conn in idle:
            conn.close()


def open_state_database(url: str) -> StateDatabase:
    """The backend for a state URL from `state_url_for` (`sqlite:///…` or `postgresql…`)."""
    if url.startswith("sqlite"):
        return SqliteDatabase(url)
    return PostgresDatabase(url)
